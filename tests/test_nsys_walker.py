"""The C row walker (``tracekit/_native/sqlite_columns.c``) gives the nsys reader the same table,
byte for byte, as fetching rows through Python's sqlite3 module: on every shared export, on one
thread and on several, and on a real export edited to hold the values a damaged or unusual file
can hold (non-ASCII and invalid UTF-8 text, control characters, reals, infinities, blobs, NULLs,
unknown string ids, a column a third-party tool added)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import SHARED, differing_columns, ids, needs_shared, read_with_walker_off, shared_files

from tracekit import _native
from tracekit.errors import InputError
from tracekit.ingest import nsys

SQLITE = shared_files("nsys/*.sqlite")
SMALL = SHARED / "traces" / "nsys" / "dlprof_pytorch_cnn_rtx2070s_nsys2022.1.sqlite"
needs_walker = pytest.mark.skipif(_native.sqlite_reader() is None,
                                  reason="the C row walker is not built or no shared libsqlite3 was found")


def _read_through_python(path: Path, monkeypatch: pytest.MonkeyPatch) -> pa.Table:
    return read_with_walker_off(monkeypatch, "sqlite_reader", nsys.read, path)


@needs_shared
@needs_walker
@pytest.mark.parametrize("threads", ["1", "3"])
@pytest.mark.parametrize("path", SQLITE, ids=ids(SQLITE))
def test_walker_matches_the_sqlite3_module(path: Path, threads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEKIT_THREADS", threads)
    walked = nsys.read(path)
    python = _read_through_python(path, monkeypatch)
    assert differing_columns(walked, python) == []
    assert walked.schema.metadata == python.schema.metadata


def _edited_export(tmp_path: Path) -> Path:
    """The small DLProf export with odd values written into its kernel, runtime and NVTX rows."""
    db = tmp_path / "edited.sqlite"
    shutil.copyfile(SMALL, db)
    db.chmod(0o644)
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN toolNote")  # no type: any value
    oddities = ["'plain'", "'caf\u00e9 \u2603 \U0001f680'", "CAST(x'41ff42c3' AS TEXT)", "'tab\tquote\"back\\\\ del\x7f'",
                "char(1, 31, 10, 13, 8, 12)", "1.5", "-0.0", "1e300", "9e999", "-9e999", "x'00ff'", "NULL", "42",
                "-9223372036854775808"]
    rowids = [r[0] for r in con.execute("SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid")]
    for rowid, value in zip(rowids, oddities * 4, strict=False):
        con.execute(f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET toolNote = {value} WHERE rowid = {rowid}")
    # A kernel whose short name is not in StringIds: the id is kept as a number.
    con.execute(f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = 987654321 WHERE rowid = {rowids[-1]}")
    # The first and last ids of StringIds, the ends of the walker's lookup.
    con.execute(f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = (SELECT min(id) FROM StringIds) WHERE rowid = {rowids[-2]}")
    con.execute(f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = (SELECT max(id) FROM StringIds) WHERE rowid = {rowids[-3]}")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET returnValue = 2.25 WHERE rowid % 7 = 0")
    con.execute("UPDATE NVTX_EVENTS SET text = CAST(x'6e7674788081' AS TEXT) WHERE rowid % 5 = 0")
    con.commit()
    con.close()
    return db


@needs_shared
@needs_walker
def test_walker_writes_odd_values_as_json_dumps_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = _edited_export(tmp_path)
    walked = nsys.read(db)
    assert differing_columns(walked, _read_through_python(db, monkeypatch)) == []
    notes = [a for a in walked["args"].to_pylist() if a and "toolNote" in a]
    assert any('"toolNote":"caf\\u00e9 \\u2603 \\ud83d\\ude80"' in a for a in notes)
    assert any('"toolNote":Infinity' in a for a in notes) and any('"toolNote":-0.0' in a for a in notes)
    assert any('"toolNote":"b\'\\\\x00\\\\xff\'"' in a for a in notes)  # a blob: the text of str(bytes)
    assert any('"shortName":987654321' in a for a in walked["args"].to_pylist() if a)


@needs_shared
@needs_walker
def test_text_where_an_integer_belongs_is_one_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "text-in-start.sqlite"
    shutil.copyfile(SMALL, db)
    db.chmod(0o644)
    con = sqlite3.connect(db)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon' WHERE rowid = 3")
    con.commit()
    con.close()
    with pytest.raises(InputError, match=r"text-in-start\.sqlite: nsys export with unexpected values .*integer"):
        nsys.read(db)


@needs_shared
@needs_walker
def test_a_corrupt_page_reads_as_the_same_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # SQLite finds the damage while the walker steps through the kernel table: the walker's error
    # must read as the sqlite3 module's does.
    source = SHARED / "traces" / "nsys" / "abacus_pytorch_cnn_titanrtx_nsys2023.4.sqlite"
    con = sqlite3.connect(source)
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'").fetchone()[0]
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    data = bytearray(source.read_bytes())
    for page in range(root + 5, root + 40):
        data[(page - 1) * page_size:(page - 1) * page_size + 64] = b"\xff" * 64
    db = tmp_path / "corrupt.sqlite"
    db.write_bytes(bytes(data))
    messages = []
    for read in (nsys.read, lambda p: _read_through_python(p, monkeypatch)):
        with pytest.raises(InputError, match=r"corrupt\.sqlite: corrupt or unreadable nsys export \(") as raised:
            read(db)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]


TENSORFLOW_CHILD = """
import sys
from pathlib import Path
import tensorflow  # exports its own copy of SQLite's API into the global symbol scope
from tracekit import _native
from tracekit.ingest import nsys
walker = _native.sqlite_reader()
for name in sys.argv[1:]:
    walked = nsys.read(Path(name))
    _native.sqlite_reader = lambda: None
    python = nsys.read(Path(name))
    _native.sqlite_reader = lambda: walker
    assert all(walked[c].equals(python[c]) for c in walked.column_names), name
print(walker.binding(), len(sys.argv) - 1)
"""


@needs_shared
@needs_walker
def test_walker_runs_beside_tensorflows_sqlite() -> None:
    # `tracekit run` imports TensorFlow, whose library exports a second SQLite; the walker once
    # called libsqlite3's entry points while their inner calls went to TensorFlow's copy, and
    # crashed. It now calls one whole SQLite, as the sqlite3 module does.
    pytest.importorskip("tensorflow")
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", TENSORFLOW_CHILD, *map(str, SQLITE)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    binding, files = proc.stdout.split()
    assert binding in ("global", "library") and int(files) == len(SQLITE)
