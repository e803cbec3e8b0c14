"""JSON renderer: the document's data, with the schema version and units in every key name.

Layout: objects one key per line, indented a space per level; a list of records (a table's rows:
range instances, gaps) one record per line. Each record and every other list is written by the
json module's C encoder: its indenting encoder is pure Python, and took 1.2 s for the 107k range
instances of a 13 MB nsys export, against 0.3 s written so.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tracekit.render.document import Document

REPORT_SCHEMA_VERSION = "1.0"
_C1 = {c: f"\\u{c:04x}" for c in range(0x80, 0xA0)}


def _clean(value: Any) -> Any:
    """``value`` with numpy scalars as Python values, non-finite floats as None and keys as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _clean(value.item())
    return value


def _python_scalar(value: Any) -> Any:
    """The C encoder's hook for what it cannot write: numpy scalars (int64, bool_, float32)."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


# allow_nan=False: a NaN or infinity raises, and the document is cleaned and written again.
_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, allow_nan=False, default=_python_scalar)
# The C encoder made once, not once per value as JSONEncoder.encode does (2.8 µs a record); None
# where the json module has no C accelerator. No circular-reference markers: a document is a tree.
_C_ENCODER = (json.encoder.c_make_encoder(None, _python_scalar, json.encoder.encode_basestring, None,  # type: ignore[attr-defined]
                                          ": ", ", ", True, False, False)
              if json.encoder.c_make_encoder is not None else None)  # type: ignore[attr-defined]


def _encode(value: Any) -> str:
    """``value`` as compact JSON (keys sorted, ", " and ": " separators) on one line."""
    return "".join(_C_ENCODER(value, 0)) if _C_ENCODER is not None else _ENCODER.encode(value)


def _layout(value: Any, level: int) -> str:
    if isinstance(value, dict) and value:
        inner = " " * (level + 1)
        items = [f"{inner}{_encode(str(k))}: {_layout(value[k], level + 1)}" for k in sorted(value, key=str)]
        return "{\n" + ",\n".join(items) + "\n" + " " * level + "}"
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, dict) for v in value):
        inner = " " * (level + 1)
        return "[\n" + ",\n".join(inner + _encode(v) for v in value) + "\n" + " " * level + "]"
    return _encode(value)


class JsonRenderer:
    name = "json"
    extension = ".json"

    def render(self, document: Document) -> str:
        body = {"report_schema_version": REPORT_SCHEMA_VERSION, "report": document.kind, "title": document.title,
                **document.data}
        try:
            text = _layout(body, 0)
        except (ValueError, TypeError):  # a non-finite float, or a key that is not text or a number
            text = _layout(_clean(body), 0)
        # json escapes C0 controls; C1 controls (U+0080-U+009F, e.g. the one-byte CSI) are escaped here too.
        return text.translate(_C1) + "\n"
