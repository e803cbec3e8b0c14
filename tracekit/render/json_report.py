"""JSON renderer: the document's data, with the schema version and units in every key name."""

from __future__ import annotations

import json
import math
from typing import Any

from tracekit.render.document import Document

REPORT_SCHEMA_VERSION = "1.0"
_C1 = {c: f"\\u{c:04x}" for c in range(0x80, 0xA0)}


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _clean(value.item())
    return value


class JsonRenderer:
    name = "json"
    extension = ".json"

    def render(self, document: Document) -> str:
        body = {"report_schema_version": REPORT_SCHEMA_VERSION, "report": document.kind, "title": document.title,
                **_clean(document.data)}
        # json escapes C0 controls; C1 controls (U+0080-U+009F, e.g. the one-byte CSI) are escaped here too.
        text = json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False)
        return text.translate(_C1) + "\n"
