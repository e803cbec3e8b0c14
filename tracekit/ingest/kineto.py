"""torch.profiler / Kineto Chrome-trace JSON (plain or gzip) -> event table.

Top level of a Kineto file (torch 2.x; older files lack some keys, HTA test files have only
``distributedInfo`` + ``traceEvents``)::

    {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "...", ...}],
     "distributedInfo": {...}, "cuda_runtime_version": ..., "trace_id": "...",
     "baseTimeNanoseconds": 1790857026000000000,      # ts below is µs relative to this
     "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 14694, "tid": 14694,
         "ts": 4448850339198.843, "dur": 924.708, "args": {"External id": 15877, ...}},
        {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, ..., "args": {"correlation": 135071,
         "stream": 7, "device": 0, "grid": [4, 106, 1], "block": [128, 1, 1], ...}},
        {"ph": "s", "cat": "ac2g", "id": 135071, ...}, {"ph": "M", "name": "thread_name", ...},
        {"ph": "X", "cat": "Trace", "pid": "Spans", "tid": "PyTorch Profiler", ...}, ...],
     "traceName": "..."}

The JSON is scanned by ``tracekit._native.scanner``: the C extension (``kineto_scan.c``), which fills
column buffers directly, or its pure-Python stand-in when the extension was not built.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

from tracekit import _native, schema
from tracekit.errors import InputError
from tracekit.ingest import columns, links
from tracekit.ingest.columns import TraceMeta
from tracekit.ingest.files import gunzip
from tracekit.ingest.links import Links
from tracekit.schema import KIND_CODES

# Kineto category (lower-cased) -> kind. Old traces use `Kernel`, `Runtime`, `Memcpy`, `Memset`.
CATEGORY_KINDS = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "user_range",
    "gpu_user_annotation": "gpu_user_range",
    "python_function": "python_function",
    "kernel": "gpu_kernel",
    "gpu_memcpy": "gpu_memcpy",
    "memcpy": "gpu_memcpy",
    "gpu_memset": "gpu_memset",
    "memset": "gpu_memset",
    "cuda_runtime": "runtime_api",
    "runtime": "runtime_api",
    "cuda_driver": "driver_api",
    "driver": "driver_api",
    "cuda_sync": "gpu_sync",
    # Other devices' host APIs (libkineto's ActivityType names): Intel GPUs through PTI
    # (urEnqueueKernelLaunch, with the kernel's correlation id, as CUPTI's), MTIA, and out-of-tree
    # "PrivateUse1" backends. ROCm's HIP calls are recorded as cuda_runtime.
    "xpu_runtime": "runtime_api",
    "xpu_driver": "driver_api",
    "xpu_sync": "gpu_sync",
    "mtia_runtime": "runtime_api",
    "privateuse1_runtime": "runtime_api",
    "privateuse1_driver": "driver_api",
    "trace": "trace_span",
    "overhead": "overhead",
    "cpu_instant_event": "marker",
    # tracekit's export (tracekit.export.kineto_json) for kinds Kineto has no category for.
    "gpu_library_api": "gpu_library_api",
    "gpu_graph": "gpu_graph",
}
# Kinds whose pid is a device: GPU activities and the user ranges mirrored on the GPU timeline.
GPU_CATEGORY_KINDS = {*schema.GPU_ACTIVITY_KINDS, "gpu_user_range"}
STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
# An op named with its overload: torch.profiler's _ExperimentalConfig(capture_overload_names=True) names
# aten::add.Tensor, aten::mean.dim, aten::sum.IntList_out, mylib::op.default. The overload is dropped
# on reading (aten::add): every rule, class and comparison reads op names without it, and a trace
# with overloads then reads as the same workload's without (it was "ops tracekit has no class for:
# aten::div.Tensor, aten::lerp_.Scalar"). No event other than an op is named namespace::name.word.
OVERLOADED_OP = re.compile(r"^(\w+::\w+)\.\w+$")


def read(path: Path, raw: bytes | bytearray | None = None, gz: bool = False, file_sha256: str | None = None) -> pa.Table:
    """Read a Kineto trace file into the event table.

    Args:
        path: the file (plain JSON or gzip).
        raw: already-decompressed bytes of a gzip file, if the caller has them.
        gz: whether ``path`` is gzip-compressed.
        file_sha256: the sha256 of the file's bytes, if the caller has it (not hashed again).
    """
    if gz:
        # The sha256 (the trace id) is of the file as stored, hashed while gzip inflates it.
        with ThreadPoolExecutor(max_workers=1) as pool:
            sha = _known(file_sha256) if file_sha256 else pool.submit(columns.file_sha256, path)
            if raw is None:
                raw = gunzip(path)
            return _from_buffer(path, raw, release=False, fmt="kineto-json-gz", sha=lambda: sha)
    with open(path, "rb") as f, _mapped(path, f) as mm:
        # The pool is inside the mapping: it waits for the hash before the mapping closes. The hash
        # starts once the scan is done: the scan keeps every core busy, the linking after it one.
        stop = threading.Event()
        with ThreadPoolExecutor(max_workers=1) as pool:
            def hash_mapping() -> Future[str]:
                return _known(file_sha256) if file_sha256 else pool.submit(_sha256_of_mapping, mm, stop)
            try:
                return _from_buffer(path, mm, release=True, fmt="kineto-json", sha=hash_mapping)
            finally:
                stop.set()


def _known(sha256: str) -> Future[str]:
    done: Future[str] = Future()
    done.set_result(sha256)
    return done


def _mapped(path: Path, f: BinaryIO) -> mmap.mmap:
    """The whole open file mapped read-only (mmap refuses an empty file: say so instead)."""
    if f.seek(0, 2) == 0:
        raise InputError(path, "the file is empty")
    return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _sha256_of_mapping(mm: mmap.mmap, stop: threading.Event) -> str:
    """sha256 of a mapped file, hashed in place (no read copies), dropping each chunk's pages after
    it as the scanner does, so that the hash does not hold the whole file in memory."""
    h = hashlib.sha256()
    chunk = 16 << 20
    view = memoryview(mm)
    try:
        for start in range(0, len(mm), chunk):
            if stop.is_set():
                return ""
            h.update(view[start:start + chunk])
            if hasattr(mmap, "MADV_DONTNEED"):
                mm.madvise(mmap.MADV_DONTNEED, start, min(chunk, len(mm) - start))
    finally:
        view.release()
    return h.hexdigest()


def _from_buffer(path: Path, buf: bytes | bytearray | mmap.mmap, release: bool, fmt: str,
                 sha: Callable[[], Future[str]]) -> pa.Table:
    """The table of a whole-file buffer; ``sha()`` starts (or gives) the file's hash, called once
    the scan is done."""
    try:
        r = _native.scanner.scan(buf, release, _native.scan_threads())
    except ValueError as e:
        raise InputError(path, f"invalid trace JSON: {e}") from None
    hashed = sha()
    # The C scanner gives byte spans of the other top-level keys; the pure-Python one, decoded pairs.
    items = r.get("header_items")
    if items is None:
        items = [(json.loads(bytes(buf[k0:k1])), json.loads(bytes(buf[v0:v1]))) for k0, k1, v0, v1 in r["header"]]
    if not r["found_events"]:
        raise InputError(path, _not_a_trace_reason([k for k, _ in items]))
    if r["n"] and not has_phases(r):
        raise InputError(path, NO_PHASES)
    return _to_table(path, r, dict(items), fmt, hashed)


# Chrome's trace format requires "ph" on every event; a JSON list of other records (a TensorBoard
# tool's table, a metrics dump) is read as events without one.
NO_PHASES = "no event has a 'ph' (phase) field, which every Chrome/Kineto trace event has: not a trace"


def has_phases(r: dict) -> bool:
    """Whether any event of scan result ``r`` has a phase."""
    return bool(np.frombuffer(r["ph"], np.uint8).any())


def _not_a_trace_reason(keys: list[str]) -> str:
    if "traceEvents" in keys:
        return "'traceEvents' is not a list"
    if {"schema", "nodes"} <= set(keys):  # torch.profiler's ExecutionTraceObserver output (Chakra schema)
        return ("a PyTorch execution trace (ExecutionTraceObserver: a graph of op nodes, no timings), not a "
                "Kineto trace: give the Chrome trace the same profiler run exports (export_chrome_trace)")
    shown = ", ".join(repr(k) for k in keys[:5]) or "none"
    return f"JSON without 'traceEvents' (top-level keys: {shown}); not a Chrome/Kineto trace"


def _pid_values(values: list[str]) -> tuple[np.ndarray, list[str]]:
    """Numeric value (or -1) of each interned pid/tid string, and the string labels. A number
    outside int64 (or not a whole number) keeps only its label."""
    nums = np.full(len(values), -1, np.int64)
    for i, v in enumerate(values):
        try:
            number = int(v)
        except ValueError:
            try:
                f = float(v)
            except ValueError:
                continue
            if not f.is_integer():
                continue
            number = int(f)
        if -(2**63) <= number < 2**63:
            nums[i] = number
    return nums, values


def _kinds(ph: np.ndarray, cat: np.ndarray, cat_values: list[str], name: np.ndarray, name_values: list[str]) -> np.ndarray:
    """Kind code per row from (ph, cat) and, for steps and memory events, the name."""
    # Kind of each distinct category, computed once and mapped back through the codes.
    cat_kind = np.array([KIND_CODES[CATEGORY_KINDS.get(c.lower(), "other")] for c in cat_values] + [KIND_CODES["other"]], np.int8)
    kind = cat_kind[np.where(cat >= 0, cat, len(cat_values))]
    by_ph = {
        ord("M"): "metadata", ord("s"): "flow", ord("f"): "flow", ord("t"): "flow",
        ord("C"): "counter", ord("i"): "marker", ord("I"): "marker", ord("R"): "marker",
    }
    for code, k in by_ph.items():
        kind[ph == code] = KIND_CODES[k]
    # Uncategorised complete events are host ranges (e.g. hand-written or Perfetto-exported).
    kind[(cat < 0) & links.byte_mask(ph, [ord("X"), ord("B")])] = KIND_CODES["user_range"]
    step_codes = [i for i, v in enumerate(name_values) if STEP_NAME.match(v)]
    if step_codes:
        # torch >= 1.10 writes ProfilerStep#N as user_annotation; torch <= 1.9 as cat "Operator" (a cpu_op).
        host_range = links.kind_mask(kind, "user_range", "cpu_op")
        kind[np.isin(name, step_codes) & host_range] = KIND_CODES["step"]
    memory_codes = [i for i, v in enumerate(name_values) if v == "[memory]"]
    if memory_codes:
        kind[np.isin(name, memory_codes) & (kind == KIND_CODES["marker"])] = KIND_CODES["memory"]
    return kind


MISSING = np.iinfo(np.int64).min  # the scanner's "absent" for int64 fields
MISSING_32 = np.iinfo(np.int32).min  # and for int32 fields
# Chrome phases without a duration: instants, flows, metadata, counters. Their dur is 0, not unknown.
_NO_DURATION_PHASES = [ord(c) for c in "iIMsftCR"]
# Timestamps stay below 2^62 ns (year 2116) so that start + duration never overflows int64.
TIME_LIMIT_NS = 1 << 62

# How the table is built. A scan result (the whole file, or one window of its events for
# kineto_windows) has its interned codes put onto the trace's dictionaries (`Dictionaries`), its
# row-local columns computed (`WindowRows`), and what linking needs of its rows added to `Facts`.
# Once every row is in, `Facts.link` pairs B/E events and links the rows; `window_table` then builds
# each window's part of the table from its scan, its rows and the links.


class Dictionaries:
    """The trace's category, name, pid and tid values in first-seen order over every window. Each
    scan interns its own codes; ``adopt`` maps them onto these."""

    FIELDS = ("cat", "name", "pid", "tid")

    def __init__(self) -> None:
        self.values: dict[str, list[str]] = {f: [] for f in self.FIELDS}
        self._index: dict[str, dict[str, int]] = {f: {} for f in self.FIELDS}
        self._pid_numbers: list[int] = []
        self._tid_numbers: list[int] = []

    def adopt(self, r: dict) -> None:
        """Replace the code columns of scan result ``r`` by codes into these dictionaries."""
        for f in self.FIELDS:
            local, index, values = r[f + "_values"], self._index[f], self.values[f]
            if f == "name":
                local = [OVERLOADED_OP.sub(r"\1", v) if "." in v else v for v in local]
            mapping = np.empty(len(local) + 1, np.int32)
            for i, v in enumerate(local):
                code = index.get(v)
                if code is None:
                    code = index[v] = len(values)
                    values.append(v)
                mapping[i] = code
            mapping[-1] = -1  # code -1 (absent) stays -1
            codes = np.frombuffer(r[f], np.int32)
            if not np.array_equal(mapping[:-1], np.arange(len(local))):
                codes = mapping[codes]
            r[f], r[f + "_values"] = codes, values

    def pid_lookup(self) -> np.ndarray:
        """Numeric pid per pid code, with a trailing -1 for "absent" (code -1 indexes it)."""
        return self._numbers(self.values["pid"], self._pid_numbers)

    def tid_lookup(self) -> np.ndarray:
        return self._numbers(self.values["tid"], self._tid_numbers)

    @staticmethod
    def _numbers(values: list[str], known: list[int]) -> np.ndarray:
        if len(known) < len(values):
            known.extend(_pid_values(values[len(known):])[0].tolist())
        return np.array([*known, -1], np.int64)


@dataclass
class WindowRows:
    """Row-local columns of one scan result, codes already adopted."""

    ph: np.ndarray
    cat: np.ndarray
    name: np.ndarray
    pid_c: np.ndarray
    tid_c: np.ndarray
    kind: np.ndarray
    ts: np.ndarray  # ns relative to the trace's base time (absent -> 0)
    dur: np.ndarray  # absent stays MISSING, except phases without a duration (0)
    gpu_rows: np.ndarray
    device: np.ndarray
    stream: np.ndarray

    @classmethod
    def of(cls, r: dict, dicts: Dictionaries) -> WindowRows:
        ph = np.frombuffer(r["ph"], np.uint8)
        cat, name, pid_c, tid_c = r["cat"], r["name"], r["pid"], r["tid"]
        ts = np.frombuffer(r.pop("ts"), np.int64).copy()  # popped: the scan's copy goes at once
        ts[ts == MISSING] = 0
        dur = np.frombuffer(r.pop("dur"), np.int64).copy()
        dur[links.byte_mask(ph, _NO_DURATION_PHASES) & (dur == MISSING)] = 0
        kind = _kinds(ph, cat, dicts.values["cat"], name, dicts.values["name"])
        gpu_rows = np.flatnonzero(links.kind_mask(kind, *GPU_CATEGORY_KINDS))
        device, stream = _device_and_stream(r, gpu_rows, dicts.pid_lookup()[pid_c[gpu_rows]],
                                            dicts.tid_lookup()[tid_c[gpu_rows]])
        return cls(ph, cat, name, pid_c, tid_c, kind, ts, dur, gpu_rows, device, stream)


@dataclass
class Linked:
    """Every row's kind, times and links, and the trace-wide labels, once all rows are in."""

    kind: np.ndarray
    ts: np.ndarray  # absolute ns
    dur: np.ndarray
    keep: np.ndarray | None  # None: every row is kept (no B/E pairs)
    new_index: np.ndarray | None  # row -> row in the kept table, when rows are dropped
    links: Links
    process_labels: list[str]
    thread_pairs: np.ndarray  # sorted (pid code + 1) << 32 | (tid code + 1) keys present
    thread_codes: np.ndarray  # label code of each present pair (-1: null)
    thread_labels: list[str]
    category_none: bool  # some row has no category: "<none>" ends the category dictionary


class Facts:
    """What linking needs of every row, added window by window: about 41 bytes a row, plus the few
    B/E, step and metadata rows."""

    def __init__(self) -> None:
        self.n = 0
        self._chunks: dict[str, list[np.ndarray]] = {k: [] for k in ("kind", "ts", "dur", "group", "correlation", "external_id")}
        self._steps: list[tuple[np.ndarray, np.ndarray]] = []
        self._begin_end: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._pairs: list[np.ndarray] = []
        self._process_meta: dict[int, str] = {}
        self._thread_meta: dict[tuple[int, int], str] = {}
        self._category_none = False

    def add(self, r: dict, rows: WindowRows, dicts: Dictionaries) -> None:
        chunk = {"kind": rows.kind, "ts": rows.ts, "dur": rows.dur,
                 "group": _nesting_groups(rows.pid_c, rows.tid_c, rows.gpu_rows, rows.device, rows.stream),
                 "correlation": np.frombuffer(r["correlation"], np.int64),
                 "external_id": np.frombuffer(r["external_id"], np.int64)}
        for key, values in chunk.items():
            self._chunks[key].append(values)
        step_rows = np.flatnonzero(rows.kind == KIND_CODES["step"])
        if step_rows.size:
            names = dicts.values["name"]
            numbers = [int(STEP_NAME.match(names[c]).group(1)) for c in rows.name[step_rows]]  # type: ignore[union-attr]
            self._steps.append((self.n + step_rows, np.array(numbers, np.int64)))
        be = np.flatnonzero(links.byte_mask(rows.ph, [ord("B"), ord("E")]))
        if be.size:
            self._begin_end.append((self.n + be, rows.ph[be], _thread_keys(rows.pid_c[be], rows.tid_c[be])))
        self._pairs.append(columns.factorize(_thread_keys(rows.pid_c, rows.tid_c))[0])
        self._read_metadata_labels(r, rows, dicts)
        self._category_none |= bool((rows.cat < 0).any())
        self.n += rows.kind.size

    def _read_metadata_labels(self, r: dict, rows: WindowRows, dicts: Dictionaries) -> None:
        """process_name / thread_name labels from `M` metadata events (the last one wins)."""
        offsets = np.frombuffer(r["args_offsets"], np.int64)
        args_data = memoryview(r["args_data"])
        names = dicts.values["name"]
        for i in np.flatnonzero(rows.ph == ord("M")):
            meta_name = names[rows.name[i]] if rows.name[i] >= 0 else ""
            if meta_name not in ("process_name", "thread_name"):
                continue
            try:
                label = json.loads(bytes(args_data[offsets[i]:offsets[i + 1]]) or b"{}").get("name")
            except (ValueError, AttributeError):
                label = None
            if not isinstance(label, str):
                continue
            if meta_name == "process_name":
                self._process_meta[int(rows.pid_c[i])] = label
            else:
                self._thread_meta[(int(rows.pid_c[i]), int(rows.tid_c[i]))] = label

    def _take(self, key: str) -> np.ndarray:
        """One column of every row; its chunks are dropped as it is joined."""
        chunks = self._chunks.pop(key)
        if len(chunks) == 1:
            return chunks.pop()
        out = np.empty(sum(c.size for c in chunks), chunks[0].dtype)
        at = 0
        while chunks:
            c = chunks.pop(0)
            out[at:at + c.size] = c
            at += c.size
        del c
        return_freed_memory()  # the chunks' heap pages, else held under the linker's peak
        return out

    def link(self, path: Path, base_ns: int, dicts: Dictionaries) -> Linked:
        n = self.n
        kind, dur = self._take("kind"), self._take("dur")
        ts = self._take("ts")
        if ts.size and base_ns and int(ts.max()) >= TIME_LIMIT_NS - base_ns:
            raise InputError(path, "timestamps plus baseTimeNanoseconds go beyond 2^62 ns")
        ts += base_ns
        keep = _pair_begin_end(self._begin_end, ts, dur, n)
        step_numbers = np.full(n, -1, np.int64)
        for rows, numbers in self._steps:
            step_numbers[rows] = numbers
        group = self._take("group")
        # Host groups carry the process in their high bits: steps hold only their own process's rows.
        process = (group >> 32).astype(np.int32)
        # Rows dropped (E halves of B/E pairs) must not take part in links. Missing values are INT64_MIN,
        # which link() reads as "none" (negative), so no sentinel-replacing copies are needed.
        kind_links = kind if keep is None else np.where(keep, kind, KIND_CODES["metadata"]).astype(np.int8)
        # The per-row inputs go to link_owned with no other reference held, so it frees each when done.
        owned: dict[str, np.ndarray | None] = {"group": group, "step_numbers": step_numbers, "process": process}
        del group, step_numbers, process
        owned["correlation"] = self._take("correlation")
        owned["external_id"] = self._take("external_id")
        row_links = links.link_owned(kind_links, ts, dur, owned, np.zeros(1, np.int64))
        del kind_links
        pid_labels, tid_labels = dicts.values["pid"], dicts.values["tid"]
        pairs, codes, labels = self._thread_labels(tid_labels)
        return Linked(
            kind=kind, ts=ts, dur=dur, keep=keep, new_index=None if keep is None else np.cumsum(keep) - 1,
            links=row_links, process_labels=[self._process_meta.get(i, pid_labels[i]) for i in range(len(pid_labels))],
            thread_pairs=pairs, thread_codes=codes, thread_labels=labels, category_none=self._category_none,
        )

    def _thread_labels(self, tid_labels: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """The (pid code, tid code) pairs present, in order, and each one's thread label: its
        thread_name metadata, else the raw tid text (null without a tid)."""
        pairs = columns.distinct(np.concatenate(self._pairs)) if self._pairs else np.zeros(0, np.int64)
        labels: list[str | None] = []
        for key in pairs.tolist():
            p, t = (key >> 32) - 1, (key & 0xFFFFFFFF) - 1
            labels.append(self._thread_meta.get((p, t), tid_labels[t] if t >= 0 else None))
        codes = np.arange(len(labels), dtype=np.int32)
        codes[[lab is None for lab in labels]] = -1
        return pairs, codes, ["" if lab is None else lab for lab in labels]


# Below this many events a whole-file read leaves only a few MB of freed heap (~125 bytes an event),
# and handing it back cost more than it saved: the next file read in the process (a dataset ingest,
# a Dask worker) page-faults it in again (68,692 events: 2,150 faults and 5% of the read).
TRIM_MIN_ROWS = 100_000


def return_freed_memory() -> None:
    """Give the C heap's free pages back to the system. glibc keeps the pages of many freed small
    arrays (a window's facts) as holes in its heap; without this they stay in the process under
    the linker's and the second pass's peaks (~30 bytes a row with 4 MiB windows)."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            import ctypes

            _MALLOC_TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False  # not glibc: nothing to do
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM: Any = None


def _thread_keys(pid_c: np.ndarray, tid_c: np.ndarray) -> np.ndarray:
    return ((pid_c.astype(np.int64) + 1) << 32) | (tid_c.astype(np.int64) + 1)


def _pair_begin_end(begin_end: list[tuple[np.ndarray, np.ndarray, np.ndarray]], ts: np.ndarray, dur: np.ndarray,
                    n: int) -> np.ndarray | None:
    """Give each B event the duration up to its matching E (same pid and tid); returns the mask of
    rows to keep (E rows go), or None when there are no B/E events.

    B/E pairs are rare in Kineto output (it writes X), so a Python loop over them is fine.
    """
    if not begin_end:
        return None
    rows = np.concatenate([b[0] for b in begin_end])
    ph = np.concatenate([b[1] for b in begin_end])
    thread = np.concatenate([b[2] for b in begin_end])
    keep = np.ones(n, bool)
    stacks: dict[int, list[int]] = {}
    for j in np.argsort(ts[rows], kind="stable"):
        i = int(rows[j])
        if ph[j] == ord("B"):
            stacks.setdefault(int(thread[j]), []).append(i)
        else:
            keep[i] = False
            stack = stacks.get(int(thread[j]))
            if stack:
                b = stack.pop()
                dur[b] = ts[i] - ts[b]
    return keep


def _to_table(path: Path, r: dict, header: dict, fmt: str, sha256: Future[str]) -> pa.Table:
    """The event table of a whole-file scan ``r``: one window. The hash is waited for last."""
    dicts = Dictionaries()
    dicts.adopt(r)
    rows = WindowRows.of(r, dicts)
    facts = Facts()
    facts.add(r, rows, dicts)
    linked = facts.link(path, _base_time(path, header), dicts)
    rows_read = facts.n
    del facts
    if rows_read >= TRIM_MIN_ROWS:
        return_freed_memory()
    return window_table(r, rows, linked, 0, dicts, _meta(path, header, fmt, sha256.result(), dicts.values["cat"]))


def window_table(r: dict, rows: WindowRows, linked: Linked, first_row: int, dicts: Dictionaries,
                 meta: TraceMeta) -> pa.Table:
    """The table's rows of one window (rows ``first_row`` on, as many as ``r`` holds), E halves of
    B/E pairs left out and row references renumbered to the kept table. The scan's raw buffers are
    dropped as they are converted."""
    n = rows.kind.size
    part = slice(first_row, first_row + n)
    pid_lookup, tid_lookup = dicts.pid_lookup(), dicts.tid_lookup()
    # Host columns: GPU rows have no host pid/tid.
    pid, tid = pid_lookup[rows.pid_c], tid_lookup[rows.tid_c]
    pid[rows.gpu_rows] = -1
    tid[rows.gpu_rows] = -1
    cats = dicts.values["cat"]
    process_labels = linked.process_labels
    thread_codes = linked.thread_codes[np.searchsorted(linked.thread_pairs, _thread_keys(rows.pid_c, rows.tid_c))]
    cols: dict[str, pa.Array] = {
        "kind": columns.dictionary(rows.kind, columns.KIND_DICTIONARY, pa.int8()),
        "category": columns.dictionary(np.where(rows.cat >= 0, rows.cat, len(cats)), cats + ["<none>"])
        if linked.category_none else columns.dictionary(rows.cat, cats),
        "name": columns.dictionary(rows.name, dicts.values["name"]),
        "pid": columns.nullable(pid, -1, pa.int64()),
        "tid": columns.nullable(tid, -1, pa.int64()),
        "process_name": columns.dictionary(rows.pid_c, process_labels) if process_labels
        else columns.null_array(n, pa.dictionary(pa.int32(), pa.string())),
        "thread_name": columns.dictionary(thread_codes, linked.thread_labels),
        "device_id": columns.nullable(rows.device, -1, pa.int32()),
        "stream_id": columns.nullable(rows.stream, MISSING, pa.int64()),
        "start_ns": columns.numeric_array(linked.ts[part], pa.int64()),
        "dur_ns": columns.nullable(linked.dur[part], MISSING, pa.int64()),
        "args": columns.json_args(np.frombuffer(r.pop("args_offsets"), np.int64), r.pop("args_data")),
    }
    del pid, tid, thread_codes
    for c in ("correlation", "external_id", "flow_id", "shared_memory", "bytes"):
        name = {"correlation": "correlation_id", "shared_memory": "shared_memory_bytes"}.get(c, c)
        cols[name] = columns.nullable(np.frombuffer(r.pop(c), np.int64), MISSING, pa.int64())
    for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread"):
        cols[c] = columns.nullable(np.frombuffer(r.pop(c), np.int32), MISSING_32, pa.int32())
    row_links = linked.links
    part_links = Links(row_links.parent[part], row_links.depth[part], row_links.step[part],
                       row_links.launch_row[part], row_links.op_row[part])
    table = columns.assemble(n, cols, meta, part_links)
    if linked.keep is None:
        return table
    return _drop_rows(table, linked.keep[part], linked.new_index)  # type: ignore[arg-type]


def _base_time(path: Path, header: dict) -> int:
    base = header.get("baseTimeNanoseconds") or 0
    if isinstance(base, float) and base.is_integer():
        base = int(base)
    if not isinstance(base, int) or isinstance(base, bool) or not 0 <= base < TIME_LIMIT_NS:
        raise InputError(path, f"baseTimeNanoseconds {str(base)[:40]} is not a time in ns (0 to 2^62)")
    return base


def _device_and_stream(r: dict, gpu_rows: np.ndarray, gpu_pid: np.ndarray,
                       gpu_tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Device and stream per row; GPU rows without the args (old traces) take them from pid / tid."""
    device = np.frombuffer(r.pop("device"), np.int32).copy()
    stream = np.frombuffer(r.pop("stream"), np.int64).copy()
    dev_g = device[gpu_rows]
    device[gpu_rows] = np.where(dev_g == MISSING_32, gpu_pid, dev_g)
    device[device == MISSING_32] = -1
    str_g = stream[gpu_rows]
    stream[gpu_rows] = np.where((str_g == MISSING) & (gpu_tid >= 0), gpu_tid, str_g)
    return device, stream


def _nesting_groups(pid_c: np.ndarray, tid_c: np.ndarray, gpu_rows: np.ndarray, device: np.ndarray,
                    stream: np.ndarray) -> np.ndarray:
    """Host rows nest per (pid, tid) code; GPU rows per (device, stream), negated so the two never collide."""
    group = (pid_c.astype(np.int64) + 1) << 32
    group |= tid_c + 1
    s_g = stream[gpu_rows]
    group[gpu_rows] = -(((device[gpu_rows].astype(np.int64) + 2) << 32) | np.where(s_g == MISSING, 0, s_g & 0xFFFFFFFF))
    return group


def _drop_rows(table: pa.Table, keep: np.ndarray, new_index: np.ndarray) -> pa.Table:
    """Remove rows (E halves of B/E pairs) and renumber the row-index columns by ``new_index``
    (each row of the whole trace -> its row in the kept table)."""
    mask = pa.Array.from_buffers(pa.bool_(), keep.size, [None, pa.py_buffer(np.packbits(keep, bitorder="little"))])
    table = table.filter(mask)
    for col in ("parent", "launch_row", "op_row"):
        old = table.column(col).to_numpy(zero_copy_only=False)
        valid = ~np.isnan(old) if old.dtype.kind == "f" else np.ones(old.size, bool)
        remapped = np.full(old.size, -1, np.int64)
        remapped[valid] = new_index[old[valid].astype(np.int64)]
        table = table.set_column(table.schema.get_field_index(col), col, columns.nullable(remapped, -1, pa.int64()))
    return table


# What only PyTorch's profiler writes at a trace's top level (Kineto since 2021; HTA's trimmed samples
# keep distributedInfo only).
KINETO_HEADER_KEYS = ("schemaVersion", "deviceProperties", "computeProperties", "distributedInfo", "traceName",
                      "record_shapes", "torch_version", "pytorch_version", "baseTimeNanoseconds")


def _source(header: dict, cats: list[str] | None) -> str:
    """torch, unless nothing says PyTorch wrote the trace: no Kineto key at its top level and no event
    in a Kineto category (cpu_op, kernel, ...). A viztracer JSON is then "chrome", so no torch.profiler
    advice follows. ``cats`` None (a windowed read): torch."""
    source = header.get("tracekitSource")
    if source in schema.SOURCES:  # a tracekit export of an nsys or XSpace trace says where it came from
        return str(source)
    if cats is None or any(k in header for k in KINETO_HEADER_KEYS) or any(c.lower() in CATEGORY_KINDS for c in cats):
        return "torch"
    return "chrome"


def _meta(path: Path, header: dict, fmt: str, sha256: str, cats: list[str] | None = None) -> TraceMeta:
    # PyTorch 1.8-1.9's Kineto named the list "computeProperties".
    listed = header.get("deviceProperties") or header.get("computeProperties") or []
    devices = [d for d in listed if isinstance(d, dict)] if isinstance(listed, list) else []
    versions = {k: header[k] for k in ("cuda_runtime_version", "cuda_driver_version", "cupti_version") if k in header}
    source = _source(header, cats)
    profiler = f"kineto schemaVersion {header.get('schemaVersion', '?')}" if source != "chrome" else "chrome trace events"
    if isinstance(header.get("viztracer_metadata"), dict):
        profiler = f"viztracer {header['viztracer_metadata'].get('version', '')}".strip()
    if versions:
        profiler += " (" + ", ".join(f"{k}={v}" for k, v in versions.items()) + ")"
    base = header.get("baseTimeNanoseconds")
    extra = {k: v for k, v in header.items() if k not in ("deviceProperties", "computeProperties", "tracekitSource")}
    return TraceMeta(
        source=source,
        source_file=path.name,
        source_sha256=sha256,
        source_format=fmt,
        capture_start_ns=int(base) if isinstance(base, int) else None,
        profiler_version=profiler,
        framework_version=str(header.get("torch_version", header.get("pytorch_version", ""))),
        devices=devices,
        extra=extra,
    )
