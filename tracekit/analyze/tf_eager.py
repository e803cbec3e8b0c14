"""TF ops run eagerly: which, and beside a step that is already a tf.function.

TF 2.21 records an op run eagerly as an ``EagerExecute`` call (inside the Python binding's
``TFE_Py_FastPathExecute_C`` or ``TFE_Py_ExecuteCancelable``) holding an ``EagerLocalExecute: Type``
event, and a tf.function's call the same way with ``EagerLocalExecute: __inference_name_N``. Each
eager op is dispatched from Python alone: tens of µs where a graph's op costs a few.

A step that runs as a tf.function and then updates variables op by op in Python (a moving average of
the weights, metrics, a hand-written schedule) pays that for every op: TF 2.21, Keras 3, 2-core Xeon,
an MLP 64-256-256-10 trained with Adam at batch 32: 0.86 ms a step, 2.6-2.8 ms with an exponential
moving average of its 6 weights in eager Python (``ema.assign(0.99 * ema + 0.01 * w)``), 0.96-1.02 ms
with the same average inside the tf.function (``tests/data/tf/make_eager_variable_updates.py``). The
report said "run the step as a graph, with tf.function around a custom step" to a step already in one,
or only XLA, and named no eager op.

The finding (``eager_beside_function``): in the steps used, a tf.function call in half of them or
more, ``MIN_CALLS`` eager op calls a step or more, their Python bindings' calls taking ``MIN_SHARE``
of the steps' time or more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analyze.frame import Frame, step_rows, wall_time
from tracekit.ingest.links import member_mask

EAGER_OP = re.compile(r"^EagerLocalExecute: (?!__inference_)(\w+)$")
FUNCTION_CALL = re.compile(r"^EagerLocalExecute: __inference_\w+$")
_BINDING = re.compile(r"^(?:TFE_Py_\w+|tf\.constant)$")
TYPES_NAMED = 3
MIN_CALLS = 8  # eager op calls a step
MIN_SHARE = 0.15  # of the steps' time, in those calls' Python bindings
# Variable updates in eager Python: a moving average, a schedule; Keras's optimizers keep an EMA themselves.
_UPDATES = ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp")


@dataclass(frozen=True)
class EagerOps:
    """The eager op calls of the steps used: ``rows`` (their ``EagerExecute`` rows), ``types`` (op type
    per call), ``bindings`` (the Python binding's call around each, or the call itself)."""

    rows: np.ndarray
    types: list[str]
    bindings: np.ndarray

    def named_types(self, frame: Frame) -> str:
        """The op types by their calls' time: "Mul 31%, AssignVariableOp 20%"."""
        if not self.rows.size:
            return ""
        by_type = pd.Series(frame.dur[self.rows], index=self.types).groupby(level=0).sum()
        by_type = by_type.sort_values(ascending=False, kind="stable")
        total = float(by_type.sum())
        return ", ".join(f"{name} {ns / total:.0%}" for name, ns in by_type.head(TYPES_NAMED).items()) if total else ""


def eager_ops(frame: Frame, used: list[int] | None) -> EagerOps:
    """The eager op calls of the steps ``used`` (every step when None; the whole trace without steps)."""
    empty = EagerOps(np.zeros(0, np.int64), [], np.zeros(0, np.int64))
    if "EagerExecute" not in frame.names:
        return empty
    typed = np.flatnonzero(frame.name_mask(EAGER_OP))
    calls = frame.parent[typed]
    keep = calls >= 0
    keep[keep] = frame.name_code[calls[keep]] == frame.names.index("EagerExecute")
    if used is not None:
        keep &= member_mask(frame.step[calls], used)
    elif (frame.step[calls[keep]] >= 0).any():
        keep &= frame.step[calls] >= 0
    typed, calls = typed[keep], calls[keep]
    if not typed.size:
        return empty
    types = [EAGER_OP.match(frame.name(int(r))).group(1) for r in typed.tolist()]  # type: ignore[union-attr]
    # The Python binding's call around each (TFE_Py_FastPathExecute_C, TFE_Py_ExecuteCancelable,
    # tf.constant); not a range of the user's around several (a step's TraceMe).
    parent = frame.parent[calls]
    binding = parent >= 0
    binding[binding] = frame.named(parent[binding], _BINDING)
    return EagerOps(calls, types, np.where(binding, parent, calls))


@dataclass(frozen=True)
class EagerBesideFunction:
    """Ops run eagerly in steps that run a tf.function (module doc). calls: eager op calls a step;
    share: of the steps' time, in their Python bindings' calls; types: the op types by time."""

    calls: float
    share: float
    types: str
    updates_variables: bool

    def evidence(self) -> str:
        return (f"beside the step's tf.function, {self.calls:.0f} ops a step run eagerly ({self.types}), each "
                f"dispatched from Python alone: their calls take {self.share:.0%} of the step time")

    def remedy(self) -> str:
        ema = (" (a moving average of the weights: Keras's optimizers keep one inside their update, "
               "use_ema=True, ema_momentum=0.99)") if self.updates_variables else ""
        return ("move the eagerly run ops into the tf.function (or a tf.function of their own), where they are "
                f"graph ops of a few µs each{ema}: an MLP trained with Adam on a CPU, 2.6-2.8 ms a step with a "
                "moving average of its weights in eager Python, 0.96-1.02 ms with it inside the tf.function")

    def as_dict(self) -> dict[str, object]:
        return {"calls_per_step": self.calls, "share": self.share, "types": self.types}


def eager_beside_function(frame: Frame, used: list[int] | None) -> EagerBesideFunction | None:
    """The steps' eager ops beside their tf.function (module doc), else None (no steps, no function
    in half the steps used, too few or too short eager calls)."""
    steps = step_rows(frame, used)
    if not steps.size or "EagerExecute" not in frame.names:
        return None
    numbers = np.unique(frame.step[steps])
    functions = np.flatnonzero(frame.name_mask(FUNCTION_CALL))
    with_function = np.unique(frame.step[functions]) if functions.size else functions
    if 2 * int(member_mask(with_function, numbers.tolist()).sum()) < numbers.size:
        return None
    ops = eager_ops(frame, numbers.tolist())
    calls = ops.rows.size / numbers.size
    step_ns = int(frame.dur[steps].sum())
    share = wall_time(frame, np.unique(ops.bindings)) / step_ns if step_ns else 0.0
    if calls < MIN_CALLS or share < MIN_SHARE:
        return None
    return EagerBesideFunction(calls=calls, share=share, types=ops.named_types(frame),
                               updates_variables=any(t in _UPDATES for t in ops.types))
