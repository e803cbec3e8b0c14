"""Writes tests/data/cpu/loader_epochs.pt.trace.json.gz: a real torch.profiler capture (CPU, one thread)
of a 128-256-10 MLP trained with SGD over 3 epochs of a DataLoader with 2 worker processes and
``persistent_workers=False`` (4 batches of 64 an epoch), 11 steps marked after one warm-up: each
epoch's first step waits for the old iterator's workers to shut down and the new one's to start
(~30 ms against a median step of ~1.3 ms here).

    python tests/data/cpu/make_loader_epochs.py
Made with torch 2.13.0 (CPU build).
"""

import gzip
import shutil
import tempfile

import torch
from profiled import HERE
from torch.profiler import ProfilerActivity, profile, schedule


class Samples(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 64 * 4

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.randn(128), i % 10


if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Samples(), batch_size=64, num_workers=2, persistent_workers=False)

    def train(prof: profile | None = None) -> None:
        for _ in range(3):
            for x, y in loader:
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                if prof is not None:
                    prof.step()

    train()  # unprofiled warm-up
    with tempfile.TemporaryDirectory() as tmp:
        raw = f"{tmp}/t.json"
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=11),
                     on_trace_ready=lambda p: p.export_chrome_trace(raw)) as prof:
            train(prof)
        with open(raw, "rb") as src, gzip.open(HERE / "loader_epochs.pt.trace.json.gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
