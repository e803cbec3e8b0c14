"""Inference run with grad mode on (tracekit.analyze.grad_mode), on real captures made by
tests/data/cpu/make_inference_grad_mode.py: one MLP inference loop with grad mode on and under
torch.inference_mode()."""

from __future__ import annotations

import json
from pathlib import Path

from tracekit import api
from tracekit.analyze.frame import frame_of
from tracekit.analyze.grad_mode import inference_with_grad
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_an_inference_loop_with_grad_mode_on_is_told_inference_mode() -> None:
    """0.332 ms a call with grad mode on, 0.277 ms under inference_mode; the report said nothing of it."""
    found = inference_with_grad(frame_of(load(DATA / "inference_grad_mode.pt.trace.json.gz")))
    assert found is not None and found.share > 0.9
    r = api.report(DATA / "inference_grad_mode.pt.trace.json.gz").launch
    assert any(e.startswith("the forward runs with autograd on") for e in r.evidence), r.evidence
    assert any(x.startswith("run inference under torch.inference_mode()") for x in r.remedies), r.remedies
    doc = json.loads(api.render(api.report(DATA / "inference_grad_mode.pt.trace.json.gz"), "json"))
    assert doc["inference_with_grad"]["share"] == found.share


def test_the_same_loop_under_inference_mode_is_not() -> None:
    assert inference_with_grad(frame_of(load(DATA / "inference_mode.pt.trace.json.gz"))) is None


def test_a_training_step_with_its_backward_is_not() -> None:
    """Its forward ops carry sequence numbers too; the backward they are for is in the trace."""
    table = load(DATA / "sample_loop.pt.trace.json.gz")
    assert inference_with_grad(frame_of(table)) is None
