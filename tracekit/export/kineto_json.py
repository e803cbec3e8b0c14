"""Write the event table as Chrome Trace Event JSON in Kineto's dialect (what torch.profiler writes).

Perfetto, chrome://tracing, HTA and TraceLens read this dialect, so a trace that came from nsys
SQLite or TF/JAX XSpace (which those tools cannot open) can be looked at and analysed there.

What each row becomes:
- host rows: ``ph: "X"`` slices with Kineto's categories (``cpu_op``, ``user_annotation``,
  ``python_function``, ``cuda_runtime``, ``cuda_driver``, ...), on ``pid``/``tid``; a row with no
  numeric pid (XSpace planes, Kineto's own ``Spans``/``Traces`` tracks) gets its process name as a
  string pid, as Kineto itself writes them;
- GPU rows: ``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``cuda_sync``, ``gpu_user_annotation`` on
  ``pid`` = device, ``tid`` = stream, with ``args.device`` / ``args.stream``;
- steps: ``ProfilerStep#N`` slices; memory events: ``[memory]`` instants; copies and sets
  ``Memcpy HtoD (...)`` / ``Memset (...)``; nsys sync records ``Stream Sync``, ``Event Sync``,
  ``Stream Wait Event`` (Kineto's names, which its readers key on); the source's
  name is kept in ``args["tracekit name"]`` when it differs;
- launch -> GPU activity: ``args.correlation`` on both, and ``ac2g`` flow events (``s``/``f``) when
  the source has none; ``args["External id"]`` where the source has it;
- kinds Kineto has no category for get tracekit's own (``gpu_library_api``, ``gpu_graph``), which
  tracekit's Kineto reader maps back; ``other`` rows keep the source's category.

Times are µs relative to ``baseTimeNanoseconds`` (the first event), written as exact decimals with
three places, so no nanosecond is lost and the numbers stay small enough for float readers.
Re-ingesting an export gives the same events (kinds, names, times to the ns, devices, streams and
launch links); tests/test_export.py checks it on every shared trace.

The writer streams: it reads the table (or a Parquet file) a batch at a time after one pass over a
few small columns, so memory is bounded by a batch plus per-thread and per-launch bookkeeping.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa

from tracekit import schema
from tracekit.atomic import atomic_path
from tracekit.errors import InputError
from tracekit.ingest import parquet

BATCH_ROWS = 65_536

# kind -> Kineto category (``None``: the row's own category).
KIND_CATEGORIES: dict[str, str | None] = {
    "cpu_op": "cpu_op",
    "user_range": "user_annotation",
    "gpu_user_range": "gpu_user_annotation",
    "python_function": "python_function",
    "step": "user_annotation",
    "gpu_kernel": "kernel",
    "gpu_memcpy": "gpu_memcpy",
    "gpu_memset": "gpu_memset",
    "gpu_sync": "cuda_sync",
    "gpu_graph": "gpu_graph",
    "runtime_api": "cuda_runtime",
    "driver_api": "cuda_driver",
    "gpu_library_api": "gpu_library_api",
    "overhead": "overhead",
    "memory": "cpu_instant_event",
    "marker": "cpu_instant_event",
    "trace_span": "Trace",
    "flow": None,
    "counter": None,
    "metadata": None,
    "other": None,
}
GPU_KINDS = frozenset({*schema.GPU_ACTIVITY_KINDS, "gpu_user_range"})
LAUNCH_KINDS = frozenset({"runtime_api", "driver_api"})
_NO_CATEGORY = "<none>"  # what tracekit's Kineto reader records for an event without ``cat``
# Promoted columns written back under the names Kineto uses in ``args``.
_KERNEL_ARGS = (("registers_per_thread", "registers per thread"), ("shared_memory_bytes", "shared memory"))
_COLUMNS = [c.name for c in schema.COLUMNS if c.name not in ("trace_id", "source")]


@dataclass
class _Plan:
    """What the first pass learns: the time base, the launch calls to flow from, the tracks to name."""

    base_ns: int = 0
    source: str = ""
    launchers: set[int] = field(default_factory=set)  # rows that a GPU activity's launch_row points at
    remap_correlation: bool = False  # correlation ids repeat across processes: write launch-row based ids
    has_flows: bool = False
    named_processes: set[object] = field(default_factory=set)  # pids a process_name metadata row names
    named_threads: set[tuple[object, object]] = field(default_factory=set)
    process_names: dict[object, str] = field(default_factory=dict)
    thread_names: dict[tuple[object, object], str] = field(default_factory=dict)


Batches = Callable[[list[str] | None], Iterator[pa.RecordBatch]]


def export_table(table: pa.Table, out: Path, overlays: list[dict[str, Any]] | None = None) -> int:
    """Write ``table`` to ``out`` (``.json`` or ``.json.gz``), atomically; returns the events written."""

    def batches(columns: list[str] | None) -> Iterator[pa.RecordBatch]:
        part = table.select(columns) if columns else table
        yield from part.to_batches(max_chunksize=BATCH_ROWS)

    return _export(batches, table.schema.metadata or {}, out, overlays or [])


def export_parquet(path: Path, out: Path, overlays: list[dict[str, Any]] | None = None) -> int:
    """Stream a tracekit Parquet file to ``out`` a batch at a time (the table is never whole in memory)."""
    pf = parquet.open_checked(path)

    def batches(columns: list[str] | None) -> Iterator[pa.RecordBatch]:
        try:
            yield from pf.iter_batches(batch_size=BATCH_ROWS, columns=columns)
        except (pa.ArrowException, OSError) as e:
            raise InputError(path, f"corrupt Parquet file ({e})") from None

    return _export(batches, pf.schema_arrow.metadata or {}, out, overlays or [])


def _export(batches: Batches, metadata: dict[bytes, bytes], out: Path, overlays: list[dict[str, Any]]) -> int:
    plan = _first_pass(batches, metadata)
    with atomic_path(out) as tmp:
        raw: IO[bytes] = (gzip.open(tmp, "wb", compresslevel=6) if out.name.endswith(".gz")  # type: ignore[assignment]
                          else open(tmp, "wb"))
        with raw, io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as f:
            f.write(_header(metadata, plan))
            written = 0
            first = True
            for event in _events(batches, plan, overlays):
                f.write(event if first else ",\n" + event)
                first = False
                written += 1
            f.write("\n]}\n")
    return written


def _header(metadata: dict[bytes, bytes], plan: _Plan) -> str:
    """The top-level keys before ``traceEvents``: schema, devices, distributed info, time base."""
    meta = {k.decode(): v.decode() for k, v in metadata.items()}
    extra = _json_or(meta.get(schema.META_TRACE_META_JSON), {})
    head: dict[str, Any] = {"schemaVersion": 1}
    devices = _json_or(meta.get(schema.META_DEVICES_JSON), [])
    if devices:
        head["deviceProperties"] = devices
    for key in ("distributedInfo", "cuda_runtime_version", "cuda_driver_version", "cupti_version", "trace_id"):
        if key in extra:
            head[key] = extra[key]
    head["tracekitSource"] = plan.source  # tracekit's reader keeps the source (nsys, tf, jax) on re-ingest
    head["baseTimeNanoseconds"] = plan.base_ns
    head["displayTimeUnit"] = "ms"
    return json.dumps(head, ensure_ascii=False)[:-1] + ', "traceEvents": [\n'


def _json_or(text: str | None, default: Any) -> Any:
    try:
        return json.loads(text) if text else default
    except ValueError:
        return default


def _first_pass(batches: Batches, metadata: dict[bytes, bytes]) -> _Plan:
    plan = _Plan(source=(metadata.get(schema.META_SOURCE.encode()) or b"").decode())
    base: int | None = None
    seen_corr: dict[int, int] = {}
    cols = ["kind", "name", "pid", "tid", "process_name", "thread_name", "device_id", "stream_id", "start_ns",
            "launch_row", "correlation_id"]
    for batch in batches(cols):
        d = {name: batch.column(name) for name in cols}
        start = d["start_ns"].drop_null()
        if len(start):
            low = int(np.min(start.to_numpy()))
            base = low if base is None else min(base, low)
        kinds = _strings(d["kind"])
        names = _strings(d["name"])
        launch_row = _ints(d["launch_row"])
        corr = _ints(d["correlation_id"])
        linked = np.flatnonzero(launch_row >= 0)
        plan.launchers.update(int(r) for r in launch_row[linked])
        for c, launcher in zip(corr[linked].tolist(), launch_row[linked].tolist(), strict=True):
            if c >= 0 and seen_corr.setdefault(c, launcher) != launcher:
                plan.remap_correlation = True
        pids, tids = _track_ids(d, kinds)
        pnames, tnames = _strings(d["process_name"]), _strings(d["thread_name"])
        for j, kind in enumerate(kinds):
            pid, tid = pids[j], tids[j]
            if kind == "flow":
                plan.has_flows = True
            elif kind == "metadata":
                if names[j] == "process_name":
                    plan.named_processes.add(pid)
                elif names[j] == "thread_name":
                    plan.named_threads.add((pid, tid))
                continue
            if pnames[j] and pid not in plan.process_names:
                plan.process_names[pid] = pnames[j]
            if tnames[j] and (pid, tid) not in plan.thread_names:
                plan.thread_names[(pid, tid)] = tnames[j]
    # Kineto's base is a time since the epoch (>= 0); nsys session times can start below zero.
    plan.base_ns = max(base or 0, 0)
    return plan


def _strings(column: pa.Array) -> list[str]:
    return ["" if v is None else v for v in column.cast(pa.string()).to_pylist()]


def _ints(column: pa.Array) -> np.ndarray:
    return column.cast(pa.int64()).fill_null(-1).to_numpy()


def _track_ids(d: dict[str, pa.Array], kinds: list[str]) -> tuple[list[object], list[object]]:
    """(pid, tid) per row as written: device and stream for GPU rows; host pid and tid, or the
    process and thread names where the source has no numbers (XSpace planes, Kineto's string pids)."""
    pid, tid = d["pid"].to_pylist(), d["tid"].to_pylist()
    device, stream = d["device_id"].to_pylist(), d["stream_id"].to_pylist()
    pname, tname = _strings(d["process_name"]), _strings(d["thread_name"])
    pids: list[object] = []
    tids: list[object] = []
    for i, kind in enumerate(kinds):
        if kind in GPU_KINDS:
            pids.append(device[i] if device[i] is not None else (pid[i] if pid[i] is not None else pname[i] or "GPU"))
            tids.append(stream[i] if stream[i] is not None else (tid[i] if tid[i] is not None else tname[i] or 0))
        else:
            pids.append(pid[i] if pid[i] is not None else pname[i])
            tids.append(tid[i] if tid[i] is not None else tname[i])
    return pids, tids


def _micros(ns: int) -> str:
    """ns as µs with exactly three decimals (exact: no float rounding)."""
    q, r = divmod(abs(ns), 1000)
    return f"{'-' if ns < 0 else ''}{q}.{r:03d}"


def _value(value: object) -> str:
    """JSON text of a promoted value: mostly ints and int triples, written without json.dumps."""
    if type(value) is int:
        return str(value)
    if type(value) is list and all(type(v) is int for v in value):
        return "[" + ", ".join(map(str, value)) + "]"
    return json.dumps(value, ensure_ascii=False)


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _events(batches: Batches, plan: _Plan, overlays: list[dict[str, Any]]) -> Iterator[str]:
    yield from _track_names(plan)
    offset = 0
    for batch in batches(_COLUMNS):
        yield from _batch_events(batch, offset, plan)
        offset += batch.num_rows
    for event in overlays:
        yield json.dumps(event, ensure_ascii=False)


def _track_names(plan: _Plan) -> Iterator[str]:
    """process_name / thread_name metadata for the tracks the source did not name itself."""
    for pid, name in plan.process_names.items():
        if pid not in plan.named_processes:
            yield (f'{{"ph": "M", "name": "process_name", "pid": {_dump(pid)}, "tid": 0, '
                   f'"args": {{"name": {_dump(name)}, "tracekit": "track name"}}}}')
    for (pid, tid), name in plan.thread_names.items():
        if (pid, tid) not in plan.named_threads:
            yield (f'{{"ph": "M", "name": "thread_name", "pid": {_dump(pid)}, "tid": {_dump(tid)}, '
                   f'"args": {{"name": {_dump(name)}, "tracekit": "track name"}}}}')


def _batch_events(batch: pa.RecordBatch, offset: int, plan: _Plan) -> Iterator[str]:
    d = {name: batch.column(name) for name in _COLUMNS}
    kinds = _strings(d["kind"])
    names, categories = _strings(d["name"]), _strings(d["category"])
    pids, tids = _track_ids(d, kinds)
    start = d["start_ns"].to_pylist()
    dur = d["dur_ns"].to_pylist()
    ints = {c: d[c].to_pylist() for c in ("correlation_id", "external_id", "flow_id", "step", "launch_row", "device_id",
                                           "stream_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                                           "registers_per_thread", "shared_memory_bytes", "bytes")}
    args_text = d["args"].cast(pa.large_string()).to_pylist()
    base = plan.base_ns
    quoted: dict[object, str] = {}  # names, categories and track ids repeat: encode each once

    def q(value: object) -> str:
        text = quoted.get(value)
        if text is None:
            text = quoted[value] = json.dumps(value, ensure_ascii=False)
        return text

    for i, kind in enumerate(kinds):
        row = offset + i
        name = names[i]
        extra: dict[str, object] = {}  # promoted columns and renames, written before the source's args
        top = ""
        source_args = args_text[i] or ""
        if source_args == "{}":
            source_args = ""
        elif '"@' in source_args:
            # Top-level Kineto keys tracekit's reader kept in args ("@bp", "@s"): back to the top.
            parsed = json.loads(source_args)
            top = "".join(f", {q(k[1:])}: {json.dumps(v, ensure_ascii=False)}" for k, v in parsed.items()
                          if k.startswith("@"))
            rest = {k: v for k, v in parsed.items() if not k.startswith("@")}
            source_args = json.dumps(rest, ensure_ascii=False) if rest else ""
        if kind == "step" and ints["step"][i] is not None and name != f"ProfilerStep#{ints['step'][i]}":
            extra["tracekit name"] = name
            name = f"ProfilerStep#{ints['step'][i]}"
        elif kind == "memory" and name != "[memory]":
            extra["tracekit name"] = name
            name = "[memory]"
        elif kind in ("gpu_memcpy", "gpu_memset") and not name.startswith(("Memcpy", "Memset")):
            extra["tracekit name"] = name
            name = _kineto_copy_name(kind, name)
        elif kind == "gpu_sync" and not (name.endswith("Sync") or name == "Stream Wait Event"):
            extra["tracekit name"] = name
            name = _kineto_sync_name(name)
        category = KIND_CATEGORIES.get(kind)
        if category is None:
            category = None if categories[i] in ("", _NO_CATEGORY) else categories[i]
            if kind == "other" and category is None:
                category = "other"
        ph = _phase(kind, dur[i], top)
        correlation = _correlation(kind, row, ints, i, plan)
        if correlation is not None:
            extra["correlation"] = correlation
        for column, key in (("external_id", "External id"), ("device_id", "device"), ("stream_id", "stream")):
            if ints[column][i] is not None:
                extra[key] = ints[column][i]
        if ints["grid_x"][i] is not None:
            extra["grid"] = [ints["grid_x"][i], ints["grid_y"][i], ints["grid_z"][i]]
        if ints["block_x"][i] is not None:
            extra["block"] = [ints["block_x"][i], ints["block_y"][i], ints["block_z"][i]]
        for column, key in _KERNEL_ARGS:
            if ints[column][i] is not None:
                extra[key] = ints[column][i]
        if ints["bytes"][i] is not None and '"bytes"' not in source_args:
            extra["bytes"] = ints["bytes"][i]
        ts = _micros(int(start[i]) - base) if start[i] is not None else None
        parts = [f'{{"ph": "{ph}"']
        if category is not None:
            parts.append(f', "cat": {q(category)}')
        parts.append(f', "name": {q(name)}, "pid": {q(pids[i])}, "tid": {q(tids[i])}')
        if ts is not None:
            parts.append(f', "ts": {ts}')
        if ph == "X" and dur[i] is not None:
            parts.append(f', "dur": {_micros(int(dur[i]))}')
        if kind == "flow" and ints["flow_id"][i] is not None:
            parts.append(f', "id": {ints["flow_id"][i]}')
        parts.append(top)
        if extra or source_args or ph in ("X", "C", "M"):
            head = ", ".join(f"{q(k)}: {_value(v)}" for k, v in extra.items())
            if head and source_args:
                parts.append(f', "args": {{{head}, {source_args[1:]}')
            elif head:
                parts.append(f', "args": {{{head}}}')
            else:
                parts.append(f', "args": {source_args or "{}"}')
        parts.append("}")
        yield "".join(parts)
        if plan.has_flows or correlation is None:
            continue
        if kind in GPU_KINDS and ints["launch_row"][i] is not None:
            # The launch -> activity arrow Kineto draws (ac2g): its start is written with the launch call.
            yield (f'{{"ph": "f", "id": {correlation}, "pid": {q(pids[i])}, "tid": {q(tids[i])}, '
                   f'"ts": {ts}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}')
        elif kind in LAUNCH_KINDS and row in plan.launchers:
            yield (f'{{"ph": "s", "id": {correlation}, "pid": {q(pids[i])}, "tid": {q(tids[i])}, '
                   f'"ts": {ts}, "cat": "ac2g", "name": "ac2g"}}')


def _kineto_sync_name(name: str) -> str:
    """nsys's synchronization records ("[CUDA Stream sync]", "[CUDA Stream wait event]", 2022's
    "[CUDA Stream synchronize]") under Kineto's names, by which HTA tells them from kernels."""
    lowered = name.lower()
    if "wait" in lowered:
        return "Stream Wait Event"
    if "event" in lowered:
        return "Event Sync"
    if "context" in lowered or "device" in lowered:
        return "Context Sync"
    return "Stream Sync"


_COPY_DIRECTIONS = (("host-to-device", "HtoD"), ("device-to-host", "DtoH"), ("device-to-device", "DtoD"),
                    ("host-to-host", "HtoH"), ("peer-to-peer", "PtoP"), ("htod", "HtoD"), ("dtoh", "DtoH"),
                    ("dtod", "DtoD"), ("h2d", "HtoD"), ("d2h", "DtoH"), ("d2d", "DtoD"))


def _kineto_copy_name(kind: str, name: str) -> str:
    """Kineto's names for copies and sets ("Memcpy HtoD (...)", "Memset (...)"): HTA and other
    Kineto readers tell memory work from compute by these prefixes (nsys says "[CUDA memcpy ...]")."""
    if kind == "gpu_memset":
        return f"Memset ({name})"
    lowered = name.lower()
    direction = next((short for long, short in _COPY_DIRECTIONS if long in lowered), "")
    return f"Memcpy {direction} ({name})" if direction else f"Memcpy ({name})"


def _phase(kind: str, dur: int | None, top: str) -> str:
    """The Chrome phase of a row; ``top`` holds the row's top-level Kineto keys as JSON text."""
    if kind == "flow":
        return "f" if '"bp"' in top else "s"
    if kind == "counter":
        return "C"
    if kind == "metadata":
        return "M"
    if kind in ("marker", "memory") and not dur:
        return "i"
    return "X"


def _correlation(kind: str, row: int, ints: dict[str, list[Any]], i: int, plan: _Plan) -> int | None:
    """The correlation id to write: the source's, or (where ids repeat across processes) one made
    from the launch call's row, the same on the call and on what it launched."""
    if not plan.remap_correlation:
        value = ints["correlation_id"][i]
        return int(value) if value is not None else None
    if kind in GPU_KINDS and ints["launch_row"][i] is not None:
        return int(ints["launch_row"][i]) + 1
    if kind in LAUNCH_KINDS and row in plan.launchers:
        return row + 1
    return None
