"""The breakdown on a second thread: same report as serial, errors reach the caller."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import tracekit
from tracekit import api, threads
from tracekit.errors import TracekitError

H100 = Path(__file__).parent / "data" / "h100"


def test_start_runs_on_another_thread_and_hands_back_result_and_errors(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TRACEKIT_THREADS", "2")
    assert threads.start(threading.get_ident).result() != threading.get_ident()

    def fails() -> None:
        raise TracekitError("internal error: GPU breakdown does not add up to the span")

    with pytest.raises(TracekitError, match="does not add up"):
        threads.start(fails).result()


def test_one_thread_means_no_second_thread(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TRACEKIT_THREADS", "1")
    assert threads.usable() == 1
    assert threads.start(threading.get_ident).result() == threading.get_ident()


@pytest.mark.parametrize("name", ["custom_eager-cuda-fp32-b16-h256-i256-l1-t10.pt.trace.json.gz",
                                  "nn_lstm-cuda-fp32-b64-h1024-i1024-l1-t100.pt.trace.json.gz"])
def test_report_and_launch_are_the_same_on_one_thread_and_two(name: str, monkeypatch: pytest.MonkeyPatch):
    table = tracekit.load(H100 / name)
    out = {}
    for n in ("1", "2"):
        monkeypatch.setenv("TRACEKIT_THREADS", n)
        out[n] = (api.render(api.report(table), "json"), api.render(api.launch(table), "json"),
                  api.render(api.report(table, exclude_last_step=True), "json"))
    assert out["1"] == out["2"]


@pytest.mark.parametrize("n", ["1", "2"])
def test_load_beside_reads_the_trace_while_the_work_runs(n: str, monkeypatch: pytest.MonkeyPatch):
    """The CLI reads the trace on a second thread while it imports the analysis: the same table and
    name as load(); the work runs on the calling thread; a bad file is the reader's error."""
    from tracekit.errors import InputError
    from tracekit.ingest import load, load_beside

    monkeypatch.setenv("TRACEKIT_THREADS", n)
    path = H100 / "custom_eager-cuda-fp32-b16-h256-i256-l1-t10.pt.trace.json.gz"
    ran_on: list[int] = []
    loaded = load_beside(str(path), lambda: ran_on.append(threading.get_ident()))
    assert ran_on == [threading.get_ident()]
    assert loaded.name == str(path) and loaded.table.equals(load(path))
    assert api.render(api.report(loaded), "json") == api.render(api.report(path), "json")
    with pytest.raises(InputError, match="kineto_table_digests.json.*not a Chrome/Kineto trace"):
        load_beside(str(Path(__file__).parent / "data" / "kineto_table_digests.json"), lambda: None)


def test_a_dask_worker_task_uses_the_worker_threads_not_every_core(monkeypatch: pytest.MonkeyPatch):
    """A cluster spreads files over one single-threaded worker per core: a reader that also used
    every core in each worker would put N x N threads on N cores (the Dask benchmark's 2 workers
    went from 1.50x to 1.64x one worker when this was fixed)."""
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.delenv("TRACEKIT_THREADS", raising=False)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        assert client.submit(threads.usable, pure=False).result() == 1
        assert threads.usable() == 4  # the client is not a worker
