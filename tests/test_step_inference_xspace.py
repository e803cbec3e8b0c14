"""Steps of TF and JAX captures whose program marks none (no ``step_num``): the calls of its TraceMe
or ``tf.function`` around each iteration become the steps where the evidence allows, and the XLA
runtime's own ranges never do. Real captures: tests/data/tf/make_unnumbered_loop.py and
tests/data/jax/make_unnumbered_loop.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracekit
from tracekit import schema

DATA = Path(__file__).parent / "data"


def _steps_from(table) -> str:
    return json.loads(table.schema.metadata[schema.META_TRACE_META_JSON.encode()]).get("steps_from", "")


@pytest.mark.parametrize("trace", ["unnumbered_trace", "function_loop"])
def test_tf_loops_without_step_numbers_get_steps_from_their_calls(trace):
    """Trace("train_step") around a tf.function of that name, and the tf.function alone: each of the 8
    iterations is a step; in the first, the program's range, not TF's call TraceMe nested in it."""
    table = tracekit.load(DATA / "tf" / f"{trace}.xplane.pb")
    rows = table.to_pylist()
    step_rows = [r for r in rows if r["kind"] == "step"]
    assert len(step_rows) == 8 and _steps_from(table).startswith("calls of train_step (no step markers")
    calls_of_tf = [r for r in rows if r["kind"] in ("step", "user_range") and "tf_function_call" in (r["args"] or "")]
    assert len(calls_of_tf) == 8
    if trace == "unnumbered_trace":
        assert all("tf_function_call" not in (r["args"] or "") for r in step_rows)
        assert all(rows[r["parent"]]["kind"] == "step" for r in calls_of_tf)
    assert set(range(8)) <= {r["step"] for r in rows if r["kind"] == "cpu_op"}
    assert len(tracekit.launch(table).result.steps.steps) == 8


@pytest.mark.parametrize("trace", ["unnumbered_annotation.xplane.pb", "unnumbered_annotation.perfetto_trace.json.gz"])
def test_a_jax_annotation_around_each_iteration_gives_the_steps(trace):
    """The XSpace and the trace-viewer JSON that jax.profiler writes of the same capture."""
    table = tracekit.load(DATA / "jax" / trace)
    assert sum(k == "step" for k in table["kind"].to_pylist()) == 8
    assert _steps_from(table).startswith("calls of train_step (no step markers")


def test_jitted_calls_are_steps_where_they_hold_the_work_and_bound_them_where_they_dispatch_it():
    """Without an annotation the loop's only per-iteration range is PjitFunction(train_step). In one
    capture XLA's CPU thread ran each step's ops before the call returned: the calls hold the work and
    are the steps. In another (jit_loop_async) the call returned once the step was dispatched and the
    ops ran after it, while the loop blocked on the result: the calls hold none of the work, and the
    iterations run from one call's start to the next, each holding its step's ops. Neither takes one
    of the runtime's per-call ranges (PjRt's execution, its buffer waits)."""
    held = tracekit.load(DATA / "jax" / "jit_loop.xplane.pb")
    assert sum(k == "step" for k in held["kind"].to_pylist()) == 8
    assert _steps_from(held).startswith("calls of PjitFunction(train_step) (no step markers")
    dispatched = tracekit.load(DATA / "jax" / "jit_loop_async.xplane.pb")
    assert sum(k == "step" for k in dispatched["kind"].to_pylist()) == 8
    assert _steps_from(dispatched).startswith("iterations from one call of PjitFunction(train_step) to the next")
    report = tracekit.launch(dispatched).result
    # Each iteration holds its step's 10 ops (the loop blocks on every result before the next call).
    assert report.steps is not None and len(report.steps.steps) >= 7
    per_step = report.breakdown.host[report.breakdown.host.step >= 0].ops
    assert (per_step == 10).all(), per_step.tolist()
    names = set(dispatched["name"].to_pylist())
    assert "PjitFunction(train_step)" in names
    assert any("Execute" in n for n in names if n)  # the runtime's ranges are there, and were not taken


def test_dispatches_that_run_ahead_of_their_work_bound_no_iterations():
    """Keras's fit on the JAX backend (tests/data/jax/make_keras_jax_fit.py): each batch's jitted call
    returns once dispatched and the calls run ahead of XLA's threads, so the windows between calls hold
    0 to 296 ops and most of the epoch's ops run after the last call: no steps, rather than 32 steps
    each holding some other batch's work."""
    table = tracekit.load(DATA / "jax" / "keras_jax_fit.xplane.pb")
    assert "step" not in table["kind"].to_pylist() and _steps_from(table) == ""
    assert table["name"].to_pylist().count("PjitFunction(train_step)") == 64  # each call nests one in another
    # The report says how jax.profiler marks steps, and that a mark must hold the work, not its dispatch.
    hint = [e for e in tracekit.launch(table).result.evidence if e.startswith("no steps are marked")]
    assert len(hint) == 1 and "StepTraceAnnotation" in hint[0] and "block_until_ready" in hint[0], hint


@pytest.mark.parametrize("trace", ["h200/jax_train", "h200/jax_scan_lstm", "jax/jit_loop_async"])
def test_the_xla_runtimes_own_ranges_are_never_candidates(trace):
    """The ranges JAX's runtime records once per jitted call or loop trip (PjRt's execution, buffer
    waits, command buffers, an XLA while loop's [iter=N]) are not the program's iterations: on real
    captures (the H200 ones mark their steps; this reads the candidates the search would try)."""
    import numpy as np

    from tracekit.ingest import columns, step_inference, xplane

    table = xplane.read(DATA / f"{trace}.xplane.pb")
    kind = columns.kind_codes(table.column("kind"))
    ranges = np.flatnonzero(kind == schema.KIND_CODES["user_range"])
    start = step_inference._int64(table.column("start_ns"))
    end = start + step_inference._int64(table.column("dur_ns"))
    code, valid = columns.values_and_validity(step_inference._unified(table.column("name")))
    parent = np.where(*step_inference._valid_or(table.column("parent"), -1))
    names = step_inference._dictionary_values(table.column("name"))
    labels = [label for label, _ in step_inference._candidates(ranges[valid[ranges]], code, names, start, end, parent)]
    assert any(label.startswith("PjitFunction(") for label in labels)
    runtime = ("Execute", "Wait for", "[iter=", "Thunks::", "command_buffer", "Semaphore", "XLA GPU module", "cuLaunch")
    assert not [label for label in labels if any(r in label for r in runtime)]
    assert any(any(r in n for r in runtime) for n in names)  # they are in the trace


def test_an_eager_tf_loop_over_a_dataset_has_its_fetches_as_iteration_starts():
    """A tf.GradientTape loop run eagerly over ``dataset.take(10)`` with no TraceMe and no tf.function
    (tests/data/tf/make_eager_fetch_loop.py): 10 iterations from one ``IteratorGetNext`` to the next (an
    11th finds the data exhausted); the pipeline's building before the first fetch is in none."""
    table = tracekit.load(DATA / "tf" / "eager_fetch_loop.xplane.pb")
    assert sum(r == "step" for r in table.column("kind").to_pylist()) == 10
    assert _steps_from(table).startswith("iterations from one batch fetch (EagerLocalExecute: IteratorGetNext)")
    assert len(tracekit.launch(table).result.steps.steps) == 10


def test_fetches_of_one_call_are_one_iteration():
    """Keras's predict called once per sample (tests/data/tf/make_predict_per_call.py, 20 calls): each
    call fetches its batch and then finds the data exhausted, so the windows between fetches alternate
    (running the model, building the next call's pipeline): two fetches are one iteration, 19 whole ones."""
    table = tracekit.load(DATA / "tf" / "predict_per_call.xplane.pb")
    steps = tracekit.launch(table).result.steps.steps
    assert len(steps) == 19
    # Each a whole predict call: 46 ms unprofiled, its pipeline built each time.
    assert 30e6 < float(steps.dur_ns.median()) < 80e6


def test_the_last_fetch_begins_an_iteration_when_no_fetch_ends_it():
    """Keras's fit(run_eagerly=True) over 4 batches (tests/data/tf/make_run_eagerly.py) knows its batch
    count and never finds the data exhausted: 4 fetches, the last iteration ending with the loop thread's
    last row (30.9 ms a batch unprofiled). An exhausted fetch's stretch runs next to no ops and is not
    one: the eager loop over dataset.take(10) keeps 10 steps from 11 fetches."""
    table = tracekit.load(DATA / "tf" / "run_eagerly.xplane.pb")
    steps = tracekit.launch(table).result.steps.steps
    assert len(steps) == 4 and _steps_from(table).startswith("iterations from one batch fetch")
    assert 15e6 < float(steps.dur_ns.median()) < 60e6
    assert len(tracekit.launch(tracekit.load(DATA / "tf" / "eager_fetch_loop.xplane.pb")).result.steps.steps) == 10
