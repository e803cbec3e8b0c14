"""Writes tests/data/cpu/embedding_{dense,sparse}.pt.trace.json.gz: real torch.profiler captures (CPU,
shapes recorded) of a recommendation-style training loop: a 100,000 x 32 nn.EmbeddingBag (512 bags of
10 lookups) and a small MLP trained with SGD, 3 steps marked by a schedule; the embedding's
gradient dense (the default: the backward zero-fills a 100,000 x 32 gradient and SGD updates every
row) and sparse (sparse=True: only the rows looked up).

    python tests/data/cpu/make_embedding_gradients.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture

ROWS, DIM, BAGS, PER_BAG = 100_000, 32, 512, 10


def capture(name: str, sparse: bool) -> None:
    torch.manual_seed(0)
    emb = torch.nn.EmbeddingBag(ROWS, DIM, mode="sum", sparse=sparse)
    mlp = torch.nn.Sequential(torch.nn.Linear(DIM, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD([*emb.parameters(), *mlp.parameters()], lr=0.01)
    indices = torch.randint(0, ROWS, (BAGS * PER_BAG,))
    offsets = torch.arange(0, BAGS * PER_BAG, PER_BAG)
    def step(_: int) -> None:
        opt.zero_grad()
        mlp(emb(indices, offsets)).sum().backward()
        opt.step()

    write_capture(name, step, active=3, record_shapes=True)

if __name__ == "__main__":
    torch.set_num_threads(1)
    capture("embedding_dense", sparse=False)
    capture("embedding_sparse", sparse=True)
