"""Writes tests/data/cpu/linear_16bit_{f16,bf16_native,bf16_avx2}.pt.trace.json.gz: real torch.profiler
captures (CPU, two threads, shapes recorded, 3 steps marked) of a model converted to 16 bits for
inference (``.half()`` / ``.to(torch.bfloat16)``, no_grad): Linear 512-1024-1024-10 with GELU, batch 128.
nn.Linear's product (``addmm`` with a transposed weight) has a vectorized fallback without native
16-bit math: 20-33 GFLOP/s a core, converting to float32, against ~110 in float32 and 300-450 with
native bf16 (tracekit.analyze.emulated_precision).

- ``linear_16bit_f16``: float16 on this CPU (AVX-512 with BF16 but no FP16): no native half math.
- ``linear_16bit_bf16_native``: bfloat16 on this CPU: native (AVX512_BF16).
- ``linear_16bit_bf16_avx2``: bfloat16 with oneDNN and ATen restricted to AVX2
  (ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2), as on an AVX2-only CPU.

Each process prints its step unprofiled in 16 bits and in float32.

    python tests/data/cpu/make_linear_16bit.py
Made with torch 2.13.0 (CPU build) on a 2-core AMD EPYC with AVX-512 and AVX512_BF16 (no AVX512_FP16).
"""

import os
import subprocess
import sys

AVX2_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
CAPTURES = (("linear_16bit_f16", "float16", {}), ("linear_16bit_bf16_native", "bfloat16", {}),
            ("linear_16bit_bf16_avx2", "bfloat16", AVX2_ENV))


def capture(name: str, dtype_name: str) -> None:
    import torch
    from profiled import unprofiled_ms, write_capture

    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1024),
                                torch.nn.GELU(), torch.nn.Linear(1024, 10)).eval()
    x = torch.randn(128, 512)

    def run(m: torch.nn.Module, inputs: torch.Tensor):
        def step(_: int) -> None:
            with torch.no_grad():
                m(inputs)
        return step

    dtype = getattr(torch, dtype_name)
    float_ms = unprofiled_ms(run(model, x), 20)
    low_model, low_x = model.to(dtype), x.to(dtype)
    low_ms = unprofiled_ms(run(low_model, low_x), 20)
    print(f"{name}: {dtype_name} {low_ms:.2f} ms a step, float32 {float_ms:.2f} ms "
          f"({torch.backends.cpu.get_cpu_capability()})")
    write_capture(name, run(low_model, low_x), active=3, record_shapes=True)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        capture(sys.argv[2], sys.argv[3])
    else:  # each capture in its own process: the ISA limits are read when torch loads
        for name, dtype_name, env in CAPTURES:
            subprocess.run([sys.executable, __file__, "--one", name, dtype_name], env={**os.environ, **env}, check=True)
