"""Verdicts and predictions on real workloads captured on an H200 (tests/data/h200/make_workloads.py;
docs/results/h200). Each workload is stored beside the remedy applied to it, with both unprofiled
step times (times.jsonl), so a prediction is checked against what the change really gave."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracekit
from tracekit.analyze import verdicts
from tracekit.analyze.whatif import whatif
from tracekit.ingest import load

H200 = Path(__file__).parent / "data" / "h200"
TIMES = {row["name"]: row["step_ms_median"] for row in map(json.loads, (H200 / "times.jsonl").read_text().splitlines())}


def _launch(name: str):
    return tracekit.launch(H200 / name).result


def _savings(name: str) -> dict[str, float]:
    w = whatif(load(H200 / f"{name}.pt.trace.json.gz"))
    return {s.name: s.saving_ns / w.replayed_step_ns for s in w.scenarios}


@pytest.mark.parametrize("name", ["transformer_train.pt.trace.json.gz", "item_sync.pt.trace.json.gz",
                                  "inductor_mlp.pt.trace.json.gz", "jax_train.xplane.pb"])
def test_kernels_shorter_than_launches_do_not_make_a_step_launch_bound_when_dispatch_paces_it(name: str) -> None:
    # Kernels as short as or shorter than their launch calls, but the host spends 47-74% of the GPU's
    # idle time in framework code and Python against 10-16% in launch calls. CUDA graphs, which skip
    # the dispatch, cut the transformer's step 64% (the model, compiled with reduce-overhead) and 73%
    # (the whole step captured).
    r = _launch(name)
    assert r.verdict == "CPU/framework-bound", r.evidence
    split = next(e for e in r.evidence if e.startswith("over every idle gap, framework code and Python run during"))
    assert r.launch_api.p50_ns < r.kernel.p50_ns or "dispatch sets the pace" in split, split
    if name.endswith(".pt.trace.json.gz"):  # graph replay skips PyTorch's dispatch: it comes first
        assert "CUDA graph" in r.remedies[0], r.remedies
    else:  # a jitted JAX step: its wait for each result, then the Python around the one call
        assert "block_until_ready" in r.remedies[0] and "already one jitted call" in r.remedies[1], r.remedies


def test_a_step_of_tiny_kernels_issued_as_fast_as_the_host_launches_them_is_launch_bound() -> None:
    # 200 elementwise kernels of ~0.9 µs a step, launched at ~7 µs each: launching (40% of the idle
    # time) outweighs dispatch (38%). Measured: one CUDA graph of the step cut 81% of it, torch.compile's
    # fusion 53%: the remedies come in that order.
    r = _launch("tiny_ops.pt.trace.json.gz")
    assert r.verdict == "launch-bound", r.evidence
    assert "CUDA graph" in r.remedies[0] and "fuse elementwise" in r.remedies[1], r.remedies
    assert TIMES["tiny_ops_graphed"] < TIMES["tiny_ops_compiled"] < TIMES["tiny_ops"]


def _rows_of(name: str, categories: set[str], tmp_path: Path, steps: bool = False) -> Path:
    """The capture cut to its events of these Kineto categories (and its metadata, and with ``steps``
    its ProfilerStep ranges), as a profiler that recorded only those writes it: ProfilerActivity.CUDA
    alone records the GPU's activity and the CUDA API calls, not the ops, the Python or the steps."""
    import gzip

    doc = json.loads(gzip.decompress((H200 / name).read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") in categories or e.get("ph") == "M"
                          or steps and str(e.get("name", "")).startswith("ProfilerStep#")]
    out = tmp_path / name.replace(".gz", "")
    out.write_text(json.dumps(doc))
    return out


def test_a_gpu_trace_without_the_hosts_own_work_does_not_call_the_host_idle(tmp_path: Path) -> None:
    # The same launch-bound step, its framework ops not recorded: the gaps hold no host event whether
    # the host dispatched or waited, and launching cannot be weighed against dispatch. It read
    # "host-idle gaps" (78% of the idle time "host idle") with a remedy to profile other processes.
    gpu = {"kernel", "gpu_memcpy", "gpu_memset"}
    cuda_only = tracekit.launch(_rows_of("tiny_ops.pt.trace.json.gz", gpu | {"cuda_runtime", "ac2g"}, tmp_path)).result
    assert cuda_only.verdict == "undetermined", cuda_only.evidence
    assert any("records the host's GPU API calls only (801), not its framework ops" in e for e in cuda_only.evidence)
    assert any("the host ran no recorded call 77% of the time" in e for e in cuda_only.evidence), cuda_only.evidence
    assert cuda_only.remedies == [verdicts.HOST_ACTIVITY_REMEDIES["torch"]]
    gpu_only = tracekit.launch(_rows_of("tiny_ops.pt.trace.json.gz", gpu, tmp_path)).result
    assert gpu_only.verdict == "undetermined", gpu_only.evidence
    assert any("records none of the host's activity" in e for e in gpu_only.evidence), gpu_only.evidence
    # No launch call recorded: no median of none (it said "launch call median 0.00 µs").
    assert not any("launch call median" in e for e in gpu_only.evidence)
    assert any(e.startswith("kernel median 0.94 µs (800 kernels); no launch call recorded") for e in gpu_only.evidence)
    # Its replay takes every gap between the API calls as dispatch: an upper bound, said so; and the
    # critical path says its host side is the calls alone.
    cut = _rows_of("tiny_ops.pt.trace.json.gz", gpu | {"cuda_runtime", "ac2g"}, tmp_path)
    bounded = {s.name: s.upper_bound for s in whatif(load(cut)).scenarios}
    assert bounded["no-dispatch"] and bounded["cuda-graph-step"] and not bounded["cuda-graphs"], bounded
    assert not any(s.upper_bound for s in whatif(load(H200 / "tiny_ops.pt.trace.json.gz")).scenarios)
    path = json.loads(tracekit.render(tracekit.critical_path(cut), "json"))
    assert path["host_work_traced"] is False
    assert "records the host's GPU API calls but not its own work" in tracekit.render(tracekit.critical_path(cut), "markdown")
    # Where the GPU is busy the verdict needs no host: the same cut of a GPU-bound ResNet step (batch
    # 128) stays one.
    busy = tracekit.launch(_rows_of("resnet50_b128_nchw.pt.trace.json.gz", gpu, tmp_path, steps=True)).result
    assert busy.verdict == "GPU-bound", busy.evidence


def test_a_span_is_said_to_start_at_a_call_only_where_calls_are_linked(tmp_path: Path) -> None:
    # With no launch linked to its kernel (no flows, no correlation ids), no step holds GPU work and
    # the whole trace is judged on the GPU's own span; it is not said to start at a call.
    import gzip

    doc = json.loads(gzip.decompress((H200 / "tiny_ops.pt.trace.json.gz").read_bytes()))
    doc["traceEvents"] = [{**e, "args": {k: v for k, v in e.get("args", {}).items() if k not in ("correlation", "External id")}}
                          for e in doc["traceEvents"] if e.get("cat") != "ac2g"]
    cut = tmp_path / "unlinked.json"
    cut.write_text(json.dumps(doc))
    r = tracekit.launch(cut).result
    assert not r.judged_steps and not r.judged_capture, r.evidence
    assert any(e.startswith("GPU idle 92.7% of its 10.371 ms span") and "call" not in e for e in r.evidence), r.evidence


def _shifted(name: str, shift_us: float, tmp_path: Path) -> Path:
    """The capture with its GPU rows (and their flows' ends) moved ``shift_us`` earlier, as a
    profiler whose conversion of GPU timestamps to the host's clock is off writes them."""
    import gzip

    doc = json.loads(gzip.decompress((H200 / name).read_bytes()))
    for e in doc["traceEvents"]:
        if "ts" in e and (e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
                          or e.get("cat") == "ac2g" and e.get("ph") == "f"):
            e["ts"] -= shift_us
    out = tmp_path / f"shifted_{shift_us}.json"
    out.write_text(json.dumps(doc))
    return out


def test_gpu_timestamps_offset_from_the_hosts_are_said_and_decide_nothing(tmp_path: Path) -> None:
    # No kernel of a real trace starts before its launch call (2 µs after it at the least); 3 ms early,
    # every one does, and the gaps' host activity is read 3 ms away from them: it read launch-bound.
    far = tracekit.launch(_shifted("tiny_ops.pt.trace.json.gz", 3000.0, tmp_path)).result
    assert far.verdict == "undetermined" and far.remedies == [verdicts.CLOCK_SKEW_REMEDY], far.evidence
    assert any(e.startswith("100% of the GPU activities start before the host call that launched them (a median "
                            "2,992.8 µs before)") for e in far.evidence), far.evidence
    near = tracekit.launch(_shifted("tiny_ops.pt.trace.json.gz", 6.6, tmp_path)).result
    assert any(e.startswith("123 of 800 GPU activities start before the host call that launched them")
               for e in near.evidence), near.evidence
    assert not any("start before the host call" in e for e in _launch("tiny_ops.pt.trace.json.gz").evidence)


def test_compare_does_not_set_a_step_against_a_capture_or_ops_against_none(tmp_path: Path) -> None:
    # The same program profiled with its ops and steps, and with ProfilerActivity.CUDA alone: compare
    # read "B takes 4.07x as long as A per step" (A's median step against B's whole capture), "B runs 0
    # framework ops per step against 250" and "the largest change is framework-op elementwise time".
    cut = _rows_of("tiny_ops.pt.trace.json.gz", {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "ac2g"}, tmp_path)
    text = tracekit.render(tracekit.compare([H200 / "tiny_ops.pt.trace.json.gz", cut]), "markdown")
    assert "B marks no steps, A does" in text and "as long as" not in text and "faster than" not in text, text
    assert "B records no framework op and the other trace does" in text
    assert "framework ops per step against" not in text and "framework-op elementwise" not in text, text


def test_a_whole_step_graph_predicts_what_capturing_the_step_gave() -> None:
    # cuda-graphs keeps the host's dispatch (graphs around parts of a step inside Python) and predicted
    # 41% for tiny_ops; capturing the whole step skips it, and cuda-graph-step predicts that. On the
    # profiled step its prediction is 0.33 ms; the captured step replays in 0.34 ms unprofiled (the
    # profiler inflates host time, not the GPU's, which is what is left).
    saving = _savings("tiny_ops")
    assert saving["cuda-graph-step"] > saving["fuse-elementwise"] > saving["cuda-graphs"]
    w = whatif(load(H200 / "tiny_ops.pt.trace.json.gz"))
    predicted_ms = next(s.predicted_step_ns for s in w.scenarios if s.name == "cuda-graph-step") / 1e6
    assert abs(predicted_ms / TIMES["tiny_ops_graphed"] - 1) <= 0.25, predicted_ms
    # Already replayed from a graph: nothing left for either graph scenario to take.
    assert not {"cuda-graph-step", "cuda-graphs"} & set(_savings("tiny_ops_graphed"))


def test_a_whole_step_graph_predicts_the_captured_transformer_step() -> None:
    # The transformer's forward, backward and fused AdamW step captured in one torch.cuda.graph ran in
    # 2.39 ms against 8.84 ms eager; cuda-graph-step predicts 2.52 ms on the profiled step (what is left
    # is GPU time), and cuda-graphs, which keeps the dispatch, saves a seventh of what it does.
    w = whatif(load(H200 / "transformer_train.pt.trace.json.gz"))
    by = {s.name: s for s in w.scenarios}
    assert abs(by["cuda-graph-step"].predicted_step_ns / 1e6 / TIMES["transformer_train_whole_graph"] - 1) <= 0.25
    assert by["cuda-graphs"].saving_ns < 0.2 * by["cuda-graph-step"].saving_ns


def test_blocking_calls_split_the_capture_and_keep_their_time() -> None:
    # item_sync reads its loss with .item() after each of 8 micro-batches: a capture cannot hold the
    # copy and wait, so the step becomes one graph a micro-batch, with the blocking calls between them.
    w = whatif(load(H200 / "item_sync.pt.trace.json.gz"))
    graph = next(s for s in w.scenarios if s.name == "cuda-graph-step")
    assert "8 graphs" in graph.assumptions and "blocking calls" in graph.assumptions
    # Removing the .item() calls gave nothing measurable (7.6 against 8.5 ms), as no-sync predicted.
    assert _savings("item_sync")["no-sync"] < 0.05
    # The CUDA-graph remedy says what has to go before one graph can hold the step.
    remedy = next(m for m in _launch("item_sync.pt.trace.json.gz").remedies if "CUDA graph" in m)
    assert "the step's 8 synchronizing calls" in remedy
    assert not any("synchronizing calls" in m for m in _launch("tiny_ops.pt.trace.json.gz").remedies)


def test_a_whole_step_graph_saves_at_least_what_no_dispatch_saves_where_nothing_blocks() -> None:
    for name in ("tiny_ops", "transformer_train", "inductor_mlp"):
        saving = _savings(name)
        assert saving["cuda-graph-step"] >= saving["no-dispatch"] - 0.01, (name, saving)


def test_a_jax_step_on_the_gpu_counts_the_runtimes_spans_as_dispatch_and_is_told_not_to_block() -> None:
    # JAX records its dispatch path on the host as TraceMe spans (PjitFunction, PjRt's execute, XLA:GPU's
    # thunks and command-buffer updates). They were left out of framework time because the trace also
    # holds a few ops, and the GPU's idle time read as "no host event" (host-idle gaps, 58%, on an
    # earlier capture of the same step). The loop's wait for each step ranks first.
    r = _launch("jax_train.xplane.pb")
    assert r.verdict == "CPU/framework-bound", r.evidence
    assert "block_until_ready" in r.remedies[0], r.remedies


def test_waiting_for_each_jax_step_is_a_blocking_call_in_the_replay() -> None:
    # block_until_ready waits for the device (and for the host callback that reports it done): whatif
    # replays it as a blocking call, which no-sync removes, not as Python dispatch. Measured: the same
    # loop waiting once per 10 steps runs a step in 0.197 ms against 0.308 ms (-36%). Without the wait
    # the next step's dispatch overlaps this step's GPU work, so the GPU's 0.151 ms paces the step:
    # no-sync predicts 0.152 ms. That is GPU time, which the profiler does not inflate: it is held
    # against the unprofiled step as it is (the benchmark's "prof." column).
    w = whatif(load(H200 / "jax_train.xplane.pb"))
    by = {s.name: s for s in w.scenarios}
    assert abs(by["no-sync"].predicted_step_ns / 1e6 / TIMES["jax_train_nonblocking"] - 1) <= 0.25
    assert by["no-sync"].saving_ns > by["no-dispatch"].saving_ns


def test_a_scan_on_the_gpu_is_a_loop_to_unroll() -> None:
    # XLA:GPU runs the scan's while loop from the host, one command buffer a timestep, and records no
    # while op; the kernels' op path says "jit(lstm)/while". Measured: unroll=5 cut the step 37%.
    r = _launch("jax_scan_lstm.xplane.pb")
    assert any("lax.scan(..., unroll=k)" in m for m in r.remedies), r.remedies
    assert TIMES["jax_scan_lstm_unroll5"] < 0.8 * TIMES["jax_scan_lstm"]
    assert not any("unroll=k" in m for m in _launch("jax_train.xplane.pb").remedies)  # no loop there


def test_a_gpu_busy_copying_from_pageable_memory_is_told_to_pin_it() -> None:
    # A 64 MB batch copied each step from pageable memory: the GPU is busy (copying) 92% of the step,
    # and the kernels are not what to optimize.
    r = _launch("pageable_copy.pt.trace.json.gz")
    assert r.verdict == "GPU-bound", r.evidence
    assert "pinned memory" in r.remedies[0] and not any("top kernels" in m for m in r.remedies), r.remedies


def test_pinning_a_pageable_copy_is_costed_at_the_pinned_rate() -> None:
    # The 64 MB pageable copy ran at 4.4-5.5 GB/s; the trace has no large pinned copy, so pin-memory
    # takes PCIe 3.0's 12 GB/s (5.6 ms for the copy). On the same H200 the prefetch loop's 32 MB pinned
    # copies ran at 55 GB/s: read from a trace that has them, the rate is its own.
    from tracekit.analyze.copies import FALLBACK_PINNED_BYTES_PER_S, pinned_rate
    from tracekit.analyze.frame import frame_of

    w = whatif(load(H200 / "pageable_copy.pt.trace.json.gz"))
    pin = next(s for s in w.scenarios if s.name == "pin-memory")
    assert w.scenarios[0] is pin and "1 host-to-device at 12.0 GB/s (PCIe 3.0" in pin.assumptions, pin
    assert 67_108_864 / FALLBACK_PINNED_BYTES_PER_S * 1e9 < pin.predicted_step_ns < 0.45 * w.replayed_step_ns
    rate, seen = pinned_rate(frame_of(load(H200 / "prefetch_serial.pt.trace.json.gz")), to_device=True)
    assert seen == 4 and 50e9 < rate < 60e9, (rate, seen)
    assert "pin-memory" not in {s.name for s in whatif(load(H200 / "prefetch_serial.pt.trace.json.gz")).scenarios}


def test_overlapping_a_copy_the_copy_engine_paces_saves_little() -> None:
    # Moving the 64 MB copy beside the kernels (overlap-copies) leaves a step of at least the copy's
    # 14.9 ms: the copy engine paces it, so overlap buys only the small matmul and the host's staging.
    # The blocking copy call no longer holds the host. The side-stream prefetch has no copy sharing
    # the kernels' stream: the scenario does not apply.
    w = whatif(load(H200 / "pageable_copy.pt.trace.json.gz"))
    overlap = next(s for s in w.scenarios if s.name == "overlap-copies")
    frame_copy = "14,913.6 µs of GPU time on the kernels' stream"
    assert frame_copy in overlap.assumptions and "1 of their calls held the host" in overlap.assumptions
    assert 14_913_600 <= overlap.predicted_step_ns < w.replayed_step_ns
    assert overlap.saving_ns < 0.05 * w.replayed_step_ns
    assert "overlap-copies" not in {s.name for s in whatif(load(H200 / "prefetch_overlap.pt.trace.json.gz")).scenarios}


def test_a_blocking_call_waits_for_the_replayed_gpu_work_not_the_measured() -> None:
    # 20 fp32 matrix products a step, each followed by torch.cuda.synchronize(): each sync's measured
    # time is its wait for the product. amp halves the products, so the waits shrink with them; keeping
    # the measured waits predicted a 14% loss.
    w = whatif(load(H200 / "sync_each_op.pt.trace.json.gz"))
    assert abs(w.replayed_step_ns / w.measured_step_ns - 1) < 0.05
    assert _savings("sync_each_op")["amp"] > 0.15


def test_a_gpu_loop_fed_by_a_slow_dataloader_is_data_loading_bound() -> None:
    # 16 samples of 1 ms each per batch from two workers: the GPU idles 99% of the step while the loop
    # waits in the DataLoader's __next__.
    r = _launch("slow_loader.pt.trace.json.gz")
    assert r.verdict == "data-loading-bound", r.evidence
    assert "num_workers" in r.remedies[0]


def test_bf16_gemms_on_hopper_count_as_low_precision() -> None:
    # Under bf16 autocast every cuBLAS GEMM of the transformer step is nvjet_sm90_tst_* (tst: bf16 in
    # and out, fp32 accumulate); the H100's fp16 step ran nvjet_sm90_hsh_*. A step already in bf16 is
    # not told to use mixed precision.
    r = _launch("transformer_train.pt.trace.json.gz")
    assert any("already runs in 16 bits" in e for e in r.evidence), r.evidence
    assert not any("mixed precision" in m for m in r.remedies)


def test_a_resnet50_training_step_on_hopper_is_judged_on_its_own_kernels() -> None:
    # torchvision's ResNet-50, bf16 autocast, channels_last, batch 32: cuDNN's Hopper convolutions
    # (sm90_xmma_*_implicit_gemm_bf16*, CUTLASS ImplicitGemmConvolution with bfloat16_t in its mangled
    # name) are convolutions in 16 bits, and the H200 idles 84% of the step while the host dispatches
    # 3,528 ops: framework-bound, with a CUDA graph of the step ranked first.
    r = _launch("resnet50_train.pt.trace.json.gz")
    assert r.verdict == "CPU/framework-bound", r.evidence
    assert any("99% of GEMM/convolution/attention kernel time already runs in 16 bits" in e for e in r.evidence)
    assert "CUDA graph" in r.remedies[0]
    classes = r.breakdown.gpu_classes
    kernel_time = classes[classes.view == "kernel"].groupby("class")["exclusive_ns"].sum()
    assert kernel_time.get("convolution", 0) > 0.1 * kernel_time.sum()
    assert kernel_time.get("other", 0) < 0.01 * kernel_time.sum()


def test_hugging_face_greedy_decoding_is_paced_by_dispatch() -> None:
    # GPT-2 generate, batch 1, 16 new tokens: 1,314 kernels of ~1 µs a call, launched at ~7 µs each,
    # with the host dispatching for longer than it launches.
    r = _launch("gpt2_generate.pt.trace.json.gz")
    assert r.verdict == "CPU/framework-bound", r.evidence
    assert r.kernel.p50_ns < r.launch_api.p50_ns
    assert "CUDA graph" in r.remedies[0]


def test_device_side_waits_polls_and_pinned_copies_do_not_block_the_host() -> None:
    # The next batch is copied from pinned memory on a side stream (cudaMemcpyAsync, non_blocking),
    # the compute stream waits for it on the device (cudaStreamWaitEvent) and the allocator polls the
    # batch's event (cudaEventQuery, record_stream). None of these holds the host, and a capture takes
    # them all in: the CUDA-graph remedy asked to take "the step's 2 synchronizing calls" out.
    from tracekit.analyze.blocking import host_blocking_rows
    from tracekit.analyze.frame import frame_of

    frame = frame_of(load(H200 / "prefetch_overlap.pt.trace.json.gz"))
    names = {frame.name(int(r)) for r in host_blocking_rows(frame)}
    assert names <= {"cudaDeviceSynchronize"}, names  # the profiler's own, after the last step
    calls = {frame.name(int(r)) for r in frame.rows("runtime_api")}
    assert {"cudaStreamWaitEvent", "cudaEventQuery", "cudaMemcpyAsync"} <= calls
    remedy = next(m for m in _launch("prefetch_overlap.pt.trace.json.gz").remedies if "CUDA graph" in m)
    assert "synchronizing calls" not in remedy
    # The same copies on the compute stream: the replay kept the host waiting in each non-blocking
    # copy (-0.8%) and split the capture in two at it.
    w = whatif(load(H200 / "prefetch_serial.pt.trace.json.gz"), instance=0)
    assert abs(w.replayed_step_ns / w.measured_step_ns - 1) < 0.005
    assert "graphs:" not in next(s for s in w.scenarios if s.name == "cuda-graph-step").assumptions


def test_an_item_is_one_wait_though_it_is_a_copy_and_a_sync() -> None:
    # Each .item() is a cudaMemcpyAsync into pinned memory and a cudaStreamSynchronize (the wait):
    # 8 micro-batches, 8 waits a step. Profiling with stacks, shapes and memory (a trace 6x larger)
    # changes nothing in the verdict.
    plain, stacked = _launch("item_sync.pt.trace.json.gz"), _launch("item_sync_stack.pt.trace.json.gz")
    for r in (plain, stacked):
        assert r.verdict == "CPU/framework-bound", r.evidence
        assert "the step's 8 synchronizing calls" in next(m for m in r.remedies if "CUDA graph" in m)
    assert [m.split(";")[0] for m in plain.remedies] == [m.split(";")[0] for m in stacked.remedies]


def test_a_remedy_predicted_to_lose_time_is_listed_last() -> None:
    # Pinned 32 MB copies and three fp32 GEMMs a step on one stream: the GPU is busy 90% of the step and
    # the host nearly as much, so amp's faster GEMMs save less than the casts it adds (-4% predicted).
    r = _launch("prefetch_serial.pt.trace.json.gz")
    assert r.verdict == "GPU-bound", r.evidence
    assert "mixed precision" in r.remedies[-1] and "top kernels" in r.remedies[0], r.remedies
    assert any("listed last" in e for e in r.evidence), r.evidence


def test_fp8_gemms_count_as_low_precision_and_their_quantization_shows() -> None:
    # torch._scaled_mm on e4m3 inputs runs cuBLAS's nvjet_sm90_qqtst_* (q: fp8). The GEMMs took 0.76 ms
    # against 1.34 ms in bf16, but quantizing each layer's input (abs, max, divide, float8 cast) added
    # more GPU time than that: the fp8 step measured 0.61 ms, the bf16 one 0.42 ms.
    r = tracekit.report(H200 / "fp8_mlp.pt.trace.json.gz")
    assert any("100% of GEMM/convolution/attention kernel time already runs in 16 bits" in e for e in r.launch.evidence)
    kernel = r.breakdown.gpu_classes[r.breakdown.gpu_classes.view == "kernel"].groupby("class")["exclusive_ns"].sum()
    assert kernel.get("cast", 0) > 0.05 * kernel.sum() and kernel.get("other", 0) == 0, kernel
    assert not any("mixed precision" in m for m in r.launch.remedies)
    assert TIMES["fp8_mlp"] > TIMES["fp8_mlp_bf16"]


def test_layout_conversions_around_nchw_convolutions_are_named() -> None:
    # ResNet-50 in NCHW with bf16 autocast: cuDNN's Hopper convolutions take NHWC, so 13% of the GPU's
    # kernel time is nchwToNhwc / nhwcToNchw conversion (0% in the channels_last capture). Those
    # kernels were "other"; they are memory-bound copies.
    r = _launch("resnet50_train_nchw.pt.trace.json.gz")
    said = next(e for e in r.evidence if "converts tensor layouts" in e)
    assert 0.10 <= int(said.split("%")[0]) / 100 <= 0.16, said
    assert not any("converts tensor layouts" in e for e in _launch("resnet50_train.pt.trace.json.gz").evidence)
    classes = r.breakdown.gpu_classes
    kernel_time = classes[classes.view == "kernel"].groupby("class")["exclusive_ns"].sum()
    assert kernel_time.get("other", 0) < 0.01 * kernel_time.sum()


def test_a_gpu_bound_step_converting_layouts_is_told_channels_last() -> None:
    # At batch 128 the NCHW ResNet-50 step is GPU-bound (13% idle), 11% of its kernel time layout
    # conversion: channels_last comes first. Measured: 56.1 ms NCHW, 29.9 ms channels_last (batch norm's
    # NCHW kernels are slower too, which the conversions' share does not count).
    from tracekit.analyze import verdicts

    r = _launch("resnet50_b128_nchw.pt.trace.json.gz")
    assert r.verdict == "GPU-bound", r.evidence
    assert r.remedies[0] == verdicts.CHANNELS_LAST_REMEDY, r.remedies
    assert TIMES["resnet50_b128"] < 0.6 * TIMES["resnet50_b128_nchw"]


def test_amp_does_not_speed_up_kernels_already_at_16_bits_or_fewer() -> None:
    # fp8_mlp's GEMMs are FP8 (nvjet ..._qqtst_...) and fp8_mlp_bf16's bf16: amp has nothing to convert.
    # The bf16-autocast transformer keeps a few fp32 GEMMs: amp halves only those (it predicted -3.6%
    # before, from halving bf16 kernels and paying casts for them; -0.4% now).
    for name in ("fp8_mlp", "fp8_mlp_bf16"):
        assert "amp" not in _savings(name)
    w = whatif(load(H200 / "transformer_train.pt.trace.json.gz"))
    amp = next(s for s in w.scenarios if s.name == "amp")
    assert "already at 16 bits or fewer keep their time" in amp.assumptions
    assert abs(amp.saving_ns) < 0.01 * w.replayed_step_ns
