"""Inference with the model left in training mode (tracekit.analyze.train_mode), on real captures made by
tests/data/cpu/make_train_mode.py: a transformer encoder and an MLP with dropout run under
inference_mode in training and in eval mode, and the MLP trained."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from tracekit import api
from tracekit.analyze.frame import frame_of
from tracekit.analyze.train_mode import train_mode_inference
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


@pytest.mark.parametrize(("name", "calls"), [("train_mode_encoder", 16), ("train_mode_mlp", 6)])
def test_dropout_drawing_masks_at_inference_says_eval_was_not_called(name: str, calls: int) -> None:
    """157-191 ms a call in training mode against 74-87 in eval mode (the encoder); the report read "CPU
    compute-bound" with aten::bernoulli_ its top op and no word of why. The encoder draws 16 masks a
    call: 3 dropouts a layer and one in each layer's attention."""
    found = train_mode_inference(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None)
    assert found is not None and found.calls == calls and found.per_step
    assert 0.2 < found.share < 0.6
    r = api.report(DATA / f"{name}.pt.trace.json.gz").launch
    assert any(e.startswith("inference runs with the model in training mode") for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("call model.eval() before inference"), r.remedies
    doc = json.loads(api.render(api.report(DATA / f"{name}.pt.trace.json.gz"), "json"))
    assert doc["train_mode_inference"]["mask_calls"] == calls


@pytest.mark.parametrize("name", ["train_mode_encoder_eval", "train_mode_mlp_eval", "train_mode_training"])
def test_eval_mode_and_training_are_not(name: str) -> None:
    """In eval mode aten::dropout is still called and returns its input (no mask); a training step
    draws masks where it should: it runs backward."""
    assert train_mode_inference(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None) is None
    assert not any("model.eval()" in x for x in api.report(DATA / f"{name}.pt.trace.json.gz").launch.remedies)


def test_without_marked_steps_the_share_is_of_the_ops_busy_time() -> None:
    """An inference script profiled without prof.step(): the same calls, counted over the whole trace."""
    table = load(DATA / "train_mode_mlp.pt.trace.json.gz")
    kinds = ["user_range" if k == "step" else k for k in table.column("kind").to_pylist()]
    unmarked = table.set_column(table.schema.get_field_index("kind"), "kind", pa.array(kinds).dictionary_encode())
    found = train_mode_inference(frame_of(unmarked), None)
    assert found is not None and not found.per_step and found.calls == 6 * 3
    assert 0.2 < found.share < 0.6


def test_a_training_trace_whose_evaluation_steps_draw_masks_says_eval_was_not_called() -> None:
    """Every third step an evaluation batch under no_grad, the model left in training mode: 15.4-16.7 ms an
    evaluation step against 9.1-9.4 ms after model.eval(). The training steps draw their masks as they
    should; the evaluation steps (set apart by steps.py: no backward among steps with it) are judged
    alone, and the remedy is not ranked against the training step's time."""
    found = train_mode_inference(frame_of(load(DATA / "train_mode_validation.pt.trace.json.gz")), None, [2, 5, 8])
    assert found is not None and (found.evaluation_steps, found.calls) == (3, 6) and 0.2 < found.share < 0.6
    r = api.report(DATA / "train_mode_validation.pt.trace.json.gz").launch
    assert any(e.startswith("the evaluation steps (3, no backward in them) run with the model in training mode")
               for e in r.evidence), r.evidence
    assert any(x.startswith("call model.eval() before the evaluation batches") for x in r.remedies), r.remedies
    assert not any("dropout masks" in e for e in r.evidence if e.startswith("remedies ordered by predicted saving"))
    # With model.eval() around the evaluation batches: nothing.
    assert api.report(DATA / "train_mode_validation_eval.pt.trace.json.gz").launch.train_mode_inference is None


def test_batch_norm_normalizing_by_the_batch_at_inference_is_told_unranked() -> None:
    """A CNN with BatchNorm and no dropout: 3.02 ms a call in training mode, 2.11 in eval mode. Its
    aten::batch_norm calls record training=True (and running statistics kept): told, with no share."""
    found = train_mode_inference(frame_of(load(DATA / "train_mode_batch_norm.pt.trace.json.gz")), None)
    assert found is not None and (found.calls, found.batch_norms, found.share) == (0, 3, 0.0)
    r = api.report(DATA / "train_mode_batch_norm.pt.trace.json.gz").launch
    assert any("BatchNorm normalizes by each batch's statistics" in e for e in r.evidence), r.evidence
    assert any(x.startswith("call model.eval() before inference") for x in r.remedies)
    assert not any("dropout masks" in e for e in r.evidence if e.startswith("remedies ordered"))
    assert train_mode_inference(frame_of(load(DATA / "train_mode_batch_norm_eval.pt.trace.json.gz")), None) is None


def test_dropout_switched_on_beside_batch_norm_in_eval_mode_is_monte_carlo_not_a_missing_eval() -> None:
    """tests/data/cpu/mc_dropout: model.eval(), then the dropout layers back to train(), 8 passes a step.
    The recorded BatchNorm calls say eval mode; the report said "model.eval() was not called" and ranked
    calling it at the masks' time, which Monte Carlo dropout does not save."""
    r = api.report(DATA / "mc_dropout.pt.trace.json.gz").launch
    found = r.train_mode_inference
    assert found is not None and found.dropout_alone and found.eval_batch_norms == 16 and found.batch_norms == 0
    said = next(e for e in r.evidence if "dropout" in e and "eval mode" in e)
    assert "model.eval() was called and the dropout layers switched back on" in said
    assert "model.eval() was not called" not in said
    assert not any(x.startswith("call model.eval()") for x in r.remedies)
    assert not any("the dropout masks' time" in e for e in r.evidence if e.startswith("remedies ordered"))
