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

import re
import shutil
import sqlite3
import subprocess
import tempfile
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tracekit.errors import InputError
from tracekit.ingest import columns, links
from tracekit.ingest.columns import TraceMeta
from tracekit.schema import KIND_CODES

# Fallbacks for 2022.1 exports, which have no ENUM_* tables.
MEMCPY_KINDS = {0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
                5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array", 8: "Device-to-Device",
                9: "Host-to-Host", 10: "Peer-to-Peer", 11: "Unified Host-to-Device", 12: "Unified Device-to-Host",
                13: "Unified Device-to-Device"}
SYNC_TYPES = {0: "Unknown", 1: "Event synchronize", 2: "Stream wait event", 3: "Stream synchronize",
              4: "Context synchronize"}
NVTX_PUSHPOP = (59, 70)
NVTX_STARTEND = (60, 71)
NVTX_MARK = 34
NVTX_DOMAIN_CREATE = 75
# NVTX ranges that mark training/inference steps: tracekit's collectors write "step#N" (nsys shows
# "tracekit:step#N"); ProfilerStep#N is torch.profiler's name, used by some NVTX emitters too.
STEP_RANGE = re.compile(r"^(?:[^:]+:)?(?:ProfilerStep|step)#(\d+)$")


@dataclass
class _Rows:
    """Columns accumulated from the tables, as Python lists (SQLite yields rows anyway)."""

    kind: list[int]
    category: list[str]
    name: list[str]
    start: list[int]
    dur: list[int | None]
    gtid: list[int]        # globalTid (host rows) or globalPid (GPU rows)
    gpu: list[bool]
    device: list[int]
    stream: list[int]
    corr: list[int]
    nvtx_domain: list[int]
    grid: list[tuple[int, int, int] | None]
    block: list[tuple[int, int, int] | None]
    regs: list[int | None]
    shm: list[int | None]
    nbytes: list[int | None]
    args: list[dict[str, Any] | None]

    @classmethod
    def empty(cls) -> _Rows:
        return cls(*([] for _ in range(17)))  # type: ignore[arg-type]

    def add(self, kind: str, category: str, name: str, start: int, dur: int | None, gtid: int, gpu: bool,
            device: int = -1, stream: int = -1, corr: int = -1, domain: int = -1, grid: tuple[int, int, int] | None = None,
            block: tuple[int, int, int] | None = None, regs: int | None = None, shm: int | None = None,
            nbytes: int | None = None, args: dict[str, Any] | None = None) -> None:
        self.kind.append(KIND_CODES[kind]); self.category.append(category); self.name.append(name)  # noqa: E702
        self.start.append(start); self.dur.append(dur); self.gtid.append(gtid); self.gpu.append(gpu)  # noqa: E702
        self.device.append(device); self.stream.append(stream); self.corr.append(corr)  # noqa: E702
        self.nvtx_domain.append(domain); self.grid.append(grid); self.block.append(block)  # noqa: E702
        self.regs.append(regs); self.shm.append(shm); self.nbytes.append(nbytes); self.args.append(args)  # noqa: E702


def open_db(path: Path) -> sqlite3.Connection:
    """Open read-only and immutable, the way nsys's own report scripts do."""
    # The path goes into a URI: quote it, or "#", "?" and "%" in a file name would cut or change it.
    uri = "file:" + urllib.parse.quote(str(Path(path).resolve())) + "?mode=ro&immutable=1"
    try:
        con = sqlite3.connect(uri, uri=True)
        # Names are bytes from the profiled program (NVTX, kernel names): invalid UTF-8 is shown, not fatal.
        con.text_factory = lambda raw: raw.decode("utf-8", "replace")
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


def read_report(path: Path) -> pa.Table:
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
        table = read(out, display_path=path)
    return table


def read(path: Path, display_path: Path | None = None) -> pa.Table:
    """Read an nsys SQLite export into the event table."""
    shown = display_path or path
    con = open_db(path)
    try:
        have = tables(con)
        meta_table = "META_DATA_EXPORT" if "META_DATA_EXPORT" in have else "EXPORT_META_DATA" if "EXPORT_META_DATA" in have else None
        if "StringIds" not in have or (meta_table is None and not any(t.startswith(("CUPTI_", "NVTX_")) for t in have)):
            raise InputError(shown, "SQLite database, but not an Nsight Systems export (no StringIds / META_DATA_EXPORT tables)")
        strings = dict(con.execute("SELECT id, value FROM StringIds").fetchall())
        rows = _Rows.empty()
        _read_kernels(con, have, strings, rows)
        _read_memory_ops(con, have, strings, rows)
        _read_runtime(con, have, strings, rows)
        _read_nvtx(con, have, strings, rows)
        _read_simple(con, have, strings, rows)
        meta = _meta(con, have, meta_table, shown, path)
        names = _thread_names(con, have, strings)
        return _to_table(rows, meta, names)
    except sqlite3.DatabaseError as e:
        raise InputError(shown, f"corrupt or unreadable nsys export ({e})") from None
    except (TypeError, ValueError, OverflowError, KeyError, pa.ArrowException) as e:
        # SQLite columns are untyped: a damaged export can hold text where nsys writes integers.
        raise InputError(shown, f"nsys export with unexpected values ({type(e).__name__}: {e})") from None
    finally:
        con.close()


def _int(v: Any, default: int = -1) -> int:
    return int(v) if isinstance(v, int) else default


def _read_kernels(con: sqlite3.Connection, have: set[str], strings: dict[int, str], rows: _Rows) -> None:
    table = "CUPTI_ACTIVITY_KIND_KERNEL"
    if table not in have:
        return
    cols, cur = _select(con, table)
    for r in cur:
        d = dict(zip(cols, r, strict=True))
        start, end = d.pop("start"), d.pop("end")
        name = strings.get(d["demangledName"], "") if d.get("demangledName") is not None else ""
        for k in ("shortName", "mangledName"):
            if d.get(k) is not None:
                d[k] = strings.get(d[k], d[k])
        d.pop("demangledName", None)
        grid = (d.pop("gridX", None), d.pop("gridY", None), d.pop("gridZ", None))
        block = (d.pop("blockX", None), d.pop("blockY", None), d.pop("blockZ", None))
        ss, ds = d.pop("staticSharedMemory", None), d.pop("dynamicSharedMemory", None)
        rows.add("gpu_kernel", table, name, start, end - start, _int(d.pop("globalPid", None), 0), True,
                 _int(d.pop("deviceId", None)), _int(d.pop("streamId", None)), _int(d.pop("correlationId", None)),
                 grid=grid if None not in grid else None, block=block if None not in block else None,
                 regs=d.pop("registersPerThread", None),
                 shm=(ss or 0) + (ds or 0) if ss is not None or ds is not None else None,
                 args={k: v for k, v in d.items() if v is not None} or None)


def _read_memory_ops(con: sqlite3.Connection, have: set[str], strings: dict[int, str], rows: _Rows) -> None:
    copy_kinds = _enum(con, have, "ENUM_CUDA_MEMCPY_OPER", MEMCPY_KINDS)
    sync_types = _enum(con, have, "ENUM_CUPTI_SYNC_TYPE", SYNC_TYPES)
    specs = (
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "gpu_memcpy"),
        ("CUPTI_ACTIVITY_KIND_MEMSET", "gpu_memset"),
        ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "gpu_sync"),
        ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "gpu_graph"),
    )
    for table, kind in specs:
        if table not in have:
            continue
        cols, cur = _select(con, table)
        for r in cur:
            d = dict(zip(cols, r, strict=True))
            start, end = d.pop("start"), d.pop("end")
            if kind == "gpu_memcpy":
                name = f"[CUDA memcpy {copy_kinds.get(_id(d.get('copyKind')), 'Unknown')}]"
            elif kind == "gpu_memset":
                name = "[CUDA memset]"
            elif kind == "gpu_sync":
                name = f"[CUDA {sync_types.get(_id(d.get('syncType')), 'synchronization')}]"
            else:
                name = f"[CUDA graph {d.get('graphId', '')}]"
            rows.add(kind, table, name, start, end - start, _int(d.pop("globalPid", None), 0), True,
                     _int(d.pop("deviceId", None)), _int(d.pop("streamId", None)), _int(d.pop("correlationId", None)),
                     nbytes=d.pop("bytes", None), args={k: v for k, v in d.items() if v is not None} or None)


def api_display_name(raw: str) -> str:
    """The API name as ``nsys stats`` prints it: nsys drops the last 6 characters when they start
    with ``_v`` (``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``), exactly its SQL
    ``substr(name, -6, 2) == '_v'``."""
    return raw[:-6] if len(raw) >= 6 and raw[-6:-4] == "_v" else raw


def _read_runtime(con: sqlite3.Connection, have: set[str], strings: dict[int, str], rows: _Rows) -> None:
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if table not in have:
        return
    cols, cur = _select(con, table)
    for r in cur:
        d = dict(zip(cols, r, strict=True))
        start, end = d.pop("start"), d.pop("end")
        raw = strings.get(d.pop("nameId", None), "")
        name = api_display_name(raw)
        kind = "driver_api" if name.startswith("cu") and not name.startswith("cuda") else "runtime_api"
        if raw != name:
            d["name_raw"] = raw
        rows.add(kind, table, name, start, end - start, _int(d.pop("globalTid", None), 0), False,
                 corr=_int(d.pop("correlationId", None)), args={k: v for k, v in d.items() if v is not None} or None)


def _id(value: Any) -> int:
    """A nullable integer id as a dict key (-1 for NULL, which no table uses)."""
    return -1 if value is None else int(value)


def _read_nvtx(con: sqlite3.Connection, have: set[str], strings: dict[int, str], rows: _Rows) -> None:
    table = "NVTX_EVENTS"
    if table not in have:
        return
    cols, cur = _select(con, table)
    records = [dict(zip(cols, r, strict=True)) for r in cur]
    # Domain names per (process, domainId), from the NvtxDomainCreate rows.
    domains: dict[tuple[int, int], str] = {}
    for d in records:
        if d.get("eventType") == NVTX_DOMAIN_CREATE and d.get("domainId") is not None:
            key = ((d.get("globalTid") or 0) & 0xFFFFFFFFFF000000, d["domainId"])
            if key not in domains:
                domains[key] = d.get("text") or strings.get(_id(d.get("textId")), "") or ""
    for d in records:
        etype = d.pop("eventType", None)
        start, end = d.pop("start"), d.pop("end", None)
        text_id = d.pop("textId", None)
        text = strings.get(text_id) if text_id is not None else None
        if text is None:
            text = d.get("text") or ""
        d.pop("text", None)
        gtid = _int(d.pop("globalTid", None), 0)
        domain_id = d.get("domainId")
        domain = domains.get((gtid & 0xFFFFFFFFFF000000, domain_id)) if domain_id else None
        if etype in NVTX_PUSHPOP or etype in NVTX_STARTEND:
            name = f"{domain}:{text}" if domain else text
            kind = "step" if STEP_RANGE.match(name) else "user_range"
            d["style"] = "PushPop" if etype in NVTX_PUSHPOP else "StartEnd"
        elif etype == NVTX_MARK:
            kind, name = "marker", (f"{domain}:{text}" if domain else text)
        else:
            kind, name = "metadata", text
        d["eventType"] = etype
        dur = end - start if end is not None else (0 if kind in ("marker", "metadata") else None)
        rows.add(kind, table, name, start, dur, gtid, False, domain=_int(domain_id),
                 args={k: v for k, v in d.items() if v is not None} or None)


def _read_simple(con: sqlite3.Connection, have: set[str], strings: dict[int, str], rows: _Rows) -> None:
    """Host-side tables with (start, end, globalTid, nameId)."""
    specs = (("CUDNN_EVENTS", "gpu_library_api"), ("CUBLAS_EVENTS", "gpu_library_api"),
             ("PROFILER_OVERHEAD", "overhead"), ("CUDA_GRAPH_EVENTS", "other"), ("CUDA_GRAPH_NODE_EVENTS", "other"),
             ("OSRT_API", "other"))
    for table, kind in specs:
        if table not in have:
            continue
        cols, cur = _select(con, table)
        if "start" not in cols:
            continue
        for r in cur:
            d = dict(zip(cols, r, strict=True))
            start, end = d.pop("start"), d.pop("end", None)
            name = strings.get(d.pop("nameId", None), "") if "nameId" in d else ""
            rows.add(kind, table, name, start, (end - start) if end is not None else None,
                     _int(d.pop("globalTid", None), 0), False, args={k: v for k, v in d.items() if v is not None} or None)


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


def _meta(con: sqlite3.Connection, have: set[str], meta_table: str | None, shown: Path, path: Path) -> TraceMeta:
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
        source="nsys", source_file=shown.name, source_sha256=columns.file_sha256(path), source_format="nsys-sqlite",
        capture_start_ns=capture_start, profiler_version=str(export.get("EXPORT_PRODUCT_VERSION", "")),
        devices=devices, extra={"export": export, "capture": capture, "meta_table": meta_table},
    )


def _to_table(rows: _Rows, meta: TraceMeta, names: tuple[dict[int, str], dict[int, str]]) -> pa.Table:
    n = len(rows.kind)
    kind = np.array(rows.kind, np.int8)
    start = np.array(rows.start, np.int64)
    dur_missing = np.array([d is None for d in rows.dur], bool)
    dur = np.array([d if d is not None else -1 for d in rows.dur], np.int64)
    gtid = np.array(rows.gtid, np.uint64).astype(np.int64) if n else np.zeros(0, np.int64)
    gpu = np.array(rows.gpu, bool)
    pid = (gtid >> 24) & 0xFFFFFF
    tid = gtid & 0xFFFFFF
    device = np.array(rows.device, np.int64)
    stream = np.array(rows.stream, np.int64)
    corr = np.array(rows.corr, np.int64)
    # Nesting groups: host rows per globalTid; GPU rows per (device, stream), kept apart by sign.
    group = np.where(gpu, -((device + 2) << 32 | (stream & 0xFFFFFFFF)), gtid)
    step_numbers = np.full(n, -1, np.int64)
    for row in np.flatnonzero(kind == KIND_CODES["step"]):
        step_numbers[row] = int(STEP_RANGE.match(rows.name[row]).group(1))  # type: ignore[union-attr]
    row_links = links.link(kind, start, np.where(dur_missing, -1, dur), group, corr, pid, None, step_numbers,
                        process=pid)
    threads, procs = names
    thread_name = [None if g else threads.get(t) for g, t in zip(rows.gpu, rows.gtid, strict=True)]
    thread_name = [f"stream {s}" if g else t for g, s, t in zip(rows.gpu, rows.stream, thread_name, strict=True)]
    process_name = [procs.get(int(p)) for p in pid]

    def triple(values: list[tuple[int, int, int] | None], i: int) -> pa.Array:
        return columns.nullable(np.array([v[i] if v else -1 for v in values], np.int64), -1, pa.int32())

    def opt(values: list[int | None], dtype: pa.DataType) -> pa.Array:
        return pa.array(values, dtype)

    cols = {
        "kind": columns.dictionary(kind, columns.KIND_DICTIONARY, pa.int8()),
        "category": pa.array(rows.category, pa.string()).dictionary_encode(),
        "name": pa.array(rows.name, pa.string()).dictionary_encode(),
        "pid": columns.nullable(np.where(gpu, -1, pid), -1, pa.int64()),
        "tid": columns.nullable(np.where(gpu, -1, tid), -1, pa.int64()),
        "process_name": pa.array(process_name, pa.string()).dictionary_encode(),
        "thread_name": pa.array(thread_name, pa.string()).dictionary_encode(),
        "device_id": columns.nullable(device, -1, pa.int32()),
        "stream_id": columns.nullable(stream, -1, pa.int64()),
        "start_ns": pa.array(start, pa.int64()),
        "dur_ns": columns.nullable(dur, dur_missing, pa.int64()),
        "correlation_id": columns.nullable(corr, -1, pa.int64()),
        "grid_x": triple(rows.grid, 0), "grid_y": triple(rows.grid, 1), "grid_z": triple(rows.grid, 2),
        "block_x": triple(rows.block, 0), "block_y": triple(rows.block, 1), "block_z": triple(rows.block, 2),
        "registers_per_thread": opt(rows.regs, pa.int32()),
        "shared_memory_bytes": opt(rows.shm, pa.int64()),
        "bytes": opt(rows.nbytes, pa.int64()),
        "args": columns.json_args_from_objects(rows.args),
    }
    return columns.assemble(n, cols, meta, row_links)
