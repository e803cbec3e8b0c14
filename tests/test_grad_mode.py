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
    # 114 ops at 1.3-3.5 µs: 5-15% of the steps, where inference_mode measured 0.332 -> 0.277 ms (17%),
    # 0.316 -> 0.277 ms (12%) with the parameters frozen
    assert 0.03 < found.saving < 0.12 < found.saving_high < 0.25
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


def test_grad_mode_on_where_the_ops_are_few_and_long_is_not_told() -> None:
    """tests/data/cpu/cholesky_inference: Gaussian-process regression with grad mode on, 140 ops a step
    of tens of milliseconds (Cholesky, solve, eigenvalues): the report told inference_mode, which
    would save a fraction of a percent."""
    path = DATA / "cholesky_inference.pt.trace.json.gz"
    assert inference_with_grad(frame_of(load(path))) is None
    r = api.report(path).launch
    assert r.inference_with_grad is None and not any("inference_mode" in x for x in r.remedies)


def test_the_saving_is_a_range_from_frozen_to_trained_parameters() -> None:
    """tests/data/cpu/float64_solver: grad mode on, nothing requiring grad (a solver). The report said
    inference_mode would save 10% at 3.5 µs an op, what an MLP whose parameters require grad saves; with
    none requiring grad it is 1.3 µs (measured unprofiled: no difference beyond noise for the solver)."""
    found = inference_with_grad(frame_of(load(DATA / "float64_solver.pt.trace.json.gz")))
    assert found is not None and found.saving < 0.06 and found.saving_high > 2 * found.saving
    assert "1.3 µs with its parameters frozen to 3.5 µs with them requiring grad" in found.evidence()
