"""Writes tests/data/cpu/grad_accumulation{,_fused}.pt.trace.json.gz: real torch.profiler captures
(CPU) of a training loop with gradient accumulation: each marked step is one micro-batch's forward and
backward, and every 4th also runs AdamW over the six Linear layers' parameters and zero_grad; 12 steps
marked by a schedule, after one warm-up step. AdamW updates one parameter at a time (foreach=False) in
the first, with fused=True in the second.

    python tests/data/cpu/make_grad_accumulation.py [NAME ...]   (default: both)
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture

ACCUMULATE = 4

def capture(name: str, **update: bool) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(6)])
    opt = torch.optim.AdamW(model.parameters(), **update)
    x = torch.randn(16, 256)
    def step(i: int) -> None:
        model(x).sum().backward()
        if i % ACCUMULATE == ACCUMULATE - 1:
            opt.step()
            opt.zero_grad()

    write_capture(name, step, active=12)

if __name__ == "__main__":
    import sys

    torch.set_num_threads(1)
    wanted = sys.argv[1:] or ["grad_accumulation", "grad_accumulation_fused"]  # the stored ones: name them to keep them
    if "grad_accumulation" in wanted:
        capture("grad_accumulation", foreach=False)
    if "grad_accumulation_fused" in wanted:
        capture("grad_accumulation_fused", fused=True)
