"""Text that came from a trace is data: control characters are shown, never sent to a terminal."""

from __future__ import annotations

# C0 controls, DEL and C1 controls: in a name they could retitle or clear a terminal (ESC ] ... BEL,
# ESC [ 2 J, the one-byte CSI U+009B). Shown as visible escapes instead.
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]}
_CONTROLS.update({ord("\n"): "\\n", ord("\t"): "\\t", ord("\r"): "\\r"})


def visible(text: str) -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``, ``\\n``)."""
    return text.translate(_CONTROLS)
