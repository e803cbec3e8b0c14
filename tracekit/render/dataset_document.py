"""The report of a whole dataset: one line per trace, per-group totals, and the slowest group."""

from __future__ import annotations

import pandas as pd

from tracekit.analyze.per_trace import KEY_METRICS, group, slowest
from tracekit.analyze.rank_balance import RankBalance, rank_balance
from tracekit.render.document import Column, Document, Section, Table


def _fmt(metric: str) -> str:
    return "ns" if metric.endswith("_time") or metric in ("gpu_busy",) else "count"


def dataset_document(directory: str, traces: pd.DataFrame, by: str) -> Document:
    facts = [("dataset", directory), ("traces", f"{len(traces):,}"), ("events", f"{int(traces['rows'].sum()):,}"),
             ("grouped by", by)]
    sections = []
    balances: list[RankBalance] = []
    if by != "trace" and len(traces):
        g = group(traces, by)
        s = Section(f"Per {by}")
        worst = slowest(traces, by)
        if worst is not None and len(g) > 1:
            s.sentences.append(f"Slowest {by}: {worst.value} with a mean step time of {worst.step_time / 1e6:,.3f} ms, "
                               f"{worst.excess:+.1%} against the median {by} ({worst.median_step_time / 1e6:,.3f} ms).")
        balances = rank_balance(traces) if by == "rank" else []
        s.sentences.extend(b.says(name_run=len(balances) > 1 or traces.run.nunique() > 1) for b in balances)
        talked = "collective_time" in traces.columns and bool((traces.collective_time > 0).any())
        shown = [m for m in KEY_METRICS if m != "step_time"] + (["collective_time"] if talked else [])
        cols = [Column(by), Column("traces", "count"), Column("events", "count"), Column("mean step", "ns"),
                Column("max step", "ns"), *[Column("collectives / step" if m == "collective_time" else m, _fmt(m))
                                            for m in shown]]
        s.tables.append(Table("", cols, [[r[by], r["traces"], r["events"], r["mean_step_time"], r["max_step_time"],
                                          *[r[m] for m in shown]]
                                         for r in g.to_dict(orient="records")]))
        sections.append(s)
    t = Section("Per trace")
    cols = [Column("run"), Column("rank", "count"), Column("source"), Column("file"), Column("events", "count"),
            *[Column(m, _fmt(m)) for m in KEY_METRICS]]
    t.tables.append(Table("", cols, [[r["run"], r["rank"], r["source"], r["source_file"], r["rows"],
                                      *[r.get(m, 0) for m in KEY_METRICS]] for r in traces.to_dict(orient="records")]))
    sections.append(t)
    data: dict[str, object] = {"traces": traces.to_dict(orient="records")}
    if balances:
        data["rank_balance"] = [b.as_dict() for b in balances]
    return Document(f"tracekit report: dataset {directory}", "dataset", facts, sections, data)
