"""xprof's trace-viewer JSON (TensorBoard's Trace Viewer download, TF 2.2's ``<host>.trace.json.gz``,
``xprof``'s ``trace_viewer`` tool, JAX's ``<host>.trace.json.gz`` and ``perfetto_trace.json.gz``) ->
event table, read as the XSpace it was converted from.

The converter writes each XSpace plane as a process (``/host:CPU`` is pid 701, ``/device:GPU:<n>``
pid n + 1), each line as a thread, and each event as a complete (``X``) or instant (``i``) event
with its stats as ``args`` (numbers written as strings)::

    {"displayTimeUnit":"ns","metadata":{"highres-ticks":true},"traceEvents":[
     {"args":{"name":"/host:CPU"},"name":"process_name","ph":"M","pid":701},
     {"args":{"group_id":"0","long_name":"lstm_1/.../MatMul:_MklMatMul"},"dur":100.842,
      "name":"_MklMatMul","ph":"X","pid":701,"tid":4114894280,"ts":2035.933}, ...]}

It renames TF op events to their op type and keeps the XSpace name in ``args.long_name``. This
reader rebuilds the planes, lines and events (name from ``long_name``, stats from ``args``, whole
numbers as integers) and hands them to the XSpace reader, so both give the same kinds, steps,
launch links and kernel details. What the converter dropped stays dropped: the ``Task
Environment`` plane (times are then relative to the capture), memory allocation events, and
``StartRegion``/``StopRegion`` pairs (merged into one ``ThreadpoolListener::Region``). XLA's HLO
modules (the ``/host:metadata`` plane, which says what each XLA instruction computes) are taken from
the XSpace beside the JSON where there is one, as JAX writes them.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit.errors import InputError
from tracekit.ingest import columns
from tracekit.ingest.files import regular_file

# What a trace-viewer JSON's head holds (checked by ``sniff``): the time unit the converter writes
# and a plane name as the first process. (JAX's perfetto_trace.json.gz rewrites the header without
# the "highres-ticks" metadata, so that is not required.)
_HEADER = re.compile(rb'"displayTimeUnit"\s*:\s*"ns"')
_PLANE_NAME = re.compile(rb'"name"\s*:\s*"/(host|device):')
_WHOLE_NUMBER = re.compile(r"-?[0-9]{1,18}")


def sniff(head: bytes) -> bool:
    """True when a JSON document's head reads like xprof's trace-viewer output."""
    return bool(_HEADER.search(head)) and bool(_PLANE_NAME.search(head))


def read(path: Path, gz: bool = False) -> pa.Table:
    regular_file(path)
    try:
        raw = gzip.decompress(path.read_bytes()) if gz else path.read_bytes()
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(path, f"corrupt gzip data ({e})") from None
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise InputError(path, f"invalid trace JSON: {e}") from None
    del raw
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise InputError(path, "trace-viewer JSON without a 'traceEvents' list")
    try:
        space = to_xspace(events)
    except BadEvent as e:
        raise InputError(path, str(e)) from None
    if not space.planes:
        raise InputError(path, "trace-viewer JSON without any event")
    from tracekit.ingest import xplane  # here, not at the top: sniffing every JSON trace must not import protobuf

    # The converter leaves XLA's HLO modules out; JAX writes the XSpace they are in beside the JSON.
    beside = xspace_beside(path)
    metadata = xplane.metadata_plane(beside) if beside else None
    if metadata is not None:
        space.planes.append(metadata)
    table = xplane.to_table(path, [space], columns.file_sha256(path), "xprof-json-gz" if gz else "xprof-json")
    if metadata is None or beside is None:
        return table
    return columns.with_extra(table, hlo_modules_from=beside.name)  # where the instructions' classes came from


def xspace_beside(path: Path) -> Path | None:
    """The XSpace a trace-viewer JSON was converted from, where JAX leaves the two side by side:
    ``<host>.xplane.pb`` for ``<host>.trace.json.gz``, and for ``perfetto_trace.json.gz`` the run
    directory's only ``*.xplane.pb``; None otherwise (an XSpace of another run could name the same
    modules, so no other file is taken for it)."""
    if ".trace.json" in path.name:
        named = path.with_name(path.name.split(".trace.json")[0] + ".xplane.pb")
        return named if named.is_file() else None
    if path.name.startswith("perfetto_trace.json"):
        found = sorted(path.parent.glob("*.xplane.pb"))
        return found[0] if len(found) == 1 else None
    return None


class BadEvent(ValueError):
    """An event the converter cannot have written (its message names it)."""


# Times in µs whose ps fit int64 with room for start + duration.
_TIME_LIMIT_US = float(1 << 62) / 1e6


def to_xspace(events: list[Any]) -> Any:
    """An XSpace message holding the planes, lines and events the JSON was converted from."""
    planes: dict[Any, str] = {}
    lines: dict[tuple[Any, Any], str] = {}
    timed: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            continue
        ph, pid, tid = ev.get("ph"), _key(ev.get("pid")), _key(ev.get("tid"))
        if ph == "M":
            given = ev.get("args")
            name = given.get("name") if isinstance(given, dict) else None
            if ev.get("name") == "process_name" and isinstance(name, str):
                planes[pid] = name
            elif ev.get("name") == "thread_name" and isinstance(name, str):
                lines[(pid, tid)] = name
        elif ph in ("X", "i", "I"):
            for field in ("ts", "dur"):
                value = ev.get(field)
                if (field == "ts" or value is not None) and not _is_time(value):
                    raise BadEvent(f"event {i} ({str(ev.get('name'))[:60]!r}): {field!r} is {str(value)[:40]}, "
                                   f"not a time in µs")
            timed.setdefault((pid, tid), []).append(ev)
    from tracekit.ingest import xplane

    space = xplane.XSpace()
    by_plane: dict[Any, list[tuple[Any, list[dict[str, Any]]]]] = {}
    for (pid, tid), evs in timed.items():
        by_plane.setdefault(pid, []).append((tid, evs))
    for pid, plane_lines in by_plane.items():
        plane = space.planes.add(id=_int(pid, 0), name=planes.get(pid, f"pid {pid}"))
        metadata: dict[str, int] = {}
        stat_ids: dict[str, int] = {}
        for tid, evs in plane_lines:
            line = plane.lines.add(id=_int(tid, 0), name=lines.get((pid, tid), str(tid)))
            evs.sort(key=lambda e: (e["ts"], -_duration_us(e)))
            for ev in evs:
                own = ev.get("args")
                args: dict[str, Any] = own if isinstance(own, dict) else {}
                name = str(args.get("long_name") or ev.get("name") or "")
                if "step_num" in args and args.get("step_name") == name:
                    args = _step_as_marked(args)
                    name = args.pop("step_name")
                mid = metadata.get(name)
                if mid is None:
                    mid = metadata[name] = len(metadata) + 1
                    plane.event_metadata[mid].id = mid
                    plane.event_metadata[mid].name = str(name)
                out = line.events.add(metadata_id=mid, offset_ps=round(ev["ts"] * 1_000_000),
                                      duration_ps=round(_duration_us(ev) * 1_000_000))
                for key, value in args.items():
                    if key == "long_name":
                        continue
                    sid = stat_ids.get(key)
                    if sid is None:
                        sid = stat_ids[key] = len(stat_ids) + 1
                        plane.stat_metadata[sid].id = sid
                        plane.stat_metadata[sid].name = key
                    _set_value(out.stats.add(metadata_id=sid), value)
    return space


def _step_as_marked(args: dict[str, Any]) -> dict[str, Any]:
    """A step event as the program marked it: xprof names steps ``train 0`` (``step_name``) where
    ``StepTraceAnnotation("train", step_num=0)`` wrote ``train``."""
    args = dict(args)
    suffix = f" {args['step_num']}"
    if args["step_name"].endswith(suffix):
        args["step_name"] = args["step_name"][: -len(suffix)]
    return args


def _key(value: Any) -> Any:
    """A pid or tid as a dict key (the converter writes numbers; anything else keeps its text)."""
    return value if isinstance(value, (int, float, str)) or value is None else json.dumps(value)


def _is_time(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < _TIME_LIMIT_US


def _duration_us(ev: dict[str, Any]) -> float:
    dur = ev.get("dur")
    return float(dur) if isinstance(dur, (int, float)) and dur > 0 else 0.0


def _int(value: Any, default: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return number if -(2**63) <= number < 2**63 else default


def _set_value(stat: Any, value: Any) -> None:
    """A stat's value as XSpace holds it: the converter wrote numbers as strings."""
    if isinstance(value, bool):
        stat.int64_value = int(value)
    elif isinstance(value, int) and -(2**63) <= value < 2**63:
        stat.int64_value = value
    elif isinstance(value, float):
        stat.double_value = value
    elif isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value):
        stat.int64_value = int(value)
    else:
        stat.str_value = value if isinstance(value, str) else json.dumps(value)
