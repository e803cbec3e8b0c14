"""Markdown renderer: GitHub tables, numbers right-aligned, pipes and brackets escaped."""

from __future__ import annotations

from tracekit.render.document import Document, format_cell, visible

MAX_ROWS = 200


def _cell(text: str) -> str:
    """Pipes, backslashes and angle brackets escaped; control characters (newlines too) made visible."""
    return visible(text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;"))


class MarkdownRenderer:
    name = "markdown"
    extension = ".md"

    def render(self, document: Document) -> str:
        out = [f"# {_cell(document.title)}", ""]
        out += [f"- **{_cell(k)}**: {_cell(v)}" for k, v in document.facts]
        for section in document.sections:
            out += ["", f"## {_cell(section.title)}", ""]
            out += [f"{_cell(s)}  " for s in section.sentences]
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
                    out += ["", _cell(t.note)]
        return "\n".join(out).rstrip() + "\n"
