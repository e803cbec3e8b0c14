"""Files tracekit writes take the mode a plain open() would give (the umask), and appear atomically."""

from __future__ import annotations

import os
import stat

import pytest
from conftest import shared_files

from tracekit.atomic import atomic_path, write_text_atomic
from tracekit.cli import main


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_written_files_follow_the_umask(tmp_path, umask, mask, mode):
    umask(mask)
    target = tmp_path / "report.md"
    write_text_atomic(target, "# report\n")
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert target.read_text() == "# report\n"


def test_a_failed_write_leaves_neither_target_nor_temp_file(tmp_path):
    target = tmp_path / "out.parquet"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("writer died")
    assert list(tmp_path.iterdir()) == []


def test_ingest_writes_parquet_readable_by_others(tmp_path, umask):
    traces = shared_files("hta/cpu_only/*.json.gz")
    if not traces:
        pytest.skip("../shared/traces is absent")
    out = tmp_path / "t.parquet"
    assert main(["ingest", str(traces[0]), "-o", str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
