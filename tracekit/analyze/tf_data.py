"""tf.data's input pipeline, read from its iterator events: which stage makes the batches slowly.

The TF profiler records one event per ``GetNext`` of each stage of a tf.data pipeline, named by the
stage's path from the root: ``Iterator::Root::Prefetch::Map::BatchV2::TensorSlice`` is the
``TensorSlice`` source under a ``BatchV2`` under a ``Map``, and so on (a ``FlatMap``'s inner datasets
add an index: ``FlatMap[0]::Generator``). A stage's own time is its events' time less its inputs'
(the stages one level below it by name), summed over the capture, as xprof's input-pipeline analyzer
reads it: an asynchronous stage (``Prefetch``, ``ParallelMapV2``) waits on its consumer's thread while
its input runs on others, so its input's time can exceed its own and its own time is then 0; a
parallel map's wait is its function's time. The stage with the most own time is the one to work on.

Python in the pipeline (``tf.py_function``: ``EagerPyFunc``; ``tf.numpy_function`` and
``Dataset.from_generator``: ``PyFunc``) runs on tf.data's threads, holding Python's GIL while it
computes (not while it sleeps or waits on I/O, which the trace does not tell apart): parallel calls of
computing Python run one at a time, and the training loop's own Python waits for it. Measured here (TF
2.21 with Keras 3, a 2-core Xeon; tests/data/tf/make_input_pipelines.py): Keras fit of a small MLP fed
by a map of 8 ms of Python a batch ran 8.3 ms a step, the map stage 99% of the pipeline; from_generator
computing 6 ms of Python a batch made the loop's steps 6.5-7.5 ms for a model whose ops ran 5% of them,
though each fetch found its batch ready.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tracekit.analyze.breakdown import innermost_compute_ops
from tracekit.analyze.classify import classify_rows, input_pipeline_mask, tf_base_op
from tracekit.analyze.frame import Frame, per_frame
from tracekit.analyze.intervals import overlap_total, union
from tracekit.ingest.links import member_mask

ITERATOR_PREFIX = "Iterator::"
# Ops that run Python inside a TF graph: tf.py_function (EagerPyFunc), tf.numpy_function and
# Dataset.from_generator (PyFunc), the older tf.py_func (PyFuncStateless when stateless).
PYTHON_OPS = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})
PYTHON_CALLS = {"EagerPyFunc": "tf.py_function", "PyFunc": "tf.numpy_function", "PyFuncStateless": "tf.numpy_function"}
# The pipeline's ops run this many at once on average: its map runs calls in parallel.
PARALLEL_CONCURRENCY = 1.3
MAP_STAGES = re.compile(r"^(Map|ParallelMap\w*|MapAndBatch|ExperimentalMapAndBatch)$")
GENERATOR_STAGE = "Generator"  # Dataset.from_generator's source, a FlatMap over the generator's calls
# Sources that read files: their time is I/O and decoding.
READER_STAGES = re.compile(r"^(TFRecord|TextLine|FixedLengthRecord|SSTable|Csv|ParallelInterleave\w*|Interleave)\w*$")
_INDEX = re.compile(r"\[\d+\]$")


@dataclass(frozen=True)
class PipelineStage:
    """One stage: its path below ``Iterator::Root`` (``Prefetch::Map``), calls, and own time (ns)."""

    path: str
    calls: int
    own_ns: int

    @property
    def kind(self) -> str:
        """The stage's dataset kind: the path's last part without a FlatMap index (``Map``, ``Generator``)."""
        return _INDEX.sub("", self.path.rsplit("::", 1)[-1])


@dataclass(frozen=True)
class InputPipeline:
    """A tf.data pipeline in the capture: its stages (root first), the slowest one, the Python
    ops' time on tf.data's threads and which Python ops they are."""

    stages: tuple[PipelineStage, ...]
    slowest: PipelineStage
    python_ns: int
    python_ops: str  # "EagerPyFunc", "PyFunc" ...: the Python ops seen, most time first
    # The pipeline's ops' summed time over the time any of them runs: how many run at once on average
    # (a map fused with its batch, MapAndBatch, runs one call at a time or several: the name does not say)
    concurrency: float = 1.0

    @property
    def runs_in_parallel(self) -> bool:
        return self.slowest.kind.startswith("Parallel") or self.concurrency >= PARALLEL_CONCURRENCY

    @property
    def own_total_ns(self) -> int:
        return sum(s.own_ns for s in self.stages)

    @property
    def chain(self) -> str:
        """The path through the slowest stage to its deepest input, source last:
        ``Prefetch > Map > BatchV2 > TensorSlice``."""
        below = [s for s in self.stages if s.path.startswith(self.slowest.path)]
        longest = max(below, key=lambda s: (s.path.count("::"), s.own_ns)).path  # the busiest of the deepest
        return " > ".join(_INDEX.sub("", part) for part in longest.split("::"))

    @property
    def runs_ahead(self) -> bool:
        """Whether the stage the loop reads from makes batches ahead on other threads: a Prefetch (tf.data
        adds one after a synchronous last stage by default), or a parallel map or MapAndBatch."""
        top = [s for s in self.stages if "::" not in s.path]
        return any(s.kind.startswith(("Prefetch", "Parallel", "MapAndBatch")) for s in top)

    def says(self) -> str:
        s = self.slowest
        out = (f"tf.data's pipeline ({self.chain}): its {s.kind} stage takes {s.own_ns / max(self.own_total_ns, 1):.0%} "
               f"of the pipeline's own time ({s.own_ns / 1e6:,.1f} ms, {s.own_ns / max(s.calls, 1) / 1e6:,.2f} ms a call, "
               f"{s.calls} calls)")
        if self.python_ns:
            out += (f"; Python ops ({self.python_ops}) run {self.python_ns / 1e6:,.1f} ms on tf.data's threads "
                    "(holding Python's GIL while they compute)")
        return out

    def remedy(self) -> str:
        """What to change, by the slowest stage's kind and whether the pipeline runs Python; and to
        prefetch, where the stage the loop reads from does not run ahead."""
        said = self._stage_remedy()
        if self.runs_ahead:
            return said
        return (f"{said}; and the pipeline does not prefetch: end it with .prefetch(tf.data.AUTOTUNE), so the "
                "next batch is made while the step runs")

    def _stage_remedy(self) -> str:
        kind = self.slowest.kind
        called = sorted({PYTHON_CALLS[op] for op in self.python_ops.split(", ") if op in PYTHON_CALLS})
        python = (f"its Python ({', '.join(called) or 'tf.py_function'}) holds the GIL while it computes, so parallel "
                  "calls of it run one at a time and the training loop's Python waits for it too: write the transform "
                  "with TF ops (then "
                  "num_parallel_calls=tf.data.AUTOTUNE runs it on every core), or do the Python work once ahead "
                  "(precompute the data, or .cache() after the map when it fits in memory)")
        if kind == GENERATOR_STAGE:
            return ("the pipeline's source is a Python generator (Dataset.from_generator), which tf.data calls one "
                    "batch at a time, in Python (holding the GIL while it computes) beside the training loop's own "
                    "Python: read the data with "
                    "TF ops instead (from_tensor_slices on arrays in memory, TFRecordDataset with "
                    "interleave(num_parallel_calls=tf.data.AUTOTUNE) for files), or precompute what the generator "
                    "computes")
        if MAP_STAGES.match(kind):
            if self.python_ns:
                return f"tf.data's {kind} stage makes the batches: {python}"
            if self.runs_in_parallel:
                return (f"tf.data's {kind} stage makes the batches and runs in parallel already: make its function "
                        "cheaper, .cache() after it when its output fits in memory (or precompute it offline), and "
                        "keep other work off the cores it needs")
            return (f"tf.data's {kind} stage makes the batches one call at a time: "
                    "dataset.map(fn, num_parallel_calls=tf.data.AUTOTUNE), and .cache() after it when its output "
                    "fits in memory")
        if READER_STAGES.match(kind):
            return (f"tf.data's {kind} stage (reading) makes the batches: read files in parallel "
                    "(interleave(..., num_parallel_calls=tf.data.AUTOTUNE)) and .cache() what fits in memory")
        if self.python_ns:
            return f"tf.data's {kind} stage makes the batches, and the pipeline runs Python: {python}"
        return f"tf.data's {kind} stage makes the batches: make it cheaper, or move it before a .cache()"

    def as_dict(self) -> dict[str, object]:
        return {"chain": self.chain, "slowest": self.slowest.path, "python_ns": self.python_ns,
                "python_ops": self.python_ops, "concurrency": round(self.concurrency, 3),
                "stages": [{"path": s.path, "calls": s.calls, "own_ns": s.own_ns} for s in self.stages]}


def stage_path(name: str) -> str:
    """A stage's path below the pipeline's root from its iterator event's name
    (``Iterator::Root::Prefetch::Map`` -> ``Prefetch::Map``; before TF 2.5 the root was ``Model``, or not
    named: ``Iterator::Prefetch::Generator``); "" for other names and for the root itself."""
    if not name.startswith(ITERATOR_PREFIX):
        return ""
    path = name[len(ITERATOR_PREFIX):]
    for root in ("Root::", "Model::"):
        if path.startswith(root):
            return path[len(root):]
    return "" if path in ("Root", "Model") else path


@per_frame
def python_op_rows(frame: Frame) -> np.ndarray:
    """Rows of ops that run Python (``PYTHON_OPS``) on tf.data's threads (the verdict, whatif and the
    pipeline's figures all ask: once per frame)."""
    codes = [i for i, n in enumerate(frame.names) if tf_base_op(n) in PYTHON_OPS]
    if not codes:
        return np.zeros(0, np.int64)
    return np.flatnonzero(member_mask(frame.name_code, codes) & frame.mask("cpu_op") & input_pipeline_mask(frame))


@per_frame
def input_pipeline(frame: Frame) -> InputPipeline | None:
    """The capture's tf.data pipeline and its slowest stage; None without iterator events."""
    paths = {path: i for i, n in enumerate(frame.names) if (path := stage_path(n))}
    if not paths:
        return None
    codes = list(paths.values())
    rows = np.flatnonzero(member_mask(frame.name_code, codes))
    total = np.bincount(frame.name_code[rows], weights=frame.dur[rows], minlength=len(frame.names))
    calls = np.bincount(frame.name_code[rows], minlength=len(frame.names))
    inputs_ns: dict[str, float] = {}
    for path, c in paths.items():  # a stage's inputs: the stages one level below it by name
        parent = path.rsplit("::", 1)[0] if "::" in path else ""
        parent = _INDEX.sub("", parent)
        if parent:
            inputs_ns[parent] = inputs_ns.get(parent, 0.0) + float(total[c])
    stages = tuple(sorted((PipelineStage(path, int(calls[c]), max(int(total[c] - inputs_ns.get(path, 0.0)), 0))
                           for path, c in paths.items()), key=lambda s: (s.path.count("::"), s.path)))
    slowest = max(stages, key=lambda s: s.own_ns)
    if slowest.own_ns <= 0:
        return None
    python = python_op_rows(frame)
    per_op: dict[str, int] = {}
    for code, ns in zip(frame.name_code[python].tolist(), frame.dur[python].tolist(), strict=True):
        op = tf_base_op(frame.names[code])
        per_op[op] = per_op.get(op, 0) + int(ns)
    p_start, p_end = union(frame.start[python], frame.end[python])  # threads running at once count once
    python_ns = int((p_end - p_start).sum())
    leaves = _pipeline_leaf_ops(frame)
    l_start, l_end = union(frame.start[leaves], frame.end[leaves])
    running = int((l_end - l_start).sum())
    concurrency = int(frame.dur[leaves].sum()) / running if running else 1.0
    return InputPipeline(stages, slowest, python_ns, ", ".join(k for k, _ in sorted(per_op.items(), key=lambda kv: -kv[1])),
                         concurrency)


@per_frame
def _pipeline_leaf_ops(frame: Frame) -> np.ndarray:
    """Ops on tf.data's threads with no op below them (an executor's function op holds the ops it runs)."""
    ops = frame.rows("cpu_op")
    on_pipeline = ops[input_pipeline_mask(frame)[ops]]
    return on_pipeline[~np.isin(on_pipeline, frame.parent[on_pipeline])]


@dataclass(frozen=True)
class PipelineWork:
    """Shares of the steps' time in which tf.data's threads run ops (``work``), Python ops among them
    (``python``), and the other threads run compute ops (``model``: the step's own arithmetic)."""

    work: float = 0.0
    python: float = 0.0
    model: float = 0.0


def pipeline_work(frame: Frame, windows: tuple[np.ndarray, np.ndarray], span: int) -> PipelineWork:
    """``PipelineWork`` over the steps (``windows``: disjoint sorted step intervals, ``span`` their total)."""
    leaves = _pipeline_leaf_ops(frame)
    if not leaves.size or not span:
        return PipelineWork()
    compute = innermost_compute_ops(frame, classify_rows(frame), frame.rows("cpu_op"))
    model = compute[~input_pipeline_mask(frame)[compute]]

    def share(rows: np.ndarray) -> float:
        return overlap_total(*union(frame.start[rows], frame.end[rows]), *windows) / span if rows.size else 0.0
    return PipelineWork(share(leaves), share(python_op_rows(frame)), share(model))
