"""TF's numeric checks or debug dumps left on.

``tf.debugging.enable_check_numerics()`` instruments every op of every tf.function built after it
with a ``CheckNumericsV2`` or ``DebugNumericSummaryV2`` op on its outputs (raising at the first NaN
or Inf), and
``tf.debugging.experimental.enable_dump_debug_info()`` adds a ``DebugIdentityV2`` op per tensor that
writes it out; ``tf.debugging.check_numerics(t, ...)`` is one ``CheckNumerics`` op a call. All are
debugging aids. TF 2.21, 2-core AMD EPYC, an MLP (128-256-256-10, batch 64, Adam): a tf.function
training step took 4.94 ms with enable_dump_debug_info (FULL_HEALTH) against 0.73 ms without, 406 debug
ops a step, 81% of the profiled step; Keras's fit 4.48 ms a batch with enable_check_numerics against
3.07 (416 checks a step, 25% of the profiled step). The
reports called the checks "ops with no class ... arithmetic the class rules do not know" and ranked XLA
or the op breakdown first.

The evidence is the checks' own ops: their type (the part of the name after ``:``, or the eager op's
name), ``MIN_CHECKS`` or more a step in the steps used, taking ``MIN_SHARE`` of the steps' time or more (a
few ``check_numerics`` calls on a loss are a choice that costs nothing); their time (the union of
their calls) is what turning them off saves at least.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.analyze.frame import Frame, ops_in_steps, step_rows, wall_time

MIN_CHECKS = 3  # a step
MIN_SHARE = 0.05  # a loss checked with tf.debugging.check_numerics each step is a choice, not a cost
# Op type -> the setting that adds it; DebugNumericSummaryV2 comes with either of the first two
# (enable_dump_debug_info's health modes, enable_check_numerics beside CheckNumericsV2).
CHECK_NUMERICS = "tf.debugging.enable_check_numerics()"
DUMP_DEBUG_INFO = "tf.debugging.experimental.enable_dump_debug_info()"
CHECK_TYPES = {
    "CheckNumericsV2": CHECK_NUMERICS,
    "DebugIdentityV2": DUMP_DEBUG_INFO,
    "DebugIdentityV3": DUMP_DEBUG_INFO,
    "CheckNumerics": "tf.debugging.check_numerics(...) calls",
    "DebugNumericSummaryV2": f"{CHECK_NUMERICS} or {DUMP_DEBUG_INFO}",
}


@dataclass(frozen=True)
class DebugChecks:
    """The steps' debug checks (module doc): ``checks`` a step, ``settings`` that add them (most
    checks first); share: their time over the steps'."""

    checks: float
    settings: tuple[str, ...]
    share: float

    def evidence(self) -> str:
        return (f"TF's debug checks are on: {self.checks:,.0f} a step ({', '.join(self.settings)} adds an op after "
                f"each tensor it checks or dumps), taking {self.share:.0%} of the step time")

    def remedy(self) -> str:
        return (f"turn the debug checks off outside debugging: drop {' and '.join(self.settings)} (they run an op on "
                "each checked tensor and instrument every tf.function built after them: an MLP's training step took "
                "4.94 ms with enable_dump_debug_info against 0.73 ms without)")

    def as_dict(self) -> dict[str, object]:
        return {"checks_per_step": self.checks, "settings": list(self.settings), "share": self.share}


def debug_checks(frame: Frame, used: list[int] | None) -> DebugChecks | None:
    """The steps' TF debug checks (module doc), or None where there are fewer than ``MIN_CHECKS`` a step or
    they take less than ``MIN_SHARE`` of the steps' time."""
    codes: dict[int, str] = {}
    for code, name in enumerate(frame.names):
        kind = name.rpartition(":")[2]
        if kind in CHECK_TYPES:
            codes[code] = kind
    if not codes:
        return None
    ops, steps = ops_in_steps(frame, used), step_rows(frame, used)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    checks = ops[np.isin(frame.name_code[ops], list(codes))]
    n_steps = max(int(np.unique(frame.step[steps]).size), 1)
    if not step_ns or checks.size < MIN_CHECKS * n_steps:
        return None
    by_setting: dict[str, int] = {}
    for code in frame.name_code[checks].tolist():
        setting = CHECK_TYPES[codes[int(code)]]
        by_setting[setting] = by_setting.get(setting, 0) + 1
    summaries = by_setting.pop(CHECK_TYPES["DebugNumericSummaryV2"], 0)
    if summaries:  # the summaries' setting is the one its companion ops show, else either
        named = [s for s in (CHECK_NUMERICS, DUMP_DEBUG_INFO) if s in by_setting]
        setting = named[0] if named else CHECK_TYPES["DebugNumericSummaryV2"]
        by_setting[setting] = by_setting.get(setting, 0) + summaries
    settings = tuple(sorted(by_setting, key=lambda s: (-by_setting[s], s)))
    share = wall_time(frame, checks) / step_ns
    if share < MIN_SHARE:
        return None
    return DebugChecks(checks=checks.size / n_steps, settings=settings, share=share)
