"""A compiled function split by graph breaks (tracekit.analyze.graph_breaks), on real captures made by
tests/data/cpu/make_graph_breaks.py, and the stored compiled-optimizer capture, whose nested regions
split nothing."""

from __future__ import annotations

import json
from pathlib import Path

from tracekit import api
from tracekit.analyze.frame import frame_of
from tracekit.analyze.graph_breaks import graph_breaks
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_a_graph_break_is_told_with_the_eager_op_between_the_graphs() -> None:
    """float(y.sum()) inside the compiled function: 0.302 ms a call against 0.271 without the break; the
    report read "CPU compute-bound" with two compiled regions among the top ops and said nothing of why."""
    found = graph_breaks(frame_of(load(DATA / "graph_breaks.pt.trace.json.gz")), None)
    assert found is not None and found.graphs == 2 and found.between[0] == "aten::item"
    r = api.report(DATA / "graph_breaks.pt.trace.json.gz").launch
    assert any(e.startswith("the compiled function runs as 2 graphs a call") for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("remove the graph breaks: TORCH_LOGS=graph_breaks"), r.remedies
    doc = json.loads(api.render(api.report(DATA / "graph_breaks.pt.trace.json.gz"), "json"))
    assert doc["graph_breaks"]["graphs"] == 2


def test_one_graph_is_not() -> None:
    assert graph_breaks(frame_of(load(DATA / "graph_breaks_none.pt.trace.json.gz")), None) is None


def test_regions_that_only_call_into_the_next_split_nothing() -> None:
    """A compiled optimizer step nests three regions (optimizer_step, torch.optim's step wrapper, the step)
    of which only the innermost calls a compiled graph."""
    assert graph_breaks(frame_of(load(DATA / "compiled_optimizer.pt.trace.json.gz")), None) is None
