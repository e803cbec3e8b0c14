"""The TensorFlow collectors, run for real on CPU under the TF profiler.

Assertions follow research/tf_profiler.md: casts only under mixed precision; BlockLSTMV2 is one
fused op per step; the while-loop cell's ops grow with timesteps; eager dispatch events (one
``EagerExecute`` per op) only in eager mode; compare states the implementation=1 and eager costs.

Op counts come from host-tracer-level-3 captures (``tf-host3``): at level 2, the only level
``tf.profiler.experimental.start`` gives in TF 2.21, the executor traces only ops its cost model
finds expensive, so counts depend on sizes and on how many runs it has seen.
"""

from __future__ import annotations

import importlib.util
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tracekit import api, manifest
from tracekit.cli import main
from tracekit.ingest import load

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from tracekit.collectors.sweep import PRESETS, LayerConfig  # noqa: E402
from tracekit.collectors.tflow.variants import LAYER_VARIANTS  # noqa: E402
from tracekit.collectors.tflow.workloads import build  # noqa: E402

SMALL = LayerConfig(hidden=8, batch=4, timesteps=6, input=6)


@pytest.mark.parametrize("variant", [v for v in LAYER_VARIANTS if v != "keras_mixed"])
def test_fp32_variants_agree_with_the_keras_layer(variant):
    reference = build("keras_lstm", SMALL.as_dict(), gpu=False).forward().numpy()
    out = build(variant, SMALL.as_dict(), gpu=False).forward().numpy()
    assert out.shape == (SMALL.batch, SMALL.timesteps, SMALL.hidden)
    np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-5)


def test_mixed_precision_variant_computes_in_bf16_within_tolerance():
    reference = build("keras_lstm", SMALL.as_dict(), gpu=False).forward().numpy()
    out = build("keras_mixed", SMALL.as_dict(), gpu=False).forward()
    assert out.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(out, tf.float32).numpy(), reference, rtol=0, atol=3e-2)


def test_language_model_eager_equals_graph_and_training_lowers_the_loss():
    lm = PRESETS["tiny"].lm.as_dict()
    np.testing.assert_allclose(build("lm_forward_eager", lm, False).forward().numpy(),
                               build("lm_forward", lm, False).forward().numpy(), rtol=1e-5, atol=1e-5)
    train = build("lm_train", lm, False)
    from tracekit.collectors.tflow import lm as lm_model

    _, targets = lm_model.make_batch(PRESETS["tiny"].lm)

    def loss() -> float:
        return float(tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=train.forward())))

    before = loss()
    for _ in range(5):
        train.step()
    assert loss() < before


HAVE_XPROF = importlib.util.find_spec("xprof") is not None


@pytest.fixture(scope="module")
def tf_collection(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("collect") / "tf"
    profilers = "tf,tf-host3" if HAVE_XPROF else "tf"
    assert main(["collect", "tf", "--preset", "tiny", "--profiler", profilers, "-o", str(out), "--no-progress"]) == 0
    return out


def _trace(out: Path, variant: str, timesteps: int | None = None, profiler: str = "tf") -> tuple[dict, Path]:
    if profiler == "tf-host3" and not HAVE_XPROF:
        pytest.skip("level-3 captures need xprof (pip install 'tracekit[tf-trace]')")
    m = manifest.read_manifest(out)
    (row,) = [r for r in m.rows if r["variant"] == variant and r["profiler"] == profiler
              and (timesteps is None or r["config"]["timesteps"] == timesteps)]
    return row, m.trace_paths(row)[0]


def _level3(out: Path, variant: str, timesteps: int | None = None) -> Path:
    return _trace(out, variant, timesteps, "tf-host3")[1]


def _whole(path: Path, timesteps: int | None = None):
    report = api.report(path, timesteps=timesteps)
    cpu = report.breakdown.cpu_ops
    return cpu[cpu.step == -1].iloc[0], report.breakdown.steps


def _ops_per_step(path: Path) -> float:
    whole, steps = _whole(path)
    return whole["ops"] / len(steps)


def test_every_variant_ran_under_the_tf_profiler_and_ingests(tf_collection):
    rows = [r for r in manifest.read_manifest(tf_collection).rows if r["profiler"] == "tf"]
    assert len(rows) == len(LAYER_VARIANTS) * 2 + 3 and all(r["status"] == "ok" for r in rows)
    for row in rows:
        (path,) = manifest.read_manifest(tf_collection).trace_paths(row)
        assert path.name.endswith(".xplane.pb")
        table = load(path)
        assert table.schema.metadata[b"tracekit.source"] == b"tf"
        assert row["tf_capture"]["host_tracer_level"] == 2  # what TF 2.21 really used (options ignored)
        _, steps = _whole(path)
        assert len(steps) == PRESETS["tiny"].profiled_steps  # TraceMe step markers became steps


def test_casts_only_under_mixed_precision(tf_collection):
    for variant in LAYER_VARIANTS:
        for timesteps in (5, 10):
            path = _level3(tf_collection, variant, timesteps)
            cast_ns = int(_whole(path)[0]["cast_ns"])
            assert (cast_ns > 0) == (variant == "keras_mixed"), (variant, timesteps, cast_ns)


def test_block_lstm_is_one_fused_op_per_step(tf_collection):
    for timesteps in (5, 10):
        _, path = _trace(tf_collection, "block_lstm", timesteps)
        names = Counter(load(path).column("name").to_pylist())
        assert sum(n for name, n in names.items() if name.endswith(":BlockLSTMV2")) == PRESETS["tiny"].profiled_steps
        whole, _ = _whole(path)
        assert whole["rnn_ns"] > 0


def test_while_loop_cell_ops_grow_with_timesteps(tf_collection):
    for variant in ("raw_while", "keras_lstm", "keras_impl1"):
        per_timestep = (_ops_per_step(_level3(tf_collection, variant, 10)) -
                        _ops_per_step(_level3(tf_collection, variant, 5))) / 5
        assert per_timestep >= 15, (variant, per_timestep)
    assert _ops_per_step(_level3(tf_collection, "block_lstm", 5)) == _ops_per_step(_level3(tf_collection, "block_lstm", 10))


def _eager_executes_per_step(path: Path) -> float:
    table = load(path)
    steps = set(table.column("step").to_pylist()) - {None, -1}
    in_steps = [n for n, s in zip(table.column("name").to_pylist(), table.column("step").to_pylist(), strict=True)
                if s is not None and s >= 0]
    return Counter(in_steps)["EagerExecute"] / len(steps)


def test_eager_dispatch_events_only_in_eager_mode(tf_collection):
    for variant in ("keras_lstm", "raw_while", "keras_xla", "block_lstm"):
        assert _eager_executes_per_step(_trace(tf_collection, variant, 10)[1]) == 1  # the function call itself
    assert _eager_executes_per_step(_trace(tf_collection, "keras_eager", 10)[1]) >= 100
    assert _eager_executes_per_step(_trace(tf_collection, "lm_forward_eager")[1]) > \
        50 * _eager_executes_per_step(_trace(tf_collection, "lm_forward")[1])


def test_compare_states_the_cost_of_implementation_1_and_of_eager(tf_collection, capsys):
    default, impl1 = _level3(tf_collection, "keras_lstm", 10), _level3(tf_collection, "keras_impl1", 10)
    assert main(["compare", str(default), str(impl1), "--label", "default", "--label", "impl1", "-f", "markdown"]) == 0
    text = capsys.readouterr().out
    assert "impl1 runs" in text and "framework ops per step against" in text
    assert "impl1 has" in text and "StridedSlice" in text  # the four-way gate split slices the weights
    comparison = api.compare([default, impl1], labels=["default", "impl1"]).result
    metrics = comparison.metrics.set_index("metric")
    assert metrics.loc["ops_per_step", "impl1"] > 1.3 * metrics.loc["ops_per_step", "default"]

    graph, eager = _level3(tf_collection, "keras_lstm", 10), _level3(tf_collection, "keras_eager", 10)
    comparison = api.compare([graph, eager], labels=["graph", "eager"]).result
    assert any(s.startswith("eager takes") and "as long as graph per step" in s for s in comparison.findings)
    assert any("EagerExecute" not in s and s.startswith("eager") for s in comparison.findings)


def test_nsys_runs_the_tf_workload_with_phase_ranges(tmp_path):
    from tracekit.collectors import nsys

    try:
        exe = nsys.find_nsys()
    except nsys.NsysError:
        pytest.skip("no nsys here; run collectors/get_nsys.sh")
    if nsys.find_importer(exe) is None:
        pytest.skip("nsys without QdstrmImporter; run collectors/get_nsys.sh")
    out = tmp_path / "c"
    assert main(["collect", "tf", "--preset", "tiny", "--variants", "lm_train", "--profiler", "nsys", "-o", str(out),
                 "--no-progress"]) == 0
    m = manifest.read_manifest(out)
    (row,) = m.rows
    names = set(api.ranges(m.trace_paths(row)[0]).result.summary.name)
    assert {"tracekit:forward", "tracekit:loss", "tracekit:backward", "tracekit:optimizer"} <= names


def test_gpu_side_of_the_tf_path_on_the_real_v100_xspace():
    """No TF GPU here: the 8xV100 BERT XSpace stands in for what the GPU variants will produce."""
    from conftest import TRACES

    path = TRACES / "xprof" / "tf_bert_8xV100_gpu_multi_worker.xplane.pb"
    if not path.exists():
        pytest.skip(f"{path} absent (../shared not beside the checkout)")
    report = api.report(path)
    gpu = report.breakdown.gpu[report.breakdown.gpu.step == -1]
    assert report.breakdown.has_gpu and len(gpu) >= 2 and set(gpu.device_id) <= set(range(8))  # a row per active V100
    classes = [c for c in gpu.columns if c.endswith("_ns") and c not in
               ("span_ns", "busy_ns", "idle_ns", "compute_ns", "non_compute_ns")]
    assert (gpu[classes].sum(axis=1) == gpu.busy_ns).all()
    assert (gpu.busy_ns + gpu.idle_ns == gpu.span_ns).all()
    assert gpu.cast_ns.sum() > 0  # Eigen scalar_cast_op kernels of the fp16 BERT
    assert report.launch.verdict
    assert "GPU" in api.render(report, "markdown")


def test_level3_captures_count_every_op_the_same_way_whatever_the_size(tf_collection):
    """Level 3 sees the while loop's every op: ops per step are linear in timesteps, exactly."""
    rows = [r for r in manifest.read_manifest(tf_collection).rows if r["profiler"] == "tf-host3"] if HAVE_XPROF else []
    if not rows:
        pytest.skip("level-3 captures need xprof (pip install 'tracekit[tf-trace]')")
    assert all(r["tf_capture"]["host_tracer_level"] == 3 for r in rows)
    five, ten = _ops_per_step(_level3(tf_collection, "raw_while", 5)), _ops_per_step(_level3(tf_collection, "raw_while", 10))
    fifteen_guess = ten + (ten - five)
    assert fifteen_guess > ten > five and (ten - five) % 5 == 0  # a whole number of ops per timestep


def test_tf_python_capture_uses_the_server_workaround_and_records_python(tmp_path):
    """TF 2.21 ignores start()'s options; the server + xprof client capture honours them."""
    pytest.importorskip("xprof", reason="the tf-python capture needs xprof (pip install 'tracekit[tf-trace]')")
    out = tmp_path / "c"
    assert main(["collect", "tf", "--preset", "tiny", "--variants", "keras_eager", "--profiler", "tf,tf-python",
                 "-o", str(out), "--no-progress"]) == 0
    m = manifest.read_manifest(out)
    by_profiler: dict[str, list] = {}
    for row in m.rows:
        by_profiler.setdefault(row["profiler"], []).append(row)
    remote = by_profiler["tf-python"][0]
    assert remote["tf_capture"]["python_tracer_level"] == 1 and remote["tf_capture"]["host_tracer_level"] == 3
    python_ns = []
    for profiler in ("tf", "tf-python"):
        report = api.report(m.trace_paths(by_profiler[profiler][0])[0])
        host = report.breakdown.host
        python_ns.append(int(host[host.step == -1].iloc[0]["python_ns"]))
        assert len(report.breakdown.steps) >= 2
    assert python_ns[0] == 0 and python_ns[1] > 0  # Python frames only with the workaround


def test_eager_ops_are_classed_by_the_op_they_run(tf_collection):
    """An eager op is an EagerExecute event named only by its 'EagerLocalExecute: MatMul' child."""
    whole, _ = _whole(_level3(tf_collection, "keras_eager", 10))
    assert whole["gemm_ns"] > 0 and whole["elementwise_ns"] > 0
    assert whole["compute_ns"] > 0 and whole["dispatch_ns"] > 0
