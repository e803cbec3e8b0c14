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
import mmap
import re
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

from tracekit import _native, schema
from tracekit.errors import InputError
from tracekit.ingest import columns, hlo, links
from tracekit.ingest.columns import TraceMeta
from tracekit.ingest.files import regular_file
from tracekit.schema import KIND_CODES

_F = descriptor_pb2.FieldDescriptorProto


PROFILE_OPTION_FIELDS = {"host_tracer_level": 2, "device_tracer_level": 3, "python_tracer_level": 4}


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
    # The capture's options (tensorflow.ProfileOptions, the Task Environment's ``profile_options`` stat):
    # the tracer levels say what the capture could record (at host level 2 no inexpensive op).
    msg("ProfileOptions", [(name, number, _F.TYPE_UINT32, None, opt) for name, number in PROFILE_OPTION_FIELDS.items()])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tracekit.xplane.{name}"))
            for name in ("XSpace", "XPlane", "ProfileOptions")}


_MESSAGES = _build_messages()
XSpace = _MESSAGES["XSpace"]
ProfileOptions = _MESSAGES["ProfileOptions"]

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
    return to_table(path, spaces, sha, "xspace-pb" if path.is_file() else "xspace-dir")


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


# The table's columns while planes are read: int64 unless named here; name/category/plane/line
# hold codes into _Rows.strings.
_ROW_COLUMNS = ("start", "dur", "kind", "group", "host", "tid", "device", "stream", "correlation", "step_num",
                "name", "category", "plane", "line")
_ROW_DTYPES = {"kind": np.int8}


class _Rows:
    """The table's columns as chunks, one per line (XSpace nests events in planes and lines), so a
    line read in C goes in as arrays."""

    def __init__(self) -> None:
        self.chunks: dict[str, list[np.ndarray]] = {c: [] for c in _ROW_COLUMNS}
        self.kernel: list[np.ndarray] = []  # (rows, len(KERNEL_DETAIL_COLUMNS)) per chunk
        self.args: list[pa.Array] = []      # large_string JSON per chunk
        self.strings: dict[str, int] = {}
        self.lines_read = 0

    def code(self, text: str) -> int:
        return self.strings.setdefault(text, len(self.strings))

    def add(self, n: int, kernel: np.ndarray, args: pa.Array, **values: np.ndarray | int) -> None:
        """One chunk of ``n`` rows; a column given as an int is that value on every row."""
        for c in _ROW_COLUMNS:
            v = values[c]
            dtype = _ROW_DTYPES.get(c, np.int64)
            self.chunks[c].append(np.asarray(v, dtype) if isinstance(v, np.ndarray) else np.full(n, v, dtype))
        self.kernel.append(kernel.reshape(n, len(KERNEL_DETAIL_COLUMNS)))
        self.args.append(args)

    def finish(self) -> dict[str, np.ndarray]:
        """Every column joined (the chunks are kept: more rows may follow)."""
        out = {c: np.concatenate(parts) if parts else np.zeros(0, _ROW_DTYPES.get(c, np.int64))
               for c, parts in self.chunks.items()}
        out["kernel"] = (np.concatenate(self.kernel) if self.kernel
                         else np.zeros((0, len(KERNEL_DETAIL_COLUMNS)), np.int64))
        return out

    def values(self) -> list[str]:
        return list(self.strings)


def to_table(path: Path, spaces: list[Any], sha: str, fmt: str) -> pa.Table:
    """The event table of parsed XSpace messages (one per host) read from ``path``."""
    rows = _Rows()
    device_info: list[dict[str, Any]] = []
    extra: dict[str, Any] = {"hostnames": [], "errors": [], "warnings": []}
    capture_start: int | None = None
    walker = _native.xplane_walker()
    modules: dict[str, dict[str, str]] = {}
    float64: dict[str, set[str]] = {}
    for host, xs in enumerate(spaces):
        profile_start = _read_space_facts(xs, extra)
        host_modules, host_float64 = _hlo_modules(xs, extra)
        modules.update(host_modules)
        float64.update(host_float64)
        if profile_start and (capture_start is None or profile_start < capture_start):
            capture_start = profile_start
        for plane in xs.planes:
            _read_plane(plane, host, profile_start, rows, device_info, walker)
    cols = rows.finish()
    if not np.any(cols["kind"] == KIND_CODES["step"]) and _add_derived_steps(rows, cols):
        cols = rows.finish()
    if not np.any(cols["kind"] == KIND_CODES["step"]):
        called = _mark_function_steps(rows, cols)
        if called:
            extra["steps_from"] = f"calls of {called} (no step markers in the trace)"
    values = rows.values()
    names = [values[i] for i in columns.distinct(cols["name"]).tolist()]
    if modules:  # the instructions that ran as events (a module lists every instruction it compiled)
        ran = set(names)
        ran_classes = {key: {n: c for n, c in classes.items() if n in ran} for key, classes in modules.items()}
        extra[HLO_CLASSES] = {key: classes for key, classes in ran_classes.items() if classes}
        ran_float64 = {key: sorted(found & ran) for key, found in float64.items()}
        if any(ran_float64.values()):
            extra[HLO_FLOAT64] = {key: found for key, found in ran_float64.items() if found}
    return _assemble(path, cols, rows, len(spaces), TraceMeta(
        source=_framework(names), source_file=path.name, source_sha256=sha, source_format=fmt,
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
            options = _profile_options(env.get("profile_options"))
            if options is not None:
                extra["profile_options"] = options
    return profile_start


def _profile_options(value: Any) -> dict[str, int] | None:
    """The tracer levels of a capture's ``profile_options`` stat (a ProfileOptions proto, read by
    ``_stat_value`` as ``{"bytes_b64": ...}``); None when absent or unreadable. Proto3 leaves out the
    fields at 0, so a level missing from a message that parsed is 0."""
    if not isinstance(value, dict) or "bytes_b64" not in value:
        return None
    options = ProfileOptions()
    try:
        options.ParseFromString(base64.b64decode(value["bytes_b64"]))
    except (message.DecodeError, ValueError):
        return None
    return {name: int(getattr(options, name)) for name in PROFILE_OPTION_FIELDS}


# Trace metadata key: {"<hlo_module>#<program_id>": {instruction name: class}} of the HLO modules in
# the trace, for the instructions that ran as events (``tracekit.ingest.hlo``).
HLO_CLASSES = "hlo_classes"
# Trace metadata key: {"<hlo_module>#<program_id>": [instruction names]} of the instructions that ran as
# events and run a float64 (or complex128) matrix product or convolution (``hlo.instruction_facts``).
HLO_FLOAT64 = "hlo_float64"
_PROGRAM_ID = re.compile(r"\((-?\d+)\)$")


def _hlo_modules(xs: Any, extra: dict[str, Any]) -> tuple[dict[str, dict[str, str]], dict[str, set[str]]]:
    """The classes of the instructions of every HLO module on the ``/host:metadata`` plane, keyed as
    XLA's op events name their module: ``<hlo_module>#<program_id>``, and the instructions of each that
    run float64 products. A module whose proto does not parse is left out and noted in
    ``extra["warnings"]`` (its ops keep the name rules)."""
    modules: dict[str, dict[str, str]] = {}
    float64: dict[str, set[str]] = {}
    for plane in xs.planes:
        if plane.name != "/host:metadata":
            continue
        stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
        for m in plane.event_metadata.values():
            stats = {stat_names.get(s.metadata_id): s for s in m.stats}
            proto = stats.get("Hlo Proto")
            if proto is None or proto.WhichOneof("value") != "bytes_value":
                continue
            try:
                module, classes, doubles = hlo.instruction_facts(proto.bytes_value)
            except ValueError as e:
                extra["warnings"].append(f"HLO module {m.name}: {e}")
                continue
            # The program id is a stat in JAX's captures and the "(N)" suffix of the name in every one.
            pid = stats.get("program_id")
            found = _PROGRAM_ID.search(m.name)
            program = _stat_value(pid, stat_names) if pid is not None else int(found.group(1)) if found else 0
            modules[f"{module or m.name}#{program}"] = classes
            if doubles:
                float64[f"{module or m.name}#{program}"] = doubles
    return modules, float64


def metadata_plane(path: Path) -> Any | None:
    """The ``/host:metadata`` plane (XLA's HLO modules) of an XSpace file, or None (no such plane, or
    not an XSpace). Only that plane is parsed: the others are stepped over by their lengths."""
    try:
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return _find_metadata_plane(memoryview(mapped))
    except (OSError, ValueError):  # unreadable, or empty (mmap refuses a file of 0 bytes)
        return None


def _find_metadata_plane(data: memoryview) -> Any | None:
    wanted = b"/host:metadata"
    at = 0
    try:
        while at < len(data):
            key, at = _varint(data, at)
            if key & 7 == 0:
                _, at = _varint(data, at)
                continue
            if key & 7 != 2:
                return None
            length, at = _varint(data, at)
            body, at = data[at:at + length], at + length
            if key >> 3 == 1 and _field_bytes(body, 2) == wanted:
                plane = _MESSAGES["XPlane"]()
                plane.ParseFromString(bytes(body))
                return plane
    except (IndexError, message.DecodeError):
        return None
    finally:
        data.release()
    return None


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def _field_bytes(body: memoryview, number: int) -> bytes | None:
    """The first length-delimited field ``number`` of a message's bytes (a plane's name is field 2)."""
    at = 0
    while at < len(body):
        key, at = _varint(body, at)
        wire = key & 7
        if wire == 0:
            _, at = _varint(body, at)
        elif wire == 2:
            length, at = _varint(body, at)
            if key >> 3 == number:
                return bytes(body[at:at + length])
            at += length
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            return None
    return None


@dataclass
class _Plane:
    """What every line of a plane reads its events with."""

    stat_names: dict[int, str]
    meta_stats: dict[int, dict[str, Any]]   # metadata id -> its stats (ids with stats only)
    meta_names: dict[int, str]
    gpu: bool
    walker_tables: tuple[Any, ...] | None = None  # stat ids, name indices, names (JSON, UTF-8), specials, metadata with stats

    def tables(self) -> tuple[Any, ...]:
        """The plane's stat names as the C walker takes them (built on first use)."""
        if self.walker_tables is None:
            ids = sorted(self.stat_names)
            distinct: dict[str, int] = {}
            name_of = [distinct.setdefault(self.stat_names[i], len(distinct)) for i in ids]
            specials = tuple(distinct.get(k, -1) for k in ("correlation_id", "step_num", "hlo_op", "kernel_details",
                                                            "bytes_allocated", "@num_occurrences"))
            self.walker_tables = (np.array(ids, np.int64).tobytes(), np.array(name_of, np.int32).tobytes(),
                                  tuple(encode_basestring_ascii(k).encode() for k in distinct),
                                  tuple(k.encode() for k in distinct), specials,
                                  np.array(sorted(self.meta_stats), np.int64).tobytes())
        return self.walker_tables


def _read_plane(plane: Any, host: int, profile_start: int, rows: _Rows, device_info: list[dict[str, Any]],
                walker: ModuleType | None) -> None:
    stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
    meta = plane.event_metadata
    gpu_match = GPU_PLANE.match(plane.name)
    device = int(gpu_match.group(1)) if gpu_match else -1
    if gpu_match:
        device_info.append({"id": device, "name": plane.name, **_plane_stats(plane)})
    # Metadata stats apply to every event of that metadata id: resolve once per id (one pass over
    # the map: iterating protobuf's map from Python costs more than what is read).
    meta_names: dict[int, str] = {}
    meta_stats: dict[int, dict[str, Any]] = {}
    for mid, m in meta.items():
        meta_names[mid] = m.name
        if m.stats:
            meta_stats[mid] = {stat_names.get(s.metadata_id, str(s.metadata_id)): _stat_value(s, stat_names) for s in m.stats}
    ctx = _Plane(stat_names, meta_stats, meta_names, bool(gpu_match))
    for line in plane.lines:
        rows.lines_read += 1
        events = line.events
        n = len(events)
        if not n:
            continue
        base_ns = line.timestamp_ns + (profile_start if line.timestamp_ns < RELATIVE_TIMESTAMP_LIMIT else 0)
        derived = line.name in DERIVED_LINES
        category = f"{plane.name}/{re.sub(r'/-?[0-9]+$', '', line.name)}" + ("/derived" if derived else "")
        per_row = _walk_line(walker, ctx, line, base_ns, rows) if walker is not None else None
        if per_row is None:
            per_row = _read_line(ctx, line, base_ns, rows)
        kernel, args = per_row.pop("kernel"), per_row.pop("args")
        # What is the same for every event of the line goes in once per line.
        rows.add(n, kernel, args, group=rows.lines_read, host=host, tid=-1 if gpu_match else line.id, device=device,
                 stream=line.id if gpu_match and not derived else -1, category=rows.code(category),
                 plane=rows.code(plane.name), line=rows.code(line.name), **per_row)


def _read_line(ctx: _Plane, line: Any, base_ns: int, rows: _Rows, only: list[int] | None = None) -> dict[str, Any]:
    """The per-row columns of a line's events (those at ``only``, when given) through protobuf's
    Python objects: the reader without the C walker, and its fallback for unusual events."""
    base_ps = base_ns * 1000
    device_line = line.name if ctx.gpu else None
    starts, durs, kinds, codes, corrs, steps, kernels, texts = [], [], [], [], [], [], [], []
    # An event without stats of its own is its metadata's: read once per metadata id and line.
    shared: dict[int, tuple[int, int, int, int, tuple[int, ...], str | None]] = {}
    events = line.events
    for ev in (events if only is None else (events[i] for i in only)):
        starts.append((base_ps + ev.offset_ps) // 1000)
        durs.append(ev.duration_ps // 1000)
        mid = ev.metadata_id
        own = ev.stats
        occurrences = ev.WhichOneof("data") == "num_occurrences"
        facts = shared.get(mid) if not own and not occurrences else None
        if facts is None:
            stats = dict(ctx.meta_stats.get(mid, {}))
            for st in own:
                stats[ctx.stat_names.get(st.metadata_id, str(st.metadata_id))] = _stat_value(st, ctx.stat_names)
            name, *rest = _event_facts(ctx.meta_names.get(mid, ""), stats, device_line,
                                       ev.num_occurrences if occurrences else None)
            facts = (rows.code(name), *rest)  # type: ignore[assignment]
            if not own and not occurrences:
                shared[mid] = facts  # type: ignore[assignment]
        code, kind, corr, step, kernel, args = facts  # type: ignore[misc]
        codes.append(code)
        kinds.append(kind)
        corrs.append(corr)
        steps.append(step)
        kernels.append(kernel)
        texts.append(args)
    n = len(starts)
    return {"start": np.array(starts, np.int64), "dur": np.array(durs, np.int64), "kind": np.array(kinds, np.int8),
            "name": np.array(codes, np.int64), "correlation": np.array(corrs, np.int64),
            "step_num": np.array(steps, np.int64), "kernel": np.array(kernels, np.int64).reshape(n, len(KERNEL_DETAIL_COLUMNS)),
            "args": columns.string_array(texts, pa.large_string())}


_PER_ROW = ("start", "dur", "kind", "name", "correlation", "step_num", "kernel")


def _walk_line(walker: ModuleType, ctx: _Plane, line: Any, base_ns: int, rows: _Rows) -> dict[str, Any] | None:
    """The per-row columns of a line through the C walker (``xplane_events.c``); None where its bytes
    do not walk (the Python reader then reads the line). The walker gives each event a mode: 1 read
    in C; 0 no stats of its own (its metadata's facts, read here once per metadata id); 2 unusual
    (read here alone)."""
    try:
        (start, dur, mid, mode, flags, corr, step, kd, nbytes, (validity, offsets, data), kernel_texts,
         n) = walker.walk_line(line.SerializeToString(), base_ns, *ctx.tables())
    except (ValueError, OverflowError):
        return None
    mid, nbytes = np.frombuffer(mid, np.int64), np.frombuffer(nbytes, np.int64)
    mode, flags, kd = np.frombuffer(mode, np.int8), np.frombuffer(flags, np.int8), np.frombuffer(kd, np.int32)
    out: dict[str, Any] = {
        "start": np.frombuffer(start, np.int64).copy(), "dur": np.frombuffer(dur, np.int64),
        "kind": np.zeros(n, np.int8), "name": np.zeros(n, np.int64), "correlation": np.frombuffer(corr, np.int64).copy(),
        "step_num": np.frombuffer(step, np.int64).copy(), "kernel": np.full((n, len(KERNEL_DETAIL_COLUMNS)), -1, np.int64)}
    args = pa.Array.from_buffers(pa.large_string(), n, [pa.py_buffer(validity), pa.py_buffer(offsets), pa.py_buffer(data)])
    walked = np.flatnonzero(mode == 1)
    if walked.size:
        _walked_facts(out, walked, mid, flags, kd, nbytes, kernel_texts, ctx, line.name, rows)
    texts: list[str | None] = []  # args of the rows read here; text_index: each row's place in it
    text_index = np.zeros(n, np.int64)
    shared = np.flatnonzero(mode == 0)
    if shared.size:
        distinct, inverse = columns.factorize(mid[shared])
        one_each = np.zeros(distinct.size, np.int64)
        one_each[inverse] = shared
        part = _read_line(ctx, line, base_ns, rows, one_each.tolist())
        for c in _PER_ROW[2:]:  # start and duration are the event's own
            out[c][shared] = part[c][inverse]
        text_index[shared] = len(texts) + inverse
        texts += part["args"].to_pylist()
    alone = np.flatnonzero(mode == 2)
    if alone.size:
        part = _read_line(ctx, line, base_ns, rows, alone.tolist())
        for c in _PER_ROW:
            out[c] = out[c].copy() if not out[c].flags.writeable else out[c]
            out[c][alone] = part[c]
        text_index[alone] = len(texts) + np.arange(alone.size)
        texts += part["args"].to_pylist()
    if texts:  # row i's args: the walker's (at i), or for rows read here, texts[text_index[i]] (at n + that)
        index = np.where(mode == 1, np.arange(n, dtype=np.int64), n + text_index)
        args = columns.take_strings(pa.concat_arrays([args, columns.string_array(texts, pa.large_string())]), index)
    out["args"] = args
    return out


def _walked_facts(out: dict[str, Any], walked: np.ndarray, mid: np.ndarray, flags: np.ndarray, kd: np.ndarray,
                  nbytes: np.ndarray, kernel_texts: list[str], ctx: _Plane, line_name: str, rows: _Rows) -> None:
    """Name, kind, step and kernel columns of the rows the walker read: name and kind once per
    (metadata id, stat names present), kernel details once per distinct text."""
    distinct, inverse = columns.factorize(mid[walked] * 8 + flags[walked])
    facts = []
    for key in distinct.tolist():
        name = ctx.meta_names.get(key >> 3, "")
        present = {s for bit, s in ((1, "correlation_id"), (2, "step_num"), (4, "hlo_op")) if key & bit}
        kind = _device_kind(line_name, name) if ctx.gpu else _host_kind(name, present)  # type: ignore[arg-type]
        facts.append((rows.code(name), KIND_CODES[kind]))
    table = np.array(facts, np.int64).reshape(-1, 2)
    out["name"][walked], out["kind"][walked] = table[inverse, 0], table[inverse, 1]
    kinds = out["kind"][walked]
    out["step_num"][walked] = np.where(kinds == KIND_CODES["step"], out["step_num"][walked], -1)
    details = np.array([_kernel_details_row(t) for t in kernel_texts], np.int64).reshape(-1, len(KERNEL_DETAIL_COLUMNS) - 1)
    has = kd[walked] >= 0
    out["kernel"][walked[has], :-1] = details[kd[walked[has]]]
    out["kernel"][walked, -1] = np.where(kinds == KIND_CODES["memory"], nbytes[walked], -1)


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


def _add_derived_steps(rows: _Rows, cols: dict[str, np.ndarray]) -> bool:
    """Step rows from the device ``Steps`` lines, for captures without TraceMe step markers.

    TF 2.3/2.4 mark no step on the host; its profiler grouped events by ``group_id`` and wrote one
    ``Steps`` event per device and step. Each becomes a host step row reaching back to the first
    launch onto that device within the step (the host's lead), since steps hold host rows. The same
    group on several devices is one step only where their windows overlap (data-parallel replicas
    run together); groups repeated at disjoint times are separate executions, so then every step is
    numbered in time order and the profiler's group id kept in args.
    """
    steps_line = rows.strings.get("Steps")
    step_rows = (np.flatnonzero((cols["line"] == steps_line) & (cols["kind"] == KIND_CODES["gpu_user_range"]))
                 if steps_line is not None else np.zeros(0, np.int64))
    if not step_rows.size:
        return False
    ends = cols["start"] + cols["dur"]
    leads = _launch_leads(cols, [(int(cols["host"][i]), int(cols["device"][i]), int(cols["start"][i]), int(ends[i]))
                                 for i in step_rows.tolist()])
    texts = pa.chunked_array(rows.args, pa.large_string()).take(columns.numeric_array(step_rows, pa.int64())).to_pylist()
    values = rows.values()
    windows = []  # (start, end, group, host, device)
    for i, lead, text in zip(step_rows.tolist(), leads, texts, strict=True):
        args = json.loads(text) if text else {}
        group = args.get("group_id")
        if not isinstance(group, int):
            name = values[int(cols["name"][i])]
            group = int(name) if name.lstrip("-").isdigit() else -1
        windows.append([lead, int(ends[i]), group, int(cols["host"][i]), int(cols["device"][i])])
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
    numbers = [number if renumber else group for number, (_, _, group, _, _) in enumerate(steps)]
    n = len(steps)
    groups_read = rows.lines_read + 1 + np.arange(n, dtype=np.int64)
    rows.lines_read += n
    rows.add(n, np.tile(np.array(NO_KERNEL_DETAILS, np.int64), (n, 1)),
             columns.string_array([_args_text({"group_id": group, "devices": sorted(devices),
                                               "derived_from": "device Steps lines"})
                                   for _, _, group, _, devices in steps], pa.large_string()),
             start=np.array([st[0] for st in steps], np.int64), dur=np.array([st[1] - st[0] for st in steps], np.int64),
             kind=KIND_CODES["step"], name=np.array([rows.code(f"Step {k}") for k in numbers], np.int64),
             category=rows.code("Steps/derived"), group=groups_read, host=np.array([st[3] for st in steps], np.int64),
             tid=-1, device=-1, stream=-1, plane=rows.code("/host:CPU"), line=rows.code("Steps"), correlation=-1,
             step_num=np.array(numbers, np.int64))
    return True


# The function Keras's fit/evaluate/predict call once per batch (per steps_per_execution batches):
# Keras 3's trainer and tf.keras's. A capture started by hand (tf.profiler.experimental.start/stop)
# has no step markers; each call of these is then one step.
KERAS_STEP_FUNCTIONS = ("multi_step_on_iterator", "one_step_on_iterator", "multi_step_on_data", "one_step_on_data",
                        "train_function", "test_function", "predict_function")


def _mark_function_steps(rows: _Rows, cols: dict[str, np.ndarray]) -> str | None:
    """Without step markers, make each call of the Keras per-batch function a step, numbered in time
    order; returns its name, or None. Only where the evidence says they are a loop's iterations: the
    most called such function, called at least twice, every call on one host thread, one after the
    other (a call never inside another)."""
    host_ranges = (cols["kind"] == KIND_CODES["user_range"]) & (cols["device"] < 0)
    found = [(int(np.count_nonzero(host_ranges & (cols["name"] == rows.strings[n]))), n)
             for n in KERAS_STEP_FUNCTIONS if n in rows.strings]
    if not found:
        return None
    calls, name = max(found)
    if calls < 2:
        return None
    at = np.flatnonzero(host_ranges & (cols["name"] == rows.strings[name]))
    at = at[np.argsort(cols["start"][at], kind="stable")]
    if columns.distinct(cols["host"][at]).size > 1 or columns.distinct(cols["tid"][at]).size > 1:
        return None
    if np.any(cols["start"][at[1:]] < cols["start"][at[:-1]] + cols["dur"][at[:-1]]):
        return None
    cols["kind"][at] = KIND_CODES["step"]
    cols["step_num"][at] = np.arange(at.size)
    return name


def _launch_leads(cols: dict[str, np.ndarray], windows: list[tuple[int, int, int, int]]) -> list[int]:
    """For each (host, device, start, end) window: the start of the earliest launch call whose GPU
    work on that device runs in [start, end), or ``start`` when none does. One pass over the rows
    in numpy, then one vectorized selection per window."""
    kinds, corr, hosts, starts, devices = cols["kind"], cols["correlation"], cols["host"], cols["start"], cols["device"]
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


def _in_first_seen_order(codes: np.ndarray, values: list[str]) -> pa.DictionaryArray:
    """Dictionary column of codes into ``values``, its dictionary the values used in the order
    they first appear (as Arrow's dictionary_encode of the strings gives it)."""
    distinct, first = np.unique(codes, return_index=True)
    order = distinct[np.argsort(first, kind="stable")]
    remap = np.zeros(len(values) or 1, np.int64)
    remap[order] = np.arange(order.size)
    return columns.dictionary(remap[codes], [values[i] for i in order.tolist()])


def _assemble(path: Path, cols: dict[str, np.ndarray], rows: _Rows, hosts: int, meta: TraceMeta) -> pa.Table:
    n = cols["start"].size
    values = rows.values()
    host_a = cols["host"]
    row_links = links.link(cols["kind"], cols["start"], cols["dur"], cols["group"], cols["correlation"],
                           host_a if hosts > 1 else np.zeros(1, np.int64), None, cols["step_num"],
                           op_kinds=("cpu_op",), process=host_a if hosts > 1 else None)
    table: dict[str, Any] = {
        "kind": columns.dictionary(cols["kind"], columns.KIND_DICTIONARY, pa.int8()),
        "category": _in_first_seen_order(cols["category"], values),
        "name": _in_first_seen_order(cols["name"], values),
        "tid": columns.nullable(cols["tid"], -1, pa.int64()),
        "process_name": _in_first_seen_order(cols["plane"], values),
        "thread_name": _in_first_seen_order(cols["line"], values),
        "device_id": columns.nullable(cols["device"], -1, pa.int32()),
        "stream_id": columns.nullable(cols["stream"], -1, pa.int64()),
        "start_ns": columns.numeric_array(cols["start"], pa.int64()),
        "dur_ns": columns.numeric_array(cols["dur"], pa.int64()),
        "correlation_id": columns.nullable(cols["correlation"], -1, pa.int64()),
        "args": pa.chunked_array([pa.ExtensionArray.from_storage(schema.ARGS_TYPE, a) for a in rows.args],
                                 schema.ARGS_TYPE),
    }
    for j, c in enumerate(KERNEL_DETAIL_COLUMNS):
        dtype = pa.int64() if c in ("shared_memory_bytes", "bytes") else pa.int32()
        table[c] = columns.nullable(np.ascontiguousarray(cols["kernel"][:, j]), -1, dtype)
    return columns.assemble(n, table, meta, row_links)
