"""Attention computed op by op.

``softmax(q @ k.transpose(-2, -1) / sqrt(d)) @ v`` writes the whole T x T score matrix to memory and
reads it back three times (scale, softmax, product); ``torch.nn.functional.scaled_dot_product_attention``
runs the same math in one fused kernel (flash attention, on CPUs too) that never stores it. PyTorch
2.13, 2-core AMD EPYC, B8 H8 T256 D64 under no_grad: 11.1 ms op by op, 7.8 ms fused.
``nn.MultiheadAttention`` takes the op-by-op path whenever it is asked for the attention weights,
which it is by default (``need_weights=True``); ``nn.TransformerEncoderLayer`` asks it not to.

Only long sequences gain: nn.MultiheadAttention (E256, 8 heads, batch 8) trained at T512 took
172 ms a step asking for the weights, 101 ms with ``need_weights=False``, at T128 12.8 ms either
way (the scores of a head fit in cache).

``scaled_dot_product_attention`` itself leaves its fused kernel on a CPU when asked for dropout: with
``dropout_p > 0`` (attention dropout in training: Hugging Face's ``attention_probs_dropout_prob``,
0.1 in BERT's config) it runs ``aten::_scaled_dot_product_attention_math``, the same op-by-op
attention (the scores written out, ``_safe_softmax``, a dropout mask drawn over them, two products)
and its backward op by op. PyTorch 2.13, 2-core AMD EPYC, B8 H8 D64, forward and backward: T128
17.7 ms with dropout 0.1 against 8.3 ms with 0, T512 355 against 105 ms (the mask's draw, 5.8 ns an
element on this CPU, is 65% of the difference at T128 and 39% at T512; ``tracekit.analyze.dropout``). Evidence (CPU-only
PyTorch training traces: inference in training mode is ``tracekit.analyze.train_mode``'s, whose
``model.eval()`` removes the dropout): the steps' math-path calls that draw a dropout mask inside take
``MIN_MATH_SHARE`` of the steps' time in their forward alone; a math-path call for another reason is not said (no capture
of one to check it on). A mask that requires grad (a learned attention bias) keeps the math path at
dropout 0 too (boolean, float and causal masks do not): where the calls take a mask, the remedy says so.

The evidence (CPU-only PyTorch traces with shapes recorded): a top-level ``softmax`` with a matrix
product among the ``NEIGHBOURS`` top-level ops before it and among those after it on its thread, in
its step (the scores' product, then the values'), over an input of 3 or more dims whose last,
the keys, is ``MIN_KEYS`` or more; the spans from the first product to the second take
``MIN_SHARE`` of the steps' time. A trace that already runs the fused op has none such: its
softmax is inside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from tracekit.analyze import intervals
from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame, wall_time
from tracekit.analyze.grad_mode import BACKWARD
from tracekit.analyze.top_ops import first_input_shape, input_dims
from tracekit.analyze.train_mode import DROPOUT_OPS
from tracekit.ingest.links import member_mask, nearest_ancestor

SOFTMAX_OPS = ("aten::softmax", "aten::_softmax", "aten::_safe_softmax")
SDPA_MATH = "aten::_scaled_dot_product_attention_math"
MIN_MATH_SHARE = 0.05  # forward alone: the backward, op by op too, is not counted
PRODUCT_OPS = ("aten::matmul", "aten::bmm", "aten::baddbmm", "aten::einsum")
NEIGHBOURS = 6  # top-level ops looked at on either side: scaling, masking, dropout, transposes between
MIN_KEYS = 256  # the scores' last dim: shorter, they stay in cache and fusing gains little (module doc)
MIN_SHARE = 0.2


@dataclass(frozen=True)
class UnfusedAttention:
    """Attention computed op by op in the steps used. per_step: instances a step (mean); share: their
    spans' part of the steps' time; scores: the score matrix's shape where recorded ("" otherwise)."""

    per_step: float
    share: float
    scores: str

    def evidence(self) -> str:
        shape = f" of {self.scores} scores" if self.scores else ""
        times = "once" if round(self.per_step) == 1 else f"{self.per_step:.0f} times"
        return (f"attention is computed op by op, {times} a step (a matrix product, a softmax{shape}, "
                f"a matrix product), {self.share:.0%} of the step time in the forward alone: the score matrix is written "
                "out and read back between them")

    def remedy(self) -> str:
        return ("compute attention with torch.nn.functional.scaled_dot_product_attention, one fused kernel that never "
                "stores the scores (nn.MultiheadAttention takes it when called with need_weights=False): on a CPU, "
                "B8 H8 T256 D64 11.1 ms op by op, 7.8 ms fused; a MultiheadAttention layer trained at T512 172 ms a "
                "step, 101 ms with need_weights=False")

    def as_dict(self) -> dict[str, object]:
        return {"per_step": self.per_step, "share": self.share, "scores": self.scores}


def unfused_attention(frame: Frame, used: list[int] | None) -> UnfusedAttention | None:
    """The steps' attention computed op by op (module doc), or None."""
    softmax_codes = [c for c, n in enumerate(frame.names) if n in SOFTMAX_OPS]
    product_codes = [c for c, n in enumerate(frame.names) if n in PRODUCT_OPS]
    if (not softmax_codes or not product_codes or frame.rows(*GPU_BUSY_KINDS).size
            or "args" not in frame.table.column_names):
        return None
    steps = frame.rows("step")
    ops = frame.rows("cpu_op")
    top = ops[frame.op_parent[ops] < 0]
    if used is not None:
        steps = steps[member_mask(frame.step[steps], used)]
        top = top[member_mask(frame.step[top], used)]
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if not step_ns:
        return None
    top = top[np.lexsort((frame.start[top], frame.thread_key[top]))]
    is_product = member_mask(frame.name_code[top], product_codes)
    at = np.flatnonzero(member_mask(frame.name_code[top], softmax_codes))
    thread, step = frame.thread_key[top], frame.step[top]

    def beside(i: int, j: int) -> bool:
        return bool(is_product[j]) and thread[j] == thread[i] and step[j] == step[i]

    span_start, span_end, found = [], [], []
    for i in at.tolist():
        before = [j for j in range(max(i - NEIGHBOURS, 0), i) if beside(i, j)]
        after = [j for j in range(i + 1, min(i + 1 + NEIGHBOURS, top.size)) if beside(i, j)]
        if before and after:
            first, second = int(top[before[-1]]), int(top[after[0]])
            span_start.append(int(frame.start[first]))
            span_end.append(int(frame.end[second]))
            found.append(int(top[i]))
    if not found:
        return None
    rows = np.array(found)
    dims_code, dims = input_dims(frame.table, rows)
    scores = [_scores(text) for text in dims]
    keep = np.array([scores[c] is not None for c in dims_code.tolist()], bool)
    # The time the kept instances cover inside the steps: instances that share a product, or ops out
    # of order on a clock that jitters, must not count a moment twice (130% of the step, once).
    share = intervals.overlap_total(np.array(span_start, np.int64)[keep], np.array(span_end, np.int64)[keep],
                                    frame.start[steps], frame.end[steps]) / step_ns
    if share < MIN_SHARE:
        return None
    shape = scores[int(dims_code[np.flatnonzero(keep)[0]])]
    return UnfusedAttention(per_step=int(keep.sum()) / max(int(steps.size), 1), share=share,
                            scores="x".join(map(str, shape or ())))


@dataclass(frozen=True)
class SdpaMathPath:
    """scaled_dot_product_attention run on its math path because of dropout, in the steps used:
    calls a step (mean), their forward's share of the steps' time, the query's shape where recorded."""

    per_step: float
    share: float
    query: str
    masked: bool = False  # the calls take an attn_mask

    def evidence(self) -> str:
        shape = f" (query {self.query})" if self.query else ""
        return (f"scaled_dot_product_attention runs its math path {self.per_step:.0f} times a step{shape}, "
                f"{self.share:.0%} of the step time in the forward alone: with dropout_p > 0 a CPU computes attention "
                "op by op (the scores written out, softmax, the dropout mask drawn over them, two products), and its "
                "backward op by op, instead of the fused flash kernel")

    def remedy(self) -> str:
        return ("attention's dropout keeps scaled_dot_product_attention off its fused kernel on a CPU: where the recipe "
                "allows, set it to 0 (dropout_p=0.0; Hugging Face: attention_probs_dropout_prob or attention_dropout; "
                "nn.MultiheadAttention(dropout=0.0)) and keep the other dropout layers; forward and backward, B8 H8 "
                "D64 on a 2-core AMD EPYC: T128 17.7 ms with dropout 0.1, 8.3 ms with 0; T512 355 against 105 ms"
                + ("; these calls take an attn_mask: boolean, float and causal masks keep the fused kernel, but a "
                   "mask that requires grad (a learned attention bias) keeps the math path whatever the dropout"
                   if self.masked else ""))

    def as_dict(self) -> dict[str, object]:
        return {"per_step": self.per_step, "share": self.share, "query": self.query, "masked": self.masked}


def sdpa_math_path(frame: Frame, used: list[int] | None) -> SdpaMathPath | None:
    """The steps' scaled_dot_product_attention calls on the math path with a dropout inside (module
    doc), or None below ``MIN_MATH_SHARE`` or on a GPU trace."""
    if SDPA_MATH not in frame.names or frame.rows(*GPU_BUSY_KINDS).size:
        return None
    if not any(BACKWARD.search(n) for n in frame.names):
        return None  # inference in training mode: model.eval() is the fix (tracekit.analyze.train_mode)
    dropout_codes = [c for c, n in enumerate(frame.names) if n in DROPOUT_OPS]
    if not dropout_codes:
        return None
    steps = frame.rows("step")
    ops = frame.rows("cpu_op")
    if used is not None:
        steps = steps[member_mask(frame.step[steps], used)]
    ops = ops[member_mask(frame.step[ops], np.unique(frame.step[steps]).tolist())] if steps.size else ops[:0]
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if not step_ns:
        return None
    is_math = frame.name_code == frame.names.index(SDPA_MATH)
    dropouts = ops[member_mask(frame.name_code[ops], dropout_codes)]
    holding = np.unique(nearest_ancestor(frame.parent, dropouts, is_math))
    calls = holding[holding >= 0]
    calls = calls[nearest_ancestor(frame.parent, calls, is_math) < 0]  # outermost: not one inside another
    share = wall_time(frame, calls) / step_ns
    if share < MIN_MATH_SHARE:
        return None
    query, masked = "", False
    if "args" in frame.table.column_names:
        _, dims = input_dims(frame.table, calls)
        first = first_input_shape(dims[0]) if dims else None
        query = "x".join(map(str, first)) if first else ""
        masked = any(_takes_mask(text) for text in dims)
    return SdpaMathPath(per_step=calls.size / max(int(steps.size), 1), share=share, query=query, masked=masked)


def _takes_mask(dims_text: str) -> bool:
    """Whether an SDPA call's recorded inputs (query, key, value, attn_mask, ...) hold a mask: None is
    recorded as [] (an empty list of dims)."""
    try:
        dims = json.loads(dims_text) if dims_text else []
    except ValueError:
        return False
    return len(dims) > 3 and isinstance(dims[3], list) and len(dims[3]) > 0


def _scores(dims_text: str) -> list[int] | None:
    """The softmax's input shape where it is a score matrix worth fusing: 3 or more dims (a 2-D softmax
    is a classifier's), the last ``MIN_KEYS`` or more; None otherwise or when not recorded."""
    shape = first_input_shape(dims_text)
    return shape if shape is not None and len(shape) >= 3 and shape[-1] >= MIN_KEYS else None
