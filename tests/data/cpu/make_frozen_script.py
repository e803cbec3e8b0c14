"""Writes tests/data/cpu/script_cnn{,_frozen}.pt.trace.json.gz: real torch.profiler captures (CPU, one
thread, shapes recorded, 3 steps marked) of a small CNN's inference (two 3x3 convolutions with batch
norm and ReLU, pooling, a linear head; batch 16 of 3x64x64) run as TorchScript: traced and scripted
as is, and frozen with torch.jit.optimize_for_inference. The frozen model folds the batch norms into
the convolutions and runs them as prim::mkldnn_convolution, which TorchScript's interpreter calls
itself: the profiler records no convolution op, and their time is the `forward` call's own time.

    python tests/data/cpu/make_frozen_script.py
Made with torch 2.13.0 (CPU build) on a 2-core AMD EPYC (Zen 4: AVX-512 with BF16, no AMX).
"""

import torch
from profiled import unprofiled_ms, write_capture


def cnn() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10)).eval()


if __name__ == "__main__":
    torch.set_num_threads(1)
    images = torch.randn(16, 3, 64, 64)
    with torch.no_grad():
        scripted = torch.jit.trace(cnn(), images)
        frozen = torch.jit.optimize_for_inference(torch.jit.trace(cnn(), images))
    for name, model in (("script_cnn", scripted), ("script_cnn_frozen", frozen)):
        def step(_: int, model: torch.jit.ScriptModule = model) -> None:
            with torch.no_grad():
                model(images)
        print(f"{name}: {unprofiled_ms(step, 10):.1f} ms a step unprofiled")
        write_capture(name, step, active=3, record_shapes=True)
