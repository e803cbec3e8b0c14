"""Bad input: one line `tracekit: error: <file>: <problem>`, exit 1, no traceback, nothing written.

Runs the installed console script, as a user would."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import warnings
from pathlib import Path

import pytest
from conftest import TRACES, needs_shared

TRACEKIT = shutil.which("tracekit")
KINETO_SMALL = TRACES / "hta" / "critical_path" / "alexnet" / "benchmark_result_2869224_1695835535_trace.json.gz"
XSPACE_SMALL = TRACES / "xprof" / "cpu_tf2.21" / "lstm_raw_blocklstm_fn.xplane.pb"
NSYS_SMALL = TRACES / "nsys" / "dlprof_pytorch_cnn_rtx2070s_nsys2022.1.sqlite"
LOCAL = Path(__file__).parent / "data"


def make(case: str, d: Path) -> tuple[Path, str]:
    """Create the bad input for a case; returns its path and a fragment the message must hold."""
    if case == "empty":
        p = d / "empty.json"
        p.write_bytes(b"")
        return p, "empty"
    if case == "garbage":
        p = d / "garbage.bin"
        p.write_bytes(b"\x00\x13\x37 definitely not a trace \xff\xfe" * 10)
        return p, "unrecognised format"
    if case == "truncated_json":
        p = d / "truncated.json"
        p.write_bytes(gzip.decompress(KINETO_SMALL.read_bytes())[:5000])
        return p, "truncated"
    if case in ("truncated_onnxruntime", "truncated_paddle"):  # read by their own readers after the format check
        source = LOCAL / ("onnxruntime/mlp.json" if case == "truncated_onnxruntime" else "paddle/mlp_train.paddle_trace.json.gz")
        raw = gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes()
        p = d / f"{case}.json"
        p.write_bytes(raw[: len(raw) // 2])
        return p, "truncated"
    if case == "corrupt_json":
        p = d / "corrupt.json"
        p.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1,, }]}')
        return p, "invalid trace JSON"
    if case == "not_a_trace_json":
        p = d / "config.json"
        p.write_text('{"model": "lstm", "layers": 3}')
        return p, "not a Chrome/Kineto trace"
    if case == "json_records":  # TensorBoard's op-stats table: a JSON list, but of tables, not events
        return TRACES / "xprof" / "cpu_tf2.21" / "lstm_keras_bf16_fn.framework_op_stats.json", "'ph' (phase)"
    if case == "corrupt_gzip":
        p = d / "trace.json.gz"
        p.write_bytes(KINETO_SMALL.read_bytes()[:3000])
        return p, "gzip"
    if case == "corrupt_protobuf":
        p = d / "host.xplane.pb"
        data = XSPACE_SMALL.read_bytes()
        p.write_bytes(data[: len(data) // 2])
        return p, "XSpace"
    if case == "other_sqlite":
        p = d / "app.sqlite"
        con = sqlite3.connect(p)
        con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
        con.commit()
        con.close()
        return p, "not an Nsight Systems export"
    if case == "truncated_sqlite":
        p = d / "report.sqlite"
        p.write_bytes(NSYS_SMALL.read_bytes()[:8192])
        return p, "SQLite"
    if case == "empty_dir":
        p = d / "plugins" / "profile" / "run1"
        p.mkdir(parents=True)
        (p / "notes.txt").write_text("nothing here")
        return p, "directory without a trace"
    if case == "html_report":
        p = d / "report.json"  # the extension lies; the content decides
        p.write_text("<!DOCTYPE html><html><body>tracekit report</body></html>")
        return p, "HTML"
    if case == "markdown_report":
        p = d / "report.md"
        p.write_text("# tracekit report\n\n| kind | time |\n|---|---|\n")
        return p, "Markdown"
    if case == "parquet_not_ours":
        import pyarrow as pa
        import pyarrow.parquet as pq

        p = d / "data.parquet"
        pq.write_table(pa.table({"x": [1, 2]}), p)
        return p, "not written by tracekit"
    if case == "missing":
        return d / "nope.json", "no such file"
    if case == "fifo":  # never ends: reading it would hang
        p = d / "trace.json"
        os.mkfifo(p)
        return p, "is a FIFO"
    if case == "fifo_in_run_dir":
        run = d / "plugins" / "profile" / "run1"
        run.mkdir(parents=True)
        os.mkfifo(run / "host.xplane.pb")
        return d, "is a FIFO"
    if case == "gzip_zero_bomb":  # a real trace's first event, then 256 MB of zeros (256 KB compressed)
        p = d / "bomb.json.gz"
        head = gzip.decompress(KINETO_SMALL.read_bytes())[:2000]
        with gzip.open(p, "wb", compresslevel=1) as f:
            f.write(head)
            for _ in range(16):
                f.write(bytes(16 << 20))
        return p, "NUL byte"
    if case == "gzip_space_bomb":  # valid JSON padded with 100 MB of spaces: only the ratio shows it
        p = d / "spaces.json.gz"
        with gzip.open(p, "wb", compresslevel=9) as f:
            f.write(gzip.decompress(KINETO_SMALL.read_bytes()))
            for _ in range(100):
                f.write(b" " * (1 << 20))
        return p, "gzip bomb"
    if case == "time_overflow":  # a real trace whose baseTimeNanoseconds is beyond int64
        import json

        doc = json.loads(gzip.decompress(KINETO_SMALL.read_bytes()))
        doc["baseTimeNanoseconds"] = 10**30
        p = d / "base.json"
        p.write_text(json.dumps(doc))
        return p, "baseTimeNanoseconds"
    if case == "execution_trace":  # torch.profiler's ExecutionTraceObserver output: JSON, but op nodes, not events
        torch = pytest.importorskip("torch")
        from torch.profiler import ExecutionTraceObserver

        p = d / "et.json"
        observer = ExecutionTraceObserver().register_callback(str(p))
        observer.start()
        torch.randn(4, 4).relu()
        observer.stop()
        observer.unregister_callback()
        return p, "execution trace"
    if case == "memory_timeline":  # torch.profiler's export_memory_timeline: a JSON array of arrays
        torch = pytest.importorskip("torch")
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
            torch.nn.Linear(8, 8)(torch.randn(4, 8)).sum().backward()
        p = d / "memory.json"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # deprecated in 2.13, still written
            prof.export_memory_timeline(str(p))
        return p, "export_memory_timeline"
    raise AssertionError(case)


CASES = ["empty", "garbage", "truncated_json", "truncated_onnxruntime", "truncated_paddle", "corrupt_json", "not_a_trace_json", "json_records", "corrupt_gzip", "corrupt_protobuf",
         "other_sqlite", "truncated_sqlite", "empty_dir", "html_report", "markdown_report", "parquet_not_ours", "missing",
         "fifo", "fifo_in_run_dir", "gzip_zero_bomb", "gzip_space_bomb", "time_overflow", "execution_trace",
         "memory_timeline"]


# Every subcommand meets the four basic cases; info and ingest (the readers) meet them all.
REPORT_COMMANDS = ["report", "launch", "ranges", "compare"]
BASIC_CASES = ["garbage", "truncated_json", "empty", "html_report"]
GOOD_TRACE = TRACES / "hta" / "trace_compare" / "base" / "base.json.gz"


def _argv(command: str, bad: Path, out_dir: Path) -> list[str]:
    assert TRACEKIT is not None
    if command == "ingest":
        return [TRACEKIT, command, str(bad), "-o", str(out_dir / "t.parquet")]
    if command == "info":
        return [TRACEKIT, command, str(bad)]
    if command == "compare":
        return [TRACEKIT, command, str(GOOD_TRACE), str(bad), "-o", str(out_dir / "c.html")]
    return [TRACEKIT, command, str(bad), "-o", str(out_dir / "r.html")]


@needs_shared
@pytest.mark.skipif(TRACEKIT is None, reason="the tracekit console script is not installed")
@pytest.mark.parametrize(("command", "case"), [(c, k) for c in ("info", "ingest") for k in CASES]
                         + [(c, k) for c in REPORT_COMMANDS for k in BASIC_CASES])
def test_bad_input_gives_one_line_error(case, command, tmp_path):
    bad, fragment = make(case, tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = subprocess.run(_argv(command, bad, out_dir), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"tracekit: error: {bad}"), lines[0]  # the file, or the bad file inside the directory
    assert fragment.lower() in lines[0].lower(), lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert list(out_dir.iterdir()) == []


@needs_shared
@pytest.mark.skipif(TRACEKIT is None, reason="the tracekit console script is not installed")
def test_ingest_with_one_bad_file_names_it_and_keeps_the_good_one(tmp_path):
    bad, _ = make("truncated_json", tmp_path)
    out = tmp_path / "out"
    proc = subprocess.run([TRACEKIT, "ingest", str(KINETO_SMALL), str(bad), "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[0].startswith(f"tracekit: error: {bad}: ") and "Traceback" not in proc.stderr
    parts = sorted(p.name for p in out.rglob("*") if p.is_file())
    assert parts == ["_tracekit_dataset.jsonl", "_tracekit_dataset.lock", "part-0.parquet"]  # the good trace, complete; nothing half-written


@pytest.mark.skipif(shutil.which("nsys") is not None, reason="nsys is installed: reports are exported, not refused")
@needs_shared
def test_nsys_report_without_nsys_says_how_to_export():
    proc = subprocess.run([TRACEKIT, "info", str(TRACES / "nsys" / "abacus_pytorch_cnn_titanrtx.qdrep")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "nsys export --type sqlite" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_usage_error_exits_2():
    from tracekit.cli import main

    assert main(["info"]) == 2
    assert main(["no-such-command"]) == 2


@pytest.mark.skipif(TRACEKIT is None, reason="the tracekit console script is not installed")
@pytest.mark.parametrize("command", ["critical-path", "whatif"])
def test_a_capture_with_nothing_in_it_is_an_input_error_on_the_file(command, tmp_path):
    """tests/data/cpu/empty_cycle_ended (real: a schedule's capture exported after its last cycle) holds no
    op: with the window left to the command it is the trace's problem, one line on the file, exit 1,
    nothing written; a range the user names that is not there stays a usage error (exit 2)."""
    empty = Path(__file__).parent / "data" / "cpu" / "empty_cycle_ended.pt.trace.json.gz"
    out = tmp_path / "r.json"
    proc = subprocess.run([TRACEKIT, command, str(empty), "-o", str(out)], capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"tracekit: error: {empty}: "), proc.stderr
    assert "whole trace" in lines[0] and "tracekit report says what the trace holds" in lines[0]
    assert not out.exists() and proc.stdout == ""
    named = subprocess.run([TRACEKIT, command, str(empty), "--range", "train_step"], capture_output=True, text=True,
                           timeout=120)
    assert named.returncode == 2 and "no range named 'train_step'" in named.stderr
    # The same capture with no event at all (as a profiler that recorded nothing writes it): it raised
    # numpy's "zero-size array to reduction operation minimum" with a traceback.
    doc = json.loads(gzip.decompress(empty.read_bytes()))
    doc["traceEvents"] = []
    nothing = tmp_path / "nothing.json"
    nothing.write_text(json.dumps(doc))
    proc = subprocess.run([TRACEKIT, command, str(nothing)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.strip() == (f"tracekit: error: {nothing}: the trace holds no events "
                                                            "(tracekit report says what the trace holds)"), proc.stderr
