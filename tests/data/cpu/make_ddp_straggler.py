"""Writes tests/data/cpu/ddp_straggler_rank{0,1}.pt.trace.json.gz: real torch.profiler captures (CPU, 3 steps
marked) of both ranks of a 2-process DDP job over gloo, one thread each, where rank 1 gets 4x the
batch of rank 0 (uneven data per rank): every step, rank 0 finishes its backward first and waits in
the gradient all-reduce for rank 1.

    python tests/data/cpu/make_ddp_straggler.py
Made with torch 2.13.0 (CPU build) on a 2-core AMD EPYC.
"""

import os
import sys

import torch
import torch.distributed as dist
from profiled import write_training_capture

BATCH = {0: 64, 1: 256}


def run(rank: int) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29543"
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)))
    opt = torch.optim.SGD(model.parameters(), 1e-3)
    x, y = torch.randn(BATCH[rank], 512), torch.randint(0, 10, (BATCH[rank],))

    write_training_capture(f"ddp_straggler_rank{rank}", model, opt, x, y, active=3, record_shapes=False)
    dist.destroy_process_group()


if __name__ == "__main__":
    ctx = torch.multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=run, args=(r,)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    sys.exit(1 if any(p.exitcode for p in procs) else 0)
