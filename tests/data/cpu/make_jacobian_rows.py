"""Writes tests/data/cpu/jacobian_rows.pt.trace.json.gz: a real torch.profiler capture (CPU, two threads,
shapes recorded) of torch.autograd.functional.jacobian of a 2-layer MLP (64-256-64, tanh) at one input,
with its default vectorize=False: one forward, then one backward per output row (64 a step, each
seeded by a row of the identity), 3 steps marked. The report named the per-row walk and told it to
"run the model once on the whole batch"; the fix is jacobian(..., vectorize=True) or torch.func.jacrev
(unprofiled, 2-core Xeon: 3.06 ms a Jacobian row by row, 0.79 ms vectorized).

    python tests/data/cpu/make_jacobian_rows.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture


def main() -> None:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 64))
    x = torch.randn(64)

    def step(_: int) -> torch.Tensor:
        return torch.autograd.functional.jacobian(net, x)

    step(0)
    write_capture("jacobian_rows", step, active=3, record_shapes=True)


if __name__ == "__main__":
    main()
