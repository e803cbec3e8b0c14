"""Matrix products slowed by subnormal floats (tracekit.analyze.subnormals), on real captures made by
tests/data/cpu/make_subnormal_products.py: the same loop with subnormals, flushed, and flushed on a
core another process spins on."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from tracekit import api
from tracekit.analyze.classify import classify_rows
from tracekit.analyze.frame import frame_of
from tracekit.analyze.subnormals import slowing_products
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"
SUBNORMAL = DATA / "subnormal_products.pt.trace.json.gz"


def _found(table: pa.Table):
    frame = frame_of(table)
    steps = sorted({int(s) for s in frame.step[frame.rows("step")].tolist()})
    return slowing_products(frame, classify_rows(frame), steps)


def test_products_slowed_on_the_same_shapes_are_evidence_and_flushing_subnormals_the_first_remedy() -> None:
    """The backward products ran 20x slower in the later steps on the same shapes, and the report said
    only 'CPU compute-bound' with every step steady."""
    found = _found(load(SUBNORMAL))
    assert found is not None
    assert found.worst.startswith("aten::mm (") and found.worst_slow_ns > 10 * found.worst_fast_ns
    assert found.slowed_ratio > 2 * found.others_ratio and 0.3 < found.share < 0.8
    assert found.slow_step_ns > 2.5 * found.fast_step_ns
    r = api.report(SUBNORMAL).launch
    assert r.verdict == "CPU compute-bound"
    assert any(e.startswith("the same matrix products on the same shapes slowed down") for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("flush subnormal floats to zero: torch.set_flush_denormal(True)"), r.remedies
    ranking = next(e for e in r.evidence if e.startswith("remedies ordered by predicted saving"))
    assert "flushing subnormals" in ranking and "as the trace shows it" in ranking
    doc = json.loads(api.render(api.report(SUBNORMAL), "json"))
    assert doc["slowing_products"]["worst"] == found.worst and doc["slowing_products"]["calls_per_step"] >= 6


def test_the_same_loop_flushed_or_slowed_by_a_busy_core_is_not_called_subnormal() -> None:
    """Flushed, the products keep their rate; on a core another process spins on, every call slows
    alike (its slow calls are stalls: the thread was not running)."""
    for name in ("subnormal_products_flushed", "subnormal_products_contended"):
        path = DATA / f"{name}.pt.trace.json.gz"
        assert _found(load(path)) is None, name
        r = api.report(path).launch
        assert not any("subnormal" in x for x in r.remedies + r.evidence), name
    contended = api.report(DATA / "subnormal_products_contended.pt.trace.json.gz").launch
    assert any("op calls stalled" in e for e in contended.evidence), contended.evidence


def test_without_recorded_shapes_the_products_are_not_judged() -> None:
    """Same calls without shapes may be inputs that grew (a longer sequence): the rule needs shapes."""
    table = load(SUBNORMAL)
    at = table.schema.get_field_index("args")
    bare = table.set_column(at, table.schema.field(at), pa.nulls(table.num_rows, table.schema.field(at).type))
    assert _found(bare) is None


def test_a_series_whose_call_count_varies_between_steps_is_not_read_as_a_matrix(tmp_path: Path) -> None:
    """Gradient accumulation's optimizer steps add aten::copy_ and aten::fill_ calls every k-th step:
    their series have a call in every step, but not the same number. They were read as a steps x calls
    matrix anyway (cells of other calls, or past the end: an IndexError once the file's events came in
    another order, which put those series last). The same capture with its events shuffled in the file
    now gives the same report."""
    import gzip
    import random

    path = DATA / "grad_accumulation.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    random.Random(0).shuffle(doc["traceEvents"])
    shuffled = tmp_path / "shuffled.json"
    shuffled.write_text(json.dumps(doc))
    same, original = (json.loads(api.render(api.report(p), "json"))["verdict"] for p in (shuffled, path))
    assert same == original


def test_a_product_slow_in_one_step_only_is_a_stall_not_subnormal_drift() -> None:
    """The slowest third of 4 steps is one step: one product's wait there read as subnormal drift (a
    BERT inference loop, the same values every step, got the flush remedy beside the stall). The real
    capture's first three steps and one slowed step: not judged; with two slowed steps it is."""
    frame = frame_of(load(SUBNORMAL))
    classes = classify_rows(frame)
    assert slowing_products(frame, classes, [1, 2, 3, 12]) is None
    assert slowing_products(frame, classes, [1, 2, 3, 11, 12]) is not None


def test_products_slowed_by_another_threads_products_are_not_called_subnormal() -> None:
    """tests/data/cpu/fork_branches: a TorchScript fork's branch beside the main one on 2 cores, the
    same input every step. A main-thread aten::addmm took 15x as long in the slowest steps while the
    steps did not grow, other threads' ops running during 92% of it: the report told subnormal drift
    and the flush remedy."""
    path = DATA / "fork_branches.pt.trace.json.gz"
    assert _found(load(path)) is None
    r = api.report(path).launch
    assert r.slowing_products is None
    assert not any("subnormal" in x for x in r.remedies + r.evidence)
