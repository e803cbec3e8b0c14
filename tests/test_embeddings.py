"""Embedding tables trained with dense gradients (tracekit.analyze.embeddings), on real captures made
by tests/data/cpu/make_embedding_gradients.py."""

from __future__ import annotations

import json
from pathlib import Path

from tracekit import api
from tracekit.analyze.embeddings import dense_embedding_gradients
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_a_dense_embedding_gradient_is_evidence_with_the_tables_size_and_sparse_is_the_remedy() -> None:
    """The backward zero-fills a 100,000 x 32 gradient each step for 5,120 lookups, and SGD updates
    every row: 61% of the profiled step here, and no report said so (the top op read aten::fill_)."""
    found = dense_embedding_gradients(frame_of(load(DATA / "embedding_dense.pt.trace.json.gz")), None)
    assert found is not None and (found.rows, found.dim, found.lookups, found.calls) == (100_000, 32, 5_120, 3)
    assert found.share > 0.3
    r = api.report(DATA / "embedding_dense.pt.trace.json.gz").launch
    assert any(e.startswith("the embeddings' dense gradient") and "100,000 x 32" in e for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("give the embedding sparse gradients") and "not all 100,000" in r.remedies[0]
    doc = json.loads(api.render(api.report(DATA / "embedding_dense.pt.trace.json.gz"), "json"))
    assert doc["embedding_gradients"]["rows"] == 100_000


def test_a_sparse_embedding_gets_neither() -> None:
    assert dense_embedding_gradients(frame_of(load(DATA / "embedding_sparse.pt.trace.json.gz")), None) is None
    r = api.report(DATA / "embedding_sparse.pt.trace.json.gz").launch
    assert not any("sparse gradients" in x for x in r.remedies)
    assert "embedding_gradients" not in json.loads(api.render(api.report(DATA / "embedding_sparse.pt.trace.json.gz"),
                                                               "json"))
