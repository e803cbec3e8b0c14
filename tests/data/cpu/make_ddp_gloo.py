"""Made ddp_gloo_rank{0,1}.pt.trace.json.gz: 2-rank DDP on gloo, CPU only, on a 2-core machine.

    python tests/data/cpu/make_ddp_gloo.py OUT_DIR

Two processes with torch's default intra-op threads (2 each) and gloo's worker threads share two
cores: more runnable threads than cores. In the captured run (torch 2.13.0, 2-core AMD EPYC) rank 0's
``aten::mul`` under the reducer ran 8 ms in one step against 8 us in the others, and over the same
8 ms rank 1's ``aten::copy_`` under ``copy_bucket_to_grad`` (26 us in its other steps): both stalled.
Another run gives other stalls, or none: the files are kept because the stall cannot be re-made
at will.
"""

import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule


def run(rank: int, out: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29517"
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(rank)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256)))
    opt = torch.optim.SGD(model.parameters(), 0.01)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3),
                 on_trace_ready=lambda p: p.export_chrome_trace(f"{out}/ddp_gloo_rank{rank}.pt.trace.json")) as prof:
        for _ in range(5):
            model(torch.randn(32, 256)).sum().backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    ctx = torch.multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=run, args=(r, sys.argv[1])) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    sys.exit(max(p.exitcode for p in procs))
