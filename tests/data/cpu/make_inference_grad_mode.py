"""Writes tests/data/cpu/inference_{grad_mode,mode}.pt.trace.json.gz: real torch.profiler captures (CPU, two
threads) of an inference loop of a 6-block MLP (Linear 256, GELU, LayerNorm) at batch 4, 6 steps marked:
the first with grad mode on (no torch.no_grad / inference_mode: what an evaluation loop gets by default),
the second under torch.inference_mode(). Timed here unprofiled on a 2-core AMD EPYC: 0.332 ms a call
with grad mode on, 0.316 ms with the parameters frozen (requires_grad_(False), grad mode still on),
0.277 ms under inference_mode.

    python tests/data/cpu/make_inference_grad_mode.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture


def main() -> None:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    blocks = [m for _ in range(6) for m in (torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.LayerNorm(256))]
    model = torch.nn.Sequential(*blocks).eval()
    x = torch.randn(4, 256)

    def grad_mode(_: int) -> torch.Tensor:
        return model(x).argmax(-1)

    def inference_mode(_: int) -> torch.Tensor:
        with torch.inference_mode():
            return model(x).argmax(-1)

    for step in (grad_mode, inference_mode):
        for i in range(20):
            step(i)
    write_capture("inference_grad_mode", grad_mode, active=6)
    write_capture("inference_mode", inference_mode, active=6)


if __name__ == "__main__":
    main()
