"""Calls that wait for other threads: a thread's op during which the other threads of its process are
busy with ops (or, for TF, with its executor and tf.data), such as a TF function call on the Python
thread while the inter-op pool runs the function's ops. That time is neither the call's own work
nor framework dispatch on its thread. A TF function call is also waiting while its thread is blocked
on the function it dispatched (``TF_FUNCTION_DISPATCH``), also after the executor is done and
before the thread wakes: untraced on every thread, 2.9 ms of a 3.6 ms call of Keras's step function
in a model.fit capture on a 2-core machine. ``top_ops`` sets such ops apart, the CPU partition gives their
time its own part, and the unclassified-work check does not take them for work.
"""

from __future__ import annotations

import numpy as np

from tracekit.analyze import intervals
from tracekit.analyze.frame import Frame
from tracekit.analyze.steps import driving_threads
from tracekit.ingest.columns import distinct
from tracekit.ingest.links import member_mask

WAITING_SHARE = 0.5
WORKER_GAP_SHARE = 0.01
# TF's runtime work on its worker threads that is not a framework op: the executor processing the
# function's nodes (its per-node overhead around each op), and tf.data producing the batch the
# function asked for. A worker in them is busy on the call's behalf.
TF_WORKER_EVENTS = ("ExecutorState::Process", "Iterator::")
# TF's eager call of a function: KernelAndDeviceFunc::Run hands the function to the executor
# (its child FunctionRun) and then blocks until the executor's done callback notifies it, so its
# time after FunctionRun returns is the thread waiting, whether or not a worker is seen busy.
TF_FUNCTION_DISPATCH = ("KernelAndDeviceFunc::Run", "FunctionRun")


def blocked_on_dispatch(frame: Frame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thread key, start, end) of each stretch a thread is blocked on a TF function it dispatched:
    from the end of a ``FunctionRun`` to the end of the ``KernelAndDeviceFunc::Run`` holding it
    (none for traces of other frameworks)."""
    codes = [frame.names.index(n) if n in frame.names else -1 for n in TF_FUNCTION_DISPATCH]
    runs = np.flatnonzero(frame.name_code == codes[1]) if min(codes) >= 0 else np.zeros(0, np.int64)
    runs = runs[frame.parent[runs] >= 0]
    runs = runs[frame.name_code[frame.parent[runs]] == codes[0]]
    return frame.thread_key[runs], frame.end[runs], frame.end[frame.parent[runs]]


def worker_event_rows(frame: Frame) -> np.ndarray:
    """Rows of ``TF_WORKER_EVENTS`` (empty for traces of other frameworks)."""
    codes = [i for i, n in enumerate(frame.names) if n.startswith(TF_WORKER_EVENTS)]
    return np.flatnonzero(member_mask(frame.name_code, codes)) if codes else np.zeros(0, np.int64)


def covered_by_other_threads(frame: Frame, rows: np.ndarray, among: np.ndarray | None = None) -> np.ndarray:
    """For each op row on a driving thread (one that holds a step marker; without steps, the thread of
    the longest op), how long the other threads of its process are busy with ops during it, or its
    thread is blocked on a TF function it dispatched (gaps under ``WORKER_GAP_SHARE`` of the call
    bridged). Worker threads run side by side, so one is not
    said to wait for another. ``among``: the op rows that make the threads busy and choose the
    driving threads (default ``rows``)."""
    covered = np.zeros(rows.size, np.int64)
    among = rows if among is None else among
    threads = frame.thread_key[rows]
    if distinct(frame.thread_key[among]).size < 2:
        return covered
    workers = np.concatenate([among, worker_event_rows(frame)])
    blocked_thread, blocked_start, blocked_end = blocked_on_dispatch(frame)
    for key in driving_threads(frame, among):
        mine = threads == key
        if not mine.any():
            continue
        pid = frame.pid[rows[mine][0]]
        # Any op: between compute ops a worker still runs TF's executor, not the waiting thread.
        others = workers[(frame.thread_key[workers] != key) & (frame.pid[workers] == pid)]
        blocked = blocked_thread == key
        if others.size or blocked.any():
            covered[mine] = intervals.busy_per_interval(
                frame.start[rows[mine]], frame.end[rows[mine]],
                np.concatenate([frame.start[others], blocked_start[blocked]]),
                np.concatenate([frame.end[others], blocked_end[blocked]]), WORKER_GAP_SHARE)
    return covered


def waiting_calls(frame: Frame, op_rows: np.ndarray, non_compute: np.ndarray) -> np.ndarray:
    """For each of ``op_rows``: whether it is a call of no compute class (``non_compute``, per row) during
    which the other threads are busy (or it is blocked on its TF function) for at least ``WAITING_SHARE``
    of its duration (as ``top_ops`` sets
    such ops apart per name)."""
    out = np.zeros(op_rows.size, bool)
    candidates = np.flatnonzero(non_compute)
    if candidates.size:
        covered = covered_by_other_threads(frame, op_rows[candidates], among=op_rows)
        out[candidates] = covered >= WAITING_SHARE * frame.dur[op_rows[candidates]]
    return out
