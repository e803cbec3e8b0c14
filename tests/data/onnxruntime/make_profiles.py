"""Writes the ONNX Runtime profiles in tests/data/onnxruntime/: real ``SessionOptions.enable_profiling``
captures on the CPU execution provider of two small models exported from PyTorch.

* ``mlp.json``: Linear(256, 512), GELU, Linear(512, 256), LayerNorm at batch 32 (4 nodes), 30 runs.
  Timed here unprofiled: 105 µs a run; profiled 137 µs.
* ``small_nodes.json.gz``: 20 blocks of Linear(16, 16), tanh, * 0.5, + x at batch 1 (60 nodes after
  ORT's fusions), 30 runs. Timed here unprofiled: 27 µs a run; profiled 470 µs (the profiler's
  per-node recording: tracekit.analyze.onnxruntime_nodes).
* ``no_runs.json``: the MLP's session created with profiling on and ended before any run.
* ``bert_encoder.json.gz``: a 4-layer Hugging Face BERT encoder (256 wide, 4 heads, batch 8 of 128
  tokens) exported with its attention mask, 8 runs after ORT's fusions (SkipLayerNormalization,
  FusedMatMul, Gelu; its mask as Where nodes). Needs transformers too.

    /tmp/ortvenv/bin/python tests/data/onnxruntime/make_profiles.py [NAME ...]   (default: all)

Run in a separate venv with onnxruntime, onnx and torch (tracekit depends on none of them):
    python -m venv /tmp/ortvenv && /tmp/ortvenv/bin/pip install onnxruntime onnx torch
    /tmp/ortvenv/bin/python tests/data/onnxruntime/make_profiles.py
Made with onnxruntime 1.32.0, onnx 1.23.2 and torch 2.13.0 on a 2-core AMD EPYC.
"""

import gzip
import shutil
import sys
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


def profile_bert(work: Path, out: Path) -> None:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    bert = BertModel(BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                                vocab_size=1000)).eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state

    ids, mask = torch.randint(0, 1000, (8, 128)), torch.ones(8, 128, dtype=torch.long)
    model = work / "bert.onnx"
    torch.onnx.export(Encoder(), (ids, mask), str(model), input_names=["ids", "mask"], dynamo=False, opset_version=17)
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(work / "bert")
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    for _ in range(8):
        session.run(None, {"ids": ids.numpy(), "mask": mask.numpy()})
    with open(session.end_profiling(), "rb") as src, gzip.open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)


def main(names: list[str]) -> None:
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256),
                              torch.nn.LayerNorm(256))
    wanted = set(names) or {"mlp", "small_nodes", "no_runs", "bert_encoder"}
    with tempfile.TemporaryDirectory() as tmp:
        if "mlp" in wanted:
            profile(mlp, torch.randn(32, 256), Path(tmp), HERE / "mlp.json")
        elif "no_runs" in wanted:  # its session loads the MLP's model
            torch.onnx.export(mlp.eval(), (torch.randn(32, 256),), str(Path(tmp) / "mlp.onnx"), dynamo=False)
        if "small_nodes" in wanted:
            profile(SmallNodes(), torch.randn(1, 16), Path(tmp), HERE / "small_nodes.json.gz")
        if "no_runs" in wanted:
            profile_no_run(Path(tmp), HERE / "no_runs.json")
        if "bert_encoder" in wanted:
            profile_bert(Path(tmp), HERE / "bert_encoder.json.gz")


if __name__ == "__main__":
    main(sys.argv[1:])
