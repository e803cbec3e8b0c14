"""An exclusive CPU breakdown: each step's span on the step's thread, split into parts that add up to it.

Every instant of a step, on the thread that ran the step (the thread of its ``ProfilerStep`` /
TraceMe / NVTX step range), belongs to exactly one part:

* ``<class>_ns`` for each compute op class (and ``compiled``): the innermost op running then is of
  that class (its self time, clipped to the step);
* ``framework_ns``: the innermost op is a wrapper, copy or other non-compute op (dispatcher and
  framework overhead inside ops);
* ``unrecorded_ops_ns``: the innermost op is a TorchScript call whose own time is ops its interpreter
  ran without recording them (``breakdown.unrecorded_script_calls``), given only where the caller
  passes them;
* ``waiting_ns``: the innermost op is a non-compute op that waits for other threads (a TF function
  call on the Python thread while the inter-op pool runs its ops: ``tracekit.analyze.waiting``),
  given only where the caller passes them (CPU-only traces);
* ``outside_ops_ns``: no op runs on the thread (Python between ops, data loading, waiting for
  other threads, idle).

So the parts partition the span exactly (``PARTS`` names them; a test checks the sum on every CPU
trace). Work on other threads (TF's inter-op pool, DataLoader workers) is not part of the
partition; ``other_threads_ns`` gives its op self time in the step for reference. Without marked
steps the window is the extent of the ops on the thread with the most ops.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analyze import intervals
from tracekit.analyze.classify import OP_CLASSES
from tracekit.analyze.frame import Frame
from tracekit.ingest.columns import stable_order

PARTITION_CLASSES = ("rnn", "convolution", "gemm", "cast", "copy", "elementwise", "reduction", "fft", "linalg",
                     "communication", "compiled")
PARTS = (*[f"{c}_ns" for c in PARTITION_CLASSES], "framework_ns", "unrecorded_ops_ns", "waiting_ns", "outside_ops_ns")
COLUMNS = ["step", "thread", "span_ns", *PARTS, "other_threads_ns"]


def cpu_partition(frame: Frame, view: np.ndarray, op_rows: np.ndarray, steps: list[int],
                  waiting: np.ndarray | None = None, unrecorded: np.ndarray | None = None) -> pd.DataFrame:
    """Per step (and a whole row, step -1, summing them): span_ns and the ``PARTS`` that add up to it.

    Args:
        frame: the trace.
        view: the effective op class (index into ``OP_CLASSES``) of each row of ``op_rows``.
        op_rows: the cpu_op rows, ascending.
        steps: the marked step numbers.
        waiting: for each row of ``op_rows``, whether it is a non-compute op waiting for other
            threads (its self time goes to ``waiting_ns``); None: none is.
        unrecorded: for each row of ``op_rows``, whether its self time is ops run unrecorded (goes to
            ``unrecorded_ops_ns``); None: none is.
    """
    if op_rows.size == 0:
        return pd.DataFrame(columns=COLUMNS)
    part_of_class = np.array([PARTITION_CLASSES.index(c) if c in PARTITION_CLASSES else PARTS.index("framework_ns")
                              for c in OP_CLASSES], np.int64)
    parts = part_of_class[view]  # index into PARTS (framework_ns for non-compute classes)
    if waiting is not None:
        parts[waiting & (parts == PARTS.index("framework_ns"))] = PARTS.index("waiting_ns")
    if unrecorded is not None:
        parts[unrecorded] = PARTS.index("unrecorded_ops_ns")
    op_parent = frame.op_parent[op_rows]
    records = _all_windows(frame, op_rows, parts, op_parent, _windows(frame, op_rows, steps))
    df = pd.DataFrame.from_records(records, columns=COLUMNS)
    if steps and len(df):
        whole = df.drop(columns=["step", "thread"]).sum()
        df = pd.concat([pd.DataFrame([{"step": -1, "thread": df.thread.iloc[0], **whole.to_dict()}]), df],
                       ignore_index=True)
    return df


def _windows(frame: Frame, op_rows: np.ndarray, steps: list[int]) -> list[tuple[int, int, int, int]]:
    """(step, thread, start, end) of each step: the extent of its step rows, on the thread of its first."""
    step_rows = frame.rows("step")
    if steps and step_rows.size:
        numbers = frame.step[step_rows]
        order = np.argsort(numbers, kind="stable")  # by step, row order within a step
        rows, numbers = step_rows[order], numbers[order]
        first = np.flatnonzero(np.r_[True, numbers[1:] != numbers[:-1]])
        lo, hi = np.minimum.reduceat(frame.start[rows], first), np.maximum.reduceat(frame.end[rows], first)
        found = {int(numbers[f]): (int(frame.thread_key[rows[f]]), int(lo[i]), int(hi[i])) for i, f in enumerate(first)}
        return [(st, *found[st]) for st in steps]
    keys, counts = np.unique(frame.thread_key[op_rows], return_counts=True)
    th = keys[np.argmax(counts)]
    mine = op_rows[frame.thread_key[op_rows] == th]
    return [(-1, int(th), int(frame.start[mine].min()), int(frame.end[mine].max()))]


def _all_windows(frame: Frame, op_rows: np.ndarray, parts: np.ndarray, op_parent: np.ndarray,
                 windows: list[tuple[int, int, int, int]]) -> list[dict]:
    """``_window`` of every window; the windows of a thread that do not overlap each other (steps
    in turn, the usual case) are done together in one pass over that thread's ops."""
    out: dict[int, dict] = {}
    by_thread: dict[int, list[int]] = {}
    for i, (_, th, _, _) in enumerate(windows):
        by_thread.setdefault(th, []).append(i)
    for th, mine in by_thread.items():
        mine.sort(key=lambda i: windows[i][2])
        lo = np.array([windows[i][2] for i in mine], np.int64)
        hi = np.array([windows[i][3] for i in mine], np.int64)
        if (lo[1:] < hi[:-1]).any():  # overlapping windows: each on its own
            out.update({i: _window(frame, op_rows, parts, op_parent, *windows[i]) for i in mine})
            continue
        steps = [windows[i][0] for i in mine]
        out.update(zip(mine, _disjoint_windows(frame, op_rows, parts, op_parent, th, steps, lo, hi), strict=True))
    return [out[i] for i in range(len(windows))]


def _disjoint_windows(frame: Frame, op_rows: np.ndarray, parts: np.ndarray, op_parent: np.ndarray, th: int,
                      steps: list[int], lo: np.ndarray, hi: np.ndarray) -> list[dict]:
    """``_window`` of disjoint windows on one thread (ascending), at once: each (op, window) pair
    where the op overlaps the window is one element, ordered by window then row."""
    n = lo.size
    on_thread = frame.thread_key[op_rows] == th
    mine = np.flatnonzero(on_thread)
    start, end = frame.start[op_rows[mine]], frame.end[op_rows[mine]]
    first = np.searchsorted(hi, start, side="right")  # first window ending after the op starts
    count = np.maximum(np.searchsorted(lo, end, side="left") - first, 0)  # windows starting before it ends
    sel = np.repeat(mine, count)  # index into op_rows of each pair
    offsets = np.arange(sel.size) - np.repeat(np.cumsum(count) - count, count)
    w = np.repeat(first, count) + offsets
    order = stable_order(w)  # by window, then row: sel ascends already (as lexsort((sel, w)), radix-sorted)
    sel, w = sel[order], w[order]
    rows = op_rows[sel]
    s, e = np.clip(frame.start[rows], lo[w], hi[w]), np.clip(frame.end[rows], lo[w], hi[w])
    clipped = e - s
    # Self time in the window: clipped time less the clipped time of child ops in the same window.
    stride = np.int64(len(frame) + 1)
    key = w * stride + rows
    parent = op_parent[sel]
    parent_key = w * stride + parent
    idx = np.minimum(np.searchsorted(key, parent_key), max(key.size - 1, 0))
    is_child = (parent >= 0) & (key.size > 0) & (key[idx] == parent_key)
    child = np.zeros(rows.size, np.int64)
    np.add.at(child, idx[is_child], clipped[is_child])
    self_ns = clipped - child
    covered = intervals.total_by_group(w, s, e, n)
    self_sum = np.zeros(n, np.int64)
    np.add.at(self_sum, w, self_ns)
    negative = np.zeros(n, bool)
    negative[w[self_ns < 0]] = True
    for k in np.flatnonzero(negative | (self_sum != covered)):
        # Ops that overlap without nesting (clock skew, hand-made traces): split by sweeping instead.
        at = np.flatnonzero(w == k)
        self_ns[at] = _innermost_sweep(s[at], e[at], frame.depth[rows[at]])
    n_parts = len(PARTS) - 1
    totals = np.bincount(w * n_parts + parts[sel], weights=self_ns, minlength=n * n_parts).astype(np.int64)
    totals = totals.reshape(n, n_parts)
    other = _other_threads(frame, op_rows, ~on_thread, steps, lo, hi)
    return [{"step": st, "thread": th, "span_ns": int(hi[k] - lo[k]), **{p: int(totals[k, i]) for i, p in enumerate(PARTS[:-1])},
             "outside_ops_ns": int(hi[k] - lo[k]) - int(totals[k].sum()), "other_threads_ns": int(other[k])}
            for k, st in enumerate(steps)]


def _other_threads(frame: Frame, op_rows: np.ndarray, off_thread: np.ndarray, steps: list[int], lo: np.ndarray,
                   hi: np.ndarray) -> np.ndarray:
    """Per window, the duration of ops on other threads that overlap it (of its step when marked)."""
    out = np.zeros(lo.size, np.int64)
    cand = op_rows[off_thread]
    start, end = frame.start[cand], frame.end[cand]
    if steps == [-1]:  # no marked steps: the one window
        inside = (start < hi[0]) & (end > lo[0])
        out[0] = int(np.maximum(frame.dur[cand[inside]], 0).sum())
        return out
    numbers = np.asarray(steps, np.int64)
    order = np.argsort(numbers)
    pos = np.minimum(np.searchsorted(numbers[order], frame.step[cand]), numbers.size - 1)
    k = order[pos]
    inside = (numbers[k] == frame.step[cand]) & (start < hi[k]) & (end > lo[k])
    np.add.at(out, k[inside], np.maximum(frame.dur[cand[inside]], 0))
    return out


def _window(frame: Frame, op_rows: np.ndarray, parts: np.ndarray, op_parent: np.ndarray, st: int, th: int,
            lo: int, hi: int) -> dict:
    inside = (frame.start[op_rows] < hi) & (frame.end[op_rows] > lo)
    on_thread = inside & (frame.thread_key[op_rows] == th)
    sel = np.flatnonzero(on_thread)
    rows = op_rows[sel]
    s, e = np.clip(frame.start[rows], lo, hi), np.clip(frame.end[rows], lo, hi)
    clipped = e - s
    # Self time clipped to the window: an op's clipped time less its child ops' (nearest op ancestor).
    parent = op_parent[sel]
    idx = np.searchsorted(rows, parent)
    is_child = (parent >= 0) & (idx < rows.size) & (rows[np.minimum(idx, rows.size - 1)] == parent)
    child = np.zeros(rows.size, np.int64)
    np.add.at(child, idx[is_child], clipped[is_child])
    self_ns = clipped - child
    covered = intervals.clip_total(s, e, lo, hi) if rows.size else 0
    if (self_ns < 0).any() or int(self_ns.sum()) != covered:
        # Ops that overlap without nesting (clock skew, hand-made traces): split by sweeping instead.
        self_ns = _innermost_sweep(s, e, frame.depth[rows])
    totals = np.bincount(parts[sel], weights=self_ns, minlength=len(PARTS) - 1).astype(np.int64)
    other = inside & ~on_thread & (frame.step[op_rows] == st) if st >= 0 else inside & ~on_thread
    return {"step": st, "thread": th, "span_ns": hi - lo, **{p: int(totals[i]) for i, p in enumerate(PARTS[:-1])},
            "outside_ops_ns": (hi - lo) - int(totals.sum()), "other_threads_ns": int(np.maximum(
                frame.dur[op_rows[other]], 0).sum()) if other.any() else 0}


def _innermost_sweep(start: np.ndarray, end: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Time during which each interval is the innermost (deepest, then latest-starting, then first
    in row order) one running.

    The boundaries cut time into elementary segments; each interval raises the winner of the
    segments it covers to its rank. Those range-max updates go into a sparse table (an update of
    [l, r) touches two entries of level floor(log2(r - l))), pushed down level by level: O(n log n)
    in numpy, no Python loop per interval.
    """
    n = start.size
    out = np.zeros(n, np.int64)
    if n == 0:
        return out
    bounds = np.sort(np.concatenate([start, end]))
    bounds = bounds[np.r_[True, bounds[1:] != bounds[:-1]]]  # np.unique hashes first: slower here
    lo = np.searchsorted(bounds, start)
    hi = np.searchsorted(bounds, end)
    order = np.lexsort((-np.arange(n), start, depth))  # ascending priority
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    live = hi > lo
    lo, hi, r = lo[live], hi[live], rank[live]
    segments = bounds.size - 1
    if segments <= 0 or not lo.size:
        return out
    level = np.floor(np.log2(hi - lo)).astype(np.int64)
    levels = int(level.max()) + 1
    table = np.full((levels, segments), -1, np.int64)
    np.maximum.at(table, (level, lo), r)
    np.maximum.at(table, (level, hi - (1 << level)), r)
    for k in range(levels - 1, 0, -1):
        half = 1 << (k - 1)
        top = table[k]
        np.maximum(table[k - 1], top, out=table[k - 1])
        np.maximum(table[k - 1][half:], top[:segments - half], out=table[k - 1][half:])
    winner = table[0]
    covered = winner >= 0
    length = np.diff(bounds)
    np.add.at(out, order[winner[covered]], length[covered])
    return out
