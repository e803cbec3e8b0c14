"""The steps' own Python work (tracekit.analyze.python_work), on real captures made by
tests/data/cpu/make_python_in_step.py: an MLP step whose input features are computed in Python from
nested lists, without and with Python stacks; and one saving a checkpoint each step
(make_checkpoint_in_step.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tracekit import api
from tracekit.analyze.frame import frame_of
from tracekit.analyze.launch import _step_windows
from tracekit.analyze.python_work import python_work
from tracekit.analyze.whatif import whatif
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"
PLAIN = DATA / "python_in_step.pt.trace.json.gz"
STACK = DATA / "python_in_step_stack.pt.trace.json.gz"


def test_python_work_between_the_ops_is_not_called_dispatch_and_its_remedy_comes_first() -> None:
    """Unprofiled, 2.6 ms a step with the features made in the step against 0.50 ms without: the report
    called the Python framework dispatch, with torch.compile first and no-dispatch predicting 90%."""
    r = api.report(PLAIN).launch
    assert r.verdict == "CPU/framework-bound"
    split = next(e for e in r.evidence if "outside any compute op" in e)
    assert "Python work of the step's own" in split, split
    said = next(e for e in r.evidence if "with no op running (" in e)
    assert said.startswith(f"{r.python_work.share:.0%} of step time is in stretches of 200 µs or more") and "with_stack=True" in said
    assert 0.5 < r.python_work.share < 0.95
    assert r.remedies[0].startswith("take the Python work out of the step"), r.remedies
    # whatif's dispatch scenarios keep the Python: no-dispatch saves what dispatch there is, not the Python.
    w = whatif(load(PLAIN))
    no_dispatch = next(s for s in w.scenarios if s.name == "no-dispatch")
    assert no_dispatch.saving_ns < 0.35 * w.replayed_step_ns and "the step's own Python work" in no_dispatch.assumptions
    assert json.loads(api.render(api.report(PLAIN), "json"))["python_work"]["share"] == r.python_work.share


def test_with_python_stacks_the_work_is_named() -> None:
    r = api.report(STACK).launch
    said = next(e for e in r.evidence if "with no op running (" in e)
    assert "make_python_in_step.py(17): features" in said and "with_stack=True" not in said, said


def test_steps_waiting_for_collectives_or_warming_up_are_not_python_work() -> None:
    """DDP's reducer waits for gloo's all-reduce on other threads (stretches of up to 3.5 ms with no op on
    the loop's thread); a loop's first iteration initializes lazily (stretches up to 2.3 ms): neither is
    the step's own Python."""
    for name in ("ddp_gloo_rank0", "ddp_accumulation_rank0", "optimizer_loop", "range_loop"):
        r = api.report(DATA / f"{name}.pt.trace.json.gz").launch
        assert r.python_work is None, (name, r.evidence)
    frame = frame_of(load(DATA / "optimizer_loop.pt.trace.json.gz"))
    first = frame.step[frame.rows("step")].min()
    assert python_work(frame, *_step_windows(frame, [int(first)]), 1) is not None  # the warm-up iteration has them


def test_a_jax_steps_python_is_told_apart_from_the_runtimes_dispatch() -> None:
    """tests/data/jax/make_python_in_step.py: features made in Python inside each StepTraceAnnotation,
    then a jitted update. It read "98% framework dispatch: the step is already one jitted call, give each
    call more work" and no-dispatch predicted 100%: JAX's runtime ranges on the loop's thread
    (PjitFunction, DevicePut) are its work, and the Python tracer names the rest."""
    path = Path(__file__).parent / "data" / "jax" / "python_in_step.xplane.pb"
    r = api.report(path).launch
    said = next(e for e in r.evidence if "with no op running (" in e)
    assert "make_python_in_step.py:" in said and " features, in " in said and "before PjitFunction(update)" in said, said
    assert r.remedies[0].startswith("take the Python work out of the step"), r.remedies
    no_dispatch = next(s for s in whatif(load(path)).scenarios if s.name == "no-dispatch")
    assert "the step's own Python work" in no_dispatch.assumptions


JAX = Path(__file__).parent / "data" / "jax"


def test_a_jax_step_run_op_by_op_is_dispatch_not_the_steps_own_python() -> None:
    """A Flax NNX training step not jitted (tests/data/jax/make_flax_nnx.py): JAX dispatches each of its
    primitives as a computation of its own, with tracing and abstract evaluation in Python between
    them (hundreds of µs each; partial_eval.py, core.py, ad.py in a capture with Python frames). A
    bigger one's report said 58% was "the step's own Python, which a compiler does not remove", and
    whatif's no-dispatch kept it; jitted, the step ran 14x faster. It is dispatch, and jit removes it."""
    path = JAX / "flax_nnx_eager.xplane.pb"
    r = api.report(path).launch
    assert r.python_work is None and r.verdict == "CPU/framework-bound", r.evidence
    assert r.remedies[0].startswith("jax.jit the whole step"), r.remedies
    w = whatif(load(path))
    no_dispatch = next(s for s in w.scenarios if s.name == "no-dispatch")
    assert no_dispatch.saving_ns > 0.8 * w.replayed_step_ns, no_dispatch


def test_flax_nnx_graph_traversal_in_the_stretches_gets_flaxs_remedy() -> None:
    """The same step under nnx.jit: one jitted computation a step, and before it Flax walking the model's
    object graph in Python (graphlib's flatten), named by the Python frames JAX records. Timed on 2 CPU
    cores for a 2-layer transformer: 23-25 ms a step with nnx.jit, 19 ms with nnx.cached_partial, 18 ms
    split once and jax.jit-ed."""
    from tracekit.analyze.python_work import FLAX_GRAPH_TRAVERSAL, FLAX_NNX_REMEDY

    r = api.report(JAX / "flax_nnx_jit.xplane.pb").launch
    assert r.python_work is not None and FLAX_GRAPH_TRAVERSAL.search(r.python_work.python), r.python_work
    assert r.remedies[0] == FLAX_NNX_REMEDY, r.remedies
    # The standard library's graphlib (TopologicalSorter) has no such functions.
    assert not FLAX_GRAPH_TRAVERSAL.search("in Python 60% (graphlib.py:242 static_order)")
    # Python work the trace has frames for but no function holds half of: said so, no hint to record them.
    from dataclasses import replace
    spread = replace(r.python_work, python="", frames_recorded=True, source="jax").evidence()
    assert "many short calls" in spread and "with_stack" not in spread and "native code" not in spread, spread
    hint = replace(r.python_work, python="", frames_recorded=False, source="jax").evidence()
    assert "python_tracer_level=1" in hint and "torch.profiler" not in hint, hint


def test_compare_names_the_python_tracer_of_the_traces_framework() -> None:
    """The jitted capture traced Python's calls (JAX's default), the eager one not: the caveat named
    torch.profiler's with_stack=True for a pair of JAX traces."""
    said = api.compare([JAX / "flax_nnx_eager.xplane.pb", JAX / "flax_nnx_jit.xplane.pb"]).result.findings
    caveat = next(line for line in said if "profiled with Python's calls traced" in line)
    assert "jax.profiler's Python tracer" in caveat and "torch.profiler" not in caveat, caveat


def test_a_loop_that_marks_no_steps_still_has_its_python_work_told_apart_from_dispatch() -> None:
    """tests/data/cpu/environment_loop: no schedule (no ProfilerStep), each iteration's update in
    record_function("train_step"), 3 ms of an environment's step (untraced) between them. The calls were
    not taken as steps (a third of the loop's time), the whole capture was read as 87% dispatch with
    no-dispatch predicted to save 88%, and the report advised wrapping each iteration in that range."""
    path = DATA / "environment_loop.pt.trace.json.gz"
    r = api.report(path).launch
    assert r.python_work is not None and r.python_work.share > 0.5
    said = next(e for e in r.evidence if e.startswith("no steps are marked"))
    assert "the 8 calls of train_step hold the loop's work" in said and "wrap each iteration" not in said
    w = whatif(load(path))
    no_dispatch = next(s for s in w.scenarios if s.name == "no-dispatch")
    assert no_dispatch.saving_ns < 0.4 * w.measured_step_ns  # the waits stay: the Python work is not dispatch


def test_a_checkpoint_saved_each_step_is_named_by_the_op_before_it() -> None:
    """torch.save of the model's and Adam's state each step (tests/data/cpu/make_checkpoint_in_step.py):
    the serialization records no op, a stretch right after state_dict()'s aten::detach calls; the
    evidence says what that op is, and the remedy lists checkpoints and saving every N steps."""
    r = api.report(DATA / "checkpoint_in_step.pt.trace.json.gz").launch
    assert r.python_work is not None and r.python_work.after == "aten::detach" and r.python_work.share > 0.2
    said = next(x for x in r.evidence if "with no op running (" in x)
    assert "after aten::detach, which state_dict() runs for each tensor it returns" in said, said
    fix = next(x for x in r.remedies if x.startswith("take the Python work out of the step"))
    assert "checkpoints and logs written" in fix and "save and log every N steps" in fix, fix
