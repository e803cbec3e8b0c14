"""Writes tests/data/cpu/subnormal_products{,_flushed}.pt.trace.json.gz: real torch.profiler captures
(CPU, one thread, shapes recorded) of six Linear+GELU layers of 512 trained with AdamW on one batch,
12 steps marked after 10 unprofiled ones. As the model fits the batch its gradients shrink into
subnormal floats, and from about the 18th step the backward's matrix products run 10-25x slower on
the same shapes; the second capture is the same loop under torch.set_flush_denormal(True); in the
third, flushed too, another process spins on the loop's core from the 7th marked step on (a busy
machine slows every op alike).

    python tests/data/cpu/make_subnormal_products.py
Made with torch 2.13.0 (CPU build) on a 2-core Intel Xeon (x86-64, AVX-512).
"""

import os
import subprocess
import sys

import torch
from profiled import write_capture

SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"


def capture(name: str, flush: bool, contended: bool = False) -> None:
    torch.manual_seed(0)
    torch.set_flush_denormal(flush)
    layers = [torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU()) for _ in range(6)]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(512, 10))
    opt = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))

    spinner: list[subprocess.Popen] = []

    def step(i: int) -> None:
        if contended and i == 7 and not spinner:  # another process on this core from the 7th marked step
            spinner.append(subprocess.Popen([sys.executable, "-c", SPIN]))  # it inherits the one core
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(10):
        step(-1)
    write_capture(name, step, active=12, record_shapes=True)
    for p in spinner:
        p.kill()


if __name__ == "__main__":
    torch.set_num_threads(1)
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, which the spinner shares
    capture("subnormal_products", flush=False)
    capture("subnormal_products_flushed", flush=True)
    capture("subnormal_products_contended", flush=True, contended=True)
