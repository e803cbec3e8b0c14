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
    # Ranked by half the products' time (float32 runs them at twice the rate): before the fused optimizer.
    assert r.remedies[0].startswith("keep the model and its inputs in float32"), r.remedies
    doc = json.loads(api.render(api.report(DATA / "float64_products.pt.trace.json.gz"), "json"))
    assert doc["float64_products"]["calls"] == 24


def test_the_same_model_in_float32_is_not() -> None:
    assert float64_products(frame_of(load(DATA / "float64_products_float32.pt.trace.json.gz")), None) is None


def test_a_float64_lstm_layer_is_told_once_by_its_own_rule() -> None:
    """Its per-timestep products are float64 too; the recurrent rule already says to keep it in float32."""
    r = api.report(DATA / "lstm_float64.pt.trace.json.gz").launch
    assert r.float64_products is None
    assert sum("float32" in x for x in r.remedies) == 1, r.remedies
