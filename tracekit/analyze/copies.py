"""Which host memory a GPU copy read or wrote: pageable, not pageable (pinned or device), or unknown.

Pageable memory matters twice: the driver stages such a copy through a pinned buffer at a fraction
of the link's rate, and an async copy to or from it may hold the host (``tracekit.analyze.blocking``).
Each format records it in its own place:

* Kineto names it: ``Memcpy HtoD (Pageable -> Device)``, ``Memcpy DtoH (Device -> Pinned)``.
* Nsight Systems keeps ``srcKind`` / ``dstKind`` columns, which the reader writes into ``args`` as
  their labels (``{"srcKind":"Pageable","dstKind":"Device"}``); the name is nsys stats' own
  (``[CUDA memcpy Host-to-Device]``), which says only the direction.
* TF's XSpace (``MemcpyH2D``, ``memcpy_details: size:4 dest:1 async:1``) does not record it: unknown.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from tracekit.analyze.frame import Frame

UNKNOWN, PAGEABLE, NOT_PAGEABLE = 0, 1, 2

PAGEABLE_NAME = re.compile(r"Pageable", re.IGNORECASE)
NOT_PAGEABLE_NAME = re.compile(r"Pinned|Device -> Device|DtoD|Device-to-Device|PtoP|Peer-to-Peer", re.IGNORECASE)
# nsys's labels of ENUM_CUDA_MEM_KIND other than Pageable and Unknown.
_KNOWN = "(Pinned|Device|Array|Managed|Device Static|Managed Static)"


def host_memory(frame: Frame, copies: np.ndarray) -> np.ndarray:
    """Per row of ``copies`` (gpu_memcpy rows): UNKNOWN, PAGEABLE or NOT_PAGEABLE (int8). A copy is
    pageable when either end is; not pageable when both ends are known and neither is."""
    out = np.zeros(copies.size, np.int8)
    if not copies.size:
        return out
    out[frame.named(copies, NOT_PAGEABLE_NAME)] = NOT_PAGEABLE
    out[frame.named(copies, PAGEABLE_NAME)] = PAGEABLE  # either end pageable
    undecided = np.flatnonzero(out == UNKNOWN)
    if undecided.size and "args" in frame.table.column_names:
        out[undecided] = _from_args(frame.table, copies[undecided])
    return out


def _from_args(table: pa.Table, rows: np.ndarray) -> np.ndarray:
    """The memory kinds nsys's reader writes into args, matched in the JSON text without parsing it."""
    import pyarrow.compute as pc  # here: short commands never load it

    text = table.column("args").take(pa.array(rows)).cast(pa.large_string())
    out = np.zeros(rows.size, np.int8)
    if text.null_count == len(text):
        return out
    pageable = pc.match_substring_regex(text, r'"(srcKind|dstKind)":"Pageable"')
    known = pc.and_(pc.match_substring_regex(text, f'"srcKind":"{_KNOWN}"'),
                    pc.match_substring_regex(text, f'"dstKind":"{_KNOWN}"'))
    out[_true(pc.and_not(known, pageable))] = NOT_PAGEABLE
    out[_true(pageable)] = PAGEABLE
    return out


def _true(mask: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(mask.fill_null(False).to_numpy(zero_copy_only=False), bool)


# A copy from host to device, as each format names it: Kineto "Memcpy HtoD (Pinned -> Device)", nsys
# "[CUDA memcpy Host-to-Device]" (2022: "[CUDA memcpy HtoD]"), TF's XSpace "MemcpyH2D".
HOST_TO_DEVICE_NAME = re.compile(r"HtoD|Host-to-Device|H2D")


def host_to_device(frame: Frame, rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows``: whether it is a copy from host to device memory (by its name)."""
    return frame.named(rows, HOST_TO_DEVICE_NAME) & frame.mask("gpu_memcpy")[rows]


# A copy this large runs at the link's rate (a small one is its fixed latency): the trace's own pinned
# copies of at least this size give the rate pinned memory reaches on its machine.
RATE_COPY_BYTES = 1 << 20
# Where the trace has none: PCIe 3.0 x16's practical pinned rate, a floor for a discrete GPU (an H200 on
# PCIe 5.0 copied 32 MB pinned at 55 GB/s, tests/data/h200/prefetch_serial; pageable at 4.4-5.5 GB/s).
FALLBACK_PINNED_BYTES_PER_S = 12e9


def copy_bytes(frame: Frame, rows: np.ndarray) -> np.ndarray:
    """Bytes each row moved (-1 where the trace does not say)."""
    if "bytes" not in frame.table.column_names or not rows.size:
        return np.full(rows.size, -1, np.int64)
    taken = frame.table.column("bytes").take(pa.array(rows))
    return np.asarray(taken.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)


def pinned_rate(frame: Frame, to_device: bool) -> tuple[float, int]:
    """(bytes/s, copies measured) of the trace's pinned copies of RATE_COPY_BYTES or more in one
    direction (host to device, or device to host); (FALLBACK_PINNED_BYTES_PER_S, 0) where it has none."""
    copies = frame.rows("gpu_memcpy")
    direction = host_to_device(frame, copies) if to_device else device_to_host(frame, copies)
    copies = copies[direction]
    pinned = copies[host_memory(frame, copies) == NOT_PAGEABLE]
    nbytes = copy_bytes(frame, pinned)
    big = (nbytes >= RATE_COPY_BYTES) & (frame.dur[pinned] > 0)
    if not big.any():
        return FALLBACK_PINNED_BYTES_PER_S, 0
    return float(nbytes[big].sum() / (frame.dur[pinned][big].sum() / 1e9)), int(big.sum())


DEVICE_TO_HOST_NAME = re.compile(r"DtoH|Device-to-Host|D2H")


def device_to_host(frame: Frame, rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows``: whether it is a copy from device to host memory (by its name)."""
    return frame.named(rows, DEVICE_TO_HOST_NAME) & frame.mask("gpu_memcpy")[rows]


def pageable_share(frame: Frame) -> float:
    """Share of the trace's GPU copy time spent in copies from or to pageable memory (0 when no copy
    says which memory it used)."""
    copies = frame.rows("gpu_memcpy")
    if not copies.size:
        return 0.0
    dur = frame.dur[copies]
    total = int(dur.sum())
    return float(dur[host_memory(frame, copies) == PAGEABLE].sum() / total) if total > 0 else 0.0
