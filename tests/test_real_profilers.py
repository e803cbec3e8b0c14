"""Traces made here with the real torch.profiler and TensorFlow profiler on CPU ingest, and their op
names and counts match what the profilers' own APIs report."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import tracekit


@pytest.fixture(scope="module")
def torch_trace(tmp_path_factory) -> tuple[Path, dict[str, int]]:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    torch.manual_seed(0)
    torch.set_num_threads(1)
    lstm = torch.nn.LSTM(16, 32, batch_first=True)
    cell = torch.nn.LSTMCell(16, 32)
    x = torch.randn(4, 10, 16)
    out = tmp_path_factory.mktemp("torch") / "lstm.pt.trace.json"
    counts: dict[str, int] = {}

    def on_ready(p) -> None:
        p.export_chrome_trace(str(out))
        counts.update({e.key: e.count for e in p.key_averages()})

    with torch.no_grad():
        lstm(x)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                     schedule=schedule(wait=0, warmup=1, active=2), on_trace_ready=on_ready) as prof:
            for _ in range(3):
                with record_function("phase::forward"):
                    lstm(x)
                    h = c = torch.zeros(4, 32)
                    for t in range(x.shape[1]):
                        h, c = cell(x[:, t], (h, c))
                prof.step()
    return out, counts


def test_torch_trace_op_counts_match_key_averages(torch_trace):
    path, counts = torch_trace
    table = tracekit.load(path)
    ops = table.filter(pc.is_in(table["category"].cast(pa.string()), pa.array(["cpu_op", "user_annotation"])))
    # key_averages() folds ProfilerStep#N into one "ProfilerStep*" key; apply the same convention.
    got = Counter("ProfilerStep*" if n.startswith("ProfilerStep#") else n for n in ops["name"].to_pylist())
    assert got == Counter(counts)
    assert got["aten::lstm"] == 2 and got["aten::lstm_cell"] == 20 and got["phase::forward"] == 2


def test_torch_trace_nesting_and_steps(torch_trace):
    path, _ = torch_trace
    table = tracekit.load(path)
    info = tracekit.info(table)
    assert info.source == "torch" and info.counts_by_kind["step"] == 2 and len(info.steps) == 2
    names = table["name"].to_pylist()
    parents = table["parent"].to_pylist()
    kinds = table["kind"].to_pylist()
    steps = table["step"].to_pylist()
    for i, n in enumerate(names):
        if n == "aten::lstm":  # directly inside the record_function range, inside a step
            assert names[parents[i]] == "phase::forward"
            assert steps[i] is not None
        if n == "aten::mkldnn_rnn_layer":
            assert names[parents[i]] == "aten::lstm"
        if kinds[i] == "step":
            assert n.startswith("ProfilerStep#")


def test_torch_gzip_export_ingests_the_same(torch_trace, tmp_path):
    import gzip

    path, _ = torch_trace
    gz = tmp_path / "lstm.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    a, b = tracekit.load(path), tracekit.load(gz)
    assert a.drop_columns(["trace_id"]).equals(b.drop_columns(["trace_id"]))


@pytest.fixture(scope="module")
def tf_logdir(tmp_path_factory) -> Path:
    tf = pytest.importorskip("tensorflow")
    logdir = tmp_path_factory.mktemp("tf")
    layer = tf.keras.layers.LSTM(32)
    fn = tf.function(lambda x: layer(x))
    x = tf.random.stateless_normal((4, 10, 16), seed=(1, 2))
    fn(x)
    tf.profiler.experimental.start(str(logdir))
    for i in range(3):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            fn(x).numpy()
    tf.profiler.experimental.stop()
    return logdir


def test_tf_trace_from_logdir_matches_independent_decode(tf_logdir):
    xplane_pb2 = pytest.importorskip("tensorflow.tsl.profiler.protobuf.xplane_pb2")
    files = list(tf_logdir.glob("plugins/profile/*/*.xplane.pb"))
    assert len(files) == 1
    xs = xplane_pb2.XSpace()
    xs.ParseFromString(files[0].read_bytes())
    want = Counter()
    for p in xs.planes:
        for line in p.lines:
            for ev in line.events:
                name = p.event_metadata[ev.metadata_id].name
                if line.name.startswith("tf_Compute") and ":" in name and "::" not in name:
                    want[name] += 1
    table = tracekit.load(tf_logdir)  # the logdir itself: tracekit finds the single run
    ops = table.filter(pc.equal(table["kind"].cast(pa.string()), "cpu_op"))
    got = Counter(n for n, c in zip(ops["name"].to_pylist(), ops["category"].to_pylist(), strict=True) if "tf_Compute" in c)
    assert got == want and sum(got.values()) > 0
    info = tracekit.info(table)
    assert info.source == "tf" and info.steps == [0, 1, 2]
    assert any(n.endswith(":_MklMatMul") or n.endswith(":MatMul") for n in got)


def test_memory_events_carry_their_bytes(tmp_path):
    """torch.profiler(profile_memory=True) writes [memory] events with "Bytes" (capitalised)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        x = torch.empty(1024, 256)  # 1 MiB of float32
        del x
    path = tmp_path / "memory.json"
    prof.export_chrome_trace(str(path))
    t = tracekit.load(path)
    memory = t.filter(pc.equal(pc.cast(t["kind"], pa.string()), "memory"))
    sizes = memory["bytes"].to_pylist()
    assert len(sizes) >= 2 and None not in sizes
    assert 1024 * 256 * 4 in sizes and -(1024 * 256 * 4) in sizes  # the allocation and its release


def test_a_trace_without_steps_is_not_reported_per_step(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    lstm = torch.nn.LSTMCell(8, 8)
    x = torch.randn(2, 8)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            lstm(x)
    path = tmp_path / "nosteps.json"
    prof.export_chrome_trace(str(path))
    text = tracekit.render(tracekit.report(path), "markdown")
    assert "no steps marked" in text and "ops per step" not in text
    launch = tracekit.launch(path).result
    assert not any("per step" in e for e in launch.evidence)
