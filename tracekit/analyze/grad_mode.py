"""Inference run with autograd on.

A model run only forward (evaluation, serving, generation) outside ``torch.inference_mode()`` or
``torch.no_grad()`` still goes through autograd: each op is dispatched through its autograd kernel,
bumps version counters and, where a parameter requires grad, records a graph node and keeps its
inputs alive while the output lives. PyTorch 2.13, 2-core AMD EPYC, a 6-block MLP of 256 (Linear,
GELU, LayerNorm) at batch 4: 0.332 ms a call with grad mode on, 0.316 ms with its parameters frozen
(``requires_grad_(False)``, grad mode still on), 0.277 ms under ``inference_mode()``; 5% at batch 64
of width 512, where the products dominate. Per top-level op (the block's Linear, GELU and LayerNorm),
2-core Xeon: 3.5 µs at batch 4, 5.2 µs at batch 64; with the parameters frozen (no tensor requiring
grad, so no graph recorded) 1.3 µs (226 against 203 µs a call).

The evidence is the profiler's own: an op run with grad mode on carries an autograd "Sequence
number" in its args (torch.profiler records one whether or not an input requires grad; none under
``no_grad`` or ``inference_mode``). Where most top-level ops carry one and the whole trace runs no
backward (no autograd engine range, no ``*Backward`` node, no gradient accumulation), the forward's
graph bookkeeping is for nothing. It is told where it matters: the steps' top-level ops at
``AUTOGRAD_NS_PER_OP_LOW`` each (the trace does not say whether any tensor requires grad) come to
``MIN_SAVING`` of the steps' time or more (a Gaussian process's Cholesky solves, 139 ops a step of
tens of milliseconds, would save a fraction of a percent); the evidence gives the range up to
``AUTOGRAD_NS_PER_OP`` an op.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from tracekit.analyze.frame import Frame, step_rows
from tracekit.analyze.top_ops import args_mention, args_text
from tracekit.ingest.links import member_mask

BACKWARD = re.compile(r"^autograd::engine::evaluate_function|Backward\d*$|^torch::autograd::AccumulateGrad$")
SEQUENCE = '"Sequence number"'
MIN_OPS = 20  # top-level ops with a sequence number
MIN_SHARE = 0.5  # of the top-level aten ops
OPS_READ = 2_000  # top-level ops whose args are read (the trace's first ones)
AUTOGRAD_NS_PER_OP = 3_500  # what inference_mode saves a top-level op, parameters requiring grad (module doc)
AUTOGRAD_NS_PER_OP_LOW = 1_300  # ... and with no tensor requiring grad
MIN_SAVING = 0.02  # of the steps' time


@dataclass(frozen=True)
class InferenceWithGrad:
    """An inference trace whose forward runs with grad mode on. share: of its top-level ops (of those
    read) that carry an autograd sequence number."""

    ops: int
    share: float
    saving: float  # of the steps' time: their top-level ops at AUTOGRAD_NS_PER_OP_LOW each
    saving_high: float = 0.0  # ... at AUTOGRAD_NS_PER_OP each

    def evidence(self) -> str:
        return (f"the forward runs with autograd on ({self.share:.0%} of its top-level ops carry an autograd sequence "
                "number, which torch.profiler records only with grad mode enabled) and nothing in the trace runs "
                "backward: inference outside torch.inference_mode() / torch.no_grad(); at what inference_mode saved "
                "an op of a small MLP, 1.3 µs with its parameters frozen to 3.5 µs with them requiring grad, "
                f"{self.saving:.0%} to {self.saving_high:.0%} of the step")

    def remedy(self) -> str:
        return ("run inference under torch.inference_mode() (or torch.no_grad()): each op then skips autograd's "
                "dispatch and bookkeeping (a 6-block MLP on a CPU at batch 4: 0.33 ms a call with grad mode on, "
                "0.28 ms under inference_mode) and no activation is kept for a backward that never runs")

    def as_dict(self) -> dict[str, object]:
        return {"ops_read": self.ops, "share": self.share, "saving": self.saving, "saving_high": self.saving_high}


def inference_with_grad(frame: Frame, used: list[int] | None = None) -> InferenceWithGrad | None:
    """The trace's forward run with grad mode on and no backward anywhere (module doc), else None.
    ``used``: the steps whose time the saving is weighed against (every step when None; the span of
    the top-level ops where the trace marks no step)."""
    codes = [c for c, n in enumerate(frame.names) if n.startswith("aten::")]
    if not codes or any(BACKWARD.search(n) for n in frame.names) or not args_mention(frame.table, SEQUENCE.encode()):
        return None
    ops = frame.rows("cpu_op")
    every = ops[member_mask(frame.name_code[ops], codes) & (frame.op_parent[ops] < 0)]
    top = every[np.argsort(frame.start[every], kind="stable")][:OPS_READ]
    if top.size < MIN_OPS:
        return None
    per_op = _ops_per_window_ns(frame, every, used)
    saving = per_op * AUTOGRAD_NS_PER_OP_LOW
    if saving < MIN_SAVING:
        return None
    sequenced = 0
    for text in args_text(frame.table, top).to_pylist():
        if isinstance(text, str) and SEQUENCE in text:
            try:
                sequenced += isinstance(json.loads(text).get("Sequence number"), int)
            except (ValueError, AttributeError):
                continue
    share = sequenced / top.size
    if sequenced < MIN_OPS or share < MIN_SHARE:
        return None
    return InferenceWithGrad(ops=int(top.size), share=share, saving=saving, saving_high=per_op * AUTOGRAD_NS_PER_OP)


def _ops_per_window_ns(frame: Frame, top: np.ndarray, used: list[int] | None) -> float:
    """The steps' top-level ops ``top`` per ns of the steps' time (of the ops' span without steps): times
    a cost an op, the share of the steps that cost comes to."""
    steps = step_rows(frame, used)
    if steps.size:
        ops = top[member_mask(frame.step[top], np.unique(frame.step[steps]).tolist())]
        window = int(frame.dur[steps].sum())
    else:
        ops, window = top, int(frame.end[top].max() - frame.start[top].min())
    return ops.size / window if window > 0 else 0.0
