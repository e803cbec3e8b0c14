"""Stalled op calls: a compute op that took far longer than the same call in the other steps.

A training or inference loop makes the same op calls in every step. The k-th call of an op name on
a thread, in steps that make the same number of calls of that name there, is the same call doing
the same work each step. When one such call runs ``STALL_RATIO`` times its median over the steps,
and at least ``STALL_MIN_NS`` longer, the work did not take that long: its thread was not running
or was kept waiting. It lost its core (more runnable threads than cores: intra-op threads x
processes on one host, DataLoader workers, other jobs), waited for a thread pool busy with other
ops (TF's inter- and intra-op pools) or on a lock, or stalled in the OS (page faults, swapping).
Profilers record no scheduler events, so this is the trace's own evidence of it; the excess over
the median is the call's *stall*.

Each rule checks its own evidence:
* only compute ops (``COMPUTE_OP_CLASSES`` but communication, which waits for other ranks by design)
  and copies (memory work on the CPU), and their self time, so a parent is not blamed for a
  stalled child;
* at least ``MIN_STEPS`` steps that make the same number of calls of the name on the thread, else
  "the k-th call" may be a different call each step (a data-dependent branch) and it is not compared;
* where input shapes are recorded, the calls compared have the same shapes (a data-dependent op
  or a branch can change them at the same place);
* the stalled call's step runs its other calls in at most ``STEP_WORK_RATIO`` times what a usual
  step's calls take (the median over the steps): when they all take longer, the step's work grew
  (a longer sequence, a bigger batch) and no call is said to stall. Where the calls not suspected
  are too little work to judge by (under ``STALL_MIN_NS`` in a usual step: every substantial call
  of the step is suspected), only the longest suspect is left out and the others witness. Without
  recorded shapes, one call whose input alone grew 10x in one step is indistinguishable from a
  stall; ``record_shapes=True`` rules it out;
* the trace's first step is compared but never called stalled: first calls create oneDNN
  primitives, compile kernels and touch fresh memory;
* ``STALL_MIN_NS`` (0.5 ms) is about the shortest slice the Linux scheduler gives another runnable
  thread: a descheduled thread loses at least that, and faster noise (cache misses, frequency
  changes) is not counted.

A call slowed the same way in every step has no faster step to be compared with. Matrix products
are the exception: their work is known from their recorded shapes (2·M·N·K floating-point
operations), and any CPU does a dense float or double product at ``MIN_GEMM_GFLOPS`` or more (a
memory-bound matrix-vector product at 0.5 flop per byte needs only 0.5 GB/s; vectorized BLAS runs
at tens of GFLOP/s a core). A product that ran slower than that lost, beyond the time that rate
allows, at least ``STALL_MIN_NS``: that excess is a stall too (``slow_gemm_calls``). With ATen's two
intra-op threads on one core (more threads than cores: OMP_NUM_THREADS above a container's CPU set),
a 192x192 by 192x8 ``aten::addmm`` took 3.5-7.6 ms in every call (under 0.2 GFLOP/s; 17-21 µs on one
thread), and the step read CPU compute-bound; on 2 cores numpy's BLAS thread, spinning after each
call beside ATen's second thread, did the same in 1 capture of 12. Only calls whose shapes and
element types (``float``, ``double``) are recorded are judged: ``record_shapes=True``.

The same holds for the ops whose work is a pass over their tensors (elementwise, reduction, copy and
cast ops): no CPU takes ``NS_PER_ELEMENT`` (1 µs) an element on them (transcendental and special
functions take tens of ns, subnormal operands some 100 cycles), so a call over N elements that ran
``STALL_MIN_NS`` beyond N µs waited (``slow_pass_calls``). With the loop's two intra-op threads
sharing one core with another process, a Hugging Face GPT-2's ``generate`` ran
``aten::native_layer_norm`` on 2x1x128 at a median of 3.8 ms (9 µs at best), and the step read
"CPU compute-bound, layer norm 48%". The elements are the recorded tensor inputs' (their broadcast
shape where it is larger: an output can be no larger for these ops); ops whose output is sized by other
arguments (``repeat``, ``new_zeros``, padding, upsampling, a gather, an outer product, most
backward ops) are not judged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow.compute as pc

from tracekit.analyze.breakdown import COMPUTE_OP_CLASSES, op_self_time
from tracekit.analyze.classify import OP_CLASSES, OP_RULES, RowClasses, classify_name, short_name
from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame
from tracekit.analyze.top_ops import GEMM_FLOP_OPS, INPUT_TYPES, args_text, factor_types, gemm_flops, input_dims
from tracekit.ingest.columns import distinct
from tracekit.ingest.links import byte_mask, member_mask

STALL_RATIO = 10.0
STALL_MIN_NS = 500_000
MIN_STEPS = 3
STEP_WORK_RATIO = 2.0
STALL_CLASSES = tuple(c for c in COMPUTE_OP_CLASSES if c != "communication")
MIN_GEMM_GFLOPS = 0.25  # a rate every CPU exceeds on a dense float/double matrix product (module doc)
GEMM_TYPES = ("float", "double")  # the element types judged by rate (half precision may be emulated)
NS_PER_ELEMENT = 1_000  # longer than any CPU takes an element on a pass over tensors (module doc)
PASS_CLASSES = ("elementwise", "reduction", "copy", "cast")  # ops judged by NS_PER_ELEMENT
# Ops of those classes whose output is sized by other arguments than their tensor inputs (a size, a
# repeat count, an index, a scale), and the backward ops but those that return their inputs' sizes.
SIZED_BY_ARGS = re.compile(
    r"^aten::(new_\w+|\w*_like|repeat\w*|tile|expand\w*|broadcast_to|_?upsample\w*|interpolate|\w*pad\w*|one_hot|"
    r"embedding\w*|index\w*|gather|take\w*|outer|ger|kron|cartesian_prod|meshgrid|_?cdist\w*|diag\w*|block_diag|"
    r"combinations|bincount|histc|histogram\w*|multinomial|arange|linspace|logspace|full|zeros|ones|empty\w*|"
    r"rand\w*|normal\w*|bernoulli\w*|eye|tril_indices|triu_indices|resize\w*|scatter\w*|masked_scatter\w*|put_?|"
    r"unfold\w*|im2col|col2im|pixel_\w*|channel_shuffle|as_strided\w*|unsqueeze_copy|\w+_backward\w*)$")
PASS_BACKWARD = re.compile(r"^aten::((native_(layer|group|batch)_norm|threshold|gelu|silu|sigmoid|tanh|hardtanh|"
                           r"leaky_relu|elu|softplus|mse_loss)_backward|_(log_)?softmax_backward_data)$")


@dataclass
class Stalls:
    """Stalled calls in the steps examined. Times in ns.

    rows: the stalled op rows; self_ns, median_ns: each one's self time and its call's median over the
        steps compared; stall_ns: self_ns - median_ns.
    steps_compared: how many steps the medians are over (0: too few steps to compare).
    """

    rows: np.ndarray
    self_ns: np.ndarray
    median_ns: np.ndarray
    steps_compared: int
    # Per row: stalled by its rate (a matrix product slower than MIN_GEMM_GFLOPS; ``median_ns`` is then
    # the time that rate allows), not against the same call in other steps.
    by_rate: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def __post_init__(self) -> None:
        if self.by_rate.size != self.rows.size:
            self.by_rate = np.zeros(self.rows.size, bool)

    @property
    def stall_ns(self) -> np.ndarray:
        return self.self_ns - self.median_ns

    def within(self, frame: Frame, steps: list[int]) -> Stalls:
        """The stalled calls of ``steps`` only."""
        keep = member_mask(frame.step[self.rows], steps)
        return Stalls(self.rows[keep], self.self_ns[keep], self.median_ns[keep], self.steps_compared, self.by_rate[keep])

    def outside_compute_ns(self, classes: RowClasses) -> int:
        """Stall time of the calls that are not compute ops (copies outside one): time the CPU
        breakdown counts as dispatch."""
        compute = [OP_CLASSES.index(c) for c in COMPUTE_OP_CLASSES]
        return int(self.stall_ns[~byte_mask(classes.op[self.rows], compute)].sum())

    def by_step(self, frame: Frame) -> dict[int, int]:
        """Stall time per step number."""
        steps, at = np.unique(frame.step[self.rows], return_inverse=True)
        lost = np.bincount(at, weights=self.stall_ns, minlength=steps.size)
        return {int(s): int(v) for s, v in zip(steps, lost, strict=True)}

    def describe(self, frame: Frame, span_ns: int) -> str:
        """One sentence: how many calls stalled, the worst one, and the share of ``span_ns`` lost (at
        least one call)."""
        worst = int(np.argmax(self.stall_ns))
        row, med = int(self.rows[worst]), float(self.median_ns[worst])
        n = self.rows.size
        lost = self.stall_ns.sum()
        head = (f"{n} op call{'s' if n > 1 else ''} stalled, losing {lost / 1e6:,.2f} ms ({lost / span_ns:.0%} of step "
                f"time): {short_name(frame.name(row))} in step {frame.step[row]} ran {self.self_ns[worst] / 1e6:,.2f} ms ")
        if self.by_rate[worst] and frame.name(row) not in GEMM_FLOP_OPS:
            return (head + f"for a pass over {med / NS_PER_ELEMENT:,.0f} elements, which any CPU makes in {_time(med)} "
                    f"or less ({NS_PER_ELEMENT / 1e3:.0f} µs an element); {int(self.by_rate.sum())} call"
                    f"{'s' if self.by_rate.sum() > 1 else ''} slower than their work allows. Its thread was not running or was "
                    "kept waiting: more runnable threads than cores (intra-op threads, a BLAS library's own threads, "
                    "other processes), a thread pool busy with other ops, or the OS")
        if self.by_rate[worst]:
            flops = med * MIN_GEMM_GFLOPS
            return (head + f"for {flops / 1e6:,.2f} MFLOP of matrix product ({flops / self.self_ns[worst]:.2f} GFLOP/s), "
                    f"which any CPU does in {_time(med)} or less ({MIN_GEMM_GFLOPS} GFLOP/s); "
                    f"{int(self.by_rate.sum())} such call{'s' if self.by_rate.sum() > 1 else ''}. Its thread was not "
                    "running or was kept waiting: more runnable threads than cores (intra-op threads, a BLAS library's "
                    "own threads, other processes), a thread pool busy with other ops, or the OS")
        ratio = f"{self.self_ns[worst] / med:,.0f}x" if med > 0 else "far above"
        return (head + f"against a median of {_time(med)} for the same call in {self.steps_compared} steps ({ratio}). The "
                "call does the same work every step, so its thread was not running or was kept waiting: descheduled "
                "(more runnable threads than cores), waiting for a thread pool busy with other ops, on a lock, or "
                "blocked in the OS (page faults, swapping)")


def _time(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms" if ns >= 1e6 else f"{ns / 1e3:,.1f} µs"


def stalled_calls(frame: Frame, classes: RowClasses, steps: list[int]) -> Stalls:
    """The stalled compute-op calls of ``steps`` (the steps to compare: warm-up and cut-short steps
    left out), as the module doc defines them: against the same call in the other steps, and on a
    CPU-only trace, matrix products and passes over tensors by their rate."""
    compared = _stalled_against_other_steps(frame, classes, steps)
    if frame.rows(*GPU_BUSY_KINDS).size:
        return compared  # an op's host time on a GPU trace is its launch (or a wait for the GPU), not its arithmetic
    ops = frame.rows("cpu_op")
    first_step = int(frame.step[frame.rows("step")].min()) if frame.rows("step").size else min(steps, default=-1)
    # Judged by their rate: calls of STALL_MIN_NS or more self time (the least a stall loses) in the
    # steps compared but the first, not stalled against other steps already.
    ops = ops[member_mask(frame.step[ops], [s for s in steps if s >= 0 and s != first_step])]
    gemm = member_mask(frame.name_code[ops], [c for c, n in enumerate(frame.names) if n in GEMM_FLOP_OPS])
    judged = gemm | byte_mask(classes.op[ops], [OP_CLASSES.index(c) for c in PASS_CLASSES])
    ops, gemm = ops[judged], gemm[judged]
    self_ns = op_self_time(frame, ops) if ops.size else np.zeros(0, np.int64)
    keep = (self_ns >= STALL_MIN_NS) & ~member_mask(ops, compared.rows.tolist())
    ops, gemm, self_ns = ops[keep], gemm[keep], self_ns[keep]
    if not ops.size:
        return compared
    passes = ~gemm
    found = [compared, slow_gemm_calls(frame, ops[gemm], self_ns[gemm]), slow_pass_calls(frame, ops[passes], self_ns[passes])]
    return Stalls(np.concatenate([f.rows for f in found]), np.concatenate([f.self_ns for f in found]),
                  np.concatenate([f.median_ns for f in found]), compared.steps_compared,
                  np.concatenate([f.by_rate for f in found]))


@dataclass(frozen=True)
class CallSeries:
    """Op rows as the same call in each step: the k-th call of a name on a thread within a step. Rows
    are ordered by (thread, name, step, start); a *series* is one (thread, name), and where it makes
    the same number of calls (``calls``) in each of its steps, its rows are a steps x calls matrix in
    row order: the call k of its s-th step is row ``first[series] + s * calls[series] + k``.

    rows, step, series: per row, sorted. first, calls, steps_with: per series. comparable: per row,
    whether its series makes the same number of calls in every step it has calls in, and has them in
    at least ``MIN_STEPS`` steps (else "the k-th call" may be a different call each step)."""

    rows: np.ndarray
    step: np.ndarray
    series: np.ndarray
    first: np.ndarray
    calls: np.ndarray
    steps_with: np.ndarray
    comparable: np.ndarray


def call_series(frame: Frame, rows: np.ndarray) -> CallSeries:
    """These op rows (of the steps to compare) as ``CallSeries``."""
    step, thread, name = frame.step[rows], frame.thread_key[rows], frame.name_code[rows]
    order = np.lexsort((frame.start[rows], step, name, thread))
    rows, step, thread, name = rows[order], step[order], thread[order], name[order]
    if not rows.size:
        empty = np.zeros(0, np.int64)
        return CallSeries(rows, step, empty, empty, empty, empty, np.zeros(0, bool))
    new_series = np.r_[True, (thread[1:] != thread[:-1]) | (name[1:] != name[:-1])]
    series = np.cumsum(new_series) - 1
    run_start = np.flatnonzero(new_series | np.r_[True, step[1:] != step[:-1]])  # a run: one series in one step
    run_length = np.diff(np.r_[run_start, rows.size])
    run_series = series[run_start]
    fewest = np.full(int(series[-1]) + 1, np.iinfo(np.int64).max)
    most = np.zeros(fewest.size, np.int64)
    np.minimum.at(fewest, run_series, run_length)
    np.maximum.at(most, run_series, run_length)
    steps_with = np.bincount(run_series, minlength=fewest.size)
    comparable = ((fewest == most) & (steps_with >= MIN_STEPS))[series]
    return CallSeries(rows, step, series, np.flatnonzero(new_series), most, steps_with, comparable)


def compared_calls(frame: Frame, classes: RowClasses, steps: list[int]) -> CallSeries:
    """``call_series`` of the compute calls of ``steps``, computed once a frame for those steps (the
    stall rule and the subnormal rule both compare them)."""
    key = tuple(sorted({s for s in steps if s >= 0}))
    return frame.memo(f"compared_calls {key}", lambda: call_series(frame, compute_calls(frame, classes, list(key))))


def compute_calls(frame: Frame, classes: RowClasses, steps: list[int]) -> np.ndarray:
    """The op rows of ``steps`` that do work: compute ops (``STALL_CLASSES``) and copies."""
    rows = frame.rows("cpu_op")
    compute = [OP_CLASSES.index(c) for c in STALL_CLASSES]
    step = frame.step[rows]
    wanted = np.zeros(max(int(step.max(initial=0)), max(steps, default=0)) + 2, bool)
    wanted[[s for s in steps if s >= 0]] = True
    return rows[wanted[step] & (byte_mask(classes.op[rows], compute) | _copies(frame, rows))]


def _stalled_against_other_steps(frame: Frame, classes: RowClasses, steps: list[int]) -> Stalls:
    """Calls that ran ``STALL_RATIO`` times their median over the steps (module doc)."""
    none = Stalls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64), 0)
    if len(steps) < MIN_STEPS:
        return none
    cs = compared_calls(frame, classes, steps)
    rows, step, series, comparable = cs.rows, cs.step, cs.series, cs.comparable
    most, steps_with = cs.calls, cs.steps_with
    if not comparable.any():
        return none
    keep = np.flatnonzero(comparable)
    self_ns = np.zeros(rows.size, np.int64)
    self_ns[keep] = op_self_time(frame, rows[keep])
    first_step = int(frame.step[frame.rows("step")].min()) if frame.rows("step").size else min(steps)
    # Only a call that took STALL_MIN_NS can have stalled by that much: medians for those calls only.
    at = np.flatnonzero(comparable & (self_ns >= STALL_MIN_NS) & (step != first_step))
    if at.size == 0:
        return none
    # A comparable series is a steps x calls matrix in row order (step-major); the call (series, k)
    # is a column of it: rows start + s * calls + k, s over the steps.
    start = cs.first[series[at]]
    calls, count = most[series[at]], steps_with[series[at]]
    first_cell = start + (at - start) % calls  # the call's row in the series' first step
    med = np.empty(at.size, np.float64)
    same_dims = np.ones(at.size, bool)
    cells_of: list[tuple[np.ndarray, np.ndarray]] = []  # (candidates, their calls' rows in every step)
    for n in distinct(count):
        of_n = np.flatnonzero(count == n)
        cells = first_cell[of_n, None] + np.arange(n) * calls[of_n, None]
        cells_of.append((of_n, cells))
        block = np.sort(self_ns[cells], axis=1)
        med[of_n] = (block[:, (n - 1) // 2] + block[:, n // 2]) / 2
        slow = self_ns[at[of_n]] >= STALL_RATIO * med[of_n]
        if slow.any():  # where shapes are recorded, the calls compared must have the same ones
            dims, _ = input_dims(frame.table, rows[cells[slow]].ravel())
            dims = dims.reshape(int(slow.sum()), n)
            same_dims[of_n[slow]] = (dims == dims[:, :1]).all(axis=1)
    stalled = (self_ns[at] >= STALL_RATIO * med) & (self_ns[at] - med >= STALL_MIN_NS) & same_dims
    if stalled.any():
        stalled &= ~_step_grew(step, self_ns, keep, at, stalled, cells_of)
    hit = at[stalled]
    return Stalls(rows[hit], self_ns[hit], med[stalled], int(distinct(step[keep]).size))


def _copies(frame: Frame, rows: np.ndarray) -> np.ndarray:
    """Per row: a copy op by its name (``aten::copy_``, ``to``, ``clone``...). A copy takes the class of
    the op around it, or none; on the CPU it is memory work, the same at the same shapes."""
    codes = [c for c in distinct(frame.name_code[rows]).tolist()
             if c >= 0 and classify_name(frame.names[c], OP_RULES) == "copy"]
    return member_mask(frame.name_code[rows], codes) if codes else np.zeros(rows.size, bool)


def _step_grew(step: np.ndarray, self_ns: np.ndarray, keep: np.ndarray, at: np.ndarray, stalled: np.ndarray,
               cells_of: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Per candidate: whether, in its step, the compared calls other than the stalled ones took over
    ``STEP_WORK_RATIO`` times what those same calls take in a usual step (the median over the
    steps). Then the step's work grew (a longer sequence, a bigger batch), not one call's wait."""
    steps = distinct(step[keep])
    took_all = np.bincount(np.searchsorted(steps, step[keep]), weights=self_ns[keep], minlength=steps.size)

    def without(cells: np.ndarray) -> np.ndarray:
        return took_all - np.bincount(np.searchsorted(steps, step[cells]), weights=self_ns[cells], minlength=steps.size)

    # Leave out every step's rows of the stalled calls (each call once, whichever steps it stalled in).
    took = without(np.unique(np.concatenate([cells[stalled[of_n]].ravel() for of_n, cells in cells_of])))
    if float(np.median(took)) < STALL_MIN_NS:
        # The other calls are too little work to tell growth from noise (every substantial call of the
        # step is a suspect). Leave out only the longest suspected call: the other suspects then
        # witness for each other, and a step whose calls all grew is not a stall.
        worst = max(((of_n[i], cells[i]) for of_n, cells in cells_of for i in np.flatnonzero(stalled[of_n])),
                    key=lambda c: self_ns[at[c[0]]])
        took = without(worst[1])
    grew = took > STEP_WORK_RATIO * float(np.median(took))
    return grew[np.searchsorted(steps, step[at])]


def slow_gemm_calls(frame: Frame, rows: np.ndarray, self_ns: np.ndarray) -> Stalls:
    """Of these op rows (with their self times), the matrix products that ran slower than
    ``MIN_GEMM_GFLOPS`` by at least ``STALL_MIN_NS`` (module doc); ``median_ns`` is the time that rate
    allows them. Judged only where shapes and element types are recorded."""
    codes = [c for c, n in enumerate(frame.names) if n in GEMM_FLOP_OPS]
    at = np.flatnonzero(member_mask(frame.name_code[rows], codes) & (self_ns >= STALL_MIN_NS)) if codes \
        else np.zeros(0, np.int64)
    if not at.size:
        return Stalls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64), 0)
    dims_code, dims = input_dims(frame.table, rows[at])
    types = pc.extract_regex(args_text(frame.table, rows[at]), INPUT_TYPES).to_pylist()
    flops = np.zeros(at.size, np.float64)
    for i, row in enumerate(rows[at].tolist()):
        name = frame.name(row)
        if types[i] is not None and float_factors(name, types[i]["types"]):
            flops[i] = gemm_flops(name, dims[dims_code[i]]) or 0.0
    allowed = flops / MIN_GEMM_GFLOPS  # ns
    slow = (flops > 0) & (self_ns[at] - allowed >= STALL_MIN_NS)
    hit = at[slow]
    return Stalls(rows[hit], self_ns[hit], allowed[slow], 0, np.ones(hit.size, bool))


def slow_pass_calls(frame: Frame, rows: np.ndarray, self_ns: np.ndarray) -> Stalls:
    """Of these op rows of ``PASS_CLASSES`` (with their self times), those that took ``STALL_MIN_NS``
    beyond ``NS_PER_ELEMENT`` an element of their recorded tensor inputs (module doc); ``median_ns``
    is the time that allows. Judged only where the inputs' shapes are recorded."""
    none = Stalls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64), 0)
    names = {c: frame.names[c] for c in distinct(frame.name_code[rows]).tolist() if c >= 0}
    judged = [c for c, n in names.items() if not SIZED_BY_ARGS.match(n) or PASS_BACKWARD.match(n)]
    at = np.flatnonzero(member_mask(frame.name_code[rows], judged)) if judged else np.zeros(0, np.int64)
    if not at.size:
        return none
    dims_code, dims = input_dims(frame.table, rows[at])
    elements = np.array([_pass_elements(text) for text in dims], np.float64)[dims_code]
    allowed = elements * NS_PER_ELEMENT
    slow = (elements > 0) & (self_ns[at] - allowed >= STALL_MIN_NS)
    hit = at[slow]
    return Stalls(rows[hit], self_ns[hit], allowed[slow], 0, np.ones(hit.size, bool))


def _pass_elements(dims_text: str) -> int:
    """The elements a pass over these recorded ``Input Dims`` touches: the tensor inputs' (tensor lists
    included), or their broadcast shape's where larger; 0 when no tensor's shape is recorded."""
    try:
        dims = json.loads(dims_text) if dims_text else []
    except ValueError:
        return 0
    shapes: list[list[int]] = []

    def collect(item: object) -> None:
        if isinstance(item, list) and item and all(isinstance(d, int) for d in item):
            shapes.append(item)  # a tensor's shape ([] is a scalar or not a tensor: not counted)
        elif isinstance(item, list):
            for sub in item:
                if isinstance(sub, list):
                    collect(sub)

    for one in dims if isinstance(dims, list) else []:
        collect(one)
    if not shapes:
        return 0
    total = sum(int(np.prod(s)) for s in shapes)
    try:
        total = max(total, int(np.prod(np.broadcast_shapes(*(tuple(s) for s in shapes)))))
    except ValueError:
        pass  # not broadcast together (cat's inputs, a tensor list)
    return total


def float_factors(name: str, types_text: str) -> bool:
    """Whether both factors of this product are float or double."""
    factors = factor_types(name, types_text)
    return factors is not None and all(t in GEMM_TYPES for t in factors)


__all__ = ["INPUT_TYPES", "MIN_GEMM_GFLOPS", "NS_PER_ELEMENT", "STALL_MIN_NS", "STALL_RATIO", "CallSeries", "Stalls", "call_series", "compared_calls", "compute_calls",
           "factor_types", "float_factors", "slow_gemm_calls", "slow_pass_calls", "stalled_calls"]
