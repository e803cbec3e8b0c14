"""Writes tests/data/cpu/embedding_max_norm.pt.trace.json.gz: a real torch.profiler capture (CPU, two
threads, shapes recorded, 3 steps marked) of an embedding classifier trained with SGD whose
``nn.Embedding(20_000, 64, max_norm=1.0)`` renormalizes the rows it looks up (32 x 16 indices a batch)
before each lookup: ``aten::embedding_renorm_`` loops over the unique rows, a norm, an item and a scale
each (tracekit.analyze.op_loops). Prints the step unprofiled with and without max_norm.

    python tests/data/cpu/make_embedding_max_norm.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import unprofiled_ms, write_capture


def training_step(max_norm: float | None):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(20_000, 64, max_norm=max_norm)
    head = torch.nn.Linear(64, 10)
    opt = torch.optim.SGD([*emb.parameters(), *head.parameters()], lr=0.1)
    idx, y = torch.randint(0, 20_000, (32, 16)), torch.randint(0, 10, (32,))

    def step(_: int) -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(head(emb(idx).mean(1)), y).backward()
        opt.step()
    return step


if __name__ == "__main__":
    torch.set_num_threads(2)
    print(f"max_norm=1.0: {unprofiled_ms(training_step(1.0), 20):.2f} ms a step, "
          f"without: {unprofiled_ms(training_step(None), 20):.2f} ms")
    write_capture("embedding_max_norm", training_step(1.0), active=3, record_shapes=True)
