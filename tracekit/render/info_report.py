"""Renderers for ``TraceInfo``: terminal (rich) and JSON."""

from __future__ import annotations

import dataclasses
import json

from rich.console import Console
from rich.table import Table

from tracekit.analyze.summary import TraceInfo
from tracekit.render.terminal_report import data_console, escape


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.3f} ms"


def _rate(x: float | None) -> str:
    return "n/a (no GPU activity with a correlation id)" if x is None else f"{100 * x:.1f} %"


def to_json(summary: TraceInfo) -> str:
    d = dataclasses.asdict(summary)
    d["span_ns"] = summary.span_ns
    d["launch_link_rate"] = summary.launch_link_rate
    d["op_link_rate"] = summary.op_link_rate
    return json.dumps(d, sort_keys=True, default=str)


def print_terminal(summary: TraceInfo, console: Console | None = None) -> None:
    console = console or data_console()
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("file", escape(summary.source_file))
    head.add_row("source", f"{summary.source} ({summary.source_format}, {escape(summary.profiler_version)})")
    head.add_row("trace id", summary.trace_id)
    head.add_row("events", f"{summary.events:,}")
    head.add_row("span", _ms(summary.span_ns))
    head.add_row("host threads", str(summary.threads))
    names = [str(d.get("name", d.get("id"))) for d in summary.devices]
    gpus = ", ".join(f"{names.count(n)}x {escape(n)}" for n in dict.fromkeys(names)) or "none listed"
    head.add_row("GPUs", f"{gpus}; active: {summary.gpu_ids or 'none'}")
    steps = summary.steps
    head.add_row("steps", ("none marked" if not steps else f"{len(steps)} ({steps[0]}..{steps[-1]})")
                 + (f", {escape(summary.steps_from)}" if summary.steps_from else "")
                 + (f"; not inferred: {escape(summary.steps_not_inferred)}" if summary.steps_not_inferred else ""))
    head.add_row("kernel->launch links", _rate(summary.launch_link_rate)
                 + (f" of {summary.gpu_activities_with_correlation:,}" if summary.gpu_activities_with_correlation else ""))
    head.add_row("kernel->op links", _rate(summary.op_link_rate))
    if summary.capture_options:
        head.add_row("capture options", escape(summary.capture_options))
    console.print(head)
    kinds = Table(title="events by kind", title_justify="left")
    kinds.add_column("kind")
    kinds.add_column("events", justify="right")
    for k, v in summary.counts_by_kind.items():
        kinds.add_row(k, f"{v:,}")
    console.print(kinds)
