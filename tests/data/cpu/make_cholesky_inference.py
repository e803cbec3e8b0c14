"""Writes tests/data/cpu/cholesky_inference.pt.trace.json.gz: a real torch.profiler capture (CPU, two
threads) of Gaussian-process regression in float64 with grad mode on (no inference_mode: nothing
requires grad): an RBF kernel matrix of 1,000 points, its Cholesky factor, a solve and the
eigenvalues of a 300x300 block, 5 steps marked. Some 140 ops a step of tens of milliseconds: autograd's
per-op bookkeeping is a fraction of a percent of it.

    python tests/data/cpu/make_cholesky_inference.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture


def main() -> None:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    n = 1_000
    points = torch.randn(n, 8, dtype=torch.float64)
    targets = torch.randn(n, 1, dtype=torch.float64)

    def step(_: int) -> tuple[torch.Tensor, torch.Tensor]:
        kernel = torch.exp(-torch.cdist(points, points) ** 2) + 1e-3 * torch.eye(n, dtype=torch.float64)
        factor = torch.linalg.cholesky(kernel)
        weights = torch.cholesky_solve(targets, factor)
        return weights, torch.linalg.eigvalsh(kernel[:300, :300])

    for i in range(3):
        step(i)
    write_capture("cholesky_inference", step, active=5)


if __name__ == "__main__":
    main()
