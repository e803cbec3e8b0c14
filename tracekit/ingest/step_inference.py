"""Steps for traces that mark none: the repeated calls of one host range that hold the loop.

torch.profiler writes ``ProfilerStep#N`` only when given a schedule, TF and JAX only for a TraceMe
given ``step_num`` (or Keras's per-batch function). Many programs still wrap each iteration in a
range of their own (``record_function("train_step")``, ``f"iteration {i}"``, an NVTX range pushed
around each iteration, as NVIDIA's guides advise, ``tf.profiler.experimental.Trace("train")``), or
call one ``tf.function`` / jitted function per iteration. When a PyTorch Kineto trace, an Nsight
Systems trace or a TF/JAX XSpace (or trace-viewer JSON) has no step rows, the calls of one range
become its steps, where the evidence says they are a loop's iterations (tracekit's Kineto export
of a trace keeps that trace's steps). Without them a verdict reads the whole capture, start-up
included: the public Keras Darknet-53 nsys trace holds two calls of its ``Forward:Model`` range, a
first of 3.67 s (cuDNN handle creation, the convolution autotuner's trial kernels) and a steady
one of 48 ms.

* one range name (or one name up to its numbers, ``iteration 3``, when every call's numbers differ
  and grow in time order: ``layer_0`` .. ``layer_11`` repeated per iteration are not iterations),
  called at least twice, every call on one thread, one after the other (never one inside another);
* between the first call's start and the last call's end (the loop), the calls hold at least
  ``MIN_COVER`` of the process's host work (ops and GPU API calls, on any of its threads: TF and
  PyTorch's autograd work on threads of their own): a range around the forward pass alone, or the
  data loading, does not; and the loop holds at least ``MIN_LOOP`` of all of it (not two calls of a
  setup routine at the start);
* where the trace has GPU kernels, the same two shares of the kernel time, by when each kernel's
  launch call starts: a range around setup work (moving the model to the GPU) launches none;
* the calls, with the events their thread records between them (a DataLoader's ``__next__``),
  cover at least ``MIN_WALL`` of the loop's wall time: work is only what the profiler traced, and
  an nsys capture without CPU sampling traces nothing of the Python between the calls of a range
  around one op;
* not a range the framework records itself (the optimizer's step, a DataLoader's ``__next__``,
  collectives, the per-op NVTX ranges of ``torch.autograd.profiler.emit_nvtx``; XLA/PjRt's execution,
  buffer and wait ranges, tf.data's, an XLA while loop's ``[iter=N]``);
* only a name's outermost calls count: TF names the TraceMe of a ``tf.function`` call after the
  Python function, so ``Trace("train_step")`` around ``train_step(x, y)`` nests one call in another.

Among several such names the one holding most of the work wins (then the one with more calls).

A PyTorch training loop with no such range still marks its iterations: torch.optim records each
optimizer step as a range (``Optimizer.step#SGD.step``). Where no range qualifies, each iteration
ends where an optimizer step ends (the first starts at the loop thread's first event and holds the
start-up), provided the calls are one thread's, one after another, with each optimizer stepped once
per round; no top-level row of that thread spans the end of an iteration (a range around the whole
loop: the iterations would not nest in it); the iterations hold ``MIN_COVER`` of the process's host
work (and of the kernel time); and their op counts show a loop (``_period``: two optimizers of one
class stepped in turn whose rounds differ, a GAN's, are one iteration every two calls, where the
rounds alternate in the ops inside the optimizer calls or in their backward passes: an evaluation
pass every other iteration alternates the op counts of one optimizer's rounds, not those). Each
iteration becomes a step row appended to the table (``Iteration#k`` on the loop's thread, category
``tracekit:inferred_step``: no profiler wrote it), the thread's top-level rows inside it its children.
Where neither qualifies, a loop fed batch by batch (a DataLoader's ``__next__``, an eager tf.data
``IteratorGetNext``: a PyTorch inference loop, a TF custom loop run eagerly, Keras's
``fit(run_eagerly=True)``) runs each iteration from one fetch to the next (``_fetch_iterations``), on
the same evidence: one thread's fetches back to back, three or more; the iterations' op counts
regular; no top-level row spanning a bound; the iterations holding ``MIN_COVER`` of the process's host
work. Where none of those qualifies either, a range whose calls held too little of the work to be the
steps (a jitted JAX function returns once its step is dispatched, and XLA's threads run the ops after
it) cuts the iterations from one call's start to the next, on the same evidence
(``_dispatch_iterations``): a loop that waits for each step's result holds the step's ops between two
calls; one whose dispatches run ahead of the work (Keras's fit on the JAX backend: 0 to 296 ops
between calls, then 3,283 after the last) fails the op-count check and keeps no steps. Windows whose
ops alternate with a period of 2-4 (Keras's predict per call fetches its batch,
then finds the data exhausted) make one iteration per period. The last fetch begins one more iteration
where no fetch ends it (Keras's fit knows its batch count): it ends with the loop thread's last row when
that stretch runs about as many ops as an iteration (``TAIL_OPS``). Before this, an eager TF loop read
the whole capture, its pipeline's building included.
The trace's metadata says where its steps came from (``steps_from``), as for Keras's per-batch
function in XSpace traces, and every report repeats it, with the share of the loop's work that runs
between the calls (a batch fetched outside the range is outside every step, unlike ProfilerStep#N,
which runs from one ``prof.step()`` to the next).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from tracekit import schema
from tracekit.ingest import columns, links

MIN_CALLS = 2
MIN_COVER = 0.8
MIN_LOOP = 0.5
MIN_WALL = 0.5
MAX_CANDIDATES = 16  # range names tried, those with the most time in their calls first
# torch.optim records each optimizer step as a range: with no iteration range, a training loop's
# iterations end where its optimizer steps end.
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#\w+\.step$")
INFERRED_CATEGORY = "tracekit:inferred_step"  # the category of the step rows made here (not in the trace)
# A batch fetched by a DataLoader or an eager tf.data iterator: with no iteration range and no
# optimizer step, a loop fed batch by batch runs from one fetch to the next.
BATCH_FETCH = re.compile(r"DataLoader.*__next__$|^EagerLocalExecute: IteratorGetNext(Sync|AsOptional)?$")
# Ranges PyTorch and its libraries record on their own: never a user's iteration.
FRAMEWORK_RANGES = re.compile(r"^(Optimizer\.|enumerate\(DataLoader\)|DataLoader|## |autograd::|nccl:|gloo:|c10d::|"
                              r"record_param_comms|ProfilerStep|PyTorch Profiler|Torch-Compiled Region|"
                              r"CompiledFunction|cuda(Graph|Stream|Device|Event))|"
                              r"^aten::|, seq = \d+|, sizes = \[")  # emit_nvtx: "aten::addmm, seq = 12, sizes = [...]"
# TensorFlow's and XLA/PjRt's own TraceMe ranges (XSpace gives them the kind of a user's range): a
# jitted program's execution, the runtime's waits and buffers, tf.data, an XLA while loop's
# ``[iter=N]``. Each wraps every jitted call or loop trip, so a loop's work can lie in them.
RUNTIME_RANGES = re.compile(r"Executable|ExecuteThunks|ExecuteHelper|ThunkExecutor|PjRt|PJRT_|command_buffer|"
                            r"^Wait for |Semaphore|^\[iter=\d+\]$|^(Make)?Iterator::|^MapAndBatch|graph_building|"
                            r"XLA \w+ module|^Handle input|^ParseArguments$|^AllocateOutputBuffers|RefManager::|"
                            r"^LocalDeviceState::|^TaskDispatcher::|^Thunks::|^BUFFER_FLUSH$|^Resolve constant globals$|"
                            r"^Build buffer allocations$|^<UNKNOWN>$|^cu[A-Z]\w+$")  # cuLaunchHostFunc: a CUDA call
_NUMBER = re.compile(r"\d+")
WORK_KINDS = ("cpu_op", "runtime_api", "driver_api")
INFERRED_SOURCES = (b"torch", b"nsys", b"tf", b"jax", b"onnxruntime", b"paddle")
# What the inference reads and writes: a load that leaves any of them out (null) keeps the trace as read.
COLUMNS_NEEDED = frozenset({"kind", "name", "start_ns", "dur_ns", "pid", "tid", "launch_row", "step"})


def infer_steps(table: pa.Table) -> pa.Table:
    """``table`` with the calls of its iteration range made steps (see the module doc), or unchanged."""
    if table.num_rows == 0 or (table.schema.metadata or {}).get(schema.META_SOURCE.encode()) not in INFERRED_SOURCES:
        return table  # tracekit's Kineto export of an nsys, TF or JAX trace keeps that trace's steps
    kind = columns.kind_codes(table.column("kind"))
    if (kind == schema.KIND_CODES["step"]).any():
        return table
    ranges = np.flatnonzero(kind == schema.KIND_CODES["user_range"])
    names = _dictionary_values(table.column("name"))
    fetch_codes = [c for c, n in enumerate(names) if BATCH_FETCH.search(n)]
    if ranges.size < MIN_CALLS and not fetch_codes:
        return table
    start = _int64(table.column("start_ns"))
    name_code, name_valid = columns.values_and_validity(_unified(table.column("name")))
    end = start + np.maximum(_int64(table.column("dur_ns")), 0)
    parent = np.where(*_valid_or(table.column("parent"), -1))
    candidates = _candidates(ranges[name_valid[ranges]], name_code, names, start, end, parent)
    torch_trace = (table.schema.metadata or {}).get(schema.META_SOURCE.encode()) == b"torch"
    optimizer = ranges[name_valid[ranges]] if torch_trace else ranges[:0]
    optimizer = optimizer[_named(name_code[optimizer], names, OPTIMIZER_STEP)]
    fetches = np.flatnonzero(name_valid & links.member_mask(name_code, fetch_codes)) if fetch_codes else ranges[:0]
    if not candidates and optimizer.size < MIN_CALLS and fetches.size <= MIN_CALLS:
        return table
    thread, pid = _thread_keys(table), _int64(table.column("pid"))
    work = np.flatnonzero(links.kind_mask(kind, *WORK_KINDS))
    kernels = np.flatnonzero(kind == schema.KIND_CODES["gpu_kernel"])
    launch_row = np.where(*_valid_or(table.column("launch_row"), -1))
    best: tuple[float, int, str, np.ndarray] | None = None
    untraced: tuple[str, int, float] | None = None  # a range holding the work, its loop mostly untraced
    dispatches: list[tuple[str, np.ndarray]] = []  # one thread's calls in turn that hold too little of the work
    pieces: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # each process's busy pieces, made once
    # The loop's range holds most of the capture: it is among the names with the most time in calls.
    candidates.sort(key=lambda c: -int((end[c[1]] - start[c[1]]).sum()))
    for label, calls in candidates[:MAX_CANDIDATES]:
        if (thread[calls] != thread[calls[0]]).any() or (start[calls[1:]] < end[calls[:-1]]).any():
            continue  # not one thread's back-to-back iterations
        process = int(pid[calls[0]])
        if process not in pieces:
            pieces[process] = _busy_pieces(work[pid[work] == process], thread, start, end)
        cover = _iteration_cover(pieces[process], start[calls], end[calls])
        if kernels.size:
            cover = min(cover, _kernel_cover(kernels, launch_row, start, end, start[calls], end[calls]))
        if cover < MIN_COVER:
            dispatches.append((label, calls))
            continue
        if best is not None and (cover, calls.size) <= (best[0], best[1]):
            continue
        traced = _traced_share(thread, start, end, calls)
        if traced >= MIN_WALL:
            best = (cover, calls.size, label, calls)
        elif untraced is None:
            untraced = (label, int(calls.size), traced)
    if best is None:
        structural = _structural_parent(kind, parent)
        inferred = (_optimizer_iterations(table, kind, start, end, parent, structural, thread, pid, work, kernels,
                                          launch_row, name_code, names, optimizer)
                    or _fetch_iterations(table, kind, start, end, parent, structural, thread, pid, work, kernels,
                                         launch_row, name_code, names, fetches)
                    or _dispatch_iterations(table, kind, start, end, parent, structural, thread, pid, work, kernels,
                                            launch_row, name_code, names, dispatches))
        if inferred is None and untraced is not None:
            # Said, so that a report does not advise wrapping each iteration in the range it already has.
            label, n, traced = untraced
            return columns.with_extra(table, steps_not_inferred=(
                f"the {n} calls of {label} hold the loop's work, but they and what the profiler traced between them "
                f"cover {traced:.0%} of the loop's time, under {MIN_WALL:.0%}: the rest, between the calls, is untraced "
                "(Python, an environment's step, I/O), and steps taken from them would leave it out"))
        return inferred or table
    outside = 1.0 - best[0]
    between = f"; {outside:.0%} of the loop's work runs between the calls, outside every step" if outside >= 0.01 else ""
    return _with_steps(table, kind, start, end, best[3], f"calls of {best[2]} (no step markers in the trace{between})")


def _candidates(ranges: np.ndarray, name_code: np.ndarray, names: list[str], start: np.ndarray, end: np.ndarray,
                parent: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """(label, calls in time order) of each range name called at least MIN_CALLS times (its outermost
    calls: a range inside a call of the same name is part of that call), and of each family of numbered
    names (``iteration 1``, ``iteration 2``: label ``iteration #``) whose numbers differ from call to
    call and grow in time order."""
    codes, index = columns.factorize(name_code[ranges])  # not np.unique: its numpy.ma import is start-up time
    counts = np.bincount(index, minlength=codes.size)
    out: list[tuple[str, np.ndarray]] = []
    families: dict[str, list[int]] = {}
    for code, count in zip(codes.tolist(), counts.tolist(), strict=True):
        name = names[code]
        if FRAMEWORK_RANGES.search(name) or RUNTIME_RANGES.search(name):
            continue
        if count >= MIN_CALLS:
            calls = _outermost(_in_time_order(ranges[name_code[ranges] == code], start), start, end, parent)
            if calls.size >= MIN_CALLS:
                out.append((name, calls))
        if _NUMBER.search(name):
            families.setdefault(_NUMBER.sub("#", name), []).append(code)
    for label, family in families.items():
        calls = _in_time_order(ranges[np.isin(name_code[ranges], family)], start)
        if calls.size < MIN_CALLS or len(family) < calls.size:  # a number shared by two calls
            continue
        numbers = [tuple(int(d) for d in _NUMBER.findall(names[c])) for c in name_code[calls].tolist()]
        if all(a < b for a, b in zip(numbers[:-1], numbers[1:], strict=True)):
            out.append((label, calls))
    return out


def _in_time_order(rows: np.ndarray, start: np.ndarray) -> np.ndarray:
    return rows[np.argsort(start[rows], kind="stable")]


def _outermost(calls: np.ndarray, start: np.ndarray, end: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """The calls (in time order) not inside another of them in the row tree: a TF program's
    ``Trace("train_step")`` around its ``tf.function`` train_step, whose call TraceMe carries the same
    name, or a recursive range."""
    if calls.size < 2 or not (start[calls[1:]] < np.maximum.accumulate(end[calls])[:-1]).any():
        return calls  # none starts before an earlier one ends: none is inside another
    wanted = np.zeros(parent.size, bool)
    wanted[calls] = True
    return calls[links.nearest_ancestor(parent, calls, wanted) < 0]


def _structural_parent(kind: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Each row's nearest ancestor that is not a Python frame (-1: none). A trace with Python stacks
    (torch.profiler's with_stack, JAX's default) nests the loop's ops and ranges in the frames of the
    functions that run the loop, which span every iteration: the loop's structure is what is left
    without them (with them a training loop's iterations went unfound: every bound fell inside
    ``_inner_training_loop``'s frame)."""
    python = kind == schema.KIND_CODES["python_function"]
    if not python.any():
        return parent
    return links.nearest_ancestor(parent, np.arange(parent.size), ~python)


def _top_level(kind: np.ndarray, structural: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Of ``rows``, those with no ancestor but Python frames, Python frames left out: the rows an
    iteration bound must not fall inside."""
    return rows[(structural[rows] < 0) & (kind[rows] != schema.KIND_CODES["python_function"])]


def _busy_pieces(rows: np.ndarray, thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows' busy time as disjoint pieces per thread (a thread's nested calls counted once)."""
    pieces_s, pieces_e = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for key in columns.distinct(thread[rows]).tolist():
        mine = rows[thread[rows] == key]
        s, e = _union(start[mine], end[mine])
        pieces_s.append(s)
        pieces_e.append(e)
    return np.concatenate(pieces_s), np.concatenate(pieces_e)


def _iteration_cover(pieces: tuple[np.ndarray, np.ndarray], call_start: np.ndarray, call_end: np.ndarray) -> float:
    """How much the calls (disjoint, in time order) hold of the work ``pieces``: the share of the
    work inside the loop (first call's start to last call's end) that lies inside the calls; 0 when
    the loop holds under MIN_LOOP of all the work, or there is none."""
    s, e = pieces
    in_loop = _overlap(s, e, call_start[:1], call_end[-1:])
    if in_loop <= 0 or in_loop < MIN_LOOP * int((e - s).sum()):
        return 0.0
    return _overlap(s, e, call_start, call_end) / in_loop


def _traced_share(thread: np.ndarray, start: np.ndarray, end: np.ndarray, calls: np.ndarray) -> float:
    """The share of the loop's wall time (first call's start to last call's end) that its thread's
    events cover: the calls, and whatever the profiler traced between them (a DataLoader's
    ``__next__``); untraced Python between the calls is not covered."""
    lo, hi = int(start[calls[0]]), int(end[calls[-1]])
    if hi <= lo:
        return 0.0
    mine = np.flatnonzero((thread == thread[calls[0]]) & (end > lo) & (start < hi))
    s, e = _union(np.maximum(start[mine], lo), np.minimum(end[mine], hi))
    return int((e - s).sum()) / (hi - lo)


def _kernel_cover(kernels: np.ndarray, launch_row: np.ndarray, start: np.ndarray, end: np.ndarray,
                  call_start: np.ndarray, call_end: np.ndarray) -> float:
    """``_iteration_cover`` of the kernel time, each kernel placed at its launch call's start (a
    kernel with no linked launch lies outside every loop)."""
    weight = end[kernels] - start[kernels]
    total = int(weight.sum())
    if total <= 0:
        return 1.0  # no kernel time to hold
    linked = launch_row[kernels] >= 0
    at, weight = start[launch_row[kernels[linked]]], weight[linked]
    in_loop = int(weight[(at >= call_start[0]) & (at < call_end[-1])].sum())
    if in_loop <= 0 or in_loop < MIN_LOOP * total:
        return 0.0
    k = np.searchsorted(call_start, at, side="right") - 1
    held = (k >= 0) & (at < call_end[np.maximum(k, 0)])
    return int(weight[held].sum()) / in_loop


# The interval arithmetic the readers need is here: the ingest layer does not import the analyses'
# (tracekit.analyze.intervals; tests/test_layers.py).
def _overlap(s: np.ndarray, e: np.ndarray, win_s: np.ndarray, win_e: np.ndarray) -> int:
    """Time of the pieces (s, e) inside the windows (disjoint, in time order): window time before
    each piece's end less window time before its start."""
    cum = np.concatenate([[0], np.cumsum(win_e - win_s)])

    def before(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(win_s, t, side="right")  # windows starting at or before t
        last = np.maximum(i - 1, 0)
        return np.where(i > 0, cum[last] + np.clip(t - win_s[last], 0, win_e[last] - win_s[last]), 0)

    return int((before(e) - before(s)).sum())


def _union(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted cover of the intervals (non-empty)."""
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    run_end = np.maximum.accumulate(e)
    first = np.flatnonzero(np.concatenate([[True], s[1:] > run_end[:-1]]))
    return s[first], run_end[np.append(first[1:] - 1, s.size - 1)]


def _named(codes: np.ndarray, names: list[str], pattern: re.Pattern[str]) -> np.ndarray:
    """Per code: whether its name matches ``pattern`` (each distinct name tested once)."""
    matching = [c for c in columns.distinct(codes).tolist() if 0 <= c < len(names) and pattern.search(names[c])]
    return links.member_mask(codes, matching)  # not np.isin: it imports numpy.ma, start-up time of `info`


def _optimizer_iterations(table: pa.Table, kind: np.ndarray, start: np.ndarray, end: np.ndarray, parent: np.ndarray,
                          structural: np.ndarray, thread: np.ndarray, pid: np.ndarray, work: np.ndarray, kernels: np.ndarray,
                          launch_row: np.ndarray, name_code: np.ndarray, names: list[str],
                          calls: np.ndarray) -> pa.Table | None:
    """The table with one step per training iteration, each ending where an optimizer step ends, or
    None when the calls do not show iterations (the module doc's last paragraph). ``structural``: each
    row's nearest ancestor that is not a Python frame (``_structural_parent``)."""
    calls = _outermost(_in_time_order(calls, start), start, end, structural)
    if calls.size < MIN_CALLS or (thread[calls] != thread[calls[0]]).any() or (start[calls[1:]] < end[calls[:-1]]).any():
        return None
    optimizers = columns.distinct(name_code[calls]).size
    rounds = calls.reshape(-1, optimizers) if calls.size % optimizers == 0 else None
    if rounds is None or any(columns.distinct(name_code[r]).size != optimizers for r in rounds):
        return None  # several optimizers, not stepped once each per round
    loop_thread, process = int(thread[calls[0]]), int(pid[calls[0]])
    own = np.flatnonzero((thread == loop_thread) & links.kind_mask(kind, *WORK_KINDS, "user_range"))
    bounds = end[rounds[:, -1]]
    first = int(start[own].min()) if own.size else int(start[calls[0]])
    ops = np.flatnonzero((kind == schema.KIND_CODES["cpu_op"]) & (pid == process))
    window_of_op = np.searchsorted(bounds, start[ops], side="left")
    period = _period(window_of_op, bounds.size, lambda p: any(  # asked at most once, where counts suggest p
        _alternate(sign, p) for sign in _round_signatures(rounds, start, end, ops, window_of_op, name_code, names)))
    if period is None:
        return None
    bounds = bounds[period - 1::period]
    win_s, win_e = np.concatenate([[first], bounds[:-1]]), bounds
    if win_s.size < MIN_CALLS:
        return None
    # Top-level rows of the loop's thread nest in the iteration that holds them; none may span a bound
    # (a range around the whole loop: the iterations would not nest in it).
    nested = np.flatnonzero((thread == loop_thread) & links.kind_mask(kind, *links.NESTED_KINDS))
    top = _top_level(kind, structural, nested)
    inner = bounds[:-1]
    if (np.searchsorted(inner, end[top], side="left") > np.searchsorted(inner, start[top], side="right")).any():
        return None  # a bound strictly inside a top-level row
    pieces = _busy_pieces(work[pid[work] == process], thread, start, end)
    if _iteration_cover(pieces, win_s, win_e) < MIN_COVER:
        return None
    if kernels.size and _kernel_cover(kernels, launch_row, start, end, win_s, win_e) < MIN_COVER:
        return None
    label = " and ".join(sorted({names[c] for c in name_code[rounds[0]].tolist()}))
    each = "" if period == 1 else f", {period} calls an iteration (optimizers of one class stepped in turn)"
    return _with_iteration_rows(table, kind, start, end, parent, nested, win_s, win_e, int(calls[0]),
                                f"training iterations ending with {label}{each} (no step markers in the trace)")


def _dispatch_iterations(table: pa.Table, kind: np.ndarray, start: np.ndarray, end: np.ndarray, parent: np.ndarray,
                         structural: np.ndarray, thread: np.ndarray, pid: np.ndarray, work: np.ndarray,
                         kernels: np.ndarray, launch_row: np.ndarray, name_code: np.ndarray, names: list[str],
                         dispatches: list[tuple[str, np.ndarray]]) -> pa.Table | None:
    """The table with one step per iteration from one call of a range to the next, for the first range
    (most time in its calls first) whose calls held too little of the work to be the steps themselves
    but whose iterations, so cut, pass ``_fetch_iterations``'s checks. A jitted JAX function returns
    once its step is dispatched and XLA's threads run the ops after it: in a loop that blocks on each
    result (``tests/data/jax/jit_loop_async``) the ``PjitFunction(train_step)`` calls hold none of the
    work, and their starts bound the iterations; where the dispatches run ahead of the work (Keras's fit
    on the JAX backend) the op counts between calls are irregular and no steps are made. Only where
    other threads do most of the work between the first call and the last (``MIN_LOOP``). Tried last,
    where no range, optimizer step or batch fetch gave the steps."""
    for label, calls in dispatches:
        # The work runs elsewhere: a range whose own thread does most of the loop's work (a per-layer
        # range of a PyTorch loop, ``layer_0``) is not a dispatch, whatever its calls hold.
        process = pid[calls[0]]
        mine = work[(pid[work] == process) & (thread[work] == thread[calls[0]])]
        loop_s, loop_e = start[calls[:1]], end[calls[-1:]]
        all_work = _overlap(*_busy_pieces(work[pid[work] == process], thread, start, end), loop_s, loop_e)
        if not all_work or _overlap(*_busy_pieces(mine, thread, start, end), loop_s, loop_e) >= MIN_LOOP * all_work:
            continue
        found = _fetch_iterations(table, kind, start, end, parent, structural, thread, pid, work, kernels, launch_row,
                                  name_code, names, calls, f"iterations from one call of {label} to the next (its "
                                  "calls return before their work is done; no step markers in the trace)")
        if found is not None:
            return found
    return None


def _fetch_iterations(table: pa.Table, kind: np.ndarray, start: np.ndarray, end: np.ndarray, parent: np.ndarray,
                      structural: np.ndarray, thread: np.ndarray, pid: np.ndarray, work: np.ndarray, kernels: np.ndarray,
                      launch_row: np.ndarray, name_code: np.ndarray, names: list[str],
                      fetches: np.ndarray, described: str = "") -> pa.Table | None:
    """The table with one step per iteration of a loop fed batch by batch, each from one batch fetch to
    the next (the last fetch ends the last iteration: a loop's final fetch finds the data exhausted, or
    the capture stops inside an iteration, which is left out), or None when the fetches do not show a
    loop: one thread's, one after another, three or more; no top-level row of that thread spanning a
    bound; the iterations' op counts regular (``IRREGULAR_CV``, the first left out: it holds the warm-up);
    the iterations holding ``MIN_COVER`` of the process's host work (and of the kernel time)."""
    if fetches.size <= MIN_CALLS:
        return None
    calls = _outermost(_in_time_order(fetches, start), start, end, structural)
    roots = calls.copy()  # each fetch's outermost row: where its iteration begins
    while (structural[roots] >= 0).any():
        roots = np.where(structural[roots] >= 0, structural[roots], roots)
    if roots.size <= MIN_CALLS or (thread[roots] != thread[roots[0]]).any() or (start[roots[1:]] < end[roots[:-1]]).any():
        return None
    loop_thread, process = int(thread[roots[0]]), int(pid[roots[0]])
    bounds = start[roots]
    ops = np.flatnonzero((kind == schema.KIND_CODES["cpu_op"]) & (pid == process))
    window_of_op = np.searchsorted(bounds, start[ops], side="right") - 1
    window_of_op[window_of_op < 0] = bounds.size  # before the first fetch: in no window
    windows = bounds.size - 1
    # Several fetches an iteration (Keras's predict per call fetches its batch, then finds the data
    # exhausted): the windows' op names alternate with that period.
    signature = _window_signature(window_of_op, windows, name_code[ops])
    # _period tries the periods that divide the windows it is given: a multiple of 4 lets it try 2 and 4.
    judged = windows - windows % 4 if windows >= 8 else windows
    period = _period(window_of_op, judged, lambda p: _alternate(signature[:judged], p))
    if period is None:
        return None
    bounds = bounds[::period]
    win_s, win_e = bounds[:-1], bounds[1:]
    if win_s.size < MIN_CALLS:
        return None
    nested = np.flatnonzero((thread == loop_thread) & links.kind_mask(kind, *links.NESTED_KINDS))
    top = _top_level(kind, structural, nested)
    # The last fetch begins one more iteration where no fetch ends it (Keras's fit knows its batch count
    # and never finds the data exhausted): it ends with the loop thread's last top-level row, when that
    # stretch runs about as many ops as an iteration (an exhausted fetch's stretch runs next to none).
    tail_end = int(end[top].max()) if top.size else int(bounds[-1])
    # Ops per window from each bound (the last: everything after it); ops before the first bound, in slot 0, dropped.
    counts = np.bincount(np.searchsorted(bounds, start[ops], side="right"), minlength=bounds.size + 1)[1:]
    tail_ops = int(((start[ops] >= bounds[-1]) & (start[ops] < tail_end)).sum())
    typical = float(np.median(counts[1:-1])) if counts.size > 2 else 0.0
    if typical and TAIL_OPS[0] * typical <= tail_ops <= TAIL_OPS[1] * typical:
        win_s, win_e = np.append(win_s, bounds[-1]), np.append(win_e, tail_end)
    inner = bounds[1:-1]
    if (np.searchsorted(inner, end[top], side="left") > np.searchsorted(inner, start[top], side="right")).any():
        return None  # a bound strictly inside a top-level row: a range around the whole loop
    pieces = _busy_pieces(work[pid[work] == process], thread, start, end)
    if _iteration_cover(pieces, win_s, win_e) < MIN_COVER:
        return None
    if kernels.size and _kernel_cover(kernels, launch_row, start, end, win_s, win_e) < MIN_COVER:
        return None
    label = " and ".join(sorted({names[c] for c in name_code[calls].tolist()}))
    return _with_iteration_rows(table, kind, start, end, parent, nested, win_s, win_e, int(roots[0]), described or
                                f"iterations from one batch fetch ({label}) to the next (no step markers in the trace)")


# Iterations of one loop record about the same ops: beyond this spread of their op counts
# (coefficient of variation), even the best grouping of optimizer rounds shows no loop.
IRREGULAR_CV = 0.5


def _period(window_of_op: np.ndarray, bounds: int, alternate: Callable[[int], bool]) -> int | None:
    """How many optimizer rounds make one iteration: 1, unless grouping p rounds (2-4, dividing the
    rounds) makes the op counts of the iterations after the first (which holds the warm-up) agree
    clearly better (half the spread or less) and the rounds ``alternate`` with period p (their
    signatures: ``_round_signatures``): two optimizers of one class stepped in turn, a GAN's; not one
    optimizer in a loop that runs an evaluation pass every other iteration. None where no grouping
    shows a regular loop."""
    counts = np.bincount(window_of_op[window_of_op < bounds], minlength=bounds)

    def spread(p: int) -> float:
        merged = counts.reshape(-1, p).sum(axis=1)[1:]
        mean = float(merged.mean()) if merged.size else 0.0
        return float(merged.std()) / mean if mean > 0 else float("inf")

    one = spread(1)
    best = min(((spread(p), p) for p in (2, 3, 4) if bounds % p == 0 and bounds // p >= 2), default=(float("inf"), 0))
    chosen = best if best[0] < one / 2 and alternate(best[1]) else (one, 1)
    return chosen[1] if chosen[0] <= IRREGULAR_CV else None


# Backward ops: a round's backward pass is its loss's graph (the autograd engine's ops run on
# threads of their own on a GPU, the loop's thread on a CPU).
BACKWARD_OP = re.compile(r"^autograd::engine::evaluate_function: |Backward\d*$")


def _round_signatures(rounds: np.ndarray, start: np.ndarray, end: np.ndarray, ops: np.ndarray,
                      window_of_op: np.ndarray, name_code: np.ndarray, names: list[str]) -> list[np.ndarray]:
    """Two signatures of each optimizer round, which tell two optimizers of one class apart and one
    optimizer's rounds alike whatever else its loop runs between them (an evaluation pass every other
    iteration): the multiset of op names inside its optimizer calls (a per-parameter update runs ops
    per parameter), and that of the backward ops in its window (each optimizer's loss has a graph of
    its own: a GAN's generator round backpropagates through both networks, its discriminator round
    through one). A sum of name hashes stands for a multiset."""
    code = name_code[ops]
    hashes = _name_hashes(code)
    order = np.argsort(start[ops], kind="stable")
    before = np.concatenate([np.zeros(1, np.uint64), np.cumsum(hashes[order], dtype=np.uint64)])
    calls = rounds.ravel()
    lo = np.searchsorted(start[ops][order], start[calls], "left")
    hi = np.searchsorted(start[ops][order], end[calls], "left")
    inside_calls = (before[hi] - before[lo]).reshape(rounds.shape).sum(axis=1, dtype=np.uint64)
    backward = _named(code, names, BACKWARD_OP) & (window_of_op < rounds.shape[0])
    backward_ops = np.zeros(rounds.shape[0], np.uint64)
    np.add.at(backward_ops, window_of_op[backward], hashes[backward])
    return [inside_calls, backward_ops]


def _name_hashes(codes: np.ndarray) -> np.ndarray:
    """A hash per name code whose sums stand for multisets of names (odd: distinct codes, distinct hashes)."""
    return (codes.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)


# The stretch after the last fetch is an iteration when it runs this share of a typical one's ops.
TAIL_OPS = (0.7, 1.3)


def _window_signature(window_of_op: np.ndarray, windows: int, codes: np.ndarray) -> np.ndarray:
    """Per window, the multiset of its ops' names (a sum of ``_name_hashes``, as ``_round_signatures``)."""
    out = np.zeros(windows, np.uint64)
    inside = window_of_op < windows
    np.add.at(out, window_of_op[inside], _name_hashes(codes[inside]))
    return out


def _alternate(signature: np.ndarray, p: int) -> bool:
    """Whether rounds ``p`` apart have one signature and the p phases p different ones, over the
    rounds after each phase's first (an optimizer's first step makes its state; the first round
    holds the loop's start-up), with two rounds of each phase at least."""
    rest = signature[p:]
    if rest.size < 2 * p:
        return False
    kinds = [np.unique(rest[j::p]) for j in range(p)]
    return all(k.size == 1 for k in kinds) and np.unique(np.concatenate(kinds)).size == p


def _with_iteration_rows(table: pa.Table, kind: np.ndarray, start: np.ndarray, end: np.ndarray, parent: np.ndarray,
                         nested: np.ndarray, win_s: np.ndarray, win_e: np.ndarray, like: int, origin: str) -> pa.Table:
    """The table with a step row per window appended (``Iteration#k`` on the loop's thread, like row
    ``like``'s), the thread's rows inside each whose parent is not (top-level rows; rows in a Python
    frame around the loop) made its children, everything inside one level deeper, each iteration the
    child of the innermost frame around it, and every row's step recomputed (``_with_steps``)."""
    n, k = table.num_rows, win_s.size
    rows = np.arange(n, n + k)
    k_of = np.searchsorted(win_s, start[nested], side="right") - 1  # the last iteration starting at or before
    inside = (k_of >= 0) & (end[nested] <= win_e[np.maximum(k_of, 0)])
    nested, k_of = nested[inside], k_of[inside]
    new_parent = parent.copy()
    up = parent[nested]
    at = np.maximum(up, 0)
    roots = (up < 0) | (start[at] < win_s[k_of]) | (end[at] > win_e[k_of])
    new_parent[nested[roots]] = rows[k_of[roots]]
    depth, depth_valid = columns.values_and_validity(table.column("depth"))
    depth = depth.astype(np.int64)
    # Each iteration goes inside the innermost of its roots' parents that holds all of it (a Python frame).
    holds = roots & (up >= 0) & (start[at] <= win_s[k_of]) & (end[at] >= win_e[k_of])
    iteration_parent = np.full(k, -1, np.int64)
    order = np.lexsort((depth[at[holds]], k_of[holds]))  # by window, deepest last
    iteration_parent[k_of[holds][order]] = up[holds][order]
    iteration_depth = np.where(iteration_parent >= 0, depth[np.maximum(iteration_parent, 0)] + 1, 0)
    # Depths below the iterations from the new parents, a level at a time (a parent's level comes first):
    # a root whose Python frame ended past the bound now sits right under its iteration.
    all_depth = np.concatenate([depth, iteration_depth])
    for level in columns.distinct(depth[nested]).tolist():
        at_level = nested[depth[nested] == level]
        all_depth[at_level] = all_depth[new_parent[at_level]] + 1
    depth = all_depth[:n]
    added = {
        "kind": columns.dictionary(np.full(k, schema.KIND_CODES["step"]), columns.KIND_DICTIONARY,
                                   table.schema.field("kind").type.index_type),
        "name": columns.dictionary(np.arange(k), [f"Iteration#{i}" for i in range(k)],
                                   table.schema.field("name").type.index_type),
        "start_ns": pa.array(win_s, pa.int64()), "dur_ns": pa.array(win_e - win_s, pa.int64()),
        # Rows the profiler did not write say so: their category is tracekit's, not the profiler's.
        "category": columns.dictionary(np.zeros(k, np.int64), [INFERRED_CATEGORY],
                                       table.schema.field("category").type.index_type),
    }
    arrays = []
    for field in table.schema:
        if field.name in added:
            extra = added[field.name]
        elif field.name in ("trace_id", "source", "pid", "tid", "process_name", "thread_name"):
            extra = table.column(field.name).take(pa.array(np.full(k, like)))
        elif isinstance(field.type, pa.ExtensionType):
            extra = pa.ExtensionArray.from_storage(field.type, pa.nulls(k, field.type.storage_type))
        else:
            extra = pa.nulls(k, field.type)
        column = pa.chunked_array([*table.column(field.name).chunks, *_chunks(extra)], field.type)
        arrays.append(column.unify_dictionaries().combine_chunks() if pa.types.is_dictionary(field.type)
                      else column.combine_chunks())
    grown = pa.Table.from_arrays(arrays, schema=table.schema)
    grown = grown.set_column(grown.schema.get_field_index("parent"), grown.schema.field("parent"),
                             columns.nullable(np.concatenate([new_parent, iteration_parent]), -1, pa.int64()))
    depth_all = np.concatenate([np.where(depth_valid, depth, -1), iteration_depth])
    grown = grown.set_column(grown.schema.get_field_index("depth"), grown.schema.field("depth"),
                             columns.nullable(depth_all, -1, grown.schema.field("depth").type))
    return _with_steps(grown, np.concatenate([kind, np.full(k, schema.KIND_CODES["step"], kind.dtype)]),
                       np.concatenate([start, win_s]), np.concatenate([end, win_e]), rows, origin)


def _chunks(array: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return list(array.chunks) if isinstance(array, pa.ChunkedArray) else [array]


def _with_steps(table: pa.Table, kind: np.ndarray, start: np.ndarray, end: np.ndarray, calls: np.ndarray,
                origin: str) -> pa.Table:
    """The table with ``calls`` as step rows numbered 0.. in time order, every row's step recomputed
    as the reader links them (host rows by time containment in their process, GPU rows by their
    launch call), and ``steps_from`` in the trace metadata."""
    kind = kind.copy()
    kind[calls] = schema.KIND_CODES["step"]
    gpu = links.kind_mask(kind, *schema.GPU_ACTIVITY_KINDS)
    host = ~gpu & links.kind_mask(kind, *links.NESTED_KINDS) & ~links.kind_mask(kind, "gpu_user_range")
    pid, pid_valid = columns.values_and_validity(table.column("pid"))
    process = np.where(pid_valid, pid.astype(np.int64), -1)
    step = links.assign_steps(kind.size, start, end, host, calls, np.arange(calls.size, dtype=np.int64), process)
    launch_row = np.where(*_valid_or(table.column("launch_row"), -1))
    linked = np.flatnonzero(gpu & (launch_row >= 0))
    step[linked] = step[launch_row[linked]]
    kind_index = table.schema.get_field_index("kind")
    step_index = table.schema.get_field_index("step")
    table = table.set_column(kind_index, table.schema.field(kind_index), columns.dictionary(
        kind, columns.KIND_DICTIONARY, table.schema.field(kind_index).type.index_type))
    table = table.set_column(step_index, table.schema.field(step_index), columns.nullable(step, -1, pa.int32()))
    return columns.with_extra(table, steps_from=origin)


def _unified(column: pa.ChunkedArray) -> pa.ChunkedArray:
    return column.unify_dictionaries() if column.num_chunks > 1 else column


def _dictionary_values(column: pa.ChunkedArray) -> list[str]:
    return _unified(column).chunk(0).dictionary.to_pylist() if column.num_chunks else []


def _int64(column: pa.ChunkedArray) -> np.ndarray:
    return np.where(*_valid_or(column, 0))


def _valid_or(column: pa.ChunkedArray, null: int) -> tuple[np.ndarray, np.ndarray, int]:
    values, valid = columns.values_and_validity(column)
    return valid, values.astype(np.int64), null


def _thread_keys(table: pa.Table) -> np.ndarray:
    """One key per (pid, tid); rows without a tid share key -1."""
    _, pid_code = columns.factorize(_int64(table.column("pid")))
    tid, tid_valid = columns.values_and_validity(table.column("tid"))
    _, tid_code = columns.factorize(np.where(tid_valid, tid.astype(np.int64), -1))
    return np.where(tid_valid, pid_code * (int(tid_code.max()) + 1) + tid_code, -1)
