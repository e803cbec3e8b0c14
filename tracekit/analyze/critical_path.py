"""The critical path of a step or a range: the longest chain of dependent work, and what bounds it.

A dependency graph over the event table, with the semantics of HTA's critical path analysis
(``hta/analyzers/critical_path_analysis.py``) so the two can be checked against each other, built
with numpy and a topological pass instead of networkx:

- nodes: the start and end of each host op and CUDA runtime/driver call that starts inside the
  window with a duration, and of each GPU kernel, copy or set whose launch call does;
- host edges, per thread in call-stack (DFS) order: consecutive nodes are joined; the weight is the
  time between them, except between top-level calls (a dependency of weight 0: time between
  top-level ops is not work) and into the end of a blocking sync call (the wait is the GPU's);
- GPU edges: each activity's own duration; a launch-delay edge from its launch call's start when
  the stream was idle at launch, else a kernel-kernel edge from the previous activity on the
  stream (gaps under 1.5 ms, as HTA);
- sync edges (weight 0): the last GPU activity that ended before a blocking call returned, into
  that call's end (blocking as ``tracekit.analyze.blocking`` reads it: not a device-side wait, a
  poll or a copy from pinned memory);
- hand-off edges, for a framework op that hands its work to other threads and waits (TF's
  ``EagerExecute`` of a function, whose ops run on the inter-op pool; see ``_handoffs``): from the
  call's start to each op with nothing before it (dispatch, the call's time), from the last op to
  end before another starts into it (weight 0: the executor scheduling it on any thread), and from
  the last op to end into the call's end (its return, the call's time). The wait itself weighs
  nothing, as for a sync, so the path runs through the ops and not over the waiting call.

- collective edges, for a collective on a worker thread (gloo runs DDP's all-reduces as
  ``gloo:all_reduce`` ranges on its own threads; see ``_collective_edges``): its duration, from the
  communication op that issued it, and into the driving thread's next row where that thread was
  idle when it ended (the thread waited for it).

The longest path by weight is the critical path; each edge on it is CPU-bound (host op time),
launch overhead, kernel-kernel overhead, GPU compute, GPU communication, host communication (time in
collectives on the host) or data loading.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit.analyze import intervals
from tracekit.analyze.blocking import host_blocking_rows
from tracekit.analyze.breakdown import COMPUTE_OP_CLASSES, host_work_recorded
from tracekit.analyze.classify import (
    DATA_LOADER,
    KERNEL_CLASSES,
    OP_CLASSES,
    RowClasses,
    classify_rows,
    collective_rows,
    collective_work_rows,
    collectives_beside,
    data_loading_rows,
    input_pipeline_mask,
    op_name_codes,
)
from tracekit.analyze.frame import Frame, frame_of
from tracekit.analyze.gpu_presence import refuse_without_gpu_activity
from tracekit.analyze.stalls import stalled_calls
from tracekit.analyze.steps import driving_threads, step_stats
from tracekit.analyze.unclassified import unclassified_work_rows
from tracekit.analyze.untraced_ops import untraced_in_window
from tracekit.analyze.waiting import WAITING_SHARE, WORKER_GAP_SHARE, blocked_on_dispatch, worker_event_rows
from tracekit.errors import EmptyWindowError, TraceContentError, UsageError
from tracekit.ingest.columns import distinct
from tracekit.ingest.links import member_mask
from tracekit.schema import KINDS as KIND_DESCRIPTIONS
from tracekit.schema import source_of

KINDS = list(KIND_DESCRIPTIONS)

KERNEL_KERNEL_DELAY_NS = 1_500_000  # HTA's threshold: longer gaps are not a kernel-kernel dependency
WHOLE_TRACE = "whole trace"  # the window when no step is marked and no range is named

# Edge types and what they bound.
OPERATOR, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC = range(5)
CATEGORIES = ("cpu_bound", "data_loading", "gpu_kernel_launch_overhead", "gpu_kernel_kernel_overhead",
              "gpu_compute_bound", "gpu_communication_bound", "cpu_communication_bound")
HOST_KINDS = ("cpu_op", "runtime_api", "driver_api")
_ITERATOR_GET_NEXT = re.compile(r"^IteratorGetNext")
GPU_KINDS = ("gpu_kernel", "gpu_memcpy", "gpu_memset")


@dataclass
class CriticalPath:
    """Result of ``critical_path()``. Times in ns.

    window: what was analysed (the range or step name, its instance, start and end).
    shares: percent of the path's weight per category (``CATEGORIES``), adding up to 100.
    edges: one row per weighted edge on the path, in order: row (the event), name, kind,
        category, cpu_compute (a cpu_bound edge inside a compute op run on the CPU), start_ns (where
        the edge begins), weight_ns.
    top: the events with the most path time: name, category, cpu_compute, weight_ns, share (percent).
    handoffs: calls that handed their work to other threads and waited (``_handoffs``), and
        handed_ops: how many top-level ops ran for them; handoff_return_ns: the part of the path
        from the last of those ops' end to the call's return (the thread blocked on that work until
        woken, nothing traced on it: 2.4 ms of a 2.8 ms path in a stored Keras model.fit step).
    """

    window: dict[str, object]
    total_ns: int
    shares: dict[str, float]
    edges: pd.DataFrame
    top: pd.DataFrame
    nodes: int
    graph_edges: int
    handoffs: int = 0
    handed_ops: int = 0
    handoff_return_ns: int = 0
    stalled_ns: int = 0  # path time of stalled op calls beyond their median (CPU-only, stepped traces)
    # The part of cpu_bound spent inside compute ops that run on the CPU (GEMM, elementwise, ... with
    # no GPU work of their own): the math itself, not framework overhead. On a CPU-only trace it is
    # most of the path, which "CPU-bound" alone would leave unsaid.
    cpu_compute_ns: int = 0
    # The host's own work recorded (framework ops, Python frames, or NVTX ranges where a trace has no
    # ops). Without it (nsys -t cuda, ProfilerActivity.CUDA only) the host's side of the path is its
    # GPU API calls alone, and what it did between them is not on the path.
    host_work_traced: bool = True
    # The last end of the work in the graph, and of its GPU work: GPU work launched in the window can
    # run past its end (the GPU behind the host), and the path through it with it, so the path is
    # measured against the window up to there.
    work_end_ns: int = 0
    gpu_work_end_ns: int = 0
    # Window time inside TF's graph executor with no op traced (a capture below host_tracer_level 3: the
    # inexpensive ops run there untraced, so they are not on the path; tracekit.analyze.untraced_ops).
    untraced_executor_ns: int = 0


def critical_path(table: pa.Table, range_name: str | None = None, instance: int | None = None) -> CriticalPath:
    """The critical path of the ``instance``-th range named ``range_name`` (a user range or step),
    or of the first step when no name is given, or of the whole trace when no step is marked."""
    frame = frame_of(table)
    start, end, window = step_window(frame, range_name, instance)
    classes = classify_rows(frame)
    refuse_without_gpu_activity(frame, "a critical path", classes)
    host = _host_rows(frame, start, end)
    gpu = _gpu_rows(frame, host)
    collectives = _side_collectives(frame, host, start, end)
    events = np.concatenate([host, gpu, collectives])
    if not events.size:
        raise empty_window(f"nothing to analyse in {window['name']}: no host op or GPU activity starts in it", window)
    graph = _Graph(frame, events)
    handoffs = _handoffs(frame, classes, host)
    programs = _xla_programs(frame, host)
    # Participants that do not all overlap are not one exchange (and their edges could loop).
    exchanges = [rows for rows in _xla_collectives(frame, classes, programs) + _tf_collectives(frame, host)
                 if frame.end[rows].min() > frame.start[rows].max()]
    _host_edges(graph, frame, host, set(handoffs) | {r for rows in exchanges for r in rows})
    _handoff_edges(graph, frame, handoffs)
    _xla_edges(graph, frame, programs, exchanges)
    _collective_edges(graph, frame, host, collectives)
    waits, event_syncs = _event_waits(frame, gpu, graph)
    _gpu_edges(graph, frame, gpu, waits)
    _sync_edges(graph, frame, host, gpu)
    for kernel, call in event_syncs:
        graph.add(graph.end(kernel), graph.end(call), SYNC, -1)
    path = graph.longest_path()
    result = _summarize(frame, classes, graph, path, window)
    result.handoffs, result.handed_ops = len(handoffs), sum(ops.size for ops in handoffs.values())
    result.handoff_return_ns = _handoff_return_on_path(frame, handoffs, result.edges)
    result.stalled_ns = _stalled_on_path(frame, classes, result.edges)
    result.host_work_traced = host_work_recorded(frame) or not gpu.size
    result.work_end_ns = int(frame.end[events].max())
    result.gpu_work_end_ns = int(frame.end[gpu].max()) if gpu.size else 0
    result.untraced_executor_ns = untraced_in_window(frame, start, end)
    return result


def _stalled_on_path(frame: Frame, classes: RowClasses, edges: pd.DataFrame) -> int:
    """CPU-only: path time of op calls that stalled (``tracekit.analyze.stalls``: a call that ran 10x
    or more its median over the steps, its thread not running): each call's excess over its median,
    at most its own time on the path. The report says which calls stalled; the path says how much of
    it they are."""
    if edges.empty or frame.mask(*GPU_KINDS).any() or not frame.rows("step").size:
        return 0
    table = step_stats(frame).steps
    compared = [int(s) for s in table.step[table.status.isin(("steady", "outlier"))]]
    stalls = stalled_calls(frame, classes, compared)
    if not stalls.rows.size:
        return 0
    excess = dict(zip(stalls.rows.tolist(), stalls.stall_ns.tolist(), strict=True))
    on_path = edges[edges.row.isin(list(excess))].groupby("row").weight_ns.sum()
    return int(sum(min(int(w), int(excess[int(r)])) for r, w in on_path.items()))


def _handoff_return_on_path(frame: Frame, handoffs: dict[int, np.ndarray], edges: pd.DataFrame) -> int:
    """Path time of the hand-off calls' return edges (last handed op's end to the call's end)."""
    if not handoffs or edges.empty:
        return 0
    returns = {(call, int(frame.end[ops].max())) for call, ops in handoffs.items()}
    on_path = [w for r, s, w in zip(edges.row, edges.start_ns, edges.weight_ns, strict=True) if (int(r), int(s)) in returns]
    return int(sum(on_path))


def empty_window(problem: str, window: dict[str, object]) -> EmptyWindowError:
    """The error for a window with nothing to analyse, with where to look next: another window, or
    (the whole trace being empty) what the trace holds."""
    whole = window["name"] == WHOLE_TRACE
    hint = "tracekit report says what the trace holds" if whole else "--range and --instance pick another window"
    return EmptyWindowError(f"{problem} ({hint})")


def step_window(frame: Frame, range_name: str | None, instance: int | None) -> tuple[int, int, dict[str, object]]:
    """(start, end, description) of the ``instance``-th range named ``range_name`` (the first when
    None), or of the ``instance``-th step; with neither given, the first steady step: a warm-up step
    (graph building, compilation) or an outlier is not the loop (``steps.step_stats``). The whole
    trace when no step is marked."""
    chosen = ""
    if range_name is None:
        steps = frame.rows("step")
        if not len(frame):  # {"traceEvents": []}: a profiler that recorded nothing
            raise empty_window("the trace holds no events", {"name": WHOLE_TRACE})
        if not steps.size:
            first, last = int(frame.start.min()), int(frame.end.max())
            return first, last, {"name": WHOLE_TRACE, "instance": 0, "start_ns": first, "end_ns": last}
        rows = steps[np.argsort(frame.start[steps], kind="stable")]
        label = "step"
        if instance is None:
            instance, chosen = _first_steady_step(frame, rows)
    else:
        codes = [i for i, n in enumerate(frame.names) if n == range_name]
        rows = np.flatnonzero(member_mask(frame.name_code, codes) & frame.mask("user_range", "step", "cpu_op"))
        rows = rows[np.argsort(frame.start[rows], kind="stable")]
        label = range_name
        if not rows.size:
            raise UsageError(f"no range named {range_name!r} in the trace (tracekit ranges lists them)")
    instance = 0 if instance is None else instance
    if not 0 <= instance < rows.size:
        raise UsageError(f"{label}: instance {instance} asked, the trace has {rows.size} (0 to {rows.size - 1})")
    row = rows[instance]
    name = frame.names[frame.name_code[row]] if frame.name_code[row] >= 0 else ""
    return int(frame.start[row]), int(frame.end[row]), {"name": name, "instance": instance, "chosen": chosen,
                                                        "start_ns": int(frame.start[row]), "end_ns": int(frame.end[row])}


def _first_steady_step(frame: Frame, rows: np.ndarray) -> tuple[int, str]:
    """The index (among the step rows ``rows``, by start) of the first step used by the step
    statistics, and why it was chosen over the first ("" when it is the first)."""
    stats = step_stats(frame)
    used = stats.used_step_numbers() if len(stats.steps) else []
    if not used:
        return 0, ""
    at = np.flatnonzero(frame.step[rows] == used[0])
    if not at.size or at[0] == 0:
        return 0, ""
    index = int(at[0])
    skipped = stats.steps[~stats.steps.used & (stats.steps.start_ns < stats.steps.start_ns[stats.steps.step == used[0]].iloc[0])]
    why = ", ".join(f"step {int(r.step)} ({r.status})" for r in skipped.itertuples())
    return index, f"the first steady step ({why} skipped; --instance picks another)"


def median_step_instance(frame: Frame) -> int | None:
    """The index (among the step rows, by start; ``step_window``'s ``instance``) of the used step whose
    duration is the median of the used steps that hold host events (the longer of the middle two):
    the step a prediction for the whole loop is made on. The first steady step can be far from it: on
    an H200 prefetch loop (tests/data/h200/prefetch_serial) it was the slowest of four, where removing
    dispatch saves 17% against 8% on the middle two. None without marked steps."""
    steps = frame.rows("step")
    if not steps.size:
        return None
    stats = step_stats(frame)
    used = stats.steps[stats.steps.used] if len(stats.steps) else stats.steps
    # A step the capture cut off after its marker (HTA's MI250 sample: a 49 µs last step) has nothing to replay.
    host = np.sort(frame.start[_host_rows(frame, int(frame.start.min()), int(frame.end.max()))])
    begin = used.start_ns.to_numpy(np.int64)
    used = used[np.searchsorted(host, begin + used.dur_ns.to_numpy(np.int64)) > np.searchsorted(host, begin)]
    if not len(used):
        return None
    durations = used.dur_ns.to_numpy()
    middle = np.argsort(durations, kind="stable")[durations.size // 2]
    rows = steps[np.argsort(frame.start[steps], kind="stable")]
    at = np.flatnonzero(frame.step[rows] == int(used.step.iloc[middle]))
    return int(at[0]) if at.size else None


def _host_rows(frame: Frame, start: int, end: int) -> np.ndarray:
    """Host rows that start in the window: framework ops and runtime calls, except on tf.data's threads,
    whose map functions and prefetching run beside the step, linked to it only by the fetch of its batch
    (``_pipeline_fetches``, which is kept): a sequential map's calls back to back on one thread made a
    chain twice the window's length, the step's own path left out."""
    rows = frame.rows(*HOST_KINDS)
    rows = np.union1d(rows[~input_pipeline_mask(frame)[rows]], _pipeline_fetches(frame))
    keep = (frame.start[rows] >= start) & (frame.start[rows] <= end) & (frame.dur[rows] > 0)
    return rows[keep]


def _pipeline_fetches(frame: Frame) -> np.ndarray:
    """tf.data's fetches of a batch for a tf.function's IteratorGetNext, on tf.data's own thread
    (``IteratorGetNextOp::DoCompute`` on ``tf_data_iterator_get_next``): the function's ops wait for it,
    so it is on the path as the function's own ops are (a hand-off), as data loading."""
    fetches = data_loading_rows(frame)
    fetches = fetches[input_pipeline_mask(frame)[fetches]]
    return fetches[frame.named(fetches, _ITERATOR_GET_NEXT)]


def _gpu_rows(frame: Frame, host: np.ndarray) -> np.ndarray:
    """GPU activities whose launch call is among the window's host rows."""
    rows = frame.rows(*GPU_KINDS)
    selected = np.zeros(len(frame), bool)
    selected[host] = True
    launcher = frame.launch_row[rows]
    return rows[(launcher >= 0) & selected[np.maximum(launcher, 0)]]


class _Graph:
    """Nodes 2k (start) and 2k+1 (end) of the k-th event; edges as parallel lists."""

    def __init__(self, frame: Frame, events: np.ndarray) -> None:
        self.events = events
        self.index = {int(r): k for k, r in enumerate(events)}
        self.ts = np.empty(2 * events.size, np.int64)
        self.ts[0::2] = frame.start[events]
        self.ts[1::2] = frame.end[events]
        self.src: list[int] = []
        self.dst: list[int] = []
        self.kind: list[int] = []
        self.event: list[int] = []  # the event an edge's time belongs to (-1: none)
        self.fixed: dict[int, int] = {}  # edge -> its weight, where not the time between its nodes

    def start(self, row: int) -> int:
        return 2 * self.index[row]

    def end(self, row: int) -> int:
        return 2 * self.index[row] + 1

    def add(self, src: int, dst: int, kind: int, event: int, weight: int | None = None) -> None:
        """An edge; its weight is the time between its nodes (0 for dependencies and syncs) unless
        ``weight`` is given."""
        if src != dst:
            self.src.append(src)
            self.dst.append(dst)
            self.kind.append(kind)
            self.event.append(event)
            if weight is not None:
                self.fixed[len(self.src) - 1] = weight

    def weights(self) -> np.ndarray:
        src, dst, kind = np.array(self.src, np.int64), np.array(self.dst, np.int64), np.array(self.kind)
        w = np.maximum(self.ts[dst] - self.ts[src], 0)  # ns rounding can put a child's end past its parent's
        w[(kind == DEPENDENCY) | (kind == SYNC)] = 0
        for e, weight in self.fixed.items():
            w[e] = weight
        return w

    def longest_path(self) -> list[int]:
        """Edge indices of the longest path (Kahn's topological order, then back-tracking)."""
        n = self.ts.size
        src, dst = np.array(self.src, np.int64), np.array(self.dst, np.int64)
        w = self.weights()
        self.w = w
        out: list[list[int]] = [[] for _ in range(n)]
        for e, s in enumerate(src.tolist()):
            out[s].append(e)
        indegree = np.bincount(dst, minlength=n)
        dist = np.zeros(n, np.int64)
        via = np.full(n, -1, np.int64)
        queue = deque(np.flatnonzero(indegree == 0).tolist())
        dst_list, w_list = dst.tolist(), w.tolist()
        seen = 0
        while queue:
            u = queue.popleft()
            seen += 1
            du = int(dist[u])
            for e in out[u]:
                v = dst_list[e]
                if du + w_list[e] > dist[v] or via[v] < 0 and du + w_list[e] == dist[v] == 0:
                    dist[v], via[v] = du + w_list[e], e
                indegree[v] -= 1
                if indegree[v] == 0:
                    queue.append(v)
        if seen != n:
            raise TraceContentError("the dependency graph has a cycle (overlapping events on one thread?)")
        node = int(np.argmax(dist))
        path: list[int] = []
        while via[node] >= 0:
            path.append(int(via[node]))
            node = int(src[via[node]])
        return path[::-1]


def _host_edges(g: _Graph, frame: Frame, host: np.ndarray, waiting: set[int]) -> None:
    """Per host thread, the call stack walked depth-first: each node joined to the next. Into the end
    of a blocking sync or of a call in ``waiting`` (rows) the edge weighs nothing. An event that
    starts inside another and ends after it (a clock's jitter or rounding: Paddle's "matmul kernel
    launch" starts a few ns before its "matmul infer_meta" ends) is read as the other's child cut at
    its end, or as the next sibling started at its end, whichever moves less: the walk is one
    timeline, and a path through it is no longer than the thread's time."""
    blocking = set(host_blocking_rows(frame).tolist())
    thread = frame.thread_key[host]
    for key in np.unique(thread):
        rows = host[thread == key]
        rows = rows[np.lexsort((-frame.end[rows], frame.start[rows]))]  # parents before their children
        stack: list[int] = []
        last: int | None = None
        for row in rows.tolist():
            while stack:
                top_end, row_end = g.ts[g.end(stack[-1])], g.ts[g.end(row)]
                if top_end > g.ts[g.start(row)] and not top_end - g.ts[g.start(row)] < row_end - top_end:
                    break  # a child
                if top_end > g.ts[g.start(row)]:  # a sibling that starts before the other ends
                    g.ts[g.start(row)] = top_end
                last = _exit(g, frame, stack.pop(), last, blocking, waiting)
            if stack:
                g.ts[g.end(row)] = min(g.ts[g.end(row)], g.ts[g.end(stack[-1])])
            node = g.start(row)
            if last is not None:
                g.add(last, node, OPERATOR if stack else DEPENDENCY, stack[-1] if stack else -1)
            last = node
            stack.append(row)
        while stack:
            last = _exit(g, frame, stack.pop(), last, blocking, waiting)


def _args_with(frame: Frame, rows: np.ndarray, key: str) -> list[tuple[int, dict]]:
    """(row, parsed args) of the rows whose args hold ``key`` (the others are not parsed)."""
    if not rows.size:
        return []
    texts = frame.table.column("args").cast(pa.large_string()).take(pa.array(rows)).to_pylist()
    marker = f'"{key}"'
    return [(row, json.loads(text)) for row, text in zip(rows.tolist(), texts, strict=True) if text and marker in text]


def _xla_programs(frame: Frame, host: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
    """XLA's instructions among the host rows, by the program run that executed them: {(run_id,
    device_ordinal): rows by start}. XLA:CPU records each instruction with its run and device
    (JAX, TF's jit_compile); a device's instructions can hop between threads (a pmap step's
    device 0 runs its dot on a PjRt client thread and its psum on an Eigen thread)."""
    rows = host[frame.mask("cpu_op")[host]]
    if not rows.size or source_of(frame.table) not in ("jax", "tf"):  # XLA's programs are JAX's and TF's
        return {}
    programs: dict[tuple[int, int], list[int]] = {}
    for row, args in _args_with(frame, rows, "hlo_op"):
        run, device = args.get("run_id"), args.get("device_ordinal")
        if isinstance(run, int) and isinstance(device, int) and device >= 0:
            programs.setdefault((run, device), []).append(row)
    return {k: np.array(sorted(v, key=lambda r: (frame.start[r], -frame.end[r])), np.int64) for k, v in programs.items()}


def _xla_collectives(frame: Frame, classes: RowClasses, programs: dict[tuple[int, int], np.ndarray]) -> list[np.ndarray]:
    """The instances of XLA collective instructions: the same instruction (``psum.7``) in the same run
    on every device that took part, when more than one did."""
    comm = OP_CLASSES.index("communication")
    instances: dict[tuple[int, int], list[int]] = {}
    for (run, _), rows in programs.items():
        for row in rows[classes.op[rows] == comm].tolist():
            instances.setdefault((run, int(frame.name_code[row])), []).append(row)
    return [np.array(v, np.int64) for v in instances.values() if len(v) > 1]


def _tf_collectives(frame: Frame, host: np.ndarray) -> list[np.ndarray]:
    """The instances of TensorFlow's collective ops among the host rows: the ops of one all-reduce on
    each replica share its group, instance key and step id (MirroredStrategy's CollectiveReduceV2 on
    two CPU replicas), when more than one replica's op is there."""
    rows = collective_work_rows(frame)
    rows = rows[member_mask(rows, host)] if rows.size and host.size else rows[:0]
    instances: dict[tuple[object, object, object], list[int]] = {}
    for row, args in _args_with(frame, rows, "instance_key"):
        instances.setdefault((args.get("group_key"), args.get("instance_key"), args.get("step_id")), []).append(row)
    return [np.array(v, np.int64) for v in instances.values() if len(v) > 1]


def _xla_edges(g: _Graph, frame: Frame, programs: dict[tuple[int, int], np.ndarray], exchanges: list[np.ndarray]) -> None:
    """A device's program order across threads: an instruction that starts after the one before it
    ended, on another thread, depends on it. A collective instance ends for every device once the
    last one has arrived: from each participant's start to each one's end, weighing only the time
    after the last arrival (the earlier ones' wait is not work); the participants' own edges into
    their ends weigh nothing (``_host_edges`` is told they wait)."""
    for rows in programs.values():
        for a, b in zip(rows[:-1].tolist(), rows[1:].tolist(), strict=True):
            if frame.thread_key[a] != frame.thread_key[b] and frame.end[a] <= frame.start[b]:
                g.add(g.end(a), g.start(b), DEPENDENCY, -1)
    for rows in exchanges:
        last = int(frame.start[rows].max())
        for i in rows.tolist():
            for j in rows.tolist():
                g.add(g.start(i), g.end(j), OPERATOR, j, weight=max(int(frame.end[j]) - last, 0))


def _exit(g: _Graph, frame: Frame, row: int, last: int | None, blocking: set[int], waiting: set[int]) -> int:
    node = g.end(row)
    if last is not None:
        # Into a blocking call's end: weight 0, the wait is accounted for by the GPU's sync edge
        # (or by the other threads' ops, for a hand-off).
        waits = row in blocking or row in waiting
        g.add(last, node, SYNC if waits else OPERATOR, row)
    return node


def _handoffs(frame: Frame, classes: RowClasses, host: np.ndarray) -> dict[int, np.ndarray]:
    """Framework ops that hand their work to other threads and wait for it: {call row: the
    top-level host rows of other threads that ran inside it, by start}.

    The evidence, checked per call: it is a framework op that computes nothing itself (not a compute
    op class, a runtime call or a GPU sync) with no host row of its own thread inside it, on a
    thread that drives the steps (``steps.driving_threads``), and other threads of its process are
    busy with top-level host rows inside it, or its thread is blocked on a TF function it dispatched
    (``waiting.blocked_on_dispatch``), for at least ``WAITING_SHARE`` of its duration (the short
    gaps between a worker's rows count as busy, as in ``top_ops``). TF's
    ``EagerExecute`` of a function is one; two executor ops running side by side are not, nor is a
    PyTorch op that merely overlaps the autograd thread's work."""
    if not host.size:
        return {}
    top = np.zeros(host.size, bool)
    leaf = np.zeros(host.size, bool)
    order = np.lexsort((-frame.end[host], frame.start[host], frame.thread_key[host]))
    threads = frame.thread_key[host[order]]
    bounds = np.flatnonzero(np.diff(threads)) + 1
    for part in np.split(order, bounds):
        start, end = frame.start[host[part]], frame.end[host[part]]
        reach = np.maximum.accumulate(end)  # the furthest end of this row and those before it
        top[part[1:]] = start[1:] >= reach[:-1]
        top[part[0]] = True
        leaf[part[:-1]] = start[1:] >= end[:-1]  # the next row on the thread starts after it ends
        leaf[part[-1]] = True
    compute = [OP_CLASSES.index(c) for c in COMPUTE_OP_CLASSES]
    # (framework ops only: a blocking runtime call is never one)
    calls = host[leaf & frame.mask("cpu_op")[host] & ~member_mask(classes.op[host], compute)
                 & member_mask(frame.thread_key[host], driving_threads(frame, host))]
    outer = host[top]
    outer = outer[np.argsort(frame.start[outer], kind="stable")]
    outer_start = frame.start[outer]
    lo = np.searchsorted(outer_start, frame.start[calls], "left")
    hi = np.searchsorted(outer_start, frame.end[calls], "left")
    found: dict[int, np.ndarray] = {}
    pipeline = input_pipeline_mask(frame)
    fetching = np.zeros(len(frame), bool)
    fetching[_pipeline_fetches(frame)] = True
    workers = worker_event_rows(frame)
    workers = workers[np.argsort(frame.start[workers], kind="stable")]
    worker_start = frame.start[workers]
    blocked_thread, blocked_start, blocked_end = blocked_on_dispatch(frame)
    by_start = np.argsort(blocked_start, kind="stable")
    blocked_thread, blocked_start, blocked_end = blocked_thread[by_start], blocked_start[by_start], blocked_end[by_start]
    for call, a, b in zip(calls.tolist(), lo.tolist(), hi.tolist(), strict=True):
        if b - a < 1:
            continue
        inside = outer[a:b]
        # Not tf.data's threads, its prefetching runs beside the call, but its fetch for the call's
        # function: the function's ops wait for it.
        inside = inside[(frame.thread_key[inside] != frame.thread_key[call]) & (frame.pid[inside] == frame.pid[call])
                        & (frame.end[inside] <= frame.end[call]) & (~pipeline[inside] | fetching[inside])]
        if not inside.size:
            continue
        # The workers are busy in their ops and in TF's runtime work around them (top_ops.TF_WORKER_EVENTS).
        w = workers[np.searchsorted(worker_start, frame.start[call]):np.searchsorted(worker_start, frame.end[call])]
        w = w[(frame.thread_key[w] != frame.thread_key[call]) & (frame.pid[w] == frame.pid[call])]
        busy = np.concatenate([inside, w])
        # ... and so is the call's thread while blocked on a TF function it dispatched (waiting.py).
        near = slice(np.searchsorted(blocked_start, frame.start[call]), np.searchsorted(blocked_start, frame.end[call], "right"))
        held = (blocked_thread[near] == frame.thread_key[call]) & (blocked_end[near] <= frame.end[call])
        starts = np.concatenate([frame.start[busy], blocked_start[near][held]])
        ends = np.concatenate([frame.end[busy], blocked_end[near][held]])
        if intervals.busy_per_interval(frame.start[[call]], frame.end[[call]], starts, ends,
                                       WORKER_GAP_SHARE)[0] >= WAITING_SHARE * frame.dur[call]:
            found[call] = inside
    return found


def _handoff_edges(g: _Graph, frame: Frame, handoffs: dict[int, np.ndarray]) -> None:
    """Each handed-off op depends on the last of them to end before it starts (the executor ran it
    when that one finished, on whichever thread), or on the call's dispatch when none did."""
    for call, ops in handoffs.items():
        by_end = ops[np.argsort(frame.end[ops], kind="stable")]
        before = np.searchsorted(frame.end[by_end], frame.start[ops], "right") - 1
        for op, i in zip(ops.tolist(), before.tolist(), strict=True):
            if i < 0:
                g.add(g.start(call), g.start(op), OPERATOR, call)
            else:
                g.add(g.end(int(by_end[i])), g.start(op), DEPENDENCY, -1)
        g.add(g.end(int(by_end[-1])), g.end(call), OPERATOR, call)


def _side_collectives(frame: Frame, host: np.ndarray, start: int, end: int) -> np.ndarray:
    """Collective ranges that start in the window on a thread that drives no step, in a process
    that does (gloo runs DDP's all-reduces on its own worker threads, as ``gloo:all_reduce``
    ranges), and are not already host rows of the graph."""
    rows = collectives_beside(frame, driving_threads(frame, host))
    in_graph = np.zeros(len(frame), bool)
    in_graph[host] = True
    keep = (frame.start[rows] >= start) & (frame.start[rows] <= end) & (frame.dur[rows] > 0) & ~in_graph[rows]
    return rows[keep]


def _collective_edges(g: _Graph, frame: Frame, host: np.ndarray, collectives: np.ndarray) -> None:
    """A collective on a worker thread: its duration (an operator edge), issued by the last
    communication op on a driving thread of its process that started before it (``c10d::allreduce_``
    enqueues the work), and waited for by the driving thread when that thread is idle as it ends
    (no host row of the thread covers the end): an edge into the next top-level row the thread runs.
    A thread busy with ops when the collective ends did not wait for it, and gets no edge."""
    if not collectives.size:
        return
    for row in collectives.tolist():
        g.add(g.start(row), g.end(row), OPERATOR, row)
    drivers = driving_threads(frame, host)
    talking = collective_rows(frame)
    for key in drivers.tolist():
        mine = host[frame.thread_key[host] == key]
        if not mine.size:
            continue
        pid = frame.pid[mine[0]]
        issued = talking[(frame.thread_key[talking] == key)]
        issued = issued[member_mask(issued, mine)]
        issued = issued[np.argsort(frame.start[issued], kind="stable")]
        by_start = mine[np.lexsort((-frame.end[mine], frame.start[mine]))]
        top = by_start[frame.start[by_start] >= np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(frame.end[by_start])[:-1]]]
        reach = np.maximum.accumulate(frame.end[by_start])  # furthest end of the thread's rows so far
        for row in collectives[frame.pid[collectives] == pid].tolist():
            i = int(np.searchsorted(frame.start[issued], frame.start[row], "right")) - 1
            if i >= 0:
                g.add(g.start(int(issued[i])), g.start(row), DEPENDENCY, -1)
            end = frame.end[row]
            j = int(np.searchsorted(frame.start[by_start], end, "left"))
            if j > 0 and reach[j - 1] > end:
                continue  # the thread was running something when it ended: no wait
            k = int(np.searchsorted(frame.start[top], end, "left"))
            if k < top.size:
                g.add(g.end(row), g.start(int(top[k])), DEPENDENCY, -1)


def _event_waits(frame: Frame, gpu: np.ndarray, g: _Graph) -> tuple[dict[int, int], list[tuple[int, int]]]:
    """CUDA-event dependencies from Kineto's sync records (``wait_on_cuda_event_record_corr_id``):
    a stream waiting on an event (cudaStreamWaitEvent: the next activity launched on the waiting
    stream depends on the last one launched on the recording stream before cudaEventRecord), and a
    host waiting on one (cudaEventSynchronize). Returns ({dest GPU row: source GPU row}, [(source
    GPU row, host call row)]), within the graph."""
    syncs = frame.rows("gpu_sync")
    if not syncs.size or not gpu.size:
        return {}, []
    launched_empty = np.zeros(0, np.int64)
    corr = frame.table.column("correlation_id").fill_null(-1).to_numpy()
    host_by_corr = {int(corr[r]): int(r) for r in frame.rows("runtime_api", "driver_api") if corr[r] >= 0}
    in_graph = set(gpu.tolist())
    # GPU activities per (device, stream), ordered by when their launch call started.
    per_stream: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for key in {(int(d), int(s)) for d, s in zip(frame.device[gpu], frame.stream[gpu], strict=True)}:
        on = gpu[(frame.device[gpu] == key[0]) & (frame.stream[gpu] == key[1])]
        order = np.argsort(frame.start[frame.launch_row[on]], kind="stable")
        per_stream[key] = (on[order], frame.start[frame.launch_row[on[order]]])
    waits: dict[int, int] = {}
    host_waits: list[tuple[int, int]] = []
    for row, info in _args_with(frame, syncs, "wait_on_cuda_event_record_corr_id"):
        record = host_by_corr.get(int(info["wait_on_cuda_event_record_corr_id"]))
        src_stream = info.get("wait_on_stream")
        caller = int(frame.launch_row[row])
        if record is None or src_stream is None or caller < 0 or caller not in g.index:
            continue
        src_rows, src_launched = per_stream.get((int(frame.device[row]), int(src_stream)), (gpu[:0], launched_empty))
        i = int(np.searchsorted(src_launched, frame.start[record], side="left")) - 1
        if i < 0:
            continue
        source = int(src_rows[i])  # the last launched on the recording stream before cudaEventRecord
        if frame.name(row) == "Stream Wait Event":
            dst_rows, dst_launched = per_stream.get((int(frame.device[row]), int(frame.stream[row])),
                                                    (gpu[:0], launched_empty))
            j = int(np.searchsorted(dst_launched, frame.start[caller], side="right"))
            if j < dst_rows.size:
                dest = int(dst_rows[j])  # the first launched on the waiting stream after cudaStreamWaitEvent
                if source in in_graph and dest in in_graph:
                    waits[dest] = source
        elif source in in_graph:
            host_waits.append((source, caller))  # Event Sync: the host call returns after the event
    return waits, host_waits


def _gpu_edges(g: _Graph, frame: Frame, gpu: np.ndarray, waits: dict[int, int]) -> None:
    key = frame.device[gpu].astype(np.int64) * (1 << 40) + frame.stream[gpu]
    for stream in np.unique(key):
        rows = gpu[key == stream]
        rows = rows[np.argsort(frame.start[rows], kind="stable")]
        launched = frame.start[frame.launch_row[rows]]
        previous: int | None = None
        for i, row in enumerate(rows.tolist()):
            if previous is not None and g.ts[g.start(row)] < g.ts[g.end(previous)]:
                # Two activities of one stream overlap (a record repeated, clocks off, or a kernel
                # launched for programmatic dependent launch starting in its predecessor's tail): the
                # path counts the overlap once, as the host walk does.
                g.ts[g.start(row)] = g.ts[g.end(previous)]
                g.ts[g.end(row)] = max(g.ts[g.end(row)], g.ts[g.start(row)])
            g.add(g.start(row), g.end(row), OPERATOR, row)
            launch = int(frame.launch_row[row])
            # A launch delay only when the stream's queue held nothing else (HTA's queue-length rule):
            # the previous activity had finished before this launch, and the next one was launched
            # after this one started.
            # A cross-stream wait (cudaStreamWaitEvent) is its own zero-weight edge; the launch or
            # kernel-kernel edge is kept only if the awaited work finished before it.
            source = waits.get(row)
            if source is not None:
                g.add(g.end(source), g.start(row), SYNC, -1)
            idle_before = previous is None or frame.end[previous] < frame.start[launch]
            alone = i + 1 == rows.size or launched[i + 1] >= frame.start[row]
            if idle_before and alone and (source is None or frame.end[source] < frame.start[launch]):
                g.add(g.start(launch), g.start(row), LAUNCH, row)
            elif (previous is not None and frame.start[row] - frame.end[previous] < KERNEL_KERNEL_DELAY_NS
                  and (source is None or frame.end[source] < frame.end[previous])):
                g.add(g.end(previous), g.start(row), KERNEL_KERNEL, row)
            previous = row


def _sync_edges(g: _Graph, frame: Frame, host: np.ndarray, gpu: np.ndarray) -> None:
    """A blocking call waits for the last GPU activity that finished before it returned."""
    if not gpu.size:
        return
    calls = np.intersect1d(host, host_blocking_rows(frame))
    order = gpu[np.argsort(frame.end[gpu], kind="stable")]
    ends = frame.end[order]
    for call in calls.tolist():
        i = int(np.searchsorted(ends, frame.end[call], side="right")) - 1
        while i >= 0 and frame.start[frame.launch_row[order[i]]] >= frame.start[call] and \
                frame.launch_row[order[i]] != call:
            i -= 1  # launched after the call began: not what it waited for
        if i >= 0:
            g.add(g.end(int(order[i])), g.end(call), SYNC, -1)


def inside_batch_fetches(frame: Frame) -> np.ndarray:
    """Per row: a batch fetch (``classify.data_loading_rows``: DataLoader __next__, IteratorGetNext)
    or an event inside one on its thread, such as the collate function's ops of a DataLoader
    without workers: all of it is the loop loading data, whatever each op computes."""
    out = np.zeros(len(frame), bool)
    # TF eager: the op is EagerExecute, named for what it runs (op_name_codes), around its fetch.
    ops = frame.rows("cpu_op")
    names = op_name_codes(frame)[ops]
    fetching_names = [c for c in distinct(names).tolist() if c >= 0 and DATA_LOADER.search(frame.names[c])]
    fetches = np.union1d(data_loading_rows(frame), ops[member_mask(names, fetching_names)])
    if not fetches.size:
        return out
    out[fetches] = True
    # Per thread, the fetches' outermost extents in time order; a row lies inside the last one
    # that starts at or before it on its thread, if that one ends at or after it.
    thread = frame.thread_key
    for key in np.unique(thread[fetches]).tolist():
        lo, hi = intervals.union(frame.start[fetches[thread[fetches] == key]], frame.end[fetches[thread[fetches] == key]])
        rows = np.flatnonzero(thread == key)
        k = np.searchsorted(lo, frame.start[rows], side="right") - 1
        inside = (k >= 0) & (frame.end[rows] <= hi[np.maximum(k, 0)])
        out[rows[inside]] = True
    return out


def _summarize(frame: Frame, classes, g: _Graph, path: list[int], window: dict[str, object]) -> CriticalPath:
    gpu_kinds = frame.mask(*GPU_KINDS)
    comm = KERNEL_CLASSES.index("communication")
    talking = np.zeros(len(frame), bool)
    talking[collective_work_rows(frame)] = True  # not NCCL's enqueue calls: those are host work
    op_names = op_name_codes(frame)
    cpu_compute = member_mask(classes.op, [OP_CLASSES.index(c) for c in COMPUTE_OP_CLASSES if c != "communication"])
    # An op whose work, or whose callees' work, runs on a GPU: its host time is dispatch and launches.
    owners = np.unique(frame.op_row[frame.rows(*GPU_KINDS)])
    owners = owners[owners >= 0]
    seen = np.zeros(len(frame), bool)
    while owners.size:
        seen[owners] = True
        owners = frame.op_parent[owners]
        owners = np.unique(owners[owners >= 0])
        owners = owners[~seen[owners]]  # stop where an earlier walk already went
    cpu_compute &= ~seen
    if not gpu_kinds.any():  # CPU-only: ops of no class doing long work of their own (a custom op) compute too
        cpu_compute[unclassified_work_rows(frame, frame.rows("cpu_op"))] = True
    fetching = inside_batch_fetches(frame)
    records = []
    for e in path:
        weight = int(g.w[e])
        if weight <= 0:
            continue
        kind, row = g.kind[e], g.event[e]
        name = frame.names[op_names[row]] if row >= 0 and op_names[row] >= 0 else ""
        if kind == LAUNCH:
            category = "gpu_kernel_launch_overhead"
        elif kind == KERNEL_KERNEL:
            category = "gpu_kernel_kernel_overhead"
        elif row >= 0 and gpu_kinds[row]:
            category = "gpu_communication_bound" if classes.kernel[row] == comm else "gpu_compute_bound"
        elif row >= 0 and fetching[row]:
            category = "data_loading"
        elif row >= 0 and talking[row]:
            category = "cpu_communication_bound"
        else:
            category = "cpu_bound"
        records.append({"row": row, "name": name, "kind": KINDS[int(frame.kind[row])] if row >= 0 else "",
                        "category": category, "cpu_compute": category == "cpu_bound" and row >= 0 and bool(cpu_compute[row]),
                        "start_ns": int(g.ts[g.src[e]]), "weight_ns": weight})
    edges = pd.DataFrame.from_records(records, columns=["row", "name", "kind", "category", "cpu_compute", "start_ns",
                                                       "weight_ns"])
    total = int(edges.weight_ns.sum()) if len(edges) else 0
    by = edges.groupby("category").weight_ns.sum() if len(edges) else pd.Series(dtype=float)
    shares = {c: (100 * float(by.get(c, 0)) / total if total else 0.0) for c in CATEGORIES}
    top = (edges.groupby(["name", "category", "cpu_compute"], as_index=False).weight_ns.sum()
           .sort_values("weight_ns", ascending=False).head(15).reset_index(drop=True)) if len(edges) else \
        pd.DataFrame(columns=["name", "category", "cpu_compute", "weight_ns"])
    top["share"] = 100 * top.weight_ns / total if total else 0.0
    cpu_compute_ns = int(edges.weight_ns[edges.cpu_compute.astype(bool)].sum()) if len(edges) else 0
    return CriticalPath(window, total, shares, edges, top, int(g.ts.size), len(g.src), cpu_compute_ns=cpu_compute_ns)
