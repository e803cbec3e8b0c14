"""The Kineto reader gives the same table, column by column, as recorded before the reader was split
into whole-file and windowed (streaming) parts.

``tests/data/kineto_table_digests.json`` holds a digest of every column of every shared Kineto trace
and of the repo's own H100 traces, as tracekit read them before that change. Re-record only for an
intended change: ``TRACEKIT_UPDATE_GOLDEN=1 python -m pytest tests/test_kineto_digests.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import TRACES, ids, needs_shared, shared_files
from test_nsys_digests import column_digests

from tracekit.ingest import load

REPO_DATA = Path(__file__).parent / "data"
DIGESTS = REPO_DATA / "kineto_table_digests.json"
SHARED_KINETO = [p for p in shared_files("hta/**/*.json*") if "exports" not in p.parts]
OWN_KINETO = sorted(REPO_DATA.glob("h100/*.pt.trace.json.gz"))


def check_recorded(path: Path, key: str) -> None:
    got = column_digests(load(path))
    if os.environ.get("TRACEKIT_UPDATE_GOLDEN"):
        recorded = json.loads(DIGESTS.read_text()) if DIGESTS.exists() else {}
        recorded[key] = got
        DIGESTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    want = json.loads(DIGESTS.read_text())[key]
    assert {k: v for k, v in got.items() if v != want.get(k)} == {}


@needs_shared
@pytest.mark.parametrize("path", SHARED_KINETO, ids=ids(SHARED_KINETO))
def test_shared_trace_gives_the_recorded_table(path: Path) -> None:
    check_recorded(path, path.relative_to(TRACES).as_posix())


@pytest.mark.parametrize("path", OWN_KINETO, ids=[p.name for p in OWN_KINETO])
def test_own_trace_gives_the_recorded_table(path: Path) -> None:
    check_recorded(path, path.relative_to(REPO_DATA).as_posix())
