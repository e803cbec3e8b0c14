"""Ops of no class that do long work of their own.

The class rules know the common framework ops by name; an op they do not know is ``other``, and the
breakdown counts its time as dispatch (outside compute ops). That is right for metadata ops and
allocations, which cost a few µs a call, and wrong for arithmetic the rules have not met: a custom
op (``torch.library``, a C++ extension), an op added in a later framework release. Such an op shows
itself by what it does: calls that average ``UNCLASSIFIED_WORK_NS`` or more, or, as the same call
in each step (the k-th of its name on its thread), take that long in most steps (one name can hold
tiny and long calls: ``aten::copy_`` of a few weights and of a large tensor, whose mean says neither;
on a 2-core AMD EPYC a bf16 round trip of a 2048x1024 tensor beside autocast's weight casts averaged
under the threshold), nearly all of it self time (not a wrapper around other ops), while no other
thread is busy on its behalf (not a TF function call waiting for its executor). Views and metadata
ops (``aten::t``, ``aten::view``, ...) are never such work, however long a call. The verdict says when these ops decide it; whatif does
not count them as dispatch.

One op of no class is known: a TorchScript call (``forward``) whose own time is ops its interpreter
ran unrecorded (``breakdown.unrecorded_script_calls``: a frozen CNN, 20 ms a call around 10 recorded
ops). The breakdown already counts that time as compute; ``unrecorded_script_work`` names such calls
for the verdict.
"""

from __future__ import annotations

import numpy as np

from tracekit.analyze.breakdown import compiled_code_self, op_self_time, unrecorded_script_calls
from tracekit.analyze.classify import (
    DATA_LOADER,
    OP_CLASSES,
    PYTHON_CALLBACK,
    classify_rows,
    input_pipeline_mask,
    op_name_codes,
)
from tracekit.analyze.frame import VIEW_OPS, Frame
from tracekit.analyze.stalls import call_series
from tracekit.analyze.waiting import covered_by_other_threads
from tracekit.ingest.columns import distinct
from tracekit.ingest.links import member_mask

UNCLASSIFIED_WORK_NS = 50_000  # mean self time a call: dispatch and metadata ops cost a few µs
# Converting to and from oneDNN's layout: a model frozen with torch.jit.optimize_for_inference.
_ONEDNN_LAYOUT_OPS = ("aten::to_mkldnn", "aten::to_dense", "aten::_to_dense")


def unclassified_work_rows(frame: Frame, rows: np.ndarray) -> np.ndarray:
    """The op rows among ``rows`` (op rows of one window or all) that are such work."""
    unknown = rows[classify_rows(frame).op[rows] == OP_CLASSES.index("other")]
    unknown = unknown[~member_mask(unknown, compiled_code_self(frame)[0])]  # compiled graphs are judged apart
    # tf.data's map functions (a py_function decoding) run on its own threads: the input pipeline's
    # cost, which the loop pays as batch fetching, not arithmetic of the step.
    unknown = unknown[~input_pipeline_mask(frame)[unknown]]
    # A batch fetch on the loop's thread (IteratorGetNext; an eager op by the op it ran) is fetching, which
    # the breakdown already keeps out of dispatch (fetching_ns), and no scenario removes.
    codes = op_name_codes(frame)[unknown]
    # Python called from a compiled program (tf.py_function, jax.debug.print) is known: the verdict says it apart.
    fetching = [c for c in distinct(codes).tolist() if c >= 0 and (DATA_LOADER.search(frame.names[c])
                                                                   or PYTHON_CALLBACK.search(frame.names[c]))]
    views = [c for c in distinct(codes).tolist() if c >= 0 and frame.names[c] in VIEW_OPS]
    unknown = unknown[~member_mask(codes, fetching + views)]
    self_ns = op_self_time(frame, unknown)
    # A TorchScript call with unrecorded ops in it is work however much of it its recorded ops take.
    script = member_mask(unknown, _script_calls_with_unrecorded_ops(frame, unknown))
    steady = _steady_long_calls(frame, unknown, self_ns)
    own = (self_ns * 2 >= frame.dur[unknown]) | script
    unknown, self_ns, steady, script = unknown[own], self_ns[own], steady[own], script[own]
    if unknown.size == 0:
        return unknown
    _, index = np.unique(op_name_codes(frame)[unknown], return_inverse=True)
    mean = np.bincount(index, weights=self_ns) / np.bincount(index)
    unknown = unknown[(mean[index] >= UNCLASSIFIED_WORK_NS) | steady | script]
    if unknown.size == 0:
        return unknown
    return unknown[covered_by_other_threads(frame, unknown, among=rows) * 2 < frame.dur[unknown]]


def _steady_long_calls(frame: Frame, rows: np.ndarray, self_ns: np.ndarray) -> np.ndarray:
    """Per row: whether it is a call that runs ``UNCLASSIFIED_WORK_NS`` or more of its own in most
    steps (its median over the steps, as the same call: the k-th of its name on its thread). One name
    can hold both tiny and long calls (``aten::copy_`` of a few weights and of a large tensor), whose
    mean says neither; a call long in one step only (a stall) is not work."""
    series = call_series(frame, rows)
    steady = np.zeros(rows.size, bool)
    if not series.rows.size:
        return steady
    order = np.argsort(rows, kind="stable")
    at_row = order[np.searchsorted(rows[order], series.rows)]  # each series row's index in ``rows``
    # Only series with a long call somewhere can have a long median: most have none.
    long_somewhere = series.comparable & (self_ns[at_row] >= UNCLASSIFIED_WORK_NS)
    for s in np.unique(series.series[long_somewhere]).tolist():
        calls, steps = int(series.calls[s]), int(series.steps_with[s])
        at = at_row[series.first[s] + np.arange(steps * calls)]
        median = np.median(self_ns[at].reshape(steps, calls), axis=0)
        steady[at[np.tile(median >= UNCLASSIFIED_WORK_NS, steps)]] = True
    return steady


def step_work_rows(frame: Frame, used: list[int] | None) -> np.ndarray:
    """``unclassified_work_rows`` among the ops of the steps used (every op when no step is marked)."""
    rows = frame.rows("cpu_op")
    if frame.rows("step").size:  # the ops of the steps: not those between them (a loop's batch fetching)
        rows = rows[member_mask(frame.step[rows], used) if used is not None else frame.step[rows] >= 0]
    return unclassified_work_rows(frame, rows)


def unclassified_work(frame: Frame, used: list[int] | None,
                      work: np.ndarray | None = None) -> tuple[int, list[tuple[str, int]]]:
    """Self time of ``step_work_rows`` (``work`` when the caller has them): the total and (name, ns)
    per op name, largest first."""
    if work is None:
        work = step_work_rows(frame, used)
    if work.size == 0:
        return 0, []
    self_ns = op_self_time(frame, work)
    codes, index = np.unique(op_name_codes(frame)[work], return_inverse=True)
    per_name = np.bincount(index, weights=self_ns, minlength=codes.size).astype(np.int64)
    order = np.argsort(-per_name, kind="stable")
    return int(per_name.sum()), [(frame.names[codes[i]] if codes[i] >= 0 else "", int(per_name[i])) for i in order]


def _script_calls_with_unrecorded_ops(frame: Frame, rows: np.ndarray) -> np.ndarray:
    """The ``breakdown.unrecorded_script_calls`` among ``rows`` (op rows), in row order."""
    return np.sort(rows[member_mask(rows, unrecorded_script_calls(frame))]) if rows.size else rows


def unrecorded_script_work(frame: Frame, work: np.ndarray) -> tuple[np.ndarray, bool]:
    """The rows among ``work`` (``step_work_rows``) that are TorchScript calls spending their own time
    in ops the profiler does not record, and whether those calls convert tensors to oneDNN's layout (a
    model frozen for inference, whose convolutions then run as unrecorded ``prim::mkldnn_convolution``)."""
    found = _script_calls_with_unrecorded_ops(frame, work)
    layout = [c for c, n in enumerate(frame.names) if n in _ONEDNN_LAYOUT_OPS]
    if not found.size or not layout:
        return found, False
    ops = frame.rows("cpu_op")
    inside = ops[member_mask(frame.parent[ops], found)]
    return found, bool(member_mask(frame.name_code[inside], layout).any())


# PyTorch converts a tensor as aten::to -> aten::_to_copy -> aten::copy_: a cast when the input dtypes
# differ, which only record_shapes=True records (a layout change otherwise).
_CONVERSION_OPS = ("aten::_to_copy", "aten::to")


def untyped_copies(frame: Frame, work: np.ndarray) -> bool:
    """Whether most of the copy time among ``work`` (``step_work_rows``) is aten::copy_ inside a
    conversion (aten::to / aten::_to_copy) and no copy records its input types: a cast (autocast's fp32
    -> bf16 weights) that cannot be told from a copy. DDP's bucket copies (copy_ under its reducer) are
    plain copies, not conversions."""
    copy_code = frame.names.index("aten::copy_") if "aten::copy_" in frame.names else -2
    copies = work[frame.name_code[work] == copy_code]
    if not copies.size:
        return False
    conversion = [c for c, n in enumerate(frame.names) if n in _CONVERSION_OPS]
    parent = frame.parent[copies]
    inside = (parent >= 0) & member_mask(frame.name_code[np.maximum(parent, 0)], conversion)
    self_ns = op_self_time(frame, copies)
    if int(self_ns[inside].sum()) * 2 < int(self_ns.sum()):
        return False
    import pyarrow.compute as pc

    from tracekit.analyze.top_ops import args_text  # only for such copies: reads their args

    return not pc.any(pc.match_substring(args_text(frame.table, copies), '"Input type"')).as_py()
