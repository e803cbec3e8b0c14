"""Autograd's anomaly detection left on.

``torch.autograd.set_detect_anomaly(True)`` (or the ``detect_anomaly()`` context) is a debugging aid:
the autograd engine then checks every backward node's outputs for NaN (``aten::isnan``, ``aten::any``,
``aten::item`` inside each ``autograd::engine::evaluate_function`` range, a host sync per node on a
GPU) and stores a Python traceback for every forward op (inside the ops' own time, which the trace
does not separate). PyTorch 2.13, 2-core Xeon: an 8-layer MLP of 128 trained with SGD took 5.2 ms a
step with it, 1.25 ms without; its trace showed 45 checks a step and the report read
CPU compute-bound with ``aten::t`` (the forward's traceback capture) among the top ops.

The evidence is the engine's own: ``aten::isnan`` calls whose direct parent is an
``autograd::engine::evaluate_function`` range (a user's NaN check runs in the step's code, not
inside the engine), in at least half of those ranges and ``MIN_CHECKS`` a step. The checks' time
(the isnan, any and item calls there) is a lower bound on what turning it off saves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.analyze.frame import BACKWARD_NODE, Frame, wall_time
from tracekit.ingest.links import member_mask

MIN_CHECKS = 3  # a step
CHECK_OPS = ("aten::isnan", "aten::any", "aten::item")


@dataclass(frozen=True)
class AnomalyDetection:
    """Anomaly detection's NaN checks in the steps used. checks: a step (mean); share: their time's part
    of the steps' time (a lower bound on the cost)."""

    checks: float
    share: float

    def evidence(self) -> str:
        return (f"autograd's anomaly detection is on: the engine checks each backward node's outputs for NaN, "
                f"{self.checks:.0f} checks a step (aten::isnan, any, item inside autograd::engine::evaluate_function) "
                f"taking {self.share:.0%} of the step time, and records a Python traceback for every forward op, "
                "inside the ops' own time")

    def remedy(self) -> str:
        return ("turn autograd's anomaly detection off outside debugging: torch.autograd.set_detect_anomaly(False), or "
                "drop the torch.autograd.detect_anomaly() context (an 8-layer MLP on a CPU: 5.2 ms a step with it, "
                "1.25 ms without; on a GPU each check also waits for the device)")

    def as_dict(self) -> dict[str, object]:
        return {"checks_per_step": self.checks, "share": self.share}


def anomaly_detection(frame: Frame, used: list[int] | None) -> AnomalyDetection | None:
    """The anomaly checks of the steps used (every step when None), or None when the trace shows none."""
    codes = [c for c, n in enumerate(frame.names) if n == "aten::isnan"]
    if not codes:
        return None
    ops = frame.rows("cpu_op")
    isnan = ops[member_mask(frame.name_code[ops], codes)]
    parent = frame.parent[isnan]
    isnan, parent = isnan[parent >= 0], parent[parent >= 0]
    engine = frame.named(parent, BACKWARD_NODE)
    isnan, parent = isnan[engine], parent[engine]
    steps = frame.rows("step")
    if used is not None:
        keep = member_mask(frame.step[isnan], used)
        isnan, parent = isnan[keep], parent[keep]
        steps = steps[member_mask(frame.step[steps], used)]
    n_steps = max(int(steps.size), 1)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if isnan.size < MIN_CHECKS * n_steps or not step_ns:
        return None
    evaluated = ops[frame.named(ops, BACKWARD_NODE)]
    if used is not None:
        evaluated = evaluated[member_mask(frame.step[evaluated], used)]
    if 2 * np.unique(parent).size < evaluated.size:
        return None
    # The checks: isnan, any and item called directly by the ranges that run one.
    check_codes = [c for c, n in enumerate(frame.names) if n in CHECK_OPS]
    children = ops[member_mask(frame.parent[ops], np.unique(parent).tolist()) & member_mask(frame.name_code[ops], check_codes)]
    if used is not None:
        children = children[member_mask(frame.step[children], used)]
    return AnomalyDetection(checks=isnan.size / n_steps, share=wall_time(frame, children) / step_ns)
