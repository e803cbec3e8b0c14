"""JSON renderer: the document's data, with the schema version and units in every key name."""

from __future__ import annotations

import json
import math
from typing import Any

from tracekit.render.document import Document

REPORT_SCHEMA_VERSION = "1.0"


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
        return json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
