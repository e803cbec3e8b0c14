"""A small document model every report is built into, and every renderer reads.

Analyses produce dataclasses; ``tracekit.render.documents`` turns each into a ``Document``
(sections of sentences, tables and charts, plus the machine-readable ``data`` for JSON); the
terminal, Markdown, JSON and HTML renderers only know this model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracekit.text import visible  # noqa: F401  (renderers import it from here)

# Column formats: how a cell is shown. Values stay raw numbers (ns, counts) until rendering.
FORMATS = ("text", "ns", "count", "pct", "float", "raw")  # raw: preformatted, right-aligned


@dataclass
class Column:
    name: str
    fmt: str = "text"


@dataclass
class Table:
    title: str
    columns: list[Column]
    rows: list[list[Any]]
    note: str = ""


@dataclass
class Chart:
    """kind: ``stacked`` (one bar per label, one segment per series), ``histogram``
    (labels = bin edges, one series) or ``line`` (labels = x values, one line per series; NaN
    for a missing point). Values are in ``unit``."""

    kind: str
    title: str
    labels: list[str]
    series: list[str]
    values: list[list[float]]  # values[i][j]: series j of label i
    unit: str = "ms"
    log_scale: bool = False  # line charts of ratios: 0.5x and 2x equally far from 1x


@dataclass
class Section:
    title: str
    sentences: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)


@dataclass
class Document:
    title: str
    kind: str  # report, launch, ranges, compare
    facts: list[tuple[str, str]]
    sections: list[Section]
    data: dict[str, Any]


def format_cell(value: Any, fmt: str) -> str:
    """Text of one cell: ns as ms/µs with units, counts with thousands separators."""
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    if fmt == "ns":
        v = float(value)
        if abs(v) >= 1e9:
            return f"{v / 1e9:,.3f} s"
        if abs(v) >= 1e6:
            return f"{v / 1e6:,.3f} ms"
        if abs(v) >= 1e3:
            return f"{v / 1e3:,.2f} µs"
        return f"{v:,.0f} ns"
    if fmt == "count":
        return f"{int(value):,}"
    if fmt == "pct":
        return f"{float(value):.1%}"
    if fmt == "raw":
        return str(value)
    if fmt == "float":
        return f"{float(value):,.2f}"
    return str(value)
