"""XSpace: events and ns timings equal an independent decode with TensorFlow's own generated protobuf."""

from __future__ import annotations

import json
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
    t = t.filter(pc.not_equal(pc.cast(t["category"], pa.string()), "Steps/derived"))  # made here, not decoded
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


@needs_shared
def test_tf24_steps_come_from_the_device_steps_lines():
    """TF 2.3/2.4 write no host step marker: the derived ``Steps`` lines (one event per device and
    step, ``group_id`` 0 on both GPUs here, 650 ms apart) become steps. Disjoint windows of one group
    are two executions, so the steps are numbered in time order and the group id is kept."""
    t = tracekit.load(TRACES / "xprof" / "tf_bert_8xV100_gpu_multi_worker.xplane.pb")
    assert tracekit.info(t).steps == [0, 1]
    kinds = t["kind"].to_pylist()
    steps = [i for i, k in enumerate(kinds) if k == "step"]
    assert [json.loads(t["args"][i].as_py())["group_id"] for i in steps] == [0, 0]
    device_steps = t.filter(pc.equal(t["thread_name"], "Steps"))
    derived = device_steps.filter(pc.equal(pc.cast(device_steps["kind"], pa.string()), "gpu_user_range"))
    starts = t["start_ns"].to_pylist()
    ends = [s + d for s, d in zip(starts, t["dur_ns"].to_pylist(), strict=True)]
    for i, (d_start, d_dur) in zip(steps, sorted(zip(derived["start_ns"].to_pylist(), derived["dur_ns"].to_pylist(),
                                                      strict=True)), strict=True):
        assert starts[i] <= d_start and ends[i] == d_start + d_dur  # reaches back to the first launch
        assert d_start - starts[i] < 1_000_000
    # Every GPU activity in a step window belongs to that step, through its launch call.
    report = tracekit.launch(t).result
    assert report.steps is not None and len(report.steps.steps) == 2
    assert 19e6 < report.steps.median_ns < 22e6


def test_keras_fit_captured_by_hand_gets_a_step_per_train_function_call(tmp_path):
    """model.fit under tf.profiler.experimental.start/stop (no TensorBoard callback) writes no step
    marker: each call of Keras's per-batch function (Keras 3: multi_step_on_iterator) becomes a step,
    and the report says where its steps come from."""
    tf = pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    import numpy as np

    from tracekit.ingest.xplane import KERAS_STEP_FUNCTIONS

    x = np.random.default_rng(0).random((512, 10, 4), dtype=np.float32)
    y = np.random.default_rng(1).integers(0, 3, 512)
    model = keras.Sequential([keras.Input((10, 4)), keras.layers.GRU(8), keras.layers.Dense(3)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    logdir = tmp_path / "logs"

    class ProfileBatches(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 2:
                tf.profiler.experimental.start(str(logdir))

        def on_train_batch_end(self, batch, logs=None):
            if batch == 5:
                tf.profiler.experimental.stop()

    model.fit(x, y, batch_size=64, epochs=1, callbacks=[ProfileBatches()], verbose=0)
    table = tracekit.load(logdir)
    kinds, names = table["kind"].cast(pa.string()).to_pylist(), table["name"].cast(pa.string()).to_pylist()
    step_names = {n for k, n in zip(kinds, names, strict=True) if k == "step"}
    assert len(step_names) == 1 and step_names <= set(KERAS_STEP_FUNCTIONS)
    assert tracekit.info(table).steps == [0, 1, 2, 3]
    report = tracekit.report(table)
    assert report.launch.steps is not None and report.launch.steps.origin.startswith("calls of ")
    assert "step(s) from calls of" in tracekit.render(report, "markdown")
    # The ops of each call, on TF's executor threads, belong to its step.
    ops = [s for k, s in zip(kinds, table["step"].to_pylist(), strict=True) if k == "cpu_op"]
    assert sum(s is not None for s in ops) > 0.9 * len(ops)
