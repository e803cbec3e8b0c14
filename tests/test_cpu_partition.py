"""The innermost-op sweep (used where ops overlap without nesting) against the direct definition:
a time-ordered walk with a heap of the running ops, deepest then latest-starting on top."""

from __future__ import annotations

import heapq

import numpy as np
from conftest import TRACES, needs_shared

from tracekit.analyze.cpu_partition import _innermost_sweep


def walked(start: np.ndarray, end: np.ndarray, depth: np.ndarray) -> np.ndarray:
    out = np.zeros(start.size, np.int64)
    events = sorted([(int(a), 1, i) for i, a in enumerate(start)] + [(int(b), 0, i) for i, b in enumerate(end)])
    running: list[tuple[int, int, int]] = []
    ended = np.zeros(start.size, bool)
    prev = None
    for t, is_start, i in events:
        while running and ended[running[0][2]]:
            heapq.heappop(running)
        if prev is not None and running and t > prev:
            out[running[0][2]] += t - prev
        prev = t
        if is_start:
            heapq.heappush(running, (-int(depth[i]), -int(start[i]), i))
        else:
            ended[i] = True
    return out


def test_sweep_equals_the_walk_on_overlapping_ties_and_empty_intervals():
    rng = np.random.default_rng(7)
    for _ in range(400):
        n = int(rng.integers(0, 50))
        start = rng.integers(0, 60, n)
        end = start + rng.integers(0, 25, n)  # zero-length intervals included
        depth = rng.integers(0, 4, n)
        assert (_innermost_sweep(start, end, depth) == walked(start, end, depth)).all()


def test_sweep_splits_each_instant_once():
    rng = np.random.default_rng(3)
    start = rng.integers(0, 10**9, 20_000)
    end = start + rng.integers(1, 10**6, 20_000)
    out = _innermost_sweep(start, end, rng.integers(0, 6, 20_000))
    order = np.argsort(start)
    covered = 0
    reach = -1
    for s, e in zip(start[order].tolist(), end[order].tolist(), strict=True):  # the union's length
        if e > reach:
            covered += e - max(s, reach)
            reach = e
    assert out.sum() == covered and (out >= 0).all()


@needs_shared
def test_a_tf_function_call_waiting_for_the_inter_op_pool_is_waiting_not_framework():
    """In TF graph mode the Python thread sits in the function call while the inter-op pool runs the
    ops: the split called that time framework (98% of the step on the shared Keras LSTM capture)."""
    import tracekit
    from tracekit.analyze.breakdown import breakdown

    whole = breakdown(tracekit.load(TRACES / "xprof" / "cpu_tf2.21" / "lstm_keras_fn.xplane.pb")).cpu_partition.iloc[0]
    assert whole.waiting_ns > 0.9 * whole.span_ns and whole.framework_ns < 0.05 * whole.span_ns, whole
    # An eager capture runs its ops on the Python thread itself: nothing waits there.
    eager = breakdown(tracekit.load(TRACES / "xprof" / "cpu_tf2.21" / "lstm_keras_eager.xplane.pb")).cpu_partition.iloc[0]
    assert eager.waiting_ns < 0.05 * eager.span_ns, eager
