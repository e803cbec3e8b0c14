"""Range GPU projection in O(n log n) (pre-order intervals of the row tree) gives what walking every
launch call's enclosing ranges gives, on every real trace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import ids, needs_shared, shared_files

from tracekit.analyze.frame import GPU_BUSY_KINDS, frame_of
from tracekit.analyze.ranges import RANGE_KINDS, ranges, subtree_intervals
from tracekit.ingest import load

TRACE_FILES = shared_files("hta/**/*.json.gz") + shared_files("xprof/**/*.xplane.pb") + shared_files("nsys/*.sqlite")
H100 = sorted((Path(__file__).parent / "data" / "h100").glob("*.pt.trace.json.gz"))


def _walked(table) -> dict[int, tuple[int, int, int, int]]:
    """The direct definition: for each GPU activity, every range above its launch call."""
    frame = frame_of(table)
    is_range = frame.mask(*RANGE_KINDS)
    out: dict[int, list[int]] = {}
    for g in frame.rows(*GPU_BUSY_KINDS).tolist():
        node = int(frame.parent[frame.launch_row[g]]) if frame.launch_row[g] >= 0 else -1
        while node >= 0:
            if is_range[node]:
                a = out.setdefault(node, [0, 0, 1 << 62, -(1 << 62)])
                a[0] += 1
                a[1] += int(frame.dur[g])
                a[2] = min(a[2], int(frame.start[g]))
                a[3] = max(a[3], int(frame.end[g]))
            node = int(frame.parent[node])
    return {k: (v[0], v[1], v[2], v[3] - v[2]) for k, v in out.items()}


def _check(path: Path) -> None:
    table = load(path)
    want = _walked(table)
    inst = ranges(table).instances
    for r in inst.itertuples():
        ops, busy, first, span = want.get(r.row, (0, 0, None, None))
        assert (r.gpu_ops, r.gpu_busy_ns) == (ops, busy)
        if ops:
            assert (r.proj_start_ns, r.proj_dur_ns) == (float(first), float(span))
        else:
            assert np.isnan(r.proj_start_ns)


@needs_shared
@pytest.mark.parametrize("path", TRACE_FILES, ids=ids(TRACE_FILES))
def test_projection_equals_the_walk_on_every_shared_trace(path: Path) -> None:
    _check(path)


@pytest.mark.parametrize("path", H100, ids=lambda p: p.name.split("-")[0])
def test_projection_equals_the_walk_on_h100_traces(path: Path) -> None:
    _check(path)


def test_subtree_intervals_say_who_encloses_whom() -> None:
    frame = frame_of(load(H100[0]))
    tin, size = subtree_intervals(frame.parent, frame.depth)
    rng = np.random.default_rng(0)
    for b in rng.choice(len(frame), 200, replace=False).tolist():
        ancestors = set()
        node = int(frame.parent[b])
        while node >= 0:
            ancestors.add(node)
            node = int(frame.parent[node])
        for a in rng.choice(len(frame), 50, replace=False).tolist():
            inside = tin[a] <= tin[b] < tin[a] + size[a]
            assert inside == (a in ancestors or a == b)
