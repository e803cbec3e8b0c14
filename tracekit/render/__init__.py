"""Renderers: one per output format, all reading a ``Document``; a small registry.

Each renderer has a name, a file extension and ``render(document) -> str``; ``-o FILE`` picks
the renderer from the extension unless ``-f`` says otherwise.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Protocol

from tracekit.errors import UsageError
from tracekit.render.document import Document


class Renderer(Protocol):
    name: str
    extension: str

    def render(self, document: Document) -> str: ...


# name: (module, class, file extension). A renderer's module is imported only when it is used:
# the terminal one pulls in rich, the HTML one its page template; -f json needs neither.
RENDERERS: dict[str, tuple[str, str, str]] = {
    "terminal": ("tracekit.render.terminal_report", "TerminalRenderer", ".txt"),
    "markdown": ("tracekit.render.markdown_report", "MarkdownRenderer", ".md"),
    "json": ("tracekit.render.json_report", "JsonRenderer", ".json"),
    "html": ("tracekit.render.html_report", "HtmlRenderer", ".html"),
}


def renderer(name: str) -> Renderer:
    """The renderer of a format name (``UsageError`` for an unknown one)."""
    if name not in RENDERERS:
        raise UsageError(f"unknown format {name!r} (one of: {', '.join(RENDERERS)})")
    module, cls, _ = RENDERERS[name]
    made: Renderer = getattr(importlib.import_module(module), cls)()
    return made


def pick(fmt: str | None, output: Path | None) -> Renderer:
    """The renderer for ``-f`` or, failing that, ``-o``'s extension; terminal by default."""
    if fmt:
        return renderer(fmt)
    if output is not None:
        for name, (_, _, extension) in RENDERERS.items():
            if output.suffix.lower() == extension:
                return renderer(name)
        if output.suffix.lower() == ".markdown":
            return renderer("markdown")
        raise UsageError(f"cannot tell the format from {output.name!r}; use -f ({', '.join(RENDERERS)})")
    return renderer("terminal")
