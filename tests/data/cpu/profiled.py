"""What the make_*.py capture scripts here share: run a loop under torch.profiler (CPU) with one
warm-up step and ``active`` marked steps, and store its trace gzipped beside them."""

import gzip
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

HERE = Path(__file__).parent


def write_capture(name: str, step: Callable[[int], object], active: int, record_shapes: bool = False,
                  with_stack: bool = False, experimental_config: object = None) -> Path:
    """Profile ``step(i)`` for i in 0..active (the first, i = 0, the schedule's warm-up), each call one
    marked step, and write ``tests/data/cpu/<name>.pt.trace.json.gz``. ``experimental_config``: a
    ``torch._C._profiler._ExperimentalConfig`` (profile_all_threads, capture_overload_names)."""
    out = HERE / f"{name}.pt.trace.json.gz"
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "t.json"
        with profile(activities=[ProfilerActivity.CPU], record_shapes=record_shapes, with_stack=with_stack,
                     schedule=schedule(wait=0, warmup=1, active=active), experimental_config=experimental_config,
                     on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
            for i in range(active + 1):
                step(i)
                prof.step()
        with raw.open("rb") as src, gzip.open(out, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
    return out


def store(prof: profile, name: str) -> Path:
    """Export a finished profile (``prof.export_chrome_trace``) to ``tests/data/cpu/<name>.pt.trace.json.gz``."""
    out = HERE / f"{name}.pt.trace.json.gz"
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "t.json"
        prof.export_chrome_trace(str(raw))
        with raw.open("rb") as src, gzip.open(out, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
    return out


def write_training_capture(name: str, model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor,
                           y: torch.Tensor, active: int = 3, record_shapes: bool = True) -> Path:
    """``write_capture`` (shapes recorded unless ``record_shapes`` is False) of a classifier's training
    step: cross-entropy of ``model(x)`` against ``y``, backward, ``opt.step()``; three steps run first,
    unprofiled."""
    def step(_: int) -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for i in range(3):
        step(i)
    return write_capture(name, step, active=active, record_shapes=record_shapes)


def unprofiled_ms(step: Callable[[int], object], calls: int, warmup: int = 5) -> float:
    """``step``'s mean time a call in ms, without the profiler, after ``warmup`` calls."""
    for i in range(warmup):
        step(i)
    start = time.perf_counter()
    for i in range(calls):
        step(i)
    return (time.perf_counter() - start) / calls * 1e3


def run_ranks(target: Callable[..., None], *args: object, world: int = 2) -> None:
    """``target(rank, *args)`` in ``world`` spawned processes (a distributed capture's ranks); exits
    with status 1 where one of them failed."""
    ctx = torch.multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=(rank, *args)) for rank in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        raise SystemExit(1)
