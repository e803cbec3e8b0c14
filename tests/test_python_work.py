"""The steps' own Python work (tracekit.analyze.python_work), on real captures made by
tests/data/cpu/make_python_in_step.py: an MLP step whose input features are computed in Python from
nested lists, without and with Python stacks."""

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
