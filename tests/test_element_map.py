"""A TF function mapped over a batch one element at a time (tracekit/analyze/element_map.py): real captures
of an MLP written per sample and mapped with tf.map_fn, keras.ops.map and tf.vectorized_map
(tests/data/tf/make_element_map.py); every other stored TF trace has no such loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracekit
from tracekit import api
from tracekit.analyze.element_map import element_map
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "tf"


@pytest.mark.parametrize("name", ["element_map_map_fn", "element_map_keras_map"])
def test_a_function_mapped_per_element_is_told_with_vectorized_map(name: str) -> None:
    """4.45 ms a step mapped per element, 0.54 ms under tf.vectorized_map, 0.25 ms on the batch; the
    report read "CPU compute-bound: look at the op breakdown"."""
    path = DATA / f"{name}.xplane.pb"
    launch = tracekit.report(path).launch
    found = launch.element_map
    assert found is not None and found.scope == "map" and found.iterations == 32 and found.gradient
    assert found.share > 0.5 and found.op.endswith(":_MklTranspose")
    assert launch.remedies[0].startswith("map on the whole batch at once: tf.vectorized_map"), launch.remedies
    assert json.loads(api.render(api.report(path), "json"))["element_map"]["iterations"] == 32


def test_vectorized_map_has_no_loop() -> None:
    assert element_map(frame_of(load(DATA / "element_map_vectorized.xplane.pb")), None) is None


@pytest.mark.parametrize("name", ["tf_decoder", "sliced_sequence_while", "bidirectional_gru", "input_py_map"])
def test_other_while_loops_are_not_maps(name: str) -> None:
    """A decoder's and a recurrent layer's tf.while_loop, and tf.data's map, are not tf.map_fn."""
    assert element_map(frame_of(load(DATA / f"{name}.xplane.pb")), None) is None
