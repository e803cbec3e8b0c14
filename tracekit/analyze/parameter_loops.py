"""A Python loop over the parameters outside the optimizer: an average of the weights, gradient
clipping, a hand-written update, run one tensor at a time.

Training recipes keep an exponential moving average of the weights (diffusion models, YOLO, timm's
ModelEma), clip or rescale the gradients, or update some tensors by hand, and the plain way to write
that is a Python loop: ``for e, p in zip(ema.parameters(), model.parameters()): e.sub_((1 - d) * (e - p))``.
Every tensor then pays each op's dispatch, and temporaries (``e - p``, ``(1 - d) * ...``) add passes
over memory. PyTorch 2.13, 2-core Xeon, two threads, 50 tensors (twelve 128-wide Linear and
LayerNorm blocks and a head), each timed between training steps (tests/data/cpu/
make_parameter_loops.py): that EMA took 390 µs, ``e.lerp_(p, 1 - d)`` a tensor at a time 190 µs,
``torch._foreach_lerp_`` over the lists 136 µs; the training step around it (AdamW, batch 32) 3.9 ms,
3.6 ms with the foreach EMA, 3.4 ms without one. Its report named the optimizer and dispatch, and
nothing of the loop. diffusers' ``EMAModel`` (its default ``foreach=False``) over a Hugging Face GPT-2's
52 tensors (4.7M parameters; tests/data/cpu/make_diffusers_ema.py): 2.61 ms a step, 2.07 ms with
``foreach=True`` (a ``_foreach_sub`` into a temporary, then ``_foreach_sub_``), 0.93 ms as one
``torch._foreach_lerp_``. ``clip_grad_norm_(..., foreach=False)`` over the same gradients took 201 µs,
with foreach 162 µs (its default on the CPU too: PyTorch 2.13 takes foreach there). YOLO's ModelEMA
over the state dict of the same MLP with BatchNorm (74 tensors, its running statistics too): 720 µs,
69 µs as one ``torch._foreach_lerp_`` over lists built once. The norms of the 50 weights and their
gradients read into a dict a tensor at a time (``p.grad.norm().item()``, per-layer norms logged every
step): 472 µs, 262 µs as one ``torch._foreach_norm`` read once; the step 4.56 ms against 4.01 ms
without them (that run read every figure here about 15% slower: the machine, not the code).

The evidence needs shapes (``record_shapes=True``) and a torch.optim optimizer in the steps used: its
ops (inside ``Optimizer.step#...``) touch the parameters' shapes. Around each optimizer call, on its
thread, the top-level ops are read in order in two windows: after the call, up to the next backward
node (``autograd::engine::evaluate_function``, on any thread of its process), matrix product or
convolution (the next forward) or call; before it, from the last backward node's end (or the previous
call's end). Ops inside an optimizer call are told by time, not by the row tree (Lightning marks its
profiler steps inside the call's closure). A loop is a run of ATen ops each of whose tensor inputs has a
parameter's shape (0-d scalars may sit between them: a clip coefficient moved per tensor), with no
product, whose tensors (the count most of its op names share) are ``MIN_ITERATIONS`` or more; a
stretch at a run's start or end of the optimizer's own op names (two or more, one ``MIN_ITERATIONS``
times or more) is cut off: the update of a call the profile began or ended inside, whose range is not
recorded; the framework's own ops (no ``aten::`` name: DDP's reducer copying buckets back to the
gradients) are no Python loop's. The loops take ``MIN_SHARE`` of the steps' time or more. CPU programs
only (a GPU program's host profiled alone is left out too): on a GPU the host's loop costs the step only
where the host paces it, and no stored GPU trace has one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from tracekit.analyze.frame import BACKWARD_NODE, Frame, step_rows
from tracekit.analyze.optimizer import on_gpu, ops_inside, optimizer_calls, outermost, update_of
from tracekit.analyze.sample_loop import READ_OPS
from tracekit.analyze.top_ops import GEMM_FLOP_OPS, input_dims
from tracekit.analyze.unused_grads import shapes_in, tensor_shapes
from tracekit.ingest.links import member_mask, nearest_ancestor

MIN_ITERATIONS = 8  # tensors a loop walks (_iterations), at least
MIN_SHARE = 0.05  # of the steps' time in such loops
# Products or convolutions in a run: a forward (an evaluation batch inside the step), not a loop over
# the parameters.
_FORWARD_OPS = frozenset(GEMM_FLOP_OPS) | {"aten::linear", "aten::matmul", "aten::conv1d", "aten::conv2d",
                                           "aten::conv3d", "aten::convolution", "aten::_convolution", "aten::einsum"}
_PARAM, _SCALAR, _OTHER = 0, 1, 2
# What a loop reads as (_purpose): an average of the weights after the optimizer step writes them in
# place from these ops alone; clipping before it takes norms or clamps (and scales by the result).
_AVERAGING_OPS = frozenset({"aten::sub", "aten::sub_", "aten::mul", "aten::mul_", "aten::add", "aten::add_",
                            "aten::lerp_", "aten::copy_", "aten::detach", "aten::to", "aten::_to_copy", "aten::rsub"})
_AVERAGING_WRITES = frozenset({"aten::sub_", "aten::add_", "aten::lerp_", "aten::copy_"})
_CLIPPING_OPS = frozenset({"aten::linalg_vector_norm", "aten::norm", "aten::clamp_", "aten::clamp", "aten::clip_"})
_SCALING_OPS = frozenset({"aten::mul_", "aten::div_"})
# An op a loop runs per tensor, and the foreach op that runs it over a list.
FOREACH_OF = {"aten::clamp_": "torch._foreach_clamp_min_ and torch._foreach_clamp_max_",
              "aten::clip_": "torch._foreach_clamp_min_ and torch._foreach_clamp_max_",
              "aten::mul_": "torch._foreach_mul_", "aten::div_": "torch._foreach_div_",
              "aten::add_": "torch._foreach_add_", "aten::sub_": "torch._foreach_sub_",
              "aten::lerp_": "torch._foreach_lerp_", "aten::addcmul_": "torch._foreach_addcmul_",
              "aten::zero_": "torch._foreach_zero_", "aten::copy_": "torch._foreach_copy_",
              "aten::sqrt": "torch._foreach_sqrt", "aten::abs": "torch._foreach_abs",
              "aten::linalg_vector_norm": "torch._foreach_norm", "aten::norm": "torch._foreach_norm"}


@dataclass(frozen=True)
class ParameterLoop:
    """The steps' loops over the parameters outside the optimizer (module doc): their share of the
    steps' time, loops and ops a step and the tensors the longest walks (medians), the ops of its
    iterations, where they run (after the optimizer step, before it, or both), and ``saving``: their
    time outside the ops' own arithmetic (the dispatch one op over every tensor would not pay), a
    share of the steps' time."""

    share: float
    loops: int
    ops: int
    tensors: int
    op_names: tuple[str, ...]
    where: str
    purposes: frozenset[str]  # what the loops read as: "average", "clipping", "reads", "other" (_purpose)
    other_ops: tuple[str, ...]  # the ops of the "other" loops, for their foreach equivalents
    optimizer: str
    saving: float

    def evidence(self) -> str:
        loops = "a Python loop" if self.loops == 1 else f"{self.loops} Python loops"
        return (f"{loops} over the parameters {self.where}, outside it ({self.optimizer}), one tensor at a time: "
                f"{self.ops} ops a step on tensors of the parameters' shapes ({', '.join(self.op_names)}; "
                f"{self.tensors} tensors), {self.share:.0%} of the step time")

    def remedy(self) -> str:
        averaging = ("an average of the weights (EMA) as torch._foreach_lerp_(ema_tensors, model_tensors, 1 - decay) "
                     "under torch.no_grad(), as timm's ModelEmaV3 does; 50 tensors on a 2-core CPU, between training "
                     "steps: e.sub_((1 - d) * (e - p)) a tensor at a time 390 µs, e.lerp_(p, 1 - d) a tensor at a "
                     "time 190 µs, torch._foreach_lerp_ 136 µs (the step 3.9 ms, 3.6 ms); diffusers' EMAModel over a "
                     "GPT-2's 52 tensors (4.7M parameters): 2.61 ms a tensor at a time, 2.07 ms with foreach=True "
                     "(which makes a temporary first), 0.93 ms as torch._foreach_lerp_; YOLO's ModelEMA over the state "
                     "dict (74 tensors with BatchNorm's statistics) 720 µs, one torch._foreach_lerp_ over lists "
                     "built once 69 µs")
        clipping = ("gradient clipping with foreach (clip_grad_norm_ and clip_grad_value_ take it by default where the "
                    "device supports it, the CPU too; there its ops still walk the tensors: 50 gradients, 201 µs a "
                    "tensor at a time, 162 µs foreach)")
        equivalents = [f"{op} as {FOREACH_OF[op]}" for op in self.other_ops if op in FOREACH_OF]
        other = f"here {', '.join(equivalents)}" if equivalents else "the loop's ops on the tensor lists"
        reads = ("values read into Python a tensor at a time (.item(): per-layer norms logged) computed over the "
                 "lists and read once, torch.stack(torch._foreach_norm(tensors)).tolist() (the norms of 50 weights and "
                 "their gradients on a 2-core CPU: 472 µs read a tensor at a time, 262 µs; on a GPU each .item() "
                 "also waits for the GPU)")
        how = "; ".join(text for purpose, text in (("average", averaging), ("clipping", clipping), ("reads", reads),
                                                   ("other", other)) if purpose in self.purposes)
        return (f"do the loop over the parameters ({self.share:.0%} of the step) as one torch._foreach_* op over the "
                f"tensor lists instead of ops per tensor: {how}")

    def as_dict(self) -> dict[str, object]:
        return {"share": round(self.share, 4), "loops_per_step": self.loops, "ops_per_step": self.ops,
                "tensors": self.tensors,
                "op_names": list(self.op_names), "where": self.where, "purposes": sorted(self.purposes),
                "optimizer": self.optimizer,
                "saving": round(self.saving, 4)}


@dataclass(frozen=True)
class Loop:
    """One loop over the parameters: its span on its thread (``thread``: ``Frame.thread_key``), step,
    where it runs ("after" or "before" the optimizer step), its parameter ops' names (with
    ``aten::item`` where it reads a value into Python a tensor) and their counts, its top-level ops, the
    tensors it walks, and its time outside its innermost ops' arithmetic."""

    begin: int
    end: int
    thread: int
    step: int
    place: str
    names: frozenset[str]
    counts: tuple[tuple[str, int], ...]
    ops: int
    tensors: int
    outside_ns: int


def loops_in(frame: Frame, used: list[int] | None) -> tuple[list[Loop], str] | None:
    """The loops over the parameters outside the optimizer in the steps used (module doc; every step when
    None), and the optimizers' names; None where nothing can be read (no shapes, no optimizer, a GPU)."""
    if "args" not in frame.table.column_names or not any(BACKWARD_NODE.match(n) for n in frame.names):
        return None
    if on_gpu(frame):  # GPU activity recorded, or a GPU program's host alone (its launches, GPU-only ops)
        return None
    steps = step_rows(frame, used)
    step_numbers = np.unique(frame.step[steps]).tolist()
    calls = optimizer_calls(frame)
    calls = calls[member_mask(frame.step[calls], step_numbers)] if steps.size else calls[:0]
    if not calls.size:
        return None
    update = update_of(frame, calls)
    shapes = shapes_in(frame, update.inside)
    if not shapes:
        return None  # shapes not recorded (or a 0-d parameter alone): nothing is claimed
    windows = _windows(frame, outermost(frame, optimizer_calls(frame)), step_numbers)
    top = np.concatenate([w[frame.op_parent[w] < 0] for w, _ in windows]) if windows else calls[:0]
    if not top.size:
        return None
    codes, texts = input_dims(frame.table, top)
    kind_of_text = np.array([_kind(text, shapes) for text in texts], np.int8)
    kind = np.full(len(frame), _OTHER, np.int8)
    kind[top] = kind_of_text[codes]
    # A product or convolution marks a forward; an op that is no ATen op is the framework's own work, which
    # no foreach op replaces (DDP's reducer copying a bucket back to its gradients, 10 a step).
    not_loop = [c for c, n in enumerate(frame.names) if n in _FORWARD_OPS or not n.startswith("aten::")]
    kind[top[member_mask(frame.name_code[top], not_loop)]] = _OTHER
    update_names = {frame.names[c] for c in np.unique(frame.name_code[update.inside]).tolist()}
    read_codes = [c for c, n in enumerate(frame.names) if n in READ_OPS]  # .item(): a value read into Python
    loops: list[Loop] = []
    for window, place in windows:
        rows = window[frame.op_parent[window] < 0]
        kinds = kind[rows]
        window_starts = frame.start[window]
        for run in _runs(kinds):
            found = _without_update(frame, rows, kinds, run, update_names)
            if found is None:
                continue
            run, follows_update = found
            run_rows = rows[run]
            param_rows = run_rows[kinds[run] == _PARAM]
            counts = Counter(frame.names[c] for c in frame.name_code[param_rows].tolist())
            tensors = _iterations(counts)
            if tensors < MIN_ITERATIONS:
                continue
            begin, end = int(frame.start[run_rows[0]]), int(frame.end[run_rows].max())
            inside = window[np.searchsorted(window_starts, begin, "left"):np.searchsorted(window_starts, end, "left")]
            # A loop that reads a value into Python a tensor (a top-level .item()) is said so (_purpose).
            reads = int(member_mask(frame.name_code[run_rows], read_codes).sum())
            loops.append(Loop(begin=begin, end=end, thread=int(frame.thread_key[run_rows[0]]),
                              step=int(frame.step[run_rows[0]]), place="after" if follows_update else place,
                              names=frozenset(counts) | ({"aten::item"} if reads * 2 >= tensors else set()),
                              counts=tuple(counts.items()), ops=int(run_rows.size), tensors=tensors,
                              outside_ns=max(end - begin - _arithmetic_ns(frame, inside), 0)))
    return loops, " and ".join(sorted(update.names))


def parameter_loop(frame: Frame, used: list[int] | None) -> ParameterLoop | None:
    """The loops over the parameters outside the optimizer in the steps used (module doc), told where
    they take ``MIN_SHARE`` of the steps' time; else None."""
    steps = step_rows(frame, used)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    read = loops_in(frame, used) if step_ns else None
    if read is None or not read[0]:
        return None
    loops, optimizer = read
    per_step: dict[int, list[int]] = {}  # step: [loop ns, loops, ops, tensors of the longest]
    names: Counter[str] = Counter()
    for loop in loops:
        mine = per_step.setdefault(loop.step, [0, 0, 0, 0])
        mine[0] += loop.end - loop.begin
        mine[1] += 1
        mine[2] += loop.ops
        mine[3] = max(mine[3], loop.tensors)
        names.update({n: c for n, c in loop.counts if c * 2 >= loop.tensors})
    total = sum(ns for ns, _, _, _ in per_step.values())
    if total / step_ns < MIN_SHARE:
        return None
    loop_names = [(loop.place, loop.names) for loop in loops]
    places = {place for place, _ in loop_names}
    where = ("after the optimizer step" if places == {"after"} else "before the optimizer step" if places == {"before"}
             else "before and after the optimizer step")
    order = sorted(names, key=lambda n: -names[n])[:4]
    purposes = _purpose(loop_names)
    other_ops = tuple(sorted({n for place, ops in loop_names if purposes[(place, ops)] == "other" for n in ops}))
    count, loop_ops, tensors = (int(np.median(column)) for column in list(zip(*per_step.values(), strict=True))[1:])
    return ParameterLoop(share=total / step_ns, loops=count, ops=loop_ops, tensors=tensors, op_names=tuple(order),
                         where=where, purposes=frozenset(purposes.values()), other_ops=other_ops,
                         optimizer=optimizer, saving=sum(loop.outside_ns for loop in loops) / step_ns)


def _purpose(loops: list[tuple[str, frozenset[str]]]) -> dict[tuple[str, frozenset[str]], str]:
    """What each loop (where it runs, its parameter ops' names, with ``aten::item`` where it reads a value
    into Python a tensor) reads as: "reads" (values read a tensor at a time: logged or checked norms),
    "average" (after the step, writing the weights in place from an average's ops: an EMA), "clipping"
    (before it, taking norms or clamping; and before it a loop that only scales, where such a loop is
    there: clip_grad_norm_'s second pass), else "other"."""
    clipping = any(place == "before" and ops & _CLIPPING_OPS and "aten::item" not in ops for place, ops in loops)
    out = {}
    for place, ops in loops:
        if "aten::item" in ops:
            out[(place, ops)] = "reads"
        elif place == "after" and ops <= _AVERAGING_OPS and ops & _AVERAGING_WRITES:
            out[(place, ops)] = "average"
        elif place == "before" and (ops & _CLIPPING_OPS or (clipping and ops <= _SCALING_OPS)):
            out[(place, ops)] = "clipping"
        else:
            out[(place, ops)] = "other"
    return out


def _windows(frame: Frame, calls: np.ndarray, steps: list[int]) -> list[tuple[np.ndarray, str]]:
    """Where a loop over the parameters can run, around each optimizer call (``calls``: every outermost
    one, on its thread): "after" it, from its end to the next backward node, product or convolution on
    its thread (the next forward) or the next call; "before" it, from the last backward node's end (or
    the previous call's end, if later) to its start. Each window's op rows in the steps ``steps``,
    outside every optimizer call by time (Lightning marks a profiler step inside the call's closure: the
    update's ops after that mark nest under the step, not the call) and under no backward node, by start
    (nested ops included: a loop's arithmetic is read off its innermost ops); a row after one call and
    before the next is the first's."""
    nodes = frame.rows("cpu_op", "user_range")
    nodes = nodes[frame.named(nodes, BACKWARD_NODE)]
    is_node = np.zeros(len(frame), bool)
    is_node[nodes] = True
    forward_codes = [c for c, n in enumerate(frame.names) if n in _FORWARD_OPS]
    ops = frame.rows("cpu_op")
    ops = ops[member_mask(frame.step[ops], steps) & member_mask(frame.thread_key[ops], frame.thread_key[calls].tolist())]
    ops = ops[~member_mask(ops, ops_inside(frame, calls, ops, frame.start[calls]).tolist())]
    ops = ops[nearest_ancestor(frame.parent, ops, is_node) < 0]
    out: list[tuple[np.ndarray, str]] = []
    for key in np.unique(frame.thread_key[calls]).tolist():
        mine = calls[frame.thread_key[calls] == key]
        mine = mine[np.argsort(frame.start[mine], kind="stable")]
        rows = ops[frame.thread_key[ops] == key]
        rows = rows[np.argsort(frame.start[rows], kind="stable")]
        starts = frame.start[rows]
        mine_nodes = nodes[frame.pid[nodes] == frame.pid[mine[0]]]
        node_starts, node_ends = np.sort(frame.start[mine_nodes]), np.sort(frame.end[mine_nodes])
        forward_starts = frame.start[rows[member_mask(frame.name_code[rows], forward_codes)]]
        taken = np.zeros(rows.size, bool)
        for i, call in enumerate(mine.tolist()):
            begin, end = int(frame.start[call]), int(frame.end[call])
            last_node = np.searchsorted(node_ends, begin, "right") - 1
            previous_end = int(frame.end[mine[i - 1]]) if i else -1
            before = (max(int(node_ends[last_node]) if last_node >= 0 else -1, previous_end), begin)
            limits = [int(frame.start[mine[i + 1]])] if i + 1 < mine.size else []
            for ahead in (node_starts, forward_starts):
                if (k := int(np.searchsorted(ahead, end, "left"))) < ahead.size:
                    limits.append(int(ahead[k]))
            after = (end, min(limits) if limits else int(frame.end[rows].max(initial=end)) + 1)
            for (lo, hi), place in ((before, "before"), (after, "after")):
                if lo < 0:
                    continue
                at = np.arange(np.searchsorted(starts, lo, "left"), np.searchsorted(starts, hi, "left"))
                at = at[~taken[at]]  # a row after the previous call is that call's
                taken[at] = True
                if at.size:
                    out.append((rows[at], place))
    return out


def _iterations(counts: Counter[str]) -> int:
    """A loop's iterations, the tensors it walks: the count most of its op names share (the largest where
    counts tie), not the largest count (YOLO's EMA over the state dict detaches each tensor three times
    but scales and adds it once)."""
    shared = Counter(counts.values())
    return max(shared, key=lambda count: (shared[count], count))


def _without_update(frame: Frame, rows: np.ndarray, kinds: np.ndarray, run: np.ndarray,
                    update_names: set[str]) -> tuple[np.ndarray, bool] | None:
    """The run less a stretch at its start or end of the optimizer's own ops (a profile that began or
    ended inside an optimizer call: Lightning's, whose range is then not recorded, its update ops left
    beside the loop after it), and whether a stretch at its start was cut (the loop then runs after an
    optimizer step); None where nothing else is left. A stretch is cut where its parameter
    ops take two names or more, all the update's, with one ``MIN_ITERATIONS`` times or more: a loop of
    the update's names alone (``e.mul_(d).add_(p, alpha=1 - d)`` beside Adam's mul_ and add_) is then
    no loop, said nothing of."""
    ours = np.array([frame.names[c] in update_names for c in frame.name_code[rows[run]].tolist()], bool)

    def update_like(part: np.ndarray) -> bool:
        counts = Counter(frame.names[c] for c in frame.name_code[rows[part][kinds[part] == _PARAM]].tolist())
        return len(counts) > 1 and counts.most_common(1)[0][1] >= MIN_ITERATIONS

    lead = int(np.argmin(ours)) if not ours.all() else run.size
    if lead == run.size:
        return None if update_like(run) else (run, False)
    trail = int(np.argmin(ours[::-1]))
    follows = bool(lead) and update_like(run[:lead])
    if follows:
        run = run[lead:]
    if trail and update_like(run[run.size - trail:]):
        run = run[:run.size - trail]
    params = np.flatnonzero(kinds[run] == _PARAM)
    return (run[params[0]:params[-1] + 1], follows) if params.size else None


def _kind(dims_text: str, shapes: set[tuple[int, ...]]) -> int:
    """_PARAM: every tensor input of an op (one at least not 0-d) has a parameter's shape; _SCALAR: its
    tensor inputs are 0-d; _OTHER: anything else, dims not recorded included."""
    found = tensor_shapes(dims_text)
    if found is None:
        return _OTHER
    if not found:
        return _SCALAR
    return _PARAM if all(s in shapes for s in found) else _OTHER


def _runs(kinds: np.ndarray) -> list[np.ndarray]:
    """Index runs of consecutive _PARAM/_SCALAR entries, each trimmed to start and end on a _PARAM
    entry; runs with fewer than ``MIN_ITERATIONS`` of those are left out (no loop)."""
    if not kinds.size:
        return []
    kept = kinds != _OTHER
    joined = np.concatenate(([False], kept[:-1] & kept[1:]))  # entry i continues i - 1's run
    starts = np.flatnonzero(kept & ~joined)
    if not starts.size:
        return []
    ends = np.append(starts[1:], kinds.size)  # a run ends before the next starts, or at an _OTHER entry
    params = np.flatnonzero(kinds == _PARAM)
    out = []
    for lo, hi in zip(np.searchsorted(params, starts).tolist(), np.searchsorted(params, ends).tolist(), strict=True):
        if hi - lo >= MIN_ITERATIONS:
            out.append(np.arange(params[lo], params[hi - 1] + 1))
    return out


def _arithmetic_ns(frame: Frame, ops: np.ndarray) -> int:
    """The time of the innermost of these ops (nested ones included): each op's own arithmetic, an op
    that calls none being its own."""
    calls_another = member_mask(ops, frame.op_parent[ops].tolist())
    return int(frame.dur[ops[~calls_another]].sum())
