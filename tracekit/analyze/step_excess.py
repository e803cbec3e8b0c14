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
                flagged: np.ndarray, most: int = 8) -> dict[int, list[Excess]]:
    """Per flagged step number (the first ``most`` in time order), its largest parts beyond the median
    step (module doc). ``numbers``, ``durations``, ``used``, ``flagged``: one entry per step, aligned."""
    told = np.flatnonzero(flagged)[:most]
    if not told.size or not used.any():
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
    code = frame.name_code[children]
    dur = np.maximum(frame.dur[children], 0)
    # A step of several rows (one per device in TF's XSpace) counts its own span once: its duration.
    covered = np.bincount(step_of, weights=dur, minlength=numbers.size)
    outside = np.maximum(durations - covered, 0)
    median_step = float(np.median(durations[used]))
    used_steps = np.flatnonzero(used)
    out: dict[int, list[Excess]] = {}
    for i in told.tolist():
        beyond = float(durations[i]) - median_step
        if beyond <= 0:
            continue
        mine = step_of == i
        names, index = np.unique(code[mine], return_inverse=True)
        time = np.bincount(index, weights=dur[mine], minlength=names.size)
        calls = np.bincount(index, minlength=names.size)
        typical = _median_per_name(step_of, code, dur, used_steps, names)
        extra = np.append(time - typical, outside[i] - np.median(outside[used]))
        labels = [frame.names[int(c)] for c in names.tolist()] + [NO_OP]
        parts = [Excess(labels[j], int(extra[j]), int(calls[j]) if j < names.size else 0)
                 for j in np.argsort(-extra, kind="stable")[:MAX_PARTS].tolist() if extra[j] >= MIN_EXCESS_SHARE * beyond]
        if parts:
            out[int(numbers[i])] = parts
    return out


def _median_per_name(step_of: np.ndarray, code: np.ndarray, dur: np.ndarray, used_steps: np.ndarray,
                     names: np.ndarray) -> np.ndarray:
    """Per name code of ``names`` (ascending), the median over the steps used of its time in a step, a
    step without it counting 0; from the (step, name) pairs present only, so memory follows the rows,
    not steps x names."""
    pick = np.isin(step_of, used_steps) & np.isin(code, names)
    if not pick.any():
        return np.zeros(names.size)
    name_at = np.searchsorted(names, code[pick])
    pairs, index = np.unique(np.stack([name_at, step_of[pick]]), axis=1, return_inverse=True)
    sums = np.bincount(index.ravel(), weights=dur[pick], minlength=pairs.shape[1])
    out = np.zeros(names.size)
    bounds = np.searchsorted(pairs[0], np.arange(names.size + 1))
    n = used_steps.size
    for j in range(names.size):
        present = np.sort(sums[bounds[j]:bounds[j + 1]])
        zeros = n - present.size  # the steps without it come first in order, all 0
        middle = [0.0 if k < zeros else float(present[k - zeros]) for k in ((n - 1) // 2, n // 2)]
        out[j] = sum(middle) / 2
    return out
