"""XSpace: events and ns timings equal an independent decode with TensorFlow's own generated protobuf."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import TRACES, ids, needs_shared, shared_files

import tracekit

XSPACE = shared_files("xprof/**/*.xplane.pb")


def tf_decode(path):
    xplane_pb2 = pytest.importorskip("tensorflow.tsl.profiler.protobuf.xplane_pb2")
    xs = xplane_pb2.XSpace()
    xs.ParseFromString(path.read_bytes())
    start = 0
    for p in xs.planes:
        if p.name == "Task Environment":
            names = {k: v.name for k, v in p.stat_metadata.items()}
            start = next(s.uint64_value for s in p.stats if names[s.metadata_id] == "profile_start_time")
    out = []
    for p in xs.planes:
        for line in p.lines:
            base = line.timestamp_ns + (start if line.timestamp_ns < 10**17 else 0)
            for ev in line.events:
                out.append((p.name, line.name, p.event_metadata[ev.metadata_id].name,
                            (base * 1000 + ev.offset_ps) // 1000, ev.duration_ps // 1000))
    return out


@needs_shared
@pytest.mark.parametrize("path", XSPACE, ids=ids(XSPACE))
def test_events_and_timings_equal_independent_decode(path):
    want = tf_decode(path)
    t = tracekit.load(path)
    got = list(zip(t["process_name"].to_pylist(), t["thread_name"].to_pylist(), t["name"].to_pylist(),
                   t["start_ns"].to_pylist(), t["dur_ns"].to_pylist(), strict=True))
    assert got == want


@needs_shared
def test_gpu_kernels_link_to_host_launch_through_correlation_id():
    t = tracekit.load(TRACES / "xprof" / "tf_bert_8xV100_gpu_multi_worker.xplane.pb")
    gpu = t.filter(pc.is_in(pc.cast(t["kind"], pa.string()), pa.array(["gpu_kernel", "gpu_memcpy"])))
    with_corr = gpu.filter(pc.is_valid(gpu["correlation_id"]))
    assert len(with_corr) > 1000
    corr = t["correlation_id"].to_pylist()
    kinds = t["kind"].to_pylist()
    for c, row in zip(with_corr["correlation_id"].to_pylist(), with_corr["launch_row"].to_pylist(), strict=True):
        assert row is not None and corr[row] == c and kinds[row] == "runtime_api"
    assert set(gpu["device_id"].drop_null().to_pylist()) == {1, 4, 6}
    kernels = t.filter(pc.equal(pc.cast(t["kind"], pa.string()), "gpu_kernel"))
    assert kernels["grid_x"].null_count == 0 and kernels["registers_per_thread"].null_count == 0


@needs_shared
def test_cpu_captures_have_steps_ops_and_casts():
    bf16 = tracekit.load(TRACES / "xprof" / "cpu_tf2.21" / "lstm_keras_bf16_fn.xplane.pb")
    info = tracekit.info(bf16)
    assert info.steps == [0, 1, 2, 3, 4]
    ops = Counter(n.rsplit(":", 1)[1] for n, k in zip(bf16["name"].to_pylist(), bf16["kind"].to_pylist(), strict=True) if k == "cpu_op" and ":" in n)
    assert ops["Cast"] == 505  # 101 per step (research note), same as xprof's Events DB
    fp32 = tracekit.load(TRACES / "xprof" / "cpu_tf2.21" / "lstm_keras_fn.xplane.pb")
    assert not any(n.endswith(":Cast") for n in fp32["name"].to_pylist())
    block = tracekit.load(TRACES / "xprof" / "cpu_tf2.21" / "lstm_raw_blocklstm_fn.xplane.pb")
    assert sum(n == "BlockLSTMV2:BlockLSTMV2" for n in block["name"].to_pylist()) == 5


@needs_shared
def test_launch_calls_named_after_their_kernel_count_as_launches():
    """TF before 2022 names the CUPTI API event after the kernel it launched, not cudaLaunchKernel:
    the correlation link, not the name, makes it a launch (and a copy's API call a memory call)."""
    path = TRACES / "xprof" / "tf_bert_8xV100_gpu_multi_worker.xplane.pb"
    t = tracekit.load(path)
    kernels = t.filter(pc.equal(pc.cast(t["kind"], pa.string()), "gpu_kernel"))
    names = t["name"].to_pylist()
    launchers = {names[r] for r in kernels["launch_row"].drop_null().to_pylist()}
    assert "cudaLaunchKernel" not in launchers and len(launchers) > 10  # named after kernels
    report = tracekit.launch(t).result
    assert report.launch_api.count == len(kernels) == 1330
    assert report.launch_api.p50_ns > 0


@needs_shared
def test_info_counts_every_host_thread_of_an_xspace_trace():
    """XSpace has no pid: threads must not collapse into one (they did through a null pid:tid key)."""
    t = tracekit.load(TRACES / "xprof" / "cpu_tf2.21" / "lstm_keras_fn.xplane.pb")
    host = t.filter(pc.is_valid(t["tid"]))
    assert tracekit.info(t).threads == len(set(host["thread_name"].to_pylist())) == 5
