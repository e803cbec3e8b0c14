"""An ATen op whose CPU implementation loops over rows, dispatching small ops one row at a time.

``nn.Embedding(..., max_norm=1.0)`` renormalizes the rows it looks up before each lookup with
``aten::embedding_renorm_``, whose CPU kernel walks the unique indices and, per row, selects it, takes
its norm, reads the norm into C++ (``aten::item``) and scales the row where it is too long: four to
seven dispatched ops a row. PyTorch 2.13 on a 2-core AMD EPYC, a 50,000 x 128 embedding looked up by
256 x 20 indices (4,888 unique) with SGD: 15.1 ms a training step against 4.1 ms without max_norm, the
renormalization alone 5.6 ms against 0.72 ms for the same arithmetic on all the rows at once. Under
the profiler it ran 17,000 ops a call, 37% of the step; the report read "CPU compute-bound" and
named only the embedding's dense gradient.

The evidence is the op tree itself: one call of an ``aten::`` op with ``MIN_CHILDREN`` direct child
ops or more, of which ``MIN_WORK_CHILDREN`` or more are not views (a split or unbind makes one view a
piece, by design), in the steps used, the calls together ``MIN_SHARE`` of the steps' time or more.
Left to their own rules: the recurrent layers (``aten::lstm`` run per timestep, the cells) and the
``_foreach`` ops (an optimizer's per-tensor fallback). Views are ``frame.VIEW_OPS``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from tracekit.analyze.frame import RNN_CELL_OPS, VIEW_OPS, Frame, step_rows, wall_time
from tracekit.ingest.columns import distinct
from tracekit.ingest.links import member_mask

MIN_CHILDREN = 256
MIN_WORK_CHILDREN = 128
MIN_SHARE = 0.1
RECURRENT_LAYERS = frozenset({"aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu", *RNN_CELL_OPS})

# What each looping op is called for, and its batched form; any other gets the general remedy.
KNOWN_FIXES = {
    "aten::embedding_renorm_": (
        "nn.Embedding(..., max_norm=...) renormalizes each looked-up row with its own ops before every lookup: "
        "drop max_norm and renormalize the looked-up rows at once under torch.no_grad() (u = idx.unique(); "
        "rows = w[u]; w[u] = rows * (max_norm / rows.norm(dim=1, keepdim=True).clamp(min=max_norm))), or "
        "normalize the lookup's output instead (F.normalize): 0.72 ms against 5.6 ms for 4,888 rows of 128"),
}


@dataclass(frozen=True)
class LoopingOp:
    """The looping op of the steps used (module doc): ``op``'s ``calls`` calls, ``children`` direct child
    ops a call (mean), ``child_names`` the most frequent (name, calls a call); share: its calls' time over
    the steps'."""

    op: str
    calls: int
    children: float
    child_names: tuple[tuple[str, float], ...]
    share: float

    def evidence(self) -> str:
        kinds = ", ".join(f"{name} x{n:,.0f}" for name, n in self.child_names)
        return (f"{self.op} runs {self.children:,.0f} ops inside each call ({kinds}): its CPU implementation loops "
                f"over rows, dispatching small ops one row at a time; {self.calls} call(s), {self.share:.0%} of the "
                "step time")

    def remedy(self) -> str:
        known = KNOWN_FIXES.get(self.op)
        if known:
            return known
        return (f"do {self.op}'s work on all rows at once: its CPU implementation dispatches "
                f"{self.children:,.0f} small ops a call; a batched form of the same arithmetic (one op over the "
                "whole tensor) or fewer calls removes that dispatch")

    def as_dict(self) -> dict[str, object]:
        return {"op": self.op, "calls": self.calls, "children": self.children,
                "child_names": [list(c) for c in self.child_names], "share": self.share}


def _looping_calls(frame: Frame, ops: np.ndarray) -> dict[str, tuple[list[int], np.ndarray]]:
    """Among the op rows ``ops``: each looping op's calls and the direct children of those calls
    (module doc: the counts per call, not the share)."""
    parents = frame.op_parent[ops]
    children = ops[parents >= 0]
    parents = parents[parents >= 0]
    if parents.size < MIN_CHILDREN:
        return {}
    # Children per call by counting, not sorting: this runs on every PyTorch trace, millions of rows.
    calls = np.flatnonzero(np.bincount(parents, minlength=len(frame)) >= MIN_CHILDREN)
    if not calls.size:
        return {}
    names = frame.names
    by_op: dict[str, list[int]] = {}
    for call in calls.tolist():
        name = names[int(frame.name_code[call])]
        if name.startswith("aten::") and not name.startswith("aten::_foreach_") and name not in RECURRENT_LAYERS:
            by_op.setdefault(name, []).append(call)
    out: dict[str, tuple[list[int], np.ndarray]] = {}
    for op, op_calls in by_op.items():
        inside = children[np.isin(parents, op_calls)]
        views = [c for c in distinct(frame.name_code[inside]).tolist() if c >= 0 and names[c] in VIEW_OPS]
        if int((~member_mask(frame.name_code[inside], views)).sum()) >= MIN_WORK_CHILDREN * len(op_calls):
            out[op] = (op_calls, inside)
    return out


def _all_looping_calls(frame: Frame) -> dict[str, tuple[list[int], np.ndarray]]:
    return frame.memo("looping_calls_by_op", lambda: _looping_calls(frame, frame.rows("cpu_op")))


def looping_calls(frame: Frame) -> np.ndarray:
    """Every call of a looping op in the trace (module doc; any share): one op to a compiler or a
    what-if replay, its child ops included, since a compiled graph calls it as it is."""
    return np.array(sorted(c for calls, _ in _all_looping_calls(frame).values() for c in calls), np.int64)


def looping_op(frame: Frame, used: list[int] | None) -> LoopingOp | None:
    """The op of the steps used that loops over rows inside itself (module doc), the one taking the
    most time where there are several, or None."""
    steps = step_rows(frame, used)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if not step_ns:
        return None
    names = frame.names
    found: list[LoopingOp] = []
    for op, (all_calls, all_inside) in _all_looping_calls(frame).items():
        calls = np.asarray(all_calls, np.int64)
        if used is not None:
            calls = calls[member_mask(frame.step[calls], used)]
        if not calls.size:
            continue
        op_calls = calls.tolist()
        inside = all_inside[member_mask(frame.op_parent[all_inside], op_calls)]
        share = wall_time(frame, calls) / step_ns
        if share < MIN_SHARE:
            continue
        kinds = Counter(names[int(c)] for c in frame.name_code[inside].tolist())
        top = sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
        found.append(LoopingOp(op=op, calls=len(op_calls), children=inside.size / len(op_calls),
                               child_names=tuple((k, n / len(op_calls)) for k, n in top), share=share))
    return max(found, key=lambda f: f.share) if found else None
