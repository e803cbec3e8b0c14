"""Self-contained HTML: inline CSS and SVG charts, no scripts from anywhere, no network.

Byte-identical for the same input (no timestamps, sorted JSON, fixed palette). The document's
data is embedded once as ``<script type="application/json">`` for anyone who wants the numbers.
Tables are capped at ``MAX_ROWS`` rows, and the embedded data at ``MAX_DATA_BYTES`` (long lists keep
their first entries, long strings their start), so a page stays small whatever the trace: a
million-event trace's page is the size of a small one's. The JSON report (``-f json``) has everything.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable
from typing import Any

from tracekit.render.document import Chart, Document, format_cell, visible
from tracekit.render.json_report import _clean

MAX_ROWS = 300
MAX_DATA_BYTES = 1_000_000  # embedded data; with the tables and charts a page stays under ~2 MB
MAX_STRING = 2_000
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#86bcb6", "#d37295"]
CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1200px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 12px;margin:0}dl.facts dt{color:#666}dl.facts dd{margin:0}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}th,td{padding:3px 8px;border-bottom:1px solid #eee}
th{text-align:left;background:#f6f6f6}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.t{max-width:640px;word-break:break-all}caption{text-align:left;font-weight:600;padding:4px 0}
p.s{margin:4px 0}.legend span{display:inline-block;margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
svg text{font:11px system-ui,sans-serif;fill:#333}
"""


def _e(text: object) -> str:
    return html.escape(visible(str(text)), quote=True)


def _svg_stacked(chart: Chart) -> str:
    n = len(chart.labels)
    width, bar_h, gap, left = 900, 18, 6, 160
    height = n * (bar_h + gap) + 30
    totals = [sum(v for v in row if v > 0) for row in chart.values]
    top = max(totals) if totals and max(totals) > 0 else 1.0
    scale = (width - left - 110) / top  # room for the total after the bar
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="{_e(chart.title)}">']
    for i, (label, row) in enumerate(zip(chart.labels, chart.values, strict=True)):
        y = i * (bar_h + gap) + 4
        parts.append(f'<text x="{left - 6}" y="{y + 13}" text-anchor="end">{_e(label[:28])}</text>')
        x = float(left)
        for j, v in enumerate(row):
            if v <= 0:
                continue
            w = v * scale
            parts.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{bar_h}" fill="{PALETTE[j % len(PALETTE)]}">'
                         f'<title>{_e(chart.series[j])}: {v:,.3f} {_e(chart.unit)}</title></rect>')
            x += w
        parts.append(f'<text x="{x + 4:.2f}" y="{y + 13}">{totals[i]:,.3f} {_e(chart.unit)}</text>')
    parts.append("</svg>")
    legend = "".join(f'<span><i style="background:{PALETTE[j % len(PALETTE)]}"></i>{_e(s)}</span>'
                     for j, s in enumerate(chart.series))
    return f'<figure><figcaption><b>{_e(chart.title)}</b></figcaption><div class="legend">{legend}</div>{"".join(parts)}</figure>'


def _svg_histogram(chart: Chart) -> str:
    counts = [row[0] for row in chart.values]
    width, height, left, bottom = 900, 220, 50, 40
    n = max(len(counts), 1)
    bw = (width - left - 10) / n
    top = max(counts) if counts and max(counts) > 0 else 1.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="{_e(chart.title)}">']
    for i, c in enumerate(counts):
        h = (height - bottom - 10) * c / top
        x = left + i * bw
        parts.append(f'<rect x="{x:.2f}" y="{height - bottom - h:.2f}" width="{max(bw - 2, 1):.2f}" height="{h:.2f}" fill="{PALETTE[0]}">'
                     f'<title>{_e(chart.labels[i])}: {c:,.0f}</title></rect>')
        if n <= 24 or i % max(n // 12, 1) == 0:
            parts.append(f'<text x="{x + bw / 2:.2f}" y="{height - bottom + 14}" text-anchor="middle">{_e(chart.labels[i])}</text>')
    parts.append(f'<text x="{left}" y="{height - 6}">{_e(chart.unit)}</text><text x="4" y="14">{top:,.0f}</text></svg>')
    return f'<figure><figcaption><b>{_e(chart.title)}</b></figcaption>{"".join(parts)}</figure>'


def _svg_line(chart: Chart) -> str:
    """labels: x values (categorical, in order); one polyline per series; NaN values are skipped."""
    width, height, left, bottom, top_pad = 900, 260, 60, 36, 12
    finite = [v for row in chart.values for v in row if v == v and (v > 0 or not chart.log_scale)]
    scale: Callable[[float], float] = math.log if chart.log_scale else float
    lo = min([scale(v) for v in finite] + ([scale(1.0)] if chart.log_scale else [0.0])) if finite else 0.0
    hi = max([scale(v) for v in finite] + [scale(1.0)]) if finite else 1.0
    span = (hi - lo) * 1.1 or 1.0
    n = len(chart.labels)
    step = (width - left - 20) / max(n - 1, 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        return left + i * step, height - bottom - (height - bottom - top_pad) * (scale(v) - lo) / span

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="{_e(chart.title)}">',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#999"/>']
    # Reference lines: 1 (parity with the reference), the smallest and the largest value.
    ticks = sorted({1.0, *([min(finite), max(finite)] if finite else [])})
    for t in ticks:
        y = xy(0, t)[1]
        dash = ' stroke-dasharray="4 3"' if t == 1.0 else ""
        parts.append(f'<line x1="{left}" y1="{y:.2f}" x2="{width - 10}" y2="{y:.2f}" stroke="#ddd"{dash}/>'
                     f'<text x="{left - 4}" y="{y + 4:.2f}" text-anchor="end">{t:,.2f}{_e(chart.unit)}</text>')
    for i, label in enumerate(chart.labels):
        parts.append(f'<text x="{xy(i, 1.0)[0]:.2f}" y="{height - bottom + 16}" text-anchor="middle">{_e(label)}</text>')
    for j, series in enumerate(chart.series):
        points = [(i, row[j]) for i, row in enumerate(chart.values)
                  if row[j] == row[j] and (row[j] > 0 or not chart.log_scale)]
        if not points:
            continue
        color = PALETTE[j % len(PALETTE)]
        coords = " ".join(f"{x:.2f},{y:.2f}" for x, y in (xy(i, v) for i, v in points))
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>')
        for i, v in points:
            x, y = xy(i, v)
            parts.append(f'<circle cx="{x:.2f}" cy="{y:.2f}" r="3" fill="{color}"><title>{_e(series)} at '
                         f'{_e(chart.labels[i])}: {v:,.3f}{_e(chart.unit)}</title></circle>')
    parts.append("</svg>")
    legend = "".join(f'<span><i style="background:{PALETTE[j % len(PALETTE)]}"></i>{_e(s)}</span>'
                     for j, s in enumerate(chart.series))
    axis = " (log scale)" if chart.log_scale else ""
    return (f'<figure><figcaption><b>{_e(chart.title)}</b>{axis}</figcaption><div class="legend">{legend}</div>'
            f'{"".join(parts)}</figure>')


def _dumps(data: object) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def embedded_data(data: dict[str, Any], budget: int = MAX_DATA_BYTES) -> tuple[str, str]:
    """The document data as JSON within ``budget`` bytes, and what was cut ("" when nothing).

    Lists longer than a limit keep their first entries, strings
    their first ``MAX_STRING`` characters; the limit shrinks until the text fits. Each cut list's
    full length is recorded under ``"truncated"``, so a reader of the page knows it has a prefix.
    """
    text = _dumps(data)
    limit = 1000
    while len(text) > budget and limit >= 1:
        cut: dict[str, int] = {}
        trimmed = _trim(data, limit, "", cut)
        assert isinstance(trimmed, dict)
        text = _dumps({**trimmed, "truncated": cut})
        if len(text) <= budget:
            lists = f"{len(cut)} list(s) keep their first {limit:,} entries" if cut else "long strings are shortened"
            return text, lists
        limit //= 4
    if len(text) > budget:
        return _dumps({"truncated": "the data does not fit the page"}), "the data does not fit the page"
    return text, ""


def _trim(value: object, limit: int, path: str, cut: dict[str, int]) -> object:
    if isinstance(value, dict):
        return {k: _trim(v, limit, f"{path}.{k}" if path else str(k), cut) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) > limit:
            cut[path] = len(value)
            value = value[:limit]
        return [_trim(v, limit, f"{path}[]", cut) for v in value]
    if isinstance(value, str) and len(value) > MAX_STRING:
        return value[:MAX_STRING] + "…"
    return value


_CHARTS = {"stacked": _svg_stacked, "histogram": _svg_histogram, "line": _svg_line}


class HtmlRenderer:
    name = "html"
    extension = ".html"

    def render(self, document: Document) -> str:
        body = [f"<h1>{_e(document.title)}</h1>", '<dl class="facts">']
        body += [f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in document.facts]
        body.append("</dl>")
        for section in document.sections:
            body.append(f"<h2>{_e(section.title)}</h2>")
            body += [f'<p class="s">{_e(s)}</p>' for s in section.sentences]
            for chart in section.charts:
                body.append(_CHARTS[chart.kind](chart))
            for t in section.tables:
                body.append("<table>" + (f"<caption>{_e(t.title)}</caption>" if t.title else ""))
                body.append("<tr>" + "".join(f"<th>{_e(c.name)}</th>" for c in t.columns) + "</tr>")
                for row in t.rows[:MAX_ROWS]:
                    body.append("<tr>" + "".join(
                        f'<td class="{"t" if c.fmt == "text" else "n"}">{_e(format_cell(v, c.fmt))}</td>'
                        for v, c in zip(row, t.columns, strict=True)) + "</tr>")
                body.append("</table>")
                if len(t.rows) > MAX_ROWS:
                    body.append(f'<p class="s">({len(t.rows) - MAX_ROWS:,} more rows in the JSON report)</p>')
                if t.note:
                    body.append(f'<p class="s">{_e(t.note)}</p>')
        data, trimmed = embedded_data(_clean(document.data))
        if trimmed:
            body.append(f'<p class="s">The data embedded in this page is cut to fit it: {_e(trimmed)}. '
                        "The JSON report (-f json) has all of it.</p>")
        # "<" as \u003c: a name holding "</script>" cannot end the data block and start markup.
        data = data.replace("<", "\\u003c")
        data = data.replace("</", "<\\/")  # keep the JSON from closing its script element
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
                f"<title>{_e(document.title)}</title><style>{CSS}</style></head><body>\n"
                + "\n".join(body)
                + f'\n<script type="application/json" id="tracekit-data">{data}</script>\n</body></html>\n')
