"""Launch calls that take milliseconds: not launch overhead.

A launch call costs microseconds (the stored traces' medians: 4-15 µs). One of milliseconds is a
kernel's module loaded at its first launch (CUDA's lazy loading, opt-in since CUDA 11.7 and the
default since 12.2; ROCm loads a code object), the thread stalled inside the call, or the call
blocked on a full launch queue. The last runs while the GPU is busy; the others while it idles, and
neither a CUDA graph nor fewer kernels remove them from a steady step (a warm-up step has them once).
"""

from __future__ import annotations

import numpy as np

from tracekit.analyze.classify import API_CLASSES, classify_rows
from tracekit.analyze.frame import Frame

SLOW_LAUNCH_NS = 500_000  # a launch call this long, and SLOW_LAUNCH_RATIO x the median call, is no launch overhead
SLOW_LAUNCH_RATIO = 100


def slow_launch_calls(frame: Frame, median_ns: float | None = None) -> np.ndarray:
    """Rows of the launch calls of 0.5 ms or more and 100x the median launch call (``median_ns``, or
    the trace's), by row."""
    calls = np.flatnonzero(classify_rows(frame).api == API_CLASSES.index("launch"))
    if not calls.size:
        return calls
    median = float(np.median(frame.dur[calls])) if median_ns is None else median_ns
    return calls[frame.dur[calls] >= max(SLOW_LAUNCH_NS, SLOW_LAUNCH_RATIO * median)]
