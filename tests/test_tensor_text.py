"""Tensors formatted as text in the step (tracekit/analyze/tensor_text.py): real captures of an MLP step
that prints its logits through PyTorch's repr, and of the same step printing them as values
(tests/data/cpu/make_tensor_text.py); every other stored trace has none."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracekit
from tracekit.analyze.frame import frame_of
from tracekit.analyze.tensor_text import tensor_text
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_a_tensor_printed_each_step_is_told() -> None:
    """The step read "CPU/framework-bound ... cut per-op dispatch: torch.compile", its 40 value reads a
    step only a reason whatif's no-dispatch is not predicted: a 4x10 tensor's repr is 21% of it."""
    launch = tracekit.report(DATA / "tensor_text.pt.trace.json.gz").launch
    found = launch.tensor_text
    assert found is not None and (found.tensors, found.steps, found.values) == (3, 3, 120)
    assert 0.1 < found.share < 0.4, found.share
    assert "tensor_text" in launch.findings()
    assert any(x.startswith("format values, not tensors") for x in launch.remedies), launch.remedies


def test_values_printed_are_not_told() -> None:
    """loss.item() and logits.tolist(): one read each, no repr scan."""
    assert tracekit.report(DATA / "tensor_text_values.pt.trace.json.gz").launch.tensor_text is None


@pytest.mark.parametrize("path", sorted(p.name for p in DATA.glob("*.pt.trace.json.gz") if not p.name.startswith("tensor_text")))
def test_no_other_stored_capture_formats_tensors(path: str) -> None:
    assert tensor_text(frame_of(load(DATA / path)), None) is None
