"""Step timing without a profiler: median and spread of N samples after warm-up."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def summarize(samples_ns: Sequence[int]) -> dict[str, float]:
    """Median, 10th/90th percentile, min and count of samples (ns)."""
    ordered = sorted(samples_ns)
    n = len(ordered)
    if n == 0:
        return {"n": 0}

    def pct(q: float) -> float:
        # Nearest-rank on the sorted samples: with few samples an interpolated p10 means little.
        return float(ordered[min(n - 1, max(0, round(q * (n - 1))))])

    return {"median": float(statistics.median(ordered)), "p10": pct(0.1), "p90": pct(0.9),
            "min": float(ordered[0]), "n": n}


def time_steps(step: Callable[[], Any], repeats: int, sync: Callable[[], None] | None = None,
               cpu_clock: str = "thread_time") -> dict[str, Any]:
    """Wall and CPU time of ``repeats`` calls of ``step`` on the host clocks.

    ``sync`` (e.g. ``torch.cuda.synchronize``) runs inside each timed interval so that device work
    is counted. ``cpu_clock``: ``thread_time`` where the ops run on the calling thread (PyTorch),
    ``process_time`` where they run on the framework's thread pools (TensorFlow).
    """
    clock = {"thread_time": time.thread_time_ns, "process_time": time.process_time_ns}[cpu_clock]
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter_ns(), clock()
        step()
        if sync is not None:
            sync()
        cpu.append(clock() - c0)
        wall.append(time.perf_counter_ns() - w0)
    return {"wall_ns": summarize(wall), "cpu_ns": summarize(cpu), "method": f"perf_counter+{cpu_clock}"}
