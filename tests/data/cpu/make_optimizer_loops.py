"""Writes tests/data/cpu/{optimizer_loop,gan_loop,epoch_range_loop}.pt.trace.json.gz: real torch.profiler
captures (CPU) of training loops profiled without a schedule, so no ProfilerStep#N, and no range of
the user's around each iteration; torch.optim records every optimizer step as a range.

* optimizer_loop: an MLP, 6 iterations of zero_grad / forward / backward / step (one SGD).
* gan_loop: a generator and a discriminator, each with its own SGD, stepped in turn: 5 iterations of
  two ``Optimizer.step#SGD.step`` calls each, the generator's round with more ops than the other's.
* epoch_range_loop: optimizer_loop's loop inside one ``record_function("epoch")``: no iteration
  nests in that range, so none is inferred.

    python tests/data/cpu/make_optimizer_loops.py
Made with torch 2.13.0 (CPU build).
"""

import gzip
import shutil
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

HERE = Path(__file__).parent
torch.manual_seed(0)
torch.set_num_threads(1)


def save(prof: profile, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "t.json"
        prof.export_chrome_trace(str(raw))
        with raw.open("rb") as src, gzip.open(HERE / f"{name}.pt.trace.json.gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)


def mlp_iteration(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


model = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 128), torch.randint(0, 10, (32,))
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(6):
        mlp_iteration(model, opt, x, y)
save(prof, "optimizer_loop")

with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("epoch"):
    for _ in range(6):
        mlp_iteration(model, opt, x, y)
save(prof, "epoch_range_loop")

gen = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                          torch.nn.Linear(64, 32))
disc = torch.nn.Sequential(torch.nn.Linear(32, 1))
g_opt, d_opt = torch.optim.SGD(gen.parameters(), lr=0.01), torch.optim.SGD(disc.parameters(), lr=0.01)
noise, real = torch.randn(32, 16), torch.randn(32, 32)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(5):
        d_opt.zero_grad()
        d_loss = disc(real).mean() - disc(gen(noise).detach()).mean()
        d_loss.backward()
        d_opt.step()
        g_opt.zero_grad()
        disc(gen(noise)).mean().backward()
        g_opt.step()
save(prof, "gan_loop")
