"""A forward recomputed in backward by activation checkpointing (tracekit.analyze.recompute), on real
captures made by tests/data/cpu/make_recompute.py: 6 LayerNorm + MLP blocks trained checkpointed
(non-reentrant and reentrant), not checkpointed, and with a gradient penalty (a double backward)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracekit import api
from tracekit.analyze.frame import frame_of
from tracekit.analyze.recompute import recompute
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


@pytest.mark.parametrize(("name", "reentrant"), [("recompute_checkpoint", False), ("recompute_reentrant", True)])
def test_a_checkpointed_forward_run_again_in_backward_is_told(name: str, reentrant: bool) -> None:
    """24.5 ms a step checkpointed against 18.6 ms not; the report read "CPU compute-bound" and said
    nothing of the second forward."""
    found = recompute(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None)
    assert found is not None
    # 6 blocks: LayerNorm and two Linear each, run again in backward.
    assert (found.forward_ops, found.top_op, found.reentrant) == (18, "aten::linear", reentrant)
    assert 0.1 <= found.share < 0.4
    doc = json.loads(api.render(api.report(DATA / f"{name}.pt.trace.json.gz"), "json"))
    assert doc["recompute"]["forward_ops_per_step"] == 18
    r = api.report(DATA / f"{name}.pt.trace.json.gz").launch
    assert any(e.startswith("backward runs the forward again") for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("where memory allows, checkpoint fewer blocks or none"), r.remedies


@pytest.mark.parametrize("name", ["recompute_none", "recompute_gradient_penalty"])
def test_backward_without_a_recompute_is_not(name: str) -> None:
    """Without checkpointing nothing in backward carries a sequence number; a gradient penalty's double
    backward does (11.6% of the step, aten::t and aten::mm most), but runs no module's forward op."""
    assert recompute(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None) is None
    r = api.report(DATA / f"{name}.pt.trace.json.gz").launch
    assert not any("checkpoint" in x for x in r.remedies)


def test_without_the_args_nothing_is_claimed() -> None:
    """The sequence numbers are in the ops' args: without them the ops' names alone claim nothing."""
    table = load(DATA / "recompute_checkpoint.pt.trace.json.gz")
    assert recompute(frame_of(table.drop_columns(["args"])), None) is None
