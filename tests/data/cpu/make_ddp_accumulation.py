"""Writes tests/data/cpu/ddp_accumulation_rank0.pt.trace.json.gz: rank 0 of a 2-rank DDP run on gloo
(CPU only, one intra-op thread a rank) with gradient accumulation: three micro-batches under
no_sync(), the fourth all-reducing the gradients and stepping SGD; 12 steps marked by a schedule. The
all-reduce runs on gloo's threads while the loop's thread waits for it.

    python tests/data/cpu/make_ddp_accumulation.py
Made with torch 2.13.0 (CPU build).
"""

import gzip
import os
import shutil
import tempfile
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule

HERE = Path(__file__).parent
ACCUMULATE = 4


def run(rank: int, tmp: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29533"
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)]))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 256)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=12),
                 on_trace_ready=lambda p: p.export_chrome_trace(f"{tmp}/rank{rank}.json")) as prof:
        for i in range(13):
            synced = i % ACCUMULATE == ACCUMULATE - 1
            with nullcontext() if synced else model.no_sync():
                model(x).sum().backward()
            if synced:
                opt.step()
                opt.zero_grad()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        ctx = torch.multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=run, args=(r, tmp)) for r in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        with open(f"{tmp}/rank0.json", "rb") as src, gzip.open(HERE / "ddp_accumulation_rank0.pt.trace.json.gz", "wb",
                                                                compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
