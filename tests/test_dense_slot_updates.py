"""A Keras optimizer that makes an embedding's gradient dense and updates the whole table each step
(tracekit/analyze/dense_slot_updates.py): real captures of model.fit under Adam and plain SGD
(tests/data/tf/make_embedding_optimizers.py), and Adam on a table little larger than a batch's lookups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracekit
from tracekit import api
from tracekit.analyze.dense_slot_updates import dense_slot_updates
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "tf"


def test_adam_on_a_large_table_is_told_to_update_only_the_rows_looked_up() -> None:
    """200,000 x 64 table: 21.6-24.7 ms a batch under Adam, 4.4-5.0 under plain SGD; the report read "CPU
    compute-bound: look at the op breakdown"."""
    path = DATA / "embedding_adam.xplane.pb"
    launch = tracekit.report(path).launch
    found = launch.dense_slot_updates
    assert found is not None and found.scope.startswith("adam") and found.densify == 2
    assert found.densify_ns > 8 * found.lookup_ns and found.share > 0.5
    assert launch.remedies[0].startswith("update only the rows looked up"), launch.remedies
    assert json.loads(api.render(api.report(path), "json"))["dense_slot_updates"]["densify"] == 2


@pytest.mark.parametrize("name", ["embedding_sgd", "text_in_model", "text_in_pipeline", "keras_fit"])
def test_sparse_updates_and_small_tables_are_not_told(name: str) -> None:
    """Plain SGD scatters the rows looked up; the text captures' Adam densifies a 5,000-row table read
    2,560 times a batch (its scatter 2.3-4x the gather), where sparse updates would save little."""
    assert dense_slot_updates(frame_of(load(DATA / f"{name}.xplane.pb")), None) is None
