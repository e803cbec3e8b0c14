"""The Kineto reader gives the same table, column by column, as recorded before the reader was split
into whole-file and windowed (streaming) parts.

``tests/data/kineto_table_digests.json`` holds a digest of every column of every shared Kineto trace
(and the repo's own), as tracekit read them before that change. Re-record only for an intended change:
``TRACEKIT_UPDATE_GOLDEN=1 python -m pytest tests/test_kineto_digests.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import TRACES, ids, needs_shared, shared_files
from test_nsys_digests import column_digests

from tracekit.ingest import load

DIGESTS = Path(__file__).parent / "data" / "kineto_table_digests.json"
KINETO = [p for p in shared_files("hta/**/*.json*") if "exports" not in p.parts]


@needs_shared
@pytest.mark.parametrize("path", KINETO, ids=ids(KINETO))
def test_kineto_reader_gives_the_recorded_table(path: Path) -> None:
    key = path.relative_to(TRACES).as_posix()
    got = column_digests(load(path))
    if os.environ.get("TRACEKIT_UPDATE_GOLDEN"):
        recorded = json.loads(DIGESTS.read_text()) if DIGESTS.exists() else {}
        recorded[key] = got
        DIGESTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    want = json.loads(DIGESTS.read_text())[key]
    assert {k: v for k, v in got.items() if v != want.get(k)} == {}
