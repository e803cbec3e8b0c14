"""The Kineto JSON scanner and the nesting pass: the C extension when it was built, else pure Python.

``scanner`` is the module in use (``kineto_scan.c`` compiled as ``_kineto_scan``, or ``pure``);
``BACKEND`` says which. ``TRACEKIT_PURE_PYTHON=1`` forces the pure-Python one (tests compare both).
The C extension is optional: ``pip install`` skips it when no compiler is there, and only JSON
ingest is slower without it.
"""

from __future__ import annotations

import os
from types import ModuleType

from tracekit._native import pure


def _load() -> tuple[ModuleType, str]:
    if os.environ.get("TRACEKIT_PURE_PYTHON", "") not in ("", "0"):
        return pure, "python"
    try:
        from tracekit._native import _kineto_scan
    except ImportError:
        return pure, "python"
    return _kineto_scan, "c"


scanner, BACKEND = _load()


def scan_threads() -> int:
    """Threads the C scanner may use on one file: the cores this process may run on, or
    ``TRACEKIT_THREADS`` when set (1 parses serially)."""
    override = os.environ.get("TRACEKIT_THREADS", "")
    if override.isdigit() and int(override) > 0:
        return int(override)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
