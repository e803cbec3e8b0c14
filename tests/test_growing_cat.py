"""A tensor grown by cat a piece at a time (tracekit.analyze.growing_cat), on real captures made by
tests/data/cpu/make_growing_cat.py: one recurrence's outputs grown by cat, then collected in a list."""

from __future__ import annotations

import json
from pathlib import Path

from tracekit import api
from tracekit.analyze.frame import frame_of
from tracekit.analyze.growing_cat import _grown, growing_cat
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_a_tensor_grown_by_cat_is_told_to_cat_once() -> None:
    """33.7 ms a step growing, 19.0 ms with one cat; the report named two of the 200 cats among the top
    ops, each of its own shape, and said nothing of the pattern."""
    r = api.report(DATA / "growing_cat.pt.trace.json.gz").launch
    found = r.growing_cat
    assert found is not None and found.pieces == 200 and found.final == "1600x512"
    assert found.chains == found.steps  # one grown tensor a step used
    assert found.share > 0.2
    assert any(e.startswith("the step grows a tensor by concatenation") for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("collect the pieces in a list and torch.cat them once"), r.remedies
    doc = json.loads(api.render(api.report(DATA / "growing_cat.pt.trace.json.gz"), "json"))
    assert doc["growing_cat"]["pieces"] == 200


def test_pieces_collected_in_a_list_are_not() -> None:
    assert growing_cat(frame_of(load(DATA / "growing_cat_list.pt.trace.json.gz")), None) is None


def test_what_a_cat_of_two_can_grow_into() -> None:
    assert _grown((0, 512), (8, 512)) == [(8, 512)]  # torch.empty(0, 512) takes the piece's shape
    assert _grown((0,), (8, 512)) == [(8, 512)]  # so does torch.tensor([])
    assert _grown((16, 512), (8, 512)) == [(24, 512)]
    assert _grown((2, 4, 7, 64), (2, 4, 1, 64)) == [(2, 4, 8, 64)]  # a KV cache, along the sequence
    assert _grown((16, 512), (8, 256)) == []
