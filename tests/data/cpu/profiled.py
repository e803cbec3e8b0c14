"""What the make_*.py capture scripts here share: run a loop under torch.profiler (CPU) with one
warm-up step and ``active`` marked steps, and store its trace gzipped beside them."""

import gzip
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from torch.profiler import ProfilerActivity, profile, schedule

HERE = Path(__file__).parent


def write_capture(name: str, step: Callable[[int], object], active: int, record_shapes: bool = False,
                  with_stack: bool = False) -> Path:
    """Profile ``step(i)`` for i in 0..active (the first, i = 0, the schedule's warm-up), each call one
    marked step, and write ``tests/data/cpu/<name>.pt.trace.json.gz``."""
    out = HERE / f"{name}.pt.trace.json.gz"
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "t.json"
        with profile(activities=[ProfilerActivity.CPU], record_shapes=record_shapes, with_stack=with_stack,
                     schedule=schedule(wait=0, warmup=1, active=active),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
            for i in range(active + 1):
                step(i)
                prof.step()
        with raw.open("rb") as src, gzip.open(out, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
    return out
