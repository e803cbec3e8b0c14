"""Build a ``Document`` from each analysis result (what each report shows, in what order)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema
from tracekit.analyze.breakdown import HOST_CLASSES, UNRECORDED_OPS_PER_OP_NS, Breakdown
from tracekit.analyze.classify import KERNEL_CLASSES, OP_CLASSES, short_name
from tracekit.analyze.compare import Comparison
from tracekit.analyze.cpu_partition import PARTS
from tracekit.analyze.critical_path import CATEGORIES as PATH_CATEGORIES
from tracekit.analyze.critical_path import WHOLE_TRACE, CriticalPath
from tracekit.analyze.launch import GAP_HOST_CLASSES, LaunchReport
from tracekit.analyze.ranges import MODULE_PREFIX, RangesReport
from tracekit.analyze.stalls import STALL_RATIO
from tracekit.analyze.steps import StepStats
from tracekit.analyze.top_ops import TopOps
from tracekit.analyze.untraced_ops import LEVEL_WORDS as UNTRACED_LEVEL_WORDS
from tracekit.analyze.untraced_ops import NOTE_SHARE as UNTRACED_NOTE_SHARE
from tracekit.analyze.whatif import WhatIf
from tracekit.ingest.columns import trace_extra
from tracekit.render.document import Chart, Column, Document, Section, Table, format_cell

MAX_STEP_BARS = 60


def records(df: pd.DataFrame) -> list[dict]:
    """DataFrame rows as dicts of Python values, NaN as None (for JSON and table cells).

    Column by column (``tolist`` makes the Python values in C), then zipped into rows: a hundred
    thousand range instances take 0.1 s here, against 2 s through ``to_dict(orient="records")``."""
    keys = list(df.columns)
    if not keys:
        return [{} for _ in range(len(df))]
    columns = []
    for key in keys:
        series = df[key]
        values = series.tolist()
        if not isinstance(series.dtype, np.dtype):  # pandas' nullable and other extension dtypes
            values = [None if v is pd.NA or v is pd.NaT else v for v in values]
        if series.dtype.kind in "fcO":
            values = [None if isinstance(v, float) and v != v else v for v in values]
        columns.append(values)
    return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]


def facts(table: pa.Table, path: str) -> list[tuple[str, str]]:
    """The lines at the top of a report: the trace, its source and format, its size."""
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    out = [("trace", str(path)), ("source", meta.get(schema.META_SOURCE, "?")),
           ("format", meta.get(schema.META_SOURCE_FORMAT, "?")), ("events", f"{table.num_rows:,}")]
    if meta.get(schema.META_FRAMEWORK_VERSION):
        out.append(("framework", meta[schema.META_FRAMEWORK_VERSION]))
    providers = trace_extra(table).get("onnxruntime_providers")  # tracekit/ingest/onnxruntime.py
    if isinstance(providers, dict) and providers:
        out.append(("execution providers", ", ".join(f"{p} ({n:,} node runs)" for p, n in providers.items())))
    return out


def _step_label(step: int) -> str:
    return "all" if step < 0 else f"step {step}"


STEP_ROWS = 20  # steps listed one by one, past which a table keeps the flagged ones and both ends


def _listed_steps(steps: np.ndarray, used: list[int] | None) -> np.ndarray:
    """Which of ``steps`` (numbers in time order) a per-step table lists: all of up to STEP_ROWS,
    else the first STEP_ROWS // 2, the last STEP_ROWS // 4 and every step not ``used``."""
    index = np.arange(steps.size)
    if steps.size <= STEP_ROWS:
        return np.ones(steps.size, bool)
    return (index < STEP_ROWS // 2) | (index >= steps.size - STEP_ROWS // 4) | (
        ~np.isin(steps, used) if used is not None else False)


def _per_step_rows(df: pd.DataFrame, used: list[int] | None) -> tuple[pd.DataFrame, str]:
    """``df`` (a ``step`` column, -1 for the whole trace) with the per-step rows cut to
    ``_listed_steps``, and the table's note on those left out."""
    numbers = np.asarray(sorted(set(df.step[df.step >= 0].tolist())), np.int64)
    keep = _listed_steps(numbers, used)
    if keep.all():
        return df, ""
    rows = df[(df.step < 0) | df.step.isin(numbers[keep])]
    return rows, (f"{int((~keep).sum()):,} more steps in the JSON report (listed: the first {STEP_ROWS // 2}, "
                  f"the last {STEP_ROWS // 4} and those left out)")


def breakdown_sections(bd: Breakdown, used_steps: list[int] | None = None) -> list[Section]:
    """The breakdown's sections; ``used_steps`` (the steps left after warm-up and outliers) make the
    headline sentences, while the tables keep every step (of a loop of more than STEP_ROWS steps,
    both ends and every step left out; the JSON report keeps them all)."""
    sections = []
    if bd.has_gpu:
        s = Section("GPU time by category (exclusive; adds up to the span)")
        whole = bd.gpu[bd.gpu.step == -1]
        for row in whole.itertuples():
            busy = row.busy_ns / row.span_ns if row.span_ns else 0
            s.sentences.append(f"GPU {row.device_id}: span {row.span_ns / 1e6:,.3f} ms, busy {busy:.1%}, "
                               f"idle {row.idle_ns / 1e6:,.3f} ms; compute {row.compute_ns / 1e6:,.3f} ms, "
                               f"non-compute {row.non_compute_ns / 1e6:,.3f} ms.")
        used = [c for c in KERNEL_CLASSES if bd.gpu[f"{c}_ns"].sum() > 0]
        cols = [Column("device"), Column("step"), Column("span", "ns"), *[Column(c, "ns") for c in used],
                Column("idle", "ns"), Column("idle %", "pct"), Column("activities", "count")]
        listed, more = _per_step_rows(bd.gpu, used_steps)
        rows = [[int(r["device_id"]), _step_label(int(r["step"])), r["span_ns"], *[r[f"{c}_ns"] for c in used], r["idle_ns"],
                 r["idle_ns"] / r["span_ns"] if r["span_ns"] else 0.0, r["activities"]] for r in records(listed)]
        # A step row's span is HTA's, its first to last GPU activity; the verdict's is the step's window.
        spans = ("a step's span: its first to last GPU activity (the verdict's idle time is over the steps' "
                 "whole windows)" if (bd.gpu.step >= 0).any() else "")
        s.tables.append(Table("", cols, rows, "; ".join(
            x for x in ("priority when streams overlap: " + " > ".join(KERNEL_CLASSES), spans, more) if x)))
        per_step = listed[listed.step >= 0].head(MAX_STEP_BARS)
        chart_src = per_step if len(per_step) else whole
        s.charts.append(Chart("stacked", "GPU time per step" if len(per_step) else "GPU time", [
            f"GPU {int(r['device_id'])} {_step_label(int(r['step']))}" for r in records(chart_src)], [*used, "idle"],
            [[r[f"{c}_ns"] / 1e6 for c in used] + [r["idle_ns"] / 1e6] for r in records(chart_src)]))
        k = bd.gpu_classes
        kv = k[(k.view == "kernel") & (k["count"] > 0)]
        s.tables.append(Table("Kernel view (by kernel name)", [Column("device"), Column("class"), Column("kernels", "count"),
                              Column("kernel time", "ns"), Column("exclusive", "ns")],
                              [[r["device_id"], r["class"], r["count"], r["kernel_ns"], r["exclusive_ns"]] for r in records(kv)]))
        ov = k[k.view == "op"]
        s.tables.append(Table("Op view (by launching framework op; kernels inside a fused RNN op count as rnn)",
                              [Column("device"), Column("class"), Column("kernels", "count"), Column("kernel time", "ns")],
                              [[r["device_id"], r["class"], r["count"], r["kernel_ns"]] for r in records(ov)]))
        sections.append(s)
    host = bd.host
    if len(host) and host.busy_ns.sum() > 0:
        s = Section("Host time (per thread, exclusive, summed over threads)")
        if bd.unrecorded_gpu_work:
            s.sentences.append(f"No GPU activity in this trace, but the program ran on a GPU ({bd.unrecorded_gpu_work}): "
                               "framework is all time inside framework ops, which is launching and waiting for GPU "
                               "work the profiler did not record, not arithmetic.")
        elif not bd.has_gpu:  # the split is made for GPU traces, where host time is overhead around kernels
            s.sentences.append("No GPU in this trace: framework is all time inside framework ops, their arithmetic "
                               "included; the sections below split it into op classes and dispatch.")
        # Classes no thread ever spent time in (launch calls in a CPU-only trace) are left out.
        shown = [c for c in HOST_CLASSES if host[f"{c}_ns"].sum() > 0]
        counts = ["ops", *(["launches"] if host.launches.sum() > 0 else [])]
        cols = [Column("step"), *[Column(c, "ns") for c in shown], *[Column(c, "count") for c in counts]]
        listed, more = _per_step_rows(host, used_steps)
        s.tables.append(Table("", cols, [[_step_label(int(r["step"])), *[r[f"{c}_ns"] for c in shown],
                                          *[r[c] for c in counts]] for r in records(listed)], more))
        sections.append(s)
    if not bd.has_gpu and len(bd.cpu_ops):
        s = Section("CPU op time (self time by op class; " + (
            "the GPU's activity was not recorded: host time only)" if bd.unrecorded_gpu_work else "no GPU in this trace)"))
        whole = bd.cpu_ops[bd.cpu_ops.step == -1].iloc[0]
        n_steps = max(len(bd.steps), 1)
        ops_per_step = whole["ops"] / n_steps
        dispatch = whole["dispatch_ns"] / whole["span_ns"] if whole["span_ns"] else 0
        chosen = bd.cpu_ops[bd.cpu_ops.step.isin(used_steps)] if used_steps else None
        # Waiting and batch fetching are outside compute ops too, but not dispatch: said apart below.
        apart = bd.cpu_ops.waiting_ns.sum() + bd.cpu_ops.fetching_ns.sum() > 0
        what = ("is framework dispatch (outside any compute op, not waiting or fetching a batch)" if apart else
                "is outside any compute op (framework dispatch)")
        if chosen is not None and len(chosen) and len(chosen) < len(bd.steps):
            n_steps = len(chosen)
            ops_per_step = chosen.ops.sum() / n_steps
            dispatch = chosen.dispatch_ns.sum() / max(chosen.span_ns.sum(), 1)
            s.sentences.append(f"{ops_per_step:,.1f} framework ops per step over the {n_steps} step(s) used; "
                               f"{dispatch:.0%} of their time {what}.")
        elif bd.steps:
            s.sentences.append(f"{ops_per_step:,.1f} framework ops per step over {n_steps} step(s); {dispatch:.0%} of "
                               f"step time {what}.")
        else:  # no step marked: the counts are the whole trace's, and saying "per step" would be wrong
            s.sentences.append(f"{whole['ops']:,.0f} framework ops in the trace (no steps marked); {dispatch:.0%} of "
                               f"the time {what}.")
        if bd.timesteps and bd.steps:
            s.sentences.append(f"{ops_per_step / bd.timesteps:,.2f} framework ops per timestep ({bd.timesteps} timesteps per step).")
        rows = chosen if chosen is not None and len(chosen) else bd.cpu_ops[bd.cpu_ops.step == -1]
        compiled = rows.compiled_code_ns.sum() / max(rows.span_ns.sum(), 1)
        if compiled:
            s.sentences.append(f"{compiled:.0%} of step time, counted in that dispatch, runs in compiled graphs' own "
                               "code: their generated kernels and wrapper, which the trace does not split (the "
                               "compiled code column).")
        unrecorded = rows.unrecorded_ops_ns.sum() / max(rows.span_ns.sum(), 1)
        if unrecorded:
            s.sentences.append(f"{unrecorded:.0%} of step time, counted as compute and not in that dispatch, is TorchScript "
                               f"calls' own time, {UNRECORDED_OPS_PER_OP_NS / 1e3:.0f} µs or more for each op they record "
                               "where the interpreter costs about a µs: ops TorchScript runs itself, which the profiler does not record (a frozen model's "
                               "convolutions; the unrecorded ops column; op self time lists it as other).")
        waiting = rows.waiting_ns.sum() / max(rows.span_ns.sum(), 1)
        if waiting:
            s.sentences.append(f"{waiting:.0%} of step time the loop's thread waits, with no compute op running: "
                               "blocked in Python (a sleep, lock, poll or join; recorded with Python stacks) or "
                               "idle while a collective runs on another thread. Not dispatch.")
        fetching = rows.fetching_ns.sum() / max(rows.span_ns.sum(), 1)
        if fetching:
            s.sentences.append(f"{fetching:.0%} of step time the loop's thread fetches a batch (DataLoader __next__ / "
                               "IteratorGetNext) with no compute op running: the loader's own work or its wait for "
                               "worker processes. Not dispatch.")
        waiting_calls = rows.waiting_calls_ns.sum() / max(rows.span_ns.sum(), 1)
        if waiting_calls:
            s.sentences.append(f"Calls that wait while other threads run their ops (a TF function call on the Python "
                               f"thread while the executor's threads run the function's ops) hold {waiting_calls:.0%} "
                               "of step time as their own: the calling thread waiting for that work (the ops, and "
                               "the runtime's own work between them), counted in no op class (the waiting calls "
                               "column).")
        used = [c for c in OP_CLASSES if bd.cpu_ops[f"{c}_ns"].sum() > 0]
        extra = [*(["waiting_calls"] if bd.cpu_ops.waiting_calls_ns.sum() > 0 else []),
                 *(["unrecorded_ops"] if bd.cpu_ops.unrecorded_ops_ns.sum() > 0 else []), "dispatch",
                 *(["compiled_code"] if bd.cpu_ops.compiled_code_ns.sum() > 0 else []),
                 *(["waiting"] if bd.cpu_ops.waiting_ns.sum() > 0 else []),
                 *(["fetching"] if bd.cpu_ops.fetching_ns.sum() > 0 else [])]
        cols = [Column("step"), Column("span", "ns"), *[Column(c.replace("_", " "), "ns") for c in [*used, *extra]],
                Column("ops", "count")]
        listed, more = _per_step_rows(bd.cpu_ops, used_steps)
        s.tables.append(Table("", cols, [[_step_label(int(r["step"])), r["span_ns"], *[r[f"{c}_ns"] for c in [*used, *extra]], r["ops"]]
                                         for r in records(listed)], more))
        steps = listed[listed.step >= 0].head(MAX_STEP_BARS)
        src = steps if len(steps) else bd.cpu_ops
        s.charts.append(Chart("stacked", "CPU op self time per step", [_step_label(int(r["step"])) for r in records(src)],
                              used, [[r[f"{c}_ns"] / 1e6 for c in used] for r in records(src)]))
        sections.append(s)
    if not bd.has_gpu and len(bd.cpu_partition):
        sections.append(_partition_section(bd, used_steps))
    return sections


def _partition_section(bd: Breakdown, used_steps: list[int] | None) -> Section:
    p = bd.cpu_partition
    s = Section("Exclusive CPU split on the step's thread (the parts add up to the span)")
    parts = [c for c in PARTS if p[c].sum() > 0]
    unrecorded = (", to unrecorded ops (a TorchScript call's own time that is ops it ran unrecorded)"
                  if "unrecorded_ops_ns" in parts else "")
    s.sentences.append("Each instant of a step, on the thread that ran it, goes to the class of the innermost op running "
                       f"then, to framework (a wrapper or non-compute op){unrecorded}, to waiting (inside a call whose ops other "
                       "threads run, such as a TF function call), or to outside ops (Python, data loading, waiting "
                       "with no op open). Op time on other threads is listed apart, not in the split.")
    cols = [Column("step"), Column("span", "ns"), *[Column(c[:-3].replace("_", " "), "ns") for c in parts],
            Column("other threads", "ns")]
    listed, more = _per_step_rows(p, used_steps)
    s.tables.append(Table("", cols, [[_step_label(int(r["step"])), r["span_ns"], *[r[c] for c in parts],
                                      r["other_threads_ns"]] for r in records(listed)], more))
    return s


def _breakdown_data(bd: Breakdown) -> dict:
    partition = [{**r, "parts": list(PARTS)} for r in records(bd.cpu_partition)]
    return {"gpu": records(bd.gpu), "gpu_classes": records(bd.gpu_classes), "host": records(bd.host),
            "cpu_ops": records(bd.cpu_ops), "cpu_partition": partition, "steps": bd.steps, "timesteps": bd.timesteps,
            "has_gpu": bd.has_gpu, "unrecorded_gpu_work": bd.unrecorded_gpu_work}


def steps_section(st: StepStats) -> Section:
    """Step durations, their spread, and which steps headline numbers and verdicts leave out."""
    s = Section("Steps")
    used = st.used
    marked = f"{len(st.steps)} step(s) from {st.origin}" if st.origin else f"{len(st.steps)} step(s) marked"
    s.sentences.append(f"{marked}, {used.size} used: min / median / max "
                       f"{st.min_ns / 1e6:,.3f} / {st.median_ns / 1e6:,.3f} / {st.max_ns / 1e6:,.3f} ms, "
                       f"coefficient of variation {st.cv:.1%}.")
    if st.batches > 1:
        s.sentences.append(f"Each of these steps is one call running {st.batches} training batches (Keras "
                           f"steps_per_execution={st.batches}: the call's while loop ran its body {st.batches} times): "
                           f"durations and per-step figures are per call; a batch takes {st.median_ns / st.batches / 1e6:,.3f} "
                           "ms (the median call's share).")
    for said in (st.describe_cycle(), st.describe_spread()):
        if said:
            s.sentences.append(said[0].upper() + said[1:] + ".")
    flagged = st.describe_left_out()
    if flagged:
        verb = "kept (--keep-all-steps)" if st.keep_all else "left out of the verdict and headline numbers"
        s.sentences.append(f"Far from the others, {verb}: " + "; ".join(flagged) + ".")
    columns = [Column("step"), Column("duration", "ns"), Column("status"), Column("used")]
    listed = st.steps[_listed_steps(st.steps.step.to_numpy(np.int64), st.steps.step[st.steps.status == "steady"].tolist())]
    if len(listed) < len(st.steps):  # a long loop: its flagged steps, and its first and last steps for scale
        s.sentences.append(f"Listed: the first {STEP_ROWS // 2} and last {STEP_ROWS // 4} steps and every step left out; "
                           f"the other {len(st.steps) - len(listed):,} steady steps are in the JSON report.")
    rows = [[int(r.step), int(r.dur_ns), r.status, "yes" if r.used else "no"] for r in listed.itertuples()]
    if st.stalled_ns:
        s.sentences.append(f"Stalled: time lost in op calls that ran {STALL_RATIO:g}x the same call's median over the "
                           "steps (the thread was not running; see the verdict's evidence).")
        columns.append(Column("stalled", "ns"))
        rows = [[*row, st.stalled_ns.get(row[0], 0)] for row in rows]
    s.tables.append(Table("", columns, rows))
    return s


def steps_data(st: StepStats) -> dict:
    return {"min_ns": st.min_ns, "median_ns": st.median_ns, "max_ns": st.max_ns, "cv": st.cv, "origin": st.origin,
            "batches_per_step": st.batches, "cycle": st.cycle, "cycle_steps": st.cycle_steps, "far_kept": st.far_kept,
            "left_out": [int(x) for x in st.left_out.step], "steps": records(st.steps),
            "stalled": [{"step": k, "stalled_ns": v} for k, v in sorted(st.stalled_ns.items())],
            "excess": [{"step": k, **part.as_dict()} for k, parts in sorted(st.excess.items()) for part in parts]}


def top_ops_section(t: TopOps, source: str = "") -> Section:
    """``source``: the trace's source (torch, tf, nsys, ...), for the hint on recording shapes."""
    s = Section("Top ops (self time)")
    where = "the steps used" if t.window_ns else "the trace"
    threads = (f" Ops ran on {t.threads} threads, so their shares can add up to more than 100%."
               if t.threads > 1 else "")
    s.sentences.append(f"Share: of {where} ({t.window_ns / 1e6:,.3f} ms).{threads} " + (
        "Shapes are the ops' input dims." if t.shapes_recorded else
        "No input shapes recorded (torch.profiler(record_shapes=True) records them)." if source == "torch" else
        "No input shapes recorded in this trace."))
    shapes = [Column("input shapes")] if t.shapes_recorded else []
    rated = "gflops" in t.ops and bool(t.ops.gflops.notna().any())
    if rated:
        s.sentences.append("GFLOP/s: the rate a GEMM op achieved, its FLOPs (2 x M x K x N per call, from its shapes) "
                           "over its self time.")
    cols = [Column("op"), *shapes, Column("class"), Column("calls", "count"), Column("self time", "ns"),
            Column("mean", "ns"), Column("share", "pct"), *([Column("GFLOP/s", "float")] if rated else [])]
    # Where an op ran at several shapes, its time is split over the per-shape rows: its total by name
    # comes first (what the verdict names), the per-shape rows (with GEMM rates) after.
    vary = t.shapes_vary()
    if vary:
        s.tables.append(Table("By op name, all input shapes summed", [
            Column("op"), Column("class"), Column("input shapes", "count"), Column("calls", "count"),
            Column("self time", "ns"), Column("mean", "ns"), Column("share", "pct")],
            [[short_name(r["name"], 100), r["op_class"], r["shapes"] or None, r["calls"], r["self_ns"], r["mean_ns"],
              r["share"]] for r in records(t.by_name)]))
    # Names as in sentences (TF scopes cut to the last three); JSON keeps them whole.
    s.tables.append(Table("By op and input shapes" if vary else "", cols, [
        [short_name(r["name"], 100), *([r["shapes"]] if shapes else []), r["op_class"], r["calls"], r["self_ns"],
         r["mean_ns"], r["share"], *([r["gflops"]] if rated else [])] for r in records(t.ops)]))
    s.sentences.extend(f"{w}." for w in t.describe_waiting())
    if t.op_types:  # TF names each layer's op apart: the same time summed per op type
        s.tables.append(Table("By op type", [Column("op type"), Column("share", "pct")],
                              [[op_type, share] for op_type, share in t.op_types[:len(t.ops)]]))
    return s


def report_document(name: str, facts: list[tuple[str, str]], bd: Breakdown, lr: LaunchReport | None = None) -> Document:
    sections = []
    if lr is not None:
        sections.append(Section("Verdict", [f"{lr.verdict}."] + [f"Evidence: {e}." for e in lr.evidence]
                                + [f"Remedy: {r}." for r in lr.remedies]))
        if lr.steps is not None and len(lr.steps.steps):
            sections.append(steps_section(lr.steps))
        if lr.top_ops is not None and len(lr.top_ops.ops):
            sections.append(top_ops_section(lr.top_ops, dict(facts).get("source", "")))
    used = lr.steps.used_step_numbers() if lr is not None and lr.steps is not None and len(lr.steps.steps) else None
    sections += breakdown_sections(bd, used)
    data: dict[str, Any] = {"breakdown": _breakdown_data(bd)}
    if lr is not None:
        data["verdict"] = {"verdict": lr.verdict, "evidence": lr.evidence, "remedies": lr.remedies}
        if lr.steps is not None and len(lr.steps.steps):
            data["steps"] = steps_data(lr.steps)
        if lr.top_ops is not None:
            data["top_ops"] = records(lr.top_ops.ops)
            data["top_ops_by_name"] = records(lr.top_ops.by_name)
            if lr.top_ops.op_types:
                data["top_op_types"] = [{"op_type": t, "share": share} for t, share in lr.top_ops.op_types]
            data["waiting_ops"] = records(lr.top_ops.waiting)
        data.update(findings_data(lr))
    return Document(f"tracekit report: {name}", "report", facts, sections, data)


def findings_data(lr: LaunchReport) -> dict[str, object]:
    """The JSON of the verdict's own findings (``LaunchReport.findings``), where found."""
    return {key: f.as_dict() for key, f in lr.findings().items()}


def _dist_row(label: str, d) -> list:
    if not d.count:  # statistics of nothing are no figures
        return [label, 0, 0, None, None, None, None, None]
    return [label, d.count, d.total_ns, d.mean_ns, d.p50_ns, d.p90_ns, d.p99_ns, d.max_ns]


def launch_document(name: str, facts: list[tuple[str, str]], lr: LaunchReport) -> Document:
    s = Section("Verdict", [f"{lr.verdict}."] + [f"Evidence: {e}." for e in lr.evidence] + [f"Remedy: {r}." for r in lr.remedies])
    sections = [s]
    if lr.steps is not None and len(lr.steps.steps):
        sections.append(steps_section(lr.steps))
    if lr.has_gpu:
        d = Section("Launch calls, kernels and launch delay")
        cols = [Column(""), Column("count", "count"), Column("total", "ns"), Column("mean", "ns"), Column("p50", "ns"),
                Column("p90", "ns"), Column("p99", "ns"), Column("max", "ns")]
        d.tables.append(Table("", cols, [_dist_row("launch API call", lr.launch_api), _dist_row("GPU kernel", lr.kernel),
                                         _dist_row("launch -> start delay", lr.delay)],
                              f"{lr.short_kernel_share:.0%} of kernels are shorter than {lr.short_kernel_ns / 1e3:.0f} µs"
                              if lr.kernel.count else "no kernel recorded"))
        if len(lr.pairs):
            edges = np.array([0, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 1e6, np.inf])
            hist, _ = np.histogram(lr.pairs.delay_ns.to_numpy(), edges)
            labels = ["<1µs", "1-2µs", "2-5µs", "5-10µs", "10-20µs", "20-50µs", "50-100µs", "0.1-1ms", ">1ms"]
            d.charts.append(Chart("histogram", "Launch -> start delay", labels, ["pairs"], [[float(h)] for h in hist], "delay"))
        sections.append(d)
        g = Section("GPU idle gaps and what the host was doing")
        total = int(lr.gaps.dur_ns.sum()) if len(lr.gaps) else 0
        g.sentences.append(f"{len(lr.gaps):,} gaps, {total / 1e6:,.3f} ms idle of {lr.span_words}.")
        g.tables.append(Table("Gaps by host activity (the class with most overlap)",
                              [Column("host activity"), Column("gaps", "count"), Column("idle time", "ns")],
                              [[r["host_activity"], r["gaps"], r["total_ns"]] for r in records(lr.gaps_by_host)]))
        top = lr.gaps.sort_values("dur_ns", ascending=False, kind="stable").head(20)
        # Starts from the trace's first event: epoch nanoseconds mean nothing to a reader.
        g.tables.append(Table("Longest gaps (start: time from the trace's first event)",
                              [Column("device"), Column("start", "ns"), Column("gap", "ns"),
                               *[Column(c, "ns") for c in GAP_HOST_CLASSES]],
                              [[r["device_id"], r["start_ns"] - lr.origin_ns, r["dur_ns"],
                                *[r[f"{c}_ns"] for c in GAP_HOST_CLASSES]] for r in records(top)]))
        if len(lr.gaps):
            edges = np.array([0, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, np.inf])
            hist, _ = np.histogram(lr.gaps.dur_ns.to_numpy(), edges)
            g.charts.append(Chart("histogram", "Idle gap lengths", ["<1µs", "1-10µs", "10-100µs", "0.1-1ms", "1-10ms", "10-100ms", ">100ms"],
                                  ["gaps"], [[float(h)] for h in hist], "gap length"))
        if lr.low_utilization is not None and len(lr.low_utilization):
            g.tables.append(Table("Low-utilization stretches (30 equal chunks, below 50%, as nsys gpu_time_util; start "
                                  "from the trace's first event)",
                                  [Column("device"), Column("start", "ns"), Column("length", "ns"), Column("in use", "pct")],
                                  [[r["device_id"], r["start_ns"] - lr.origin_ns, r["dur_ns"], r["in_use"]]
                                   for r in records(lr.low_utilization)]))
        sections.append(g)
    p = Section("Per step")
    # A CPU-only trace has no GPU activities or launches: no columns of zeros.
    counts = [(k, title) for k, title in (("kernels", "GPU activities"), ("launches", "launches"), ("ops", "ops"))
              if k == "ops" or lr.per_step[k].sum() > 0]
    p.tables.append(Table("", [Column("step"), *[Column(title, "count") for _, title in counts]],
                          [[_step_label(int(r["step"])), *[r[k] for k, _ in counts]] for r in records(lr.per_step)]))
    sections.append(p)
    from dataclasses import asdict
    data = {"verdict": lr.verdict, "evidence": lr.evidence, "remedies": lr.remedies, "gpu_span_ns": lr.gpu_span_ns,
            "gpu_idle_ns": lr.gpu_idle_ns, "short_kernel_ns": lr.short_kernel_ns, "short_kernel_share": lr.short_kernel_share,
            "launch_api": asdict(lr.launch_api), "kernel": asdict(lr.kernel), "launch_delay": asdict(lr.delay),
            "gaps_by_host": records(lr.gaps_by_host),
            "low_utilization": records(lr.low_utilization) if lr.low_utilization is not None else [], "per_step": records(lr.per_step), "gaps": records(lr.gaps)}
    if lr.steps is not None and len(lr.steps.steps):
        data["steps"] = steps_data(lr.steps)
    data.update(findings_data(lr))
    return Document(f"tracekit launch: {name}", "launch", facts, sections, data)


def ranges_document(name: str, facts: list[tuple[str, str]], rr: RangesReport) -> Document:
    s = Section("Ranges (NVTX / record_function / TraceMe / nn.Module), by total CPU time")
    if len(rr.summary) and rr.summary.name.str.startswith(MODULE_PREFIX).any():
        s.sentences.append("nn.Module rows are PyTorch's module events (profile(with_stack=True) or with_modules=True): "
                           "each layer's forward; its backward runs in autograd's ops, outside them.")
    # A trace whose ranges launched no GPU work (a CPU-only capture) gets no columns of zeros; JSON keeps them.
    gpu = bool(len(rr.summary)) and bool(rr.summary.gpu_ops.any())
    # A name called inside itself: its total counts that time twice (as nsys's does); the outermost calls' sum beside it.
    nested = rr.summary[rr.summary.outermost_ns < rr.summary.total_ns] if len(rr.summary) else rr.summary
    if len(nested):
        shown = ", ".join(f"{n} ({t / 1e6:,.3f} ms of {a / 1e6:,.3f} ms)" for n, t, a in
                          zip(nested.name[:3], nested.outermost_ns[:3], nested.total_ns[:3], strict=True))
        s.sentences.append(f"{len(nested)} range name(s) run inside calls of the same name (recursion; TF names a "
                            f"tf.function's call after the function, inside a Trace of that name): their total counts "
                            f"that time twice, as nsys's nvtx_sum does; \"outermost\" sums only the outermost calls: "
                            f"{shown}.")
    cols = [Column("range"), Column("instances", "count"), Column("total", "ns"),
            *([Column("outermost", "ns")] if len(nested) else []), Column("mean", "ns"), Column("depth", "float"),
            *([Column("GPU projection", "ns"), Column("GPU ops", "count"), Column("GPU busy", "ns")] if gpu else [])]
    s.tables.append(Table("", cols, [[r["name"], r["instances"], r["total_ns"], *([r["outermost_ns"]] if len(nested) else []),
                                      r["mean_ns"], r["mean_depth"],
                                      *([r["proj_total_ns"], r["gpu_ops"], r["gpu_busy_ns"]] if gpu else [])]
                                     for r in records(rr.summary)],
                          "GPU projection: first start to last end of the GPU work launched inside the range (as nsys nvtx_gpu_proj)"
                          if gpu else "No range launched GPU work: the GPU columns are left out (the JSON output has them)."))
    return Document(f"tracekit ranges: {name}", "ranges", facts, [s],
                    {"summary": records(rr.summary), "instances": records(rr.instances)})


def compare_document(names: list[str], cmp: Comparison) -> Document:
    base = cmp.labels[0]
    facts = [(lab, n) for lab, n in zip(cmp.labels, names, strict=True)]
    sections = []
    shown = [r for r in records(cmp.metrics) if any(r[lab] for lab in cmp.labels)]
    hidden = len(cmp.metrics) - len(shown)
    unit = ("Metrics are per step: the median over each trace's steps used (warm-up and outliers left out); "
            "total_time is the whole capture." if cmp.per_step else
            "Metrics are whole-trace totals (not every trace marks steps); step_time is the median step where "
            "steps are marked, else the whole trace.")
    m = Section("Metrics", [*cmp.findings, f"Deltas are against {base} (the first trace). {unit}"
                            + (f" {hidden} metric(s) that are 0 in every trace (e.g. GPU metrics of CPU-only traces) "
                               f"are not shown; the JSON output has them." if hidden else "")])
    cols = [Column("metric"), *[Column(lab, "raw") for lab in cmp.labels],
            *[Column(f"{lab} vs {base}", "raw") for lab in cmp.labels[1:]]]
    rows = []
    for r in shown:
        b = r[base]
        # Per-step medians of counts can end in .5; whole numbers print as counts.
        whole = all(float(r[lab]).is_integer() for lab in cmp.labels)
        fmt = "ns" if r["metric"].endswith("_time") or r["metric"] == "gpu_busy" else "count" if whole else "float"
        deltas = [f"{(r[lab] - b) / b:+.1%}" if b else ("new" if r[lab] else "–") for lab in cmp.labels[1:]]
        rows.append([r["metric"], *[format_cell(r[lab], fmt) for lab in cmp.labels], *deltas])
    m.tables.append(Table("", cols, rows))
    cats = [f"{c}_time" for c in KERNEL_CLASSES]
    cat_rows = [r for r in records(cmp.metrics) if r["metric"] in cats and any(r[lab] for lab in cmp.labels)]
    if cat_rows:
        m.charts.append(Chart("stacked", "GPU time by category", cmp.labels, [r["metric"][:-5] for r in cat_rows],
                              [[r[lab] / 1e6 for r in cat_rows] for lab in cmp.labels]))
    sections.append(m)
    if cmp.diagnoses:
        d = Section("Verdicts and remedies", ["Each trace's verdict and remedies as `tracekit report` gives them; a remedy "
                                              f"listed under a trace is one {base} is not given, or the reverse."])
        d.tables.append(Table("", [Column("trace"), Column("verdict"), Column("remedies")],
                              [[x.label, x.verdict, len(x.remedies)] for x in cmp.diagnoses]))
        for change in cmp.remedy_changes:
            d.sentences += [f"{change.label} only: {x}." for x in change.added]
            d.sentences += [f"{base} only (not {change.label}): {x}." for x in change.dropped]
        sections.append(d)
    if cmp.checks:
        c = Section("--fail-if checks", [f"{'FAILED' if x.failed else 'ok'}: {x.expression} for {x.label} "
                                         f"({x.baseline:,.0f} -> {x.value:,.0f})" for x in cmp.checks])
        sections.append(c)
    over = ("Counts and totals are per step (the mean over the steps used)" if cmp.per_step else
            "Counts and totals are summed over the whole trace")
    n = Section("Kernels and ops by name (largest change first)",
                [f"{over}; an op's total is inclusive (it contains the ops it calls), a kernel's is its own GPU time."])
    count_fmt = "float" if cmp.per_step else "count"
    ncols = [Column("kind"), Column("name"), Column("status"), *[Column(f"count {lab}", count_fmt) for lab in cmp.labels],
             *[Column(f"total {lab} (incl.)", "ns") for lab in cmp.labels], *[Column(f"mean {lab}", "ns") for lab in cmp.labels]]
    n.tables.append(Table("", ncols, [[r["kind"], r["name"], r["status"], *[r[f"count_{lab}"] for lab in cmp.labels],
                                       *[r[f"total_ns_{lab}"] for lab in cmp.labels], *[r[f"mean_ns_{lab}"] for lab in cmp.labels]]
                                      for r in records(cmp.names)]))
    added = int(cmp.names.status.str.startswith("added").sum())
    removed = int(cmp.names.status.str.startswith("removed").sum())
    n.sentences.append(f"{added} names appear and {removed} disappear relative to {base}.")
    sections.append(n)
    if len(cmp.ranges):
        rg = Section("Ranges")
        rg.tables.append(Table("", [Column("range"), *[Column(f"total {lab}", "ns") for lab in cmp.labels],
                                    *[Column(f"instances {lab}", "count") for lab in cmp.labels]],
                               [[r["name"], *[r[f"total_ns_{lab}"] for lab in cmp.labels], *[r[f"instances_{lab}"] for lab in cmp.labels]]
                                for r in records(cmp.ranges)]))
        sections.append(rg)
    if len(cmp.steps):
        st = Section("Steps (side by side in order of start; numbers as in each trace's report)")
        cols = [c for lab in cmp.labels for c in (Column(f"{lab} step"), Column(f"{lab} duration", "ns"),
                                                  Column(f"{lab} status"))]
        st.tables.append(Table("", cols, [[v for lab in cmp.labels for v in (
            "" if r[f"step_{lab}"] is None else int(r[f"step_{lab}"]), r[f"dur_ns_{lab}"], r[f"status_{lab}"] or "")]
            for r in records(cmp.steps)]))
        sections.append(st)
    data = {"labels": cmp.labels, "traces": names, "metrics": records(cmp.metrics), "names": records(cmp.names),
            "ranges": records(cmp.ranges), "steps": records(cmp.steps),
            "findings": cmp.findings, "diagnoses": [x.as_dict() for x in cmp.diagnoses],
            "remedy_changes": [x.as_dict() for x in cmp.remedy_changes], "checks": [{"expression": x.expression, "label": x.label, "baseline": x.baseline, "value": x.value, "failed": x.failed}
                       for x in cmp.checks], "failed": cmp.failed}
    return Document("tracekit compare: " + " vs ".join(cmp.labels), "compare", facts, sections, data)


PATH_LABELS = {"cpu_bound": "CPU-bound (framework / Python / host calls / CPU compute ops)", "data_loading": "data loading",
               "gpu_kernel_launch_overhead": "kernel launch overhead", "gpu_kernel_kernel_overhead": "kernel-kernel overhead",
               "gpu_compute_bound": "GPU compute", "gpu_communication_bound": "GPU communication",
               "cpu_communication_bound": "host communication (collectives)"}


# One event's label in the top table: a cpu_bound event is either a compute op run on the CPU or not.
EVENT_LABELS = {**PATH_LABELS, "cpu_bound": "CPU-bound: framework / Python / host call"}
CPU_COMPUTE_LABEL = "CPU-bound: a compute op run on the CPU"


# A path shorter than this share of its window says how much it leaves out: a user reading "CPU-bound
# 100%" of a path that is 13% of the step should know the other 87% is not on it.
PATH_COVERAGE_NOTE = 0.8


def critical_path_document(name: str, facts: list[tuple[str, str]], cp: CriticalPath) -> Document:
    window = cp.window
    where = f"{window['name']}" + (f" (instance {window['instance']})" if window.get("instance") else "") + \
        (f", {window['chosen']}" if window.get("chosen") else "")
    head = Section("Critical path", [
        f"Window: {where}. The longest chain of dependent work through it is {format_cell(cp.total_ns, 'ns')} "
        f"({cp.nodes:,} nodes, {cp.graph_edges:,} edges in the dependency graph).",
        "Edges between top-level host calls and waits inside blocking calls weigh nothing (HTA's rules): the path "
        "is the work, not the gaps."])
    start, end = window.get("start_ns"), window.get("end_ns")
    if not (isinstance(start, int) and isinstance(end, int)):
        start = end = 0
    span = end - start
    gpu_behind = span > 0 and cp.gpu_work_end_ns > end  # the path runs through GPU work that ends after the window
    if gpu_behind:
        head.sentences.append(
            f"The GPU work launched in the window ends {format_cell(cp.gpu_work_end_ns - end, 'ns')} after it (the GPU "
            "runs behind the host); the path is measured against the window up to that end.")
    elif span > 0 and cp.work_end_ns > end:
        head.sentences.append(
            f"Work that starts in the window ends {format_cell(cp.work_end_ns - end, 'ns')} after it; the path is "
            "measured against the window up to that end.")
    span = max(span, cp.work_end_ns - start) if span > 0 else span
    if span > 0 and cp.total_ns < PATH_COVERAGE_NOTE * span:
        head.sentences.append(
            f"The path covers {cp.total_ns / span:.0%} of the window ({format_cell(span, 'ns')}). The rest is time with "
            "no event of the path running: " + ("the GPU still running work launched before the window, " if gpu_behind
                                                else "") +
            "Python between ops (eager TensorFlow, JAX's dispatch, which record no op), "
            "waits, or work on threads the graph does not link to the path. The path leaves it out, as HTA's does; "
            "`tracekit report` counts the loop thread's share as dispatch, waiting or (stretches of 200 µs or more with "
            "no op) the loop's own Python work, and `whatif` replays it.")
    if span > 0 and cp.untraced_executor_ns >= UNTRACED_NOTE_SHARE * span:
        head.sentences.append(
            f"{format_cell(cp.untraced_executor_ns, 'ns')} of the window ({cp.untraced_executor_ns / span:.0%}) is inside "
            f"TF's graph executor with no op traced: at {UNTRACED_LEVEL_WORDS} TF records only the ops it deems "
            "expensive, so the inexpensive ones it runs inline (small elementwise ops, loop control) are not on the "
            "path; a capture at host_tracer_level 3 records them.")
    if not cp.host_work_traced:
        head.sentences.append(
            "The trace records the host's GPU API calls but not its own work (no framework op, Python frame or NVTX "
            "range): the host's share of the path is those calls alone, and what it did between them, dispatching "
            "or waiting, is not on it.")
    if window["name"] == WHOLE_TRACE:
        head.sentences.append("No step is marked, so this is the whole trace, start-up and first calls included; "
                              "`tracekit ranges` lists the ranges to analyse one iteration with --range NAME.")
    if cp.handoffs:
        head.sentences.append(
            f"{cp.handoffs:,} call(s) handed their work to other threads and waited ({cp.handed_ops:,} ops ran on "
            "those threads, as TF's executor runs a function's ops): the path runs through those ops, not over the wait.")
        if cp.handoff_return_ns and cp.total_ns:
            head.sentences.append(
                f"{format_cell(cp.handoff_return_ns, 'ns')} of the path ({cp.handoff_return_ns / cp.total_ns:.0%}) is the call(s) "
                "returning after the last op they handed off ended: the thread is blocked on that work until woken, "
                "nothing traced on it meanwhile (a late wake-up on a busy machine shows here).")
    bound = max(PATH_CATEGORIES, key=lambda c: cp.shares[c]) if cp.total_ns else ""
    if bound:
        head.sentences.append(f"Bound by: {PATH_LABELS[bound]}, {cp.shares[bound]:.1f}% of the path.")
    compute_share = 100 * cp.cpu_compute_ns / cp.total_ns if cp.total_ns else 0.0
    if cp.cpu_compute_ns:
        head.sentences.append(
            f"Of the CPU-bound {cp.shares['cpu_bound']:.1f}%, {compute_share:.1f} points are inside compute ops that ran "
            f"on the CPU (GEMM, elementwise, reductions, ... with no GPU work of their own): the math itself; the other "
            f"{cp.shares['cpu_bound'] - compute_share:.1f} are framework, Python and host calls.")
    if cp.stalled_ns and cp.total_ns:
        head.sentences.append(
            f"{format_cell(cp.stalled_ns, 'ns')} of the path ({cp.stalled_ns / cp.total_ns:.0%}) is op calls that stalled: "
            "they ran 10x or more the same call's median over the steps, their thread not running (see `tracekit "
            "report`), and the path would be that much shorter without it.")
    made_of = [[PATH_LABELS[c], cp.shares[c] / 100, cp.shares[c] / 100 * cp.total_ns] for c in PATH_CATEGORIES]
    under_cpu = PATH_CATEGORIES.index("cpu_bound") + 1  # sub-rows right under CPU-bound, which they are part of
    if cp.stalled_ns:
        made_of.insert(under_cpu, ["  of which stalled op calls (thread not running)", cp.stalled_ns / cp.total_ns,
                                   cp.stalled_ns])
    if cp.cpu_compute_ns:
        made_of.insert(under_cpu, ["  of which compute ops run on the CPU", compute_share / 100, cp.cpu_compute_ns])
    head.tables.append(Table("What the path is made of", [Column("bound by"), Column("share", "pct"), Column("time", "ns")],
                             made_of))
    head.charts.append(Chart("stacked", "Critical path by what bounds it", [where],
                             [PATH_LABELS[c] for c in PATH_CATEGORIES],
                             [[cp.shares[c] / 100 * cp.total_ns / 1e6 for c in PATH_CATEGORIES]]))
    top = Section("Top events on the path")
    top.tables.append(Table("", [Column("event"), Column("bound by"), Column("time on path", "ns"), Column("share", "pct")],
                            [[short_name(r.name), CPU_COMPUTE_LABEL if r.cpu_compute else EVENT_LABELS.get(r.category, r.category),
                              r.weight_ns, r.share / 100] for r in cp.top.itertuples()]))
    data = {"window": window, "path_ns": cp.total_ns, "window_with_work_ns": span,
            "path_of_window_pct": round(100 * cp.total_ns / span, 4) if span > 0 else None,
            "nodes": cp.nodes, "edges": cp.graph_edges,
            "handoffs": cp.handoffs, "handed_ops": cp.handed_ops,
            "handoff_return_ns": cp.handoff_return_ns, "stalled_ns": cp.stalled_ns,
            "untraced_executor_ns": cp.untraced_executor_ns,
            "shares_pct": {c: round(cp.shares[c], 4) for c in PATH_CATEGORIES},
            "cpu_bound_in_cpu_compute_ops_pct": round(compute_share, 4), "host_work_traced": cp.host_work_traced,
            "top": [{"name": r.name, "category": r.category, "cpu_compute_op": bool(r.cpu_compute),
                     "weight_ns": int(r.weight_ns), "share_pct": round(r.share, 4)} for r in cp.top.itertuples()]}
    return Document(f"tracekit critical-path: {name}", "critical-path", facts, [head, top], data)


def whatif_document(name: str, facts: list[tuple[str, str]], w: WhatIf) -> Document:
    where = f"{w.window['name']}" + (f" (instance {w.window['instance']})" if w.window.get("instance") else "") + \
        (f", {w.window['chosen']}" if w.window.get("chosen") else "")
    head = Section("What if", [
        f"Window: {where}, measured {format_cell(w.measured_step_ns, 'ns')}; replaying the trace unchanged gives "
        f"{format_cell(w.replayed_step_ns, 'ns')} (the replay's own error: "
        f"{(w.replayed_step_ns / w.measured_step_ns - 1) * 100 if w.measured_step_ns else 0:+.1f}%).",
        "Each scenario replays the step with changed costs; predictions are for the profiled step (scale by "
        "unprofiled / profiled step time for the real one). Ranked by predicted saving."])
    if len(w.replayed_tids) > 1:
        head.sentences.insert(1, f"Replayed as one line of work: threads {', '.join(map(str, w.replayed_tids))}, which "
                                 "launch GPU work and take turns (where their events overlap, one holds the other, as when "
                                 "PyTorch's autograd thread runs the backward pass while the Python thread waits in "
                                 "backward()).")
    if w.gpu_stream_busy_ns > 1.1 * w.measured_step_ns:
        head.sentences.insert(1, f"The GPU work launched in this window keeps one stream busy for "
                                 f"{format_cell(w.gpu_stream_busy_ns, 'ns')}, longer than the window: the GPU runs "
                                 "behind the host, so its time, not the host's, bounds each step, and the replay "
                                 "starts from it.")
    if not w.scenarios:
        head.sentences.append("No scenario changes this step: what the scenarios change (dispatch between ops, launch "
                              "calls, runs of elementwise ops, cell loops, syncs, per-parameter loops) is not in it; "
                              "its time is in compute ops, in waits for other threads' work, or in batch fetching, "
                              "which every scenario keeps.")
    if w.scenarios:
        head.tables.append(Table("", [Column("scenario"), Column("predicted step", "ns"), Column("saving", "ns"),
                                      Column("saving %", "pct"), Column("assumptions")],
                                 [[s.name, s.predicted_step_ns, s.saving_ns,
                                   s.saving_ns / w.replayed_step_ns if w.replayed_step_ns else 0.0, s.assumptions]
                                  for s in w.scenarios]))
        head.charts.append(Chart("stacked", "Predicted step time per scenario", ["replayed", *[s.name for s in w.scenarios]],
                                 ["step"], [[w.replayed_step_ns / 1e6], *[[s.predicted_step_ns / 1e6] for s in w.scenarios]]))
    data = {"window": w.window, "measured_step_ns": w.measured_step_ns, "replayed_step_ns": w.replayed_step_ns,
            "gpu_stream_busy_ns": w.gpu_stream_busy_ns, "replayed_threads": len(w.replayed_tids), "scenarios": [{"scenario": s.name, "predicted_step_ns": s.predicted_step_ns, "saving_ns": s.saving_ns,
                           "assumptions": s.assumptions, "upper_bound": s.upper_bound, "uncertain": s.uncertain} for s in w.scenarios]}
    return Document(f"tracekit whatif: {name}", "whatif", facts, [head], data)
