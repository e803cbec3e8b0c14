"""Tensors formatted as text inside the step: ``print(t)``, ``f"{t}"``, a logger given a tensor.

PyTorch's repr of a tensor of more than one element (``torch/_tensor_str.py``) first scans it for its
value range (``aten::isfinite``, ``aten::masked_select``, then abs, min and max of the finite values),
then reads each value it shows into Python, one ``aten::item`` a value. PyTorch 2.13 on a 2-core Xeon,
unprofiled: 288 µs to format a 4x10 tensor, against 24 µs for ``f"{t.tolist()}"`` and 0.8 µs for a
loss's ``f"{loss.item():.4f}"`` (a 0-dim tensor formats through its one value, cheaply, and shows no
scan). These are ops, so the step reads as framework dispatch that a compiler would cut, where
``torch.compile`` breaks its graph at the print and keeps it.

The trace shows each formatting by its scan, ``masked_select(t, isfinite(t) & t.ne(0))``: a top-level
``aten::isfinite`` with ``aten::ne``, the and and ``aten::masked_select`` among the next ``SCAN_OPS``
top-level ops on its thread (a metric that drops non-finite values, ``t.masked_select(t.isfinite())``,
has no ``ne``), then the reads, the first within
``FIRST_READ`` top-level ops of the scan (PyTorch 2.13 runs 22 between: the range's min, max, ceil and
comparisons), each next within ``READ_GAP`` of the last. Its time runs from the scan to the last read; told where the formattings
take ``MIN_SHARE`` of the steps' time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.analyze.frame import Frame, calls_in_steps, ops_in_steps

SCAN = ("aten::isfinite", "aten::masked_select")
SCAN_BETWEEN = ("aten::ne", ("aten::__and__", "aten::bitwise_and", "aten::logical_and"))
READ = "aten::item"
SCAN_OPS = 4
FIRST_READ = 40
READ_GAP = 6
MIN_SHARE = 0.05


@dataclass(frozen=True)
class TensorText:
    """Tensors formatted as text in the steps used (module doc): ``tensors`` formattings in ``steps``
    steps, ``values`` values read into Python by them; share: their time over the steps'."""

    tensors: int
    steps: int
    values: int
    share: float

    def evidence(self) -> str:
        per_step = self.tensors / max(self.steps, 1)
        return (f"the step formats tensors as text ({per_step:,.1f} a step: print, an f-string or a logger given a "
                f"tensor): PyTorch's repr scans each for its value range (aten::isfinite, aten::masked_select) and "
                f"reads the values it shows into Python one aten::item at a time ({self.values / max(self.steps, 1):,.0f} "
                f"a step), {self.share:.0%} of the step time; these ops are not the model's, and torch.compile breaks "
                "its graph at them rather than removing them")

    def remedy(self) -> str:
        return ("format values, not tensors: log loss.item() or t.tolist() (one read for the whole tensor), or print "
                "every N steps (a 4x10 tensor: 288 µs through its repr, 24 µs as a list)")

    def as_dict(self) -> dict[str, object]:
        return {"tensors": self.tensors, "steps": self.steps, "values": self.values, "share": self.share}


def tensor_text(frame: Frame, used: list[int] | None) -> TensorText | None:
    """The steps' tensors formatted as text (module doc), or None where they take less than ``MIN_SHARE``."""
    scans, steps = calls_in_steps(frame, SCAN[:1], used)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    scans = scans[frame.op_parent[scans] < 0]
    if not scans.size or not step_ns:
        return None
    ops = ops_in_steps(frame, used)
    ops = ops[frame.op_parent[ops] < 0]
    ops = ops[np.lexsort((frame.start[ops], frame.thread_key[ops]))]
    at = {int(r): i for i, r in enumerate(ops.tolist())}
    names = frame.names
    formatted = values = 0
    time_ns = 0
    stepped: set[int] = set()
    for scan in scans.tolist():
        i = at[scan]
        window = ops[i + 1:i + 1 + SCAN_OPS]
        same = window[frame.thread_key[window] == frame.thread_key[scan]]
        following = {names[int(c)] for c in frame.name_code[same].tolist()}
        if SCAN[1] not in following or SCAN_BETWEEN[0] not in following or not following & set(SCAN_BETWEEN[1]):
            continue
        last, reads, j = i, 0, i + 1
        while (j < ops.size and j - last <= (READ_GAP if reads else FIRST_READ)
               and frame.thread_key[ops[j]] == frame.thread_key[scan]):
            if names[int(frame.name_code[ops[j]])] == READ:
                last, reads = j, reads + 1
            j += 1
        if not reads:
            continue
        formatted, values = formatted + 1, values + reads
        time_ns += int(frame.end[ops[last]] - frame.start[scan])
        stepped.add(int(frame.step[scan]))
    if not formatted or time_ns < MIN_SHARE * step_ns:
        return None
    n_steps = int(steps.size) if used is not None else max(len(stepped), 1)
    return TensorText(tensors=formatted, steps=n_steps, values=values, share=time_ns / step_ns)
