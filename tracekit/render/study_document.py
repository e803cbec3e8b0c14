"""The ``tracekit run`` report: every variant's breakdown, the native comparison, and the published
findings beside this machine's measurements."""

from __future__ import annotations

from typing import Any

from tracekit.analyze.study_table import StudyFacts, VariantTable, variant_table
from tracekit.render.document import Column, Document, Section, Table
from tracekit.render.overhead_document import overhead_document
from tracekit.study import Study


def _variant_rows(table: VariantTable) -> tuple[list[Column], list[list[Any]]]:
    cols = [Column("framework"), Column("variant"), Column("profiler"), Column("dtype"), Column("shape"),
            Column("time", "ns"), Column("ops / timestep", "float"),
            *[Column(f"{c} %", "pct") for c in table.classes],
            Column("idle %" if table.gpu else "outside ops %", "pct"), Column("verdict")]
    return cols, [[r["framework"], r["variant"], r["profiler"], r["dtype"], r["shape"], r["time_ns"],
                   r["ops_per_timestep"], *r["shares"], r["rest"], r["verdict"]] for r in table.rows]


def _count(facts: StudyFacts, status: str) -> int:
    return sum(1 for r in facts.runs_not_ok if r["status"] == status)


def study_document(study: Study) -> Document:
    """The study report: summary, published vs measured, every traced run, overhead, failed runs."""
    facts, findings = study.facts, study.findings
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
    table = variant_table(study.rows, study.breakdowns, study.launches)
    cols, variant_rows = _variant_rows(table)
    gpu = table.gpu
    v = Section("Every traced run: time, ops per timestep, where the time goes")
    v.sentences.append("Time: unprofiled median per step. Shares: " + (
        "exclusive GPU time by kernel class and idle, of the GPU span." if gpu else
        "the exclusive split of the step span on the step's thread: the innermost op's class, framework "
        "(wrappers, non-compute ops) and outside ops; they add up to 100%. TF runs its ops on other threads, so "
        "on the step's thread a TF step is mostly framework (the function call waiting on them)."))
    v.tables.append(Table("", cols, variant_rows))
    sections.append(v)
    sections += overhead_document([facts.directory], study.overhead).sections
    if facts.runs_not_ok:
        section = Section("Failed and skipped runs", ["Each with the one-line reason recorded in the manifest."])
        section.tables.append(Table("", [Column("run"), Column("status"), Column("reason")],
                                    [[r["run_id"], r["status"], r["reason"]] for r in facts.runs_not_ok]))
        sections.append(section)
    data = {"facts": {k: getattr(facts, k) for k in ("directory", "preset", "device", "device_name", "wall_s", "runs_ok",
                                                     "runs_not_ok", "runs_reused", "notes")},
            "findings": [f.__dict__ for f in findings]}
    return Document(f"tracekit run: LSTM variants on {facts.device_name}", "study", doc_facts, sections, data)
