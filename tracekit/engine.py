"""Where per-trace work runs: this process, or a Dask cluster.

Tasks are (function, argument tuple) pairs whose results are small (an index entry, a row of
metrics): the event tables stay on the worker that read them, so memory is bounded by one trace
per worker, not by the dataset. ``--engine dask`` uses the scheduler at ``--scheduler ADDRESS``,
or starts a ``LocalCluster`` of one single-threaded worker process per core (processes, because
parsing and analysis hold the GIL). Results come back in task order, so both engines give the
same output for the same input.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from tracekit.errors import UsageError

T = TypeVar("T")
ENGINES = ("local", "dask")


class Mapper:
    """Runs batches of tasks on one engine; a Dask cluster is started once for all batches."""

    def __init__(self, client: Any = None) -> None:
        self.client = client

    def map(self, fn: Callable[..., T], tasks: Sequence[tuple[Any, ...]]) -> list[T]:
        """``[fn(*t) for t in tasks]``, in task order."""
        if self.client is None or not tasks:
            return [fn(*t) for t in tasks]
        # pure=False: re-running a task must re-run it (ingest writes files), not reuse a cached result.
        # One map call sends the scheduler one graph update, not one message per task.
        return self.client.gather(self.client.map(fn, *zip(*tasks, strict=True), pure=False))


@contextlib.contextmanager
def session(engine: str = "local", scheduler: str | None = None, workers: int | None = None) -> Iterator[Mapper]:
    """A ``Mapper`` for ``engine``: this process, the Dask scheduler at ``scheduler``, or a new
    LocalCluster of ``workers`` (default: one per core) single-threaded worker processes."""
    if engine == "local":
        if scheduler:
            raise UsageError("--scheduler needs --engine dask")
        yield Mapper()
        return
    if engine != "dask":
        raise UsageError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    try:
        from dask.distributed import Client
    except ImportError:
        raise UsageError("--engine dask needs dask.distributed: pip install 'tracekit[dask]'") from None
    if scheduler:
        with Client(scheduler) as client:
            yield Mapper(client)
        return
    with local_cluster(workers) as cluster, Client(cluster) as client:
        yield Mapper(client)


# Imported by each worker as it starts, not by its first task: a worker's first ingest otherwise
# pays ~0.1 s of imports (pyarrow.parquet, the native scanner), serially with its share of the files.
WORKER_PRELOAD = ("tracekit.dataset", "tracekit.ingest.kineto", "tracekit.ingest.parquet")


@contextlib.contextmanager
def local_cluster(workers: int | None = None) -> Iterator[Any]:
    """A Dask ``LocalCluster`` of ``workers`` (default: one per core) single-threaded worker processes,
    set up for tracekit's tasks.

    Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which also pins glibc's mmap
    threshold at 128 KiB: every column array of a trace is then mapped fresh and page-faulted on
    first write. A Kineto ingest task took 82 ms against 67 ms outside Dask (68,692 events; 5x the
    page faults, 3x the system time), and on two workers the faults contend. tracekit returns its
    freed pages itself where its peaks need it (``kineto.return_freed_memory``), so its own workers
    start without that setting. Their statistical profiler is off too: it samples every 10 ms for a
    dashboard this cluster does not serve, and took the GIL from the task on a busy core."""
    import dask
    from dask.distributed import LocalCluster

    n = workers or os.cpu_count() or 1
    settings = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
                "distributed.worker.profile.enabled": False}
    with dask.config.set(settings), \
            LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                         preload=list(WORKER_PRELOAD)) as cluster:
        yield cluster


def map_tasks(fn: Callable[..., T], tasks: Sequence[tuple[Any, ...]], engine: str = "local",
              scheduler: str | None = None, workers: int | None = None) -> list[T]:
    """One batch: ``[fn(*t) for t in tasks]``, locally or on Dask, in task order."""
    if engine == "dask" and not tasks:
        return []
    with session(engine, scheduler, workers) as mapper:
        return mapper.map(fn, tasks)
