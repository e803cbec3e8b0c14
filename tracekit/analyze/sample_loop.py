"""A step that walks its batch one sample at a time in a Python loop.

``for i in range(len(x)): loss += loss_fn(model(x[i:i+1]), y[i:i+1])`` runs the whole model once
per sample: every op is dispatched per sample, each matrix product multiplies one row (memory-bound
at any size), and autograd builds one graph per sample, so backward is per sample too. PyTorch 2.13,
2-core AMD EPYC: a 3-layer MLP (128-256-256-10, batch 64, SGD) took 9.1-10.0 ms a training step
walked per sample, 0.72 ms on the whole batch; its report read "CPU compute-bound" with
torch.compile as the first remedy.

The evidence needs recorded shapes (``record_shapes=True``, which also records the index
arguments as "Concrete Inputs"): in a step used, top-level ``aten::slice``/``aten::select``/
``aten::narrow`` calls on one thread that take consecutive windows of one tensor along dim 0 (start
0, 1, 2, ... or 0, w, 2w, ... with w at most ``MAX_ROWS``), ``MIN_ITERATIONS`` or more, where the
matrix products between one window and the next multiply no more rows than a window holds, and the
iterations, with the backward after them where its products are per sample too, take ``MIN_SHARE``
of the step. Not such a loop: a recurrence (a cell op, or sigmoid and tanh gates, in the iterations:
each timestep feeds the next, so the fused recurrent layer is the fix, told elsewhere); a sequence of
a batch of one walked by timestep (a [T, 1, F] tensor: the char-RNN tutorial's loop); a timestep of
a seq-first batch (``x[t]`` of [T, B, F] holds B rows a product); a loop that writes into a tensor
window by window (``out[t] = ...``: decoding's output buffer). An index that does not move
(``logits[:, -1]``) is no walk.

Iterating the tensor itself (``for xi, yi in zip(x, y)``) indexes it once, up front: one top-level
``aten::unbind`` along dim 0 (its ``select`` calls nested inside it), after which nothing marks where
an iteration begins. There the top-level ops that follow, on its thread, must repeat one sequence of
op names as many times as the unbind made pieces (16 for a batch of 16), and each repetition is an
iteration (judged as above). The MLP above trained so at a batch of 16: 2.4-3.2 ms a step, as
walked by index (2.5 ms), against 0.41 ms on the whole batch.

A loop that runs no matrix product per sample is one too where it reads each sample's result into
Python (``aten::item``: ``.item()``, ``int(t)``) in 80% of its iterations or more and every op in it,
but the indexing, works on one piece at most: accuracy counted per sample, ``for p, t in zip(out, y):
correct += int(p.argmax() == t)`` over a batch of 256, took 1.76 ms a call against 0.81 ms on the whole
tensor, and its report read "CPU compute-bound" with torch.compile first (which breaks its graph at
every read). A loop whose iterations read a value computed over the whole batch (a precision-recall
curve, ``int((probs > t).sum())`` per threshold) is not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

import numpy as np
import pyarrow.compute as pc

from tracekit.analyze.classify import OP_CLASSES, RowClasses
from tracekit.analyze.frame import BACKWARD_NODE, RNN_CELL_OPS, Frame, step_rows
from tracekit.analyze.top_ops import GEMM_FLOP_OPS, args_text, compact_shapes, gemm_shape, input_dims
from tracekit.ingest.columns import factorize
from tracekit.ingest.links import member_mask, nearest_ancestor

WALK_OPS = ("aten::slice", "aten::select", "aten::narrow")
UNBIND = "aten::unbind"
WRITE_OPS = ("aten::copy_", "aten::fill_", "aten::zero_", "aten::index_put_")
READ_OPS = ("aten::item", "aten::_local_scalar_dense")  # a tensor's value read into Python (.item(), int(t))
# Ops a timestep's recurrence runs: its cell (frame.RNN_CELL_OPS), or the gates' sigmoid and tanh together.
GATE_OPS = ("aten::sigmoid", "aten::tanh")
MIN_ITERATIONS = 8
MAX_ROWS = 8
MIN_SHARE = 0.3
MAX_WALK_CALLS = 100_000  # walk calls whose arguments are read; a trace with more is read in part
MAX_WALKS = 500  # walks judged (a few a step)
TINY_ELEMENTS = 1_024  # an op whose inputs hold no more does no work beside its fixed cost
MAX_ITERATION_OPS = 1_000  # ops (of every thread, in order of start) read an iteration after an unbind
SAVING_BASIS = ("its dispatch and Python between ops, and all but one sample's share of each op's fixed cost, of "
                "its matrix products, which read their weights per sample, and of its ops on a few elements; the "
                "convolutions and other work on the samples' data stay")
_CONCRETE = r'"Concrete Inputs":(?P<concrete>\[[^\]]*\])'


@dataclass(frozen=True)
class SampleLoop:
    """The longest per-sample walk of the steps used (module doc). iterations: a step (median);
    rows: the window's width; walked: the walked tensor's shape; ops: ops an iteration runs (median);
    product_rows: the rows of the iterations' matrix products (the most; 0: none, a loop reading each
    sample into Python); loop_share: the iterations' part of the steps' time; share: theirs and, where
    it runs per sample too, the backward's."""

    op: str
    walked: str
    rows: int
    iterations: int
    ops: int
    product_rows: int
    loop_share: float
    share: float
    saving: float = 0.0
    backward_each: bool = False  # each iteration runs a backward pass: a Jacobian or per-sample gradients row by row

    def evidence(self) -> str:
        width = "one row" if self.rows == 1 else f"{self.rows} rows"
        how = ("iterating it: aten::unbind, then one piece an iteration" if self.op == UNBIND
               else f"{self.op} at 0, {self.rows}, {2 * self.rows}, ...")
        work = ("on its piece alone and reading a value into Python (aten::item)" if self.reads else
                f"whose matrix products multiply {self.product_rows} row{'s' if self.product_rows > 1 else ''}")
        return (f"the step walks one {self.walked} tensor {width} at a time ({how}): "
                f"{self.iterations} iterations a step, each running ~{self.ops} ops {work}, "
                f"{self.loop_share:.0%} of the step time"
                + (f", and its backward, per sample too, another {self.share - self.loop_share:.0%}"
                   if self.share - self.loop_share >= 0.005 else "")
                + f"; run on the whole batch, about {self.saving:.0%} of the step would go ({SAVING_BASIS})")

    @property
    def reads(self) -> bool:
        """A loop that runs no model per sample, only reads each sample's values into Python."""
        return self.product_rows == 0

    @property
    def measured(self) -> str:
        """What ``saving`` measures, for the remedies' ranking."""
        return "the per-sample loop's dispatch, per-op fixed costs and products beyond one"

    def remedy(self) -> str:
        if self.reads:
            return ("compute on the whole tensor and read the result into Python once ((out.argmax(1) == y).sum().item(); "
                    ".tolist() for per-sample values), not .item() per sample: accuracy counted sample by sample over a "
                    "batch of 256 took 1.76 ms a call on a CPU, 0.81 ms on the whole tensor; on a GPU each .item() "
                    "also waits for the device")
        if self.backward_each:
            return ("each iteration runs a backward pass: a Jacobian (or per-sample gradients of one forward) taken "
                    "row by row, as torch.autograd.functional.jacobian does by default; jacobian(..., vectorize=True), "
                    "torch.func.jacrev / jacfwd, or torch.func.vmap over torch.func.grad computes them in one batched "
                    "pass (a 64x64 Jacobian of a 2-layer MLP on a CPU: 3.06 ms row by row, 0.79 ms with vectorize=True)")
        return ("run the model once on the whole batch instead of a Python loop over its samples (per-sample "
                "results or gradients: torch.func.vmap, torch.func.grad): a 3-layer MLP on a CPU, batch 64, took 9-10 "
                "ms a training step per sample, 0.72 ms batched. A loop whose iterations feed each other (a "
                "recurrence, decoding) cannot be batched so")

    def as_dict(self) -> dict[str, object]:
        return {"op": self.op, "walked": self.walked, "rows": self.rows, "iterations": self.iterations,
                "ops_per_iteration": self.ops, "product_rows": self.product_rows, "loop_share": self.loop_share,
                "share": self.share, "saving": self.saving, "backward_each": self.backward_each}


@dataclass
class _Walk:
    rows: np.ndarray  # the walk's calls (an unbind's: each iteration's first op), in time order
    width: int
    shape: str
    op: str = ""  # the indexing op, where the rows are not its calls


def sample_loop(frame: Frame, used: list[int] | None) -> SampleLoop | None:
    """The steps' per-sample loop (module doc), or None when the trace shows none."""
    codes = [c for c, n in enumerate(frame.names) if n in WALK_OPS or n == UNBIND]
    if not codes or "args" not in frame.table.column_names:
        return None
    steps, step_ns = _steps_and_time(frame, used)
    if not step_ns:
        return None
    ops = frame.rows("cpu_op")
    calls = ops[member_mask(frame.name_code[ops], codes) & (frame.op_parent[ops] < 0)]
    calls = calls[member_mask(frame.step[calls], frame.step[steps].tolist())][:MAX_WALK_CALLS]
    unbinds = frame.name_code[calls] == frame.names.index(UNBIND) if UNBIND in frame.names else np.zeros(calls.size, bool)
    walks = _walks(frame, calls[~unbinds])
    if not walks and not unbinds.any():
        return None  # (the sort below is of every op: only where there is something to judge)
    by_start = ops[np.argsort(frame.start[ops], kind="stable")]
    walks = (walks + _unbind_walks(frame, calls[unbinds], by_start))[:MAX_WALKS]
    if not walks:
        return None
    # walk, loop ns, backward ns, ops an iteration, product rows, ns batching saves
    found: list[tuple[_Walk, int, int, int, int, int]] = []
    for walk in walks:
        judged = _iterations(frame, by_start, walk)
        if judged is not None:
            found.append((walk, *judged))
    # Walks of one loop (x[i:i+1] and y[i:i+1]) overlap: each thread's step counts its longest, and names
    # the largest tensor walked (the inputs, not the labels).
    longest: dict[tuple[int, int], tuple[_Walk, int, int, int, int, int]] = {}
    largest: dict[tuple[int, int], _Walk] = {}
    for f in found:
        key = (int(frame.thread_key[f[0].rows[0]]), int(frame.step[f[0].rows[0]]))
        if key not in longest or f[1] > longest[key][1]:
            longest[key] = f
        if key not in largest or _elements(f[0].shape) > _elements(largest[key].shape):
            largest[key] = f[0]
    found = [(replace(f[0], shape=largest[key].shape), *f[1:]) for key, f in longest.items()]
    if not found:
        return None
    loop_share = sum(f[1] for f in found) / step_ns
    share = loop_share + sum(f[2] for f in found) / step_ns
    if share < MIN_SHARE:
        return None
    walk, _, _, n_ops, product_rows, _ = max(found, key=lambda f: f[1])
    return SampleLoop(backward_each=_backward_each(frame, walk),op=walk.op or frame.names[int(frame.name_code[walk.rows[0]])], walked=walk.shape, rows=walk.width,
                      iterations=int(np.median([f[0].rows.size for f in found])), ops=n_ops,
                      product_rows=product_rows, loop_share=loop_share,
                      share=share, saving=sum(f[5] for f in found) / step_ns)


def _steps_and_time(frame: Frame, used: list[int] | None) -> tuple[np.ndarray, int]:
    """The step rows of the steps used and their summed time (what a share here is of)."""
    steps = step_rows(frame, used)
    return steps, int(frame.dur[steps].sum()) if steps.size else 0


def _backward_each(frame: Frame, walk: _Walk) -> bool:
    """Whether each of the walk's iterations runs a backward pass (autograd engine calls on its thread)
    and no forward layer (a top-level ``aten::linear`` or convolution): ``torch.autograd.grad`` per
    output row, a Jacobian row by row. A loop training per sample runs its forward per iteration too."""
    thread = frame.thread_key[walk.rows[0]]
    starts = np.sort(frame.start[walk.rows])
    if starts.size < 2:
        return False

    def iterations_with(rows: np.ndarray) -> int:
        rows = rows[frame.thread_key[rows] == thread]
        at = np.searchsorted(starts, frame.start[rows], side="right")  # the iteration each row runs in
        return int(np.unique(at[(at >= 1) & (at < starts.size)]).size)

    forward = np.flatnonzero(frame.name_mask(_FORWARD_LAYER) & (frame.op_parent < 0))
    backward = np.flatnonzero(frame.name_mask(BACKWARD_NODE))
    return iterations_with(backward) >= starts.size - 1 and iterations_with(forward) == 0


_FORWARD_LAYER = re.compile(r"^aten::(linear|convolution|conv\dd|matmul|bilinear)$")


def _walks(frame: Frame, calls: np.ndarray) -> list[_Walk]:
    """Runs of ``MIN_ITERATIONS`` or more calls, on one thread in one step, taking consecutive windows
    of equal width along dim 0 of tensors of one shape."""
    if calls.size < MIN_ITERATIONS:
        return []
    dims_code, dims = input_dims(frame.table, calls)
    concrete = pc.fill_null(pc.struct_field(pc.extract_regex(args_text(frame.table, calls), _CONCRETE), "concrete"),
                            "").dictionary_encode()
    concrete_code = concrete.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    texts = concrete.dictionary.to_pylist()
    # Each distinct (op, arguments) is read once.
    pairs, pair_of = np.unique(np.stack([frame.name_code[calls].astype(np.int64), concrete_code], axis=1), axis=0,
                               return_inverse=True)
    distinct = [_window(frame.names[n], texts[t]) for n, t in pairs.tolist()]
    windows = [distinct[j] for j in pair_of.ravel().tolist()]
    order = np.lexsort((frame.start[calls], dims_code, frame.step[calls], frame.thread_key[calls]))
    walks: list[_Walk] = []
    run: list[int] = []
    previous: tuple[int, int, int, int, int] | None = None  # thread, step, shape, start, width
    for i in order.tolist():
        window = windows[i]
        key = (int(frame.thread_key[calls[i]]), int(frame.step[calls[i]]), int(dims_code[i]))
        follows = (window is not None and previous is not None and key == previous[:3]
                   and window[0] == previous[3] + previous[4] and window[1] == previous[4])
        if not follows:
            _keep(walks, calls, run, previous, dims[dims_code[run[0]]] if run else "")
            run = []
        if window is not None:
            run.append(i)
            previous = (*key, *window)
        else:
            previous = None
    _keep(walks, calls, run, previous, dims[dims_code[run[0]]] if run else "")
    return walks


def _keep(walks: list[_Walk], calls: np.ndarray, run: list[int], last: tuple[int, ...] | None, dims_text: str) -> None:
    if len(run) >= MIN_ITERATIONS and last is not None and (shape := _walked_shape(dims_text)) is not None:
        walks.append(_Walk(calls[run], last[4], shape))


def _unbind_walks(frame: Frame, unbinds: np.ndarray, by_start: np.ndarray) -> list[_Walk]:
    """A walk per top-level unbind along dim 0 of a batch (``MIN_ITERATIONS`` or more pieces) whose
    following top-level ops on its thread repeat one sequence of op names once per piece: the walk's
    rows are the first op of each repetition (module doc). Unbinds back to back (``zip(x, y)``) start
    one loop, after the last of them (each finds it; the first, the inputs', is kept)."""
    if not unbinds.size:
        return []
    dims_code, dims = input_dims(frame.table, unbinds)
    concrete = pc.extract_regex(args_text(frame.table, unbinds), _CONCRETE)
    dim_texts = pc.fill_null(pc.struct_field(concrete, "concrete"), "").to_pylist()
    walks: list[_Walk] = []
    judged = 0
    for i, row in enumerate(unbinds.tolist()):
        try:
            args = json.loads(dim_texts[i]) if dim_texts[i] else None
            along_first = isinstance(args, list) and len(args) >= 2 and int(args[1]) == 0
        except (TypeError, ValueError):
            along_first = False
        shape = _walked_shape(dims[dims_code[i]]) if along_first else None
        pieces = json.loads(dims[dims_code[i]])[0][0] if shape is not None else 0
        if pieces < MIN_ITERATIONS:
            continue
        # The top-level ops after it on its thread, in its step (read up to MAX_ITERATION_OPS an iteration).
        at = int(np.searchsorted(frame.start[by_start], frame.end[row]))
        after = by_start[at:at + pieces * MAX_ITERATION_OPS]
        after = after[(frame.thread_key[after] == frame.thread_key[row]) & (frame.op_parent[after] < 0)
                      & (frame.step[after] == frame.step[row])]
        after = after[np.argmax(frame.name_code[after] != frame.name_code[row]):] if after.size else after
        period = _period(frame.name_code[after], pieces)
        if period:
            walks.append(_Walk(after[:pieces * period:period], 1, shape or "", UNBIND))
        judged += 1
        if judged >= MAX_WALKS:
            break
    return walks


def _period(codes: np.ndarray, repeats: int) -> int:
    """The shortest p such that the first ``repeats`` * p codes are one sequence of p repeated, else 0."""
    most = codes.size // repeats
    if not most:
        return 0
    for p in np.flatnonzero(codes[1:most + 1] == codes[0]).tolist():
        p += 1
        block = codes[:repeats * p].reshape(repeats, p)
        if (block == block[0]).all():
            return p
    return 0


def _window(name: str, concrete: str) -> tuple[int, int] | None:
    """(start, width) along dim 0 of one slice/select/narrow call from its concrete arguments; None for
    another dim, a step, a negative or missing index."""
    try:
        args = json.loads(concrete) if concrete else None
    except ValueError:
        return None
    if not isinstance(args, list):
        return None
    try:
        if name == "aten::select" and len(args) >= 3 and int(args[1]) == 0:
            start, width = int(args[2]), 1
        elif name == "aten::slice" and len(args) >= 4 and int(args[1]) == 0 and (len(args) < 5 or args[4] in ("", "1")):
            start = int(args[2]) if args[2] else 0
            width = int(args[3]) - start
        elif name == "aten::narrow" and len(args) >= 4 and int(args[1]) == 0:
            start, width = int(args[2]), int(args[3])
        else:
            return None
    except (TypeError, ValueError):
        return None
    return (start, width) if start >= 0 and 0 < width <= MAX_ROWS else None


def _walked_shape(dims_text: str) -> str | None:
    """The walked tensor's shape, compact; None where it cannot be a batch of samples: a batch of one
    after the walked dim (a [T, 1, F] sequence walked by timestep, as a batch-1 RNN loop does)."""
    try:
        dims = json.loads(dims_text) if dims_text else []
    except ValueError:
        return None
    if not dims or not isinstance(dims[0], list) or not dims[0] or (len(dims[0]) > 1 and dims[0][1] == 1):
        return None
    return compact_shapes(json.dumps(dims[:1]))


def _iterations(frame: Frame, by_start: np.ndarray, walk: _Walk) -> tuple[int, int, int, int, int] | None:
    """For a walk whose iterations each run small matrix products and no recurrence or write: (their
    time in ns, the per-sample backward's after them, ops an iteration (median), the products' rows
    (the most), the ns batching would save (``_batching_saves``, with the backward's share)); else None.
    ``by_start``: the trace's ops in order of start."""
    starts = frame.start[walk.rows]
    gaps = np.diff(starts)
    # The last iteration ends as long after its window as the others (median) did, or at its step's end.
    step_rows = frame.rows("step")
    step_end = int(frame.end[step_rows[frame.step[step_rows] == frame.step[walk.rows[0]]]].max(initial=0))
    last_end = int(starts[-1] + np.median(gaps))
    last_end = min(last_end, step_end) if step_end > starts[-1] else last_end
    bounds = np.append(starts, last_end)
    thread = frame.thread_key[walk.rows[0]]
    lo, hi = np.searchsorted(frame.start[by_start], [bounds[0], bounds[-1]])
    inside = by_start[lo:hi][frame.thread_key[by_start[lo:hi]] == thread]
    iteration = np.searchsorted(bounds, frame.start[inside], side="right") - 1
    names = np.asarray(frame.names, object)[frame.name_code[inside]]
    if np.isin(names, RNN_CELL_OPS).any():
        return None
    gated = [set(names[iteration == j].tolist()) >= set(GATE_OPS) for j in range(walk.rows.size)]
    if sum(gated) * 2 >= walk.rows.size:
        return None
    # A window written into (out[t] = ...): the op after it at the top level is a write.
    top = inside[frame.op_parent[inside] < 0]
    after = np.searchsorted(frame.start[top], starts, side="right")
    written = [after[j] < top.size and frame.name(int(top[after[j]])) in WRITE_OPS for j in range(walk.rows.size)]
    if sum(written) * 2 >= walk.rows.size:
        return None
    products = np.isin(names, GEMM_FLOP_OPS)
    n_ops = int(np.median(np.bincount(iteration, minlength=walk.rows.size)))
    if np.unique(iteration[products]).size < 0.8 * walk.rows.size:
        # No model per sample: a loop reading each sample's result into Python (a metric, predictions).
        if not _reads_each_piece(frame, inside, iteration, names, walk):
            return None
        loop_ns = int(bounds[-1] - bounds[0])
        return loop_ns, 0, n_ops, 0, _batching_saves(frame, inside, names, walk.rows.size, int(bounds[0]), int(bounds[-1]))
    product_rows = inside[products]
    dims_code, dims = input_dims(frame.table, product_rows)
    # Products of a backward run inside the loop (per-sample gradients: torch.autograd.grad each iteration)
    # sum over the sample's rows: their K (dW = dY^T X), not M or N, is what a sample holds.
    in_backward = nearest_ancestor(frame.parent, product_rows, _evaluate_function_mask(frame)) >= 0
    pairs = np.unique(np.stack([frame.name_code[product_rows].astype(np.int64), dims_code.astype(np.int64),
                                in_backward.astype(np.int64)], axis=1), axis=0)
    # A sample's rows are M of a matrix product, N of a matrix-vector one (x[i] is a vector): never more
    # than the window holds (a timestep x[t] of a [T, B, F] sequence holds B rows a product).
    rows = [min(shape[1], shape[2] if backward_product else shape[3]) for name_code, code, backward_product in pairs.tolist()
            if (shape := gemm_shape(frame.names[name_code], dims[code])) is not None]
    if not rows or max(rows) > walk.width:
        return None
    backward = _backward_per_sample(frame, by_start[hi:], walk, step_end)
    loop_ns = int(bounds[-1] - bounds[0])
    saves = _batching_saves(frame, inside, names, walk.rows.size, int(bounds[0]), int(bounds[-1]))
    # The per-sample backward is the same kind of work: it saves in the same proportion.
    return loop_ns, backward, n_ops, max(rows), saves + int(backward * saves / loop_ns) if loop_ns else saves


def _batching_saves(frame: Frame, inside: np.ndarray, names: np.ndarray, iterations: int, start: int, end: int) -> int:
    """What running the loop's iterations as one batch would save (SAVING_BASIS): the time between its
    top-level ops (dispatch, Python), and of each top-level op all but one iteration's share of its fixed
    cost (the 10th-percentile top-level op time of the loop), or of its whole time where it runs a matrix
    product (one row at a time, a product reads its whole weight: batched, once) or its inputs hold
    ``TINY_ELEMENTS`` or fewer (no work beside the fixed cost)."""
    top = inside[frame.op_parent[inside] < 0]
    if not top.size:
        return 0
    dur = np.minimum(frame.end[top], end) - frame.start[top]
    between = max(0, end - start - int(dur.sum()))
    floor = int(np.percentile(dur, 10))
    products = inside[np.isin(names, GEMM_FLOP_OPS)]
    runs_product = np.isin(top, _outermost(frame, products))
    # An op on a few elements does no work to speak of: all of its time is fixed cost.
    dims_code, dims = input_dims(frame.table, top)
    largest = np.array([_largest_input(text) if text else TINY_ELEMENTS + 1 for text in dims], np.int64)
    fixed = runs_product | (largest[dims_code] <= TINY_ELEMENTS)
    per_op = np.where(fixed, dur, np.minimum(dur, floor))
    return between + int(per_op.sum() * (1 - 1 / iterations))


def _outermost(frame: Frame, rows: np.ndarray) -> np.ndarray:
    """Each row's top-level op (its outermost op ancestor; a top-level op itself)."""
    out = rows.copy()
    parent = frame.op_parent[out]
    while (parent >= 0).any():
        out = np.where(parent >= 0, parent, out)
        parent = np.where(parent >= 0, frame.op_parent[np.maximum(out, 0)], -1)
    return out


def _reads_each_piece(frame: Frame, inside: np.ndarray, iteration: np.ndarray, names: np.ndarray, walk: _Walk) -> bool:
    """Whether the iterations (``inside``: their ops; ``iteration``: each op's) read a value into Python
    (``READ_OPS``), 80% of them or more, and every op in them but the indexing works on no more than one
    piece of the walked tensor (a loop that runs batch-wide work per iteration is not this)."""
    if np.unique(iteration[np.isin(names, READ_OPS)]).size < 0.8 * walk.rows.size:
        return False
    first = _elements(walk.shape.split("x")[0]) if walk.shape else 0
    piece = _elements(walk.shape) // first * walk.width if first else 0
    # The indexing (and the ops inside it) takes a view of the whole tensor, not its data.
    parents = frame.op_parent[inside]
    parent_names = np.where(parents >= 0, np.asarray(frame.names, object)[frame.name_code[np.maximum(parents, 0)]], "")
    work = inside[~np.isin(names, (*WALK_OPS, UNBIND)) & ~np.isin(parent_names, (*WALK_OPS, UNBIND))]
    dims_code, dims = input_dims(frame.table, work)
    return bool(piece) and work.size > 0 and max(_largest_input(text) for text in (dims[c] for c in np.unique(dims_code).tolist())) <= piece


def _largest_input(dims_text: str) -> int:
    """Elements of an op's largest input tensor, from its ``Input Dims`` text (none: 0)."""
    try:
        dims = json.loads(dims_text) if dims_text else []
    except ValueError:
        return 0
    sizes = [int(np.prod(d)) for d in dims if isinstance(d, list) and all(isinstance(n, int) for n in d)]
    return max(sizes, default=0)


def _elements(shape: str) -> int:
    """Elements of a compact shape ("32x128"; "" or unreadable: 0)."""
    try:
        return int(np.prod([int(d) for d in shape.split("x")])) if shape else 0
    except ValueError:
        return 0


def _evaluate_function_mask(frame: Frame) -> np.ndarray:
    """Per row, whether it is one of autograd's backward node ranges (``evaluate_function``)."""
    return frame.memo("evaluate_function_mask",
                      lambda: member_mask(frame.name_code, [c for c, n in enumerate(frame.names) if BACKWARD_NODE.match(n)]))


def _backward_per_sample(frame: Frame, after: np.ndarray, walk: _Walk, step_end: int) -> int:
    """The time of the step's backward after the loop (autograd's evaluate_function ranges, any
    thread; ``after``: the ops starting after the loop, in order of start) where it runs per sample
    too: at least one product a sample, each over at most ``MAX_ROWS`` rows (a weight's gradient,
    dW = dY^T X, sums over the rows: its K)."""
    after = after[:np.searchsorted(frame.start[after], step_end)] if step_end else after
    in_step = after[frame.step[after] == frame.step[walk.rows[0]]]
    nodes = in_step[frame.named(in_step, BACKWARD_NODE)]
    products = in_step[np.isin(np.asarray(frame.names, object)[frame.name_code[in_step]], GEMM_FLOP_OPS)]
    if not nodes.size or products.size < walk.rows.size:
        return 0
    dims_code, dims = input_dims(frame.table, products)
    pairs = np.unique(np.stack([frame.name_code[products].astype(np.int64), dims_code.astype(np.int64)], axis=1), axis=0)
    shapes = [shape for name_code, code in pairs.tolist() if (shape := gemm_shape(frame.names[name_code], dims[code]))]
    if not shapes or max(min(m, k) for _, m, k, _ in shapes) > MAX_ROWS:
        return 0
    return int(frame.dur[nodes].sum())


# A batch prepared sample by sample inside the step: an unbind of the batch along dim 0, per-sample ops
# (no matrix product: not a model run per sample), then one stack (or cat) of the pieces, before the
# step's first product or convolution.
STACK_OPS = ("aten::stack", "aten::cat", "aten::concat", "aten::concatenate")
MODEL_OP_CLASSES = ("gemm", "convolution")
PREPARATION_SHARE = 0.2  # of the steps' time: evidence and a remedy


@dataclass(frozen=True)
class SampleTransforms:
    """A batch prepared sample by sample in the steps used (``sample_transforms``). walked: the batch's
    shape; samples: its pieces; ops: top-level ops a sample (the median step's); names: the ops with the
    most self time in them; share: the preparation's part of the steps' time, unbind to stack."""

    walked: str
    samples: int
    ops: float
    names: tuple[str, ...]
    stack: str
    share: float

    def evidence(self) -> str:
        return (f"the step prepares its batch sample by sample before the model runs: aten::unbind of {self.walked} "
                f"into {self.samples} samples, ~{self.ops:,.0f} ops a sample ({', '.join(self.names)} the longest), then "
                f"{self.stack}: {self.share:.0%} of the step time, on the loop's thread")

    def remedy(self) -> str:
        return ("prepare the samples outside the step: per-sample transforms (augmentation, cropping, normalization) "
                "belong in the Dataset's __getitem__, where DataLoader(num_workers > 0) runs them in worker processes "
                "beside the training step; or transform the batch tensor at once (torchvision.transforms.v2 applied to "
                "a batch draws one set of random parameters for all of it; a batched augmentation library draws them "
                "per sample): 32 images of 3x96x96 randomly cropped, flipped and colour-jittered took 8.5 ms one by one "
                "and 1.4 ms as one batch on a 2-core Xeon, in a training step of 18 ms")

    def as_dict(self) -> dict[str, object]:
        return {"walked": self.walked, "samples": self.samples, "ops_per_sample": self.ops, "names": list(self.names),
                "stack": self.stack, "share": self.share}


def sample_transforms(frame: Frame, used: list[int] | None, classes: RowClasses) -> SampleTransforms | None:
    """The steps' batch prepared sample by sample (``SampleTransforms``), or None: a top-level unbind along
    dim 0 of a batch (``MIN_ITERATIONS`` pieces or more, shapes recorded) followed on its thread, in its
    step, by at least one top-level op a piece, none a matrix product or an autograd backward node, up to
    the first top-level stack or cat; no product or convolution before the unbind in that step (the model
    has not run: not a per-sample post-processing of its outputs); the longest such stretch per thread and
    step, unbind to stack, ``PREPARATION_SHARE`` of the steps' time."""
    if UNBIND not in frame.names or "args" not in frame.table.column_names:
        return None
    steps, step_ns = _steps_and_time(frame, used)
    if not step_ns:
        return None
    ops = frame.rows("cpu_op")
    top = ops[(frame.op_parent[ops] < 0) & member_mask(frame.step[ops], frame.step[steps].tolist())]
    unbinds = top[frame.name_code[top] == frame.names.index(UNBIND)][:MAX_WALKS]
    if not unbinds.size:
        return None
    # The top-level ops by (thread, step), then start: each thread's step is one block.
    _, thread_code = factorize(frame.thread_key[top])
    block = thread_code.astype(np.int64) * (int(frame.step[top].max()) + 2) + frame.step[top] + 1
    order = np.lexsort((frame.start[top], block))
    top, block = top[order], block[order]
    where = np.flatnonzero(member_mask(top, unbinds))
    at_of = dict(zip(top[where].tolist(), where.tolist(), strict=True))  # each unbind's place in the sorted rows
    ends = member_mask(frame.name_code[top], [frame.names.index(n) for n in STACK_OPS if n in frame.names])
    model = member_mask(classes.op[top], [OP_CLASSES.index(c) for c in MODEL_OP_CLASSES]) | frame.name_mask(BACKWARD_NODE)[top]
    dims_code, dims = input_dims(frame.table, unbinds)
    concrete = pc.fill_null(pc.struct_field(pc.extract_regex(args_text(frame.table, unbinds), _CONCRETE), "concrete"), "")
    best: dict[int, tuple[int, int, int, int, int]] = {}  # block: (ns, unbind's index in unbinds, at, stop, pieces)
    for i, (row, args_text_) in enumerate(zip(unbinds.tolist(), concrete.to_pylist(), strict=True)):
        try:
            args = json.loads(args_text_) if args_text_ else None
            along_first = isinstance(args, list) and len(args) >= 2 and int(args[1]) == 0
            shape = json.loads(dims[dims_code[i]])[0] if along_first else None
        except (TypeError, ValueError):
            continue
        if not isinstance(shape, list) or len(shape) < 2 or int(shape[0]) < MIN_ITERATIONS:
            continue
        pieces, at = int(shape[0]), at_of[row]
        lo, hi = np.searchsorted(block, block[at], "left"), np.searchsorted(block, block[at], "right")
        if model[lo:at].any():
            continue  # the model ran before it: its outputs, not a batch being prepared
        after = np.flatnonzero(ends[at + 1:hi])
        if not after.size:
            continue
        stop = at + 1 + int(after[0])
        if stop - at - 1 < pieces or model[at + 1:stop].any():
            continue
        ns = int(frame.end[top[stop]] - frame.start[row])
        if int(block[at]) not in best or ns > best[int(block[at])][0]:
            best[int(block[at])] = (ns, i, at, stop, pieces)
    if not best:
        return None
    share = sum(b[0] for b in best.values()) / step_ns
    if share < PREPARATION_SHARE:
        return None
    _, i, at, stop, pieces = max(best.values())
    inside = top[at + 1:stop]
    # By their time, nested ops included (a transform's top-level op holds its kernels).
    by_name = np.bincount(frame.name_code[inside], weights=frame.dur[inside], minlength=len(frame.names))
    names = tuple(frame.names[c] for c in np.argsort(-by_name, kind="stable")[:3] if by_name[c] > 0)
    ops_a_sample = float(np.median([(b[3] - b[2] - 1) / b[4] for b in best.values()]))
    return SampleTransforms(walked=_walked_shape(dims[dims_code[i]]) or "", samples=pieces, ops=ops_a_sample, names=names,
                            stack=frame.name(int(top[stop])), share=share)
