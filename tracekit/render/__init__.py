"""Renderers: one per output format, all reading a ``Document``; a small registry.

Each renderer has a name, a file extension and ``render(document) -> str``; ``-o FILE`` picks
the renderer from the extension unless ``-f`` says otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from tracekit.errors import UsageError
from tracekit.render.document import Document


class Renderer(Protocol):
    name: str
    extension: str

    def render(self, document: Document) -> str: ...


def renderers() -> dict[str, Renderer]:
    from tracekit.render.html_report import HtmlRenderer
    from tracekit.render.json_report import JsonRenderer
    from tracekit.render.markdown_report import MarkdownRenderer
    from tracekit.render.terminal_report import TerminalRenderer

    return {r.name: r for r in (TerminalRenderer(), MarkdownRenderer(), JsonRenderer(), HtmlRenderer())}


def pick(fmt: str | None, output: Path | None) -> Renderer:
    """The renderer for ``-f`` or, failing that, ``-o``'s extension; terminal by default."""
    table = renderers()
    if fmt:
        if fmt not in table:
            raise UsageError(f"unknown format {fmt!r} (one of: {', '.join(table)})")
        return table[fmt]
    if output is not None:
        for r in table.values():
            if output.suffix.lower() == r.extension:
                return r
        if output.suffix.lower() == ".markdown":
            return table["markdown"]
        raise UsageError(f"cannot tell the format from {output.name!r}; use -f ({', '.join(table)})")
    return table["terminal"]
