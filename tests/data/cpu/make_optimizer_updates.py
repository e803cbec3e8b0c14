"""Writes tests/data/cpu/adamw_{per_parameter,foreach,fused}.pt.trace.json.gz: real torch.profiler
captures (CPU) of one MLP's training loop (4 steps marked by a schedule), its AdamW updating the
parameters one at a time (the CPU default), with foreach=True, and with fused=True. The per-parameter
update runs ~10 ops per parameter each step; foreach's ops loop over the tensors on the CPU.

    python tests/data/cpu/make_optimizer_updates.py
Made with torch 2.13.0 (CPU build).
"""

import gzip
import shutil
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

HERE = Path(__file__).parent


def capture(name: str, **update: bool) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.AdamW(model.parameters(), **update)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "t.json"
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=4),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
            for _ in range(5):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                prof.step()
        with raw.open("rb") as src, gzip.open(HERE / f"{name}.pt.trace.json.gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)


if __name__ == "__main__":
    torch.set_num_threads(1)
    capture("adamw_per_parameter", foreach=False)
    capture("adamw_foreach", foreach=True)
    capture("adamw_fused", fused=True)
