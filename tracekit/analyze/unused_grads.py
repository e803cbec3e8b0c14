"""Gradients computed for parameters the optimizer never updates.

Fine-tuning a head over a pretrained backbone, with the optimizer given only the head's parameters
but the backbone's left requiring grad (``backbone.requires_grad_(False)`` forgotten), makes autograd
compute a gradient for every backbone parameter and so run backward through the whole backbone, for
nothing. PyTorch 2.13, 2-core AMD EPYC, one thread: 4 conv layers (3-32-64-64-128, BatchNorm, ReLU)
under a linear head, batch 16, SGD over the head: 160 ms a step unfrozen against 50 ms frozen at 32x32,
766 against 208 ms at 64x64. The report read "CPU compute-bound" and pointed at the convolutions'
layout. Measured by the rule below, the backward it could drop was 66% of the step (69% saved).

The evidence needs shapes (``record_shapes=True``) and a torch.optim optimizer in the steps used:
autograd's ``torch::autograd::AccumulateGrad`` calls record each leaf gradient's shape, and the
optimizer's ops (inside ``Optimizer.step#...``) touch its parameters' shapes (one op a tensor, or
lists of them in ``_foreach_``/``_fused_`` ops). Gradients of shapes no optimizer op touches,
``MIN_UNUSED`` or more a step (one alone may be an input's gradient, wanted: adversarial training),
are computed for nothing. Their cost is at least the backward that runs after the last gradient the
optimizer reads (a chain's whole backbone; a gradient's own weight product inside an earlier node is
not counted), ``MIN_SHARE`` or more of the steps' time. CPU traces only: on a GPU the host's backward
time is not the step's cost where the GPU paces it, and no stored GPU trace trains a frozen part.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from tracekit.analyze.frame import BACKWARD_NODE, GPU_BUSY_KINDS, Frame, step_rows
from tracekit.analyze.optimizer import optimizer_calls, update_of
from tracekit.analyze.top_ops import first_input_shape, input_dims
from tracekit.ingest.links import member_mask, nearest_ancestor

ACCUMULATE = "torch::autograd::AccumulateGrad"
MIN_UNUSED = 2
MIN_SHARE = 0.1


@dataclass(frozen=True)
class UnusedGradients:
    """Per step (median): gradients accumulated, and those of shapes the optimizer never touches;
    examples of those shapes; share: the backward after the last gradient the optimizer reads, of the
    steps' time."""

    gradients: int
    unused: int
    shapes: tuple[str, ...]
    optimizer: str
    share: float

    def evidence(self) -> str:
        return (f"backward computes {self.unused} of its {self.gradients} parameter gradients a step for tensors the "
                f"optimizer ({self.optimizer}) never updates (shapes {', '.join(self.shapes)}): parameters left "
                f"requiring grad; the backward after the last gradient it reads takes {self.share:.0%} of the step time")

    def remedy(self) -> str:
        return ("freeze the parameters the optimizer does not train, backbone.requires_grad_(False) (or give the "
                "optimizer every parameter meant to train): autograd computes a gradient for every parameter that "
                "requires grad, and backward runs through the frozen part to get them (a 4-conv backbone under a "
                "linear head on a CPU: 160 ms a step unfrozen, 50 ms frozen)")

    def as_dict(self) -> dict[str, object]:
        return {"gradients_per_step": self.gradients, "unused_per_step": self.unused, "shapes": list(self.shapes),
                "optimizer": self.optimizer, "share": self.share}


def unused_gradients(frame: Frame, used: list[int] | None) -> UnusedGradients | None:
    """Gradients no optimizer reads, in the steps used (module doc), else None."""
    if ACCUMULATE not in frame.names or "args" not in frame.table.column_names or frame.rows(*GPU_BUSY_KINDS).size:
        return None
    steps = step_rows(frame, used)
    calls = optimizer_calls(frame)
    if used is not None:
        calls = calls[member_mask(frame.step[calls], used)]
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if not calls.size or not step_ns:
        return None
    update = update_of(frame, calls)
    touched = shapes_in(frame, update.inside)
    ops = frame.rows("cpu_op")
    accumulated = ops[(frame.name_code[ops] == frame.names.index(ACCUMULATE))
                      & member_mask(frame.step[ops], frame.step[steps].tolist())]
    if not touched or not accumulated.size:
        return None
    dims_code, dims = input_dims(frame.table, accumulated)
    grad_shape = [_first_shape(text) for text in dims]
    if any(shape is None for shape in grad_shape):
        return None  # shapes not recorded: nothing is claimed
    # A 0-d parameter's gradient (a learned temperature) is neither: every op's scalar arguments read [] too.
    unused = np.array([bool(grad_shape[c]) and grad_shape[c] not in touched for c in dims_code.tolist()], bool)
    nodes = frame.rows("cpu_op", "user_range")
    nodes = nodes[frame.named(nodes, BACKWARD_NODE) & member_mask(frame.step[nodes], frame.step[steps].tolist())]
    is_node = np.zeros(len(frame), bool)
    is_node[nodes] = True
    nodes = nodes[nearest_ancestor(frame.parent, nodes, is_node) < 0]  # the outermost (a reentrant backward nests)
    wasted, per_step_unused, per_step_all = 0, [], []
    for step in np.unique(frame.step[accumulated]).tolist():
        mine = frame.step[accumulated] == step
        per_step_unused.append(int(np.count_nonzero(unused & mine)))
        per_step_all.append(int(np.count_nonzero(mine)))
        read = accumulated[mine & ~unused]
        if not read.size or not (unused & mine).any():
            continue
        last_read = int(frame.end[read].max())
        after = nodes[(frame.step[nodes] == step) & (frame.start[nodes] >= last_read)]
        wasted += int(frame.dur[after].sum())
    share = wasted / step_ns
    if np.median(per_step_unused) < MIN_UNUSED or share < MIN_SHARE:
        return None
    examples = sorted({grad_shape[c] for c in dims_code[unused].tolist()}, key=lambda s: -int(np.prod(s)))[:3]
    return UnusedGradients(gradients=int(np.median(per_step_all)), unused=int(np.median(per_step_unused)),
                           shapes=tuple("x".join(map(str, s)) for s in examples),
                           optimizer=" and ".join(sorted(update.names)), share=share)


def _first_shape(text: str) -> tuple[int, ...] | None:
    """The first input's shape from one op's ``Input Dims`` text; None where none is recorded."""
    shape = first_input_shape(text)
    return tuple(shape) if shape is not None else None


def tensor_shapes(dims_text: str) -> list[tuple[int, ...]] | None:
    """The shapes of the tensors in one op's ``Input Dims`` text, tensor lists' members included (0-d
    tensors and scalars read ``[]`` and are left out); None where no dims are recorded or the text is
    not JSON."""
    try:
        dims = json.loads(dims_text) if dims_text else None
    except ValueError:
        return None
    if not isinstance(dims, list):
        return None
    found: list[tuple[int, ...]] = []

    def walk(value: object) -> None:
        if isinstance(value, list):
            if value and all(isinstance(d, int) for d in value):
                found.append(tuple(value))
            else:
                for item in value:
                    walk(item)

    walk(dims)
    return found


def shapes_in(frame: Frame, rows: np.ndarray) -> set[tuple[int, ...]]:
    """Every tensor shape in these ops' ``Input Dims`` (tensor lists' members included)."""
    if not rows.size:
        return set()
    _, dims = input_dims(frame.table, rows)
    return {shape for text in dims for shape in tensor_shapes(text) or ()}
