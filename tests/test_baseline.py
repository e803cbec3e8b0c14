"""The native baselines: the C++ BLAS LSTM builds, runs and equals nn.LSTM; the CUDA sources compile;
``tracekit overhead`` joins framework runs with it and its parts add up to the excess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tracekit import api, manifest
from tracekit.cli import main

torch = pytest.importorskip("torch")

from tracekit.collectors import native  # noqa: E402


def _needs_toolchain() -> None:
    """Skip only when a prerequisite is missing; with them present a failed build fails the test."""
    if native._tool("cmake", "cmake", "CMAKE_BIN_DIR") is None or native._cxx_compiler() is None:
        pytest.skip("cmake and a C++ compiler are needed to build baseline_cu (pip install 'tracekit[native]')")
    if native.wheel_openblas() is None and not any(Path(p).exists() for p in (
            "/usr/include/x86_64-linux-gnu/cblas.h", "/usr/include/cblas.h",
            "/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h")):
        pytest.skip("no OpenBLAS: pip install 'tracekit[native]' (scipy-openblas32) or apt-get install libopenblas-dev")


@pytest.fixture(scope="module")
def cpu_build() -> native.Build:
    _needs_toolchain()
    return native.build(cuda=False)


def test_build_takes_openblas_from_the_wheel_when_installed(cpu_build):
    if native.wheel_openblas() is None:
        pytest.skip("scipy-openblas32 is not installed: the build used the system OpenBLAS")
    cache = (cpu_build.directory / "CMakeCache.txt").read_text()
    assert f"OPENBLAS_ROOT:PATH={native.wheel_openblas()}" in cache


def test_a_failed_build_is_one_line_naming_the_cause_and_the_log(tmp_path, monkeypatch):
    """A real CMake failure (OpenBLAS pointed at an empty directory): the message, not CMake's call stack."""
    _needs_toolchain()
    monkeypatch.setattr(native, "wheel_openblas", lambda: tmp_path / "empty")
    with pytest.raises(native.BaselineError) as e:
        native.build(cuda=False, build_root=tmp_path / "build")
    message = e.value.one_line()
    assert "\n" not in message and "Call Stack" not in message and "CMakeLists.txt:" not in message
    assert "OpenBLAS not found under OPENBLAS_ROOT" in message and "build.log" in message


def _write_problem(path: Path, lstm: torch.nn.LSTM, x: torch.Tensor) -> None:
    arrays = [lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0, x]
    path.write_bytes(b"".join(a.detach().float().contiguous().numpy().tobytes() for a in arrays))


def test_cpu_baseline_equals_nn_lstm_on_its_weights(cpu_build, tmp_path):
    torch.manual_seed(3)
    hidden, batch, timesteps, inputs = 24, 5, 7, 9
    lstm = torch.nn.LSTM(inputs, hidden)
    x = torch.randn(timesteps, batch, inputs)
    _write_problem(tmp_path / "problem.bin", lstm, x)
    run = subprocess.run([str(cpu_build.program("cpu_blas")), "--config", f"{hidden},{batch},{timesteps},{inputs}",
                          "--weights", str(tmp_path / "problem.bin"), "--dump-output", str(tmp_path / "out.bin"),
                          "--repeats", "2", "--warmup", "1"], capture_output=True, text=True, check=True)
    result = json.loads(run.stdout)
    assert result["check"]["max_abs_err"] < 1e-5
    out = np.frombuffer((tmp_path / "out.bin").read_bytes(), np.float32).reshape(timesteps, batch, hidden)
    with torch.no_grad():
        expected = lstm(x)[0].numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_cpu_baseline_rejects_a_short_weights_file(cpu_build, tmp_path):
    (tmp_path / "short.bin").write_bytes(b"\0" * 16)
    run = subprocess.run([str(cpu_build.program("cpu_blas")), "--config", "8,2,3", "--weights", str(tmp_path / "short.bin")],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "too short" in run.stderr


def test_cpu_baseline_times_short_steps_until_the_minimum_time(cpu_build):
    def timed(*extra: str) -> dict:
        run = subprocess.run([str(cpu_build.program("cpu_blas")), "--config", "8,2,3", "--repeats", "2", "--warmup", "1",
                              *extra], capture_output=True, text=True, check=True)
        return json.loads(run.stdout)["timing"]["wall_ns"]

    assert timed()["n"] == 2
    few_us = timed("--min-time-ms", "5")
    assert few_us["n"] > 2 and few_us["n"] * few_us["min"] < 5e6 + few_us["p90"] * 2


def test_build_is_cached_by_source_hash(cpu_build):
    again = native.build(cuda=False)
    assert again.directory == cpu_build.directory and again.program("cpu_blas").exists()


def test_cuda_sources_compile_and_link():
    """No GPU here: the cuDNN and cuBLAS programs must still compile (nvcc 13, headers from PyPI wheels)."""
    _needs_toolchain()
    nvcc = shutil.which("nvcc")
    deps = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tracekit" / "cuda-deps"
    if nvcc is None:
        pytest.skip("no nvcc on this machine")
    if not (deps / "include" / "cudnn.h").exists():
        pytest.skip(f"no cuDNN/cuBLAS headers in {deps}: run baseline_cu/get_cuda_deps.sh")
    built = native.build(cuda=True)
    for variant, library in (("cudnn_lstm", "libcudnn.so"), ("cublas_lstm", "libcublas.so")):
        dynamic = subprocess.run(["readelf", "-d", str(built.program(variant))], capture_output=True, text=True).stdout
        assert library in dynamic and "libcudart.so" in dynamic


@pytest.fixture(scope="module")
def collection(tmp_path_factory, cpu_build) -> Path:
    out = tmp_path_factory.mktemp("overhead") / "c"
    assert main(["baseline", "--preset", "tiny", "-o", str(out), "--no-progress"]) == 0
    assert main(["collect", "torch", "--preset", "tiny", "--variants", "nn_lstm,nn_lstm_amp,lstmcell_loop,custom_eager",
                 "-o", str(out), "--no-progress"]) == 0
    pytest.importorskip("tensorflow")
    assert main(["collect", "tf", "--preset", "tiny", "--variants", "keras_lstm,keras_impl1", "-o", str(out),
                 "--no-progress"]) == 0
    return out


def test_baseline_rows_are_in_the_manifest_format(collection):
    rows = [r for r in manifest.read_manifest(collection).rows if r["framework"] == "native"]
    assert [r["status"] for r in rows] == ["ok", "ok"]  # the tiny preset's two configs
    for row in rows:
        assert row["variant"] == "cpu_blas" and row["variant_group"] == "baseline"
        assert row["check"]["max_abs_err"] < native.TOLERANCE["fp32"]
        # ~10 µs steps: timed until MIN_TIMED_S of calls, far past the preset's 3 repeats
        assert row["timing"]["wall_ns"]["n"] > 3 and row["timing"]["wall_ns"]["median"] > 0


def test_overhead_ratios_pairs_and_parts_add_up(collection):
    rep = api.overhead([collection]).result
    runs = rep.runs
    from tracekit.collectors.pytorch.variants import cpu_autocast_problem

    amp = {"nn_lstm_amp"} if cpu_autocast_problem() is None else set()  # bf16 nn.LSTM needs AVX-512/AMX
    assert set(runs.variant) == {"nn_lstm", "lstmcell_loop", "custom_eager", "keras_lstm", "keras_impl1"} | amp
    assert (runs.baseline == "native/cpu_blas").all()
    np.testing.assert_allclose(runs.ratio, runs.time_ns / runs.baseline_ns)
    # The decomposition explains the whole excess, run by run.
    np.testing.assert_allclose(runs.parts_ns, runs.excess_ns, rtol=1e-9, atol=1.0)
    np.testing.assert_allclose(runs.cast_ns + runs.extra_compute_ns + runs.dispatch_ns, runs.excess_ns, atol=1.0)
    assert len(runs[runs.variant == "nn_lstm_amp"]) == 2 * len(amp)
    assert (runs[runs.variant == "nn_lstm_amp"].cast_ns > 0).all()
    assert (runs[runs.variant != "nn_lstm_amp"].cast_ns == 0).all()
    assert (runs.dispatch_ns >= 0).all()
    # The fine-grained loop spends more outside compute ops than the fused op does.
    per_step = runs.set_index(["variant", "timesteps"]).dispatch_ns
    assert per_step[("lstmcell_loop", 10)] > per_step[("nn_lstm", 10)]
    pairs = rep.pairs.set_index(["a", "b"])
    assert ("native/cpu_blas", "torch/nn_lstm") in pairs.index and ("tf/keras_lstm", "tf/keras_impl1") in pairs.index
    assert (pairs.configs == 2).all()
    assert set(rep.trends.axis) == {"timesteps"}  # the tiny preset varies only timesteps


def test_the_parts_add_up_when_the_loop_also_fetches_batches():
    """A real DataLoader(num_workers=2) loop: time outside compute ops is partly batch fetching; it is
    still in the excess's dispatch part, or the parts would not add up to the excess."""
    from tracekit.analyze.breakdown import breakdown
    from tracekit.analyze.overhead import decompose
    from tracekit.ingest import load

    table = load(Path(__file__).parent / "data" / "cpu" / "loader_workers_fetch_largest.pt.trace.json.gz")
    whole = breakdown(table).cpu_ops.set_index("step").loc[-1]
    assert whole.fetching_ns > 0.3 * whole.span_ns
    parts = decompose(table, time_ns=2e6, baseline_ns=0.5e6)
    assert parts["cast_ns"] + parts["extra_compute_ns"] + parts["dispatch_ns"] == pytest.approx(1.5e6)
    assert parts["dispatch_ns"] > 0.3 * 2e6  # fetching is in it


def test_overhead_report_in_every_format(collection, tmp_path):
    html = tmp_path / "overhead.html"
    assert main(["overhead", str(collection), "-o", str(html)]) == 0
    page = html.read_text()
    assert "<polyline" in page and "time / native vs timesteps" in page
    assert main(["overhead", str(collection), "-o", str(tmp_path / "o.md")]) == 0
    text = (tmp_path / "o.md").read_text()
    assert "against native/cpu_blas" in text and "on average over 2 config(s)" in text
    data = json.loads(api.render(api.overhead([collection]), "json"))
    from tracekit.collectors.pytorch.variants import cpu_autocast_problem

    amp_runs = 2 if cpu_autocast_problem() is None else 0  # bf16 nn.LSTM needs AVX-512/AMX
    assert len(data["runs"]) == 10 + amp_runs and data["pairs"]


def test_overhead_without_a_manifest_is_a_usage_error(tmp_path, capsys):
    assert main(["overhead", str(tmp_path)]) == 2
    assert "no manifest.jsonl" in capsys.readouterr().err
