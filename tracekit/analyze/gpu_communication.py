"""Collective kernels on the GPU (NCCL, RCCL): how much of the steps they take, and how much of that
no compute kernel hides.

DDP all-reduces gradient buckets on NCCL's own stream while the backward pass computes: those
kernels run beside compute and cost the step little. A collective that runs alone (the last bucket
after the backward, an FSDP all-gather before a unit's forward, an all-to-all of sharded embeddings
or a pipeline stage's send/recv that the next op waits for) stops the GPU's work: that exposed time
is what communication costs the step. HTA reports the overlap per rank
(``get_comm_comp_overlap``: the share of the communication kernels' time with a compute kernel
running); tracekit measures the same per device in the steps used, and states the exposed part as
a share of their span, beside the compute-only and idle parts.

A collective kernel runs until every rank has joined it: its time includes waiting for the slowest
rank, which one rank's trace cannot tell from the transfer. Comparing the ranks' traces says which
(a rank whose collectives run short waits for none).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tracekit.analyze import intervals
from tracekit.analyze.classify import KERNEL_CLASSES, classify_rows
from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame
from tracekit.ingest.columns import distinct

# ncclKernel_AllReduce_RING_LL_Sum_float(...), ncclDevKernel_AllGather_RING_LL(...) (NCCL 2.8 and
# later), ncclAllReduceRingLLKernel_sum_f32(...) (NCCL 2.7 and earlier): the collective.
_NCCL_COLLECTIVE = re.compile(r"^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)|"
                              r"^nccl(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv)(?:Ring|Tree|CollNet)")
POINT_TO_POINT = ("SendRecv", "Send", "Recv")
MOST_NAMED = 3
NOTE_SHARE = 0.05  # collectives running this much of the span are said, whatever the verdict


@dataclass(frozen=True)
class GpuCommunication:
    """Collective kernels in the time judged (the steps used, or the whole trace), over all devices.

    comm_ns: time with a collective kernel running (union per device, summed);
    overlap_ns: of it, time with a compute kernel (any other kernel) running on the same device;
    compute_ns: time with a compute kernel running; span_ns: the time judged, per device, summed;
    collectives: (collective, kernel time) by time, e.g. ("AllReduce", 1.2e8)."""

    comm_ns: int
    overlap_ns: int
    compute_ns: int
    span_ns: int
    collectives: tuple[tuple[str, int], ...]
    devices: int = 1  # devices with collective kernels: the times above are summed over them

    @property
    def share(self) -> float:
        return self.comm_ns / self.span_ns if self.span_ns else 0.0

    @property
    def overlap(self) -> float:
        """HTA's communication-computation overlap: the share of collective time hidden by compute."""
        return self.overlap_ns / self.comm_ns if self.comm_ns else 0.0

    @property
    def exposed_share(self) -> float:
        """Of the span: a collective running and no compute kernel."""
        return (self.comm_ns - self.overlap_ns) / self.span_ns if self.span_ns else 0.0

    @property
    def compute_only_share(self) -> float:
        return (self.compute_ns - self.overlap_ns) / self.span_ns if self.span_ns else 0.0

    @property
    def point_to_point(self) -> bool:
        """Most collective time in send/recv kernels (pipeline stages, all-to-all)."""
        total = sum(ns for _, ns in self.collectives)
        return 2 * sum(ns for name, ns in self.collectives if name in POINT_TO_POINT) > total

    def names(self) -> str:
        total = sum(ns for _, ns in self.collectives) or 1
        return ", ".join(f"{name} {ns / total:.0%}" for name, ns in self.collectives[:MOST_NAMED])

    def evidence(self) -> str:
        return (f"collective kernels ({self.names()}) run during {self.share:.0%} of the GPU span judged; compute "
                f"kernels run beside them {self.overlap:.0%} of that time, so {self.exposed_share:.0%} of the span is "
                f"communication alone (compute alone {self.compute_only_share:.0%}). A collective kernel runs until "
                "every rank joins it: its time includes waiting for slower ranks")

    def as_dict(self) -> dict[str, object]:
        return {"share": round(self.share, 4), "overlap": round(self.overlap, 4),
                "exposed_share": round(self.exposed_share, 4), "compute_only_share": round(self.compute_only_share, 4),
                "comm_ns": self.comm_ns, "overlap_ns": self.overlap_ns, "compute_ns": self.compute_ns,
                "span_ns": self.span_ns, "collectives": [{"collective": n, "kernel_ns": ns} for n, ns in self.collectives]}


def collective_name(kernel: str) -> str:
    """``ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)`` -> ``AllReduce``; other collective
    kernels (vLLM's ``cross_device_reduce_1stage<...>``) by their name without arguments."""
    found = _NCCL_COLLECTIVE.match(kernel)
    if found:
        return found.group(1) or found.group(2)
    return kernel.split("(", 1)[0].split("<", 1)[0]


def gpu_communication(frame: Frame, windows: dict[int, tuple[np.ndarray, np.ndarray]] | None,
                      kernels: np.ndarray | None = None) -> GpuCommunication | None:
    """Collective kernels against compute kernels, per device, inside ``windows`` (per device,
    disjoint sorted intervals: the steps used); each device's whole GPU span where None. ``kernels``:
    the kernel rows to read (every one by default; a step's, by the step they belong to). None where
    the trace has no collective kernel in that time."""
    kernels = frame.rows("gpu_kernel") if kernels is None else kernels
    is_comm = classify_rows(frame).kernel[kernels] == KERNEL_CLASSES.index("communication")
    if not is_comm.any():
        return None
    comm_ns = overlap_ns = compute_ns = span_ns = devices = 0
    per_name: dict[str, int] = {}
    busy = frame.rows(*GPU_BUSY_KINDS)
    for dev in distinct(frame.device[kernels[is_comm]]).tolist():
        if windows is not None:
            if dev not in windows:
                continue
            lo, hi = windows[dev]
        else:
            mine = busy[frame.device[busy] == dev]
            lo, hi = np.array([frame.start[mine].min()]), np.array([frame.end[mine].max()])
        here = frame.device[kernels] == dev
        talk, work = kernels[here & is_comm], kernels[here & ~is_comm]
        devices += 1
        c_lo, c_hi, _, _ = intervals.intersect(*intervals.union(frame.start[talk], frame.end[talk]), lo, hi)
        w_lo, w_hi, _, _ = intervals.intersect(*intervals.union(frame.start[work], frame.end[work]), lo, hi)
        comm_ns += intervals.total(c_lo, c_hi)
        compute_ns += intervals.total(w_lo, w_hi)
        overlap_ns += intervals.overlap_total(c_lo, c_hi, w_lo, w_hi)
        span_ns += int((hi - lo).sum())
        # Each kernel's time inside the windows, by collective.
        inside = intervals.overlap_per_interval(frame.start[talk], frame.end[talk], lo, hi, merged=True)
        codes, index = np.unique(frame.name_code[talk], return_inverse=True)
        for code, ns in zip(codes.tolist(), np.bincount(index.ravel(), weights=inside).tolist(), strict=True):
            if ns > 0:
                name = collective_name(frame.names[code]) if code >= 0 else ""
                per_name[name] = per_name.get(name, 0) + int(ns)
    if not comm_ns:
        return None
    ranked = tuple(sorted(per_name.items(), key=lambda kv: -kv[1]))
    return GpuCommunication(comm_ns, overlap_ns, compute_ns, span_ns, ranked, devices)


__all__ = ["GpuCommunication", "collective_name", "gpu_communication"]
