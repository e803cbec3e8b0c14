"""The analysis commands (and compare) read nsys exports with only the args the analyses read
(``load(path, args_of_kinds=ARGS_READ_OF_KINDS)``), and tracekit Parquet files with only the columns
they read (``columns=COLUMNS_READ``): every analysis must say the same as on the whole table, and
every column read must be the same."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import differing_columns, ids, needs_shared, shared_files

from tracekit import api
from tracekit.analyze.frame import ARGS_READ_OF_KINDS, COLUMNS_READ
from tracekit.errors import TracekitError
from tracekit.ingest import NamedTable, load, parquet

NSYS = shared_files("nsys/*.sqlite")
KINETO = shared_files("hta/critical_path/alexnet/*.json.gz")[:1]
# One trace of each source and shape: Kineto GPU, CPU-only and AMD; nsys; XSpace of TF on CPU and of 8 GPUs.
EVERY_SOURCE = (KINETO + shared_files("hta/cpu_only/*.json.gz")[:1] + shared_files("hta/amd_trace/*.json.gz")[:1]
                + shared_files("nsys/keras_tf_darknet53_*.sqlite") + shared_files("xprof/cpu_tf2.21/lstm_keras_eager.xplane.pb")
                + shared_files("xprof/tf_bert_8xV100_gpu_multi_worker.xplane.pb"))


def _documents(table: pa.Table) -> dict[str, str]:
    """Each analysis command's JSON on this table (or its error, which must match too)."""
    trace = NamedTable("trace", table)
    out = {}
    for name, run in (("report", api.report), ("launch", api.launch), ("ranges", api.ranges),
                      ("critical-path", api.critical_path), ("whatif", api.whatif)):
        try:
            out[name] = api.render(run(trace), "json")
        except TracekitError as e:
            out[name] = f"error: {e}"
    out["compare"] = api.render(api.compare([trace, trace]), "json")
    return out


@needs_shared
@pytest.mark.parametrize("path", NSYS + KINETO, ids=ids(NSYS + KINETO))
def test_analyses_say_the_same_with_only_the_args_they_read(path: Path) -> None:
    whole = load(path)
    projected = load(path, args_of_kinds=ARGS_READ_OF_KINDS)
    assert differing_columns(whole, projected) in ([], ["args"])
    assert _documents(projected) == _documents(whole)


@needs_shared
@pytest.mark.parametrize("path", EVERY_SOURCE, ids=ids(EVERY_SOURCE))
def test_analyses_say_the_same_from_parquet_with_only_the_columns_they_read(path: Path, tmp_path: Path) -> None:
    written = tmp_path / "trace.parquet"
    parquet.write(load(path), written)
    whole = load(written)
    projected = load(written, columns=COLUMNS_READ)
    assert projected.schema == whole.schema
    left_out = [name for name in whole.column_names if name not in COLUMNS_READ]
    assert differing_columns(whole, projected) == [n for n in left_out if whole[n].null_count < whole.num_rows]
    assert all(projected[n].null_count == projected.num_rows for n in left_out)
    assert _documents(projected) == _documents(whole)


@needs_shared
@pytest.mark.parametrize("path", NSYS, ids=ids(NSYS))
def test_an_nsys_export_read_with_only_the_columns_the_analyses_read(path: Path) -> None:
    """The nsys reader neither selects nor builds the columns left out (launch shapes, registers,
    shared memory, bytes, categories, thread names): they are null, the rest is as read whole."""
    whole = load(path, args_of_kinds=ARGS_READ_OF_KINDS)
    projected = load(path, args_of_kinds=ARGS_READ_OF_KINDS, columns=COLUMNS_READ)
    assert projected.schema == whole.schema
    left_out = [name for name in whole.column_names if name not in COLUMNS_READ]
    assert differing_columns(whole, projected) == [n for n in left_out if whole[n].null_count < whole.num_rows]
    assert all(projected[n].null_count == projected.num_rows for n in left_out)
    # Launch shapes were there to leave out, so the check above can fail.
    assert whole["grid_x"].null_count < whole.num_rows
    assert _documents(projected) == _documents(whole)


def test_unknown_columns_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown columns"):
        load(tmp_path / "any.parquet", columns=["kind", "duration"])


@needs_shared
@pytest.mark.parametrize("path", NSYS, ids=ids(NSYS))
def test_an_nsys_export_keeps_the_args_of_the_kinds_asked_for(path: Path) -> None:
    whole = load(path)
    projected = load(path, args_of_kinds=ARGS_READ_OF_KINDS)
    kind = whole.column("kind").cast(pa.string())
    kept = pc.is_in(kind, pa.array(sorted(ARGS_READ_OF_KINDS)))
    # Rows of the kinds asked for keep their args exactly; no other row keeps any.
    assert projected.column("args").filter(kept).equals(whole.column("args").filter(kept))
    assert projected.column("args").filter(pc.invert(kept)).null_count == pc.sum(pc.invert(kept)).as_py()
    # The export's args were not all empty to begin with, so the check above can fail.
    assert whole.column("args").filter(pc.invert(kept)).null_count < pc.sum(pc.invert(kept)).as_py()


def test_unknown_kinds_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown kinds"):
        load(tmp_path / "any.json", args_of_kinds=["cpu_op", "kernel"])
