"""Matrix products run in float64 (tracekit.analyze.float64), on real captures made by
tests/data/cpu/make_float64.py: one MLP trained in float64 and in float32."""

from __future__ import annotations

import json
from pathlib import Path

from tracekit import api
from tracekit.analyze.float64 import float64_products
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_a_model_trained_in_float64_is_told_float32() -> None:
    """19.7 ms a step in float64, 12.3 ms in float32; the report read "CPU compute-bound" and named the
    optimizer, not the dtype."""
    found = float64_products(frame_of(load(DATA / "float64_products.pt.trace.json.gz")), None)
    assert found is not None and found.calls == 24 and found.share > 0.3
    assert found.largest.startswith("aten::mm ") and "512" in found.largest  # a product of the 512-wide layers
    r = api.report(DATA / "float64_products.pt.trace.json.gz").launch
    assert any(e.startswith("the matrix products run in float64") for e in r.evidence), r.evidence
    # Ranked by half the float64 ops' time (the products at twice the rate, the others moving half the
    # bytes): before the fused optimizer, whose one pass is costed too (measured here unprofiled: 4.84 ms
    # a step, 3.07 ms with fused=True, 2.11 ms in float32).
    assert r.remedies[0].startswith("keep the model and its inputs in float32"), r.remedies
    (ranked,) = [e for e in r.evidence if e.startswith("remedies ordered by predicted saving")]
    assert "half the float64 ops' time" in ranked and "fused-optimizer" in ranked, ranked
    doc = json.loads(api.render(api.report(DATA / "float64_products.pt.trace.json.gz"), "json"))
    assert doc["float64_products"]["calls"] == 24


def test_the_other_float64_ops_are_half_of_the_remedy_too() -> None:
    """Adam's update on float64 tensors (its sqrt, div and in-place ops) and the activations' elementwise
    ops: a fifth of the step beside the products; a predicted saving from the products alone (25%) was
    under what fused=True is predicted to save (30%), though float32 saves more (2.11 against 3.07 ms)."""
    found = float64_products(frame_of(load(DATA / "float64_products.pt.trace.json.gz")), None)
    assert found is not None and 0.2 <= found.other_share <= 0.4, found
    assert found.saving == (found.share + found.other_share) / 2
    r = api.report(DATA / "float64_products.pt.trace.json.gz").launch
    assert r.remedies.index(found.remedy()) < next(i for i, x in enumerate(r.remedies) if "fused=True" in x)


def test_the_same_model_in_float32_is_not() -> None:
    assert float64_products(frame_of(load(DATA / "float64_products_float32.pt.trace.json.gz")), None) is None


def test_a_float64_lstm_layer_is_told_once_by_its_own_rule() -> None:
    """Its per-timestep products are float64 too; the recurrent rule already says to keep it in float32."""
    r = api.report(DATA / "lstm_float64.pt.trace.json.gz").launch
    assert r.float64_products is None
    assert sum("float32" in x for x in r.remedies) == 1, r.remedies


def test_float64_products_outside_any_model_get_the_precision_caveat_not_model_double() -> None:
    """tests/data/cpu/float64_solver: a block conjugate gradient in float64, no model. It was told to keep
    "the model and its inputs in float32 ... rather than calling model.double()"; a solver may need
    float64, and its products are neither in a layer nor in a backward."""
    found = float64_products(frame_of(load(DATA / "float64_solver.pt.trace.json.gz")), None)
    assert found is not None and not found.in_layers
    assert found.remedy().startswith("where the computation tolerates float32")
    model = float64_products(frame_of(load(DATA / "float64_products.pt.trace.json.gz")), None)
    assert model is not None and model.in_layers and model.remedy().startswith("keep the model and its inputs in float32")
