"""Inference on a CPU spent in float32 Linear layers.

A model served on a CPU (an encoder embedding sentences, a classifier) spends most of its time in its
Linear layers' matrix products. Their weights in int8 halve the step: dynamic quantization
(``torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)``; torchao's
``Int8DynamicActivationInt8WeightConfig``) runs them with int8 weights and activations quantized per
call, on AVX2 as on AVX-512 (fbgemm / oneDNN). bf16 autocast needs native bf16 math: with AVX-512
BF16 it gains about as much as int8, with AMX more; elsewhere it is emulated and far slower
(``tracekit.analyze.emulated_precision``). The trace does not say which CPU ran it, so the remedy
gives both.
PyTorch 2.13, 2-core AMD EPYC (Zen 4, AVX-512 BF16), a 4-layer BERT encoder (256 wide, FFN 1024)
embedding 256 sentences of 5-60 words in batches of 32 under ``inference_mode``, medians of 5 runs, 2
runs each: 729-748 ms a pass in float32, 391-411 ms with the Linear layers int8, 407-410 ms under bf16
autocast; restricted to AVX2 (``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2``) 672-750, 352-437
and 3,240-3,305 ms. A 2-core Intel Xeon with AMX (Sapphire Rapids class), medians of 9 interleaved
runs: the MLP of tests/data/cpu/linear_inference_float32 25.5 ms a step in float32, 11.5 ms int8, 9.1
ms under bf16 autocast; a Hugging Face BERT of the encoder's size at 16x128 tokens 66, 52 and 28 ms.

Small products lose: per call, quantizing the activations costs more than int8 saves below a few
MFLOP (same machine, one Linear under ``inference_mode``: 1x256 by 256x256 11 us float32, 24 us int8;
8x128 by 128x384 20 against 30 us; 8x512 by 512x512 68 against 35 us; 64x512 by 512x512 236 against
103 us; 1x1024 by 1024x4096, its weights read from memory, 580 against 56 us).

The evidence (CPU-only PyTorch traces with types recorded, ``record_shapes=True``): no backward in
the trace, and the steps' ``aten::linear`` calls (the outermost: nn.Linear's own op) whose input and
weight are ``float`` and whose product is ``MIN_FLOP`` or more (2 x rows x in x out, from the input
dims) take ``MIN_SHARE`` of the steps' time. A decode loop is told its own remedy (more sequences
at once, fewer weight bytes: ``tracekit.analyze.decoding``), so it is left to it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from tracekit.analyze.decoding import decoding
from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame, calls_in_steps, wall_time
from tracekit.analyze.grad_mode import BACKWARD
from tracekit.analyze.stalls import INPUT_TYPES
from tracekit.analyze.top_ops import args_mention, args_text, input_dims

LINEAR_OPS = ("aten::linear",)
MIN_SHARE = 0.4  # of the steps' time in float32 Linear calls
MIN_FLOP = 4e6  # a Linear call's product: smaller ones run slower in int8 (module doc)


@dataclass(frozen=True)
class Float32Linears:
    """The steps' float32 Linear calls in an inference trace. share: their time's part of the steps';
    calls: how many a step (the median)."""

    share: float
    calls: int

    def evidence(self) -> str:
        return (f"inference (no backward pass) spends {self.share:.0%} of the step time in float32 Linear layers "
                f"(aten::linear, {self.calls} calls a step)")

    def remedy(self) -> str:
        return ("run the Linear layers in int8 and check the outputs against float32's: "
                "torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8), or torchao's "
                "quantize_(model, Int8DynamicActivationInt8WeightConfig()) (a 4-layer BERT encoder, 256 wide, on 2 cores: "
                "729-748 ms float32, 391-411 ms int8; restricted to AVX2 672-750 against 352-437 ms). On a CPU with "
                "native bf16 math, bf16 autocast (torch.autocast('cpu', dtype=torch.bfloat16)) gains as much with "
                "AVX-512 BF16 (the encoder: 407-410 ms) and more with AMX (Intel Xeon 4th generation and later; "
                "a BERT of that size at 16x128 tokens: 66 ms float32, 52 ms int8, 28 ms bf16); on AVX2 alone it "
                "is emulated: the encoder took 3.2-3.3 s under bf16")

    def as_dict(self) -> dict[str, object]:
        return {"share": self.share, "calls": self.calls}


def float32_linears(frame: Frame, used: list[int] | None) -> Float32Linears | None:
    """The float32 Linear calls of an inference trace's steps where they take ``MIN_SHARE`` of the
    time (module doc), else None."""
    if frame.rows(*GPU_BUSY_KINDS).size or not args_mention(frame.table, b'"Input type"'):
        return None
    if any(BACKWARD.search(n) for n in frame.names):  # a backward anywhere: not an inference trace
        return None
    calls, steps = calls_in_steps(frame, LINEAR_OPS, used)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if not step_ns or not calls.size:
        return None
    # The outermost: a Linear inside another (a wrapper module calling F.linear) is its callee.
    linear = np.zeros(len(frame), bool)
    linear[calls] = True
    parent = frame.op_parent[calls]
    calls = calls[(parent < 0) | ~linear[np.maximum(parent, 0)]]
    # Each distinct types and dims text judged once (a long trace repeats a few shapes).
    text = args_text(frame.table, calls)
    types = pc.fill_null(pc.struct_field(pc.extract_regex(text, INPUT_TYPES), "types"), "").dictionary_encode()
    dims_code, dims = input_dims(frame.table, calls)
    float_type = np.array([_float_inputs(t) for t in types.dictionary.to_pylist()], bool)
    big = np.array([_flop(d) >= MIN_FLOP for d in dims], bool)
    float_calls = calls[float_type[types.indices.to_numpy(zero_copy_only=False)] & big[dims_code]]
    share = wall_time(frame, float_calls) / step_ns
    if share < MIN_SHARE or decoding(frame, used) is not None:
        return None
    per_step = np.bincount(np.unique(frame.step[float_calls], return_inverse=True)[1])
    return Float32Linears(share=share, calls=int(np.median(per_step)))


def _flop(dims_text: str) -> float:
    """A Linear call's product, 2 x rows x in x out, from its input dims ([..., in] and [out, in]); 0 when
    not recorded."""
    try:
        dims = json.loads(dims_text) if dims_text else []
    except ValueError:
        return 0.0
    if not isinstance(dims, list) or len(dims) < 2 or not all(isinstance(d, list) and d for d in dims[:2]):
        return 0.0
    x, weight = dims[0], dims[1]
    if len(weight) != 2 or not all(isinstance(d, int) for d in [*x, *weight]):
        return 0.0
    return 2.0 * float(np.prod(x)) * weight[0]


def _float_inputs(types_text: str) -> bool:
    """Whether a Linear's input and weight are float32 (``"float"``)."""
    try:
        types = json.loads(types_text) if types_text else []
    except ValueError:
        return False
    return isinstance(types, list) and len(types) >= 2 and types[0] == "float" and types[1] == "float"
