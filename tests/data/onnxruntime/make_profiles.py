"""Writes the ONNX Runtime profiles in tests/data/onnxruntime/: real ``SessionOptions.enable_profiling``
captures on the CPU execution provider of two small models exported from PyTorch.

* ``mlp.json``: Linear(256, 512), GELU, Linear(512, 256), LayerNorm at batch 32 (4 nodes), 30 runs.
  Timed here unprofiled: 105 µs a run; profiled 137 µs.
* ``small_nodes.json.gz``: 20 blocks of Linear(16, 16), tanh, * 0.5, + x at batch 1 (60 nodes after
  ORT's fusions), 30 runs. Timed here unprofiled: 27 µs a run; profiled 470 µs (the profiler's
  per-node recording: tracekit.analyze.onnxruntime_nodes).
* ``no_runs.json``: the MLP's session created with profiling on and ended before any run.

Run in a separate venv with onnxruntime, onnx and torch (tracekit depends on none of them):
    python -m venv /tmp/ortvenv && /tmp/ortvenv/bin/pip install onnxruntime onnx torch
    /tmp/ortvenv/bin/python tests/data/onnxruntime/make_profiles.py
Made with onnxruntime 1.32.0, onnx 1.23.2 and torch 2.13.0 on a 2-core AMD EPYC.
"""

import gzip
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

HERE = Path(__file__).resolve().parent
RUNS = 30


class SmallNodes(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(20))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x)) * 0.5 + x
        return x


def unprofiled_us(model: Path, x: np.ndarray) -> float:
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: x}
    for _ in range(100):
        session.run(None, feed)
    best = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(300):
            session.run(None, feed)
        best.append((time.perf_counter() - t0) / 300 * 1e6)
    return min(best)


def profile(module: torch.nn.Module, x: torch.Tensor, work: Path, out: Path) -> None:
    torch.manual_seed(0)
    model = work / (out.name.split(".")[0] + ".onnx")
    torch.onnx.export(module.eval(), (x,), str(model), dynamo=False)
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(work / "profile")
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: x.numpy()}
    for _ in range(RUNS):
        session.run(None, feed)
    written = Path(session.end_profiling())
    if out.suffix == ".gz":
        with open(written, "rb") as src, gzip.open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
    else:
        shutil.copyfile(written, out)
    print(f"{out.name}: unprofiled {unprofiled_us(model, x.numpy()):.0f} µs a run")


def profile_no_run(work: Path, out: Path) -> None:
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(work / "no_runs")
    session = ort.InferenceSession(str(work / "mlp.onnx"), options, providers=["CPUExecutionProvider"])
    shutil.copyfile(session.end_profiling(), out)


def main() -> None:
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256),
                              torch.nn.LayerNorm(256))
    with tempfile.TemporaryDirectory() as tmp:
        profile(mlp, torch.randn(32, 256), Path(tmp), HERE / "mlp.json")
        profile(SmallNodes(), torch.randn(1, 16), Path(tmp), HERE / "small_nodes.json.gz")
        profile_no_run(Path(tmp), HERE / "no_runs.json")


if __name__ == "__main__":
    main()
