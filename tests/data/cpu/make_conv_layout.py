"""Writes tests/data/cpu/conv_{nchw,channels_last,nchw_group_norm}.pt.trace.json.gz: real torch.profiler captures (CPU, two
threads, shapes and strides recorded) of one small CNN (3 convolutions of 32-64 channels with batch norms,
ReLUs, a max pool; SGD) trained at batch 32 on 32x32 images, 3 steps marked: the model and input in
PyTorch's default NCHW layout, then both in torch.channels_last. Timed here unprofiled on a 2-core AMD
EPYC: 56.1 ms a step in NCHW, 41.2 ms in channels_last (inference 22.2 and 10.8 ms); restricted to AVX2
(ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2) 55.2 and 44.7 ms. conv_nchw_group_norm: the same CNN in NCHW
with GroupNorm(8 groups) for its batch norms (45-48 ms a step in NCHW, 41-45 ms in channels_last, 3 runs).

    python tests/data/cpu/make_conv_layout.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_training_capture


def capture(name: str, layout: torch.memory_format, group_norm: bool = False) -> None:
    torch.manual_seed(0)

    def norm(channels: int) -> torch.nn.Module:
        return torch.nn.GroupNorm(8, channels) if group_norm else torch.nn.BatchNorm2d(channels)

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), norm(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), norm(64), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(64, 64, 3, padding=1), norm(64), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).to(memory_format=layout)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 3, 32, 32).to(memory_format=layout), torch.arange(32) % 10
    write_training_capture(name, model, opt, x, y)


if __name__ == "__main__":
    torch.set_num_threads(2)
    capture("conv_nchw", torch.contiguous_format)
    capture("conv_channels_last", torch.channels_last)
    capture("conv_nchw_group_norm", torch.contiguous_format, group_norm=True)
