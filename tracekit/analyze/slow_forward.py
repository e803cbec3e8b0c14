"""A layer's forward product far slower than its own gradient products (TF, CPU).

A Dense layer's forward product (``x @ W``: B x K by K x N) and its two gradient products (``dy @ W^T``
and ``x^T @ dy``) do the same arithmetic, 2 x B x K x N flop each; a convolution's forward and its
backprop-input and backprop-filter ops likewise. TF names each op after its layer (forward
``sequential/dense_1/Relu:_MklNativeFusedMatMul``, gradients
``gradient_tape/sequential/dense_1/MatMul/MatMul:_MklMatMul`` and ``MatMul_1``), so a forward
product that takes ``MIN_RATIO`` times as long a call as every gradient product of its layer runs a
slow kernel: a fact the trace shows without the shapes and dtypes TF's host trace does not record.
Small layers' calls are mostly oneDNN's fixed cost per call, which the fused forward op pays more of:
the stored float32 Keras captures' forward products take up to 8.3x their gradient products' median
call (a 20-feature first layer), hence the margin, and a forward call must take ``MIN_CALL_NS``.

Keras 3's ``mixed_float16`` policy does this on a CPU with TF 2.21: an MLP (64-512-512-10, batch 32)
trained 240 ms a batch against 3.9 ms in float32 and 4.3 ms under ``mixed_bfloat16`` (2-core Xeon with
AVX-512 FP16 and AMX, unprofiled), its second layer's fused float16 matmul 144 ms a call against 0.17
and 0.25 ms for the layer's gradient products. ``mixed_float16`` shows by its loss-scale optimizer, which
checks the gradients with ``IsFinite`` each step (``mixed_bfloat16`` has none).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.analyze.breakdown import op_self_time
from tracekit.analyze.classify import OP_CLASSES, RowClasses, short_name
from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame, ops_in_steps, step_rows
from tracekit.ingest.links import member_mask

MIN_RATIO = 30.0
MIN_CALL_NS = 200_000
MIN_SHARE = 0.2  # of the steps' time, in the slow forward products together
MIN_CALLS = 2  # a layer's calls of an op: the median of one call is a first call's set-up
MAX_GRADIENT_NAMES = 3  # a layer's gradient products (Dense: 2; a first layer's: 1); more: not one layer
PRODUCT_CLASSES = ("gemm", "convolution")
GRADIENT_SCOPES = ("gradient_tape/", "gradients/")  # Keras 3 on TF; tf.gradients and TF1's optimizers
LOSS_SCALE_CHECK = ":IsFinite"  # Keras's LossScaleOptimizer, which mixed_float16 wraps the optimizer in


@dataclass(frozen=True)
class SlowForward:
    """The steps' forward products that run ``MIN_RATIO`` or more times as long a call as each gradient
    product of their layer. worst: that op's name, its median call and its layer's gradient products'
    (name, median call); share: the slow forward products' self time over the steps'; float16: the steps
    check gradients for a loss scale (mixed_float16)."""

    layers: int
    share: float
    worst: str
    worst_ns: int
    gradients: tuple[tuple[str, int], ...]
    float16: bool

    def ratio(self) -> float:
        return self.worst_ns / max(max(ns for _, ns in self.gradients), 1)

    def evidence(self) -> str:
        grads = ", ".join(f"{name} {ns / 1e3:,.0f} µs" for name, ns in self.gradients)
        policy = ("; the step checks its gradients for a loss scale (IsFinite): Keras's mixed_float16 policy, its "
                  "products in float16" if self.float16 else "")
        return (f"{self.worst} takes {self.worst_ns / 1e6:,.2f} ms a call, {self.ratio():,.0f}x each gradient product of "
                f"its layer ({grads}), which do the same arithmetic: the forward runs a slow kernel; {self.layers} "
                f"layer(s)' forward products run so, {self.share:.0%} of the step time{policy}")

    def remedy(self) -> str:
        if self.float16:
            return ("train in float32 on this CPU, or under mixed_bfloat16 where it has native bf16 math (AVX-512 BF16, "
                    "AMX): TF's float16 forward products on a CPU are this slow (an MLP on a Xeon with AVX-512 FP16: "
                    "240 ms a batch under mixed_float16, 3.9 ms in float32, 4.3 ms under mixed_bfloat16)")
        return ("time that layer's forward alone and look at what makes its kernel slow (its dtype: float16 on a CPU; "
                "a layout or fused activation without a fast oneDNN kernel): its gradient products show the arithmetic "
                "runs far faster")

    def as_dict(self) -> dict[str, object]:
        return {"layers": self.layers, "share": self.share, "worst": self.worst, "worst_ns": self.worst_ns,
                "gradients": [{"name": n, "median_ns": ns} for n, ns in self.gradients], "float16": self.float16,
                "ratio": self.ratio()}


def slow_forward(frame: Frame, classes: RowClasses, used: list[int] | None) -> SlowForward | None:
    """The steps' slow forward products (module doc); None where there are none, or GPU activity (a
    GPU's kernels do the arithmetic, not these ops)."""
    if frame.rows(*GPU_BUSY_KINDS).size:
        return None
    ops, steps = ops_in_steps(frame, used), step_rows(frame, used)
    product = member_mask(classes.op[ops], [OP_CLASSES.index(c) for c in PRODUCT_CLASSES])
    rows = ops[product]
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if rows.size < 2 or not step_ns:
        return None
    self_ns = op_self_time(frame, rows)
    # Per op name: its scope path (StatefulPartitionedCall/ and the gradient scope dropped), calls, median call.
    median: dict[int, tuple[str, bool, int, int, int]] = {}  # code -> (path, gradient?, calls, median, total)
    order = np.argsort(frame.name_code[rows], kind="stable")
    codes, starts = np.unique(frame.name_code[rows][order], return_index=True)
    for code, durations in zip(codes.tolist(), np.split(self_ns[order], starts[1:]), strict=True):
        path, gradient = scope_path(frame.names[code])
        median[code] = (path, gradient, durations.size, int(np.median(durations)), int(durations.sum()))
    gradients = [(code, path) for code, (path, gradient, calls, _, _) in median.items() if gradient and calls >= MIN_CALLS]
    slow: list[tuple[int, int, list[int]]] = []  # (forward code, total, its layer's gradient codes)
    for code, (path, gradient, calls, med, total) in median.items():
        layer = path.rpartition("/")[0]
        if gradient or calls < MIN_CALLS or med < MIN_CALL_NS or "/" not in layer:
            continue  # a product at a model's top scope has no one layer's gradients to compare with
        mine = sorted((g for g, p in gradients if p.startswith(layer + "/")), key=lambda g: frame.names[g])
        if mine and len(mine) <= MAX_GRADIENT_NAMES and all(med >= MIN_RATIO * median[g][3] for g in mine):
            slow.append((code, total, mine))
    total_slow = sum(total for _, total, _ in slow)
    if not slow or total_slow < MIN_SHARE * step_ns:
        return None
    code, _, mine = max(slow, key=lambda s: (s[1], frame.names[s[0]]))
    float16 = any(n.endswith(LOSS_SCALE_CHECK) for n in _names_in(frame, ops))
    return SlowForward(layers=len(slow), share=total_slow / step_ns, worst=short_name(frame.names[code]),
                       worst_ns=median[code][3],
                       gradients=tuple((short_name(frame.names[g]), median[g][3]) for g in mine), float16=float16)


def scope_path(name: str) -> tuple[str, bool]:
    """An op name's scope path without the function-call and gradient scopes, and whether it is in a
    gradient scope: ``StatefulPartitionedCall/gradient_tape/seq/dense_1/MatMul/MatMul:_MklMatMul`` ->
    (``seq/dense_1/MatMul/MatMul``, True)."""
    path = name.partition(":")[0]
    gradient = False
    for scope in GRADIENT_SCOPES:
        before, found, after = path.rpartition(scope)
        if found and (not before or before.endswith("/")):
            path, gradient = after, True
            break
    while path.startswith("StatefulPartitionedCall/"):
        path = path[len("StatefulPartitionedCall/"):]
    return path, gradient


def _names_in(frame: Frame, rows: np.ndarray) -> list[str]:
    return [frame.names[c] for c in np.unique(frame.name_code[rows]).tolist() if c >= 0]
