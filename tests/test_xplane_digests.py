"""The XSpace reader gives the same table, column by column, as the reader before its event loop was
rewritten (per-line constants, per-metadata caches): the digests were recorded with that reader (b1ebd8f).

``tests/data/xplane_table_digests.json`` holds a digest of every column of every shared XSpace
trace and of the JAX trace in tests/data. Re-record only for an intended change:
``TRACEKIT_UPDATE_GOLDEN=1 python -m pytest tests/test_xplane_digests.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import TRACES, shared_files
from test_nsys_digests import column_digests

from tracekit.ingest import load

DIGESTS = Path(__file__).parent / "data" / "xplane_table_digests.json"
REPO_TRACE = Path(__file__).parent / "data" / "jax" / "scan_rnn.xplane.pb"
XSPACE = [REPO_TRACE, *shared_files("**/*.xplane.pb")]


def _key(path: Path) -> str:
    return str(path.relative_to(TRACES)) if path.is_relative_to(TRACES) else path.name


@pytest.mark.parametrize("path", XSPACE, ids=[_key(p) for p in XSPACE])
def test_xplane_reader_gives_the_recorded_table(path: Path) -> None:
    got = column_digests(load(path))
    if os.environ.get("TRACEKIT_UPDATE_GOLDEN"):
        recorded = json.loads(DIGESTS.read_text()) if DIGESTS.exists() else {}
        recorded[_key(path)] = got
        DIGESTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    want = json.loads(DIGESTS.read_text())[_key(path)]
    assert {k: v for k, v in got.items() if v != want.get(k)} == {}
