"""GPU utilization over time: the trace cut into equal chunks, as ``nsys analyze gpu_time_util``.

Per device: [first GPU activity start, last end] is cut into ``chunks`` chunks of
ceil(span / chunks) ns (the last one ends at the last end). A chunk's utilization is the summed
overlap of all activities with it divided by its length, so concurrent streams can exceed 100%.
Chunks below ``threshold`` are reported; consecutive low chunks merge into one row whose
utilization is the length-weighted mean.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit.analyze.frame import GPU_BUSY_KINDS, frame_of


def chunk_utilization(start: np.ndarray, end: np.ndarray, chunks: int = 30) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(chunk start, chunk length, utilization 0..n) for one device's activities."""
    lo, hi = int(start.min()), int(end.max())
    size = -(-(hi - lo) // chunks)  # ceil
    c_start = lo + size * np.arange(chunks, dtype=np.int64)
    c_end = np.minimum(c_start + size, hi)
    keep = c_end > c_start
    c_start, c_end = c_start[keep], c_end[keep]
    # Summed overlap per chunk via prefix sums of "active count" is overkill here: chunks are few,
    # activities many; clip every activity to each chunk in one broadcast per chunk.
    busy = np.array([np.clip(np.minimum(end, e) - np.maximum(start, s), 0, None).sum() for s, e in zip(c_start, c_end, strict=True)],
                    np.float64)
    return c_start, c_end - c_start, busy / (c_end - c_start)


def low_utilization(table: pa.Table, chunks: int = 30, threshold: float = 0.5) -> pd.DataFrame:
    """Rows of merged low-utilization chunks: device_id, start_ns, dur_ns, in_use (0..n)."""
    frame = frame_of(table)
    rows = frame.rows(*GPU_BUSY_KINDS)
    out = []
    for dev in np.unique(frame.device[rows]):
        r = rows[frame.device[rows] == dev]
        c_start, c_len, util = chunk_utilization(frame.start[r], frame.end[r], chunks)
        i = 0
        while i < util.size:
            if util[i] >= threshold:
                i += 1
                continue
            j = i
            while j + 1 < util.size and util[j + 1] < threshold:
                j += 1
            length = int(c_len[i:j + 1].sum())
            mean = float((util[i:j + 1] * c_len[i:j + 1]).sum() / length)
            out.append({"device_id": int(dev), "start_ns": int(c_start[i]), "dur_ns": length, "in_use": mean})
            i = j + 1
    return pd.DataFrame.from_records(out, columns=["device_id", "start_ns", "dur_ns", "in_use"])
