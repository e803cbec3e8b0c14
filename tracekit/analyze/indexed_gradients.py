"""Gradients of a tensor indexed one piece at a time.

``x[t]`` (``aten::select``) or ``x[:, i:j]`` (``aten::slice``) in a loop over a tensor that needs a
gradient: each indexing op's backward (``aten::select_backward`` / ``aten::slice_backward``) builds a
zero tensor the size of the whole ``x`` and writes its piece's gradient into it, and autograd adds
those whole-size gradients together. k pieces cost k whole-size fills and adds a step, where indexing
once with ``torch.unbind(x, dim)`` (its backward stacks the k gradients once) costs one. PyTorch 2.13,
2-core AMD EPYC, one thread, an ``LSTMCell`` loop of 100 timesteps over a projected 100x64x256
sequence, training: 560 ms a step indexing ``seq[t]``, 322 ms with ``seq.unbind(0)``; the 100
``SelectBackward0`` nodes took 230 ms a step, the one ``UnbindBackward0`` node 4.5 ms. Keras 3's
``keras.layers.LSTM`` on the torch backend, on a CPU, indexes its projected inputs so (38% of a step
at 20 timesteps, hidden 64).

The evidence: in the steps used, the autograd nodes that run such backward calls
(``autograd::engine::evaluate_function: SelectBackward0``, with the accumulation of their gradients;
the backward call itself where no node is recorded), ``MIN_CALLS`` or more a step of one op on one
whole input (its ``input_sizes``, a concrete input where shapes are recorded), taking ``MIN_SHARE``
of the steps' time or more: the nodes' wall time on a CPU trace, their kernels' time on a GPU trace
(the host time there is launching). The whole tensor must hold ``MIN_CALLS`` pieces or more along the
dim indexed, counting what the calls took: its size there over the widest slice, and no more pieces
than the calls took places (a CLS token ``h[:, 0]`` taken in each of 12 layers is 12 calls on one shape
at one place; rotary embeddings' ``rotate_half`` cuts each tensor in two halves), and
``nn.MultiheadAttention``'s q, k and v taken from one packed projection as ``proj[0]``, ``proj[1]``,
``proj[2]`` (three calls a layer, 36 a step in 12 layers, each on a tensor of 3 pieces, 9% of a small CPU
training step: not a loop the user wrote, and unbind would save little). Where shapes were
not recorded the pieces are estimated from the calls' own work: the time of the whole-size zero fill
over that of the piece's copy (20 pieces of 64x256: 113x; the attention's 3: 0.7-2.8x). One unbind
would still do one whole-size pass: the saving is that time but one piece's share of it.

TensorFlow has the same: ``seq[:, t]`` in a loop under ``tf.GradientTape`` runs a ``StridedSliceGrad``
a slice, each a zero gradient of the whole sequence, summed by ``AddN``; ``tf.unstack`` once is the
fix (a tf.function step over a projected 32x50x128 sequence: 9.2 ms a step sliced, 4.2 ms unstacked).
TF traces record no shapes: ``_tensorflow_slices`` groups those ops by the slice op they are the
gradient of and takes the pieces as a group's calls a step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from tracekit.analyze.breakdown import op_self_time
from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame, calls_in_steps, launched_kernel_time
from tracekit.analyze.top_ops import args_text
from tracekit.ingest.links import member_mask, nearest_ancestor

BACKWARD_OPS = ("aten::select_backward", "aten::slice_backward")
MIN_CALLS = 4  # a step: a loop over the pieces, not one x[0]
MIN_SHARE = 0.1
# The autograd node that runs a backward call and accumulates its output into the next node's input.
_NODE = re.compile(r"^autograd::engine::evaluate_function: (Select|Slice)Backward\d*$")
# TF: a slice's gradient op, by its op type after the name's colon ("scope/strided_slice_3/StridedSliceGrad:StridedSliceGrad").
_TF_SLICE_GRAD = re.compile(r"(^|[/:])StridedSliceGrad$")
_NUMBERED_SLICE = re.compile(r"(strided_slice)_\d+(?=/)")
_FILL = re.compile(r"^aten::(fill_|zero_)$")
_COPY = re.compile(r"^aten::copy_$")
# Both ops take (grad, input_sizes, dim, ...): input_sizes is the whole tensor's shape.
# Then select's index, or slice's start and end.
_WHOLE = (r'"Concrete Inputs":\["[^"]*","\[(?P<sizes>[0-9, ]*)\]","(?P<dim>-?\d+)","(?P<start>-?\d+)"'
          r'(?:,"(?P<end>-?\d+)")?')


@dataclass(frozen=True)
class IndexedGradients:
    """The steps' backward calls of one indexing op on one whole tensor (module doc): the op, the
    tensor's shape and the dim indexed ("" / -1 when shapes were not recorded), calls a step, and their
    time's share of the steps'."""

    op: str
    whole: str
    dim: int
    pieces: float  # along the dim indexed: its size, or the fill-over-copy estimate where shapes were not recorded
    calls_per_step: float
    share: float
    on_gpu: bool
    tensorflow: bool = False  # TF's StridedSliceGrad: op names the group; pieces are the calls a step

    @property
    def saving(self) -> float:
        """The share one unbind would save: all but one piece's."""
        return self.share * (1 - 1 / self.pieces) if self.pieces > 1 else 0.0

    def _indexing(self) -> str:
        return "x[t]" if self.op == "aten::select_backward" else "x[..., i:j]"

    def evidence(self) -> str:
        what = "their kernels take" if self.on_gpu else "they take"
        if self.tensorflow:
            scopes = self.op.split("/")  # the last three, as top ops names TF ops (the whole name is in JSON)
            op = "…/" + "/".join(scopes[-3:]) if len(scopes) > 3 else self.op
            return (f"the gradient of slicing one tensor a piece at a time ({op}, {self.calls_per_step:.0f} calls a "
                    "step: x[:, t] in a loop under tf.GradientTape, a slice op a piece): each StridedSliceGrad builds a "
                    "zero gradient of the whole tensor for its slice and the gradients are summed whole (AddN); "
                    f"{what} {self.share:.0%} of the step time")
        whole = (f"{self.whole} ({self.pieces:.0f} pieces along dim {self.dim})" if self.whole else
                 f"the whole indexed tensor (shapes not recorded: its zero fill takes {self.pieces:.0f}x the copy of "
                 "the piece)")
        return (f"the backward of indexing one tensor a piece at a time ({self.op}, {self.calls_per_step:.0f} calls a "
                f"step: {self._indexing()} in a loop over a tensor that needs a gradient): each call zero-fills a "
                f"gradient of {whole} for its piece and autograd adds them up whole; {what} {self.share:.0%} of the "
                "step time")

    def remedy(self) -> str:
        if self.tensorflow:
            return ("slice the tensor once, pieces = tf.unstack(x, axis=...) before the loop (in a tf.while_loop, a "
                    "tf.TensorArray's unstack), instead of x[:, t] in it: unstack's gradient stacks the pieces' "
                    "gradients once, where each slice's builds a whole-size zero tensor (50 timesteps of a 32x50x128 "
                    "sequence under tf.GradientTape: 9.3 ms a step against 3.9 ms)")
        return (f"index the tensor once, pieces = x.unbind(dim) (or split) before the loop, instead of {self._indexing()} "
                "in it: unbind's backward stacks the pieces' gradients once, where each indexing op's builds a "
                "whole-size zero tensor (100 timesteps of a 100x64x256 sequence: 560 ms a step against 322 ms); a "
                "library's recurrent layer that loops in Python (Keras 3 on the torch backend): a fused layer such as "
                "torch.nn.LSTM")

    def as_dict(self) -> dict[str, object]:
        return {"op": self.op, "whole": self.whole, "dim": self.dim, "pieces": self.pieces,
                "calls_per_step": self.calls_per_step,
                "share": self.share, "saving": self.saving, "on_gpu": self.on_gpu, "tensorflow": self.tensorflow}


def indexed_gradients(frame: Frame, used: list[int] | None) -> IndexedGradients | None:
    """The costliest group of indexing backward calls in the steps used (every step when None) that
    the module doc's evidence holds for, or None."""
    calls, steps = calls_in_steps(frame, BACKWARD_OPS, used)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    n_steps = int(np.unique(frame.step[steps]).size)
    if not step_ns:
        return None
    if not calls.size:
        return _tensorflow_slices(frame, used, n_steps, step_ns)
    if calls.size < MIN_CALLS * n_steps:
        return None
    is_node = np.zeros(len(frame), bool)
    ops = frame.rows("cpu_op")
    is_node[ops[frame.named(ops, _NODE)]] = True
    node = nearest_ancestor(frame.parent, calls, is_node)
    node = np.where(node >= 0, node, calls)
    sizes, dims, starts, ends = _whole_inputs(frame, calls)
    gpu = frame.rows(*GPU_BUSY_KINDS)
    best: IndexedGradients | None = None
    keys = np.char.add(np.char.add(np.array([frame.name(int(r)) for r in calls]), "|"), np.char.add(sizes, "|" + dims))
    for key in np.unique(keys).tolist():
        in_group = keys == key
        group = calls[in_group]
        per_step = group.size / n_steps
        op, whole, dim = key.split("|")
        if whole:
            # Pieces of one tensor sit at different places: the same place in every call is each of
            # several tensors of one shape indexed once (a CLS token taken in every layer), not a loop.
            places = np.unique(starts[in_group]).size
            pieces = min(_pieces(whole, dim, ends[in_group], starts[in_group]), float(places))
        else:
            pieces = _pieces_by_time(frame, group, gpu)
        if per_step < MIN_CALLS or pieces < MIN_CALLS:
            continue
        mine = np.unique(node[in_group])
        time_ns = launched_kernel_time(frame, mine, gpu) if gpu.size else int(frame.dur[mine].sum())
        found = IndexedGradients(op=op, whole=whole.replace(", ", "x"), dim=int(dim) if whole else -1, pieces=pieces,
                                 calls_per_step=float(per_step), share=time_ns / step_ns, on_gpu=bool(gpu.size))
        if found.share >= MIN_SHARE and (best is None or found.saving > best.saving):
            best = found
    return best


def _tensorflow_slices(frame: Frame, used: list[int] | None, n_steps: int, step_ns: int) -> IndexedGradients | None:
    """TF's form (module doc): the StridedSliceGrad ops of the steps used, grouped by the slice they
    are the gradient of, numbering aside (``gradient_tape/strided_slice_49/StridedSliceGrad``: the 50th
    slice op of one scope, a Python loop unrolled in a tf.function; a tf.while_loop runs one op T
    times). Slices in other scopes (a layer's each) are other groups. TF traces record no shapes, so
    the pieces are taken as the group's calls a step."""
    ops = frame.rows("cpu_op")
    calls = ops[frame.named(ops, _TF_SLICE_GRAD)] if ops.size else ops
    if used is not None:
        calls = calls[member_mask(frame.step[calls], used)]
    if calls.size < MIN_CALLS * n_steps:
        return None
    keys = np.array([_NUMBERED_SLICE.sub(r"\1", frame.name(int(r)).rsplit(":", 1)[0]) for r in calls.tolist()])
    gpu = frame.rows(*GPU_BUSY_KINDS)
    best: IndexedGradients | None = None
    for key in np.unique(keys).tolist():
        group = calls[keys == key]
        per_step = group.size / n_steps
        if per_step < MIN_CALLS:
            continue
        time_ns = launched_kernel_time(frame, group, gpu) if gpu.size else int(frame.dur[group].sum())
        found = IndexedGradients(op=key, whole="", dim=-1, pieces=per_step, calls_per_step=per_step,
                                 share=time_ns / step_ns, on_gpu=bool(gpu.size), tensorflow=True)
        if found.share >= MIN_SHARE and (best is None or found.saving > best.saving):
            best = found
    return best


def _pieces(whole: str, dim: str, ends: np.ndarray, starts: np.ndarray) -> float:
    """How many pieces of the calls' width the whole tensor ("20, 64, 256") holds along ``dim``: its
    size there (select: one index a piece), over the widest slice's width (slice: start and end, an
    open end clipped to the size); 0 where it does not parse."""
    try:
        size = [int(v) for v in whole.split(",")][int(dim)]
        widths = [min(int(e), size) - max(int(b), 0) for b, e in zip(starts.tolist(), ends.tolist(), strict=True) if e]
    except (ValueError, IndexError):
        return 0.0
    return size / max(max(widths, default=1), 1)


def _pieces_by_time(frame: Frame, calls: np.ndarray, gpu: np.ndarray) -> float:
    """How many pieces the calls' whole tensors hold, estimated from their own work: the time of their
    whole-size zero fill over that of their piece's copy (kernel time on a GPU trace); 0 when either is
    not recorded."""
    ops = frame.rows("cpu_op")
    is_call = np.zeros(len(frame), bool)
    is_call[calls] = True
    inside = ops[nearest_ancestor(frame.parent, ops, is_call) >= 0]
    fills = inside[frame.named(inside, _FILL)]
    copies = inside[frame.named(inside, _COPY)]
    if gpu.size:
        fill_ns, copy_ns = launched_kernel_time(frame, fills, gpu), launched_kernel_time(frame, copies, gpu)
    else:
        fill_ns, copy_ns = int(op_self_time(frame, fills).sum()), int(op_self_time(frame, copies).sum())
    return fill_ns / copy_ns if fill_ns and copy_ns else 0.0


def _whole_inputs(frame: Frame, calls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per call, as text: its whole input's sizes ("20, 64, 256"), the dim indexed, select's index or
    slice's start, and slice's end ("" for select); "" where shapes were not recorded."""
    if "args" not in frame.table.column_names:
        empty = np.full(calls.size, "", dtype=str)
        return empty, empty, empty, empty
    found = pc.extract_regex(args_text(frame.table, calls), _WHOLE)
    return tuple(np.asarray(pc.fill_null(pc.struct_field(found, f), "").to_pylist(), dtype=str)  # type: ignore[return-value]
                 for f in ("sizes", "dim", "start", "end"))
