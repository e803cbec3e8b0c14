"""Steps you can trust: per-step durations, their spread, and the warm-up or outlier steps to leave out.

A step is *far* from the others when it takes more than 1.5x the median step **and** more than the
median plus three robust standard deviations (1.4826 x the median absolute deviation); the first or
last step is ``cut short`` when it takes less than half the median and holds fewer than 3/4 of the
median step's work events (ops, API calls, GPU activity: the profiler started or stopped inside it; a
short step with all its work ran fast, whole, and stays). Long steps at the start
of the trace are warm-up (graph building, compilation, first allocations, cuDNN autotuning); long
steps elsewhere are outliers, unless they are the loop's own periodic work: where the long steps all
fall on every k-th step and every step on that phase runs 1.2x or more of the other steps' work events
(an optimizer step after k micro-batches of gradient accumulation: every 4th step 2.5-5.6x the others
in tests/data/cpu/grad_accumulation), they are kept, and the report says per-step figures average
over the cycle (``StepStats.cycle``, ``cycle_steps``), or where two or more and over a fifth of the
steps (after the warm-up) are far: too many to be accidents, they are the loop's spread (batches of
varying sequence length; ``tests/data/cpu/variable_length``: 4 of 12 steps at 2-3.5x the median held
most of the loop's time), kept and said (``StepStats.far_kept``). Of two steps, the first is warm-up when it takes more than twice the
second (a program profiled for two calls, the first doing the one-time work), unless the second
holds no event, which makes it cut short (torch.profiler's trailing step, opened by the loop's last
``prof.step()``); with fewer steps, or two the other way round, nothing is judged. ``skip`` marks the first N steps warm-up
whatever their duration; ``keep_all`` keeps every step (flags are still reported).

Evaluation steps among training steps are set apart first (status ``evaluation``, left out): where
two or more steps run backward or optimizer work (``TRAINING_WORK``: autograd nodes, torch.optim's
steps, TF's gradient ops and optimizer updates) and fewer steps, but two or more, run none, those are
the validation batches (Keras's fit with validation data calls its train and test functions, both
named ``multi_step_on_iterator``, into one stream of steps); where they are as many or more (an RL
loop's rollout steps between its updates) nothing is set apart. The other rules judge the rest among
themselves.

Headline numbers and verdicts use the steady steps; the spread (min / median / max and the
coefficient of variation) is of the steady steps too, so a comparison can say when a difference is
within noise: ``compare`` claims one only when the bootstrap interval of the ratio
(``speedup_interval``) excludes 1 and the ratio is beyond twice the larger coefficient of variation
(steps inside one capture vary less than separate captures do).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema
from tracekit.analyze.frame import Frame
from tracekit.analyze.step_excess import Excess, step_excess
from tracekit.ingest.links import member_mask

FAR_RATIO = 1.5
ROBUST_SIGMAS = 3.0
SHORT_RATIO = 0.5
CUT_EVENTS_RATIO = 0.75  # a step cut short holds fewer events than this share of the median step's
MIN_STEPS_TO_JUDGE = 3
# Of two steps, the first is warm-up when it takes this many times the second (a spread needs three).
WARM_UP_PAIR_RATIO = 2.0
# Long steps that recur every k steps and run this many times the other steps' work events are the
# loop's periodic work (tracekit.analyze.steps._cycle), kept.
CYCLE_EVENTS_RATIO = 1.2
MIN_CYCLE_STEPS = 2
# Far steps beyond this share of the steps (after the warm-up) are not accidents but the loop's spread
# (batches of varying sequence length): kept, and the spread said.
MAX_OUTLIER_SHARE = 0.2
MIN_FAR_KEPT = 2  # ... and at least this many: one far step in four may still be an accident
MAX_LEFT_OUT_SAID = 8  # steps left out told one by one; the others counted


@dataclass
class StepStats:
    """Per-step durations and which steps the headline numbers use. Times in ns.

    steps: one row per marked step: step (its number in the trace), start_ns, dur_ns, status
        (``steady``, ``warm-up``, ``outlier`` or ``cut short``), used (whether headline numbers include it).
    """

    steps: pd.DataFrame
    keep_all: bool = False
    origin: str = ""  # where the steps come from when the trace does not mark them ("" : step markers)
    stalled_ns: dict[int, int] = field(default_factory=dict)  # step number: time lost in stalled op calls
    # Training steps each step holds: a Keras call running steps_per_execution batches (keras_batches_per_call).
    batches: int = 1
    # Every cycle-th step runs extra work of the loop's own (gradient accumulation's optimizer step): kept.
    cycle: int = 0
    cycle_steps: list[int] = field(default_factory=list)  # the step numbers that run it
    # Steps far from the median but too many to be outliers (MAX_OUTLIER_SHARE): kept, and said.
    far_kept: list[int] = field(default_factory=list)
    # step number: what in a warm-up or outlier step runs longer than in the median step (step_excess).
    excess: dict[int, list[Excess]] = field(default_factory=dict)
    # compare: another trace of the comparison runs periodic work every ``window`` steps, so this one is
    # read by windows of as many steps too (``comparable``), both alike.
    window: int = 0

    def describe_spread(self) -> str | None:
        """The far steps kept because there are too many of them to be accidents; None without."""
        if not self.far_kept:
            return None
        s = self.steps
        far = s[s.step.isin(self.far_kept)]
        med = self.median_ns
        low, high = float(far.dur_ns.min()) / med, float(far.dur_ns.max()) / med
        span = f"{low:.1f}x" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}-{high:.1f}x"
        judged = int((s.status != "evaluation").sum())
        return (f"{len(far)} of {judged} steps take {span} the median step: too many to be accidents "
                f"(the work differs from step to step, as with batches of varying sequence length), so they are kept "
                f"in the verdict; per-step figures are medians over all of them")

    @property
    def comparable(self) -> np.ndarray:
        """The step times to compare traces by: the steps used, or with a cycle each whole cycle's mean
        step (k consecutive used steps ending at one that runs the periodic work): the median step of a
        gradient-accumulation loop runs no optimizer, and fused=True would not move it."""
        if not self.cycle and self.window > 1:
            used = self.used.astype(np.float64)
            whole = used.size // self.window * self.window
            return used[:whole].reshape(-1, self.window).mean(axis=1) if whole else used
        if not self.cycle:
            return self.used
        s = self.steps.reset_index(drop=True)
        ends = np.flatnonzero(s.step.isin(self.cycle_steps).to_numpy())
        used, dur = s.used.to_numpy(), s.dur_ns.to_numpy(np.float64)
        means = [dur[e - self.cycle + 1:e + 1].mean() for e in ends.tolist()
                 if e - self.cycle + 1 >= 0 and used[e - self.cycle + 1:e + 1].all()]
        return np.asarray(means, np.float64) if means else self.used

    @property
    def step_time_ns(self) -> float:
        """The median of ``comparable``: the step time a comparison reads."""
        values = self.comparable
        return float(np.median(values)) if values.size else 0.0

    @property
    def comparable_cv(self) -> float:
        d = self.comparable.astype(float)
        return float(d.std(ddof=1) / d.mean()) if d.size > 1 and d.mean() > 0 else 0.0

    def describe_cycle(self) -> str | None:
        """The periodic long steps kept in the verdict, said once; None without such a cycle."""
        if not self.cycle:
            return None
        s = self.steps
        inside = s[s.used]
        short = float(np.median(inside.dur_ns)) if len(inside) else 0.0
        period = self.cycle
        nth = {2: "2nd", 3: "3rd"}.get(period, f"{period}th")
        return (f"every {nth} step runs longer than the others and more ops (the loop's own periodic work, as an "
                f"optimizer step after {period} micro-batches of gradient accumulation): kept in the verdict, so "
                f"per-step figures average over the cycle; the median step ({short / 1e6:,.2f} ms) is one without it")

    @property
    def used(self) -> np.ndarray:
        return self.steps.loc[self.steps.used, "dur_ns"].to_numpy(np.int64)

    @property
    def left_out(self) -> pd.DataFrame:
        return self.steps[~self.steps.used]

    @property
    def flagged(self) -> pd.DataFrame:
        return self.steps[self.steps.status != "steady"]

    @property
    def median_ns(self) -> float:
        return float(np.median(self.used)) if self.used.size else 0.0

    @property
    def min_ns(self) -> int:
        return int(self.used.min()) if self.used.size else 0

    @property
    def max_ns(self) -> int:
        return int(self.used.max()) if self.used.size else 0

    @property
    def cv(self) -> float:
        """Coefficient of variation of the steps used (standard deviation / mean); 0 with one step."""
        d = self.used.astype(float)
        return float(d.std(ddof=1) / d.mean()) if d.size > 1 and d.mean() > 0 else 0.0

    def used_step_numbers(self) -> list[int]:
        return [int(s) for s in self.steps.loc[self.steps.used, "step"]]

    def describe_left_out(self) -> list[str]:
        """One phrase per flagged step, e.g. 'step 0 (637.0 ms, 9.8x the median): warm-up', and one for
        the evaluation steps together."""
        med = self.median_ns or (float(np.median(self.steps.dur_ns)) if len(self.steps) else 0.0)
        out = []
        evaluation = self.flagged[self.flagged.status == "evaluation"]
        if len(evaluation):
            numbers = evaluation.step.astype(int).tolist()
            shown = ", ".join(str(n) for n in numbers[:8]) + (f" and {len(numbers) - 8} more" if len(numbers) > 8 else "")
            out.append(f"{len(numbers)} evaluation step{'s' if len(numbers) > 1 else ''} ({shown}; median "
                       f"{float(np.median(evaluation.dur_ns)) / 1e6:,.2f} ms): no backward or optimizer work, unlike "
                       "the training steps (validation batches, Keras's test function)")
        others = self.flagged[self.flagged.status != "evaluation"]
        for r in others.head(MAX_LEFT_OUT_SAID).itertuples():
            ratio = f", {r.dur_ns / med:.1f}x the median" if med else ""
            lost = self.stalled_ns.get(int(r.step), 0)
            note = f"; {lost / 1e6:,.2f} ms of it in stalled op calls" if lost else ""
            parts = self.excess.get(int(r.step))
            beyond = f"; beyond the median step: {', '.join(p.describe() for p in parts)}" if parts else ""
            out.append(f"step {r.step} ({r.dur_ns / 1e6:,.1f} ms{ratio}): {r.status}{note}{beyond}")
        if len(others) > MAX_LEFT_OUT_SAID:
            out.append(f"{len(others) - MAX_LEFT_OUT_SAID} more (the JSON report lists every step)")
        return out


def driving_threads(frame: Frame, rows: np.ndarray) -> np.ndarray:
    """The thread keys that drive the work: those holding a step marker; without steps, the thread
    of the longest of ``rows``. A wait on a driving thread for other threads is the step waiting;
    worker threads run side by side, so one is not said to wait for another."""
    steps = frame.rows("step")
    if steps.size:
        return np.unique(frame.thread_key[steps])
    if not rows.size:
        return np.zeros(0, np.int64)
    return frame.thread_key[rows[[int(np.argmax(frame.dur[rows]))]]]


def step_durations(frame: Frame) -> pd.DataFrame:
    """Each marked step's extent: step, start_ns, dur_ns (first start to last end of its step ranges)."""
    rows = frame.rows("step")
    if rows.size == 0:
        return pd.DataFrame({"step": pd.Series([], dtype=np.int64), "start_ns": pd.Series([], dtype=np.int64),
                             "dur_ns": pd.Series([], dtype=np.int64)})
    rows = rows[frame.step[rows] >= 0]
    steps, which = np.unique(frame.step[rows], return_inverse=True)  # (numpy: a pandas groupby's first call took 10 ms)
    start = np.full(steps.size, np.iinfo(np.int64).max)
    end = np.full(steps.size, np.iinfo(np.int64).min)
    np.minimum.at(start, which, frame.start[rows])
    np.maximum.at(end, which, frame.end[rows])
    return pd.DataFrame({"step": steps.astype(np.int64), "start_ns": start, "dur_ns": end - start})


# The events a step's work leaves: its ops, API calls and GPU activity, not the Python stacks and ranges
# that one-time work adds (a JAX step that compiles again records ~100 Python frames and compiler ranges
# more than one that does not, and the fast steady step read as cut short beside it).
WORK_EVENT_KINDS = ("cpu_op", "runtime_api", "driver_api", "gpu_kernel", "gpu_memcpy", "gpu_memset")


def _events_per_step(frame: Frame, steps: np.ndarray) -> np.ndarray:
    """Work events (``WORK_EVENT_KINDS``; every event but the step ranges where a trace has none)
    assigned to each of ``steps``."""
    work = frame.mask(*WORK_EVENT_KINDS)
    chosen = work if work.any() else ~frame.mask("step")
    numbers = frame.step[chosen & (frame.step >= 0)]
    if not numbers.size or not steps.size:
        return np.zeros(steps.size, np.int64)
    # A count per step number (a bincount over their range; sorting a million numbers took 20 ms).
    lo, hi = int(min(numbers.min(), steps.min())), int(max(numbers.max(), steps.max()))
    if hi - lo > 4 * (numbers.size + steps.size):  # sparse step numbers: count the sorted ones instead
        numbers = np.sort(numbers)
        return np.searchsorted(numbers, steps, side="right") - np.searchsorted(numbers, steps)
    return np.bincount(numbers - lo, minlength=hi - lo + 1)[steps - lo]


def step_stats(frame: Frame, skip: int = 0, keep_all: bool = False) -> StepStats:
    """Durations, status and use of every marked step (see the module doc for the rules)."""
    df = step_durations(frame).sort_values("start_ns", kind="stable").reset_index(drop=True)
    numbers = df.step.to_numpy(np.int64)
    status = np.full(len(df), "steady", dtype=object)
    # Evaluation steps among training ones are set apart first: the others are judged among themselves.
    evaluation = _evaluation_steps(frame, numbers)
    judged = np.flatnonzero(~evaluation)
    sub, cycle_sub, far_sub = _judge_durations(frame, numbers[judged], df.dur_ns.to_numpy(np.float64)[judged])
    far = judged[far_sub]
    status[judged] = sub
    status[evaluation] = "evaluation"
    cycle_rows = judged[cycle_sub]  # positions of the steps that run the loop's periodic extra work
    status[: min(skip, len(df))] = "warm-up"
    df["status"] = status
    df["used"] = True if keep_all else (status == "steady")
    if not df.used.any():  # everything flagged: nothing steady to fall back on, so use every step
        df["used"] = True
    origin = _origin(frame)
    excess = step_excess(frame, numbers, df.dur_ns.to_numpy(np.int64), df.used.to_numpy(bool),
                         np.isin(status, ("warm-up", "outlier")), most=MAX_LEFT_OUT_SAID)
    return StepStats(df, keep_all, origin, batches=keras_batches_per_call(frame, df) if KERAS_CALLS.match(origin) else 1,
                     cycle=int(cycle_rows[1] - cycle_rows[0]) if cycle_rows.size else 0,
                     cycle_steps=numbers[cycle_rows].tolist(), far_kept=numbers[far].tolist(), excess=excess)


def _judge_durations(frame: Frame, numbers: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Status of each of these steps (numbers, durations in time order) by its duration among them
    (the module doc's rules), the positions of those that run the loop's periodic work, and of the far
    steps kept as the loop's spread."""
    status = np.full(d.size, "steady", dtype=object)
    cycle_rows = far_rows = np.zeros(0, np.int64)
    if d.size >= MIN_STEPS_TO_JUDGE:
        med = float(np.median(d))
        mad = float(np.median(np.abs(d - med))) * 1.4826
        long = (d > FAR_RATIO * med) & (d > med + ROBUST_SIGMAS * mad)
        # Only the first and last step can be cut by the profiler starting or stopping inside them, and a
        # cut step lost events: a short one that holds as many as the others ran fast, whole.
        short = (d < SHORT_RATIO * med) & member_mask(np.arange(d.size), [0, d.size - 1])
        if short.any():
            events = _events_per_step(frame, numbers)
            if events.any():
                short &= events < CUT_EVENTS_RATIO * np.median(events)
        lead = 0
        while lead < d.size and long[lead]:
            lead += 1
        cycle = None
        if np.count_nonzero(long[lead:]):  # counting events sorts every row: only where a step is long
            cycle = _cycle(long, lead, _events_per_step(frame, numbers))
        if cycle:  # the loop's own periodic work (gradient accumulation's optimizer step): not outliers
            cycle_rows = np.arange(lead, d.size)
            cycle_rows = cycle_rows[cycle_rows % cycle[0] == cycle[1]]
            long[cycle_rows] = False
        far = np.flatnonzero(long[lead:]) + lead
        if far.size >= MIN_FAR_KEPT and far.size > MAX_OUTLIER_SHARE * (d.size - lead):
            far_rows = far  # too many to be accidents: the work differs from step to step (input lengths)
            long[far] = False
        status[long] = "outlier"
        status[short] = "cut short"
        status[:lead] = "warm-up"
    elif d.size == 2 and d[0] > WARM_UP_PAIR_RATIO * d[1]:
        # Two calls, the first far longer: it did the one-time work, unless the second holds nothing
        # (torch.profiler's last ProfilerStep, opened by the last prof.step() and closed at exit).
        if _events_per_step(frame, numbers)[1] == 0:
            status[1] = "cut short"
        else:
            status[0] = "warm-up"
    return status, cycle_rows, far_rows


# Backward and optimizer work: PyTorch's autograd nodes and optimizer steps, TF's gradient ops (the
# tape's scope, *Grad op types) and optimizer updates (ResourceApplyAdam...).
TRAINING_WORK = re.compile(r"^autograd::engine::evaluate_function|Backward\d*$|^Optimizer\.step#|"
                           r"gradient_tape/|(^|[/:])\w+Grad(V\d)?($|:)|(^|[/:])(Resource)?(Sparse)?Apply[A-Z]\w*($|:)")
MIN_EVALUATION_STEPS = 2


def _evaluation_steps(frame: Frame, steps: np.ndarray) -> np.ndarray:
    """Per step, whether it is an evaluation step among training steps: where 2+ steps run backward or
    optimizer work (``TRAINING_WORK``) and fewer, but 2+, run none, those run none. Keras's fit with validation data
    calls its train and test functions, both named multi_step_on_iterator, into one stream of steps
    (TF 2.21: 16 training steps of ~143 ops and 8 validation steps of ~25); a PyTorch loop marks its
    evaluation batches' steps as it marks the training ones. All False otherwise."""
    out = np.zeros(steps.size, bool)
    if steps.size < 2 * MIN_EVALUATION_STEPS:
        return out
    # A report asks for the step statistics several times (the verdict, the replay's median step, the
    # critical path): the backward work per step is counted once a frame.
    cached = frame.memo("training_work_steps", lambda: _training_work_steps(frame))
    work = (np.searchsorted(cached, np.sort(steps), side="right") - np.searchsorted(cached, np.sort(steps)))
    trains = work[np.searchsorted(np.sort(steps), steps)] > 0
    # Fewer than the training steps: a loop whose steps are mostly without backward work (an RL loop's
    # rollout steps between its updates) is not training with a validation pass.
    evaluating = np.count_nonzero(~trains)
    if np.count_nonzero(trains) >= MIN_EVALUATION_STEPS and MIN_EVALUATION_STEPS <= evaluating < np.count_nonzero(trains):
        out = ~trains
    return out


def _training_work_steps(frame: Frame) -> np.ndarray:
    """The step numbers of the rows doing backward or optimizer work (``TRAINING_WORK``), sorted."""
    rows = frame.rows("cpu_op", "user_range")
    rows = rows[frame.step[rows] >= 0]
    return np.sort(frame.step[rows[frame.named(rows, TRAINING_WORK)]]) if rows.size else np.zeros(0, np.int64)


def _cycle(long: np.ndarray, lead: int, events: np.ndarray) -> tuple[int, int] | None:
    """(period, phase) where the long steps after the leading warm-up all fall on every period-th
    step, and every step on that phase (``MIN_CYCLE_STEPS`` or more) runs ``CYCLE_EVENTS_RATIO`` or more
    of the other steps' median work events: a loop that does extra work every k steps (an optimizer step
    after k micro-batches of gradient accumulation) is slower there by design, not by accident; the
    work decides, the durations being noisy. None otherwise."""
    idx = np.flatnonzero(long[lead:]) + lead
    n = long.size
    if idx.size == 0:
        return None
    steps = np.arange(lead, n)
    for period in range(2, (n - lead) // MIN_CYCLE_STEPS + 1):
        phase = int(idx[0] % period)
        if (idx % period != phase).any():
            continue
        on = steps % period == phase
        if np.count_nonzero(on) < MIN_CYCLE_STEPS or not (~on).any():
            continue
        if (events[steps[on]] >= CYCLE_EVENTS_RATIO * float(np.median(events[steps[~on]]))).all():
            return period, phase
    return None


# Steps the reader made from calls of Keras's function that can run several batches a call.
KERAS_CALLS = re.compile(r"calls of (multi_step_on_\w+|train_function|test_function|predict_function)\b")
# Keras runs steps_per_execution batches a call as a while loop at the root of the function's graph;
# TF names that loop's body ops while/body/_N/... (a loop inside the model nests a second while/body/).
_ROOT_LOOP_BODY = re.compile(r"^while/body/(?!.*while/body/)")


def keras_batches_per_call(frame: Frame, steps: pd.DataFrame) -> int:
    """Batches each call of Keras's per-batch function ran (steps_per_execution): how many times the
    root while loop's body ran in a call, the median over its ops and over the calls; 1 without such
    a loop (steps_per_execution=1 traces none)."""
    ops = frame.rows("cpu_op")
    ops = ops[frame.named(ops, _ROOT_LOOP_BODY)]
    if not ops.size or steps.empty:
        return 1
    ops = ops[np.argsort(frame.start[ops], kind="stable")]
    start = steps.start_ns.to_numpy(np.int64)
    lo = np.searchsorted(frame.start[ops], start, "left")
    hi = np.searchsorted(frame.start[ops], start + steps.dur_ns.to_numpy(np.int64), "left")
    per_call = [float(np.median(np.unique(frame.name_code[ops[a:b]], return_counts=True)[1]))
                for a, b in zip(lo.tolist(), hi.tolist(), strict=True) if b > a]
    return max(int(round(float(np.median(per_call)))), 1) if per_call else 1


def _origin(frame: Frame) -> str:
    return steps_origin(frame.table)


def steps_origin(table: pa.Table) -> str:
    """The reader's note on where the steps come from when the trace marks none (``steps_from`` in
    the trace metadata; "" where the trace marks its steps)."""
    text = (table.schema.metadata or {}).get(schema.META_TRACE_META_JSON.encode(), b"")
    try:
        value = json.loads(text or b"{}").get("steps_from", "")
    except (ValueError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""


def speedup_interval(base_ns: np.ndarray, other_ns: np.ndarray, resamples: int = 2000,
                     seed: int = 0) -> tuple[float, float, float] | None:
    """other / base ratio of median step times with a 95% bootstrap interval from the step-to-step
    variation of both traces: (ratio, low, high); None with fewer than two steps on either side."""
    if base_ns.size < 2 or other_ns.size < 2:
        return None
    rng = np.random.default_rng(seed)
    b = np.median(rng.choice(base_ns, (resamples, base_ns.size)), axis=1)
    o = np.median(rng.choice(other_ns, (resamples, other_ns.size)), axis=1)
    ratios = o / np.maximum(b, 1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(np.median(other_ns) / max(np.median(base_ns), 1)), float(low), float(high)
