"""Trace comparison: categories, names, ranges and steps of traces A, B, ... against the first.

Works across sources: every trace is reduced to the same summaries (GPU classes, host classes,
CPU-op classes, per-name totals, per-range totals, step times) before comparing.

``--fail-if`` expressions (several allowed, joined by "and" semantics: any failing one fails)::

    METRIC OP THRESHOLD
    METRIC    total_time | gpu_time | gpu_busy | idle_time | gpu_devices | kernel_count | launch_count | op_count |
              step_time | <class>_time (a GPU kernel class, e.g. gemm_time, cast_time) |
              op_<class>_time (framework-op self time by op class, e.g. op_gemm_time, op_cast_time) |
              waiting_calls_time (self time of calls that wait while other threads run their ops, a TF
              function call's: in no op class, CPU traces) |
              ops_per_step | dispatch_time (step time outside any compute op, not waiting or fetching, CPU traces) |
              unrecorded_ops_time (TorchScript calls' own time that is ops they ran unrecorded, counted as
              compute: a frozen model's convolutions, CPU traces) |
              waiting_time (step time the loop's thread waits: blocked in Python, or for another
              thread's collective, CPU traces; a rank held up by a straggler waits, the straggler not) |
              fetching_time (step time in a batch fetch, DataLoader __next__ / IteratorGetNext, with no
              compute op running, CPU traces) |
              optimizer_time (step time in torch.optim's optimizer steps, their wall time on the host)
    OP        > | >= | < | <=
    THRESHOLD +5% | -10%          relative change against the baseline
              +2ms | -300us | +10    change against the baseline (signed: a delta)
              10ms | 300us | 120     the value itself (unsigned: an absolute threshold)

GPU times (gpu_time, gpu_busy, idle_time, <class>_time) are per device: the mean over the devices
with GPU activity (gpu_devices); counts are totals over all devices.

A relative threshold on a metric that is 0 in the baseline is a usage error (no relative change
exists); use an absolute one.

Each is checked for every compared trace against the baseline (the first); when one holds the
CLI exits with code 3 (``EXIT_COMPARE_FAILED``).
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema
from tracekit.analyze import untraced_ops
from tracekit.analyze.breakdown import Breakdown, breakdown, op_self_time, step_index
from tracekit.analyze.classify import KERNEL_CLASSES, OP_CLASSES, op_name_codes, short_name, tf_base_op
from tracekit.analyze.frame import BACKWARD_NODE, GPU_BUSY_KINDS, Frame, frame_of
from tracekit.analyze.optimizer import optimizer_calls, outermost, own_time
from tracekit.analyze.python_work import PYTHON_TRACER_OPTION
from tracekit.analyze.ranges import ranges
from tracekit.analyze.rank_balance import collective_times_per_step
from tracekit.analyze.steps import StepStats, speedup_interval, step_stats
from tracekit.analyze.top_ops import compact_shapes, main_input_dims
from tracekit.analyze.verdicts import DISPATCH_SHARE, Evidence, share_below
from tracekit.errors import UsageError
from tracekit.ingest.columns import trace_extra
from tracekit.ingest.links import member_mask

EXIT_COMPARE_FAILED = 3
_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
_EXPR = re.compile(r"^\s*(?P<metric>[a-z_]+)\s*(?P<op>>=|<=|>|<)\s*(?P<sign>[+-]?)(?P<num>\d+(\.\d+)?)\s*(?P<unit>%|ns|us|µs|ms|s)?\s*$")


@dataclass
class TraceSummary:
    label: str
    source: str
    metrics: dict[str, float]
    names: pd.DataFrame  # kind, name, count, total_ns
    ranges: pd.DataFrame  # name, instances, total_ns
    steps: pd.DataFrame  # step (the trace's own number, as report shows it), dur_ns, status
    step_stats: StepStats | None = None
    per_step: dict[str, float] | None = None  # metrics as medians over the steps used; None without steps
    names_per_step: pd.DataFrame | None = None  # names over the steps used, count and total_ns per step
    unprofiled_ns: float | None = None  # the step timed without a profiler (collector metadata or --step-time)
    unprofiled_from: str = ""
    record_shapes: bool = False
    ops_per_ms: float = 0.0
    python_calls_per_step: float = 0.0  # Python calls the profiler's Python tracer recorded (with_stack=True)


@dataclass
class FailCheck:
    expression: str
    label: str
    baseline: float
    value: float
    failed: bool


@dataclass(frozen=True)
class Diagnosis:
    """One trace's verdict, as ``report`` gives it: the verdict, its remedies in their order, and the
    names of the findings it holds (``optimizer``, ``anomaly_detection``, ...: the report JSON's keys)."""

    label: str
    verdict: str
    remedies: list[str]
    findings: list[str]
    step_cover: float | None = None  # the share of its loop the steps cover (LaunchReport.step_cover)
    rule_evidence: Evidence | None = field(default=None, repr=False)  # what the verdict rules read

    def as_dict(self) -> dict[str, object]:
        return {"label": self.label, "verdict": self.verdict, "remedies": self.remedies, "findings": self.findings,
                "step_cover": self.step_cover}


@dataclass(frozen=True)
class RemedyChange:
    """Remedies a trace is given that the baseline is not (``added``: what the change brought in), and
    the baseline's that it is no longer given (``dropped``: what the change fixed or made moot)."""

    label: str
    added: list[str]
    dropped: list[str]

    def as_dict(self) -> dict[str, object]:
        return {"label": self.label, "added": self.added, "dropped": self.dropped}


@dataclass
class Comparison:
    """Result of ``compare()``; every delta is (trace - baseline), baseline = first trace.

    metrics: one row per metric, one column per label (values: ns or counts).
    names: per (kind, name): ``count_<label>``, ``total_ns_<label>``, ``mean_ns_<label>``, and
        status relative to the baseline (``common``, ``added``, ``removed``; with three or more
        traces, which ones: ``added in B, C``, ``removed in C``), sorted by the largest absolute total
        change.
    ranges: per range name: ``total_ns_<label>``, ``instances_<label>``.
    steps: per position in each trace (``index`` 0 = its first step): ``step_<label>`` (the step's
        own number, as ``report`` shows it), ``dur_ns_<label>``, ``status_<label>``.
    per_step: True when every trace has marked steps: metrics (but total_time) and names are then
        per step (metrics: median over the steps used; names: mean over them); else whole-trace totals.
    checks: the evaluated ``--fail-if`` expressions.
    findings: the differences in words, one sentence each, largest first.
    diagnoses: each trace's verdict and remedies (``report``'s); remedy_changes: per trace after the
        first, the remedies it is given that the baseline is not, and the reverse.
    """

    labels: list[str]
    metrics: pd.DataFrame
    names: pd.DataFrame
    ranges: pd.DataFrame
    steps: pd.DataFrame
    checks: list[FailCheck] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    per_step: bool = False
    diagnoses: list[Diagnosis] = field(default_factory=list)
    remedy_changes: list[RemedyChange] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(c.failed for c in self.checks)


def summarize(table: pa.Table, label: str, skip_steps: int = 0, keep_all_steps: bool = False,
              window: int = 0) -> TraceSummary:
    """Reduce one trace to the summaries ``compare()`` works on. ``window``: read the steps by windows of
    that many (another trace of the comparison runs periodic work every ``window`` steps)."""

    frame = frame_of(table)
    bd = breakdown(table)
    # One device model: GPU figures are per device (the mean over the devices with activity), so a
    # trace on 8 GPUs does not report 8 spans of idle time in a capture one span long.
    devices = max(int((bd.gpu.step == -1).sum()), 1)
    whole_gpu = bd.gpu[bd.gpu.step == -1].sum(numeric_only=True) / devices
    host = bd.host[bd.host.step == -1].iloc[0] if len(bd.host) else None
    stats = step_stats(frame, skip=skip_steps, keep_all=keep_all_steps)
    if window and not stats.cycle:
        stats.window = window
    active = frame.rows("cpu_op", "runtime_api", "driver_api", "user_range", "python_function", "step",
                        *GPU_BUSY_KINDS)
    total = int(frame.end[active].max() - frame.start[active].min()) if active.size else 0
    metrics: dict[str, float] = {
        "total_time": total,
        "gpu_time": float(whole_gpu.get("span_ns", 0)),
        "gpu_busy": float(whole_gpu.get("busy_ns", 0)),
        "idle_time": float(whole_gpu.get("idle_ns", 0)),
        "kernel_count": float(frame.mask("gpu_kernel").sum()),
        "launch_count": float(host["launches"]) if host is not None else 0.0,
        "op_count": float(frame.mask("cpu_op").sum()),
        # The median of the steady steps: warm-up, outlier and cut-short steps are left out (with a
        # gradient-accumulation cycle, of the cycles' mean steps: StepStats.comparable).
        "step_time": stats.step_time_ns if len(stats.steps) else float(total),
        "gpu_devices": float((bd.gpu.step == -1).sum()),
    }
    used = stats.used_step_numbers() if len(stats.steps) else []
    # Per step whatever the view (a mean over the steps used): ranks compare by it (analyze.rank_balance).
    metrics["collective_time"], metrics["collective_alone_time"] = collective_times_per_step(frame, used or None)
    for c in KERNEL_CLASSES:
        metrics[f"{c}_time"] = float(whole_gpu.get(f"{c}_ns", 0))
    if len(bd.cpu_ops):
        ops = bd.cpu_ops[bd.cpu_ops.step == -1].iloc[0]
        for c in OP_CLASSES:
            metrics[f"op_{c}_time"] = float(ops[f"{c}_ns"])
        metrics["ops_per_step"] = float(ops["ops"]) / max(1, len(bd.steps))
        metrics["dispatch_time"] = float(ops["dispatch_ns"])
        metrics["waiting_calls_time"] = float(ops["waiting_calls_ns"])
        metrics["unrecorded_ops_time"] = float(ops["unrecorded_ops_ns"])
        metrics["waiting_time"] = float(ops["waiting_ns"])
        metrics["fetching_time"] = float(ops["fetching_ns"])
    if host is not None:
        for c in ("launch", "sync", "framework", "python"):
            metrics[f"host_{c}_time"] = float(host[f"{c}_ns"])
    optimizer = _outer_optimizer_calls(frame)
    metrics["optimizer_time"] = float(own_time(frame, optimizer).sum())
    rows = frame.rows("cpu_op", *GPU_BUSY_KINDS)
    # TF op names carry per-process layer scopes (lstm_5_1/while/...): compare TF ops by op type,
    # eager ops by the op their EagerExecute ran, oneDNN's rewrites by the op they replace.
    tf_source = (table.schema.metadata or {}).get(b"tracekit.source") == b"tf"
    agg = _names(frame, rows, tf_source)
    names_per_step = None
    if used:
        in_used = member_mask(frame.step[rows], used)
        names_per_step = _names(frame, rows[in_used], tf_source)
        names_per_step[["count", "total_ns", "self_ns"]] = names_per_step[["count", "total_ns", "self_ns"]] / len(used)
    rr = ranges(table).summary[["name", "instances", "total_ns"]]
    steps = stats.steps[["step", "dur_ns", "status"]].reset_index(drop=True) if len(stats.steps) else \
        pd.DataFrame({"step": [], "dur_ns": [], "status": []})
    meta = table.schema.metadata or {}
    extra = trace_extra(table)
    run = extra.get("tracekit_run")
    run = json.loads(run) if isinstance(run, str) else run if isinstance(run, dict) else {}
    unprofiled = run.get("unprofiled_step_ns") if isinstance(run.get("unprofiled_step_ns"), (int, float)) else None
    step_ns = metrics["step_time"]
    ops_per_ms = metrics.get("ops_per_step", 0.0) / (step_ns / 1e6) if step_ns else 0.0
    calls = frame.rows("python_function")
    python_calls = calls[member_mask(frame.step[calls], used)].size / len(used) if used else float(calls.size)
    return TraceSummary(label, meta.get(schema.META_SOURCE.encode(), b"").decode(), metrics, agg, rr, steps, stats,
                        _per_step_metrics(frame, bd, used, metrics, optimizer, bool(stats.cycle or stats.window))
                        if used else None,
                        names_per_step,
                        float(unprofiled) if unprofiled else None, "the collector's unprofiled timing" if unprofiled else "",
                        bool(extra.get("record_shapes")), ops_per_ms, python_calls)


# A TF function's name ends in a counter that differs from run to run (__inference_train_step_1770 in
# one trace, _2534 in the next): compared without it, the same function pairs up.
_TF_FUNCTION_ID = re.compile(r"^(__(inference|forward|backward)_\w+?)_\d+$")


def _tf_compare_name(name: str) -> str:
    op = tf_base_op(name)
    return _TF_FUNCTION_ID.sub(r"\1", op)


def _names(frame: Frame, rows: np.ndarray, tf_source: bool) -> pd.DataFrame:
    """count, total_ns and self_ns (an op's time less the ops it calls; a GPU row's own time) per
    (kind, name) of the given op and GPU rows."""
    op = frame.mask("cpu_op")[rows]
    kinds = np.where(op, "cpu_op", "gpu")
    own = frame.dur[rows].copy()
    own[op] = op_self_time(frame, rows[op])
    names_df = pd.DataFrame({"kind": kinds, "code": op_name_codes(frame)[rows], "dur": frame.dur[rows], "own": own})
    agg = names_df.groupby(["kind", "code"]).agg(count=("dur", "size"), total_ns=("dur", "sum"),
                                                 self_ns=("own", "sum")).reset_index()
    agg["name"] = [("" if c < 0 else _tf_compare_name(frame.names[c]) if tf_source and k == "cpu_op" else frame.names[c])
                   for k, c in zip(agg.kind, agg.code, strict=True)]
    return agg.groupby(["kind", "name"], as_index=False)[["count", "total_ns", "self_ns"]].sum().astype(
        {"count": float, "total_ns": float, "self_ns": float})


def _per_step_metrics(frame: Frame, bd: Breakdown, used: list[int], whole: dict[str, float],
                      optimizer: np.ndarray, cyclic: bool = False) -> dict[str, float]:
    """Every metric but total_time as the median over the steps used (GPU figures summed over devices);
    ``optimizer``: the optimizer steps' outermost calls. ``cyclic`` (steps that run periodic work every
    k steps, ``StepStats.cycle``): the mean, the cycle's average step, as ``step_time`` is; the median
    step of a gradient-accumulation loop has no optimizer step in it."""
    devices = max(int((bd.gpu.step == -1).sum()), 1)
    center = np.mean if cyclic else np.median

    def median(df: pd.DataFrame, column: str, per_device: bool = False) -> float:
        if column not in df.columns:
            return 0.0
        per = df[df.step.isin(used)].groupby("step")[column].sum() / (devices if per_device else 1)
        return float(center(per.reindex(used, fill_value=0).to_numpy(np.float64)))

    steps_used = sorted(set(used))  # the median does not depend on the order
    of_step, known = step_index(frame.step[frame.rows("gpu_kernel")], steps_used)
    kernels_per_step = np.bincount(of_step[known], minlength=len(steps_used))
    out = {"total_time": whole["total_time"], "gpu_time": median(bd.gpu, "span_ns", True),
           "gpu_busy": median(bd.gpu, "busy_ns", True), "idle_time": median(bd.gpu, "idle_ns", True),
           "gpu_devices": whole["gpu_devices"],
           "kernel_count": float(center(kernels_per_step)) if used else float("nan"),
           "launch_count": median(bd.host, "launches"), "op_count": median(bd.cpu_ops, "ops"),
           "step_time": whole["step_time"]}
    out.update({f"{c}_time": median(bd.gpu, f"{c}_ns", True) for c in KERNEL_CLASSES})
    if len(bd.cpu_ops):
        out.update({f"op_{c}_time": median(bd.cpu_ops, f"{c}_ns") for c in OP_CLASSES})
        out["ops_per_step"] = out["op_count"]
        out["dispatch_time"] = median(bd.cpu_ops, "dispatch_ns")
        out["waiting_calls_time"] = median(bd.cpu_ops, "waiting_calls_ns")
        out["unrecorded_ops_time"] = median(bd.cpu_ops, "unrecorded_ops_ns")
        out["waiting_time"] = median(bd.cpu_ops, "waiting_ns")
        out["fetching_time"] = median(bd.cpu_ops, "fetching_ns")
    if len(bd.host):
        out.update({f"host_{c}_time": median(bd.host, f"{c}_ns") for c in ("launch", "sync", "framework", "python")})
    out["optimizer_time"] = _optimizer_time(frame, optimizer, steps_used, center)
    out["collective_time"], out["collective_alone_time"] = whole["collective_time"], whole["collective_alone_time"]
    return out


def _outer_optimizer_calls(frame: Frame) -> np.ndarray:
    """torch.optim's optimizer steps, outermost calls (``tracekit.analyze.optimizer``)."""
    calls = optimizer_calls(frame)
    return outermost(frame, calls) if calls.size else calls


def _optimizer_time(frame: Frame, outer: np.ndarray, steps_used: list[int],
                    center: Callable[[np.ndarray], float] = np.median) -> float:
    """The median (``center``) over the steps used of the time in these optimizer calls; 0 without any."""
    if not outer.size or not steps_used:
        return 0.0
    of_step, known = step_index(frame.step[outer], steps_used)
    return float(center(np.bincount(of_step[known], weights=own_time(frame, outer)[known], minlength=len(steps_used))))




def _name_status(present: dict[str, pd.Series], base: str, others: list[str]) -> np.ndarray:
    """Per name: ``added`` (absent in the baseline), ``removed`` (in the baseline, absent from a
    trace) or ``common``; with several traces to compare, the traces it was added in or removed from,
    so that a name one trace keeps and another drops is not called removed from both."""
    in_base = present[base].to_numpy(bool)
    has = np.array([present[o].to_numpy(bool) for o in others]).reshape(len(others), in_base.size)
    differs = has != in_base  # per other trace: has the name where the baseline lacks it, or the reverse
    status = np.where(~in_base & differs.any(axis=0), "added", np.where(in_base & differs.any(axis=0), "removed", "common"))
    if len(others) < 2:
        return status.astype(object)
    # Which traces, as one code per distinct pattern of them (few patterns, however many names).
    pattern = (differs * (1 << np.arange(len(others)))[:, None]).sum(axis=0)
    out = status.astype(object)
    for code in np.unique(pattern[pattern > 0]):
        which = ", ".join(o for k, o in enumerate(others) if code >> k & 1)
        rows = pattern == code
        out[rows] = np.char.add(status[rows].astype(str), f" in {which}")
    return out


def compare(tables: list[pa.Table], labels: list[str] | None = None, fail_if: list[str] | None = None,
            skip_steps: int = 0, keep_all_steps: bool = False, step_times: dict[str, float] | None = None) -> Comparison:
    """Compare traces against the first one (see the module doc for ``fail_if``).

    Args:
        tables: two or more event tables, baseline first.
        labels: a short label per trace (default A, B, C, ...).
        fail_if: threshold expressions for CI.
        skip_steps, keep_all_steps: which steps the per-step figures use (``tracekit.analyze.steps``).
        step_times: unprofiled step time (ns) per label, measured without the profiler; the headline
            ratio uses them when every trace of a pair has one (tracekit's collectors record it too).
    """
    if len(tables) < 2:
        raise UsageError("compare needs at least two traces")
    labels = labels or [chr(ord("A") + i) for i in range(len(tables))]
    if len(labels) != len(tables) or len(set(labels)) != len(labels):
        raise UsageError("give one distinct --label per trace")
    checks = [parse_condition(e) for e in fail_if or []]  # fail on a bad expression before the work
    # A trace that runs periodic work every k steps (gradient accumulation) is read by its cycle; the
    # others are read by windows of k steps too, so that both sides average alike. The step statistics
    # are cheap beside a summary (and cached on the frame where they cost most).
    cycles = [c for c in (step_stats(frame_of(t), skip=skip_steps, keep_all=keep_all_steps).cycle for t in tables) if c]
    window = cycles[0] if cycles else 0
    sums = [summarize(t, lab, skip_steps, keep_all_steps, window=window) for t, lab in zip(tables, labels, strict=True)]
    for label, ns in (step_times or {}).items():
        if label not in labels:
            raise UsageError(f"--step-time {label}=...: no trace is labelled {label!r} (labels: {', '.join(labels)})")
        summary = sums[labels.index(label)]
        summary.unprofiled_ns, summary.unprofiled_from = float(ns), "--step-time"
    # One unit for all: per step when every trace marks steps, else whole-trace totals.
    per_step = all(s.per_step is not None for s in sums)
    metrics = pd.DataFrame({s.label: pd.Series(s.per_step if per_step and s.per_step is not None else s.metrics)
                            for s in sums}).fillna(0)
    metrics.index.name = "metric"
    names = _wide([(s.names_per_step if per_step and s.names_per_step is not None else s.names).assign(label=s.label)
                   for s in sums], ["kind", "name"], ["count", "total_ns", "self_ns"], labels)
    for lab in labels:
        names[f"mean_ns_{lab}"] = (names[f"total_ns_{lab}"] / names[f"count_{lab}"].where(names[f"count_{lab}"] > 0)).fillna(0)
    base, others = labels[0], labels[1:]
    present = {lab: names[f"count_{lab}"] > 0 for lab in labels}
    names["status"] = _name_status(present, base, others)
    change = np.max([np.abs(names[f"total_ns_{o}"] - names[f"total_ns_{base}"]) for o in others], axis=0)
    names = names.assign(_c=change).sort_values("_c", ascending=False, kind="stable").drop(columns="_c").reset_index(drop=True)
    rng = _wide([s.ranges.assign(label=s.label) for s in sums], ["name"], ["instances", "total_ns"], labels)
    # Side by side by position: each trace keeps its own step numbers (a trace may start at ProfilerStep#5).
    steps = pd.concat([s.steps.add_suffix(f"_{s.label}") for s in sums], axis=1).rename_axis("index").reset_index()
    diagnoses = [_diagnosis(t, lab, skip_steps, keep_all_steps) for t, lab in zip(tables, labels, strict=True)]
    changes = [_remedy_change(diagnoses[0], d) for d in diagnoses[1:]]
    frames: dict[str, Frame] = {}  # frame_of keeps one table's frame: asked of both traces in turn, each kept here

    def dims_of(lab: str, name: str) -> str:
        if lab not in frames:
            frames[lab] = frame_of(tables[labels.index(lab)])
        return main_input_dims(frames[lab], name)

    result = Comparison(labels, metrics.reset_index(), names, rng, steps,
                        findings=(_tracer_level_findings(tables, labels)
                                  + _findings(metrics, names, labels, sums, per_step, dims_of)
                                  + _cover_findings(metrics, diagnoses)
                                  + _verdict_findings(diagnoses, changes)),
                        per_step=per_step, diagnoses=diagnoses, remedy_changes=changes)
    for expr, (metric, op, sign, num, unit) in zip(fail_if or [], checks, strict=True):
        if metric not in metrics.index:
            raise UsageError(f"--fail-if: unknown metric {metric!r} (one of: {', '.join(metrics.index)})")
        b = float(metrics.loc[metric, base])
        if unit == "%" and b == 0:
            raise UsageError(f"--fail-if {expr!r}: {metric} is 0 in {base}, so a relative change is undefined; "
                             f"use an absolute threshold such as '{metric} {op} 10ms' or '{metric} {op} +10'")
        scale = _UNITS.get(unit or "ns", 1) if unit != "%" else 1
        for lab in others:
            v = float(metrics.loc[metric, lab])
            if unit == "%":
                measured = (v - b) / b * 100
            elif sign:  # +2ms / -300us / +10: a change against the baseline
                measured = (v - b) / scale
            else:  # 10ms / 120: the value itself
                measured = v / scale
            threshold = num if sign != "-" else -num
            result.checks.append(FailCheck(expr, lab, b, v, bool(_OPS[op](measured, threshold))))
    return result


def _tracer_level_findings(tables: list[pa.Table], labels: list[str]) -> list[str]:
    """Where TF graph captures were made at different host tracer levels (``tracekit.analyze.untraced_ops``):
    one records the inexpensive ops the other ran untraced, which no other difference explains."""
    levels: list[int | None] = []
    for table in tables:
        if schema.source_of(table) != "tf":  # no frame built again for the others (summarize built each once)
            levels.append(None)
            continue
        frame = frame_of(table)
        executor = untraced_ops.EXECUTOR_EVENT in frame.names
        levels.append(None if not executor else 2 if untraced_ops.ops_may_be_untraced(frame) else 3)
    base, out = levels[0], []
    for lab, level in zip(labels[1:], levels[1:], strict=True):
        if base is None or level is None or level == base:
            continue
        low, high = (labels[0], lab) if base < level else (lab, labels[0])
        out.append(f"{high} was captured at host_tracer_level 3 and {low} at 2 (the default): TF records its "
                   f"inexpensive ops (small elementwise ops, loop control) only at 3, so the op names only in "
                   f"{high} and its higher op count are ops {low} ran untraced, not work {low} lacks, and level 3's "
                   "own tracing adds to its step time; compare captures made at one level.")
    return out


def _diagnosis(table: pa.Table, label: str, skip_steps: int, keep_all_steps: bool) -> Diagnosis:
    from tracekit.analyze.launch import launch

    r = launch(table, skip_steps=skip_steps, keep_all_steps=keep_all_steps)
    return Diagnosis(label, r.verdict, list(r.remedies), list(r.findings()), r.step_cover, r.verdict_evidence)


_NUMBER = re.compile(r"\d[\d,.]*")


# Steps covering their loops this differently (a share of the loop) are unlike spans to compare.
COVER_GAP = 0.1


def _cover_findings(metrics: pd.DataFrame, diagnoses: list[Diagnosis]) -> list[str]:
    """Where two traces' steps cover different shares of their loops (TF's function calls leave Keras's
    Python between batches out, torch.profiler's ProfilerStep keeps everything in), the per-step ratio
    compares unlike spans: said, with the ratio per loop iteration (a step and the time after it)."""
    base = diagnoses[0]
    out = []
    for other in diagnoses[1:]:
        if base.step_cover is None or other.step_cover is None or abs(base.step_cover - other.step_cover) < COVER_GAP:
            continue
        b, v = float(metrics.loc["step_time", base.label]), float(metrics.loc["step_time", other.label])
        if not b or not v or not base.step_cover or not other.step_cover:
            continue
        ratio = (v / other.step_cover) / (b / base.step_cover)
        word = f"takes {ratio:.2f}x as long as" if ratio >= 1 else f"is {1 / ratio:.2f}x faster than"
        out.append(f"{base.label}'s steps cover {base.step_cover:.0%} of its loop and {other.label}'s "
                   f"{other.step_cover:.0%} (the time between steps is in no step): the per-step figures compare unlike "
                   f"spans; per loop iteration (a step and the time to the next), {other.label} {word} {base.label}.")
    return out


def _remedy_change(base: Diagnosis, other: Diagnosis) -> RemedyChange:
    """Remedies matched by their words: figures inside one (``instead of 310 ops a call``) differ
    between traces of one program."""
    def key(remedy: str) -> str:
        return _NUMBER.sub("#", remedy)

    base_keys, other_keys = {key(x) for x in base.remedies}, {key(x) for x in other.remedies}
    return RemedyChange(other.label, [x for x in other.remedies if key(x) not in base_keys],
                        [x for x in base.remedies if key(x) not in other_keys])


def _verdict_findings(diagnoses: list[Diagnosis], changes: list[RemedyChange]) -> list[str]:
    base = diagnoses[0]
    out = []
    for d, change in zip(diagnoses[1:], changes, strict=True):
        verdicts = (f"{base.label} and {d.label} are both {base.verdict}" if d.verdict == base.verdict else
                    f"{base.label} is {base.verdict}, {d.label} {d.verdict}" + _deciding_figure(base, d))
        said = []
        if change.added:
            said.append(f"remedies for {d.label} only: " + "; ".join(f"'{_clause(x)}'" for x in change.added))
        if change.dropped:
            said.append(f"for {base.label} only: " + "; ".join(f"'{_clause(x)}'" for x in change.dropped))
        out.append(verdicts + ("; " + "; ".join(said) if said else ", with the same remedies") + ".")
    return out


# Two figures this close to the line the rules draw between two verdicts tell the traces apart by a few
# points of their steps, not in kind.
NEAR_THE_LINE = 0.1
_CPU_SIDES = ("CPU/framework-bound", "CPU compute-bound")


def _deciding_figure(base: Diagnosis, other: Diagnosis) -> str:
    """Where two verdicts differ on the figure that one rule draws a line through (CPU-only: the step's
    share outside compute ops, framework-bound from ``DISPATCH_SHARE``; with a GPU: its idle share,
    GPU-bound below the idle threshold), that figure for both, and whether both lie near the line:
    two captures of one program 54% and 48% outside compute ops fall either side of 50%."""
    a, b = base.rule_evidence, other.rule_evidence
    if a is None or b is None or a.has_gpu != b.has_gpu:
        return ""
    if not a.has_gpu and {base.verdict, other.verdict} == set(_CPU_SIDES):
        what, of, line, x, y = "outside compute ops", "step time", DISPATCH_SHARE, a.dispatch_share, b.dispatch_share
        above = base.verdict == _CPU_SIDES[0]
    elif a.has_gpu and "GPU-bound" in (base.verdict, other.verdict) and a.idle_threshold == b.idle_threshold:
        what, of, line, x, y = "the GPU idle", "span", a.idle_threshold, a.idle_share, b.idle_share
        above = other.verdict == "GPU-bound"
    else:
        return ""
    # Only where the line decided: framework-bound with dispatch the largest part below it, or a GPU
    # trace's host-side verdict from another rule, is a different story.
    if not ((x >= line > y) if above else (y >= line > x)):
        return ""
    near = abs(x - line) < NEAR_THE_LINE and abs(y - line) < NEAR_THE_LINE
    return (f" ({what}: {share_below(x, line)} of {base.label}'s {of}, {share_below(y, line)} of {other.label}'s; the rules' line between the two "
            f"verdicts is {line:.0%}" + (", and both lie near it: the traces differ there by a few points, not in kind)"
                                         if near else ")"))


def _clause(remedy: str) -> str:
    """A remedy's first clause, to quote it in a sentence about it."""
    head = remedy.split(": ", 1)[0].split(" (", 1)[0]
    return head if len(head) <= 120 else head[:117] + "..."


def _findings(metrics: pd.DataFrame, names: pd.DataFrame, labels: list[str], sums: list[TraceSummary],
              per_step: bool, dims_of: Callable[[str, str], str] | None = None) -> list[str]:
    """What changed, in sentences: step time (with its uncertainty), work per step, the class that moved
    most, new names. ``dims_of(label, op name)``: the input dims most of the op's time ran on there."""
    base = labels[0]
    out = [_spread(s) for s in sums if s.step_stats is not None and len(s.step_stats.steps)]
    stats = {s.label: s.step_stats for s in sums}

    def ms(ns: float) -> str:
        return f"{ns / 1e6:,.3f} ms"

    def rel(v: float, b: float) -> str:
        return f"{(v - b) / b:+.1%}" if b else "new"

    stepped = {s.label: s.step_stats is not None and len(s.step_stats.steps) > 0 for s in sums}
    for lab in labels[1:]:
        col, bcol = metrics[lab], metrics[base]
        b, v = float(bcol["step_time"]), float(col["step_time"])
        if stepped[lab] != stepped[base]:
            # One trace's "step" is its median step, the other's its whole capture: no ratio of the two.
            marked, bare = (lab, base) if stepped[lab] else (base, lab)
            out.append(f"{bare} marks no steps, {marked} does: their step times ({ms(v)} in {lab}, {ms(b)} in "
                       f"{base}) are a median step and a whole capture, and are not compared; the metrics below "
                       "are whole-trace totals.")
            b = v = 0.0
        bn, ln = (getattr(stats.get(x), "batches", 1) for x in (base, lab))
        if b and v and bn != ln:
            # Keras steps_per_execution: a "step" is one call running several batches; per call the
            # trace that runs more batches a call looks slower however fast each batch is.
            r = (v / ln) / (b / bn)
            word = f"takes {r:.2f}x as long as" if r >= 1 else f"is {1 / r:.2f}x faster than"
            out.append(f"{lab}'s steps each run {ln} training batch(es) against {bn} in {base} (Keras "
                       f"steps_per_execution): per batch, {lab} {word} {base} ({ms(v / ln)} vs {ms(b / bn)}); the "
                       "per-step figures below are per call.")
        if b and v:
            ratio = v / b
            word = f"takes {ratio:.2f}x as long as" if ratio >= 1 else f"is {1 / ratio:.2f}x faster than"
            sentence = f"{lab} {word} {base} per step ({ms(v)} vs {ms(b)}"
            by_label = {x.label: x for x in sums}
            out += _unprofiled(by_label[base], by_label[lab], ratio)
            bs, ls = stats.get(base), stats.get(lab)
            interval = speedup_interval(bs.comparable, ls.comparable) if bs is not None and ls is not None else None
            # Steps within one capture vary less than captures do (the machine's load drifts between runs),
            # so a difference is claimed only when it is also larger than twice the steps' scatter, or
            # when no step of one trace is as fast as any step of the other.
            scatter = 2 * max(bs.comparable_cv if bs is not None else 0.0, ls.comparable_cv if ls is not None else 0.0)
            bu, lu = (bs.comparable, ls.comparable) if bs is not None and ls is not None else (None, None)
            apart = bu is not None and lu is not None and bu.size > 0 and lu.size > 0 and (
                bu.max() < lu.min() or lu.max() < bu.min())
            if interval is None:
                out.append(sentence + "; too few steps to tell it from noise).")
            elif interval[1] <= 1.0 <= interval[2] or (abs(np.log(ratio)) <= np.log1p(scatter) and not apart):
                why = (f"whose 95% interval from the step-to-step variation, {interval[1]:.2f}-{interval[2]:.2f}, "
                       f"includes 1" if interval[1] <= 1.0 <= interval[2] else
                       f"within twice the steps' coefficient of variation ({scatter / 2:.0%})")
                out.append(f"{lab} and {base} are not distinguishable per step: {ms(v)} vs {ms(b)}, a ratio of "
                           f"{ratio:.2f} {why} (within noise).")
            else:
                out.append(sentence + f"; ratio {ratio:.2f}, 95% interval {interval[1]:.2f}-{interval[2]:.2f} from "
                                      f"the step-to-step variation).")
        for metric, what in (("kernel_count", "GPU kernels per step" if per_step else "GPU kernels"),
                             ("ops_per_step", "framework ops per step")):
            if metric == "ops_per_step" and not (col.get("op_count", 0) and bcol.get("op_count", 0)) and (
                    col.get("op_count", 0) or bcol.get("op_count", 0)):
                # Ops recorded in one trace and none in the other: a native program, or a profiler setting
                # (ProfilerActivity.CPU off, nsys): "0 ops against 250" would read as a program change.
                bare = lab if not col.get("op_count", 0) else base
                out.append(f"{bare} records no framework op and the other trace does (a native program, or a "
                           "profiler that did not record the host's ops: torch.profiler without ProfilerActivity.CPU, "
                           "nsys): op counts and op time are not compared.")
                continue
            if metric in col and (col[metric] or bcol[metric]) and col[metric] != bcol[metric]:
                out.append(f"{lab} runs {_count(col[metric])} {what} against {_count(bcol[metric])} in {base} "
                           f"({rel(col[metric], bcol[metric])}).")
        # "other" holds wrappers (TF's EagerExecute waits out the whole function): name classified work.
        ops_in_both = bool(col.get("op_count", 0) and bcol.get("op_count", 0))
        classes = [m for m in metrics.index if ((m.endswith("_time") and m[:-5] in KERNEL_CLASSES)
                   or (ops_in_both and m.startswith("op_") and m.endswith("_time")))
                   and m not in ("other_time", "op_other_time")]
        if classes:
            deltas = (col[classes] - bcol[classes]).abs().sort_values(ascending=False)
            top = deltas.index[0]
            # A change of a few µs in a ms step is run-to-run noise (two captures of the same loop moved
            # 33 µs of GEMM time, 1.6% of the step): stated only from CLASS_CHANGE_SHARE of the step.
            step = max(float(col.get("step_time", 0)), float(bcol.get("step_time", 0)))
            if deltas.iloc[0] > 0 and deltas.iloc[0] >= CLASS_CHANGE_SHARE * step:
                label = f"framework-op {top[3:-5]} time" if top.startswith("op_") else f"GPU {top[:-5]} time"
                unit = " per step" if per_step else " over the whole trace"
                sentence = (f"The largest change in classified work is {label}{unit}: {ms(col[top])} in {lab} against "
                            f"{ms(bcol[top])} in {base} ({rel(col[top], bcol[top])})")
                # A drop in one class beside a rise in another of the same kind (op or GPU) is often the same
                # work under a new class (separate GEMM ops folded into one fused RNN op): say both.
                change = col[classes] - bcol[classes]
                kin = [m for m in classes if m.startswith("op_") == top.startswith("op_") and m != top]
                # The other way: the largest rise beside a drop, the largest drop beside a rise.
                other = (change[kin].idxmax() if change[top] < 0 else change[kin].idxmin()) if kin else None
                if other is not None and -change[other] * np.sign(change[top]) >= 0.25 * abs(change[top]):
                    what = f"framework-op {other[3:-5]}" if other.startswith("op_") else f"GPU {other[:-5]}"
                    moved = "out of" if change[top] > 0 else "into"
                    sentence += (f", while {what} time {'rose' if change[other] > 0 else 'fell'} from "
                                 f"{ms(bcol[other])} to {ms(col[other])}: part of the work may have moved {moved} "
                                 "that class (a fused op doing what separate ops did)")
                out.append(sentence + ".")
        out += _largest_changes_by_name(names, lab, base, max(b, v), v / b if b and v else 1.0, per_step, ms,
                                        dims_of)
        out += _waiting_finding(col, bcol, lab, base, ms)
        added = names[(names[f"count_{base}"] == 0) & (names[f"count_{lab}"] > 0)]
        removed = names[(names[f"count_{base}"] > 0) & (names[f"count_{lab}"] == 0)]
        for frame, verb in ((added, "has"), (removed, "lacks")):
            if len(frame):
                shown = ", ".join(short_name(n) for n in frame.name.head(3))
                more = f" and {len(frame) - 3} more" if len(frame) > 3 else ""
                out.append(f"{lab} {verb} {len(frame)} name(s) that {base} {'lacks' if verb == 'has' else 'has'}: "
                           f"{shown}{more}.")
    return out


def _count(value: float) -> str:
    """A count, or a median of counts (half-integers when steps differ): 0.5 is not written as 0."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


# The largest change in classified work is stated when it is at least this share of the (larger) step time.
CLASS_CHANGE_SHARE = 0.05
# An op's own time rose out of proportion to the step when it grew this many times the step's ratio.
RISE_APART = 1.5
# A trace waits this share of its step more than another: worth a sentence (ranks of one job held up by one).
WAITING_GAP_SHARE = 0.2


def _largest_changes_by_name(names: pd.DataFrame, lab: str, base: str, step_ns: float, ratio: float,
                             per_step: bool, ms, dims_of: Callable[[str, str], str] | None = None) -> list[str]:
    """The op or kernel whose own time rose most against the baseline, and the one whose own time fell
    most, each where the change is at least ``CLASS_CHANGE_SHARE`` of the step and out of proportion
    to the step's own change (``RISE_APART`` times the step ratio): a regression a faster step (or
    another class's drop) hides, or the cause of a slower one; what made a step faster, or a gain a
    slower one hides. A loop captured twice on a busy machine runs every op slower alike
    (tests/data/cpu/autocast_attention_fp32 and _fp32_again: the step 1.19x, aten::mm 1.2x): no op
    stands out, none is named. Only names both traces run: a name one trace lacks is work in place of
    other work (torch.compile's fused kernel for the eager ops), listed with the added and removed
    names. Own time, so that the op doing the work is named, not the wrappers around it (an autograd
    node and its evaluate_function change by as much as the kernel call inside). Where both traces
    recorded shapes and the op's most time ran on other input dims in each (``dims_of(label, name)``), its
    calls did other work, and are not said to be faster or slower."""
    if not len(names) or f"self_ns_{lab}" not in names.columns:
        return []
    new_ns, old_ns = names[f"self_ns_{lab}"].to_numpy(), names[f"self_ns_{base}"].to_numpy()
    both = (old_ns > 0) & (new_ns > 0)
    out = []
    for rises in (True, False):
        apart = both & ((new_ns >= RISE_APART * max(ratio, 1.0) * old_ns) if rises else
                        (old_ns >= RISE_APART * max(1 / ratio, 1.0) * new_ns))
        change = np.where(apart, (new_ns - old_ns) if rises else (old_ns - new_ns), 0.0)
        top = int(change.argmax())
        if not change[top] > 0 or change[top] < CLASS_CHANGE_SHARE * step_ns:
            continue
        row = names.iloc[top]
        new, old = float(new_ns[top]), float(old_ns[top])
        what = "op" if row["kind"] == "cpu_op" else "GPU activity"
        hidden = ratio < 1 if rises else ratio > 1  # against the step's own direction
        lead = f"Against {lab}'s {'faster' if rises else 'slower'} step, the" if hidden else "The"
        unit = " per step" if per_step else " over the whole trace"
        # Slower calls, or more of them: the remedy differs (what each call does, or what calls it).
        calls, base_calls = float(row[f"count_{lab}"]), float(row[f"count_{base}"])
        per_call = (new / calls) / (old / base_calls)
        each = f"{per_call:.1f}x as long" if per_call >= 1 else f"{1 / per_call:.1f}x faster"
        new_dims, old_dims = ((dims_of(lab, str(row["name"])), dims_of(base, str(row["name"])))
                              if dims_of is not None and row["kind"] == "cpu_op" else ("", ""))
        if abs(calls - base_calls) > 0.1 * base_calls:
            how = f"{_count(calls)} call{'' if calls == 1 else 's'}{unit} against {_count(base_calls)}, each {each}"
        else:
            how = f"its one call{unit} {each}" if calls == 1 else f"its {_count(calls)} calls{unit} each {each}"
        if BACKWARD_NODE.match(str(row["name"])):
            # Autograd's range around a node: its own time is what runs there outside the node's ops.
            how = how.replace(each, f"with {per_call:.1f}x the own time" if per_call >= 1 else f"with {1 / per_call:.1f}x less own time")
            how += ("; a backward node's own time is not its arithmetic (that is in the ops it runs) but the hooks "
                    "and waits at it: FSDP's gathers for the backward, DDP's reducer, gradient hooks")
        if new_dims and old_dims and new_dims != old_dims:
            # Another size of work per call (a GNN's per-edge products gone): not the same calls run slower or faster.
            how += (f", on other input shapes (most of its time on {compact_shapes(new_dims)} in {lab}, on "
                    f"{compact_shapes(old_dims)} in {base}): other work per call, not the same calls "
                    f"{'slower' if per_call >= 1 else 'faster'}")
        moved = f"rose most by name: {ms(new)}" if rises else f"fell most by name: {ms(new)}"
        times = f"{new / old:.1f}x" if rises else f"{old / new:.1f}x less"
        out.append(f"{lead} {what} {short_name(str(row['name']))} {moved} of its own time{unit} in {lab} against "
                   f"{ms(old)} in {base} ({times}: {how}).")
    return out


def _waiting_finding(col: pd.Series, bcol: pd.Series, lab: str, base: str, ms) -> list[str]:
    """One trace's loop waits (for another thread's collective, or blocked in Python) a fifth of its
    step or more longer than the other's: in one DDP job's ranks, the one that waits least holds up
    the others (its collectives start last)."""
    if "waiting_time" not in col or "waiting_time" not in bcol:
        return []
    w, bw = float(col["waiting_time"]), float(bcol["waiting_time"])
    step = max(float(col["step_time"]), float(bcol["step_time"]))
    if not step or abs(w - bw) < WAITING_GAP_SHARE * step:
        return []
    waiter, other = (lab, base) if w > bw else (base, lab)
    return [f"{waiter}'s loop waits {ms(max(w, bw))} per step ({max(w, bw) / step:.0%} of the step) against "
            f"{ms(min(w, bw))} in {other}: waiting for another thread's collective or blocked in Python, not work. "
            f"If they are ranks of one job, {other} holds {waiter} up: its work per step is the one to cut."]


# Fine-grained ops with input shapes recorded: the profiler's per-op cost (a few µs) is a real part of them.
DENSE_OPS_PER_MS = 20
# Python calls a step that say the Python tracer was on (a trace without it records none).
PYTHON_TRACED_CALLS = 10


def _unprofiled(base: TraceSummary, other: TraceSummary, profiled_ratio: float) -> list[str]:
    """The headline from unprofiled step times when both are known; else a caveat when the profiled
    times are suspect (shapes recorded and dense ops), with the figure that makes them so."""
    if base.unprofiled_ns and other.unprofiled_ns:
        r = other.unprofiled_ns / base.unprofiled_ns
        word = f"takes {r:.2f}x as long as" if r >= 1 else f"is {1 / r:.2f}x faster than"
        sources = sorted({base.unprofiled_from, other.unprofiled_from})
        return [f"Without the profiler, {other.label} {word} {base.label} per step ({other.unprofiled_ns / 1e6:,.3f} ms "
                f"vs {base.unprofiled_ns / 1e6:,.3f} ms; from {' and '.join(sources)}); the profiled ratio is "
                f"{profiled_ratio:.2f}."]
    out = []
    stacks = [s for s in (base, other) if s.python_calls_per_step >= PYTHON_TRACED_CALLS]
    if len(stacks) == 1 and base.source == other.source:
        traced = stacks[0]
        bare = other if traced is base else base
        out.append(f"{traced.label} was profiled with Python's calls traced ({traced.python_calls_per_step:,.0f} a step: "
                   f"{PYTHON_TRACER_OPTION.get(traced.source, 'a Python tracer')}), {bare.label} without: the tracer's own "
                   f"cost per call is part of {traced.label}'s step time only, so the profiled ratio overstates "
                   f"{traced.label}'s time; compare captures made with the same profiler options, or give unprofiled "
                   f"step times with --step-time {traced.label}=TIME and {bare.label}=TIME.")
    for s in (base, other):
        if s.record_shapes and s.ops_per_ms >= DENSE_OPS_PER_MS:
            out.append(f"{s.label}'s profiled steps run {s.ops_per_ms:,.0f} framework ops per ms with input shapes "
                       f"recorded: the profiler's own cost per op is part of its time, so profiled ratios overstate "
                       f"differences in fine-grained work; give unprofiled step times with --step-time "
                       f"{s.label}=TIME (the step timed without the profiler, with a unit: 12ms, 0.2s).")
    return out


def _spread(s: TraceSummary) -> str:
    st = s.step_stats
    assert st is not None
    text = (f"{s.label}: {st.used.size} step(s) used, {st.min_ns / 1e6:,.3f}-{st.max_ns / 1e6:,.3f} ms "
            f"(median {st.median_ns / 1e6:,.3f} ms, coefficient of variation {st.cv:.0%})")
    flagged = st.describe_left_out()
    if flagged and not st.keep_all:
        text += "; left out: " + "; ".join(flagged)
    if st.cycle:
        text += (f"; every {st.cycle} steps one runs the loop's periodic work (as gradient accumulation's optimizer "
                 f"step): its step time and per-step metrics are the cycle's average step, not the median")
    elif st.window:
        text += (f"; read by windows of {st.window} steps (their average step), as the trace it is compared with "
                 "runs periodic work every as many steps")
    return text + "."


def parse_condition(expr: str) -> tuple[str, str, str, float, str | None]:
    """Parse ``METRIC OP THRESHOLD``; raises UsageError with the grammar on a bad expression."""
    m = _EXPR.match(expr)
    if not m:
        raise UsageError(f"--fail-if {expr!r}: expected METRIC OP THRESHOLD, e.g. 'total_time > +5%' or 'kernel_count > +10'")
    return m["metric"], m["op"], m["sign"], float(m["num"]), m["unit"]


def _wide(frames: list[pd.DataFrame], keys: list[str], values: list[str], labels: list[str]) -> pd.DataFrame:
    long = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*keys, *values, "label"])
    if long.empty:
        return pd.DataFrame(columns=[*keys, *[f"{v}_{lab}" for v in values for lab in labels]])
    wide = long.pivot_table(index=keys, columns="label", values=values, aggfunc="sum", fill_value=0, observed=True)
    wide.columns = [f"{v}_{lab}" for v, lab in wide.columns]
    for v in values:
        for lab in labels:
            if f"{v}_{lab}" not in wide.columns:
                wide[f"{v}_{lab}"] = 0
    return wide[[f"{v}_{lab}" for v in values for lab in labels]].reset_index()
