"""Writes tests/data/cpu/recompute_*.pt.trace.json.gz: real torch.profiler captures (CPU, one thread) of
6 blocks of LayerNorm and an MLP (256-1024-256) trained with SGD at batch 64, 3 steps marked each:

- ``recompute_checkpoint``: each block run under ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``,
  its forward run again in backward; timed interleaved on a 2-core AMD EPYC: 24.5 ms a step against
  18.6 ms without checkpointing (batch 256: 71.3 against 58.2).
- ``recompute_reentrant``: the same with ``use_reentrant=True`` (CheckpointFunctionBackward).
- ``recompute_none``: the same model without checkpointing.
- ``recompute_gradient_penalty`` (not a recompute): no checkpointing, a gradient penalty on the input
  (``torch.autograd.grad(..., create_graph=True)``): backward's formulas run with grad mode on.

    python tests/data/cpu/make_recompute.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture
from torch.utils.checkpoint import checkpoint


class Block(torch.nn.Module):
    def __init__(self, width: int = 256) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class Net(torch.nn.Module):
    def __init__(self, checkpointed: str) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block() for _ in range(6)])
        self.checkpointed = checkpointed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = (checkpoint(block, x, use_reentrant=self.checkpointed == "reentrant") if self.checkpointed
                 else block(x))
        return x


def training(name: str, checkpointed: str = "", penalty: bool = False) -> None:
    net = Net(checkpointed)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x = torch.randn(64, 256, requires_grad=checkpointed == "reentrant" or penalty)

    def step(_: int) -> None:
        opt.zero_grad()
        loss = net(x).pow(2).mean()
        if penalty:
            (grad,) = torch.autograd.grad(loss, x, create_graph=True)
            loss = loss + grad.norm()
        loss.backward()
        opt.step()

    write_capture(name, step, active=3)


if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    training("recompute_checkpoint", "non-reentrant")
    training("recompute_reentrant", "reentrant")
    training("recompute_none")
    training("recompute_gradient_penalty", penalty=True)
