"""Interval arithmetic on ns timelines (vectorized; inputs need not be sorted)."""

from __future__ import annotations

import numpy as np


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
    out = np.zeros(n_classes, np.int64)
    order = np.argsort(start, kind="stable")  # sort once; every prefix of classes stays sorted
    start, end, cls = start[order], end[order], cls[order]
    present = np.bincount(cls.astype(np.int64), minlength=n_classes)
    covered = 0
    for i in range(n_classes):
        if present[i] == 0:  # adds nothing to the union
            continue
        upto = cls <= i
        s, e = union(start[upto], end[upto], is_sorted=True)
        now = int((e - s).sum())
        out[i] = now - covered
        covered = now
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


def overlap_total(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray) -> int:
    """Time covered by both the union of the ``a`` intervals and the union of the ``b`` intervals."""
    if a_start.size == 0 or b_start.size == 0:
        return 0
    bs, be = union(b_start, b_end)
    return int(overlap_per_interval(bs, be, a_start, a_end).sum())
