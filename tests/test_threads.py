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
