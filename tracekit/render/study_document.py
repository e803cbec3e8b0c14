"""The ``tracekit run`` report: every variant's breakdown, the native comparison, and the published
findings beside this machine's measurements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracekit.analyze.breakdown import Breakdown
from tracekit.analyze.classify import KERNEL_CLASSES
from tracekit.analyze.launch import LaunchReport
from tracekit.analyze.overhead import OverheadReport, run_time_ns
from tracekit.analyze.published import Finding
from tracekit.render.document import Column, Document, Section, Table
from tracekit.render.overhead_document import overhead_document

# Parts of the exclusive CPU split (tracekit.analyze.cpu_partition) shown per run; with "outside ops" they add to 100%.
CPU_CLASSES = ("rnn", "gemm", "elementwise", "cast", "reduction", "compiled", "framework")
GPU_CLASSES = ("rnn", "gemm", "elementwise", "cast", "memcpy", "other")


@dataclass
class StudyFacts:
    directory: str
    preset: str
    device: str
    device_name: str
    wall_s: float
    runs_ok: int
    runs_not_ok: list[dict[str, str]]  # {"run_id", "status" (failed | skipped), "reason"}
    runs_reused: int
    notes: list[str] = field(default_factory=list)


def _variant_rows(rows: Sequence[Mapping[str, Any]], breakdowns: Mapping[str, Breakdown],
                  launches: Mapping[str, LaunchReport]) -> tuple[list[Column], list[list[Any]], bool]:
    """One line per traced run: time, ops per timestep, time shares by class, launch verdict."""
    traced = [r for r in rows if r["run_id"] in breakdowns]
    gpu = any(breakdowns[r["run_id"]].has_gpu for r in traced)
    classes = GPU_CLASSES if gpu else CPU_CLASSES
    cols = [Column("framework"), Column("variant"), Column("profiler"), Column("dtype"), Column("shape"),
            Column("time", "ns"), Column("ops / timestep", "float"),
            *[Column(f"{c} %", "pct") for c in classes], Column("idle %" if gpu else "outside ops %", "pct"),
            Column("verdict")]
    out = []
    for r in sorted(traced, key=lambda r: (r["framework"], r["variant"], r["profiler"], sorted(r["config"].items()))):
        bd = breakdowns[r["run_id"]]
        c = r["config"]
        shape = f"h{c.get('hidden')} b{c.get('batch')} t{c.get('timesteps')}" + (f" v{c['vocab']}" if "vocab" in c else "")
        ops = bd.cpu_ops[bd.cpu_ops.step == -1]
        steps = max(1, len(bd.steps))
        ops_per_ts = float(ops.iloc[0]["ops"]) / steps / c["timesteps"] if len(ops) and c.get("timesteps") else None
        if gpu and bd.has_gpu:
            whole = bd.gpu[bd.gpu.step == -1].sum(numeric_only=True)
            span = float(whole["span_ns"]) or 1.0
            other = sum(float(whole[f"{k}_ns"]) for k in KERNEL_CLASSES if k not in GPU_CLASSES)
            shares = [(float(whole[f"{k}_ns"]) + (other if k == "other" else 0)) / span for k in classes]
            rest = float(whole["idle_ns"]) / span
        elif len(bd.cpu_partition):
            part = bd.cpu_partition[bd.cpu_partition.step == -1].iloc[0]
            span = float(part["span_ns"]) or 1.0
            shares = [float(part.get(f"{k}_ns", 0)) / span for k in classes]
            rest = float(part["outside_ops_ns"]) / span
        else:
            shares, rest = [0.0] * len(classes), None
        verdict = launches[r["run_id"]].verdict if r["run_id"] in launches and bd.has_gpu else ""
        out.append([r["framework"], r["variant"], r["profiler"], r["dtype"], shape, run_time_ns(r), ops_per_ts,
                    *shares, rest, verdict])
    return cols, out, gpu


def _count(facts: StudyFacts, status: str) -> int:
    return sum(1 for r in facts.runs_not_ok if r["status"] == status)


def study_document(facts: StudyFacts, rows: Sequence[Mapping[str, Any]], breakdowns: Mapping[str, Breakdown],
                   launches: Mapping[str, LaunchReport], findings: Sequence[Finding], overhead: OverheadReport) -> Document:
    doc_facts = [("directory", facts.directory), ("preset", facts.preset),
                 ("device", f"{facts.device} ({facts.device_name})"), ("wall time", f"{facts.wall_s:,.1f} s"),
                 ("runs", f"{facts.runs_ok} ok, {_count(facts, 'failed')} failed, {_count(facts, 'skipped')} skipped, "
                          f"{facts.runs_reused} reused from an earlier run")]
    sections = []
    summary = Section("Summary", list(facts.notes))
    if facts.device != "cuda":
        summary.sentences.append("No GPU on this machine: the GPU findings below are shown with their closest CPU "
                                 "measurement, marked as not comparable.")
    sections.append(summary)
    p = Section("Published vs measured")
    comparable = [f for f in findings if f.comparable]
    agree = sum(1 for f in comparable if f.agrees)
    p.sentences.append(f"{len(comparable)} of {len(findings)} published figures are measurable as such here; "
                       f"{agree} of those agree in direction (or ranking).")
    p.tables.append(Table("", [Column("study"), Column("finding"), Column("published"), Column("measured here"),
                               Column("comparable"), Column("agrees"), Column("note")],
                          [[f.study, f.claim, f.published, f.measured, "yes" if f.comparable else "no",
                            "" if f.agrees is None else ("yes" if f.agrees else "no"), f.note] for f in findings]))
    sections.append(p)
    cols, variant_rows, gpu = _variant_rows(rows, breakdowns, launches)
    v = Section("Every traced run: time, ops per timestep, where the time goes")
    v.sentences.append("Time: unprofiled median per step. Shares: " + (
        "exclusive GPU time by kernel class and idle, of the GPU span." if gpu else
        "the exclusive split of the step span on the step's thread: the innermost op's class, framework "
        "(wrappers, non-compute ops) and outside ops; they add up to 100%. TF runs its ops on other threads, so "
        "on the step's thread a TF step is mostly framework (the function call waiting on them)."))
    v.tables.append(Table("", cols, variant_rows))
    sections.append(v)
    sections += overhead_document([facts.directory], overhead).sections
    if facts.runs_not_ok:
        section = Section("Failed and skipped runs", ["Each with the one-line reason recorded in the manifest."])
        section.tables.append(Table("", [Column("run"), Column("status"), Column("reason")],
                                    [[r["run_id"], r["status"], r["reason"]] for r in facts.runs_not_ok]))
        sections.append(section)
    data = {"facts": {k: getattr(facts, k) for k in ("directory", "preset", "device", "device_name", "wall_s", "runs_ok",
                                                     "runs_not_ok", "runs_reused", "notes")},
            "findings": [f.__dict__ for f in findings]}
    return Document(f"tracekit run: LSTM variants on {facts.device_name}", "study", doc_facts, sections, data)
