"""A looked-up gradient made dense by a Keras optimizer, which then updates every row of the table.

An embedding's gradient holds only the rows a batch looked up (a ``tf.IndexedSlices``). Keras 3's
stateful optimizers on TF (Adam, AdamW, RMSprop, Adagrad, SGD with momentum) compute their slots
with dense ops (``m += (g - m) * (1 - beta_1)``), so TF first scatters the slices into a zero tensor
of the table's shape (``UnsortedSegmentSum``) and then updates every row of the table and of each slot,
each step, however few rows were looked up. A 200,000 x 64 embedding, batch 64 of 20 tokens (TF 2.21,
Keras 3, 2-core AMD EPYC): 24.7 ms a batch under Adam, 42.9 under AdamW, 21.5 under Adagrad, 10.9 under
SGD with momentum, 4.4 under plain SGD (which updates only the rows looked up); with 2,000 rows
1.7-2.3 ms under each. Its report read "CPU compute-bound: look at the op breakdown".

The evidence (TF traces, which record no shapes): in the steps used, an ``UnsortedSegmentSum`` in an
optimizer's scope (``adam/``, ``rmsprop_1/``, ...; ``OPTIMIZER_SCOPE``) whose median call takes
``MIN_TABLE_RATIO`` times the forward lookup's (its largest ``GatherV2``/``ResourceGather``): the
scatter writes the whole table, the gather reads the rows looked up, so the table is far larger than
what a batch touches (the 200,000-row table above: 18-20x; a 5,000-row one looked up 2,560 times a
batch: 2.3-4x, where Adam's updates are dense but sparse ones would save little); and that scope's ops
taking ``MIN_SHARE`` of the steps' time or more, on the union of their intervals (they run on several
threads).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame, ops_in_steps, step_rows, wall_time
from tracekit.analyze.slow_forward import scope_path

# Keras names an optimizer's scope after its class (or the name given to it), "_N" for a second one.
OPTIMIZER_SCOPE = re.compile(r"^(?:.*/)?((?:adam|adamw|adamax|nadam|rmsprop|adagrad|adadelta|adafactor|ftrl|lion|lamb|sgd)"
                             r"(?:_\d+)?)/", re.IGNORECASE)
DENSIFY = ":UnsortedSegmentSum"
LOOKUPS = (":GatherV2", ":ResourceGather")
MIN_TABLE_RATIO = 8.0
MIN_SHARE = 0.25


@dataclass(frozen=True)
class DenseSlotUpdates:
    """The optimizer ``scope`` that densifies a looked-up gradient (module doc): ``densify`` such ops a
    step; share: the scope's ops' time over the steps'."""

    scope: str
    densify: float
    share: float
    densify_ns: int = 0  # the scatter's median call
    lookup_ns: int = 0  # the forward lookup's median call

    def evidence(self) -> str:
        return (f"the optimizer ({self.scope}/) makes a looked-up gradient dense ({self.densify:,.0f} UnsortedSegmentSum "
                "a step: an embedding's or a gather's gradient, which holds only the rows a batch looked up) and "
                f"then updates every row of the table and of its slots: the scatter takes {self.densify_ns / 1e3:,.0f} µs "
                f"a call, {self.densify_ns / max(self.lookup_ns, 1):,.0f}x the lookup's gather ({self.lookup_ns / 1e3:,.0f} "
                f"µs), so the table is far larger than the rows a batch reads; the optimizer's ops take {self.share:.0%} "
                "of the step time")

    def remedy(self) -> str:
        return ("update only the rows looked up: Keras 3's Adam, AdamW, RMSprop, Adagrad and SGD with momentum "
                "update the whole table and its slots each step, plain SGD only the rows a batch looked up (a 200,000 "
                "x 64 embedding: 24.7 ms a batch under Adam, 4.4 under plain SGD); or train the table with its own "
                "SGD in a custom train_step, or shrink it (keras.layers.Hashing, fewer rows)")

    def as_dict(self) -> dict[str, object]:
        return {"scope": self.scope, "densify": self.densify, "share": self.share, "densify_ns": self.densify_ns,
                "lookup_ns": self.lookup_ns}


def dense_slot_updates(frame: Frame, used: list[int] | None) -> DenseSlotUpdates | None:
    """The steps' optimizer that densifies a looked-up gradient (module doc), or None; None on a trace with
    GPU activity too, where the ops' host times are not their work."""
    if frame.rows(*GPU_BUSY_KINDS).size:
        return None
    ops, steps = ops_in_steps(frame, used), step_rows(frame, used)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if not ops.size or not step_ns:
        return None
    scope_of: dict[int, str] = {}  # op name code -> its optimizer scope
    for code in np.unique(frame.name_code[ops]).tolist():
        if code < 0:
            continue
        found = OPTIMIZER_SCOPE.match(scope_path(frame.names[code])[0])
        if found:
            scope_of[code] = found.group(1)
    densifying = {scope for code, scope in scope_of.items() if frame.names[code].endswith(DENSIFY)}
    if not densifying:
        return None
    codes_of = frame.name_code[ops]
    lookups = [c for c in np.unique(codes_of).tolist() if c >= 0 and frame.names[c].endswith(LOOKUPS)
               and not scope_path(frame.names[c])[1]]
    lookup_ns = max((int(np.median(frame.dur[ops[codes_of == c]])) for c in lookups), default=0)
    if not lookup_ns:
        return None  # no lookup traced: nothing to tell the table's size by
    best: DenseSlotUpdates | None = None
    n_steps = max(int(np.unique(frame.step[steps]).size), 1)
    for scope in sorted(densifying):
        codes = [c for c, s in scope_of.items() if s == scope]
        mine = ops[np.isin(codes_of, codes)]
        scatters = mine[[frame.names[int(c)].endswith(DENSIFY) for c in frame.name_code[mine].tolist()]]
        densify_ns = int(np.median(frame.dur[scatters]))
        share = wall_time(frame, mine) / step_ns
        if densify_ns < MIN_TABLE_RATIO * lookup_ns or share < MIN_SHARE or (best is not None and share <= best.share):
            continue
        best = DenseSlotUpdates(scope=scope, densify=scatters.size / n_steps, share=share, densify_ns=densify_ns,
                                lookup_ns=lookup_ns)
    return best
