"""The PyTorch collectors, run for real on CPU: variants agree, traces show what each variant does.

The tiny preset runs every CPU variant under torch.profiler through ``tracekit collect``; the
assertions are the research note's findings (research/torch_profiler.md section 6): the LSTMCell
loop dispatches ~47 ops per timestep, linear in timesteps; nn.LSTM a constant ~23 per forward;
casts only under autocast; the training step's phases as ranges.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracekit import api, manifest
from tracekit.cli import main
from tracekit.ingest import load

torch = pytest.importorskip("torch")

from tracekit.collectors.pytorch import variants as V  # noqa: E402
from tracekit.collectors.pytorch.workloads import build  # noqa: E402
from tracekit.collectors.runner import RunSpec, run_sweep  # noqa: E402
from tracekit.collectors.sweep import PRESETS, LayerConfig  # noqa: E402
from tracekit.collectors.timing import MIN_TIMED_S  # noqa: E402

SMALL = LayerConfig(hidden=16, batch=3, timesteps=6, input=12)
CPU = torch.device("cpu")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("variant", ["nn_lstm", "lstmcell_loop", "custom_eager", "custom_script", "custom_compile"])
def test_fp32_variants_agree_with_nn_lstm(variant):
    reference = build("nn_lstm", SMALL.as_dict(), CPU).forward()
    out = build(variant, SMALL.as_dict(), CPU).forward()
    assert out.shape == (SMALL.timesteps, SMALL.batch, SMALL.hidden)
    torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(V.cpu_autocast_problem() is not None, reason=f"this CPU: {V.cpu_autocast_problem()}")
def test_autocast_variant_agrees_within_bf16_tolerance_and_computes_in_bf16():
    reference = build("nn_lstm", SMALL.as_dict(), CPU).forward()
    out = build("nn_lstm_amp", SMALL.as_dict(), CPU).forward()
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), reference, rtol=0, atol=3e-2)
    assert not torch.equal(out.float(), reference)  # it really ran in reduced precision


def test_stacked_variant_equals_the_custom_lstm_chained_over_its_layers():
    stacked = LayerConfig(hidden=16, batch=3, timesteps=6, input=16, layers=3)
    weights = V.make_weights(stacked, CPU)
    x = V.make_input(stacked, CPU)
    with torch.no_grad():
        fused = V.FusedLSTM(weights)(x)
        h = x
        for layer in range(3):
            w_ih, w_hh, b_ih, b_hh = weights.layer(layer)
            one = V.Weights(torch.nn.LSTM(16, 16))
            for name, value in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"),
                                   (w_ih, w_hh, b_ih, b_hh), strict=True):
                getattr(one.lstm, name).copy_(value)
            h = V.CustomLSTM(one)(h)
    torch.testing.assert_close(h, fused, rtol=1e-5, atol=1e-5)


def test_language_model_script_forward_equals_eager_and_training_lowers_the_loss():
    lm = PRESETS["tiny"].lm.as_dict()
    eager, scripted = build("lm_forward", lm, CPU).forward(), build("lm_forward_script", lm, CPU).forward()
    torch.testing.assert_close(scripted, eager)
    train = build("lm_train", lm, CPU)
    from tracekit.collectors.pytorch import lm as lm_model

    _, targets = lm_model.make_batch(PRESETS["tiny"].lm, CPU)

    def loss() -> float:
        logits = train.forward()
        return float(torch.nn.functional.cross_entropy(logits.reshape(-1, lm["vocab"]), targets.reshape(-1)))

    before = loss()
    for _ in range(5):
        train.step()
    assert loss() < before


@pytest.fixture(scope="module")
def tiny_collection(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("collect") / "torch"
    code = main(["collect", "torch", "--preset", "tiny", "-o", str(out), "--no-progress"])
    assert code == 0
    return out


def _rows(out: Path) -> dict[str, dict]:
    return {row["variant"] + "@" + str(row["config"].get("timesteps")): row for row in manifest.read_manifest(out).rows}


def _ops_per_step(path: Path) -> tuple[float, int | None]:
    report = api.report(path)
    cpu = report.breakdown.cpu_ops
    whole = cpu[cpu.step == -1].iloc[0]
    return whole["ops"] / len(report.breakdown.steps), report.breakdown.timesteps


def test_every_cpu_variant_ran_and_its_trace_ingests(tiny_collection):
    m = manifest.read_manifest(tiny_collection)
    ok = [row for row in m.rows if row["status"] == "ok"]
    expected = {"nn_lstm", "nn_lstm_stacked", "nn_lstm_amp", "lstmcell_loop", "custom_eager", "custom_script",
                "custom_compile", "lm_forward", "lm_forward_script", "lm_train"}
    assert len(m.rows) == 7 * 2 + 3  # 7 CPU layer variants x 2 timesteps configs + 3 LM variants
    problem = V.cpu_autocast_problem()
    if problem is not None:  # an AVX2-only CPU: bf16 nn.LSTM is recorded as skipped, with the reason
        expected.discard("nn_lstm_amp")
        skipped = [row for row in m.rows if row["status"] != "ok"]
        assert {row["variant"] for row in skipped} == {"nn_lstm_amp"}
        assert all(row["status"] == "skipped" and row["error"] == problem for row in skipped)
    assert {row["variant"] for row in ok} == expected
    assert all(row["status"] != "failed" for row in m.rows)
    for row in ok:
        (trace,) = m.trace_paths(row)
        table = load(trace)
        assert table.num_rows > 0
        repeats = PRESETS["tiny"].repeats if row["variant_group"] == "layer" else PRESETS["tiny"].lm_repeats
        timed = row["timing"]["wall_ns"]
        assert timed["n"] >= repeats and row["timing"]["min_time_s"] == MIN_TIMED_S
        if timed["p90"] * repeats < MIN_TIMED_S * 1e9 / 2:  # a short step: timed past the preset's repeats
            assert timed["n"] > repeats
        assert row["profiled_timing"]["wall_ns"]["n"] == PRESETS["tiny"].profiled_steps
        assert row["threads"] == 1 and row["framework_version"] == torch.__version__
        meta = json.loads(table.schema.metadata[b"tracekit.trace_meta_json"])
        assert meta["tracekit_run"]["run_id"] == row["run_id"]  # the run's identity travels in the trace


def test_lstmcell_loop_dispatches_about_47_ops_per_timestep_linear_in_timesteps(tiny_collection):
    rows, m = _rows(tiny_collection), manifest.read_manifest(tiny_collection)
    short, t_short = _ops_per_step(m.trace_paths(rows["lstmcell_loop@5"])[0])
    long, t_long = _ops_per_step(m.trace_paths(rows["lstmcell_loop@10"])[0])
    assert (t_short, t_long) == (5, 10)  # read back from the trace's metadata
    per_timestep = (long - short) / (t_long - t_short)
    assert 44 <= per_timestep <= 50
    assert 44 <= long / t_long <= 52


def test_nn_lstm_dispatches_a_constant_23_ops_per_forward(tiny_collection):
    rows, m = _rows(tiny_collection), manifest.read_manifest(tiny_collection)
    short, _ = _ops_per_step(m.trace_paths(rows["nn_lstm@5"])[0])
    long, _ = _ops_per_step(m.trace_paths(rows["nn_lstm@10"])[0])
    assert short == long
    assert 20 <= short <= 26


def _collected_breakdowns(collection: Path):
    """(manifest row, breakdown of its trace) for every run that produced a trace."""
    m = manifest.read_manifest(collection)
    for row in m.rows:
        if row["status"] == "ok":
            yield row, api.report(m.trace_paths(row)[0]).breakdown


def test_casts_appear_only_under_autocast(tiny_collection):
    for row, bd in _collected_breakdowns(tiny_collection):
        cpu = bd.cpu_ops
        cast_ns = int(cpu[cpu.step == -1].iloc[0]["cast_ns"])
        if row["variant"] == "nn_lstm_amp":
            assert cast_ns > 0, row["run_id"]
        else:
            assert cast_ns == 0, row["run_id"]


def test_training_step_has_every_phase_range(tiny_collection):
    rows, m = _rows(tiny_collection), manifest.read_manifest(tiny_collection)
    ranges = api.ranges(m.trace_paths(rows["lm_train@5"])[0]).result.summary
    names = set(ranges.name)
    assert {"phase::zero_grad", "phase::forward", "phase::loss", "phase::backward", "phase::optimizer"} <= names
    steps = PRESETS["tiny"].profiled_steps
    assert (ranges.set_index("name").loc[["phase::backward", "phase::optimizer"], "instances"] == steps).all()


def test_a_second_collect_skips_finished_runs(tiny_collection, capsys):
    before = len(manifest.read_manifest(tiny_collection).rows)
    assert main(["collect", "torch", "--preset", "tiny", "-o", str(tiny_collection), "--no-progress"]) == 0
    assert "0 run(s), 17 already done" in capsys.readouterr().out
    assert len(manifest.read_manifest(tiny_collection).rows) == before


def test_cuda_graph_variant_is_skipped_on_cpu_with_a_reason(tmp_path):
    out = tmp_path / "c"
    assert main(["collect", "torch", "--preset", "tiny", "--variants", "custom_compile_cudagraphs",
                 "--device", "cpu", "--profiler", "none", "-o", str(out), "--no-progress"]) == 0
    rows = manifest.read_manifest(out).rows
    assert [r["status"] for r in rows] == ["skipped", "skipped"]
    assert "CUDA" in rows[0]["error"]


def test_one_failing_run_is_recorded_and_the_sweep_goes_on(tmp_path):
    def spec(variant: str) -> RunSpec:
        return RunSpec("torch", variant, "layer", "cpu", "fp32", {"hidden": 4}, "none", "tiny", 1, 1, 1)

    def execute(s: RunSpec, out: Path) -> dict:
        if s.variant == "bad":
            raise ValueError("boom\nsecond line")
        return {"timing": {}}

    result = run_sweep([spec("a"), spec("bad"), spec("b")], tmp_path, execute, progress=False)
    assert [r["status"] for r in result.ran] == ["ok", "failed", "ok"]
    assert result.ran[1]["error"].startswith("ValueError: boom (")
    # The failure is retried on the next run; the successes are not.
    again = run_sweep([spec("a"), spec("bad"), spec("b")], tmp_path, execute, progress=False)
    assert [r["variant"] for r in again.ran] == ["bad"] and len(again.reused) == 2


def test_unknown_variant_and_preset_are_usage_errors(tmp_path, capsys):
    assert main(["collect", "torch", "--variants", "nope", "-o", str(tmp_path / "x")]) == 2
    assert "unknown torch variant(s) nope" in capsys.readouterr().err
    assert main(["collect", "torch", "--preset", "huge", "-o", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


def test_compare_of_two_collected_runs_uses_their_unprofiled_step_times(tiny_collection):
    rows, m = _rows(tiny_collection), manifest.read_manifest(tiny_collection)
    fused, loop = rows["nn_lstm@10"], rows["lstmcell_loop@10"]
    result = api.compare([m.trace_paths(fused)[0], m.trace_paths(loop)[0]], labels=["fused", "loop"]).result
    headline = next(f for f in result.findings if f.startswith("Without the profiler"))
    unprofiled = loop["timing"]["wall_ns"]["median"] / fused["timing"]["wall_ns"]["median"]
    assert f"{unprofiled:.2f}x" in headline or f"{1 / unprofiled:.2f}x" in headline
    assert "the collector's unprofiled timing" in headline


def test_exclusive_cpu_split_adds_up_on_every_collected_trace(tiny_collection):
    from tracekit.analyze.cpu_partition import PARTS

    for row, bd in _collected_breakdowns(tiny_collection):
        part = bd.cpu_partition
        assert len(part) == len(bd.steps) + 1, row["run_id"]
        assert (part[list(PARTS)].sum(axis=1) == part.span_ns).all(), row["run_id"]
        assert (part[list(PARTS)] >= 0).all().all()
