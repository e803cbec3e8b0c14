"""Where the time went: exclusive GPU categories plus idle, host-side time, CPU-only op time.

GPU view (per device, for the whole trace and per step). The span is [first GPU activity
start, last GPU activity end]. Busy time is the union of kernels, memcpys, memsets and CUDA-graph
replays (synchronisation records are not GPU work, as in ``nsys analyze``). When activities
overlap (several streams), each instant is given to exactly one class, the first in this
priority order::

    communication > rnn > convolution > gemm > cast > reduction > elementwise > other > memcpy > memset
        > sync (only with count_sync)

so the class times plus idle add up to the span exactly (checked in code). ``compute_ns`` is the
union of the compute classes (everything but communication, memcpy, memset and sync), as HTA counts it.

Host view (per step): each host thread's busy time split, in priority order, into launch API,
sync API, memory API, other runtime API, framework ops (time in cpu ops not inside an API call)
and Python (python_function time outside ops; not frames blocked in a wait: a lock, sleep, poll,
join, which leave the thread idle), summed over threads. A row belongs to the step it
starts in and counts only its part inside that step's window, so no thread has more host time in
a step than the step lasts. Framework time includes
user ranges (NVTX / record_function), since nsys traces have no framework op events.

CPU-only traces: self time of every framework op, given to the op-view class of the nearest
classified op at or above it; and dispatch overhead, the part of each step not inside any
innermost compute op (a compute op with no compute op below it: composite ops such as
``aten::lstm_cell`` count only through the ops they dispatch). Part of that dispatch time can be
compiled graphs' own code (``compiled_code_self``): generated kernels and their wrapper, which the
trace does not tell apart. A TorchScript call's own time that is ops its interpreter ran unrecorded
(``unrecorded_script_calls``: a frozen model's convolutions) is compute, not dispatch.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema
from tracekit.analyze import intervals
from tracekit.analyze.classify import (
    API_CLASSES,
    KERNEL_CLASSES,
    NO_CLASS,
    OP_CLASSES,
    RowClasses,
    classify_rows,
    collectives_beside,
    data_loading_rows,
    python_wait_rows,
)
from tracekit.analyze.cpu_partition import COLUMNS as PARTITION_COLUMNS
from tracekit.analyze.cpu_partition import cpu_partition
from tracekit.analyze.frame import GPU_BUSY_KINDS, LAUNCH_SIDE_KINDS, Frame, frame_of
from tracekit.analyze.gpu_presence import unrecorded_gpu_work
from tracekit.analyze.op_loops import looping_calls
from tracekit.analyze.waiting import waiting_calls
from tracekit.errors import TracekitError
from tracekit.ingest.columns import factorize
from tracekit.ingest.links import byte_mask, member_mask, nearest_ancestor

COMPUTE_KERNEL_CLASSES = tuple(c for c in KERNEL_CLASSES if c not in ("communication", "memcpy", "memset", "sync"))
HOST_CLASSES = ("launch", "sync", "memory_api", "other_api", "framework", "python")
# The host split's priority order: Python frames blocked in a wait come before the frames that
# enclose them, and their time is not host work (not reported).
_SPLIT = ("launch", "sync", "memory_api", "other_api", "framework", "waiting", "python")
# Op classes that do arithmetic; time in a step outside all of them is dispatch overhead.
COMPUTE_OP_CLASSES = ("rnn", "convolution", "gemm", "cast", "copy", "elementwise", "reduction", "fft", "linalg",
                      "communication")
ALL_STEPS = -1


@dataclass
class Breakdown:
    """Result of ``breakdown()``. Times are integer nanoseconds.

    gpu: one row per (device_id, step) plus a whole-trace row per device (step = -1): span_ns,
        busy_ns, idle_ns, ``<class>_ns`` for each class in ``KERNEL_CLASSES`` (exclusive, priority
        order in the module doc), compute_ns, non_compute_ns, activities.
    gpu_classes: per (device_id, class): exclusive_ns (whole trace), kernel_ns (sum of
        durations, overlaps counted twice), count, and op_view_ns: the kernel time whose launching
        op is of that op class (``rnn`` for every kernel launched inside a fused RNN op).
    host: one row per step plus a whole-trace row (step = -1): ``<class>_ns`` for each of
        ``HOST_CLASSES``, busy_ns, ops (framework op count), launches.
    cpu_ops: CPU-only view, per step plus whole trace: span_ns, ``<class>_ns`` self time per op
        class, waiting_calls_ns (the self time of calls that wait while other threads run their ops, a
        TF function call's: in no class, ``waiting.waiting_calls``), compute_ns (union of compute ops, ``unrecorded_ops_ns`` included), unrecorded_ops_ns
        (TorchScript calls' own time that is ops the profiler did not record: ``unrecorded_script_calls``),
        dispatch_ns (span not in a compute op, waiting nor fetching),
        waiting_ns (the loop's thread blocked in a Python wait, no compute op running: a sleep, a
        lock, a poll; seen only with Python stacks recorded), fetching_ns (the loop's thread inside a
        batch fetch, DataLoader __next__ or IteratorGetNext, no compute op running and not waiting:
        the loader's work or its wait for worker processes), compiled_code_ns (the part of
        dispatch_ns that compiled graphs' own code ran in, ``compiled_code_self``: generated kernels
        or wrapper, the trace does not say which), ops.
        Op self times are summed over all threads, so they can overlap dispatch and exceed the span.
    cpu_partition: the exclusive split of each step's span on the step's thread (parts add up to
        span_ns exactly; ``tracekit.analyze.cpu_partition``): step, thread, span_ns, the ``PARTS``,
        other_threads_ns.
    timesteps: the workload's timesteps per step when known (``--timesteps`` or trace metadata).
    unrecorded_gpu_work: for a trace with no GPU activity, what shows that its program ran on a GPU
        (``tracekit.analyze.gpu_presence``; "" when nothing does): its ops' time is then launching and
        waiting, not the CPU work the CPU-only views take it for.
    """

    gpu: pd.DataFrame
    gpu_classes: pd.DataFrame
    host: pd.DataFrame
    cpu_ops: pd.DataFrame
    has_gpu: bool
    steps: list[int]
    timesteps: int | None = None
    cpu_partition: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=PARTITION_COLUMNS))
    unrecorded_gpu_work: str = ""


def breakdown(table: pa.Table, timesteps: int | None = None, exclude_last_step: bool = False,
              count_sync: bool = False) -> Breakdown:
    """Split a trace's time into categories (see the module doc for the definitions).

    Args:
        table: one trace's event table (``tracekit.ingest.load``).
        timesteps: recurrent timesteps per step, to report ops per timestep; read from the trace
            metadata key ``timesteps`` when not given.
        exclude_last_step: drop GPU activity launched at or after the start of the last step
            (the profiler often cuts it short; HTA drops it by default). No effect with < 2 steps.
        count_sync: count CUPTI synchronization records (``gpu_sync``) as busy, non-compute GPU
            time, as HTA does; by default they are not GPU work, as in nsys.
    """
    frame = frame_of(table)
    classes = classify_rows(frame)
    steps = sorted(int(s) for s in np.unique(frame.step[frame.mask("step")]) if s >= 0) if frame.mask("step").any() else []
    gpu_rows = frame.rows(*GPU_BUSY_KINDS, *(("gpu_sync",) if count_sync else ()))
    if exclude_last_step:
        gpu_rows = _before_last_step(frame, gpu_rows)
    gpu, gpu_classes = _gpu(frame, classes, gpu_rows)
    op_rows = frame.rows("cpu_op")
    op_class = _effective_op_class(frame, classes, op_rows)
    # CPU-only (the partition is shown only there): the calls that wait for other threads' ops.
    waiting = None
    if not gpu_rows.size:
        waiting = waiting_calls(frame, op_rows, ~byte_mask(classes.op[op_rows], [OP_CLASSES.index(c) for c in COMPUTE_OP_CLASSES]))
    partition = cpu_partition(frame, op_class, op_rows, steps, waiting,
                              member_mask(op_rows, unrecorded_script_calls(frame)) if not gpu_rows.size else None)
    return Breakdown(
        gpu=gpu, gpu_classes=gpu_classes, host=_host(frame, classes, steps), cpu_ops=_cpu_ops(frame, classes, op_class, steps, waiting),
        has_gpu=gpu_rows.size > 0, steps=steps, timesteps=timesteps if timesteps is not None else _meta_timesteps(table),
        cpu_partition=partition, unrecorded_gpu_work="" if gpu_rows.size else unrecorded_gpu_work(frame, classes),
    )


def _meta_timesteps(table: pa.Table) -> int | None:
    meta = table.schema.metadata or {}
    raw = meta.get(schema.META_TRACE_META_JSON.encode())
    if not raw:
        return None
    try:
        value = json.loads(raw).get("timesteps")
    except ValueError:
        return None
    return int(value) if isinstance(value, (int, float, str)) and str(value).isdigit() else None


def _before_last_step(frame: Frame, gpu_rows: np.ndarray) -> np.ndarray:
    step_rows = frame.rows("step")
    if step_rows.size < 2:
        return gpu_rows
    last_start = frame.start[step_rows].max()
    launch = frame.launch_row[gpu_rows]
    ok = (launch >= 0) & (frame.start[np.maximum(launch, 0)] < last_start)
    return gpu_rows[ok]


def gpu_split(start: np.ndarray, end: np.ndarray, cls: np.ndarray) -> dict[str, int]:
    """Exclusive class times, busy, idle, span and compute/non-compute of one set of GPU activities."""
    if start.size == 0:
        return {"span_ns": 0, "busy_ns": 0, "idle_ns": 0, **{f"{c}_ns": 0 for c in KERNEL_CLASSES},
                "compute_ns": 0, "non_compute_ns": 0, "activities": 0}
    return gpu_split_by_group(np.zeros(start.size, np.int64), start, end, cls, 1)[0]


def gpu_split_by_group(group: np.ndarray, start: np.ndarray, end: np.ndarray, cls: np.ndarray,
                       n_groups: int) -> list[dict[str, int]]:
    """``gpu_split`` of each group (0 .. n_groups-1, each non-empty), all groups in one pass."""
    excl = intervals.exclusive_by_priority_by_group(group, start, end, cls, len(KERNEL_CLASSES), n_groups)
    compute_mask = byte_mask(cls, [KERNEL_CLASSES.index(c) for c in COMPUTE_KERNEL_CLASSES])
    compute = intervals.total_by_group(group[compute_mask], start[compute_mask], end[compute_mask], n_groups)
    lo = np.full(n_groups, np.iinfo(np.int64).max)
    hi = np.full(n_groups, np.iinfo(np.int64).min)
    np.minimum.at(lo, group, start)
    np.maximum.at(hi, group, end)
    count = np.bincount(group, minlength=n_groups)
    out = []
    for g in range(n_groups):
        span, busy = int(hi[g] - lo[g]), int(excl[g].sum())
        split = {"span_ns": span, "busy_ns": busy, "idle_ns": span - busy}
        split.update({f"{c}_ns": int(excl[g, i]) for i, c in enumerate(KERNEL_CLASSES)})
        split.update({"compute_ns": int(compute[g]), "non_compute_ns": busy - int(compute[g]), "activities": int(count[g])})
        if busy + split["idle_ns"] != span or split["idle_ns"] < 0:  # the invariant every report relies on
            raise TracekitError("internal error: GPU breakdown does not add up to the span")
        out.append(split)
    return out


def _gpu(frame: Frame, classes: RowClasses, rows: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    records = []
    class_records = []
    device = frame.device[rows]
    step = frame.step[rows]
    for dev in np.unique(device):
        on_dev = rows[device == dev]
        s, e, k = frame.start[on_dev], frame.end[on_dev], classes.kernel[on_dev]
        whole = gpu_split(s, e, k)
        records.append({"device_id": int(dev), "step": ALL_STEPS, **whole})
        dev_steps = step[device == dev]
        marked = dev_steps >= 0
        step_numbers, of_step = factorize(dev_steps[marked])
        if step_numbers.size:
            per_step = gpu_split_by_group(of_step, s[marked], e[marked], k[marked], step_numbers.size)
            records.extend({"device_id": int(dev), "step": int(st), **split} for st, split in zip(step_numbers, per_step, strict=True))
        excl = [whole[f"{c}_ns"] for c in KERNEL_CLASSES]
        dur = e - s
        op_view = classes.op_view[on_dev]
        for i, c in enumerate(KERNEL_CLASSES):
            sel = k == i
            class_records.append({
                "device_id": int(dev), "view": "kernel", "class": c, "exclusive_ns": int(excl[i]),
                "kernel_ns": int(dur[sel].sum()), "count": int(sel.sum()),
            })
        for i, c in enumerate((*OP_CLASSES, "no_op")):
            sel = op_view == i if c != "no_op" else op_view == NO_CLASS
            if sel.any():
                class_records.append({
                    "device_id": int(dev), "view": "op", "class": c, "exclusive_ns": None,
                    "kernel_ns": int(dur[sel].sum()), "count": int(sel.sum()),
                })
    gpu_cols = ["device_id", "step", "span_ns", "busy_ns", "idle_ns", *[f"{c}_ns" for c in KERNEL_CLASSES],
                "compute_ns", "non_compute_ns", "activities"]
    gpu = pd.DataFrame.from_records(records, columns=gpu_cols)
    gpu_classes = pd.DataFrame.from_records(class_records, columns=["device_id", "view", "class", "exclusive_ns", "kernel_ns", "count"])
    return gpu, gpu_classes


def framework_kinds(frame: Frame) -> tuple[str, ...]:
    """The host kinds that count as framework work. NVTX / record_function ranges only mark a region:
    time in a range with no op inside (a sleep, untraced Python) is not framework work. Where the
    trace records no ops at all (nsys, whose per-op NVTX ranges stand in for ops), ranges count. In a
    JAX trace the ranges are the runtime's own spans (TraceMe: PjitFunction's argument handling,
    PjRt's execute, XLA:GPU's thunks and command-buffer updates), its dispatch work: they count."""
    from tracekit.schema import source_of

    if not frame.mask("cpu_op").any() or source_of(frame.table) == "jax":
        return ("cpu_op", "user_range")
    return ("cpu_op",)


def host_work_recorded(frame: Frame) -> bool:
    """Whether the trace records the host's own work (framework ops, Python frames, or NVTX ranges
    where it has no ops), not only its GPU API calls: nsys -t cuda and torch.profiler with only
    ProfilerActivity.CUDA record none of it, and a GPU gap with no host event then says nothing of
    what the host did."""
    return bool(frame.rows(*framework_kinds(frame), "python_function").size)


def _host_classes(frame: Frame, classes: RowClasses) -> tuple[np.ndarray, np.ndarray]:
    """Rows that take part in the host split and their host class index."""
    api_rows = frame.rows("runtime_api", "driver_api")
    api_map = {API_CLASSES.index("launch"): 0, API_CLASSES.index("sync"): 1, API_CLASSES.index("memory"): 2,
               API_CLASSES.index("other"): 3}
    api_cls = np.array([api_map[int(c)] for c in range(len(API_CLASSES))], np.int8)[classes.api[api_rows]]
    op_rows = frame.rows(*framework_kinds(frame))
    wait_rows = python_wait_rows(frame)
    py_rows = frame.rows("python_function")
    rows = np.concatenate([api_rows, op_rows, wait_rows, py_rows])
    cls = np.concatenate([api_cls, np.full(op_rows.size, _SPLIT.index("framework"), np.int8),
                          np.full(wait_rows.size, _SPLIT.index("waiting"), np.int8),
                          np.full(py_rows.size, _SPLIT.index("python"), np.int8)])
    return rows, cls


def _host(frame: Frame, classes: RowClasses, steps: list[int]) -> pd.DataFrame:
    rows, cls = _host_classes(frame, classes)
    thread_keys, thread = factorize(frame.thread_key[rows])
    start, end = frame.start[rows], frame.end[rows]
    is_op = frame.mask("cpu_op")[rows]
    is_launch = classes.api[rows] == API_CLASSES.index("launch")
    # Exclusive split per (step, thread), summed over threads: groups are step index x thread.
    of_step, in_steps = step_index(frame.step[rows], steps)
    n_threads = max(thread_keys.size, 1)
    whole = intervals.exclusive_by_priority_by_group(thread, start, end, cls, len(_SPLIT), thread_keys.size).sum(axis=0)
    # A row is in the step it starts in; only its part inside the step's window counts there (a
    # background thread's wait that starts in one step can run on through several).
    lo, hi = step_windows(frame, steps)
    at = of_step[in_steps]
    per_step = intervals.exclusive_by_priority_by_group(
        at * n_threads + thread[in_steps], np.clip(start[in_steps], lo[at], hi[at]), np.clip(end[in_steps], lo[at], hi[at]),
        cls[in_steps], len(_SPLIT), len(steps) * n_threads).reshape(len(steps), n_threads, len(_SPLIT)).sum(axis=1)
    reported = [_SPLIT.index(c) for c in HOST_CLASSES]
    whole, per_step = whole[reported], per_step[:, reported]
    ops = np.bincount(of_step[in_steps & is_op], minlength=len(steps))
    launches = np.bincount(of_step[in_steps & is_launch], minlength=len(steps))
    records = [{"step": ALL_STEPS, **{f"{c}_ns": int(whole[i]) for i, c in enumerate(HOST_CLASSES)},
                "busy_ns": int(whole.sum()), "ops": int(is_op.sum()), "launches": int(is_launch.sum())}]
    records.extend({"step": st, **{f"{c}_ns": int(per_step[j, i]) for i, c in enumerate(HOST_CLASSES)},
                    "busy_ns": int(per_step[j].sum()), "ops": int(ops[j]), "launches": int(launches[j])}
                   for j, st in enumerate(steps))
    return pd.DataFrame.from_records(records)


def step_index(step: np.ndarray, steps: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Index of each row's step in ``steps`` (ascending), and which rows are in one of them."""
    known = np.asarray(steps, np.int64)
    if not known.size:
        return np.zeros(step.size, np.int64), np.zeros(step.size, bool)
    index = np.minimum(np.searchsorted(known, step), known.size - 1)
    return index, known[index] == step


def step_windows(frame: Frame, steps: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Each step's window (``steps`` ascending): the first start and last end of its step rows."""
    step_rows = frame.rows("step")
    w_index, w_in = step_index(frame.step[step_rows], steps)
    w_lo = np.full(len(steps), np.iinfo(np.int64).max)
    w_hi = np.full(len(steps), np.iinfo(np.int64).min)
    np.minimum.at(w_lo, w_index[w_in], frame.start[step_rows[w_in]])
    np.maximum.at(w_hi, w_index[w_in], frame.end[step_rows[w_in]])
    return w_lo, w_hi


# Events whose own time runs a compiled graph's code, which no op event covers: Inductor's graph call
# (its Python wrapper, and its generated C++ kernels unless torch._inductor.config.cpp.
# enable_kernel_profile recorded them as graph_N_cpp_fused_* ops), TF's XLA clusters and TorchScript's
# fusion groups (NNC kernels). Before the graph call was a range of its own, CompiledFunction's self
# time held it.
COMPILED_GRAPH_CALL = "## Call CompiledFxGraph"
# A TF function run as one op (``__inference_step_218:__inference_step_218``) is a compiled XLA program
# when its HLO instructions are recorded inside it on its thread (tf.function(jit_compile=True));
# without them it is a plain call whose ops other threads run, and not compiled code.
XLA_PROGRAM = re.compile(r"^(?P<fn>__inference_\w+):(?P=fn)$")
COMPILED_CODE_OPS = re.compile(r"(^|:)_XlaRun$|(^|:)XlaLaunch$|^prim::(TensorExprGroup|FusionGroup|CudaFusionGroup)$|"
                               + XLA_PROGRAM.pattern)
COMPILED_CODE_OPS_BEFORE_CALL_RANGES = re.compile(r"^CompiledFunction(Backward)?$")
GENERATED_KERNEL = re.compile(r"^(graph_\d+_)?cpp_fused_")
# Inductor's mark around a compiled graph's wrapper (torch._inductor.config.profiler_mark_wrapper_call).
WRAPPER_CALL = "inductor_wrapper_call"
# An AOTInductor package runs as one native call from Python that records no op of its own
# (``<built-in method boxed_run of ...>`` called by torch/export/pt2_archive/_package.py): seen only with
# Python stacks recorded, by the Python frame that calls it.
AOTI_CALLER = re.compile(r"(^|/)torch/(export/pt2_archive|_inductor/package)/[\w/]+\.py\(\d+\): \w+$")
NATIVE_CALL = re.compile(r"^<built-in (method|function) ")


def compiled_code_self(frame: Frame) -> tuple[np.ndarray, np.ndarray]:
    """The rows that run compiled graphs' own code, and each one's self time (its duration less the
    ops and other such rows directly inside it). That time is the graph's generated kernels and
    its wrapper together: neither a known compute op nor plain framework dispatch. Cached on the
    frame (the breakdown, the verdict's unclassified-work check and whatif all read it)."""
    return frame.memo("compiled_code_self", lambda: _compiled_code_self(frame))


def _compiled_code_self(frame: Frame) -> tuple[np.ndarray, np.ndarray]:
    calls = [i for i, n in enumerate(frame.names) if n.startswith(COMPILED_GRAPH_CALL) or n == WRAPPER_CALL]
    before_call_ranges = not calls
    if any(GENERATED_KERNEL.search(n) for n in frame.names):
        # Kernel profiling was on: the kernels are ops, and Inductor's own time around them is wrapper.
        calls, before_call_ranges = [], False
    codes = calls + [i for i, n in enumerate(frame.names) if COMPILED_CODE_OPS.search(n) or
                     (before_call_ranges and COMPILED_CODE_OPS_BEFORE_CALL_RANGES.search(n))]
    none = np.zeros(0, np.int64)
    native = aoti_native_calls(frame)
    if not codes and not native.size:
        return none, none
    is_op = frame.mask("cpu_op")
    bodies = np.flatnonzero(member_mask(frame.name_code, codes) & (is_op | frame.mask("user_range")))
    bodies = np.union1d(bodies, native)
    if not bodies.size:
        return none, none
    inside = is_op.copy()
    inside[bodies] = True
    rows = np.flatnonzero(inside)
    holder = nearest_ancestor(frame.parent, rows, inside)
    is_body = np.zeros(len(frame), bool)
    is_body[bodies] = True
    direct = (holder >= 0) & is_body[np.maximum(holder, 0)]
    child_total = np.zeros(len(frame), np.int64)
    np.add.at(child_total, holder[direct], frame.dur[rows[direct]])
    programs = [i for i in codes if XLA_PROGRAM.match(frame.names[i])]
    if programs:
        with_children = np.zeros(len(frame), bool)
        with_children[holder[direct]] = True
        bodies = bodies[with_children[bodies] | ~member_mask(frame.name_code[bodies], programs)]
    return bodies, np.maximum(frame.dur[bodies] - child_total[bodies], 0)


def aoti_native_calls(frame: Frame) -> np.ndarray:
    """The Python stack frames of the native calls that run an AOTInductor package (the longest native call
    of each ``AOTI_CALLER`` frame), where Python stacks are recorded and no op inside says what its code
    is (kernel profiling off)."""
    callers = [i for i, n in enumerate(frame.names) if AOTI_CALLER.search(n)]
    if not callers or any(n == WRAPPER_CALL or GENERATED_KERNEL.search(n) for n in frame.names):
        return np.zeros(0, np.int64)
    py = frame.rows("python_function")
    native = py[frame.named(py, NATIVE_CALL)]
    parents = frame.parent[native]
    native = native[(parents >= 0) & member_mask(frame.name_code[np.maximum(parents, 0)], callers)]
    # The runner's call is the longest native call of each caller frame (it also asks for the call spec).
    native = native[np.lexsort((frame.dur[native], frame.parent[native]))]
    last = np.append(frame.parent[native][1:] != frame.parent[native][:-1], True)
    return np.sort(native[last])


UNRECORDED_OPS_PER_OP_NS = 50_000  # a TorchScript call's own time per op it records, beyond its interpreter's µs
# TorchScript records each call of a scripted or traced module's method as an op named for the method
# ("forward"; an eager module's forward records no op), and a differentiable graph's halves as
# "<forward op>" / "<backward op>" (torch/csrc/jit/runtime/graph_executor.cpp, DifferentiableGraphOp).
TORCHSCRIPT_CALLS = re.compile(r"^(forward|<forward op>|<backward op>)$")


def unrecorded_script_calls(frame: Frame) -> np.ndarray:
    """TorchScript calls (ops of no class named as ``TORCHSCRIPT_CALLS``) whose self time is
    ``UNRECORDED_OPS_PER_OP_NS`` or more per op recorded directly inside them, ascending.

    TorchScript's interpreter runs some ops itself, not through the dispatcher, and the profiler
    does not record them: a frozen model's oneDNN convolutions (``prim::mkldnn_convolution`` after
    ``torch.jit.optimize_for_inference``), fusion groups. Their time is the call's self time. The
    interpreter's own cost is about a µs an instruction (a scripted loop of 2,400 small ops spends
    0.36 µs of its own for each of the 400 it records directly), so such a call's own time is
    arithmetic: the breakdown counts it as compute (``unrecorded_ops_ns``), not dispatch. None in a
    trace of a program that ran on a GPU. Cached."""
    return frame.memo("unrecorded_script_calls", lambda: _unrecorded_script_calls(frame))


def _unrecorded_script_calls(frame: Frame) -> np.ndarray:
    ops = frame.rows("cpu_op")
    # A program that ran on a GPU: a call's own time is its launches (recorded or not), not arithmetic.
    if frame.rows(*GPU_BUSY_KINDS, *LAUNCH_SIDE_KINDS).size or unrecorded_gpu_work(frame):
        return ops[:0]
    calls = ops[frame.named(ops, TORCHSCRIPT_CALLS)] if ops.size else ops
    if calls.size:
        calls = calls[classify_rows(frame).op[calls] == OP_CLASSES.index("other")]
    if not calls.size:
        return calls
    children = np.bincount(np.searchsorted(calls, frame.op_parent[ops[member_mask(frame.op_parent[ops], calls)]]),
                           minlength=calls.size)
    return calls[op_self_time(frame, calls) >= UNRECORDED_OPS_PER_OP_NS * (children + 1)]


def _unrecorded_ops_pieces(frame: Frame, compute_rows: np.ndarray, *covered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where ``unrecorded_script_calls`` run on their own (no op of theirs open inside them) while no
    compute op runs and no interval of ``covered`` (starts, ends, ...: waiting, fetching) does: disjoint
    sorted intervals."""
    calls = unrecorded_script_calls(frame)
    none = np.zeros(0, np.int64)
    if not calls.size:
        return none, none
    covered_s = np.concatenate([frame.start[compute_rows], *covered[0::2]])
    covered_e = np.concatenate([frame.end[compute_rows], *covered[1::2]])
    ops = frame.rows("cpu_op")
    inside = ops[member_mask(frame.op_parent[ops], calls)]
    inside = inside[~member_mask(inside, calls)]  # a call inside another: its own time is counted too
    s, e, c = intervals.priority_timeline(
        np.concatenate([covered_s, frame.start[inside], frame.start[calls]]),
        np.concatenate([covered_e, frame.end[inside], frame.end[calls]]),
        np.concatenate([np.zeros(covered_s.size + inside.size, np.int8), np.ones(calls.size, np.int8)]), 2)
    return intervals.union(s[c == 1], e[c == 1])


def op_self_time(frame: Frame, op_rows: np.ndarray) -> np.ndarray:
    """Self time of each op row: its duration minus the durations of the ops it calls, ranges
    between them skipped (``Frame.op_parent``), never negative."""
    child_total = frame.memo("op_child_total", lambda: _op_child_total(frame))  # a report asks 3 times
    return np.maximum(frame.dur[op_rows] - child_total[op_rows], 0)


def _op_child_total(frame: Frame) -> np.ndarray:
    """Per row, the summed durations of the ops whose nearest enclosing op it is."""
    op_parent = frame.op_parent
    child = np.flatnonzero(op_parent >= 0)
    child_total = np.zeros(len(frame), np.int64)
    np.add.at(child_total, op_parent[child], frame.dur[child])
    child_total.flags.writeable = False
    return child_total


def _cpu_ops(frame: Frame, classes: RowClasses, view: np.ndarray, steps: list[int],
             waiting_call: np.ndarray | None = None) -> pd.DataFrame:
    """CPU op time per step; ``view``: each op row's effective class (``_effective_op_class``);
    ``waiting_call``: per op row, a call that waits while other threads run its ops (a TF function call:
    ``waiting.waiting_calls``), whose self time is that wait, counted apart (``waiting_calls_ns``) and in
    no class."""
    op_rows = frame.rows("cpu_op")
    if op_rows.size == 0:
        return pd.DataFrame(columns=["step", "span_ns", *[f"{c}_ns" for c in OP_CLASSES], "waiting_calls_ns", "compute_ns",
                                     "unrecorded_ops_ns", "dispatch_ns", "waiting_ns", "fetching_ns", "compiled_code_ns", "ops"])
    self_ns = op_self_time(frame, op_rows)
    waited = np.where(waiting_call, self_ns, 0) if waiting_call is not None else np.zeros(op_rows.size, np.int64)
    class_ns = self_ns - waited
    compute_rows = innermost_compute_ops(frame, classes, op_rows)
    step_rows = frame.rows("step")
    records = []
    sel = np.ones(op_rows.size, bool)
    lo, hi = int(frame.start[op_rows].min()), int(frame.end[op_rows].max())
    c_rows = compute_rows
    if step_rows.size:  # the steps' extent when there are steps: setup work is not the loop
        lo, hi = int(frame.start[step_rows].min()), int(frame.end[step_rows].max())
        sel = frame.step[op_rows] >= 0
        c_rows = compute_rows[frame.step[compute_rows] >= 0]
    compute = intervals.clip_total(frame.start[c_rows], frame.end[c_rows], lo, hi)
    wait_s, wait_e = _waits_outside_compute(frame, op_rows, compute_rows)
    waiting = intervals.clip_total(wait_s, wait_e, lo, hi)
    fetch_s, fetch_e = _fetches_outside_compute(frame, op_rows, compute_rows, wait_s, wait_e)
    fetching = intervals.clip_total(fetch_s, fetch_e, lo, hi)
    per_class = np.bincount(view[sel], weights=class_ns[sel], minlength=len(OP_CLASSES)).astype(np.int64)
    unrec_s, unrec_e = _unrecorded_ops_pieces(frame, compute_rows, wait_s, wait_e, fetch_s, fetch_e)
    unrecorded = intervals.clip_total(unrec_s, unrec_e, lo, hi)
    compute += unrecorded
    dispatch = (hi - lo) - compute - waiting - fetching
    bodies, body_self = compiled_code_self(frame)
    in_loop = frame.step[bodies] >= 0 if step_rows.size else np.ones(bodies.size, bool)
    records.append({"step": ALL_STEPS, "span_ns": hi - lo, **{f"{c}_ns": int(per_class[i]) for i, c in enumerate(OP_CLASSES)},
                    "waiting_calls_ns": int(waited[sel].sum()), "compute_ns": compute, "unrecorded_ops_ns": unrecorded, "dispatch_ns": dispatch, "waiting_ns": waiting,
                    "fetching_ns": fetching, "compiled_code_ns": min(int(body_self[in_loop].sum()), max(dispatch, 0)),
                    "ops": int(sel.sum())})
    if not steps:
        return pd.DataFrame.from_records(records)
    # Per step, all steps at once.
    n = len(steps)
    w_lo, w_hi = step_windows(frame, steps)
    c_index, c_in = step_index(frame.step[compute_rows], steps)
    c_rows, c_index = compute_rows[c_in], c_index[c_in]
    compute_by_step = intervals.total_by_group(c_index, np.clip(frame.start[c_rows], w_lo[c_index], w_hi[c_index]),
                                               np.clip(frame.end[c_rows], w_lo[c_index], w_hi[c_index]), n)
    o_index, o_in = step_index(frame.step[op_rows], steps)
    by_class = np.bincount(o_index[o_in] * len(OP_CLASSES) + view[o_in], weights=class_ns[o_in],
                           minlength=n * len(OP_CLASSES)).astype(np.int64).reshape(n, len(OP_CLASSES))
    waited_by_step = np.bincount(o_index[o_in], weights=waited[o_in], minlength=n).astype(np.int64)
    ops = np.bincount(o_index[o_in], minlength=n)
    waiting_by_step = intervals.overlap_per_interval(w_lo, w_hi, wait_s, wait_e, merged=True)
    fetching_by_step = intervals.overlap_per_interval(w_lo, w_hi, fetch_s, fetch_e, merged=True)
    unrecorded_by_step = intervals.overlap_per_interval(w_lo, w_hi, unrec_s, unrec_e, merged=True)
    b_index, b_in = step_index(frame.step[bodies], steps)
    compiled_by_step = np.bincount(b_index[b_in], weights=body_self[b_in], minlength=n).astype(np.int64)
    for j, st in enumerate(steps):
        unrecorded = int(unrecorded_by_step[j])
        span, compute, waiting = int(w_hi[j] - w_lo[j]), int(compute_by_step[j]) + unrecorded, int(waiting_by_step[j])
        fetching = int(fetching_by_step[j])
        dispatch = span - compute - waiting - fetching
        records.append({"step": st, "span_ns": span,
                        **{f"{c}_ns": int(by_class[j, i]) for i, c in enumerate(OP_CLASSES)},
                        "waiting_calls_ns": int(waited_by_step[j]), "compute_ns": compute, "unrecorded_ops_ns": unrecorded, "dispatch_ns": dispatch,
                        "waiting_ns": waiting, "fetching_ns": fetching,
                        "compiled_code_ns": min(int(compiled_by_step[j]), max(dispatch, 0)), "ops": int(ops[j])})
    return pd.DataFrame.from_records(records)


def _waits_outside_compute(frame: Frame, op_rows: np.ndarray, compute_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the loop's thread (the threads that mark steps; else the one with the most ops) waits
    while no compute op runs on any thread: disjoint sorted intervals. Two kinds of evidence:

    - it is blocked in Python (``python_wait_rows``: a sleep, a lock, a poll), seen only when the
      trace has Python stacks;
    - it runs no op of its own while a collective runs on another thread of its process (DDP's
      reducer waiting for gloo's all-reduce of the last gradient bucket, which a slower rank can
      hold up).

    That time is neither compute nor dispatch; without such evidence it stays in dispatch."""
    none = np.zeros(0, np.int64)
    loop_threads = _loop_threads(frame, op_rows)
    if not loop_threads.size:
        return none, none
    waits = python_wait_rows(frame)
    waits = waits[member_mask(frame.thread_key[waits], loop_threads)]
    collectives = collectives_beside(frame, loop_threads)
    pieces_s, pieces_e = [none], [none]
    if waits.size:
        s, e, c = intervals.priority_timeline(
            np.concatenate([frame.start[compute_rows], frame.start[waits]]),
            np.concatenate([frame.end[compute_rows], frame.end[waits]]),
            np.concatenate([np.zeros(compute_rows.size, np.int8), np.ones(waits.size, np.int8)]), 2)
        pieces_s.append(s[c == 1])
        pieces_e.append(e[c == 1])
    if collectives.size:
        own = op_rows[member_mask(frame.thread_key[op_rows], loop_threads)]
        s, e, c = intervals.priority_timeline(
            np.concatenate([frame.start[compute_rows], frame.start[own], frame.start[collectives]]),
            np.concatenate([frame.end[compute_rows], frame.end[own], frame.end[collectives]]),
            np.concatenate([np.zeros(compute_rows.size, np.int8), np.ones(own.size, np.int8),
                            np.full(collectives.size, 2, np.int8)]), 3)
        pieces_s.append(s[c == 2])
        pieces_e.append(e[c == 2])
    return intervals.union(np.concatenate(pieces_s), np.concatenate(pieces_e))


def _fetches_outside_compute(frame: Frame, op_rows: np.ndarray, compute_rows: np.ndarray, wait_s: np.ndarray,
                             wait_e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the loop's threads fetch a batch (DataLoader __next__, tf.data IteratorGetNext) while no
    compute op runs on any thread and they do not wait (``_waits_outside_compute``): disjoint sorted
    intervals. That is the loader's own Python work (a dataset's __getitem__, collate) or its wait
    for worker processes, which no dispatch remedy (a compiled graph) removes: not dispatch."""
    fetches = data_loading_rows(frame)
    none = np.zeros(0, np.int64)
    if not fetches.size:
        return none, none
    fetches = fetches[member_mask(frame.thread_key[fetches], _loop_threads(frame, op_rows))]
    if not fetches.size:
        return none, none
    s, e, c = intervals.priority_timeline(
        np.concatenate([frame.start[compute_rows], wait_s, frame.start[fetches]]),
        np.concatenate([frame.end[compute_rows], wait_e, frame.end[fetches]]),
        np.concatenate([np.zeros(compute_rows.size + wait_s.size, np.int8), np.ones(fetches.size, np.int8)]), 2)
    return intervals.union(s[c == 1], e[c == 1])


def _loop_threads(frame: Frame, op_rows: np.ndarray) -> np.ndarray:
    """The threads that mark steps; else the one with the most ops."""
    step_rows = frame.rows("step")
    if step_rows.size:
        return np.unique(frame.thread_key[step_rows])
    keys, counts = np.unique(frame.thread_key[op_rows], return_counts=True)
    return keys[np.argmax(counts)][None] if keys.size else keys


def innermost_compute_ops(frame: Frame, classes: RowClasses, op_rows: np.ndarray) -> np.ndarray:
    """Compute-class ops that do the arithmetic themselves: no compute op below them, or most of
    their own time is self time.

    A composite op (``aten::lstm_cell``, ``aten::linear``: a sliver of self time) is not counted
    itself, only the compute ops it dispatches, so the time between them shows up as dispatch
    overhead. A fused op that calls a small helper (``aten::mkldnn_rnn_layer`` zero-filling its
    state with an elementwise op) still counts whole. Callers take the union of the intervals.
    """
    compute_idx = [OP_CLASSES.index(c) for c in COMPUTE_OP_CLASSES]
    is_compute = np.zeros(len(frame), bool)
    is_compute[op_rows] = byte_mask(classes.op[op_rows], compute_idx)
    has_compute_below = np.zeros(len(frame), bool)
    cur = frame.parent[np.flatnonzero(is_compute)]
    while cur.size:
        cur = cur[cur >= 0]
        cur = cur[~has_compute_below[cur]]  # stop where an earlier walk already passed
        has_compute_below[cur] = True
        cur = frame.parent[cur]
    leaf = is_compute & ~has_compute_below
    busy = np.flatnonzero(is_compute & has_compute_below)
    if busy.size:
        self_ns = op_self_time(frame, busy)
        leaf[busy[self_ns * 2 >= frame.dur[busy]]] = True
    looping = looping_calls(frame)
    if looping.size:  # an op looping over rows inside itself counts whole: a compiled graph calls it as it is
        inside = np.zeros(len(frame), bool)
        inside[looping] = True
        leaves = np.flatnonzero(leaf)
        leaf[leaves[nearest_ancestor(frame.parent, leaves, inside) >= 0]] = False
        leaf[looping] = True
    return np.flatnonzero(leaf)


def _effective_op_class(frame: Frame, classes: RowClasses, op_rows: np.ndarray) -> np.ndarray:
    """Op-view class of each op, with unclassified ops taking their nearest classified ancestor's."""
    other = OP_CLASSES.index("other")
    view = classes.op_view[op_rows].astype(np.int64)
    unclassified = op_rows[view == other]
    wanted = (classes.op_view != other) & (classes.op_view != NO_CLASS) & frame.mask("cpu_op")
    anc = nearest_ancestor(frame.parent, unclassified, wanted)
    view[view == other] = np.where(anc >= 0, classes.op_view[np.maximum(anc, 0)], other)
    return view
