"""What-if: replay one step with changed costs and predict its time (Daydream-style, on one trace).

The step's thread (the one that launches the most GPU work, with the threads that take turns with
it: PyTorch's autograd thread runs the backward pass while the Python thread waits in backward(),
and their events nest into one timeline) is cut into *segments*, the stretches between consecutive
start/end points of its events in call-stack order, each owned by the innermost event open during it:

- ``dispatch``: no op open (framework / Python time between top-level ops), or inside a non-compute
  op, a user range or a Python function (time outside the ops it calls);
- ``compute:<class>``: inside a compute op (GEMM, RNN, elementwise, cast, reduction, ...);
- ``launch``: inside a kernel-launch call; ``sync``: inside a blocking call (cudaDeviceSynchronize,
  cudaStreamSynchronize, cudaMemcpy, ...), where the replay waits for the GPU work it awaited;
- ``api``: inside other runtime calls;
- ``wait``: inside a Python frame that blocks (``classify.python_wait_rows``: a sleep, a lock, a
  poll; recorded with Python stacks), which no scenario shortens.

The replay walks the segments with their (changed) durations; a launch call puts its GPU work on
its stream, which starts at the later of the stream being free (plus the device's own gap between
queued kernels, read off the trace) and the launch plus the trace's own launch latency; a blocking
call ends no earlier than the GPU work launched before it. The launch latency is the trace's own,
from launches onto an idle device: where the GPU runs a queue behind the host, a launch's wait is the
queue, not latency. There the driver's launch queue fills, and a launch call blocks until a kernel
ends: such a call is a wait, replayed as one (``_mark_queue_waits``), and a stream still busy with
the previous step's work takes this step's after it. GPU work that other threads launch in the window
keeps its durations: no scenario changes it, and the step takes at least each stream's busy time.
The step lasts as long as the host's part, or as the GPU's from the step's first kernel to its last,
whichever is longer (in a loop, the GPU's tail overlaps the next step's host work). Replaying the
unchanged trace reproduces the measured step (the report says how closely); each scenario's
prediction is that replay with its changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from tracekit.analyze import intervals, untraced_ops
from tracekit.analyze.blocking import host_blocking_rows
from tracekit.analyze.breakdown import COMPUTE_OP_CLASSES, compiled_code_self, host_work_recorded
from tracekit.analyze.classify import (
    API_CLASSES,
    KERNEL_CLASSES,
    OP_CLASSES,
    classify_rows,
    collectives_beside,
    data_loading_rows,
    input_pipeline_mask,
    python_wait_rows,
)
from tracekit.analyze.copies import PAGEABLE, RATE_COPY_BYTES, copy_bytes, host_memory, host_to_device, pinned_rate
from tracekit.analyze.critical_path import GPU_KINDS, empty_window, median_step_instance, step_window
from tracekit.analyze.decoding import fed_back_cells
from tracekit.analyze.frame import RNN_CELL_OPS, Frame, frame_of
from tracekit.analyze.gpu_presence import refuse_without_gpu_activity
from tracekit.analyze.launch import CPU_UNFUSED_CELL_OPS, JAX_BLOCK, LAYOUT_CONVERSION, LOW_PRECISION
from tracekit.analyze.op_loops import looping_calls
from tracekit.analyze.optimizer import fusable, fused_arithmetic, fused_streams, on_gpu, optimizer_calls, update_of
from tracekit.analyze.parameter_loops import loops_in
from tracekit.analyze.python_work import LONG_STRETCH_NS, long_stretches
from tracekit.analyze.sample_loop import READ_OPS
from tracekit.analyze.slow_launches import slow_launch_calls
from tracekit.analyze.steps import driving_threads
from tracekit.analyze.tf_data import python_op_rows
from tracekit.analyze.unclassified import unclassified_work_rows
from tracekit.ingest.links import byte_mask, member_mask, nearest_ancestor
from tracekit.ingest.step_inference import OPTIMIZER_STEP
from tracekit.schema import source_of

HOST_KINDS = ("cpu_op", "user_range", "python_function", "runtime_api", "driver_api")
FUSIBLE = ("elementwise", "cast")
FUSED_RNN_MATH = ("gemm", "rnn", "convolution")  # a fused RNN op still does these in full
SIDE_STREAM = -2  # the stream key of work a scenario moves beside the step's own streams
HALF_PRECISION_SPEEDUP = 2.0  # GEMM/conv on tensor cores at 16 bits against TF32/FP32 (conservative)


@dataclass
class Segment:
    dur: int
    kind: str           # dispatch, compute:<class>, launch, sync, api
    owner: int          # the innermost open event (-1: none)
    top: int            # the top-level op it belongs to (-1: between top-level ops)
    launches: list[int] = field(default_factory=list)  # GPU rows whose launch call starts at this segment's end
    start: int = 0      # where it begins on the trace's timeline
    covered: int = 0    # dispatch time during which other threads ran compute ops, a batch fetch ran, or the
    #                     step's own Python worked (python_work): not overhead
    python: int = 0     # the part of ``covered`` that is the step's own Python only (a loop's glue among it)
    waited: int = 0     # a blocking call's time waiting for the GPU work its thread launched before it
    # A launch call held by a full launch queue returned just after GPU work ``queued`` ended (a
    # gpu row; HELD_BY_EARLIER_WORK: work the replay does not launch; -1: not held), ``after`` ns
    # later (_mark_queue_waits).
    queued: int = -1
    after: int = 0


@dataclass
class Scenario:
    name: str
    predicted_step_ns: int
    saving_ns: int
    assumptions: str
    # The saving rests on time the trace cannot show to be per-op dispatch (UNEXPLAINED_STRETCH_SHARE):
    # an upper bound, which the report does not order remedies by.
    upper_bound: bool = False
    # The change makes a library choose other kernels that the trace cannot show (amp on cuDNN's fused
    # RNN): the prediction may be off either way, and the report does not order remedies by it either.
    uncertain: bool = False


@dataclass
class WhatIf:
    """Result of ``whatif()``: the step, the unchanged replay, and the scenarios ranked by saving."""

    window: dict[str, object]
    measured_step_ns: int
    replayed_step_ns: int
    scenarios: list[Scenario]
    # The busiest GPU stream's busy time with the window's work (every thread's launches): above the
    # measured step, the GPU runs behind the host and its time, not the host's, bounds the step.
    gpu_stream_busy_ns: int = 0
    # The host threads replayed (tids), the one that launches the most GPU work first; more than one
    # where threads take turns (_turn_taking).
    replayed_tids: list[int] = field(default_factory=list)


@dataclass
class _Step:
    frame: Frame
    start: int
    end: int
    segments: list[Segment]
    gpu: np.ndarray            # GPU rows launched from the step's thread in the window, in start order
    launch_latency: int        # ns from a launch call's start to its kernel's start on an idle stream (p10)
    op_class: dict[int, str]   # top-level op row -> class
    gpu_class: np.ndarray      # kernel class name per gpu row (aligned with ``gpu``)
    op_floor: int = 0          # the framework's fixed cost inside every compute op (see _work_scale)
    kernel_run_floor: int | None = None  # TF eager: the fixed cost of a kernel run (_tf_eager_kernel_work); None elsewhere
    work_scale: dict[int, float] = field(default_factory=dict)  # compute op -> share of its time that is work
    # GPU busy time per (device, stream) of the work other threads launch in the window (PyTorch's
    # autograd thread runs the backward pass's launches): no scenario changes it, and the step takes
    # at least each stream's busy time.
    other_gpu_busy: dict[tuple[int, int], int] = field(default_factory=dict)
    unchanged_ns: int = 0  # the unchanged replay's step (whatif() sets it)
    tids: list[int] = field(default_factory=list)  # the replayed threads, the driving one first
    python_work_ns: int = 0  # the step's own Python work, kept by every scenario (_mark_waits)
    launch_cost: int = 0  # the median launch call: a call held by the launch queue costs this beyond its wait
    # (device, stream) -> when the earlier work still running on it at the step's first launch onto it ends
    stream_ready: dict[tuple[int, int], int] = field(default_factory=dict)
    queue_gap: int = 0  # the device's gap between kernels queued back to back (_queue_gap)
    thread_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # the replayed threads


# amp's prediction is uncertain where at least this share of the step's GPU time is a fused RNN
# library op (_library_rnn_share).
LIBRARY_RNN_SHARE = 0.5
# cuDNN's and MIOpen's RNN entry points (forward and backward); TF's under any name ("lstm/CudnnRNNV3:CudnnRNNV3",
# "EagerLocalExecute: CudnnRNNV3").
LIBRARY_RNN_OPS = re.compile(r"_cudnn_rnn|miopen_rnn|CudnnRNN(Backprop)?(V2|V3)?$|^aten::(lstm|gru|rnn_tanh|rnn_relu)$")

# no-dispatch is uncertain where the time inside TF's executor with no op traced (which may be the
# inexpensive ops' work, tracekit.analyze.untraced_ops) is this share of its saving or more: the
# accuracy the replay is held to (docs/whatif.md).
UNTRACED_SAVING_SHARE = 0.25

# Blocking calls wait for the replayed GPU work when that reproduces the step within this share of
# it beyond what keeping their measured time reproduces (launch latency read off the trace's p10
# starts the replayed kernels a little early: -2.4% on 20 synchronized matrix products).
WAIT_MODEL_TOLERANCE = 0.05


def whatif(table: pa.Table, range_name: str | None = None, instance: int | None = None) -> WhatIf:
    """Predict the step (or range instance) under each applicable scenario. With neither a range nor
    an instance, the step predicted is the median of the steps used (``median_step_instance``): a
    prediction stands for the loop, and the first steady step can be its slowest."""
    frame = frame_of(table)
    refuse_without_gpu_activity(frame, "a replay")
    chosen = ""
    if range_name is None and instance is None:
        instance = median_step_instance(frame)
        if instance is not None:
            chosen = "the median step of those used (--instance picks another)"
    start, end, window = step_window(frame, range_name, instance)
    if chosen:
        window["chosen"] = chosen
    step = _step(frame, start, end, window)
    baseline = _replay(step)
    waits = [(seg, seg.waited, seg.queued) for seg in step.segments if seg.waited or seg.queued != -1]
    if waits:
        # Blocking calls and held launch calls that wait for the replayed GPU work must still
        # reproduce the step. Where the measured waits are for work the replay does not model (a
        # queue fed from other threads or streams), the replay ends them too early: keep their
        # measured time instead.
        for seg, _, _ in waits:
            seg.waited, seg.queued = 0, -1
        kept = _replay(step)
        if abs(baseline - (end - start)) <= abs(kept - (end - start)) + WAIT_MODEL_TOLERANCE * (end - start):
            for seg, waited, queued in waits:
                seg.waited, seg.queued = waited, queued
        else:
            baseline = kept
    step.unchanged_ns = baseline
    host_work = host_work_recorded(frame)
    untraced = untraced_ops.untraced_in_window(frame, start, end)
    scenarios = []
    source = source_of(table)
    for name, change in _SCENARIOS.items():
        result = change(step)
        if result is None:
            continue
        predicted, assumptions = result
        library_rnn = _library_rnn_share(step) if name == "amp" else 0.0
        uncertain = library_rnn >= LIBRARY_RNN_SHARE
        if uncertain:
            assumptions += (f"; uncertain: {library_rnn:.0%} of the step's GPU time is a fused RNN "
                            "library op, which picks its algorithm per precision (cuDNN's LSTM on an H100 runs one "
                            "persistent kernel per call at 16 bits, and autocast casts and re-flattens its weights "
                            "each call): measured on an H100, 0.5x to 2.4x the step this predicts (docs/whatif.md)")
        pipeline_python = _pipeline_python_share(step) if name == "no-dispatch" else 0.0
        if pipeline_python >= PIPELINE_PYTHON_SHARE:
            uncertain = True
            assumptions += (f"; uncertain: tf.data's Python ops (tf.py_function, tf.numpy_function, from_generator) "
                            f"run during {pipeline_python:.0%} of the step: where that Python computes (holds the "
                            "GIL) rather than sleeps or waits on I/O, the step's own Python waits for it, which no "
                            "compiler removes; the trace does not say which")
        repeats = _repeated_run(step) if name == "fuse-elementwise" and source == "torch" and not step.gpu.size else 0
        if repeats * CPU_COMPILED_CALL_NS >= baseline - predicted > 0:
            # Not uncertain: compiled whole (one call a step) the prediction holds; said, with its size.
            assumptions += (f"; here one run of elementwise ops comes {repeats} times a step (a loop's body, or "
                            "repeated layers): compiled alone and called that often, at some "
                            f"{CPU_COMPILED_CALL_NS / 1e3:.0f} µs a call on a CPU (a torch.compile'd function of two "
                            "elementwise ops over 64x256 tensors: 45 µs a call, 6.3 µs eager), it costs "
                            f"{repeats * CPU_COMPILED_CALL_NS / 1e6:,.2f} ms, at least the "
                            f"{(baseline - predicted) / 1e6:,.2f} ms the fusion saves (an LSTM cell compiled per "
                            "timestep ran 17-29% slower than the eager cell on a 2-core Xeon): compile what calls it, "
                            "one call a step")
        reads = _python_reads(step) if name == "no-dispatch" else 0
        if reads >= UNCOMPILED_READS:
            uncertain = True
            assumptions += (f"; uncertain: the step reads {reads} tensor values into Python (.item(), int(t)), and "
                            "torch.compile breaks its graph at each: the Python and dispatch between them stays, "
                            "which the trace cannot cost")
        if name == "no-dispatch" and source == "onnxruntime":
            uncertain = True
            assumptions += ("; uncertain: ONNX Runtime already runs the model as a graph, and what its profile shows "
                            "between and inside the node runs is much of it its profiler's own recording of each node "
                            "(tracekit report bounds it), which no compiler removes: time the run unprofiled "
                            "before reading this saving")
        if name == "no-dispatch" and untraced >= untraced_ops.NOTE_SHARE * (end - start):
            # Were it all the inexpensive ops' work, the saving would be short by this much: beyond the
            # replay's own accuracy (UNTRACED_SAVING_SHARE of the saving), the prediction is uncertain.
            untraced_decides = untraced >= UNTRACED_SAVING_SHARE * (baseline - predicted)
            uncertain = uncertain or untraced_decides
            assumptions += (f"; {'uncertain: ' if untraced_decides else ''}{untraced / (end - start):.0%} of the step is "
                            f"inside TF's graph executor with no op traced (at {untraced_ops.LEVEL_WORDS} TF "
                            "records only the ops it deems expensive): the replay removes it as dispatch, but part "
                            "of it is the inexpensive ops the executor runs inline, whose work a compiler fuses but "
                            "does not remove")
        slow, slowest = _slow_launches_on_idle_gpu(step) if name in ("cuda-graphs", "cuda-graph-step") else (0, 0)
        if slow:
            uncertain = True
            assumptions += (f"; uncertain: {slow} launch call(s) of up to {slowest / 1e6:,.2f} ms in this step run while "
                            "the GPU idles (a kernel's module loaded at its first launch, or the thread stalled in "
                            "the call): the replay removes them with the other launch calls, but a steady step would "
                            "not have them and a graph does not remove a stall; profile steady steps")
        upper_bound = False
        longest = _longest_stretch(step) if name in ("no-dispatch", "cuda-graph-step") else 0
        if longest and longest >= UNEXPLAINED_STRETCH_SHARE * (end - start):
            upper_bound = True
            assumptions += (f"; an upper bound: one stretch with no op running is {longest / (end - start):.0%} of "
                            f"the step ({longest / 1e6:,.1f} ms), Python work, compilation or a wait the trace does "
                            "not show, which a compiled graph may not remove")
        if name in ("no-dispatch", "cuda-graph-step") and not upper_bound and step.gpu.size and not host_work:
            upper_bound = True
            assumptions += ("; an upper bound: the trace records the host's GPU API calls but not its own work "
                            "(no framework op, Python frame or NVTX range), so all the host time between them is "
                            "taken as dispatch, which a wait or data loading would not be")
        scenarios.append(Scenario(name, predicted, baseline - predicted, assumptions, upper_bound, uncertain))
    scenarios.sort(key=lambda s: -s.saving_ns)
    return WhatIf(window, end - start, baseline, scenarios, _busiest_stream(step), step.tids)


def _slow_launches_on_idle_gpu(step: _Step) -> tuple[int, int]:
    """(how many, the longest ns) of the slow launch calls (``slow_launches``) starting in the step
    that ran with the GPU idle for most of their time (a call held by a full queue runs beside busy GPU)."""
    f = step.frame
    slow = slow_launch_calls(f)
    slow = slow[(f.start[slow] >= step.start) & (f.start[slow] < step.end)]
    if not slow.size:
        return 0, 0
    gpu = f.rows(*GPU_KINDS)
    busy = intervals.overlap_per_interval(f.start[slow], f.end[slow], f.start[gpu], f.end[gpu])
    idle = slow[2 * busy < f.dur[slow]]
    return int(idle.size), int(f.dur[idle].max()) if idle.size else 0


def _busiest_stream(step: _Step) -> int:
    busy = dict(step.other_gpu_busy)
    f = step.frame
    for g in step.gpu.tolist():
        key = (int(f.device[g]), int(f.stream[g]))
        busy[key] = busy.get(key, 0) + int(f.dur[g])
    return max(busy.values(), default=0)


def _step(frame: Frame, start: int, end: int, window: dict[str, object]) -> _Step:
    classes = classify_rows(frame)
    host = frame.rows(*HOST_KINDS)
    host = host[(frame.start[host] >= start) & (frame.end[host] <= end) & (frame.dur[host] > 0)]
    if not host.size:
        raise empty_window(f"{window['name']}: no host events inside it to replay", window)
    # The driving thread: the one that launches the most GPU work, else the one that marks the steps,
    # else the busiest. Not simply the busiest: gloo's worker thread holds one long range per
    # all-reduce, longer in sum than the training thread's ops while that thread waits for it.
    keys = frame.thread_key[host]
    launches = frame.mask("runtime_api", "driver_api")[host] & member_mask(host, frame.launch_row[frame.rows(*GPU_KINDS)])
    marking = set(driving_threads(frame, host).tolist()) if frame.rows("step").size else set()
    busy = {int(k): (int(launches[keys == k].sum()), int(k) in marking, int(frame.dur[host[keys == k]].sum()))
            for k in np.unique(keys)}
    thread = max(busy, key=lambda k: busy[k])
    threads = _turn_taking(frame, host, keys, thread, {k: b[0] for k, b in busy.items()})
    replayed = member_mask(keys, threads)
    others = host[~replayed & frame.mask("cpu_op")[host]]
    rows = host[replayed]
    rows = rows[np.lexsort((-frame.end[rows], frame.start[rows]))]
    rows = rows[~((frame.start[rows] == start) & (frame.end[rows] == end))]  # the window's own range
    gpu_all = frame.rows(*GPU_KINDS)
    launcher = frame.launch_row[gpu_all]
    on_thread = np.zeros(len(frame), bool)
    on_thread[rows] = True
    gpu = gpu_all[(launcher >= 0) & on_thread[np.maximum(launcher, 0)]]
    gpu = gpu[np.argsort(frame.start[gpu], kind="stable")]
    launched_by: dict[int, list[int]] = {}
    for g in gpu.tolist():
        launched_by.setdefault(int(frame.launch_row[g]), []).append(g)
    collectives = collectives_beside(frame, threads)
    if not gpu.size and not frame.mask("cpu_op")[host].any():
        # Only Python frames, ranges or runtime calls: every scenario would remove all of it and
        # predict a step of nothing. There is no work here for a prediction to keep.
        in_window = collectives[(frame.start[collectives] < end) & (frame.end[collectives] > start)]
        if in_window.size:
            raise empty_window(f"{window['name']}: no framework op and no GPU activity in it; its time is "
                               f"{frame.name(int(in_window[0]))} on other threads, which no scenario changes "
                               "(critical-path shows it)", window)
        raise empty_window(f"{window['name']}: no framework op and no GPU activity in it, nothing to predict (only "
                           "Python frames or ranges: was the profiler's active window on the work?)", window)
    # An op that loops over rows inside itself (tracekit.analyze.op_loops) is one op to a compiled graph
    # too, which calls it as it is: its child ops and the dispatch between them are its own time.
    looping = looping_calls(frame)
    if looping.size:
        wanted = np.zeros(len(frame), bool)
        wanted[looping] = True
        rows = rows[nearest_ancestor(frame.parent, rows, wanted) < 0]
    kinds = _segment_kinds(frame, classes, rows, host_blocking_rows(frame))
    for r in looping.tolist():
        if r in kinds:
            kinds[r] = "compute:other"
    if gpu_all.size and source_of(frame.table) == "jax":
        # JAX's block_until_ready waits for the device: a blocking call, not Python dispatch (on a
        # CPU the wait is for XLA's compute threads, which _mark_waits keeps as waiting).
        py = rows[frame.mask("python_function")[rows]]
        for r in py[frame.named(py, JAX_BLOCK)].tolist():
            kinds[r] = "sync"
    if not gpu_all.size:
        # A compiled graph's own code runs its generated kernels as well as its wrapper, and the trace
        # does not split them: no scenario removes it as dispatch. (With a GPU the kernels are on the GPU.)
        for body in compiled_code_self(frame)[0].tolist():
            if body in kinds:
                kinds[body] = "compiled"
        # Ops of no class that do long work of their own may be arithmetic the rules do not know (a
        # custom op): no scenario removes them as dispatch (tracekit.analyze.unclassified).
        # They are judged among the other threads' ops too: a call that waits for those is not work.
        window_ops = np.concatenate([rows[frame.mask("cpu_op")[rows]], others])
        for row in unclassified_work_rows(frame, window_ops).tolist():
            if row in kinds:
                kinds[row] = "compute:other"
    segments = _segments(frame, rows, kinds, start, end, launched_by)
    fetches = data_loading_rows(frame)
    # A CPU PyTorch or JAX step's own Python work (long stretches with no op) is not dispatch a compiler removes.
    python_work = (long_stretches(frame, np.array([start]), np.array([end]))
                   if not gpu_all.size and source_of(frame.table) in ("torch", "jax") else None)
    # tf.data fetches a tf.function's batch on its own thread (IteratorGetNextOp) while the step's
    # thread waits in the call: a wait no compiler removes.
    pipeline = input_pipeline_mask(frame)
    fetches = fetches[member_mask(frame.thread_key[fetches], threads) | pipeline[fetches]]
    _mark_waits(frame, classes, segments, others, collectives, fetches, python_work)
    _mark_gpu_waits(frame, segments, gpu)
    ready = _stream_ready(frame, gpu_all, gpu, start)
    launch_cost = int(np.median([seg.dur for seg in segments if seg.kind == "launch"] or [0]))
    _mark_queue_waits(frame, segments, gpu_all, gpu, {d for d, _ in ready}, launch_cost)
    latency = _launch_latency(frame, gpu_all, gpu)
    is_op = frame.mask("cpu_op")
    op_class = {r: OP_CLASSES[int(classes.op[r])] if is_op[r] and classes.op[r] >= 0 else "other"
                for r in rows.tolist()}
    gpu_class = np.array([KERNEL_CLASSES[c] if c >= 0 else "other" for c in classes.kernel[gpu]], dtype=object)
    step = _Step(frame, start, end, segments, gpu, max(latency, 0), op_class, gpu_class,
                 other_gpu_busy=_other_threads_gpu_busy(frame, gpu_all, on_thread, start, end),
                 tids=[int(frame.tid[host[keys == k][0]]) for k in threads.tolist()])
    step.python_work_ns = int((python_work[1] - python_work[0]).sum()) if python_work is not None else 0
    step.op_floor, step.work_scale = _work_scale(segments)
    step.kernel_run_floor = _tf_eager_kernel_work(frame, segments, step.work_scale)
    step.launch_cost = launch_cost
    step.stream_ready = ready
    step.queue_gap = _queue_gap(frame, gpu_all)
    step.thread_keys = threads
    # An op that launches GPU work does its arithmetic there: its host time is all overhead.
    is_op = frame.mask("cpu_op")
    for r in {int(x) for x in frame.launch_row[gpu].tolist()}:
        for op in _enclosing_ops(frame, r, is_op):
            step.work_scale[op] = 0.0
    return step


# Threads that take turns may overlap at their edges by a little clock jitter.
TURN_TOLERANCE_NS = 1_000


def _turn_taking(frame: Frame, host: np.ndarray, keys: np.ndarray, thread: int,
                 launches: dict[int, int]) -> np.ndarray:
    """The driving thread and the other threads that launch GPU work in the window and take turns
    with it: where events of two of them overlap, one holds the other (PyTorch's autograd thread
    runs the backward pass inside the Python thread's backward() call, which waits for it). Such
    threads are one line of work, replayed as one: the forward's launches and dispatch belong to the
    step as much as the backward's. A thread whose events cross the others' runs beside them (TF's
    executor threads), or whose innermost calls run while theirs do, runs beside them and stays
    other threads' work; so does every thread of another process (another rank in the same capture)."""
    chosen = [thread]
    start, end = frame.start, frame.end
    pid = frame.pid[host[keys == thread][0]]
    launches = {k: n for k, n in launches.items() if frame.pid[host[keys == k][0]] == pid}
    has_child = np.zeros(len(frame), bool)
    has_child[frame.parent[frame.parent >= 0]] = True
    # The calls that do something themselves (not a Python frame or range that may be waiting).
    leaf = ~has_child[host] & frame.mask("cpu_op", "runtime_api", "driver_api")[host]
    for k in sorted((k for k, n in launches.items() if n and k != thread), key=lambda k: -launches[k]):
        in_a = member_mask(keys, np.array(chosen, np.int64))
        a, b = host[in_a], host[keys == k]
        if (intervals.crossing(start[a], end[a], start[b], end[b], TURN_TOLERANCE_NS).any()
                or intervals.crossing(start[b], end[b], start[a], end[a], TURN_TOLERANCE_NS).any()):
            continue
        a, b = host[in_a & leaf], host[(keys == k) & leaf]
        if intervals.overlap_total(*intervals.union(start[a], end[a]), start[b], end[b]) <= TURN_TOLERANCE_NS:
            chosen.append(k)
    return np.array(chosen, np.int64)


# A kernel launch's latency where the trace cannot show it (every launch queues behind earlier work).
FALLBACK_LAUNCH_LATENCY_NS = 5_000


def _launch_latency(frame: Frame, gpu_all: np.ndarray, gpu: np.ndarray) -> int:
    """ns from a launch call's start to its work's start on a device that was idle at the launch
    (10th percentile over the step's launches): the device's own latency. A launch onto a busy
    device waits for the work ahead of it (on its stream, or on another stream it waits for through
    an event, as NCCL's stream does); where the GPU runs a queue behind the host that wait is tens
    of ms, and taking it for latency would delay every replayed kernel by it."""
    if not gpu.size:
        return 0
    # The end of the work ahead of each GPU row on its device: a running max, by device and start.
    key = frame.device[gpu_all]
    order = np.lexsort((frame.start[gpu_all], key))
    rows, k = gpu_all[order], key[order]
    new_device = np.r_[True, k[1:] != k[:-1]]
    ends = frame.end[rows].copy()
    first = np.flatnonzero(new_device)
    ahead = np.full(rows.size, np.iinfo(np.int64).min)
    for lo, hi in zip(first.tolist(), [*first[1:].tolist(), rows.size], strict=True):  # one pass per device
        ahead[lo + 1:hi] = np.maximum.accumulate(ends[lo:hi])[:-1]
    ahead_of = np.full(len(frame), np.iinfo(np.int64).min)
    ahead_of[rows] = ahead
    launched = frame.start[frame.launch_row[gpu]]
    delays = (frame.start[gpu] - launched)[ahead_of[gpu] <= launched]
    return max(int(np.percentile(delays, 10)), 0) if delays.size else FALLBACK_LAUNCH_LATENCY_NS


def _other_threads_gpu_busy(frame: Frame, gpu_all: np.ndarray, on_thread: np.ndarray, start: int,
                            end: int) -> dict[tuple[int, int], int]:
    """Busy time per (device, stream) of the GPU work launched in [start, end) from other host
    threads. Its busy time, not its measured end: where the GPU runs behind the host, that work ends
    a step or more later, which is the queue's lag, not the step's length."""
    launcher = frame.launch_row[gpu_all]
    linked = launcher >= 0
    other = gpu_all[linked & ~on_thread[np.maximum(launcher, 0)]]
    launched_at = frame.start[frame.launch_row[other]]
    other = other[(launched_at >= start) & (launched_at < end)]
    busy: dict[tuple[int, int], int] = {}
    for d, st, dur in zip(frame.device[other].tolist(), frame.stream[other].tolist(), frame.dur[other].tolist(), strict=True):
        busy[(d, st)] = busy.get((d, st), 0) + dur
    return busy


def _enclosing_ops(frame: Frame, row: int, op: np.ndarray) -> list[int]:
    """The framework ops (``op``: the cpu_op mask) around a host event, innermost first."""
    out = []
    parent = int(frame.parent[row])
    while parent >= 0:
        if op[parent]:
            out.append(parent)
        parent = int(frame.parent[parent])
    return out


# What a torch.compile'd function's call costs on a CPU beyond its ops: a function of two elementwise ops
# over 64x256 tensors (7 inputs), unprofiled, 2-core Xeon: 45 µs a call compiled, 6.3 µs eager.
CPU_COMPILED_CALL_NS = 40_000
LOOP_BODY_REPEATS = 4  # one run of elementwise ops this many times in the step: a loop's body
PIPELINE_PYTHON_SHARE = 0.25  # of the step with tf.data's Python ops running: no-dispatch is uncertain


def _pipeline_python_share(step: _Step) -> float:
    """Share of the step's window in which Python ops run on tf.data's threads."""
    rows = python_op_rows(step.frame)
    if not rows.size or step.end <= step.start:
        return 0.0
    return intervals.overlap_total(*intervals.union(step.frame.start[rows], step.frame.end[rows]),
                                   np.array([step.start]), np.array([step.end])) / (step.end - step.start)


def _mark_waits(frame: Frame, classes, segments: list[Segment], others: np.ndarray, collectives: np.ndarray,
                fetches: np.ndarray, python_work: tuple[np.ndarray, np.ndarray] | None = None) -> None:
    """Dispatch time on the driving thread while other threads run compute ops (TF's executor
    threads, a DataLoader) or collectives (gloo's all-reduce, which DDP's reducer waits for) is the
    step waiting for that work, and inside its own batch fetches (``fetches``: DataLoader __next__,
    IteratorGetNext) it is the loader's work or its wait for worker processes; inside ``python_work``
    (stretches with no op running, ``tracekit.analyze.python_work``) it is the step's own Python: no
    scenario removes any of it."""
    compute = byte_mask(classes.op[others], [OP_CLASSES.index(c) for c in COMPUTE_OP_CLASSES])
    busy = np.concatenate([others[compute], collectives, fetches])
    kept_s, kept_e = python_work if python_work is not None else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    busy_s, busy_e = intervals.union(np.concatenate([frame.start[busy], kept_s]), np.concatenate([frame.end[busy], kept_e]))
    if not busy_s.size:
        return
    dispatch = [seg for seg in segments if seg.kind == "dispatch" and seg.dur]
    starts = np.array([seg.start for seg in dispatch], np.int64)
    ends = starts + np.array([seg.dur for seg in dispatch], np.int64)
    waits_s, waits_e = intervals.union(frame.start[busy], frame.end[busy])
    waiting = intervals.overlap_per_interval(starts, ends, waits_s, waits_e).tolist()
    for seg, overlap, wait in zip(dispatch, intervals.overlap_per_interval(starts, ends, busy_s, busy_e).tolist(),
                                  waiting, strict=True):
        seg.covered = int(overlap)
        seg.python = int(overlap - wait)


def _mark_gpu_waits(frame: Frame, segments: list[Segment], gpu: np.ndarray) -> None:
    """A blocking call's measured time is its own cost plus its wait for the GPU work launched before
    it. The replay keeps the own cost and waits for the replayed GPU work instead: a scenario that
    shortens the GPU work shortens the wait. Only the thread's own launches are replayed, so a wait
    past their end (for other threads' work) stays in the call's own cost."""
    if not gpu.size:
        return
    launched = frame.start[frame.launch_row[gpu]]
    order = np.argsort(launched, kind="stable")
    launched, ends = launched[order], np.maximum.accumulate(frame.end[gpu][order])
    for seg in segments:
        if seg.kind != "sync" or not seg.dur:
            continue
        i = int(np.searchsorted(launched, seg.start, side="right"))
        if i:
            seg.waited = int(min(max(int(ends[i - 1]) - seg.start, 0), seg.dur))


# Queued kernel pairs needed to read the device's gap between them off a trace.
QUEUE_GAP_MIN_PAIRS = 20


def _queue_gap(frame: Frame, gpu_all: np.ndarray) -> int:
    """The device's own gap between consecutive kernels on a stream when the second was launched
    before the first ended (queued: the host played no part): the median over the trace, 0 where
    fewer than QUEUE_GAP_MIN_PAIRS pairs show it. About 1.0-1.3 µs for eager kernels on an H200."""
    kernels = gpu_all[frame.mask("gpu_kernel")[gpu_all]]
    key = frame.device[kernels].astype(np.int64) * (1 << 40) + frame.stream[kernels]
    order = np.lexsort((frame.start[kernels], key))
    kernels, key = kernels[order], key[order]
    nxt, prev_end = kernels[1:], frame.end[kernels[:-1]]
    launch = frame.launch_row[nxt]
    queued = (key[1:] == key[:-1]) & (launch >= 0) & (frame.start[np.maximum(launch, 0)] < prev_end)
    gaps = (frame.start[nxt] - prev_end)[queued]
    return max(int(np.median(gaps)), 0) if gaps.size >= QUEUE_GAP_MIN_PAIRS else 0


def _stream_ready(frame: Frame, gpu_all: np.ndarray, gpu: np.ndarray, start: int) -> dict[tuple[int, int], int]:
    """Per (device, stream) of the step's GPU work: the end of the work that ran on it before the
    step's first GPU op there, where that is after the window starts (a queue behind the host)."""
    ready: dict[tuple[int, int], int] = {}
    if not gpu.size:
        return ready
    mine = np.zeros(len(frame), bool)
    mine[gpu] = True
    earlier = gpu_all[~mine[gpu_all]]
    for d, st in set(zip(frame.device[gpu].tolist(), frame.stream[gpu].tolist(), strict=True)):
        on = gpu[(frame.device[gpu] == d) & (frame.stream[gpu] == st)]
        first = int(frame.start[on].min())
        before = earlier[(frame.device[earlier] == d) & (frame.stream[earlier] == st) & (frame.start[earlier] < first)]
        end = int(frame.end[before].max()) if before.size else start
        if end > start:
            ready[(d, st)] = min(end, first)
    return ready


# A launch call that takes this many times the step's median launch call, and this much longer, was
# held; if it returned within QUEUE_RETURN_NS of the end of GPU work, that work's end freed it.
QUEUE_HELD_FACTOR = 3
QUEUE_HELD_NS = 20_000
QUEUE_RETURN_NS = 15_000  # measured on an H200 (ResNet-50 NCHW, batch 128): 1-10 µs after the end
# ... and only where this many launch calls' work had not started when it was called: the queue was
# full. CUDA's holds 1,024 (1,021 launches pending at every held call on an H200 and on the HTA
# traces' GPUs); a host-paced step has a handful pending.
QUEUE_MIN_PENDING = 256
HELD_BY_EARLIER_WORK = -2


def _mark_queue_waits(frame: Frame, segments: list[Segment], gpu_all: np.ndarray, gpu: np.ndarray,
                      behind: set[int], typical: int) -> None:
    """Where the GPU runs far behind the host, the driver's launch queue fills and a launch call
    blocks until the GPU finishes work ahead of it: on a GPU-bound step the launch calls hold the
    host for tens of ms. Such a call is a wait, not host cost: the replay returns it when the
    replayed GPU work it waited for ends, so a scenario that shortens the GPU work shortens it.
    Evidence per call: far longer than the step's median launch, hundreds of launches' work not
    begun when it was called, and it returned just after some GPU work ended. On a device that runs
    behind the host (``behind``: still busy with earlier work at the step's first launch onto it),
    or where that work is not replayed (other threads'), the call costs a median launch: the
    replayed GPU work, back to back behind the earlier work, paces the step as the queue did, and
    the earlier work, the previous step's, changes as this step's does, so no call waits for a
    time fixed by it. ``typical``: the step's median launch call."""
    launches = [seg for seg in segments if seg.kind == "launch" and seg.dur and seg.owner >= 0
                and seg.start + seg.dur == int(frame.end[seg.owner])]
    if not launches or not gpu.size:
        return
    held = [seg for seg in launches
            if seg.dur > QUEUE_HELD_FACTOR * typical and seg.dur - typical >= QUEUE_HELD_NS]
    if not held:
        return
    # Launch calls and when their work began (a graph launch is one call for all its kernels).
    linked = gpu_all[frame.launch_row[gpu_all] >= 0]
    linked = linked[np.argsort(frame.launch_row[linked], kind="stable")]
    calls, first = np.unique(frame.launch_row[linked], return_index=True)
    began = np.minimum.reduceat(frame.start[linked], first) if calls.size else np.zeros(0, np.int64)
    called = frame.start[calls]
    held = [seg for seg in held if int(((called < seg.start) & (began > seg.start)).sum()) >= QUEUE_MIN_PENDING]
    order = np.argsort(frame.end[gpu_all], kind="stable")
    ends, rows = frame.end[gpu_all][order], gpu_all[order]
    replayed = set(gpu.tolist())
    call_end = np.array([seg.start + seg.dur for seg in held], np.int64)
    i = np.searchsorted(ends, call_end, "right") - 1
    for seg, at, k in zip(held, call_end.tolist(), i.tolist(), strict=True):
        if k < 0 or at - int(ends[k]) > QUEUE_RETURN_NS or int(ends[k]) <= seg.start + typical:
            continue
        row = int(rows[k])
        seg.queued, seg.after = ((row, at - int(ends[k])) if row in replayed and int(frame.device[row]) not in behind
                                 else (HELD_BY_EARLIER_WORK, 0))


def _work_scale(segments: list[Segment]) -> tuple[int, dict[int, float]]:
    """Every framework op pays a fixed cost before its arithmetic (argument checks, allocation,
    kernel selection: ~2-5 µs in PyTorch eager, tens of µs in TF eager). Its size is read off the
    trace: the 10th percentile of the compute ops' times, the smallest ops being nearly all
    overhead. A compiled or fused version keeps only the rest of each op's time (its work)."""
    per_op: dict[int, int] = {}
    for seg in segments:
        if seg.kind.startswith("compute") and seg.owner >= 0:
            per_op[seg.owner] = per_op.get(seg.owner, 0) + seg.dur
    if not per_op:
        return 0, {}
    floor = int(np.percentile(list(per_op.values()), 10))
    return floor, {op: max(t - floor, 0) / t if t else 0.0 for op, t in per_op.items()}


# TF eager runs each op as a one-op function: EagerExecute > EagerLocalExecute: MatMul >
# EagerKernelExecute > KernelAndDeviceFunc::Run (KernelAndDeviceOp::Run for ops run directly). Only
# the run is the op's kernel; the rest is the eager runtime a graph does not pay.
TF_KERNEL_RUN = re.compile(r"^KernelAndDevice\w*::Run$")


def _tf_eager_kernel_work(frame: Frame, segments: list[Segment], scale: dict[int, float]) -> int | None:
    """For TF eager ops whose kernel run is traced: each op's work is its runs' time less the runs'
    fixed cost (their 10th percentile, the function runtime's share), as a scale of the op's compute
    time in ``scale``; returns that fixed cost (None: no such op). A MatMul of 16x128 by 128x512 spends
    45 µs in EagerExecute, 27 µs of it in the run, against 16-18 µs for the graph's _MklMatMul."""
    ops = {seg.owner for seg in segments if seg.kind.startswith("compute") and seg.owner >= 0}
    codes = [i for i, n in enumerate(frame.names) if TF_KERNEL_RUN.match(n)]
    if not ops or not codes:
        return None
    runs = np.flatnonzero(member_mask(frame.name_code, codes))
    owner = nearest_ancestor(frame.parent, runs, frame.mask("cpu_op"))
    mine = member_mask(owner, sorted(ops))
    runs, owner = runs[mine], owner[mine]
    if not runs.size:
        return None
    floor = int(np.percentile(frame.dur[runs], 10))
    work: dict[int, int] = {}
    for op, run in zip(owner.tolist(), runs.tolist(), strict=True):
        work[op] = work.get(op, 0) + max(int(frame.dur[run]) - floor, 0)
    compute: dict[int, int] = {}
    for seg in segments:
        if seg.owner in work and seg.kind.startswith("compute"):
            compute[seg.owner] = compute.get(seg.owner, 0) + seg.dur
    for op, w in work.items():
        scale[op] = min(w / compute[op], 1.0) if compute.get(op) else 0.0
    return floor


def _work(step: _Step, seg: Segment) -> int:
    """A compute segment's work, without the op's share of the framework's fixed cost."""
    return int(seg.dur * step.work_scale.get(seg.owner, 1.0))


def _segment_kinds(frame: Frame, classes, rows: np.ndarray, blocking_rows: np.ndarray) -> dict[int, str]:
    out = {}
    launch = API_CLASSES.index("launch")
    blocking = set(np.intersect1d(blocking_rows, rows).tolist())
    compute = {OP_CLASSES.index(c) for c in COMPUTE_OP_CLASSES}
    op_kind = frame.mask("cpu_op")
    api_kind = frame.mask("runtime_api", "driver_api")
    waits = set(python_wait_rows(frame).tolist())
    for r in rows.tolist():
        if r in waits:
            out[r] = "wait"
        elif api_kind[r]:
            if r in blocking:
                out[r] = "sync"
            elif classes.api[r] == launch:
                out[r] = "launch"
            else:
                out[r] = "api"
        elif op_kind[r] and int(classes.op[r]) in compute:
            out[r] = f"compute:{OP_CLASSES[int(classes.op[r])]}"
        else:
            out[r] = "dispatch"
    return out


def _segments(frame: Frame, rows: np.ndarray, kinds: dict[int, str], start: int, end: int,
              launched_by: dict[int, list[int]]) -> list[Segment]:
    """The thread's time from ``start`` to ``end`` cut at every start and end of its events (rows in
    call-stack order: by start, parents first)."""
    segments: list[Segment] = []
    stack: list[int] = []
    t = start

    op = frame.mask("cpu_op")
    thread_key = frame.thread_key

    def cut(at: int) -> Segment:
        nonlocal t
        owner = stack[-1] if stack else -1
        # The top-level op: the outermost framework op open on the owner's thread (user ranges around
        # ops do not count, nor a call on another replayed thread that waits for this one's work).
        top = next((r for r in stack if op[r] and thread_key[r] == thread_key[owner]), -1) if stack else -1
        seg = Segment(max(at - t, 0), kinds.get(owner, "dispatch"), owner, top, start=t)
        segments.append(seg)
        t = max(t, at)
        return seg

    def close_until(limit: int) -> None:
        while stack and frame.end[stack[-1]] <= limit:
            cut(int(frame.end[stack[-1]]))
            stack.pop()

    for r in rows.tolist():
        close_until(int(frame.start[r]))
        cut(int(frame.start[r])).launches = launched_by.get(r, [])
        stack.append(r)
    close_until(end)
    cut(end)
    return segments


def _replay(step: _Step, host_scale=None, gpu_dur=None, launch_latency: int | None = None,
            wait: bool = True, node_gap: int | None = None, side_stream: set[int] | None = None,
            no_wait: set[int] | None = None) -> int:
    """Simulated step time. ``host_scale(segment) -> ns`` and ``gpu_dur(i) -> ns`` change costs;
    ``node_gap``: the least time between consecutive kernels on a stream (default: the trace's own
    gap between queued kernels; a CUDA graph's nodes have theirs);
    ``side_stream``: GPU work (indices into ``step.gpu``) moved to a stream of its own per device;
    ``no_wait``: blocking segments (by ``id``) that no longer wait for the GPU."""
    f = step.frame
    latency = step.launch_latency if launch_latency is None else launch_latency
    node_gap = step.queue_gap if node_gap is None else node_gap
    t = step.start
    # A stream still running earlier work (the previous step's, where the GPU runs behind) takes the
    # step's work when that is done; the previous step's work would change as this step's does, so
    # the step's GPU time is counted from its own first kernel, not from the window's start.
    stream_free: dict[tuple[int, int], int] = dict(step.stream_ready)
    first_begin: int | None = None
    stream_busy = dict(step.other_gpu_busy)
    gpu_end: dict[int, int] = {}
    index = {int(g): i for i, g in enumerate(step.gpu.tolist())}
    last_gpu_end = step.start
    for seg in step.segments:
        dur = seg.dur if host_scale is None else host_scale(seg)
        if seg.queued != -1 and dur == seg.dur:
            # Held by a full launch queue: it returns when the replayed work it waited for ends.
            t = max(t + min(dur, step.launch_cost), gpu_end.get(seg.queued, t) + seg.after)
        elif seg.kind == "sync" and wait and seg.owner >= 0 and dur > 0 and not (no_wait and id(seg) in no_wait):
            # A blocking call returns when the GPU work launched before it is done, and then takes what
            # it took after the measured work ended: the wait is for the replayed work, not the measured.
            if seg.waited and dur == seg.dur:
                t = max(t, last_gpu_end) + dur - seg.waited
            else:
                t = max(t + dur, last_gpu_end) if gpu_end else t + dur
        else:
            t += dur
        for g in seg.launches:
            i = index[g]
            key = (int(f.device[g]), SIDE_STREAM if side_stream and i in side_stream else int(f.stream[g]))
            d = int(f.dur[g]) if gpu_dur is None else gpu_dur(i)
            begin = max(stream_free[key] + node_gap if key in stream_free else 0, t + latency)
            first_begin = begin if first_begin is None else min(first_begin, begin)
            stream_free[key] = begin + d
            stream_busy[key] = stream_busy.get(key, 0) + d
            gpu_end[g] = begin + d
            last_gpu_end = max(last_gpu_end, begin + d)
    busiest = max(stream_busy.values(), default=0)
    return int(max(t - step.start, last_gpu_end - (step.start if first_begin is None else first_begin), busiest))


# One stretch with no op running that covers this much of the step is not per-op dispatch but work
# the trace does not show (Python, compilation, a sleep, a wait on another process): removing it is
# only an upper bound. Eager framework ops cost 1-100 µs each.
UNEXPLAINED_STRETCH_SHARE = 0.5


# A step reading this many tensor values into Python cannot be compiled whole (a graph break at each),
# and where its top-level ops are under MAX_OPS_PER_READ a read, the graphs between the breaks are too
# small to save dispatch (a compiled region's call costs tens of µs on a CPU, an eager op a few).
UNCOMPILED_READS = 8
# Optimizers whose step branches on the values it reads (torch.optim.LBFGS: its line search and stopping
# tests, 700-1,100 reads a step of max_iter=10 on a 2-layer MLP): not reads a compiled optimizer step drops.
BRANCHING_OPTIMIZER = re.compile(r"^Optimizer\.step#LBFGS\.step$")
MAX_OPS_PER_READ = 16


def _python_reads(step: _Step) -> int:
    """Top-level reads of a tensor's value into Python (``.item()``, ``int(t)``) in the step, on its
    threads, not torch.optim's own (Adam reads each parameter's step count, which a compiled optimizer
    step does not): their number where they split the step into pieces too small to compile, else 0."""
    frame = step.frame
    codes = [c for c, n in enumerate(frame.names) if n in READ_OPS]
    if not codes:
        return 0
    ops = frame.rows("cpu_op")
    reads = ops[member_mask(frame.name_code[ops], codes) & (frame.op_parent[ops] < 0)]
    reads = reads[(frame.start[reads] >= step.start) & (frame.start[reads] < step.end)]
    reads = reads[member_mask(frame.thread_key[reads], step.thread_keys)]
    if reads.size < UNCOMPILED_READS:
        return 0
    # LBFGS reads values to decide its line search and when to stop: those reads stay under a compiler.
    optimizer = member_mask(frame.name_code, [c for c, n in enumerate(frame.names)
                                              if OPTIMIZER_STEP.search(n) and not BRANCHING_OPTIMIZER.search(n)])
    n_reads = int((nearest_ancestor(frame.parent, reads, optimizer) < 0).sum())
    top = ops[(frame.op_parent[ops] < 0) & (frame.start[ops] >= step.start) & (frame.start[ops] < step.end)]
    n_ops = int(member_mask(frame.thread_key[top], step.thread_keys).sum())
    return n_reads if n_reads >= UNCOMPILED_READS and n_ops < MAX_OPS_PER_READ * n_reads else 0


def _longest_stretch(step: _Step) -> int:
    """The longest stretch of dispatch time no-dispatch removes."""
    return max((s.dur - s.covered for s in step.segments if s.kind == "dispatch"), default=0)


def _no_dispatch(step: _Step) -> tuple[int, str] | None:
    saved = sum(s.dur - s.covered for s in step.segments if s.kind == "dispatch")
    if not saved:
        return None

    def host(seg: Segment) -> int:
        if seg.kind == "dispatch":
            return seg.covered  # waiting for other threads' compute or collectives stays
        return _work(step, seg) if seg.kind.startswith("compute") else seg.dur

    predicted = _replay(step, host_scale=host)
    kept = ("; compiled graphs' own code stays (their generated kernels and wrapper, which the trace does not split)"
            if any(s.kind == "compiled" for s in step.segments) else "")
    eager = (f"; a TF eager op keeps only its kernel run (KernelAndDeviceFunc::Run) less the run's fixed cost "
             f"({step.kernel_run_floor / 1e3:.1f} µs): the eager runtime around it goes too"
             if step.kernel_run_floor is not None else "")
    own = (f"; and the step's own Python work, {step.python_work_ns / 1e6:,.2f} ms in stretches of "
           f"{LONG_STRETCH_NS / 1e3:.0f} µs or more with no op running" if step.python_work_ns else "")
    # No compute op in the step: no fixed cost to remove, and no percentile of none to state.
    floor = (f", and so does each compute op's fixed cost ({step.op_floor / 1e3:.1f} µs, the trace's 10th-percentile "
             "op time)" if any(s.kind.startswith("compute") for s in step.segments) else "")
    return predicted, ("framework and Python time outside compute ops (except waits: for other threads' compute or "
                       f"collectives, and Python frames blocked in a sleep, lock or poll; and batch fetching{own}) goes to "
                       f"0{floor} (a compiled graph: "
                       "tf.function, TorchScript, torch.compile, jax.jit); launches and GPU work unchanged" + eager + kept)


def _launch_calls(step: _Step) -> tuple[list[Segment], int] | None:
    """The step's launch-call segments and their median time (one graph launch's cost); None with
    fewer than two launches, which no graph would replace."""
    launches = [s for s in step.segments if s.kind == "launch"] if step.gpu.size else []
    if len(launches) < 2:
        return None
    return launches, int(np.median([s.dur for s in launches]))


def _cuda_graphs(step: _Step) -> tuple[int, str] | None:
    found = _launch_calls(step)
    if found is None:
        return None
    launches, one = found
    first = launches[0]
    predicted = _replay(step, host_scale=lambda s: (one if s is first else 0) if s.kind == "launch" else s.dur,
                        launch_latency=min(step.launch_latency, 2_000))
    return predicted, (f"the step's {len(launches)} launch calls become one graph launch ({one / 1e3:.1f} µs, "
                       "their median); kernels start back to back (launch latency at most 2 µs)")


# Kernels replayed from a CUDA graph start about this far apart on a stream: on one H200, a
# torch.cuda.graph of 200 kernels of ~0.9 µs replayed in 0.34 ms (docs/results/h200/README.md).
GRAPH_NODE_GAP_NS = 750
# A compute op that launches no GPU work and runs this long is arithmetic on the host, which a capture
# cannot take in; shorter ones are bookkeeping (aten::to of a scalar, aten::empty_like), which it can.
HOST_COMPUTE_NS = 50_000


def _uncapturable(step: _Step) -> list[bool]:
    """Per segment: host time a CUDA graph capture cannot take in, which stays on replay. Blocking
    calls (capture forbids them), Python frames that block, batch fetching, compute ops that launch no
    GPU work (arithmetic on the host), and waits for other threads' work unless that work launches GPU
    work of its own (PyTorch's autograd thread, whose launches the capture takes in too)."""
    frame = step.frame
    fetch = data_loading_rows(frame)
    fetch = fetch[member_mask(frame.thread_key[fetch], step.thread_keys)]
    fetch_s, fetch_e = intervals.union(frame.start[fetch], frame.end[fetch])
    others_launch = bool(step.other_gpu_busy)
    op_time: dict[int, int] = {}
    for seg in step.segments:
        if seg.kind.startswith("compute"):
            op_time[seg.owner] = op_time.get(seg.owner, 0) + seg.dur
    out = []
    for seg in step.segments:
        fetching = bool(fetch_s.size) and bool(((fetch_s <= seg.start) & (seg.start < fetch_e)).any())
        host_compute = (seg.kind.startswith("compute") and step.work_scale.get(seg.owner, 1.0) > 0
                        and op_time[seg.owner] >= HOST_COMPUTE_NS)
        waiting = seg.kind == "dispatch" and seg.covered > 0 and not others_launch
        out.append(seg.kind in ("sync", "wait", "compiled") or fetching or host_compute or waiting)
    return out


def _cuda_graph_step(step: _Step) -> tuple[int, str] | None:
    found = _launch_calls(step)
    if found is None:
        return None
    launches, one = found
    # Each stretch of capturable host work that launches GPU work becomes one graph launch; the host
    # work in it is skipped on replay. Host work outside such stretches keeps its time.
    kept: dict[int, int] = {}
    graphs = 0
    region: list[int] = []

    def close() -> None:
        nonlocal graphs
        segs = [step.segments[i] for i in region]
        if any(s.kind == "launch" for s in segs):
            graphs += 1
            first = next(i for i in region if step.segments[i].kind == "launch")
            for i in region:
                kept[i] = one if i == first else 0
        region.clear()

    for i, blocked in enumerate(_uncapturable(step)):
        if blocked:
            close()
        else:
            region.append(i)
    close()
    lookup = {id(s): kept.get(i, s.dur) for i, s in enumerate(step.segments)}
    # Kernels queued back to back in the trace already paid a gap like the graph's, which the unchanged
    # replay leaves out: the graph's gaps never make the step longer than that replay.
    predicted = min(_replay(step, host_scale=lambda s: lookup[id(s)], launch_latency=min(step.launch_latency, 2_000),
                            node_gap=GRAPH_NODE_GAP_NS), step.unchanged_ns or _replay(step))
    breaks = "" if graphs == 1 else (f" ({graphs} graphs: blocking calls, batch fetching or host compute between "
                                     "them stay outside)")
    return predicted, (f"the step's GPU work is captured in a CUDA graph and replayed{breaks}: the host work that "
                       f"issues it (dispatch, Python, its {len(launches)} launch calls) is skipped, one graph launch "
                       f"({one / 1e3:.1f} µs) each; kernels start {GRAPH_NODE_GAP_NS / 1e3:.2f} µs apart (a graph's "
                       "gap between kernels, measured on an H200); blocking calls, batch fetching and host compute "
                       "keep their time")


def _elementwise_runs(step: _Step) -> list[list[int]]:
    """The step's runs of two or more consecutive elementwise/cast top-level ops (their rows)."""
    tops: list[int] = []
    for s in step.segments:
        if s.top >= 0 and (not tops or tops[-1] != s.top):
            tops.append(s.top)
    runs: list[list[int]] = []
    current: list[int] = []
    for top in tops:
        if step.op_class.get(top) in FUSIBLE:
            current.append(top)
        else:
            if len(current) > 1:
                runs.append(current)
            current = []
    if len(current) > 1:
        runs.append(current)
    return runs


def _repeated_run(step: _Step) -> int:
    """How many times the step's most repeated run of elementwise ops (the same op names in order)
    occurs, where it occurs ``LOOP_BODY_REPEATS`` times or more: a loop body (an LSTM cell's gates once
    per timestep, an optimizer's update once per parameter); else 0."""
    counts: dict[tuple[str, ...], int] = {}
    for run in _elementwise_runs(step):
        key = tuple(step.frame.name(top) for top in run)
        counts[key] = counts.get(key, 0) + 1
    most = max(counts.values(), default=0)
    return most if most >= LOOP_BODY_REPEATS else 0


def _fuse_elementwise(step: _Step) -> tuple[int, str] | None:
    """Runs of consecutive elementwise/cast top-level ops become one op costing the run's longest
    compute (one pass over memory); on the GPU, runs of such kernels on a stream become one kernel."""
    runs = _elementwise_runs(step)
    if not runs:
        return None
    keep: dict[int, int] = {}  # top-level op -> the run's op that stays (the others cost nothing)
    for run in runs:
        compute = {top: sum(s.dur for s in step.segments if s.top == top and s.kind.startswith("compute"))
                   for top in run}
        longest = max(run, key=lambda t: compute[t])
        for top in run:
            keep[top] = longest
    in_run = set(keep)

    def host(seg: Segment) -> int:
        if seg.top in in_run and keep[seg.top] != seg.top:
            return 0  # fused away: its dispatch, compute and launches
        return seg.dur

    gpu_fused = _fused_gpu_runs(step)
    predicted = _replay(step, host_scale=host, gpu_dur=lambda i: gpu_fused.get(i, int(step.frame.dur[step.gpu[i]])))
    n = sum(len(r) for r in runs)
    return predicted, (f"{len(runs)} run(s) of {n} elementwise/cast ops become one op each, costing the run's "
                       "longest compute (one pass over memory); their other ops' dispatch, compute and launches go "
                       "to 0; a compiler's own cost per call of the fused code (torch.compile: Dynamo's cache lookup "
                       "and wrapper) is not counted, and where the compiled function is called once per loop "
                       "iteration it can exceed the saving")


GATE_OPS = ("aten::sigmoid", "aten::tanh")  # a gated recurrent cell's (LSTM, GRU) written as ops


def _recurrent_cells(step: _Step) -> bool:
    """Whether the step runs a recurrent cell per timestep: a cell op (``aten::lstm_cell``), or a run
    of elementwise ops holding a gated cell's sigmoid and tanh (a hand-written LSTM or GRU cell)."""
    f = step.frame
    if any(s.top >= 0 and f.name(s.top) in RNN_CELL_OPS for s in step.segments):
        return True
    return any({f.name(top) for top in run} >= set(GATE_OPS) for run in _elementwise_runs(step))


def _compile_loop_body(step: _Step) -> tuple[int, str] | None:
    """``fuse-elementwise`` as a CPU PyTorch recurrence is compiled in practice: where a recurrent cell
    runs per timestep (``_recurrent_cells``) and one run of elementwise ops repeats ``LOOP_BODY_REPEATS``
    times or more a step (the cell's gates, once a timestep), the cell's step is compiled alone
    (compiling the whole loop unrolls it: Dynamo took 46-63 s on a 50-step LSTM) and called once an
    iteration, each call costing ``CPU_COMPILED_CALL_NS`` beyond its ops."""
    if step.gpu.size or source_of(step.frame.table) != "torch" or not _recurrent_cells(step):
        return None  # a loop over independent pieces is vectorized (foreach, vmap), not compiled piece by piece
    repeats = _repeated_run(step)
    fused = _fuse_elementwise(step) if repeats else None
    if fused is None:
        return None
    cost = repeats * CPU_COMPILED_CALL_NS
    return fused[0] + cost, (f"as fuse-elementwise, with the fused code compiled as the body of the loop that runs "
                             f"one run of elementwise ops {repeats} times a step (an LSTM cell's step compiled alone "
                             "and called once a timestep, as long sequences are compiled), each call costing "
                             f"{CPU_COMPILED_CALL_NS / 1e3:.0f} µs beyond its ops on a CPU (a torch.compile'd function "
                             "of two elementwise ops over 64x256 tensors: 45 µs a call, 6.3 µs eager): "
                             f"{cost / 1e6:,.2f} ms a step added")


def _fused_gpu_runs(step: _Step) -> dict[int, int]:
    """GPU: consecutive elementwise/cast kernels on a stream -> the longest keeps its time, others 0."""
    out: dict[int, int] = {}
    f = step.frame
    key = f.device[step.gpu].astype(np.int64) * (1 << 40) + f.stream[step.gpu]
    for stream in np.unique(key):
        idx = np.flatnonzero(key == stream)
        run: list[int] = []
        for i in [*idx.tolist(), -1]:
            if i >= 0 and step.gpu_class[i] in FUSIBLE:
                run.append(i)
                continue
            if len(run) > 1:
                longest = max(run, key=lambda j: int(f.dur[step.gpu[j]]))
                for j in run:
                    out[j] = int(f.dur[step.gpu[j]]) if j == longest else 0
            run = []
    return out


def _fused_rnn(step: _Step) -> tuple[int, str] | None:
    """A per-timestep cell loop becomes one fused RNN op (cuDNN, oneDNN): each cell keeps its GEMM
    work and one pointwise pass (its longest pointwise op: the fused kernel computes the gates in one
    pass over them), without the per-timestep dispatch, launches, views and copies (the cell op's
    own time among them: ``aten::lstm_cell`` calls its GEMMs and gates as ops), nor the loop
    around the cells: the Python and non-compute ops (``x[t]``) between the first cell call and the
    last, which one call of the fused op does not run."""
    f = step.frame
    cell_codes = {i for i, n in enumerate(f.names) if n in RNN_CELL_OPS}
    cells = {s.top for s in step.segments if s.top >= 0 and int(f.name_code[s.top]) in cell_codes}
    if not cells or fed_back_cells(f, np.array(sorted(cells), np.int64)) is not None:
        return None  # a decoder's next input is chosen from its output: no layer takes them all at once
    first_cell = min(int(f.start[c]) for c in cells)
    last_cell = max(int(f.end[c]) for c in cells)
    # On a CPU only the LSTM has a fused kernel (oneDNN's, aten::mkldnn_rnn_layer): nn.GRU and nn.RNN
    # run the cell's ops per timestep themselves, from C++ (aten::gru's own loop of addmm and gates).
    unfused = set() if f.rows(*GPU_KINDS).size else {c for c in cells if f.name(c) in CPU_UNFUSED_CELL_OPS}

    def loop_glue(seg: Segment) -> bool:
        return (seg.top not in cells and first_cell <= seg.start and seg.start + seg.dur <= last_cell
                and seg.kind in ("dispatch", "api"))
    # The loop's own Python between the cells goes with it, however long a stretch (python_work keeps
    # long stretches in every other scenario); waits for other threads' work stay.
    pointwise: dict[tuple[int, int], int] = {}  # (cell, op) -> its pointwise work
    for seg in step.segments:
        if seg.top in cells and seg.kind.startswith("compute:") and seg.kind[8:] not in FUSED_RNN_MATH:
            key = (seg.top, seg.owner)
            pointwise[key] = pointwise.get(key, 0) + _work(step, seg)
    kept: dict[int, int] = {}  # cell -> the pointwise op whose pass stays
    for (cell, op), work in pointwise.items():
        if cell not in kept or work > pointwise[(cell, kept[cell])]:
            kept[cell] = op

    def kept_launch(seg: Segment) -> bool:
        # A fused RNN op on a GPU still launches each timestep's GEMM and gate kernel from the host
        # (cuDNN's standard algorithm; its persistent kernel, one launch a call, is chosen by hidden
        # size, batch and precision, which the loop's trace cannot show).
        if seg.kind != "launch" or seg.owner < 0:
            return False
        op = int(f.op_row[seg.owner])
        return op >= 0 and (op == kept.get(seg.top) or step.op_class.get(op, "other") in FUSED_RNN_MATH)

    def host(seg: Segment) -> int:
        if seg.top not in cells:
            return seg.covered - seg.python if loop_glue(seg) else seg.dur
        if seg.top in unfused:
            return seg.dur  # the layer's C++ loop runs the same ops, dispatch included
        if kept_launch(seg):
            return seg.dur
        if not seg.kind.startswith("compute:") or seg.owner == seg.top:
            return seg.covered  # the cell op's own time: a composite op's dispatch into its GEMMs and gates
        if seg.kind[8:] in FUSED_RNN_MATH or kept.get(seg.top) == seg.owner:
            return _work(step, seg)
        return 0

    glue = sum(s.dur - s.covered + s.python for s in step.segments if loop_glue(s))
    launches = sum(1 for s in step.segments if s.top in cells and kept_launch(s))
    predicted = _replay(step, host_scale=host, launch_latency=0)
    if unfused == cells:
        return predicted, (f"{len(cells)} cell calls become one call of the recurrent layer (nn.GRU / nn.RNN): on a "
                           f"CPU PyTorch has no fused kernel for them (oneDNN's is the LSTM's), so the layer runs the "
                           f"cells' ops per timestep from C++, each keeping its dispatch and time; only the loop "
                           f"between the cells goes ({glue / 1e3:,.0f} µs of Python and non-compute ops). The "
                           "layer's one GEMM of all timesteps' inputs may run faster than the cells' per-timestep "
                           "ones, which the loop's trace cannot show: the saving is a lower bound")
    kept_launches = (f"; the launch calls of the GEMM and pointwise kernels kept stay ({launches}: cuDNN's standard "
                     "LSTM launches each timestep's kernels from the host; its persistent kernel, which it picks at "
                     "small hidden sizes, launches once)") if launches else ""
    return predicted, (f"{len(cells)} cell calls become one fused RNN op: their GEMM work is kept, and one pointwise "
                       f"pass per cell (its longest pointwise op); their dispatch, other launch calls, other pointwise "
                       f"ops and each op's fixed cost ({step.op_floor / 1e3:.1f} µs) go to 0, and so does the loop "
                       f"between the cells ({glue / 1e3:,.0f} µs of Python and non-compute ops){kept_launches}; the "
                       "GEMMs keep the rate they ran at in the loop, so the saving is a lower bound: a fused kernel "
                       "that batches the input GEMMs of all timesteps into one runs them faster, by a factor that "
                       "depends on the device and its library and that the loop's GEMMs, all of one shape, cannot show")


def _amp(step: _Step) -> tuple[int, str] | None:
    if not step.gpu.size:
        return None
    candidates = np.array([i for i, c in enumerate(step.gpu_class.tolist()) if c in ("gemm", "convolution")], np.int64)
    if not candidates.size:
        return None
    # Kernels named for 16-bit or narrower math already run at that rate (a bf16 autocast step).
    already = step.frame.named(step.gpu[candidates], LOW_PRECISION)
    math = set(candidates[~already].tolist())
    if not math:
        return None
    cast = [int(step.frame.dur[g]) for g, c in zip(step.gpu.tolist(), step.gpu_class.tolist(), strict=True)
            if c in ("elementwise", "cast")]
    cast_ns = int(np.median(cast)) if cast else 2_000

    def gpu(i: int) -> int:
        d = int(step.frame.dur[step.gpu[i]])
        return int(d / HALF_PRECISION_SPEEDUP) + cast_ns if i in math else d

    # Autocast casts each math op's inputs (activation and weight: two casts), and a cast is an op:
    # the host pays an op's fixed cost and a launch for each, once per op, not per kernel.
    launch_ns = step.launch_cost
    index = {int(g): i for i, g in enumerate(step.gpu.tolist())}
    extra = 2 * (step.op_floor + launch_ns)
    charged: set[int] = set()

    def host(seg: Segment) -> int:
        if seg.top >= 0 and seg.top not in charged and any(index[g] in math for g in seg.launches):
            charged.add(seg.top)
            return seg.dur + extra
        return seg.dur

    predicted = _replay(step, host_scale=host, gpu_dur=gpu)
    kept = f"; {int(already.sum())} already at 16 bits or fewer keep their time" if already.any() else ""
    return predicted, (f"{len(math)} GEMM/convolution kernels run at twice the rate (16-bit tensor cores){kept}, each with "
                       f"a cast kernel added ({cast_ns / 1e3:.1f} µs, the trace's median elementwise kernel); each op "
                       f"launching them casts two inputs on the host ({extra / 1e3:.1f} µs: two ops' fixed cost and "
                       "launch)")


def _library_rnn_share(step: _Step) -> float:
    """Share of the step's GPU time launched by a fused RNN library op (cuDNN's or MIOpen's LSTM/GRU:
    ``aten::_cudnn_rnn``, TF's ``CudnnRNN``), not by a cell loop's own ops."""
    if not step.gpu.size:
        return 0.0
    f = step.frame
    dur = f.dur[step.gpu].astype(np.int64)
    op = f.op_row[step.gpu]
    launched = op >= 0
    inside = np.zeros(len(op), bool)
    inside[launched] = f.named(op[launched], LIBRARY_RNN_OPS)
    total = int(dur.sum())
    return int(dur[inside].sum()) / total if total else 0.0


def _no_sync(step: _Step) -> tuple[int, str] | None:
    if not any(s.kind == "sync" and s.dur for s in step.segments):
        return None
    predicted = _replay(step, host_scale=lambda s: 0 if s.kind == "sync" else s.dur, wait=False)
    return predicted, "blocking calls (synchronizations, blocking copies) return at once; the GPU work is unchanged"


def _made_async(step: _Step, calls: set[int]) -> tuple[int, set[int], Callable[[Segment], int]]:
    """Copy calls (rows) that held the host, made async from pinned memory: each costs what a launch
    call does (the step's median). Returns that cost, the ids of the blocking segments that no longer
    wait, and every segment's host cost."""
    launch_ns = step.launch_cost
    unblocked = {id(seg) for seg in step.segments if seg.kind == "sync" and seg.owner in calls}
    return launch_ns, unblocked, lambda s: min(s.dur, launch_ns) if id(s) in unblocked else s.dur


def _copies(n: int) -> str:
    return "copy" if n == 1 else "copies"


def _overlap_copies(step: _Step) -> tuple[int, str] | None:
    """Host-to-device copies (a step's input) made one step ahead, from pinned memory on a side stream:
    their GPU time leaves the stream the kernels run on (a copy engine runs it beside them), and a copy
    call that held the host (pageable memory) returns as an async one does. Applies where such copies
    share a stream with the step's kernels; device-to-host copies stay (the host reads their result)."""
    f = step.frame
    is_copy = f.mask("gpu_memcpy")[step.gpu]
    h2d = np.flatnonzero(is_copy & host_to_device(f, step.gpu))
    kernels = step.gpu[~is_copy]
    streams_with_kernels = set(zip(f.device[kernels].tolist(), f.stream[kernels].tolist(), strict=True))
    shared = [int(i) for i in h2d.tolist()
              if (int(f.device[step.gpu[i]]), int(f.stream[step.gpu[i]])) in streams_with_kernels]
    if not shared:
        return None
    calls = {int(f.launch_row[step.gpu[i]]) for i in shared}
    launch_ns, unblocked, host = _made_async(step, calls)
    predicted = _replay(step, host_scale=host, side_stream=set(shared), no_wait=unblocked)
    copy_ns = int(f.dur[step.gpu[shared]].sum())
    held = (f"; {len(unblocked)} of their calls held the host (pageable memory) and return as an async copy does "
            f"({launch_ns / 1e3:.1f} µs, the median launch call)") if unblocked else ""
    return predicted, (f"{len(shared)} host-to-device {_copies(len(shared))} ({copy_ns / 1e3:,.1f} µs of GPU time "
                       "on the kernels' stream) are made one step ahead from pinned memory on a side stream, beside the kernels "
                       f"(a copy engine runs them){held}; nothing in the step waits for them")


def _pin_memory(step: _Step) -> tuple[int, str] | None:
    """Copies of 1 MB or more from or to pageable memory run at the rate pinned memory reaches (the
    trace's own pinned copies of 1 MB or more in that direction, else PCIe 3.0's 12 GB/s): the driver
    no longer stages them. A host-to-device call that held the host returns as an async copy does; a
    device-to-host one still waits, for the faster copy (the host reads its result)."""
    f = step.frame
    is_copy = f.mask("gpu_memcpy")[step.gpu]
    index = np.flatnonzero(is_copy)
    pageable = index[host_memory(f, step.gpu[index]) == PAGEABLE]
    nbytes = copy_bytes(f, step.gpu[pageable])
    # A smaller copy's time is mostly its fixed latency, which pinning does not remove (Keras darknet53
    # under nsys: 5 KB pageable copies of 1.7 µs, which the rate alone would make free).
    large = nbytes >= RATE_COPY_BYTES
    pageable, nbytes = pageable[large], nbytes[large]
    if not pageable.size:
        return None
    to_device = host_to_device(f, step.gpu[pageable])
    rates = {d: pinned_rate(f, d) for d in set(to_device.tolist())}  # the directions these copies take
    pinned_ns = {int(i): min(int(b / rates[bool(d)][0] * 1e9), int(f.dur[step.gpu[i]]))
                 for i, b, d in zip(pageable.tolist(), nbytes.tolist(), to_device.tolist(), strict=True)}
    calls = {int(f.launch_row[step.gpu[i]]) for i in pageable[to_device].tolist()}
    _, unblocked, host = _made_async(step, calls)
    predicted = _replay(step, host_scale=host, gpu_dur=lambda i: pinned_ns.get(i, int(f.dur[step.gpu[i]])),
                        no_wait=unblocked)
    measured = int(f.dur[step.gpu[pageable]].sum())
    said = []
    for d in (True, False):
        n = int((to_device == d).sum())
        if n:
            rate, seen = rates[d]
            source = (f"this trace's {seen} pinned {'host-to-device' if d else 'device-to-host'} copies of 1 MB or more"
                      if seen else "PCIe 3.0 x16's practical rate, this trace having no large pinned copy that way")
            said.append(f"{n} {'host-to-device' if d else 'device-to-host'} at {rate / 1e9:.1f} GB/s ({source})")
    return predicted, (f"{pageable.size} {_copies(pageable.size)} of 1 MB or more from or to pageable memory "
                       f"({measured / 1e3:,.1f} µs of GPU time) run from pinned memory: {'; '.join(said)}; host-to-device calls that held the host return as an "
                       "async copy does, device-to-host calls still wait for their (faster) copy")


def _channels_last(step: _Step) -> tuple[int, str] | None:
    """Activations kept in the layout the convolutions run in (channels_last): cuDNN's conversions
    of NCHW tensors into its NHWC kernels and back (nchwToNhwc / nhwcToNchw) go, with their launch
    calls. The other kernels keep their time."""
    f = step.frame
    kernels = np.flatnonzero(f.mask("gpu_kernel")[step.gpu])
    converts = set(kernels[f.named(step.gpu[kernels], LAYOUT_CONVERSION)].tolist())
    if not converts:
        return None
    index = {int(g): i for i, g in enumerate(step.gpu.tolist())}

    def host(seg: Segment) -> int:
        if seg.kind == "launch" and seg.launches and all(index[g] in converts for g in seg.launches):
            return 0
        return seg.dur

    predicted = _replay(step, host_scale=host, gpu_dur=lambda i: 0 if i in converts else int(f.dur[step.gpu[i]]))
    convert_ns = int(f.dur[step.gpu[sorted(converts)]].sum())
    return predicted, (f"{len(converts)} layout-conversion kernels (cuDNN's nchwToNhwc / nhwcToNchw, "
                       f"{convert_ns / 1e3:,.1f} µs) and their launch calls go: activations stay in channels_last, the "
                       "layout the convolutions run in; the other kernels keep their time (a lower bound: batch norm, "
                       "pooling and elementwise kernels may run faster in that layout too, which the trace cannot show)")


def _fused_optimizer(step: _Step) -> tuple[int, str] | None:
    """A built-in optimizer that updates one parameter at a time (or foreach on the CPU), made fused
    (or foreach on a GPU): inside its calls, dispatch and each op's fixed cost go; the ops' arithmetic
    stays."""
    f = step.frame
    calls = optimizer_calls(f)
    # A call given a closure can start a step before its own update runs (Lightning marks its steps
    # inside the closure): every call overlapping the window; in_update reads only its own part.
    calls = calls[member_mask(f.thread_key[calls], step.thread_keys.tolist()) & (f.end[calls] > step.start)
                  & (f.start[calls] < step.end)]
    if not calls.size:
        return None
    update = update_of(f, calls)
    if not fusable(update.how, on_gpu(f)):
        return None
    outer, inside = update.outer, update.inside
    order = np.argsort(f.start[outer])
    call_start, call_end = update.own_start[order], f.end[outer][order]  # a closure's forward and backward stay

    def in_update(seg: Segment) -> bool:
        i = int(np.searchsorted(call_start, seg.start, side="right")) - 1
        return i >= 0 and seg.start < call_end[i]

    if not any(in_update(seg) and (seg.kind == "dispatch" or seg.kind.startswith("compute")) for seg in step.segments):
        return None
    # The ops' arithmetic made one pass (on the CPU, where it is the update's own time; shapes recorded).
    work: dict[int, int] = {}
    for seg in step.segments:
        if seg.kind.startswith("compute") and seg.owner >= 0 and in_update(seg):
            work[seg.owner] = work.get(seg.owner, 0) + _work(step, seg)
    fused = None if on_gpu(f) else fused_arithmetic(f, update, work)
    arithmetic = sum(work.values())
    scale = min(1.0, fused.ns / arithmetic) if fused is not None and arithmetic else 1.0

    def host(seg: Segment) -> int:
        if not in_update(seg):
            return seg.dur
        if seg.kind == "dispatch":
            return seg.covered
        return int(_work(step, seg) * scale) if seg.kind.startswith("compute") else seg.dur

    predicted = _replay(step, host_scale=host)
    how = update.how if update.how != "foreach" else "foreach, which loops over the tensors on the CPU"
    if fused is not None and scale < 1.0:
        arith = f"their arithmetic, {arithmetic / 1e6:,.2f} ms, becomes {fused.ns / 1e6:,.2f} ms: {fused.describe()}"
    elif not on_gpu(f) and fused_streams(update) is None:
        arith = "their arithmetic stays (its fused update makes as many passes over the tensors on a CPU)"
    else:
        arith = ("their arithmetic stays (a conservative prediction: a fused update makes one pass over the "
                 "parameters, not one per op" + ("" if fused is not None or on_gpu(f) else
                                                 "; with shapes recorded on tensors of 1 MiB or more that pass is costed")
                 + ")")
    return predicted, (f"the optimizer's {outer.size} call(s) of {inside.size / outer.size:,.0f} ops ({how}) "
                       f"become one fused update (torch.optim's fused=True, or foreach=True on a "
                       f"GPU): the framework and Python time inside them goes to 0, and so does each op's fixed cost "
                       f"({step.op_floor / 1e3:.1f} µs); {arith}; launches and GPU work unchanged")


def _foreach_loops(step: _Step) -> tuple[int, str] | None:
    """Python loops over the parameters outside the optimizer (tracekit.analyze.parameter_loops: an EMA
    of the weights, clipping a tensor at a time) made torch._foreach_* ops over the tensor lists: inside
    the loops, dispatch and each op's fixed cost go; the ops' arithmetic stays."""
    read = step.frame.memo("parameter_loops", lambda: loops_in(step.frame, None))  # a report replays twice
    threads = set(step.thread_keys.tolist())
    loops = [loop for loop in (read[0] if read is not None else [])
             if loop.thread in threads and loop.end > step.start and loop.begin < step.end]
    if not loops:
        return None
    spans = sorted((loop.begin, loop.end) for loop in loops)
    begins, ends = np.array([b for b, _ in spans]), np.array([e for _, e in spans])

    def in_loop(seg: Segment) -> bool:
        i = int(np.searchsorted(begins, seg.start, side="right")) - 1
        return i >= 0 and seg.start < ends[i]

    def host(seg: Segment) -> int:
        if not in_loop(seg):
            return seg.dur
        if seg.kind == "dispatch":
            return seg.covered
        return _work(step, seg) if seg.kind.startswith("compute") else seg.dur

    if not any(in_loop(seg) and (seg.kind == "dispatch" or seg.kind.startswith("compute")) for seg in step.segments):
        return None
    predicted = _replay(step, host_scale=host)
    return predicted, (f"the step's {len(loops)} Python loop(s) over the parameters outside the optimizer "
                       f"({sum(loop.ops for loop in loops):,} ops, {max(loop.tensors for loop in loops)} tensors) "
                       "become torch._foreach_* ops over the tensor lists: the framework and Python time inside them "
                       f"goes to 0, and so does each op's fixed cost ({step.op_floor / 1e3:.1f} µs); their arithmetic "
                       "stays (a conservative prediction: an average as one torch._foreach_lerp_ makes one pass over "
                       "the tensors, not one per op)")


_SCENARIOS = {"no-dispatch": _no_dispatch, "cuda-graphs": _cuda_graphs, "cuda-graph-step": _cuda_graph_step,
              "fuse-elementwise": _fuse_elementwise, "compile-loop-body": _compile_loop_body,
              "fused-rnn": _fused_rnn, "amp": _amp, "no-sync": _no_sync, "overlap-copies": _overlap_copies,
              "pin-memory": _pin_memory, "channels-last": _channels_last, "fused-optimizer": _fused_optimizer,
              "foreach-loops": _foreach_loops}
