"""Writes tests/data/cpu/parameter_loop_lightning_ema.pt.trace.json.gz: a real capture by PyTorch
Lightning's own profiler (lightning.pytorch.profilers.PyTorchProfiler, export_to_chrome=True, shapes
recorded; CPU, two threads) of Trainer.fit on an MLP of twelve 128-wide Linear-LayerNorm-GELU blocks
and a head (50 tensors), AdamW, batch 32, with a callback that keeps an EMA of the weights a tensor at a
time in ``on_train_batch_end`` (``e.sub_((1 - d) * (e - p))``), 5 steps marked after 1 wait and 1
warm-up.

Lightning steps the optimizer with a closure: the forward and backward run inside the
``Optimizer.step#AdamW.step`` range, and it marks its profiler steps inside that closure, so the update
after the mark nests under the next step, not the call; the first profiled step begins inside a call
whose range is not recorded at all (its update ops stand alone, right before the EMA).

    python tests/data/cpu/make_lightning_ema.py   # needs lightning (made with 2.6.6), not a tracekit dependency
Made with torch 2.13.0 (CPU build) on a 2-core Xeon (AVX-512, AMX).
"""

import gzip
import shutil
import tempfile
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.profilers import PyTorchProfiler

OUT = Path(__file__).parent / "parameter_loop_lightning_ema.pt.trace.json.gz"


class WeightAverage(L.Callback):
    def on_fit_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.shadow = [p.detach().clone() for p in module.parameters()]

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, outputs: object, batch: object,
                           index: int) -> None:
        with torch.no_grad():
            for e, p in zip(self.shadow, module.parameters(), strict=True):
                e.sub_(0.001 * (e - p))


class MLP(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        blocks = [m for _ in range(12) for m in (torch.nn.Linear(128, 128), torch.nn.LayerNorm(128), torch.nn.GELU())]
        self.net = torch.nn.Sequential(*blocks, torch.nn.Linear(128, 10))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), 1e-3)


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(2)
    data = torch.utils.data.TensorDataset(torch.randn(2048, 128), torch.randint(0, 10, (2048,)))
    with tempfile.TemporaryDirectory() as tmp:
        profiler = PyTorchProfiler(dirpath=tmp, filename="prof", export_to_chrome=True, record_shapes=True,
                                   schedule=torch.profiler.schedule(wait=1, warmup=1, active=5))
        trainer = L.Trainer(max_epochs=1, limit_train_batches=20, profiler=profiler, accelerator="cpu", logger=False,
                            enable_checkpointing=False, enable_progress_bar=False, callbacks=[WeightAverage()])
        trainer.fit(MLP(), torch.utils.data.DataLoader(data, batch_size=32))
        (raw,) = Path(tmp).glob("*.pt.trace.json")
        with raw.open("rb") as src, gzip.open(OUT, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
