"""Where per-trace work runs: this process, or a Dask cluster.

Tasks are (function, argument tuple) pairs whose results are small (an index entry, a row of
metrics): the event tables stay on the worker that read them, so memory is bounded by one trace
per worker, not by the dataset. ``--engine dask`` uses the scheduler at ``--scheduler ADDRESS``,
or starts a ``LocalCluster`` of one single-threaded worker process per core (processes, because
parsing and analysis hold the GIL). Results come back in task order, so both engines give the
same output for the same input.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tracekit.errors import UsageError

T = TypeVar("T")
ENGINES = ("local", "dask")


def map_tasks(fn: Callable[..., T], tasks: Sequence[tuple[Any, ...]], engine: str = "local",
              scheduler: str | None = None, workers: int | None = None) -> list[T]:
    """``[fn(*t) for t in tasks]``, locally or on Dask, in task order."""
    if engine == "local":
        if scheduler:
            raise UsageError("--scheduler needs --engine dask")
        return [fn(*t) for t in tasks]
    if engine != "dask":
        raise UsageError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    if not tasks:
        return []
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise UsageError("--engine dask needs dask.distributed: pip install 'tracekit[dask]'") from None
    if scheduler:
        with Client(scheduler) as client:
            return _run(client, fn, tasks)
    n = workers or min(len(tasks), os.cpu_count() or 1)
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        return _run(client, fn, tasks)


def _run(client: Any, fn: Callable[..., T], tasks: Sequence[tuple[Any, ...]]) -> list[T]:
    # pure=False: re-running a task must re-run it (ingest writes files), not reuse a cached result.
    futures = [client.submit(fn, *t, pure=False) for t in tasks]
    return client.gather(futures)
