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
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa

from tracekit import _native, schema
from tracekit.errors import InputError
from tracekit.ingest import columns, links
from tracekit.ingest.columns import TraceMeta
from tracekit.ingest.files import gunzip
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


def read(path: Path, raw: bytes | bytearray | None = None, gz: bool = False) -> pa.Table:
    """Read a Kineto trace file into the event table.

    Args:
        path: the file (plain JSON or gzip).
        raw: already-decompressed bytes of a gzip file, if the caller has them.
        gz: whether ``path`` is gzip-compressed.
    """
    if gz:
        # The sha256 (the trace id) is of the file as stored, hashed while the scanner reads.
        with ThreadPoolExecutor(max_workers=1) as pool:
            sha = pool.submit(columns.file_sha256, path)
            if raw is None:
                raw = gunzip(path)
            return _from_buffer(path, raw, release=False, fmt="kineto-json-gz", sha=sha)
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            raise InputError(path, "the file is empty")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            # The pool is inside the mapping: it waits for the hash before the mapping closes.
            stop = threading.Event()
            with ThreadPoolExecutor(max_workers=1) as pool:
                sha = pool.submit(_sha256_of_mapping, mm, stop)
                try:
                    return _from_buffer(path, mm, release=True, fmt="kineto-json", sha=sha)
                finally:
                    stop.set()


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


def _from_buffer(path: Path, buf: bytes | bytearray | mmap.mmap, release: bool, fmt: str, sha: Future[str]) -> pa.Table:
    try:
        r = _native.scanner.scan(buf, release, _native.scan_threads())
    except ValueError as e:
        raise InputError(path, f"invalid trace JSON: {e}") from None
    # The C scanner gives byte spans of the other top-level keys; the pure-Python one, decoded pairs.
    items = r.get("header_items")
    if items is None:
        items = [(json.loads(bytes(buf[k0:k1])), json.loads(bytes(buf[v0:v1]))) for k0, k1, v0, v1 in r["header"]]
    if not r["found_events"]:
        raise InputError(path, _not_a_trace_reason([k for k, _ in items]))
    return _to_table(path, r, dict(items), fmt, sha.result())


def _not_a_trace_reason(keys: list[str]) -> str:
    if "traceEvents" in keys:
        return "'traceEvents' is not a list"
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


def _pair_begin_end(ph: np.ndarray, pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Give each B event the duration up to its matching E; returns a mask of rows to keep.

    B/E pairs are rare in Kineto output (it writes X), so a Python loop over them is fine.
    """
    be = np.flatnonzero((ph == ord("B")) | (ph == ord("E")))
    keep = np.ones(ph.size, bool)
    if be.size == 0:
        return keep
    stacks: dict[tuple[int, int], list[int]] = {}
    for i in be[np.argsort(ts[be], kind="stable")]:
        key = (int(pid[i]), int(tid[i]))
        if ph[i] == ord("B"):
            stacks.setdefault(key, []).append(int(i))
        else:
            keep[i] = False
            stack = stacks.get(key)
            if stack:
                b = stack.pop()
                dur[b] = ts[i] - ts[b]
    return keep


MISSING = np.iinfo(np.int64).min  # the scanner's "absent" for int64 fields
MISSING_32 = np.iinfo(np.int32).min  # and for int32 fields
# Chrome phases without a duration: instants, flows, metadata, counters. Their dur is 0, not unknown.
_NO_DURATION_PHASES = [ord(c) for c in "iIMsftCR"]


def _to_table(path: Path, r: dict, header: dict, fmt: str, sha256: str) -> pa.Table:
    """The event table from the scanner's buffers ``r``. The buffers are immutable bytes: what must
    change is copied, and each raw buffer is dropped as soon as it is consumed (a million-row trace
    has many 8 MB columns)."""
    n = r["n"]
    ph = np.frombuffer(r["ph"], np.uint8)
    cat, name = np.frombuffer(r["cat"], np.int32), np.frombuffer(r["name"], np.int32)
    pid_c, tid_c = np.frombuffer(r["pid"], np.int32), np.frombuffer(r["tid"], np.int32)
    ts, dur = _times(path, r, _base_time(path, header))
    kind = _kinds(ph, cat, r["cat_values"], name, r["name_values"])
    keep = _pair_begin_end(ph, pid_c, tid_c, ts, dur)
    dur[links.byte_mask(ph, _NO_DURATION_PHASES) & (dur == MISSING)] = 0
    gpu_rows = np.flatnonzero(links.kind_mask(kind, *GPU_CATEGORY_KINDS))
    pid_num, pid_labels = _pid_values(r["pid_values"])
    tid_num, tid_labels = _pid_values(r["tid_values"])
    # Numeric pid/tid per code, with a trailing -1 for "absent" (code -1 indexes it).
    pid_lookup, tid_lookup = np.append(pid_num, -1), np.append(tid_num, -1)
    device, stream = _device_and_stream(r, gpu_rows, pid_lookup[pid_c[gpu_rows]], tid_lookup[tid_c[gpu_rows]])
    # Host columns: GPU rows have no host pid/tid.
    pid, tid = pid_lookup[pid_c], tid_lookup[tid_c]
    pid[gpu_rows] = -1
    tid[gpu_rows] = -1
    process_name, thread_name = _names(r, ph, pid_c, tid_c, pid_labels, tid_labels, keep)
    cols = _columns(r, kind, cat, name, pid, tid, process_name, thread_name, device, stream, ts, dur)
    group = _nesting_groups(pid_c, tid_c, gpu_rows, device, stream)
    step_numbers = _step_numbers(kind, name, r["name_values"])
    # The scanner's raw buffers are converted now; free them before linking needs its own memory.
    for key in ("ph", "cat", "name", "pid", "tid", "flow_id", "shared_memory", "bytes",
                "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread"):
        r.pop(key, None)
    del ph, cat, name, pid, tid, stream, pid_c, tid_c, gpu_rows
    # Rows dropped (E halves of B/E pairs) must not take part in links. Missing values are INT64_MIN,
    # which link() reads as "none" (negative), so no sentinel-replacing copies are needed.
    kind_links = np.where(keep, kind, KIND_CODES["metadata"]).astype(np.int8)
    # Host groups carry the process in their high bits: steps hold only their own process's rows.
    row_links = links.link(kind_links, ts, dur, group, np.frombuffer(r["correlation"], np.int64), np.zeros(1, np.int64),
                           np.frombuffer(r["external_id"], np.int64), step_numbers, process=group >> 32)
    table = columns.assemble(n, cols, _meta(path, header, fmt, sha256), row_links)
    return table if keep.all() else _drop_rows(table, keep)


# Timestamps stay below 2^62 ns (year 2116) so that start + duration never overflows int64.
TIME_LIMIT_NS = 1 << 62


def _base_time(path: Path, header: dict) -> int:
    base = header.get("baseTimeNanoseconds") or 0
    if isinstance(base, float) and base.is_integer():
        base = int(base)
    if not isinstance(base, int) or isinstance(base, bool) or not 0 <= base < TIME_LIMIT_NS:
        raise InputError(path, f"baseTimeNanoseconds {str(base)[:40]} is not a time in ns (0 to 2^62)")
    return base


def _times(path: Path, r: dict, base_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Start (absolute ns; absent -> the base) and duration (absent stays MISSING), as writable copies."""
    ts = np.frombuffer(r.pop("ts"), np.int64).copy()
    ts[ts == MISSING] = 0
    if ts.size and base_ns and int(ts.max()) >= TIME_LIMIT_NS - base_ns:
        raise InputError(path, "timestamps plus baseTimeNanoseconds go beyond 2^62 ns")
    ts += base_ns
    return ts, np.frombuffer(r.pop("dur"), np.int64).copy()


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


def _columns(r: dict, kind: np.ndarray, cat: np.ndarray, name: np.ndarray, pid: np.ndarray, tid: np.ndarray,
             process_name: pa.Array, thread_name: pa.Array, device: np.ndarray, stream: np.ndarray, ts: np.ndarray,
             dur: np.ndarray) -> dict[str, pa.Array]:
    i64 = lambda k: np.frombuffer(r[k], np.int64)  # noqa: E731
    cats = r["cat_values"]
    cols: dict[str, pa.Array] = {
        "kind": columns.dictionary(kind, columns.KIND_DICTIONARY, pa.int8()),
        "category": columns.dictionary(np.where(cat >= 0, cat, len(cats)), cats + ["<none>"])
        if (cat < 0).any() else columns.dictionary(cat, cats),
        "name": columns.dictionary(name, r["name_values"]),
        "pid": columns.nullable(pid, -1, pa.int64()),
        "tid": columns.nullable(tid, -1, pa.int64()),
        "process_name": process_name,
        "thread_name": thread_name,
        "device_id": columns.nullable(device, -1, pa.int32()),
        "stream_id": columns.nullable(stream, MISSING, pa.int64()),
        "start_ns": columns.numeric_array(ts, pa.int64()),
        "dur_ns": columns.nullable(dur, MISSING, pa.int64()),
        "correlation_id": columns.nullable(i64("correlation"), MISSING, pa.int64()),
        "external_id": columns.nullable(i64("external_id"), MISSING, pa.int64()),
        "flow_id": columns.nullable(i64("flow_id"), MISSING, pa.int64()),
        "shared_memory_bytes": columns.nullable(i64("shared_memory"), MISSING, pa.int64()),
        "bytes": columns.nullable(i64("bytes"), MISSING, pa.int64()),
        "args": columns.json_args(np.frombuffer(r["args_offsets"], np.int64), r["args_data"]),
    }
    for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread"):
        cols[c] = columns.nullable(np.frombuffer(r[c], np.int32), MISSING_32, pa.int32())
    return cols


def _nesting_groups(pid_c: np.ndarray, tid_c: np.ndarray, gpu_rows: np.ndarray, device: np.ndarray,
                    stream: np.ndarray) -> np.ndarray:
    """Host rows nest per (pid, tid) code; GPU rows per (device, stream), negated so the two never collide."""
    group = (pid_c.astype(np.int64) + 1) << 32
    group |= tid_c + 1
    s_g = stream[gpu_rows]
    group[gpu_rows] = -(((device[gpu_rows].astype(np.int64) + 2) << 32) | np.where(s_g == MISSING, 0, s_g & 0xFFFFFFFF))
    return group


def _step_numbers(kind: np.ndarray, name: np.ndarray, names: list[str]) -> np.ndarray:
    """N of each ProfilerStep#N row; -1 elsewhere."""
    numbers = np.full(kind.size, -1, np.int64)
    rows = np.flatnonzero(kind == KIND_CODES["step"])
    if rows.size:
        numbers[rows] = [int(STEP_NAME.match(names[c]).group(1)) for c in name[rows]]  # type: ignore[union-attr]
    return numbers


def _drop_rows(table: pa.Table, keep: np.ndarray) -> pa.Table:
    """Remove rows (E halves of B/E pairs) and renumber the row-index columns."""
    new_index = np.cumsum(keep) - 1
    table = table.filter(pa.array(keep))
    for col in ("parent", "launch_row", "op_row"):
        old = table.column(col).to_numpy(zero_copy_only=False)
        valid = ~np.isnan(old) if old.dtype.kind == "f" else np.ones(old.size, bool)
        remapped = np.full(old.size, -1, np.int64)
        remapped[valid] = new_index[old[valid].astype(np.int64)]
        table = table.set_column(table.schema.get_field_index(col), col, columns.nullable(remapped, -1, pa.int64()))
    return table


def _names(r: dict, ph: np.ndarray, pid_c: np.ndarray, tid_c: np.ndarray, pid_labels: list[str], tid_labels: list[str],
           keep: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """process_name / thread_name columns from `M` metadata events, falling back to the raw pid/tid text."""
    proc: dict[int, str] = {}
    thread: dict[tuple[int, int], str] = {}
    offsets = np.frombuffer(r["args_offsets"], np.int64)
    args_data = memoryview(r["args_data"])
    name_values = r["name_values"]
    name = np.frombuffer(r["name"], np.int32)
    for i in np.flatnonzero(ph == ord("M")):
        meta_name = name_values[name[i]] if name[i] >= 0 else ""
        if meta_name not in ("process_name", "thread_name"):
            continue
        try:
            label = json.loads(bytes(args_data[offsets[i]:offsets[i + 1]]) or b"{}").get("name")
        except (ValueError, AttributeError):
            label = None
        if not isinstance(label, str):
            continue
        if meta_name == "process_name":
            proc[int(pid_c[i])] = label
        else:
            thread[(int(pid_c[i]), int(tid_c[i]))] = label
    # Process label per pid code, thread label per (pid code, tid code) pair.
    p_labels = [proc.get(i, pid_labels[i]) for i in range(len(pid_labels))]
    process = columns.dictionary(pid_c, p_labels) if p_labels else pa.nulls(len(pid_c), pa.dictionary(pa.int32(), pa.string()))
    # (pid code, tid code) pairs live in a small space: label them through a lookup table instead
    # of sorting a million pairs (np.unique would cost ~50 MB on a 1M-event trace).
    width = len(tid_labels) + 1
    pair = (pid_c + 1).astype(np.int32) * np.int32(width) + (tid_c + 1).astype(np.int32)
    present = np.flatnonzero(np.bincount(pair, minlength=(len(pid_labels) + 1) * width))
    labels = []
    for u in present:
        p, t = int(u // width) - 1, int(u % width) - 1
        labels.append(thread.get((p, t), tid_labels[t] if t >= 0 else None))
    lookup = np.full((len(pid_labels) + 1) * width, -1, np.int32)
    lookup[present] = np.arange(present.size, dtype=np.int32)
    null_label = np.array([lab is None for lab in labels], bool)
    lookup[present[null_label]] = -1
    codes = lookup[pair]
    del pair
    return process, columns.dictionary(codes, ["" if lab is None else lab for lab in labels])


def _meta(path: Path, header: dict, fmt: str, sha256: str) -> TraceMeta:
    # PyTorch 1.8-1.9's Kineto named the list "computeProperties".
    listed = header.get("deviceProperties") or header.get("computeProperties") or []
    devices = [d for d in listed if isinstance(d, dict)] if isinstance(listed, list) else []
    versions = {k: header[k] for k in ("cuda_runtime_version", "cuda_driver_version", "cupti_version") if k in header}
    profiler = f"kineto schemaVersion {header.get('schemaVersion', '?')}"
    if versions:
        profiler += " (" + ", ".join(f"{k}={v}" for k, v in versions.items()) + ")"
    base = header.get("baseTimeNanoseconds")
    extra = {k: v for k, v in header.items() if k not in ("deviceProperties", "computeProperties", "tracekitSource")}
    # A tracekit export of an nsys or XSpace trace says where it came from: the framework inference
    # (and so the remedies) must not take it for a PyTorch trace.
    source = header.get("tracekitSource")
    return TraceMeta(
        source=source if source in schema.SOURCES else "torch",
        source_file=path.name,
        source_sha256=sha256,
        source_format=fmt,
        capture_start_ns=int(base) if isinstance(base, int) else None,
        profiler_version=profiler,
        framework_version=str(header.get("torch_version", header.get("pytorch_version", ""))),
        devices=devices,
        extra=extra,
    )
