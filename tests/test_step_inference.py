"""Steps of torch.profiler captures made without a schedule (no ProfilerStep#N): the calls of a
record_function around each iteration become the steps, and ranges that are not the loop's
iterations (the forward pass alone, per-layer ranges) do not. Real captures, made here."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import TRACES, needs_shared

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
    {"layer": "layer_{j}"},                        # per-layer ranges: numbers repeat
])
def test_ranges_that_are_not_the_iterations_leave_the_steps_to_the_optimizer(tmp_path, ranges):
    """Not the loop's iterations, these ranges give no steps; the training loop's optimizer steps do."""
    path = tmp_path / "loop.pt.trace.json"
    _capture(path, **ranges)
    table = tracekit.load(path)
    assert _step_rows(table) == [f"Iteration#{i}" for i in range(5)]
    assert _steps_from(table).startswith("training iterations ending with Optimizer.step#SGD.step (no step markers")


def test_ranges_of_an_inference_loop_that_are_not_its_iterations_give_no_steps(tmp_path):
    path = tmp_path / "loop.pt.trace.json"
    _capture(path, layer="layer_{j}", train=False)  # per-layer ranges of an inference loop: numbers repeat
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



# Training loops profiled with no schedule and no range of the user's around each iteration
# (tests/data/cpu/make_optimizer_loops.py): torch.optim records each optimizer step as a range.
CPU_DATA = Path(__file__).parent / "data" / "cpu"


def test_a_training_loop_without_step_markers_has_its_optimizer_iterations_as_steps():
    """Each iteration ends where its optimizer step ends; the first holds the loop's start-up and is
    left out of the verdict, which read the whole capture before (start-up included)."""
    table = tracekit.load(CPU_DATA / "optimizer_loop.pt.trace.json.gz")
    assert _step_rows(table) == [f"Iteration#{i}" for i in range(6)]
    assert _steps_from(table) == "training iterations ending with Optimizer.step#SGD.step (no step markers in the trace)"
    rows = table.select(["kind", "step", "parent", "depth", "tid"]).to_pylist()
    main = rows[next(i for i, r in enumerate(rows) if r["kind"] == "step")]["tid"]
    ops = [r for r in rows if r["kind"] == "cpu_op" and r["tid"] == main]
    assert all(r["step"] is not None for r in ops)  # every op of the loop's thread is in an iteration
    steps = {i for i, r in enumerate(rows) if r["kind"] == "step"}
    assert all(r["parent"] is not None for r in ops) and all(r["depth"] >= 1 for r in ops)
    assert {r["parent"] for r in ops if r["depth"] == 1} <= steps  # top-level ops are the iterations' children
    launch = tracekit.launch(table).result
    assert [s for s in launch.steps.steps.status] == ["warm-up"] + ["steady"] * 5
    assert not any("no steps are marked" in e for e in launch.evidence), launch.evidence


def test_two_optimizers_stepped_in_turn_are_one_iteration():
    """A GAN's discriminator and generator rounds differ in work: two optimizer steps are one iteration."""
    table = tracekit.load(CPU_DATA / "gan_loop.pt.trace.json.gz")
    assert len(_step_rows(table)) == 5
    assert ", 2 calls an iteration (optimizers of one class stepped in turn)" in _steps_from(table)


def test_two_optimizers_of_one_class_whose_calls_run_the_same_ops_are_told_apart_by_their_backward_passes():
    """A GAN's two Adams over networks of equal parameter counts: their calls run the same ops, but
    the generator's round backpropagates through both networks: 6 iterations of two calls."""
    table = tracekit.load(CPU_DATA / "gan_adam_loop.pt.trace.json.gz")
    assert _step_rows(table) == [f"Iteration#{i}" for i in range(6)]
    assert ", 2 calls an iteration (optimizers of one class stepped in turn)" in _steps_from(table)


def test_an_evaluation_pass_every_other_iteration_does_not_pair_the_iterations():
    """One SGD, an evaluation pass after every other iteration: the rounds alternate in op count
    (which alone paired them before, as if two optimizers were stepped in turn), but the optimizer's
    calls and the backward passes are alike: 8 iterations."""
    table = tracekit.load(CPU_DATA / "eval_every_other_loop.pt.trace.json.gz")
    assert _step_rows(table) == [f"Iteration#{i}" for i in range(8)]
    assert _steps_from(table) == "training iterations ending with Optimizer.step#SGD.step (no step markers in the trace)"


def test_no_iteration_is_inferred_inside_a_range_around_the_whole_loop():
    """The loop inside one record_function("epoch"): iterations would not nest in it, so none is made."""
    table = tracekit.load(CPU_DATA / "epoch_range_loop.pt.trace.json.gz")
    assert _step_rows(table) == [] and _steps_from(table) == ""


def test_the_inferred_iterations_survive_a_parquet_round_trip(tmp_path):
    from tracekit.cli import main

    out = tmp_path / "t.parquet"
    assert main(["ingest", str(CPU_DATA / "optimizer_loop.pt.trace.json.gz"), "-o", str(out)]) == 0
    table = tracekit.load(out)
    assert len(_step_rows(table)) == 6 and _steps_from(table).startswith("training iterations")


@pytest.mark.parametrize("name", ["optimizer_loop", "gan_loop", "epoch_range_loop", "range_loop", "fetch_loop"])
def test_a_trace_ingested_window_by_window_gets_the_steps_the_whole_file_reader_infers(tmp_path, name):
    """``tracekit ingest --window-mb`` (the larger-than-memory path) infers the same steps from the
    written file's columns: the same table, row for row, and the same metadata; a trace whose ranges
    make no loop is written once, untouched."""
    import pyarrow.parquet as pq

    from tracekit.ingest import kineto_windows

    if not kineto_windows.available():
        pytest.skip("the C scanner is not built: no windows")
    path = CPU_DATA / f"{name}.pt.trace.json.gz"
    out = tmp_path / "w.parquet"
    kineto_windows.write_parquet(path, out, window_bytes=16 << 10, gz=path.suffix == ".gz")
    assert pq.ParquetFile(out).metadata.num_row_groups > 2  # windows: the test reads the windowed path
    windowed, whole = tracekit.load(out), tracekit.load(path)
    assert windowed.schema.metadata == whole.schema.metadata
    assert windowed.column_names == whole.column_names
    assert all(windowed[c].to_pylist() == whole[c].to_pylist() for c in whole.column_names), name
    assert bool(_step_rows(windowed)) == (name != "epoch_range_loop")
    if name == "range_loop":
        assert _steps_from(windowed).startswith("calls of train_step")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_without_the_c_scanner_the_windowed_ingest_reads_the_whole_file_and_infers_the_steps(tmp_path, monkeypatch):
    """No C scanner (no compiler at install time): the whole file is read, with the steps it infers."""
    from tracekit.ingest import kineto_windows

    monkeypatch.setattr(kineto_windows, "available", lambda: False)
    out = tmp_path / "w.parquet"
    kineto_windows.write_parquet(CPU_DATA / "optimizer_loop.pt.trace.json.gz", out, gz=True)
    assert _step_rows(tracekit.load(out)) == [f"Iteration#{i}" for i in range(6)]


def test_a_windowed_ingest_without_the_memory_to_infer_steps_says_so(tmp_path, monkeypatch, capsys):
    """Where inference would take more than half the memory available, the windowed ingest writes the
    trace without steps and says why: on stderr, in the trace metadata, in `tracekit info`."""
    from tracekit.cli import main
    from tracekit.ingest import kineto_windows

    if not kineto_windows.available():
        pytest.skip("the C scanner is not built: no windows")
    monkeypatch.setattr(kineto_windows, "_available_memory", lambda: 200 << 10)  # 761 events need ~223 KB
    out = tmp_path / "w.parquet"
    assert main(["ingest", str(CPU_DATA / "optimizer_loop.pt.trace.json.gz"), "-o", str(out), "--window-mb", "1"]) == 0
    err = capsys.readouterr().err
    assert "steps not inferred: the trace marks no steps, and inferring them" in err and "MB available" in err
    table = tracekit.load(out)
    assert _step_rows(table) == [] and _steps_from(table) == ""
    assert "needs ~0.2 MB, more than half the 0.2 MB available" in tracekit.info(table).steps_not_inferred
    assert main(["info", str(out)]) == 0
    assert "none marked; not inferred: the trace marks no steps" in " ".join(capsys.readouterr().out.split())


@needs_shared
def test_a_public_training_trace_without_step_markers():
    """HTA's step_based_trace sample: 5 SGD iterations on a GPU, no ProfilerStep (its last step cut by
    the capture's end). Read as a whole before, start-up included; now its first iteration (3.9 ms,
    2.5x the others) is warm-up and the verdict reads the other four."""
    path = TRACES / "hta" / "with_gpu_user_annotation" / "step_based_trace_2543932.json.gz"
    launch = tracekit.launch(path).result
    assert list(launch.steps.steps.status) == ["warm-up"] + ["steady"] * 4
    assert launch.steps.origin.startswith("training iterations ending with Optimizer.step#SGD.step")


def test_an_inference_loop_over_a_dataloader_has_its_fetches_as_iteration_starts():
    """No schedule, no range, no optimizer (tests/data/cpu/make_fetch_loop.py): each iteration runs from
    one DataLoader ``__next__`` to the next; the 13th fetch finds the loader exhausted and ends the 12th.
    The verdict read the whole capture before ("no steps are marked")."""
    table = tracekit.load(CPU_DATA / "fetch_loop.pt.trace.json.gz")
    assert _step_rows(table) == [f"Iteration#{i}" for i in range(12)]
    assert _steps_from(table) == ("iterations from one batch fetch (enumerate(DataLoader)#_SingleProcessDataLoaderIter"
                                  ".__next__) to the next (no step markers in the trace)")
    launch = tracekit.launch(table).result
    assert len(launch.steps.steps) == 12 and not any("no steps are marked" in e for e in launch.evidence)


def test_batches_fetched_before_the_work_are_not_iterations():
    """``for x in list(loader)``: the 12 fetches run back to back before any work, so the windows
    between them hold none of the loop's work: no steps."""
    table = tracekit.load(CPU_DATA / "fetch_loop_prefetched.pt.trace.json.gz")
    assert _step_rows(table) == [] and _steps_from(table) == ""


def _capture_with_stack(path, loop: str) -> None:
    """A small MLP's loop under torch.profiler(with_stack=True), no schedule: ``train`` (SGD, no range),
    ``epoch`` (the same inside a record_function("epoch") around the whole loop) or ``fetch`` (inference
    over a DataLoader)."""
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, record_function
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 64), torch.randn(16, 8)
    loader = DataLoader(TensorDataset(torch.randn(96, 64)), batch_size=16)

    def train() -> None:
        for _ in range(6):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()

    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        if loop == "fetch":
            with torch.no_grad():
                for (batch,) in loader:
                    model(batch)
        elif loop == "epoch":
            with record_function("epoch"):
                train()
        else:
            train()
    prof.export_chrome_trace(str(path))


@pytest.mark.parametrize("loop, origin", [
    ("train", "training iterations ending with Optimizer.step#SGD.step"),
    ("fetch", "iterations from one batch fetch")])
def test_python_stacks_do_not_hide_a_loops_iterations(tmp_path, loop, origin):
    """With Python stacks the loop's ops sit in the frames of the functions that run the loop, which
    span every iteration: a bound fell inside them, and a training loop without step markers read as
    one whole capture (a Hugging Face Trainer's, with_stack=True: "no steps are marked"). The
    iterations are now found, and each goes inside the innermost frame around it."""
    path = tmp_path / f"{loop}.json"
    _capture_with_stack(path, loop)
    table = tracekit.load(path)
    assert _steps_from(table).startswith(origin), _steps_from(table)
    rows = table.select(["kind", "name", "parent", "depth", "start_ns", "dur_ns"]).to_pylist()
    steps = [i for i, r in enumerate(rows) if r["kind"] == "step"]
    assert len(steps) >= 4
    for i in steps:  # each iteration inside a Python frame that holds it, one level below it
        up = rows[i]["parent"]
        assert up is not None and rows[up]["kind"] == "python_function", rows[i]
        assert rows[up]["start_ns"] <= rows[i]["start_ns"] and rows[i]["depth"] == rows[up]["depth"] + 1
    children = [r for r in rows if r["parent"] in set(steps)]
    assert children and all(r["depth"] == rows[r["parent"]]["depth"] + 1 for r in children)
    launch = tracekit.launch(table).result
    assert not any("no steps are marked" in e for e in launch.evidence), launch.evidence


def test_with_python_stacks_a_range_around_the_whole_loop_still_holds_no_iteration(tmp_path):
    path = tmp_path / "epoch.json"
    _capture_with_stack(path, "epoch")
    table = tracekit.load(path)
    assert _step_rows(table) == [] and _steps_from(table) == ""
