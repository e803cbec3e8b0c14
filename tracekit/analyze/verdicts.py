"""Verdict rules, kept as data: which bound a trace is, the evidence that says so, and what to do.

``launch()`` measures a trace into one ``Evidence`` record; ``judge`` walks ``RULES`` in order and
the first rule whose test holds gives the verdict, the sentence citing its evidence, and the
remedies. Each rule tests the figures it cites, so a rule never fires on evidence it does not have
(no kernels: no launch verdict; a host doing nothing during the GPU's gaps: no host-side verdict).
A new rule is one row here and one test on a real trace (``tests/test_verdicts.py``).

Remedies fit the trace's framework (``source``), its device and its recurrent style: a PyTorch
cell loop gets the fused layer; a Keras layer that runs as a ``tf.while_loop`` on CPU (cuDNN fusion
needs a GPU) gets XLA and ``unroll``; graph-replayed kernels get no CUDA-graph remedy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracekit.analyze.fsdp import FsdpCollectives
    from tracekit.analyze.gpu_communication import GpuCommunication
    from tracekit.analyze.tf_data import InputPipeline, PipelineWork

# Thresholds (shares in 0..1).
DISPATCH_SHARE = 0.5      # CPU-only: step time outside compute ops at or above this is framework-bound
CAST_NOTE_SHARE = 0.15    # casts this large a share of the step (CPU) or of GPU busy time are stated with a remedy
TORCHSCRIPT_MOSTLY = 0.5  # PyTorch: a step this much inside TorchScript functions runs in TorchScript already
DISPATCH_CLOSE_SHARE = 0.4  # CPU compute-bound with this much dispatch: framework time is close behind, said so
GUARD_SHARE = 0.1  # Dynamo's guard checks taking this much of a compiled step get a remedy of their own
DATA_LOADING_SHARE = 0.5  # batch fetching covers this much of the step (CPU) or of the GPU idle time
COMMUNICATION_SHARE = 0.5  # CPU-only: collective communication covers this much of the step
GPU_EXPOSED_SHARE = 0.25   # GPU: collective kernels with no compute beside them this much of the span (and the most)
GPU_EXPOSED_NOTE_SHARE = 0.1  # ... this much gets the communication remedy whatever the verdict
WAIT_SHARE = 0.5          # CPU-only: the loop's thread waits (Python sleep, lock, poll; a collective) this much of the step
RETRACE_SHARE = 0.1       # graph building (tf.function tracing) this much of the step time, in most steps: retracing
SIDE_NOTE_SHARE = 0.1     # CPU-only: data loading, communication or waiting this large is stated whatever the verdict
STALL_SHARE = 0.3         # CPU-only: stalled op calls (tracekit.analyze.stalls) lose this much of the step
HOST_IDLE_SHARE = 0.5     # a host-side verdict needs the host busy during most of the GPU's idle time
COPY_SHARE = 0.5          # host copying during this much of the GPU's idle time
LAUNCH_GAP_SHARE = 0.5    # launch calls during this much of the GPU's idle time
SYNC_SHARE = 0.3          # sync waits during this much of the idle time or of the host's busy time
GRAPHED_MOSTLY = 0.9      # kernels replayed from graph launches: nothing left to capture
GRAPHED_HALF = 0.5        # a compiled step with this many kernels from graph launches runs reduce-overhead already
LAUNCH_LOOP_MOSTLY = 0.5  # GPU enqueues from inside ops that loop over launches: a library's launch loop
LOW_PRECISION_MOSTLY = 0.5  # math kernel time already in fp16/bf16/fp8: no mixed-precision remedy
MATH_CLASSES = ("gemm", "rnn", "convolution", "attention")

VERDICTS = ("launch-bound", "GPU-bound", "sync-bound", "copy-bound", "data-loading-bound", "communication-bound",
            "CPU/framework-bound", "CPU compute-bound", "CPU-contended", "host-idle gaps", "undetermined")

# Recurrent styles (``Evidence.recurrent``).
TORCH_CELL_LOOP = "torch cell loop"          # aten::lstm_cell (with or without gru_cell / rnn_*_cell) per timestep
TORCH_GRU_RNN_CELL_LOOP = "torch gru/rnn cell loop"  # aten::gru_cell / rnn_*_cell only: no fused CPU layer for them
TORCH_LSTM_PER_TIMESTEP = "torch lstm layer per timestep"  # CPU aten::lstm without oneDNN's op (packed, float64, proj_size)
TORCH_CELL_DECODER = "torch cell decoder"    # a cell loop fed its own chosen output (tracekit.analyze.decoding)
KERAS_WHILE_LAYER = "keras while-loop layer"  # a Keras LSTM/GRU layer run as a tf.while_loop (not cuDNN)
TF_CELL_LOOP = "tf cell loop"                # keras.layers.RNN(cell) or a hand-written tf.while_loop cell
TF_CELL_DECODER = "tf cell decoder"          # a tf.while_loop cell fed its own chosen output (launch._tf_decoder)
FUSED = "fused"                              # one op for all timesteps (cuDNN, oneDNN, BlockLSTM)


@dataclass
class Evidence:
    """What ``launch()`` measured, as the rules read it. Shares in 0..1; times in ns."""

    source: str = ""           # the framework: torch, tf, jax or paddle; "" when the trace does not say (nsys)
    chrome_trace: bool = False  # trace events another tool wrote (viztracer): no framework's ops
    onnxruntime: bool = False   # ONNX Runtime's profile: node runs as ops, its executor between them
    # ORT: node runs x the fixed cost each pays in the profile (shortest run + shortest gap) over the step
    # time (``tracekit.analyze.onnxruntime_nodes``), and that cost per node in ns
    node_floor_share: float = 0.0
    node_floor_ns: float = 0.0
    node_runs_per_step: float = 0.0
    has_ops: bool = False      # framework ops recorded
    has_gpu: bool = False      # GPU activity recorded
    # The host's own work recorded: framework ops, Python frames, or (where a trace has no ops: nsys)
    # NVTX ranges. A trace of the GPU's activity and the host's GPU API calls alone (nsys -t cuda,
    # torch.profiler with only ProfilerActivity.CUDA) shows no host event in a gap whether the host
    # waited or dispatched: "host idle" and "dispatch" are then no evidence.
    host_work_traced: bool = True
    host_api_calls: int = 0    # the host's GPU API calls recorded (launches, syncs, copies)
    nsys: bool = False         # an Nsight Systems trace (its framework, if any, read from kernel names)
    # No GPU activity recorded, but the host launched GPU work or ran ops that run only on a GPU (a
    # profiler started without its GPU activities): what shows it, e.g. "63 kernel launch calls"
    unrecorded_gpu_work: str = ""
    intel_gpu: bool = False    # kernels launched through SYCL's Unified Runtime or Level Zero (PyTorch XPU)
    # CPU-only traces
    dispatch_share: float = 0.0  # step time outside any compute op, compiled graphs' own code left out
    compiled_code_share: float = 0.0  # step time in compiled graphs' own code (generated kernels or wrapper)
    guard_share: float = 0.0  # CPU traces: step time in Dynamo's guard checks (TorchDynamo Cache Lookup), part of dispatch
    load_step_share: float = 0.0  # step time with a batch fetch running
    between_step_share: float = 0.0  # of the loop (steps and the time between consecutive ones): between them
    load_loop_share: float = 0.0  # of the loop: a batch fetch running, in the steps or between them
    communication_step_share: float = 0.0  # step time inside collective communication (gloo / NCCL / c10d, TF's
    # collective ops)
    communication_ops: str = ""  # the collectives by time, e.g. "gloo:all_reduce" or "CollectiveReduceV2"
    fsdp: FsdpCollectives | None = None  # FSDP's units and collectives a step (tracekit.analyze.fsdp)
    gpu_communication: GpuCommunication | None = None  # GPU collective kernels (tracekit.analyze.gpu_communication)
    wait_step_share: float = 0.0  # step time the loop's thread waits (blocked Python frames, or idle during
    # another thread's collective), no compute op running (breakdown's waiting_ns)
    stall_step_share: float = 0.0  # step time lost in stalled op calls: the excess over the same call's median
    # in the other steps (tracekit.analyze.stalls)
    unclassified_work_share: float = 0.0  # of dispatch_share: inside long ops of no class (analyze.unclassified)
    unclassified_work_ops: str = ""  # those ops with their shares, e.g. "aten::_fft_r2c 37%, aten::_fft_c2r 9%"
    untyped_copies: bool = False  # among them PyTorch copy ops whose input types were not recorded
    # of dispatch_share: inside TF's graph executor with no op traced, at a host tracer level that leaves
    # inexpensive ops untraced (analyze.untraced_ops)
    untraced_op_share: float = 0.0
    ops_per_step: float | None = None  # framework ops per step used (None: not measured)
    # CPU-only: step time inside a batch fetch on the loop's thread with no compute op running and no
    # wait (breakdown's fetching_ns; not in dispatch_share), and step time inside compute ops (their union;
    # None: not measured, taken as what the other parts leave)
    fetch_step_share: float = 0.0
    compute_step_share: float | None = None
    loader_workers: bool = False  # the batch fetches are a multi-process DataLoader's (num_workers > 0)
    pipeline_builds: int = 0  # tf.data pipelines built (MakeIterator calls) when that is most of the loading time
    # TF: the tf.data pipeline's stages and its slowest, and the shares of the step time in which tf.data's
    # threads run ops, Python ops among them, and the other threads compute ops (analyze.tf_data)
    tf_input: InputPipeline | None = None
    pipeline_work: PipelineWork | None = None
    # Casts: CPU-only, cast ops' self time over the step time (GEMM ops' beside it); with a GPU, cast
    # kernels' share of GPU busy time (GEMM kernels' beside it)
    cast_share: float = 0.0
    cast_gemm_share: float = 0.0
    torchscript_share: float = 0.0  # PyTorch: step time inside TorchScript functions (a scripted or traced module)
    # GPU traces: shares of the GPU's idle (gap) time
    idle_share: float = 0.0
    idle_threshold: float = 0.3
    load_gap_share: float = 0.0
    host_idle_share: float = 0.0
    copy_gap_share: float = 0.0
    launch_gap_share: float = 0.0  # gaps whose main host activity is launching, by their length
    # Of the GPU's idle time, the host's time in each activity, every gap's pieces summed: launch calls,
    # and framework code with Python (dispatch). Which is larger says what paces the host's issuing.
    gap_launching_share: float = 0.0
    gap_dispatch_share: float = 0.0
    sync_gap_share: float = 0.0
    sync_host_share: float = 0.0  # of the host's busy time
    launch_p50_ns: float = 0.0
    kernel_p50_ns: float = 0.0
    kernels: int = 0
    graphed_share: float = 0.0  # kernels replayed from CUDA/HIP graph launches
    # GPU activities that start before the host call that launched them: impossible on one clock, so
    # the GPU's timestamps are offset from the host's (a clock conversion, or corrupt records)
    clock_skew_share: float = 0.0
    clock_skew_ns: float = 0.0  # the median of how far before their calls those activities start
    # Launch calls 100x the median call and 0.5 ms or more, run while the GPU idles: not launch overhead
    # (a kernel's module loaded at its first launch, or the thread stalled in the call)
    slow_launch_gap_share: float = 0.0  # of the GPU's idle time
    slow_launches: int = 0
    slow_launch_max_ns: int = 0
    launch_loop_share: float = 0.0  # GPU enqueues issued inside ops that issue many per call (a library's loop)
    launch_loop_op: str = ""        # the op issuing most of them, e.g. aten::_cudnn_rnn
    launch_loop_per_call: float = 0.0
    top_gpu_class: str = ""
    top_gpu_class_share: float = 0.0
    low_precision_share: float = 0.0  # of GEMM/conv/attention/RNN kernel time, kernels named for 16 bits or fewer
    layout_share: float = 0.0  # of GPU kernel time, cuDNN's NCHW <-> NHWC conversions (nchwToNhwcKernel)
    pageable_copy_share: float = 0.0  # of GPU copy time, copies from or to pageable memory (tracekit.analyze.copies)
    recurrent: str = ""  # one of the recurrent styles above, "" when no recurrent op
    recurrent_reasons: list[str] = field(default_factory=list)  # TORCH_LSTM_PER_TIMESTEP: why (tracekit.analyze.recurrent)
    jit_calls_per_step: float = 0.0  # JAX: jitted-function dispatches (PjitFunction) per step
    retrace_steps: int = 0  # TF: steps used in which a tf.function was traced (its graph built) again
    steps_judged: int = 0  # the steps used, when marked
    capture_ns: int = 0  # from the first recorded event to the last (metadata records aside)
    retrace_share: float = 0.0  # of the steps used: graph building (tf.function-graph_building)
    xla_loop: bool = False  # JAX: the step's XLA program runs a while loop (lax.scan, fori_loop) among its ops
    blocks_each_step: bool = False  # JAX: the loop waits for each step's result (block_until_ready)
    accumulation_cycle: int = 0  # the steps run periodic work every this many (gradient accumulation), else 0
    xla_program_steps: bool = False  # TF: the steps used run an XLA program (jit_compile): XLA's executable runs in each
    tf_eager_share: float = 0.0  # of the TF compute ops' time, in ops run eagerly (EagerExecute), one at a time
    keras_fit: bool = False  # TF: Keras's fit/evaluate/predict functions ran (multi_step_on_iterator, train_function)
    tf_function_steps: bool = False  # TF: the steps run a tf.function with many ops run eagerly beside it (tf_eager)
    tf_eager_types: str = ""  # TF: the op types run eagerly that take most of their time ("Mul 31%, AssignVariableOp 20%")
    jax_nested_dispatches: float = 0.0  # JAX: dispatches run inside a jitted call, per call (op by op: disable_jit)
    python_callback_share: float = 0.0  # of the step time, in Python called from the compiled program (TF's PyFunc, JAX's callbacks)
    no_xla_ops: str = ""  # TF: the string and lookup-table op types the step runs, which XLA cannot compile
    no_xla_share: float = 0.0  # ... and their share of the step time
    blocking_calls_per_step: float = 0.0  # GPU: synchronizing calls per step used (.item(), .cpu(), synchronize)
    compiled_calls_per_step: float = 0.0  # PyTorch: torch.compile graph calls (Torch-Compiled Region) per step
    aoti_calls_per_step: float = 0.0  # PyTorch: AOTInductor package runs per step, seen in Python stacks
    calls_per_step_known: bool = True  # False: no step marked, the calls counted are the whole trace's


@dataclass(frozen=True)
class Rule:
    """One verdict rule: ``test`` over the evidence; when it holds, ``says`` is the sentence citing the
    evidence (None: the general evidence suffices) and ``remedies`` what to try."""

    verdict: str
    test: Callable[[Evidence], bool]
    says: Callable[[Evidence], str | None] | None  # None, or a None result: nothing beyond the general evidence
    remedies: Callable[[Evidence], list[str]]
    why: str  # the rule in words, for the docs


FUSED_RNN_REMEDY = ("replace the per-timestep cell loop with the fused recurrent layer (nn.LSTM / nn.GRU / nn.RNN): "
                    "one op for all timesteps (oneDNN on CPU, cuDNN on GPU)")
# PyTorch's CPU GRU and RNN layers loop over the timesteps in C++, calling the cell's ops: only the
# LSTM has a fused CPU kernel (oneDNN's).
CPU_GRU_RNN_LAYER_REMEDY = ("replace the per-timestep cell loop with the recurrent layer (nn.GRU / nn.RNN): on a CPU "
                            "it is not one fused op (PyTorch's fused CPU kernel is the LSTM's) but a C++ loop over the "
                            "same ops, which saves the Python loop and makes the input GEMMs of all timesteps one; the "
                            "per-op dispatch stays, which a compiled loop (torch.compile, TorchScript) cuts")
# A decoder's loop cannot become the layer: each timestep's input is chosen from the last one's output.
CELL_DECODER_REMEDY = ("the cell loop generates (each timestep's input is chosen from the last one's output), so the "
                       "recurrent layer (nn.LSTM / nn.GRU), which takes every timestep's input at once, cannot replace "
                       "it; what widens its per-timestep GEMMs is more sequences (or beams) decoded at once, and what "
                       "cuts its per-op dispatch is compiling the decode step (torch.compile, TorchScript)")
TF_CELL_DECODER_REMEDY = ("the cell loop generates (each timestep's input is chosen from the last one's output: an "
                          "argmax, top_k or sampling op, then a gather of the embedding, inside the while loop), so "
                          "keras.layers.LSTM / GRU, which take every timestep's input at once, cannot replace it; "
                          "compile the decode loop with XLA (tf.function(jit_compile=True)), and decode more sequences "
                          "(or beams) at once to widen its per-timestep products")
TF_CELL_GPU_REMEDY = ("use keras.layers.LSTM / GRU instead of an RNN(cell) or hand-written while loop: with their "
                      "default arguments they run as one cuDNN op for all timesteps on a GPU")
TF_CELL_CPU_REMEDY = ("the cell runs per timestep in a tf.while_loop: compile the step with XLA "
                      "(tf.function(jit_compile=True)); for an LSTM, tf.raw_ops.BlockLSTMV2 runs all timesteps as one "
                      "op on CPU")
KERAS_GPU_FUSION_REMEDY = ("this Keras LSTM/GRU layer runs per timestep, not as one cuDNN op: keep the defaults that "
                           "cuDNN needs (activation tanh, recurrent_activation sigmoid, recurrent_dropout 0, "
                           "unroll False, use_bias True; GRU reset_after True) and run it on the GPU")
KERAS_CPU_LOOP_REMEDY = ("Keras runs LSTM/GRU on CPU as a per-timestep tf.while_loop (cuDNN fusion needs a GPU): "
                         "compile the step with XLA (model.compile(jit_compile=True)), or unroll=True for short "
                         "sequences")
DATA_LOADING_REMEDY = ("load batches in the background: DataLoader(num_workers>0, pin_memory=True, prefetch_factor), "
                       "or tf.data with prefetch; keep decoding and augmentation off the training thread")
CALLBACK_SHARE = 0.05  # of the step time in Python called from the compiled program: its own remedy
JAX_OP_BY_OP_DISPATCHES = 4  # dispatches inside each jitted call: it runs op by op (jax.pmap nests 1-2)
# A CPU compute-bound JAX step of this many jitted dispatches a step, with this much of it dispatch, is
# told to jit whole below the close-behind share: an optimizer update run op by op beside a jitted
# gradient (optax.adamw on a small CNN, 104 dispatches a step, 27-32% dispatch): 8.3-8.5 ms a step, 5.1-5.3
# ms with the whole step in one jax.jit (jax 0.10.2, 2-core Xeon).
JAX_SPLIT_DISPATCHES = 8
JAX_SPLIT_DISPATCH_SHARE = 0.2
# Most of a TF trace's compute ops run eagerly (EagerExecute, one op at a time): a custom loop without
# tf.function, or Keras with run_eagerly=True / tf.config.run_functions_eagerly(True). Measured (TF 2.21,
# Keras 3, 2-core Xeon): fit of a 64-256-256-10 MLP, 30.9 ms a batch with run_eagerly=True, 5.4 ms without.
TF_EAGER_SHARE = 0.5
TF_EAGER_REMEDY = ("the step's ops run eagerly, one at a time: run the step as a graph, with tf.function around a custom "
                   "step, and for Keras without run_eagerly=True in model.compile() or tf.config.run_functions_eagerly"
                   "(True) (fit of a small MLP on a CPU: 30.9 ms a batch eagerly, 5.4 ms as a graph); "
                   "tf.function(jit_compile=True) also fuses small kernels with XLA")
# TF's own pipeline: map in parallel and prefetch; a tf.py_function map holds the GIL whatever the parallelism.
TF_DATA_REMEDY = ("make tf.data load ahead and in parallel: dataset.map(fn, num_parallel_calls=tf.data.AUTOTUNE) and "
                  ".prefetch(tf.data.AUTOTUNE), .cache() a dataset that fits in memory; a tf.py_function in map holds "
                  "Python's GIL, so write the transform with TF ops to run it in parallel")
# Most of the input time is building pipelines: Keras's predict/fit/evaluate (or iter(dataset)) called per
# batch builds a pipeline and iterator, and traces its map functions, every call. Measured (TF 2.21, Keras 3,
# 2-core Xeon): model.predict on one sample 46 ms a call, model(x) 2.7 ms, predict_on_batch 1.25 ms.
PIPELINE_PER_CALL_REMEDY = ("build the input pipeline once, not per call: Keras's predict, fit and evaluate build a "
                            "tf.data pipeline and its iterator every call (46 ms for a one-sample predict on a CPU, "
                            "against 1.25 ms for predict_on_batch): for a batch at a time call model(x, training=False) "
                            "or model.predict_on_batch(x), or give predict all the samples in one call; in a custom "
                            "loop make the dataset and iter(dataset) once, outside the loop")
# The fetches are _MultiProcessingDataLoaderIter's: workers already load in the background and the loop
# still waits for them, so "num_workers>0" is done; what is left is more of them or less work per batch.
DATA_LOADING_WORKERS_REMEDY = ("the DataLoader already loads in worker processes and the loop still waits for them: "
                               "raise num_workers (and prefetch_factor), keep them with persistent_workers=True, "
                               "and make each sample cheaper to load (decode, augmentation, or batched reads)")
CLOCK_SKEW_SHARE = 0.5     # GPU activities starting before their launch calls: the clocks disagree
SLOW_LAUNCH_SHARE = 0.5    # of the GPU's idle time inside slow launch calls: a one-time load or a stall decides
SLOW_LAUNCH_REMEDY = ("profile the loop's steady steps, not its first: torch.profiler's schedule(wait=1, warmup=1, "
                      "active=3) or nsys --capture-range on a range after warm-up (a kernel's first launch loads its "
                      "module: CUDA's lazy loading, a ROCm code object; CUDA_MODULE_LOADING=EAGER loads them all at "
                      "start-up); if every step has such calls, the host thread is stalled inside them (CPU "
                      "contention, another thread holding the driver's lock)")
CLOCK_SKEW_REMEDY = ("the profiler converts the GPU's timestamps (CUPTI's, roctracer's) to the host's clock, and here "
                     "the conversion is off (kineto#1380, #1082): profile again, or compare with an nsys capture of "
                     "the same loop; until then read the GPU's own figures (its busy time and kernels), not what "
                     "the host did in its gaps")
HOST_IDLE_REMEDY = ("the GPU waits on something this trace does not show: data loading in other processes or threads, "
                    "other ranks (communication), I/O, or a profiler that traced only some threads; profile those")
COPY_REMEDY = ("the GPU waits while the host copies (cudaMemcpy, .to(device), .cpu(), .item()): copy from pinned "
               "memory with non_blocking=True, overlap copies on a side stream, or move them out of the step")
SYNC_REMEDY = ("remove synchronizations from the loop (.item(), .cpu(), printing tensors, cudaStreamSynchronize); "
               "use non_blocking copies from pinned memory")
MIXED_PRECISION_REMEDY = "use mixed precision (torch.autocast / keras mixed_float16) so GEMMs run on tensor cores"
JAX_BLOCKING_REMEDY = ("the loop waits for every step's result (block_until_ready): jitted calls dispatch "
                       "asynchronously, so wait only every few steps (or read metrics every N steps) and the next "
                       "step's dispatch runs while the device works on this one")
GPU_COPY_REMEDY = ("the GPU's busy time is memory copies: copy less (keep tensors on the device between steps, "
                   "move smaller dtypes) and overlap the copies with compute (non_blocking=True from pinned "
                   "memory, a side stream)")
GPU_COPY_REMEDY_PAGEABLE = ("the GPU's busy time is memory copies from pageable host memory, which the driver stages "
                            "through a pinned buffer at a fraction of the link's rate: copy from pinned memory "
                            "(pin_memory=True, tensor.pin_memory()) with non_blocking=True, and copy less")
PAGEABLE_MOSTLY = 0.5  # of GPU copy time from or to pageable memory: pinning is the remedy (one stray copy is not)
LAYOUT_SHARE = 0.05  # of GPU kernel time in layout conversions: worth a remedy
CHANNELS_LAST_REMEDY = ("keep activations in the layout the convolutions run in: cuDNN converts NCHW tensors to NHWC "
                        "and back around its convolutions; model.to(memory_format=torch.channels_last) and the same "
                        "for the input (Keras: data_format='channels_last') removes the conversion kernels")
GPU_BOUND_REMEDY = "the GPU is the bottleneck: optimize the top kernels (see `tracekit report`), or fuse elementwise work"
UNCLASSIFIED_WORK_REMEDY = ("find out what those ops do (the top ops table gives their calls and mean time): the "
                            "model's arithmetic is tuned like any compute op (thread count, a faster library); "
                            "slow framework calls take the dispatch remedies that follow")
# The level a capture with untraced inexpensive ops ran at: its expensive ops are traced (2 or more), its
# inexpensive ones not (below 3), whether its options record it or not (tracekit.analyze.untraced_ops).
TF_UNTRACED_LEVEL_WORDS = "host_tracer_level 2 (the default)"
# How to capture at level 3: TF 2.21's tf.profiler ignores ProfilerOptions (every capture runs at the
# defaults), so through a profiler server in the program and xprof's client (research/tf_profiler.md 2.3).
TF_LEVEL_3_REMEDY = ("to see the inexpensive ops, profile at host_tracer_level=3: "
                     "tf.profiler.experimental.ProfilerOptions(host_tracer_level=3) (TF 2.21's "
                     "tf.profiler.experimental.start ignores the options; there, start "
                     "tf.profiler.experimental.server.start(PORT) in the program and capture from another thread "
                     "with xprof's client, xprof.convert._pywrap_profiler_plugin.trace(\"localhost:PORT\", LOGDIR, "
                     "\"\", True, DURATION_MS, 3, {\"host_tracer_level\": 3}), as `tracekit collect tf --profiler "
                     "tf-host3` does)")
CPU_COMPUTE_REMEDY = "the time is in compute ops: look at the op breakdown (GEMM share, casts) and the thread count"
BATCH_REMEDY = "use larger batches so each launch and op does more work"
CPU_BATCH_REMEDY = "use larger batches so each op does more work"  # a CPU-only trace launches nothing
KERNEL_PROFILE_REMEDY = ("profile again with torch._inductor.config.cpp.enable_kernel_profile = True: Inductor's C++ "
                         "kernels then appear as graph_N_cpp_fused_* ops, and the compiled code splits into kernels "
                         "and wrapper")
AOTI_KERNEL_PROFILE_REMEDY = ("compile the AOTInductor package again with inductor_configs={'cpp.enable_kernel_profile': "
                              "True, 'profiler_mark_wrapper_call': True} (torch._inductor.aoti_compile_and_package): its "
                              "C++ kernels and the ATen calls it makes then appear as ops (graph_N_cpp_fused_*, "
                              "aoti_torch_cpu_*), inside an inductor_wrapper_call range, and its code splits into kernels "
                              "and wrapper")
WAIT_REMEDY = ("the loop waits on something outside its own work: another thread or process (a queue, data loading), "
               "I/O or a sleep; the waiting frames' callers (Python stacks) say what it waits for: profile that")
CONTENTION_REMEDY = ("give the loop's thread a core: keep the threads that run at once at or below the cores "
                     "(torch.set_num_threads / OMP_NUM_THREADS per process = cores / processes when several ranks or "
                     "jobs share a host; DataLoader workers count too), and look at the host's other load "
                     "(top, perf sched) and its memory (swapping, page faults) during the run")
TF_CONTENTION_REMEDY = ("give the ops' threads cores: keep TF's inter-op x intra-op threads at or below the cores "
                        "(tf.config.threading.set_inter_op_parallelism_threads / "
                        "set_intra_op_parallelism_threads, per process when several share a host), and look at the "
                        "host's other load (top, perf sched) and its memory (swapping, page faults) during the run")
ORT_GPU_ACTIVITY_REMEDY = ("ONNX Runtime's profile holds no GPU activity: profile the same run with Nsight Systems (nsys "
                           "profile -t cuda,nvtx,cudnn,cublas python app.py) and read its export with tracekit")
# Measured on a 2-core AMD EPYC, ORT 1.32, a 60-node model of 16-wide layers at batch 1, unprofiled.
ORT_DISPATCH_REMEDY = ("ONNX Runtime pays a fixed cost per node run (the executor, the thread pool's hand-offs): give "
                       "each run more work (batch several inputs into one run), keep graph_optimization_level at "
                       "ORT_ENABLE_ALL (its fusions cut nodes: 32 -> 28 µs a run for a 60-node model), and for a small "
                       "model set intra_op_num_threads=1 (28 -> 26 µs); export fewer, larger ops where the model allows")
# Measured on a 2-core AMD EPYC, Paddle 3.3.1, 20 blocks of Linear(16, 16), tanh, * 0.5, + x at batch 1.
PADDLE_STATIC_REMEDY = ("cut Paddle's per-op dygraph work (each op's infer_meta, autograd node creation and Python "
                        "call) by running the step as a static graph, paddle.jit.to_static(model), and time it both "
                        "ways: a 60-op model at batch 1 on a 2-core CPU ran inference in 0.29 ms against 0.37 ms in "
                        "dygraph, but training in 1.53 ms against 1.38 ms")
ORT_UNPROFILED_REMEDY = ("time InferenceSession.run with profiling off (time.perf_counter around a few hundred runs): "
                         "where it is far below the profiled step, the profile's split between node work and the time "
                         "between nodes is the profiler's, and the unprofiled time is the one to tune against")
GPU_ACTIVITY_REMEDY = ("profile again with the GPU's activities on: torch.profiler.profile(activities=[ProfilerActivity.CPU, "
                       "ProfilerActivity.CUDA]) (ProfilerActivity.XPU on Intel GPUs), or nsys profile -t cuda,nvtx")
# What records the host's own work, by the trace's source ("say what the GPU waited for").
HOST_ACTIVITY_REMEDIES = {
    "torch": "profile again with the host's activity on: torch.profiler.profile(activities=[ProfilerActivity.CPU, "
             "ProfilerActivity.CUDA]) records the ops (with_stack=True the Python) between the launch calls",
    "tf": "profile again with the host traced: tf.profiler.experimental.ProfilerOptions(host_tracer_level=2) records "
          "the ops between the launch calls",
    "jax": "profile again with the host traced (host_tracer_level=2 in jax.profiler's ProfileOptions): its dispatch "
           "and Python between the launches",
}
# An nsys trace: NVTX ranges, or the framework's own profiler (its framework read from kernel names).
NSYS_HOST_ACTIVITY_REMEDY = ("profile again with the host's own work recorded: NVTX ranges around the loop's work "
                             "with nsys profile -t cuda,nvtx{framework}")
NSYS_HOST_ACTIVITY_BY_FRAMEWORK = {
    "torch": " (torch.autograd.profiler.emit_nvtx() marks each op), or torch.profiler with ProfilerActivity.CPU on",
    "tf": ", or TensorFlow's own profiler (tf.profiler.experimental), which records the ops",
    "jax": ", or JAX's own profiler (jax.profiler), which records the dispatch",
    "": ", or the framework's own profiler with its host activity on (torch.profiler's ProfilerActivity.CPU, "
        "tf.profiler, jax.profiler)",
}


def _host_activity_remedy(e: Evidence) -> str:
    if e.nsys or e.source not in HOST_ACTIVITY_REMEDIES:
        return NSYS_HOST_ACTIVITY_REMEDY.format(
            framework=NSYS_HOST_ACTIVITY_BY_FRAMEWORK.get(e.source, NSYS_HOST_ACTIVITY_BY_FRAMEWORK[""]))
    return HOST_ACTIVITY_REMEDIES[e.source]


TF_GPU_ACTIVITY_REMEDY = ("profile again with the GPU traced: tf.profiler.experimental.ProfilerOptions(device_tracer_level=1) "
                          "(the default), on a TensorFlow build with CUDA and CUPTI on the library path")
_COMMUNICATION_REMEDY = ("the step waits on collective communication: overlap it with compute (DDP all-reduces gradient "
                         "buckets during the backward pass; tune bucket_cap_mb), communicate less often ({less_often}), "
                         "or send less (a DDP communication hook that compresses gradients). A collective also waits "
                         "for the slowest rank: if other ranks' traces spend less time in it, one rank holds the others "
                         "up (uneven work or data per rank; `tracekit ingest` the ranks' traces into a dataset: its "
                         "report names the rank that joins last)")
COMMUNICATION_REMEDY = _COMMUNICATION_REMEDY.format(less_often="gradient accumulation under no_sync()")
_GPU_COMMUNICATION_REMEDY = ("collective kernels run on the GPU with no compute beside them: overlap them with compute "
                             "({overlap}), communicate less often (gradient accumulation: {less_often}), or send less "
                             "({send_less}). A collective kernel's time includes waiting for the slowest rank: if the "
                             "same collectives run shorter on other ranks, this one waits for a slower one (uneven work "
                             "or data per rank; `tracekit ingest` the ranks' traces into a dataset: its report names "
                             "the rank that joins last)")
_TORCH_GPU_OVERLAP = ("DDP all-reduces gradient buckets during the backward pass on NCCL's stream: a smaller bucket_cap_mb "
                      "starts the first sooner and leaves less for the last bucket, which runs after the backward")
_TORCH_GPU_SEND_LESS = "a DDP communication hook: bf16_compress_hook / fp16_compress_hook"
TORCH_GPU_COMMUNICATION_REMEDY = _GPU_COMMUNICATION_REMEDY.format(
    overlap=_TORCH_GPU_OVERLAP, less_often="several micro-batches under no_sync()", send_less=_TORCH_GPU_SEND_LESS)
GPU_COMMUNICATION_REMEDY = _GPU_COMMUNICATION_REMEDY.format(
    overlap="gradients reduced in buckets as the backward pass produces them; tf.distribute: "
            "CommunicationOptions(bytes_per_pack=...); XLA: its collective combiner thresholds",
    less_often="fewer reductions per sample, a larger batch per replica",
    send_less="gradients reduced in bf16")
POINT_TO_POINT_REMEDY = ("send/recv kernels (pipeline stages passing activations and gradients, or an all-to-all of "
                         "sharded embeddings) run with no compute beside them: overlap them with other micro-batches' "
                         "compute (more micro-batches per step, an interleaved pipeline schedule; TorchRec's "
                         "TrainPipelineSparseDist runs the next batch's embedding all-to-all during this batch's "
                         "compute) and balance the stages: a send/recv kernel runs until its peer joins, so its time "
                         "includes the peer's lateness (`tracekit ingest` the ranks' traces into a dataset: its "
                         "report names the rank that joins last)")
TF_RETRACE_REMEDY = ("stop the retracing: call the tf.function with tensors of a fixed dtype and shape, not Python "
                     "numbers, strings or new objects (each distinct Python value is a new trace and a new graph); "
                     "give it an input_signature, or reduce_retracing=True where shapes vary. TF's log warns about "
                     "\"triggered tf.function retracing\" and names the function")
TORCH_RECOMPILE_REMEDY = ("stop the recompiles: TORCH_LOGS=recompiles names the guard that fails; pass tensors, not "
                          "Python numbers that change (or mark what varies dynamic: torch.compile(dynamic=True), "
                          "torch._dynamo.mark_dynamic), and keep shapes steady (pad to a few sizes). After "
                          "torch._dynamo.config.cache_size_limit recompiles the function runs eagerly")
TF_XLA_ALREADY_REMEDY = ("the step already runs as one XLA program (jit_compile): what is left is TF's work around each "
                         "call (the function call, the input iterator, the Python between calls) and each XLA op's fixed "
                         "cost; give each call more work: a larger batch, or model.compile(steps_per_execution=N) so one "
                         "call runs N batches")
JAX_RECOMPILE_REMEDY = ("stop the recompiles: call the jitted function with inputs of steady shapes and dtypes (pad "
                        "varying lengths to a few sizes) and few distinct values of its static arguments; "
                        "JAX_LOG_COMPILES=1 logs each compilation and jax.config.update('jax_explain_cache_misses', "
                        "True) says what changed")
JAX_COMMUNICATION_REMEDY = ("the step waits on XLA's collectives (psum / all-reduce between devices): fewer, larger ones "
                            "(reduce the gradients once per step as one tree, not op by op), a larger batch per device, "
                            "and no more devices on one host than its cores compute at once "
                            "(--xla_force_host_platform_device_count on CPU). A collective also waits for the slowest "
                            "device: uneven work per device holds the others up")
TF_COMMUNICATION_REMEDY = ("the step waits on tf.distribute's collectives (CollectiveReduceV2: the gradients' all-reduce "
                           "between replicas): send fewer, larger ones (MultiWorkerMirroredStrategy(communication_options="
                           "tf.distribute.experimental.CommunicationOptions(bytes_per_pack=...)); MirroredStrategy's "
                           "cross_device_ops picks how replicas on one host reduce), communicate less often "
                           "(a larger batch per replica), and run no more replicas on one host than its cores can "
                           "compute at once. A collective also waits for the slowest replica: uneven work per replica "
                           "or another job on its cores holds the others up")


# How to give each reason up (tracekit.analyze.recurrent names them).
_LSTM_FUSED_FIXES = {
    "its input is a PackedSequence": ("pass the padded batch instead (each sequence's last output is output[length - 1]; "
                                      "a bidirectional layer's reverse direction would read the padding first)"),
    "its input is float64": "keep the layer and its input in float32 (or bfloat16)",
    "the layer has a projection (proj_size)": ("a layer without proj_size runs fused (a Linear after it is another model: "
                                               "the projected state feeds the recurrence)"),
}


def _lstm_per_timestep_remedy(reasons: list[str]) -> str:
    why = ("; ".join(f"{r}: {_LSTM_FUSED_FIXES[r]}" for r in reasons) if reasons else
           "the trace does not show why (record_shapes=True records the inputs that tell)")
    return ("nn.LSTM runs here as PyTorch's own loop of ops per timestep, not as oneDNN's one fused op, which on a CPU "
            f"takes a padded float32/bfloat16 batch and no proj_size; {why}")


def recurrent_remedies(e: Evidence) -> list[str]:
    """The remedy for the trace's recurrent style, on its device; none for fused layers."""
    if e.recurrent == TORCH_CELL_LOOP or (e.recurrent == TORCH_GRU_RNN_CELL_LOOP and e.has_gpu):
        return [FUSED_RNN_REMEDY]
    if e.recurrent == TORCH_GRU_RNN_CELL_LOOP:
        return [CPU_GRU_RNN_LAYER_REMEDY]
    if e.recurrent == TORCH_CELL_DECODER:
        return [CELL_DECODER_REMEDY]
    if e.recurrent == TORCH_LSTM_PER_TIMESTEP:
        return [_lstm_per_timestep_remedy(e.recurrent_reasons)]
    if e.recurrent == TF_CELL_LOOP:
        return [TF_CELL_GPU_REMEDY] if e.has_gpu else [TF_CELL_CPU_REMEDY]
    if e.recurrent == TF_CELL_DECODER:
        return [TF_CELL_DECODER_REMEDY]
    if e.recurrent == KERAS_WHILE_LAYER:
        return [KERAS_GPU_FUSION_REMEDY] if e.has_gpu else [KERAS_CPU_LOOP_REMEDY]
    return []


def _graph(e: Evidence, article: str = "a") -> str:
    """The device's graph, for remedies: Intel GPUs replay XPU graphs, NVIDIA and AMD ones CUDA (HIP) graphs."""
    if e.intel_gpu:
        return f"{'an' if article == 'a' else article} XPU graph"
    return f"{article} CUDA graph"


def _capture_caveat(e: Evidence) -> str:
    """What must leave the step before one graph can hold it: its blocking calls."""
    if e.blocking_calls_per_step < 1:
        return ""
    return (f"; first take the step's {e.blocking_calls_per_step:.0f} synchronizing calls out of it (.item(), .cpu(), "
            "torch.cuda.synchronize()): a capture cannot hold them, and they split it")


def _graph_apis(e: Evidence) -> str:
    """How PyTorch captures one (torch.compile's reduce-overhead mode replays CUDA graphs only)."""
    return "torch.xpu.graph" if e.intel_gpu else "torch.compile(mode=\"reduce-overhead\") or torch.cuda.graphs"


def _compile_remedies(e: Evidence, launch_bound: bool) -> list[str]:
    """How to cut per-op cost in the trace's framework; no CUDA-graph remedy for work already replayed
    from graphs."""
    if e.onnxruntime:
        return [ORT_DISPATCH_REMEDY]
    if e.source == "paddle":
        return [PADDLE_STATIC_REMEDY]
    if e.source == "tf" and e.xla_program_steps:
        return [TF_XLA_ALREADY_REMEDY]
    if e.source == "tf" and e.tf_eager_share >= TF_EAGER_SHARE and not e.tf_function_steps:
        # Which ops: a tf.function step beside an eager loop of variable updates is found by them.
        return [TF_EAGER_REMEDY + (f" (the eager ops, by their time: {e.tf_eager_types})" if e.tf_eager_types else "")]
    if e.source == "tf" and e.python_callback_share:
        return [f"the step calls Python from its graph (tf.py_function / tf.numpy_function: PyFunc ops, "
                f"{e.python_callback_share:.0%} of the step time), which XLA cannot compile (jit_compile fails on it): write "
                "that part with TF ops, then run the step with XLA, tf.function(jit_compile=True), which also fuses "
                "small kernels"]
    if e.source == "tf" and e.no_xla_ops:
        return [f"the step runs string and lookup-table ops ({e.no_xla_ops}: {e.no_xla_share:.0%} of the step time), "
                "which XLA cannot compile (Keras then runs the step without XLA, even with jit_compile=True): do that "
                "preprocessing in the tf.data pipeline (dataset.map(text_vectorization), as Keras documents for its "
                "preprocessing layers in training), then run the step with XLA, jit_compile=True (a Keras text "
                "classifier on 2 CPU cores: 2.3-2.7 ms a batch with TextVectorization in the model, 1.7-1.8 ms with it "
                "in tf.data and XLA)"]
    if e.source == "tf":
        if e.keras_fit:
            return ["run the step as a graph with XLA: model.compile(jit_compile=True) for Keras's fit, evaluate and "
                    "predict (its default, 'auto', leaves XLA off on a CPU-only machine and under tf.distribute), "
                    "tf.function(jit_compile=True) around a custom step, which also fuses small kernels"]
        return ["run the step as a graph with XLA: tf.function(jit_compile=True), which also fuses small kernels"]
    if e.source == "jax" and e.jax_nested_dispatches >= JAX_OP_BY_OP_DISPATCHES:
        return [f"the jitted step runs op by op: each of its primitives is dispatched as a computation of its own "
                f"({e.jax_nested_dispatches:.0f} inside each jitted call), as under jax.disable_jit(), JAX_DISABLE_JIT=1 "
                "or jax.config.update(\"jax_disable_jit\", True): turn that off (a small update: 9.4 ms a step op by op, "
                "46 µs jitted)"]
    if e.source == "jax" and e.python_callback_share >= CALLBACK_SHARE:
        return [f"the jitted step calls back into Python ({e.python_callback_share:.0%} of the step time): "
                "jax.debug.print, jax.debug.callback, jax.pure_callback and io_callback leave the compiled program "
                "for the host each call; take them out of the step, or print every N steps outside the jitted "
                "function (a small update: 392 µs a step with one jax.debug.print, 48 µs without)"]
    if e.source == "jax" and e.jit_calls_per_step > 1 and not e.calls_per_step_known:
        return [f"the trace makes {e.jit_calls_per_step:.0f} jitted-function dispatches and marks no steps: if one step "
                "makes several, jax.jit the whole step (with jax.vmap for loops over samples, lax.scan for loops over "
                "timesteps)"]
    if e.source == "jax" and e.jit_calls_per_step > 1:
        return [f"jax.jit the whole step (one XLA computation instead of {e.jit_calls_per_step:.0f} dispatches), "
                "with jax.vmap for loops over samples and lax.scan for loops over timesteps"]
    # JAX dispatches asynchronously: a loop that waits for every step's result keeps the next step's
    # dispatch from overlapping the device's work on this one.
    blocking = ([JAX_BLOCKING_REMEDY] if e.source == "jax" and e.blocks_each_step else [])
    if e.source == "jax" and e.xla_loop:
        return [*blocking, "the step is already one jitted call: cut XLA's per-iteration loop overhead with "
                "lax.scan(..., unroll=k) or fuse more work per iteration"]
    if e.source == "jax":
        # No while loop in its program: scan's unroll has nothing to unroll.
        return [*blocking, "the step is already one jitted call: what is left is the Python dispatch around it and "
                "the fixed cost of each XLA op; give each call more work (a larger batch, several steps per call "
                "with lax.scan over batches)"]
    if e.source not in ("torch", ""):
        return []
    if e.source == "" and launch_bound:  # the framework is unknown (an nsys trace of unnamed kernels)
        return [f"capture the repeated kernel sequence in {_graph(e)} and fuse small kernels with the framework's "
                "compiler (torch.compile, tf.function(jit_compile=True), jax.jit)"]
    if e.source == "":
        return ["cut per-op dispatch with the framework's compiler (torch.compile, tf.function(jit_compile=True), "
                "jax.jit)"]
    if launch_bound and e.launch_loop_share >= LAUNCH_LOOP_MOSTLY:
        # The kernels come from inside one library call: nothing to fuse or dispatch less at the framework level.
        return [f"capture the step in {_graph(e)} ({_graph_apis(e)}): replay skips {e.launch_loop_op}'s per-kernel host "
                f"work{_capture_caveat(e)}"]
    if e.aoti_calls_per_step:
        # An exported model already runs as compiled code: what dispatch is left is the Python around it.
        return ([f"the step runs an AOTInductor package, but {e.dispatch_share:.0%} of it is framework dispatch and "
                 "Python outside it: export more of the step into the package"]
                if e.dispatch_share >= DISPATCH_CLOSE_SHARE else [])
    if e.compiled_calls_per_step > 1 and not e.calls_per_step_known:
        # A trace of five training iterations with no step marked calls its graph five times, once a step.
        return [f"the trace calls a torch.compile graph {e.compiled_calls_per_step:.0f} times and marks no steps "
                "(torch.profiler's schedule and prof.step() mark them): if one step calls it several times (a loop "
                "over timesteps or layers around the compiled function), compile that loop so one graph covers the step"]
    if e.compiled_calls_per_step > 1:
        # Already compiled, but the compiled graph is called over and over (a per-timestep loop around it).
        return [f"the step calls a torch.compile graph {e.compiled_calls_per_step:.0f} times: compile the whole loop "
                "(the function that iterates, not its body) so one graph covers the step"
                + (", with mode=\"reduce-overhead\" to replay it as a CUDA graph" if e.has_gpu and not e.intel_gpu else "")]
    if launch_bound and e.graphed_share:
        return ([f"capture the part of the step still launched kernel by kernel in {_graph(e, 'the')} too"]
                if e.graphed_share < GRAPHED_MOSTLY else [])
    if e.compiled_calls_per_step:
        if e.has_gpu and e.graphed_share >= GRAPHED_HALF:
            # mode="reduce-overhead" already: what the host still spends is outside the replayed graph.
            return [f"the step's torch.compile graph already replays as {_graph(e)} ({e.graphed_share:.0%} of kernels "
                    "from graph launches): the host time left is outside it, in the eager code around the compiled "
                    "region (optimizer step, loss) and the graph's own per-call Python; compile those into it too, "
                    f"or capture the whole step in {_graph(e, 'one')} "
                    f"({'torch.xpu.graph' if e.intel_gpu else 'torch.cuda.graph'}){_capture_caveat(e)}"]
        # On the CPU there is no CUDA graph to replay it as.
        if e.intel_gpu:
            return [f"the step already runs as a torch.compile graph: capture it in {_graph(e)} ({_graph_apis(e)})"]
        if e.has_gpu:
            return ["the step already runs as a torch.compile graph: mode=\"reduce-overhead\" replays it as a CUDA graph"]
        # Part of the step compiled (its optimizer step, one module), the rest dispatched op by op.
        guarded = [] if e.guard_share < GUARD_SHARE else [
            f"Dynamo's guard checks before each compiled call take {e.guard_share:.0%} of the step: fewer compiled calls "
            "check fewer guards (compile the step as one function, without graph breaks), and once it is warm "
            "torch.compiler.set_stance(skip_guard_eval_unsafe=True) runs only the guards that tell its graphs apart "
            "(unsafe where an input changes in a way only a skipped guard would catch; Keras 3's jit_compile=True "
            "train step of a 3-layer MLP on the torch backend, 18 compiled calls a step: 4.1 -> 3.2 ms)"]
        outside = e.dispatch_share - e.guard_share
        return ([f"the step runs a torch.compile graph, but {outside:.0%} of it is still framework dispatch "
                 "outside it: compile the rest of the step too (the model's forward and backward and the loss, or the "
                 "whole training step in one function); each compiled call has a fixed cost on the CPU (tens of µs: "
                 "Dynamo's guards, the AOT wrapper), which a step of small ops may not win back, so time it"]
                if outside >= DISPATCH_CLOSE_SHARE else []) + guarded
    if launch_bound:
        return [f"capture the step in {_graph(e)}: {_graph_apis(e)}{_capture_caveat(e)}",
                _torch_compiler_remedy(e, "fuse elementwise ops")]
    if e.has_gpu:
        # Replaying a captured graph skips the ops' dispatch along with their launches.
        return [_torch_compiler_remedy(e, "cut per-op dispatch"),
                f"capture the step in {_graph(e)} ({_graph_apis(e)}): its replay skips the ops' dispatch as well "
                f"as their launches{_capture_caveat(e)}"]
    return [_torch_compiler_remedy(e, "cut per-op dispatch")]


def _torch_compiler_remedy(e: Evidence, goal: str) -> str:
    """``goal`` with PyTorch's compilers; TorchScript is not offered to a step that already runs in it."""
    if e.torchscript_share >= TORCHSCRIPT_MOSTLY:
        return (f"{goal}: the step already runs in TorchScript ({e.torchscript_share:.0%} of it), whose interpreter "
                "still dispatches op by op: torch.compile generates fused code instead")
    return f"{goal}: torch.compile or TorchScript (torch.jit.script)"


def _host_bound_remedies(launch_bound: bool) -> Callable[[Evidence], list[str]]:
    def remedies(e: Evidence) -> list[str]:
        return [*recurrent_remedies(e), *_compile_remedies(e, launch_bound),
                BATCH_REMEDY if e.has_gpu else CPU_BATCH_REMEDY]
    return remedies


def untyped_copies_hint(e: Evidence) -> str:
    """For unclassified work that holds copy ops recorded without input types: how to tell casts apart."""
    if not e.untyped_copies:
        return ""
    return ("; the copies (aten::copy_ under aten::to) may be dtype casts, autocast's among them: their input types, "
            "which profile(record_shapes=True) records, tell a cast from a copy")


def unclassified_work_decides(e: Evidence) -> bool:
    """CPU/framework-bound only with the long ops of no class counted as dispatch."""
    return not e.has_gpu and e.dispatch_share >= DISPATCH_SHARE > e.dispatch_share - e.unclassified_work_share


def untraced_ops_decide(e: Evidence) -> bool:
    """CPU/framework-bound only with the time inside TF's executor with no op traced counted as dispatch:
    were it the inexpensive ops the capture's tracer level leaves untraced, it would be compute."""
    if e.has_gpu or not e.untraced_op_share:
        return False

    def framework(dispatch: float, compute: float) -> bool:
        return dispatch >= DISPATCH_SHARE or _largest(e, dispatch, compute, e.fetch_step_share, e.wait_step_share)
    moved = e.untraced_op_share
    return framework(e.dispatch_share, _compute_share(e)) and not framework(e.dispatch_share - moved,
                                                                            _compute_share(e) + moved)


def untraced_ops_says(e: Evidence) -> str:
    """What the time inside TF's executor with no op traced is (evidence line, and the undetermined verdict's)."""
    return (f"{e.untraced_op_share:.0%} of step time counted as dispatch is inside TF's graph executor with no op "
            f"traced: at {TF_UNTRACED_LEVEL_WORDS} TF records only the ops it deems expensive, so this is the "
            "inexpensive ops the executor runs inline (small elementwise ops, loop control: Merge, Switch, "
            "NextIteration) and its own scheduling together, which the trace does not split")


def _largest(e: Evidence, part: float, *others: float) -> bool:
    """``part`` of the step time is more than each of ``others`` with compiled graphs' own code (kernels or
    wrapper, not split by the trace) added to either side."""
    return all(part > other + e.compiled_code_share for other in others)


def _compute_share(e: Evidence) -> float:
    """Step time inside compute ops: measured, or else what dispatch, compiled code, waiting and
    fetching leave."""
    if e.compute_step_share is not None:
        return e.compute_step_share
    return max(1.0 - e.dispatch_share - e.compiled_code_share - e.wait_step_share - e.fetch_step_share, 0.0)


def _dispatch_largest_says(e: Evidence) -> str | None:
    if e.dispatch_share >= DISPATCH_SHARE:
        return None  # the evidence already says how much of the step is outside compute ops
    others = [f"compute ops ({_compute_share(e):.0%})"]
    others += [f"batch fetching ({e.fetch_step_share:.0%})"] if e.fetch_step_share else []
    others += [f"waiting ({e.wait_step_share:.0%})"] if e.wait_step_share else []
    return f"framework dispatch takes {e.dispatch_share:.0%} of the step time, more than " + " or ".join(others)


def _pipeline_outworks_model(e: Evidence) -> bool:
    """tf.data's threads run ops during half the step time or more, longer than the step's own compute
    ops run: on a CPU the input pipeline's work takes the cores (and its Python the GIL) the step needs,
    even where the batches are ready (prefetched) when fetched. A from_generator source doing 6 ms of
    Python a batch: its ops ran during 91% of a 7 ms step, the model's 5%; a parallel map of TF ops
    (FFTs): 69%, the model's 9%, the fetches themselves 48%."""
    w = e.pipeline_work
    if w is None or w.work < DATA_LOADING_SHARE or w.work <= w.model:
        return False
    # Mostly Python: the loop is held only through the GIL, seen as its time outside any op.
    return w.python * 2 < w.work or e.dispatch_share >= DATA_LOADING_SHARE


def _loading_remedies(e: Evidence) -> list[str]:
    if e.pipeline_builds:
        return [PIPELINE_PER_CALL_REMEDY]
    if e.loader_workers:
        return [DATA_LOADING_WORKERS_REMEDY]
    if e.source == "tf" and e.tf_input is not None:
        return [e.tf_input.remedy()]
    return [TF_DATA_REMEDY if e.source == "tf" else DATA_LOADING_REMEDY]


def _loading_says(e: Evidence) -> str:
    fetch = {"tf": "tf.data's IteratorGetNext", "torch": "the DataLoader's __next__"}.get(
        e.source, "the DataLoader's __next__ / IteratorGetNext")
    what = (f"building tf.data pipelines and their iterators ({e.pipeline_builds} MakeIterator calls) with the "
            "batch fetches" if e.pipeline_builds else fetch)
    pipeline = f"; {e.tf_input.says()}" if e.source == "tf" and e.tf_input is not None and not e.pipeline_builds else ""
    if max(e.load_step_share, e.load_loop_share) < DATA_LOADING_SHARE and _pipeline_outworks_model(e):
        w = e.pipeline_work
        assert w is not None
        python = (f", Python ops {w.python:.0%}, which hold the GIL the loop's own Python needs where they compute "
                  "(not where they sleep or wait on I/O: the trace does not say which)" if w.python * 2 >= w.work else "")
        return (f"tf.data's threads run the input pipeline's ops during {w.work:.0%} of the step time{python}; the "
                f"step's own compute ops run during {w.model:.0%}: the pipeline's work takes the CPU the step needs "
                f"({what} itself runs during {e.load_step_share:.0%}){pipeline}")
    if e.load_loop_share > e.load_step_share:
        return (f"{what} runs during {share_below(e.load_loop_share, DATA_LOADING_SHARE)} of the loop (the "
                f"steps and the time between them; the steps are {1 - e.between_step_share:.0%} of it){pipeline}")
    return f"{what} runs during {share_below(e.load_step_share, DATA_LOADING_SHARE)} of the step time{pipeline}"


def _communication_says(e: Evidence) -> str:
    fsdp = f" ({e.fsdp.says()})" if e.fsdp is not None else ""
    return (f"collective communication ({e.communication_ops or 'gloo / NCCL / c10d calls'}) runs during "
            f"{share_below(e.communication_step_share, COMMUNICATION_SHARE)} of the step time{fsdp}")


def _communication_remedies(e: Evidence) -> list[str]:
    """The framework's communication remedy; a loop that already all-reduces once every k micro-batches
    (``accumulation_cycle``) is not told to start accumulating."""
    if e.source in ("tf", "jax"):
        return [TF_COMMUNICATION_REMEDY if e.source == "tf" else JAX_COMMUNICATION_REMEDY]
    if e.fsdp is not None:  # DDP's buckets and no_sync() are not FSDP's
        return [e.fsdp.remedy()]
    if e.accumulation_cycle:
        return [_COMMUNICATION_REMEDY.format(less_often=f"the loop already all-reduces once every "
                                                        f"{e.accumulation_cycle} micro-batches: more of them under "
                                                        "no_sync(), or larger ones")]
    return [COMMUNICATION_REMEDY]


def gpu_communication_remedy(e: Evidence) -> str:
    """The remedy for collective kernels a GPU runs alone: FSDP's, send/recv's, or the framework's."""
    found = e.gpu_communication
    if e.fsdp is not None:
        return e.fsdp.remedy()
    if found is not None and found.point_to_point:
        return POINT_TO_POINT_REMEDY
    if e.source == "torch" and e.accumulation_cycle:  # already accumulating: not told to start
        return _GPU_COMMUNICATION_REMEDY.format(
            overlap=_TORCH_GPU_OVERLAP, send_less=_TORCH_GPU_SEND_LESS,
            less_often=f"the loop already reduces once every {e.accumulation_cycle} micro-batches: more of them under "
                       "no_sync()")
    return TORCH_GPU_COMMUNICATION_REMEDY if e.source == "torch" else GPU_COMMUNICATION_REMEDY


def gpu_communication_note(e: Evidence, verdict: str) -> str | None:
    """The communication remedy for a GPU trace whose collectives run alone 10% of the span or more
    where another verdict (idle gaps, launches) was given; None where the verdict's remedies have it."""
    if verdict in ("communication-bound", "GPU-bound") or _gpu_exposed(e) < GPU_EXPOSED_NOTE_SHARE:
        return None
    return gpu_communication_remedy(e)


def _gpu_exposed(e: Evidence) -> float:
    return e.gpu_communication.exposed_share if e.gpu_communication is not None else 0.0


def _gpu_communication_bound(e: Evidence) -> bool:
    """Collective kernels alone on the GPU (no compute kernel beside them) are the largest part of the
    span: more than compute alone and than idle time."""
    found = e.gpu_communication
    return (e.has_gpu and found is not None and found.exposed_share >= GPU_EXPOSED_SHARE
            and found.exposed_share >= max(found.compute_only_share, e.idle_share))


def _gpu_communication_says(e: Evidence) -> str:
    found = e.gpu_communication
    assert found is not None
    fsdp = f" ({e.fsdp.says()})" if e.fsdp is not None else ""
    return (f"collective kernels ({found.names()}) run with no compute kernel beside them during "
            f"{found.exposed_share:.0%} of the GPU span, more than compute alone ({found.compute_only_share:.0%}) or "
            f"idle time ({e.idle_share:.0%}){fsdp}")


def _wait_says(e: Evidence) -> str:
    return (f"the loop's thread waits (blocked in Python: a sleep, lock, poll or join; or idle while another thread "
            f"runs a collective) during {share_below(e.wait_step_share, WAIT_SHARE)} of the step time, with no compute op "
            "running")


def side_notes(e: Evidence, verdict: str) -> list[str]:
    """CPU-only: batch fetching, collective communication and waiting that cover a tenth of the step
    or more but did not decide the verdict, stated beside it (a rank that spends 36% of its step in
    all-reduces is worth saying whatever else bounds it)."""
    if e.has_gpu:
        return []
    notes = []
    for share, says, decides, threshold in ((max(e.load_step_share, e.load_loop_share), _loading_says, "data-loading-bound",
                                             DATA_LOADING_SHARE),
                                            (e.communication_step_share, _communication_says, "communication-bound",
                                             COMMUNICATION_SHARE),
                                            (e.wait_step_share, _wait_says, "host-idle gaps", WAIT_SHARE)):
        # Waiting counts the loop's idle time during other threads' collectives: said once, as
        # communication, unless the waits go beyond it.
        stated = e.communication_step_share if e.communication_step_share >= SIDE_NOTE_SHARE else 0.0
        if decides == "host-idle gaps" and share <= stated:
            continue
        if share >= SIDE_NOTE_SHARE and verdict != decides:
            notes.append(f"{says(e)} ({decides} from {threshold:.0%})")
    return notes


# Mixed precision casts fp32 weights to the low-precision dtype inside the step: torch.autocast on
# every forward (its cast cache lasts one autocast region), Keras mixed_float16 on every variable read.
# The trace shows the casts, not who asked for them: the remedies say where each source applies.
TORCH_CAST_REMEDY = ("cut the dtype casts: torch.autocast casts the fp32 weights again in every step; for inference "
                     "keep the model in the low-precision dtype (model.to(torch.bfloat16)), and torch.compile fuses "
                     "casts, autocast's or explicit .to(dtype) ones, into the ops that read them")
TF_CAST_REMEDY = ("cut the dtype casts: a mixed-precision policy casts the fp32 variables on every read; XLA "
                  "(jit_compile=True) fuses casts into the ops that read them")
CAST_REMEDY = "cut the dtype casts: cast weights once, not every step, or let the framework's compiler fuse them"


def cast_note(e: Evidence) -> tuple[str | None, str | None]:
    """Casts that take ``CAST_NOTE_SHARE`` of the step (CPU) or of GPU busy time, whatever the verdict:
    a sentence with the figure, and a remedy for the trace's framework."""
    if e.cast_share < CAST_NOTE_SHARE:
        return None, None
    if e.has_gpu:
        says = (f"cast kernels (dtype conversions) take {e.cast_share:.0%} of GPU busy time, against "
                f"{e.cast_gemm_share:.0%} in GEMM kernels")
    else:
        # Self time summed over threads: TF's executor runs ops on several, so it is no part of the span.
        says = (f"cast ops (dtype conversions) take {e.cast_share:.0%} of step time in self time summed over threads, "
                f"against {e.cast_gemm_share:.0%} in GEMM ops")
    return says, {"torch": TORCH_CAST_REMEDY, "tf": TF_CAST_REMEDY}.get(e.source, CAST_REMEDY)


def _retrace_says(e: Evidence) -> str:
    if e.source == "jax":
        return (f"a jitted function is compiled again (XLA's lowering and backend_compile) in {e.retrace_steps} of "
                f"{e.steps_judged} steps, {e.retrace_share:.0%} of step time: its inputs' shapes, dtypes or static "
                "arguments change from call to call")
    if e.source == "torch":
        return (f"torch.compile compiles again (Dynamo's entire_frame_compile) in {e.retrace_steps} of "
                f"{e.steps_judged} steps, {e.retrace_share:.0%} of step time: its guards fail on most calls")
    return (f"a tf.function's graph is built again (tf.function-graph_building) in {e.retrace_steps} of "
            f"{e.steps_judged} steps, {e.retrace_share:.0%} of step time: it is retraced on most calls")


def _retraces(e: Evidence) -> bool:
    return (e.retrace_steps >= max(2, e.steps_judged / 2) and e.retrace_share >= RETRACE_SHARE)


def share_below(share: float, threshold: float) -> str:
    """A share under a threshold, as a percentage that does not round up to it (49.6% is not "50%"
    beside "CPU/framework-bound from 50%")."""
    for digits in (0, 1, 2):
        text = f"{share:.{digits}%}"
        if share >= threshold or text != f"{threshold:.{digits}%}":
            return text
    return text


def _split_jax_step(e: Evidence) -> bool:
    """A JAX step of many jitted dispatches with a fifth of its time or more in dispatch (``JAX_SPLIT_*``)."""
    return (e.source == "jax" and e.calls_per_step_known and e.jit_calls_per_step >= JAX_SPLIT_DISPATCHES
            and e.dispatch_share >= JAX_SPLIT_DISPATCH_SHARE)


def _close_to_framework_bound(e: Evidence) -> str | None:
    """A compute-bound verdict near the dispatch threshold: both halves of the step matter."""
    if e.dispatch_share < DISPATCH_CLOSE_SHARE and _split_jax_step(e):
        return (f"the step makes {e.jit_calls_per_step:.0f} jitted-function dispatches (functions jitted apart, or "
                f"primitives run outside jax.jit one computation each), and {e.dispatch_share:.0%} of it is dispatch")
    if e.dispatch_share < DISPATCH_CLOSE_SHARE:
        return None
    return (f"framework dispatch is close behind at {share_below(e.dispatch_share, DISPATCH_SHARE)} of step time "
            f"(CPU/framework-bound from {DISPATCH_SHARE:.0%}), so its remedies apply too")


def _cpu_compute_remedies(e: Evidence) -> list[str]:
    remedies = [*recurrent_remedies(e), CPU_COMPUTE_REMEDY]
    if e.dispatch_share >= DISPATCH_CLOSE_SHARE or _split_jax_step(e):
        remedies += [r for r in _host_bound_remedies(False)(e) if r not in remedies]
    return remedies


def _launch_bound_says(e: Evidence) -> str:
    """The condition that made the trace launch-bound, in words (and what graphs already cover)."""
    if e.launch_p50_ns >= e.kernel_p50_ns:
        text = (f"the median launch call ({e.launch_p50_ns / 1e3:.2f} µs) takes at least as long as the median kernel "
                f"({e.kernel_p50_ns / 1e3:.2f} µs): the host cannot issue kernels as fast as the GPU finishes them")
        if e.gap_launching_share:
            text += (f", and it launches during {e.gap_launching_share:.0%} of the GPU's idle time against "
                     f"{e.gap_dispatch_share:.0%} in framework code and Python")
    else:
        text = f"launch calls run during {e.launch_gap_share:.0%} of the GPU's idle time"
    if e.graphed_share:
        text += f"; {e.graphed_share:.0%} of kernels already replay from CUDA/HIP graph launches"
    if e.launch_loop_share >= LAUNCH_LOOP_MOSTLY:
        text += (f"; {e.launch_loop_share:.0%} of GPU enqueues come from inside {e.launch_loop_op} "
                 f"({e.launch_loop_per_call:.0f} per call): the library, not framework dispatch, issues them")
    return text


def _launches_bind(e: Evidence) -> bool:
    """The launch calls pace the host: they take most of the GPU's idle time, or kernels are shorter
    than their launches and the host spends no more of the idle time dispatching than launching.
    Where dispatch outweighs the launches, kernels shorter than launches still leave the host's pace set
    by its framework work: removing the launch calls alone would recover little of the idle time."""
    if e.kernels == 0:
        return False
    if e.launch_gap_share >= LAUNCH_GAP_SHARE:
        return True
    # Dispatch not recorded is no evidence that launching outweighs it.
    return e.launch_p50_ns >= e.kernel_p50_ns and e.gap_launching_share >= e.gap_dispatch_share and e.host_work_traced


def _slow_launches_says(e: Evidence) -> str:
    calls = (f"1 launch call of {e.slow_launch_max_ns / 1e6:,.2f} ms runs" if e.slow_launches == 1 else
             f"{e.slow_launches:,} launch calls of up to {e.slow_launch_max_ns / 1e6:,.2f} ms run")
    return (f"{calls} during {e.slow_launch_gap_share:.0%} of the "
            "GPU's idle time: not the per-launch cost a CUDA graph or fewer kernels would remove, but a one-time load "
            "(a kernel's first launch loads its module) or the thread stalled in the call, so what paces the loop's "
            "steady steps is not in this window")


def _host_work_untraced_says(e: Evidence) -> str:
    recorded = (f"the host's GPU API calls only ({e.host_api_calls:,}), not its framework ops, NVTX ranges or Python"
                if e.host_api_calls else "none of the host's activity")
    return (f"the GPU idles {e.idle_share:.0%} of its span and the trace records {recorded}: whether the host was "
            "dispatching, loading data or waiting in the gaps is not in it")


def _framework_says(e: Evidence) -> str | None:
    """On a GPU trace, how the host's time in the GPU's idle gaps splits between dispatch and launches."""
    if not e.has_gpu or not e.gap_dispatch_share:
        return None
    text = (f"over every idle gap, framework code and Python run during {e.gap_dispatch_share:.0%} of the GPU's "
            f"idle time, launch calls during {e.gap_launching_share:.0%}")
    if e.kernels and e.launch_p50_ns >= e.kernel_p50_ns:
        text += (f": the median kernel ({e.kernel_p50_ns / 1e3:.2f} µs) is shorter than the median launch call "
                 f"({e.launch_p50_ns / 1e3:.2f} µs), but the host spends longer dispatching each op than launching "
                 "it, so dispatch sets the pace")
    return text


def _gpu_bound_remedies(e: Evidence) -> list[str]:
    if e.top_gpu_class == "memcpy":  # a GPU busy copying: kernel work is not what to optimize
        return [GPU_COPY_REMEDY_PAGEABLE if e.pageable_copy_share >= PAGEABLE_MOSTLY else GPU_COPY_REMEDY]
    # Collectives left alone on the GPU: their remedy before the generic one (first where they lead the
    # busy time: no kernel remedy comes before it then).
    talking = [gpu_communication_remedy(e)] if _gpu_exposed(e) >= GPU_EXPOSED_NOTE_SHARE else []
    return ([MIXED_PRECISION_REMEDY] if e.top_gpu_class in MATH_CLASSES
            and e.low_precision_share < LOW_PRECISION_MOSTLY else []) + \
        ([CHANNELS_LAST_REMEDY] if e.layout_share >= LAYOUT_SHARE else []) + talking + [GPU_BOUND_REMEDY]


# A torch.profiler capture that recorded for less than this and holds no op recorded nothing that ran:
# no iteration of a model is this short, but the stretch a schedule's profiler records after its last
# cycle (0.19 ms in tests/data/cpu/empty_cycle_ended, 0.1-0.3 ms in others made alike) is.
SHORT_CAPTURE_NS = 1_000_000


def _nothing_recorded_says(e: Evidence) -> str:
    text = "no framework ops and no GPU activity recorded: nothing to judge"
    if e.chrome_trace:  # viztracer's: trace events of no framework tracekit reads
        return text + (" (a Chrome trace from another tool: tracekit reads framework ops from torch.profiler's, the TF "
                       "and JAX profilers', ONNX Runtime's and Nsight Systems' traces, and finds none here)")
    if e.onnxruntime:  # ORT profiles from the session's creation: its loading is there, runs or not
        return text + (" (an ONNX Runtime profile without a node run: the session was loaded and initialized, but "
                       "not run before end_profiling)")
    if e.source != "torch":
        return text + " (was the profiler attached to the work, with CPU/CUDA activities on?)"
    if e.capture_ns < SHORT_CAPTURE_NS:
        # With a schedule, each finished cycle's events go to on_trace_ready and are cleared
        # (torch/profiler/profiler.py): an export after the loop holds only what the profiler
        # recorded since, often nothing.
        return text + (f"; the capture recorded for {e.capture_ns / 1e6:.2f} ms: nothing ran under it, or, with a "
                       "schedule, it was exported after its last cycle had ended: torch.profiler hands each finished "
                       "cycle's events to on_trace_ready and clears them, so export_chrome_trace after the loop writes "
                       "only what followed; export from on_trace_ready (torch.profiler.tensorboard_trace_handler(dir), "
                       "or a function that calls prof.export_chrome_trace)")
    # torch.profiler's op callbacks are thread-local: the capture ran, the work ran elsewhere.
    return text + (f"; the capture recorded for {e.capture_ns / 1e6:.1f} ms"
                   f"{', its steps marked,' if e.steps_judged else ''} but holds no op: was the profiler attached to "
                   "the work, with CPU/CUDA activities on? torch.profiler records the thread that entered it (and the "
                   "autograd threads PyTorch starts), not ops run on Python threads of your own")


# ORT: the share of the step the per-node fixed cost makes, from which the profile is the profiler's (the
# verdict is undetermined) and from which it is said beside the verdict.
ORT_PROFILER_SHARE = 0.5
ORT_PROFILER_NOTE_SHARE = 0.1


def _node_floor_says(e: Evidence) -> str:
    return (f"every node run of this ONNX Runtime profile pays at least {e.node_floor_ns / 1e3:.1f} µs (its shortest "
            f"run and its shortest gap to the next), and {e.node_runs_per_step:.0f} node runs a step make that "
            f"{e.node_floor_share:.0%} of the step time")


def node_floor_note(e: Evidence) -> str:
    """The ORT profiler's per-node cost said beside a verdict it does not decide; "" below the note's share."""
    if not e.onnxruntime or not ORT_PROFILER_NOTE_SHARE <= e.node_floor_share < ORT_PROFILER_SHARE:
        return ""
    return (_node_floor_says(e) + ": ONNX Runtime's profiler adds a fixed cost to each node it records (7-8 µs a node "
            "on a 2-core AMD EPYC: a 4-node MLP ran 105 µs unprofiled, 137 µs profiled), so the unprofiled run is "
            "faster and less of it is per-node cost than this profile shows")


def _unrecorded_gpu_work_says(e: Evidence) -> str:
    return (f"the trace holds no GPU activity, but the program ran on a GPU ({e.unrecorded_gpu_work}): the profiler "
            "recorded the host only, so its ops' time is launching and waiting, not compute, and the GPU's own "
            "time is missing; nothing can be judged from it")


def _gap(e: Evidence) -> bool:
    """A GPU trace whose GPU idles at least ``idle_threshold`` of its span."""
    return e.has_gpu and e.idle_share >= e.idle_threshold


RULES: tuple[Rule, ...] = (
    Rule("undetermined", lambda e: not e.has_ops and not e.has_gpu, _nothing_recorded_says,
         lambda e: [], "no framework ops and no GPU activity: nothing to judge"),
    Rule("data-loading-bound",
         lambda e: not e.has_gpu and (max(e.load_step_share, e.load_loop_share) >= DATA_LOADING_SHARE
                                      or _pipeline_outworks_model(e)), _loading_says,
         _loading_remedies, "CPU-only: batch fetching covers at least half the step time, or tf.data's threads run "
         "ops during half of it, longer than the step's own compute ops"),
    Rule("communication-bound", lambda e: not e.has_gpu and e.communication_step_share >= COMMUNICATION_SHARE,
         _communication_says, _communication_remedies,
         "CPU-only: collective communication covers at least half the step time"),
    # A GPU program profiled without its GPU activities: its ops' host time is launching, not compute,
    # and the GPU's time is not in the trace; no CPU-only rule applies.
    Rule("undetermined", lambda e: not e.has_gpu and bool(e.unrecorded_gpu_work), _unrecorded_gpu_work_says,
         lambda e: [TF_GPU_ACTIVITY_REMEDY if e.source == "tf" else ORT_GPU_ACTIVITY_REMEDY if e.onnxruntime
                    else GPU_ACTIVITY_REMEDY],
         "no GPU activity recorded, but the host launched GPU work (launch calls) or ran ops that run only on a "
         "GPU (cuDNN/MIOpen ops)"),
    # Time outside compute ops is dispatch only where ops run: a step with none is spent elsewhere.
    Rule("undetermined", lambda e: not e.has_gpu and e.ops_per_step == 0,
         lambda e: "no framework op runs in the steps used: their time is outside the framework (Python, waits, "
                   "I/O), which this trace does not break down",
         lambda e: [], "CPU-only: no framework op runs in the steps used"),
    # ONNX Runtime's profiler records each node inside its run and after it: where the node count times
    # the shortest run and gap is most of the step, the profile is the profiler's, not the model's.
    Rule("undetermined", lambda e: not e.has_gpu and e.onnxruntime and e.node_floor_share >= ORT_PROFILER_SHARE,
         lambda e: _node_floor_says(e) + ": the split below is mostly ONNX Runtime's profiler, which records each "
                   "node (its shapes, memory and thread-pool statistics) inside its run and after it, not the model",
         lambda e: [ORT_UNPROFILED_REMEDY, ORT_DISPATCH_REMEDY],
         "ONNX Runtime: the node runs per step times the shortest node run and gap (the fixed cost the profiler adds "
         "to each) make at least half the step time"),
    # Python stacks show the thread blocked (time.sleep, a lock, a poll): that time is not dispatch.
    Rule("host-idle gaps", lambda e: not e.has_gpu and e.wait_step_share >= WAIT_SHARE, _wait_says,
         lambda e: [WAIT_REMEDY], "CPU-only: the loop's thread waits (Python frames blocked, or idle during another "
                                  "thread's collective) during at least half the step time"),
    # A call that does the same work every step but ran 10x longer in one did not compute that time: the
    # thread was not running, and neither compute nor dispatch remedies would recover it.
    Rule("CPU-contended", lambda e: not e.has_gpu and e.stall_step_share >= STALL_SHARE, None,
         lambda e: [TF_CONTENTION_REMEDY if e.source == "tf" else CONTENTION_REMEDY], "CPU-only: op calls that run 10x their median over the steps, matrix "
                                        "products below 0.25 GFLOP/s, or passes over tensors slower than 1 µs an "
                                        "element (stalled: the thread was not running), lose at least 30% of the "
                                        "step time"),
    # Time outside compute ops that sits inside long ops of no class may be arithmetic the rules do not
    # know: when it decides the verdict, say so rather than call it dispatch.
    # A tf.function traced again on most calls spends the step building graphs: no executor or compiler
    # change helps until the calls stop retracing.
    Rule("CPU/framework-bound", lambda e: _retraces(e), _retrace_says,
         lambda e: [{"torch": TORCH_RECOMPILE_REMEDY, "jax": JAX_RECOMPILE_REMEDY}.get(e.source, TF_RETRACE_REMEDY)],
         "a tf.function is traced, a torch.compile function or a jitted JAX function compiled, again in at least "
         "half the steps (2 or more), graph building 10% or more of the step time"),
    Rule("undetermined", lambda e: unclassified_work_decides(e),
         lambda e: f"{e.unclassified_work_share:.0%} of the step time outside compute ops is inside ops tracekit has "
                   f"no class for, each call long enough to be work of its own ({e.unclassified_work_ops}): if they "
                   "compute, the step is CPU compute-bound; if they are slow framework calls, CPU/framework-bound"
                   + untyped_copies_hint(e),
         lambda e: [UNCLASSIFIED_WORK_REMEDY, *_host_bound_remedies(False)(e)],
         "CPU-only: at least half the step time is outside compute ops, but without the ops of no class that run "
         "50 µs or more a call on their own it would be less than half"),  # UNCLASSIFIED_WORK_NS
    # TF's executor runs inexpensive ops inline and, below host_tracer_level 3, untraced: when the time
    # inside it with no op traced decides the verdict, say so rather than call it dispatch.
    Rule("undetermined", untraced_ops_decide,
         lambda e: untraced_ops_says(e) + ": counted as dispatch the step is CPU/framework-bound, counted as "
                                          "compute it is not",
         lambda e: [TF_LEVEL_3_REMEDY, *_host_bound_remedies(False)(e)],
         "CPU-only TF: the step is CPU/framework-bound only with the time inside TF's graph executor with no op "
         "traced, at a host tracer level below 3 (which leaves inexpensive ops untraced), counted as dispatch"),
    # Below half, the largest part decides: time outside compute ops is not all dispatch (a fetch that
    # waits for DataLoader workers runs no op, a loop blocked in Python neither), so "not dispatch" no
    # longer means compute. Compiled graphs' own code may be either, so it counts against each.
    Rule("CPU/framework-bound", lambda e: not e.has_gpu and (e.dispatch_share >= DISPATCH_SHARE or _largest(
        e, e.dispatch_share, _compute_share(e), e.fetch_step_share, e.wait_step_share)), _dispatch_largest_says,
         _host_bound_remedies(False), "CPU-only: at least half the step time is outside compute ops (dispatch), or "
                                      "dispatch is the largest part of it, ahead of compute ops, batch fetching and "
                                      "waiting"),
    Rule("data-loading-bound",
         lambda e: not e.has_gpu and _largest(e, e.fetch_step_share, e.dispatch_share, _compute_share(e),
                                              e.wait_step_share),
         lambda e: (f"batch fetching (DataLoader __next__ / IteratorGetNext) with no compute op running takes "
                    f"{e.fetch_step_share:.0%} of the step time, more than framework dispatch "
                    f"({e.dispatch_share:.0%}) or compute ops ({_compute_share(e):.0%})"),
         _loading_remedies, "CPU-only: batch fetching with no compute op running is the largest part of the step "
                            "time, ahead of dispatch, compute ops and waiting"),
    # The loop's waiting is for the collectives where they cover as much of the step as it does: another
    # thread (gloo's) runs the all-reduce while the loop waits for it.
    Rule("communication-bound",
         lambda e: not e.has_gpu and e.communication_step_share >= max(e.wait_step_share, SIDE_NOTE_SHARE)
         and _largest(e, e.wait_step_share, e.dispatch_share, _compute_share(e), e.fetch_step_share),
         lambda e: _communication_says(e) + f", covering the loop thread's waits ({e.wait_step_share:.0%} of the step)",
         _communication_remedies,
         "CPU-only: the loop's thread waiting is the largest part of the step time, and collective communication "
         "covers at least as much of it"),
    Rule("host-idle gaps",
         lambda e: not e.has_gpu and _largest(e, e.wait_step_share, e.dispatch_share, _compute_share(e),
                                              e.fetch_step_share),
         _wait_says, lambda e: [WAIT_REMEDY], "CPU-only: the loop's thread waiting is the largest part of the step "
                                              "time, ahead of dispatch, compute ops and batch fetching"),
    # Compiled code with no op inside is kernels or wrapper, and the trace does not say how much of each:
    # when that split decides the verdict, say so rather than guess.
    Rule("undetermined", lambda e: not e.has_gpu and e.dispatch_share + e.compiled_code_share >= DISPATCH_SHARE,
         lambda e: f"how the compiled graphs' own code ({e.compiled_code_share:.0%} of step time) splits into generated "
                   f"kernels (compute) and wrapper (overhead) decides between CPU/framework-bound and CPU "
                   "compute-bound, and this trace does not record it",
         lambda e: [*([AOTI_KERNEL_PROFILE_REMEDY] if e.aoti_calls_per_step else
                      [KERNEL_PROFILE_REMEDY] if e.source in ("torch", "") else []), *_compile_remedies(e, False)],
         "CPU-only: compiled graphs' own code (kernels or wrapper, not split) holds the balance between "
         "dispatch and compute"),
    Rule("CPU compute-bound", lambda e: not e.has_gpu, _close_to_framework_bound, _cpu_compute_remedies,
         "CPU-only: most step time is inside compute ops (with 40% or more outside them, framework dispatch is "
         "said to be close behind and its remedies follow the compute one; a JAX step of 8 or more jitted "
         "dispatches with 20% or more of it dispatch is told to jit whole)"),
    # Collective kernels alone on the GPU: it is busy, but waiting on the exchange (or a slower rank).
    Rule("communication-bound", _gpu_communication_bound, _gpu_communication_says,
         lambda e: [gpu_communication_remedy(e)],
         "GPU: collective kernels with no compute kernel beside them cover at least 25% of the GPU span, more than "
         "compute alone and than idle time"),
    Rule("GPU-bound", lambda e: not _gap(e),
         lambda e: f"largest GPU class: {e.top_gpu_class or 'other'} ({e.top_gpu_class_share:.0%} of busy time)",
         _gpu_bound_remedies,
         "the GPU idles less than idle_threshold (30%) of its span"),
    # Every rule below reads what the host ran during the GPU's gaps: on clocks that disagree, it cannot.
    Rule("undetermined", lambda e: e.clock_skew_share >= CLOCK_SKEW_SHARE,
         lambda e: f"{e.clock_skew_share:.0%} of the GPU activities start before the host call that launched them "
                   f"(a median {e.clock_skew_ns / 1e3:,.1f} µs before): the GPU's timestamps are offset from the "
                   "host's in this trace, so what the host ran during the GPU's idle gaps cannot be read from it",
         lambda e: [CLOCK_SKEW_REMEDY],
         "GPU: idle at least idle_threshold (30%) of its span, and half or more of its activities start before the "
         "call that launched them (the GPU's clock offset from the host's)"),
    # A launch call of milliseconds with the GPU idle is not the per-launch cost a graph removes.
    Rule("undetermined", lambda e: e.slow_launch_gap_share >= SLOW_LAUNCH_SHARE, _slow_launches_says,
         lambda e: [SLOW_LAUNCH_REMEDY],
         "GPU: idle at least idle_threshold (30%) of its span, and launch calls 100x the median call and 0.5 ms or "
         "more run during half or more of its idle time (a kernel's module loaded at its first launch, or the "
         "thread stalled in the call)"),
    Rule("data-loading-bound", lambda e: e.load_gap_share >= DATA_LOADING_SHARE,
         lambda e: f"the DataLoader's __next__ / IteratorGetNext runs during {e.load_gap_share:.0%} of the GPU's "
                   "idle time" + (f"; {e.tf_input.says()}" if e.source == "tf" and e.tf_input is not None else ""),
         _loading_remedies, "batch fetching covers at least half the GPU's idle time"),
    # Launch or framework verdicts would blame a host that was doing nothing: the wait is elsewhere.
    Rule("host-idle gaps", lambda e: e.host_idle_share >= HOST_IDLE_SHARE and e.host_work_traced,
         lambda e: f"no host event runs during {e.host_idle_share:.0%} of the GPU's idle time",
         lambda e: [HOST_IDLE_REMEDY], "no host event at all during at least half the GPU's idle time, where the "
                                       "host's own work is recorded (framework ops, Python or NVTX ranges)"),
    Rule("copy-bound", lambda e: e.copy_gap_share >= COPY_SHARE,
         lambda e: f"host copies run during {e.copy_gap_share:.0%} of the GPU's idle time",
         lambda e: [COPY_REMEDY], "host memory copies during at least half the GPU's idle time"),
    Rule("launch-bound", _launches_bind, lambda e: _launch_bound_says(e), _host_bound_remedies(True),
         "launch calls cover half the GPU's idle time, or the median launch call takes as long as the median kernel "
         "and the host spends at least as much of the idle time launching as in framework code and Python (both "
         "recorded)"),
    Rule("sync-bound", lambda e: e.sync_gap_share >= SYNC_SHARE or e.sync_host_share >= SYNC_SHARE,
         lambda e: f"sync calls take {e.sync_host_share:.0%} of host busy time and {e.sync_gap_share:.0%} of the "
                   "GPU's idle time",
         lambda e: [SYNC_REMEDY], "sync waits cover 30% of the GPU's idle time or of the host's busy time"),
    # The GPU idles and the host's GPU API calls neither cover its gaps nor pace it: what the host did
    # between them (dispatch, data loading, waiting) is what would decide, and it is not recorded.
    Rule("undetermined", lambda e: not e.host_work_traced, _host_work_untraced_says, lambda e: [_host_activity_remedy(e)],
         "GPU: idle at least idle_threshold (30%) of its span, and the host's own work (framework ops, Python, NVTX "
         "ranges) not recorded, only its GPU API calls or nothing"),
    Rule("CPU/framework-bound", lambda e: True, _framework_says, _host_bound_remedies(False),
         "the GPU idles while the host runs framework code"),
)


def judge(e: Evidence) -> tuple[str, list[str], list[str]]:
    """The first rule that holds: (verdict, its evidence sentences, its remedies)."""
    for rule in RULES:
        if rule.test(e):
            said = rule.says(e) if rule.says is not None else None
            return rule.verdict, [said] if said else [], rule.remedies(e)
    raise AssertionError("the last rule always holds")


__all__ = ["Evidence", "RULES", "Rule", "VERDICTS", "gpu_communication_note", "gpu_communication_remedy", "judge",
           "node_floor_note",
           "recurrent_remedies", "share_below", "side_notes"]
