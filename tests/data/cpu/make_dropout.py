"""Writes tests/data/cpu/dropout_train_{p01,p0}.pt.trace.json.gz: real torch.profiler captures (CPU, shapes
recorded, 2 steps marked) of a 4-layer nn.TransformerEncoder (d_model 256, 4 heads, FFN 1024) plus a
Linear head, trained with AdamW on 16 sequences of 128 random vectors, 2 threads, with dropout 0.1
(p01) and 0 (p0).

    python tests/data/cpu/make_dropout.py
Made with torch 2.13.0 (CPU build) on a 2-core AMD EPYC, where ATen draws dropout's masks one element
at a time on one thread (MKL's generator only on Intel CPUs). Unprofiled, medians of 8 steps, two
runs: 412-436 ms a step with dropout 0.1, 301-315 ms with 0.
"""

import torch
from profiled import write_capture


def capture(name: str, p: float) -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=p, batch_first=True)
    model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False), torch.nn.Linear(256, 2))
    model.train()
    opt = torch.optim.AdamW(model.parameters(), 1e-4)
    x, y = torch.randn(16, 128, 256), torch.randint(0, 2, (16,))

    def step(_: int) -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x)[:, 0], y).backward()
        opt.step()

    for i in range(2):
        step(i)
    write_capture(name, step, active=2, record_shapes=True)


if __name__ == "__main__":
    torch.set_num_threads(2)
    capture("dropout_train_p01", 0.1)
    capture("dropout_train_p0", 0.0)
