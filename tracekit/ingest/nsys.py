"""Nsight Systems SQLite export (nsys 2022.1 - 2025.x) -> event table.

One table per data type, created only when it holds data (so every table is optional), columns
selected by name (third-party tools such as DLProf add columns). Tables read::

    CUPTI_ACTIVITY_KIND_KERNEL(start, end, deviceId, streamId, correlationId, globalPid, demangledName,
                               shortName, gridX.., blockX.., registersPerThread, staticSharedMemory, ...)
    CUPTI_ACTIVITY_KIND_MEMCPY / _MEMSET / _SYNCHRONIZATION / _GRAPH_TRACE (GPU side)
    CUPTI_ACTIVITY_KIND_RUNTIME(start, end, eventClass, globalTid, correlationId, nameId, ...)  runtime + driver
    NVTX_EVENTS(start, end, eventType, rangeId, text, textId, domainId, globalTid, ...)
    CUDNN_EVENTS, CUBLAS_EVENTS, PROFILER_OVERHEAD, CUDA_GRAPH_EVENTS / CUDA_GRAPH_NODE_EVENTS, OSRT_API
    StringIds(id, value), ThreadNames(nameId, globalTid), PROCESSES(globalPid, pid, name)
    META_DATA_EXPORT (>= 2023.4) or EXPORT_META_DATA (<= 2023.1), TARGET_INFO_GPU, TARGET_INFO_SESSION_START_TIME

globalTid: bits 0-23 tid, 24-47 pid, 48-63 host; a GPU row's globalPid has the tid bits zero.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import urllib.parse
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa

from tracekit import _native, schema
from tracekit.errors import InputError
from tracekit.ingest import columns, links
from tracekit.ingest.columns import TraceMeta
from tracekit.schema import KIND_CODES

# Every table the reader reads (nsys_arrow copies only these out of an Arrow/Parquet export).
TABLES_READ = frozenset({
    "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS", "CUDNN_EVENTS", "CUBLAS_EVENTS", "PROFILER_OVERHEAD", "CUDA_GRAPH_EVENTS", "CUDA_GRAPH_NODE_EVENTS",
    "OSRT_API", "StringIds", "ThreadNames", "PROCESSES", "META_DATA_EXPORT", "EXPORT_META_DATA", "META_DATA_CAPTURE",
    "TARGET_INFO_GPU", "TARGET_INFO_SESSION_START_TIME", "ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND",
    "ENUM_CUPTI_SYNC_TYPE"})
# Fallbacks for 2022.1 exports, which have no ENUM_* tables.
MEMCPY_KINDS = {0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
                5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array", 8: "Device-to-Device",
                9: "Host-to-Host", 10: "Peer-to-Peer", 11: "Unified Host-to-Device", 12: "Unified Device-to-Host",
                13: "Unified Device-to-Device"}
# ENUM_CUDA_MEM_KIND (nsys's own numbering, not CUPTI's); 2022.1 exports use it without the table.
MEMORY_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
                6: "Managed Static", 7: "Unknown"}
MEMORY_KIND_COLUMNS = ("srcKind", "dstKind", "memKind")  # decoded to their labels in args
SYNC_TYPES = {0: "Unknown", 1: "Event synchronize", 2: "Stream wait event", 3: "Stream synchronize",
              4: "Context synchronize"}
NVTX_PUSHPOP = (59, 70)
NVTX_STARTEND = (60, 71)
NVTX_MARK = 34
NVTX_DOMAIN_CREATE = 75
# NVTX ranges that mark training/inference steps: tracekit's collectors write "step#N" (nsys shows
# "tracekit:step#N"); ProfilerStep#N is torch.profiler's name, used by some NVTX emitters too.
STEP_RANGE = re.compile(r"^(?:[^:]+:)?(?:ProfilerStep|step)#(\d+)$")


# Rows are fetched in blocks of this many, so Python holds one block of row tuples at a time.
FETCH_ROWS = 1 << 16
HOST_BITS = 0xFFFFFFFFFF000000  # globalTid without its tid bits: (host, pid)


@dataclass
class _Block:
    """One nsys table's rows as columns. SQL computes every value; Python loops over distinct
    names (and NVTX domain rows), never over all rows."""

    category: str
    kind: np.ndarray           # int8 kind codes
    name: pa.DictionaryArray
    start: np.ndarray
    dur: np.ndarray            # -1 where dur_missing
    dur_missing: np.ndarray
    gtid: np.ndarray           # globalTid (host rows) or globalPid (GPU rows)
    gpu: bool
    args: pa.Array             # large_string JSON, null when the row has no other columns
    device: np.ndarray | None = None
    stream: np.ndarray | None = None
    corr: np.ndarray | None = None
    step: np.ndarray | None = None
    grid: list[np.ndarray] | None = None   # x, y, z; -1 where unknown
    block: list[np.ndarray] | None = None
    optional: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # column: (values, null mask)
    rows: int = field(init=False)  # kept apart: _to_table lets the arrays go as it joins them

    def __post_init__(self) -> None:
        self.rows = int(self.start.size)

    def __len__(self) -> int:
        return self.rows


def _dictionary(codes: np.ndarray, values: list[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(columns.numeric_array(codes, pa.int32()), columns.string_array(values))


def _names_of_ids(ids: np.ndarray, strings: dict[int, str], name_of: Callable[[str], str] | None = None) -> tuple[np.ndarray, list[str]]:
    """Per-row codes and the distinct names of StringIds ids (-1 or unknown: "")."""
    distinct, codes = columns.factorize(ids)
    values = [strings.get(int(i), "") for i in distinct]
    return codes, [name_of(v) for v in values] if name_of else values


class _IdText:
    """The JSON text an integer id stands for (a StringIds reference), per distinct id; ``None``
    leaves the key out. Ids not in the table: their number, or left out."""

    def __init__(self, texts: dict[int, str | None], missing_as_number: bool) -> None:
        self.texts = texts
        self.missing_as_number = missing_as_number
        self._lookup: tuple[bytes, list[bytes | None], bool] | None = None

    def __call__(self, value: int) -> str | None:
        if value in self.texts:
            return self.texts[value]
        return str(value) if self.missing_as_number else None

    def lookup(self) -> tuple[bytes, list[bytes | None], bool]:
        """The same as the C row walker takes it: sorted ids, their texts, missing_as_number (built
        once: a kernel table's short and mangled names share one)."""
        if self._lookup is None:
            ids = sorted(self.texts)
            self._lookup = (np.array(ids, np.int64).tobytes(),
                            [None if (t := self.texts[i]) is None else t.encode() for i in ids], self.missing_as_number)
        return self._lookup


@dataclass
class _Args:
    """The columns a table's rows keep in ``args`` (those the schema has no column for), in column
    order, then any extra keys: their JSON keys and SQL expressions."""

    keys: list[str]
    sql: list[str]
    # Keys holding integer ids, written as the JSON text the id stands for.
    by_id: dict[str, _IdText]


def _args(columns: list[str], used: set[str], extra: tuple[tuple[str, str], ...] = (),
          by_id: dict[str, _IdText] | None = None) -> _Args:
    keys = [c for c in columns if c not in used]
    return _Args(keys + [k for k, _ in extra], [f'"{c}"' for c in keys] + [v for _, v in extra], by_id or {})


NO_ARGS = _Args([], [], {})


class _Db:
    """An open export: a connection per thread (tables are read on several), its URI (the C row
    walker opens its own) and the walker, None where it is not built."""

    def __init__(self, con: sqlite3.Connection, uri: str, walker: ModuleType | None, strings: dict[int, str],
                 args_of_kinds: frozenset[str] | None = None, columns: frozenset[str] | None = None) -> None:
        self.uri = uri
        self.args_of_kinds = args_of_kinds
        self.columns = columns
        self.walker = walker
        self.strings = strings
        self._string_texts: _IdText | None = None
        self._lock = threading.Lock()
        self._local = threading.local()
        self._local.con = con
        self._opened: list[sqlite3.Connection] = []

    @property
    def con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = _connect(self.uri)
            self._opened.append(con)
        return con

    def close(self) -> None:
        """Close the connections opened for other threads (the caller closes its own)."""
        for con in self._opened:
            con.close()

    def wants_args(self, kinds: Iterable[str]) -> bool:
        """Whether a table with rows of these kinds fills its args: not where the caller reads the
        args of none of them. Every row's JSON is 40% of a big export's table (313 of 749 MB with a
        million kernels), and the analyses read the args of few kinds."""
        return self.wants("args") and (self.args_of_kinds is None or not self.args_of_kinds.isdisjoint(kinds))

    def wants(self, *names: str) -> bool:
        """Whether the caller reads any of these event-table columns (``tracekit.ingest.load``'s
        ``columns``): the launch shapes and byte counts are a third of the values a kernel table
        holds, and the analyses read none of them."""
        return self.columns is None or not self.columns.isdisjoint(names)

    def string_or_id(self) -> _IdText:
        """A StringIds reference as its string; an unknown id as the number (built once per file)."""
        with self._lock:
            if self._string_texts is None:
                self._string_texts = _IdText({k: encode_basestring_ascii(v) for k, v in self.strings.items()}, True)
            return self._string_texts

    def fetch(self, sql: str, n_int: int, n_obj: int, args: _Args) -> tuple[list[np.ndarray], list[list[Any]], pa.Array]:
        """Run ``sql`` (n_int integer columns, n_obj other columns, then ``args``' columns): the
        integers as numpy arrays, the others as lists, and the args column as JSON text."""
        sql = sql.replace("@ARGS@", ", ".join(args.sql) or "NULL")
        if self.walker is None:
            return _fetch_rows(self.con, sql, n_int, n_obj, args)
        # The count sizes the buffers; it costs a few ms where the walk costs seconds.
        rows_hint = self.con.execute(f"SELECT count(*) FROM ({sql})").fetchone()[0]
        keys = [(json.dumps(k) + ":").encode() for k in args.keys] if args.sql else []
        lookups = [args.by_id[k].lookup() if k in args.by_id else None for k in args.keys] if args.sql else []
        try:
            ints, objs, (validity, offsets, data), n = self.walker.read(
                self.uri, sql, n_int, n_obj + (0 if args.sql else 1), keys, lookups, rows_hint)
        except OSError as e:  # SQLite's own error, as the sqlite3 module would raise it
            raise sqlite3.DatabaseError(str(e)) from None
        except RuntimeError:  # no whole SQLite to call (see binding() in sqlite_columns.c)
            return _fetch_rows(self.con, sql, n_int, n_obj, args)
        arrays = [np.frombuffer(b, np.int64) for b in ints]
        text = pa.Array.from_buffers(pa.large_string(), n, [pa.py_buffer(validity), pa.py_buffer(offsets),
                                                            pa.py_buffer(data)])
        return arrays, objs[:n_obj], text


def _fetch_rows(con: sqlite3.Connection, sql: str, n_int: int, n_obj: int, args: _Args) -> tuple[list[np.ndarray], list[list[Any]], pa.Array]:
    """``_Db.fetch`` through the sqlite3 module, block by block (where the C walker is not built)."""
    ints: list[list[np.ndarray]] = [[] for _ in range(n_int)]
    objs: list[list[Any]] = [[] for _ in range(n_obj)]
    texts: list[pa.Array] = []
    cur = con.execute(sql)
    while rows := cur.fetchmany(FETCH_ROWS):
        cols = list(zip(*rows, strict=True))
        del rows
        for i in range(n_int):
            ints[i].append(np.array(cols[i], np.int64))
        for j in range(n_obj):
            objs[j].extend(cols[n_int + j])
        texts.append(_json_objects(cols[n_int + n_obj:], args))
    merged = [np.concatenate(parts) if parts else np.zeros(0, np.int64) for parts in ints]
    return merged, objs, pa.concat_arrays(texts) if texts else pa.array([], pa.large_string())


def _json_objects(values: list[tuple[Any, ...]], args: _Args) -> pa.Array:
    """One JSON object per row from the args columns' values, nulls left out (null when nothing is
    left), written as ``json.dumps(separators=(",", ":"))`` would: Arrow joins the pieces."""
    import pyarrow.compute as pc  # only where the C row walker is not built: 40 ms of start-up otherwise

    n = len(values[0]) if values else 0
    pieces = []
    for key, column in zip(args.keys, values, strict=False):
        text = _json_values(column, args.by_id.get(key))
        if text.null_count < n:
            piece = pc.binary_join_element_wise(pa.scalar("," + json.dumps(key) + ":"), text, "")
            pieces.append(pc.fill_null(piece, ""))
    if not pieces:
        return columns.null_array(n, pa.large_string())
    joined = pc.binary_join_element_wise(*pieces, "") if len(pieces) > 1 else pieces[0]
    wrapped = pc.binary_join_element_wise("{", pc.utf8_slice_codeunits(joined, 1), "}", "")
    return pc.if_else(pc.equal(joined, ""), pa.scalar(None, pa.string()), wrapped).cast(pa.large_string())


def _json_values(column: tuple[Any, ...], by_id: _IdText | None) -> pa.Array:
    """Each value's JSON text (null for NULL). Integers and text are converted by Arrow (text through
    its distinct values); anything else (reals, blobs, mixed types in a damaged file) by json.dumps."""
    import pyarrow.compute as pc

    try:
        arr = pa.array(column)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        arr = None
    if arr is not None and pa.types.is_null(arr.type):
        return pa.nulls(len(column), pa.string())
    if arr is not None and pa.types.is_integer(arr.type) and by_id is None:
        return pc.cast(arr, pa.string())
    if arr is not None and (pa.types.is_integer(arr.type) or pa.types.is_string(arr.type)):
        encoded = arr.dictionary_encode()
        distinct = encoded.dictionary.to_pylist()
        texts = [by_id(v) for v in distinct] if by_id and pa.types.is_integer(arr.type) else [json.dumps(v) for v in distinct]
        return pc.take(pa.array(texts, pa.string()), encoded.indices)
    return pa.array([None if v is None else json.dumps(v, default=str) for v in column], pa.string())


def db_uri(path: Path) -> str:
    """The URI that opens ``path`` read-only and immutable, the way nsys's own report scripts do."""
    # Quoted, or "#", "?" and "%" in a file name would cut or change it.
    return "file:" + urllib.parse.quote(str(Path(path).resolve())) + "?mode=ro&immutable=1"


def _connect(uri: str) -> sqlite3.Connection:
    # check_same_thread off: a reader thread's connection is closed by the thread that started it.
    con = sqlite3.connect(uri, uri=True, check_same_thread=False)
    # Names are bytes from the profiled program (NVTX, kernel names): invalid UTF-8 is shown, not fatal.
    con.text_factory = lambda raw: raw.decode("utf-8", "replace")
    return con


def open_db(path: Path) -> sqlite3.Connection:
    """Open read-only and immutable (``db_uri``)."""
    try:
        con = _connect(db_uri(path))
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return con
    except sqlite3.DatabaseError as e:
        raise InputError(path, f"corrupt SQLite database ({e})") from None
    except UnicodeDecodeError:  # SQLite's own error message held bytes of the corrupt file
        raise InputError(path, "corrupt SQLite database (unreadable header or schema)") from None


def tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def table_columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info('{table}')")]


def _select(con: sqlite3.Connection, table: str) -> tuple[list[str], Iterable[tuple[Any, ...]]]:
    cols = table_columns(con, table)
    quoted = ", ".join(f'"{c}"' for c in cols)
    return cols, con.execute(f'SELECT {quoted} FROM "{table}"')


def _enum(con: sqlite3.Connection, have: set[str], table: str, fallback: dict[int, str]) -> dict[int, str]:
    if table not in have:
        return dict(fallback)
    cols = table_columns(con, table)
    label = "label" if "label" in cols else "name"
    return {int(r[0]): str(r[1]) for r in con.execute(f'SELECT id, "{label}" FROM "{table}"')}


def read_report(path: Path, args_of_kinds: frozenset[str] | None = None,
                columns: frozenset[str] | None = None) -> pa.Table:
    """Export a ``.nsys-rep``/``.qdrep`` to SQLite with ``nsys export`` and read that."""
    nsys = shutil.which("nsys")
    if nsys is None:
        raise InputError(path, "Nsight Systems report: install Nsight Systems and run "
                               f"'nsys export --type sqlite {path.name}', then pass the .sqlite file "
                               "(nsys was not found on PATH)")
    with tempfile.TemporaryDirectory(prefix="tracekit-nsys-") as tmp:
        out = Path(tmp) / (path.stem + ".sqlite")
        proc = subprocess.run([nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--lazy", "true",
                               "-o", str(out), str(path)], capture_output=True, text=True)
        if proc.returncode != 0 or not out.exists():
            last = (proc.stderr or proc.stdout).strip().splitlines()
            raise InputError(path, "nsys export failed: " + (last[-1] if last else f"exit code {proc.returncode}"))
        table = read(out, display_path=path, args_of_kinds=args_of_kinds, columns=columns)
    return table


def read(path: Path, display_path: Path | None = None, args_of_kinds: frozenset[str] | None = None,
         columns: frozenset[str] | None = None, source_format: str = "nsys-sqlite",
         source_sha256: str | None = None) -> pa.Table:
    """Read an nsys SQLite export into the event table.

    ``args_of_kinds``: when given, only tables with rows of these kinds fill ``args``; the others'
    rows get null args. ``columns``: when given, the other columns are neither selected nor built,
    and come back null (``tracekit.ingest.load``). ``source_format`` and ``source_sha256``: those of
    the file the user gave, where ``path`` is a copy made from it (``nsys_arrow``)."""
    shown = display_path or path
    con = open_db(path)
    try:
        have = tables(con)
        meta_table = "META_DATA_EXPORT" if "META_DATA_EXPORT" in have else "EXPORT_META_DATA" if "EXPORT_META_DATA" in have else None
        if "StringIds" not in have or (meta_table is None and not any(t.startswith(("CUPTI_", "NVTX_")) for t in have)):
            if source_format != "nsys-sqlite":
                raise InputError(shown, f"nsys {source_format.removeprefix('nsys-')} export without a capture's tables "
                                        "(StringIds with META_DATA_EXPORT, CUPTI_* or NVTX_* tables)")
            raise InputError(shown, "SQLite database, but not an Nsight Systems export (no StringIds / META_DATA_EXPORT tables)")
        strings = dict(con.execute("SELECT id, value FROM StringIds").fetchall())
        db = _Db(con, db_uri(path), _native.sqlite_reader(), strings, args_of_kinds, columns)
        try:
            blocks = [b for b in _read_tables(db, have) if b is not None and len(b)]
        finally:
            db.close()
        meta = _meta(con, have, meta_table, shown, path, source_format, source_sha256)
        names = _thread_names(con, have, strings)
        return _to_table(blocks, meta, names, columns)
    except sqlite3.DatabaseError as e:
        raise InputError(shown, f"corrupt or unreadable nsys export ({e})") from None
    except (TypeError, ValueError, OverflowError, KeyError, pa.ArrowException) as e:
        # SQLite columns are untyped: a damaged export can hold text where nsys writes integers.
        raise InputError(shown, f"nsys export with unexpected values ({type(e).__name__}: {e})") from None
    finally:
        con.close()


def _read_tables(db: _Db, have: set[str]) -> list[_Block | None]:
    """Every table's block, in a fixed order. With the C walker, which releases the GIL, tables are
    read on up to ``TRACEKIT_THREADS`` threads: kernels and API calls are most of a big export."""
    readers: list[Callable[[], list[_Block | None]]] = [
        lambda: [_read_kernels(db, have)], lambda: list(_read_memory_ops(db, have)), lambda: [_read_runtime(db, have)],
        lambda: [_read_nvtx(db, have)], lambda: list(_read_simple(db, have))]
    # One thread where SQLite is built single-threaded (threadsafety 0), or where the walker calls
    # another copy of SQLite that shadows the sqlite3 module's (TensorFlow's, once imported), whose
    # build is unknown.
    parallel = db.walker is not None and sqlite3.threadsafety and db.walker.binding() == "library"
    threads = min(_native.scan_threads(), len(readers)) if parallel else 1
    if threads == 1:
        return [b for read in readers for b in read()]
    with ThreadPoolExecutor(threads, thread_name_prefix="tracekit-nsys") as pool:
        return [b for part in pool.map(lambda read: read(), readers) for b in part]


def _column(present: set[str], name: str) -> str:
    return f'"{name}"' if name in present else "NULL"


def _dims(present: set[str], prefix: str) -> list[str]:
    """x, y, z of a launch dimension; all -1 when any of the three is unknown."""
    xyz = [_column(present, f"{prefix}{a}") for a in "XYZ"]
    unknown = " OR ".join(f"{c} IS NULL" for c in xyz)
    return [f"CASE WHEN {unknown} THEN -1 ELSE {c} END" for c in xyz]


LAUNCH_SHAPE = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
KERNEL_USED = {"start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName", "gridX", "gridY",
               "gridZ", "blockX", "blockY", "blockZ", "registersPerThread", "staticSharedMemory", "dynamicSharedMemory"}


def _read_kernels(db: _Db, have: set[str]) -> _Block | None:
    table = "CUPTI_ACTIVITY_KIND_KERNEL"
    if table not in have:
        return None
    cols = table_columns(db.con, table)
    c = set(cols)
    shared = [_column(c, "staticSharedMemory"), _column(c, "dynamicSharedMemory")]
    regs = _column(c, "registersPerThread")
    select = {"start": "start", "dur": '"end" - start', "device": f'coalesce({_column(c, "deviceId")}, -1)',
              "stream": f'coalesce({_column(c, "streamId")}, -1)', "corr": f'coalesce({_column(c, "correlationId")}, -1)',
              "gpid": f'coalesce({_column(c, "globalPid")}, 0)', "name_id": f'coalesce({_column(c, "demangledName")}, -1)'}
    if db.wants(*LAUNCH_SHAPE):
        select.update(zip(("gx", "gy", "gz", "bx", "by", "bz"), _dims(c, "grid") + _dims(c, "block"), strict=True))
    if db.wants("registers_per_thread"):
        select.update(regs=f"coalesce({regs}, -1)", regs_null=f"{regs} IS NULL")
    if db.wants("shared_memory_bytes"):
        select.update(shm=f"coalesce({shared[0]}, 0) + coalesce({shared[1]}, 0)",
                      shm_null=f"{shared[0]} IS NULL AND {shared[1]} IS NULL")
    sql = f'SELECT {", ".join(select.values())}, @ARGS@ FROM "{table}"'
    arrays, _, args = db.fetch(sql, len(select), 0, _args(cols, KERNEL_USED, by_id={k: db.string_or_id() for k in ("shortName", "mangledName")})
                               if db.wants_args(["gpu_kernel"]) else NO_ARGS)
    v = dict(zip(select, arrays, strict=True))
    codes, values = _names_of_ids(v["name_id"], db.strings)
    optional = {}
    if "regs" in v:
        optional["registers_per_thread"] = (v["regs"], v["regs_null"].astype(bool))
    if "shm" in v:
        optional["shared_memory_bytes"] = (v["shm"], v["shm_null"].astype(bool))
    start = v["start"]
    return _Block(table, np.full(start.size, KIND_CODES["gpu_kernel"], np.int8), _dictionary(codes, values), start,
                  v["dur"], np.zeros(start.size, bool), v["gpid"], True, args, device=v["device"], stream=v["stream"],
                  corr=v["corr"], grid=[v["gx"], v["gy"], v["gz"]] if "gx" in v else None,
                  block=[v["bx"], v["by"], v["bz"]] if "bx" in v else None, optional=optional)


def _read_memory_ops(db: _Db, have: set[str]) -> list[_Block]:
    copy_kinds = _enum(db.con, have, "ENUM_CUDA_MEMCPY_OPER", MEMCPY_KINDS)
    sync_types = _enum(db.con, have, "ENUM_CUPTI_SYNC_TYPE", SYNC_TYPES)
    memory_kinds = _enum(db.con, have, "ENUM_CUDA_MEM_KIND", MEMORY_KINDS)
    specs = (
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "gpu_memcpy", "copyKind", lambda v: f"[CUDA memcpy {copy_kinds.get(v, 'Unknown')}]"),
        ("CUPTI_ACTIVITY_KIND_MEMSET", "gpu_memset", None, lambda v: "[CUDA memset]"),
        ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "gpu_sync", "syncType",
         lambda v: f"[CUDA {sync_types.get(v, 'synchronization')}]"),
        ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "gpu_graph", "graphId", None),
    )
    blocks = []
    for table, kind, name_column, name_of in specs:
        if table not in have:
            continue
        cols = table_columns(db.con, table)
        c = set(cols)
        used = {"start", "end", "globalPid", "deviceId", "streamId", "correlationId", "bytes"}
        nbytes = _column(c, "bytes") if db.wants("bytes") else "NULL"
        sql = (f'SELECT start, "end" - start, coalesce({_column(c, "deviceId")}, -1), '
               f'coalesce({_column(c, "streamId")}, -1), coalesce({_column(c, "correlationId")}, -1), '
               f'coalesce({_column(c, "globalPid")}, 0), coalesce({nbytes}, -1), {nbytes} IS NULL, '
               f'{_column(c, name_column) if name_column else "NULL"}, @ARGS@ FROM "{table}"')
        # A copy's memory kinds are evidence (pageable copies are staged and may block), as labels:
        # Kineto puts them in the name ("Memcpy HtoD (Pageable -> Device)"), nsys in these columns.
        kinds = [k for k in MEMORY_KIND_COLUMNS if k in c]
        decoded = tuple((k, _labels_sql(k, memory_kinds)) for k in kinds)
        (start, dur, device, stream, corr, gpid, nbytes_v, nbytes_null), (labels,), args = db.fetch(
            sql, 8, 1, _args(cols, used | set(kinds), decoded) if db.wants_args([kind]) else NO_ARGS)
        if name_of is None:  # a graph's id, as text ("None" when unknown); no column: ""
            names = columns.string_array([f"[CUDA graph {v if name_column in c else ''}]" for v in labels])
            name = names.dictionary_encode()
        else:
            ids = np.array([-1 if v is None else int(v) for v in labels], np.int64) if labels else np.zeros(0, np.int64)
            distinct, codes = columns.factorize(ids)
            name = _dictionary(codes, [name_of(int(v)) for v in distinct])
        blocks.append(_Block(table, np.full(start.size, KIND_CODES[kind], np.int8), name, start, dur,
                             np.zeros(start.size, bool), gpid, True, args, device=device, stream=stream, corr=corr,
                             optional={"bytes": (nbytes_v, nbytes_null.astype(bool))}))
    return blocks


def _labels_sql(column: str, labels: dict[int, str]) -> str:
    """SQL giving ``column``'s enum label (the number itself where the enum has none)."""
    cases = " ".join(f"WHEN {k} THEN '{v.replace(chr(39), chr(39) * 2)}'" for k, v in sorted(labels.items()))
    return f'CASE "{column}" {cases} ELSE "{column}" END'


def api_display_name(raw: str) -> str:
    """The API name as ``nsys stats`` prints it: nsys drops the last 6 characters when they start
    with ``_v`` (``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``), exactly its SQL
    ``substr(name, -6, 2) == '_v'``."""
    return raw[:-6] if len(raw) >= 6 and raw[-6:-4] == "_v" else raw


def _read_runtime(db: _Db, have: set[str]) -> _Block | None:
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if table not in have:
        return None
    cols = table_columns(db.con, table)
    c = set(cols)

    def runtime_args() -> _Args:
        # The versioned name, where the shown one drops it; other ids leave the key out.
        name_raw = _IdText({k: encode_basestring_ascii(raw) for k, raw in db.strings.items()
                            if api_display_name(raw) != raw}, False)
        return _args(cols, {"start", "end", "nameId", "globalTid", "correlationId"},
                     extra=(("name_raw", _column(c, "nameId")),), by_id={"name_raw": name_raw})

    sql = (f'SELECT start, "end" - start, coalesce({_column(c, "globalTid")}, 0), '
           f'coalesce({_column(c, "correlationId")}, -1), coalesce({_column(c, "nameId")}, -1), '
           f'@ARGS@ FROM "{table}"')
    wanted = runtime_args() if db.wants_args(["runtime_api", "driver_api"]) else NO_ARGS
    (start, dur, gtid, corr, name_id), _, args = db.fetch(sql, 5, 0, wanted)
    codes, values = _names_of_ids(name_id, db.strings, api_display_name)
    driver = np.array([v.startswith("cu") and not v.startswith("cuda") for v in values], bool)
    kind = np.where(driver[codes], KIND_CODES["driver_api"], KIND_CODES["runtime_api"]).astype(np.int8)
    return _Block(table, kind, _dictionary(codes, values), start, dur, np.zeros(start.size, bool), gtid, False, args,
                  corr=corr)


NVTX_USED = {"eventType", "start", "end", "textId", "text", "globalTid"}


def _read_nvtx(db: _Db, have: set[str]) -> _Block | None:
    table = "NVTX_EVENTS"
    if table not in have:
        return None
    cols = table_columns(db.con, table)
    c = set(cols)
    etype, end, text, domain_id = (_column(c, n) for n in ("eventType", "end", "text", "domainId"))
    ranges = ", ".join(str(t) for t in NVTX_PUSHPOP + NVTX_STARTEND)
    style = (f"CASE WHEN {etype} IN ({', '.join(map(str, NVTX_PUSHPOP))}) THEN 'PushPop' "
             f"WHEN {etype} IN ({', '.join(map(str, NVTX_STARTEND))}) THEN 'StartEnd' END")
    # Domain names per (process, domainId), from the first NvtxDomainCreate row of each.
    domains: dict[tuple[int, int], str] = {}
    if "domainId" in c:
        for gtid, did, name in db.con.execute(
                f'SELECT coalesce({_column(c, "globalTid")}, 0), domainId, coalesce(nullif({text}, \'\'), '
                f'(SELECT value FROM StringIds WHERE id = {_column(c, "textId")}), \'\') FROM "{table}" '
                f'WHERE {etype} = {NVTX_DOMAIN_CREATE} AND domainId IS NOT NULL'):
            domains.setdefault((int(gtid) & HOST_BITS, int(did)), name)
    sql = (f'SELECT start, coalesce({end} - start, CASE WHEN {etype} IN ({ranges}) THEN -1 ELSE 0 END), '
           f'{end} IS NULL AND {etype} IN ({ranges}), coalesce({_column(c, "globalTid")}, 0), coalesce({etype}, -1), '
           f'coalesce({domain_id}, 0), '
           f'coalesce((SELECT value FROM StringIds WHERE id = {_column(c, "textId")}), {text}, \'\'), '
           f'@ARGS@ FROM "{table}"')
    (start, dur, dur_missing, gtid, event, did), (texts,), args = db.fetch(
        sql, 6, 1, _args(cols, NVTX_USED, extra=(("style", style), ("eventType", etype)))
                     if db.wants_args(["step", "user_range", "marker", "metadata"]) else NO_ARGS)
    is_range = np.isin(event, NVTX_PUSHPOP + NVTX_STARTEND)
    named = is_range | (event == NVTX_MARK)
    names = list(texts)
    for i in np.flatnonzero(named & (did != 0)).tolist():  # only rows in a named domain pay a Python step
        domain = domains.get((int(gtid[i]) & HOST_BITS, int(did[i])))
        if domain:
            names[i] = f"{domain}:{names[i]}"
    # Codes in order of first appearance, as Arrow's dictionary_encode gives them.
    code_of: dict[str, int] = {}
    codes = np.fromiter((code_of.setdefault(v, len(code_of)) for v in names), np.int64, len(names))
    name = _dictionary(codes, list(code_of))
    step_of_value = np.array([int(m.group(1)) if (m := STEP_RANGE.match(v)) else -1 for v in code_of] or [-1], np.int64)
    step = np.where(is_range, step_of_value[codes] if codes.size else codes, -1)
    kind = np.select([is_range & (step >= 0), is_range, event == NVTX_MARK],
                     [KIND_CODES["step"], KIND_CODES["user_range"], KIND_CODES["marker"]], KIND_CODES["metadata"])
    return _Block(table, kind.astype(np.int8), name, start, dur, dur_missing.astype(bool), gtid, False, args, step=step)


def _read_simple(db: _Db, have: set[str]) -> list[_Block]:
    """Host-side tables with (start, end, globalTid, nameId)."""
    specs = (("CUDNN_EVENTS", "gpu_library_api"), ("CUBLAS_EVENTS", "gpu_library_api"),
             ("PROFILER_OVERHEAD", "overhead"), ("CUDA_GRAPH_EVENTS", "other"), ("CUDA_GRAPH_NODE_EVENTS", "other"),
             ("OSRT_API", "other"))
    blocks = []
    for table, kind in specs:
        if table not in have:
            continue
        cols = table_columns(db.con, table)
        c = set(cols)
        if "start" not in c:
            continue
        end = _column(c, "end")
        sql = (f'SELECT start, coalesce({end} - start, -1), {end} IS NULL, coalesce({_column(c, "globalTid")}, 0), '
               f'coalesce({_column(c, "nameId")}, -1), @ARGS@ FROM "{table}"')
        (start, dur, dur_missing, gtid, name_id), _, args = db.fetch(
            sql, 5, 0, _args(cols, {"start", "end", "nameId", "globalTid"}) if db.wants_args([kind]) else NO_ARGS)
        codes, values = _names_of_ids(name_id, db.strings)
        blocks.append(_Block(table, np.full(start.size, KIND_CODES[kind], np.int8), _dictionary(codes, values), start,
                             dur, dur_missing.astype(bool), gtid, False, args))
    return blocks


def _thread_names(con: sqlite3.Connection, have: set[str], strings: dict[int, str]) -> tuple[dict[int, str], dict[int, str]]:
    threads: dict[int, str] = {}
    if "ThreadNames" in have:
        for name_id, gtid in con.execute("SELECT nameId, globalTid FROM ThreadNames"):
            if gtid is not None:
                threads[gtid] = strings.get(name_id, "")
    procs: dict[int, str] = {}
    if "PROCESSES" in have:
        for pid, name in con.execute("SELECT pid, name FROM PROCESSES"):
            if pid is not None:
                procs[int(pid)] = name or ""
    return threads, procs


def _meta(con: sqlite3.Connection, have: set[str], meta_table: str | None, shown: Path, path: Path,
          source_format: str = "nsys-sqlite", source_sha256: str | None = None) -> TraceMeta:
    export = dict(con.execute(f'SELECT name, value FROM "{meta_table}"').fetchall()) if meta_table else {}
    devices: list[dict[str, Any]] = []
    if "TARGET_INFO_GPU" in have:
        cols, cur = _select(con, "TARGET_INFO_GPU")
        for r in cur:
            d = {k: v for k, v in zip(cols, r, strict=True) if v is not None and not isinstance(v, bytes)}
            devices.append(d)
    capture_start = None
    if "TARGET_INFO_SESSION_START_TIME" in have and "utcEpochNs" in table_columns(con, "TARGET_INFO_SESSION_START_TIME"):
        row = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
        capture_start = int(row[0]) if row and row[0] is not None else None
    capture: dict[str, Any] = {}
    if "META_DATA_CAPTURE" in have:
        capture = dict(con.execute("SELECT name, value FROM META_DATA_CAPTURE").fetchall())
    return TraceMeta(
        source="nsys", source_file=shown.name, source_sha256=source_sha256 or columns.file_sha256(path),
        source_format=source_format,
        capture_start_ns=capture_start, profiler_version=str(export.get("EXPORT_PRODUCT_VERSION", "")),
        devices=devices, extra={"export": export, "capture": capture, "meta_table": meta_table},
    )


def _to_table(blocks: list[_Block], meta: TraceMeta, names: tuple[dict[int, str], dict[int, str]],
              wanted: frozenset[str] | None = None) -> pa.Table:
    n = sum(len(b) for b in blocks)
    sizes = [len(b) for b in blocks]

    def cat(field: str, fill: int = -1, dtype: type = np.int64) -> np.ndarray:
        """One column over all blocks; the blocks' own arrays are let go as they are joined, so a
        column is not held twice (a few hundred MB on a million-kernel export)."""
        parts = []
        for b, size in zip(blocks, sizes, strict=True):
            v = getattr(b, field)
            parts.append(v if v is not None else np.full(size, fill, dtype))
            setattr(b, field, None)
        joined: np.ndarray = np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)
        del parts
        return joined

    kind = cat("kind", dtype=np.int8)
    start = cat("start")
    dur = cat("dur")
    dur_missing = cat("dur_missing", 0, bool)
    gtid = cat("gtid")
    gpu = np.repeat(np.array([b.gpu for b in blocks], bool), sizes)
    pid = (gtid >> 24) & 0xFFFFFF
    tid = gtid & 0xFFFFFF
    device = cat("device")
    stream = cat("stream")
    corr = cat("corr")
    # Nesting groups: host rows per globalTid; GPU rows per (device, stream), kept apart by sign.
    group = np.where(gpu, -((device + 2) << 32 | (stream & 0xFFFFFFFF)), gtid)
    row_links = links.link(kind, start, np.where(dur_missing, -1, dur), group, corr, pid, None, cat("step"),
                           process=pid)
    del group
    threads, procs = names
    distinct_pid, pid_inverse = columns.factorize(pid)
    proc_labels = [procs.get(int(p)) for p in distinct_pid.tolist()]
    proc_values: dict[str, int] = {}
    proc_code = np.array([-1 if v is None else proc_values.setdefault(v, len(proc_values)) for v in proc_labels] or [-1])

    def optional(column: str, dtype: pa.DataType) -> pa.Array:
        values = np.concatenate([b.optional[column][0] if column in b.optional else np.full(size, -1, np.int64)
                                 for b, size in zip(blocks, sizes, strict=True)]) if blocks else np.zeros(0, np.int64)
        missing = np.concatenate([b.optional.pop(column)[1] if column in b.optional else np.ones(size, bool)
                                  for b, size in zip(blocks, sizes, strict=True)]) if blocks else np.zeros(0, bool)
        return columns.numeric_array(values, dtype, missing if missing.any() else None)

    def dims(attr: str, i: int) -> pa.Array:
        values = np.concatenate([getattr(b, attr)[i] if getattr(b, attr) else np.full(size, -1, np.int64)
                                 for b, size in zip(blocks, sizes, strict=True)]) if blocks else np.zeros(0, np.int64)
        return columns.nullable(values, -1, pa.int32())

    categories = [b.category for b in blocks]
    # Built only where wanted (``columns`` of ``read``): each is called once, in this order.
    build: dict[str, Callable[[], pa.Array | pa.ChunkedArray]] = {
        "kind": lambda: columns.dictionary(kind, columns.KIND_DICTIONARY, pa.int8()),
        "category": lambda: columns.dictionary(np.repeat(np.arange(len(blocks)), sizes), categories),
        "name": lambda: (pa.chunked_array([b.name for b in blocks], pa.dictionary(pa.int32(), pa.string()))
                         .unify_dictionaries().combine_chunks()) if blocks else columns.string_array([]).dictionary_encode(),
        "pid": lambda: columns.nullable(np.where(gpu, -1, pid), -1, pa.int64()),
        "tid": lambda: columns.nullable(np.where(gpu, -1, tid), -1, pa.int64()),
        "process_name": lambda: columns.dictionary(proc_code[pid_inverse] if n else np.zeros(0, np.int64),
                                                   list(proc_values)),
        "thread_name": lambda: _thread_name_column(gpu, stream, gtid, threads),
        "device_id": lambda: columns.nullable(device, -1, pa.int32()),
        "stream_id": lambda: columns.nullable(stream, -1, pa.int64()),
        "start_ns": lambda: columns.numeric_array(start, pa.int64()),
        "dur_ns": lambda: columns.nullable(dur, dur_missing, pa.int64()),
        "correlation_id": lambda: columns.nullable(corr, -1, pa.int64()),
        **{f"{attr}_{axis}": partial(dims, attr, i) for attr in ("grid", "block") for i, axis in enumerate("xyz")},
        "registers_per_thread": lambda: optional("registers_per_thread", pa.int32()),
        "shared_memory_bytes": lambda: optional("shared_memory_bytes", pa.int64()),
        "bytes": lambda: optional("bytes", pa.int64()),
        # One chunk per table: concatenating them would hold the args twice (a third of the table).
        "args": lambda: pa.chunked_array([pa.ExtensionArray.from_storage(schema.ARGS_TYPE, b.args) for b in blocks],
                                         schema.ARGS_TYPE),
    }
    cols = {name: make() for name, make in build.items() if wanted is None or name in wanted}
    return columns.assemble(n, cols, meta, row_links, wanted)


def _thread_name_column(gpu: np.ndarray, stream: np.ndarray, gtid: np.ndarray, threads: dict[int, str]) -> pa.Array:
    """A host row's thread name, a GPU row's stream; looked up once per distinct key."""
    thread_key = np.where(gpu, stream, gtid)
    thread_codes = np.full(gpu.size, -1, np.int64)
    thread_values: dict[str, int] = {}
    for on_gpu in (False, True):
        sel = np.flatnonzero(gpu == on_gpu)
        distinct, inverse = columns.factorize(thread_key[sel])
        labels = [f"stream {k}" if on_gpu else threads.get(int(k)) for k in distinct.tolist()]
        code = np.array([-1 if v is None else thread_values.setdefault(v, len(thread_values)) for v in labels] or [-1])
        thread_codes[sel] = code[inverse]
    return columns.dictionary(thread_codes, list(thread_values))
