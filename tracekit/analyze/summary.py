"""What a trace holds: source, span, event counts by kind, devices, steps, link rates."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from tracekit import schema
from tracekit.ingest import columns


@dataclass(frozen=True)
class TraceInfo:
    """Summary of one event table. Times in ns."""

    source: str
    source_file: str
    source_format: str
    trace_id: str
    schema_version: str
    events: int
    span_start_ns: int | None
    span_end_ns: int | None
    counts_by_kind: dict[str, int]
    devices: list[dict[str, object]]
    gpu_ids: list[int]
    steps: list[int]
    gpu_activities_with_correlation: int
    gpu_linked_to_launch: int
    gpu_linked_to_op: int
    profiler_version: str = ""
    capture_start_ns: int | None = None
    threads: int = 0
    extra: dict[str, object] = field(default_factory=dict)
    steps_from: str = ""  # where the reader found the steps when the trace marks none ("calls of train_step ...")
    steps_not_inferred: str = ""  # why a windowed ingest did not look for them (memory)
    # The capture's tracer levels where it records them (TF/JAX XSpace's profile_options), e.g.
    # "host_tracer_level 2, device_tracer_level 1, python_tracer_level 0"
    capture_options: str = ""

    @property
    def span_ns(self) -> int:
        if self.span_start_ns is None or self.span_end_ns is None:
            return 0
        return self.span_end_ns - self.span_start_ns

    @property
    def launch_link_rate(self) -> float | None:
        """Share of GPU activities with a correlation id that are linked to their launch call."""
        n = self.gpu_activities_with_correlation
        return self.gpu_linked_to_launch / n if n else None

    @property
    def op_link_rate(self) -> float | None:
        """Share of GPU activities with a correlation id that are linked to the op that issued them."""
        n = self.gpu_activities_with_correlation
        return self.gpu_linked_to_op / n if n else None




def info(table: pa.Table) -> TraceInfo:
    """Summarize an event table (see ``TraceInfo``)."""
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    # numpy over the columns' buffers, not pyarrow.compute: `tracekit info` is a start-up-bound command.
    kind_col = table.column("kind")
    kind_col = kind_col.unify_dictionaries() if kind_col.num_chunks > 1 else kind_col
    kind_values = kind_col.chunk(0).dictionary.to_pylist() if kind_col.num_chunks else []
    kind_codes, kind_valid = columns.values_and_validity(kind_col)
    codes = np.where(kind_valid, kind_codes, len(kind_values)).astype(np.int64)
    per_code = np.bincount(codes, minlength=len(kind_values) + 1)
    counts = {k: 0 for k in schema.KINDS}
    for value, count in zip(kind_values, per_code[:len(kind_values)].tolist(), strict=True):
        counts[value] = counts.get(value, 0) + count
    counts = {k: v for k, v in counts.items() if v}

    def rows_of(kinds: tuple[str, ...] | list[str]) -> np.ndarray:
        wanted = np.array([v in kinds for v in kind_values] + [False], bool)
        return wanted[codes]

    start, start_valid = columns.values_and_validity(table.column("start_ns"))
    dur, dur_valid = columns.values_and_validity(table.column("dur_ns"))
    timed = ~rows_of(("metadata", "flow")) & start_valid
    starts = start[timed]
    ends = starts + np.where(dur_valid[timed], dur[timed], 0)
    span_start = int(starts.min()) if starts.size else None
    span_end = int(ends.max()) if ends.size else None
    gpu = rows_of(list(schema.GPU_BUSY_KINDS))
    with_corr = gpu & columns.values_and_validity(table.column("correlation_id"))[1]
    linked = with_corr & columns.values_and_validity(table.column("launch_row"))[1]
    linked_op = with_corr & columns.values_and_validity(table.column("op_row"))[1]
    step, step_valid = columns.values_and_validity(table.column("step"))
    steps = columns.distinct(step[step_valid]).tolist()
    device, device_valid = columns.values_and_validity(table.column("device_id"))
    gpu_ids = columns.distinct(device[gpu & device_valid]).tolist()
    threads = _thread_count(table)
    start_meta = meta.get(schema.META_CAPTURE_START_NS, "")
    return TraceInfo(
        source=meta.get(schema.META_SOURCE, "?"),
        source_file=meta.get(schema.META_SOURCE_FILE, "?"),
        source_format=meta.get(schema.META_SOURCE_FORMAT, "?"),
        trace_id=meta.get(schema.META_TRACE_ID, "?"),
        schema_version=meta.get(schema.META_SCHEMA_VERSION, "?"),
        events=table.num_rows,
        span_start_ns=span_start,
        span_end_ns=span_end,
        counts_by_kind=counts,
        devices=json.loads(meta.get(schema.META_DEVICES_JSON, "[]")),
        gpu_ids=sorted(gpu_ids),
        steps=sorted(steps),
        gpu_activities_with_correlation=int(np.count_nonzero(with_corr)),
        gpu_linked_to_launch=int(np.count_nonzero(linked)),
        gpu_linked_to_op=int(np.count_nonzero(linked_op)),
        profiler_version=meta.get(schema.META_PROFILER_VERSION, ""),
        capture_start_ns=int(start_meta) if start_meta else None,
        threads=threads,
        steps_from=_trace_fact(meta.get(schema.META_TRACE_META_JSON, ""), "steps_from"),
        steps_not_inferred=_trace_fact(meta.get(schema.META_TRACE_META_JSON, ""), "steps_not_inferred"),
        capture_options=_capture_options(meta.get(schema.META_TRACE_META_JSON, "")),
    )


def _trace_fact(text: str, key: str) -> str:
    """One text fact of the reader's trace metadata ("" when absent or not text)."""
    try:
        value = json.loads(text or "{}").get(key, "")
    except (ValueError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""


def _capture_options(text: str) -> str:
    """The capture's tracer levels from the reader's trace metadata ("" when it records none)."""
    try:
        options = json.loads(text or "{}").get("profile_options")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(options, dict):
        return ""
    order = ["host_tracer_level", "device_tracer_level", "python_tracer_level"]  # host first: it says what ran untraced
    names = [n for n in order if n in options] + sorted(n for n in options if n not in order)
    return ", ".join(f"{name} {options[name]}" for name in names if isinstance(options[name], int))


def _thread_count(table: pa.Table) -> int:
    """Distinct host threads: (process, tid) over rows with a tid. XSpace has no pid (null): its
    process is the plane, so the process name stands in for it."""
    tid, host = columns.values_and_validity(table.column("tid"))
    pid, pid_valid = columns.values_and_validity(table.column("pid"))
    name_col = table.column("process_name")
    name_col = name_col.unify_dictionaries() if name_col.num_chunks > 1 else name_col
    name_code, name_valid = columns.values_and_validity(name_col)
    # The process as one (source, value) pair: its pid, else its name's code, else none.
    source = np.where(pid_valid, 0, np.where(name_valid, 1, 2))[host]
    value = np.where(pid_valid, pid, np.where(name_valid, name_code.astype(np.int64), 0))[host]
    if not source.size:
        return 0
    order = np.lexsort((tid[host], value, source))
    keys = [source[order], value[order], tid[host][order]]
    return 1 + int(np.any([k[1:] != k[:-1] for k in keys], axis=0).sum())
