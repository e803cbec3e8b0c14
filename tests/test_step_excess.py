"""Why a step left out is long (tracekit.analyze.step_excess): what in it ran longer than in the median
step, on real captures."""

from __future__ import annotations

import json
from pathlib import Path

from tracekit import api
from tracekit.analyze.step_excess import NO_OP

DATA = Path(__file__).parent / "data"
NEXT = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def test_an_epochs_first_step_is_explained_by_the_loaders_restart():
    """A DataLoader with 2 workers and persistent_workers=False, 3 epochs of 4 batches
    (tests/data/cpu/make_loader_epochs.py): steps 4 and 8 begin epochs, 30-200 ms against ~1.5 ms; the
    report said only "outlier". Their excess is the loader's __next__ (the old workers' shut-down, the new
    iterator's first batch, 2 calls) and time outside any traced call (the new workers starting)."""
    steps = api.report(DATA / "cpu" / "loader_epochs.pt.trace.json.gz").launch.steps
    assert sorted(steps.excess) == [4, 8]
    median = steps.median_ns
    for number, parts in steps.excess.items():
        names = {p.name for p in parts}
        assert names == {NEXT, NO_OP}, parts
        assert next(p.calls for p in parts if p.name == NEXT) == 2
        beyond = int(steps.steps.dur_ns[steps.steps.step == number].iloc[0]) - median
        assert sum(p.extra_ns for p in parts) > 0.8 * beyond
    said = api.report(DATA / "cpu" / "loader_epochs.pt.trace.json.gz").launch.evidence
    assert any("outlier; beyond the median step: " in e and NEXT in e for e in said), said


def test_warm_up_steps_name_their_one_time_work():
    """Keras's first fit step builds the tf.function's graph; a cat grown one piece at a time is slow in
    its first step, where its 200 calls allocate."""
    keras = api.report(DATA / "tf" / "keras_fit.xplane.pb").launch.steps
    assert keras.excess[0][0].name == "tf.function-graph_building" and keras.excess[0][0].extra_ns > 100e6
    cat = api.report(DATA / "cpu" / "growing_cat.pt.trace.json.gz").launch.steps
    assert cat.excess[1][0].name == "aten::cat" and cat.excess[1][0].calls == 200


def test_steps_all_used_have_no_excess_and_the_json_lists_it():
    steady = api.report(DATA / "cpu" / "sample_loop.pt.trace.json.gz")
    assert steady.launch.steps.excess == {}
    doc = json.loads(api.render(api.report(DATA / "cpu" / "loader_epochs.pt.trace.json.gz"), "json"))
    assert {e["step"] for e in doc["steps"]["excess"]} == {4, 8}
    assert {"name", "extra_ns", "calls"} <= set(doc["steps"]["excess"][0])


def test_a_names_median_step_time_counts_the_steps_without_it_as_zero():
    """The median over the steps used is taken from the (step, name) pairs present (memory follows the
    rows, not steps x names): against the direct median on 500 random cases."""
    import numpy as np

    from tracekit.analyze.step_excess import _median_per_name

    rng = np.random.default_rng(0)
    for _ in range(500):
        n_used = int(rng.integers(1, 12))
        steps = np.arange(n_used + 3)
        used = np.sort(rng.choice(steps, n_used, replace=False))
        rows = int(rng.integers(1, 40))
        step_of, code = rng.choice(steps, rows), rng.integers(0, 5, rows)
        dur = rng.integers(1, 100, rows).astype(float)
        names = np.unique(code)
        want = [np.median([dur[(step_of == s) & (code == c)].sum() for s in used]) for c in names]
        assert np.allclose(_median_per_name(step_of, code, dur, used, names), want)
