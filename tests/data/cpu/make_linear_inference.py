"""Writes tests/data/cpu/linear_inference_{float32,int8,small}.pt.trace.json.gz: real torch.profiler captures
(CPU, 2 threads, shapes recorded, 2 steps marked) of an MLP classifier (784-1024-1024-10, ReLU) run under
torch.inference_mode(), 8 batches a step:
- linear_inference_float32: batches of 256 in float32.
- linear_inference_int8: the same model after torch.ao.quantization.quantize_dynamic(model, {nn.Linear},
  dtype=torch.qint8): quantized::linear_dynamic ops, no float32 Linear.
- linear_inference_small: batches of 1 through 784-64-64-10: products of 0.1 MFLOP a call or less, which
  int8 runs slower.

    python tests/data/cpu/make_linear_inference.py
Made with torch 2.13.0 (CPU build) on a 2-core AMD EPYC (Zen 4: AVX-512 with BF16, no AMX); each capture
prints its step time unprofiled.
"""

import torch
from profiled import unprofiled_ms, write_capture


def mlp(width: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(784, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                               torch.nn.ReLU(), torch.nn.Linear(width, 10)).eval()


def capture(name: str, model: torch.nn.Module, batch: int) -> None:
    torch.manual_seed(0)
    batches = [torch.randn(batch, 784) for _ in range(8)]

    def step(_: int) -> None:
        with torch.inference_mode():
            for x in batches:
                model(x)

    print(f"{name}: {unprofiled_ms(step, 10):.2f} ms a step unprofiled")
    write_capture(name, step, active=2, record_shapes=True)


if __name__ == "__main__":
    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = mlp(1024)
    capture("linear_inference_float32", model, 256)
    capture("linear_inference_int8", torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8), 256)
    capture("linear_inference_small", mlp(64), 1)
