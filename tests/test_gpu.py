"""The GPU paths on a real GPU: collectors under torch.profiler with CUDA activities, the native cuDNN
and cuBLAS baselines with their output checks, and tracekit's analyses on what they wrote.

Skipped without CUDA (CI has none); run on a lent GPU machine with
``python -m pytest -q tests/test_gpu.py`` (collectors/gpu_session.sh's machine). The same paths are
tested on CPU by the H100 traces in tests/data/h100.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine (the H100 traces in tests/data/h100 cover these paths on CPU)",
                allow_module_level=True)

from tracekit.analyze.critical_path import critical_path  # noqa: E402
from tracekit.analyze.launch import launch  # noqa: E402
from tracekit.cli import main  # noqa: E402
from tracekit.export.kineto_json import export_table  # noqa: E402
from tracekit.ingest import load  # noqa: E402
from tracekit.manifest import read_manifest  # noqa: E402


@pytest.fixture(scope="module")
def collection(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gpu") / "c"
    assert main(["collect", "torch", "--preset", "tiny", "--device", "cuda", "--variants",
                 "nn_lstm,lstmcell_loop,nn_lstm_amp", "-o", str(out), "--no-progress"]) == 0
    return out


def test_cuda_traces_link_every_kernel_and_judge_it(collection: Path) -> None:
    m = read_manifest(collection)
    rows = [r for r in m.latest().values() if r["status"] == "ok"]
    assert len(rows) >= 6
    for row in rows:
        table = load(m.trace_paths(row)[0])
        frame_kinds = table.column("kind").cast("string").to_pylist()
        assert "gpu_kernel" in frame_kinds
        launch_rows = table.column("launch_row").to_pylist()
        kernels = [i for i, k in enumerate(frame_kinds) if k == "gpu_kernel"]
        assert all(launch_rows[i] is not None for i in kernels)
        report = launch(table)
        assert report.verdict and report.gpu_devices == 1
        assert critical_path(table).total_ns > 0


def test_cuda_trace_export_round_trips(collection: Path, tmp_path: Path) -> None:
    m = read_manifest(collection)
    row = next(r for r in m.latest().values() if r["status"] == "ok" and r["variant"] == "nn_lstm")
    source = load(m.trace_paths(row)[0])
    out = tmp_path / "e.json"
    export_table(source, out)
    back = load(out)
    assert back.num_rows >= source.num_rows


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_native_cuda_baselines_pass_their_output_checks(dtype: str, tmp_path: Path) -> None:
    out = tmp_path / "native"
    code = main(["baseline", "--preset", "tiny", "--device", "cuda", "--dtype", dtype, "-o", str(out), "--no-progress"])
    rows = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    failed = [(r["run_id"], r.get("error")) for r in rows if r["status"] != "ok"]
    assert code == 0 and not failed, failed
    cudnn = [r for r in rows if r["variant"] == "cudnn_lstm"]
    assert cudnn and all(r.get("math") in ("tf32", "fp32", "fp16") for r in cudnn)
