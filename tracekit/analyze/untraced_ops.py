"""TF graph ops the profiler did not trace, whose time the breakdown can only count as dispatch.

TF's executor records an op only if the capture's host tracer level reaches the op's: level 2 for
an expensive op, 3 for an inexpensive one (tsl's ``GetTFTraceMeLevel``), and 2 is the default of
``tf.profiler`` and of TensorBoard's capture. The inexpensive ops, which the executor runs inline,
are the small elementwise ops and a loop's control ops (``Merge``, ``Switch``, ``NextIteration``,
...). The executor learns which they are as the program runs: every op starts expensive and turns
inexpensive once the moving average of its cost falls below a few thousand CPU cycles
(``kOpIsExpensiveThresholdCycles``, 5,000 or 8,000 by TF version), so early steps record more ops
than later ones, and two level-2 captures of one program recorded 108 and 68 ops a step; ops placed
on a GPU are always inexpensive. At level 2 their time lies inside the executor's
``ExecutorState::Process`` with no op traced, beside the executor's own scheduling, and the trace
cannot split the two. A Keras LSTM's graph step (h128, batch 16, 20 timesteps, one thread, a 2-core
Intel Xeon) at level 2 records 68 ops a step and 58% of the step outside them, and reads
CPU/framework-bound; at level 3 the same step records 1,007 ops, BiasAdd, Sigmoid, AddV2 and Tanh
among them, with 49-51% of it outside them (level 3's own tracing adds to that): on the line
between compute- and framework-bound, not clearly framework-bound.

``untraced_executor_time`` measures that time inside given windows; the verdict says when it
decides between framework- and compute-bound, whatif flags what it removes as uncertain. Where the
capture recorded level 3 (its ``profile_options``, or events only level 3 records), every op is
traced and that time is the executor's scheduling: dispatch.
"""

from __future__ import annotations

import numpy as np

from tracekit import schema
from tracekit.analyze import intervals
from tracekit.analyze.breakdown import innermost_compute_ops, step_windows
from tracekit.analyze.classify import classify_rows, input_pipeline_mask
from tracekit.analyze.frame import Frame, per_frame
from tracekit.analyze.verdicts import TF_UNTRACED_LEVEL_WORDS
from tracekit.ingest.columns import trace_extra
from tracekit.ingest.links import member_mask

EXECUTOR_EVENT = "ExecutorState::Process"
# Events that only a level-3 capture records (the executor's scheduling, research/tf_profiler.md 2.3).
VERBOSE_EVENTS = ("ExecutorPropagateOutputs", "ExecutorState::ScheduleReady")
VERBOSE_LEVEL = 3
NOTE_SHARE = 0.05  # of the step: the report says it, whatif flags no-dispatch uncertain
LEVEL_WORDS = TF_UNTRACED_LEVEL_WORDS  # the level such a capture ran at, as the verdict says it
# The thread pool's markers: inside them, with nothing else open, the executor is still in untraced work.
# Any other event covers its time (an async op's start, ExecutorState::ProcessAsync::Start, is the op's work).
POOL_MARKERS = "ThreadpoolListener::"


def host_tracer_level(frame: Frame) -> int | None:
    """The capture's host tracer level from its ``profile_options``; None when the trace does not say."""
    options = trace_extra(frame.table).get("profile_options")
    level = options.get("host_tracer_level") if isinstance(options, dict) else None
    return int(level) if isinstance(level, int) else None


@per_frame
def ops_may_be_untraced(frame: Frame) -> bool:
    """Whether TF's executor ran in this trace at a level that leaves inexpensive ops untraced: below
    level 3 by its options, or not recorded and without the events only level 3 records."""
    if schema.source_of(frame.table) != "tf" or EXECUTOR_EVENT not in frame.names:
        return False
    level = host_tracer_level(frame)
    if level is not None and level >= VERBOSE_LEVEL:
        return False
    return not any(name in frame.names for name in VERBOSE_EVENTS)


@per_frame
def untraced_executor_intervals(frame: Frame) -> tuple[np.ndarray, np.ndarray]:
    """Where an executor thread is inside ``ExecutorState::Process`` with nothing else traced open on
    it (no op, no async op's start, no XLA program run; the thread pool's markers do not count):
    disjoint sorted intervals, over all threads but tf.data's (empty where ``ops_may_be_untraced`` is
    False)."""
    empty = np.zeros(0, np.int64)
    if not ops_may_be_untraced(frame):
        return empty, empty
    code = frame.names.index(EXECUTOR_EVENT)
    # tf.data's map functions run on its own threads' executors: the input pipeline's time, not the step's.
    process = np.flatnonzero((frame.name_code == code) & ~input_pipeline_mask(frame))
    if not process.size:
        return empty, empty
    threads = frame.thread_key
    executors = np.unique(threads[process])
    on_executors = np.flatnonzero(member_mask(threads, executors.tolist()) & (frame.dur > 0))
    wrappers = [c for c, name in enumerate(frame.names) if name == EXECUTOR_EVENT or name.startswith(POOL_MARKERS)]
    traced = on_executors[~member_mask(frame.name_code[on_executors], wrappers)]
    starts, ends = [], []
    for key in executors.tolist():
        mine = process[threads[process] == key]
        ps, pe = intervals.union(frame.start[mine], frame.end[mine])
        others = traced[threads[traced] == key]
        s, e = intervals.minus(ps, pe, *intervals.union(frame.start[others], frame.end[others]))
        starts.append(s)
        ends.append(e)
    return intervals.union(np.concatenate(starts), np.concatenate(ends))


@per_frame
def untraced_outside_compute(frame: Frame) -> tuple[np.ndarray, np.ndarray]:
    """``untraced_executor_intervals`` where no compute op the breakdown counts (``innermost_compute_ops``)
    runs on any thread: what the breakdown counted as dispatch and may be inexpensive ops."""
    us, ue = untraced_executor_intervals(frame)
    if us.size == 0:
        return us, ue
    compute = innermost_compute_ops(frame, classify_rows(frame), frame.rows("cpu_op"))
    return intervals.minus(us, ue, *intervals.union(frame.start[compute], frame.end[compute]))


def untraced_executor_time(frame: Frame, window_start: np.ndarray, window_end: np.ndarray) -> int:
    """Time of ``untraced_outside_compute`` inside the windows (they may overlap)."""
    if window_start.size == 0 or not ops_may_be_untraced(frame):
        return 0
    free_s, free_e = untraced_outside_compute(frame)
    return intervals.overlap_total(free_s, free_e, window_start, window_end)


def untraced_in_steps(frame: Frame, used: list[int] | None) -> int:
    """``untraced_executor_time`` in the steps ``used`` (None: the span of the breakdown's whole-trace
    row: the steps' extent, or the ops' without steps)."""
    ops = frame.rows("cpu_op")
    if not ops_may_be_untraced(frame) or ops.size == 0:
        return 0
    if used is not None:
        lo, hi = step_windows(frame, used)
        keep = lo < hi
        return untraced_executor_time(frame, lo[keep], hi[keep])
    extent = frame.rows("step") if frame.rows("step").size else ops
    return untraced_executor_time(frame, frame.start[extent].min(keepdims=True), frame.end[extent].max(keepdims=True))


def untraced_in_window(frame: Frame, start: int, end: int) -> int:
    """``untraced_executor_time`` from ``start`` to ``end`` (whatif's and critical-path's window)."""
    return untraced_executor_time(frame, np.array([start]), np.array([end]))
