"""TF ops run eagerly (tracekit.analyze.tf_eager), on real captures: tests/data/tf/eager_variable_updates
(a tf.function training step followed by a moving average of the weights in eager Python),
run_eagerly (Keras fit with run_eagerly=True), function_loop and keras_fit (graph steps only)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracekit
from tracekit.analyze.frame import frame_of
from tracekit.analyze.tf_eager import eager_beside_function, eager_ops
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "tf"


def test_eager_variable_updates_beside_a_tf_function_are_named_with_their_fix() -> None:
    """The step already ran as a tf.function; the moving average's 36 eager ops a step (2.6-2.8 ms a
    step against 0.96-1.02 ms inside the function, unprofiled) were told "run the step as a graph, with
    tf.function around a custom step" or only XLA."""
    r = tracekit.report(DATA / "eager_variable_updates.xplane.pb").launch
    found = r.eager_beside_function
    assert found is not None and 30 <= found.calls <= 40 and 0.15 <= found.share < 0.6
    assert found.updates_variables and "Mul" in found.types
    fix = next(x for x in r.remedies if x.startswith("move the eagerly run ops into the tf.function"))
    assert "use_ema=True" in fix
    assert not any(x.startswith("the step's ops run eagerly, one at a time") for x in r.remedies)
    assert any(e.startswith("beside the step's tf.function, 36 ops a step run eagerly") for e in r.evidence), r.evidence
    assert "the eager ops' calls" in next(e for e in r.evidence if e.startswith("remedies ordered by predicted saving"))


def test_a_step_run_eagerly_whole_keeps_the_graph_remedy_and_names_its_eager_ops() -> None:
    r = tracekit.report(DATA / "run_eagerly.xplane.pb").launch
    assert r.eager_beside_function is None
    fix = next(x for x in r.remedies if x.startswith("the step's ops run eagerly, one at a time"))
    assert "(the eager ops, by their time: " in fix and "MatMul" in fix


@pytest.mark.parametrize("name", ["function_loop", "keras_fit"])
def test_graph_steps_have_no_eager_ops_beside_them(name: str) -> None:
    frame = frame_of(load(DATA / f"{name}.xplane.pb"))
    assert eager_beside_function(frame, None) is None
    assert eager_ops(frame, None).rows.size <= 2 * max(1, frame.rows("step").size)
