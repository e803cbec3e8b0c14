"""Which rank holds the others up: collective time per step, compared across the ranks of a job.

In synchronous data-parallel training every rank's step ends at the same collective, so the ranks'
step times come out nearly equal whichever rank is slow: a step-time ranking does not find it. A
collective runs until every rank has joined it, so the rank that joins last (the straggler: more
data, a slower device or host, another job on its cores) spends the least time in it, and the
others wait there for it. HTA leaves this to the user (per-rank breakdowns side by side); here the
dataset report names the rank, per run (the ranks of one job; traces given one run label whose step
times disagree are not judged).

Collective time per step: on a GPU trace, the time with a collective kernel (NCCL/RCCL) running,
per device; on a CPU-only trace, the time inside the host's collective ops and ranges (gloo's
``gloo:all_reduce``, ``c10d::allreduce_``, TF's collective ops), as the communication verdict reads
it; each in the steps used, averaged over them (the whole capture where no step is marked).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analyze import intervals
from tracekit.analyze.classify import collective_rows
from tracekit.analyze.frame import Frame, step_rows
from tracekit.analyze.gpu_communication import gpu_communication

# The least collective time must be this far below the median rank's to name a straggler: ranks of
# one job differ by a few percent from run-to-run noise alone (the two HTA trace_filter ranks: 4%).
STRAGGLER_GAP = 0.2


def collective_time_per_step(frame: Frame, used: list[int] | None) -> float:
    """Mean time a step with a collective running (module doc), in ns; 0 where the trace runs none."""
    return collective_times_per_step(frame, used)[0]


def collective_times_per_step(frame: Frame, used: list[int] | None) -> tuple[float, float]:
    """Per step (mean over the steps used), ns: the time with a collective running, and on a GPU trace
    the part of it with no compute kernel beside it on the device (``tracekit.analyze.gpu_communication``'s
    communication alone: what overlap would save); (0, 0) where the trace runs no collective."""
    steps = step_rows(frame, used)
    count = steps.size or 1
    kernels = frame.rows("gpu_kernel")
    if steps.size:  # a step's kernels run after its host window: read them by the step they belong to
        kernels = kernels[np.isin(frame.step[kernels], frame.step[steps])]
    found = gpu_communication(frame, None, kernels)
    if found is not None:  # per device: the mean over the devices that run collectives
        return found.comm_ns / found.devices / count, (found.comm_ns - found.overlap_ns) / found.devices / count
    rows = collective_rows(frame)
    if not rows.size:
        return 0.0, 0.0
    lo, hi = intervals.union(frame.start[rows], frame.end[rows])
    if steps.size:
        total = float(intervals.overlap_total(lo, hi, *intervals.union(frame.start[steps], frame.end[steps])))
    else:
        total = float(intervals.total(lo, hi))
    return total / count, 0.0


@dataclass(frozen=True)
class RankBalance:
    """Collective time per step across the ranks of one run (``least`` the rank with the least)."""

    run: str
    least: object
    least_ns: float
    median_ns: float
    most_ns: float
    ranks: int
    # The least rank's own work (compute kernels, or compute ops on a CPU trace, as a share of its
    # capture) over the median of the other ranks'; 0 where the traces record none.
    work_ratio: float = 0.0

    @property
    def straggler(self) -> bool:
        return self.median_ns > 0 and self.least_ns <= (1 - STRAGGLER_GAP) * self.median_ns

    def as_dict(self) -> dict[str, object]:
        least = self.least.item() if hasattr(self.least, "item") else self.least  # a numpy scalar from pandas
        return {"run": self.run, "least_rank": least, "least_ns": self.least_ns, "median_ns": self.median_ns,
                "most_ns": self.most_ns, "ranks": self.ranks, "straggler": self.straggler,
                "work_ratio": round(self.work_ratio, 3)}

    def says(self, name_run: bool = False) -> str:
        """The finding in a sentence, prefixed by the run where the dataset holds several."""
        text = self._says()
        return f"Run {self.run}: {text}" if name_run else text[:1].upper() + text[1:]

    def _says(self) -> str:
        if self.straggler:
            against = (f"{self.most_ns / 1e6:,.3f} ms on the other rank" if self.ranks == 2 else
                       f"a median of {self.median_ns / 1e6:,.3f} ms over {self.ranks} ranks")
            others = "the other rank's" if self.ranks == 2 else "the other ranks' median"
            if self.work_ratio >= MORE_WORK:
                # Time cannot tell more work from the same work run slower: both are said.
                why = (f" Its compute takes {self.work_ratio:.1f}x {others} (as a share of its capture): more work "
                       "per step (uneven data or layers per rank) or the same work run slower (a slower device or "
                       "host, another job on its cores); `tracekit compare` its trace with another rank's: the same "
                       "ops on larger inputs are the former.")
            elif self.work_ratio > 0:
                why = (f" Its compute takes about as long as {others} ({self.work_ratio:.2f}x): its time goes outside "
                       "compute (data loading, the host, waits of its own); `tracekit compare` its trace with another "
                       "rank's.")
            else:
                why = " Look at its own step: `tracekit compare` its trace with another rank's."
            return (f"rank {self.least} spends the least time in collectives, {self.least_ns / 1e6:,.3f} ms a step "
                    f"against {against}: it joins them last, and the other ranks wait there for it.{why}")
        return (f"collective time per step is even across the {self.ranks} ranks ({self.least_ns / 1e6:,.3f}-"
                f"{self.most_ns / 1e6:,.3f} ms): no rank holds the others up by joining late.")


# Ranks of one synchronous job end their steps at the same collectives: their step times agree within
# this ratio (the uneven-batch DDP captures: 28.9 and 30.9 ms). Ranks further apart are not one job's
# steps (unrelated traces given one run label), and their collective times say nothing of each other.
SAME_JOB_STEP_RATIO = 1.25
# A straggler whose compute takes this many times the others' is slow in its compute; below it, elsewhere.
MORE_WORK = 1.2
# What a rank computes, read from its metrics: compute kernels on a GPU trace, compute ops on a CPU one.
_CPU_WORK = tuple(f"op_{c}_time" for c in ("rnn", "convolution", "gemm", "cast", "copy", "elementwise", "reduction",
                                            "fft", "linalg"))


def own_work_share(metrics: pd.DataFrame) -> pd.Series:
    """Per trace (row of per-trace metrics): its own work as a share of its capture (``total_time``):
    GPU busy time less collective kernels' on a GPU trace, compute ops' time on a CPU trace."""
    gpu = metrics.get("gpu_busy", pd.Series(0.0, index=metrics.index)).fillna(0)
    talk = metrics.get("communication_time", pd.Series(0.0, index=metrics.index)).fillna(0)
    cpu = sum((metrics[c].fillna(0) for c in _CPU_WORK if c in metrics.columns),
              start=pd.Series(0.0, index=metrics.index))
    work = gpu.where(gpu > 0, cpu).where(gpu <= 0, gpu - talk)
    total = metrics.get("total_time", pd.Series(0.0, index=metrics.index)).replace(0, float("nan"))
    return (work / total).fillna(0.0)


def rank_balance(traces: pd.DataFrame) -> list[RankBalance]:
    """From a dataset's per-trace metrics (``collective_time`` per step, ``step_time``, ``rank``,
    ``run``): per run whose ranks run collectives (two or more) and agree on their step time, the
    ranks' mean collective time per step and which rank spends the least."""
    if not {"collective_time", "step_time", "rank", "run"} <= set(traces.columns):
        return []
    found = []
    for run, of_run in traces[traces.collective_time > 0].groupby("run", sort=True):
        per_rank = of_run.groupby("rank")[["collective_time", "step_time"]].mean()
        steps = per_rank.step_time
        if len(per_rank) < 2 or steps.min() <= 0 or steps.max() > SAME_JOB_STEP_RATIO * steps.min():
            continue
        talk = per_rank.collective_time
        least = talk.idxmin()
        work = of_run.assign(work=own_work_share(of_run)).groupby("rank")["work"].mean()
        others = float(work.drop(index=least).median())
        ratio = float(work[least]) / others if others > 0 and work[least] > 0 else 0.0
        found.append(RankBalance(run=str(run), least=least, least_ns=float(talk.min()), median_ns=float(talk.median()),
                                 most_ns=float(talk.max()), ranks=len(per_rank), work_ratio=ratio))
    return found


__all__ = ["RankBalance", "collective_time_per_step", "collective_times_per_step", "rank_balance"]
