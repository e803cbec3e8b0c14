"""What a trace holds: source, span, event counts by kind, devices, steps, link rates."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
    kind = table.column("kind")
    counts = {k: 0 for k in schema.KINDS}
    for row in pc.value_counts(kind.combine_chunks().dictionary_decode() if table.num_rows else columns.string_array([])).to_pylist():
        counts[row["values"]] = row["counts"]
    counts = {k: v for k, v in counts.items() if v}
    timed = pc.invert(pc.is_in(pc.cast(kind, pa.string()), columns.string_array(["metadata", "flow"])))
    starts = pc.filter(table.column("start_ns"), timed)
    # Scalars are taken from arrays built from buffers: pa.scalar imports pandas (start-up time).
    zero = columns.numeric_array(np.zeros(1, np.int64), pa.int64())[0]
    ends = pc.add(starts, pc.fill_null(pc.filter(table.column("dur_ns"), timed), zero))
    span_start = pc.min(starts).as_py() if len(starts) else None
    span_end = pc.max(ends).as_py() if len(ends) else None
    gpu = pc.is_in(pc.cast(kind, pa.string()), columns.string_array(list(schema.GPU_BUSY_KINDS)))
    with_corr = pc.and_(gpu, pc.is_valid(table.column("correlation_id")))
    linked = pc.and_(with_corr, pc.is_valid(table.column("launch_row")))
    linked_op = pc.and_(with_corr, pc.is_valid(table.column("op_row")))
    steps = pc.unique(pc.drop_null(table.column("step"))).to_pylist()
    gpu_ids = pc.unique(pc.drop_null(pc.filter(table.column("device_id"), gpu))).to_pylist()
    host = pc.is_valid(table.column("tid"))
    # XSpace has no pid (null): its process is the plane, so the process name stands in for it.
    process = pc.coalesce(pc.cast(table.column("pid"), pa.string()),
                          pc.cast(table.column("process_name"), pa.string()), columns.string_array([""])[0])
    threads = len(pc.unique(pc.filter(pc.binary_join_element_wise(
        process, pc.cast(table.column("tid"), pa.string()), columns.string_array([":"])[0]), host)))
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
        gpu_activities_with_correlation=pc.sum(with_corr).as_py() or 0,
        gpu_linked_to_launch=pc.sum(linked).as_py() or 0,
        gpu_linked_to_op=pc.sum(linked_op).as_py() or 0,
        profiler_version=meta.get(schema.META_PROFILER_VERSION, ""),
        capture_start_ns=int(start_meta) if start_meta else None,
        threads=threads,
    )
