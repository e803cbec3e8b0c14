"""Nsight Systems' Arrow and Parquet exports -> event table, through the SQLite reader.

``nsys export --type parquetdir`` writes one ``<TABLE>.parquet`` per table, ``--type arrowdir`` one
``<TABLE>.arrow`` IPC file per table, and ``--type arrow`` one ``.arrows`` file holding each table as
its own IPC stream, one after another (the table's name in the stream schema's ``table_name``
metadata). All three hold the tables and columns of the SQLite export under the same names
(ids as uint64 where SQLite has signed integers). The tables the nsys reader reads are copied into
a temporary SQLite database and read by ``tracekit.ingest.nsys``: one reader for every nsys export.
The copy costs: the nvFuser sample (124k events) reads in 0.8-1.1 s against 0.2 s from SQLite.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from tracekit.errors import InputError
from tracekit.ingest import columns, nsys
from tracekit.ingest.files import regular_file

BATCH_ROWS = 1 << 16


def read(path: Path, fmt: str, args_of_kinds: frozenset[str] | None = None,
         columns_read: frozenset[str] | None = None) -> pa.Table:
    """The event table of an nsys Arrow/Parquet export (``fmt``: nsys-parquetdir, nsys-arrowdir,
    nsys-arrows)."""
    if path.is_dir():
        sha = columns.dir_sha256(sorted(p for p in path.iterdir() if p.is_file()))
    else:
        regular_file(path)
        sha = columns.file_sha256(path)
    with tempfile.TemporaryDirectory(prefix="tracekit-nsys-") as tmp:
        db_path = Path(tmp) / "export.sqlite"
        con = sqlite3.connect(db_path)
        try:
            for name, table in _tables(path, fmt):
                _copy(con, name, table)
                del table
            con.commit()
        except (sqlite3.Error, pa.ArrowException, ValueError, OverflowError) as e:  # a column nsys never writes
            raise InputError(path, f"nsys {fmt.removeprefix('nsys-')} export with unexpected tables "
                                   f"({type(e).__name__}: {e})") from None
        finally:
            con.close()
        return nsys.read(db_path, display_path=path, args_of_kinds=args_of_kinds, columns=columns_read,
                         source_format=fmt, source_sha256=sha)


def _tables(path: Path, fmt: str) -> Iterator[tuple[str, pa.Table]]:
    """(table name, its rows) of every table of the export."""
    try:
        if fmt == "nsys-arrows":
            yield from _stream_tables(path)
            return
        suffix = ".parquet" if fmt == "nsys-parquetdir" else ".arrow"
        for file in sorted(path.glob(f"*{suffix}")):
            if file.stem not in nsys.TABLES_READ:
                continue
            if fmt == "nsys-parquetdir":
                import pyarrow.parquet as pq

                yield file.stem, pq.read_table(file)
            else:
                with pa.memory_map(str(file)) as source:
                    yield file.stem, pa.ipc.open_file(source).read_all()
    except (OSError, pa.ArrowException) as e:
        raise InputError(path, f"corrupt or unreadable nsys {fmt.removeprefix('nsys-')} export ({e})") from None


def _stream_tables(path: Path) -> Iterator[tuple[str, pa.Table]]:
    size = path.stat().st_size
    with open(path, "rb") as f:
        while f.tell() < size:
            reader = pa.ipc.open_stream(f)
            name = (reader.schema.metadata or {}).get(b"table_name")
            if not name:
                raise InputError(path, "an Arrow stream without nsys's table_name: not an nsys arrow export")
            table = reader.read_all()  # read past it either way: the next stream starts after it
            if name.decode() in nsys.TABLES_READ:
                yield name.decode(), table


def _copy(con: sqlite3.Connection, name: str, table: pa.Table) -> None:
    """``table`` as the SQLite table ``name``, its columns under their names. nsys's uint64 ids are
    signed integers in its SQLite export: cast so (a value past 2**63 keeps its bits)."""
    cols = []
    for field in table.schema:
        kind = field.type
        if pa.types.is_unsigned_integer(kind) or pa.types.is_integer(kind) or pa.types.is_boolean(kind):
            sql_type = "INTEGER"
        elif pa.types.is_floating(kind):
            sql_type = "REAL"
        elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            sql_type = "BLOB"
        else:
            sql_type = "TEXT"
        cols.append(f'"{field.name}" {sql_type}')
    con.execute(f'CREATE TABLE "{name}" ({", ".join(cols)})')
    marks = ", ".join("?" * table.num_columns)
    for batch in table.to_batches(BATCH_ROWS):
        values = [_sqlite_values(batch.column(i)) for i in range(batch.num_columns)]
        con.executemany(f'INSERT INTO "{name}" VALUES ({marks})', zip(*values, strict=True))


def _sqlite_values(array: pa.Array) -> list[object]:
    import pyarrow.compute as pc

    kind = array.type
    if pa.types.is_uint64(kind):
        array = pc.cast(array, pa.int64(), safe=False)
    elif pa.types.is_dictionary(kind):
        array = array.dictionary_decode()
    elif not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
              or pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
              or pa.types.is_large_binary(kind)):
        array = pc.cast(array, pa.string())  # timestamps, lists: as text, which no reader column needs
    return array.to_pylist()
