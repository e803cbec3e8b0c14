"""Host attribution: ranges mark regions but are not work, steps hold their own process's rows,
and one file has one trace id however it is named."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest

import tracekit
from tracekit.analyze.classify import python_wait_rows
from tracekit.analyze.frame import frame_of
from tracekit.ingest import links

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/traces is absent (real traces live there)")


def _host_and_steps(prof, path: Path):
    """The report of a finished torch.profiler run, with its host split and steps indexed by step."""
    prof.export_chrome_trace(str(path))
    report = tracekit.report(path)
    return report, report.breakdown.host.set_index("step"), report.launch.steps.steps.set_index("step")


def test_a_sleep_inside_a_record_function_range_is_not_framework_time(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    x = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=0, active=2, repeat=1)) as prof:
        for _ in range(2):
            with record_function("wait_for_batch"):
                time.sleep(0.05)
            for _ in range(20):
                x = torch.tanh(x @ x)
            prof.step()
    report, host, steps = _host_and_steps(prof, tmp_path / "sleepy.json")
    for number in (0, 1):
        # The 50 ms sleep is inside a range and a step, but no op runs then: it is not framework work.
        assert 0 < host.framework_ns[number] <= steps.dur_ns[number] - 45e6, (host.framework_ns[number],
                                                                              steps.dur_ns[number])


WAITING_CAPTURE = """
import sys, threading, time, torch
from torch.profiler import ProfilerActivity, profile, schedule
go, release = threading.Event(), threading.Event()
def wait_twice():
    go.wait()
    release.wait()
waiter = threading.Thread(target=wait_twice)
waiter.start()  # before the profiler starts: its Python tracer follows the threads there are then
x = torch.randn(32, 32)
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=0, active=3, repeat=1),
             with_stack=True) as prof:
    for i in range(3):
        if i == 0:
            go.set()
        if i == 2:
            release.set()
        for _ in range(10):
            x = torch.tanh(x @ x)
        time.sleep(0.02)
        prof.step()
waiter.join()
prof.export_chrome_trace(sys.argv[1])
"""


def test_a_thread_waiting_in_python_is_idle_host(tmp_path):
    """A background thread starts waiting in step 0 and is released in step 2 (a DataLoader's result
    thread, a queue feeder): with Python stacks recorded, its wait is one long row that starts in
    step 0. Per step, each thread's host time stays within the step, and waits are not host work.
    Captured in a process of its own, so that the loop's thread and the waiter are the only Python
    threads."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.compute as pc

    path = tmp_path / "waiting.json"
    subprocess.run([sys.executable, "-c", WAITING_CAPTURE, str(path)], check=True, capture_output=True)
    report = tracekit.report(path)
    host, steps = report.breakdown.host.set_index("step"), report.launch.steps.steps.set_index("step")
    python_rows = report.table.filter(pc.equal(report.table.column("kind").cast(pa.string()), "python_function"))
    threads = python_rows.column("tid").unique()
    assert len(steps) == 3 and len(threads) == 2  # the loop's thread and the waiter
    for number in steps.index:
        busy = host.loc[number, [f"{c}_ns" for c in ("framework", "python") if f"{c}_ns" in host]].sum()
        assert busy <= len(threads) * steps.dur_ns[number], (number, busy, steps.dur_ns[number])
    # The waiter's frames are in the trace, but it only waits (Event.wait: a lock's acquire) and the
    # loop's thread sleeps 20 ms a step (time.sleep): neither is host work, so each step's host time
    # is at most the step less its sleep, however slow a busy machine makes the ops. Counting the
    # waits made it ~2x the step.
    for number in steps.index:
        busy = host.loc[number, ["framework_ns", "python_ns"]].sum()
        assert busy <= steps.dur_ns[number] - 19e6, (number, busy, steps.dur_ns[number])


DATALOADER_CAPTURE = """
import sys, torch
from torch.profiler import ProfilerActivity, profile, schedule
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.TensorDataset(torch.randn(512, 256), torch.randn(512, 256))
loader = torch.utils.data.DataLoader(data, batch_size=32, num_workers=2)
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=4, repeat=1),
             with_stack=True) as prof:
    for i, (x, y) in enumerate(loader):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        prof.step()
        if i == 6:
            break
prof.export_chrome_trace(sys.argv[1])
"""


def test_a_dataloaders_feeder_threads_are_not_host_work(tmp_path):
    """A DataLoader with workers runs a queue-feeder thread per worker in the training process; with
    Python stacks recorded each one sits in a lock's acquire for the whole capture. Counted as
    Python work they doubled the host time of the steps; they are idle, so the steps' host time is
    about their length (a feeder's own work, pickling and writing to a pipe, can add a little)."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    path = tmp_path / "loader.json"
    subprocess.run([sys.executable, "-c", DATALOADER_CAPTURE, str(path)], check=True, capture_output=True,
                   timeout=300)
    report = tracekit.report(path)
    host, steps = report.breakdown.host.set_index("step"), report.launch.steps.steps.set_index("step")
    assert host.busy_ns[steps.index].sum() <= 1.3 * steps.dur_ns.sum(), (host, steps)
    frame = frame_of(report.table)
    python_threads = np.unique(frame.thread_key[frame.rows("python_function")])
    waiting_threads = np.unique(frame.thread_key[python_wait_rows(frame)])
    assert python_threads.size >= 3 and waiting_threads.size >= 2  # the loop's thread and two feeders


def test_python_waits_are_named_by_their_frames():
    from tracekit.analyze.classify import PYTHON_WAIT

    waits = ["<built-in method acquire of _thread.lock object at 0x7f6a760758c0>", "<built-in function sleep>",
             "threading.py(327): wait", "<built-in method poll of select.poll object at 0x7f0>",
             "multiprocessing/connection.py(1136): wait", "selectors.py(415): select",
             "/usr/lib/python3.11/threading.py(1119): _wait_for_tstate_lock",
             "concurrent/futures/_base.py(456): result",
             # TF's Python tracer
             "$threading.py:1087 join", "$time sleep", "$<unknown> acquire", "$select select"]
    work = ["multiprocessing/queues.py(231): _feed", "queue.py(171): get", "threading.py(982): run",
            "<built-in method release of _thread.lock object at 0x7f6a760758c0>", "my_threading.py(3): wait",
            "torch/utils/data/dataloader.py(1295): _get_data", "<built-in function sleeper>",
            "<built-in method acquire of MyLock object at 0x1>",
            "$queue.py:154 get", "$<unknown> get", "$builtins getattr", "$my_threading.py:3 wait", "$time perf_counter_ns"]
    assert [bool(PYTHON_WAIT.search(n)) for n in waits] == [True] * len(waits)
    assert [bool(PYTHON_WAIT.search(n)) for n in work] == [False] * len(work)


def test_steps_hold_only_their_own_process_rows():
    """Process 1 marks steps 0 and 1; process 2 (a DataLoader worker, another rank) runs at the same
    times but is not part of process 1's loop."""
    start = np.array([0, 100, 10, 110, 20, 120], np.int64)
    end = np.array([90, 190, 20, 120, 30, 130], np.int64)
    process = np.array([1, 1, 1, 1, 2, 2], np.int64)
    host = np.ones(6, bool)
    step_rows = np.array([0, 1])
    step = links.assign_steps(6, start, end, host, step_rows, np.array([0, 1]), process)
    assert step.tolist() == [0, 1, 0, 1, -1, -1]
    # Without process keys, every row in a step's time belongs to it.
    assert links.assign_steps(6, start, end, host, step_rows, np.array([0, 1])).tolist() == [0, 1, 0, 1, 0, 1]


@needs_shared
def test_one_xspace_file_has_one_trace_id_as_a_file_or_in_its_run_directory(tmp_path):
    src = SHARED / "xprof" / "cpu_tf2.21" / "lstm_raw_while_fn.xplane.pb"
    run = tmp_path / "logs" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    shutil.copy(src, run / "host.xplane.pb")
    assert tracekit.info(tracekit.load(src)).trace_id == tracekit.info(tracekit.load(tmp_path / "logs")).trace_id
