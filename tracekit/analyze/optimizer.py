"""The optimizer's share of the step, and whether it updates the parameters one at a time.

torch.optim records each optimizer step as a range (``Optimizer.step#AdamW.step``). Its built-in
optimizers update the parameters three ways, told apart by the ops inside that range:

* one parameter at a time (``foreach=False``, the default for parameters on the CPU): each parameter
  gets its own ops, ~10 an update for Adam (``aten::mul_``, ``aten::lerp_``, ``aten::addcdiv_``...):
  hundreds of small ops a step, each paying the framework's dispatch (and on a GPU a launch);
* ``foreach=True`` (the default on a GPU): one ``aten::_foreach_*`` op per update over a list of
  tensors, one multi-tensor kernel on a GPU. On the CPU these ops loop over the tensors themselves
  (PyTorch 2.13, 2-core Xeon: AdamW over 1.3M parameters, 902 us a step one at a time, 1,321 us
  foreach; tests/data/cpu's MLP loop, 0.96x the per-parameter step);
* ``fused=True`` (Adam, AdamW, SGD and Adagrad): one ``aten::_fused_adamw_``-like op for the whole
  update (277 us there: 3.3x faster than one at a time; a small MLP's Adam 2.5x; the MLP loop's
  whole step 0.69x the per-parameter one, 0.72x the foreach one).

Where the steps used spend at least ``REMEDY_SHARE`` of their time in a built-in optimizer that
updates one parameter at a time (or foreach on the CPU) with ``REMEDY_OPS`` ops a call or more, the
remedy is its fused implementation (or, on a GPU, foreach); from ``DESCRIBE_SHARE`` the share is evidence, whatever the
optimizer (Shampoo, apex's FusedAdam, ... are only described). The time is the optimizer calls' wall
time on their thread (on a GPU trace: launching the update's kernels). ``whatif``'s fused-optimizer
scenario costs the remedy.

A call given a closure, ``optimizer.step(closure)``, runs the closure first: the forward and backward
pass inside the optimizer's range. PyTorch Lightning steps every optimizer that way, so its traces
hold the whole training step in ``Optimizer.step#Adam.step``. The optimizer's own part of a call starts
where the last backward node inside it ends (``autograd::engine::evaluate_function: ...``, on any
thread of its process: on a GPU autograd runs the backward on its device threads), or the last of
Lightning's hooks that its closure runs after the backward; a call with none is all its own. A
Lightning MLP's Adam (tests/data/cpu/lightning_mlp) read "78% of the step time, 204 ops a call".
Where a step starts inside what would be a call's own part, the call holds a closure the trace does
not show (Lightning's loop captured without its ops, so without backward nodes) and no share is said.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from tracekit.analyze.frame import BACKWARD_NODE, GPU_BUSY_KINDS, Frame
from tracekit.analyze.gpu_presence import unrecorded_gpu_work
from tracekit.analyze.stalls import INPUT_TYPES
from tracekit.analyze.top_ops import args_text, input_dims
from tracekit.ingest.links import member_mask, nearest_ancestor
from tracekit.ingest.step_inference import OPTIMIZER_STEP

REMEDY_SHARE = 0.10  # of the steps' time in the optimizer, for a remedy
# ... and ops a call: an SGD over four tensors runs four; its time is torch.optim's Python, which a
# fused update keeps.
REMEDY_OPS = 20
DESCRIBE_SHARE = 0.10  # ... for a line of evidence
# torch.optim's optimizers that take foreach=; FUSED those that also take fused= (PyTorch >= 2.4).
BUILT_IN = frozenset({"SGD", "Adam", "AdamW", "Adagrad", "Adamax", "ASGD", "NAdam", "RAdam", "RMSprop", "Rprop",
                      "Adadelta"})
FUSED = frozenset({"SGD", "Adam", "AdamW", "Adagrad"})
_FOREACH_OP = re.compile(r"^aten::_foreach_")
_FUSED_OP = re.compile(r"^aten::_fused_")


@dataclass(frozen=True)
class OptimizerSteps:
    """The optimizer calls of the steps used: the optimizer's class (``AdamW``), the calls, their
    share of the steps' time, ops per call, and how it updates: "one parameter at a time", "foreach",
    "fused" or "" (not a built-in optimizer: unknown)."""

    optimizer: str
    calls: int
    share: float
    ops_per_call: float
    update: str
    on_gpu: bool

    def evidence(self) -> str | None:
        if self.share < DESCRIBE_SHARE:
            return None
        how = f", {self.update}" if self.update else ""
        ops = f"{self.ops_per_call:,.0f} op{'' if round(self.ops_per_call) == 1 else 's'}"
        return f"the optimizer step ({self.optimizer}) takes {self.share:.0%} of the step time: {ops} a call{how}"

    def remedy(self) -> str | None:
        if self.share < REMEDY_SHARE or self.ops_per_call < REMEDY_OPS or not fusable(self.update, self.on_gpu):
            return None
        if self.optimizer in FUSED:
            if self.update == "foreach":  # on the CPU, where foreach's ops loop over the tensors
                also = " (foreach=True gains little on the CPU, where its ops loop over the tensors)"
            else:
                also = " (or foreach=True)" if self.on_gpu else " (foreach=True gains little on the CPU)"
            return (f"use the fused optimizer, torch.optim.{self.optimizer}(..., fused=True){also}: one op updates "
                    f"every parameter, instead of {self.ops_per_call:,.0f} ops a call")
        if self.on_gpu:
            return (f"use torch.optim.{self.optimizer}(..., foreach=True): one multi-tensor kernel per update "
                    f"instead of {self.ops_per_call:,.0f} ops a call")
        return None

    def as_dict(self) -> dict[str, object]:
        return {"optimizer": self.optimizer, "calls": self.calls, "share": self.share,
                "ops_per_call": self.ops_per_call, "update": self.update}


def fusable(update: str, on_gpu: bool) -> bool:
    """Whether a fused update would replace many ops: a built-in optimizer's one parameter at a time,
    or its foreach update on the CPU (whose ops loop over the tensors: no faster than one at a time,
    1.5x slower for AdamW over 1.3M parameters); a GPU's foreach update is a few kernels."""
    return update == "one parameter at a time" or (update == "foreach" and not on_gpu)


def optimizer_calls(frame: Frame) -> np.ndarray:
    """Every optimizer call's row (``Optimizer.step#X.step``: wrappers' and the wrapped's)."""
    ranges = frame.rows("user_range")
    return ranges[frame.named(ranges, OPTIMIZER_STEP)]


@dataclass(frozen=True)
class Update:
    """How optimizer calls update: ``how`` (the module doc's "one parameter at a time", "foreach",
    "fused", or "" for an optimizer torch.optim does not define), the optimizers' class names (a
    wrapper's step, accelerate's AcceleratedOptimizer, holds the wrapped optimizer's: the innermost
    calls name them), the outermost calls (whose time is the step's) and the op rows inside them."""

    how: str
    names: frozenset[str]
    outer: np.ndarray
    inside: np.ndarray
    own_start: np.ndarray  # per outer call: where its own work starts, after a closure's (module doc)


def outermost(frame: Frame, calls: np.ndarray) -> np.ndarray:
    """The calls no other of them holds (a wrapper's step, not the wrapped optimizer's inside it)."""
    return calls[~_nesting(frame, calls)[1]]


def update_of(frame: Frame, calls: np.ndarray) -> Update:
    """How these optimizer calls update (``Update``)."""
    holds, held = _nesting(frame, calls)
    names = frozenset(_optimizer_name(frame.name(r)) for r in calls[~holds].tolist())
    outer = calls[~held]
    own_start = _closure_ends(frame, outer)
    inside = ops_inside(frame, outer, frame.rows("cpu_op"), own_start)
    if inside.size and frame.named(inside, _FUSED_OP).any():
        how = "fused"
    elif names <= BUILT_IN and inside.size:
        how = "foreach" if frame.named(inside, _FOREACH_OP).any() else "one parameter at a time"
    else:
        how = ""
    return Update(how, names, outer, inside, own_start)


def _optimizer_name(range_name: str) -> str:
    return range_name.split("#", 1)[1].rsplit(".", 1)[0]  # Optimizer.step#AdamW.step -> AdamW


def optimizer_steps(frame: Frame, used_steps: list[int] | None) -> OptimizerSteps | None:
    """The optimizer calls (outermost ``Optimizer.step#X.step`` ranges) in the steps used (every step
    when None), or None when the trace has none or marks no steps (a share of what?)."""
    calls = optimizer_calls(frame)
    steps = frame.rows("step")
    if used_steps is not None:
        calls = calls[member_mask(frame.step[calls], used_steps)]
        steps = steps[member_mask(frame.step[steps], used_steps)]
    if calls.size == 0 or steps.size == 0:
        return None
    update = update_of(frame, calls)
    # A call the profile cut off before its closure ran is left out, with its step (_closure_ends).
    cut = update.own_start >= frame.end[update.outer]
    outer = update.outer[~cut]
    step_ns = int(frame.dur[steps[~member_mask(frame.step[steps], frame.step[update.outer[cut]].tolist())]].sum())
    if step_ns <= 0 or not outer.size:
        return None
    own_start, own_end = update.own_start[~cut], frame.end[outer]
    # A step that starts inside a call's own part: the call holds a closure the trace does not show (no
    # backward node or hook recorded in it; Lightning marks its steps inside the closure), so its own
    # update cannot be told from the step around it. A Lightning loop's trace without its ops read "the
    # optimizer step (AdamW) takes 125% of the step time: 0 ops a call": say nothing rather than that.
    starts = np.sort(frame.start[frame.rows("step")])
    if (np.searchsorted(starts, own_end, "left") > np.searchsorted(starts, own_start, "right")).any():
        return None
    own_ns = int((own_end - own_start).sum())
    return OptimizerSteps(optimizer=" and ".join(sorted(update.names)), calls=int(outer.size),
                          share=own_ns / step_ns, ops_per_call=update.inside.size / outer.size,
                          update=update.how, on_gpu=on_gpu(frame))


def on_gpu(frame: Frame) -> bool:
    """Whether the program ran on a GPU: its activity recorded, or its launch calls and GPU-only ops
    where the profiler recorded the host alone (``gpu_presence``): its parameters are the GPU's."""
    return frame.rows(*GPU_BUSY_KINDS).size > 0 or bool(unrecorded_gpu_work(frame))


def ops_inside(frame: Frame, calls: np.ndarray, ops: np.ndarray, own_start: np.ndarray) -> np.ndarray:
    """The op rows that start inside one of ``calls`` (which do not nest) on its thread, at or after the
    call's ``own_start``: each op looked up among the calls by its start (a trace's ops outnumber its
    optimizer calls by far)."""
    found: list[np.ndarray] = []
    for key in np.unique(frame.thread_key[calls]).tolist():
        mine_calls = frame.thread_key[calls] == key
        order = np.argsort(frame.start[calls[mine_calls]], kind="stable")
        these, begin = calls[mine_calls][order], own_start[mine_calls][order]
        mine = ops[frame.thread_key[ops] == key]
        at = np.searchsorted(frame.start[these], frame.start[mine], "right") - 1
        held = at >= 0
        held[held] = (frame.start[mine[held]] < frame.end[these[at[held]]]) & (frame.start[mine[held]] >= begin[at[held]])
        found.append(mine[held])
    return np.sort(np.concatenate(found)) if found else np.zeros(0, np.int64)


# Lightning's closure runs its hooks after the backward (on_after_backward, on_before_optimizer_step,
# configure_gradient_clipping), each a range: "[pl][profile][LightningModule]M.on_after_backward"
# (Lightning 2.6; "[LightningModule]M.on_after_backward" before).
LIGHTNING_HOOK = re.compile(r"^(\[pl\]\[profile\])?\[(Callback|LightningModule|Strategy)\]")


def own_time(frame: Frame, calls: np.ndarray) -> np.ndarray:
    """Per optimizer call (outermost): its own time, after the closure it ran (module doc)."""
    return frame.end[calls] - _closure_ends(frame, calls)


def _closure_ends(frame: Frame, calls: np.ndarray) -> np.ndarray:
    """Per call: the end of the last backward node or Lightning hook inside it (by time, on any thread
    of its process), where a closure it ran ends; the call's start where none is (module doc). A call
    cut off by the profile's end before its closure's backward gets its end (no own time known)."""
    own = frame.start[calls].copy()
    backward = [i for i, n in enumerate(frame.names) if BACKWARD_NODE.match(n)]
    if not backward or not calls.size:
        return own
    hooks = [i for i, n in enumerate(frame.names) if LIGHTNING_HOOK.match(n)]
    nodes = np.flatnonzero(member_mask(frame.name_code, backward + hooks))
    nodes = nodes[np.argsort(frame.start[nodes], kind="stable")]
    n_start, n_end, n_pid = frame.start[nodes], frame.end[nodes], frame.pid[nodes]
    n_backward = member_mask(frame.name_code[nodes], backward)
    lo = np.searchsorted(n_start, frame.start[calls], "left")
    hi = np.searchsorted(n_start, frame.end[calls], "left")
    ran = np.zeros(calls.size, bool)  # a backward ran inside the call
    for i in np.flatnonzero(hi > lo).tolist():
        ends = n_end[lo[i]:hi[i]]
        mine = (ends <= frame.end[calls[i]]) & (n_pid[lo[i]:hi[i]] == frame.pid[calls[i]])
        if (mine & n_backward[lo[i]:hi[i]]).any():
            own[i], ran[i] = max(int(ends[mine].max()), int(own[i])), True
    # Where the calls run closures, one that ends past the profiled steps with no backward inside was
    # cut off by the profile's end before it (Lightning's last step): its own part is unknown.
    steps = frame.rows("step")
    if ran.any() and steps.size:
        cut = ~ran & (frame.end[calls] > frame.end[steps].max())
        own[cut] = frame.end[calls[cut]]
    return own


def _nesting(frame: Frame, calls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per call: whether it holds another of the calls (a wrapper's step), and whether another holds
    it, by the row tree (``links.nearest_ancestor``, as step inference finds outermost calls)."""
    wanted = np.zeros(len(frame), bool)
    wanted[calls] = True
    holder = nearest_ancestor(frame.parent, calls, wanted)
    return member_mask(calls, holder[holder >= 0].tolist()), holder >= 0


# A fused update's memory traffic per parameter element, in element-sized streams: it reads the
# parameter, its gradient and its state once and writes the parameter and the state once (Adam and
# AdamW keep two state tensors, Adagrad one; amsgrad adds a third to Adam's). One parameter at a time,
# the same update makes a pass per op (PyTorch 2.13's AdamW: mul_, lerp_, mul_, addcmul_, sqrt, div,
# add_, addcdiv_: about three times the traffic) and allocates its temporaries every step. SGD is
# left out: with or without momentum its fused CPU update took as long as the per-parameter one on
# tensors of 256K elements or more (PyTorch 2.13, 2-core Xeon); its gain is each op's fixed cost.
FUSED_STREAMS = {"Adam": 7, "AdamW": 7, "Adagrad": 5}
AMSGRAD_STREAMS = 2
AMSGRAD_OP = re.compile(r"^aten::(_foreach_)?maximum_?$")
# The update's ops whose rate is read: those moving at least this much (below it an op's time is
# mostly its fixed cost, which the replay has already taken out, and what is left is noise).
MIN_RATE_BYTES = 1 << 20
ELEMENT_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2}


@dataclass(frozen=True)
class FusedArithmetic:
    """What a fused update's arithmetic would take (``fused_arithmetic``): ``traffic`` bytes (the
    parameters' ``param_bytes`` times the optimizer's streams) at ``rate`` bytes/ns, the rate the
    update's own in-place ops moved theirs at (its ops moved ``unfused_traffic`` bytes in all)."""

    param_bytes: int
    traffic: int
    rate: float
    unfused_traffic: int

    @property
    def ns(self) -> float:
        return self.traffic / self.rate

    def describe(self) -> str:
        return (f"one pass over the parameters and their optimizer state, {self.traffic / 2**20:,.0f} MiB against "
                f"the ops' {self.unfused_traffic / 2**20:,.0f} MiB, at the {self.rate:,.1f} GB/s its in-place ops moved "
                "theirs at")


def _tensor_elements(dims: object) -> list[int]:
    """Element counts of one recorded input: a tensor's dims, or a tensor list's list of them
    (anything else, none)."""
    def count(d: object) -> int | None:
        return int(np.prod(d)) if isinstance(d, list) and all(type(x) is int for x in d) else None

    if isinstance(dims, list) and dims and all(isinstance(d, list) for d in dims):
        counts = [count(d) for d in dims]
        return [c for c in counts if c is not None]
    one = count(dims)
    return [] if one is None else [one]


def _traffic(dims_text: str, types_text: str) -> tuple[int, int]:
    """An op's bytes moved (each tensor input read once, the largest written once) and its first
    input's bytes, from its recorded ``Input Dims`` and ``Input type``; (0, 0) when unreadable. A
    tensor list's (foreach) element type is not recorded: taken as float32."""
    try:
        dims, types = json.loads(dims_text), json.loads(types_text)
    except ValueError:
        return 0, 0
    if not isinstance(dims, list) or not isinstance(types, list):
        return 0, 0
    read = largest = first = 0
    for i, (d, t) in enumerate(zip(dims, types, strict=False)):  # a short list: what it names
        size = 4 if t == "TensorList" else ELEMENT_BYTES.get(str(t), 0)
        moved = size * sum(_tensor_elements(d)) if size else 0
        read += moved
        largest = max(largest, moved)
        first = moved if i == 0 else first
    return read + largest, first


def fused_streams(update: Update) -> int | None:
    """The fused update's streams per parameter element (``FUSED_STREAMS``), None for an optimizer
    whose fused update makes no fewer passes (SGD) or several optimizers' calls."""
    return FUSED_STREAMS.get(next(iter(update.names))) if len(update.names) == 1 else None


def fused_arithmetic(frame: Frame, update: Update, work_ns: dict[int, int]) -> FusedArithmetic | None:
    """The arithmetic of these optimizer calls made one fused update, from the trace's own evidence
    (shapes recorded): the parameters' bytes, read off the ops the update runs once per parameter (the
    call count most of its ops share: AdamW's lerp_, addcmul_, sqrt, ... once, its mul_ twice), times
    the optimizer's ``FUSED_STREAMS``, at the rate the update's in-place ops of ``MIN_RATE_BYTES`` or
    more moved theirs at. ``work_ns``: the update's ops, each one's arithmetic (its time less the
    framework's fixed cost). None for another optimizer, without shapes, or without an op big enough
    to time."""
    streams = fused_streams(update)
    if streams is None or not work_ns:
        return None
    rows = np.sort(np.fromiter(work_ns, np.int64, len(work_ns)))
    dims_code, dims = input_dims(frame.table, rows)
    typed = pc.fill_null(pc.struct_field(pc.extract_regex(args_text(frame.table, rows), INPUT_TYPES), "types"),
                         "").dictionary_encode()
    types_code, types = typed.indices.to_numpy(zero_copy_only=False), typed.dictionary.to_pylist()
    read: dict[tuple[int, int], tuple[int, int]] = {}
    traffic, first = np.zeros(rows.size, np.int64), np.zeros(rows.size, np.int64)
    for i, (d, t) in enumerate(zip(dims_code.tolist(), types_code.tolist(), strict=True)):
        if (d, t) not in read:
            read[d, t] = _traffic(dims[d], types[t]) if dims[d] and types[t] else (0, 0)
        traffic[i], first[i] = read[d, t]
    # An op whose own ops move its bytes is not counted again: a CPU foreach op runs a per-tensor op
    # for each tensor (_foreach_lerp_ > lerp_), while mul_'s aten::to of its scalar moves nothing.
    parent = np.searchsorted(rows, frame.op_parent[rows])
    nested = (parent < rows.size) & (rows[np.minimum(parent, rows.size - 1)] == frame.op_parent[rows])
    carried = np.bincount(parent[nested], weights=traffic[nested], minlength=rows.size)
    kept = (traffic > 0) & (2 * carried < traffic)
    by_name: dict[str, list[int]] = {}  # name -> [calls, traffic, first input's bytes]
    timed_bytes = timed_ns = 0
    for i in np.flatnonzero(kept).tolist():
        r = int(rows[i])
        name = frame.name(r)
        acc = by_name.setdefault(name, [0, 0, 0])
        acc[0], acc[1], acc[2] = acc[0] + 1, acc[1] + int(traffic[i]), acc[2] + int(first[i])
        # In place, as the fused update is: an op writing a new tensor also pays for its allocation.
        if traffic[i] >= MIN_RATE_BYTES and work_ns[r] > 0 and name.endswith("_"):
            timed_bytes, timed_ns = timed_bytes + int(traffic[i]), timed_ns + work_ns[r]
    # The ops on the parameters' tensors (a scalar step counter's add_ is not one).
    per_param = [acc for acc in by_name.values() if acc[2] > 4 * acc[0]]
    if not per_param or not timed_ns:
        return None
    counts = [acc[0] for acc in per_param]
    once = max(set(counts), key=lambda c: (counts.count(c), -c))  # the most shared count; the fewer on a tie
    param_bytes = max(acc[2] for acc in per_param if acc[0] == once)
    if any(AMSGRAD_OP.match(name) for name in by_name):
        streams += AMSGRAD_STREAMS
    unfused = sum(acc[1] for acc in by_name.values())
    if streams * param_bytes >= unfused:
        return None
    # The in-place ops' rate together: one op's best is no guide (an op on a tensor in cache runs at
    # several times memory's rate, and the fused kernel computes more per element than any one op).
    return FusedArithmetic(param_bytes=param_bytes, traffic=streams * param_bytes, rate=timed_bytes / timed_ns,
                           unfused_traffic=unfused)


__all__ = ["BUILT_IN", "DESCRIBE_SHARE", "FUSED", "FUSED_STREAMS", "FusedArithmetic", "REMEDY_OPS", "REMEDY_SHARE", "OptimizerSteps", "Update", "fusable",
           "fused_arithmetic", "fused_streams", "on_gpu", "optimizer_calls", "optimizer_steps", "outermost", "own_time", "update_of"]
