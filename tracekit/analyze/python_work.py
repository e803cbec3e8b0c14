"""Python work inside a PyTorch step: long stretches with no op running.

Per-op dispatch on the CPU costs 1-50 µs an op (ATen's dispatcher, autograd's bookkeeping, the
Python of ``nn.Module.__call__`` and of the op's binding) and shows as short gaps between a step's
ops. A stretch of ``LONG_STRETCH_NS`` or more with no op running on the loop's thread, in the steps
the verdict uses (warm-up steps, where first calls initialize, are not among them), is not that: it
is Python doing work of its own between two ops (preparing data inside the step: building tensors
from Python lists, tokenizing, per-sample loops; metrics; logging), or a wait the trace does not
record. In a JAX trace the loop's thread runs the runtime's ranges (``PjitFunction(f)``,
``DevicePut``) and XLA's threads the ops: a stretch with none of them is the same, except in a step
JAX runs op by op (not jitted: each primitive dispatched as a computation of its own,
``JAX_EAGER_DISPATCHES`` or more a step). There JAX's own Python runs between the dispatches and
costs tens to hundreds of µs each (tracing and abstract evaluation under ``value_and_grad``,
``partial_eval.py``, ``core.py``, ``ad.py`` in the stacks): a Flax NNX transformer's training step run
eagerly (1,199 dispatches a step) spent 58% of its time in 327 such stretches a step, read as "the
step's own Python, which a compiler does not remove"; jitted, the same step has 3.6 a step and runs
14x faster. Such steps have no long stretches here: their time is dispatch, which jax.jit removes.
A compiled graph (torch.compile, TorchScript) removes dispatch, not such work, so ``whatif``'s
dispatch scenarios keep these stretches. Over the stored PyTorch captures no steady step
has one; their longest stretches outside ops are in first steps (up to 4.2 ms, lazy initialization).
PyTorch 2.13, 2-core Xeon: an MLP step whose input features are computed in Python from nested lists
(``tests/data/cpu/python_in_step``) spends about three quarters of its time in such stretches, which
the report called framework dispatch with torch.compile as the remedy.

Time inside a batch fetch, a Python frame that blocks (a sleep, a lock) or a collective is
accounted for elsewhere and is not counted here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tracekit.analyze import intervals
from tracekit.analyze.breakdown import COMPUTE_OP_CLASSES, compiled_code_self
from tracekit.analyze.classify import OP_CLASSES, classify_rows, collective_rows, data_loading_rows, python_wait_rows
from tracekit.analyze.frame import Frame
from tracekit.ingest.links import byte_mask, member_mask
from tracekit.schema import source_of

LONG_STRETCH_NS = 200_000
# Flax NNX's transforms (nnx.jit, nnx.grad) walk the model's object graph in Python on every call
# (flax/nnx/graphlib.py). Not the standard library's graphlib: its functions have other names.
FLAX_GRAPH_TRAVERSAL = re.compile(r"graphlib\.py:\d+ (_graph_)?(un)?flatten\b")
FLAX_NNX_REMEDY = ("the stretches are Flax NNX walking the model's object graph in Python on each nnx.jit call "
                   "(graphlib's flatten): cache the traversal with nnx.cached_partial(train_step, model, "
                   "optimizer), or split once and jax.jit a pure step (graphdef, state = nnx.split((model, optimizer)); "
                   "nnx.merge inside the jitted function, which returns the new state), as Flax's performance guide "
                   "describes (a 2-layer transformer's training step on 2 CPU cores: 23-25 ms with nnx.jit, 19 ms "
                   "cached, 18 ms split)")
JAX_EAGER_DISPATCHES = 50  # jitted dispatches a step (nested ones too): JAX runs the step op by op
# How each framework's profiler traces Python's calls (the frames that would name the stretches' work;
# compare's caveat on captures made with and without it).
PYTHON_TRACER_OPTION = {"torch": "torch.profiler's with_stack=True",
                        "jax": "jax.profiler's Python tracer (ProfileOptions python_tracer_level=1, on by default)",
                        "tf": "the TF profiler's python_tracer_level=1"}
REMEDY_SHARE = 0.2  # of the steps' time in such stretches: evidence and a remedy


# What Module.state_dict() runs for each tensor it returns (keep_vars=False): a stretch right after
# it is most likely the state being saved (torch.save of a 3-layer MLP and its Adam state each step:
# 4.8 ms of a 8.5 ms profiled step, after aten::detach).
STATE_DICT_OP = "aten::detach"


@dataclass(frozen=True)
class PythonWork:
    """Long stretches with no op running in the steps used (module doc). Times in ns.

    share: their part of the steps' time; per_step_ns: their time in a step (mean); stretches: how many
    a step (mean); longest_ns: the longest one, ``after`` and ``before`` the ops it lies between ("" at
    a step's edge); python: the Python frames running in them, where the trace records Python stacks
    (an evidence phrase, or "")."""

    share: float
    per_step_ns: float
    stretches: float
    longest_ns: int
    after: str
    before: str
    python: str = ""
    frames_recorded: bool = False  # the trace records Python frames (JAX's by default, torch's with_stack)
    source: str = "torch"

    def evidence(self) -> str:
        where = f"after {self.after}" if self.after else "at the step's start"
        if self.after == STATE_DICT_OP:
            where += ", which state_dict() runs for each tensor it returns, as a checkpoint saved in the step does"
        where += f", before {self.before}" if self.before else ""
        if self.python:
            frames = f"; {self.python}"
        elif self.frames_recorded:  # recorded, but many short calls: no function holds half the time
            frames = "; the trace's Python frames in them are many short calls, none holding half their time"
        else:
            frames = f" ({PYTHON_TRACER_OPTION.get(self.source, PYTHON_TRACER_OPTION['torch'])} names the Python running in them)"
        # Without Python stacks the trace cannot tell the step's Python from native code that records no
        # op: an AOTInductor package's kernels leave the same stretches.
        native = "" if self.python or self.frames_recorded else (
            ", or native code that records no op (NumPy, a C++ extension, an AOTInductor package)")
        return (f"{self.share:.0%} of step time is in stretches of {LONG_STRETCH_NS / 1e3:.0f} µs or more with no op running "
                f"({self.stretches:.1f} a step, {self.per_step_ns / 1e6:,.2f} ms; the longest {self.longest_ns / 1e6:,.2f} ms, "
                f"{where}){frames}: Python doing work of its own between the ops{native}, not per-op dispatch, which "
                "costs µs an op")

    def remedy(self) -> str:
        if FLAX_GRAPH_TRAVERSAL.search(self.python):
            return FLAX_NNX_REMEDY
        return ("take the Python work out of the step: the stretches with no op running are the step's own Python "
                "(data preparation, per-sample loops, tensors built from lists, metrics, checkpoints and logs "
                "written), which a compiler (torch.compile, jax.jit) does not remove; prepare batches in the input "
                "pipeline (DataLoader workers, tf.data or grain), write the per-sample work as tensor ops inside the "
                "compiled step, compute it once outside the loop, or save and log every N steps")

    def as_dict(self) -> dict[str, object]:
        return {"share": self.share, "per_step_ns": self.per_step_ns, "stretches_per_step": self.stretches,
                "longest_ns": self.longest_ns, "after": self.after, "before": self.before, "python": self.python}


def loop_threads(frame: Frame) -> np.ndarray:
    """The threads that run the loop: those that mark the steps; in a PyTorch trace that marks none, the
    thread whose top-level ops take the most time (a loop whose iterations are not recorded as steps, an
    environment's step or data preparation in Python between them, still runs its ops there). None in
    other traces without steps (JAX runs its ops on XLA's threads, not the loop's)."""
    steps = frame.rows("step")
    if steps.size:
        return np.unique(frame.thread_key[steps])
    if source_of(frame.table) != "torch":  # JAX's ops run on XLA's threads, not the loop's
        return np.zeros(0, np.int64)
    ops = frame.rows("cpu_op")
    top = ops[frame.op_parent[ops] < 0]
    if not top.size:
        return np.zeros(0, np.int64)
    keys, which = np.unique(frame.thread_key[top], return_inverse=True)
    return keys[[int(np.argmax(np.bincount(which, weights=frame.dur[top])))]]


def _loop_work(frame: Frame, steps: np.ndarray) -> np.ndarray:
    """The framework's own work rows on the threads that run the loop (``loop_threads``): ops, and in a
    JAX trace the runtime's ranges (``PjitFunction(f)``, ``DevicePut``: its ops run on XLA's threads). A
    range around steps (a user's TraceAnnotation("epoch")) is not among them: it holds the Python too."""
    on_loop = member_mask(frame.thread_key, loop_threads(frame).tolist())
    runtime = frame.rows("user_range") if source_of(frame.table) == "jax" else np.zeros(0, np.int64)
    if runtime.size:
        order = steps[np.argsort(frame.start[steps], kind="stable")]
        at = np.searchsorted(frame.start[order], frame.start[runtime], side="left")
        inside = at < order.size
        holds = np.zeros(runtime.size, bool)
        holds[inside] = frame.end[order[at[inside]]] <= frame.end[runtime[inside]]
        runtime = runtime[~holds]
    rows = np.concatenate([frame.rows("cpu_op"), runtime])
    return rows[on_loop[rows]]


def _jax_op_by_op(frame: Frame, w_start: np.ndarray, w_end: np.ndarray) -> bool:
    """Whether a JAX trace's windows dispatch ``JAX_EAGER_DISPATCHES`` jitted computations or more each
    (``PjitFunction``): a step run op by op, whose stretches between ops are JAX's own Python (module doc)."""
    if source_of(frame.table) != "jax":
        return False
    codes = [i for i, n in enumerate(frame.names) if n.startswith(("PjitFunction(", "PmapFunction("))]
    rows = np.flatnonzero(member_mask(frame.name_code, codes)) if codes else np.zeros(0, np.int64)
    at = np.searchsorted(w_start, frame.start[rows], side="right") - 1
    inside = int(((at >= 0) & (frame.end[rows] <= w_end[np.maximum(at, 0)])).sum())
    return inside >= JAX_EAGER_DISPATCHES * w_start.size


def long_stretches(frame: Frame, w_start: np.ndarray, w_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stretches of ``LONG_STRETCH_NS`` or more inside the windows (disjoint, sorted: the steps)
    with none of the framework's work (``_loop_work``), compiled graph's code, batch fetch or blocking
    Python frame on the threads that mark the steps, and no collective or compute op on any other
    thread (the loop waits for those: gloo's all-reduce under DDP's reducer)."""
    steps = frame.rows("step")
    threads = loop_threads(frame)
    if not threads.size or not w_start.size or _jax_op_by_op(frame, w_start, w_end):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    on_loop = member_mask(frame.thread_key, threads.tolist())
    ops = frame.rows("cpu_op")
    compute = byte_mask(classify_rows(frame).op[ops], [OP_CLASSES.index(c) for c in COMPUTE_OP_CLASSES])
    waits = np.concatenate([data_loading_rows(frame), python_wait_rows(frame)])
    # A compiled graph's own code is judged apart (an AOTInductor package's native call, seen in the
    # Python stacks, runs its kernels with no op recorded: not the step's Python).
    busy = np.concatenate([_loop_work(frame, steps), waits[on_loop[waits]], ops[compute & ~on_loop[ops]],
                           collective_rows(frame), compiled_code_self(frame)[0]])
    b_start, b_end = intervals.union(frame.start[busy], frame.end[busy])
    # The windows' time outside the busy intervals: the idle time around and between them, cut to the windows.
    idle_start = np.concatenate([[min(int(w_start[0]), int(b_start[0]) if b_start.size else int(w_start[0]))], b_end])
    idle_end = np.concatenate([b_start, [max(int(w_end[-1]), int(b_end[-1]) if b_end.size else int(w_end[-1]))]])
    keep = idle_end > idle_start
    s, e = intervals.intersect(idle_start[keep], idle_end[keep], w_start, w_end)[:2]
    long = (e - s) >= LONG_STRETCH_NS
    return s[long], e[long]


def python_work(frame: Frame, w_start: np.ndarray, w_end: np.ndarray, steps: int,
                stretches: tuple[np.ndarray, np.ndarray] | None = None) -> PythonWork | None:
    """The long stretches of the windows (the steps used, ``steps`` of them; ``stretches``: theirs,
    when the caller has them), or None when they are under ``REMEDY_SHARE`` of the windows' time."""
    s, e = stretches if stretches is not None else long_stretches(frame, w_start, w_end)
    span = int((w_end - w_start).sum())
    if not s.size or not span or int((e - s).sum()) < REMEDY_SHARE * span:
        return None
    # The steps run the framework's work on the loop's threads: without any, there is no dispatch to
    # tell the stretches from.
    ops = _loop_work(frame, frame.rows("step"))
    at = np.searchsorted(w_start, frame.start[ops], side="right") - 1
    if not ((at >= 0) & (frame.start[ops] < w_end[np.maximum(at, 0)])).any():
        return None
    longest = int(np.argmax(e - s))
    # The ops around it: the last to end before it and the first to start after (the outermost, as a
    # parent ends after and starts before its children), on the loop's threads.
    ends, starts = ops[np.argsort(frame.end[ops], kind="stable")], ops[np.argsort(frame.start[ops], kind="stable")]
    i = int(np.searchsorted(frame.end[ends], s[longest], side="right")) - 1
    j = int(np.searchsorted(frame.start[starts], e[longest], side="left"))
    window = int(np.searchsorted(w_start, s[longest], side="right")) - 1
    after = frame.name(int(ends[i])) if i >= 0 and frame.end[ends[i]] >= w_start[window] else ""
    before = frame.name(int(starts[j])) if j < starts.size and frame.start[starts[j]] <= w_end[window] else ""
    total = int((e - s).sum())
    on_loop = member_mask(frame.thread_key, loop_threads(frame).tolist())
    return PythonWork(share=total / span, per_step_ns=total / max(steps, 1), stretches=s.size / max(steps, 1),
                      longest_ns=int(e[longest] - s[longest]), after=after, before=before,
                      frames_recorded=bool(on_loop[frame.rows("python_function")].any()),
                      source=source_of(frame.table))
