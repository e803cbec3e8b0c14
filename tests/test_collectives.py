"""Collectives on worker threads: a DDP step on gloo waits for its all-reduce, and that wait is
communication, not framework dispatch, in the report, the critical path and the what-if replay.

The trace is a real 2-rank DDP capture (gloo, CPU) in which rank 1 sleeps 60 ms a step before its
backward pass, so rank 0's reducer waits for rank 1 inside the all-reduce of the last gradient
bucket. gloo runs the all-reduces as ``gloo:all_reduce`` ranges on its own threads; rank 0's
training thread runs no op while it waits.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

import tracekit
from tracekit.analyze.classify import collective_rows
from tracekit.analyze.frame import frame_of

STRAGGLER_SLEEP_S = 0.06

DDP_CAPTURE = """
import os, sys, time, torch, torch.distributed as dist, torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule

def run(rank, world, out, port, sleep_s):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", port
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 256), torch.randint(0, 10, (32,))
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3)) as prof:
        for _ in range(5):
            loss = nn.functional.cross_entropy(model(x), y)
            if rank == 1:
                time.sleep(sleep_s)  # the straggler
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    prof.export_chrome_trace(f"{out}/rank{rank}.json")
    dist.destroy_process_group()

if __name__ == "__main__":
    import torch.multiprocessing as mp
    mp.spawn(run, args=(2, sys.argv[1], sys.argv[2], float(sys.argv[3])), nprocs=2)
"""


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.fixture(scope="module")
def ddp_traces(tmp_path_factory) -> tuple[Path, Path]:
    pytest.importorskip("torch")
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch build has no gloo backend")
    out = tmp_path_factory.mktemp("ddp")
    script = out / "ddp_capture.py"
    script.write_text(DDP_CAPTURE)
    subprocess.run([sys.executable, str(script), str(out), _free_port(), str(STRAGGLER_SLEEP_S)], check=True, capture_output=True, timeout=300)
    return out / "rank0.json", out / "rank1.json"


def test_the_rank_held_up_by_a_straggler_is_communication_bound_and_waiting_not_dispatching(ddp_traces):
    report = tracekit.report(ddp_traces[0])
    assert report.launch.verdict == "communication-bound"
    frame = frame_of(report.table)
    gloo = collective_rows(frame)
    assert {frame.name(int(r)) for r in gloo} >= {"gloo:all_reduce", "c10d::allreduce_"}
    steps = report.breakdown.cpu_ops[report.breakdown.cpu_ops.step >= 0]
    assert len(steps) == 3
    # Each step rank 0 waits about the straggler's sleep (less the little work rank 1 skips); that
    # was all dispatch before (no op runs on the waiting thread), "78% of the step is dispatch".
    assert (steps.waiting_ns >= 0.6 * STRAGGLER_SLEEP_S * 1e9).all(), steps
    assert (steps.dispatch_ns < steps.waiting_ns / 3).all(), steps
    assert not any("framework dispatch" in e and int(e.split("%")[0]) >= 50 for e in report.launch.evidence)


def test_the_critical_path_runs_through_the_all_reduce_the_thread_waited_for(ddp_traces):
    path = tracekit.critical_path(ddp_traces[0]).result
    step = path.window["end_ns"] - path.window["start_ns"]
    assert path.shares["cpu_communication_bound"] >= 40, path.shares
    assert path.top.name.iloc[0] == "gloo:all_reduce"
    # Without the collective's edges the path was the training thread's own ops, a third of the step.
    assert path.total_ns >= 0.7 * step, (path.total_ns, step)


def test_whatif_replays_the_training_thread_and_keeps_its_wait_for_the_all_reduce(ddp_traces):
    from tracekit.analyze.critical_path import step_window
    from tracekit.analyze.whatif import _step

    result = tracekit.whatif(ddp_traces[0]).result
    no_dispatch = next(s for s in result.scenarios if s.name == "no-dispatch")
    assert no_dispatch.saving_ns <= 0.25 * result.measured_step_ns, (no_dispatch, result.measured_step_ns)
    assert "collectives" in no_dispatch.assumptions
    # The replayed thread is the one marking the steps, not gloo's worker: its all-reduce ranges sum
    # to more than the training thread's ops in the step, and the busiest thread was replayed.
    frame = frame_of(tracekit.load(ddp_traces[0]))
    step = _step(frame, *step_window(frame, None, None))
    marker_thread = frame.thread_key[frame.rows("step")[0]]
    assert step.op_class and all(frame.thread_key[r] == marker_thread for r in step.op_class)


def test_the_straggler_itself_is_not_communication_bound(ddp_traces):
    """Rank 1's all-reduces find rank 0 ready: its collectives are short, the sleep (no op, no
    Python stacks) is the step's gap."""
    report = tracekit.report(ddp_traces[1])
    assert report.launch.verdict != "communication-bound"
    steps = report.breakdown.cpu_ops[report.breakdown.cpu_ops.step >= 0]
    # On a loaded 2-core machine rank 0 can be descheduled for a step and rank 1 then waits for
    # it (21 ms once in CI), so the median step is the claim, and each step waits less than the
    # held-up rank's same step.
    assert steps.waiting_ns.median() <= 0.3 * STRAGGLER_SLEEP_S * 1e9, steps
    held_up = tracekit.report(ddp_traces[0]).breakdown.cpu_ops
    held_up = held_up[held_up.step >= 0].set_index("step").waiting_ns
    assert (steps.set_index("step").waiting_ns < held_up.reindex(steps.step)).all(), (steps, held_up)


def test_compare_says_which_rank_holds_the_other_up(ddp_traces):
    result = tracekit.compare(list(ddp_traces)).result
    waiting = result.metrics.set_index("metric").loc["waiting_time"]
    assert waiting.A >= 0.6 * STRAGGLER_SLEEP_S * 1e9 > waiting.B, waiting
    assert any("B holds A up" in f for f in result.findings), result.findings
