"""Steps of torch.profiler captures made without a schedule (no ProfilerStep#N): the calls of a
record_function around each iteration become the steps, and ranges that are not the loop's
iterations (the forward pass alone, per-layer ranges) do not. Real captures, made here."""

from __future__ import annotations

import json
import time

import pytest

import tracekit
from tracekit import schema

torch = pytest.importorskip("torch")


def _capture(path, iteration: str | None = None, forward: str | None = None, layer: str | None = None,
             train: bool = True, iterations: int = 5, pause_s: float = 0.0) -> None:
    """A small MLP's training (or inference) loop under torch.profiler with no schedule, with the
    ranges asked for: ``iteration`` around each iteration, ``forward`` around the forward pass,
    ``layer`` around each layer ("{j}" is the layer's number, "{i}" the iteration's); the loop
    sleeps ``pause_s`` between iterations, outside every range (untraced Python)."""
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    layers = [nn.Sequential(nn.Linear(128, 128), nn.ReLU()) for _ in range(3)]
    model = nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 128), torch.randn(32, 128)

    def run_layers(i: int) -> torch.Tensor:
        h = x
        for j, lay in enumerate(layers):
            if layer:
                with record_function(layer.format(i=i, j=j)):
                    h = lay(h)
            else:
                h = lay(h)
        return h

    def step(i: int) -> None:
        if forward:
            with record_function(forward):
                out = run_layers(i)
        else:
            out = run_layers(i)
        if train:
            opt.zero_grad()
            torch.nn.functional.mse_loss(out, y).backward()
            opt.step()

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(iterations):
            time.sleep(pause_s)
            if iteration:
                with record_function(iteration.format(i=i)):
                    step(i)
            else:
                step(i)
    prof.export_chrome_trace(str(path))


def _steps_from(table) -> str:
    return json.loads(table.schema.metadata[schema.META_TRACE_META_JSON.encode()]).get("steps_from", "")


def _step_rows(table) -> list[str]:
    return [n for n, k in zip(table["name"].to_pylist(), table["kind"].to_pylist(), strict=True) if k == "step"]


@pytest.mark.parametrize("label, expected", [("train_step", "train_step"), ("iteration {i}", "iteration #")])
def test_a_range_around_each_iteration_gives_the_steps(tmp_path, label, expected):
    path = tmp_path / "loop.pt.trace.json"
    _capture(path, iteration=label)
    table = tracekit.load(path)
    assert len(_step_rows(table)) == 5
    assert _steps_from(table).startswith(f"calls of {expected} (no step markers in the trace")
    assert tracekit.info(table).steps_from == _steps_from(table)  # `tracekit info` says where the steps came from
    kinds, steps = table["kind"].to_pylist(), table["step"].to_pylist()
    ops = [s for k, s in zip(kinds, steps, strict=True) if k == "cpu_op"]
    assert sorted(set(ops) - {None}) == [0, 1, 2, 3, 4] and ops.count(None) < 0.05 * len(ops)
    launch = tracekit.launch(table).result
    assert launch.steps is not None and len(launch.steps.steps) == 5
    assert any(f"from calls of {expected}" in line for line in tracekit.render(tracekit.launch(table), "markdown").splitlines())


@pytest.mark.parametrize("ranges", [
    {"forward": "forward"},                        # the forward pass only: backward and optimizer outside
    {"layer": "layer_{j}", "train": False},        # per-layer ranges of an inference loop: numbers repeat
    {"layer": "layer_{j}"},
])
def test_ranges_that_are_not_the_iterations_give_no_steps(tmp_path, ranges):
    path = tmp_path / "loop.pt.trace.json"
    _capture(path, **ranges)
    table = tracekit.load(path)
    assert _step_rows(table) == [] and _steps_from(table) == ""


def test_an_inference_loop_wrapped_per_call_gives_the_steps(tmp_path):
    path = tmp_path / "infer.pt.trace.json"
    _capture(path, iteration="predict", train=False)
    assert len(_step_rows(tracekit.load(path))) == 5


def test_the_iteration_range_wins_over_the_ranges_inside_it(tmp_path):
    path = tmp_path / "nested.pt.trace.json"
    _capture(path, iteration="train_step", forward="forward", layer="layer_{j}")
    table = tracekit.load(path)
    assert len(_step_rows(table)) == 5 and _steps_from(table).startswith("calls of train_step ")


def test_calls_that_span_little_of_the_loop_are_not_its_iterations(tmp_path):
    """A range around the forward pass of an inference loop that spends most of its time in untraced
    Python between the calls (as an nsys capture without CPU sampling sees any loop): the calls hold
    all the traced work, but not the loop's time, and are not taken as its steps."""
    path = tmp_path / "paused.pt.trace.json"
    _capture(path, iteration="predict", train=False, pause_s=0.05)
    table = tracekit.load(path)
    assert _step_rows(table) == [] and _steps_from(table) == ""


def test_a_range_inside_a_call_of_its_own_name_is_part_of_that_call(tmp_path):
    """The forward pass wrapped in a range of the iteration's name: only the outermost calls are the
    iterations (before, the nested calls made the name's calls overlap and no step was found)."""
    path = tmp_path / "same_name.pt.trace.json"
    _capture(path, iteration="train_step", forward="train_step")
    table = tracekit.load(path)
    rows = table.to_pylist()
    steps = [r for r in rows if r["kind"] == "step"]
    inner = [r for r in rows if r["kind"] == "user_range" and r["name"] == "train_step"]
    assert len(steps) == 5 and len(inner) == 5 and _steps_from(table).startswith("calls of train_step ")
    # The iterations, not the forward passes inside them: each forward's enclosing range is a step.
    assert all(rows[r["parent"]]["kind"] == "step" for r in inner)
    assert all(s["dur_ns"] > f["dur_ns"] for s, f in zip(steps, inner, strict=True))

