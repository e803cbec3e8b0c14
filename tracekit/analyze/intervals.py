"""Interval arithmetic on ns timelines (vectorized; inputs need not be sorted)."""

from __future__ import annotations

import numpy as np

from tracekit._native import interval_sweep
from tracekit.ingest.columns import stable_order

_SWEEP = interval_sweep()


def union(start: np.ndarray, end: np.ndarray, is_sorted: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Merge intervals into disjoint, sorted ones. Touching intervals merge (like HTA and nsys).

    ``is_sorted``: the intervals are already in start order (skips the sort).
    """
    if start.size == 0:
        return start.astype(np.int64), end.astype(np.int64)
    if is_sorted:
        s, e = start, end
    else:
        order = np.argsort(start, kind="stable")
        s, e = start[order], end[order]
    run_end = np.maximum.accumulate(e)
    # A new merged interval begins where a start lies beyond every earlier end.
    new = np.empty(s.size, bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], run_end[last]


def total(start: np.ndarray, end: np.ndarray) -> int:
    """Length of the union of the intervals."""
    s, e = union(start, end)
    return int((e - s).sum())


def gaps(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Idle intervals between the merged intervals (start, end of each gap)."""
    s, e = union(start, end)
    return e[:-1], s[1:]


def intersect(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray,
              b_end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pieces where intervals of A and of B overlap, each set disjoint and sorted: (start, end,
    index in A, index in B) of each piece, in time order. In disjoint sets each overlapping pair
    (a, b) is one piece, and the B intervals an A interval meets are consecutive: two binary
    searches per A interval find them (no sort of all the edges: that took ~40 ms of a 1M-event report)."""
    a_start, a_end = a_start.astype(np.int64, copy=False), a_end.astype(np.int64, copy=False)
    b_start, b_end = b_start.astype(np.int64, copy=False), b_end.astype(np.int64, copy=False)
    first = np.searchsorted(b_end, a_start, side="right")  # the first B ending after A begins
    last = np.searchsorted(b_start, a_end, side="left")  # B intervals from here on begin at or after A's end
    count = np.maximum(last - first, 0)
    ia = np.repeat(np.arange(a_start.size), count)
    # Each A interval's run of B indices: first, first + 1, ...
    ib = np.arange(ia.size) - np.repeat(np.cumsum(count) - count - first, count)
    lo, hi = np.maximum(a_start[ia], b_start[ib]), np.minimum(a_end[ia], b_end[ib])
    keep = lo < hi  # empty intervals meet nothing
    return lo[keep], hi[keep], ia[keep], ib[keep]


def minus(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray,
          b_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint sorted intervals A with the disjoint sorted intervals B taken out: A met with the
    gaps of B (and the time before its first interval and after its last)."""
    if b_start.size == 0:
        keep = a_start < a_end  # empty intervals cover nothing, as intersect leaves them out
        return a_start[keep], a_end[keep]
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    gap_s, gap_e = np.concatenate([[lo], b_end]), np.concatenate([b_start, [hi]])
    keep = gap_s < gap_e
    s, e, _, _ = intersect(a_start, a_end, gap_s[keep], gap_e[keep])
    return s, e


def clip_total(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> int:
    """Length of the union of the intervals clipped to [lo, hi)."""
    s = np.clip(start, lo, hi)
    e = np.clip(end, lo, hi)
    return total(s, e)


def exclusive_by_priority(start: np.ndarray, end: np.ndarray, cls: np.ndarray, n_classes: int) -> np.ndarray:
    """Time of each class not covered by any class before it (class index = priority).

    Class i gets |U(classes <= i)| - |U(classes < i)|, so the values add up to the busy time
    |U(all)| exactly.
    """
    return exclusive_by_priority_by_group(np.zeros(start.size, np.int64), start, end, cls, n_classes, 1)[0]


def _group_order(group: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Row order by group, then start."""
    # Two stable sorts, as np.lexsort((start, group)) but 2.5x faster: traces are mostly in time
    # order already (timsort runs through them), and a 16-bit group code sorts by radix.
    by_start = np.argsort(start, kind="stable")
    return by_start[stable_order(group[by_start])]


def _apart(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Order (by group, then start) and times moved so each group lies on its own stretch of one
    timeline, a gap of 1 ns from the next: one sorted pass then merges every group at once and no
    interval merges with another group's (touching ones would)."""
    order = _group_order(group, start)
    g, s, e = group[order], start[order], end[order]
    new_group = np.empty(g.size, bool)
    new_group[:1] = True
    new_group[1:] = g[1:] != g[:-1]
    first = np.flatnonzero(new_group)
    lo = s[first]  # each group's earliest start (sorted by start within a group)
    hi = np.maximum.reduceat(e, first)
    base = np.concatenate([[0], np.cumsum(hi - lo + 1)[:-1]])
    shift = np.repeat(base - lo, np.diff(np.append(first, g.size)))
    return order, s + shift, e + shift


def _runs(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merged runs of start-sorted intervals: index of each run's first interval, its start and end."""
    run_end = np.maximum.accumulate(e)
    new = np.empty(s.size, bool)
    new[:1] = True
    new[1:] = s[1:] > run_end[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return first, s[first], run_end[last]


def total_by_group(group: np.ndarray, start: np.ndarray, end: np.ndarray, n_groups: int) -> np.ndarray:
    """``total`` of each group's intervals (``group``: 0 .. n_groups-1), in one pass over all groups."""
    if start.size == 0:
        return np.zeros(n_groups, np.int64)
    order, s, e = _apart(group, start, end)
    first, run_s, run_e = _runs(s, e)
    return _sum_sorted(group[order][first].astype(np.int64), run_e - run_s, n_groups)


def exclusive_by_priority_by_group(group: np.ndarray, start: np.ndarray, end: np.ndarray, cls: np.ndarray,
                                   n_classes: int, n_groups: int) -> np.ndarray:
    """``exclusive_by_priority`` of each group's intervals: an (n_groups, n_classes) array, all
    groups at once (not one call per group).

    One sweep over the rows in (group, start) order: in C (``interval_sweep.c``) when it is built,
    else the same rule in numpy, one class at a time.
    """
    out = np.zeros((n_groups, n_classes), np.int64)
    if start.size == 0:
        return out
    if _SWEEP is not None and n_classes <= 64:
        # One pass in C over the rows in (group, start) order (interval_sweep.c); same result.
        group64 = np.ascontiguousarray(group, np.int64)
        _SWEEP.exclusive(_group_order(group64, start), group64, np.ascontiguousarray(start, np.int64),
                         np.ascontiguousarray(end, np.int64), np.ascontiguousarray(cls, np.int8), n_classes, out)
        return out
    return _exclusive_by_sweeping(group, start, end, cls, n_classes, n_groups, out)


def _exclusive_by_sweeping(group: np.ndarray, start: np.ndarray, end: np.ndarray, cls: np.ndarray, n_classes: int,
                           n_groups: int, out: np.ndarray) -> np.ndarray:
    """``exclusive_by_priority_by_group`` in numpy, where the C sweep is not built: the groups laid
    apart on one timeline, its pieces (``_timeline_by_classes``) summed per group and class."""
    order, s, e = _apart(group, start, end)
    g = group[order].astype(np.int64)
    first_of_group = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    seg_s, seg_e, seg_c = _timeline_by_classes(s, e, cls[order], n_classes)
    owner = g[first_of_group][np.searchsorted(s[first_of_group], seg_s, side="right") - 1]
    np.add.at(out, (owner, seg_c), seg_e - seg_s)
    return out


def priority_timeline(start: np.ndarray, end: np.ndarray, cls: np.ndarray,
                      n_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The time covered by the intervals as disjoint pieces in time order, each piece with the
    class it goes to: the first (lowest index) class covering it. The pieces of class i add up to
    ``exclusive_by_priority(...)[i]``."""
    if start.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8)
    start, end = np.ascontiguousarray(start, np.int64), np.ascontiguousarray(end, np.int64)
    order = np.argsort(start, kind="stable")
    if _SWEEP is not None and n_classes <= 64:
        seg_s, seg_e = np.empty(2 * start.size, np.int64), np.empty(2 * start.size, np.int64)
        seg_c = np.empty(2 * start.size, np.int8)
        m = _SWEEP.timeline(order, start, end, np.ascontiguousarray(cls, np.int8), n_classes, seg_s, seg_e, seg_c)
        return seg_s[:m], seg_e[:m], seg_c[:m]
    return _timeline_by_classes(start[order], end[order], cls[order], n_classes)


def _timeline_by_classes(s: np.ndarray, e: np.ndarray, c: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``priority_timeline`` in numpy (start-sorted input), the C sweep's rule one class at a time:
    between one start and the next, class i covers up to the furthest end of its rows so far and
    gets the part past what the classes before it cover."""
    next_start = np.append(s[1:], np.iinfo(np.int64).max)
    before = s.copy()  # where the classes before this one stop covering, per stretch
    pieces = []
    for i in range(n_classes):
        cover = np.where(c == i, e, np.iinfo(np.int64).min)
        np.maximum.accumulate(cover, out=cover)
        lo, hi = before, np.minimum(cover, next_start)
        has = hi > lo
        pieces.append((lo[has], hi[has], np.full(int(has.sum()), i, np.int64)))
        before = np.maximum(before, hi)
    seg_s, seg_e, seg_c = (np.concatenate(p) for p in zip(*pieces, strict=True))
    order = np.argsort(seg_s, kind="stable")
    return seg_s[order], seg_e[order], seg_c[order]


def _sum_sorted(group: np.ndarray, value: np.ndarray, n_groups: int) -> np.ndarray:
    """Sum of ``value`` per group, ``group`` ascending (exact int64, unlike a float-weighted bincount)."""
    out = np.zeros(n_groups, np.int64)
    if group.size:
        first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        out[group[first]] = np.add.reduceat(value, first)
    return out


def overlap_per_interval(q_start: np.ndarray, q_end: np.ndarray, start: np.ndarray, end: np.ndarray,
                         merged: bool = False) -> np.ndarray:
    """For each query interval, the time covered by the union of the other intervals inside it.

    ``merged``: the other intervals are already disjoint and sorted (``union``'s output).
    """
    s, e = (start, end) if merged else union(start, end)
    if s.size == 0:
        return np.zeros(q_start.size, np.int64)
    cum = np.concatenate([[0], np.cumsum(e - s)])

    def covered_before(t: np.ndarray) -> np.ndarray:
        # Covered time in (-inf, t): full intervals ending before t plus the part of the one containing t.
        i = np.searchsorted(s, t, side="right")
        part = np.where(i > 0, np.clip(t - s[np.maximum(i - 1, 0)], 0, (e - s)[np.maximum(i - 1, 0)]), 0)
        return cum[np.maximum(i - 1, 0)] * (i > 0) + part

    return covered_before(q_end) - covered_before(q_start)


def busy_per_interval(q_start: np.ndarray, q_end: np.ndarray, start: np.ndarray, end: np.ndarray,
                      gap_share: float) -> np.ndarray:
    """For each query interval, the time inside it covered by the other intervals or by the gaps
    between two of them that are shorter than ``gap_share`` of the query (rounded down to a power of
    two ns). A thread running ops back to back is busy in the short gaps too (TF's executor picks the
    next op there, untraced); a gap near the query's length is idle time.

    Queries are grouped by that tolerance: one pass over the merged intervals per power of two."""
    s, e = union(start, end)
    busy = np.zeros(q_start.size, np.int64)
    if s.size == 0 or q_start.size == 0:
        return busy
    tolerance = np.floor(gap_share * (q_end - q_start)).astype(np.int64)
    level = np.where(tolerance > 0, np.floor(np.log2(np.maximum(tolerance, 1))), -1).astype(np.int64)
    gap = s[1:] - e[:-1]
    for lvl in np.unique(level).tolist():
        mine = level == lvl
        if lvl < 0:
            ls, le = s, e
        else:  # a gap shorter than 2**lvl ns joins its neighbours
            keep = np.concatenate([[True], gap >= 1 << lvl])
            first = np.flatnonzero(keep)
            ls, le = s[first], e[np.append(first[1:] - 1, s.size - 1)]
        busy[mine] = overlap_per_interval(q_start[mine], q_end[mine], ls, le, merged=True)
    return busy


def overlap_total(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray) -> int:
    """Time covered by both the union of the ``a`` intervals and the union of the ``b`` intervals."""
    if a_start.size == 0 or b_start.size == 0:
        return 0
    bs, be = union(b_start, b_end)
    return int(overlap_per_interval(bs, be, a_start, a_end).sum())


def range_reduce(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, op: np.ufunc) -> np.ndarray:
    """``op`` (np.minimum, np.maximum) over values[lo:hi] for every (lo, hi), hi > lo, from a sparse
    table: O(n log n) to build, O(1) per query."""
    table = [values]
    width = 1
    while 2 * width <= values.size:
        prev = table[-1]
        table.append(op(prev[:-width], prev[width:]))
        width *= 2
    length = hi - lo
    level = np.floor(np.log2(length)).astype(np.int64)
    result = np.empty(lo.size, values.dtype)
    for k in np.unique(level):
        sel = level == k
        t = table[k]
        result[sel] = op(t[lo[sel]], t[hi[sel] - (1 << k)])
    return result


def crossing(start: np.ndarray, end: np.ndarray, q_start: np.ndarray, q_end: np.ndarray,
             tolerance: int = 0) -> np.ndarray:
    """For each query interval, whether an interval starts inside it (more than ``tolerance`` after
    its start) and ends more than ``tolerance`` after its end: the two overlap with neither holding
    the other. Swap the arguments for the intervals that start before a query and end inside it."""
    out = np.zeros(q_start.size, bool)
    if not start.size or not q_start.size:
        return out
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    lo = np.searchsorted(s, q_start + tolerance, "right")
    hi = np.searchsorted(s, q_end, "left")
    has = hi > lo
    out[has] = range_reduce(e, lo[has], hi[has], np.maximum) > q_end[has] + tolerance
    return out
