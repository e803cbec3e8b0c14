"""Writes tests/data/cpu/recompile.pt.trace.json.gz: one real torch.profiler capture (CPU) of a
torch.compile function that recompiles on every call. Each of its 6 ProfilerStep#N steps calls it
with a different Python float, and with Dynamo's automatic dynamic shapes off the float is a
specialized constant, so every call fails its guards and compiles again (entire_frame_compile).

    python tests/data/cpu/make_recompile.py
Made with torch 2.13.0 (CPU build) on this project's 2-core machine.
"""

import gzip
import shutil
import tempfile
from pathlib import Path

import torch
import torch._dynamo
from torch.profiler import ProfilerActivity, profile, schedule

torch._dynamo.config.automatic_dynamic_shapes = False
torch._dynamo.config.assume_static_by_default = True
torch.manual_seed(0)
linear = torch.nn.Linear(64, 64)


@torch.compile
def step(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.tanh(linear(x)) * scale


x = torch.randn(32, 64)
step(x, 0.5)
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=0, active=6, repeat=1)) as prof:
    for i in range(6):
        step(x, float(i) + 1.5)  # a changing Python float: the guards fail, Dynamo compiles again
        prof.step()
with tempfile.TemporaryDirectory() as tmp:
    written = Path(tmp) / "trace.json"
    prof.export_chrome_trace(str(written))
    with open(written, "rb") as src, gzip.open(Path(__file__).with_name("recompile.pt.trace.json.gz"), "wb", 9) as dst:
        shutil.copyfileobj(src, dst)
