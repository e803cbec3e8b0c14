"""A tensor grown by concatenation, one piece at a time.

``out = torch.cat([out, piece])`` in a loop copies the whole of ``out`` every time: k pieces cost
k²/2 piece copies, where collecting the pieces in a list and concatenating once, or writing them into
a preallocated tensor, copies each once. PyTorch 2.13, 2-core AMD EPYC, one thread: 200 steps of a
512-wide recurrence on 8 rows took 33.7 ms growing the output by ``cat``, 19.0 ms with one ``cat`` of
a list (the last ``cat`` alone copies 3.2 MB). A KV cache grown by ``cat`` each token is the same
pattern across a generation loop (a static, preallocated cache is the fix there).

The evidence needs shapes (``record_shapes=True``): ``aten::cat`` calls of two tensors on one
thread, each taking as its first the previous one's result (its shape the previous first grown by
the previous second along one dim, the other dims equal), ``MIN_LINKS`` or more in a chain, whose
time (but for the last call, which one final ``cat`` would still do) is ``MIN_SHARE`` of the steps'.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from tracekit.analyze.frame import Frame, calls_in_steps
from tracekit.analyze.top_ops import args_text

CAT_OPS = ("aten::cat", "aten::concat", "aten::concatenate")
MIN_LINKS = 8
MIN_SHARE = 0.1
MAX_CALLS = 200_000  # cat calls read; a trace with more is read in part
# The two tensors of a two-tensor cat: "Input Dims":[[[a...],[b...]],...]
_TWO_TENSORS = r'"Input Dims":\[\[\[(?P<first>[^\]\[]*)\],\[(?P<second>[^\]\[]*)\]\]'


@dataclass(frozen=True)
class GrowingCat:
    """The chains of grown tensors in the steps used (module doc). chains: how many, in ``steps`` steps;
    pieces: the longest chain's links; final: its last result's shape; share: the chains' cat time, but
    each chain's last call, of the steps' time (what collecting the pieces once saves, near enough)."""

    chains: int
    steps: int
    pieces: int
    final: str
    share: float

    def evidence(self) -> str:
        return (f"the step grows a tensor by concatenation, one piece at a time (aten::cat of the last result and a "
                f"piece, {self.pieces} times up to {self.final}; {self.chains} such tensor{'s' if self.chains > 1 else ''} "
                f"in {self.steps} step{'s' if self.steps > 1 else ''}): each cat copies the whole tensor again, "
                f"{self.share:.0%} of the step time beyond one final cat")

    def remedy(self) -> str:
        return ("collect the pieces in a list and torch.cat them once, or write them into a preallocated tensor "
                "(out[i:j] = piece): growing a tensor by cat copies it whole each time (200 pieces of 8x512: 33.7 ms "
                "against 19.0 ms); a KV cache grown by cat: a static, preallocated cache")

    def as_dict(self) -> dict[str, object]:
        return {"chains": self.chains, "steps": self.steps, "pieces": self.pieces, "final": self.final, "share": self.share}


def growing_cat(frame: Frame, used: list[int] | None) -> GrowingCat | None:
    """The steps' tensors grown by cat (module doc), or None when the trace shows none."""
    if "args" not in frame.table.column_names:
        return None
    calls, steps = calls_in_steps(frame, CAT_OPS, used)
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if not step_ns or calls.size < MIN_LINKS:
        return None
    calls = calls[np.lexsort((frame.start[calls], frame.thread_key[calls]))][:MAX_CALLS]
    found = pc.extract_regex(args_text(frame.table, calls), _TWO_TENSORS)
    first = pc.fill_null(pc.struct_field(found, "first"), "").to_pylist()
    second = pc.fill_null(pc.struct_field(found, "second"), "").to_pylist()
    # Chains per thread: a call extends a chain whose expected next first tensor it takes.
    chains: list[list[int]] = []
    open_by_shape: dict[tuple[int, tuple[int, ...]], list[int]] = {}  # (thread, expected shape) -> chain indexes
    for i in range(calls.size):
        a, b = _dims(first[i]), _dims(second[i])
        if a is None or b is None or (len(a) != len(b) and a != (0,)):  # torch.tensor([]) joins any rank
            continue
        thread = int(frame.thread_key[calls[i]])
        waiting = open_by_shape.get((thread, a))
        if waiting:
            chain = waiting.pop(0)
            chains[chain].append(i)
        else:
            chain = len(chains)
            chains.append([i])
        for grown in _grown(a, b):
            open_by_shape.setdefault((thread, grown), []).append(chain)
    long = [c for c in chains if len(c) >= MIN_LINKS]
    if not long:
        return None
    dur = frame.dur[calls]
    beyond = sum(int(dur[c[:-1]].sum()) for c in long)
    if beyond < MIN_SHARE * step_ns:
        return None
    longest = max(long, key=len)
    final = _grown(_dims(first[longest[-1]]) or (), _dims(second[longest[-1]]) or ())
    return GrowingCat(chains=len(long), steps=int(steps.size), pieces=len(longest), final="x".join(map(str, final[0])) if final else "?",
                      share=beyond / step_ns)


def _dims(text: str) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        dims = json.loads(f"[{text}]")
    except ValueError:
        return None
    return tuple(dims) if all(isinstance(d, int) for d in dims) else None


def _grown(a: tuple[int, ...], b: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The shapes cat(a, b) can have: a grown by b along a dim where the other dims agree (an empty a,
    torch.empty(0, ...) or torch.tensor([]), takes b's shape)."""
    if a == (0,) or (a and a[0] == 0 and len(a) == len(b)):
        return [b]
    out = []
    for d in range(len(a)):
        if all(a[i] == b[i] for i in range(len(a)) if i != d):
            out.append(a[:d] + (a[d] + b[d],) + a[d + 1:])
    return out
