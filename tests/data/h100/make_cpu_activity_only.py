"""A GPU training step profiled twice on a lent GPU machine: with CPU activities only (the
common slip: ProfilerActivity.CUDA left out) and with CPU and CUDA activities. Writes
cpu_activity_only.pt.trace.json.gz and cpu_and_cuda.pt.trace.json.gz into the directory given.

    python3 tests/data/h100/make_cpu_activity_only.py "$OUT"
"""

import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

out = Path(sys.argv[1])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(16 * 30 * 30, 10)).cuda()
x = torch.randn(8, 3, 32, 32, device="cuda")
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def step() -> float:
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.item()  # the usual per-step read-out: a sync


for _ in range(3):
    step()
for activities, name in (([ProfilerActivity.CPU], "cpu_activity_only"),
                         ([ProfilerActivity.CPU, ProfilerActivity.CUDA], "cpu_and_cuda")):
    path = out / f"{name}.pt.trace.json.gz"
    with profile(activities=activities, record_shapes=True, schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
                 on_trace_ready=lambda p, path=path: p.export_chrome_trace(str(path))) as prof:
        for _ in range(4):
            step()
            prof.step()
    print(path, path.stat().st_size)
