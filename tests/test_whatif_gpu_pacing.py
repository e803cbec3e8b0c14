"""whatif on GPU traces whose step spans threads or runs behind the host: the threads that take turns
are replayed as one line of work, and a launch call held by a full launch queue is a wait for the GPU,
not host cost. Real traces: tests/data/h200 (make_workloads.py) and HTA's shared samples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import TRACES

from tracekit import api
from tracekit.analyze import intervals
from tracekit.analyze.critical_path import median_step_instance, step_window
from tracekit.analyze.frame import frame_of
from tracekit.analyze.whatif import _step, whatif
from tracekit.ingest import load

H200 = Path(__file__).parent / "data" / "h200"
TIMES = {row["name"]: row["step_ms_median"] for row in map(json.loads, (H200 / "times.jsonl").read_text().splitlines())}
HTA_RANK0 = TRACES / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
TF_BERT = TRACES / "xprof" / "tf_bert_8xV100_gpu_multi_worker.xplane.pb"
needs_shared = pytest.mark.skipif(not TRACES.exists(), reason="../shared/traces is absent (real traces are read from there)")


def _by_name(w) -> dict[str, int]:
    return {s.name: s.predicted_step_ns for s in w.scenarios}


def test_crossing_tells_nesting_from_overlap() -> None:
    start, end = np.array([0, 10, 30]), np.array([5, 20, 40])
    # [12, 18] nests in [10, 20]; [15, 25] starts inside it and ends after; [28, 45] holds [30, 40].
    q_start, q_end = np.array([12, 15, 28]), np.array([18, 25, 45])
    assert intervals.crossing(q_start, q_end, start, end).tolist() == [False, True, False]
    assert intervals.crossing(start, end, q_start, q_end).tolist() == [False, False, False]
    # An edge that overhangs by no more than the tolerance still nests.
    assert not intervals.crossing(np.array([11]), np.array([21]), start, end, tolerance=1).any()


def test_a_training_step_replays_the_python_and_autograd_threads_as_one() -> None:
    # The Python thread launches the forward pass, the autograd thread the backward pass while the
    # Python thread waits in backward(): their events nest, so both are replayed, and the replay still
    # reproduces the step. Before, only the autograd thread was replayed and the forward's dispatch was
    # kept as a wait: no-dispatch predicted 61% where the whole step's dispatch is 79%.
    w = whatif(load(H200 / "transformer_train.pt.trace.json.gz"))
    assert len(w.replayed_tids) == 2
    assert abs(w.replayed_step_ns / w.measured_step_ns - 1) < 0.01
    saving = {s.name: s.saving_ns / w.replayed_step_ns for s in w.scenarios}
    assert saving["no-dispatch"] > 0.75
    assert saving["cuda-graph-step"] >= saving["no-dispatch"]
    text = api.render(api.whatif(H200 / "transformer_train.pt.trace.json.gz"), "markdown")
    assert "Replayed as one line of work: threads" in text


@needs_shared
def test_threads_that_run_at_the_same_time_are_not_merged() -> None:
    # TF's executor threads launch kernels side by side (their calls overlap without nesting).
    assert len(whatif(load(TF_BERT)).replayed_tids) == 1


def test_a_gpu_bound_step_behind_a_full_launch_queue_is_paced_by_the_gpu() -> None:
    # ResNet-50 NCHW at batch 128 on an H200: the GPU runs a step behind the host, and 77 launch calls
    # (17 ms of the step's host time) block with 1,021 launches pending until a kernel ends. Replayed
    # as host cost they made every GPU-side remedy look worthless (channels-last 0.8%). As waits, the
    # replay reproduces the step from the GPU's own time, dispatch is free to go, and dropping the layout
    # conversions saves their time. Measured with channels_last: 29.9 ms against 56.1 (the conversions'
    # time is a lower bound: NHWC batch norm runs faster too).
    frame = frame_of(load(H200 / "resnet50_b128_nchw.pt.trace.json.gz"))
    w = whatif(frame.table)
    assert abs(w.replayed_step_ns / w.measured_step_ns - 1) < 0.01
    predicted = _by_name(w)
    assert w.replayed_step_ns - predicted["no-dispatch"] < 0.01 * w.replayed_step_ns
    saving = 1 - predicted["channels-last"] / w.replayed_step_ns
    assert 0.10 < saving < 1 - TIMES["resnet50_b128"] / TIMES["resnet50_b128_nchw"]
    start, end, window = step_window(frame, None, median_step_instance(frame))
    held = [seg for seg in _step(frame, start, end, window).segments if seg.queued != -1]
    assert len(held) == 77 and {frame.name(seg.owner) for seg in held} == {"cudaLaunchKernel", "cudaLaunchKernelExC",
                                                                          "cuLaunchKernelEx"}


def test_a_slow_launch_call_with_no_queue_behind_it_keeps_its_time() -> None:
    # transformer_train_graphed's cudaGraphLaunch calls take ~230 µs and return as a kernel ends, but
    # no launch was pending: not the queue. Kept as host cost, the replay reproduces the step exactly.
    w = whatif(load(H200 / "transformer_train_graphed.pt.trace.json.gz"))
    assert w.replayed_step_ns == w.measured_step_ns


@needs_shared
def test_a_step_whose_gpu_runs_a_step_behind_is_reproduced() -> None:
    # HTA's ns_resolution_trace rank 0: this step's first kernel starts 89.6 ms after the step does, behind
    # the last step's work. Replayed from an idle GPU the step came out 25% long; counted from its first
    # kernel, behind the earlier work, it is within 1%.
    w = whatif(load(HTA_RANK0))
    assert abs(w.replayed_step_ns / w.measured_step_ns - 1) < 0.01
    predicted = _by_name(w)
    assert predicted["amp"] < 0.8 * w.replayed_step_ns  # GEMM-heavy and GPU-bound: amp matters most
    assert predicted["no-dispatch"] >= 0.99 * w.replayed_step_ns  # the host is not what paces it


@pytest.mark.parametrize(("name", "tolerance"), [("transformer_train_whole_graph", 0.05), ("fp8_mlp_bf16", 0.15)])
def test_where_the_gpu_runs_behind_the_host_the_replay_is_the_gpu_paced_step(name: str, tolerance: float) -> None:
    # The host issues the step (one graph launch; nine launches) far faster than the GPU runs it, so
    # the profiled step window is the host's (0.32 and 0.23 ms) and the loop's real step is the GPU's.
    # The replay counts the GPU's time from the step's first kernel: 2.37 and 0.39 ms, against
    # unprofiled steps of 2.39 and 0.42 ms.
    w = whatif(load(H200 / f"{name}.pt.trace.json.gz"))
    assert w.measured_step_ns < 0.8 * w.replayed_step_ns
    assert abs(w.replayed_step_ns / 1e6 / TIMES[name] - 1) <= tolerance
