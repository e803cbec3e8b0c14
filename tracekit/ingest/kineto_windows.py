"""A Kineto JSON trace written to tracekit Parquet window by window, for traces too big to hold.

    tracekit ingest huge.pt.trace.json -o huge.parquet                 # windows when it would not fit
    tracekit ingest huge.pt.trace.json -o huge.parquet --window-mb 256 # always, 256 MB at a time

Reading a whole trace holds its event table (about the file's size) and the scanner's columns at
once: ~1.5x the file at the peak. Here the file is read twice, a window of its events at a time:

1. Each window is scanned (on every core; the mapped pages are dropped behind the scanner) and only
   what linking needs of its rows is kept (``kineto.Facts``: ~41 bytes an event). The file's sha256
   is hashed alongside. Then every row is linked (nesting, launches, steps: these need all rows).
2. Each window is scanned again and its part of the table written as Parquet row groups, while the
   next window is scanned on another thread.
3. A trace that marks no steps gets those the whole-file reader infers (``_infer_steps``), from the
   written file's columns that inference reads; the file is written again only where it finds some.
   That needs every row at once, ~180 bytes an event above the windows' peak (1M events: 403 MiB
   with 16 MiB windows against 220 MiB for the same trace with its ProfilerStep markers; the
   whole-file reader's 407 MiB), so where it would take more than half the memory available it is
   not tried, and the file's metadata and the ingest say so (``steps_not_inferred``).

Memory is a window's scan and table (about 4x the window) plus ~76 bytes an event for linking:
0.4-0.6x the file instead of 1.5x (benchmarks/ingest_windows.py). The Parquet file equals the whole-file ingest's table row for row
(``tests/test_kineto_windows.py``). A gzip trace is first decompressed into a temporary file beside
the output. Without the C scanner (no compiler at install time) the whole file is read as usual.
"""

from __future__ import annotations

import json
import mmap
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracekit import _native, schema
from tracekit.atomic import atomic_path
from tracekit.errors import InputError, OutputError, TracekitError
from tracekit.ingest import kineto, parquet, step_inference
from tracekit.ingest.files import gunzip_to_file

DEFAULT_WINDOW_BYTES = 16 << 20
# The whole-file reader's peak, in file sizes, with a margin (benchmarks/ingest_kineto.py measures 1.3-1.5x).
WHOLE_FILE_PEAK = 2.0
# A gzip trace's size once decompressed, in compressed sizes, when deciding (Kineto JSON: 5-30x).
GZIP_EXPANSION = 10


# The formats read here (``tracekit.ingest.detect``'s names), and whether each is gzip-compressed.
KINETO_FORMATS = {"kineto-json": False, "kineto-json-gz": True}


def available() -> bool:
    """Whether windows can be read here (the C scanner is built)."""
    return hasattr(_native.scanner, "scan_window")


def needs_windows(path: Path, gz: bool) -> bool:
    """Whether reading the whole trace could take more than half the memory available now."""
    size = os.path.getsize(path) * (GZIP_EXPANSION if gz else 1)
    free = _available_memory()
    return free is not None and size * WHOLE_FILE_PEAK > free / 2


def write_parquet(path: Path, out: Path, window_bytes: int = DEFAULT_WINDOW_BYTES, gz: bool = False,
                  force: bool = False) -> int:
    """Ingest a Kineto trace into the tracekit Parquet file ``out``, ``window_bytes`` of its events
    at a time; returns the number of events written. Nothing is left at ``out`` on failure."""
    if out.exists() and not force:
        raise OutputError(out, "already exists (use --force to overwrite)")
    if not available():
        from tracekit.ingest import parquet

        table = step_inference.infer_steps(kineto.read(path, gz=gz))  # as ``tracekit.ingest.load`` reads it
        parquet.write(table, out, force=force)
        return table.num_rows
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_path(out) as tmp:
            _write_either(path, tmp, window_bytes, gz)
            # Once the trace is unmapped: its resident pages would be under inference's peak.
            return _infer_steps(tmp)
    except (TracekitError, MemoryError):
        raise
    except OSError as e:
        # Reading a mapped file fails as SIGBUS, not OSError; an OSError here is the output's.
        raise OutputError(out, f"cannot be written: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001 - anything else is still this file's content, in one line
        raise InputError(path, f"cannot be read as Kineto JSON: {type(e).__name__}: {str(e)[:200]}") from None


def _write_either(path: Path, out: Path, window_bytes: int, gz: bool) -> int:
    if not gz:
        try:
            f = open(path, "rb")
        except OSError as e:
            raise InputError(path, f"cannot be read: {e.strerror or e}") from None
        with f:
            if f.seek(0, 2) == 0:
                raise InputError(path, "the file is empty")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                return _write(path, mm, out, window_bytes, "kineto-json", sha=None)
    with tempfile.TemporaryFile(dir=out.parent, prefix=f".{out.name}.", suffix=".json") as plain:
        sha = gunzip_to_file(path, plain)
        if plain.tell() == 0:
            raise InputError(path, "the file is empty")
        with mmap.mmap(plain.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return _write(path, mm, out, window_bytes, "kineto-json-gz", sha=sha)


def _write(path: Path, mm: mmap.mmap, out: Path, window_bytes: int, fmt: str, sha: str | None) -> int:
    threads = _native.scan_threads()
    scan = _native.scanner
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        hashed = pool.submit(kineto._sha256_of_mapping, mm, stop) if sha is None else None
        try:
            top = _scan(path, scan.scan_top, mm)
            header_spans = list(top["header"])
            dicts, facts = kineto.Dictionaries(), kineto.Facts()
            windows: list[tuple[int, bool, int]] = []  # (first byte, first window?, events)
            at, first = top["events"], True
            phased = False
            while at >= 0:
                r = _scan(path, scan.scan_window, mm, at, at + window_bytes, first, True, threads)
                phased = phased or kineto.has_phases(r)
                dicts.adopt(r)
                facts.add(r, kineto.WindowRows.of(r, dicts), dicts)
                windows.append((at, first, r["n"]))
                at, first, closed = r["next"], False, r["closed"]
                del r
                if closed:
                    header_spans += _scan(path, scan.scan_top, mm, at, top["bare"])["header"]
                    break
            header = dict(_decode(mm, span) for span in header_spans)
            if top["events"] < 0:
                raise InputError(path, kineto._not_a_trace_reason([k for k, _ in header.items()]))
            if sum(n for _, _, n in windows) and not phased:
                raise InputError(path, kineto.NO_PHASES)
            linked = facts.link(path, kineto._base_time(path, header), dicts)
            del facts
            kineto.return_freed_memory()
            digest = hashed.result() if hashed is not None else sha
            assert digest is not None  # a gzip trace's digest comes from gunzip_to_file
            meta = kineto._meta(path, header, fmt, digest)
            beyond = _inference_beyond_memory(linked)
            if beyond:
                meta.extra["steps_not_inferred"] = beyond
        finally:
            stop.set()
    return _write_windows(path, mm, out, windows, window_bytes, threads, dicts, linked, meta)


def _write_windows(path: Path, mm: mmap.mmap, out: Path, windows: list[tuple[int, bool, int]], window_bytes: int,
                   threads: int, dicts: kineto.Dictionaries, linked: kineto.Linked, meta: Any) -> int:
    """Second pass: each window scanned again (the next one while this one is written) and written."""
    scan = _native.scanner
    arrow_schema = schema.ARROW_SCHEMA.with_metadata(meta.to_metadata())
    written = 0
    with ThreadPoolExecutor(max_workers=1) as pool:
        with pq.ParquetWriter(out, arrow_schema, **parquet.write_options(arrow_schema)) as writer:
            pending = pool.submit(_scan, path, scan.scan_window, mm, windows[0][0], windows[0][0] + window_bytes,
                                  windows[0][1], True, threads)
            row = 0
            for i, (_, _, n) in enumerate(windows):
                r = pending.result()
                if i + 1 < len(windows):
                    at, first, _ = windows[i + 1]
                    pending = pool.submit(_scan, path, scan.scan_window, mm, at, at + window_bytes, first, True, threads)
                if r["n"] != n:
                    raise InputError(path, "changed while it was read (a window's event count differs between passes)")
                dicts.adopt(r)
                table = kineto.window_table(r, kineto.WindowRows.of(r, dicts), linked, row, dicts, meta)
                del r
                writer.write_table(table)
                written += table.num_rows
                row += n
                del table
            if not windows:  # pragma: no cover - a window is always read
                writer.write_table(pa.Table.from_pylist([], schema=arrow_schema))
    return written


# What step inference reads of every row: what it decides on, and what an appended Iteration row
# copies from the loop's thread (``step_inference._with_iteration_rows``).
INFERENCE_COLUMNS = sorted(step_inference.COLUMNS_NEEDED | {"parent", "depth", "category", "trace_id", "source",
                                                            "process_name", "thread_name"})
# The columns inference may change; the others are rewritten as they were.
INFERRED_COLUMNS = ("kind", "step", "parent", "depth")
# Inference's peak over the process's, per event: its columns (~75 bytes), their decoding and its
# own arrays (1M events without step markers: ~180 MiB above the windows' peak), with a margin.
INFERENCE_BYTES_PER_ROW = 300


def _inference_beyond_memory(linked: kineto.Linked) -> str:
    """Why steps are not inferred for this trace although it may need them (it marks none and has
    ranges), when inference would take more than half the memory available; "" otherwise."""
    kind = linked.kind if linked.keep is None else linked.kind[linked.keep]
    if (kind == schema.KIND_CODES["step"]).any() or \
            int((kind == schema.KIND_CODES["user_range"]).sum()) < step_inference.MIN_CALLS:
        return ""
    need, free = kind.size * INFERENCE_BYTES_PER_ROW, _available_memory()
    if free is None or need <= free / 2:
        return ""
    return (f"the trace marks no steps, and inferring them from its ranges for {kind.size:,} events needs "
            f"~{_mb(need)}, more than half the {_mb(free)} available")


def _mb(size: int) -> str:
    mb = size / 2**20
    return f"{mb:,.0f} MB" if mb >= 10 else f"{mb:.1f} MB"


def _infer_steps(written: Path) -> int:
    """Steps for a trace that marks none, as the whole-file reader infers them (``step_inference``):
    inference needs every row, so it runs on the written file's few columns it reads, and where it
    finds steps the file is written again, row group by row group, with its changed columns and the
    appended step rows. Returns the file's row count. Most traces skip it on their kind column alone
    (step rows present, or too few ranges to be a loop)."""
    pf = pq.ParquetFile(written)
    kind = pf.read(columns=["kind"]).column("kind")
    counts = dict(zip(*(a.to_pylist() for a in pc.value_counts(kind).flatten()), strict=True)) if len(kind) else {}
    n = len(kind)
    del kind
    meta = json.loads((pf.schema_arrow.metadata or {}).get(schema.META_TRACE_META_JSON.encode(), b"{}"))
    if counts.get("step", 0) or counts.get("user_range", 0) < step_inference.MIN_CALLS or "steps_not_inferred" in meta:
        return n
    # The windows' freed memory back to the system first (Arrow's pool and the C heap keep it), so
    # that inference's peak is not on top of theirs; then the columns row group by row group: one
    # read of the whole file held its decoding buffers at once (+60%).
    pa.default_memory_pool().release_unused()
    kineto.return_freed_memory()
    few = pa.concat_tables([pf.read_row_group(i, columns=INFERENCE_COLUMNS) for i in range(pf.num_row_groups)])
    few = few.replace_schema_metadata(pf.schema_arrow.metadata)
    inferred = step_inference.infer_steps(few)
    if inferred is few:  # no range or optimizer loop qualified
        return n
    del few
    arrow_schema = schema.ARROW_SCHEMA.with_metadata(inferred.schema.metadata)
    changed = {c: inferred.column(c).combine_chunks().cast(arrow_schema.field(c).type) for c in INFERRED_COLUMNS}
    appended = _appended_rows(inferred, n, arrow_schema)
    rows = inferred.num_rows
    del inferred
    # Written beside the first file and renamed onto it (``out`` gets it when the whole ingest ends).
    with atomic_path(written) as again, pq.ParquetWriter(again, arrow_schema, **parquet.write_options(arrow_schema)) as writer:
        row = 0
        for i in range(pf.num_row_groups):
            group = pf.read_row_group(i)
            for c, values in changed.items():
                group = group.set_column(group.schema.get_field_index(c), arrow_schema.field(c),
                                         values.slice(row, group.num_rows))
            writer.write_table(group.replace_schema_metadata(arrow_schema.metadata))
            row += group.num_rows
        if appended.num_rows:  # an optimizer's iterations (a range's calls become steps in place)
            writer.write_table(appended)
        pf.close()
    return rows


def _appended_rows(inferred: pa.Table, n: int, arrow_schema: pa.Schema) -> pa.Table:
    """The step rows inference appended after the trace's ``n`` rows, in the file's full schema:
    the columns inference read as it made them, the others null (as the whole-file reader's)."""
    k = inferred.num_rows - n
    arrays = []
    for field in arrow_schema:
        if field.name in inferred.column_names:
            arrays.append(inferred.column(field.name).slice(n).combine_chunks().cast(field.type))
        elif isinstance(field.type, pa.ExtensionType):
            arrays.append(pa.ExtensionArray.from_storage(field.type, pa.nulls(k, field.type.storage_type)))
        else:
            arrays.append(pa.nulls(k, field.type))
    return pa.Table.from_arrays(arrays, schema=arrow_schema)


def _scan(path: Path, fn: Any, *args: Any) -> dict:
    try:
        return fn(*args)
    except ValueError as e:
        raise InputError(path, f"invalid trace JSON: {e}") from None


def _decode(mm: mmap.mmap, span: tuple[int, int, int, int]) -> tuple[Any, Any]:
    k0, k1, v0, v1 = span
    return json.loads(mm[k0:k1]), json.loads(mm[v0:v1])


def _available_memory() -> int | None:
    """Bytes of memory available to new work (Linux: MemAvailable), or None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None

