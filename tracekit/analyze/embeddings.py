"""Embedding tables trained with dense gradients.

``nn.Embedding`` and ``nn.EmbeddingBag`` default to ``sparse=False``: their backward
(``aten::embedding_dense_backward``, ``aten::_embedding_bag_dense_backward``) allocates and
zero-fills a gradient of the whole table (``num_weights`` x dim) every step, however few rows the
step looked up, and the optimizer then updates every row. With ``sparse=True`` (and an optimizer
that takes sparse gradients: ``optim.SGD``, ``SparseAdam``, ``Adagrad``) only the looked-up rows are
written. PyTorch 2.13, 2-core Xeon: a 200,000 x 64 EmbeddingBag (2,048 bags of 20 lookups) and a
small MLP trained with SGD took 23.7 ms a step dense, 6.2 ms sparse; the dense backward was 56% of
the profiled step and the table's update another 14%.

Where the steps used spend at least ``REMEDY_SHARE`` of their time in such backward calls, the share
is evidence and ``sparse=True`` the remedy, with the table's size and the lookups a call read from the
calls' recorded inputs (``record_shapes=True``: ``num_weights`` is a concrete input) where they were
recorded. The time is the calls' wall time on their thread, or on a GPU trace their kernels' time
(their host time there is launching). Recommendation models are the usual case.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame, launched_kernel_time
from tracekit.analyze.top_ops import args_text
from tracekit.ingest.links import member_mask

REMEDY_SHARE = 0.10  # of the steps' time in the dense backward calls
DENSE_BACKWARD = re.compile(r"^aten::(embedding_dense_backward|_embedding_bag_dense_backward)$")
# Where num_weights sits among each op's inputs (their indices input is the second).
_NUM_WEIGHTS_INPUT = {"aten::embedding_dense_backward": 2, "aten::_embedding_bag_dense_backward": 5}
CALLS_READ = 20  # calls whose inputs are read for the table's size


@dataclass(frozen=True)
class DenseEmbeddingGradients:
    """The dense embedding backward calls of the steps used: how many, their share of the steps'
    time, and the largest table's rows and dim and the most lookups a call (0 when not recorded)."""

    op: str
    calls: int
    share: float
    rows: int
    dim: int
    lookups: int
    on_gpu: bool

    def _table(self) -> str:
        if not self.rows:
            return "a gradient of the whole table"
        lookups = f" for {self.lookups:,} lookups" if self.lookups else ""
        return f"a {self.rows:,} x {self.dim:,} gradient{lookups}"

    def evidence(self) -> str | None:
        if self.share < REMEDY_SHARE:
            return None
        return (f"the embeddings' dense gradient ({self.op}, {self.calls:,} call{'s' if self.calls > 1 else ''}) takes "
                f"{self.share:.0%} of the step time: each call zero-fills {self._table()}, and the optimizer updates "
                "every row")

    def remedy(self) -> str | None:
        if self.share < REMEDY_SHARE or (self.rows and self.lookups and self.lookups >= self.rows):
            return None
        rows = f"all {self.rows:,}" if self.rows else "the whole table"
        return ("give the embedding sparse gradients: nn.Embedding / nn.EmbeddingBag(..., sparse=True) with an "
                "optimizer that takes them (optim.SGD, optim.SparseAdam, optim.Adagrad): the backward and the update "
                f"touch only the rows looked up, not {rows}")

    def as_dict(self) -> dict[str, object]:
        return {"op": self.op, "calls": self.calls, "share": self.share, "rows": self.rows, "dim": self.dim,
                "lookups": self.lookups}


def dense_embedding_gradients(frame: Frame, used_steps: list[int] | None) -> DenseEmbeddingGradients | None:
    """The dense embedding backward calls in the steps used (every step when None), or None when the
    trace has none or marks no steps."""
    ops = frame.rows("cpu_op")
    calls = ops[frame.named(ops, DENSE_BACKWARD)] if ops.size else ops
    steps = frame.rows("step")
    if used_steps is not None:
        calls = calls[member_mask(frame.step[calls], used_steps)]
        steps = steps[member_mask(frame.step[steps], used_steps)]
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if calls.size == 0 or step_ns <= 0:
        return None
    gpu = frame.rows(*GPU_BUSY_KINDS)
    if gpu.size:
        time_ns = launched_kernel_time(frame, calls, gpu)
    else:
        time_ns = int(frame.dur[calls].sum())
    names = sorted({frame.name(int(r)) for r in calls.tolist()})
    rows, dim, lookups = _table_size(frame, calls[:CALLS_READ])
    return DenseEmbeddingGradients(op=" and ".join(names), calls=int(calls.size), share=time_ns / step_ns, rows=rows,
                                   dim=dim, lookups=lookups, on_gpu=bool(gpu.size))


def _table_size(frame: Frame, calls: np.ndarray) -> tuple[int, int, int]:
    """(rows, dim, lookups) of the largest table among the calls, from their recorded inputs; zeros
    where they were not recorded."""
    if "args" not in frame.table.column_names or not calls.size:
        return 0, 0, 0
    best = (0, 0, 0)
    for row, text in zip(calls.tolist(), args_text(frame.table, calls).to_pylist(), strict=True):
        try:
            args = json.loads(text) if isinstance(text, str) else {}
        except ValueError:
            continue
        dims, concrete = args.get("Input Dims"), args.get("Concrete Inputs")
        at = _NUM_WEIGHTS_INPUT.get(frame.name(row), -1)
        if not isinstance(dims, list) or not isinstance(concrete, list) or len(concrete) <= at or len(dims) < 2:
            continue
        try:
            rows = int(concrete[at])
        except (TypeError, ValueError):
            continue
        grad, indices = dims[0], dims[1]
        dim = grad[-1] if isinstance(grad, list) and grad and isinstance(grad[-1], int) else 0
        lookups = int(np.prod(indices)) if isinstance(indices, list) and indices else 0
        best = max(best, (rows, dim, lookups))
    return best
