"""Writes tests/data/cpu/fsdp_{units,fsdp1_units,ddp}_rank0.pt.trace.json.gz: real torch.profiler captures (CPU, shapes
recorded, 2 steps marked) of rank 0 of two processes training one 7-layer MLP (512 wide, batch 64, Adam)
over gloo, one thread each:
- fsdp_units: FSDP2, each hidden layer and the whole model fully_shard-ed (7 units): 13 all-gathers a
  step (7 for the forward, 6 again for the backward) and 7 reduce-scatters.
- fsdp_fsdp1_units: FSDP1 (FullyShardedDataParallel, its default FULL_SHARD) wrapping each Sequential:
  the same 7 units and collectives, under FSDP1's names.
- fsdp_ddp: the same model under DDP (gradient buckets all-reduced): no FSDP unit.

    python tests/data/cpu/make_fsdp.py
Made with torch 2.13.0 (CPU build) on a 2-core AMD EPYC. Unprofiled in the same runs (medians of 30
steps): 64-74 ms a step as 7 units, 65-66 ms with reshard_after_forward=False, 33-38 ms as one unit,
21-24 ms under DDP.
"""

import gzip
import os
import shutil
from pathlib import Path

import torch
import torch.distributed as dist
from profiled import run_ranks
from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard
from torch.distributed.fsdp.wrap import ModuleWrapPolicy
from torch.profiler import ProfilerActivity, profile, schedule

HERE = Path(__file__).parent


def run(rank: int, name: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29541"
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = [torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU()) for _ in range(6)]
    model: torch.nn.Module = torch.nn.Sequential(*layers, torch.nn.Linear(512, 10))
    if name == "fsdp_units":
        for layer in layers:
            fully_shard(layer)
        fully_shard(model)
    elif name == "fsdp_fsdp1_units":
        model = FullyShardedDataParallel(model, auto_wrap_policy=ModuleWrapPolicy({torch.nn.Sequential}),
                                         device_id=torch.device("cpu"))
    else:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    raw = HERE / f"{name}_rank{rank}.pt.trace.json"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=schedule(wait=0, warmup=1, active=2),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
        for _ in range(3):
            step()
            prof.step()
    dist.destroy_process_group()
    if rank == 0:
        with raw.open("rb") as src, gzip.open(raw.with_suffix(".json.gz"), "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
    raw.unlink()


if __name__ == "__main__":
    for name in ("fsdp_units", "fsdp_fsdp1_units", "fsdp_ddp"):
        run_ranks(run, name)
