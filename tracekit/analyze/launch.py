"""Launch-overhead diagnosis: is the GPU starved by kernel launches, syncs or the framework?

Every GPU activity is joined to its launch call through the correlation link (``launch_row``).
The launch delay of a pair is ``gpu.start - (launch.start + launch.dur)``, clipped at 0 (as HTA
computes it). GPU idle gaps are the gaps of the busy-time union per device (as ``nsys analyze
gpu_gaps`` lists them; where steps are judged, the steps' windows with no GPU activity, cut at
their edges: ``_used_step_windows``); for each gap, the host activity overlapping it is measured per host class
(launch / sync / memory API, framework op, Python, nothing) and the gap is attributed to the
class with the most overlap.

The verdict comes from the rule table in ``tracekit.analyze.verdicts`` (docs/verdicts.md): this
module measures the evidence the rules read and states the general figures behind it.
"""

from __future__ import annotations

import re
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import threads
from tracekit.analyze import intervals, verdicts
from tracekit.analyze.anomaly import AnomalyDetection, anomaly_detection
from tracekit.analyze.attention import SdpaMathPath, UnfusedAttention, sdpa_math_path, unfused_attention
from tracekit.analyze.blocking import host_waits
from tracekit.analyze.breakdown import (
    COMPUTE_OP_CLASSES,
    NATIVE_CALL,
    TORCHSCRIPT_CALLS,
    UNRECORDED_OPS_PER_OP_NS,
    Breakdown,
    aoti_native_calls,
    breakdown,
    framework_kinds,
    host_work_recorded,
    op_self_time,
    step_index,
)
from tracekit.analyze.classify import (
    API_CLASSES,
    KERNEL_CLASSES,
    OP_CLASSES,
    PIPELINE_BUILD,
    PYTHON_CALLBACK,
    classify_op_name,
    classify_rows,
    collective_rows,
    data_loading_rows,
    input_pipeline_mask,
    python_wait_rows,
    short_name,
    tf_base_op,
)
from tracekit.analyze.conv_layout import NchwConvolutions, nchw_convolutions
from tracekit.analyze.copies import pageable_share
from tracekit.analyze.decoding import Decoding, decoding, uncached_generation
from tracekit.analyze.dense_slot_updates import DenseSlotUpdates, dense_slot_updates
from tracekit.analyze.dropout import DropoutMasks, dropout_masks
from tracekit.analyze.element_map import ElementMap, element_map
from tracekit.analyze.embeddings import DenseEmbeddingGradients, dense_embedding_gradients
from tracekit.analyze.emulated_precision import EmulatedProducts, emulated_products
from tracekit.analyze.float64 import Float64Products, XlaFloat64Products, float64_products, xla_float64_products
from tracekit.analyze.frame import GPU_BUSY_KINDS, RNN_CELL_OPS, Frame, calls_in_steps, frame_of
from tracekit.analyze.fsdp import fsdp_collectives
from tracekit.analyze.gpu_communication import NOTE_SHARE as GPU_COMMUNICATION_NOTE_SHARE
from tracekit.analyze.gpu_communication import GpuCommunication, gpu_communication
from tracekit.analyze.gpu_presence import unrecorded_gpu_work
from tracekit.analyze.grad_mode import InferenceWithGrad, inference_with_grad
from tracekit.analyze.gradient_sync import GradientSync, gradient_sync
from tracekit.analyze.graph_breaks import GraphBreaks, graph_breaks
from tracekit.analyze.growing_cat import GrowingCat, growing_cat
from tracekit.analyze.indexed_gradients import IndexedGradients, indexed_gradients
from tracekit.analyze.linear_inference import Float32Linears, float32_linears
from tracekit.analyze.message_passing import MessagePassing, message_passing
from tracekit.analyze.onnxruntime_nodes import NodeFloor, node_floor
from tracekit.analyze.op_loops import LoopingOp, looping_op
from tracekit.analyze.optimizer import OptimizerSteps, optimizer_steps
from tracekit.analyze.parameter_loops import ParameterLoop, parameter_loop
from tracekit.analyze.python_work import LONG_STRETCH_NS, PythonWork, long_stretches, loop_threads, python_work
from tracekit.analyze.recompute import Recompute, recompute
from tracekit.analyze.recurrent import FLOAT64, lstm_per_timestep_reasons
from tracekit.analyze.sample_loop import SampleLoop, SampleTransforms, sample_loop, sample_transforms
from tracekit.analyze.slow_forward import SlowForward, slow_forward
from tracekit.analyze.slow_launches import slow_launch_calls
from tracekit.analyze.stalls import Stalls, stalled_calls
from tracekit.analyze.steps import StepStats, step_stats
from tracekit.analyze.subnormals import SlowingProducts, slowing_products
from tracekit.analyze.tensor_text import TensorText, tensor_text
from tracekit.analyze.tf_data import InputPipeline, input_pipeline, pipeline_work
from tracekit.analyze.tf_debug_checks import DebugChecks, debug_checks
from tracekit.analyze.tf_eager import EagerBesideFunction, eager_beside_function, eager_ops
from tracekit.analyze.top_ops import DECODE_BATCHING, HLO_INSTRUCTION, TopOps, compact_shapes, sentence_labels, top_ops
from tracekit.analyze.train_mode import TrainModeInference, train_mode_inference
from tracekit.analyze.unclassified import (
    UNCLASSIFIED_WORK_NS,
    step_work_rows,
    unclassified_work,
    unrecorded_script_work,
    untyped_copies,
)
from tracekit.analyze.untraced_ops import NOTE_SHARE as UNTRACED_NOTE_SHARE
from tracekit.analyze.untraced_ops import untraced_in_steps
from tracekit.analyze.unused_grads import UnusedGradients, unused_gradients
from tracekit.analyze.utilization import low_utilization
from tracekit.analyze.verdicts import VERDICTS
from tracekit.ingest.columns import distinct, trace_extra
from tracekit.ingest.links import byte_mask, member_mask, nearest_ancestor

HOST_PACED_VERDICTS = ("launch-bound", "CPU/framework-bound", "CPU compute-bound")
GAP_HOST_CLASSES = ("launching", "synchronizing", "data_transfer", "framework", "python", "host_idle")
# Whole-sequence RNN ops (PyTorch, TF); the per-timestep cells a Python loop calls are frame.RNN_CELL_OPS.
FUSED_RNN_OPS = ("aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu", "aten::_cudnn_rnn",
                 "aten::mkldnn_rnn_layer", "aten::miopen_rnn")
FUSED_RNN_TF_SUFFIXES = (":CudnnRNN", ":CudnnRNNV2", ":CudnnRNNV3", ":BlockLSTMV2", ":BlockLSTM")
# Cells whose layer (nn.GRU, nn.RNN) has no fused CPU kernel: PyTorch's CPU layer loops over their ops
# per timestep in C++ (only the LSTM has oneDNN's fused op). aten::_thnn_fused_gru_cell runs on GPUs only.
CPU_UNFUSED_CELL_OPS = ("aten::gru_cell", "aten::_thnn_fused_gru_cell", "aten::rnn_tanh_cell", "aten::rnn_relu_cell")


@dataclass
class Distribution:
    """Summary of a set of durations, ns."""

    count: int
    total_ns: int
    mean_ns: float
    p50_ns: float
    p90_ns: float
    p99_ns: float
    max_ns: int

    @classmethod
    def of(cls, values: np.ndarray) -> Distribution:
        if values.size == 0:
            return cls(0, 0, 0.0, 0.0, 0.0, 0.0, 0)
        p50, p90, p99 = np.percentile(values, [50, 90, 99])
        return cls(int(values.size), int(values.sum()), float(values.mean()), float(p50), float(p90), float(p99),
                   int(values.max()))


class Finding(Protocol):
    """A finding of the verdict's own (``LaunchReport.findings``): what the report's JSON holds of it."""

    def as_dict(self) -> dict[str, object]: ...


@dataclass
class LaunchReport:
    """Result of ``launch()``. Times in ns.

    pairs: one row per GPU activity with a launch call: correlation_id, device_id, api_name,
        kernel_name, api_ns, gpu_ns, delay_ns (clipped at 0), kernel_class.
    gaps: one row per GPU idle gap: device_id, start_ns, dur_ns, ``<class>_ns`` host overlap for
        each of ``GAP_HOST_CLASSES``, attributed (the class with most overlap).
    gaps_by_host: per attributed class: gaps, total_ns.
    per_step: step, kernels (GPU activities launched in the step), launches, ops.
    low_utilization: stretches of the GPU timeline below 50% utilization (30 chunks, merged),
        as ``nsys analyze gpu_time_util``: device_id, start_ns, dur_ns, in_use.
    """

    has_gpu: bool
    pairs: pd.DataFrame
    gaps: pd.DataFrame
    gaps_by_host: pd.DataFrame
    per_step: pd.DataFrame
    launch_api: Distribution
    kernel: Distribution
    delay: Distribution
    short_kernel_ns: int
    short_kernel_share: float
    gpu_span_ns: int  # summed over devices: device time, not wall time, when there are several
    gpu_idle_ns: int
    verdict: str
    evidence: list[str] = field(default_factory=list)
    remedies: list[str] = field(default_factory=list)
    breakdown: Breakdown | None = None
    low_utilization: pd.DataFrame | None = None
    gpu_devices: int = 0
    steps: StepStats | None = None
    top_ops: TopOps | None = None
    optimizer: OptimizerSteps | None = None  # torch.optim's steps in the steps used (tracekit.analyze.optimizer)
    embeddings: DenseEmbeddingGradients | None = None  # dense embedding backward (tracekit.analyze.embeddings)
    slowing_products: SlowingProducts | None = None  # products slowed by subnormal floats (tracekit.analyze.subnormals)
    python_work: PythonWork | None = None  # the steps' own Python work (tracekit.analyze.python_work)
    eager_beside_function: EagerBesideFunction | None = None  # TF ops run eagerly beside the step's tf.function
    anomaly_detection: AnomalyDetection | None = None  # autograd's anomaly mode left on (tracekit.analyze.anomaly)
    emulated_products: EmulatedProducts | None = None  # 16-bit products a CPU emulates (tracekit.analyze.emulated_precision)
    sample_loop: SampleLoop | None = None  # a batch walked one sample at a time (tracekit.analyze.sample_loop)
    input_pipeline: InputPipeline | None = None  # TF: tf.data's stages and its slowest (tracekit.analyze.tf_data)
    inference_with_grad: InferenceWithGrad | None = None  # forward-only with grad mode on (tracekit.analyze.grad_mode)
    nchw_convolutions: NchwConvolutions | None = None  # CPU convolutions on NCHW tensors (tracekit.analyze.conv_layout)
    growing_cat: GrowingCat | None = None  # a tensor grown by cat a piece at a time (tracekit.analyze.growing_cat)
    sample_transforms: SampleTransforms | None = None  # a batch prepared sample by sample (tracekit.analyze.sample_loop)
    message_passing: MessagePassing | None = None  # graph messages as per-edge tensors (tracekit.analyze.message_passing)
    float32_linears: Float32Linears | None = None  # CPU inference in float32 Linear layers (tracekit.analyze.linear_inference)
    indexed_gradients: IndexedGradients | None = None  # x[t] in a loop, each backward a whole-size gradient
    float64_products: Float64Products | None = None  # products run in float64 (tracekit.analyze.float64)
    unfused_attention: UnfusedAttention | None = None  # attention computed op by op (tracekit.analyze.attention)
    sdpa_math_path: SdpaMathPath | None = None  # CPU SDPA on its math path for dropout (tracekit.analyze.attention)
    graph_breaks: GraphBreaks | None = None  # a compiled function split by graph breaks (tracekit.analyze.graph_breaks)
    uncached_generation: Decoding | None = None  # tokens generated with no key/value cache (tracekit.analyze.decoding)
    recompute: Recompute | None = None  # activation checkpointing's second forward in backward (tracekit.analyze.recompute)
    train_mode_inference: TrainModeInference | None = None  # inference with dropout drawing masks (tracekit.analyze.train_mode)
    unused_gradients: UnusedGradients | None = None  # gradients no optimizer reads (tracekit.analyze.unused_grads)
    parameter_loop: ParameterLoop | None = None  # a Python loop over the parameters (tracekit.analyze.parameter_loops)
    gpu_communication: GpuCommunication | None = None  # collective kernels against compute (analyze.gpu_communication)
    dropout_masks: DropoutMasks | None = None  # CPU training drawing dropout masks (tracekit.analyze.dropout)
    node_floor: NodeFloor | None = None  # ORT: the fixed cost per node run (tracekit.analyze.onnxruntime_nodes)
    gradient_sync: GradientSync | None = None  # gradients all-reduced a tensor at a time (analyze.gradient_sync)
    tensor_text: TensorText | None = None  # tensors formatted as text in the step (tracekit.analyze.tensor_text)
    xla_float64: XlaFloat64Products | None = None  # an XLA program's float64 products (tracekit.analyze.float64)
    debug_checks: DebugChecks | None = None  # TF's numeric checks or debug dumps left on (analyze.tf_debug_checks)
    dense_slot_updates: DenseSlotUpdates | None = None  # a Keras optimizer densifying a lookup's gradient
    element_map: ElementMap | None = None  # tf.map_fn iterating over a batch (tracekit.analyze.element_map)
    looping_op: LoopingOp | None = None  # an ATen op looping over rows inside itself (tracekit.analyze.op_loops)
    slow_forward: SlowForward | None = None  # TF forward products far slower than their gradients (analyze.slow_forward)
    origin_ns: int = 0  # the trace's first timestamp: gap and stretch starts are shown from it
    judged_steps: int = 0  # the span, idle time and gaps are those of this many steps (0: the whole trace)
    judged_capture: bool = False  # no step judged, the span from the first call linked to GPU work (_capture_windows)
    # The share of the loop (the steps and the time between consecutive ones) its steps cover; CPU traces
    # with marked steps only (None: not measured). TF's function calls leave Keras's Python out, ProfilerStep not.
    step_cover: float | None = None
    # Per device, the time judged (the steps used; None: the whole trace), from _used_step_windows.
    judged_windows: dict[int, tuple[np.ndarray, np.ndarray]] | None = field(default=None, repr=False)
    # What the verdict rules read (compare states the figure that separates two traces' verdicts).
    verdict_evidence: verdicts.Evidence | None = field(default=None, repr=False)

    def findings(self) -> dict[str, Finding]:
        """The verdict's own findings that were found, by the report JSON's key: optimizer steps, dense
        embedding gradients, products slowed by subnormal floats, the steps' own Python work, anomaly
        detection left on, 16-bit products a CPU emulates, a batch walked per sample, inference run with
        grad mode on, CPU convolutions on NCHW tensors, tensors grown by cat, products run in float64,
        attention computed op by op, scaled_dot_product_attention on its math path for dropout, a compiled
        function split by graph breaks, a forward recomputed in
        backward (activation checkpointing), inference with the model in training mode, gradients no
        optimizer reads, tokens generated with no key/value cache, graph messages passed as per-edge tensors,
        CPU inference spent in float32 Linear layers, GPU collective kernels and the compute beside them, CPU
        training spent drawing dropout masks, the fixed cost of each node run in an ONNX Runtime profile, a
        Python loop over the parameters outside the optimizer, TF forward products far slower than their
        layer's gradient products, tensors formatted as text in the step, gradients all-reduced one tensor at
        a time after the backward pass."""
        found: dict[str, Finding | None] = {
            "optimizer": self.optimizer, "embedding_gradients": self.embeddings, "slowing_products": self.slowing_products,
            "python_work": self.python_work, "anomaly_detection": self.anomaly_detection,
            "eager_beside_function": self.eager_beside_function,
            "emulated_products": self.emulated_products, "sample_loop": self.sample_loop,
            "inference_with_grad": self.inference_with_grad, "nchw_convolutions": self.nchw_convolutions,
            "growing_cat": self.growing_cat, "sample_transforms": self.sample_transforms,
            "indexed_gradients": self.indexed_gradients, "float64_products": self.float64_products,
            "unfused_attention": self.unfused_attention, "sdpa_math_path": self.sdpa_math_path,
            "graph_breaks": self.graph_breaks, "recompute": self.recompute,
            "train_mode_inference": self.train_mode_inference, "unused_gradients": self.unused_gradients,
            "parameter_loop": self.parameter_loop,
            "uncached_generation": self.uncached_generation, "message_passing": self.message_passing,
            "float32_linears": self.float32_linears, "gpu_communication": self.gpu_communication,
            "dropout_masks": self.dropout_masks, "onnxruntime_node_floor": self.node_floor,
            "input_pipeline": self.input_pipeline, "slow_forward": self.slow_forward,
            "tensor_text": self.tensor_text, "gradient_sync": self.gradient_sync, "looping_op": self.looping_op,
            "element_map": self.element_map, "dense_slot_updates": self.dense_slot_updates,
            "debug_checks": self.debug_checks, "xla_float64": self.xla_float64}
        return {key: f for key, f in found.items() if f is not None}

    @property
    def span_words(self) -> str:
        """The GPU span in words: one device's span, or several devices' summed device time."""
        where = f" in the {self.judged_steps} step(s) used" if self.judged_steps else ""
        if self.judged_capture:
            where = " (each from the first call that put work on it)" if self.gpu_devices > 1 else \
                " (from the first call that put work on it)"
        if self.gpu_devices > 1:
            return f"{self.gpu_span_ns / 1e6:,.3f} ms of device time{where} ({self.gpu_devices} GPUs' spans added)"
        return f"{self.gpu_span_ns / 1e6:,.3f} ms span{where}"

    @property
    def idle_share(self) -> float:
        return self.gpu_idle_ns / self.gpu_span_ns if self.gpu_span_ns else 0.0


def launch(table: pa.Table, short_kernel_ns: int = 10_000, idle_threshold: float = 0.3,
           timesteps: int | None = None, bd: Breakdown | Future[Breakdown] | None = None, skip_steps: int = 0,
           keep_all_steps: bool = False) -> LaunchReport:
    """Diagnose launch overhead in one trace (see the module doc for the rules).

    Args:
        table: one trace's event table.
        short_kernel_ns: kernels shorter than this count as short (default 10 µs).
        idle_threshold: GPU idle share at or above which the GPU is considered starved.
        timesteps: recurrent timesteps per step (for ops per timestep in the evidence).
        bd: the trace's breakdown when the caller already has it, or is computing it (a Future);
            otherwise computed here, on a second thread while this one measures the launches.
        skip_steps: treat the first N steps as warm-up, whatever their duration.
        keep_all_steps: judge on every step, warm-up and outliers included (``tracekit.analyze.steps``).
    """
    frame = frame_of(table)
    classes = classify_rows(frame)  # before the breakdown's thread starts: both read it
    pending: Future[Breakdown] | None = bd if isinstance(bd, Future) else None
    if bd is None:
        pending = threads.start(breakdown, table, timesteps=timesteps)
    gpu_rows = frame.rows(*GPU_BUSY_KINDS)
    pairs = _pairs(frame, classes, gpu_rows)
    steps = step_stats(frame, skip=skip_steps, keep_all=keep_all_steps)
    on_host = bool((frame.device[frame.rows("step")] < 0).all())  # steps marked on the host, not per device
    windows = _used_step_windows(frame, gpu_rows, steps, on_host)
    capture = _capture_windows(frame, gpu_rows) if windows is None and gpu_rows.size else None
    linked = capture is not None and bool((frame.launch_row[gpu_rows] >= 0).any())
    gaps = _gaps(frame, classes, gpu_rows, windows if windows is not None else capture)
    launch_mask = classes.api == API_CLASSES.index("launch")
    kern_rows = frame.rows("gpu_kernel")
    ops = top_ops(frame, classes, steps.used_step_numbers() if steps is not None and len(steps.steps) else None)
    low = low_utilization(table) if gpu_rows.size else None
    if pending is not None:
        bd = pending.result()
    assert isinstance(bd, Breakdown)
    whole = bd.gpu[bd.gpu.step == -1]
    report = LaunchReport(
        has_gpu=gpu_rows.size > 0, pairs=pairs, gaps=gaps, gaps_by_host=_gaps_by_host(gaps),
        per_step=_per_step(frame, classes, gpu_rows, bd), launch_api=Distribution.of(frame.dur[launch_mask]),
        kernel=Distribution.of(frame.dur[kern_rows]), delay=Distribution.of(pairs["delay_ns"].to_numpy()),
        short_kernel_ns=short_kernel_ns,
        short_kernel_share=float((frame.dur[kern_rows] < short_kernel_ns).mean()) if kern_rows.size else 0.0,
        gpu_span_ns=int(whole.span_ns.sum()), gpu_idle_ns=int(whole.idle_ns.sum()), verdict="", breakdown=bd,
        gpu_devices=int(np.unique(frame.device[gpu_rows]).size), steps=steps,
        origin_ns=int(frame.start.min()) if len(frame) else 0,
    )
    _judge_on_used_steps(report, windows, on_host)
    if capture is not None:
        _judge_on_capture(report, capture, linked)
    report.judged_windows = windows if report.judged_steps else None
    report.top_ops = ops
    if low is not None:
        report.low_utilization = low
    _judge(report, frame, idle_threshold, table)
    return report


def _pairs(frame: Frame, classes, gpu_rows: np.ndarray) -> pd.DataFrame:
    linked = gpu_rows[frame.launch_row[gpu_rows] >= 0]
    api = frame.launch_row[linked]
    delay = np.maximum(frame.start[linked] - frame.end[api], 0)
    corr = frame.table.column("correlation_id").take(pa.array(linked)).fill_null(-1).to_numpy()
    return pd.DataFrame({
        "correlation_id": corr,
        "device_id": frame.device[linked],
        "api_name": pd.Categorical.from_codes(frame.name_code[api], frame.names) if frame.names else [],
        "kernel_name": pd.Categorical.from_codes(frame.name_code[linked], frame.names) if frame.names else [],
        "api_ns": frame.dur[api],
        "gpu_ns": frame.dur[linked],
        "delay_ns": delay,
        "kernel_class": pd.Categorical.from_codes(classes.kernel[linked].astype(np.int64), list(KERNEL_CLASSES)),
    }, copy=False)  # a row per kernel, every column a fresh array: no second copy


def enqueue_calls(frame: Frame, classes) -> np.ndarray:
    """Host API calls that put work on a GPU queue: kernel and graph launches, and memsets (an async
    memset is queued like a kernel; only copies move data through the host)."""
    api = classes.api
    enqueue = api == API_CLASSES.index("launch")
    memset_rows = frame.rows("gpu_memset")
    started = frame.launch_row[memset_rows]
    enqueue[started[started >= 0]] = True
    unlinked_memset = [i for i, n in enumerate(frame.names) if _ASYNC_MEMSET.match(n)]
    enqueue |= (api == API_CLASSES.index("memory")) & member_mask(frame.name_code, unlinked_memset)
    return enqueue


_ASYNC_MEMSET = re.compile(r"cu(da)?Memset\w*Async")
# What shows the host's own work; a trace of none (torch.profiler with only ProfilerActivity.CUDA,
# nsys with no API tracing) cannot say what the host did while the GPU idled.
HOST_ACTIVITY_KINDS = ("cpu_op", "python_function", "runtime_api", "driver_api", "gpu_library_api")


@dataclass
class LaunchLoops:
    """Framework ops that issue many GPU enqueues per call (cuDNN's RNN launches per-timestep kernels,
    a compiled graph launches each of its kernels): the host time inside them between enqueues is the
    library's per-kernel launch work, not framework dispatch."""

    op_rows: np.ndarray          # the op calls, each with at least LAUNCH_LOOP_ENQUEUES enqueues
    enqueue_share: float         # of all enqueue calls, those issued inside these ops
    top_op: str = ""             # the op name with the most enqueues inside such calls
    top_per_call: float = 0.0    # its enqueues per call


LAUNCH_LOOP_ENQUEUES = 8


def launch_loops(frame: Frame, classes) -> LaunchLoops:
    """The op calls that issue at least LAUNCH_LOOP_ENQUEUES GPU enqueues each (their innermost
    enclosing framework op). Computed once per frame."""
    return frame.memo("launch_loops", lambda: _launch_loops(frame, classes))


def _launch_loops(frame: Frame, classes) -> LaunchLoops:
    enqueues = np.flatnonzero(enqueue_calls(frame, classes))
    op_kind = frame.mask("cpu_op")
    owner = frame.parent[enqueues] if enqueues.size else np.zeros(0, np.int64)
    for _ in range(64):  # up the nesting to the innermost framework op (depth-bounded)
        climb = (owner >= 0) & ~op_kind[np.maximum(owner, 0)]
        if not climb.any():
            break
        owner[climb] = frame.parent[owner[climb]]
    owned = owner[(owner >= 0) & op_kind[np.maximum(owner, 0)]]
    if not owned.size:
        return LaunchLoops(np.zeros(0, np.int64), 0.0)
    ops, per_call = np.unique(owned, return_counts=True)
    loops = per_call >= LAUNCH_LOOP_ENQUEUES
    if not loops.any():
        return LaunchLoops(np.zeros(0, np.int64), 0.0)
    by_name: dict[int, list[int]] = {}
    for op, n in zip(ops[loops], per_call[loops], strict=True):
        by_name.setdefault(int(frame.name_code[op]), []).append(int(n))
    top = max(by_name, key=lambda c: sum(by_name[c]))
    return LaunchLoops(ops[loops], float(per_call[loops].sum() / enqueues.size),
                       frame.names[top] if top >= 0 else "", float(np.mean(by_name[top])))


# The host activity a GPU gap's time goes to, in priority order: "launching" comes twice, the
# enqueue calls first and the host time inside ops that loop over enqueues (LaunchLoops) after syncs
# and copies, which such an op may also make.
# Python frames blocked in a wait (a pin-memory thread's queue, a sleep) come before the frames that
# enclose them and count as idle host.
_GAP_PRIORITY = ("launching", "synchronizing", "data_transfer", "launching", "framework", "waiting", "python")


def _gap_priority(frame: Frame, classes) -> np.ndarray:
    """Each row's index in ``_GAP_PRIORITY`` (the first that applies), -1 for rows of none."""
    api = classes.api
    loop_ops = np.zeros(len(frame), bool)
    loop_ops[launch_loops(frame, classes).op_rows] = True
    enqueue = enqueue_calls(frame, classes)
    applies = [
        enqueue,
        api == API_CLASSES.index("sync"),
        (api == API_CLASSES.index("memory")) & ~enqueue,
        loop_ops,
        frame.mask(*framework_kinds(frame)) | (api == API_CLASSES.index("other")),
        _rows_mask(len(frame), python_wait_rows(frame)),
        frame.mask("python_function"),
    ]
    return _first_true(applies, len(frame))


# Per byte value, the index of its lowest set bit (-1 for 0).
_LOWEST_BIT = np.array([-1] + [(v & -v).bit_length() - 1 for v in range(1, 256)], np.int8)


def _first_true(masks: list[np.ndarray], n: int) -> np.ndarray:
    """Per row, the index of the first mask that is true there, -1 where none is. The masks are
    packed as the bits of one byte per row and read through a table of lowest set bits: 6 ms on
    a million rows for seven masks, against 20 ms for writing each mask in turn."""
    assert len(masks) <= 8
    bits = np.zeros(n, np.uint8)
    for i, mask in enumerate(masks):
        bits |= mask.view(np.uint8) << np.uint8(i)
    return np.take(_LOWEST_BIT, bits)


def _rows_mask(n: int, rows: np.ndarray) -> np.ndarray:
    mask = np.zeros(n, bool)
    mask[rows] = True
    return mask


def _launching_processes(frame: Frame, gpu_rows: np.ndarray) -> np.ndarray | None:
    """The processes whose launch calls put work on these GPU rows; None when none is linked."""
    launcher = frame.launch_row[gpu_rows]
    launcher = launcher[launcher >= 0]
    return np.unique(frame.pid[launcher]) if launcher.size else None


def _gaps(frame: Frame, classes, gpu_rows: np.ndarray,
          windows: dict[int, tuple[np.ndarray, np.ndarray]] | None = None) -> pd.DataFrame:
    """The GPU idle gaps per device and the host activity during each; with ``windows`` (per device,
    ``_used_step_windows``), only their parts inside those windows."""
    columns = ["device_id", "start_ns", "dur_ns", *[f"{c}_ns" for c in GAP_HOST_CLASSES], "attributed"]
    parts = []
    priority = _gap_priority(frame, classes)
    for dev in np.unique(frame.device[gpu_rows]):
        r = gpu_rows[frame.device[gpu_rows] == dev]
        if windows is None:
            g_start, g_end = intervals.gaps(frame.start[r], frame.end[r])
        else:  # the windows' time with no activity on the device, cut at their edges (a gap from one
            # step's last kernel runs into the next step), the time before its first or after its last activity included
            w_start, w_end = windows.get(int(dev), (np.zeros(0, np.int64), np.zeros(0, np.int64)))
            b_start, b_end = intervals.union(frame.start[r], frame.end[r])
            idle_start = np.concatenate([[min(int(b_start[0]), int(w_start[0]) if w_start.size else 0)], b_end])
            idle_end = np.concatenate([b_start, [max(int(b_end[-1]), int(w_end[-1]) if w_end.size else 0)]])
            g_start, g_end = intervals.intersect(idle_start, idle_end, w_start, w_end)[:2]
        out: dict[str, np.ndarray] = {"device_id": np.full(g_start.size, dev), "start_ns": g_start,
                                      "dur_ns": g_end - g_start}
        # Only the host of the processes that drive this device: another rank's busy host is not this GPU's.
        processes = _launching_processes(frame, r)
        host = np.flatnonzero((priority >= 0) & (member_mask(frame.pid, processes) if processes is not None else True))
        # One timeline of the device's busy time first, then the host activities in priority order:
        # each moment goes to the first that covers it, so a host piece lies inside one gap or
        # outside the device's span.
        seg_s, seg_e, seg_c = intervals.priority_timeline(
            np.concatenate([frame.start[r], frame.start[host]]), np.concatenate([frame.end[r], frame.end[host]]),
            np.concatenate([np.zeros(r.size, np.int8), priority[host] + 1]), len(_GAP_PRIORITY) + 1)
        if windows is None:
            in_gap = (seg_c > 0) & (seg_s >= g_start[0]) & (seg_e <= g_end[-1]) if g_start.size else np.zeros(seg_s.size, bool)
            gap = np.searchsorted(g_start, seg_s[in_gap], side="right") - 1
            length, piece_class = (seg_e - seg_s)[in_gap], seg_c[in_gap] - 1
            del in_gap
        else:  # a host piece can cross a cut gap's edge: only its part inside the gap counts
            host_piece = np.flatnonzero(seg_c > 0)
            p_start, p_end, piece, gap = intervals.intersect(seg_s[host_piece], seg_e[host_piece], g_start, g_end)
            length, piece_class = p_end - p_start, seg_c[host_piece[piece]] - 1
        del seg_s, seg_e, seg_c  # the timeline is the largest transient on a million-kernel trace
        host_busy = np.zeros(g_start.size, np.int64)
        for i, name in enumerate(_GAP_PRIORITY):
            if name == "waiting":  # waiting is idle host time
                continue
            mine = piece_class == i
            # Float sums are exact here: a gap's pieces add up to at most the gap (far below 2**53 ns).
            ns = np.bincount(gap[mine], weights=length[mine], minlength=g_start.size).astype(np.int64)
            out[f"{name}_ns"] = out.get(f"{name}_ns", 0) + ns
            host_busy += ns
        out["host_idle_ns"] = out["dur_ns"] - host_busy
        out["attributed"] = pd.Categorical.from_codes(_argmax_of(out, [f"{c}_ns" for c in GAP_HOST_CLASSES]),
                                                      list(GAP_HOST_CLASSES))
        # copy=False: a gap per kernel on a million-kernel trace makes each column ~8 MB, and the
        # frame would otherwise hold them twice.
        parts.append(pd.DataFrame(out, copy=False))
    if not parts:
        return pd.DataFrame(columns=columns)
    # Devices ascending, each device's gaps by start: already ordered by (device_id, start_ns).
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def _argmax_of(columns: dict[str, np.ndarray], names: list[str]) -> np.ndarray:
    """Per row, the index in ``names`` of the column with the largest value (the first on ties), as
    ``np.argmax`` over the stacked columns gives, without stacking them."""
    best = np.asarray(columns[names[0]])
    which = np.zeros(best.size, np.int8)
    for i, name in enumerate(names[1:], start=1):
        larger = columns[name] > best
        which[larger] = i
        best = np.where(larger, columns[name], best)
    return which


def _per_step(frame: Frame, classes, gpu_rows: np.ndarray, bd: Breakdown) -> pd.DataFrame:
    counted = {"kernels": frame.step[gpu_rows], "launches": frame.step[classes.api == API_CLASSES.index("launch")],
               "ops": frame.step[frame.mask("cpu_op")]}
    if not bd.steps:  # no marked steps: the whole trace's counts
        return pd.DataFrame([{"step": -1, **{k: int(v.size) for k, v in counted.items()}}])
    columns: dict[str, object] = {"step": bd.steps}
    for name, step_of in counted.items():
        index, known = step_index(step_of, bd.steps)
        columns[name] = np.bincount(index[known], minlength=len(bd.steps))
    return pd.DataFrame(columns)


def _source(table: pa.Table) -> str:
    from tracekit.schema import source_of

    return source_of(table)


def _gaps_by_host(gaps: pd.DataFrame) -> pd.DataFrame:
    return (gaps.groupby("attributed", sort=False).agg(gaps=("dur_ns", "size"), total_ns=("dur_ns", "sum"))
            .reindex(list(GAP_HOST_CLASSES)).fillna(0).astype(np.int64).reset_index()
            .rename(columns={"attributed": "host_activity"}))


def _used_step_windows(frame: Frame, gpu_rows: np.ndarray, st: StepStats | None,
                       on_host: bool) -> dict[int, tuple[np.ndarray, np.ndarray]] | None:
    """Per device, the time the verdict judges where steps are marked (disjoint, sorted intervals):
    the windows of the steps used (warm-up and outliers left out); None where no step is marked, there
    is no GPU work, or none of it is in the steps used (the whole trace is judged then).

    A step marked on the host has as window on a device the host step and its GPU work there
    together: the time before the step's first kernel, while the host dispatches, is GPU idle time
    of that step (the breakdown's per-step span, first to last kernel, would call a step of one short
    kernel 0% idle). Steps marked on each device's own timeline (TF 2.3/2.4) are that device's windows."""
    if st is None or st.steps.empty or not gpu_rows.size:
        return None
    used = st.steps[st.steps.used].sort_values("start_ns")
    numbers = used.step.to_numpy(np.int64)
    lo = used.start_ns.to_numpy(np.int64)
    hi = lo + used.dur_ns.to_numpy(np.int64)
    step_rows = frame.rows("step")
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for dev in distinct(frame.device[gpu_rows]).tolist():
        if on_host:
            out[dev] = _step_windows_on_device(frame, gpu_rows[frame.device[gpu_rows] == dev], numbers, lo, hi)
        else:
            mine = step_rows[(frame.device[step_rows] == dev) & member_mask(frame.step[step_rows], numbers)]
            out[dev] = intervals.union(frame.start[mine], frame.end[mine])
    return out if any(s.size for s, _ in out.values()) else None


def _capture_windows(frame: Frame, gpu_rows: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per device, the time judged where no step is: from the first host call that put work on it
    (a launch, copy or memset call linked to its activity) or its own first activity, whichever is
    earlier, to the last end of either. The device's own span (first to last activity) calls one
    short kernel 0% idle however long its launch took (HTA's triton_example: a 1.76 µs kernel
    launched by a 47.8 µs call read "GPU-bound, idle 0.0%"); set-up before the first such call
    (imports, building the model) is not the work the GPU was driven by, and stays out."""
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for dev in distinct(frame.device[gpu_rows]).tolist():
        r = gpu_rows[frame.device[gpu_rows] == dev]
        calls = frame.launch_row[r]
        calls = calls[calls >= 0]
        lo, hi = int(frame.start[r].min()), int(frame.end[r].max())
        if calls.size:
            lo, hi = min(lo, int(frame.start[calls].min())), max(hi, int(frame.end[calls].max()))
        out[dev] = (np.array([lo], np.int64), np.array([hi], np.int64))
    return out


# Stated from this many GPU activities and this share of them starting before their launch calls.
CLOCK_SKEW_NOTE_ROWS, CLOCK_SKEW_NOTE_SHARE = 3, 0.01


def _measure_clock_skew(frame: Frame, e: verdicts.Evidence, evidence: list[str]) -> None:
    """GPU activities that start before the host call that launched them. On one clock none can (the
    stored real traces: launch-to-start 2 µs at the least); CUPTI's and roctracer's timestamps are
    converted to the host's clock, and where that conversion drifts or a record is corrupt they do
    (kineto#1380: NCCL kernels starting before their cuLaunchKernelEx; ROCm's timestamp inversions).
    Said where it is more than a stray record; the verdict is undetermined where it is half of them."""
    gpu = frame.rows(*GPU_BUSY_KINDS)
    calls = frame.launch_row[gpu]
    gpu, calls = gpu[calls >= 0], calls[calls >= 0]
    if not gpu.size:
        return
    early = frame.start[calls] - frame.start[gpu]
    early = early[early > 0]
    e.clock_skew_share = early.size / gpu.size
    if early.size:
        e.clock_skew_ns = float(np.median(early))
    if early.size >= CLOCK_SKEW_NOTE_ROWS and e.clock_skew_share >= CLOCK_SKEW_NOTE_SHARE \
            and e.clock_skew_share < verdicts.CLOCK_SKEW_SHARE:
        evidence.append(f"{early.size:,} of {gpu.size:,} GPU activities start before the host call that launched them "
                        f"(a median {e.clock_skew_ns / 1e3:,.1f} µs, up to {early.max() / 1e3:,.1f} µs before): their "
                        "timestamps are offset from the host's, and the host activity read against them by as much")


SLOW_LAUNCH_NOTE_SHARE = 0.1


def _measure_slow_launches(frame: Frame, r: LaunchReport, e: verdicts.Evidence, evidence: list[str],
                           gap_total: int) -> int:
    """Slow launch calls (``slow_launches``) in the GPU's idle gaps: their ns there. HTA's MI250
    sample: one hipLaunchKernel of 6.5 ms, 72% of its only step's idle time. A call blocked on a full
    launch queue runs while the GPU is busy, outside the gaps. Said where it is 10% of the idle time;
    the verdict is undetermined where it is half."""
    if not len(r.gaps) or not r.launch_api.count:
        return 0
    slow = slow_launch_calls(frame, r.launch_api.p50_ns)
    if not slow.size:
        return 0
    g_start = r.gaps.start_ns.to_numpy(np.int64)
    g_start, g_end = intervals.union(g_start, g_start + r.gaps.dur_ns.to_numpy(np.int64))
    overlap = intervals.overlap_per_interval(frame.start[slow], frame.end[slow], g_start, g_end, merged=True)
    touching = slow[overlap > 0]
    # Their time in the gaps counted once where calls overlap (threads launching at once, a file that
    # repeats its events: the MI250 sample written twice read "during 143% of the GPU's idle time").
    in_gaps = intervals.overlap_total(*intervals.union(frame.start[slow], frame.end[slow]), g_start, g_end)
    if not in_gaps:
        return 0
    e.slow_launch_gap_share = in_gaps / gap_total
    e.slow_launches, e.slow_launch_max_ns = int(touching.size), int(frame.dur[touching].max())
    if e.slow_launch_gap_share >= SLOW_LAUNCH_NOTE_SHARE and e.slow_launch_gap_share < verdicts.SLOW_LAUNCH_SHARE:
        ratio = f"{e.slow_launch_max_ns / r.launch_api.p50_ns:,.0f}x the median call"
        calls_said = (f"1 launch call of {e.slow_launch_max_ns / 1e6:,.2f} ms ({ratio}) runs" if touching.size == 1 else
                      f"{touching.size:,} launch calls of up to {e.slow_launch_max_ns / 1e6:,.2f} ms ({ratio}) run")
        evidence.append(f"{calls_said} during {e.slow_launch_gap_share:.0%} of the GPU's idle time: a "
                        "kernel's module loaded at its first launch, or the thread stalled in the call, not launch "
                        "overhead; left out of the launch shares")
    return in_gaps


def _judge_on_capture(r: LaunchReport, capture: dict[int, tuple[np.ndarray, np.ndarray]], linked: bool) -> None:
    """Where no step is judged, the span and idle time the verdict reads are the capture's
    (``_capture_windows``; the gaps were cut to it). ``linked``: some GPU work is linked to the call
    that put it there (without links the span is the GPU's own, and is not said to be more)."""
    r.gpu_span_ns = sum(int((e - s).sum()) for s, e in capture.values())
    r.gpu_idle_ns = int(r.gaps.dur_ns.sum()) if len(r.gaps) else 0
    r.judged_capture = linked


def _judge_on_used_steps(r: LaunchReport, windows: dict[int, tuple[np.ndarray, np.ndarray]] | None,
                         on_host: bool) -> None:
    """Where steps are marked, the GPU span, idle time and gaps the verdict reads are those of the
    steps used (``_used_step_windows``; the gaps were cut to them); time outside the steps (set-up,
    the profiler's window before and after) is not the loop being judged. The whole-trace figures
    stay in the breakdown."""
    bd, st = r.breakdown, r.steps
    if windows is None or bd is None or st is None:
        return
    used = st.steps[st.steps.used]
    rows = bd.gpu[bd.gpu.step.isin(used.step)]
    if not len(rows) or not int(rows.span_ns.sum()):
        return
    if on_host:
        # The windows' time with no GPU activity, whichever step (or none) the activity belongs to:
        # the gaps, which _gaps cut to the windows.
        devices = set(rows.device_id.tolist())
        r.gpu_span_ns = sum(int((e - s).sum()) for dev, (s, e) in windows.items() if dev in devices)
        r.gpu_idle_ns = int(r.gaps.dur_ns[r.gaps.device_id.isin(devices)].sum())
    else:  # each device's steps are its windows; the breakdown has their span and idle time
        r.gpu_span_ns, r.gpu_idle_ns = int(rows.span_ns.sum()), int(rows.idle_ns.sum())
    r.judged_steps = len(used)
    r.gpu_devices = int(rows.device_id.nunique())
def _step_windows_on_device(frame: Frame, rows: np.ndarray, steps: np.ndarray, lo: np.ndarray,
                            hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union (disjoint, sorted intervals) of the windows, on one device, of the steps with GPU work there:
    each such step's host window (``lo``, ``hi``) stretched over its GPU work that runs before or
    after it."""
    order = np.argsort(steps, kind="stable")
    steps, w_lo, w_hi = steps[order], lo[order], hi[order]
    step = frame.step[rows]
    index = np.minimum(np.searchsorted(steps, step), steps.size - 1)
    mine = steps[index] == step
    np.minimum.at(w_lo, index[mine], frame.start[rows[mine]])
    np.maximum.at(w_hi, index[mine], frame.end[rows[mine]])
    has_work = np.zeros(steps.size, bool)
    has_work[index[mine]] = True
    return intervals.union(w_lo[has_work], w_hi[has_work])


# Kernel launches of SYCL's Unified Runtime (formerly PI) and Level Zero: PyTorch on Intel GPUs.
_INTEL_LAUNCH = re.compile(r"^(ur|pi)EnqueueKernelLaunch|^zeCommandListAppendLaunch")


def _launches_through(frame: Frame, api: re.Pattern[str]) -> bool:
    """Whether most of the trace's kernel launches are calls named by ``api``."""
    launcher = frame.launch_row[frame.rows("gpu_kernel")]
    codes, counts = np.unique(frame.name_code[launcher[launcher >= 0]], return_counts=True)
    matching = sum(n for c, n in zip(codes.tolist(), counts.tolist(), strict=True) if c >= 0 and api.match(frame.names[c]))
    return matching * 2 > counts.sum()


def _capture_ns(frame: Frame) -> int:
    """From the first recorded event to the last end, metadata records aside (their times are the
    process's, not the capture's)."""
    recorded = ~frame.mask("metadata")
    return int(frame.end[recorded].max() - frame.start[recorded].min()) if recorded.any() else 0


def _judge(r: LaunchReport, frame: Frame, idle_threshold: float, table: pa.Table) -> None:
    """Measure the evidence the verdict rules read (``tracekit.analyze.verdicts``), state the general
    figures, and apply the rules."""
    bd = r.breakdown
    assert bd is not None
    source = _source(table)
    framework = source if source in ("torch", "tf", "jax", "paddle") else _framework_from_kernels(frame, r.evidence)
    e = verdicts.Evidence(source=framework, has_ops=bool(frame.mask("cpu_op").any()), has_gpu=r.has_gpu,
                          intel_gpu=_launches_through(frame, _INTEL_LAUNCH),
                          idle_share=r.idle_share, idle_threshold=idle_threshold, recurrent=_recurrent_style(frame, r.steps))
    e.pipeline_builds = pipeline_builds(frame)
    e.chrome_trace = source == "chrome"
    e.onnxruntime = source == "onnxruntime"
    e.nsys = source == "nsys"
    if e.recurrent == verdicts.FUSED and (reasons := lstm_per_timestep_reasons(frame)) is not None:
        e.recurrent, e.recurrent_reasons = verdicts.TORCH_LSTM_PER_TIMESTEP, reasons
    if e.source == "jax":
        e.jit_calls_per_step, e.calls_per_step_known = _jit_calls_per_step(frame)
        e.jax_nested_dispatches = _nested_dispatches_per_call(frame)
        e.xla_loop = _runs_xla_loop(frame, table)
        e.blocks_each_step = _blocks_each_step(frame)
    e.accumulation_cycle = r.steps.cycle if r.steps is not None else 0
    if e.source == "tf":  # CPU and GPU traces alike: the data-loading verdicts name its slowest stage
        e.tf_input = r.input_pipeline = input_pipeline(frame)
        e.xla_program_steps = _runs_xla_program_each_step(frame, r.steps)
        e.tf_eager_share = _tf_eager_share(frame)
        e.keras_fit = _runs_keras_fit(frame)
    if e.source == "torch":
        e.compiled_calls_per_step, e.calls_per_step_known = _calls_per_step(frame, _TORCH_COMPILED_CALLS,
                                                                            _TORCH_COMPILED_NOT_CALLS)
    ev = r.evidence
    used = r.steps.used_step_numbers() if r.steps is not None and not r.steps.left_out.empty else None
    if e.source == "tf":
        r.eager_beside_function = eager_beside_function(frame, used)
        e.tf_function_steps = r.eager_beside_function is not None
        if e.tf_eager_share >= verdicts.TF_EAGER_SHARE:
            e.tf_eager_types = eager_ops(frame, used).named_types(frame)
    if e.source == "torch":
        e.torchscript_share = _torchscript_share(frame, used)
    if e.source in ("tf", "jax"):
        e.python_callback_share = _python_callback_share(frame, used)
    if e.source == "tf":
        e.no_xla_ops, e.no_xla_share = _ops_xla_cannot_compile(frame, used)
    if not r.has_gpu:
        e.unrecorded_gpu_work = unrecorded_gpu_work(frame, classify_rows(frame))
    stalls = _stalls(r, frame) if not r.has_gpu and e.has_ops and not e.unrecorded_gpu_work else None
    e.retrace_steps, e.steps_judged, e.retrace_share = _retracing(frame, used)
    if not e.has_ops and not e.has_gpu:  # read only by the verdict on a capture with nothing in it
        e.capture_ns = _capture_ns(frame)
    _describe_ops(r, used, source, str(trace_extra(table).get("steps_not_inferred") or ""))
    if e.python_callback_share >= verdicts.CALLBACK_SHARE:
        how = "tf.py_function / tf.numpy_function" if e.source == "tf" else "host callbacks of the jitted function"
        ev.append(f"Python called from the step's {'graph' if e.source == 'tf' else 'compiled program'} ({how}: "
                  f"{_python_callback_names(frame)}) runs during {e.python_callback_share:.0%} of the step time, under "
                  "Python's GIL")
    if r.has_gpu and source == "paddle":
        ev.append(PADDLE_GPU_CAVEAT)
    if e.has_ops or e.has_gpu:
        if r.has_gpu:
            _measure_gpu(r, frame, e)
            _measure_gpu_communication(r, frame, e, used)
            e.blocking_calls_per_step = _blocking_calls_per_step(r, frame)
        elif not e.unrecorded_gpu_work:  # else its ops' host time is launching, not CPU work
            _measure_cpu(r, frame, e, used, stalls)
    r.verdict, says, remedies = verdicts.judge(e)
    r.verdict_evidence = e
    ev.extend(says)
    if r.verdict == "GPU-bound" and (top := _top_kernels(frame, used)):
        ev.append(top)
    ev.extend(verdicts.side_notes(e, r.verdict))
    cast_says, cast_remedy = verdicts.cast_note(e)
    if cast_says:
        ev.append(cast_says)
    if not r.has_gpu and e.has_ops and r.top_ops is not None and len(r.top_ops.ops):
        # By name, all shapes summed: an op whose calls vary in shape (a mixture of experts' per-expert
        # GEMMs) is one op taking the time, not many small ones.
        top = r.top_ops.by_name.head(3)
        labels = sentence_labels(top.name.tolist(), [""] * len(top), top.op_class.tolist())
        # A copy inside a GEMM or convolution op takes that op's class (addmm writing its bias into the
        # output before the product): said, so that it is not read as a dtype conversion or a layout copy.
        labels = [f"{label} (inside {op_class} ops)" if op_class in ENCLOSING_CLASSES and name.startswith("aten::")
                  and classify_op_name(name) != op_class else label
                  for label, name, op_class in zip(labels, top.name.tolist(), top.op_class.tolist(), strict=True)]
        named = [f"{label} {share:.0%}" + _over_shapes(r.top_ops, name, op_class, shapes, share)
                 for label, name, op_class, share, shapes in zip(labels, top.name.tolist(), top.op_class.tolist(),
                                                                 top.share.tolist(), top.shapes.tolist(), strict=True)]
        # Ops on threads running side by side (a jit.fork branch, TF's inter-op pool) sum to more than the steps:
        # said where the shares named do.
        summed = (f" (summed over the {r.top_ops.threads} threads that ran ops, so shares can add up to more than 100%)"
                  if r.top_ops.threads > 1 and top.share.sum() > 1.0 else "")
        ev.append(f"top ops by self time{summed}: " + ", ".join(named))
        # Spread over many per-layer TF op names, the time is told by op type too.
        types = r.top_ops.op_types
        # Said where summing by type shows more than the top op does (not three types of 0%).
        if types and float(top.share.sum()) < SPREAD_TOP_SHARE and types[0][1] >= TYPE_OVER_OP * float(top.share.max()):
            ev.append("top op types by self time: " + ", ".join(f"{t} {share:.0%}" for t, share in types[:3]))
        ev.extend(r.top_ops.describe_waiting())
        r.remedies.extend(r.top_ops.remedies)
    r.remedies.extend(remedies)
    batching = [x for x in (verdicts.BATCH_REMEDY, verdicts.CPU_BATCH_REMEDY) if x in r.remedies]
    if batching and any(DECODE_BATCHING in x for x in r.remedies):
        r.remedies.remove(batching[0])  # the decode loop's own remedy says how to batch it
    if (talking := verdicts.gpu_communication_note(e, r.verdict)) is not None:
        r.remedies.append(talking)
    if e.source == "torch":
        steps_used = r.steps.used_step_numbers() if r.steps is not None and len(r.steps.steps) else None
        r.optimizer = optimizer_steps(frame, steps_used)
        r.embeddings = dense_embedding_gradients(frame, steps_used)
        for found in (r.optimizer, r.embeddings):
            if found is not None:
                said, fix = found.evidence(), found.remedy()
                ev.extend([said] if said else [])
                r.remedies.extend([fix] if fix else [])
        if not r.has_gpu and e.has_ops and r.steps is not None and not r.steps.steps.empty:
            r.slowing_products = slowing_products(frame, classify_rows(frame), _compared_steps(r.steps))
            if r.slowing_products is not None:
                ev.append(r.slowing_products.evidence())
                r.remedies.append(r.slowing_products.remedy())
        # A CPU LSTM layer run per timestep in float64 is told so by its own rule (verdicts.TORCH_LSTM_PER_TIMESTEP).
        r.float64_products = _told(r, float64_products(frame, steps_used) if FLOAT64 not in e.recurrent_reasons else None)
        r.unfused_attention = _told(r, unfused_attention(frame, steps_used))
        r.sdpa_math_path = _told(r, sdpa_math_path(frame, steps_used))
        r.nchw_convolutions = _told(r, nchw_convolutions(frame, steps_used))
        r.emulated_products = _told(r, emulated_products(frame, steps_used))
        r.growing_cat = _told(r, growing_cat(frame, steps_used))
        r.message_passing = _told(r, message_passing(frame, steps_used))
        r.float32_linears = _told(r, float32_linears(frame, steps_used))
        r.dropout_masks = _told(r, dropout_masks(frame, steps_used))
        r.sample_loop = _told(r, sample_loop(frame, steps_used))
        r.sample_transforms = _told(r, sample_transforms(frame, steps_used, classify_rows(frame))
                                    if r.sample_loop is None else None)
        r.graph_breaks = _told(r, graph_breaks(frame, steps_used))
        r.recompute = _told(r, recompute(frame, steps_used))
        r.uncached_generation = _told(r, uncached_generation(frame, steps_used))
        r.tensor_text = _told(r, tensor_text(frame, steps_used))
        r.looping_op = _told(r, looping_op(frame, steps_used))
        r.gradient_sync = _told(r, gradient_sync(frame, steps_used))
        if r.gradient_sync is not None:  # the specific fix before the communication rule's general one
            r.remedies.insert(0, r.remedies.pop(r.remedies.index(r.gradient_sync.remedy())))
        evaluating = r.steps.steps.step[r.steps.steps.status == "evaluation"].tolist() if r.steps is not None else []
        r.train_mode_inference = _told(r, train_mode_inference(frame, steps_used, evaluating))
        r.unused_gradients = _told(r, unused_gradients(frame, steps_used))
        r.parameter_loop = _told(r, parameter_loop(frame, steps_used))
        # Only where the host paces the step do the host's per-op savings shorten it.
        r.inference_with_grad = _told(r, inference_with_grad(frame, steps_used) if r.verdict in HOST_PACED_VERDICTS else None)
        r.anomaly_detection = anomaly_detection(frame, steps_used)
        if r.anomaly_detection is not None:
            ev.append(r.anomaly_detection.evidence())
            r.remedies.insert(0, r.anomaly_detection.remedy())
    if e.source in ("torch", "tf"):  # autograd's select/slice backward, TF's StridedSliceGrad
        indexed_steps = r.steps.used_step_numbers() if r.steps is not None and len(r.steps.steps) else None
        r.indexed_gradients = _told(r, indexed_gradients(frame, indexed_steps))
    if e.source in ("tf", "paddle"):  # Keras's and Paddle's dropout layers (PyTorch's are read with its other findings)
        r.dropout_masks = _told(r, dropout_masks(frame, used, e.source))
    if e.source in ("jax", "tf"):  # an XLA program's float64 products, by its HLO (PyTorch's: float64_products)
        xla_steps = r.steps.used_step_numbers() if r.steps is not None and len(r.steps.steps) else None
        r.xla_float64 = _told(r, xla_float64_products(frame, classify_rows(frame), xla_steps))
    if e.source == "tf":  # PyTorch's 16-bit products are read by their recorded types (emulated_precision)
        r.slow_forward = _told(r, slow_forward(frame, classify_rows(frame), indexed_steps))
        r.element_map = _told(r, element_map(frame, indexed_steps))
        r.dense_slot_updates = _told(r, dense_slot_updates(frame, indexed_steps))
        r.debug_checks = _told(r, debug_checks(frame, indexed_steps))
    _told(r, r.eager_beside_function if r.verdict in HOST_PACED_VERDICTS else None)
    if r.python_work is not None:
        r.remedies.append(r.python_work.remedy())
    if verdicts.CPU_COMPUTE_REMEDY in r.remedies:  # a pointer to the tables: after every remedy that names a fix
        r.remedies.remove(verdicts.CPU_COMPUTE_REMEDY)
        r.remedies.append(verdicts.CPU_COMPUTE_REMEDY)
    if cast_remedy and cast_remedy not in r.remedies:
        r.remedies.append(cast_remedy)
    if len(r.remedies) >= 2:
        # The replay is of one step: where the steps leave much of the loop out, its savings are the step's.
        loop_share = 1 - e.between_step_share if e.between_step_share >= verdicts.SIDE_NOTE_SHARE else None
        # Masks drawn in evaluation steps are not the judged step's time, and BatchNorm's batch statistics
        # are not measured: those remedies are not ranked.
        t = r.train_mode_inference
        # Masks drawn on purpose (Monte Carlo dropout, beside BatchNorm in eval mode) stay: not a saving.
        masks_in_step = t if t is not None and t.share > 0 and not t.evaluation_steps and not t.dropout_alone else None
        measured = {found.remedy(): (what, found.share) for what, found in
                    (("flushing subnormals", r.slowing_products), ("the step's own Python work", r.python_work),
                     ("the emulated products' time", r.emulated_products),
                     ("the slow forward products' time", r.slow_forward),
                     ("the tensors' formatting time", r.tensor_text),
                     ("the looping op's time", r.looping_op),
                     ("the mapped loops' spans", r.element_map),
                     ("the optimizer's dense updates", r.dense_slot_updates),
                     ("the concatenations beyond one final cat", r.growing_cat),
                     ("the per-sample preparation's time", r.sample_transforms),
                     ("the ops on the gathered rows", r.message_passing),
                     ("the forward recomputed in backward", r.recompute),
                     ("the dropout masks' time", masks_in_step),
                     ("the backward after the last gradient the optimizer reads", r.unused_gradients))
                    if found is not None}
        if r.indexed_gradients is not None:  # one unbind still does one whole-size pass
            measured[r.indexed_gradients.remedy()] = ("the indexing backward calls but one",
                                                      r.indexed_gradients.saving)
        if r.sample_loop is not None:  # batched, the loop's work on the samples' data stays
            measured[r.sample_loop.remedy()] = (r.sample_loop.measured, r.sample_loop.saving)
        if r.eager_beside_function is not None and r.verdict in HOST_PACED_VERDICTS:  # inside: ~0.1 of their time
            measured[r.eager_beside_function.remedy()] = ("the eager ops' calls", r.eager_beside_function.share)
        if r.float32_linears is not None:  # int8 Linear layers ran 1.8-1.9x the float32 rate (linear_inference)
            measured[r.float32_linears.remedy()] = ("half the float32 Linear layers' time", r.float32_linears.share / 2)
        if r.dropout_masks is not None and not r.dropout_masks.on_gpu:  # dropout at 0 draws no mask, scales nothing
            measured[r.dropout_masks.remedy()] = ("the dropout calls' time", r.dropout_masks.share)
        if r.sdpa_math_path is not None:  # the fused kernel's time stays, but so does the math backward's saving, uncounted
            measured[r.sdpa_math_path.remedy()] = ("the math path's forward time", r.sdpa_math_path.share)
        if r.float64_products is not None:  # float32 products at twice the rate, its other ops moving half the bytes
            measured[r.float64_products.remedy()] = ("half the float64 ops' time", r.float64_products.saving)
        if r.xla_float64 is not None:
            measured[r.xla_float64.remedy()] = ("half the float64 programs' op time", r.xla_float64.saving)
        _rank_by_predicted_saving(r, frame, loop_share, measured)
    if r.train_mode_inference is not None and r.train_mode_inference.evaluation_steps:  # the scores vary: first
        r.remedies.remove(fix := r.train_mode_inference.remedy())
        r.remedies.insert(0, fix)
    if r.uncached_generation is not None:  # the cache removes most of the work the other remedies weigh
        r.remedies.remove(fix := r.uncached_generation.remedy())
        r.remedies.insert(0, fix)
    for setting in (r.anomaly_detection, r.debug_checks):  # a debugging setting left on: first whatever the others save
        if setting is not None:
            r.remedies.remove(fix := setting.remedy())
            r.remedies.insert(0, fix)


class _Told(Protocol):
    def evidence(self) -> str: ...

    def remedy(self) -> str: ...


_T = TypeVar("_T", bound=_Told)


def _told(r: LaunchReport, found: _T | None) -> _T | None:
    """A finding's evidence and remedy, added to the report where it was found."""
    if found is not None:
        r.evidence.append(found.evidence())
        r.remedies.append(found.remedy())
    return found


# Which what-if scenario (tracekit.analyze.whatif) a remedy's advice corresponds to; first match wins.
# Graph remedies capture the step whole (its dispatch skipped on replay too): cuda-graph-step, not
# cuda-graphs (launch calls alone), which fits graphs around parts of a step inside a Python loop.
# None: advice no scenario costs (a step already in one XLA program: what is left is TF's per-call work,
# which steps_per_execution divides, not dispatch that goes to 0).
_REMEDY_SCENARIOS: tuple[tuple[str, str | None], ...] = (("already runs as one XLA program", None),
                     # A decoder's loop names the layer it cannot become: its fix is the compiled decode step.
                     ("the cell loop generates", "no-dispatch"),
                     # Remedies whose text names a compiler for another reason than dispatch: dropout on a
                     # GPU is separate elementwise kernels XLA fuses; collectives' XLA combiner is no replay.
                     ("dropout's kernels take", "fuse-elementwise"), ("dropout's masks cost", None),
                     ("collective kernels run on the GPU", None),
                     # A loop over the parameters outside the optimizer (its text names EMAModel(foreach=True)).
                     ("do the loop over the parameters", "foreach-loops"),
                     ("use the fused optimizer", "fused-optimizer"), ("foreach=True", "fused-optimizer"),
                     ("cut the dtype casts", "fuse-elementwise"), ("CUDA graph", "cuda-graph-step"), ("XPU graph", "cuda-graph-step"), ("block_until_ready", "no-sync"),
                     ("fuse elementwise", "fuse-elementwise"),
                     ("fused recurrent layer", "fused-rnn"), ("recurrent layer (nn.GRU / nn.RNN)", "fused-rnn"),
                     ("keras.layers.LSTM", "fused-rnn"),
                     ("BlockLSTM", "fused-rnn"), ("mixed precision", "amp"), ("synchronizations", "no-sync"),
                     ("pin_memory=True, tensor.pin_memory()", "pin-memory"), ("channels_last", "channels-last"), ("overlap the copies with compute", "overlap-copies"),
                     ("torch.compile", "no-dispatch"), ("TorchScript", "no-dispatch"), ("jit_compile", "no-dispatch"),
                     ("jax.jit", "no-dispatch"), ("compiler", "no-dispatch"), ("XLA", "no-dispatch"))
NO_SAVING_SHARE = 0.01  # a remedy whose predicted saving is below this share of the step is listed last
WHATIF_MAX_EVENTS = 200_000  # the replay walks the step's events in Python: bounded for huge traces


# The phrase of whatif's uncertainty about TF's untraced executor time, which untraced_ops' evidence says.
UNTRACED_EXECUTOR = "graph executor with no op traced"


def _rank_by_predicted_saving(r: LaunchReport, frame: Frame, loop_share: float | None = None,
                              measured: dict[str, tuple[str, float]] | None = None) -> None:
    """Order the remedies by what ``tracekit whatif`` predicts each saves on the median step (those it
    cannot cost keep their order, after the costed ones), and say the predictions (as shares of the
    step, and of the loop when the steps are only ``loop_share`` of it). ``measured``: remedies whose
    saving the trace shows directly, by remedy: (what it does, its share of the steps' time), ranked
    with the predictions."""
    from tracekit.analyze.whatif import whatif
    from tracekit.errors import TracekitError

    if len(frame) > WHATIF_MAX_EVENTS:
        return
    cycle_step = _median_cycle_step(r.steps, frame)
    try:
        w = whatif(frame.table)  # on the median step
        w_cycle = whatif(frame.table, instance=cycle_step) if cycle_step is not None else None
    except (TracekitError, ValueError, IndexError, KeyError, ZeroDivisionError):
        return  # the ordering is a refinement: a trace the replay cannot handle keeps the rules' order
    # An upper bound (time the trace cannot show to be dispatch) or an uncertain prediction (kernels a
    # library would choose that the trace cannot show) does not order remedies.
    saving = {s.name: s.saving_ns / w.replayed_step_ns for s in w.scenarios
              if w.replayed_step_ns and not s.upper_bound and not s.uncertain}
    if w_cycle is not None and r.steps is not None and w.replayed_step_ns and w_cycle.replayed_step_ns:
        # Steps that run the loop's periodic work (an optimizer step every k micro-batches) are one in k:
        # the saving over a cycle is k - 1 plain steps' and one such step's.
        k = r.steps.cycle
        plain = {s.name: s.saving_ns for s in w.scenarios if not s.upper_bound and not s.uncertain}
        extra = {s.name: s.saving_ns for s in w_cycle.scenarios if not s.upper_bound and not s.uncertain}
        total = (k - 1) * w.replayed_step_ns + w_cycle.replayed_step_ns
        saving = {sc: ((k - 1) * plain.get(sc, 0) + extra.get(sc, 0)) / total for sc in {*plain, *extra}}
    scenario = [next((sc for key, sc in _REMEDY_SCENARIOS if key in remedy), None) for remedy in r.remedies]
    # A remedy whose prediction is uncertain is not ranked: say why, so that its advice reads with the caveat.
    for s in w.scenarios:
        if s.uncertain and s.name in scenario and "uncertain: " in s.assumptions:
            # TF's untraced executor time is said by its own evidence (untraced_ops) already.
            parts = [part.rstrip("; ") for part in s.assumptions.split("uncertain: ")[1:]
                     if not (UNTRACED_EXECUTOR in part and any(UNTRACED_EXECUTOR in e for e in r.evidence))]
            if parts:
                r.evidence.append(f"what {s.name} would save is not predicted: {'; '.join(parts)} (tracekit whatif)")
    measured = {remedy: m for remedy, m in (measured or {}).items() if remedy in r.remedies}
    costed = [measured[remedy][1] if remedy in measured else saving.get(sc) if sc else None
              for remedy, sc in zip(r.remedies, scenario, strict=True)]
    if not any(c is not None for c in costed):
        return
    # A remedy the replay predicts to save nothing on this step (amp on a step its host paces: the
    # casts it adds cost more than the faster GEMMs give back) goes after the ones it cannot cost.
    def rank(i: int) -> tuple[int, float, int]:
        c = costed[i]
        return (1 if c is None else 0 if c >= NO_SAVING_SHARE else 2), -(c or 0.0), i
    r.remedies = [r.remedies[i] for i in sorted(range(len(r.remedies)), key=rank)]
    named = sorted({(sc, saving[sc]) for sc in scenario if sc in saving}, key=lambda x: -x[1])
    said = ", ".join(f"{sc} {share:.1%}" if share < 0.1 else f"{sc} {share:.0%}" for sc, share in named)
    if any(share < NO_SAVING_SHARE for _, share in named):
        said += " (a remedy predicted to save under 1% of the step is listed last)"
    if loop_share is not None and named:
        said += (f" of the step; the steps are {loop_share:.0%} of the loop, so of the loop "
                 + ", ".join(f"{sc} {share * loop_share:.0%}" for sc, share in named))
    shown = [f"{what} {share:.0%} of the steps' time, as the trace shows it (not replayed)" for what, share in measured.values()]
    said = "; ".join([said] + shown if said else shown)
    median = ", the median step" if "median" in str(w.window.get("chosen", "")) else ""
    if w_cycle is not None and r.steps is not None:
        r.evidence.append(f"remedies ordered by predicted saving over a cycle of {r.steps.cycle} steps ({w.window['name']}"
                          f"{median}, {r.steps.cycle - 1} times, and {w_cycle.window['name']}, which runs the periodic "
                          f"work; tracekit whatif): {said}")
        return
    r.evidence.append(f"remedies ordered by predicted saving on {w.window['name']}{median} (tracekit whatif): {said}")


def _median_cycle_step(steps: StepStats | None, frame: Frame) -> int | None:
    """``whatif``'s instance (index among the step rows by start) of the median-duration step among
    those that run the loop's periodic work (``StepStats.cycle_steps``); None without such steps."""
    if steps is None or not steps.cycle_steps:
        return None
    rows = steps.steps[steps.steps.step.isin(steps.cycle_steps) & steps.steps.used]
    if not len(rows):
        return None
    durations = rows.dur_ns.to_numpy()
    number = int(rows.step.iloc[int(np.argsort(durations, kind="stable")[durations.size // 2])])
    marked = frame.rows("step")
    marked = marked[np.argsort(frame.start[marked], kind="stable")]
    at = np.flatnonzero(frame.step[marked] == number)
    return int(at[0]) if at.size else None


# torch.profiler writes ProfilerStep#N ranges only when it is given a schedule (torch/profiler/profiler.py:
# record_steps); without one, prof.step() marks nothing and every analysis reads the whole capture.
TORCH_NO_STEPS_HINT = ("no steps are marked, so this is the whole capture: torch.profiler writes ProfilerStep#N "
                       "only when given a schedule, profile(schedule=torch.profiler.schedule(...)), with prof.step() "
                       "once per iteration (or wrap each iteration in record_function(\"train_step\"): its calls "
                       "are taken as the steps)")

# tracekit/ingest/paddle.py reads no Paddle GPU trace's launch links (none at hand to check them on).
PADDLE_GPU_CAVEAT = ("this Paddle trace's kernels are not linked to their launch calls or ops (Paddle's correlation "
                     "ids are not read): the GPU's busy and idle time stands, per-kernel launch delays and which op "
                     "launched each kernel are not known")
PADDLE_NO_STEPS_HINT = ("no steps are marked, so this is the whole capture: paddle.profiler writes ProfileStep#N when "
                        "given a scheduler, Profiler(scheduler=(start, end)), with prof.step() once per iteration (or "
                        "wrap each iteration in paddle.profiler.RecordEvent(\"train_step\"): its calls are taken as "
                        "the steps)")

JAX_NO_STEPS_HINT = ("no steps are marked, so this is the whole capture: jax.profiler marks a step with "
                     "jax.profiler.StepTraceAnnotation(\"train\", step_num=i) around each iteration; a jitted call "
                     "returns once its work is dispatched, so end each marked iteration with its result ready "
                     "(block_until_ready on the loss) or the marks hold the dispatches, not the work")
TF_NO_STEPS_HINT = ("no steps are marked, so this is the whole capture: the TF profiler marks a step with "
                    "tf.profiler.experimental.Trace(\"train\", step_num=i, _r=1) around each iteration (Keras's fit "
                    "marks its per-batch function itself)")
NO_STEPS_HINTS = {"torch": TORCH_NO_STEPS_HINT, "paddle": PADDLE_NO_STEPS_HINT, "jax": JAX_NO_STEPS_HINT,
                  "tf": TF_NO_STEPS_HINT}


def _describe_ops(r: LaunchReport, used: list[int] | None, source: str = "", not_inferred: str = "") -> None:
    """Ops per step (or timestep), and which steps the verdict leaves out. ``source``: the trace's
    source (``torch`` for a Kineto trace; not inferred from kernel names), for the hint on marking steps;
    ``not_inferred``: why the reader took no range's calls as the steps (trace metadata), said instead."""
    bd = r.breakdown
    assert bd is not None
    marked = bool(bd.steps)  # "per step" only where steps are marked; else the count is the whole trace's
    per_step = r.per_step[r.per_step.step.isin(used)] if used is not None else r.per_step
    ops_step = float(per_step.ops.mean()) if len(per_step) else 0.0
    if used is not None and r.steps is not None:
        r.evidence.append("left out of this verdict: " + "; ".join(r.steps.describe_left_out()) +
                          " (--keep-all-steps keeps them)")
    for said in ((r.steps.describe_cycle(), r.steps.describe_spread()) if r.steps is not None else ()):
        if said:
            r.evidence.append(said)
    if bd.timesteps and marked:
        r.evidence.append(f"{ops_step / bd.timesteps:.1f} framework ops per timestep ({ops_step:.0f} per step, "
                          f"{bd.timesteps} timesteps)")
    elif ops_step:
        r.evidence.append(f"{ops_step:.0f} framework ops per step" if marked else
                          f"{ops_step:.0f} framework ops (no steps marked)")
    # A capture with nothing in it has no steps to mark: the verdict says why it is empty.
    if not marked and source in NO_STEPS_HINTS and (r.has_gpu or int(r.per_step.ops.sum())):
        # A range around each iteration that was not taken as the steps: say why, not "wrap each iteration".
        r.evidence.append(f"no steps are marked, so this is the whole capture: {not_inferred}" if not_inferred
                          else NO_STEPS_HINTS[source])


def _measure_cpu(r: LaunchReport, frame: Frame, e: verdicts.Evidence, used: list[int] | None,
                 stalls: Stalls | None) -> None:
    bd = r.breakdown
    assert bd is not None
    cpu = bd.cpu_ops[bd.cpu_ops.step.isin(used)] if used is not None else bd.cpu_ops[bd.cpu_ops.step == -1]
    span = int(cpu.span_ns.sum()) if len(cpu) else 0
    dispatch = int(cpu.dispatch_ns.sum()) if len(cpu) else 0
    compiled = int(cpu.compiled_code_ns.sum()) if len(cpu) else 0
    judged = stalls.within(frame, used) if stalls is not None and used is not None else stalls
    # A stalled copy (a non-compute op) is not dispatch either: the thread was not running.
    stalled_outside = judged.outside_compute_ns(classify_rows(frame)) if judged is not None else 0
    e.dispatch_share = max(dispatch - compiled - stalled_outside, 0) / span if span else 0.0
    e.compiled_code_share = compiled / span if span else 0.0
    aoti = aoti_native_calls(frame) if e.source == "torch" else np.zeros(0, np.int64)
    steps = len(used) if used is not None else int(frame.rows("step").size)
    if steps:
        aoti = aoti[member_mask(frame.step[aoti], used)] if used is not None else aoti[frame.step[aoti] >= 0]
    e.aoti_calls_per_step = aoti.size / max(steps, 1)
    waiting = int(cpu.waiting_ns.sum()) if len(cpu) else 0
    e.wait_step_share = waiting / span if span else 0.0
    fetching = int(cpu.fetching_ns.sum()) if len(cpu) else 0
    e.fetch_step_share = fetching / span if span else 0.0
    e.compute_step_share = int(cpu.compute_ns.sum()) / span if span and len(cpu) else 0.0
    if span and len(cpu):  # op self time by class (summed over threads)
        e.cast_share, e.cast_gemm_share = int(cpu.cast_ns.sum()) / span, int(cpu.gemm_ns.sum()) / span
    e.ops_per_step = float(cpu.ops.mean()) if len(cpu) else 0.0
    if e.onnxruntime and (floor := node_floor(frame, used)) is not None:
        r.node_floor = floor
        e.node_floor_share, e.node_floor_ns, e.node_runs_per_step = floor.share, floor.floor_ns, floor.nodes_per_step
        if note := verdicts.node_floor_note(e):
            r.evidence.append(note)
    # Time counted as dispatch may be work the class rules do not know (an FFT, a custom op): check.
    work_rows = step_work_rows(frame, used)
    # TorchScript calls whose own time is ops the interpreter ran unrecorded: the breakdown counts it as
    # compute, not dispatch (``unrecorded_ops_ns``); said here with what the calls are.
    script_ns = int(cpu.unrecorded_ops_ns.sum()) if len(cpu) else 0
    script_rows, frozen = unrecorded_script_work(frame, work_rows)
    work_rows = work_rows[~member_mask(work_rows, script_rows)]
    r.python_work = _python_work(frame, used) if e.source in ("torch", "jax") and span else None
    in_python = min(r.python_work.share, e.dispatch_share) if r.python_work is not None else 0.0
    guards, guard_calls = _guard_checks(frame, used) if e.source == "torch" and span else (0, 0)
    e.guard_share = min(guards / span, e.dispatch_share - in_python) if span else 0.0
    if e.guard_share < GUARD_NOTE_SHARE:  # a few µs a call: left in dispatch, unsaid
        e.guard_share = 0.0
    # ORT records no Python: what runs between its node runs is its executor, and its profiler's recording.
    dispatch_words = "between node runs, in ONNX Runtime's executor and profiler" if e.onnxruntime else "framework dispatch"
    parts = [f"{e.dispatch_share - in_python - e.guard_share:.0%} {dispatch_words}"]
    if in_python:
        parts.append(f"{in_python:.0%} Python work of the step's own (stretches of "
                     f"{LONG_STRETCH_NS / 1e3:.0f} µs or more with no op running)")
    if e.guard_share:
        steps = max(len(used), 1) if used is not None else max(int(frame.rows("step").size), 1)
        parts.append(f"{e.guard_share:.0%} Dynamo's guard checks before each compiled call (TorchDynamo Cache Lookup, "
                     f"{guard_calls / steps:.0f} a step, {guards / guard_calls / 1e3:.0f} µs each)")
    if compiled:
        aoti_says = (f"; an AOTInductor package's native call from Python, {e.aoti_calls_per_step:.0f} a step, whose "
                     "kernels record no op" if e.aoti_calls_per_step else "")
        parts.append(f"{e.compiled_code_share:.0%} compiled graphs' own code (their generated kernels and wrapper, "
                     f"not split by the trace{aoti_says})")
    if stalled_outside:
        parts.append(f"{stalled_outside / span:.0%} stalled copies")
    if script_ns:
        parts.append(f"{script_ns / span:.0%} TorchScript calls' own time (counted as compute: below)")
    if fetching:
        building = ", building tf.data pipelines" if e.pipeline_builds else ""
        parts.append(f"{e.fetch_step_share:.0%} batch fetching (DataLoader __next__ / IteratorGetNext{building}, not "
                     "dispatch)")
    if e.ops_per_step and len(parts) > 1:
        recorded = "recorded " if script_ns else ""
        r.evidence.append(f"{(dispatch + script_ns + fetching) / span:.0%} of step time is outside any {recorded}compute op: "
                          + ", ".join(parts[:-1]) + f" and {parts[-1]}")
    elif e.ops_per_step:
        r.evidence.append(f"{verdicts.share_below(e.dispatch_share, verdicts.DISPATCH_SHARE)} of step time is outside "
                          f"any compute op ({dispatch_words})")
    if r.python_work is not None:
        r.evidence.append(r.python_work.evidence())
    if script_ns and script_rows.size:
        r.evidence.append(_unrecorded_script_says(frame, script_rows, frozen))
        r.remedies.append("to see the ops TorchScript runs unrecorded, with their shapes and times, profile the model "
                          "before freezing (torch.jit.script or eager); the frozen model runs the same arithmetic")
    work_ns, work_ops = unclassified_work(frame, used, work_rows)
    work = min(work_ns, int(e.dispatch_share * span))
    e.unclassified_work_share = work / span if span else 0.0
    e.unclassified_work_ops = ", ".join(f"{short_name(name)} {ns / span:.0%}" for name, ns in work_ops[:3]) if span else ""
    e.untyped_copies = untyped_copies(frame, work_rows)
    if e.unclassified_work_share >= UNCLASSIFIED_WORK_NOTE_SHARE and not verdicts.unclassified_work_decides(e):
        r.evidence.append(f"{e.unclassified_work_share:.0%} of step time counted as dispatch is inside ops with no class "
                          f"that run {UNCLASSIFIED_WORK_NS / 1e3:.0f} µs or more a call on their own "
                          f"({e.unclassified_work_ops}): arithmetic the class rules do not know, or slow calls"
                          + verdicts.untyped_copies_hint(e))
    # TF's executor at a tracer level that leaves inexpensive ops untraced: their time is in dispatch.
    untraced = untraced_in_steps(frame, used) if e.source == "tf" and span else 0
    e.untraced_op_share = min(untraced, int(e.dispatch_share * span)) / span if span else 0.0
    if e.untraced_op_share >= UNTRACED_NOTE_SHARE and not verdicts.untraced_ops_decide(e):
        r.evidence.append(verdicts.untraced_ops_says(e))
    loading = _data_loading(frame)
    e.loader_workers = loader_has_workers(frame)
    if span and loading[0].size:
        e.load_step_share = intervals.overlap_total(*loading, *_step_windows(frame, used)) / span
    if e.source == "tf":
        e.pipeline_work = pipeline_work(frame, _step_windows(frame, used), span)
    _measure_between_steps(r, frame, e, used, span, loading)
    talking = _communication(frame)
    if span and talking[0].size:
        windows = _step_windows(frame, used)
        e.communication_step_share = intervals.overlap_total(*talking, *windows) / span
        e.communication_ops = _collective_names(frame, windows)
        e.fsdp = fsdp_collectives(frame, used) if e.source == "torch" else None
    if judged is not None and judged.rows.size and span:
        e.stall_step_share = int(judged.stall_ns.sum()) / span
        if e.stall_step_share >= STALL_NOTE_SHARE:
            r.evidence.append(judged.describe(frame, span))


def _top_kernels(frame: Frame, used: list[int] | None, most: int = 3) -> str:
    """On a GPU-bound trace, the kernels that take the most GPU time in the steps used, by their base
    name and the op that launched them (``at::native::vectorized_elementwise_kernel`` is every
    elementwise op's: the op says which), with their share of the kernels' time; "" without kernels."""
    kernels = frame.rows("gpu_kernel")
    if used is not None:
        kernels = kernels[member_mask(frame.step[kernels], used)]
    total = int(frame.dur[kernels].sum())
    if not total:
        return ""
    # Group by (base name, launching op's short name) in numpy: a trace can hold a million kernels,
    # and TF names an op per replica (replica_1/..., replica_6/...): the short name is the op.
    codes = frame.name_code[kernels]
    launcher = frame.op_row[kernels]
    op_codes = np.where(launcher >= 0, frame.name_code[np.maximum(launcher, 0)], -1)
    # Inductor's Triton launches record an op named as the kernel: no second name then.
    op_codes = np.where(op_codes == codes, -1, op_codes)
    labels: list[str] = [""]
    label_of = np.zeros(len(frame.names) + 1, np.int64)  # by name code + 1 (no name: code -1, label "")
    for c in distinct(np.concatenate([codes, op_codes])).tolist():
        if c >= 0:
            text = short_name(frame.names[c], 60)
            if text not in labels:
                labels.append(text)
            label_of[c + 1] = labels.index(text)
    key = label_of[codes + 1] * len(labels) + label_of[op_codes + 1]
    keys, index = np.unique(key, return_inverse=True)
    time = np.bincount(index.ravel(), weights=frame.dur[kernels])
    named = []
    for i in np.argsort(-time, kind="stable")[:most].tolist():
        kernel, op = divmod(int(keys[i]), len(labels))
        launched = f" ({labels[op]})" if op else ""
        named.append(f"{labels[kernel]}{launched} {time[i] / total:.0%}")
    return "top kernels by GPU time: " + ", ".join(named)


def _over_shapes(ops: TopOps, name: str, op_class: str, shapes: int, share: float) -> str:
    """How an op's time, ranked by name, splits over its input shapes: nothing for one shape; its
    largest shape where that holds most of the op's time (``aten::tanh 94% (2 input shapes; 64x1024:
    76%)``); else how many shapes (a mixture of experts' GEMMs, a different token count per expert)."""
    if shapes <= 1:
        return ""
    same = ops.ops[(ops.ops.name == name) & (ops.ops.op_class == op_class)]
    if len(same) and float(same.share.iloc[0]) >= share / 2:
        return f" ({shapes} input shapes; {compact_shapes(str(same.shapes.iloc[0]))}: {float(same.share.iloc[0]):.0%})"
    return f" ({shapes} input shapes)"


SPREAD_TOP_SHARE = 0.3  # the top three ops holding less than this: the time is spread over many ops
TYPE_OVER_OP = 1.5  # ... and the top op type holds this many times the top op's share: the types are said
ENCLOSING_CLASSES = ("gemm", "convolution", "rnn")  # op classes an op's callees take in the op view
STALL_NOTE_SHARE = 0.05  # stalls losing this much of the step time are stated as evidence
UNCLASSIFIED_WORK_NOTE_SHARE = 0.05  # ops of no class doing long work: this much of the step time is stated


def _stalls(r: LaunchReport, frame: Frame) -> Stalls | None:
    """Stalled op calls (``tracekit.analyze.stalls``), compared over every step but warm-up and cut-short
    ones, so that a step left out as an outlier is explained by them (``StepStats.stalled_ns``)."""
    if r.steps is None or r.steps.steps.empty:
        return None
    stalls = stalled_calls(frame, classify_rows(frame), _compared_steps(r.steps))
    if not stalls.rows.size:
        return None
    r.steps.stalled_ns = stalls.by_step(frame)
    return stalls


def _python_work(frame: Frame, used: list[int] | None) -> PythonWork | None:
    """Python work of the steps' own (``tracekit.analyze.python_work``) in the steps used, with the Python
    frames running in it named where the trace records them."""
    w_start, w_end = _step_windows(frame, used)
    steps = len(used) if used is not None else max(int(frame.rows("step").size), 1)
    s_start, s_end = long_stretches(frame, w_start, w_end)
    found = python_work(frame, w_start, w_end, steps, (s_start, s_end))
    if found is None:
        return None
    on_loop = member_mask(frame.thread_key, loop_threads(frame).tolist())
    named = _python_between(frame, on_loop, s_start, s_end, int((s_end - s_start).sum()))
    return replace(found, python=named[0]) if named else found


def _python_callback_share(frame: Frame, used: list[int] | None) -> float:
    """Of the steps' time (wall, the steps used), the share covered by Python called from the compiled
    program (``classify.PYTHON_CALLBACK``) on the step's threads; tf.data's own threads (a py_function in
    map) are the input pipeline's."""
    calls = _python_callback_calls(frame)
    if not calls.size:
        return 0.0
    w_start, w_end = _step_windows(frame, used)
    span = int((w_end - w_start).sum())
    if not span:
        return 0.0
    c_start, c_end = intervals.union(frame.start[calls], frame.end[calls])
    return intervals.overlap_total(c_start, c_end, w_start, w_end) / span


# TF ops XLA has no kernel for, which Keras's preprocessing layers (TextVectorization, StringLookup,
# Hashing...) run inside a model: string ops and lookup tables (StringLookup's, IntegerLookup's too).
TF_NO_XLA_OP = re.compile(r"^(StringSplit(V2)?|StaticRegexReplace|RegexReplace|StaticRegexFullMatch|RegexFullMatch|"
                          r"StringLower|StringUpper|StringStrip|StringToHashBucket(Fast|Strong)?|StringJoin|StringFormat|"
                          r"StringLength|Substr|Unicode(Decode\w*|Encode|Transcode|Script)|StringNGrams|AsString|"
                          r"StringToNumber|ReduceJoin|LookupTable(Find|Size|Import|Insert|Export|Remove)(V2)?)$")


def _ops_xla_cannot_compile(frame: Frame, used: list[int] | None, most: int = 3) -> tuple[str, float]:
    """The string and lookup-table op types (``TF_NO_XLA_OP``) a TF step runs off tf.data's threads, the
    most time first (at most ``most``), and their share of the steps' time (wall, the steps used)."""
    ops = frame.rows("cpu_op")
    codes = [c for c in distinct(frame.name_code[ops]).tolist() if c >= 0 and TF_NO_XLA_OP.match(tf_base_op(frame.names[c]))]
    if not codes:
        return "", 0.0
    calls = ops[member_mask(frame.name_code[ops], codes)]
    calls = calls[~input_pipeline_mask(frame)[calls]]
    w_start, w_end = _step_windows(frame, used)
    span = int((w_end - w_start).sum())
    at = np.searchsorted(w_start, frame.start[calls], side="right") - 1
    calls = calls[(at >= 0) & (frame.start[calls] < w_end[np.maximum(at, 0)])]
    if not calls.size or not span:
        return "", 0.0
    found, index = np.unique(frame.name_code[calls], return_inverse=True)
    by_type: dict[str, int] = {}
    for code, ns in zip(found.tolist(), np.bincount(index, weights=frame.dur[calls]).tolist(), strict=True):
        op = tf_base_op(frame.names[code])  # one op type under many scoped names
        by_type[op] = by_type.get(op, 0) + int(ns)
    c_start, c_end = intervals.union(frame.start[calls], frame.end[calls])
    names = ", ".join(sorted(by_type, key=lambda n: -by_type[n])[:most])
    return names, intervals.overlap_total(c_start, c_end, w_start, w_end) / span


def _python_callback_calls(frame: Frame) -> np.ndarray:
    """The op rows of Python called from the compiled program (``classify.PYTHON_CALLBACK``) off tf.data's
    threads."""
    ops = frame.rows("cpu_op")
    calls = ops[frame.named(ops, PYTHON_CALLBACK)] if ops.size else ops
    return calls[~input_pipeline_mask(frame)[calls]]


def _python_callback_names(frame: Frame, most: int = 2) -> str:
    """The Python calls of the compiled program by name (scope and op), the longest in sum first."""
    calls = _python_callback_calls(frame)
    codes, index = np.unique(frame.name_code[calls], return_inverse=True)
    total = np.bincount(index, weights=frame.dur[calls])
    return ", ".join(short_name(frame.names[codes[i]]) for i in np.argsort(-total, kind="stable")[:most])


def _tf_eager_share(frame: Frame) -> float:
    """Of the TF compute ops' time, the share in ops run eagerly: TF 2.21 records an eager op as an
    ``EagerExecute`` call (its class that of the op it runs), a graph's as ``scope/Name:Type``."""
    ops = frame.rows("cpu_op")
    compute = ops[byte_mask(classify_rows(frame).op[ops], [OP_CLASSES.index(c) for c in COMPUTE_OP_CLASSES])]
    total = int(frame.dur[compute].sum())
    if not total or "EagerExecute" not in frame.names:
        return 0.0
    eager = compute[frame.name_code[compute] == frame.names.index("EagerExecute")]
    return int(frame.dur[eager].sum()) / total


def _compared_steps(steps: StepStats) -> list[int]:
    """The steps whose calls are compared with each other: all but warm-up, cut-short and evaluation
    steps (an outlier is compared, so that what made it slow can explain it)."""
    table = steps.steps
    return [int(s) for s in table.step[table.status.isin(("steady", "outlier"))]]


def _blocking_calls_per_step(r: LaunchReport, frame: Frame) -> float:
    """Host waits for the GPU (cudaStreamSynchronize, cudaDeviceSynchronize, blocking copies: what
    .item() and .cpu() end in; a copy and the sync after it are one) per step used; 0 where no step
    is marked."""
    if r.steps is None or r.steps.steps.empty:
        return 0.0
    used = r.steps.used_step_numbers()
    calls = host_waits(frame)
    return float(np.isin(frame.step[calls], used).sum() / len(used)) if used else 0.0


def _measure_gpu_communication(r: LaunchReport, frame: Frame, e: verdicts.Evidence, used: list[int] | None) -> None:
    """Collective kernels against the compute beside them in the time judged, stated where they run
    a twentieth of it; FSDP's units where a PyTorch trace shards its model."""
    r.gpu_communication = e.gpu_communication = gpu_communication(frame, r.judged_windows)
    if e.gpu_communication is None:
        return
    if e.gpu_communication.share >= GPU_COMMUNICATION_NOTE_SHARE:
        r.evidence.append(e.gpu_communication.evidence())
    if e.source == "torch":
        e.fsdp = fsdp_collectives(frame, used)


def _measure_gpu(r: LaunchReport, frame: Frame, e: verdicts.Evidence) -> None:
    bd = r.breakdown
    assert bd is not None
    ev = r.evidence
    ev.append(f"GPU idle {r.idle_share:.1%} of its {r.span_words}" if r.gpu_devices <= 1 else
              f"GPUs idle {r.idle_share:.1%} of their {r.span_words}")
    host_traced = bool(frame.rows(*HOST_ACTIVITY_KINDS).size)
    e.host_work_traced = host_work_recorded(frame)
    e.host_api_calls = int(frame.rows("runtime_api", "driver_api").size)
    # A median of no calls is no figure: where launches or kernels are missing, say so instead.
    if not r.kernel.count:
        ev.append("no kernel recorded: the GPU's busy time is copies and memsets"
                  + (f" ({r.launch_api.count} launch calls recorded)" if r.launch_api.count else ""))
    elif r.launch_api.count:
        ev.append(f"launch call median {r.launch_api.p50_ns / 1e3:.2f} µs vs kernel median {r.kernel.p50_ns / 1e3:.2f} µs "
                  f"({r.launch_api.count} launches, {r.kernel.count} kernels)")
    else:
        ev.append(f"kernel median {r.kernel.p50_ns / 1e3:.2f} µs ({r.kernel.count} kernels); no launch call recorded"
                  + ("" if host_traced else ": the trace holds the GPU's activity only, its host was not profiled"))
    if r.kernel.count:
        ev.append(f"{r.short_kernel_share:.0%} of kernels shorter than {r.short_kernel_ns / 1e3:.0f} µs")
    _measure_clock_skew(frame, e, ev)
    e.launch_p50_ns, e.kernel_p50_ns, e.kernels = r.launch_api.p50_ns, r.kernel.p50_ns, r.kernel.count
    e.graphed_share = _graph_launched_share(frame)
    loops = launch_loops(frame, classify_rows(frame))
    e.launch_loop_share = loops.enqueue_share
    e.launch_loop_op, e.launch_loop_per_call = short_name(loops.top_op), loops.top_per_call
    busy = bd.gpu_classes[bd.gpu_classes.view == "kernel"].groupby("class")["exclusive_ns"].sum()
    if len(busy):
        e.top_gpu_class, e.top_gpu_class_share = str(busy.idxmax()), float(busy.max() / max(busy.sum(), 1))
        e.cast_share = float(busy.get("cast", 0) / max(busy.sum(), 1))
        e.cast_gemm_share = float(busy.get("gemm", 0) / max(busy.sum(), 1))
    e.low_precision_share = _low_precision_share(frame)
    e.layout_share = _layout_share(frame)
    if e.layout_share >= verdicts.LAYOUT_SHARE:
        ev.append(f"{e.layout_share:.0%} of GPU kernel time converts tensor layouts (cuDNN's nchwToNhwc / "
                  "nhwcToNchw kernels around NHWC convolutions)")
    e.pageable_copy_share = pageable_share(frame)
    if e.low_precision_share >= verdicts.LOW_PRECISION_MOSTLY:
        ev.append(f"{e.low_precision_share:.0%} of GEMM/convolution/attention kernel time already runs in 16 bits or "
                  f"fewer (kernel names)")
    gap_total = int(r.gaps.dur_ns.sum()) if len(r.gaps) else 0
    if not gap_total:
        return
    by = {row.host_activity: int(row.total_ns) for row in r.gaps_by_host.itertuples()}
    top = max(by, key=lambda k: by[k])
    if not host_traced:  # "host idle" would be a fact the trace cannot hold
        ev.append("what the host did during the GPU's idle gaps is not in the trace (no host activity recorded)")
    elif not e.host_work_traced and top == "host_idle":
        ev.append(f"during idle gaps the host ran no recorded call {by[top] / gap_total:.0%} of the time (idle, or in "
                  "its own work, which the trace does not record)")
    else:
        ev.append(f"during idle gaps the host was mostly {top.replace('_', ' ')} ({by[top] / gap_total:.0%} of gap time)")
    e.sync_gap_share = by.get("synchronizing", 0) / gap_total
    gaps = r.gaps
    slow_ns = _measure_slow_launches(frame, r, e, ev, gap_total)
    # The per-launch cost is what launch-bound means: a slow call's time in the gaps is set apart.
    e.launch_gap_share = max(by.get("launching", 0) - slow_ns, 0) / gap_total
    e.gap_launching_share = max(int(gaps["launching_ns"].sum()) - slow_ns, 0) / gap_total
    e.gap_dispatch_share = int(gaps["framework_ns"].sum() + gaps["python_ns"].sum()) / gap_total
    e.host_idle_share = by.get("host_idle", 0) / gap_total
    e.copy_gap_share = by.get("data_transfer", 0) / gap_total
    host = bd.host[bd.host.step == -1]
    host_busy = int(host.busy_ns.sum()) if len(host) else 0
    e.sync_host_share = int(host.sync_ns.sum()) / host_busy if host_busy else 0.0
    loading = _data_loading(frame)
    e.loader_workers = loader_has_workers(frame)
    if loading[0].size:
        g_start = r.gaps.start_ns.to_numpy(np.int64)
        e.load_gap_share = intervals.overlap_total(*loading, g_start, g_start + r.gaps.dur_ns.to_numpy(np.int64)) / gap_total


# Kernel names that say 16-bit or narrower math: cuBLAS/cuDNN/CUTLASS tile names (h884, h1688, f16f16,
# bf16, e4m3), template arguments (__half, half_t, bfloat16), TensorRT and xmma fp16 kernels, and
# cuBLAS's Hopper nvjet kernels, whose type field spells A/B/C types a letter each (hsh: fp16 in and
# out with fp32 accumulate; tst, tss: bf16, the only nvjet kernels in bf16-autocast training steps on
# an H200, tests/data/h200; sss: fp32).
LOW_PRECISION = re.compile(r"f16|fp16|bf16|bfloat16|half|h884|h1688|h16816|hmma|e4m3|e5m2|fp8|int8|i8i8|"
                           r"nvjet_sm\d+_[a-z]*[hbeqt][a-z]*_", re.IGNORECASE)


def _low_precision_share(frame: Frame) -> float:
    """Share of GEMM/conv/attention/RNN kernel time spent in kernels named for 16-bit or narrower math."""
    classes = classify_rows(frame)  # cached on the frame: launch() classified it already
    kernels = frame.rows("gpu_kernel")
    math = [KERNEL_CLASSES.index(c) for c in verdicts.MATH_CLASSES]
    rows = kernels[byte_mask(classes.kernel[kernels], list(math))]
    total = int(frame.dur[rows].sum())
    if not total:
        return 0.0
    return float(frame.dur[rows][frame.named(rows, LOW_PRECISION)].sum()) / total


LAYOUT_CONVERSION = re.compile(r"nchwToNhwc|nhwcToNchw")  # cuDNN's layout-conversion kernels


def _layout_share(frame: Frame) -> float:
    """Share of GPU kernel time in cuDNN's layout conversions (NCHW tensors into its NHWC kernels and back)."""
    kernels = frame.rows("gpu_kernel")
    total = int(frame.dur[kernels].sum())
    return float(frame.dur[kernels[frame.named(kernels, LAYOUT_CONVERSION)]].sum()) / total if total else 0.0


# Kernel namespaces that name the framework which launched them (an nsys trace does not say it).
_TORCH_KERNELS = re.compile(r"\bat::|\bc10::")
_TF_KERNELS = re.compile(r"\btensorflow::|\bEigen::")


def _framework_from_kernels(frame: Frame, evidence: list[str]) -> str:
    """torch or tf when the kernels' namespaces say so and do not disagree; "" when unknown."""
    kernels = frame.rows("gpu_kernel")
    codes, counts = np.unique(frame.name_code[kernels], return_counts=True)
    torch_n = sum(int(n) for c, n in zip(codes, counts, strict=True) if c >= 0 and _TORCH_KERNELS.search(frame.names[c]))
    tf_n = sum(int(n) for c, n in zip(codes, counts, strict=True) if c >= 0 and _TF_KERNELS.search(frame.names[c]))
    if bool(torch_n) == bool(tf_n):
        return ""
    framework, count = ("torch", torch_n) if torch_n else ("tf", tf_n)
    evidence.append(f"framework: {'PyTorch' if framework == 'torch' else 'TensorFlow'}, from the namespaces of "
                    f"{count:,} of {kernels.size:,} kernels (the trace does not name it)")
    return framework


_XLA_WHILE = re.compile(r"^(wrapped_)?while(\.\d+)?$")  # XLA's while loop instruction (lax.scan, fori_loop)
# On a GPU, XLA runs a while loop from the host (each iteration's body a command buffer or its kernels)
# and records no while op: the loop shows in its kernels' op path, e.g. "name":"jit(lstm)/while".
_XLA_WHILE_KERNEL = r'"name":"[^"]*/while[/"]'


def _runs_xla_loop(frame: Frame, table: pa.Table) -> bool:
    """The XLA program runs a while loop (lax.scan, fori_loop): an op of its own on the CPU, or the op
    path of its kernels on a GPU."""
    if any(_XLA_WHILE.match(frame.names[c]) for c in distinct(frame.name_code[frame.mask("cpu_op")]) if c >= 0):
        return True
    kernels = frame.rows("gpu_kernel")
    if not kernels.size or "args" not in table.column_names:
        return False
    import pyarrow.compute as pc

    from tracekit.analyze.top_ops import args_text

    return bool(pc.any(pc.match_substring_regex(args_text(table, kernels), _XLA_WHILE_KERNEL)).as_py())


JAX_BLOCK = re.compile(r"(^|[\s.:$])block_until_ready$")  # JAX's Python frame "$api.py:2757 block_until_ready"


def _blocks_each_step(frame: Frame) -> bool:
    """JAX: the loop waits for its result (``block_until_ready``, recorded by the Python tracer) in at
    least half the marked steps, so no step's dispatch overlaps the device's work on the one before."""
    marked = np.unique(frame.step[frame.rows("step")])
    rows = frame.rows("python_function")
    blocking = rows[frame.named(rows, JAX_BLOCK)]
    if not marked.size or not blocking.size:
        return False
    blocked = np.unique(frame.step[blocking])
    return bool(np.isin(marked, blocked).sum() * 2 >= marked.size)


def _nested_dispatches_per_call(frame: Frame) -> float:
    """JAX dispatches (``PjitFunction(f)``) that run inside another one on the same thread, per
    outermost dispatch in the steps: a jitted function running op by op (under ``jax.disable_jit()``
    each primitive inside ``PjitFunction(update)`` is dispatched as its own computation): the median over
    the outermost calls, counting only nested calls of another name. A jitted call runs one executable
    and nests none; ``jax.pmap`` nests one or two of its own, and a first call traces once."""
    codes = [i for i, n in enumerate(frame.names) if n.startswith(("PjitFunction(", "PmapFunction("))]
    rows = np.flatnonzero(member_mask(frame.name_code, codes)) if codes else np.zeros(0, np.int64)
    rows = rows[frame.step[rows] >= 0]
    if not rows.size:
        return 0.0
    rows = rows[np.lexsort((-frame.end[rows], frame.start[rows], frame.thread_key[rows]))]
    reach = np.zeros(rows.size, np.int64)
    for part in np.split(np.arange(rows.size), np.flatnonzero(np.diff(frame.thread_key[rows])) + 1):
        reach[part] = np.maximum.accumulate(frame.end[rows[part]])
    first = np.r_[True, np.diff(frame.thread_key[rows]) != 0]
    enclosed = ~first & (frame.start[rows] < np.r_[np.int64(0), reach[:-1]])
    # Each row's outermost call; a call nested in one of its own name is the C++ fast path inside the
    # Python one, the same dispatch.
    owner = np.maximum.accumulate(np.where(enclosed, -1, np.arange(rows.size)))
    other = enclosed & (frame.name_code[rows] != frame.name_code[rows[owner]])
    nested = np.bincount(owner[other], minlength=rows.size)
    # A call that traces and compiles (a first call, a recompile) dispatches the functions it traces
    # through: not running op by op.
    outer = np.flatnonzero(~enclosed)
    building = [i for i, n in enumerate(frame.names) if GRAPH_BUILDING.match(n)]
    b_rows = np.flatnonzero(member_mask(frame.name_code, building)) if building else np.zeros(0, np.int64)
    starts = frame.start[rows[outer]]
    order = np.argsort(starts, kind="stable")
    at = np.searchsorted(starts[order], frame.start[b_rows], side="right") - 1
    inside = (at >= 0) & (frame.start[b_rows] < frame.end[rows[outer[order[np.maximum(at, 0)]]]])
    compiling = np.zeros(outer.size, bool)
    compiling[order[at[inside]]] = True
    counted = nested[outer[~compiling]]
    return float(np.median(counted)) if counted.size else 0.0


def _jit_calls_per_step(frame: Frame) -> tuple[float, bool]:
    """JAX dispatches of jitted functions (``PjitFunction(f)`` host events) per step (``_calls_per_step``)."""
    return _calls_per_step(frame, ("PjitFunction(", "PmapFunction("))


# What torch.compile's runtime records for one call of a compiled graph (torch 2.1+, and older).
# Calls of a torch.compile graph: the Dynamo region, or AOTAutograd's forward when no region encloses
# it. Not CompiledFunctionBackward: a training step's backward is the same graph's other half, run
# by autograd, not a second call.
_TORCH_COMPILED_CALLS = ("Torch-Compiled Region", "CompiledFunction")
_TORCH_COMPILED_NOT_CALLS = ("CompiledFunctionBackward",)


def _guard_checks(frame: Frame, used: list[int] | None) -> tuple[int, int]:
    """Own time and count of torch.compile's guard checks (``TorchDynamo Cache Lookup``, which Dynamo
    records before each call into a compiled function: its guards on the inputs and the Python state the
    graph read) in the steps used: framework overhead of the compiled calls themselves, which compiling
    more of the step in more graphs adds to."""
    calls, _ = calls_in_steps(frame, (_DYNAMO_GUARDS,), used)
    return int(op_self_time(frame, calls).sum()), int(calls.size)


_DYNAMO_GUARDS = "TorchDynamo Cache Lookup"
GUARD_NOTE_SHARE = 0.05  # guard checks taking this much of the step are said apart from dispatch


def _unrecorded_script_says(frame: Frame, rows: np.ndarray, frozen: bool) -> str:
    calls = ", ".join(sorted({frame.name(int(r)) for r in rows.tolist()}))
    per_call = float(op_self_time(frame, rows).mean())
    which = ("with aten::to_mkldnn among their ops: a model frozen for inference (torch.jit.optimize_for_inference), "
             "whose convolutions run as prim::mkldnn_convolution" if frozen else
             "such as a frozen model's oneDNN convolutions or fusion groups")
    return (f"the TorchScript calls ({calls}) take {per_call / 1e6:,.3f} ms of their own a call, "
            f"{UNRECORDED_OPS_PER_OP_NS / 1e3:.0f} µs or more for each op they record, where the interpreter costs about a "
            f"µs: their own time is ops TorchScript runs itself, which the profiler does not record ({which})")


def _torchscript_share(frame: Frame, used: list[int] | None) -> float:
    """Share of the step windows (the steps used; the ops' extent without steps) inside TorchScript calls."""
    ops = frame.rows("cpu_op")
    calls = ops[frame.named(ops, TORCHSCRIPT_CALLS)]
    if not calls.size:
        return 0.0
    w_start, w_end = _step_windows(frame, used)
    total = int((w_end - w_start).sum())
    inside = intervals.overlap_total(*intervals.union(frame.start[calls], frame.end[calls]), w_start, w_end)
    return inside / total if total else 0.0


def _calls_per_step(frame: Frame, prefixes: tuple[str, ...], not_prefixes: tuple[str, ...] = ()) -> tuple[float, bool]:
    """Outermost host events named with one of ``prefixes`` (and none of ``not_prefixes``) per marked
    step, or per instance of a repeated range that stands in for the step; and whether either was
    found (False: the count is the whole trace's, which may hold many steps)."""
    codes = [i for i, n in enumerate(frame.names) if n.startswith(prefixes) and not n.startswith(not_prefixes)]
    rows = np.flatnonzero(member_mask(frame.name_code, codes))
    # The dispatch can appear nested in itself (C++ fast path inside the Python call), at any depth
    # (jax.pmap's PjitFunction(_fun) runs PjitFunction(_multi_slice) under Python frames of its own):
    # count the outermost, those no earlier call on their thread still encloses.
    rows = rows[np.lexsort((-frame.end[rows], frame.start[rows], frame.thread_key[rows]))]
    reach = np.zeros(rows.size, np.int64)
    for part in np.split(np.arange(rows.size), np.flatnonzero(np.diff(frame.thread_key[rows])) + 1):
        if part.size:
            reach[part] = np.maximum.accumulate(frame.end[rows[part]])
    first = np.r_[True, np.diff(frame.thread_key[rows]) != 0] if rows.size else np.zeros(0, bool)
    enclosed = ~first & (frame.start[rows] < np.r_[np.int64(0), reach[:-1]])
    outer = rows[~enclosed]
    steps = frame.step[outer]
    marked = np.unique(frame.step[frame.rows("step")])
    if marked.size:
        return float((steps >= 0).sum() / marked.size), True
    instances = _repeated_enclosing_range(frame, outer)
    return (float(outer.size / instances), True) if instances else (float(outer.size), not outer.size)


def _repeated_enclosing_range(frame: Frame, rows: np.ndarray) -> int:
    """With no step marked: when every row lies in an instance of one user range name that repeats
    (``record_function("train_step")`` around each iteration), that range stands in for the step;
    its number of instances, else 0 (the whole trace is the only step there is)."""
    if not rows.size:
        return 0
    is_range = frame.mask("user_range")
    outermost = np.full(rows.size, -1, np.int64)
    cur = frame.parent[rows].copy()
    alive = np.flatnonzero(cur >= 0)
    while alive.size:
        hit = alive[is_range[cur[alive]]]
        outermost[hit] = cur[hit]
        cur[alive] = frame.parent[cur[alive]]
        alive = alive[cur[alive] >= 0]
    if (outermost < 0).any():
        return 0
    codes = np.unique(frame.name_code[outermost])
    if codes.size != 1:
        return 0
    instances = int((frame.name_code[frame.rows("user_range")] == codes[0]).sum())
    return instances if instances >= 2 else 0


# Keras's fit/evaluate/predict step functions, by the names TF gives their graphs (Keras 3, Keras 2).
_KERAS_FUNCTION = re.compile(r"__inference_(?:multi_step_on_\w+|one_step_on_\w+|train_function|test_function|predict_function)_\d+")
def _runs_keras_fit(frame: Frame) -> bool:
    """Whether Keras's fit/evaluate/predict step functions ran in the trace (TF's names for their graphs)."""
    return any(_KERAS_FUNCTION.search(n) for n in frame.names)


# A Keras LSTM/GRU layer's scope ("gru_1/while/...", in keras.layers.Bidirectional "forward_gru_1/while/...")
# as opposed to RNN(cell) ("rnn/while/...") or a raw loop. A layer given its own name is not told apart.
_KERAS_LAYER_LOOP = re.compile(r"(?:^|/)(?:forward_|backward_)?(?:lstm|gru|simple_rnn)(?:_\d+)?/while/")
_RECURRENT_WORD = re.compile(r"lstm|gru|rnn|cell", re.IGNORECASE)


# XLA running a whole compiled program (tf.function(jit_compile=True), Keras's jit_compile): its
# executable's run on XLA:CPU and XLA:GPU. Not TF's autoclustering (XlaLaunch / _XlaRun), which compiles
# parts of a graph.
_XLA_PROGRAM_RUN = re.compile(r"^(Cpu|Gpu)Executable::Execute\w*$")
_XLA_CLUSTER_RUN = re.compile(r"(?:^|:)_?(?:XlaRun|XlaLaunch)$")


def _runs_xla_program_each_step(frame: Frame, steps: StepStats | None) -> bool:
    """Whether an XLA program runs in at least half the steps used (TF: the step is jit-compiled)."""
    used = steps.used_step_numbers() if steps is not None and len(steps.steps) else []
    if not used:
        return False
    rows = frame.rows("cpu_op", "user_range", "other")
    runs = rows[frame.named(rows, _XLA_PROGRAM_RUN)]
    # Autoclustering (TF_XLA_FLAGS=--tf_xla_auto_jit) runs its clusters' executables inside _XlaRun ops,
    # beside the graph's other ops: parts of the step, not the step as one program.
    clusters = frame.name_mask(_XLA_CLUSTER_RUN)
    runs = runs[nearest_ancestor(frame.parent, runs, clusters) < 0] if clusters.any() else runs
    stepped = np.unique(frame.step[runs]) if runs.size else runs
    return 2 * int(member_mask(stepped, used).sum()) >= len(used)


def _recurrent_style(frame: Frame, steps: StepStats | None) -> str:
    """How the trace runs its recurrent layers (``verdicts`` styles), from its op names (and for a cell
    loop, what runs between its cells in the steps used)."""
    op_names = [frame.names[c] for c in distinct(frame.name_code[frame.mask("cpu_op")]) if c >= 0]
    cells = [n for n in op_names if n in RNN_CELL_OPS]
    used = steps.used_step_numbers() if steps is not None and len(steps.steps) else None
    if cells and (found := decoding(frame, used)) is not None and found.via:
        return verdicts.TORCH_CELL_DECODER
    if cells:
        unfused_on_cpu = all(n in CPU_UNFUSED_CELL_OPS for n in cells)
        return verdicts.TORCH_GRU_RNN_CELL_LOOP if unfused_on_cpu else verdicts.TORCH_CELL_LOOP
    if any(n in FUSED_RNN_OPS or n.endswith(FUSED_RNN_TF_SUFFIXES) for n in op_names):
        return verdicts.FUSED
    loops = [n for n in op_names if "while" in n and _RECURRENT_WORD.search(n)]
    if any(_KERAS_LAYER_LOOP.search(n) for n in loops):
        return verdicts.KERAS_WHILE_LAYER
    if loops and _tf_decoder(op_names):
        return verdicts.TF_CELL_DECODER
    return verdicts.TF_CELL_LOOP if loops else ""


# A TF decode loop (the cell decoder of tracekit.analyze.decoding, in a tf.while_loop): its body chooses
# indices from the output (tf.argmax, tf.math.top_k, tf.random.categorical) and reads by them (the next
# token's embedding), with no gradient in the trace and no read by position in the loop's own scope (a
# teacher-forced loop, trained or evaluated, reads its targets so).
_TF_CHOOSING = (":ArgMax", ":ArgMin", ":TopKV2", ":Multinomial", ":StatelessMultinomial")
_TF_READING = (":GatherV2", ":ResourceGather", ":GatherNd", ":OneHot")
_TF_GRADIENT_SCOPES = ("gradient_tape/", "gradients/")
_TF_POSITIONAL = (":StridedSlice", ":Slice", ":TensorListGetItem", ":TensorArrayReadV3")


def _tf_decoder(op_names: list[str]) -> bool:
    looped = [n for n in op_names if "/while/" in n or n.startswith("while/")]
    # Teacher forcing reads its next input from the target by position in the loop's own scope
    # ("while/strided_slice:StridedSlice" for target[:, t]); a layer's slices (gru_cell/strided_slice) are its own.
    by_position = any("/" not in n.rpartition("while/")[2].partition(":")[0] and n.endswith(_TF_POSITIONAL)
                      for n in looped)
    return (any(n.endswith(_TF_CHOOSING) for n in looped) and any(n.endswith(_TF_READING) for n in looped)
            and not by_position and not any(scope in n for n in op_names for scope in _TF_GRADIENT_SCOPES))


# A graph built again: TF (2.12 on) records each tracing of a tf.function as tf.function-graph_building;
# torch.compile each Dynamo compilation as entire_frame_compile (torch 2.5 on) around
# "_compile.compile_inner (dynamo_timed)" ("_compile.<locals>.compile_inner (dynamo_timed)" before);
# JAX each jit compilation as lower_sharding_computation (lowering to HLO) then backend_compile_and_load
# (backend_compile before jax 0.5), on every backend.
GRAPH_BUILDING = re.compile(r"^(tf\.function-graph_building|entire_frame_compile|"
                            r"_compile(\.<locals>)?\.compile_inner( \(dynamo_timed\))?|"
                            r"lower_sharding_computation|backend_compile(_and_load)?)$")


def _retracing(frame: Frame, used: list[int] | None) -> tuple[int, int, float]:
    """Of the steps used (marked ones only): in how many a tf.function was traced or a torch.compile
    function compiled again (``GRAPH_BUILDING``), of how many, and the share of their wall time spent
    doing it."""
    codes = [i for i, n in enumerate(frame.names) if GRAPH_BUILDING.match(n)]
    steps = frame.rows("step")
    if used is not None:
        steps = steps[member_mask(frame.step[steps], used)]
    if not codes or not steps.size:
        return 0, int(steps.size), 0.0
    rows = np.flatnonzero(member_mask(frame.name_code, codes))
    s_start, s_end = intervals.union(frame.start[steps], frame.end[steps])
    at = np.searchsorted(s_start, frame.start[rows], side="right") - 1
    inside = (at >= 0) & (frame.start[rows] < s_end[np.maximum(at, 0)])
    # Steps (by number) with a graph built in them.
    traced = np.unique(frame.step[rows[inside]]) if inside.any() else np.zeros(0, np.int64)
    traced = traced[member_mask(traced, frame.step[steps])]
    built = intervals.overlap_total(*intervals.union(frame.start[rows], frame.end[rows]), s_start, s_end)
    total = int((s_end - s_start).sum())
    return int(traced.size), int(np.unique(frame.step[steps]).size), built / total if total else 0.0


_WORKER_LOADER = re.compile(r"_MultiProcessingDataLoaderIter")


def loader_has_workers(frame: Frame) -> bool:
    """Whether the batch fetches are a DataLoader's with worker processes (num_workers > 0)."""
    fetches = data_loading_rows(frame)
    return bool(fetches.size) and bool(frame.named(fetches, _WORKER_LOADER).any())


_ITERATOR_MADE = re.compile(r"^(EagerLocalExecute: )?MakeIterator$")


def pipeline_builds(frame: Frame) -> int:
    """How many tf.data iterators the trace makes (MakeIterator calls) when building pipelines
    (``classify.PIPELINE_BUILD``) is at least half of the input pipeline's time on the host; else 0."""
    rows = data_loading_rows(frame)
    if not rows.size:
        return 0
    building = frame.named(rows, PIPELINE_BUILD)
    if not building.any():
        return 0
    b_start, b_end = intervals.union(frame.start[rows[building]], frame.end[rows[building]])
    built = int((b_end - b_start).sum())
    loading = intervals.union(frame.start[rows], frame.end[rows])
    if built * 2 < int((loading[1] - loading[0]).sum()):
        return 0
    made = int(frame.named(rows[building], _ITERATOR_MADE).sum())
    # Per call only where iterators are made about as often as steps run: one fit() over many steps
    # makes its iterator once (its first batch waits for it), which is no remedy's concern.
    steps = int(frame.rows("step").size)
    return 0 if steps and made * 2 < steps else made


def _data_loading(frame: Frame) -> tuple[np.ndarray, np.ndarray]:
    """Union of the host intervals spent fetching batches (DataLoader __next__, tf.data IteratorGetNext)."""
    rows = data_loading_rows(frame)
    return intervals.union(frame.start[rows], frame.end[rows])


def _between_steps(frame: Frame, used: list[int] | None) -> tuple[np.ndarray, np.ndarray]:
    """The stretches between consecutive steps (step N's end to step N+1's start), both used: where
    the steps are ranges a loop opens around part of each iteration (record_function("train_step"),
    TF's Trace("train", step_num=...) inside a `for batch in dataset` loop), the rest of the
    iteration, batch fetching included, lies here. Empty for back-to-back steps (ProfilerStep#N)."""
    rows = frame.rows("step")
    if used is not None:
        rows = rows[member_mask(frame.step[rows], used)]
    rows = rows[np.argsort(frame.start[rows], kind="stable")]
    if rows.size < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    g_start, g_end = frame.end[rows[:-1]], frame.start[rows[1:]]
    keep = (frame.step[rows[1:]] == frame.step[rows[:-1]] + 1) & (g_end > g_start)
    return g_start[keep], g_end[keep]


def _measure_between_steps(r: LaunchReport, frame: Frame, e: verdicts.Evidence, used: list[int] | None, span: int,
                           loading: tuple[np.ndarray, np.ndarray]) -> None:
    """CPU-only: the loop's time between its marked steps, what share of the loop it is and how much
    of it is batch fetching (``load_loop_share`` reads the steps and the time between them as one
    loop), stated when it is a tenth of the loop or more."""
    g_start, g_end = _between_steps(frame, used)
    between = int((g_end - g_start).sum())
    if not span:
        return
    if not between:
        r.step_cover = 1.0 if frame.rows("step").size >= 2 else None
        return
    s_start, s_end = _step_windows(frame, used)
    stepped = int((s_end - s_start).sum())  # wall time: ``span`` adds up the threads of a step
    loop = stepped + between
    r.step_cover = stepped / loop
    # What the loop's own thread does between steps: a tf.data pool prefetching beside it is not the loop.
    loop_threads = np.unique(frame.thread_key[frame.rows("step")])
    on_loop = member_mask(frame.thread_key, loop_threads)
    fetch_rows = data_loading_rows(frame)
    fetch_rows = fetch_rows[on_loop[fetch_rows]]
    fetching = intervals.overlap_total(frame.start[fetch_rows], frame.end[fetch_rows], g_start, g_end)
    e.between_step_share = between / loop
    e.load_loop_share = (intervals.overlap_total(*loading, s_start, s_end) + fetching) / loop
    if e.between_step_share < verdicts.SIDE_NOTE_SHARE:
        return
    ops = frame.rows("cpu_op")
    ops = ops[on_loop[ops]]
    # Ops outside the fetches: the fetch is itself an op call in TF's eager loop (EagerExecute).
    seg_s, seg_e, seg_c = intervals.priority_timeline(
        np.concatenate([frame.start[fetch_rows], frame.start[ops]]), np.concatenate([frame.end[fetch_rows], frame.end[ops]]),
        np.concatenate([np.zeros(fetch_rows.size, np.int8), np.ones(ops.size, np.int8)]), 2)
    in_ops = intervals.overlap_total(seg_s[seg_c == 1], seg_e[seg_c == 1], g_start, g_end)
    parts = [f"fetching batches {fetching / between:.0%}"] if fetching else []
    parts.append(f"in {'other ' if fetching else ''}framework ops {in_ops / between:.0%}")
    python = _python_between(frame, on_loop, g_start, g_end, between)
    if python:
        parts.append(python[0])
    # Nothing recorded for most of it (no op, no Python frame): callbacks, logging, checkpoints.
    untraced = not python and not fetching and 2 * in_ops < between
    if untraced:
        parts.append(f"with nothing traced {1 - in_ops / between:.0%}")
    r.evidence.append(f"the steps cover {1 - e.between_step_share:.0%} of the loop: between them "
                      f"({between / g_start.size / 1e6:,.2f} ms each, {g_start.size} gaps) the loop is "
                      + ", ".join(parts) + "; the steps' figures leave that time out")
    if python and e.between_step_share >= BETWEEN_MOSTLY and not fetching:
        r.remedies.append(f"most of the loop runs between its steps, in Python ({python[1]}): speed that up or "
                          "overlap it with the steps (prepare the next batch in a background thread or a DataLoader "
                          "with workers, tf.data's prefetch); the steps' own figures are a small part of the loop")
    elif untraced and e.between_step_share >= BETWEEN_MOSTLY:
        where = ("Keras's own loop and its callbacks' per-batch hooks (on_train_batch_end, on_predict_batch_end...: a "
                 "checkpoint or a log written every few batches)" if _runs_keras_fit(frame) else
                 "the loop's own Python (an environment's step, callbacks, logging, metrics, checkpoint writes)")
        r.remedies.append(f"most of the loop runs between its steps with no op or Python frame recorded: {where}, which "
                          "a Python-level profile names (py-spy, or the profiler's Python tracer: torch.profiler's "
                          "with_stack=True, TF's python_tracer_level=1); do per-batch work every N batches or per "
                          "epoch, or off the loop's thread; the steps' own figures are the smaller part of the loop "
                          "(a Keras fit saving its weights from a callback every 4 batches: 53% of the loop between "
                          "the steps)")


BETWEEN_MOSTLY = 0.5  # of the loop between the steps: the Python there is what to work on


def _python_between(frame: Frame, on_loop: np.ndarray, g_start: np.ndarray, g_end: np.ndarray,
                    between: int) -> tuple[str, str] | None:
    """The Python frames (a profile with Python stacks: JAX's by default, torch's with_stack) that run
    between the steps, each call inside one stretch: the outermost and the innermost of those holding
    half that time or more, as (an evidence phrase, their names); None without such frames."""
    rows = frame.rows("python_function")
    rows = rows[on_loop[rows]]
    if not rows.size or not g_start.size:
        return None
    at = np.searchsorted(g_start, frame.start[rows], side="right") - 1
    inside = (at >= 0) & (frame.end[rows] <= g_end[np.maximum(at, 0)])
    rows = rows[inside]
    if not rows.size:
        return None
    codes, index = np.unique(frame.name_code[rows], return_inverse=True)
    held = []
    for i, code in enumerate(codes.tolist()):
        mine = rows[index == i]
        u_start, u_end = intervals.union(frame.start[mine], frame.end[mine])
        time_ns = int((u_end - u_start).sum())
        if code >= 0 and 2 * time_ns >= between:
            held.append((float(frame.depth[mine].mean()), time_ns, frame.names[code].lstrip("$")))
    if not held:
        return None
    held.sort()
    outer, inner = held[0], held[-1]
    names = outer[2] if outer is inner else f"{outer[2]}, in {inner[2]}"
    where = "in native code called from Python" if NATIVE_CALL.search(inner[2]) else "in Python"
    return f"{where} {outer[1] / between:.0%} ({names})", names


def _communication(frame: Frame) -> tuple[np.ndarray, np.ndarray]:
    """Union of the host intervals inside collective communication (``classify.collective_rows``)."""
    rows = collective_rows(frame)
    return intervals.union(frame.start[rows], frame.end[rows])


def _collective_names(frame: Frame, windows: tuple[np.ndarray, np.ndarray], most: int = 3) -> str:
    """The collectives that start in the step windows, by their summed time (TF ops by op type:
    ``CollectiveReduceV2``, not each scoped instance), at most ``most``, comma-separated."""
    rows = collective_rows(frame)
    w_start, w_end = windows
    i = np.searchsorted(w_start, frame.start[rows], side="right") - 1
    rows = rows[(i >= 0) & (frame.start[rows] < w_end[np.maximum(i, 0)])]
    per_name: dict[str, int] = {}
    for code, ns in zip(frame.name_code[rows].tolist(), frame.dur[rows].tolist(), strict=True):
        name = frame.names[code] if code >= 0 else ""
        op_type = tf_base_op(name)  # TF op types are CamelCase; gloo:all_reduce keeps its prefix
        name = op_type if op_type[:1].isupper() or op_type[:2].lstrip("_")[:1].isupper() else name
        if instruction := HLO_INSTRUCTION.match(name):  # XLA's psum.7, all-reduce.3: the instruction, not its number
            name = instruction.group("kind")
        per_name[name] = per_name.get(name, 0) + int(ns)
    return ", ".join(n for n, _ in sorted(per_name.items(), key=lambda kv: -kv[1])[:most] if n)


def _step_windows(frame: Frame, used: list[int] | None) -> tuple[np.ndarray, np.ndarray]:
    rows = frame.rows("step")
    if used is not None:
        rows = rows[member_mask(frame.step[rows], used)]
    if rows.size == 0:  # no steps marked: the ops' extent
        ops = frame.rows("cpu_op")
        return np.array([frame.start[ops].min()]), np.array([frame.end[ops].max()])
    return intervals.union(frame.start[rows], frame.end[rows])


_GRAPH_LAUNCH = re.compile("GraphLaunch")  # cudaGraphLaunch, hipGraphLaunch, cuGraphLaunch


def _graph_launched_share(frame: Frame) -> float:
    """Share of kernels whose launch call is a CUDA/HIP graph launch (already graph-captured work)."""
    kernels = frame.rows("gpu_kernel")
    launcher = frame.launch_row[kernels]
    linked = launcher[launcher >= 0]
    if kernels.size == 0 or linked.size == 0:
        return 0.0
    return float(frame.named(linked, _GRAPH_LAUNCH).sum()) / kernels.size


__all__ = ["Distribution", "LaunchReport", "VERDICTS", "launch"]
