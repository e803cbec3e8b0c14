"""Which rank holds the others up (tracekit/analyze/rank_balance.py): the dataset report names the rank
that spends the least time in collectives. Real captures: a 2-rank DDP job over gloo where rank 1 gets
4x the batch (tests/data/cpu/make_ddp_straggler.py), and the two ranks of one 128-rank GPU job in
../shared/traces/hta/trace_filter."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
from conftest import TRACES, needs_shared

from tracekit.analyze.frame import frame_of
from tracekit.analyze.gpu_communication import gpu_communication
from tracekit.analyze.per_trace import trace_metrics
from tracekit.analyze.rank_balance import collective_time_per_step, rank_balance
from tracekit.cli import main
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"
STRAGGLER = [DATA / f"ddp_straggler_rank{r}.pt.trace.json.gz" for r in (0, 1)]


def _dataset(files: list[Path], tmp_path: Path, run: str = "job") -> Path:
    src, out = tmp_path / f"src-{run}", tmp_path / "ds"
    src.mkdir()
    for f in files:
        shutil.copy(f, src / f.name)
    assert main(["ingest", str(src), "-o", str(out), "--run", run]) == 0
    return out


def test_the_rank_with_more_data_is_named_the_straggler(tmp_path: Path) -> None:
    """Rank 0 waits in the all-reduce for rank 1 (4x its batch): 20-21 ms of its ~29 ms step inside
    collectives against ~8 ms for rank 1, whose step times are within 7% of each other (a step-time
    ranking alone names rank 1 slowest by 3.4%, within noise)."""
    talk = [collective_time_per_step(frame_of(load(f)), None) for f in STRAGGLER]
    assert talk[0] > 2 * talk[1] > 0, talk
    out = tmp_path / "r.md"
    ds = _dataset(STRAGGLER, tmp_path)
    assert main(["report", str(ds), "-o", str(out)]) == 0
    text = out.read_text()
    assert f"Rank 1 spends the least time in collectives, {talk[1] / 1e6:,.3f} ms a step against " \
           f"{talk[0] / 1e6:,.3f} ms on the other rank: it joins them last" in text, text
    # Rank 1's compute ops take ~3x rank 0's (4x the batch): said, with both readings of it.
    assert "Its compute takes 2.9x the other rank's (as a share of its capture): more work per step" in text, text
    assert "collectives / step" in text
    doc = tmp_path / "r.json"
    assert main(["report", str(ds), "-o", str(doc)]) == 0
    (found,) = json.loads(doc.read_text())["rank_balance"]
    assert found["least_rank"] == 1 and found["straggler"] is True and found["ranks"] == 2
    assert 2.5 <= found["work_ratio"] <= 3.5


@needs_shared
def test_ranks_of_one_gpu_job_with_even_collectives_have_no_straggler(tmp_path: Path) -> None:
    """trace_filter: NCCL kernels 198.1 and 189.5 ms a step (4% apart)."""
    pair = [TRACES / "hta" / "trace_filter" / f"sampled_rank-{r}.json.gz" for r in (0, 1)]
    talk = [collective_time_per_step(frame_of(load(f)), None) for f in pair]
    assert abs(talk[0] - talk[1]) < 0.1 * talk[0], talk
    out = tmp_path / "r.md"
    assert main(["report", str(_dataset(pair, tmp_path)), "-o", str(out)]) == 0
    assert "Collective time per step is even across the 2 ranks (189.526-198.100 ms)" in out.read_text()


@needs_shared
def test_gpu_collective_time_is_the_union_of_the_steps_collective_kernels() -> None:
    """Per step and device, as the overlap measure reads the kernels (no compute subtracted)."""
    path = TRACES / "hta" / "trace_diff" / "control" / "control.json.gz"
    frame = frame_of(load(path))
    whole = gpu_communication(frame, None)
    assert whole is not None
    steps = int(frame.rows("step").size)
    # The kernels of the marked steps: at most all of them, and most (the capture is mostly steps).
    assert 0.8 * whole.comm_ns / steps <= collective_time_per_step(frame, None) <= whole.comm_ns / steps * 1.0001


def test_traces_that_are_not_one_job_are_not_judged() -> None:
    """Unrelated traces under one run label: step times 10x apart, no finding."""
    traces = pd.DataFrame({"run": ["r", "r"], "rank": [0, 1], "collective_time": [5e6, 1e6], "step_time": [1e7, 1e8]})
    assert rank_balance(traces) == []
    same = traces.assign(step_time=[1e7, 1.1e7])
    (found,) = rank_balance(same)
    assert found.least == 1 and found.straggler and found.work_ratio == 0.0  # no compute metrics: not said
    assert "Look at its own step" in found.says()
    # Compute as long as the other rank's: the straggler's time is elsewhere.
    (found,) = rank_balance(same.assign(op_gemm_time=[5e6, 5.2e6], total_time=[1e8, 1e8]))
    assert 1.0 < found.work_ratio < 1.2 and "its time goes outside compute" in found.says()


def test_a_cpu_trace_without_collectives_has_none() -> None:
    assert trace_metrics(load(DATA / "fsdp_ddp_rank0.pt.trace.json.gz"))["collective_time"] > 0
    assert collective_time_per_step(frame_of(load(DATA / "conv_nchw_group_norm.pt.trace.json.gz")), None) == 0.0
