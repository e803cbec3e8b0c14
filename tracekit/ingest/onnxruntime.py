"""ONNX Runtime's profile JSON (``SessionOptions.enable_profiling``, ``onnxruntime_perf_test -p``) ->
event table.

ORT writes a Chrome trace-event array, one complete event per session phase and per node run::

    [{"cat" : "Session", "pid" :19866, "tid" :19866, "dur" :240, "ts" :15077, "ph" : "X",
      "name" :"model_run", "args" : {}},
     {"cat" : "Node", ..., "dur" :50, "ts" :24973, "ph" : "X", "name" :"/2/Gemm_kernel_time",
      "args" : {"op_name" : "Gemm", "provider" : "CPUExecutionProvider",
                "input_type_shape" : [{"float":[32,512]},{"float":[256]}], ...}}, ...]

Times are whole µs from the session's creation (no wall-clock start is written). The Kineto reader
scans it (the same Chrome events, nesting per thread); this module then says what ORT's events
are:

* ``Session`` events (``model_loading_uri``, ``session_initialization``, ``model_run`` around each
  ``InferenceSession.run``, the executor's ``SequentialExecutor::Execute`` inside it) are host ranges;
  the calls of ``model_run`` become the steps where the step inference finds them a loop's iterations
  (``tracekit/ingest/step_inference.py``), as for any range around each iteration.
* A node's ``<node>_kernel_time`` event is one op run: named by its ONNX op type (``op_name``:
  ``Gemm``, ``Conv``, ``FusedMatMul``, the contrib ops), so the classes and tables group ops of one
  type as they do aten's; its node name, provider and ORT's own fields stay in ``args``, with the
  input shapes as Kineto writes them (``Input Dims``, ``Input type``). ORT leaves constant inputs
  (weights it prepacked) out of ``input_type_shape``, so shapes group calls but give no FLOPs.
* ``<node>_fence_before`` / ``_fence_after`` (older releases' synchronization around each node) and
  any category an execution provider adds are kept as they are, of kind ``other``: no such trace of a
  GPU provider is at hand to read them from. A node run by a GPU provider (CUDA, TensorRT, ROCm,
  DirectML, ...) is the host's call that enqueues its kernels, not their GPU time: the report says so
  (``tracekit.analyze.gpu_presence``) instead of judging the host's time as the model's. The node runs
  per provider are kept in the trace's facts (``onnxruntime_providers``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tracekit import schema
from tracekit.errors import InputError
from tracekit.ingest import columns, kineto

# ORT's first events (checked by ``sniff``): a JSON array of events of its categories, opened by the
# session's loading or, for a file cut from a longer run, node events with ORT's per-node fields.
_ARRAY_OF_EVENTS = re.compile(rb'^\s*\[\s*\{\s*"cat"\s*:\s*"(Session|Node)"')
_SESSION_PHASE = re.compile(rb'"name"\s*:\s*"(model_loading_(uri|array)|session_initialization|model_run)"')
_NODE_FIELDS = re.compile(rb'"op_name"\s*:\s*"[^"]*".*"provider"\s*:|"provider"\s*:\s*"[^"]*".*"op_name"\s*:', re.S)

KERNEL_TIME = "_kernel_time"


def sniff(head: bytes) -> bool:
    """True when a JSON document's head reads like ONNX Runtime's profile."""
    return bool(_ARRAY_OF_EVENTS.match(head)) and bool(_SESSION_PHASE.search(head) or _NODE_FIELDS.search(head))


def read(path: Path, gz: bool = False, file_sha256: str | None = None) -> pa.Table:
    table = kineto.read(path, gz=gz, file_sha256=file_sha256)
    if table.num_rows == 0:
        raise InputError(path, "ONNX Runtime profile without any event")
    return _as_onnxruntime(table, "onnxruntime-json-gz" if gz else "onnxruntime-json")


def _as_onnxruntime(table: pa.Table, fmt: str) -> pa.Table:
    """The Chrome table of an ORT profile with ORT's events given their kinds, op rows their op
    types, and the trace labelled as ORT's."""
    cat_code, category = columns.codes_and_values(table.column("category"))
    name_code, name_values = columns.codes_and_values(table.column("name"))
    kind = columns.kind_codes(table.column("kind"))

    session = _codes_of(category, {"Session"})
    node = _codes_of(category, {"Node"})
    # The Kineto reader gives complete events of categories it does not know the kind "other".
    chrome_event = (kind == schema.KIND_CODES["other"]) | (kind == schema.KIND_CODES["user_range"])
    is_session = np.isin(cat_code, session) & chrome_event if session else np.zeros(len(kind), bool)
    kernel_names = [i for i, v in enumerate(name_values) if v.endswith(KERNEL_TIME)]
    is_node_run = (np.isin(cat_code, node) & np.isin(name_code, kernel_names) & chrome_event
                   if node and kernel_names else np.zeros(len(kind), bool))
    kind = kind.copy()
    kind[is_session] = schema.KIND_CODES["user_range"]
    kind[is_node_run] = schema.KIND_CODES["cpu_op"]
    # Any other uncategorised complete event the Kineto reader took for a host range stays ORT's own
    # record: fences and providers' events are not ranges a user opened.
    kind[~is_session & ~is_node_run & (kind == schema.KIND_CODES["user_range"])] = schema.KIND_CODES["other"]

    rows = np.flatnonzero(is_node_run)
    args_texts = table.column("args").combine_chunks().storage.to_pylist() if rows.size else []
    new_args, op_type_of_name, providers = _node_args(rows, name_code, name_values, args_texts)

    op_types = sorted(set(op_type_of_name.values()))
    lookup = np.arange(len(name_values))
    type_code = {t: len(name_values) + i for i, t in enumerate(op_types)}
    for code, op_type in op_type_of_name.items():
        lookup[code] = type_code[op_type]
    renamed = np.where(name_code >= 0, lookup[np.where(name_code >= 0, name_code, 0)], -1)

    out = table
    out = columns.replaced(out, "kind", columns.dictionary(kind.astype(np.int8), list(schema.KINDS), pa.int8()))
    out = columns.replaced(out, "name", columns.dictionary(renamed, name_values + op_types))
    if rows.size:
        out = columns.replaced(out, "args", columns.json_args_from_texts(new_args))
    out = columns.replaced(out, "source", columns.dictionary(np.zeros(len(kind), np.int8), ["onnxruntime"], pa.int8()))
    return _relabelled(out, fmt, providers)


# A node run's input shapes in the args as the Kineto reader keeps them (compact JSON):
# "input_type_shape":[{"float":[32,256]},{"float":[512]}].
_INPUT_SHAPES = re.compile(r'"input_type_shape":(\[(?:\{"[^"]*":\[[-0-9,]*\]\},?)*\])')


def _node_args(rows: np.ndarray, name_code: np.ndarray, name_values: list[str],
               args_texts: list[str | None]) -> tuple[list[str | None], dict[int, str], dict[str, int]]:
    """Each node run's args with its node name and its input shapes and dtypes under Kineto's keys
    (``Input Dims``, ``Input type``, which the op tables read) put before ORT's fields; the op type of
    each node-event name; node runs per provider. A node's op type and provider are read once per
    node (they do not change from run to run); its shapes per run (a dynamic axis does), as text."""
    new_args = list(args_texts)
    fields_of_node: dict[int, dict[str, Any]] = {}
    prefixes: dict[tuple[int, str], str] = {}
    for row in rows.tolist():
        text = args_texts[row] or "{}"
        code = int(name_code[row])
        if code not in fields_of_node:
            fields_of_node[code] = _object(text)
        found = _INPUT_SHAPES.search(text)
        if found is None:  # another form of input (a sequence, a map): read this run's fields whole
            prefix = _args_prefix(name_values[code], _object(text).get("input_type_shape"))
        else:
            key = (code, found.group(1))
            if key not in prefixes:
                prefixes[key] = _args_prefix(name_values[code], json.loads(found.group(1)))
            prefix = prefixes[key]
        new_args[row] = prefix + ("}" if text.strip() == "{}" else "," + text.lstrip()[1:])
    runs = np.bincount(name_code[rows], minlength=len(name_values)) if rows.size else np.zeros(0, np.int64)
    op_type_of_name: dict[int, str] = {}
    providers: dict[str, int] = {}
    for code, fields in fields_of_node.items():
        op_type = fields.get("op_name")
        op_type_of_name[code] = op_type if isinstance(op_type, str) and op_type else _node_name(name_values[code])
        provider = fields.get("provider")
        if isinstance(provider, str):
            providers[provider] = providers.get(provider, 0) + int(runs[code])
    return new_args, op_type_of_name, providers


def _node_name(event_name: str) -> str:
    return event_name[: -len(KERNEL_TIME)]


def _args_prefix(event_name: str, inputs: Any) -> str:
    """The opening of a node run's args: ``{"node": ..., "Input Dims": ..., "Input type": ...``."""
    dims: list[Any] = []
    types: list[str] = []
    for item in inputs if isinstance(inputs, list) else []:
        if isinstance(item, dict) and len(item) == 1:
            (dtype, shape), = item.items()
            dims.append(shape if isinstance(shape, list) else [])
            types.append(str(dtype))
    opening = {"node": _node_name(event_name), **({"Input Dims": dims, "Input type": types} if dims else {})}
    return json.dumps(opening, separators=(",", ":"))[:-1]


def _relabelled(table: pa.Table, fmt: str, providers: dict[str, int]) -> pa.Table:
    metadata = dict(table.schema.metadata or {})
    metadata[schema.META_SOURCE.encode()] = b"onnxruntime"
    metadata[schema.META_SOURCE_FORMAT.encode()] = fmt.encode()
    metadata[schema.META_PROFILER_VERSION.encode()] = b"onnxruntime profiler (enable_profiling)"
    table = table.replace_schema_metadata(metadata)
    # Which providers ran the nodes, most runs first: the report's facts and the device caveat read it.
    ranked = sorted(providers.items(), key=lambda kv: (-kv[1], kv[0]))
    return columns.with_extra(table, onnxruntime_providers={p: n for p, n in ranked})


def _object(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _codes_of(values: list[str], wanted: set[str]) -> list[int]:
    return [i for i, v in enumerate(values) if v in wanted]
