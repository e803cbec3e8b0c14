"""A Kineto trace ingested window by window (``tracekit ingest --window-mb``) gives the Parquet file of
the whole-file reader, row for row, and fails on bad input as cleanly as it does.

Windows here are a few KiB, so that the shared traces (0.3-30 MB once decompressed) are cut into
tens to thousands of windows and every cross-window link (nesting, launch -> kernel, steps, B/E
pairs, dictionaries first seen in a later window) is taken.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import TRACES, assert_written_encodings, ids, needs_shared, shared_files
from test_kineto_digests import DIGESTS, OWN_KINETO, REPO_DATA, SHARED_KINETO
from test_nsys_digests import column_digests

from tracekit import _native
from tracekit.analyze.summary import info
from tracekit.cli import main
from tracekit.errors import InputError, OutputError
from tracekit.ingest import kineto, kineto_windows, load, parquet

pytestmark = pytest.mark.skipif(not kineto_windows.available(), reason="the C scanner is not built here; "
                                                                       "windows fall back to the whole file")

ALEXNET = TRACES / "hta" / "critical_path" / "alexnet" / "benchmark_result_2869224_1695835535_trace.json.gz"


def windowed(path: Path, out: Path, window_bytes: int, gz: bool | None = None) -> Path:
    gz = path.suffix == ".gz" if gz is None else gz
    rows = kineto_windows.write_parquet(path, out, window_bytes=window_bytes, gz=gz)
    assert rows == parquet.read(out).num_rows
    return out


def assert_same_table(got: Path, trace: Path, notes: frozenset[str] = frozenset()) -> None:
    """The windowed file's table is the whole-file reader's, but for the windowed ingest's ``notes``
    in the trace metadata."""
    want = load(trace)
    table = parquet.read(got)
    if notes:
        meta = dict(table.schema.metadata)
        extra = {k: v for k, v in json.loads(meta[b"tracekit.trace_meta_json"]).items() if k not in notes}
        meta[b"tracekit.trace_meta_json"] = json.dumps(extra, sort_keys=True).encode()
        table = table.replace_schema_metadata(meta)
    assert table.schema.metadata == want.schema.metadata
    assert table.schema == want.schema
    assert column_digests(table) == column_digests(want)
    assert info(table) == info(want)  # the summary reads many-chunk columns (a row group a window) alike


def plain_copy(src: Path, dst: Path, edit=None) -> Path:
    """A real trace decompressed (and, with ``edit``, its JSON changed) into ``dst``."""
    raw = gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()
    if edit is not None:
        doc = json.loads(raw)
        doc = edit(doc) or doc
        raw = json.dumps(doc).encode()
    dst.write_bytes(raw)
    return dst


@needs_shared
@pytest.mark.parametrize("path", SHARED_KINETO, ids=ids(SHARED_KINETO))
def test_windows_give_the_recorded_table_of_every_shared_trace(path: Path, tmp_path: Path) -> None:
    """The recorded table (``load``'s), steps inferred where the trace marks none (HTA's
    step_based_trace: a training loop's optimizer iterations) included."""
    out = windowed(path, tmp_path / "w.parquet", window_bytes=16 << 10)
    want = json.loads(DIGESTS.read_text())[path.relative_to(TRACES).as_posix()]
    assert column_digests(parquet.read(out)) == want


@pytest.mark.parametrize("path", OWN_KINETO, ids=[p.name for p in OWN_KINETO])
def test_windows_give_the_recorded_table_of_the_h100_traces(path: Path, tmp_path: Path) -> None:
    out = windowed(path, tmp_path / "w.parquet", window_bytes=64 << 10)
    want = json.loads(DIGESTS.read_text())[path.relative_to(REPO_DATA).as_posix()]
    assert column_digests(parquet.read(out)) == want
    assert parquet.read(out).schema.metadata == load(path).schema.metadata
    assert_written_encodings(out)


@needs_shared
@pytest.mark.parametrize("window_bytes", [1, 700, 4096, 1 << 30])
@pytest.mark.parametrize("threads", ["1", "2"])
def test_any_window_size_and_thread_count(window_bytes: int, threads: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # 1 byte: one event a window; 1 GiB: the whole array in one window.
    monkeypatch.setenv("TRACEKIT_THREADS", threads)
    assert_same_table(windowed(ALEXNET, tmp_path / "w.parquet", window_bytes), ALEXNET)


@needs_shared
def test_begin_end_pairs_split_across_windows(tmp_path: Path) -> None:
    # Every complete CPU event of a real trace rewritten as a B/E pair: with 2 KiB windows most
    # pairs open in one window and close in another.
    def to_begin_end(doc: dict) -> None:
        events = []
        for e in doc["traceEvents"]:
            if e.get("ph") == "X" and e.get("cat") == "cpu_op":
                begin = {k: v for k, v in e.items() if k != "dur"}
                events += [{**begin, "ph": "B"}, {"ph": "E", "pid": e["pid"], "tid": e["tid"], "ts": e["ts"] + e["dur"]}]
            else:
                events.append(e)
        events.sort(key=lambda e: e.get("ts", 0))
        doc["traceEvents"] = events

    trace = plain_copy(ALEXNET, tmp_path / "be.json", to_begin_end)
    assert b'"ph": "B"' in trace.read_bytes()
    assert_same_table(windowed(trace, tmp_path / "w.parquet", 2048), trace)


@needs_shared
def test_header_after_the_events(tmp_path: Path) -> None:
    # baseTimeNanoseconds and deviceProperties after traceEvents: read from past the array's end.
    def header_last(doc: dict) -> dict:
        events = doc.pop("traceEvents")
        doc["baseTimeNanoseconds"] = 1_700_000_000_000_000_000
        return {"traceEvents": events, **doc}

    trace = plain_copy(ALEXNET, tmp_path / "late.json", header_last)
    out = windowed(trace, tmp_path / "w.parquet", 8192)
    assert_same_table(out, trace)
    # The late base time moved every event (the original trace has none).
    assert parquet.read(out).column("start_ns") != load(ALEXNET).column("start_ns")


@needs_shared
def test_empty_events_array(tmp_path: Path) -> None:
    trace = plain_copy(ALEXNET, tmp_path / "none.json", lambda doc: {**doc, "traceEvents": []})
    out = windowed(trace, tmp_path / "w.parquet", 8192)
    assert parquet.read(out).num_rows == 0
    assert_same_table(out, trace)


@needs_shared
def test_bare_events_array(tmp_path: Path) -> None:
    trace = plain_copy(ALEXNET, tmp_path / "bare.json", lambda doc: doc["traceEvents"])
    assert_same_table(windowed(trace, tmp_path / "w.parquet", 8192), trace)


def test_gzip_read_through_a_temporary_file(tmp_path: Path) -> None:
    out = windowed(OWN_KINETO[0], tmp_path / "w.parquet", 64 << 10)
    assert parquet.read(out).schema.metadata == load(OWN_KINETO[0]).schema.metadata  # sha of the .gz
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.parquet"]


def _bad_input(trace: Path, out: Path, window_bytes: int = 4096, gz: bool = False) -> str:
    with pytest.raises(InputError) as err:
        kineto_windows.write_parquet(trace, out, window_bytes=window_bytes, gz=gz)
    assert sorted(p.name for p in out.parent.iterdir() if p.name != trace.name) == []  # no output, no temp
    message = err.value.one_line()
    assert "\n" not in message and str(trace) in message
    return message


@needs_shared
@pytest.mark.parametrize("fraction", [0.02, 0.5, 0.97])
def test_truncated_trace_fails_cleanly(fraction: float, tmp_path: Path) -> None:
    raw = gzip.decompress(ALEXNET.read_bytes())
    trace = tmp_path / "in" / "cut.json"
    trace.parent.mkdir()
    trace.write_bytes(raw[:int(len(raw) * fraction)])
    message = _bad_input(trace, tmp_path / "in" / "w.parquet")
    with pytest.raises(InputError) as whole:
        load(trace)
    assert message == whole.value.one_line()  # the same error at the same byte as the whole-file reader


@needs_shared
def test_corrupt_byte_in_a_late_window_fails_cleanly(tmp_path: Path) -> None:
    raw = bytearray(gzip.decompress(ALEXNET.read_bytes()))
    at = raw.index(b'"ph"', len(raw) * 3 // 4)
    raw[at] = ord("}")
    trace = tmp_path / "in" / "bad.json"
    trace.parent.mkdir()
    trace.write_bytes(bytes(raw))
    assert "invalid trace JSON" in _bad_input(trace, tmp_path / "in" / "w.parquet")


@pytest.mark.parametrize("content", [b"", gzip.compress(b""), gzip.compress(b'{"traceEvents": [')[:-9],
                                     gzip.compress(b"\0" * 100_000)])
def test_empty_truncated_and_binary_gzip_fail_cleanly(content: bytes, tmp_path: Path) -> None:
    gz = content != b""
    trace = tmp_path / "in" / ("t.json.gz" if gz else "t.json")
    trace.parent.mkdir()
    trace.write_bytes(content)
    _bad_input(trace, tmp_path / "in" / "w.parquet", gz=gz)


@needs_shared
def test_not_a_trace(tmp_path: Path) -> None:
    trace = tmp_path / "in" / "other.json"
    trace.parent.mkdir()
    trace.write_text(json.dumps({"name": "x", "values": list(range(1000))}))
    assert "trace" in _bad_input(trace, tmp_path / "in" / "w.parquet")


@needs_shared
def test_existing_output_needs_force(tmp_path: Path) -> None:
    out = tmp_path / "w.parquet"
    out.write_bytes(b"keep")
    with pytest.raises(OutputError, match="--force"):
        kineto_windows.write_parquet(ALEXNET, out, gz=True)
    assert out.read_bytes() == b"keep"
    kineto_windows.write_parquet(ALEXNET, out, gz=True, force=True)
    assert_same_table(out, ALEXNET)


@needs_shared
def test_cli_window_mb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "w.parquet"
    assert main(["ingest", str(ALEXNET), "-o", str(out), "--window-mb", "1"]) == 0
    assert_same_table(out, ALEXNET)
    nsys = next(iter(shared_files("nsys/**/*.sqlite")))
    assert main(["ingest", str(nsys), "-o", str(tmp_path / "n.parquet"), "--window-mb", "1"]) == 2
    assert "Kineto JSON traces only" in capsys.readouterr().err
    assert main(["ingest", str(ALEXNET), "-o", str(tmp_path / "x.parquet"), "--window-mb", "-1"]) == 2


@needs_shared
def test_cli_uses_windows_when_the_whole_file_would_not_fit(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def whole_file(*args, **kwargs):
        raise AssertionError("read whole")

    monkeypatch.setattr(kineto, "read", whole_file)
    monkeypatch.setattr(kineto_windows, "_available_memory", lambda: 64 << 10)  # 64 KiB free
    out = tmp_path / "w.parquet"
    assert main(["ingest", str(ALEXNET), "-o", str(out)]) == 0
    monkeypatch.undo()
    # It marks no steps and has ranges: with 64 KiB, inference was not tried, and the file says so.
    assert "more than half the 0.1 MB available" in info(parquet.read(out)).steps_not_inferred
    assert_same_table(out, ALEXNET, notes=frozenset({"steps_not_inferred"}))
    # Plenty of memory: the whole-file reader, unless windows are asked for.
    monkeypatch.setattr(kineto_windows, "_available_memory", lambda: 1 << 40)
    assert not kineto_windows.needs_windows(ALEXNET, gz=True)
    monkeypatch.setattr(kineto_windows, "write_parquet", whole_file)
    assert main(["ingest", str(ALEXNET), "-o", str(tmp_path / "v.parquet")]) == 0


@needs_shared
def test_cli_bad_input_exits_1_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "cut.json"
    trace.write_bytes(gzip.decompress(ALEXNET.read_bytes())[:100_000])
    out = tmp_path / "w.parquet"
    assert main(["ingest", str(trace), "-o", str(out), "--window-mb", "1"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(trace) in err and "Traceback" not in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["cut.json"]


@needs_shared
@pytest.mark.skipif(_native.BACKEND != "c", reason="scan_window is the C scanner's")
@pytest.mark.parametrize("window_bytes", [1, 4096, 1 << 20])
def test_scan_windows_cover_the_array_as_scan_does(window_bytes: int) -> None:
    data = gzip.decompress(ALEXNET.read_bytes())
    scan = _native.scanner
    whole = scan.scan(data, False, 1, 1)
    top = scan.scan_top(data)
    at, first, names = top["events"], True, []
    while True:
        r = scan.scan_window(data, at, at + window_bytes, first, False, 2, 1)
        assert r["n"] >= 1 or r["closed"]
        names += [r["name_values"][c] if c >= 0 else None for c in memoryview(r["name"]).cast("i")]
        at, first = r["next"], False
        if r["closed"]:
            break
    assert names == [whole["name_values"][c] if c >= 0 else None for c in memoryview(whole["name"]).cast("i")]
    assert top["header"] + scan.scan_top(data, at, top["bare"])["header"] == whole["header"]


@needs_shared
def test_dataset_ingest_uses_windows_when_a_trace_would_not_fit(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from tracekit.dataset import ingest, partitions

    inputs = [ALEXNET, TRACES / "hta" / "trace_filter" / "sampled_rank-1.json.gz"]
    whole = ingest(inputs, tmp_path / "whole")

    def whole_file(*args, **kwargs):
        raise AssertionError("read whole")

    monkeypatch.setattr(kineto, "read", whole_file)
    monkeypatch.setattr(kineto_windows, "_available_memory", lambda: 64 << 10)
    windowed = ingest(inputs, tmp_path / "windowed")
    monkeypatch.undo()
    assert not windowed.errors and len(windowed.added) == 2
    assert [e.partition for e in windowed.added] == [e.partition for e in whole.added]
    assert [e.rows for e in windowed.added] == [e.rows for e in whole.added]
    for (_, a), (_, b) in zip(partitions(tmp_path / "whole"), partitions(tmp_path / "windowed"), strict=True):
        assert parquet.read(b).equals(parquet.read(a))
    assert not list((tmp_path / "windowed").glob(".ingest-*"))  # the temporary file took its partition's name


@needs_shared
def test_records_without_phases_are_not_a_trace_in_windows_either(tmp_path: Path) -> None:
    """A JSON list of records (TensorBoard's op-stats table) read window by window is refused as the
    whole-file read refuses it, and nothing is left behind."""
    records = TRACES / "xprof" / "cpu_tf2.21" / "lstm_keras_bf16_fn.framework_op_stats.json"
    out = tmp_path / "t.parquet"
    with pytest.raises(InputError, match="'ph'"):
        kineto_windows.write_parquet(records, out, window_bytes=2048, gz=False)
    assert list(tmp_path.iterdir()) == []
