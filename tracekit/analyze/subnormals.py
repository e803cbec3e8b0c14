"""Matrix products that slow down over the steps on the same inputs: subnormal floats.

A loop's k-th call of a matrix product (``aten::mm``, ``addmm``, ``bmm``...) does the same
arithmetic in every step where its input shapes stay the same, and BLAS runs it at the same rate,
whatever the values, with one exception: on x86 cores (and without flush-to-zero on others) a
multiply whose operand or result is *subnormal* (below float32's smallest normal, 1.2e-38) takes a
microcode path tens of times slower. Values drift there as a model trains: gradients that vanish
through many layers, activations of a saturated layer, an optimizer's moments of unused weights.
PyTorch leaves subnormals on (TensorFlow sets flush-to-zero in its threads). PyTorch 2.13, 2-core
Xeon: six Linear+GELU layers of 512 trained with AdamW on one batch went from 11-16 ms a step to
32-84 ms within 16 steps, the backward ``aten::mm`` of 64x512 by 512x512 from 0.20 to 5.0 ms a
call (170 to 7 GFLOP/s) while the forward products stayed at 0.3 ms; ``torch.set_flush_denormal(True)``
kept the steps at 14 ms.

The evidence, each part checked on the trace (CPU-only traces, ``record_shapes=True``):
* the same calls (``stalls.call_series``: the k-th call of a name on a thread, in steps that make
  the same number of such calls) with the same recorded shapes in every step compared, and float or
  double factors;
* the steps ranked by the time of those calls: a product's call in the slowest third of the steps
  (its median there) took ``SLOWED_RATIO`` times or more its time in the fastest third;
* its added time exceeds what page faults of everything it touches could cost
  (``FAULT_NS_PER_PAGE`` a 4 KiB page of its inputs and output: a product writing a fresh output
  pays those, and ``aten::mm``'s 1 MB weight gradient at most ~1.3 ms);
* the slowed products add at least half of what the compared calls add in the slow steps, at
  least ``MIN_EXCESS_NS`` a step, and slowed ``CONCENTRATION`` times more than the rest of those
  calls did (a slower machine, a busy core or lower clocks slow every op alike).
* each slowed product took ``SLOWED_RATIO`` times its fast time in ``MIN_SLOW_STEPS`` steps or more;
* the steps grew with them: the slowest third's median step is longer than the fastest third's by
  ``STEP_GROWTH_SHARE`` of what the slowed products add a step or more;
* in the slow steps the slowed products ran alone: other threads of the process ran ops during less
  than ``MAX_CONCURRENT_SHARE`` of their time. Two threads' products share the cores (each calls the
  same intra-op pool), and that slows them the way subnormals do: a TorchScript model whose
  ``torch.jit.fork`` branch ran beside the main one on 2 cores (tests/data/cpu/fork_branches) had a
  main-thread ``aten::addmm`` take 0.18 ms a call in the fastest steps and 2.7 ms in the slowest, other
  threads' ops running during 92% of it there, while the steps stayed at 20.4-20.8 ms, on the same
  input every step.
A single slow call in one step is a stall (``tracekit.analyze.stalls``), not this: a Hugging Face BERT's
inference loop (the same input every step, so the same values) had one ``aten::addmm`` wait 4.3 ms
in the last of 4 steps (0.25 ms in the others), and the report named it both a stall and a product
slowed by subnormals, with the flush remedy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from tracekit.analyze import intervals
from tracekit.analyze.breakdown import op_self_time
from tracekit.analyze.classify import RowClasses, short_name
from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame
from tracekit.analyze.stalls import INPUT_TYPES, compared_calls, float_factors
from tracekit.analyze.top_ops import GEMM_FLOP_OPS, args_text, compact_shapes, gemm_shape, input_dims
from tracekit.ingest.links import member_mask

SLOWED_RATIO = 4.0
CONCENTRATION = 2.0
MIN_EXCESS_NS = 500_000
MIN_GROWTH_SHARE = 0.5
MIN_STEPS = 4
MIN_SLOW_STEPS = 2  # steps a product must be slowed in (module doc)
STEP_GROWTH_SHARE = 0.5  # of the slowed products' added time a step that the steps must grow by
MAX_CONCURRENT_SHARE = 0.5  # of the slowed products' slow-step time other threads may run ops in
FAULT_NS_PER_PAGE = 5_000  # generous: a minor fault with its page zeroing takes 1-3 µs, in a VM too
PAGE_BYTES = 4096
_ELEMENT_BYTES = {"float": 4, "double": 8}


@dataclass(frozen=True)
class SlowingProducts:
    """Matrix products of the steps compared that slowed on the same inputs (module doc). Times in ns.

    calls: slowed product calls a step; worst: the one that slowed most (label with its shapes),
    its time in the fast and in the slow steps and its GFLOP/s in each; fast_step_ns, slow_step_ns:
    the median step of the fastest and of the slowest third; others_ratio, slowed_ratio: how much the
    other compared calls and the slowed products took in the slow steps against the fast ones;
    excess_ns: what the slowed products took, over all the steps compared, beyond their fast time;
    steps_ns: those steps' total; first_slow_step: the first step whose slowed products took twice
    their fast time."""

    calls: int
    worst: str
    worst_fast_ns: float
    worst_slow_ns: float
    worst_fast_gflops: float
    worst_slow_gflops: float
    fast_step_ns: float
    slow_step_ns: float
    slowed_ratio: float
    others_ratio: float
    excess_ns: int
    steps_ns: int
    first_slow_step: int

    @property
    def share(self) -> float:
        return self.excess_ns / self.steps_ns if self.steps_ns else 0.0

    def evidence(self) -> str:
        return (f"the same matrix products on the same shapes slowed down over the steps: {self.calls} call"
                f"{'s' if self.calls > 1 else ''} a step took {self.slowed_ratio:.1f}x as long in the slowest steps as in "
                f"the fastest ({self.worst}: {_ms(self.worst_fast_ns)} -> {_ms(self.worst_slow_ns)}, "
                f"{self.worst_fast_gflops:,.0f} -> {self.worst_slow_gflops:,.1f} GFLOP/s; from step {self.first_slow_step}), "
                f"while the step's other compute calls took {self.others_ratio:.1f}x; steps of {_ms(self.fast_step_ns)} became "
                f"{_ms(self.slow_step_ns)}, and at their fast time the products would save {self.share:.0%} of the steps' "
                "time. BLAS runs a product of the same shapes at the same rate whatever the values, but for subnormal "
                "(denormal) floats: on x86 cores each multiply involving one takes a slow path, and values drift "
                "there as gradients or activations shrink")

    def remedy(self) -> str:
        return ("flush subnormal floats to zero: torch.set_flush_denormal(True) once at start-up (x86 CPUs with SSE3, "
                "and ARM): products on them then run at full rate, and values below float32's smallest normal "
                "(1.2e-38) read as 0, which training does not notice (six Linear+GELU layers of 512 trained with AdamW "
                "on a CPU: 56-69 ms a step once subnormal, 14 ms with it)")

    def as_dict(self) -> dict[str, object]:
        return {"calls_per_step": self.calls, "worst": self.worst, "worst_fast_ns": self.worst_fast_ns,
                "worst_slow_ns": self.worst_slow_ns, "fast_step_ns": self.fast_step_ns,
                "slow_step_ns": self.slow_step_ns, "slowed_ratio": self.slowed_ratio,
                "others_ratio": self.others_ratio, "excess_ns": self.excess_ns, "share": self.share,
                "first_slow_step": self.first_slow_step}


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms" if ns >= 1e6 else f"{ns / 1e3:,.0f} µs"


def slowing_products(frame: Frame, classes: RowClasses, steps: list[int]) -> SlowingProducts | None:
    """The matrix products of ``steps`` (the steps compared: warm-up and cut-short ones left out)
    that slowed on the same inputs, as the module doc defines it; None when none did or the trace
    cannot show it (a GPU trace, fewer than ``MIN_STEPS`` steps, shapes or types not recorded)."""
    steps = sorted({s for s in steps if s >= 0})  # the matrix's columns, in step order
    codes = [c for c, n in enumerate(frame.names) if n in GEMM_FLOP_OPS]
    if len(steps) < MIN_STEPS or not codes or frame.rows(*GPU_BUSY_KINDS).size:
        return None
    cs = compared_calls(frame, classes, steps)
    # The matrix: calls (series, k) x the steps, of the series with a call in every step compared.
    # ... and the same number of calls in each (a series whose count varies is no steps x calls matrix).
    full = np.flatnonzero((cs.steps_with == len(steps)) & cs.comparable[cs.first])
    if not full.size:
        return None
    per_step = cs.calls[full]
    call_series_of = np.repeat(full, per_step)
    k = np.arange(per_step.sum()) - np.repeat(np.cumsum(per_step) - per_step, per_step)
    cells = cs.first[call_series_of, None] + np.arange(len(steps)) * cs.calls[call_series_of, None] + k[:, None]
    took = op_self_time(frame, cs.rows[cells.ravel()]).reshape(cells.shape).astype(np.float64)
    order = np.argsort(took.sum(axis=0), kind="stable")  # steps, fastest first (columns are steps in order)
    third = max(1, len(steps) // 3)
    fast = np.median(took[:, order[:third]], axis=1)
    slow = np.median(took[:, order[-third:]], axis=1)
    product = member_mask(frame.name_code[cs.rows[cells[:, 0]]], codes)
    # Slowed in two steps or more: in one step alone (the slowest third of 4 or 5 steps is one) a call
    # that waited is a stall (``tracekit.analyze.stalls``), and values do not turn subnormal for one step.
    slowed_in = (took >= SLOWED_RATIO * fast[:, None]).sum(axis=1)
    candidate = np.flatnonzero(product & (slow >= SLOWED_RATIO * fast) & (slow - fast >= MIN_EXCESS_NS / 100)
                               & (slowed_in >= MIN_SLOW_STEPS))
    if not candidate.size:
        return None
    slowed = _same_float_products(frame, cs.rows, cells[candidate], slow[candidate] - fast[candidate])
    chosen = candidate[slowed]
    added = slow - fast
    if not chosen.size or added[chosen].sum() < MIN_EXCESS_NS or added[chosen].sum() < MIN_GROWTH_SHARE * added.sum():
        return None
    rest = np.ones(len(fast), bool)
    rest[chosen] = False
    slowed_ratio = float(slow[chosen].sum() / max(fast[chosen].sum(), 1.0))
    others_ratio = float(slow[rest].sum() / fast[rest].sum()) if rest.any() and fast[rest].sum() > 0 else 1.0
    if slowed_ratio < CONCENTRATION * others_ratio:
        return None
    slow_steps = order[-third:]
    if _steps_grew(frame, steps, order, third) < STEP_GROWTH_SHARE * added[chosen].sum():
        return None
    slow_cells = cs.rows[cells[chosen][:, slow_steps].ravel()]
    if _concurrent_share(frame, slow_cells) >= MAX_CONCURRENT_SHARE:
        return None
    return _describe(frame, cs.rows, cells, chosen, took, fast, slow, order, third, steps, slowed_ratio, others_ratio)


def _step_durations(frame: Frame, steps: list[int]) -> np.ndarray:
    step_rows = frame.rows("step")
    marked = {int(s): int(d) for s, d in zip(frame.step[step_rows].tolist(), frame.dur[step_rows].tolist(), strict=True)}
    return np.array([marked.get(s, 0) for s in steps], np.float64)


def _steps_grew(frame: Frame, steps: list[int], order: np.ndarray, third: int) -> float:
    """How much longer the slowest third's median step (by the compared calls' time) is than the fastest third's."""
    durations = _step_durations(frame, steps)
    return float(np.median(durations[order[-third:]]) - np.median(durations[order[:third]]))


def _concurrent_share(frame: Frame, rows: np.ndarray) -> float:
    """Of the time of ``rows`` (ops, one thread's or several), the share during which ops of other
    threads of the same process run."""
    ops = frame.rows("cpu_op")
    total = int(frame.dur[rows].sum())
    if not total or ops.size == 0:
        return 0.0
    covered = 0
    for key in np.unique(frame.thread_key[rows]).tolist():
        mine = rows[frame.thread_key[rows] == key]
        others = ops[(frame.thread_key[ops] != key) & (frame.pid[ops] == frame.pid[mine[0]])]
        if others.size:
            covered += int(intervals.overlap_per_interval(frame.start[mine], frame.end[mine],
                                                          frame.start[others], frame.end[others]).sum())
    return covered / total


def _same_float_products(frame: Frame, rows: np.ndarray, cells: np.ndarray, added: np.ndarray) -> np.ndarray:
    """Per candidate call (its rows in every step): whether its shapes are recorded and the same in
    every step, its factors float or double, and its added time beyond what page faults of its
    inputs and output could cost."""
    n, steps = cells.shape
    dims_code, dims = input_dims(frame.table, rows[cells.ravel()])
    dims_code = dims_code.reshape(n, steps)
    same = (dims_code == dims_code[:, :1]).all(axis=1)
    types = pc.extract_regex(args_text(frame.table, rows[cells[:, 0]]), INPUT_TYPES).to_pylist()
    ok = np.zeros(n, bool)
    for i in np.flatnonzero(same).tolist():
        row, text, typed = int(rows[cells[i, 0]]), dims[dims_code[i, 0]], types[i]
        name = frame.name(row)
        shape = gemm_shape(name, text)
        if not text or shape is None or typed is None or not float_factors(name, typed["types"]):
            continue
        b, m, k, nn = shape
        element = 8 if '"double"' in typed["types"] else 4
        touched = (b * m * k + b * k * nn + b * m * nn) * element
        ok[i] = added[i] > FAULT_NS_PER_PAGE * touched / PAGE_BYTES
    return ok


def _describe(frame: Frame, rows: np.ndarray, cells: np.ndarray, chosen: np.ndarray, took: np.ndarray,
              fast: np.ndarray, slow: np.ndarray, order: np.ndarray, third: int, steps: list[int],
              slowed_ratio: float, others_ratio: float) -> SlowingProducts:
    worst = int(chosen[np.argmax(slow[chosen] - fast[chosen])])
    row = int(rows[cells[worst, 0]])
    _, dims = input_dims(frame.table, np.array([row]))
    shape = gemm_shape(frame.name(row), dims[0])
    flop = 2.0 * float(np.prod(shape)) if shape else 0.0
    durations = _step_durations(frame, steps)
    excess = np.maximum(took[chosen] - fast[chosen, None], 0).sum()
    per_step = took[chosen].sum(axis=0)
    first = next((s for s, t in zip(steps, per_step.tolist(), strict=True) if t >= 2 * fast[chosen].sum()), steps[0])
    return SlowingProducts(
        calls=int(chosen.size), worst=f"{short_name(frame.name(row))} ({compact_shapes(dims[0])})",
        worst_fast_ns=float(fast[worst]), worst_slow_ns=float(slow[worst]),
        worst_fast_gflops=flop / fast[worst] if fast[worst] > 0 else 0.0,
        worst_slow_gflops=flop / slow[worst] if slow[worst] > 0 else 0.0,
        fast_step_ns=float(np.median(durations[order[:third]])), slow_step_ns=float(np.median(durations[order[-third:]])),
        slowed_ratio=slowed_ratio, others_ratio=others_ratio, excess_ns=int(excess), steps_ns=int(durations.sum()),
        first_slow_step=int(first))
