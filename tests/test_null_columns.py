"""Absent columns (a CPU trace's GPU columns, ids a format lacks) cost no resident memory: they are
nulls over a private mapping of zeros that is never written, from every reader and from Parquet,
and the Frame reads them as a broadcast of the null value. Same values as ``pa.nulls``."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import TRACES

from tracekit import schema
from tracekit.analyze.frame import Frame
from tracekit.ingest import load, parquet
from tracekit.ingest.columns import null_array

ROWS = 2_000_000


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


@pytest.mark.parametrize("n", [0, 1, 7, 4097])
def test_null_arrays_equal_arrows_nulls_for_every_column_type(n):
    for col in schema.COLUMNS:
        got = null_array(n, col.type)
        got.validate(full=True)
        assert got.type == col.type and got.null_count == n == len(got), col.name
        assert got.to_pylist() == pa.nulls(n, col.type).to_pylist(), col.name


def test_a_table_of_null_columns_takes_no_resident_memory():
    before = _rss_mib()
    ours = [null_array(ROWS, col.type) for col in schema.COLUMNS]
    for a in ours:
        a.validate(full=True)  # reads every buffer: reading does not make the pages resident
    ours_mib = _rss_mib() - before
    before = _rss_mib()
    arrows = [pa.nulls(ROWS, col.type) for col in schema.COLUMNS]
    arrows_mib = _rss_mib() - before
    assert arrows_mib > 100  # ~150 MiB of zeros written for 31 columns of 2M rows
    assert ours_mib < 10, (ours_mib, arrows_mib)
    assert pa.table(ours, schema=schema.ARROW_SCHEMA).equals(pa.table(arrows, schema=schema.ARROW_SCHEMA))


XSPACE_CPU = TRACES / "xprof" / "cpu_tf2.21" / "lstm_keras_eager.xplane.pb"


@pytest.mark.skipif(not XSPACE_CPU.exists(), reason="needs ../shared/traces (the TF 2.21 CPU XSpace captures)")
def test_parquet_leaves_the_absent_columns_unread_and_reads_back_the_same_table(tmp_path):
    table = load(XSPACE_CPU)
    absent = {f.name for f, c in zip(table.schema, table.columns, strict=True) if c.null_count == len(c)}
    assert {"device_id", "stream_id", "launch_row", "grid_x", "registers_per_thread"} <= absent  # no GPU here
    out = tmp_path / "t.parquet"
    parquet.write(table, out)
    assert parquet._null_columns(pq.ParquetFile(out)) == absent
    back = parquet.read(out)
    assert back.equals(table) and back.schema.metadata == table.schema.metadata
    frame = Frame(back)
    assert (frame.launch_row == -1).all() and not frame.launch_row.flags.writeable
    assert frame.launch_row.strides == (0,)  # a broadcast of -1, not an array of the table's length
    assert (frame.start == back.column("start_ns").to_numpy()).all()
