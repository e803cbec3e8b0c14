"""Range attribution: time per NVTX / record_function / TraceMe range, with its GPU projection.

PyTorch's module events (``nn.Module: Linear_0``, recorded with ``with_stack=True`` or
``with_modules=True``) count as ranges: each layer's forward time (its backward runs in autograd's
ops, outside them).

A range's GPU projection follows ``nsys stats -r nvtx_gpu_proj_trace``: the GPU activities whose
*launch call* lies inside the range on the same thread (found through the row tree: every
enclosing range of the launch call), however late the GPU runs them. Projected start/end =
first start / last end of those activities; gpu_ops = the number of those activities (a CUDA/HIP
graph launch is one correlation id for every kernel it replays, so ids would undercount). Ranges whose
launches produced no GPU work have no projection (NaN).

Two kinds of range reach GPU work that other threads launch, and are projected by other evidence:

* a **step** projects onto every GPU activity of that step (launched by any thread of its process:
  PyTorch's autograd thread launches the backward pass outside ``ProfilerStep#N``'s subtree), except
  in an nsys trace whose steps are calls of one of its NVTX ranges (``tracekit.ingest.step_inference``):
  those are the trace's ranges, projected as ``nsys stats`` projects them;
* a **TensorFlow/JAX range** whose own subtree launched nothing projects onto the activities launched
  by its process's other threads during the range: their runtimes execute ops on executor threads
  (``tf_Compute``, ``tf_gpu_private``) while the thread that opened the range waits. Elsewhere a
  range without launches of its own (a DataLoader thread's) keeps no projection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema
from tracekit.analyze import intervals
from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame, frame_of
from tracekit.analyze.steps import steps_origin
from tracekit.ingest.columns import stable_order
from tracekit.ingest.links import nearest_ancestor

RANGE_KINDS = ("user_range", "step")
_NUMBERS = r"\d+"
# torch.profiler(with_stack=True or with_modules=True) records each nn.Module's forward as a Python
# event named for the module and its index among modules of its class (``nn.Module: Conv2d_0``): the
# time per layer, counted with the ranges.
MODULE_PREFIX = "nn.Module: "
CROSS_THREAD_SOURCES = ("tf", "jax")  # runtimes that run a range's ops on executor threads


@dataclass
class RangesReport:
    """Result of ``ranges()``. Times in ns.

    instances: one row per range, by start: row, name, depth, pid, tid, start_ns, dur_ns, parent (row of the
        enclosing range or -1), gpu_ops, proj_start_ns, proj_dur_ns (NaN without GPU work),
        gpu_busy_ns (sum of the projected activities' durations).
    summary: per name (steps under one, their numbers made N: ``ProfilerStep#N``): instances, total_ns, mean_ns, min_ns, max_ns, mean_depth, gpu_instances
        (instances with GPU work), proj_total_ns, gpu_ops, gpu_busy_ns, outermost_ns. Sorted by total_ns.
        total_ns sums every instance, as nsys's nvtx_sum does, so an instance inside another of its
        name (``in_same_name`` in ``instances``) counts twice; outermost_ns sums only the outermost.
    """

    instances: pd.DataFrame
    summary: pd.DataFrame


def ranges(table: pa.Table) -> RangesReport:
    """Time per range name, nested, with CPU span and GPU projection (see the module doc)."""
    frame = frame_of(table)
    rows, is_range = range_rows(frame)
    parent_range = nearest_ancestor(frame.parent, rows, is_range)
    depth, in_same_name = _range_ancestry(parent_range, rows, frame.name_code[rows])

    # Each range's GPU activities: those whose launch call lies in the range's subtree of the row tree.
    gpu_rows = frame.rows(*GPU_BUSY_KINDS)
    gpu_rows = gpu_rows[frame.launch_row[gpu_rows] >= 0]
    proj = _projection(frame.parent, frame.depth, rows, frame.launch_row[gpu_rows], frame.start[gpu_rows],
                       frame.end[gpu_rows])
    if not _nvtx_ranges_made_steps(table):
        _project_steps(frame, rows, gpu_rows, proj)
    if _source(table) in CROSS_THREAD_SOURCES:
        _project_across_threads(frame, rows, gpu_rows, proj)

    inst = pd.DataFrame({
        "row": rows, "name": [frame.names[c] if c >= 0 else "" for c in frame.name_code[rows]],
        "depth": depth, "pid": frame.pid[rows], "tid": frame.tid[rows], "start_ns": frame.start[rows],
        "dur_ns": frame.dur[rows], "parent": parent_range,
        "in_same_name": in_same_name,
    })
    inst["outermost_ns"] = np.where(inst["in_same_name"], 0, inst["dur_ns"])
    inst["gpu_ops"], inst["gpu_busy_ns"] = proj["gpu_ops"], proj["gpu_busy_ns"]
    has = proj["gpu_ops"] > 0
    inst["proj_start_ns"] = np.where(has, proj["first_start"], np.nan)
    inst["proj_dur_ns"] = np.where(has, proj["last_end"] - proj["first_start"], np.nan)
    inst["gpu_ops"] = inst["gpu_ops"].fillna(0).astype(np.int64)
    inst["gpu_busy_ns"] = inst["gpu_busy_ns"].fillna(0).astype(np.int64)
    # In time order, not the file's: the same trace written in another order (a merged or re-exported
    # file) gives the same instances, and names tied on total time keep their order of first use.
    order = np.lexsort((rows, inst["start_ns"].to_numpy()))
    inst = inst.iloc[order].reset_index(drop=True)
    rows = rows[order]
    # A step per row (ProfilerStep#1, ProfilerStep#2, ...) is one range of the loop: summed as one name,
    # its numbers made N, so that a long loop is one row, and two traces' steps compare by name.
    steps = frame.kind[rows] == schema.KIND_CODES["step"]
    grouped = inst["name"].to_numpy(object)
    if steps.any():
        grouped = grouped.copy()
        # One rename per distinct step name (Iteration#0 .. #999 are a thousand), not a pass per name.
        codes, index = np.unique(frame.name_code[rows[steps]], return_inverse=True)
        renamed = np.array([re.sub(_NUMBERS, "N", frame.names[c]) if c >= 0 else "" for c in codes.tolist()], object)
        grouped[steps] = renamed[index.ravel()]
    summary = (inst.assign(name=grouped)
               .groupby("name", sort=False)
               .agg(instances=("dur_ns", "size"), total_ns=("dur_ns", "sum"), mean_ns=("dur_ns", "mean"),
                    min_ns=("dur_ns", "min"), max_ns=("dur_ns", "max"), mean_depth=("depth", "mean"),
                    gpu_instances=("proj_dur_ns", "count"), proj_total_ns=("proj_dur_ns", "sum"),
                    gpu_ops=("gpu_ops", "sum"), gpu_busy_ns=("gpu_busy_ns", "sum"),
                    outermost_ns=("outermost_ns", "sum"))
               .sort_values("total_ns", ascending=False, kind="stable").reset_index())
    summary["proj_total_ns"] = summary["proj_total_ns"].astype(np.int64)
    return RangesReport(instances=inst, summary=summary)


def range_rows(frame: Frame) -> tuple[np.ndarray, np.ndarray]:
    """The rows ``ranges`` reads (``RANGE_KINDS``, and PyTorch's module events), in row order, and
    the same as a mask over every row."""
    is_range = frame.mask(*RANGE_KINDS).copy()
    python = frame.rows("python_function")
    if python.size:
        codes = [i for i, n in enumerate(frame.names) if n.startswith(MODULE_PREFIX)]
        if codes:
            is_range[python[np.isin(frame.name_code[python], codes)]] = True
    return np.flatnonzero(is_range), is_range


def _source(table: pa.Table) -> str:
    return schema.source_of(table)


def _nvtx_ranges_made_steps(table: pa.Table) -> bool:
    """An nsys trace whose steps are the calls of one of its NVTX ranges (nsys marks no steps)."""
    return _source(table) == "nsys" and bool(steps_origin(table))


def _project_steps(frame: Frame, rows: np.ndarray, gpu_rows: np.ndarray, proj: dict[str, np.ndarray]) -> None:
    """Step rows: the GPU activities of their step, launched by any thread of their process."""
    steps = np.flatnonzero(frame.kind[rows] == schema.KIND_CODES["step"])
    if not steps.size or not gpu_rows.size:
        return
    launch = frame.launch_row[gpu_rows]
    _by_key(np.stack([frame.pid[launch], frame.step[gpu_rows]]), frame.start[gpu_rows], frame.end[gpu_rows],
            np.stack([frame.pid[rows[steps]], frame.step[rows[steps]]]), None, steps, proj)


def _project_across_threads(frame: Frame, rows: np.ndarray, gpu_rows: np.ndarray, proj: dict[str, np.ndarray]) -> None:
    """Ranges that launched nothing themselves: the activities their process launched during them."""
    idle = np.flatnonzero((proj["gpu_ops"] == 0) & (frame.kind[rows] != schema.KIND_CODES["step"]))
    if not idle.size or not gpu_rows.size:
        return
    launch = frame.launch_row[gpu_rows]
    r = rows[idle]
    _by_key(np.stack([frame.pid[launch], frame.start[launch]]), frame.start[gpu_rows], frame.end[gpu_rows],
            np.stack([frame.pid[r], frame.start[r]]), np.stack([frame.pid[r], frame.end[r]]), idle, proj)


def _by_key(gpu_key: np.ndarray, start: np.ndarray, end: np.ndarray, lo_key: np.ndarray, hi_key: np.ndarray | None,
            targets: np.ndarray, proj: dict[str, np.ndarray]) -> None:
    """Project ``targets`` onto the GPU activities whose (process, key) lies in [lo_key, hi_key)
    (``hi_key`` None: equals ``lo_key``). Sorted by (process, key), each target's share is one
    contiguous slice, summed and searched as in ``_projection``."""
    order = np.lexsort((gpu_key[1], gpu_key[0]))
    pid, key, start, end = gpu_key[0][order], gpu_key[1][order], start[order], end[order]
    lo = np.empty(targets.size, np.int64)
    hi = np.empty(targets.size, np.int64)
    for p in np.unique(lo_key[0]):
        sel = lo_key[0] == p
        a, b = np.searchsorted(pid, p, "left"), np.searchsorted(pid, p, "right")
        lo[sel] = a + np.searchsorted(key[a:b], lo_key[1][sel], "left")
        hi[sel] = a + (np.searchsorted(key[a:b], lo_key[1][sel], "right") if hi_key is None
                       else np.searchsorted(key[a:b], hi_key[1][sel], "left"))
    busy = np.r_[0, np.cumsum(end - start)]
    has = hi > lo
    proj["gpu_ops"][targets] = hi - lo
    proj["gpu_busy_ns"][targets] = busy[hi] - busy[lo]
    proj["first_start"][targets[has]] = intervals.range_reduce(start, lo[has], hi[has], np.minimum)
    proj["last_end"][targets[has]] = intervals.range_reduce(end, lo[has], hi[has], np.maximum)


def subtree_intervals(parent: np.ndarray, depth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pre-order position ``tin`` and subtree size of every row of the row forest (``depth``: each
    row's nesting depth, as the table stores it): row A encloses row B (is an ancestor or B itself)
    iff ``tin[A] <= tin[B] < tin[A] + size[A]``. O(n log n), one pass per depth level."""
    n = parent.size
    size = np.ones(n, np.int64)
    tin = np.zeros(n, np.int64)
    if not n:
        return tin, size
    by_depth = stable_order(depth)
    bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2))
    levels = [by_depth[bounds[d]:bounds[d + 1]] for d in range(int(depth.max()) + 1)]
    for at in reversed(levels[1:]):  # subtree sizes, deepest first
        np.add.at(size, parent[at], size[at])
    # Offset of each row among its siblings (in row order): the sizes of the siblings before it.
    order = np.lexsort((np.arange(n), parent))
    sib_parent, sib_size = parent[order], size[order]
    cumulative = np.cumsum(sib_size) - sib_size
    first = np.r_[True, sib_parent[1:] != sib_parent[:-1]]
    group_start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    offset = np.empty(n, np.int64)
    offset[order] = cumulative - cumulative[group_start]
    tin[levels[0]] = offset[levels[0]]
    for at in levels[1:]:
        tin[at] = tin[parent[at]] + 1 + offset[at]
    return tin, size


def _projection(parent: np.ndarray, depth: np.ndarray, ranges: np.ndarray, launch: np.ndarray, start: np.ndarray,
                end: np.ndarray) -> dict[str, np.ndarray]:
    """Per range: how many GPU activities its launch calls started, their summed time, first start
    and last end. The activities sorted by their launch call's pre-order position make each range's
    share one contiguous slice: counts and sums from prefix sums, first/last from sparse tables."""
    n = ranges.size
    out = {"gpu_ops": np.zeros(n, np.int64), "gpu_busy_ns": np.zeros(n, np.int64),
           "first_start": np.zeros(n, np.int64), "last_end": np.zeros(n, np.int64)}
    if not n or not launch.size:
        return out
    tin, size = subtree_intervals(parent, depth)
    key = tin[launch]
    order = np.argsort(key, kind="stable")
    key, start, end = key[order], start[order], end[order]
    lo = np.searchsorted(key, tin[ranges], side="left")
    hi = np.searchsorted(key, tin[ranges] + size[ranges], side="left")
    busy = np.r_[0, np.cumsum(end - start)]
    out["gpu_ops"] = hi - lo
    out["gpu_busy_ns"] = busy[hi] - busy[lo]
    has = hi > lo
    out["first_start"][has] = intervals.range_reduce(start, lo[has], hi[has], np.minimum)
    out["last_end"][has] = intervals.range_reduce(end, lo[has], hi[has], np.maximum)
    return out


def _range_ancestry(parent_range: np.ndarray, rows: np.ndarray, name_code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per range, in one climb of its enclosing ranges: its depth among ranges only (ops in between do
    not count), and whether an enclosing range has its name (a recursive range; TF's TraceMe of a
    ``tf.function`` call inside the program's ``Trace`` of the same name; unnamed ranges are no name)."""
    position = np.full(int(rows.max()) + 1 if rows.size else 1, -1, np.int64)
    position[rows] = np.arange(rows.size)
    depth = np.zeros(rows.size, np.int64)
    inside = np.zeros(rows.size, bool)
    named = name_code >= 0
    cur = parent_range.copy()
    while (cur >= 0).any():
        up = np.flatnonzero(cur >= 0)
        depth[up] += 1
        inside[up] |= (name_code[position[cur[up]]] == name_code[up]) & named[up]
        cur[up] = parent_range[position[cur[up]]]
    return depth, inside
