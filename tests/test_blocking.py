"""Which runtime calls held the host (tracekit.analyze.blocking), read from each call's evidence on
real traces: device-side waits and polls never, async copies from what their GPU copy shows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from conftest import TRACES, needs_shared

import tracekit
from tracekit.analyze.blocking import host_blocking_rows, host_waits
from tracekit.analyze.frame import frame_of

H200 = Path(__file__).parent / "data" / "h200"


def _blocking(path: Path) -> tuple[Counter, Counter]:
    """(blocking calls by name, all calls by name)."""
    frame = frame_of(tracekit.load(path))
    return (Counter(frame.name(int(r)) for r in host_blocking_rows(frame)),
            Counter(frame.name(int(r)) for r in frame.rows("runtime_api", "driver_api")))


@needs_shared
def test_nsys_copies_block_when_they_return_with_their_copy() -> None:
    # Keras darknet53 under nsys: every copy is from or to pageable memory (srcKind/dstKind), so
    # timing decides. Each device-to-host copy is a
    # 100 µs call around a 1.7 µs copy (it waited for the stream); the small host-to-device copies
    # from pageable memory are 6 µs calls that return before their 1.2 µs copy runs (staged). The
    # stream waits and event polls (2,202 and 1,853 calls) hold nothing.
    blocking, calls = _blocking(TRACES / "nsys" / "keras_tf_darknet53_nsys2023.4.sqlite")
    assert blocking["cuMemcpyDtoHAsync_v2"] == calls["cuMemcpyDtoHAsync_v2"] == 630
    assert blocking["cuMemcpyHtoDAsync_v2"] <= 0.01 * calls["cuMemcpyHtoDAsync_v2"]
    for name in ("cuStreamWaitEvent", "cudaStreamWaitEvent", "cuEventQuery"):
        assert calls[name] > 1000 and not blocking[name], name
    for name in ("cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize"):
        assert blocking[name] == calls[name] > 100, name


def test_kineto_copies_read_their_memory_kinds() -> None:
    # A 64 MB pageable copy holds the host for the whole 12-15 ms copy (returning up to 1.5 µs before
    # its last chunk lands); PyTorch 2.11's .item() copies into pinned memory and waits in the
    # cudaStreamSynchronize after it, which is the one wait.
    blocking, calls = _blocking(H200 / "pageable_copy.pt.trace.json.gz")
    assert blocking["cudaMemcpyAsync"] == calls["cudaMemcpyAsync"] == 4
    blocking, calls = _blocking(H200 / "item_sync.pt.trace.json.gz")
    assert not blocking["cudaMemcpyAsync"] and calls["cudaMemcpyAsync"] == 32
    assert blocking["cudaStreamSynchronize"] == 32
    frame = frame_of(tracekit.load(H200 / "item_sync.pt.trace.json.gz"))
    # 32 waits: the profiler's closing cudaDeviceSynchronize comes after the last .item()'s with no
    # launch between them, so it is the same wait.
    assert blocking["cudaDeviceSynchronize"] == 1 and host_waits(frame).size == 32
