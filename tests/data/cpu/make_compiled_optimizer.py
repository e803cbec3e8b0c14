"""Writes tests/data/cpu/compiled_optimizer.pt.trace.json.gz: a real torch.profiler capture (CPU) of a
training loop whose optimizer step alone is compiled (torch.compile of a function calling AdamW's
step; Dynamo drops torch.optim's record_function range inside it) while the model (four
Linear(128, 128), batch 16) runs eagerly: 4 steps marked by a schedule after compiling outside it.

    python tests/data/cpu/make_compiled_optimizer.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture

if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(128, 128) for _ in range(4)])
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(16, 128)

    @torch.compile
    def optimizer_step() -> None:
        opt.step()

    def step(_: int) -> None:
        model(x).sum().backward()
        optimizer_step()
        opt.zero_grad()

    for i in range(3):  # compiled outside the capture
        step(i)
    write_capture("compiled_optimizer", step, active=4)
