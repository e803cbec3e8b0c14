"""Read any supported trace into the event table, choosing the reader by content, not extension.

Supported: Kineto/torch.profiler JSON (plain or gzip), TensorFlow/JAX XSpace (``.xplane.pb`` or a
``plugins/profile/<run>/`` directory) and xprof's trace-viewer JSON converted from it, ONNX Runtime's
profile JSON, PaddlePaddle's profiler JSON, Nsight Systems SQLite exports (``.nsys-rep``/``.qdrep``
through ``nsys export`` when it is on PATH), and tracekit's own Parquet files.
"""

from __future__ import annotations

import gzip
import importlib
import zlib
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pyarrow as pa

from tracekit import schema
from tracekit.errors import InputError, TracekitError
from tracekit.ingest.files import regular_file

SQLITE_MAGIC = b"SQLite format 3\x00"
PARQUET_MAGIC = b"PAR1"
GZIP_MAGIC = b"\x1f\x8b"
NSYS_REPORT_MAGIC = b"NVIDIA Tegra Profiler Re"
NSYS_JSON_EXPORT = b'{"data":['  # nsys export --type json: its first line is the string table
HEAD_BYTES = 1 << 16


NSYS_ARROW_FORMATS = ("nsys-parquetdir", "nsys-arrowdir", "nsys-arrows")  # tracekit.ingest.nsys_arrow
ARROW_STREAM_MAGIC = b"\xff\xff\xff\xff"  # an IPC stream's first message starts with the continuation marker


def _nsys_directory_format(path: Path) -> str | None:
    """nsys-parquetdir or nsys-arrowdir where ``path`` holds nsys's string table in that form."""
    for suffix, fmt in ((".parquet", "nsys-parquetdir"), (".arrow", "nsys-arrowdir")):
        if (path / f"StringIds{suffix}").is_file():
            return fmt
    return None


def detect(path: Path) -> str:
    """The format of a file or directory: kineto-json, kineto-json-gz, xprof-json, xprof-json-gz,
    onnxruntime-json, onnxruntime-json-gz, paddle-json, paddle-json-gz, xspace-pb, xspace-dir, nsys-sqlite, nsys-report,
    nsys-parquetdir, nsys-arrowdir, nsys-arrows or tracekit-parquet. Raises InputError with the reason otherwise."""
    if path.is_dir():
        return _nsys_directory_format(path) or "xspace-dir"
    regular_file(path)
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError as e:
        raise InputError(path, f"cannot read ({e.strerror})") from None
    if not head:
        raise InputError(path, "the file is empty")
    if head.startswith(SQLITE_MAGIC):
        return "nsys-sqlite"
    if head.startswith(PARQUET_MAGIC):
        return "tracekit-parquet"
    if head.startswith(NSYS_REPORT_MAGIC):
        return "nsys-report"
    if head.startswith(NSYS_JSON_EXPORT):
        raise InputError(path, "an Nsight Systems JSON export (nsys export --type json), a format nsys calls raw and "
                               "unstable: export the report to SQLite (--type sqlite) or Parquet (--type parquetdir) "
                               "and pass that")
    if head.startswith(ARROW_STREAM_MAGIC) and b"table_name" in head[:4096]:  # an Arrow stream naming nsys tables
        return "nsys-arrows"
    if head.startswith(GZIP_MAGIC):
        inner = _gzip_head(path)
        if _looks_like_json(inner):
            _refuse_array_of_values(path, inner)
            return _json_format(inner) + "-gz"
        raise InputError(path, "gzip file that does not contain a JSON trace")
    if _looks_like_json(head):
        _refuse_array_of_values(path, head)
        return _json_format(head)
    stripped = head.lstrip()[:200].lower()
    if stripped.startswith((b"<!doctype html", b"<html")):
        raise InputError(path, "this is an HTML page (a report?), not a trace")
    if stripped.startswith((b"#", b"|")) or b"\n|---" in head:
        raise InputError(path, "this is a Markdown/text document (a report?), not a trace")
    from tracekit.ingest import xplane

    if xplane.sniff(head):
        return "xspace-pb"
    raise InputError(path, "unrecognised format: not Kineto JSON, TensorFlow XSpace, an nsys SQLite export or tracekit Parquet")


def _looks_like_json(head: bytes) -> bool:
    return head.lstrip()[:1] in (b"{", b"[")


def _refuse_array_of_values(path: Path, head: bytes) -> None:
    """A JSON array whose first element is not an object is no trace (Chrome's array form lists event
    objects): torch.profiler's ``export_memory_timeline`` writes ``[[times...], [[bytes...]...]]``."""
    body = head.lstrip()
    if body[:1] == b"[" and body[1:].lstrip()[:1] not in (b"{", b"]", b""):
        raise InputError(path, "a JSON array of values, not of trace events (torch.profiler's export_memory_timeline "
                               "writes such files): give the Chrome trace the profiler exports (export_chrome_trace)")


def _json_format(head: bytes) -> str:
    """Which profiler's JSON a document's head reads like: xprof's trace viewer, ONNX Runtime's,
    PaddlePaddle's, or Kineto's (any other Chrome trace too)."""
    from tracekit.ingest import onnxruntime, paddle

    if _is_trace_viewer(head):
        return "xprof-json"
    if onnxruntime.sniff(head):
        return "onnxruntime-json"
    return "paddle-json" if paddle.sniff(head) else "kineto-json"


def _is_trace_viewer(head: bytes) -> bool:
    from tracekit.ingest import trace_viewer

    return trace_viewer.sniff(head)


def _gzip_head(path: Path) -> bytes:
    try:
        with gzip.open(path, "rb") as f:
            return f.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(path, f"corrupt gzip data ({e})") from None


# What torch.profiler's tensorboard_trace_handler writes into its directory ({worker}.{ms}.pt.trace.json[.gz]),
# and TF 2.2's profiler before XSpace files (plugins/profile/<run>/<host>.trace.json.gz).
TRACE_JSON_IN_DIRECTORY = ("*.trace.json", "*.trace.json.gz")


def resolve_directory(path: Path) -> Path:
    """A directory given as one trace: a TensorBoard log directory holding exactly one JSON trace
    (torch.profiler's, or TF 2.2's trace-viewer JSON) stands for that file; an XSpace run directory
    stays as it is (``xplane.read``)."""
    if not path.is_dir():
        return path
    kineto = sorted({p for pattern in TRACE_JSON_IN_DIRECTORY for p in path.rglob(pattern)})
    if not kineto or any(path.rglob("*.xplane.pb")):
        return path
    if len(kineto) > 1:
        shown = ", ".join(str(p.relative_to(path)) for p in kineto[:4]) + (", ..." if len(kineto) > 4 else "")
        raise InputError(path, f"holds {len(kineto)} JSON traces ({shown}): give one of them, "
                               f"or ingest them all as a dataset with `tracekit ingest {path} -o DATASET/`")
    return kineto[0]


def load(path: str | Path, args_of_kinds: Collection[str] | None = None, file_sha256: str | None = None,
         columns: Collection[str] | None = None) -> pa.Table:
    """Read a trace (any supported format) or a tracekit Parquet file into the event table.

    A directory is an XSpace run directory, or a torch.profiler TensorBoard log directory with one trace.

    ``args_of_kinds``: the kinds of row whose ``args`` the caller reads (None: every row's). A reader
    that writes args row by row (nsys) leaves them null on tables with rows of none of these kinds;
    other readers keep every row's, which costs them little. The analysis commands pass
    ``tracekit.analyze.frame.ARGS_READ_OF_KINDS``; a table read so is for analysis, not for export.

    ``file_sha256``: the sha256 of the file's bytes where the caller has it (a dataset ingest hashes
    every file to find those it holds): the Kineto reader then does not hash it again.

    ``columns``: the columns the caller reads (None: all). A tracekit Parquet file's other columns are
    not decoded, and an nsys export's are neither selected nor built; they come back null (a third
    of the table's memory and load time). The Kineto, XSpace and trace-viewer readers build every
    column as they parse (the columns left out cost them under 5% of the read). The analysis
    commands pass ``tracekit.analyze.frame.COLUMNS_READ``.
    """
    kinds, wanted = _kinds(args_of_kinds), _columns(columns)
    p = resolve_directory(Path(path))
    return _load(p, detect(p), kinds, file_sha256, wanted)


def _columns(columns: Collection[str] | None) -> frozenset[str] | None:
    return _checked(columns, schema.COLUMN_NAMES, "columns: unknown columns")


def _kinds(args_of_kinds: Collection[str] | None) -> frozenset[str] | None:
    return _checked(args_of_kinds, schema.KINDS, "args_of_kinds: unknown kinds")


def _checked(names: Collection[str] | None, known: Collection[str], unknown_words: str) -> frozenset[str] | None:
    """The names a caller asked for (None: all), refused when any is not one of ``known``."""
    if names is None:
        return None
    unknown = set(names) - set(known)
    if unknown:
        raise ValueError(f"{unknown_words} {sorted(unknown)}")
    return frozenset(names)


def _load(p: Path, fmt: str, args_of_kinds: frozenset[str] | None = None, file_sha256: str | None = None,
          columns: frozenset[str] | None = None) -> pa.Table:
    """``_read`` with any failure of the reader as this file's one-line error."""
    try:
        return _read(p, fmt, args_of_kinds, file_sha256, columns)
    except (TracekitError, MemoryError):
        raise
    except Exception as e:  # noqa: BLE001 - any other failure is still this file's content, in one line
        raise InputError(p, f"cannot be read as {fmt}: {type(e).__name__}: {str(e)[:200]}") from None


def _read(p: Path, fmt: str, args_of_kinds: frozenset[str] | None, file_sha256: str | None,
          columns: frozenset[str] | None) -> pa.Table:
    reader = _reader(fmt)
    if fmt == "tracekit-parquet":
        return reader.read(p, columns)
    if fmt in ("kineto-json", "kineto-json-gz"):
        # torch.profiler without a schedule marks no steps; a record_function around each iteration can.
        from tracekit.ingest.step_inference import infer_steps

        return infer_steps(reader.read(p, gz=fmt == "kineto-json-gz", file_sha256=file_sha256))
    if fmt in ("onnxruntime-json", "onnxruntime-json-gz", "paddle-json", "paddle-json-gz"):
        # ORT marks no steps: its model_run range around each InferenceSession.run can be them; Paddle
        # marks them only under a scheduler, and a RecordEvent around each iteration can be them.
        from tracekit.ingest.step_inference import infer_steps

        return infer_steps(reader.read(p, gz=fmt.endswith("-gz"), file_sha256=file_sha256))
    if fmt in ("nsys-report", "nsys-sqlite", *NSYS_ARROW_FORMATS):
        # nsys has no step marker of its own: an NVTX range around each iteration can be one.
        from tracekit.ingest.step_inference import COLUMNS_NEEDED, infer_steps

        if fmt in NSYS_ARROW_FORMATS:
            table = reader.read(p, fmt, args_of_kinds=args_of_kinds, columns_read=columns)
        else:
            read = reader.read_report if fmt == "nsys-report" else reader.read
            table = read(p, args_of_kinds=args_of_kinds, columns=columns)
        return infer_steps(table) if columns is None or COLUMNS_NEEDED <= columns else table
    # TF/JAX (XSpace, or xprof's trace-viewer JSON): a program whose TraceMe has no step_num, its own
    # range or tf.function around each iteration can be one.
    from tracekit.ingest.step_inference import infer_steps

    return infer_steps(reader.read(p, gz=True) if fmt == "xprof-json-gz" else reader.read(p))


def _reader(fmt: str) -> ModuleType:
    """The reader module of a format, imported on first use (each pulls in its own dependencies)."""
    module = {"tracekit-parquet": "parquet", "kineto-json": "kineto", "kineto-json-gz": "kineto", "xspace-pb": "xplane",
              "xspace-dir": "xplane", "xprof-json": "trace_viewer", "xprof-json-gz": "trace_viewer",
              "onnxruntime-json": "onnxruntime", "onnxruntime-json-gz": "onnxruntime",
              "paddle-json": "paddle", "paddle-json-gz": "paddle",
              "nsys-sqlite": "nsys", "nsys-report": "nsys", **dict.fromkeys(NSYS_ARROW_FORMATS, "nsys_arrow")}.get(fmt)
    if module is None:  # pragma: no cover - detect() covers all
        raise ValueError(f"unsupported format {fmt}")
    return importlib.import_module(f"tracekit.ingest.{module}")


@dataclass(frozen=True)
class NamedTable:
    """An event table and the name of the trace it was read from (what reports print as its title)."""

    name: str
    table: pa.Table


def load_beside(path: str | Path, work: Callable[[], object], args_of_kinds: Collection[str] | None = None,
                columns: Collection[str] | None = None) -> NamedTable:
    """``load(path)`` on a second thread while this one runs ``work`` (the CLI imports the analysis
    and pandas, a third of a second, while the file is read: the readers release the GIL).

    The reader module and everything it imports are imported here first, so that the two threads
    never import the same modules at once.
    """
    import ctypes  # noqa: F401 - the Kineto reader's, to give freed memory back

    import pyarrow.compute  # noqa: F401 - readers import it lazily on some paths

    from tracekit import _native, threads

    p = resolve_directory(Path(path))
    fmt = detect(p)
    _reader(fmt)
    if fmt.startswith("nsys"):
        _native.sqlite_reader()
    elif fmt.startswith("xspace"):
        _native.xplane_walker()
    pending = threads.start(_load, p, fmt, _kinds(args_of_kinds), None, _columns(columns))  # detected once, here
    work()
    return NamedTable(str(path), pending.result())


__all__ = ["NamedTable", "detect", "load", "load_beside", "regular_file", "resolve_directory"]
