"""Writes tests/data/cpu/gemm_shapes_{moe,serving}.pt.trace.json.gz: real torch.profiler captures (CPU, shapes
recorded, 3 steps marked after one warm-up) of GEMM ops that run at many shapes, made here once on a quiet
machine: live captures of the same loops failed tests now and then under load (another process on one of two
cores stalls a call for a time slice, and one shape's share crosses a threshold).

- gemm_shapes_moe: a mixture of 8 experts (Linear 128-512-128 each) routing 1,024 tokens by a gate, another
  routing each step (torch.no_grad): each expert's Linear runs at shapes of its own.
- gemm_shapes_serving: a server's dynamic batches, 1 to 16 requests a call, through Linear 512-512, ReLU,
  Linear 512-512 (inference_mode), 128 calls a step, 8 of each size.

    python tests/data/cpu/make_gemm_shapes.py
Made with torch 2.13.0 (CPU build) on a 2-core AMD EPYC (Zen 4: AVX-512 with BF16, no AMX), torch's default
threads.
"""

import torch
from profiled import write_capture


def moe() -> None:
    torch.manual_seed(0)
    experts = [torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 128))
               for _ in range(8)]
    gate, batches = torch.nn.Linear(128, 8), [torch.randn(1024, 128) for _ in range(4)]

    def step(i: int) -> None:
        with torch.no_grad():
            x = batches[i]
            chosen = gate(x).argmax(-1)
            out = torch.zeros_like(x)
            for e, expert in enumerate(experts):
                rows = (chosen == e).nonzero(as_tuple=True)[0]
                out.index_add_(0, rows, expert(x[rows]))

    write_capture("gemm_shapes_moe", step, active=3, record_shapes=True)


def serving() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512)).eval()
    sizes = [1, 3, 2, 5, 4, 7, 6, 8, 9, 12, 10, 11, 16, 13, 15, 14]
    inputs = [torch.randn(n, 512) for n in sizes]

    def step(_: int) -> None:
        with torch.inference_mode():
            for i in range(128):
                model(inputs[i % len(inputs)])

    write_capture("gemm_shapes_serving", step, active=3, record_shapes=True)


if __name__ == "__main__":
    moe()
    serving()
