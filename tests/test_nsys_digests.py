"""The nsys reader gives the same table, column by column, as the row-by-row reader it replaced.

``tests/data/nsys_table_digests.json`` holds a digest of every column of every shared nsys export as
the row-by-row reader (tracekit before the vectorized one) read it. Args are compared as parsed JSON,
since the JSON text may be written differently. Re-record only for an intended change:
``TRACEKIT_UPDATE_GOLDEN=1 python -m pytest tests/test_nsys_digests.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import ids, needs_shared, shared_files

from tracekit.ingest import nsys

DIGESTS = Path(__file__).parent / "data" / "nsys_table_digests.json"
SQLITE = shared_files("nsys/*.sqlite")


def column_digests(table: pa.Table) -> dict[str, str]:
    out = {}
    for name in table.column_names:
        values = table[name].to_pylist()
        if name == "args":
            values = [json.loads(v) if v is not None else None for v in values]
            text = json.dumps(values, sort_keys=True, default=str)
        else:
            text = repr(values)
        out[name] = hashlib.sha256(text.encode()).hexdigest()[:16]
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items() if b"version" not in k}
    out["@metadata"] = hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:16]
    return out


@needs_shared
@pytest.mark.parametrize("path", SQLITE, ids=ids(SQLITE))
def test_nsys_reader_gives_the_recorded_table(path: Path) -> None:
    got = column_digests(nsys.read(path))  # the reader's table, before steps are found in its ranges
    if os.environ.get("TRACEKIT_UPDATE_GOLDEN"):
        recorded = json.loads(DIGESTS.read_text()) if DIGESTS.exists() else {}
        recorded[path.name] = got
        DIGESTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    want = json.loads(DIGESTS.read_text())[path.name]
    assert {k: v for k, v in got.items() if v != want.get(k)} == {}
