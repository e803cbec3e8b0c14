"""PaddlePaddle's profiler JSON (``paddle.profiler.Profiler(on_trace_ready=export_chrome_tracing(dir))``,
``<host>_pid_<pid>_time_<...>.paddle_trace.json``) -> event table.

Paddle writes Chrome trace events with Kineto-like categories but its own conventions::

    {"schemaVersion": "1.0.2", "displayTimeUnit": "ms", "span_index": "0", "traceEvents": [
     {"name": "ProfileStep#1[2.725 ms]", "pid": 29569, "tid": "29569(Python)", "ts": ..., "dur": 2724.857,
      "ph": "X", "cat": "ProfileStep", ...},
     {"name": "matmul dygraph[0.677 ms]", "pid": 29569, "tid": "29569(C++)", ..., "cat": "Operator"},
     {"name": "matmul kernel launch[0.65 ms]", ..., "cat": "DygraphKernelLaunch"}, ...], "ExtraInfo": {...}}

The Kineto reader scans it; this module then:

* takes the duration Paddle appends to every name (``[2.725 ms]``, ``[653.729 us]``) off, so each op
  has one name;
* joins each thread's two lanes (``29569(Python)`` for steps, module forward ranges and user ranges,
  ``29569(C++)`` for ops), which are one OS thread, and nests the rows again over both: an op sits
  inside the step and the ``Forward`` range that ran it;
* gives Paddle's categories their kinds: ``ProfileStep#N`` the steps (where there are two or more:
  without ``prof.step()`` Paddle writes one ``ProfileStep#0`` over the whole capture); ``Operator`` (the dygraph op,
  ``matmul dygraph``, and autograd's grad nodes, ``Global_MatmulGradNode``), ``OperatorInner``
  (``matmul infer_meta``, ``node_creation``) and ``DygraphKernelLaunch`` / ``StaticKernelLaunch``
  (``matmul kernel launch``: on a CPU the kernel's compute itself) ops; ``Forward``, ``Backward``,
  ``Optimization``, ``Dataloader``, ``UserDefined``, ``PythonOp`` and ``PythonUserDefined`` host
  ranges; ``CudaRuntime`` GPU runtime calls. The op classes read the kernel launches' op types
  (``tracekit.analyze.classify``); a dygraph op's and a grad node's own time, and the infer_meta and
  node-creation steps, are the framework's.

GPU traces (``Kernel``, ``Memcpy``, ``Memset`` rows on device/stream lanes) keep the kinds the Kineto
reader gives those categories, but their launch links (Paddle's ``correlation id`` args and ``launch``
flows) are not read: no Paddle GPU trace is at hand to check them on. The report says so beside the
verdict of such a trace (``tracekit.analyze.launch.PADDLE_GPU_CAVEAT``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from tracekit import schema
from tracekit.errors import InputError
from tracekit.ingest import columns, kineto, links

# What the head of Paddle's file holds (``sniff``): its span key (``span_indx`` before Paddle 2.5),
# and a lane-suffixed thread id or a name carrying its duration.
_SPAN_KEY = re.compile(rb'"span_ind(?:e)?x"\s*:')
_LANE_TID = re.compile(rb'"tid"\s*:\s*"\d+\((?:Python|C\+\+)\)"')
_TIMED_NAME = re.compile(rb'"name"\s*:\s*"[^"]*\[-?[0-9.]+ (?:s|ms|us|ns)\]"')
_DURATION_SUFFIX = re.compile(r"\[-?[0-9.]+(?:e[-+]?\d+)? (?:s|ms|us|ns)\]$")
_THREAD = re.compile(r"^(?:thread )?(\d+)(?::([^()]*))?\((?:Python|C\+\+)\)$")
STEP = re.compile(r"^ProfileStep#(\d+)$")

OP_CATEGORIES = frozenset({"Operator", "OperatorInner", "DygraphKernelLaunch", "StaticKernelLaunch", "Communication"})
RANGE_CATEGORIES = frozenset({"Forward", "Backward", "Optimization", "Dataloader", "UserDefined", "PythonOp",
                              "PythonUserDefined"})


def sniff(head: bytes) -> bool:
    """True when a JSON document's head reads like PaddlePaddle's profiler output."""
    return bool(_SPAN_KEY.search(head)) and bool(_LANE_TID.search(head) or _TIMED_NAME.search(head))


def read(path: Path, gz: bool = False, file_sha256: str | None = None) -> pa.Table:
    table = kineto.read(path, gz=gz, file_sha256=file_sha256)
    if table.num_rows == 0:
        raise InputError(path, "PaddlePaddle profile without any event")
    return _as_paddle(table, "paddle-json-gz" if gz else "paddle-json")


def _as_paddle(table: pa.Table, fmt: str) -> pa.Table:
    n = table.num_rows
    name_code, names = columns.codes_and_values(table.column("name"))
    names = [_DURATION_SUFFIX.sub("", v) for v in names]  # duplicates: columns.dictionary keeps each once
    cat_code, categories = columns.codes_and_values(table.column("category"))
    kind = columns.kind_codes(table.column("kind")).copy()

    def rows_of(wanted: frozenset[str] | set[str]) -> np.ndarray:
        codes = [i for i, c in enumerate(categories) if c in wanted]
        return np.isin(cat_code, codes) if codes else np.zeros(n, bool)

    complete = links.kind_mask(kind, "other", "user_range", "cpu_op")  # not metadata, flows or GPU rows
    kind[rows_of(OP_CATEGORIES) & complete] = schema.KIND_CODES["cpu_op"]
    kind[rows_of(RANGE_CATEGORIES) & complete] = schema.KIND_CODES["user_range"]
    kind[rows_of({"CudaRuntime"}) & complete] = schema.KIND_CODES["runtime_api"]
    step_codes = [i for i, v in enumerate(names) if STEP.match(v)]
    steps = np.flatnonzero(rows_of({"ProfileStep"}) & complete & np.isin(name_code, step_codes))
    # Without prof.step() calls Paddle writes one ProfileStep#0 over the whole capture: no step marked
    # (a RecordEvent around each iteration can then be the steps: tracekit/ingest/step_inference.py).
    kind[steps] = schema.KIND_CODES["step" if steps.size > 1 else "user_range"]
    steps = steps if steps.size > 1 else steps[:0]

    # One OS thread, two lanes: the thread id and name from the lane's label.
    pid, tid = columns.int64_or(table.column("pid"), -1), columns.int64_or(table.column("tid"), -1)
    thread_code, thread_names = columns.codes_and_values(table.column("thread_name"))
    lane_tid = np.full(len(thread_names) + 1, -1, np.int64)
    plain_names = list(thread_names)
    for i, label in enumerate(thread_names):
        found = _THREAD.match(label)
        if found:
            lane_tid[i] = int(found.group(1))
            plain_names[i] = f"thread {found.group(1)}" + (f":{found.group(2)}" if found.group(2) else "")
    from_lane = lane_tid[np.where(thread_code >= 0, thread_code, len(thread_names))]
    tid = np.where((tid < 0) & (from_lane >= 0), from_lane, tid)

    start = columns.int64_or(table.column("start_ns"), 0)
    end = start + np.maximum(columns.int64_or(table.column("dur_ns"), 0), 0)
    host = links.kind_mask(kind, *links.NESTED_KINDS) & ~links.kind_mask(kind, *schema.GPU_ACTIVITY_KINDS, "gpu_user_range")
    host_rows = np.flatnonzero(host & (tid >= 0))
    parent, depth = columns.int64_or(table.column("parent"), -1), columns.int64_or(table.column("depth"), 0)
    if host_rows.size:  # GPU rows keep the Kineto reader's nesting (per device and stream)
        nested_parent, nested_depth = links.nest((pid << 32) ^ (tid & 0xFFFFFFFF), start, end, host_rows, n)
        parent[host_rows], depth[host_rows] = nested_parent[host_rows], nested_depth[host_rows]
    numbers = np.array([_step_number(names[c]) for c in name_code[steps].tolist()], np.int64)
    step = links.assign_steps(n, start, end, host, steps, numbers, pid)

    out = table
    out = columns.replaced(out, "kind", columns.dictionary(kind.astype(np.int8), list(schema.KINDS), pa.int8()))
    out = columns.replaced(out, "name", columns.dictionary(name_code, names))
    out = columns.replaced(out, "tid", columns.nullable(tid, -1, pa.int64()))
    out = columns.replaced(out, "thread_name", columns.dictionary(thread_code, plain_names))
    out = columns.replaced(out, "parent", columns.nullable(parent, -1, pa.int64()))
    out = columns.replaced(out, "depth", columns.numeric_array(depth.astype(np.int16), pa.int16()))
    out = columns.replaced(out, "step", columns.nullable(step, -1, pa.int32()))
    out = columns.replaced(out, "source", columns.dictionary(np.zeros(n, np.int8), ["paddle"], pa.int8()))
    metadata = dict(out.schema.metadata or {})
    metadata[schema.META_SOURCE.encode()] = b"paddle"
    metadata[schema.META_SOURCE_FORMAT.encode()] = fmt.encode()
    extra = columns.trace_extra(out)
    version = extra.get("schemaVersion")
    metadata[schema.META_PROFILER_VERSION.encode()] = f"paddle profiler schemaVersion {version or '?'}".encode()
    return out.replace_schema_metadata(metadata)


def _step_number(name: str) -> int:
    found = STEP.match(name)
    return int(found.group(1)) if found else -1
