"""Nsight Systems' other exports: Parquet (--type parquetdir), Arrow files (--type arrowdir) and one
Arrow stream file (--type arrow) read to the same event table as its SQLite export; its JSON export
refused in one line that says what to export instead. The exports are real ones of the nvFuser
sample (../shared/traces/nsys/exports, made with nsys 2023.4.4)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import TRACES, needs_shared

from tracekit.cli import main
from tracekit.ingest import detect, load
from tracekit.schema import META_SOURCE_FORMAT

NSYS = TRACES / "nsys"
EXPORTS = NSYS / "exports"


@needs_shared
@pytest.mark.parametrize(("export", "fmt"), [("nvfuser_launch1000_v100.parquetdir", "nsys-parquetdir"),
                                             ("nvfuser_launch1000_v100.arrows", "nsys-arrows")])
def test_an_arrow_or_parquet_export_reads_to_the_sqlite_exports_table(export: str, fmt: str) -> None:
    sqlite = load(NSYS / "nvfuser_launch1000_v100_nsys2023.4.sqlite")
    table = load(EXPORTS / export)
    assert detect(EXPORTS / export) == fmt and table.schema.metadata[META_SOURCE_FORMAT.encode()] == fmt.encode()
    assert table.num_rows == sqlite.num_rows == 123_858
    assert [c for c in sqlite.column_names if c != "trace_id" and not table.column(c).equals(sqlite.column(c))] == []


@needs_shared
def test_an_arrowdir_export_reads_too(tmp_path: Path) -> None:
    """--type arrowdir (one Arrow IPC file per table), made here from the real Parquet export's tables."""
    arrowdir = tmp_path / "nvfuser.arrowdir"
    arrowdir.mkdir()
    for file in (EXPORTS / "nvfuser_launch1000_v100.parquetdir").glob("*.parquet"):
        table = pq.read_table(file)
        with pa.OSFile(str(arrowdir / f"{file.stem}.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    assert detect(arrowdir) == "nsys-arrowdir"
    parquet = load(EXPORTS / "nvfuser_launch1000_v100.parquetdir")
    table = load(arrowdir)
    assert [c for c in parquet.column_names if c != "trace_id" and not table.column(c).equals(parquet.column(c))] == []


@needs_shared
def test_report_reads_a_parquet_export(tmp_path: Path, capsys) -> None:
    assert main(["report", str(EXPORTS / "nvfuser_launch1000_v100.parquetdir"), "-f", "markdown"]) == 0
    assert "CPU/framework-bound" in capsys.readouterr().out


def _report_fails_in_one_line(path: Path, capsys) -> str:
    """tracekit report on ``path``: exit 1 and one line naming the file; the line."""
    assert main(["report", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err
    return err


def _parquet_export_copy(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A writable copy of the real Parquet export, and its kernel table's file."""
    copy = tmp_path / name
    shutil.copytree(EXPORTS / "nvfuser_launch1000_v100.parquetdir", copy)
    kernels = copy / "CUPTI_ACTIVITY_KIND_KERNEL.parquet"
    kernels.chmod(0o644)
    return copy, kernels


@needs_shared
def test_the_json_export_is_refused_in_one_line_saying_what_to_export(capsys) -> None:
    err = _report_fails_in_one_line(EXPORTS / "dlprof_pytorch_cnn_rtx2070s.json", capsys)
    assert "an Nsight Systems JSON export (nsys export --type json)" in err and "--type sqlite" in err


@needs_shared
def test_a_cut_arrow_export_is_one_line_on_the_file(tmp_path: Path, capsys) -> None:
    data = (EXPORTS / "nvfuser_launch1000_v100.arrows").read_bytes()
    cut = tmp_path / "cut.arrows"
    cut.write_bytes(data[: len(data) // 2])
    assert "corrupt or unreadable nsys arrows export" in _report_fails_in_one_line(cut, capsys)
    damaged, kernels = _parquet_export_copy(tmp_path, "damaged.parquetdir")
    kernels.write_bytes(kernels.read_bytes()[:100])
    assert "corrupt or unreadable nsys parquetdir export" in _report_fails_in_one_line(damaged, capsys)


@needs_shared
def test_a_parquet_export_with_a_column_nsys_never_writes_is_one_line(tmp_path: Path, capsys) -> None:
    odd, kernels = _parquet_export_copy(tmp_path, "odd.parquetdir")
    table = pq.read_table(kernels)
    pq.write_table(table.append_column('start"; DROP', pa.array([1] * table.num_rows)), kernels)
    assert "nsys parquetdir export with unexpected tables" in _report_fails_in_one_line(odd, capsys)


@needs_shared
def test_a_parquet_export_of_the_string_table_alone_is_one_line(tmp_path: Path, capsys) -> None:
    only = tmp_path / "strings.parquetdir"
    only.mkdir()
    shutil.copyfile(EXPORTS / "nvfuser_launch1000_v100.parquetdir" / "StringIds.parquet", only / "StringIds.parquet")
    assert "nsys parquetdir export without a capture's tables" in _report_fails_in_one_line(only, capsys)
