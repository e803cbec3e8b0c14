"""Writes tests/data/cpu/gradient_sync_{per_tensor,flat,metrics}_rank0.pt.trace.json.gz: rank 0's real
torch.profiler captures (CPU, shapes recorded, 4 steps marked) of 2-rank data parallelism on gloo
written by hand, a 9-layer MLP (256 wide, 18 gradient tensors, batch 32, SGD), its gradients averaged
after the backward pass (tracekit.analyze.gradient_sync):

- ``per_tensor``: the PyTorch distributed tutorial's ``average_gradients``, ``for p in
  model.parameters(): dist.all_reduce(p.grad); p.grad /= 2``: 18 all-reduces a step.
- ``flat``: one all-reduce of ``torch.cat`` of the gradients, copied back.
- ``metrics``: the flat all-reduce, then 10 metrics (a loss, counts) averaged over the ranks, one
  0-dim all-reduce each: not gradients.

Unprofiled, both ranks on a 2-core Xeon with one intra-op thread each: 16.8-17.7 ms a step per
tensor, 7.6-8.1 ms flat, 6.9-8.2 ms under DistributedDataParallel.

    python tests/data/cpu/make_gradient_sync.py [MODE ...]
Made with torch 2.13.0 (CPU build).
"""

import gzip
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from profiled import run_ranks
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

HERE = Path(__file__).parent


def run(rank: int, mode: str, tmp: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29547"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(256, 256), nn.ReLU()) for _ in range(8)], nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), 0.01)
    x, y = torch.randn(32, 256), torch.randint(0, 10, (32,))

    def step() -> None:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        if mode == "per_tensor":
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= 2
        if mode == "metrics":
            for metric in [torch.tensor(float(i)) for i in range(10)]:
                dist.all_reduce(metric)
        if mode != "per_tensor":
            flat = torch.cat([p.grad.flatten() for p in model.parameters()])
            dist.all_reduce(flat)
            flat /= 2
            at = 0
            for p in model.parameters():
                p.grad.copy_(flat[at:at + p.numel()].view_as(p))
                at += p.numel()
        opt.step()

    step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=schedule(wait=0, warmup=1, active=4),
                 on_trace_ready=lambda p: p.export_chrome_trace(f"{tmp}/rank{rank}.json")) as prof:
        for _ in range(5):
            step()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    for mode in sys.argv[1:] or ("per_tensor", "flat", "metrics"):
        with tempfile.TemporaryDirectory() as tmp:
            run_ranks(run, mode, tmp)
            with open(f"{tmp}/rank0.json", "rb") as src, gzip.open(HERE / f"gradient_sync_{mode}_rank0.pt.trace.json.gz",
                                                                   "wb", compresslevel=9) as dst:
                shutil.copyfileobj(src, dst)
