"""Writes tests/data/cpu/sdpa_dropout_masked.pt.trace.json.gz: a real torch.profiler capture (CPU, shapes
recorded, 2 steps marked) of a 2-layer attention block trained with SGD on 8 sequences of 128 (4 heads
of 32), calling F.scaled_dot_product_attention with a boolean padding mask and dropout_p=0.1: a CPU
runs its math path (the fused flash kernel takes the mask, not the dropout).

    python tests/data/cpu/make_sdpa_dropout.py
Made with torch 2.13.0 (CPU build) on a 2-core AMD EPYC.
"""

import torch
import torch.nn.functional as F
from profiled import write_capture

B, H, T, D = 8, 4, 128, 32


class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(H * D, 3 * H * D), torch.nn.Linear(H * D, H * D)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.1 if self.training else 0.0)
        return self.out(y.transpose(1, 2).reshape(B, T, H * D))


if __name__ == "__main__":
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(Attention() for _ in range(2))
    opt = torch.optim.SGD(layers.parameters(), 0.01)
    x = torch.randn(B, T, H * D)
    mask = torch.ones(B, 1, 1, T, dtype=torch.bool)
    mask[:, :, :, T - 16:] = False  # the last 16 positions padding

    def step(_: int) -> None:
        y = x
        for layer in layers:
            y = layer(y, mask)
        y.sum().backward()
        opt.step()
        opt.zero_grad()

    for i in range(2):
        step(i)
    write_capture("sdpa_dropout_masked", step, active=2, record_shapes=True)
