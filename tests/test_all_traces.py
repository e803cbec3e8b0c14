"""Every real trace under ../shared/traces ingests into a valid table."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest
from conftest import ids, needs_shared, shared_files

import tracekit
from tracekit import schema

TRACE_FILES = shared_files("hta/**/*.json.gz") + shared_files("xprof/**/*.xplane.pb") + shared_files("nsys/*.sqlite")


def check_table(table) -> None:
    assert table.schema.equals(schema.ARROW_SCHEMA, check_metadata=False)
    meta = table.schema.metadata
    assert meta[schema.META_SCHEMA_VERSION.encode()] == schema.SCHEMA_VERSION.encode()
    assert meta[schema.META_SOURCE.encode()].decode() in schema.SOURCES
    table.validate(full=True)
    n = table.num_rows
    for col in ("parent", "launch_row", "op_row"):
        values = table.column(col).drop_null()
        if len(values):
            assert pc.min(values).as_py() >= 0 and pc.max(values).as_py() < n, col
    durs = table.column("dur_ns").drop_null()
    if len(durs):
        assert pc.min(durs).as_py() >= 0


def test_there_are_real_traces_to_walk():
    if not TRACE_FILES:
        pytest.skip("../shared/traces is absent")
    assert len(TRACE_FILES) >= 35


@needs_shared
@pytest.mark.parametrize("path", TRACE_FILES, ids=ids(TRACE_FILES))
def test_real_trace_ingests(path):
    table = tracekit.load(path)
    assert table.num_rows > 0
    check_table(table)
    summary = tracekit.info(table)
    assert summary.events == table.num_rows
    assert sum(summary.counts_by_kind.values()) == table.num_rows


@needs_shared
@pytest.mark.parametrize("path", TRACE_FILES, ids=ids(TRACE_FILES))
def test_exclusive_cpu_split_adds_up_to_each_step_span(path):
    from tracekit.analyze.breakdown import breakdown
    from tracekit.analyze.cpu_partition import PARTS

    part = breakdown(tracekit.load(path)).cpu_partition
    if part.empty:
        pytest.skip("no framework ops in this trace")
    values = part[list(PARTS)]
    assert (values >= 0).all().all()
    assert (values.sum(axis=1) == part.span_ns).all()
