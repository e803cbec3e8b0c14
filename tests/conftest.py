"""Shared fixtures: where the real traces live, and a skip when ../shared is absent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
TRACES = SHARED / "traces"

needs_shared = pytest.mark.skipif(not TRACES.is_dir(), reason=f"real traces not found: {TRACES} is absent")


def shared_files(pattern: str) -> list[Path]:
    """Files under ../shared/traces matching a glob (empty when ../shared is absent)."""
    return sorted(TRACES.glob(pattern)) if TRACES.is_dir() else []


def ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(TRACES)) for p in paths]


def read_with_walker_off(monkeypatch: pytest.MonkeyPatch, walker: str, read: Callable[[Path], Any], path: Path) -> Any:
    """``read(path)`` with the C walker ``tracekit._native.<walker>()`` reported absent: the Python path."""
    from tracekit import _native

    with monkeypatch.context() as m:
        m.setattr(_native, walker, lambda: None)
        return read(path)


def differing_columns(a: Any, b: Any) -> list[str]:
    """Names of the columns in which two tables of the same shape differ."""
    assert a.column_names == b.column_names and a.num_rows == b.num_rows
    return [name for name in a.column_names if not a[name].equals(b[name])]


def assert_written_encodings(path: Path) -> None:
    """Parquet dictionaries only for Arrow's dictionary columns; integer columns delta-encoded (see
    ``tracekit.ingest.parquet.write_options``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    arrow = pf.schema_arrow
    group = pf.metadata.row_group(0)
    for i in range(group.num_columns):
        column = group.column(i)
        field = arrow.field(column.path_in_schema)
        if pa.types.is_dictionary(field.type):
            assert "RLE_DICTIONARY" in column.encodings, field.name
        else:
            assert not {"RLE_DICTIONARY", "PLAIN_DICTIONARY"} & set(column.encodings), field.name
        if pa.types.is_integer(field.type):
            assert "DELTA_BINARY_PACKED" in column.encodings, field.name


def capture_steps(path: Path, step: Callable[[], object], active: int = 3, record_shapes: bool = True) -> Path:
    """``step()`` under torch.profiler (CPU): one warm-up step, then ``active`` marked ones, exported to ``path``
    when the schedule's cycle ends (an export after it would be empty)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    with profile(activities=[ProfilerActivity.CPU], record_shapes=record_shapes,
                 schedule=schedule(wait=0, warmup=1, active=active),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(active + 1):
            step()
            prof.step()
    return path


ANALYSIS_COMMANDS = ("report", "launch", "ranges", "critical-path", "whatif", "info")


def assert_commands_read(path: Path) -> None:
    """Every analysis command reads ``path`` and exits 0 (run as ``python -m tracekit``)."""
    import subprocess
    import sys

    for command in ANALYSIS_COMMANDS:
        done = subprocess.run([sys.executable, "-m", "tracekit", command, str(path)], capture_output=True, text=True)
        assert done.returncode == 0, (command, done.stderr)


def ingested(path: Path, out: Path) -> Path:
    """``tracekit ingest path -o out`` (run as ``python -m tracekit``), asserted to succeed; ``out``."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "tracekit", "ingest", str(path), "-o", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out
