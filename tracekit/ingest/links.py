"""Links between the rows of an event table: nesting, steps, launch -> GPU activity, op -> launch.

Every ingester fills numpy columns and calls ``link`` once. Linking is vectorized (numpy sorts and
searches, plus one C pass for nesting): no Python loop runs per event, so a million-event trace
links in well under a second. ``nearest_ancestor`` walks the nesting tree and is shared with the
analyses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit import _native, schema

LAUNCH_KINDS = ("runtime_api", "driver_api")
# Kinds that take part in per-thread nesting (flows, metadata and counters do not).
NESTED_KINDS = (
    "cpu_op", "user_range", "gpu_user_range", "python_function", "step", "gpu_kernel", "gpu_memcpy",
    "gpu_memset", "gpu_sync", "gpu_graph", "runtime_api", "driver_api", "gpu_library_api", "overhead",
    "memory", "marker", "trace_span", "other",
)


def kind_mask(kind: np.ndarray, *names: str) -> np.ndarray:
    """Boolean mask of rows whose kind code is one of ``names``."""
    return byte_mask(kind, [schema.KIND_CODES[n] for n in names])


def byte_mask(values: np.ndarray, codes: list[int]) -> np.ndarray:
    """``np.isin`` for a one-byte column (kind codes, Chrome phases). A few codes: one vectorized
    comparison each (0.15-0.2 ms per code on a million rows); more: a 256-entry lookup table (2 ms,
    against 3.5 ms for fancy indexing and 4x that for np.isin)."""
    if values.dtype.itemsize != 1:
        return np.isin(values, codes)
    raw = values.view(np.uint8)
    wanted = sorted({int(c) & 0xFF for c in codes})
    if len(wanted) <= 8:
        mask = np.zeros(raw.size, bool)
        for c in wanted:
            mask |= raw == c
        return mask.reshape(values.shape)
    lut = np.zeros(256, bool)
    lut[wanted] = True
    return np.take(lut, raw)


def member_mask(values: np.ndarray, among: object) -> np.ndarray:
    """``np.isin(values, among)`` for integer columns, without its per-call cost on big arrays
    (numpy picks a lookup path that takes 17 ms on a million rows for three codes). Up to 8
    wanted values: one comparison each (about 1 ms per million rows for three); more: a table over
    the values' range read with ``np.take`` (2.6 ms for 40). Other dtypes and wide ranges: np.isin."""
    wanted = np.asarray(among)
    if wanted.size == 0:
        return np.zeros(values.shape, bool)
    if values.dtype.kind not in "iu" or wanted.dtype.kind not in "iub" or values.size == 0:
        return np.isin(values, wanted)
    info = np.iinfo(values.dtype)
    wanted = wanted.astype(np.int64) if wanted.dtype.kind == "b" else wanted.reshape(-1)
    wanted = wanted[(wanted >= info.min) & (wanted <= info.max)]  # others cannot occur
    if values.dtype.itemsize == 1:
        return byte_mask(values, wanted.tolist())
    if wanted.size <= 8:
        mask = np.zeros(values.shape, bool)
        for v in wanted.tolist():
            mask |= values == v
        return mask
    lo, hi = int(values.min()), int(values.max())
    if hi - lo > 4 * values.size + 4096:  # a table bigger than the column: sort-based np.isin
        return np.isin(values, wanted)
    table = np.zeros(hi - lo + 1, bool)
    table[(wanted[(wanted >= lo) & (wanted <= hi)] - lo).astype(np.intp)] = True
    return np.take(table, values - values.dtype.type(lo) if lo else values)


def nesting_order(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Positions by group, start ascending, end descending, then position: what
    ``np.lexsort((-end, start, group))`` gives. One sort of a combined (group, start) key, then only
    the ties (a parent and its first child starting together) sorted further: on the 681k host rows
    of the 1M-event benchmark trace 0.04 s against lexsort's 0.08 s. The sort is numpy's stable one
    (timsort), which takes the runs a trace's rows already come in (each thread's events in time
    order, threads interleaved): 6 ms against 39 ms for the default quicksort on that key, and no
    slower on keys in random order."""
    from tracekit.ingest.columns import factorize  # columns imports this module

    if start.size == 0:
        return np.zeros(0, np.int64)
    distinct, code = factorize(group)  # dense codes in the groups' order (group keys are wide: pid << 32 | tid)
    s0 = int(start.min())
    span = int(start.max()) - s0 + 1
    if distinct.size * span >= 1 << 62:  # the combined key would overflow: sort by each key in turn
        return np.lexsort((np.negative(end), start, group))
    key = code * span + (start.astype(np.int64) - s0)
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    same = ordered[1:] == ordered[:-1]
    if same.any():
        tied = np.zeros(order.size, bool)
        tied[1:] |= same
        tied[:-1] |= same
        at = np.flatnonzero(tied)
        sub = order[at]  # ascending key over these positions: re-sorting them keeps the key order
        order[at] = sub[np.lexsort((sub, np.negative(end[sub]), key[sub]))]
    return order


def nest(group: np.ndarray, start: np.ndarray, end: np.ndarray, rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Parent row and depth by time containment within each group, for the given rows.

    Returns full-length arrays (parent -1 and depth 0 for rows not given).
    """
    if rows.size == 0:
        return np.full(n, -1, np.int64), np.zeros(n, np.int16)
    # Sort by group, start ascending, end descending (outer intervals first), equal intervals in row
    # order. The C pass writes full-length results directly, so no per-subset copies of its outputs
    # are needed (this is the ingest's memory peak).
    order = rows[nesting_order(group[rows], start[rows], end[rows])]
    parent, depth = _native.scanner.nest(
        np.ascontiguousarray(group, np.int64), np.ascontiguousarray(start, np.int64),
        np.ascontiguousarray(end, np.int64), np.ascontiguousarray(order, np.int64),
    )
    del order
    return np.frombuffer(parent, np.int64), np.frombuffer(depth, np.int16)


# Row-wise lookups below run in blocks of this many rows: their temporaries stay a few MB
# instead of several full-length int64 arrays (the ingest's memory peak on million-row traces).
BLOCK_ROWS = 1 << 16


def assign_steps(
    n: int, start: np.ndarray, end: np.ndarray, host: np.ndarray, step_rows: np.ndarray, step_numbers: np.ndarray,
    process: np.ndarray | None = None,
) -> np.ndarray:
    """Step number of every host row by time containment in a step range; -1 outside any step.

    With ``process`` (one key per row), a step contains only rows of its own process: another
    process's work (a DataLoader worker, another rank) is not part of this loop's step.
    Step ranges are assumed not to overlap each other (one training loop); when they do, the
    latest-starting range that contains the row wins.
    """
    step = np.full(n, -1, np.int64)
    if step_rows.size == 0:
        return step
    from tracekit.ingest.columns import distinct  # columns imports this module

    if process is not None and distinct(process[host]).size > 1:
        for key in distinct(process[step_rows]):
            mine = step_rows[process[step_rows] == key]
            in_process = host & (process == key)
            sub = _assign_steps(n, start, end, in_process, mine, step_numbers[process[step_rows] == key])
            step[in_process] = sub[in_process]
        return step
    return _assign_steps(n, start, end, host, step_rows, step_numbers)


def _assign_steps(n: int, start: np.ndarray, end: np.ndarray, host: np.ndarray, step_rows: np.ndarray,
                  step_numbers: np.ndarray) -> np.ndarray:
    step = np.full(n, -1, np.int64)
    order = np.argsort(start[step_rows], kind="stable")
    s_start = start[step_rows][order]
    s_end = np.maximum(end[step_rows][order], s_start + 1)
    s_num = step_numbers[order]
    for lo in range(0, n, BLOCK_ROWS):
        rows = lo + np.flatnonzero(host[lo:lo + BLOCK_ROWS])
        idx = np.searchsorted(s_start, start[rows], side="right") - 1
        ok = idx >= 0
        idx[~ok] = 0
        ok &= start[rows] < s_end[idx]
        step[rows[ok]] = s_num[idx[ok]]
    return step


def first_match(keys_table: np.ndarray, rows_table: np.ndarray, keys_query: np.ndarray) -> np.ndarray:
    """For each query key, the first table row (in row order) with the same key; -1 when none.

    ``rows_table`` must be ascending (as ``np.flatnonzero`` returns it).
    """
    out = np.full(keys_query.shape[0], -1, np.int64)
    if keys_table.size == 0 or keys_query.size == 0:
        return out
    order = np.argsort(keys_table, kind="stable")  # stable: equal keys stay in row order
    k_sorted = keys_table[order]
    r_sorted = rows_table[order]
    del order
    for lo in range(0, keys_query.shape[0], BLOCK_ROWS):
        q = keys_query[lo:lo + BLOCK_ROWS]
        pos = np.minimum(np.searchsorted(k_sorted, q, side="left"), k_sorted.size - 1)
        hit = k_sorted[pos] == q
        out[lo:lo + BLOCK_ROWS][hit] = r_sorted[pos[hit]]
    return out


def nearest_ancestor(parent: np.ndarray, rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each row, the nearest proper ancestor whose ``wanted`` flag is set; -1 when none."""
    out = np.full(rows.size, -1, np.int64)
    if not wanted.any():  # nothing to find (no fused RNN op in the trace): skip the climb
        return out
    cur = parent[rows].copy()
    pending = np.arange(rows.size)
    while pending.size:
        alive = cur[pending] >= 0
        pending = pending[alive]
        if not pending.size:
            break
        hit = wanted[cur[pending]]
        out[pending[hit]] = cur[pending[hit]]
        pending = pending[~hit]
        cur[pending] = parent[cur[pending]]
    return out


@dataclass
class Links:
    parent: np.ndarray
    depth: np.ndarray
    step: np.ndarray
    launch_row: np.ndarray
    op_row: np.ndarray


def link(
    kind: np.ndarray,
    start: np.ndarray,
    dur: np.ndarray,
    group: np.ndarray,
    correlation: np.ndarray,
    correlation_scope: np.ndarray,
    external_id: np.ndarray | None,
    step_numbers: np.ndarray,
    op_kinds: tuple[str, ...] = ("cpu_op",),
    process: np.ndarray | None = None,
) -> Links:
    """Compute parent/depth, step, launch_row and op_row for a whole trace.

    Args:
        kind: kind codes (``KIND_CODES``).
        start, dur: ns; dur < 0 means unknown (treated as an instant for nesting).
        group: nesting group of each row (one per host thread or GPU stream); rows of kinds
            outside ``NESTED_KINDS`` are ignored.
        correlation: correlation id, negative when absent; ``correlation_scope`` disambiguates ids
            that are only unique per process (nsys): a GPU row links to the launch row with the same
            (scope, correlation). A one-element scope means "one scope for the whole trace".
        external_id: Kineto External id per row or None; used to find the op of a launch call.
        step_numbers: step number of each ``step`` row (ignored elsewhere).
        process: process (or host) key of each row, so that steps hold only their own process's
            rows; None: one process.
    """
    owned = {"group": group, "correlation": correlation, "external_id": external_id, "step_numbers": step_numbers,
             "process": process}
    return link_owned(kind, start, dur, owned, correlation_scope, op_kinds)


def link_owned(kind: np.ndarray, start: np.ndarray, dur: np.ndarray, owned: dict[str, np.ndarray | None],
               correlation_scope: np.ndarray, op_kinds: tuple[str, ...] = ("cpu_op",)) -> Links:
    """``link``, taking the per-row inputs it does not return (``owned``: group, correlation,
    external_id, step_numbers, process) out of the dict as it finishes with each, so that a caller
    that holds no other reference to them (the windowed Kineto reader) has them freed on the way:
    ~40 bytes a row less at the peak."""
    n = kind.shape[0]
    step_rows = np.flatnonzero(kind_mask(kind, "step"))
    step_numbers = owned.pop("step_numbers")
    assert step_numbers is not None
    step_numbers = step_numbers[step_rows]
    end = np.maximum(dur, 0)  # in place from here on: a million-row trace has many 8 MB temporaries
    np.add(end, start, out=end)
    nested_rows = np.flatnonzero(kind_mask(kind, *NESTED_KINDS))
    group = owned.pop("group")
    assert group is not None
    parent, depth = nest(group, start, end, nested_rows, n)
    del group, nested_rows

    gpu = kind_mask(kind, *schema.GPU_ACTIVITY_KINDS)
    correlation = owned.pop("correlation")
    assert correlation is not None
    launch_rows = np.flatnonzero(kind_mask(kind, *LAUNCH_KINDS) & (correlation >= 0))
    gpu_rows = np.flatnonzero(gpu & (correlation >= 0))
    # One int64 key from (scope, correlation): scopes are small (process ids), correlations < 2^40.
    if correlation_scope.size == 1:
        launch_keys, gpu_keys = correlation[launch_rows], correlation[gpu_rows]
    else:
        launch_keys = (correlation_scope[launch_rows].astype(np.int64) << 40) ^ correlation[launch_rows]
        gpu_keys = (correlation_scope[gpu_rows].astype(np.int64) << 40) ^ correlation[gpu_rows]
    del correlation
    launch_row = np.full(n, -1, np.int64)
    launch_row[gpu_rows] = first_match(launch_keys, launch_rows, gpu_keys)
    del launch_keys, gpu_keys

    op_row = np.full(n, -1, np.int64)
    is_op = kind_mask(kind, *op_kinds)
    external_id = owned.pop("external_id")
    if external_id is not None and launch_rows.size:
        op_rows = np.flatnonzero(is_op & (external_id > 0))
        ext_q = external_id[launch_rows]
        found = first_match(external_id[op_rows], op_rows, ext_q)
        found[ext_q <= 0] = -1
        op_row[launch_rows] = found
        del op_rows, ext_q, found
    del external_id
    missing = launch_rows[op_row[launch_rows] < 0]
    if missing.size:
        op_row[missing] = nearest_ancestor(parent, missing, is_op)
    del missing, is_op
    linked_gpu = gpu_rows[launch_row[gpu_rows] >= 0]
    op_row[linked_gpu] = op_row[launch_row[linked_gpu]]
    del launch_rows, gpu_rows

    host = ~gpu & kind_mask(kind, *NESTED_KINDS) & ~kind_mask(kind, "gpu_user_range")
    del gpu
    step = assign_steps(n, start, end, host, step_rows, step_numbers, owned.pop("process"))
    step[linked_gpu] = step[launch_row[linked_gpu]]
    return Links(parent, depth, step, launch_row, op_row)
