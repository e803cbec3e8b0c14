"""16-bit matrix products a CPU computes in software (tracekit.analyze.emulated_precision), on real
captures made by tests/data/cpu/make_bf16_products.py: one bf16-autocast training loop restricted to AVX2
(no native bf16 math) and the same loop with this CPU's AMX."""

from __future__ import annotations

import json
from pathlib import Path

from tracekit import api
from tracekit.analyze.emulated_precision import emulated_products
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_emulated_bf16_products_are_evidence_and_float32_the_first_remedy() -> None:
    """The bf16 products ran at 2-17 GFLOP/s, 91% of the step (109-115 ms a step against 7-9 ms in
    float32, unprofiled); the report said "CPU compute-bound: look at the op breakdown"."""
    path = DATA / "bf16_products_emulated.pt.trace.json.gz"
    found = emulated_products(frame_of(load(path)), None)
    assert found is not None and found.dtype == "bfloat16" and found.gflops < 10 and found.share > 0.5
    assert found.worst.startswith("aten::mm (")
    r = api.report(path).launch
    assert any(e.startswith("the bfloat16 matrix products run at") for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("run float32 on this CPU"), r.remedies
    assert json.loads(api.render(api.report(path), "json"))["emulated_products"]["calls"] == found.calls


def test_native_bf16_products_and_float32_ones_are_not_called_emulated() -> None:
    native = DATA / "bf16_products_native.pt.trace.json.gz"
    assert emulated_products(frame_of(load(native)), None) is None
    assert not any("float32 on this CPU" in x for x in api.report(native).launch.remedies)
    # float32 products, however slow, are the stall rule's (stalls.py), not this one's
    assert emulated_products(frame_of(load(DATA / "subnormal_products.pt.trace.json.gz")), None) is None


def test_16bit_linear_products_converting_to_float32_are_called_by_their_large_products_rate() -> None:
    """nn.Linear's 16-bit product has a fallback that converts to float32 as it goes: 51-56 GFLOP/s on two
    cores, above the scalar loop's 20 but a quarter of float32's rate; the 16-bit MLP's inference took
    7.3-7.5 ms a step against 2.0-2.4 ms in float32 (make_linear_16bit.py). Only the large products'
    rate (native kernels ran them at 298 GFLOP/s or more on one core) gives it away."""
    for name, dtype in (("linear_16bit_f16", "float16"), ("linear_16bit_bf16_avx2", "bfloat16")):
        path = DATA / f"{name}.pt.trace.json.gz"
        found = emulated_products(frame_of(load(path)), None)
        assert found is not None and found.dtype == dtype and found.converted, name
        assert 20 < found.gflops < 75 and found.share > 0.9
        assert "converts each product to float32" in found.evidence()
        remedies = api.report(path).launch.remedies
        assert remedies[0].startswith("run float32 on this CPU"), remedies
        # bfloat16 is the way out for half on a CPU with native bf16 math only
        assert ("or bfloat16 where the CPU has native bf16 math" in remedies[0]) == (dtype == "float16")


def test_native_bf16_linear_inference_is_not_called_converted() -> None:
    """The same MLP in bfloat16 on the AVX512_BF16 CPU: 0.52 ms a step, 3.7x faster than float32."""
    assert emulated_products(frame_of(load(DATA / "linear_16bit_bf16_native.pt.trace.json.gz")), None) is None
