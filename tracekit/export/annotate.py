"""tracekit's findings as extra events on the exported timeline (``tracekit export --annotate``).

- every event's class (GPU kernel class, framework-op class, API class) as ``args["tracekit class"]``;
- the GPU's idle gaps as slices on a "tracekit" track per device, named after what the host did
  during each (launching, synchronizing, framework, ...), with the host time per class in args;
- the verdict, its evidence and remedies as a global instant event at the start of the trace;
- counter tracks: GPU utilization (busy share per 1/100 of the span), launch queue depth (GPU work
  launched and not yet finished) and, per marked step, the share of the step's host time outside
  compute ops (dispatch).

- the critical path of the first step (``tracekit critical-path``) as slices on its own track, each
  named by what bounds it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tracekit import schema
from tracekit.analyze.classify import API_CLASSES, KERNEL_CLASSES, OP_CLASSES, classify_rows
from tracekit.analyze.frame import GPU_BUSY_KINDS, frame_of
from tracekit.analyze.launch import GAP_HOST_CLASSES, launch
from tracekit.analyze.utilization import chunk_utilization

TRACK = "tracekit"  # the process (string pid) the overlay tracks live in
UTILIZATION_CHUNKS = 100


def overlay_events(table: pa.Table) -> tuple[list[dict[str, Any]], pa.Table]:
    """(overlay events, the table with each row's class in its args)."""
    frame = frame_of(table)
    report = launch(table)
    base = max(int(frame.start.min()), 0) if len(frame) else 0  # the export's baseTimeNanoseconds
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": TRACK, "tid": 0, "args": {"name": "tracekit findings"}},
        {"ph": "i", "s": "g", "name": f"verdict: {report.verdict}", "pid": TRACK, "tid": "verdict", "ts": 0.0,
         "args": {"evidence": report.evidence, "remedies": report.remedies}},
    ]
    for gap in report.gaps.itertuples():
        host = {c: int(getattr(gap, f"{c}_ns")) for c in GAP_HOST_CLASSES}
        events.append({"ph": "X", "cat": "tracekit_gap", "name": f"GPU idle: {gap.attributed}", "pid": TRACK,
                       "tid": f"GPU {gap.device_id} idle gaps", "ts": _us(int(gap.start_ns) - base),
                       "dur": _us(int(gap.dur_ns)), "args": {f"{k} ns": v for k, v in host.items()}})
    events += _utilization(frame, base) + _launch_queue(frame, base) + _dispatch_per_step(report, base)
    events += _critical_path(table, base)
    return events, _with_classes(table, frame)


def _critical_path(table: pa.Table, base: int) -> list[dict[str, Any]]:
    """The first step's critical path (the whole trace's when none is marked) as slices on its own
    track, one per weighted edge, named by what bounds it."""
    from tracekit.analyze.critical_path import critical_path
    from tracekit.errors import TracekitError

    try:
        cp = critical_path(table)
    except (TracekitError, ValueError, IndexError, KeyError):
        return []  # the other overlays still go out
    out = []
    for edge in cp.edges.itertuples():
        out.append({"ph": "X", "cat": "tracekit_critical_path", "name": f"{edge.category}: {edge.name}"[:200],
                    "pid": TRACK, "tid": f"critical path ({cp.window['name']})",
                    "ts": _us(int(edge.start_ns) - base), "dur": _us(int(edge.weight_ns)),
                    "args": {"bound by": edge.category, "event": edge.name}})
    return out


def _us(ns: int) -> float:
    return round(ns / 1e3, 3)


def _utilization(frame: Any, base: int) -> list[dict[str, Any]]:
    rows = frame.rows(*GPU_BUSY_KINDS)
    out = []
    for dev in np.unique(frame.device[rows]):
        r = rows[frame.device[rows] == dev]
        starts, lengths, util = chunk_utilization(frame.start[r], frame.end[r], UTILIZATION_CHUNKS)
        for s, u in zip(starts, util, strict=True):
            out.append({"ph": "C", "name": f"GPU {dev} utilization", "pid": TRACK, "ts": _us(int(s) - base),
                        "args": {"busy %": round(100 * float(u), 1)}})
    return out


def _launch_queue(frame: Any, base: int) -> list[dict[str, Any]]:
    """GPU work launched and not finished: +1 when its launch call starts, -1 when it ends on the GPU."""
    gpu = frame.rows(*GPU_BUSY_KINDS)
    gpu = gpu[frame.launch_row[gpu] >= 0]
    if not gpu.size:
        return []
    times = np.concatenate([frame.start[frame.launch_row[gpu]], frame.end[gpu]])
    steps = np.concatenate([np.ones(gpu.size, np.int64), -np.ones(gpu.size, np.int64)])
    order = np.lexsort((steps, times))  # at equal times, finishes before launches
    depth = np.cumsum(steps[order])
    t = times[order]
    last = np.r_[t[1:] != t[:-1], True]  # one sample per distinct time
    return [{"ph": "C", "name": "launch queue depth", "pid": TRACK, "ts": _us(int(ts) - base),
             "args": {"in flight": int(d)}} for ts, d in zip(t[last], depth[last], strict=True)]


def _dispatch_per_step(report: Any, base: int) -> list[dict[str, Any]]:
    bd = report.breakdown
    steps = report.steps
    if bd is None or steps is None or bd.cpu_ops.empty or steps.steps.empty:
        return []
    share = {int(r.step): (r.dispatch_ns / r.span_ns if r.span_ns else 0.0) for r in bd.cpu_ops.itertuples()
             if r.step >= 0}
    return [{"ph": "C", "name": "dispatch share of step", "pid": TRACK, "ts": _us(int(s.start_ns) - base),
             "args": {"dispatch %": round(100 * share[int(s.step)], 1)}}
            for s in steps.steps.itertuples() if int(s.step) in share]


def _with_classes(table: pa.Table, frame: Any) -> pa.Table:
    """The table with ``"tracekit class"`` added to each classified row's args."""
    classes = classify_rows(frame)
    label = np.full(len(frame), None, object)
    for values, names in ((classes.kernel, KERNEL_CLASSES), (classes.op, OP_CLASSES), (classes.api, API_CLASSES)):
        known = (values >= 0) & (label == None)  # noqa: E711 (element-wise on an object array)
        label[known] = np.array(names, object)[values[known]]
    texts = table.column("args").cast(pa.large_string()).to_pylist()
    out = []
    for text, cls in zip(texts, label, strict=True):
        if cls is None:
            out.append(text)
        elif not text or text == "{}":
            out.append(f'{{"tracekit class":"{cls}"}}')
        else:
            out.append(f'{{"tracekit class":"{cls}",' + text[1:])
    index = schema.COLUMN_NAMES.index("args")
    return table.set_column(index, table.field(index), pa.array(out, pa.large_string()).cast(schema.ARGS_TYPE))
