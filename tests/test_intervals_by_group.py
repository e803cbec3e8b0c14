"""Grouped interval arithmetic (one pass over every step / thread) against the definitions, one group
at a time, and the batched CPU partition against the window-by-window one on real traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import TRACES, ids, shared_files

import tracekit
from tracekit.analyze import intervals
from tracekit.analyze.breakdown import _effective_op_class, gpu_split, gpu_split_by_group
from tracekit.analyze.classify import KERNEL_CLASSES, OP_CLASSES, classify_rows
from tracekit.analyze.cpu_partition import PARTITION_CLASSES, PARTS, _all_windows, _window, _windows
from tracekit.analyze.frame import Frame
from tracekit.ingest.links import nearest_ancestor


def _in_numpy(group, start, end, cls, classes, groups):
    out = np.zeros((groups, classes), np.int64)
    return intervals._exclusive_by_sweeping(group, start, end, cls, classes, groups, out) if start.size else out


# The C sweep (interval_sweep.c, used when built) and its numpy form (used without it).
EXCLUSIVE = {"sweep": intervals.exclusive_by_priority_by_group, "numpy": _in_numpy}


@pytest.mark.parametrize("implementation", list(EXCLUSIVE))
def test_grouped_totals_and_priorities_equal_one_call_per_group(implementation: str):
    if implementation == "sweep" and intervals._SWEEP is None:
        pytest.skip("the C extension interval_sweep is not built")
    exclusive = EXCLUSIVE[implementation]
    rng = np.random.default_rng(11)
    for _ in range(300):
        n, groups, classes = int(rng.integers(0, 80)), int(rng.integers(1, 6)), int(rng.integers(1, 5))
        start = rng.integers(-50, 100, n)  # negative times and touching / zero-length intervals included
        end = start + rng.integers(0, 30, n)
        group, cls = rng.integers(0, groups, n), rng.integers(0, classes, n)
        excl = exclusive(group, start, end, cls, classes, groups)
        total = intervals.total_by_group(group, start, end, groups)
        for g in range(groups):
            m = group == g
            # The definition: class i gets |U(classes <= i)| - |U(classes < i)|.
            upto = [intervals.total(start[m & (cls <= i)], end[m & (cls <= i)]) for i in range(classes)]
            assert excl[g].tolist() == [upto[0], *np.diff(upto).tolist()]
            assert (intervals.exclusive_by_priority(start[m], end[m], cls[m], classes) == excl[g]).all()
            assert total[g] == intervals.total(start[m], end[m])


@pytest.mark.skipif(intervals._SWEEP is None, reason="the C extension interval_sweep is not built")
def test_sweep_equals_its_numpy_form_on_a_real_trace_and_checks_its_input():
    # Every host row of a real trace, split by thread and class as the breakdown splits them: deep
    # nesting, thousands of rows per thread, classes interleaved.
    path = Path(__file__).parent / "data" / "h100" / "custom_eager-cuda-fp32-b16-h256-i256-l1-t10.pt.trace.json.gz"
    frame = Frame(tracekit.load(path))
    rows = frame.rows("cpu_op", "runtime_api", "python_function")
    _, thread = np.unique(frame.thread_key[rows], return_inverse=True)
    cls = frame.kind[rows] % 4
    args = (thread, frame.start[rows], frame.end[rows], cls, 4, int(thread.max()) + 1)
    assert rows.size > 1000
    assert (intervals.exclusive_by_priority_by_group(*args) == _in_numpy(*args)).all()
    with pytest.raises(ValueError, match="out of range"):  # a group the output has no row for
        intervals._SWEEP.exclusive(np.arange(3), np.array([0, 5, 0]), np.zeros(3, np.int64), np.ones(3, np.int64),
                                   np.zeros(3, np.int8), 1, np.zeros(2, np.int64))


def test_groups_that_touch_in_time_do_not_merge():
    # Group 0 ends at 10 where group 1 starts: merged on one timeline they would be one interval.
    out = intervals.total_by_group(np.array([0, 1, 1]), np.array([0, 10, 12]), np.array([10, 20, 30]), 3)
    assert out.tolist() == [10, 20, 0]


def test_gpu_split_by_group_equals_gpu_split_of_each_step():
    path = Path(__file__).parent / "data" / "h100" / "custom_eager-cuda-fp32-b16-h256-i256-l1-t10.pt.trace.json.gz"
    frame = Frame(tracekit.load(path))
    classes = classify_rows(frame)
    rows = frame.rows("gpu_kernel", "gpu_memcpy", "gpu_memset")
    numbers, index = np.unique(frame.step[rows], return_inverse=True)
    assert numbers.size >= 3
    got = gpu_split_by_group(index, frame.start[rows], frame.end[rows], classes.kernel[rows], numbers.size)
    for g in range(numbers.size):
        m = index == g
        assert got[g] == gpu_split(frame.start[rows[m]], frame.end[rows[m]], classes.kernel[rows[m]])
    assert sum(got[0][f"{c}_ns"] for c in KERNEL_CLASSES) + got[0]["idle_ns"] == got[0]["span_ns"]


def _partition_inputs(frame: Frame) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    classes = classify_rows(frame)
    op_rows = frame.rows("cpu_op")
    part_of_class = np.array([PARTITION_CLASSES.index(c) if c in PARTITION_CLASSES else len(PARTITION_CLASSES)
                              for c in OP_CLASSES], np.int64)
    parts = part_of_class[_effective_op_class(frame, classes, op_rows)]
    op_parent = nearest_ancestor(frame.parent, op_rows, frame.mask("cpu_op"))
    steps = sorted({int(s) for s in frame.step[frame.mask("step")] if s >= 0})
    return op_rows, parts, op_parent, _windows(frame, op_rows, steps)


def _assert_batched_equals_each_window(frame: Frame) -> list[dict]:
    op_rows, parts, op_parent, windows = _partition_inputs(frame)
    batched = _all_windows(frame, op_rows, parts, op_parent, windows)
    assert batched == [_window(frame, op_rows, parts, op_parent, *w) for w in windows]
    return batched


STEPPED = [p for p in shared_files("**/*.json.gz") + shared_files("**/*.xplane.pb")
           if "trace_viewer" not in p.name and "df_index" not in p.name]


@pytest.mark.skipif(not TRACES.exists(), reason="../shared/traces is absent (real traces are read from there)")
@pytest.mark.parametrize("path", STEPPED, ids=ids(STEPPED))
def test_batched_partition_equals_window_by_window(path: Path):
    frame = Frame(tracekit.load(path))
    if not frame.mask("cpu_op").any():
        pytest.skip("no framework ops in this trace: nothing to partition")
    _assert_batched_equals_each_window(frame)


@pytest.mark.skipif(not TRACES.exists(), reason="../shared/traces is absent (real traces are read from there)")
def test_batched_partition_sweeps_the_windows_whose_ops_do_not_nest():
    # A real CPU trace with every third op moved by up to 40 µs, as clock skew between threads
    # would: ops then overlap without nesting in some steps, which must be swept, not subtracted.
    table = tracekit.load(TRACES / "xprof" / "cpu_tf2.21" / "lstm_keras_eager.xplane.pb")
    start = table.column("start_ns").to_numpy().copy()
    kind = table.column("kind").to_pylist()
    ops = np.flatnonzero(np.array(kind) == "cpu_op")[::3]
    start[ops] += np.random.default_rng(5).integers(-40_000, 40_000, ops.size)
    skewed = table.set_column(table.schema.get_field_index("start_ns"), "start_ns", pa.array(start))
    batched = _assert_batched_equals_each_window(Frame(skewed))
    assert len(batched) == 5
    for row in batched:  # the parts still add up to each step's span
        assert sum(row[p] for p in PARTS) == row["span_ns"]


@pytest.mark.parametrize("implementation", ["sweep", "numpy"])
def test_priority_timeline_pieces_are_disjoint_and_add_up_to_each_class(implementation: str, monkeypatch):
    if implementation == "sweep" and intervals._SWEEP is None:
        pytest.skip("the C extension interval_sweep is not built")
    if implementation == "numpy":
        monkeypatch.setattr(intervals, "_SWEEP", None)
    rng = np.random.default_rng(12)
    for _ in range(300):
        n, classes = int(rng.integers(0, 80)), int(rng.integers(1, 6))
        start = rng.integers(-50, 100, n)
        end = start + rng.integers(0, 30, n)
        cls = rng.integers(0, classes, n)
        seg_s, seg_e, seg_c = intervals.priority_timeline(start, end, cls, classes)
        assert (seg_e > seg_s).all() and (seg_s[1:] >= seg_e[:-1]).all()
        got = [int((seg_e - seg_s)[seg_c == i].sum()) for i in range(classes)]
        assert got == intervals.exclusive_by_priority(start, end, cls, classes).tolist()
        # Each piece lies inside an interval of its class and inside none of a class before it.
        for s, e, c in zip(seg_s, seg_e, seg_c, strict=True):
            assert ((start <= s) & (end >= e) & (cls == c)).any()
            assert not ((start < e) & (end > s) & (cls < c)).any()



def _busy_one_query(q_start, q_end, start, end, gap_share):
    """``busy_per_interval``'s definition for one query, by walking the merged intervals."""
    s, e = intervals.union(start, end)
    tolerance = int(gap_share * (q_end - q_start))
    limit = 1 << int(np.log2(tolerance)) if tolerance > 0 else 0
    busy = 0
    for i in range(s.size):
        busy += max(0, min(e[i], q_end) - max(s[i], q_start))
        if i + 1 < s.size and s[i + 1] - e[i] < limit:  # a short gap: busy too
            busy += max(0, min(s[i + 1], q_end) - max(e[i], q_start))
    return busy


def test_busy_time_counts_the_short_gaps_between_a_workers_ops():
    rng = np.random.default_rng(7)
    start = np.sort(rng.integers(0, 1_000_000, 400))
    end = start + rng.integers(1, 3000, 400)
    q_start = rng.integers(0, 1_000_000, 300)
    q_end = q_start + rng.integers(0, 300_000, 300)
    for share in (0.0, 0.001, 0.01, 0.2):
        got = intervals.busy_per_interval(q_start, q_end, start, end, share)
        want = [_busy_one_query(a, b, start, end, share) for a, b in zip(q_start, q_end, strict=True)]
        assert got.tolist() == want, share
    # Ops 0-10, 11-20, 21-30 in a 30 ns call: the 1 ns gaps are busy at 10% (3 ns), idle at 1%.
    s, e = np.array([0, 11, 21]), np.array([10, 20, 30])
    assert intervals.busy_per_interval(np.array([0]), np.array([30]), s, e, 0.1).tolist() == [30]
    assert intervals.busy_per_interval(np.array([0]), np.array([30]), s, e, 0.01).tolist() == [28]


@pytest.mark.parametrize("touching", [False, True])
def test_intersect_gives_every_overlap_of_two_disjoint_sets_once(touching: bool):
    """Against a nanosecond-by-nanosecond count: the pieces are where both sets cover, each inside the
    A and B intervals it names, in time order, and together exactly the common time; also where
    intervals touch or are empty (edges drawn with repeats), as the gaps between busy time can be."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        sets = []
        for _ in range(2):
            edges = np.sort(rng.choice(40 if touching else 400, size=2 * int(rng.integers(0, 12)), replace=touching))
            sets.append((edges[0::2], edges[1::2]))
        (a_s, a_e), (b_s, b_e) = sets
        s, e, ia, ib = intervals.intersect(a_s, a_e, b_s, b_e)
        covered = np.zeros(400, bool)
        for lo, hi, i, j in zip(s, e, ia, ib, strict=True):
            assert a_s[i] <= lo < hi <= a_e[i] and b_s[j] <= lo < hi <= b_e[j]
            assert not covered[lo:hi].any()
            covered[lo:hi] = True
        in_a, in_b = np.zeros(400, bool), np.zeros(400, bool)
        for lo, hi in zip(a_s, a_e, strict=True):
            in_a[lo:hi] = True
        for lo, hi in zip(b_s, b_e, strict=True):
            in_b[lo:hi] = True
        both = in_a & in_b
        assert (covered == both).all() and (np.diff(s) > 0).all()


def test_minus_leaves_the_time_of_a_that_b_does_not_cover():
    """Against a nanosecond-by-nanosecond count, with touching and empty intervals as in
    test_intersect_gives_every_overlap_of_two_disjoint_sets_once."""
    rng = np.random.default_rng(11)
    for _ in range(200):
        sets = []
        for _ in range(2):
            edges = np.sort(rng.choice(60, size=2 * int(rng.integers(0, 10)), replace=True))
            sets.append((edges[0::2].astype(np.int64), edges[1::2].astype(np.int64)))
        (a_s, a_e), (b_s, b_e) = sets
        s, e = intervals.minus(a_s, a_e, b_s, b_e)
        got, in_a, in_b = np.zeros(60, bool), np.zeros(60, bool), np.zeros(60, bool)
        for lo, hi in zip(s, e, strict=True):
            assert lo < hi and not got[lo:hi].any()
            got[lo:hi] = True
        for lo, hi in zip(a_s, a_e, strict=True):
            in_a[lo:hi] = True
        for lo, hi in zip(b_s, b_e, strict=True):
            in_b[lo:hi] = True
        assert (got == (in_a & ~in_b)).all()
