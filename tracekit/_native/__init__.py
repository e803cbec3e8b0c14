"""The Kineto JSON scanner and the nesting pass: the C extension when it was built, else pure Python.

``scanner`` is the module in use (``kineto_scan.c`` compiled as ``_kineto_scan``, or ``pure``);
``BACKEND`` says which. ``TRACEKIT_PURE_PYTHON=1`` forces the pure-Python one (tests compare both).
The C extension is optional: ``pip install`` skips it when no compiler is there, and only JSON
ingest is slower without it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import ModuleType

from tracekit import threads


def _load() -> tuple[ModuleType, str]:
    # The pure-Python scanner is imported only where it is used (9 ms of every command's start-up).
    if os.environ.get("TRACEKIT_PURE_PYTHON", "") not in ("", "0"):
        from tracekit._native import pure
        return pure, "python"
    try:
        from tracekit._native import _kineto_scan
    except ImportError:
        from tracekit._native import pure
        return pure, "python"
    return _kineto_scan, "c"


scanner, BACKEND = _load()


def scan_threads() -> int:
    """Threads the C scanner may use on one file (``tracekit.threads.usable``)."""
    return threads.usable()


def interval_sweep() -> ModuleType | None:
    """The exclusive-by-priority sweep (``interval_sweep.c``); None where it was not built or
    ``TRACEKIT_PURE_PYTHON`` is set (``tracekit.analyze.intervals`` then merges unions in numpy)."""
    if os.environ.get("TRACEKIT_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from tracekit._native import _interval_sweep
    except ImportError:
        return None
    return _interval_sweep


def sqlite_reader() -> ModuleType | None:
    """The C row walker for SQLite queries (``sqlite_columns.c``), bound to the libsqlite3 that
    Python's sqlite3 module uses; None where it was not built or no shared libsqlite3 is found (the
    nsys reader then fetches rows through the sqlite3 module) or ``TRACEKIT_PURE_PYTHON`` is set."""
    global _sqlite_reader
    if _sqlite_reader is False:
        if os.environ.get("TRACEKIT_PURE_PYTHON", "") not in ("", "0"):
            return None
        _sqlite_reader = _load_sqlite_reader()
    return _sqlite_reader if isinstance(_sqlite_reader, ModuleType) else None


_sqlite_reader: ModuleType | None | bool = False


def _load_sqlite_reader() -> ModuleType | None:
    try:
        from tracekit._native import _sqlite_columns
    except ImportError:
        return None
    for library in _sqlite_libraries():
        try:
            _sqlite_columns.load(library)
            return _sqlite_columns
        except OSError:
            continue
    return None


def _sqlite_libraries() -> Iterator[str]:
    """Where libsqlite3 is: the copy the sqlite3 module loaded (Linux: its mapping in this process),
    else the one the system's loader finds (asked only then: find_library runs ldconfig, a few ms to
    tens of ms of every nsys read's start)."""
    import sqlite3  # noqa: F401  (loads _sqlite3 and, with it, libsqlite3)

    mapped: list[str] = []
    try:
        with open("/proc/self/maps") as maps:
            mapped = sorted({line.split()[-1] for line in maps if "libsqlite3" in line and "/" in line})
    except OSError:
        pass
    yield from mapped
    import ctypes.util

    system = ctypes.util.find_library("sqlite3")
    if system:
        yield system


def xplane_walker() -> ModuleType | None:
    """The C event walker for XSpace lines (``xplane_events.c``); None where it was not built or
    ``TRACEKIT_PURE_PYTHON`` is set (the reader then walks events through protobuf's objects)."""
    if os.environ.get("TRACEKIT_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from tracekit._native import _xplane_events
    except ImportError:
        return None
    return _xplane_events
