"""TF's numeric checks or debug dumps left on (tracekit/analyze/tf_debug_checks.py): real captures with
enable_check_numerics and enable_dump_debug_info (tests/data/tf/make_debug_checks.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracekit
from tracekit import api
from tracekit.analyze.frame import frame_of
from tracekit.analyze.tf_debug_checks import CHECK_NUMERICS, DUMP_DEBUG_INFO, debug_checks
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "tf"


@pytest.mark.parametrize(("name", "setting"), [("debug_check_numerics", CHECK_NUMERICS),
                                               ("debug_dump_info", DUMP_DEBUG_INFO)])
def test_debug_checks_left_on_are_told_off_first(name: str, setting: str) -> None:
    """enable_dump_debug_info made a step 4.94 ms against 0.73; the reports called the checks "ops with no
    class ... arithmetic the class rules do not know"."""
    path = DATA / f"{name}.xplane.pb"
    launch = tracekit.report(path).launch
    found = launch.debug_checks
    assert found is not None and found.settings == (setting,) and found.checks > 300 and found.share > 0.1
    assert launch.remedies[0].startswith("turn the debug checks off outside debugging: drop " + setting)
    assert not any("ops with no class" in e for e in launch.evidence), launch.evidence
    assert json.loads(api.render(api.report(path), "json"))["debug_checks"]["settings"] == [setting]


@pytest.mark.parametrize("name", ["keras_fit", "fit_jit", "tf_decoder", "eager_loop"])
def test_traces_without_debug_checks_get_nothing(name: str) -> None:
    assert debug_checks(frame_of(load(DATA / f"{name}.xplane.pb")), None) is None


def test_a_few_cheap_checks_on_a_loss_are_not_told() -> None:
    """tf.debugging.check_numerics on the logits and the loss, 6 CheckNumerics ops a step with their
    gradients': a choice that costs next to nothing (0.2% of the step), under the 5% share a debug
    setting left on is told from."""
    frame = frame_of(load(DATA / "debug_check_loss.xplane.pb"))
    ops = frame.rows("cpu_op")
    checks = [r for r in ops.tolist() if frame.names[int(frame.name_code[r])].endswith(":CheckNumerics")]
    assert len(checks) >= 3 * 3  # the count alone would tell them
    assert debug_checks(frame, None) is None
