"""Writes tests/data/cpu/tensor_text*.pt.trace.json.gz: real torch.profiler captures (CPU, one thread,
shapes recorded, 3 steps marked each) of an MLP training step (256-512-10, batch 64, SGD) that logs
its loss and its first logits each step (tracekit.analyze.tensor_text):

- ``tensor_text``: ``print(f"loss {loss} logits {out[:4]}")``: the 4x10 logits formatted through
  PyTorch's repr (its range scan, then 40 values read one aten::item each).
- ``tensor_text_values``: ``print(f"loss {loss.item():.4f} logits {out[:4].tolist()}")``: one read each.

Unprofiled on a 2-core Xeon: formatting the 4x10 tensor took 288 µs, its ``.tolist()`` 24 µs.

    python tests/data/cpu/make_tensor_text.py
Made with torch 2.13.0 (CPU build).
"""

import io

import torch
from profiled import write_capture


def capture(name: str, as_values: bool) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    log = io.StringIO()

    def step(_: int) -> None:
        opt.zero_grad()
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        if as_values:
            print(f"loss {loss.item():.4f} logits {out[:4].tolist()}", file=log)
        else:
            print(f"loss {loss} logits {out[:4]}", file=log)

    step(0)
    write_capture(name, step, active=3, record_shapes=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    capture("tensor_text", as_values=False)
    capture("tensor_text_values", as_values=True)
