"""Gradients all-reduced one tensor at a time after the backward pass.

Hand-written data parallelism (the PyTorch distributed tutorial's ``average_gradients``: ``for p in
model.parameters(): dist.all_reduce(p.grad)``) issues one collective per gradient, each paying the
collective's fixed latency, one after another once the backward pass is done.
``DistributedDataParallel`` buckets the gradients (25 MB) and all-reduces each bucket while the
backward pass still runs; all-reducing one flat buffer does a single call. PyTorch 2.13, 2 ranks on
gloo sharing a 2-core Xeon, a 9-layer MLP (256 wide, 18 gradient tensors), unprofiled: 16.8-17.7 ms a
step one tensor at a time, 7.6-8.1 ms with one flat buffer, 6.9-8.2 ms under DDP.

Evidence (PyTorch traces): ``c10d::allreduce_`` calls at the top level of the step's thread (no op
around them: Python issued them) after the step's last autograd node, ``MIN_CALLS`` or more a step
(median over the steps), taking ``MIN_SHARE`` of the steps' time from the first to the next op
after the last (gloo's all-reduce blocks until done, and that wait is no op). Only calls recorded with
their tensors (``record_shapes=True``) of more than ``METRIC_ELEMENTS`` elements count: metrics
averaged over the ranks after the backward pass (a loss, an accuracy) are all-reduced so too, and the
trace says which is which only by size. A tensor-parallel layer's
all-reduces run inside the forward and backward passes, and a DDP reducer's or a gradient hook's
inside autograd, so none of those is counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from tracekit.analyze.frame import BACKWARD_NODE, Frame, calls_in_steps
from tracekit.analyze.top_ops import args_text

ALL_REDUCE = "c10d::allreduce_"
MIN_CALLS = 8
MIN_SHARE = 0.1
METRIC_ELEMENTS = 4  # a loss, a count and a total; a 10-class head's bias is 10


@dataclass(frozen=True)
class GradientSync:
    """All-reduces after the backward pass, one tensor a call (module doc): ``per_step`` calls a step
    (median), ``elements`` their median size, ``share`` their time over the steps'."""

    per_step: int
    elements: int
    share: float

    def evidence(self) -> str:
        size = f", median {self.elements:,} elements"
        return (f"the step all-reduces its gradients one tensor at a time after the backward pass: {self.per_step} "
                f"{ALL_REDUCE} calls a step issued from Python{size}, {self.share:.0%} of the step time; each call "
                "pays the collective's latency, one after another")

    def remedy(self) -> str:
        return ("all-reduce the gradients together: DistributedDataParallel buckets them (25 MB) and all-reduces each "
                "bucket while the backward pass runs, or all-reduce one flat buffer (torch.cat of the gradients, then "
                "copy back) (2 ranks on gloo, 18 gradient tensors: 16.8-17.7 ms a step one at a time, 7.6-8.1 ms "
                "flat, 6.9-8.2 ms under DDP)")

    def as_dict(self) -> dict[str, object]:
        return {"per_step": self.per_step, "elements": self.elements, "share": self.share}


def gradient_sync(frame: Frame, used: list[int] | None) -> GradientSync | None:
    """The steps' gradients all-reduced one tensor at a time (module doc), or None."""
    calls, steps = calls_in_steps(frame, (ALL_REDUCE,), used)
    calls = calls[frame.op_parent[calls] < 0]
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if calls.size < MIN_CALLS or not step_ns:
        return None
    nodes, _ = calls_in_steps(frame, [n for n in frame.names if BACKWARD_NODE.match(n)], used)
    if not nodes.size:
        return None
    # The last autograd node's end in each step; calls after it (on any thread: CPU backward runs on
    # the step's, a GPU's on autograd's device thread) synchronize the finished gradients.
    node_steps, first = np.unique(frame.step[nodes], return_inverse=True)
    last_end = np.full(node_steps.size, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(last_end, first.ravel(), frame.end[nodes])
    at = np.searchsorted(node_steps, frame.step[calls])
    known = at < node_steps.size
    known[known] = node_steps[at[known]] == frame.step[calls[known]]
    after = np.zeros(calls.size, bool)
    after[known] = frame.start[calls[known]] >= last_end[at[known]]
    calls = calls[after]
    sizes = _elements(frame, calls)
    calls, sizes = calls[sizes > METRIC_ELEMENTS], sizes[sizes > METRIC_ELEMENTS]
    if not calls.size:
        return None
    per_step = int(np.median(np.unique(frame.step[calls], return_counts=True)[1]))
    share = _sync_time(frame, calls, steps) / step_ns
    if per_step < MIN_CALLS or share < MIN_SHARE:
        return None
    return GradientSync(per_step=per_step, elements=int(np.median(sizes)), share=share)


def _sync_time(frame: Frame, calls: np.ndarray, steps: np.ndarray) -> int:
    """Per step, from its first such call to the next op its thread runs after the last (or the step's
    end): a blocking all-reduce (gloo's) returns once done, its wait recorded as no op, so the calls'
    own durations leave most of it out."""
    ops = frame.rows("cpu_op")
    ops = ops[frame.op_parent[ops] < 0]
    ops = ops[np.lexsort((frame.start[ops], frame.thread_key[ops]))]
    total = 0
    for step in np.unique(frame.step[calls]).tolist():
        mine = calls[frame.step[calls] == step]
        thread, first, last = frame.thread_key[mine[0]], int(frame.start[mine].min()), int(frame.end[mine].max())
        step_end = int(frame.end[steps[frame.step[steps] == step]].max(initial=last))
        # The thread's first top-level op starting at or after the last call's end (ops sorted by thread, start).
        at = np.searchsorted(frame.thread_key[ops], thread, side="left")
        stop = np.searchsorted(frame.thread_key[ops], thread, side="right")
        at += np.searchsorted(frame.start[ops[at:stop]], last, side="left")
        nxt = int(frame.start[ops[at]]) if at < stop else step_end
        total += min(nxt, step_end) - first
    return total


def _elements(frame: Frame, calls: np.ndarray) -> np.ndarray:
    """Each call's tensor elements from its recorded ``Input Dims`` (a list of tensors first); 0 where
    not recorded."""
    out = np.zeros(calls.size, np.int64)
    if "args" not in frame.table.column_names:
        return out
    for i, text in enumerate(args_text(frame.table, calls).to_pylist()):
        try:
            dims = json.loads(text).get("Input Dims") if text else None
        except (ValueError, AttributeError):
            dims = None
        if isinstance(dims, list) and dims and isinstance(dims[0], list):
            out[i] = sum(int(np.prod(d)) for d in dims[0] if isinstance(d, list))
    return out
