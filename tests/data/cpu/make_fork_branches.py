"""Writes tests/data/cpu/fork_branches.pt.trace.json.gz: a real torch.profiler capture (CPU, two threads,
shapes recorded) of TorchScript inference whose forward runs one branch of 8 Linear(512)+ReLU layers
under torch.jit.fork beside a second one on the calling thread, 5 calls a step on the same 64x512
input, 6 steps marked. The fork's branch runs on an inter-op thread beside the calling thread's, so
the two threads' products share the 2 cores: the ops' self times summed over the threads exceed the
steps (aten::addmm 114% of them), and in the capture kept a main-thread aten::addmm took 0.18 ms a call
in the fastest steps and 2.7 ms in the slowest, where other threads ran ops during 92% of it (what
subnormal floats do to a product, but on the same input every step), the steps 20.4-20.8 ms. Run
until a capture shows that slowdown (one run in a few does on a 2-core Xeon).

    python tests/data/cpu/make_fork_branches.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture


class Branch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(512, 512)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(8):
            x = torch.relu(self.linear(x))
        return x


class TwoBranches(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.forked = Branch()
        self.here = Branch()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        future = torch.jit.fork(self.forked, x)
        here = self.here(x)  # runs while the fork's branch does
        return torch.jit.wait(future) + here


def main() -> None:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = torch.jit.script(TwoBranches().eval())
    x = torch.randn(64, 512)

    def step(_: int) -> None:
        with torch.no_grad():
            for _ in range(5):
                model(x)

    write_capture("fork_branches", step, active=6, record_shapes=True)


if __name__ == "__main__":
    main()
