"""Writes tests/data/cpu/lbfgs.pt.trace.json.gz: a real torch.profiler capture (CPU, shapes recorded, 3
steps marked) of a 2-layer MLP (32 -> 64 -> 1, tanh) fitted with torch.optim.LBFGS (max_iter=10) on 256
samples: each step calls the closure (forward, backward) up to 10 times, and LBFGS reads 700-1,100
values into Python a step for its direction updates and stopping tests, all inside its optimizer step.
whatif's no-dispatch scenario left those reads out (it exempts an optimizer step's own reads, which
Adam's compiled step does without) and ranked torch.compile first with 62% predicted; LBFGS branches
on the values, so they stay: the prediction is uncertain, and the report says why.

    python tests/data/cpu/make_lbfgs.py
Made with torch 2.13.0 (CPU build).
"""

import torch
import torch.nn.functional as F
from profiled import write_capture


def main() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=10)
    x, y = torch.randn(256, 32), torch.randn(256, 1)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    def step(_: int) -> None:
        opt.step(closure)

    for i in range(2):
        step(i)
    write_capture("lbfgs", step, active=3, record_shapes=True)


if __name__ == "__main__":
    main()
