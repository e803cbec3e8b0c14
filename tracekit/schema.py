"""The normalized event table: one row per event, every source mapped into the same columns.

This module is the single definition of the schema. ``schemas/events.md`` and
``schemas/events.schema.json`` are generated from it (``python -m tracekit.schema``) and a test
checks they are current.

Conventions:
- Times are integer nanoseconds on one timeline per trace (``start_ns``, ``dur_ns``).
- Rows keep the source's order; ``parent``, ``launch_row`` and ``op_row`` are row indices into
  the same table (0-based), null when there is none.
- Low-cardinality strings are dictionary-encoded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

import pyarrow as pa

SCHEMA_VERSION: Final = "1.0"

# "chrome": a Chrome trace-event JSON that no framework's profiler wrote (viztracer, a hand-instrumented
# program): read as Kineto JSON, with no framework assumed.
# "onnxruntime": ONNX Runtime's profile JSON (SessionOptions.enable_profiling); "paddle": PaddlePaddle's
# profiler JSON (paddle.profiler's export_chrome_tracing).
SOURCES: Final = ("torch", "tf", "jax", "nsys", "chrome", "onnxruntime", "paddle")

# GPU activities that occupy a device (its busy time), and everything a launch call can produce.
GPU_BUSY_KINDS: Final = ("gpu_kernel", "gpu_memcpy", "gpu_memset", "gpu_graph")
GPU_ACTIVITY_KINDS: Final = (*GPU_BUSY_KINDS, "gpu_sync")

# Event kinds, in a fixed order (the dictionary of the ``kind`` column uses these values).
KINDS: Final = {
    "cpu_op": "framework operator on the host (aten op, TF op, XLA HLO op, eager dispatch, ONNX Runtime node run, Paddle op and kernel launch)",
    "user_range": "user range on the host: record_function, NVTX push/pop or start/end, TraceMe",
    "gpu_user_range": "a user range mirrored on the GPU timeline (Kineto gpu_user_annotation)",
    "python_function": "Python function call recorded by a Python tracer",
    "step": "step marker range (ProfilerStep#N, TraceMe with step_num, NVTX range step#N or ProfilerStep#N; TF 2.3/2.4: one per device Steps-line step, from the first launch to its end; a Keras fit with no step marker: each call of its per-batch function; Paddle: ProfileStep#N; a torch.profiler, nsys, TF, JAX, ONNX Runtime or Paddle trace with no step marker: each call of the record_function, NVTX range, TraceMe, tf.function or ORT model_run that wraps the loop's iterations, where the evidence says they are iterations)",
    "gpu_kernel": "GPU kernel execution",
    "gpu_memcpy": "GPU memory copy",
    "gpu_memset": "GPU memory set",
    "gpu_sync": "GPU-side synchronization record (event sync, stream wait)",
    "gpu_graph": "a whole CUDA-graph launch traced as one GPU activity (nsys graph mode)",
    "runtime_api": "GPU runtime API call on the host (CUDA/HIP runtime; SYCL Unified Runtime on Intel GPUs)",
    "driver_api": "GPU driver API call on the host (CUDA driver; Level Zero on Intel GPUs)",
    "gpu_library_api": "cuDNN / cuBLAS API range on the host (nsys -t cudnn,cublas)",
    "overhead": "time the profiler itself spent (profiler overhead, buffer flush)",
    "memory": "memory allocation or free event (zero duration)",
    "marker": "instant event or NVTX mark (zero duration)",
    "flow": "flow endpoint linking two events (Kineto s/f: ac2g, fwdbwd)",
    "counter": "counter sample",
    "trace_span": "the profiler's own span covering the capture",
    "metadata": "a metadata record kept for losslessness (process/thread names, domains)",
    "other": "anything the ingester does not recognise; the raw category is kept",
}
# Each kind's code in the ``kind`` column's dictionary.
KIND_CODES: Final = {k: i for i, k in enumerate(KINDS)}


@dataclass(frozen=True)
class Column:
    """One column of the event table, with its documentation."""

    name: str
    type: pa.DataType
    unit: str
    meaning: str
    torch: str
    tf: str
    nsys: str


def _dict(value_type: pa.DataType | None = None, index: pa.DataType | None = None) -> pa.DataType:
    return pa.dictionary(index or pa.int32(), value_type or pa.string())


ARGS_TYPE: Final = pa.json_(pa.large_string())

COLUMNS: Final[tuple[Column, ...]] = (
    Column("trace_id", _dict(), "-", "id of the trace this row came from (first 16 hex digits of the source file's sha256)",
           "file hash", "file hash", "file hash"),
    Column("source", _dict(index=pa.int8()), "-", "which profiler wrote the trace: torch, tf, jax (XSpace written by JAX), "
           "nsys, or chrome (a Chrome trace-event JSON no framework wrote: viztracer, ...)",
           "`torch`", "`tf`", "`nsys`"),
    Column("kind", _dict(index=pa.int8()), "-", "what the event is; one of the kinds listed below",
           "from `ph` and `cat`", "from plane, line and event name/stats", "from the table"),
    Column("category", _dict(), "-", "the source's own category, verbatim; `tracekit:inferred_step` on step rows tracekit adds (a training loop's iterations, `tracekit/ingest/step_inference.py`)",
           "`cat` (`cpu_op`, `kernel`, old `Kernel`/`Runtime`, ...); `ph` for uncategorised events",
           "`<plane>/<line kind>` e.g. `/host:CPU/tf_Compute`", "table name, e.g. `CUPTI_ACTIVITY_KIND_KERNEL`"),
    Column("name", _dict(), "-", "event name (kernel name, op name, API name, range text)",
           "`name`; an op named with its overload (`capture_overload_names=True`: `aten::div.Tensor`) without it "
           "(`aten::div`)", "event metadata name (`node:OpType` for graph ops)",
           "`StringIds` value of demangledName / nameId / textId, or NVTX `text`; NVTX ranges in a named domain are `domain:text`"),
    Column("pid", pa.int64(), "-", "host process id; null for device rows and for non-numeric pids",
           "`pid` when numeric and the row is not a GPU activity", "null (XSpace has no pids)",
           "`(globalTid >> 24) & 0xFFFFFF` (or globalPid)"),
    Column("tid", pa.int64(), "-", "host thread id; null for device rows and for non-numeric tids",
           "`tid` when numeric and the row is not a GPU activity", "the XLine id of host lines",
           "`globalTid & 0xFFFFFF`"),
    Column("process_name", _dict(), "-", "process label",
           "`process_name` metadata, or the string pid (`Spans`)", "plane name (`/host:CPU`, `/device:GPU:0`)",
           "`PROCESSES.name`"),
    Column("thread_name", _dict(), "-", "thread, line or stream label",
           "`thread_name` metadata, or the string tid", "line name (`python`, `tf_Compute/…`, `Stream #13(Compute)`)",
           "`ThreadNames` value; `stream N` for GPU rows"),
    Column("device_id", pa.int32(), "-", "GPU index for device activity",
           "`args.device`, else `pid` of GPU rows", "N of `/device:GPU:N`", "`deviceId`"),
    Column("stream_id", pa.int64(), "-", "GPU stream for device activity",
           "`args.stream`, else `tid` of GPU rows", "line id of the stream line", "`streamId`"),
    Column("start_ns", pa.int64(), "ns", "start on the trace's timeline",
           "`baseTimeNanoseconds` + `ts`·1000, parsed as an exact decimal (no float rounding)",
           "`profile_start_time` + line `timestamp_ns` + `offset_ps`/1000", "`start` (session timebase)"),
    Column("dur_ns", pa.int64(), "ns", "duration; 0 for instants; null when the end is unknown",
           "`dur`·1000, exact decimal", "`duration_ps`/1000", "`end` − `start`"),
    Column("correlation_id", pa.int64(), "-", "links a launch/API call to the GPU activity it caused",
           "`args.correlation`", "stat `correlation_id`", "`correlationId`"),
    Column("external_id", pa.int64(), "-", "links a launch call to the framework op that issued it (same value on both)",
           "`args['External id']` (old: `external id`)", "null", "null"),
    Column("flow_id", pa.int64(), "-", "flow endpoint id (kind `flow`); pairs s and f events",
           "`id` of `ph` s/f", "null", "null"),
    Column("parent", pa.int64(), "row", "row of the innermost enclosing event on the same thread (or GPU stream); null at the top",
           "time containment per (pid, tid)", "time containment per line", "time containment per thread (NVTX ranges, API calls)"),
    Column("depth", pa.int16(), "-", "nesting depth; 0 at the top", "computed", "computed", "computed"),
    Column("step", pa.int32(), "-", "step number the event belongs to (GPU activity: the step of its launch call)",
           "`ProfilerStep#N` range containing the event", "`step_num` of the enclosing step marker", "null"),
    Column("launch_row", pa.int64(), "row", "for GPU activity: row of the host API call that launched it",
           "correlation join to cuda_runtime/cuda_driver", "correlation_id join to the host launch event",
           "(correlationId, pid) join to CUPTI_ACTIVITY_KIND_RUNTIME"),
    Column("op_row", pa.int64(), "row", "for GPU activity and launch calls: row of the framework op that issued the launch",
           "External id of the launch, else its innermost enclosing cpu_op", "innermost enclosing TF op of the launch, if any",
           "null"),
    Column("grid_x", pa.int32(), "blocks", "kernel grid size x", "`args.grid[0]`", "`kernel_details` grid", "`gridX`"),
    Column("grid_y", pa.int32(), "blocks", "kernel grid size y", "`args.grid[1]`", "`kernel_details` grid", "`gridY`"),
    Column("grid_z", pa.int32(), "blocks", "kernel grid size z", "`args.grid[2]`", "`kernel_details` grid", "`gridZ`"),
    Column("block_x", pa.int32(), "threads", "kernel block size x", "`args.block[0]`", "`kernel_details` block", "`blockX`"),
    Column("block_y", pa.int32(), "threads", "kernel block size y", "`args.block[1]`", "`kernel_details` block", "`blockY`"),
    Column("block_z", pa.int32(), "threads", "kernel block size z", "`args.block[2]`", "`kernel_details` block", "`blockZ`"),
    Column("registers_per_thread", pa.int32(), "registers", "registers per thread of a kernel",
           "`args['registers per thread']`", "`kernel_details` regs", "`registersPerThread`"),
    Column("shared_memory_bytes", pa.int64(), "bytes", "shared memory per block of a kernel",
           "`args['shared memory']`", "`kernel_details` shm", "`staticSharedMemory` + `dynamicSharedMemory`"),
    Column("bytes", pa.int64(), "bytes", "bytes moved or set by a memcpy/memset (allocation size for memory rows)",
           "`args.bytes`", "stat `bytes_allocated` / `memcpy_details`", "`bytes`"),
    Column("args", ARGS_TYPE, "-", "every remaining source field, as a JSON object that keeps the value types",
           "`args` minus the promoted keys, plus unrecognised top-level keys prefixed with `@`",
           "event and event-metadata stats, by stat name",
           "the table's other columns, by column name; a copy's or memset's memory kinds (`srcKind`, "
           "`dstKind`, `memKind`) as their ENUM_CUDA_MEM_KIND labels (`\"Pageable\"`, `\"Pinned\"`, `\"Device\"`)"),
)

ARROW_SCHEMA: Final = pa.schema([pa.field(c.name, c.type) for c in COLUMNS])
COLUMN_NAMES: Final = tuple(c.name for c in COLUMNS)

# Keys of the table's (and Parquet file's) metadata. Values are UTF-8 strings; *_json keys hold JSON.
META_SCHEMA_VERSION: Final = "tracekit.schema_version"
META_SOURCE: Final = "tracekit.source"
META_TRACE_ID: Final = "tracekit.trace_id"
META_SOURCE_FILE: Final = "tracekit.source_file"
META_SOURCE_SHA256: Final = "tracekit.source_sha256"
META_SOURCE_FORMAT: Final = "tracekit.source_format"
META_CAPTURE_START_NS: Final = "tracekit.capture_start_ns"
META_PROFILER_VERSION: Final = "tracekit.profiler_version"
META_FRAMEWORK_VERSION: Final = "tracekit.framework_version"
META_DEVICES_JSON: Final = "tracekit.devices_json"
META_TRACE_META_JSON: Final = "tracekit.trace_meta_json"
META_TRACEKIT_VERSION: Final = "tracekit.version"

METADATA_KEYS: Final = {
    META_SCHEMA_VERSION: "schema version of the table (this document's version)",
    META_SOURCE: "torch, tf, jax, nsys, chrome, onnxruntime or paddle",
    META_TRACE_ID: "same value as the trace_id column",
    META_SOURCE_FILE: "base name of the ingested file or directory",
    META_SOURCE_SHA256: "sha256 of the ingested file's bytes (compressed bytes for .gz)",
    META_SOURCE_FORMAT: "kineto-json, kineto-json-gz, xspace-pb, xspace-dir, xprof-json, xprof-json-gz, onnxruntime-json, "
                        "onnxruntime-json-gz, paddle-json, paddle-json-gz, nsys-sqlite, nsys-parquetdir, nsys-arrowdir, "
                        "nsys-arrows",
    META_CAPTURE_START_NS: "capture start as Unix epoch ns when the source records it, else empty",
    META_PROFILER_VERSION: "profiler version (Kineto schemaVersion + CUPTI, XSpace n/a, nsys EXPORT_PRODUCT_VERSION)",
    META_FRAMEWORK_VERSION: "framework version when the trace records it",
    META_DEVICES_JSON: "JSON list of GPUs: {id, name, and any properties the source gives}",
    META_TRACE_META_JSON: ("JSON object with the source's other trace-level fields, verbatim; for XSpace also "
                           "`hlo_classes`: `{\"<hlo_module>#<program_id>\": {instruction name: op class}}` of the XLA "
                           "modules on the `/host:metadata` plane, for the instructions that ran as events "
                           "(`tracekit/ingest/hlo.py`), `hlo_float64`: `{\"<hlo_module>#<program_id>\": [instruction names]}` of "
                           "those that run a float64 (or complex128) matrix product or convolution, and `profile_options`: the capture's `host_tracer_level`, "
                           "`device_tracer_level` and `python_tracer_level` (TF's ProfileOptions in the Task "
                           "Environment plane; at host level 2, the default, TF does not trace inexpensive ops, "
                           "`tracekit/analyze/untraced_ops.py`); tracekit's own notes: `steps_from` (where the steps of a "
                           "trace that marks none came from, `tracekit/ingest/step_inference.py`) and "
                           "`steps_not_inferred` (why a windowed ingest did not look for them: memory; or why a range around each iteration was not taken as the steps); for ONNX Runtime "
                           "`onnxruntime_providers`: node runs per execution provider (`tracekit/ingest/onnxruntime.py`)"),
    META_TRACEKIT_VERSION: "tracekit version that wrote the table",
}


def source_of(table: pa.Table) -> str:
    """The profiler that wrote a table's trace (``META_SOURCE``: torch, tf, jax, nsys, chrome, onnxruntime, paddle), or ""."""
    return (table.schema.metadata or {}).get(META_SOURCE.encode(), b"").decode()


def empty_table() -> pa.Table:
    """A zero-row table with the full schema."""
    return ARROW_SCHEMA.empty_table()


def render_markdown() -> str:
    """The human documentation of the schema (``schemas/events.md``)."""
    out = [
        f"# tracekit event table, schema version {SCHEMA_VERSION}",
        "",
        "Generated from `tracekit/schema.py` by `python -m tracekit.schema`; do not edit by hand.",
        "",
        "One row per event. Times are integer nanoseconds on one timeline per trace. Rows keep the",
        "source's order; `parent`, `launch_row` and `op_row` are 0-based row indices into the same table.",
        "Strings with few distinct values are dictionary-encoded. Null means the source has no value.",
        "",
        "## Columns",
        "",
        "| column | type | unit | meaning | torch (Kineto JSON) | tf (XSpace) | nsys (SQLite) |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in COLUMNS:
        out.append(f"| `{c.name}` | `{c.type}` | {c.unit} | {c.meaning} | {c.torch} | {c.tf} | {c.nsys} |")
    out += ["", "## Kinds", "", "| kind | meaning |", "|---|---|"]
    out += [f"| `{k}` | {v} |" for k, v in KINDS.items()]
    out += ["", "## Table metadata", "", "| key | value |", "|---|---|"]
    out += [f"| `{k}` | {v} |" for k, v in METADATA_KEYS.items()]
    out += [
        "",
        "## Versioning",
        "",
        "The major version changes when a column is removed, renamed or changes meaning or type;",
        "the minor version when a column or kind is added. Readers refuse a newer major version.",
        "",
    ]
    return "\n".join(out)


def render_json_schema() -> str:
    """A machine-readable description of the schema (``schemas/events.schema.json``)."""
    doc = {
        "schema_version": SCHEMA_VERSION,
        "columns": [
            {"name": c.name, "type": str(c.type), "unit": c.unit, "meaning": c.meaning,
             "torch": c.torch, "tf": c.tf, "nsys": c.nsys}
            for c in COLUMNS
        ],
        "kinds": KINDS,
        "metadata_keys": METADATA_KEYS,
    }
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":  # regenerate the documents in schemas/
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "schemas"
    (root / "events.md").write_text(render_markdown())
    (root / "events.schema.json").write_text(render_json_schema())
