"""Datasets survive concurrent ingests and kills, tested with real `tracekit ingest` processes: two at
once into one dataset, or one killed with SIGKILL at any moment, leave a dataset that a re-run
completes with every trace once and every partition readable."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TRACES, needs_shared

from tracekit import dataset
from tracekit.ingest import parquet

NAMES = ["hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz",
         "hta/trace_compare/base/base.json.gz", "hta/trace_compare/test/test.json.gz",
         "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
         "xprof/cpu_tf2.21/lstm_raw_blocklstm_fn.xplane.pb", "nsys/dlprof_pytorch_cnn_rtx2070s_nsys2022.1.sqlite"]


@pytest.fixture
def inputs(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    for i, name in enumerate(NAMES):
        src = TRACES / name
        shutil.copy(src, d / f"t{i}_{src.name}")
    return d


def _ingest(inputs: Path, out: Path) -> subprocess.Popen:
    files = [str(p) for p in sorted(inputs.iterdir()) if p.is_file()]
    return subprocess.Popen([sys.executable, "-m", "tracekit", "ingest", *files, "-o", str(out), "--run", "r"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _check_complete(out: Path) -> None:
    entries = dataset.read_index(out)
    shas = [e.sha256 for e in entries]
    assert len(shas) == len(set(shas)) == len(NAMES), [e.source_file for e in entries]
    lines = [line for line in (out / dataset.INDEX_NAME).read_text().splitlines() if line.strip()]
    assert len(lines) == len(NAMES)  # nothing duplicated on disk either
    for e in entries:
        assert parquet.read(out / e.partition).num_rows == e.rows


@needs_shared
def test_two_concurrent_ingests_add_each_trace_once(inputs, tmp_path):
    out = tmp_path / "ds"
    first, second = _ingest(inputs, out), _ingest(inputs, out)
    for proc in (first, second):
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    _check_complete(out)


@needs_shared
# A whole ingest of these takes about 1 s here: the kills land in start-up, reading, writing and appending.
@pytest.mark.parametrize("delay_s", [0.05, 0.2, 0.4, 0.55, 0.7, 0.85, 1.0])
def test_an_ingest_killed_at_any_moment_is_completed_by_a_rerun(inputs, tmp_path, delay_s):
    out = tmp_path / "ds"
    proc = _ingest(inputs, out)
    time.sleep(delay_s)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    rerun = _ingest(inputs, out)
    _, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err
    _check_complete(out)


@needs_shared
def test_a_torn_last_index_line_is_ignored_then_cut_off(inputs, tmp_path):
    """What a kill in the middle of an append leaves: a last line without its newline."""
    out = tmp_path / "ds"
    first = _ingest(inputs, out)
    assert first.wait(timeout=600) == 0
    index = out / dataset.INDEX_NAME
    whole = index.read_text()
    index.write_text(whole + whole.splitlines()[0][:40])  # half a line, no newline
    assert len(dataset.read_index(out)) == len(NAMES)
    new = inputs / "new.json.gz"
    shutil.copy(TRACES / "hta" / "cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", new)
    result = dataset.ingest(sorted(p for p in inputs.iterdir() if p.is_file()), out, run="r")
    assert len(result.added) == 1
    assert index.read_text().count("\n") == len(NAMES) + 1 and index.read_text().endswith("\n")
