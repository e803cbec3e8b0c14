"""How many threads tracekit may use, and running one analysis beside another.

Readers split a big file over ``usable()`` threads; ``report`` and ``launch`` compute the breakdown
on a second thread while the calling one does the launch analysis (numpy releases the GIL in its
sorts, searches and array loops, so two analyses of a million rows run 1.6x faster on 2 cores).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


def usable() -> int:
    """The cores this process may run on, or ``TRACEKIT_THREADS`` when set (1: everything serial).
    Inside a Dask worker's task, at most that worker's threads: the cluster already spreads the
    work over its worker processes, one per core, and a reader on every core in each of them would
    put N x N threads on N cores."""
    override = os.environ.get("TRACEKIT_THREADS", "")
    if override.isdigit() and int(override) > 0:
        return int(override)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    worker = _dask_worker_threads()
    return min(cores, worker) if worker else cores


def _dask_worker_threads() -> int | None:
    """The thread count of the Dask worker whose task is running here; None elsewhere."""
    distributed = sys.modules.get("distributed")  # only where Dask is in use: no import otherwise
    if distributed is None:
        return None
    try:
        worker = distributed.get_worker()
    except ValueError:  # not in a worker's task
        return None
    nthreads = getattr(getattr(worker, "state", worker), "nthreads", None)
    return nthreads if isinstance(nthreads, int) and nthreads > 0 else None


def start(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """``fn(*args, **kwargs)`` on a thread of its own, its result (or exception) in the Future;
    run at once on this thread where only one core may be used."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to whoever calls result(), as on this thread
            future.set_exception(exc)

    if usable() < 2:
        run()
    else:
        threading.Thread(target=run, name=f"tracekit-{getattr(fn, '__name__', 'work')}", daemon=True).start()
    return future
