"""Autograd's anomaly detection left on (tracekit.analyze.anomaly), on real captures made by
tests/data/cpu/make_anomaly_detection.py: the same MLP loop with it on and off."""

from __future__ import annotations

import json
from pathlib import Path

from tracekit import api
from tracekit.analyze.anomaly import anomaly_detection
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_anomaly_detection_left_on_is_evidence_and_turning_it_off_the_first_remedy() -> None:
    """5.2 ms a step with it on, 1.25 ms off; the report read "CPU compute-bound" with aten::t, whose time
    holds the forward's traceback capture, among the top ops, and said nothing of it."""
    found = anomaly_detection(frame_of(load(DATA / "anomaly_detection.pt.trace.json.gz")), None)
    assert found is not None and found.checks == 45 and 0 < found.share < 0.5
    r = api.report(DATA / "anomaly_detection.pt.trace.json.gz").launch
    assert any(e.startswith("autograd's anomaly detection is on") for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("turn autograd's anomaly detection off"), r.remedies
    doc = json.loads(api.render(api.report(DATA / "anomaly_detection.pt.trace.json.gz"), "json"))
    assert doc["anomaly_detection"]["checks_per_step"] == 45


def test_the_same_loop_without_it_is_not_told_so() -> None:
    assert anomaly_detection(frame_of(load(DATA / "anomaly_detection_off.pt.trace.json.gz")), None) is None
    r = api.report(DATA / "anomaly_detection_off.pt.trace.json.gz").launch
    assert not any("anomaly" in x for x in r.evidence + r.remedies)
