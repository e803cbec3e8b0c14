"""Writes tests/data/cpu/lightning_mlp.pt.trace.json.gz: a real capture by PyTorch Lightning's own profiler
(lightning.pytorch.profilers.PyTorchProfiler, export_to_chrome=True; CPU, one thread) of Trainer.fit on a
2-layer MLP (64-256-10, batch 64) with Adam, 5 steps marked after 1 wait and 1 warm-up.

Lightning steps every optimizer with a closure, optimizer.step(closure): the forward, the backward and
Lightning's hooks run inside the Optimizer.step#Adam.step range, before Adam's own update, and Lightning
marks its profiler steps inside that closure, so each optimizer call crosses a step boundary; the profile
ends inside the last call, before its backward.

    python tests/data/cpu/make_lightning.py   # needs lightning (made with 2.6.6), not a tracekit dependency
Made with torch 2.13.0 (CPU build) on a 2-core AMD EPYC (Zen 4: AVX-512 with BF16, no AMX). Timed
unprofiled there (Trainer.fit over 400 batches, two runs each): 1.69 / 1.48 ms a batch with Adam's
default update, 1.40 / 1.42 ms with fused=True.
"""

import gzip
import shutil
import tempfile
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.profilers import PyTorchProfiler

OUT = Path(__file__).parent / "lightning_mlp.pt.trace.json.gz"


class MLP(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), 1e-3)


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = torch.utils.data.TensorDataset(torch.randn(2048, 64), torch.randint(0, 10, (2048,)))
    with tempfile.TemporaryDirectory() as tmp:
        profiler = PyTorchProfiler(dirpath=tmp, filename="prof", export_to_chrome=True,
                                   schedule=torch.profiler.schedule(wait=1, warmup=1, active=5))
        trainer = L.Trainer(max_epochs=1, limit_train_batches=20, profiler=profiler, accelerator="cpu", logger=False,
                            enable_checkpointing=False, enable_progress_bar=False)
        trainer.fit(MLP(), torch.utils.data.DataLoader(data, batch_size=64))
        (raw,) = Path(tmp).glob("*.pt.trace.json")
        with raw.open("rb") as src, gzip.open(OUT, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
