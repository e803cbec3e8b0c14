"""Writes tests/data/cpu/attention_*.pt.trace.json.gz: real torch.profiler captures (CPU, two threads, shapes
recorded), 3 steps marked each:

- ``attention_unfused``: softmax(q @ k^T / sqrt(d)) @ v at B8 H8 T256 D64 under no_grad; timed here
  unprofiled on a 2-core AMD EPYC: 11.1 ms a call, 7.8 ms with F.scaled_dot_product_attention.
- ``attention_mha_weights``: an nn.MultiheadAttention layer (E256, 8 heads, batch 8) trained at T512,
  called as by default (need_weights=True: bmm, softmax, bmm); 172 ms a step unprofiled.
- ``attention_mha_no_weights``: the same called with need_weights=False (the fused op); 101 ms.
- ``attention_mha_short``: the first at T128, where fusing gains nothing (12.8 ms either way).

    python tests/data/cpu/make_attention.py
Made with torch 2.13.0 (CPU build).
"""

import math

import torch
from profiled import write_capture


def unfused() -> None:
    q, k, v = (torch.randn(8, 8, 256, 64) for _ in range(3))

    def step(_: int) -> torch.Tensor:
        with torch.no_grad():
            return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(64), dim=-1) @ v

    step(0)
    write_capture("attention_unfused", step, active=3, record_shapes=True)


def multihead(name: str, length: int, need_weights: bool) -> None:
    torch.manual_seed(0)
    layer = torch.nn.MultiheadAttention(256, 8, batch_first=True)
    x = torch.randn(8, length, 256)

    def step(_: int) -> None:
        out, _ = layer(x, x, x, need_weights=need_weights)
        out.sum().backward()

    step(0)
    write_capture(name, step, active=3, record_shapes=True)


if __name__ == "__main__":
    torch.set_num_threads(2)
    torch.manual_seed(0)
    unfused()
    multihead("attention_mha_weights", 512, need_weights=True)
    multihead("attention_mha_no_weights", 512, need_weights=False)
    multihead("attention_mha_short", 128, need_weights=True)
