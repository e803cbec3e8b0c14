"""16-bit matrix products a CPU computes in software.

``torch.autocast("cpu", dtype=torch.bfloat16)`` or a model in ``bfloat16``/``float16`` is fast only on
CPUs with native 16-bit math (AVX-512 BF16 or AMX; AVX-512 FP16 or AMX-FP16 for half). Elsewhere (AVX2-only CPUs,
most users' laptops and many cloud instances) oneDNN has no 16-bit kernel and PyTorch falls back to a
scalar loop: PyTorch 2.13 on this Xeon restricted to AVX2 (``ONEDNN_MAX_CPU_ISA=AVX2
ATEN_CPU_CAPABILITY=avx2``) ran a 64x512 by 512x512 bfloat16 ``mm`` at 2.1 GFLOP/s against 159 in
float32, and a bf16-autocast MLP training step took 109-115 ms against 7-9 ms in float32 (with AMX:
8.1-8.6 ms against 9.0-10.4, bf16 mm at 357 GFLOP/s).

nn.Linear's product (``addmm`` with a transposed weight) has a vectorized fallback that converts to
float32 as it goes: 20-33 GFLOP/s a core in float16 or bfloat16 on a 2-core AMD EPYC without native
half math (or restricted to AVX2), against ~110 in float32 and 300-450 with native bf16 on one core,
so a 16-bit MLP ran inference 3.2-3.6x slower than in float32 there (7.3-7.5 ms against 2.0-2.4).

The evidence (CPU-only traces with shapes and types recorded, ``record_shapes=True``): the steps'
matrix products whose two factors are ``c10::BFloat16`` or ``c10::Half``, of at least ``MIN_FLOP``
and ``MIN_DIM`` in each of M, K, N (a matrix-vector product is memory-bound at any precision), at
least ``MIN_SHARE`` of the steps' time, run together below ``EMULATED_GFLOPS`` (a rate no native
16-bit kernel falls to, and below what one AVX2 core does in float32), or those of them of at least
``LARGE_FLOP`` and ``LARGE_DIM`` in each of M, K, N (native 16-bit kernels ran such products at 298
GFLOP/s or more on one core: AVX512_BF16 on an AMD EPYC, AMX on a Xeon) below ``CONVERTED_GFLOPS``
(the fallback on two cores, no more; on more cores it can pass for native and is not called);
and, where the trace also has float32 products of such sizes, at no more than half their rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from tracekit.analyze.breakdown import op_self_time
from tracekit.analyze.classify import short_name
from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame, calls_in_steps
from tracekit.analyze.stalls import INPUT_TYPES, factor_types
from tracekit.analyze.top_ops import GEMM_FLOP_OPS, args_mention, args_text, compact_shapes, gemm_shape, input_dims

LOW_TYPES = {"c10::BFloat16": "bfloat16", "c10::Half": "float16"}
# The x86 features PyTorch's CPU products use for each type (oneDNN's bf16 and fp16 matmuls).
NATIVE_MATH = {"bfloat16": "AVX-512 BF16 or AMX", "float16": "AVX-512 FP16 or AMX-FP16"}
EMULATED_GFLOPS = 20.0
MIN_FLOP = 1e6
MIN_DIM = 16
MIN_SHARE = 0.2
CONVERTED_GFLOPS = 75.0
LARGE_FLOP = 16e6
LARGE_DIM = 64


@dataclass(frozen=True)
class EmulatedProducts:
    """The 16-bit products of the steps used and their rate (module doc). dtype: bfloat16 or float16;
    share: of the steps' time; worst: the slowest product (name and shapes) and its rate over its calls; float_gflops: the float32
    products' rate in the same trace (0: none of such sizes)."""

    dtype: str
    calls: int
    share: float
    gflops: float
    worst: str
    worst_gflops: float
    float_gflops: float
    converted: bool = False  # only the large products' rate gave it away (the converting fallback)

    def evidence(self) -> str:
        witness = (f", against {self.float_gflops:,.0f} GFLOP/s for the trace's float32 products" if self.float_gflops
                   else "")
        head = (f"the {self.dtype} matrix products run at {self.gflops:,.1f} GFLOP/s ({self.calls} calls, {self.share:.0%} "
                f"of the step time; {self.worst} at {self.worst_gflops:,.1f}){witness}: ")
        if self.converted:
            return head + (f"this CPU has no native {self.dtype} math ({NATIVE_MATH[self.dtype]}) and converts each "
                           "product to float32 as it goes (20-33 GFLOP/s a core, against ~110 in float32; native "
                           "16-bit kernels ran products of these sizes at 298 GFLOP/s or more on one core)")
        return head + (f"this CPU computes {self.dtype} in software, without native {self.dtype} math ({NATIVE_MATH[self.dtype]}), "
                       "which runs such products at hundreds of GFLOP/s")

    def remedy(self) -> str:
        text = (f"run float32 on this CPU: drop torch.autocast(\"cpu\", dtype=torch.{self.dtype}) or the model's "
                f".to(torch.{self.dtype}): without native {self.dtype} math ({NATIVE_MATH[self.dtype]}; AVX2-only CPUs "
                f"have none) {self.dtype} products are emulated (an MLP training step on AVX2: 109-115 ms under bf16 "
                "autocast, 7-9 ms in float32; a 16-bit MLP's inference 3.2-3.6x slower than in float32)")
        if self.dtype == "float16":
            text += ("; or bfloat16 where the CPU has native bf16 math but not fp16 (AVX512_BF16 without "
                     "AVX512_FP16, as AMD's Zen 4: that MLP took 0.52 ms in bfloat16, 7.45 in float16, 2.36 in float32)")
        return text

    def as_dict(self) -> dict[str, object]:
        return {"dtype": self.dtype, "calls": self.calls, "share": self.share, "gflops": self.gflops,
                "worst": self.worst, "worst_gflops": self.worst_gflops, "float_gflops": self.float_gflops,
                "converted": self.converted}


def emulated_products(frame: Frame, used: list[int] | None) -> EmulatedProducts | None:
    """The steps' 16-bit products when they run as emulated ones (module doc), else None."""
    # One byte search first: both 16-bit types are recorded as "c10::...", float32 as "float".
    if frame.rows(*GPU_BUSY_KINDS).size or not args_mention(frame.table, b'"c10::'):
        return None
    rows, steps = calls_in_steps(frame, GEMM_FLOP_OPS, used)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if not rows.size or not step_ns:
        return None
    # Products group by (name, shapes, types): each distinct one is read once, however many calls.
    dims_code, dims = input_dims(frame.table, rows)
    typed = pc.fill_null(pc.struct_field(pc.extract_regex(args_text(frame.table, rows), INPUT_TYPES), "types"),
                         "").dictionary_encode()
    types_code, types = typed.indices.to_numpy(zero_copy_only=False).astype(np.int64), typed.dictionary.to_pylist()
    known = np.array([bool(t) for t in types])[types_code] if types else np.zeros(rows.size, bool)
    rows, dims_code, types_code = rows[known], dims_code[known], types_code[known]
    if not rows.size:
        return None
    key = np.stack([frame.name_code[rows].astype(np.int64), dims_code.astype(np.int64), types_code], axis=1)
    groups, group_of = np.unique(key, axis=0, return_inverse=True)
    group_of = group_of.ravel()
    group_ns = np.bincount(group_of, weights=op_self_time(frame, rows), minlength=len(groups))
    group_calls = np.bincount(group_of, minlength=len(groups))
    low: dict[str, list[tuple[int, float, float, int]]] = {}  # dtype -> (group, flop a call, ns, calls)
    large_groups: set[int] = set()
    full_flop = full_ns = 0.0
    for g, (name_code, dims_at, types_at) in enumerate(groups.tolist()):
        name = frame.names[name_code]
        shape = gemm_shape(name, dims[dims_at])
        factors = factor_types(name, types[types_at])
        if shape is None or factors is None or min(shape[1:]) < MIN_DIM or 2.0 * float(np.prod(shape)) < MIN_FLOP:
            continue
        flop = 2.0 * float(np.prod(shape))
        if flop >= LARGE_FLOP and min(shape[1:]) >= LARGE_DIM:
            large_groups.add(g)
        if factors[0] == factors[1] and factors[0] in LOW_TYPES:
            low.setdefault(LOW_TYPES[factors[0]], []).append((g, flop, float(group_ns[g]), int(group_calls[g])))
        elif factors == ("float", "float"):
            full_flop, full_ns = full_flop + flop * group_calls[g], full_ns + group_ns[g]
    if not low:
        return None
    dtype, found = max(low.items(), key=lambda kv: sum(ns for _, _, ns, _ in kv[1]))
    time_ns = sum(ns for _, _, ns, _ in found)
    gflops = sum(flop * calls for _, flop, _, calls in found) / max(time_ns, 1.0)
    large = [f for f in found if f[0] in large_groups]
    large_ns = sum(ns for _, _, ns, _ in large)
    large_gflops = sum(flop * calls for _, flop, _, calls in large) / max(large_ns, 1.0)
    slow = gflops < EMULATED_GFLOPS or (large_ns >= MIN_SHARE * step_ns and large_gflops < CONVERTED_GFLOPS)
    float_gflops = full_flop / full_ns if full_ns else 0.0
    if not slow or time_ns < MIN_SHARE * step_ns or (float_gflops and float_gflops < 2 * gflops):
        return None
    g, flop, ns, calls = min(found, key=lambda f: f[1] * f[3] / max(f[2], 1.0))
    name_code, dims_at, _ = groups[g].tolist()
    return EmulatedProducts(dtype=dtype, calls=sum(c for _, _, _, c in found), share=time_ns / step_ns, gflops=gflops,
                            worst=f"{short_name(frame.names[name_code])} ({compact_shapes(dims[dims_at])})",
                            worst_gflops=flop * calls / max(ns, 1.0), float_gflops=float_gflops,
                            converted=gflops >= EMULATED_GFLOPS)
