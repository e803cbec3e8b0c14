"""Writes tests/data/cpu/<name>.pt.trace.json.gz: real torch.profiler captures (CPU) of training loops
profiled without a schedule, so no ProfilerStep#N, and no range of the user's around each iteration;
torch.optim records every optimizer step as a range.

* optimizer_loop: an MLP, 6 iterations of zero_grad / forward / backward / step (one SGD).
* gan_loop: a generator and a discriminator, each with its own SGD, stepped in turn: 5 iterations of
  two ``Optimizer.step#SGD.step`` calls each, the generator's round with more ops than the other's.
* epoch_range_loop: optimizer_loop's loop inside one ``record_function("epoch")``: no iteration
  nests in that range, so none is inferred.
* range_loop: optimizer_loop's iterations each inside ``record_function("train_step")``: its calls
  are the steps.
* eval_every_other_loop: optimizer_loop's loop with an evaluation pass (forward, accuracy, .item())
  after every other iteration: one optimizer, 8 iterations, its rounds alternating in op count.
* gan_adam_loop: a GAN with an Adam each, their networks of equal parameter counts (so their
  optimizer calls run the same ops), stepped in turn: 6 iterations told apart by their backward
  passes (the generator's runs through both networks).

    python tests/data/cpu/make_optimizer_loops.py [NAME ...]   # all when none is named
Made with torch 2.13.0 (CPU build).
"""

import gzip
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

HERE = Path(__file__).parent


def save(prof: profile, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "t.json"
        prof.export_chrome_trace(str(raw))
        with raw.open("rb") as src, gzip.open(HERE / f"{name}.pt.trace.json.gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)


def mlp() -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    model = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    return model, torch.optim.SGD(model.parameters(), lr=0.01), torch.randn(32, 128), torch.randint(0, 10, (32,))


def mlp_iteration(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


def optimizer_loop() -> profile:
    model, opt, x, y = mlp()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(6):
            mlp_iteration(model, opt, x, y)
    return prof


def epoch_range_loop() -> profile:
    model, opt, x, y = mlp()
    with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("epoch"):
        for _ in range(6):
            mlp_iteration(model, opt, x, y)
    return prof


def range_loop() -> profile:
    model, opt, x, y = mlp()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(6):
            with record_function("train_step"):
                mlp_iteration(model, opt, x, y)
    return prof


def eval_every_other_loop() -> profile:
    model, opt, x, y = mlp()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(8):
            mlp_iteration(model, opt, x, y)
            if i % 2 == 0:
                with torch.no_grad():
                    (model(x).argmax(1) == y).float().mean().item()
    return prof


def gan_loop() -> profile:
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
    return prof


def gan_adam_loop() -> profile:
    gen = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
    disc = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.LeakyReLU(0.2), torch.nn.Linear(64, 1))
    g_opt, d_opt = torch.optim.Adam(gen.parameters()), torch.optim.Adam(disc.parameters())
    noise, real = torch.randn(32, 16), torch.randn(32, 32)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    ones, zeros = torch.ones(32, 1), torch.zeros(32, 1)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(6):
            fake = gen(noise)
            d_opt.zero_grad()
            (bce(disc(real), ones) + bce(disc(fake.detach()), zeros)).backward()
            d_opt.step()
            g_opt.zero_grad()
            bce(disc(fake), ones).backward()
            g_opt.step()
    return prof


CAPTURES = {f.__name__: f for f in (optimizer_loop, epoch_range_loop, gan_loop, eval_every_other_loop, gan_adam_loop,
                                     range_loop)}

if __name__ == "__main__":
    torch.set_num_threads(1)
    for name in sys.argv[1:] or CAPTURES:
        torch.manual_seed(0)
        save(CAPTURES[name](), name)
