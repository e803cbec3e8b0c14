"""Markdown renderer: GitHub tables, numbers right-aligned, pipes and brackets escaped."""

from __future__ import annotations

from tracekit.render.document import Document, format_cell, visible

MAX_ROWS = 200


def _cell(text: str) -> str:
    """Pipes, backslashes and ``<`` escaped; control characters (newlines too) made visible.

    Escaping ``<`` is enough to keep any HTML tag from forming; ``>`` is left as typed ("a -> b"
    reads as such in the raw file too) except where it would open a blockquote (``_line``)."""
    return visible(text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;"))


def _line(text: str) -> str:
    """A cell's text that starts a line: a leading ``>`` would make it a blockquote."""
    out = _cell(text)
    indent = len(out) - len(out.lstrip())
    return out[:indent] + "\\" + out[indent:] if out[indent:].startswith(">") else out


class MarkdownRenderer:
    name = "markdown"
    extension = ".md"

    def render(self, document: Document) -> str:
        out = [f"# {_cell(document.title)}", ""]
        out += [f"- **{_cell(k)}**: {_cell(v)}" for k, v in document.facts]
        for section in document.sections:
            out += ["", f"## {_cell(section.title)}", ""]
            out += [f"{_line(s)}  " for s in section.sentences]
            for t in section.tables:
                if t.title:
                    out += ["", f"**{_cell(t.title)}**"]
                out += ["", "| " + " | ".join(_cell(c.name) for c in t.columns) + " |",
                        "|" + "|".join(":---" if c.fmt == "text" else "---:" for c in t.columns) + "|"]
                for row in t.rows[:MAX_ROWS]:
                    out.append("| " + " | ".join(_cell(format_cell(v, c.fmt)) for v, c in zip(row, t.columns, strict=True)) + " |")
                if len(t.rows) > MAX_ROWS:
                    out.append(f"\n({len(t.rows) - MAX_ROWS:,} more rows in the JSON report)")
                if t.note:
                    out += ["", _line(t.note)]
        return "\n".join(out).rstrip() + "\n"
