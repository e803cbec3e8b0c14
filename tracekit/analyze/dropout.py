"""CPU training spent drawing dropout's random masks.

Each ``nn.Dropout`` in training draws a random mask as large as its input (``aten::bernoulli_``
inside ``aten::dropout``), and so does attention's dropout. On a CPU that draw can cost as much as
the layer it drops from: ATen draws the mask one element at a time under the generator's lock, on
one thread, on every CPU. (Its MKL path, vectorized on all cores and once taken on Intel CPUs, is
off in released builds until pytorch/pytorch#132395 is fixed: #146174.) PyTorch 2.13, 16x128x256
elements: 5.8 ns an element on a 2-core AMD EPYC, 4.9 ns on a 2-core Intel Xeon (AVX-512, AMX,
MKL present), with one thread or two. A 4-layer
``nn.TransformerEncoder`` (256 wide) trained on 16 sequences of 128: 412-436 ms a step with dropout
0.1, 301-315 ms with 0 (``aten::bernoulli_`` 25% of the profiled step); a 4-layer Hugging Face BERT
of the same size under ``Trainer``: 463 ms against 312-335 ms, and 491 ms under ``torch.compile``.

PaddlePaddle draws and applies a mask in each ``dropout`` kernel (applied again in ``dropout_grad``): a
2-layer ``paddle.nn.TransformerEncoder`` (256 wide) trained on 8 sequences of 256 on the same CPU,
Paddle 3.3.1: 929-995 ms a step with dropout 0.1, 783-818 ms with 0 (at 128 tokens 409-434 against
360-377 ms, its dropout kernels 10% of the profiled step: under the share said, at the edge).

Keras on TensorFlow draws its masks as ops of the layer's scope (``dropout_1/stateless_dropout/
stateless_random_uniform/StatelessRandomUniformV2``, then ``GreaterEqual``, ``SelectV2``, ``Mul``, and
the select and scaling again in the backward under ``gradient_tape/``). TF 2.21 and Keras 3, the same
4-layer encoder on the same CPU: 362-396 ms a batch with dropout 0.1, 313 ms with 0; under XLA
(``jit_compile=True``) 402-429 against 271-324 ms.

The evidence (CPU-only traces): the trace runs backward (inference in training mode is
``tracekit.analyze.train_mode``'s), and the steps' dropout calls that draw a mask (PyTorch) or the ops
of dropout scopes (TF: their union over the executor's threads) take ``MIN_SHARE`` of their time.
Where PyTorch recorded shapes, the masks' elements a step and the time per element.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from tracekit.analyze import intervals
from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame, step_rows, wall_time
from tracekit.analyze.grad_mode import BACKWARD
from tracekit.analyze.top_ops import input_dims
from tracekit.analyze.train_mode import DROPOUT_OPS, MASK_OPS, dropouts_drawing
from tracekit.ingest.links import member_mask, nearest_ancestor

MIN_SHARE = 0.1  # of the steps' time in dropout calls that draw a mask
# Drawn one element at a time costs several ns an element; MKL's vectorized generator on all cores
# (a build that takes it) a fraction of one. At or above this, the draw is said to be the serial one.
SERIAL_NS_PER_ELEMENT = 2.0
# TF: an op of a dropout layer's scope (Keras names layers dropout, dropout_1, ...; its op
# stateless_dropout), forward or under gradient_tape/; and the ops that draw the random numbers.
_TF_DROPOUT_SCOPE = re.compile(r"(^|/)(stateless_)?dropout(_\d+)*/")
_TF_DRAWS = re.compile(r":(StatelessRandomUniform\w*|RandomUniform|StatelessRandomBinomial)$")
_TF_BACKWARD = re.compile(r"(^|/)gradient_tape/")
# Paddle's kernel launches (tracekit/ingest/paddle.py): dropout's forward and backward, and any backward.
_PADDLE_DROPOUT = re.compile(r"^(fused_)?dropout(_add)?(_grad)? kernel launch$")
_PADDLE_GRAD_KERNEL = re.compile(r"_grad kernel launch$")


@dataclass(frozen=True)
class DropoutMasks:
    """The steps' dropout calls drawing masks: share of the steps' time (the calls', mask and scaling
    included), the draws' own share (``aten::bernoulli_`` self time), calls and elements a step (0
    where shapes are not recorded)."""

    share: float
    draw_share: float
    calls: int
    elements: int
    ns_per_element: float
    framework: str = "torch"
    on_gpu: bool = False  # share and draw_share are of the GPU's kernel time in the steps; calls: kernels a step

    @property
    def serial(self) -> bool:
        return self.ns_per_element >= SERIAL_NS_PER_ELEMENT

    def evidence(self) -> str:
        if self.on_gpu:
            return (f"dropout's kernels (the random draws, and where they run apart the compare, select and scaling) "
                    f"take {self.share:.0%} of the GPU's kernel time in the steps ({self.calls} kernels a step; the "
                    f"draws {self.draw_share:.0%})")
        if self.framework == "paddle":
            return (f"training spends {self.share:.0%} of the step time in dropout's kernels ({self.calls} dropout "
                    f"kernels a step drawing and applying a random mask, {self.draw_share:.0%}; the rest applies it "
                    "again in the backward)")
        if self.framework == "tf":
            return (f"training spends {self.share:.0%} of the step time in dropout ({self.calls} dropout layers a step "
                    "drawing a random mask: the draws, compare, select and scaling, forward and backward; the draws "
                    f"{self.draw_share:.0%})")
        sized = (f": {self.elements / 1e6:,.1f}M mask elements a step, {self.ns_per_element:.1f} ns each"
                 if self.elements else "")
        return (f"training spends {self.share:.0%} of the step time in dropout ({self.calls} calls a step drawing a random "
                f"mask; the draws, aten::bernoulli_, {self.draw_share:.0%}{sized})")

    def remedy(self) -> str:
        if self.on_gpu:  # TF only (_gpu_dropout)
            return (f"dropout's kernels take {self.share:.0%} of the GPU's kernel time: TF runs each dropout as separate "
                    "kernels (the Philox draw, the compare, the select, the scaling), each a pass over memory; XLA "
                    "(model.compile(jit_compile=True), tf.function(jit_compile=True)) fuses them into the kernels "
                    "around them; where the recipe allows, lower the rate (not measured on a GPU here)")
        if self.framework == "paddle":
            return (f"dropout's masks cost {self.share:.0%} of the step: where the recipe allows, lower the rate or set "
                    "it to 0 (paddle.nn.Dropout(p=0.0); paddle.nn.TransformerEncoderLayer's dropout, attn_dropout and "
                    "act_dropout) and check the validation loss; a 2-layer Paddle TransformerEncoder (256 wide) trained "
                    "on 8 sequences of 256 on a 2-core CPU: 929-995 ms a step with dropout 0.1, 783-818 ms with 0")
        if self.framework == "tf":
            return (f"dropout's masks cost {self.share:.0%} of the step: each Keras Dropout (and MultiHeadAttention's "
                    "dropout) draws a random number per element, compares, selects and scales, and again in the "
                    "backward. Where the recipe allows, lower the rate or set it to 0 (keras.layers.Dropout(0.0), "
                    "MultiHeadAttention(dropout=0.0)) and check the validation loss; a 4-layer Keras transformer "
                    "encoder (256 wide) trained on a CPU: 362-396 ms a batch with dropout 0.1, 313 ms with 0 (XLA, "
                    "jit_compile=True, did not remove the cost: 402-429 against 271-324 ms)")
        why = ("PyTorch draws a CPU mask one element at a time, on one thread, on any CPU (its vectorized MKL path "
               "is off in released builds: pytorch/pytorch#146174), and this trace's "
               f"{self.ns_per_element:.1f} ns an element is that draw (PyTorch 2.13: 5.8 ns on a 2-core AMD EPYC, "
               "4.9 ns on a 2-core Intel Xeon, whatever the thread count). " if self.serial else "")
        return (f"dropout's masks cost {self.share:.0%} of the step: {why}Where the recipe allows, lower the dropout rate "
                "or set it to 0 (nn.Dropout(p=0) draws nothing; Hugging Face configs: hidden_dropout_prob, "
                "attention_probs_dropout_prob) and check the validation loss; a 4-layer 256-wide transformer encoder "
                "trained on a CPU: 412-436 ms a step with dropout 0.1, 301-315 ms with 0 (torch.compile did not remove "
                "the cost on a BERT of that size: 491 against 463 ms)")

    def as_dict(self) -> dict[str, object]:
        return {"share": round(self.share, 4), "draw_share": round(self.draw_share, 4), "calls": self.calls,
                "elements": self.elements, "ns_per_element": round(self.ns_per_element, 2), "framework": self.framework}


def dropout_masks(frame: Frame, used: list[int] | None, framework: str = "torch") -> DropoutMasks | None:
    """The steps' dropout masks in a CPU training trace of ``framework`` (torch or tf; module doc), or
    None below ``MIN_SHARE``."""
    if frame.rows(*GPU_BUSY_KINDS).size:
        return _gpu_dropout(frame, used, framework)
    if framework == "tf":
        return _tf_dropout(frame, used)
    if framework == "paddle":
        return _paddle_dropout(frame, used)
    dropout_codes = [c for c, n in enumerate(frame.names) if n in DROPOUT_OPS]
    mask_codes = [c for c, n in enumerate(frame.names) if n in MASK_OPS]
    if not (dropout_codes and mask_codes) or not _training(frame, framework):
        return None  # no dropout drawing; or inference in training mode: train_mode's finding
    steps = step_rows(frame, used)
    if not steps.size:
        return None
    ops = frame.rows("cpu_op")
    ops = ops[member_mask(frame.step[ops], np.unique(frame.step[steps]).tolist())]
    drawing = dropouts_drawing(frame, ops, dropout_codes, mask_codes)
    whole = int(frame.dur[steps].sum())
    share = wall_time(frame, drawing) / whole if whole else 0.0
    if share < MIN_SHARE:
        return None
    per = max(int(np.unique(frame.step[steps]).size), 1)
    # The masks drawn inside the dropout calls (a bernoulli_ of the model's own is not dropout's).
    draws = ops[frame.name_code[ops] == frame.names.index("aten::bernoulli_")] if "aten::bernoulli_" in frame.names \
        else ops[:0]
    draws = draws[nearest_ancestor(frame.parent, draws, member_mask(frame.name_code, dropout_codes)) >= 0]
    draw_ns = _self_ns(frame, draws)
    elements = _elements(frame, draws)
    return DropoutMasks(share=share, draw_share=draw_ns / whole, calls=int(round(drawing.size / per)),
                        elements=int(round(elements / per)),
                        ns_per_element=draw_ns / elements if elements else 0.0)


def _tf_dropout(frame: Frame, used: list[int] | None) -> DropoutMasks | None:
    """Keras dropout on TF: the ops of dropout scopes in the steps, their union over threads."""
    if frame.rows(*GPU_BUSY_KINDS).size:
        return None
    scoped = [c for c, n in enumerate(frame.names) if _TF_DROPOUT_SCOPE.search(n)]
    if not scoped or not any(_TF_BACKWARD.search(frame.names[c]) for c in scoped):
        return None  # no dropout, or no backward through it: not training
    steps = step_rows(frame, used)
    if not steps.size:
        return None
    w_lo, w_hi = intervals.union(frame.start[steps], frame.end[steps])
    whole = intervals.total(w_lo, w_hi)
    ops = frame.rows("cpu_op")
    ops = ops[member_mask(frame.name_code[ops], scoped)]
    lo, hi = intervals.union(frame.start[ops], frame.end[ops])
    share = intervals.overlap_total(lo, hi, w_lo, w_hi) / whole if whole else 0.0
    if share < MIN_SHARE:
        return None
    draws = ops[frame.named(ops, _TF_DRAWS)]
    d_lo, d_hi = intervals.union(frame.start[draws], frame.end[draws])
    drawn = intervals.overlap_total(d_lo, d_hi, w_lo, w_hi)
    i = np.searchsorted(w_lo, frame.start[draws], "right") - 1  # the window each draw starts in, if any
    inside = (i >= 0) & (frame.start[draws] < w_hi[np.maximum(i, 0)])
    return DropoutMasks(share=share, draw_share=drawn / whole, calls=int(round(int(inside.sum()) / steps.size)),
                        elements=0, ns_per_element=0.0, framework="tf")


def _paddle_dropout(frame: Frame, used: list[int] | None) -> DropoutMasks | None:
    """Paddle on a CPU: its dropout kernels (the mask drawn and applied in the forward, applied again
    in the backward), as a share of the steps' time, in a trace that runs grad kernels."""
    if not any(_PADDLE_GRAD_KERNEL.search(n) for n in frame.names):
        return None  # no backward: inference in training mode, which this does not judge
    steps = step_rows(frame, used)
    if not steps.size:
        return None
    ops = frame.rows("cpu_op")
    ops = ops[member_mask(frame.step[ops], np.unique(frame.step[steps]).tolist())]
    kernels = ops[frame.named(ops, _PADDLE_DROPOUT)]
    whole = int(frame.dur[steps].sum())
    share = int(frame.dur[kernels].sum()) / whole if whole else 0.0
    if share < MIN_SHARE:
        return None
    forward = kernels[~frame.named(kernels, _PADDLE_GRAD_KERNEL)]
    return DropoutMasks(share=share, draw_share=int(frame.dur[forward].sum()) / whole,
                        calls=int(round(forward.size / max(int(np.unique(frame.step[steps]).size), 1))),
                        elements=0, ns_per_element=0.0, framework="paddle")


def _gpu_dropout(frame: Frame, used: list[int] | None, framework: str) -> DropoutMasks | None:
    """On a TF GPU trace: the kernels launched by ops of dropout scopes, as a share of the kernels'
    time in the steps. PyTorch's CUDA dropout is one fused kernel a call, and no GPU trace at hand
    trains with it: not read."""
    steps = step_rows(frame, used)
    if framework != "tf" or not steps.size or not _training(frame, framework):
        return None
    kernels = frame.rows("gpu_kernel")
    kernels = kernels[member_mask(frame.step[kernels], np.unique(frame.step[steps]).tolist())]
    total = int(frame.dur[kernels].sum())
    launcher = frame.op_row[kernels]
    if not total or not (launcher >= 0).any():
        return None
    launched = launcher >= 0
    mine = launched & frame.named(np.maximum(launcher, 0), _TF_DROPOUT_SCOPE)
    draws = mine & frame.named(np.maximum(launcher, 0), _TF_DRAWS)
    share = int(frame.dur[kernels[mine]].sum()) / total
    if share < MIN_SHARE:
        return None
    return DropoutMasks(share=share, draw_share=int(frame.dur[kernels[draws]].sum()) / total,
                        calls=int(round(int(mine.sum()) / max(int(np.unique(frame.step[steps]).size), 1))),
                        elements=0, ns_per_element=0.0, framework=framework, on_gpu=True)


def _training(frame: Frame, framework: str) -> bool:
    """Whether the trace runs a backward pass: TF's ops under gradient_tape/, PyTorch's autograd."""
    pattern = _TF_BACKWARD if framework == "tf" else BACKWARD
    return any(pattern.search(n) for n in frame.names)


def _self_ns(frame: Frame, rows: np.ndarray) -> int:
    """The rows' time less the ops they call (bernoulli_ calls little: its uniform draw is inline)."""
    inside = frame.rows("cpu_op")
    inside = inside[member_mask(frame.op_parent[inside], rows.tolist())] if rows.size else inside[:0]
    return int(frame.dur[rows].sum() - frame.dur[inside].sum())


def _elements(frame: Frame, rows: np.ndarray) -> int:
    """Elements of the tensors the rows fill (their first input's dims), summed; 0 without shapes."""
    if not rows.size or "args" not in frame.table.column_names:
        return 0
    codes, texts = input_dims(frame.table, rows)
    sizes = []
    for text in texts:
        try:
            dims = json.loads(text) if text else []
            first = dims[0] if dims else []
            sizes.append(int(np.prod(first)) if first else 0)
        except (ValueError, TypeError):
            sizes.append(0)
    return int(np.asarray(sizes, np.int64)[codes].sum()) if sizes else 0


__all__ = ["DropoutMasks", "dropout_masks"]
