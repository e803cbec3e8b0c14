"""The ``overhead`` report: framework time against the native baseline, and the excess explained."""

from __future__ import annotations

import math

from tracekit.analyze.overhead import OverheadReport
from tracekit.render.document import Chart, Column, Document, Section, Table
from tracekit.render.documents import records


def _ratio_words(ratio: float) -> str:
    return f"{ratio:.2f}x the native time" if ratio >= 1 else f"{1 / ratio:.2f}x faster than native"


def overhead_document(sources: list[str], rep: OverheadReport) -> Document:
    facts = [("collections", ", ".join(sources)), ("framework runs matched", f"{len(rep.runs):,}")]
    sections = []
    runs = rep.runs
    s = Section("Time against the native baseline")
    if runs.empty:
        s.sentences.append("No framework run matched a native baseline run of the same shape and device: run "
                           "`tracekit baseline` with the same preset into one of these directories.")
    else:
        for (fw, variant, device), g in runs.groupby(["framework", "variant", "device"], sort=False):
            geo = math.exp(sum(math.log(r) for r in g.ratio) / len(g))
            s.sentences.append(f"{fw} {variant} ({device}): {_ratio_words(geo)} (geometric mean over {len(g)} "
                               f"config(s), against {g.baseline.iloc[0]}).")
        has_parts = "parts_ns" in runs.columns
        cols = [Column("framework"), Column("variant"), Column("device"), Column("dtype"), Column("hidden", "count"),
                Column("batch", "count"), Column("timesteps", "count"), Column("time", "ns"), Column("native", "ns"),
                Column("ratio", "float"), Column("excess", "ns")]
        if has_parts:
            cols += [Column("casts", "ns"), Column("extra compute", "ns"), Column("dispatch / gaps", "ns")]
        rows = []
        for r in records(runs):
            row = [r["framework"], r["variant"], r["device"], r["dtype"], r["hidden"], r["batch"], r["timesteps"],
                   r["time_ns"], r["baseline_ns"], r["ratio"], r["excess_ns"]]
            if has_parts:
                row += [r.get("cast_ns"), r.get("extra_compute_ns"), r.get("dispatch_ns")]
            rows.append(row)
        s.tables.append(Table("", cols, rows))
        if has_parts:
            s.sentences.append("The excess (framework minus native, unprofiled medians) is split with each run's trace "
                               "into casts, extra compute (the framework's kernels or ops beyond the native time; "
                               "negative when they are faster) and dispatch (CPU: step time outside compute ops; GPU: "
                               "idle gaps between kernels); the three add up to the excess.")
    sections.append(s)
    if len(rep.pairs):
        p = Section("Implementations compared pairwise (mean percentage difference over common configs)")
        for r in records(rep.pairs):
            direction = "slower" if r["mean_diff_pct"] > 0 else "faster"
            p.sentences.append(f"{r['b']} is {abs(r['mean_diff_pct']):.1f}% {direction} than {r['a']} on average "
                               f"over {r['configs']} config(s) (geometric-mean ratio {r['geomean_ratio']:.2f}).")
        p.tables.append(Table("", [Column("A"), Column("B"), Column("configs", "count"), Column("mean diff %", "float"),
                                   Column("mean |diff| %", "float"), Column("geomean B/A", "float")],
                              [[r["a"], r["b"], r["configs"], r["mean_diff_pct"], r["mean_abs_pct"], r["geomean_ratio"]]
                               for r in records(rep.pairs)]))
        sections.append(p)
    if len(rep.trends):
        t = Section("Trends: time / native against each sweep axis (others at their most common values)")
        rows = []
        for axis, g in rep.trends.groupby("axis", sort=True):
            values = sorted(set(g.value))
            variants = sorted(set(g.variant))
            lookup = {(r.variant, r.value): r.ratio for r in g.itertuples()}
            t.charts.append(Chart("line", f"time / native vs {axis}", [str(v) for v in values], variants,
                                  [[lookup.get((var, v), float("nan")) for var in variants] for v in values],
                                  unit="x", log_scale=True))
            for var in variants:
                series = [(v, lookup[(var, v)]) for v in values if (var, v) in lookup]
                if len(series) >= 2:
                    (v0, r0), (v1, r1) = series[0], series[-1]
                    closer = abs(math.log(r1)) < abs(math.log(r0))
                    rows.append([var, axis, f"{v0} -> {v1}", r0, r1, "closer to native" if closer else "further from native"])
        t.tables.append(Table("", [Column("variant"), Column("axis"), Column("from -> to"), Column("ratio at first", "float"),
                                   Column("ratio at last", "float"), Column("trend")], rows))
        sections.append(t)
    if rep.unmatched:
        sections.append(Section("Runs without a native counterpart", rep.unmatched[:50]))
    data = {"runs": records(runs), "pairs": records(rep.pairs), "trends": records(rep.trends), "unmatched": rep.unmatched}
    return Document("tracekit overhead: frameworks against the native LSTM", "overhead", facts, sections, data)
