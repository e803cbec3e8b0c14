"""Writes tests/data/cpu/overload_names{,_off}.pt.trace.json.gz: real torch.profiler captures (CPU, two
threads, shapes recorded) of one training loop, an MLP (256-1024-256, GELU) at batch 32 with AdamW, 3
steps marked: the first with _ExperimentalConfig(capture_overload_names=True), which names each op
with its overload (aten::add_.Tensor, aten::div.Scalar, aten::mean.dim, aten::sum.IntList_out), the
second without. tracekit's report of the first put aten::div.Tensor and aten::lerp_.Scalar among
"ops tracekit has no class for" and judged the step undetermined.

    python tests/data/cpu/make_overload_names.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture
from torch._C._profiler import _ExperimentalConfig


def main() -> None:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(32, 256)

    def step() -> None:
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    for _ in range(3):
        step()
    for name, overloads in (("overload_names", True), ("overload_names_off", False)):
        write_capture(name, lambda _: step(), active=3, record_shapes=True,
                      experimental_config=_ExperimentalConfig(capture_overload_names=overloads))


if __name__ == "__main__":
    main()
