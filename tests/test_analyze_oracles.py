"""Analyses against the tools they overlap with, on real traces: nsys analyze/stats and HTA 0.5.

nsys numbers come from nsys 2023.4's own CSV output stored beside the traces; HTA numbers were
recorded by tests/oracles/hta_reference.py (HTA version in the JSON).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import REPO, TRACES, needs_shared

from tracekit.analyze import verdicts
from tracekit.analyze.breakdown import breakdown
from tracekit.analyze.launch import launch
from tracekit.analyze.ranges import ranges
from tracekit.analyze.utilization import low_utilization
from tracekit.ingest import load
from tracekit.ingest import nsys as nsys_reader

NSYS = TRACES / "nsys"
NSYS_STEMS = ["abacus_pytorch_cnn_titanrtx_nsys2023.4", "dlprof_augmented_pytorch_cnn_nsys2022.1",
              "dlprof_pytorch_cnn_rtx2070s_nsys2022.1", "keras_tf_darknet53_nsys2023.4", "memfusion_dl_nsys2023.1",
              "nvfuser_launch1000_v100_nsys2023.4", "nvfuser_matmul_nsys2024.6"]
HTA_REF = json.loads((REPO / "tests" / "oracles" / "hta_0.5.0.json").read_text())


@cache
def table(path: Path) -> pa.Table:
    return load(path)


def expected(stem: str, report: str) -> list[dict[str, str]]:
    d = NSYS / "expected_nsys2023.4" / stem
    plain, packed = d / f"{report}.csv", d / f"{report}.csv.gz"
    text = plain.read_text() if plain.exists() else gzip.decompress(packed.read_bytes()).decode()
    return list(csv.DictReader(io.StringIO(text)))


@needs_shared
@pytest.mark.parametrize("stem", NSYS_STEMS)
def test_every_gpu_gap_equals_nsys_gpu_gaps(stem):
    # nsys lists the whole capture's gaps: the reader's table, before steps are found in its ranges
    # (where they are, the verdict reads the steps' gaps: test_gaps_of_the_steps_used_add_up_to_their_idle_time).
    # Between the GPU's first and last activity they are nsys's; the verdict's span also starts at the
    # call that put the first work on the GPU, so one more gap leads up to that work (11 µs to 1.7 ms here).
    t = nsys_reader.read(NSYS / f"{stem}.sqlite")
    gaps = launch(t).gaps
    want = sorted((int(r["Start (ns)"]), int(r["Duration (ns)"])) for r in expected(stem, "analyze_gpu_gaps_gap0_all"))
    got = sorted(zip(gaps.start_ns.tolist(), gaps.dur_ns.tolist(), strict=True))
    gpu = t.filter(pc.is_in(t.column("kind").cast(pa.string()), pa.array(["gpu_kernel", "gpu_memcpy", "gpu_memset"])))
    first = pc.min(gpu.column("start_ns")).as_py()
    lead = [g for g in got if g[0] < first]
    assert [g for g in got if g[0] >= first] == want
    assert len(lead) == 1 and sum(lead[0]) == first, lead


@needs_shared
@pytest.mark.parametrize("path", [NSYS / "nvfuser_launch1000_v100_nsys2023.4.sqlite",
                                  NSYS / "keras_tf_darknet53_nsys2023.4.sqlite",
                                  TRACES / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"],
                         ids=lambda p: p.name[:24])
def test_gaps_of_the_steps_used_add_up_to_their_idle_time(path):
    """The gaps listed are the steps' windows with no GPU activity, cut at their edges: their total
    is the idle time the verdict states, and each lies inside one of the whole capture's gaps or
    before its first or after its last GPU activity."""
    r = launch(table(path))
    assert r.judged_steps > 0
    assert int(r.gaps.dur_ns.sum()) == r.gpu_idle_ns
    whole = launch(table(path), keep_all_steps=True)
    assert whole.gpu_span_ns >= r.gpu_span_ns
    full = nsys_reader.read(path) if path.suffix == ".sqlite" else None
    if full is not None:
        every = launch(full).gaps
        starts, ends = every.start_ns.to_numpy(), (every.start_ns + every.dur_ns).to_numpy()
        for g in r.gaps.itertuples():
            end = g.start_ns + g.dur_ns
            inside = ((starts <= g.start_ns) & (end <= ends)).any()
            assert inside or end <= starts.min() or g.start_ns >= ends.max(), g


@needs_shared
@pytest.mark.parametrize("stem", NSYS_STEMS)
def test_gpu_utilization_equals_nsys_gpu_time_util(stem):
    util = low_utilization(table(NSYS / f"{stem}.sqlite"))
    want = [(float(r["In-Use (%)"]), int(r["Duration (ns)"]), int(r["Start (ns)"])) for r in expected(stem, "analyze_gpu_time_util")]
    got = [(round(r.in_use * 100, 1), r.dur_ns, r.start_ns) for r in util.itertuples()]
    assert got == want


@needs_shared
@pytest.mark.parametrize("stem", NSYS_STEMS)
def test_nvtx_gpu_projection_equals_nsys(stem):
    summary = ranges(table(NSYS / f"{stem}.sqlite")).summary.set_index("name")
    proj = expected(stem, "stats_nvtx_gpu_proj_sum")
    for row in proj:
        got = summary.loc[row["Range"]]
        assert int(got.proj_total_ns) == int(row["Total Proj Time (ns)"]), row["Range"]
        assert int(got.gpu_instances) == int(row["Range Instances"]), row["Range"]
        assert int(got.gpu_ops) == int(row["Total GPU Ops"]), row["Range"]
    for row in expected(stem, "stats_nvtx_sum"):
        got = summary.loc[row["Range"]]
        assert (int(got.total_ns), int(got.instances)) == (int(row["Total Time (ns)"]), int(row["Instances"])), row["Range"]


@needs_shared
@pytest.mark.parametrize("stem", NSYS_STEMS)
def test_per_kernel_sums_and_class_times_add_up(stem):
    t = table(NSYS / f"{stem}.sqlite")
    bd = breakdown(t)
    kernel_view = bd.gpu_classes[bd.gpu_classes.view == "kernel"]
    want = sum(int(r["Total Time (ns)"]) for r in expected(stem, "stats_cuda_gpu_kern_sum"))
    kernels = kernel_view[~kernel_view["class"].isin(["memcpy", "memset", "sync"])]
    assert int(kernels.kernel_ns.sum()) == want


def _all_traces() -> list[Path]:
    if not TRACES.is_dir():
        return []
    return sorted([*TRACES.glob("hta/**/*.json.gz"), *NSYS.glob("*.sqlite"), *TRACES.glob("xprof/**/*.xplane.pb")])


@needs_shared
@pytest.mark.parametrize("path", _all_traces(), ids=lambda p: str(p.relative_to(TRACES)))
def test_breakdown_adds_up_to_the_span(path):
    bd = breakdown(table(path))
    from tracekit.analyze.classify import KERNEL_CLASSES

    for row in bd.gpu.itertuples():
        parts = sum(getattr(row, f"{c}_ns") for c in KERNEL_CLASSES) + row.idle_ns
        assert parts == row.span_ns
        assert row.compute_ns + row.non_compute_ns == row.busy_ns
    from tracekit.analyze.breakdown import HOST_CLASSES

    host = bd.host
    assert (host[[f"{c}_ns" for c in HOST_CLASSES]].sum(axis=1) == host.busy_ns).all()
    if len(bd.cpu_ops):
        parts = bd.cpu_ops.compute_ns + bd.cpu_ops.dispatch_ns + bd.cpu_ops.waiting_ns + bd.cpu_ops.fetching_ns
        assert (parts == bd.cpu_ops.span_ns).all()
        assert (bd.cpu_ops[["waiting_ns", "fetching_ns", "dispatch_ns"]] >= 0).all(axis=None)
    # Per-step rows partition the GPU work that has a step (steps' work may overlap in time).
    for _, g in bd.gpu.groupby("device_id"):
        assert g[g.step >= 0].activities.sum() <= g[g.step == -1].activities.iloc[0]


def _hta_steps(t: pa.Table) -> np.ndarray:
    """The rows of the steps HTA sees: the profiler's ProfilerStep#N, not those tracekit infers (a
    training loop's optimizer iterations, the calls of a range around each iteration)."""
    kinds = t.column("kind").cast(pa.string()).to_numpy(zero_copy_only=False)
    names = t.column("name").cast(pa.string()).to_numpy(zero_copy_only=False).astype(str)
    return np.flatnonzero((kinds == "step") & np.char.startswith(names, "ProfilerStep#"))


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= 1e-3 * max(abs(want), 1.0)


@needs_shared
@pytest.mark.parametrize("rel", sorted(HTA_REF["traces"]))
def test_temporal_breakdown_agrees_with_hta(rel):
    """HTA's idle / compute / non-compute / kernel time, within 0.1%.

    HTA drops GPU work launched in the last ProfilerStep (with >= 2 steps), and counts CUDA sync
    records as GPU time; tracekit does neither by default and offers both as options.
    """
    t = table(TRACES / "hta" / rel)
    steps = _hta_steps(t)
    bd = breakdown(t, exclude_last_step=steps.size >= 2, count_sync=steps.size < 2)
    whole = bd.gpu[bd.gpu.step == -1].sum()
    ref = HTA_REF["traces"][rel]
    assert _close(whole.idle_ns / 1e3, ref["idle_time_us"])
    assert _close(whole.compute_ns / 1e3, ref["compute_time_us"])
    assert _close(whole.non_compute_ns / 1e3, ref["non_compute_time_us"])
    assert _close(whole.span_ns / 1e3, ref["kernel_time_us"])


HTA_LAUNCH_APIS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync")


@needs_shared
@pytest.mark.parametrize("rel", sorted(HTA_REF["traces"]))
def test_launch_statistics_agree_with_hta(rel):
    """Per correlation: launch call duration, GPU duration and launch delay (HTA's API list)."""
    t = table(TRACES / "hta" / rel)
    steps = _hta_steps(t)
    pairs = launch(t).pairs
    pairs = pairs[pairs.api_name.isin(HTA_LAUNCH_APIS)]
    if steps.size >= 2:  # HTA keeps only work launched before the last step starts
        from tracekit.analyze.frame import Frame

        f = Frame(t)
        last = f.start[steps].max()
        corr = t.column("correlation_id").fill_null(-1).to_numpy()
        api_rows = f.rows("runtime_api", "driver_api")
        early = set(corr[api_rows[f.start[api_rows] < last]].tolist())
        pairs = pairs[pairs.correlation_id.isin(early)]
    ref = HTA_REF["traces"][rel]
    assert len(pairs) == ref["launch_count"]
    assert _close(pairs.api_ns.sum() / 1e3, ref["launch_cpu_duration_sum_us"])
    assert _close(pairs.gpu_ns.sum() / 1e3, ref["launch_gpu_duration_sum_us"])
    assert _close(pairs.delay_ns.sum() / 1e3, ref["launch_delay_sum_us"])


@needs_shared
def test_nvfuser_launch_loop_is_paced_by_its_runtime_not_its_launch_calls():
    # ~12.5 µs launch calls for ~1.4 µs kernels, but each of the 1,000 iterations (calls of its NVTX
    # range "test") spends ~136 µs in nvFuser's runtime (FusionExecutorCache::runFusionWithInputs)
    # around its one launch: the launch calls are 9% of the GPU's idle time, and removing them alone
    # would recover little of it. The first call (199 ms: the fusion's compilation) is warm-up.
    r = launch(table(NSYS / "nvfuser_launch1000_v100_nsys2023.4.sqlite"))
    assert r.verdict == "CPU/framework-bound", r.evidence
    assert r.steps is not None and r.steps.steps.status.iloc[0] == "warm-up" and r.judged_steps >= 990
    assert r.idle_share > 0.98
    assert r.launch_api.p50_ns > 8 * r.kernel.p50_ns
    assert any("dispatch sets the pace" in x for x in r.evidence)


@needs_shared
def test_gemm_heavy_trace_is_gpu_bound():
    r = launch(table(TRACES / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"))
    assert r.verdict == "GPU-bound"
    whole = r.breakdown.gpu[r.breakdown.gpu.step == -1].iloc[0]
    assert (whole.gemm_ns + whole.convolution_ns) / whole.busy_ns > 0.5


@needs_shared
def test_gpu_idle_outside_the_steps_is_not_judged():
    """BERT on 8 V100s (TF 2.4): the GPUs idle 95% of the 2.6 s capture, with no host event during
    that idle time, but the two steps (from the device Steps lines) keep their GPU 72% busy. The
    verdict reads the steps: GPU-bound, not launch- or framework-bound (with an XLA remedy), and
    not "host-idle gaps" for time outside the loop."""
    r = launch(table(TRACES / "xprof" / "tf_bert_8xV100_gpu_multi_worker.xplane.pb"))
    assert r.verdict == "GPU-bound"
    # No dispatch remedy (XLA, graphs); the casts' and dropout kernels' remedies (XLA fuses them) are
    # another matter.
    fusing = {verdicts.TF_CAST_REMEDY, r.dropout_masks.remedy() if r.dropout_masks is not None else ""}
    assert not any(("XLA" in x and x not in fusing) or "CUDA graph" in x for x in r.remedies)
    whole = r.breakdown.gpu[r.breakdown.gpu.step == -1]
    assert whole.idle_ns.sum() / whole.span_ns.sum() > 0.9 > 0.3 > r.idle_share
    assert r.steps is not None and len(r.steps.steps) == 2 and any("ops per step" in e for e in r.evidence)
    assert any("GPUs idle" in e and "in the 2 step(s) used (2 GPUs' spans added)" in e for e in r.evidence)


def test_a_trace_without_ops_or_kernels_gets_no_bound_verdict(tmp_path):
    """A real torch.profiler capture of a range with nothing in it: nothing to judge, so no verdict."""
    torch = pytest.importorskip("torch")
    import time

    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("waiting"):
        time.sleep(0.01)
    path = tmp_path / "empty.json"
    prof.export_chrome_trace(str(path))
    r = launch(table(path))
    assert r.verdict == "undetermined" and r.remedies == []
    assert any("nothing to judge" in e for e in r.evidence)
    # A capture of 10 ms that holds no op: not the schedule's emptied cycle; no advice on marking steps.
    said = " ".join(r.evidence)
    assert "Python threads of your own" in said and "on_trace_ready" not in said and "no steps are marked" not in said
    del torch


EMPTY = Path(__file__).parent / "data" / "cpu"


def test_a_schedules_capture_exported_after_its_last_cycle_is_said_to_be_so():
    """tests/data/cpu/empty_cycle_ended (real): torch.profiler with a repeating schedule, exported after
    the loop, which ended in a cycle's wait: the finished cycles' events were cleared, the file holds
    the profiler's last 0.19 ms. The verdict names that cause and where to export, not the thread's."""
    r = launch(table(EMPTY / "empty_cycle_ended.pt.trace.json.gz"))
    said = " ".join(r.evidence)
    assert r.verdict == "undetermined" and r.remedies == []
    assert "recorded for 0.19 ms" in said and "on_trace_ready" in said and "tensorboard_trace_handler" in said
    assert "threads of your own" not in said and "no steps are marked" not in said


def test_a_capture_whose_work_ran_on_a_thread_of_the_programs_own_is_said_to_be_so():
    """tests/data/cpu/empty_other_thread (real): the work ran on a Python thread the program started,
    which torch.profiler does not record; the capture ran 11 ms. The thread cause, not the schedule's."""
    r = launch(table(EMPTY / "empty_other_thread.pt.trace.json.gz"))
    said = " ".join(r.evidence)
    assert r.verdict == "undetermined"
    assert "recorded for 11.4 ms but holds no op" in said and "Python threads of your own" in said
    assert "on_trace_ready" not in said and "no steps are marked" not in said


@needs_shared
def test_gaps_spent_copying_make_a_copy_bound_verdict_not_a_cuda_graph_remedy():
    """HTA's negative_queue_length trace: the host is in memory/copy calls during 58% of the GPU's idle
    time; a launch-bound verdict with a CUDA-graph remedy would not fit that evidence."""
    r = launch(table(TRACES / "hta" / "negative_queue_length_values_check" / "rank0.json.gz"))
    assert r.verdict == "copy-bound"
    assert any("data transfer" in e for e in r.evidence)
    assert not any("CUDA graph" in x for x in r.remedies) and any("pinned" in x for x in r.remedies)


@needs_shared
def test_kernels_replayed_from_cuda_graphs_are_counted():
    from tracekit.analyze.frame import frame_of
    from tracekit.analyze.launch import _graph_launched_share

    t = table(TRACES / "hta" / "trace_diff" / "test" / "test.json.gz")
    frame = frame_of(t)
    share = _graph_launched_share(frame)
    assert 0.0 < share < 1.0  # this trace replays part of its step from cudaGraphLaunch
    assert _graph_launched_share(frame_of(table(TRACES / "hta" / "trace_diff" / "control" / "control.json.gz"))) == 0.0


def test_launch_remedies_know_what_already_replays_from_cuda_graphs():
    from tracekit.analyze.verdicts import Evidence, judge

    def remedies(graphed: float) -> list[str]:
        e = Evidence(source="torch", has_ops=True, has_gpu=True, idle_share=0.9, kernels=10, launch_p50_ns=5_000,
                     kernel_p50_ns=2_000, graphed_share=graphed)
        verdict, _, out = judge(e)
        assert verdict == "launch-bound"
        return out

    assert any("capture the step in a CUDA graph" in x for x in remedies(0.0))
    partly = remedies(0.5)
    assert not any("capture the step in a CUDA graph" in x for x in partly)
    assert any("still launched kernel by kernel" in x for x in partly)
    assert not any("CUDA graph" in x for x in remedies(0.95))
