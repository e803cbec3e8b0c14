"""Memory pages for the command line's big arrays.

numpy asks the kernel for transparent huge pages (2 MB) on every array of 4 MB or more. An
analysis of a big trace allocates hundreds of such arrays for a moment each (masks, sorted copies,
per-row ids), and each huge page is zeroed whole when first touched and has to be found (compacted)
in physical memory. On the 2-core VM tracekit is developed on, ``tracekit report`` of a 5M-event
Parquet file spent 3.2-3.5 s of system time on that (5.6-5.8 s wall, interleaved runs); with base
pages 1.5-2.1 s (4.4-4.9 s wall), and an nsys export of a million kernels went from 4.8-5.5 s to
3.9-4.0 s. Small traces do not change. So the commands that read a trace turn the hint off in their own process (not those that
run a profiled workload in it, which runs as the user's own would); the library leaves numpy as it
finds it, and ``NUMPY_MADVISE_HUGEPAGE`` set by the user wins.
"""

from __future__ import annotations

import os


def prefer_base_pages() -> None:
    """Stop numpy's huge-page hint in this process, unless ``NUMPY_MADVISE_HUGEPAGE`` says otherwise."""
    if "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        return
    try:  # numpy 2 keeps it in numpy._core, 1.26 in numpy.core
        from numpy._core.multiarray import _set_madvise_hugepage  # type: ignore[attr-defined]
    except ImportError:
        try:
            from numpy.core.multiarray import _set_madvise_hugepage  # type: ignore[attr-defined,no-redef]
        except ImportError:  # a numpy without the hint: nothing to turn off
            return
    _set_madvise_hugepage(False)
