"""Traces with no GPU activity from programs that ran on a GPU.

torch.profiler started with ``ProfilerActivity.CPU`` only still records the CUDA runtime's launch
calls (its callbacks run whatever activities are on), but no kernel; a CUPTI-profiler capture
(counters, not activities) records launches and no kernel either. Read as CPU-only, such a trace's
op times are launching and waiting, not compute, and the GPU's time is missing: every CPU-only
verdict, replay and critical path would be wrong. Where no launch call was recorded (older
profilers), ops that only a GPU runs (cuDNN's, MIOpen's) show it. ONNX Runtime's profile records
its nodes' host calls and no GPU activity at all: nodes of a device's execution provider (CUDA,
TensorRT, ...) show it.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from tracekit.analyze.classify import API_CLASSES, RowClasses, classify_rows, short_name
from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame
from tracekit.analyze.verdicts import GPU_ACTIVITY_REMEDY
from tracekit.errors import TraceContentError
from tracekit.ingest.columns import trace_extra

# Ops that run only on a GPU: cuDNN's and MIOpen's (PyTorch names them; TF's CudnnRNN ops too), not
# the predicate ``aten::cudnn_is_acceptable``: every nn.LSTM/GRU/RNN call asks it, on a CPU too.
GPU_ONLY_OPS = re.compile(r"^aten::_?(cudnn|miopen)_(?!is_acceptable$)|(^|[/:])CudnnRNN\w*$")


def unrecorded_gpu_work(frame: Frame, classes: RowClasses | None = None) -> str:
    """What shows that this trace, which holds no GPU activity, comes from a program that ran on a
    GPU: its launch calls, else ops only a GPU runs; "" when nothing does (or GPU activity is there).
    Cached on the frame: a report's breakdown, verdict and top-ops table all ask."""
    if frame.rows(*GPU_BUSY_KINDS).size:
        return ""
    return frame.memo("unrecorded_gpu_work",
                      lambda: _unrecorded_gpu_work(frame, classes if classes is not None else classify_rows(frame)))


def _unrecorded_gpu_work(frame: Frame, classes: RowClasses) -> str:
    launches = int(np.count_nonzero(classes.api == API_CLASSES.index("launch")))
    if launches:
        return f"{launches:,} kernel launch call{'s' if launches > 1 else ''}"
    on_devices = onnxruntime_device_providers(frame.table)
    if on_devices:
        runs = ", ".join(f"{n:,} on {p}" for p, n in on_devices.items())
        return (f"node runs of ONNX Runtime's device providers, {runs}: its profile times the host's call of each "
                "node (for CUDA, TensorRT, ROCm or DirectML an enqueue of kernels that run later), not the device's "
                "own work")
    ops = frame.rows("cpu_op")
    gpu_only = ops[frame.named(ops, GPU_ONLY_OPS)] if ops.size else ops
    if gpu_only.size:
        names = sorted({short_name(frame.name(int(r))) for r in gpu_only[:1000].tolist()})
        return f"ops that run only on a GPU: {', '.join(names[:3])}{' and more' if len(names) > 3 else ''}"
    return ""


# ONNX Runtime's execution providers whose nodes run on the host's cores (OpenVINO's is taken as one:
# its inference calls wait for their device); a node of any other provider runs on a device (CUDA,
# TensorRT, ROCm, MIGraphX and DirectML enqueue kernels; CoreML, QNN and NNAPI wait for an NPU or GPU).
ORT_HOST_PROVIDERS = frozenset({"CPUExecutionProvider", "DnnlExecutionProvider", "OpenVINOExecutionProvider",
                                "XnnpackExecutionProvider", "ACLExecutionProvider", "ArmNNExecutionProvider"})


def onnxruntime_device_providers(table: pa.Table) -> dict[str, int]:
    """Node runs per ONNX Runtime execution provider that enqueues work for a device, from the facts
    the ORT reader keeps (``onnxruntime_providers``); {} for host-only runs and other traces."""
    given = trace_extra(table).get("onnxruntime_providers")
    if not isinstance(given, dict):
        return {}
    return {str(p): n for p, n in given.items() if p not in ORT_HOST_PROVIDERS and isinstance(n, int) and n > 0}


def refuse_without_gpu_activity(frame: Frame, what: str, classes: RowClasses | None = None) -> None:
    """Raise a TraceContentError saying why ``what`` (a replay, a critical path) cannot be had from a trace
    of a GPU program whose GPU activity was not recorded."""
    shown = unrecorded_gpu_work(frame, classes)
    if shown:
        raise TraceContentError(f"the trace holds no GPU activity, but the program ran on a GPU ({shown}): {what} of its "
                         f"host alone would take its ops' launching and waiting for their work; {GPU_ACTIVITY_REMEDY}")
