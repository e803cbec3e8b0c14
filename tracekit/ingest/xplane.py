"""TensorFlow profiler XSpace (``*.xplane.pb``, or a ``plugins/profile/<run>/`` directory) -> event table.

The protobuf is decoded directly with a schema built here in a private descriptor pool
(``tsl/profiler/protobuf/xplane.proto``), so neither TensorFlow nor xprof is imported::

    XSpace { repeated XPlane planes = 1; errors = 2; warnings = 3; hostnames = 4; }
    XPlane { id = 1; name = 2; repeated XLine lines = 3;
             map<int64, XEventMetadata> event_metadata = 4; map<int64, XStatMetadata> stat_metadata = 5;
             repeated XStat stats = 6; }
    XLine  { id = 1; display_id = 10; name = 2; display_name = 11; timestamp_ns = 3; duration_ps = 9;
             repeated XEvent events = 4; }
    XEvent { metadata_id = 1; oneof { offset_ps = 2; num_occurrences = 5; } duration_ps = 3; repeated XStat stats = 4; }
    XStat  { metadata_id = 1; oneof { double = 2; uint64 = 3; int64 = 4; str = 5; bytes = 6; ref_value = 7; } }

Planes seen: ``/host:CPU`` (lines ``python``, ``tf_Compute/<id>``, ``tf_numa_-1_Eigen/<id>``),
``/device:GPU:<n>`` (``Stream #<id>(Compute)`` lines plus derived ``TensorFlow Ops``/``Steps`` lines),
``Task Environment`` (``profile_start_time``), ``/host:metadata`` (XLA HLO protos), ``/host:CUDA`` (CUPTI API).
Time of an event: ``profile_start_time`` + ``line.timestamp_ns`` + ``offset_ps`` / 1000 (when the line
timestamp is relative to the session, as in TF ≥ 2.x captures).
"""

from __future__ import annotations

import base64
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

from tracekit.errors import InputError
from tracekit.ingest import columns, links
from tracekit.ingest.columns import TraceMeta
from tracekit.ingest.files import regular_file
from tracekit.schema import KIND_CODES

_F = descriptor_pb2.FieldDescriptorProto


def _build_messages() -> dict[str, type[message.Message]]:
    fd = descriptor_pb2.FileDescriptorProto(name="tracekit_xplane.proto", package="tracekit.xplane", syntax="proto3")

    def msg(name: str, fields: list[tuple[str, int, int, str | None, int]], oneofs: tuple[str, ...] = ()) -> descriptor_pb2.DescriptorProto:
        m = fd.message_type.add(name=name)
        for o in oneofs:
            m.oneof_decl.add(name=o)
        for fname, num, ftype, tname, label_or_oneof in fields:
            f = m.field.add(name=fname, number=num, type=ftype)
            f.label = _F.LABEL_REPEATED if label_or_oneof == -1 else _F.LABEL_OPTIONAL
            if label_or_oneof >= 1:
                f.oneof_index = label_or_oneof - 1
            if tname:
                f.type_name = tname
        return m

    rep, opt, one = -1, 0, 1
    msg("XStat", [("metadata_id", 1, _F.TYPE_INT64, None, opt), ("double_value", 2, _F.TYPE_DOUBLE, None, one),
                  ("uint64_value", 3, _F.TYPE_UINT64, None, one), ("int64_value", 4, _F.TYPE_INT64, None, one),
                  ("str_value", 5, _F.TYPE_STRING, None, one), ("bytes_value", 6, _F.TYPE_BYTES, None, one),
                  ("ref_value", 7, _F.TYPE_UINT64, None, one)], ("value",))
    msg("XEvent", [("metadata_id", 1, _F.TYPE_INT64, None, opt), ("offset_ps", 2, _F.TYPE_INT64, None, one),
                   ("num_occurrences", 5, _F.TYPE_INT64, None, one), ("duration_ps", 3, _F.TYPE_INT64, None, opt),
                   ("stats", 4, _F.TYPE_MESSAGE, ".tracekit.xplane.XStat", rep)], ("data",))
    msg("XLine", [("id", 1, _F.TYPE_INT64, None, opt), ("display_id", 10, _F.TYPE_INT64, None, opt),
                  ("name", 2, _F.TYPE_STRING, None, opt), ("display_name", 11, _F.TYPE_STRING, None, opt),
                  ("timestamp_ns", 3, _F.TYPE_INT64, None, opt), ("duration_ps", 9, _F.TYPE_INT64, None, opt),
                  ("events", 4, _F.TYPE_MESSAGE, ".tracekit.xplane.XEvent", rep)])
    msg("XEventMetadata", [("id", 1, _F.TYPE_INT64, None, opt), ("name", 2, _F.TYPE_STRING, None, opt),
                           ("display_name", 4, _F.TYPE_STRING, None, opt), ("metadata", 3, _F.TYPE_BYTES, None, opt),
                           ("stats", 5, _F.TYPE_MESSAGE, ".tracekit.xplane.XStat", rep),
                           ("child_id", 6, _F.TYPE_INT64, None, rep)])
    msg("XStatMetadata", [("id", 1, _F.TYPE_INT64, None, opt), ("name", 2, _F.TYPE_STRING, None, opt),
                          ("description", 3, _F.TYPE_STRING, None, opt)])
    plane = msg("XPlane", [("id", 1, _F.TYPE_INT64, None, opt), ("name", 2, _F.TYPE_STRING, None, opt),
                           ("lines", 3, _F.TYPE_MESSAGE, ".tracekit.xplane.XLine", rep),
                           ("event_metadata", 4, _F.TYPE_MESSAGE, ".tracekit.xplane.XPlane.EventMetadataEntry", rep),
                           ("stat_metadata", 5, _F.TYPE_MESSAGE, ".tracekit.xplane.XPlane.StatMetadataEntry", rep),
                           ("stats", 6, _F.TYPE_MESSAGE, ".tracekit.xplane.XStat", rep)])
    for entry, value_type in (("EventMetadataEntry", ".tracekit.xplane.XEventMetadata"),
                              ("StatMetadataEntry", ".tracekit.xplane.XStatMetadata")):
        e = plane.nested_type.add(name=entry)
        e.options.map_entry = True
        e.field.add(name="key", number=1, type=_F.TYPE_INT64, label=_F.LABEL_OPTIONAL)
        e.field.add(name="value", number=2, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL, type_name=value_type)
    msg("XSpace", [("planes", 1, _F.TYPE_MESSAGE, ".tracekit.xplane.XPlane", rep),
                   ("errors", 2, _F.TYPE_STRING, None, rep), ("warnings", 3, _F.TYPE_STRING, None, rep),
                   ("hostnames", 4, _F.TYPE_STRING, None, rep)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tracekit.xplane.{name}"))
            for name in ("XSpace", "XPlane")}


_MESSAGES = _build_messages()
XSpace = _MESSAGES["XSpace"]

GRAPH_OP = re.compile(r"^[^:\s][^:]*:[A-Za-z_][A-Za-z0-9_]*$")
# TF/XLA runtime internals on host lines (not user ranges, not ops).
INTERNAL_PREFIXES = (
    "Executor", "TFE_", "Eager", "ValidateInputTypeAndPlacement", "KernelAndDeviceFunc", "ThreadpoolListener",
    "ParallelFor", "FunctionRun", "RemoteCallOpDone", "BaseCollectiveExecutor", "MemCpyAsync", "Memcpy", "end: ",
    "CpuExecutable", "function", "ExecuteAsync", "MemoryAllocation", "MemoryDeallocation", "ProcessFunctionLibraryRuntime",
    "ScopedAllocator", "IteratorGetNext", "Iterator::", "ResourceVar", "InstantiatedCapturedFunction",
    "convert_to_tensor", "tf.constant", "RemoteCall", "Prefetch",
)
DERIVED_LINES = ("TensorFlow Ops", "TensorFlow Name Scope", "Steps", "XLA Ops", "XLA Modules", "Source code",
                 "Launch Stats", "Framework Ops", "Framework Name Scope", "XLA TraceMe")
KERNEL_DETAILS = re.compile(r"(\w+):([\d,]+)")
GPU_PLANE = re.compile(r"^/device:GPU:(\d+)")
RELATIVE_TIMESTAMP_LIMIT = 10**17  # line timestamps below this are relative to the session start


def sniff(head: bytes) -> bool:
    """True when the bytes start like an XSpace: field 1 (planes), length-delimited, holding a plane."""
    if len(head) < 4 or head[0] != 0x0A:
        return False
    try:
        XSpace().ParseFromString(head)  # a complete small file parses as is
        return True
    except message.DecodeError:
        pass
    # Truncated head of a big file: the first plane usually starts with id (0x08) or name (0x12).
    i = 1
    while i < len(head) and head[i] & 0x80:
        i += 1
    return i + 1 < len(head) and head[i + 1] in (0x08, 0x12)


def find_files(path: Path) -> list[Path]:
    """The ``.xplane.pb`` files of a run directory (one per host), or the file itself."""
    if path.is_file():
        return [path]
    files = sorted(path.glob("*.xplane.pb"))
    if not files:
        runs = sorted({p.parent for p in path.glob("**/*.xplane.pb")})
        if len(runs) == 1:
            files = sorted(runs[0].glob("*.xplane.pb"))
        elif len(runs) > 1:
            shown = ", ".join(str(r.relative_to(path)) for r in runs[:3])
            raise InputError(path, f"holds {len(runs)} profile runs ({shown}, ...); pass one run directory")
    if not files:
        raise InputError(path, "directory without a trace (no *.xplane.pb inside)")
    return files


def read(path: Path) -> pa.Table:
    """Read an XSpace file, or every host file of a run directory, into one event table."""
    files = find_files(path)
    spaces = []
    for f in files:
        regular_file(f)
        data = f.read_bytes()
        if not data:
            raise InputError(f, "the file is empty")
        xs = XSpace()
        try:
            xs.ParseFromString(data)
        except message.DecodeError as e:
            raise InputError(f, f"corrupt XSpace protobuf ({e})") from None
        if not xs.planes:
            raise InputError(f, "XSpace protobuf without planes (not a TensorFlow profile?)")
        spaces.append(xs)
    # One file has one id, whether it is named or found in its run directory.
    sha = columns.file_sha256(files[0]) if len(files) == 1 else columns.dir_sha256(files)
    return _to_table(path, spaces, sha, "xspace-pb" if path.is_file() else "xspace-dir")


# JAX's C++ dispatch names its host events after the jitted function: "PjitFunction(train_step)".
_JAX_DISPATCH = ("PjitFunction(", "PmapFunction(")
# TF's eager runtime and function executor; a TF trace that also uses PjRt still has these.
_TF_RUNTIME = ("EagerExecute", "EagerLocalExecute", "__inference_", "ExecutorState::Process")


def _framework(names: list[str]) -> str:
    """``jax`` when JAX dispatched the work (and no TF runtime did), else ``tf``: both write XSpace."""
    text = set(names)
    jax = any(n.startswith(_JAX_DISPATCH) for n in text)
    return "jax" if jax and not any(n.startswith(_TF_RUNTIME) for n in text) else "tf"


def _stat_value(stat: Any, stat_names: dict[int, str]) -> Any:
    which = stat.WhichOneof("value")
    if which == "ref_value":
        return stat_names.get(stat.ref_value, "")
    if which == "bytes_value":
        return {"bytes_b64": base64.b64encode(stat.bytes_value[:4096]).decode(), "size": len(stat.bytes_value)}
    if which is None:
        return None
    return getattr(stat, which)


def _plane_stats(plane: Any) -> dict[str, Any]:
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    return {names.get(s.metadata_id, str(s.metadata_id)): _stat_value(s, names) for s in plane.stats}


def _host_kind(name: str, stats: dict[str, Any]) -> str:
    if "correlation_id" in stats:
        return "driver_api" if name.startswith("cu") and not name.startswith("cuda") else "runtime_api"
    if "step_num" in stats:  # TraceMe step markers: Trace(name, step_num=i, _r=1)
        return "step"
    if name in ("MemoryAllocation", "MemoryDeallocation"):
        return "memory"
    if name.startswith("$"):
        return "python_function"
    if "hlo_op" in stats and not name.startswith("end: "):
        return "cpu_op"
    if name == "EagerExecute" or (GRAPH_OP.match(name) and "::" not in name):
        return "cpu_op"
    if name.startswith(INTERNAL_PREFIXES):
        return "other"
    return "user_range"


def _device_kind(line_name: str, name: str) -> str:
    if line_name in DERIVED_LINES:
        return "gpu_user_range"
    if name.startswith(("Memcpy", "memcpy")):
        return "gpu_memcpy"
    if name.startswith(("Memset", "memset")):
        return "gpu_memset"
    return "gpu_kernel"


def _kernel_details(text: str) -> dict[str, list[int]]:
    out = {}
    for key, value in KERNEL_DETAILS.findall(text):
        try:
            out[key] = [int(v) for v in value.split(",") if v]
        except ValueError:
            continue
    return out


def _small(values: list[int] | None, limit: int) -> int:
    """First value when it fits the column, else -1 (the raw text stays in args)."""
    return values[0] if values and 0 <= values[0] < limit else -1


KERNEL_DETAIL_COLUMNS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
                         "shared_memory_bytes", "bytes")


@dataclass
class _Rows:
    """The table's columns as lists, filled event by event (XSpace nests events in planes and lines)."""

    starts: list[int] = field(default_factory=list)
    durs: list[int] = field(default_factory=list)
    kinds: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)  # one nesting group per line
    hosts: list[int] = field(default_factory=list)  # one XSpace per host: correlation ids and steps are per host
    tids: list[int] = field(default_factory=list)
    devices: list[int] = field(default_factory=list)
    streams: list[int] = field(default_factory=list)
    planes: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    correlation: list[int] = field(default_factory=list)
    step_num: list[int] = field(default_factory=list)
    kernel: list[tuple[int, ...]] = field(default_factory=list)  # KERNEL_DETAIL_COLUMNS per row
    args: list[str | None] = field(default_factory=list)  # JSON text
    lines_read: int = 0


def _to_table(path: Path, spaces: list[Any], sha: str, fmt: str) -> pa.Table:
    rows = _Rows()
    device_info: list[dict[str, Any]] = []
    extra: dict[str, Any] = {"hostnames": [], "errors": [], "warnings": []}
    capture_start: int | None = None
    for host, xs in enumerate(spaces):
        profile_start = _read_space_facts(xs, extra)
        if profile_start and (capture_start is None or profile_start < capture_start):
            capture_start = profile_start
        for plane in xs.planes:
            _read_plane(plane, host, profile_start, rows, device_info)
    if KIND_CODES["step"] not in rows.kinds:
        _add_derived_steps(rows)
    return _assemble(path, rows, len(spaces), TraceMeta(
        source=_framework(rows.names), source_file=path.name, source_sha256=sha, source_format=fmt,
        capture_start_ns=capture_start, profiler_version="XSpace", devices=device_info, extra=extra))


def _read_space_facts(xs: Any, extra: dict[str, Any]) -> int:
    """Host names, errors and the task environment into ``extra``; the profile's start (ns, 0 if unknown)."""
    extra["hostnames"] += list(xs.hostnames)
    extra["errors"] += list(xs.errors)
    extra["warnings"] += list(xs.warnings)
    profile_start = 0
    for plane in xs.planes:
        if plane.name == "Task Environment":
            env = _plane_stats(plane)
            profile_start = int(env.get("profile_start_time") or 0)
            extra["task_environment"] = {k: v for k, v in env.items() if k != "profile_options"}
    return profile_start


def _read_plane(plane: Any, host: int, profile_start: int, rows: _Rows, device_info: list[dict[str, Any]]) -> None:
    stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
    meta = plane.event_metadata
    gpu_match = GPU_PLANE.match(plane.name)
    device = int(gpu_match.group(1)) if gpu_match else -1
    if gpu_match:
        device_info.append({"id": device, "name": plane.name, **_plane_stats(plane)})
    # Metadata stats apply to every event of that metadata id: resolve once per id.
    meta_stats = {mid: {stat_names.get(s.metadata_id, str(s.metadata_id)): _stat_value(s, stat_names) for s in m.stats}
                  for mid, m in meta.items() if m.stats}
    meta_names = {mid: m.name for mid, m in meta.items()}
    for line in plane.lines:
        rows.lines_read += 1
        events = line.events
        n = len(events)
        if not n:
            continue
        base_ns = line.timestamp_ns + (profile_start if line.timestamp_ns < RELATIVE_TIMESTAMP_LIMIT else 0)
        base_ps = base_ns * 1000
        derived = line.name in DERIVED_LINES
        category = f"{plane.name}/{re.sub(r'/-?[0-9]+$', '', line.name)}" + ("/derived" if derived else "")
        # What is the same for every event of the line goes in once per line.
        rows.categories += [category] * n
        rows.groups += [rows.lines_read] * n
        rows.hosts += [host] * n
        rows.tids += [-1 if gpu_match else line.id] * n
        rows.devices += [device] * n
        rows.streams += [line.id if gpu_match and not derived else -1] * n
        rows.planes += [plane.name] * n
        rows.lines += [line.name] * n
        # An event without stats of its own is its metadata's: read once per metadata id and line.
        shared: dict[int, tuple[str, int, int, int, tuple[int, ...], str | None]] = {}
        for ev in events:
            rows.starts.append((base_ps + ev.offset_ps) // 1000)
            rows.durs.append(ev.duration_ps // 1000)
            mid = ev.metadata_id
            own = ev.stats
            occurrences = ev.WhichOneof("data") == "num_occurrences"
            facts = shared.get(mid) if not own and not occurrences else None
            if facts is None:
                stats = dict(meta_stats.get(mid, {}))
                for st in own:
                    stats[stat_names.get(st.metadata_id, str(st.metadata_id))] = _stat_value(st, stat_names)
                facts = _event_facts(meta_names.get(mid, ""), stats, line.name if gpu_match else None,
                                     ev.num_occurrences if occurrences else None)
                if not own and not occurrences:
                    shared[mid] = facts
            name, kind, corr, step, kernel, args = facts
            rows.names.append(name)
            rows.kinds.append(kind)
            rows.correlation.append(corr)
            rows.step_num.append(step)
            rows.kernel.append(kernel)
            rows.args.append(args)


def _event_facts(name: str, stats: dict[str, Any], device_line: str | None,
                 occurrences: int | None) -> tuple[str, int, int, int, tuple[int, ...], str | None]:
    """(name, kind code, correlation id, step number, kernel details, args JSON) of an event from its
    merged stats (metadata's, then its own); ``device_line`` is the line name on a GPU plane, None on
    the host; ``occurrences`` (an event that counts repeats instead of having an offset) goes last in args."""
    kind = _device_kind(device_line, name) if device_line is not None else _host_kind(name, stats)
    corr = stats.pop("correlation_id", None)
    sn = stats.get("step_num") if kind == "step" else None
    kernel = _kernel_row(stats, kind)
    if occurrences is not None:
        stats["@num_occurrences"] = occurrences
    return (name, KIND_CODES[kind], int(corr) if isinstance(corr, int) else -1, int(sn) if isinstance(sn, int) else -1,
            kernel, _args_text(stats))


def _args_text(stats: dict[str, Any]) -> str | None:
    return columns.ARGS_ENCODER.encode(stats) if stats else None


def _add_derived_steps(rows: _Rows) -> None:
    """Step rows from the device ``Steps`` lines, for captures without TraceMe step markers.

    TF 2.3/2.4 mark no step on the host; its profiler grouped events by ``group_id`` and wrote one
    ``Steps`` event per device and step. Each becomes a host step row reaching back to the first
    launch onto that device within the step (the host's lead), since steps hold host rows. The same
    group on several devices is one step only where their windows overlap (data-parallel replicas
    run together); groups repeated at disjoint times are separate executions, so then every step is
    numbered in time order and the profiler's group id kept in args.
    """
    step_rows = [i for i, (line, kind) in enumerate(zip(rows.lines, rows.kinds, strict=True))
                 if line == "Steps" and kind == KIND_CODES["gpu_user_range"]]
    if not step_rows:
        return
    leads = _launch_leads(rows, [(rows.hosts[i], rows.devices[i], rows.starts[i], rows.starts[i] + rows.durs[i])
                                 for i in step_rows])
    windows = []  # (start, end, group, host, device)
    for i, lead in zip(step_rows, leads, strict=True):
        text = rows.args[i]
        args = json.loads(text) if text else {}
        group = args.get("group_id")
        if not isinstance(group, int):
            group = int(rows.names[i]) if rows.names[i].lstrip("-").isdigit() else -1
        windows.append([lead, rows.starts[i] + rows.durs[i], group, rows.hosts[i], rows.devices[i]])
    # One step per group and host where device windows overlap; a disjoint repeat is a new step.
    windows.sort(key=lambda w: (w[3], w[2], w[0]))
    steps: list[list[Any]] = []  # [start, end, group, host, devices]
    for start, end, group, host, device in windows:
        last = steps[-1] if steps else None
        if last and last[2] == group and last[3] == host and start < last[1]:
            last[1] = max(last[1], end)
            last[4].append(device)
        else:
            steps.append([start, end, group, host, [device]])
    groups = [(s[3], s[2]) for s in steps]
    renumber = len(set(groups)) < len(groups) or any(g < 0 for _, g in groups)
    steps.sort(key=lambda s: s[0])
    for number, (start, end, group, host, devices) in enumerate(steps):
        step = number if renumber else group
        rows.starts.append(start)
        rows.durs.append(end - start)
        rows.kinds.append(KIND_CODES["step"])
        rows.names.append(f"Step {step}")
        rows.categories.append("Steps/derived")
        rows.lines_read += 1
        rows.groups.append(rows.lines_read)
        rows.hosts.append(host)
        rows.tids.append(-1)
        rows.devices.append(-1)
        rows.streams.append(-1)
        rows.planes.append("/host:CPU")
        rows.lines.append("Steps")
        rows.correlation.append(-1)
        rows.step_num.append(step)
        rows.kernel.append(NO_KERNEL_DETAILS)
        rows.args.append(_args_text({"group_id": group, "devices": sorted(devices), "derived_from": "device Steps lines"}))


def _launch_leads(rows: _Rows, windows: list[tuple[int, int, int, int]]) -> list[int]:
    """For each (host, device, start, end) window: the start of the earliest launch call whose GPU
    work on that device runs in [start, end), or ``start`` when none does. One pass over the rows
    in numpy, then one vectorized selection per window."""
    kinds = np.array(rows.kinds, np.int8)
    corr = np.array(rows.correlation, np.int64)
    hosts = np.array(rows.hosts, np.int64)
    starts = np.array(rows.starts, np.int64)
    devices = np.array(rows.devices, np.int64)
    gpu = np.isin(kinds, [KIND_CODES[k] for k in ("gpu_kernel", "gpu_memcpy", "gpu_memset")]) & (corr >= 0)
    calls = np.isin(kinds, [KIND_CODES["runtime_api"], KIND_CODES["driver_api"]]) & (corr >= 0)
    g = np.flatnonzero(gpu)
    call_rows = np.flatnonzero(calls)
    call = links.first_match((hosts[call_rows] << 40) ^ corr[call_rows], call_rows, (hosts[g] << 40) ^ corr[g])
    lead = np.where(call >= 0, starts[np.maximum(call, 0)], np.iinfo(np.int64).max)
    out = []
    g_host, g_device, g_start = hosts[g], devices[g], starts[g]
    for host, device, start, end in windows:
        inside = lead[(g_host == host) & (g_device == device) & (g_start >= start) & (g_start < end)]
        out.append(int(min(start, inside.min())) if inside.size else start)
    return out


NO_KERNEL_DETAILS = (-1,) * len(KERNEL_DETAIL_COLUMNS)


def _kernel_row(stats: dict[str, Any], kind: str) -> tuple[int, ...]:
    """``KERNEL_DETAIL_COLUMNS`` of a row: launch shape, registers and shared memory from
    ``kernel_details``; bytes of a memory event."""
    text = stats.get("kernel_details")
    nbytes = stats.get("bytes_allocated") if kind == "memory" else None
    nbytes = nbytes if isinstance(nbytes, int) and 0 <= nbytes < 2**63 else -1
    if not isinstance(text, str):
        return NO_KERNEL_DETAILS if nbytes == -1 else (*NO_KERNEL_DETAILS[:-1], nbytes)
    return (*_kernel_details_row(text), nbytes)


@functools.lru_cache(maxsize=4096)
def _kernel_details_row(text: str) -> tuple[int, ...]:
    """Grid, block, registers and shared memory from a ``kernel_details`` text (the same text repeats
    for every launch of a kernel)."""
    kd = _kernel_details(text)
    grid = kd.get("grid", [])
    block = kd.get("block", [])
    return (*[_small(grid[i:i + 1], 2**31) if len(grid) == 3 else -1 for i in range(3)],
            *[_small(block[i:i + 1], 2**31) if len(block) == 3 else -1 for i in range(3)],
            _small(kd.get("regs"), 2**31), _small(kd.get("shm"), 2**63))


def _assemble(path: Path, rows: _Rows, hosts: int, meta: TraceMeta) -> pa.Table:
    n = len(rows.starts)
    kind_a = np.array(rows.kinds, np.int8) if n else np.zeros(0, np.int8)
    start_a = np.array(rows.starts, np.int64)
    dur_a = np.array(rows.durs, np.int64)
    corr_a = np.array(rows.correlation, np.int64)
    host_a = np.array(rows.hosts, np.int64)
    row_links = links.link(kind_a, start_a, dur_a, np.array(rows.groups, np.int64), corr_a,
                           host_a if hosts > 1 else np.zeros(1, np.int64), None, np.array(rows.step_num, np.int64),
                           op_kinds=("cpu_op",), process=host_a if hosts > 1 else None)
    cols: dict[str, pa.Array] = {
        "kind": columns.dictionary(kind_a, columns.KIND_DICTIONARY, pa.int8()),
        "category": columns.string_array(rows.categories).dictionary_encode(),
        "name": columns.string_array(rows.names).dictionary_encode(),
        "tid": columns.nullable(np.array(rows.tids, np.int64), -1, pa.int64()),
        "process_name": columns.string_array(rows.planes).dictionary_encode(),
        "thread_name": columns.string_array(rows.lines).dictionary_encode(),
        "device_id": columns.nullable(np.array(rows.devices, np.int64), -1, pa.int32()),
        "stream_id": columns.nullable(np.array(rows.streams, np.int64), -1, pa.int64()),
        "start_ns": columns.numeric_array(start_a, pa.int64()),
        "dur_ns": columns.numeric_array(dur_a, pa.int64()),
        "correlation_id": columns.nullable(corr_a, -1, pa.int64()),
        "args": columns.json_args_from_texts(rows.args),
    }
    kernel = np.array(rows.kernel, np.int64).reshape(n, len(KERNEL_DETAIL_COLUMNS))
    for j, c in enumerate(KERNEL_DETAIL_COLUMNS):
        dtype = pa.int64() if c in ("shared_memory_bytes", "bytes") else pa.int32()
        cols[c] = columns.nullable(kernel[:, j], -1, dtype)
    return columns.assemble(n, cols, meta, row_links)
