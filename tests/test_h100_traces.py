"""Facts and verdicts on traces tracekit's own collectors wrote on an H100 (torch 2.11, cuDNN 9,
CUDA 13; docs/results/h100). Each checks something only a real GPU showed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tracekit.analyze import launch as launch_mod
from tracekit.analyze.breakdown import breakdown
from tracekit.analyze.classify import classify_rows
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load

H100 = Path(__file__).parent / "data" / "h100"


def _trace(variant: str) -> Path:
    (path,) = H100.glob(f"{variant}-cuda-*.pt.trace.json.gz")
    return path


def _report(variant: str) -> launch_mod.LaunchReport:
    return launch_mod.launch(load(_trace(variant)))


def test_cudnn_per_timestep_kernels_are_a_library_launch_loop_not_framework_dispatch() -> None:
    # nn.LSTM at hidden 1024: one aten::_cudnn_rnn per step launches a GEMM, a cell kernel and a
    # memset per timestep. The host time inside it between launches is cuDNN's, not the framework's.
    r = _report("nn_lstm")
    assert r.verdict == "launch-bound"
    text = " ".join(r.evidence)
    assert "aten::_cudnn_rnn" in text and "the library, not framework dispatch" in text
    assert any("CUDA graph" in m and "aten::_cudnn_rnn" in m for m in r.remedies)
    assert not any("TorchScript" in m or "fuse elementwise" in m for m in r.remedies)
    by = dict(zip(r.gaps_by_host.host_activity, r.gaps_by_host.total_ns, strict=True))
    assert by["launching"] > 0.7 * sum(by.values())


def test_launch_loops_need_many_enqueues_per_call() -> None:
    # Eager fine-grained ops launch one kernel each: no op is a launch loop.
    t = load(_trace("custom_eager"))
    frame = frame_of(t)
    assert launch_mod.launch_loops(frame, classify_rows(frame)).op_rows.size == 0
    frame = frame_of(load(_trace("nn_lstm")))
    loops = launch_mod.launch_loops(frame, classify_rows(frame))
    assert loops.top_op == "aten::_cudnn_rnn" and loops.top_per_call >= 300 and loops.enqueue_share > 0.9


def test_async_memsets_are_enqueues_not_host_copies() -> None:
    frame = frame_of(load(_trace("nn_lstm")))
    classes = classify_rows(frame)
    enqueue = launch_mod.enqueue_calls(frame, classes)
    memset_launchers = frame.launch_row[frame.rows("gpu_memset")]
    assert memset_launchers.size > 300 and enqueue[memset_launchers[memset_launchers >= 0]].all()


def test_a_compiled_graph_called_per_timestep_is_told_to_compile_the_loop() -> None:
    r = _report("custom_compile")
    assert r.verdict == "CPU/framework-bound"  # 74% of the GPU's idle time dispatching, 11% launching
    assert any("calls a torch.compile graph 20 times" in m for m in r.remedies)
    assert not any("fuse elementwise ops: torch.compile" in m for m in r.remedies)
    r = _report("custom_compile_cudagraphs")
    assert any("calls a torch.compile graph 10 times" in m for m in r.remedies)


def test_cudnn9_fp16_lstm_kernels_are_rnn_time() -> None:
    # cuDNN 9 on Hopper runs the fp16 persistent LSTM as ampere_lstm_tile16<...>: rnn, not "other".
    t = load(_trace("nn_lstm_amp"))
    bd = breakdown(t)
    kernel_view = bd.gpu_classes[bd.gpu_classes.view == "kernel"]
    by_class = dict(zip(kernel_view["class"], kernel_view.exclusive_ns, strict=True))
    assert by_class.get("rnn", 0) > by_class.get("other", 0)
    assert by_class.get("rnn", 0) > 0.5 * sum(by_class.values())


def test_nvjet_half_gemms_count_as_low_precision() -> None:
    frame = frame_of(load(_trace("nn_lstm_amp")))
    names = [n for n in frame.names if n.startswith("nvjet_")]
    assert names and all(launch_mod.LOW_PRECISION.search(n) for n in names)
    assert not launch_mod.LOW_PRECISION.search("nvjet_sm90_sss_128x128_64x4_1x2_h_bz_TNT")


@pytest.mark.parametrize("variant", ["nn_lstm", "custom_compile", "custom_compile_cudagraphs", "nn_lstm_amp",
                                     "custom_eager"])
def test_every_h100_kernel_is_linked_to_its_launch(variant: str) -> None:
    frame = frame_of(load(_trace(variant)))
    kernels = frame.rows("gpu_kernel")
    assert kernels.size and np.all(frame.launch_row[kernels] >= 0)


RESULTS = Path(__file__).parents[1] / "docs" / "results" / "h100"


def _manifest_rows(name: str) -> list[dict]:
    """The latest row per run of a manifest brought back from the H100 (a failed run re-run later)."""
    latest = {}
    for line in (RESULTS / name).read_text().splitlines():
        row = json.loads(line)
        latest[row["run_id"]] = row
    return list(latest.values())


def test_comparisons_pair_runs_of_the_same_dtype() -> None:
    # The hidden sweep ran native cuDNN at fp32 and fp16; nn.LSTM (fp32) must meet native fp32 only.
    from tracekit.analyze.overhead import overhead
    from tracekit.analyze.published import _ratio

    rows = _manifest_rows("hidden-manifest.jsonl")
    pairs = overhead(rows, {}).pairs.set_index(["a", "b"])
    torch_vs_native = pairs.loc[("native/cudnn_lstm", "torch/nn_lstm")]
    assert torch_vs_native.configs == 5 and 1.1 < torch_vs_native.geomean_ratio < 1.6
    assert pairs.loc[("native/cudnn_lstm", "native/cublas_lstm")].configs == 10  # fp32 and fp16, each with its own
    assert pairs.loc[("torch/nn_lstm", "torch/nn_lstm_amp")].configs == 5  # AMP against fp32: one dtype a side
    ratio, configs = _ratio(rows, "torch/nn_lstm", "native/cudnn_lstm", "cuda")
    assert configs == 5 and ratio == pytest.approx(torch_vs_native.geomean_ratio)


def test_a_gpu_program_profiled_without_its_gpu_activities_is_not_judged_as_cpu_work() -> None:
    """A conv + linear training step on the H100 profiled with ProfilerActivity.CPU only
    (make_cpu_activity_only.py): the trace holds the CUDA runtime's launch calls but no kernel. It read
    "CPU/framework-bound" with 59% of the step "outside any compute op" and aten::cudnn_convolution's
    host time as compute; the ops' host time is launching, and the GPU's time is not there. The same
    step profiled with CUDA activities is judged as a GPU trace."""
    from tracekit import api

    r = api.launch(H100 / "cpu_activity_only.pt.trace.json.gz").result
    assert r.verdict == "undetermined", r.evidence
    said = next(e for e in r.evidence if e.startswith("the trace holds no GPU activity"))
    assert "63 kernel launch calls" in said, said
    assert not any("outside any compute op" in e for e in r.evidence), r.evidence
    assert r.remedies[0].startswith("profile again with the GPU's activities on") and "ProfilerActivity.CUDA" in r.remedies[0]
    with_gpu = api.launch(H100 / "cpu_and_cuda.pt.trace.json.gz").result
    assert with_gpu.has_gpu and with_gpu.verdict != "undetermined", with_gpu.evidence


def test_the_report_of_a_gpu_program_profiled_without_its_gpu_says_no_cpu_rates() -> None:
    """The report's other sections said "No GPU in this trace", took its ops' host time for arithmetic
    and gave aten::addmm a rate (38 GFLOP/s) from its launch time."""
    from tracekit import api

    doc = json.loads(api.render(api.report(H100 / "cpu_activity_only.pt.trace.json.gz"), "json"))
    assert doc["breakdown"]["unrecorded_gpu_work"] == "63 kernel launch calls"
    gemms = [op for op in doc["top_ops"] if op["op_class"] == "gemm"]
    assert gemms and all(op["gflops"] is None for op in gemms), gemms
    text = api.render(api.report(H100 / "cpu_activity_only.pt.trace.json.gz"), "markdown")
    assert "No GPU in this trace" not in text and "not arithmetic" in text
    with_gpu = json.loads(api.render(api.report(H100 / "cpu_and_cuda.pt.trace.json.gz"), "json"))
    assert with_gpu["breakdown"]["unrecorded_gpu_work"] == ""


@pytest.mark.parametrize("command", ["whatif", "critical-path"])
def test_replays_and_paths_refuse_a_gpu_program_profiled_without_its_gpu(command: str, capsys) -> None:
    """The host alone of that step would replay its launches as work (no-dispatch predicted 53%) and
    put 43 points of the critical path "inside compute ops that ran on the CPU": both say why not, on
    the file (the trace's problem, exit 1, not a usage error)."""
    from tracekit.cli import main

    trace = H100 / "cpu_activity_only.pt.trace.json.gz"
    assert main([command, str(trace)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "holds no GPU activity, but the program ran on a GPU (63 kernel launch calls)" in err
    assert f"{trace}: the trace holds no GPU activity" in err
    assert main([command, str(H100 / "cpu_and_cuda.pt.trace.json.gz"), "-f", "json"]) == 0


@pytest.mark.parametrize("name, gpu_only", [
    ("aten::cudnn_convolution", True), ("aten::cudnn_convolution_transpose", True), ("aten::_cudnn_rnn", True),
    ("aten::cudnn_batch_norm", True), ("aten::miopen_convolution", True), ("aten::_miopen_rnn", True),
    ("lstm/CudnnRNNV3:CudnnRNNV3", True), ("CudnnRNNBackpropV3", True),
    ("aten::convolution", False), ("aten::mkldnn_convolution", False), ("aten::addmm", False), ("Conv2D", False),
])
def test_ops_that_run_only_on_a_gpu_are_known_by_name(name: str, gpu_only: bool) -> None:
    from tracekit.analyze.gpu_presence import GPU_ONLY_OPS

    assert bool(GPU_ONLY_OPS.search(name)) is gpu_only

