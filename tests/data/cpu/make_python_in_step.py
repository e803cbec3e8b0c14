"""Writes tests/data/cpu/python_in_step{,_stack}.pt.trace.json.gz: real torch.profiler captures (CPU, one
thread) of an MLP training step whose input features are computed in Python, inside the step, from
nested lists (a per-row loop of Python arithmetic) and made a tensor with torch.tensor; 6 steps marked, the
second capture with Python stacks (with_stack=True). Timed here unprofiled: 2.6 ms a step, 0.50 ms
with the features computed once outside the loop.

    python tests/data/cpu/make_python_in_step.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture

ROWS = [[(i * 7 + j) % 13 / 13.0 for j in range(128)] for i in range(64)]


def features(rows: list[list[float]]) -> list[list[float]]:
    out = []
    for r in rows:
        mean = sum(r) / len(r)
        # a polynomial of each centred value, term by term: Python arithmetic, no calls
        out.append([d * (1.0 + d * (0.5 + d * (1 / 6 + d * (1 / 24 + d / 120)))) for d in [v - mean for v in r]])
    return out


def capture(name: str, with_stack: bool) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    y = torch.arange(64) % 10

    def step(_: int) -> None:
        x = torch.tensor(features(ROWS))
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for i in range(3):
        step(i)
    write_capture(name, step, active=6, with_stack=with_stack)


if __name__ == "__main__":
    torch.set_num_threads(1)
    capture("python_in_step", with_stack=False)
    capture("python_in_step_stack", with_stack=True)
