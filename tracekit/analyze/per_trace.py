"""Per-trace metrics of a dataset, grouped by rank or run: which rank is slowest, and by how much.

``trace_metrics`` reduces one event table to the metrics ``compare`` uses (times in ns, counts);
``group`` aggregates a table of them (one row per trace) by ``rank``, ``run`` or ``source``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pyarrow as pa

from tracekit.analyze.compare import summarize

# Columns shown first; every other metric follows.
KEY_METRICS = ("step_time", "total_time", "gpu_busy", "idle_time", "kernel_count", "op_count")
PER_STEP_METRICS = ("collective_time", "collective_alone_time")  # already per step in every trace (compare.summarize)


def trace_metrics(table: pa.Table) -> dict[str, float]:
    return summarize(table, "").metrics


@dataclass
class Slowest:
    by: str
    value: object
    step_time: float
    median_step_time: float

    @property
    def excess(self) -> float:
        return self.step_time / self.median_step_time - 1 if self.median_step_time else 0.0


def group(traces: pd.DataFrame, by: str) -> pd.DataFrame:
    """Per group: trace count, mean and max step time, the mean of the per-step metrics and the sum of
    every other metric."""
    metrics = [c for c in traces.columns if c not in ("trace_id", "source", "run", "rank", "source_file", "rows")]
    agg = traces.groupby(by, sort=True).agg(
        traces=("trace_id", "size"), events=("rows", "sum"), mean_step_time=("step_time", "mean"),
        max_step_time=("step_time", "max"),
        # Per-step figures average over a group's traces; totals add up.
        **{m: (m, "mean" if m in PER_STEP_METRICS else "sum") for m in metrics if m != "step_time"})
    return agg.reset_index()


def slowest(traces: pd.DataFrame, by: str) -> Slowest | None:
    """The group whose mean step time is largest, against the median group."""
    if traces.empty:
        return None
    g = traces.groupby(by)["step_time"].mean()
    worst = g.idxmax()
    return Slowest(by, worst, float(g[worst]), float(g.median()))
