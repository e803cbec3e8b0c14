"""Writes tests/data/cpu/bf16_products_{emulated,native}.pt.trace.json.gz: real torch.profiler captures
(CPU, one thread, shapes recorded) of six Linear+GELU layers of 512 trained with SGD under
torch.autocast("cpu", dtype=torch.bfloat16), 3 steps marked. "emulated" runs with oneDNN and ATen
restricted to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2: no native bf16 math, as on an
AVX2-only CPU), "native" with this CPU's AMX. Timed here unprofiled: 109-115 ms a step emulated against
7-9 ms in float32; with AMX 8.1-8.6 ms against 9.0-10.4 ms in float32.

    python tests/data/cpu/make_bf16_products.py
Made with torch 2.13.0 (CPU build) on a 2-core Intel Xeon with AVX-512 and AMX.
"""

import os
import subprocess
import sys

EMULATED_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}


def capture(name: str) -> None:
    import torch
    from profiled import write_capture

    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = [torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU()) for _ in range(6)]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))

    def step(_: int) -> None:
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for i in range(3):
        step(i)
    write_capture(name, step, active=3, record_shapes=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        capture(sys.argv[2])
    else:  # each capture in its own process: the ISA limits are read when torch loads
        for name, env in (("bf16_products_emulated", EMULATED_ENV), ("bf16_products_native", {})):
            subprocess.run([sys.executable, __file__, "--one", name], env={**os.environ, **env}, check=True)
