"""A TF function mapped over a batch one element at a time: ``tf.map_fn`` (``keras.ops.map``).

``tf.map_fn(fn, x)`` builds a ``tf.while_loop`` that runs ``fn`` once per element of ``x`` (up to 10
iterations at once in a graph), and its gradient another loop, each iteration a pass of TF's executor
over the body's ops. TF 2.21 on a 2-core AMD EPYC, a two-layer MLP (64-256-10, batch 128, SGD) written
per sample inside a tf.function: 11.5 ms a training step mapped with ``tf.map_fn`` (10.4 with
``keras.ops.map``), 0.54 ms with ``tf.vectorized_map`` (which turns ``fn`` into batched ops), 0.20 ms
written on the batch. Its report read "CPU compute-bound: look at the op breakdown". The captures
(``tests/data/tf/make_element_map.py``, batch 32): 4.45 ms, 0.54 and 0.25.

The evidence is the loop's scope: ``tf.map_fn`` names its ops ``map/while/...`` (``map_1`` for a
second, under the caller's scopes), its gradient's ``gradient_tape/map/while/map/while_grad/...``. In
the steps used, the map's forward op called most often runs ``MIN_ITERATIONS`` times a step or more
(one call an element), and the span from the map's first op to its gradient loop's last, each step,
takes ``MIN_SHARE`` of the steps' time or more (at TF's default tracer level the loop's cheap ops are
not traced, so its ops' own times would leave out most of it). Ops on tf.data's
threads are the input pipeline's and are left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tracekit.analyze import intervals
from tracekit.analyze.classify import input_pipeline_mask, short_name
from tracekit.analyze.frame import Frame, ops_in_steps, step_rows
from tracekit.analyze.slow_forward import scope_path

# tf.map_fn's default name scope, then its while loop ("map/while/...", "model/map_1/while/...").
MAP_LOOP = re.compile(r"(?:^|/)map(?:_\d+)?/while/")
MIN_ITERATIONS = 8
MIN_SHARE = 0.1


@dataclass(frozen=True)
class ElementMap:
    """The steps' mapped loops (module doc): ``maps`` distinct map scopes, ``iterations`` a step of the
    one taking the most time (its forward op called most often, ``op``); share: the loops' spans over
    the steps' time; gradient: a gradient loop runs too."""

    maps: int
    scope: str
    iterations: float
    op: str
    share: float
    gradient: bool

    def evidence(self) -> str:
        loops = "from its first op to its gradient loop's last" if self.gradient else "from its first op to its last"
        return (f"tf.map_fn runs its function once per element: its loop (scope {self.scope}) iterates {self.iterations:,.0f} times a "
                f"step ({self.op} once an iteration), each iteration a pass of TF's executor over the function's ops; "
                f"{loops}, {self.share:.0%} of the step time")

    def remedy(self) -> str:
        return ("map on the whole batch at once: tf.vectorized_map(fn, x) (keras.ops.vectorized_map) turns the "
                "function into batched ops, or write it on the batch (a matvec an element is one matmul): an MLP "
                "written per sample trained at 11.5 ms a step under tf.map_fn, 0.54 ms under tf.vectorized_map, "
                "0.20 ms on the batch")

    def as_dict(self) -> dict[str, object]:
        return {"maps": self.maps, "scope": self.scope, "iterations": self.iterations, "op": self.op,
                "share": self.share, "gradient": self.gradient}


def element_map(frame: Frame, used: list[int] | None) -> ElementMap | None:
    """The steps' tf.map_fn loops (module doc), or None where they iterate less or take less time."""
    ops, steps = ops_in_steps(frame, used), step_rows(frame, used)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if not ops.size or not step_ns:
        return None
    # map scope -> op name codes of its forward and gradient loops
    scopes: dict[str, tuple[list[int], list[int]]] = {}
    for code in np.unique(frame.name_code[ops]).tolist():
        if code < 0:
            continue
        path, gradient = scope_path(frame.names[code])
        found = MAP_LOOP.search(path)
        if found:
            scope = path[:found.end() - len("/while/")]
            scopes.setdefault(scope, ([], []))[int(gradient)].append(code)
    if not scopes:
        return None
    ops = ops[~input_pipeline_mask(frame)[ops]]
    codes, step_of = frame.name_code[ops], frame.step[ops]
    n_steps = max(int(np.unique(frame.step[steps]).size), 1)
    found_maps: list[ElementMap] = []
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    for scope, (forward, backward) in scopes.items():
        calls = {c: int((codes == c).sum()) for c in forward}
        if not calls:
            continue
        top = max(calls, key=lambda c: (calls[c], frame.names[c]))
        iterations = calls[top] / n_steps
        if iterations < MIN_ITERATIONS:
            continue
        # Per step, the span from the map's first op to its gradient loop's last (the gradient's set-up ops
        # run early, beside the forward loop, so the two loops' spans are not apart).
        in_map = np.isin(codes, forward + backward)
        rows, row_step = ops[in_map], step_of[in_map]
        order = np.argsort(row_step, kind="stable")
        rows, row_step = rows[order], row_step[order]
        cuts = np.flatnonzero(np.diff(row_step)) + 1
        first = np.minimum.reduceat(frame.start[rows], np.r_[0, cuts])
        last = np.maximum.reduceat(frame.end[rows], np.r_[0, cuts])
        starts.append(first)
        ends.append(last)
        found_maps.append(ElementMap(maps=0, scope=scope, iterations=iterations, op=short_name(frame.names[top]),
                                     share=float((last - first).sum()) / step_ns, gradient=bool(backward)))
    if not found_maps:
        return None
    span_ns = intervals.total(np.concatenate(starts), np.concatenate(ends))
    if span_ns < MIN_SHARE * step_ns:
        return None
    best = max(found_maps, key=lambda m: (m.share, m.scope))
    return ElementMap(maps=len(found_maps), scope=best.scope, iterations=best.iterations, op=best.op,
                      share=span_ns / step_ns, gradient=any(m.gradient for m in found_maps))
