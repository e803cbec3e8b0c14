"""Range attribution: time per NVTX / record_function / TraceMe range, with its GPU projection.

A range's GPU projection follows ``nsys stats -r nvtx_gpu_proj_trace``: the GPU activities whose
*launch call* lies inside the range on the same thread (found through the row tree: every
enclosing range of the launch call), however late the GPU runs them. Projected start/end =
first start / last end of those activities; gpu_ops = the number of those activities (a CUDA/HIP
graph launch is one correlation id for every kernel it replays, so ids would undercount). Ranges whose
launches produced no GPU work have no projection (NaN).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit.analyze.frame import GPU_BUSY_KINDS, frame_of
from tracekit.ingest.links import nearest_ancestor

RANGE_KINDS = ("user_range", "step")


@dataclass
class RangesReport:
    """Result of ``ranges()``. Times in ns.

    instances: one row per range: row, name, depth, pid, tid, start_ns, dur_ns, parent (row of the
        enclosing range or -1), gpu_ops, proj_start_ns, proj_dur_ns (NaN without GPU work),
        gpu_busy_ns (sum of the projected activities' durations).
    summary: per name: instances, total_ns, mean_ns, min_ns, max_ns, mean_depth, gpu_instances
        (instances with GPU work), proj_total_ns, gpu_ops, gpu_busy_ns. Sorted by total_ns.
    """

    instances: pd.DataFrame
    summary: pd.DataFrame


def ranges(table: pa.Table) -> RangesReport:
    """Time per range name, nested, with CPU span and GPU projection (see the module doc)."""
    frame = frame_of(table)
    rows = frame.rows(*RANGE_KINDS)
    is_range = frame.mask(*RANGE_KINDS)
    parent_range = nearest_ancestor(frame.parent, rows, is_range)
    depth = _range_depth(parent_range, rows)

    # (range, gpu activity) pairs through every enclosing range of each launch call.
    gpu_rows = frame.rows(*GPU_BUSY_KINDS)
    gpu_rows = gpu_rows[frame.launch_row[gpu_rows] >= 0]
    launch = frame.launch_row[gpu_rows]
    pair_range, pair_gpu = [], []
    cur = frame.parent[launch].copy()
    alive = np.arange(gpu_rows.size)
    while alive.size:
        alive = alive[cur[alive] >= 0]
        hit = alive[is_range[cur[alive]]]
        pair_range.append(cur[hit])
        pair_gpu.append(gpu_rows[hit])
        cur[alive] = frame.parent[cur[alive]]
    pr = np.concatenate(pair_range) if pair_range else np.zeros(0, np.int64)
    pg = np.concatenate(pair_gpu) if pair_gpu else np.zeros(0, np.int64)

    inst = pd.DataFrame({
        "row": rows, "name": [frame.names[c] if c >= 0 else "" for c in frame.name_code[rows]],
        "depth": depth, "pid": frame.pid[rows], "tid": frame.tid[rows], "start_ns": frame.start[rows],
        "dur_ns": frame.dur[rows], "parent": parent_range,
    })
    if pr.size:
        proj = pd.DataFrame({"row": pr, "s": frame.start[pg], "e": frame.end[pg], "d": frame.dur[pg]})
        agg = proj.groupby("row").agg(proj_start_ns=("s", "min"), proj_end=("e", "max"), gpu_ops=("d", "size"),
                                      gpu_busy_ns=("d", "sum"))
        agg["proj_dur_ns"] = agg.pop("proj_end") - agg["proj_start_ns"]
        inst = inst.merge(agg, left_on="row", right_index=True, how="left")
    else:
        for c in ("proj_start_ns", "gpu_ops", "gpu_busy_ns", "proj_dur_ns"):
            inst[c] = np.nan
    inst["gpu_ops"] = inst["gpu_ops"].fillna(0).astype(np.int64)
    inst["gpu_busy_ns"] = inst["gpu_busy_ns"].fillna(0).astype(np.int64)
    summary = (inst.groupby("name", sort=False)
               .agg(instances=("dur_ns", "size"), total_ns=("dur_ns", "sum"), mean_ns=("dur_ns", "mean"),
                    min_ns=("dur_ns", "min"), max_ns=("dur_ns", "max"), mean_depth=("depth", "mean"),
                    gpu_instances=("proj_dur_ns", "count"), proj_total_ns=("proj_dur_ns", "sum"),
                    gpu_ops=("gpu_ops", "sum"), gpu_busy_ns=("gpu_busy_ns", "sum"))
               .sort_values("total_ns", ascending=False, kind="stable").reset_index())
    summary["proj_total_ns"] = summary["proj_total_ns"].astype(np.int64)
    return RangesReport(instances=inst, summary=summary)


def _range_depth(parent_range: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Depth of each range among ranges only (ops in between do not count)."""
    position = np.full(int(rows.max()) + 1 if rows.size else 1, -1, np.int64)
    position[rows] = np.arange(rows.size)
    depth = np.zeros(rows.size, np.int64)
    cur = parent_range.copy()
    while (cur >= 0).any():
        up = cur >= 0
        depth[up] += 1
        cur[up] = parent_range[position[cur[up]]]
    return depth
