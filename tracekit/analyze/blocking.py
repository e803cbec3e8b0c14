"""Which runtime calls held their host thread until GPU work was done.

A synchronizing API is not the same as a blocking call. ``cudaStreamWaitEvent`` makes a stream wait
on the device and returns at once (a CUDA graph captures it as an edge); ``cudaEventQuery`` and
``cudaStreamQuery`` poll and return at once (PyTorch's caching allocator polls the events of
``record_stream``'d blocks). An async copy returns at once from pinned memory or device to device;
with pageable memory it may block (a copy to pageable memory waits for the stream) or not (a small
copy from pageable memory is staged and returns). Treating all of these
as waits made a replay hold the host for the GPU where it never waited, split a CUDA graph capture
at calls the capture can hold, and told users to take "synchronizing calls" out of a step that had
none (a side-stream prefetch on the H200, tests/data/h200/prefetch_overlap).

So a call blocks when its name says it always does (``*Synchronize``, the synchronous
``cudaMemcpy``, Level Zero's host waits), and an async copy blocks when its GPU copy says so: not
when its copy names pinned or device memory (Kineto: "Memcpy HtoD (Pinned -> Device)"; nsys: its
srcKind/dstKind, see ``tracekit.analyze.copies``); otherwise when the call
returned only as its copy ended (within a tenth of the copy's time: a 64 MB pageable copy returns a
few µs before its last chunk lands). In nsys's Keras darknet53 capture every device-to-host copy
(100 µs calls around 1.7 µs copies: they waited for the stream) blocks and 737 of 738 small
pageable host-to-device copies do not (6 µs calls, staged).
"""

from __future__ import annotations

import re

import numpy as np

from tracekit.analyze.classify import API_CLASSES, classify_rows
from tracekit.analyze.copies import NOT_PAGEABLE, host_memory
from tracekit.analyze.frame import Frame, per_frame
from tracekit.ingest.links import member_mask

# Synchronizing APIs that never hold the host: device-side waits and polls.
NEVER_BLOCKS = re.compile(r"^(cuda|cu|hip)StreamWaitEvent|^(cuda|cu|hip)(Event|Stream)Query")
# Copies the driver may run asynchronously; whether one blocked is read from its GPU copy.
ASYNC_COPY = re.compile(r"^(cuda|cu|hip)Memcpy\w*Async(_v\d+)?(_ptsz|_ptds)?$")
# Copies whose name alone blocks the host (cudaMemcpy: synchronous for host memory of any kind).
SYNC_COPY = re.compile(r"^(cudaMemcpy|hipMemcpy|cuMemcpy(HtoD|DtoH)?)(_v\d+)?$")


@per_frame
def host_blocking_rows(frame: Frame) -> np.ndarray:
    """Sorted rows of runtime/driver calls that blocked their thread until GPU work finished
    (cached on the frame)."""
    calls = frame.rows("runtime_api", "driver_api")
    names = frame.names
    codes = np.unique(frame.name_code[calls]).tolist()
    sync_class = API_CLASSES.index("sync")
    sync_codes = set(np.unique(frame.name_code[calls[classify_rows(frame).api[calls] == sync_class]]).tolist())
    always = [c for c in codes if c >= 0 and not NEVER_BLOCKS.search(names[c])
              and (c in sync_codes or SYNC_COPY.search(names[c]))]
    copies = [c for c in codes if c >= 0 and ASYNC_COPY.search(names[c])]
    out = calls[member_mask(frame.name_code[calls], always)]
    async_calls = calls[member_mask(frame.name_code[calls], copies)]
    if async_calls.size:
        out = np.union1d(out, async_calls[_copy_blocked(frame, async_calls)])  # sorted, as rows() is
    out.flags.writeable = False
    return out


def _copy_blocked(frame: Frame, calls: np.ndarray) -> np.ndarray:
    """Per async copy call: did it hold the host? A call whose GPU copy is not in the trace is taken
    to block (the reading before this evidence was used)."""
    gpu = frame.rows("gpu_memcpy")
    copy_of = np.full(len(frame), -1, np.int64)
    launched = gpu[frame.launch_row[gpu] >= 0]
    copy_of[frame.launch_row[launched]] = launched
    copy = copy_of[calls]
    found = copy >= 0
    copy = np.where(found, copy, 0)
    pinned = np.zeros(calls.size, bool)
    pinned[found] = host_memory(frame, copy[found]) == NOT_PAGEABLE
    # Returned only when its copy was done (a pageable copy's last chunk may still be in flight).
    waited = frame.end[calls] >= frame.end[copy] - frame.dur[copy] // 10
    out = ~found | (~pinned & waited)
    return out


def host_waits(frame: Frame) -> np.ndarray:
    """The first row of each wait: blocking calls on one thread with no launch call between them are
    one wait (``.cpu()`` of a tensor into pageable memory blocks in its copy and in the
    cudaStreamSynchronize after it: two blocking calls for the one thing a user would take out)."""
    blocking = host_blocking_rows(frame)
    if not blocking.size:
        return blocking
    launches = frame.rows("runtime_api", "driver_api")
    launches = launches[classify_rows(frame).api[launches] == API_CLASSES.index("launch")]
    first = np.zeros(blocking.size, bool)
    threads = frame.thread_key[blocking]
    for key in np.unique(threads).tolist():
        mine = np.flatnonzero(threads == key)
        mine = mine[np.argsort(frame.start[blocking[mine]], kind="stable")]
        own = np.sort(frame.start[launches[frame.thread_key[launches] == key]])
        launched_before = np.searchsorted(own, frame.start[blocking[mine]])
        first[mine] = np.r_[True, launched_before[1:] != launched_before[:-1]]
    return blocking[first]
