"""TF's executor leaves its inexpensive ops untraced below host tracer level 3 (analyze.untraced_ops).

tests/data/tf/make_tracer_levels.py: one Keras LSTM graph step profiled at level 2 (the default) and
at level 3. At level 2 the step read CPU/framework-bound on "58% of step time is outside any compute
op", though a third of the step was TF's executor running BiasAdd, Sigmoid, AddV2 and the loop's
control ops untraced; the level-3 capture of the same step records them.
"""

from __future__ import annotations

import json
from pathlib import Path

import tracekit
from tracekit.analyze import untraced_ops
from tracekit.analyze.frame import frame_of
from tracekit.analyze.verdicts import Evidence, judge
from tracekit.ingest.columns import trace_extra, with_extra

DATA = Path(__file__).parent / "data" / "tf"
LEVEL_2 = DATA / "tracer_level2_keras_lstm.xplane.pb"
LEVEL_3 = DATA / "tracer_level3_keras_lstm.xplane.pb"
SAID = "inside TF's graph executor with no op traced"


def test_the_reader_gives_the_captures_tracer_levels():
    assert trace_extra(tracekit.load(LEVEL_2))["profile_options"] == {
        "host_tracer_level": 2, "device_tracer_level": 1, "python_tracer_level": 0}
    assert trace_extra(tracekit.load(LEVEL_3))["profile_options"]["host_tracer_level"] == 3


def test_at_level_2_the_untraced_executor_time_decides_and_the_verdict_says_so():
    r = tracekit.launch(LEVEL_2).result
    assert r.verdict == "undetermined", (r.verdict, r.evidence)
    (said,) = [e for e in r.evidence if SAID in e]
    assert "at host_tracer_level 2 (the default)" in said and "counted as compute it is not" in said
    share = int(said.split("%")[0])
    assert 15 <= share <= 45, said  # a third of the step, measured when it was captured
    assert r.remedies[0].startswith("to see the inexpensive ops, profile at host_tracer_level=3"), r.remedies


def test_at_level_3_every_op_is_traced_and_nothing_is_said():
    table = tracekit.load(LEVEL_3)
    frame = frame_of(table)
    assert not untraced_ops.ops_may_be_untraced(frame)
    assert {"BiasAdd", "Sigmoid", "AddV2", "Merge"} <= {n.rsplit(":", 1)[-1] for n in frame.names}
    r = tracekit.launch(table).result
    assert not any(SAID in e for e in r.evidence) and r.verdict != "undetermined", (r.verdict, r.evidence)


def test_a_level_3_capture_that_does_not_record_its_level_is_told_by_its_events():
    """Without profile_options (older TF, a converted trace) the events only level 3 records show it."""
    table = with_extra(tracekit.load(LEVEL_3), profile_options=None)
    frame = frame_of(table)
    assert untraced_ops.host_tracer_level(frame) is None
    assert not untraced_ops.ops_may_be_untraced(frame)
    level_2 = with_extra(tracekit.load(LEVEL_2), profile_options=None)
    assert untraced_ops.ops_may_be_untraced(frame_of(level_2))


def test_whatif_no_dispatch_is_uncertain_where_the_untraced_time_is_a_quarter_of_its_saving():
    (scenario,) = [s for s in tracekit.whatif(LEVEL_2).result.scenarios if s.name == "no-dispatch"]
    assert scenario.uncertain and SAID in scenario.assumptions, scenario.assumptions
    (scenario,) = [s for s in tracekit.whatif(LEVEL_3).result.scenarios if s.name == "no-dispatch"]
    assert SAID not in scenario.assumptions


def test_the_rule_holds_only_where_the_untraced_time_decides():
    base = {"has_ops": True, "dispatch_share": 0.58, "compute_step_share": 0.42}
    assert judge(Evidence(**base, untraced_op_share=0.30))[0] == "undetermined"
    assert judge(Evidence(**base, untraced_op_share=0.05))[0] == "CPU/framework-bound"
    assert judge(Evidence(**base))[0] == "CPU/framework-bound"


def test_critical_path_says_the_untraced_ops_are_not_on_the_path():
    level_2 = tracekit.critical_path(LEVEL_2)
    doc = json.loads(tracekit.render(level_2, "json"))
    span = doc["window_with_work_ns"]
    assert 0.15 * span <= doc["untraced_executor_ns"] <= 0.45 * span, doc["untraced_executor_ns"]
    assert "inside TF's graph executor with no op traced" in tracekit.render(level_2, "markdown")
    assert json.loads(tracekit.render(tracekit.critical_path(LEVEL_3), "json"))["untraced_executor_ns"] == 0


def test_compare_says_when_two_captures_were_made_at_different_levels():
    """The level-3 capture runs 1,007 ops a step against ~100 at level 2: not work level 2 lacks."""
    findings = tracekit.compare([LEVEL_2, LEVEL_3]).result.findings
    (said,) = [f for f in findings if "host_tracer_level 3" in f]
    assert said.startswith("B was captured at host_tracer_level 3 and A at 2") and "ops A ran untraced" in said
    assert findings[0] == said  # it qualifies every figure after it
    assert not any("host_tracer_level" in f for f in tracekit.compare([LEVEL_2, LEVEL_2]).result.findings)


def test_info_shows_the_captures_tracer_levels():
    assert tracekit.info(tracekit.load(LEVEL_2)).capture_options == "host_tracer_level 2, device_tracer_level 1, python_tracer_level 0"
    assert tracekit.info(tracekit.load(DATA.parent / "cpu" / "lstm_layer.pt.trace.json.gz")).capture_options == ""


def test_unreadable_profile_options_are_left_out():
    """A damaged or foreign options stat reads as no options (the events then decide), not an error."""
    import base64

    from tracekit.ingest.xplane import _profile_options

    assert _profile_options({"bytes_b64": base64.b64encode(b"\x10\xff").decode(), "size": 2}) is None  # cut varint
    assert _profile_options({"bytes_b64": "not base64!"}) is None
    assert _profile_options("host_tracer_level: 2") is None
    assert _profile_options({"bytes_b64": base64.b64encode(b"\x10\x03").decode()})["host_tracer_level"] == 3
