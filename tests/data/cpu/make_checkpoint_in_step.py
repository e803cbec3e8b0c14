"""Writes tests/data/cpu/checkpoint_in_step.pt.trace.json.gz: a real torch.profiler capture (CPU, one
thread, 3 steps marked) of an MLP training step (256-512-512-10, batch 64, Adam) that saves a
checkpoint every step, ``torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buffer)``
(into memory, so the capture does not depend on a disk): the serialization records no op, a stretch
right after state_dict()'s aten::detach calls (tracekit.analyze.python_work).

    python tests/data/cpu/make_checkpoint_in_step.py
Made with torch 2.13.0 (CPU build).
"""

import io

import torch
from profiled import write_capture


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters())
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))

    def step(_: int) -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, io.BytesIO())

    step(0)
    write_capture("checkpoint_in_step", step, active=3)


if __name__ == "__main__":
    main()
