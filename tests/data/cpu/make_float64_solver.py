"""Writes tests/data/cpu/float64_solver.pt.trace.json.gz: a real torch.profiler capture (CPU, two threads,
shapes and types recorded) of a block conjugate gradient in float64, no model: 20 iterations a step on an
800x800 symmetric positive-definite system with 16 right-hand sides, grad mode on (nothing requires grad),
3 steps marked. The report told it "keep the model and its inputs in float32 ... rather than calling
model.double()" (there is no model, and a solver may need float64), and that inference_mode would save
10% of the step at 3.5 µs an op (measured unprofiled: 5.5 ms a step with grad mode on, 5.4-6.0 ms under
inference_mode; 3.1-3.3 ms in float32).

    python tests/data/cpu/make_float64_solver.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture


def main() -> None:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    a = torch.randn(800, 800, dtype=torch.float64)
    a = a @ a.T + 800 * torch.eye(800, dtype=torch.float64)
    b = torch.randn(800, 16, dtype=torch.float64)

    def step(_: int) -> torch.Tensor:
        x = torch.zeros_like(b)
        r = b - a @ x
        p = r.clone()
        for _ in range(20):
            ap = a @ p
            alpha = (r * r).sum(0) / (p * ap).sum(0)
            x = x + alpha * p
            r_next = r - alpha * ap
            beta = (r_next * r_next).sum(0) / (r * r).sum(0)
            p, r = r_next + beta * p, r_next
        return x

    step(0)
    write_capture("float64_solver", step, active=3, record_shapes=True)


if __name__ == "__main__":
    main()
