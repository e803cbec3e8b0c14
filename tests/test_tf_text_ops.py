"""TF string and lookup-table ops in a training step (tracekit/analyze/launch.py, _ops_xla_cannot_compile):
XLA cannot compile them, so the XLA remedy first moves them into tf.data. Real captures of Keras 3's fit
of a text classifier with TextVectorization in the model and in the pipeline
(tests/data/tf/make_text_vectorization.py)."""

from __future__ import annotations

from pathlib import Path

import tracekit

DATA = Path(__file__).parent / "data" / "tf"


def _remedies(name: str) -> list[str]:
    return tracekit.report(tracekit.load(DATA / f"{name}.xplane.pb")).launch.remedies


def test_text_preprocessing_in_the_step_is_moved_to_tf_data_before_xla() -> None:
    """Before: "run the step as a graph with XLA: tf.function(jit_compile=True)", which Keras ignores for
    such a model ("Model doesn't support jit_compile=True")."""
    remedies = _remedies("text_in_model")
    said = next(x for x in remedies if x.startswith("the step runs string and lookup-table ops"))
    assert "LookupTableFindV2" in said and "StringSplitV2" in said and "dataset.map(text_vectorization)" in said
    assert not any(x.startswith("run the step as a graph with XLA") for x in remedies)


def test_text_preprocessing_on_tf_datas_threads_is_the_pipelines() -> None:
    remedies = _remedies("text_in_pipeline")
    assert not any("string and lookup-table ops" in x for x in remedies)
    assert any(x.startswith("run the step as a graph with XLA") for x in remedies), remedies
