"""Activation checkpointing: a block's forward run again in backward.

``torch.utils.checkpoint.checkpoint(block, x)`` (and Hugging Face's
``gradient_checkpointing_enable()``) keeps a block's input instead of its activations and runs the
block's forward a second time during backward, trading compute for memory. Where memory is not
short, that is time for nothing. PyTorch 2.13, 2-core AMD EPYC, one thread, 6 blocks of LayerNorm and
an MLP (256-1024-256) trained with SGD, timed interleaved: 18.6 ms a step without checkpointing, 24.5
ms with it at batch 64 (+32%), 58.2 against 71.3 ms at batch 256 (+22%). The report read "CPU
compute-bound" with torch.compile first and said nothing of the recompute.

The evidence is the profiler's own: backward runs its formulas with grad mode off, so ops nested in
autograd's ``evaluate_function`` ranges carry no autograd "Sequence number"; the recomputed forward
runs with grad mode on (it rebuilds the block's graph), so its ops do, both in the non-reentrant
variant (inside whichever node first needs the block's activations) and in the reentrant one (inside
``CheckpointFunctionBackward``, whose nested backward is again without). A double backward
(``create_graph=True``: gradient penalties, meta-learning) records sequence numbers on its formulas'
ops too, so a module's own forward op must be among them: ``aten::linear``, a convolution, a norm,
an embedding, attention, a recurrent layer, which no backward formula calls. The recompute's time is
that of the outermost such ops, ``MIN_SHARE`` or more of the steps' time. CPU traces only: on a GPU
the recompute's cost is its kernels' time, and no stored GPU trace checkpoints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from tracekit.analyze.frame import BACKWARD_NODE, GPU_BUSY_KINDS, Frame, step_rows, wall_time
from tracekit.analyze.top_ops import args_mention, args_text
from tracekit.ingest.links import member_mask, nearest_ancestor

REENTRANT_NODE = "CheckpointFunctionBackward"
SEQUENCE = '"Sequence number"'
# A module's forward ops: no backward formula calls them (they call mm, convolution_backward, ...).
FORWARD_OPS = ("aten::linear", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d",
               "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::layer_norm", "aten::group_norm",
               "aten::batch_norm", "aten::instance_norm", "aten::rms_norm", "aten::embedding",
               "aten::scaled_dot_product_attention", "aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu")
MIN_SHARE = 0.1
MAX_OPS = 500_000  # ops inside backward whose args are read; a trace with more is read in part


@dataclass(frozen=True)
class Recompute:
    """The forward recomputed in backward in the steps used. forward_ops: the modules' forward ops among
    it, per step (median), and the most frequent of them; reentrant: CheckpointFunctionBackward nodes
    seen; share: the recompute's time of the steps' time."""

    forward_ops: int
    top_op: str
    reentrant: bool
    share: float

    def evidence(self) -> str:
        how = "torch.utils.checkpoint, reentrant: CheckpointFunctionBackward" if self.reentrant else "activation checkpointing"
        return (f"backward runs the forward again ({how}): ops with grad mode on inside autograd's backward, "
                f"{self.forward_ops} module forward ops a step ({self.top_op} most), {self.share:.0%} of the step time")

    def remedy(self) -> str:
        return ("where memory allows, checkpoint fewer blocks or none (torch.utils.checkpoint, "
                "model.gradient_checkpointing_disable()), or keep the products' outputs with selective checkpointing "
                "(torch.utils.checkpoint.create_selective_checkpoint_contexts): the recompute is a second forward of "
                "each checkpointed block (6 MLP blocks on a CPU: 24.5 ms a step checkpointed, 18.6 ms not)")

    def as_dict(self) -> dict[str, object]:
        return {"forward_ops_per_step": self.forward_ops, "top_op": self.top_op, "reentrant": self.reentrant,
                "share": self.share}


def recompute(frame: Frame, used: list[int] | None) -> Recompute | None:
    """The steps' forward recomputed in backward (module doc), or None where the trace shows none."""
    forward_codes = [c for c, n in enumerate(frame.names) if n in FORWARD_OPS]
    node_codes = [c for c, n in enumerate(frame.names) if BACKWARD_NODE.match(n)]
    if (not forward_codes or not node_codes or "args" not in frame.table.column_names or frame.rows(*GPU_BUSY_KINDS).size
            or not args_mention(frame.table, SEQUENCE.encode())):
        return None
    steps = step_rows(frame, used)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if not step_ns:
        return None
    aten = [c for c, n in enumerate(frame.names) if n.startswith("aten::")]
    ops = frame.rows("cpu_op")
    ops = ops[member_mask(frame.step[ops], frame.step[steps].tolist()) & member_mask(frame.name_code[ops], aten)]
    in_backward = nearest_ancestor(frame.parent, ops, member_mask(frame.name_code, node_codes)) >= 0
    inside = ops[in_backward][:MAX_OPS]
    if not member_mask(frame.name_code[inside], forward_codes).any():
        return None  # no module forward op inside backward (a plain backward): no args read
    sequenced = inside[pc.match_substring(args_text(frame.table, inside), SEQUENCE).fill_null(False).to_numpy(zero_copy_only=False)]
    sequenced = sequenced[[_has_sequence(t) for t in args_text(frame.table, sequenced).to_pylist()]] if sequenced.size else sequenced
    forward = sequenced[member_mask(frame.name_code[sequenced], forward_codes)]
    if not forward.size:
        return None
    # The outermost: a recomputed op inside another recomputed op is its callee.
    flagged = np.zeros(len(frame), bool)
    flagged[sequenced] = True
    outermost = sequenced[~flagged[np.maximum(frame.op_parent[sequenced], 0)] | (frame.op_parent[sequenced] < 0)]
    share = wall_time(frame, outermost) / step_ns
    if share < MIN_SHARE:
        return None
    codes, counts = np.unique(frame.name_code[forward], return_counts=True)
    per_step = np.bincount(np.unique(frame.step[forward], return_inverse=True)[1])
    return Recompute(forward_ops=int(np.median(per_step)), top_op=frame.names[int(codes[np.argmax(counts)])],
                     reentrant=REENTRANT_NODE in frame.names, share=share)


def _has_sequence(text: object) -> bool:
    """Whether one op's args hold an autograd sequence number (not the words in a string argument)."""
    try:
        return isinstance(text, str) and isinstance(json.loads(text).get("Sequence number"), int)
    except (ValueError, AttributeError):
        return False
