"""Terminal renderer (rich): right-aligned numbers, every name escaped, plain text when piped."""

from __future__ import annotations

import io
import os

from rich import box
from rich.console import Console
from rich.markup import escape as escape_markup
from rich.table import Table as RichTable

from tracekit.render.document import Document, format_cell, visible


def escape(text: str) -> str:
    """Names are data: no Rich markup and no terminal control sequences get through."""
    return escape_markup(visible(text))


def data_console(**options: object) -> Console:
    """A console for text made of trace data: no emoji codes (a name with ``:fire:`` in it stays as
    written) and no highlighting of numbers and paths."""
    return Console(highlight=False, emoji=False, **options)  # type: ignore[arg-type]


MAX_ROWS = 25


def _piped_width() -> int:
    """Width for text that is not going to a terminal: $COLUMNS when set (as shells and CI tools do),
    else 120."""
    try:
        return max(40, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return 120


class TerminalRenderer:
    name = "terminal"
    extension = ".txt"

    def __init__(self, console: Console | None = None, width: int | None = None) -> None:
        self.console = console
        self.width = width

    def render(self, document: Document) -> str:
        buf = io.StringIO()
        console = data_console(file=buf, width=self.width or _piped_width(), no_color=True, force_terminal=False,
                               color_system=None)
        self.print(document, console)
        return buf.getvalue()

    def print(self, document: Document, console: Console) -> None:
        console.print(f"[bold]{escape(document.title)}[/bold]")
        for k, v in document.facts:
            console.print(f"  {escape(k)}: {escape(v)}")
        for section in document.sections:
            console.print()
            console.print(f"[bold underline]{escape(section.title)}[/bold underline]")
            for s in section.sentences:
                console.print(f"  {escape(s)}")
            for t in section.tables:
                table = RichTable(title=escape(t.title) if t.title else None, box=box.SIMPLE_HEAD, title_justify="left")
                for c in t.columns:
                    table.add_column(escape(c.name), justify="left" if c.fmt == "text" else "right",
                                     overflow="fold" if c.fmt == "text" else "ellipsis")
                for row in t.rows[:MAX_ROWS]:
                    table.add_row(*[escape(format_cell(v, c.fmt)) for v, c in zip(row, t.columns, strict=True)])
                console.print(table)
                if len(t.rows) > MAX_ROWS:
                    console.print(f"  ({len(t.rows) - MAX_ROWS:,} more rows in the JSON/HTML/Markdown reports)")
                if t.note:
                    console.print(f"  {escape(t.note)}")
