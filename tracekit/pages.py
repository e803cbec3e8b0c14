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

Arrow's buffers come from mimalloc, which asks for huge pages on its arenas as numpy does: with
that hint, a fresh process read the same 1M-event Parquet file in 0.08 s one time and 0.5-1.1 s
the next (half the runs, bimodal), and ``tracekit report`` of the 5M-event file took 4.2-6.7 s
(2.4-6.4 s system time); without it 0.13 s every time and 3.1-3.7 s (1.7-1.8 s system). mimalloc
reads ``MIMALLOC_ALLOW_THP`` when pyarrow loads it, so the command line sets it before its first
import of pyarrow; a value the user set wins here too.
"""

from __future__ import annotations

import os
import sys


def prefer_base_pages() -> None:
    """Stop numpy's and Arrow's (mimalloc's) huge-page hints in this process, unless
    ``NUMPY_MADVISE_HUGEPAGE`` or ``MIMALLOC_ALLOW_THP`` says otherwise."""
    if "pyarrow" not in sys.modules:  # read once, when pyarrow loads mimalloc
        os.environ.setdefault("MIMALLOC_ALLOW_THP", "0")
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
