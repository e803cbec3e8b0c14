"""Step timing without a profiler: median and spread of N samples after warm-up."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

# A sub-millisecond step's wall time varies 2x from call to call on a busy machine, so the median
# of a preset's few repeats is noise there: unprofiled timing goes on past ``repeats`` until this
# much time has been sampled (timeit's autorange idea), at most MAX_SAMPLES calls.
MIN_TIMED_S = 0.1
MAX_SAMPLES = 10_000


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
               cpu_clock: str = "thread_time", min_time_s: float = 0.0) -> dict[str, Any]:
    """Wall and CPU time of at least ``repeats`` calls of ``step`` on the host clocks, more until the
    calls add up to ``min_time_s`` (at most MAX_SAMPLES calls).

    ``sync`` (e.g. ``torch.cuda.synchronize``) runs inside each timed interval so that device work
    is counted. ``cpu_clock``: ``thread_time`` where the ops run on the calling thread (PyTorch),
    ``process_time`` where they run on the framework's thread pools (TensorFlow).
    """
    clock = {"thread_time": time.thread_time_ns, "process_time": time.process_time_ns}[cpu_clock]
    wall: list[int] = []
    cpu: list[int] = []
    timed_ns, min_ns = 0, min_time_s * 1e9
    while len(wall) < repeats or (timed_ns < min_ns and len(wall) < MAX_SAMPLES):
        w0, c0 = time.perf_counter_ns(), clock()
        step()
        if sync is not None:
            sync()
        cpu.append(clock() - c0)
        wall.append(time.perf_counter_ns() - w0)
        timed_ns += wall[-1]
    return {"wall_ns": summarize(wall), "cpu_ns": summarize(cpu), "method": f"perf_counter+{cpu_clock}",
            "min_time_s": min_time_s}
