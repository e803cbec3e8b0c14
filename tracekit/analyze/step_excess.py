"""Why a step left out is long: what in it runs longer than in the median step.

A step far from the others is left out of the verdict (``tracekit.analyze.steps``) as warm-up or an
outlier, and the report said only how far: "step 4 (31.7 ms, 23.6x the median): outlier". Each step's
top-level rows on its own thread (the step row's children: ops, ranges such as a DataLoader's
``__next__``, runtime calls) are summed by name, and so is the time no such row covers (``NO_OP``:
Python, or work the profiler did not trace); a name's time in the median step is the median over the
steps used (0 where a step lacks it). A flagged step's excess is what each name (and the uncovered
time) took beyond that: the largest ones, each 10% or more of the step's time beyond the median step,
are said. A DataLoader iterated for 3 epochs with its workers not kept (``persistent_workers=False``)
read so: every 4th step 30 ms against a median of 1.3 ms, and its excess is the loader's ``__next__``
(19 ms: the old iterator's workers shutting down, the new one's first batch) and 11.5 ms outside any
traced call (the new workers starting).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.analyze.frame import Frame

NO_OP = "outside any traced call"  # Python, or work the profiler did not trace
MIN_EXCESS_SHARE = 0.1  # of the step's time beyond the median step: smaller parts are not said
MAX_PARTS = 3


@dataclass(frozen=True)
class Excess:
    """One part of a step's time beyond the median step's: ``name`` (a top-level row's, or ``NO_OP``)
    took ``extra_ns`` more than in the median step, in ``calls`` calls (0 for ``NO_OP``)."""

    name: str
    extra_ns: int
    calls: int

    def describe(self) -> str:
        calls = f" ({self.calls} call{'s' if self.calls != 1 else ''})" if self.calls else ""
        extra = f"{self.extra_ns / 1e6:,.1f} ms" if self.extra_ns >= 1_000_000 else f"{self.extra_ns / 1e3:,.0f} µs"
        return f"{self.name} +{extra}{calls}"

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "extra_ns": self.extra_ns, "calls": self.calls}


def step_excess(frame: Frame, numbers: np.ndarray, durations: np.ndarray, used: np.ndarray,
                flagged: np.ndarray) -> dict[int, list[Excess]]:
    """Per flagged step number, its largest parts beyond the median step (module doc). ``numbers``,
    ``durations``, ``used``, ``flagged``: one entry per step, aligned."""
    if not flagged.any() or not used.any():
        return {}
    is_step = frame.mask("step")
    parent = frame.parent
    children = np.flatnonzero((parent >= 0) & is_step[np.maximum(parent, 0)])
    children = children[frame.thread_key[children] == frame.thread_key[parent[children]]]
    if not children.size:  # steps with nothing inside them: no part to name
        return {}
    order = np.argsort(numbers, kind="stable")
    at = np.minimum(np.searchsorted(numbers[order], frame.step[children]), numbers.size - 1)
    step_of = order[at]
    keep = numbers[step_of] == frame.step[children]
    children, step_of = children[keep], step_of[keep]
    n_steps = numbers.size
    codes, name_of = np.unique(frame.name_code[children], return_inverse=True)
    n_names = codes.size + 1  # the last: NO_OP
    time = np.zeros((n_steps, n_names), np.int64)
    calls = np.zeros((n_steps, n_names), np.int64)
    np.add.at(time, (step_of, name_of), np.maximum(frame.dur[children], 0))
    np.add.at(calls, (step_of, name_of), 1)
    # A step of several rows (one per device in TF's XSpace) counts its own span once: its duration.
    time[:, -1] = np.maximum(durations - time[:, :-1].sum(axis=1), 0)
    baseline = np.median(time[used], axis=0)
    median_step = float(np.median(durations[used]))
    names = [frame.names[int(c)] for c in codes.tolist()] + [NO_OP]
    out: dict[int, list[Excess]] = {}
    for i in np.flatnonzero(flagged).tolist():
        beyond = float(durations[i]) - median_step
        if beyond <= 0:
            continue
        extra = time[i] - baseline
        parts = [Excess(names[j], int(extra[j]), int(calls[i, j]) if j < n_names - 1 else 0)
                 for j in np.argsort(-extra, kind="stable")[:MAX_PARTS].tolist() if extra[j] >= MIN_EXCESS_SHARE * beyond]
        if parts:
            out[int(numbers[i])] = parts
    return out
