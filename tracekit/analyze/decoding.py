"""Autoregressive decoding in a step: one token at a time against a growing key/value cache.

A language model generating text (Hugging Face ``generate``, a hand-written sampling loop) runs its
whole network once per new token, on one query position per sequence, attending to the keys and
values of every position so far. Each call's GEMMs then have M = the sequences decoded at once (4 for
a batch of 4), which the skinny-GEMM remedy would tell to "batch across timesteps": a decode loop
cannot, as each token needs the one before it. What widens M is more sequences at once; what shrinks
the cost of a token is fewer weight bytes read per token. A loop that runs the whole sequence again
for each token, with no key/value cache (``use_cache=False``, or a hand-written loop calling
``model(ids)`` on the grown ids), does work that grows with the length: that is told as such, where
the steps run no backward pass (a training loop over samples sorted by length is not generation).

A recurrent decoder (a seq2seq model's ``nn.GRUCell`` or ``nn.LSTMCell`` called once a token, greedy,
sampled or beam search) has no attention to read; it shows by what runs between one cell call and
the next on its thread: an op that chooses indices from the output (``CHOOSING_OPS``: argmax, topk,
multinomial, ...), then one that reads by them (``READING_OPS``: the next token's embedding, the
beams' states reordered), with no read of a sequence by position between them (teacher forcing's
``target[:, t]``, an aten::select of a tensor as long as the loop), in at least half of those gaps,
in steps with no backward pass. Each
timestep's input is then unknown until the last one has run, so the recurrent layer (``nn.GRU``),
which takes all timesteps' inputs at once, cannot replace the loop, and its skinny GEMMs widen only
with more sequences at once. A teacher-forced loop (the next input read from the target by position;
in training, a backward pass in the step too) is not one. PyTorch 2.13, a GRU cell (hidden 256, vocabulary 2,000)
beam-searching 30 tokens with 5 beams on a 2-core Xeon: the cell and output GEMMs at M=5 were 29%
of the step, and ``fused-rnn`` predicted 22% for a layer that cannot run it.

The trace shows it by the attention calls' input dims (``record_shapes=True``): the query with one
position (dim -2 of ``[batch, heads, 1, head_dim]``) against keys whose position count (dim -2 of
``[batch, heads, L, head_dim]``) takes ``MIN_POSITIONS`` or more consecutive values in one step,
one a token, each called equally often (every layer once a token; ``scaled_dot_product_attention``
and its CPU/CUDA kernels; in eager attention the ``q @ k.transpose(-1, -2)`` product, ``[.., 1, d] x
[.., d, L]``). Without a cache the query has as many positions as the keys, and that count runs the
same way. A prompt's first pass and encoder attention (one L in a step) do not count. PyTorch 2.13 with transformers 5.24,
GPT-2 (4 layers, 256 wide, vocabulary 8,000) generating 32 tokens for 4 prompts of 16 on a 2-core
AMD EPYC: the LM head's ``aten::mm [[4,256],[256,8000]]`` was 26% of the step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from tracekit.analyze.frame import BACKWARD_NODE, RNN_CELL_OPS, Frame, calls_in_steps
from tracekit.ingest.links import member_mask, nearest_ancestor

SDPA_OPS = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_for_cpu",
            "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
            "aten::_scaled_dot_product_cudnn_attention", "aten::_scaled_dot_product_attention_math")
PRODUCT_OPS = ("aten::matmul", "aten::bmm")  # eager attention's q @ k^T
MIN_POSITIONS = 4
MAX_CALLS = 100_000  # calls whose args are read (attention, max/min, positional reads); more are read in part
# A recurrent decoder's feedback (module doc): ops that choose indices from an output, and ops that read by them.
CHOOSING_OPS = ("aten::argmax", "aten::argmin", "aten::topk", "aten::multinomial", "aten::sort", "aten::argsort")
# max / min choose only in their dim overload (values and indices), recorded as "Input Dims":[[5,2000],[],[]];
# the elementwise one takes two tensors.
DIM_CHOOSING_OPS = ("aten::max", "aten::min")
# Teacher forcing's next input, read from the target by position; a write after one is a decoder's buffer.
POSITIONAL_READS = ("aten::select", "aten::slice", "aten::narrow")
WRITE_OPS = ("aten::copy_", "aten::fill_", "aten::index_put_")
_FIRST_DIMS = r'"Input Dims":\[\[([0-9, ]*)\]'
READING_OPS = ("aten::embedding", "aten::index_select", "aten::index", "aten::gather", "aten::take", "aten::one_hot")
_DIM_OVERLOAD = r'"Input Dims":\[\[[0-9, ]+\],\[\],\[\]\]'
# The first two tensors' dims: "Input Dims":[[a...],[b...],...
_TWO_INPUTS = r'"Input Dims":\[\[(?P<first>[0-9, ]*)\],\[(?P<second>[0-9, ]*)\]'


@dataclass(frozen=True)
class Decoding:
    """A decode loop in the steps used: ``positions`` passes a step (the median over the steps), the
    sequence growing from ``first`` to ``last`` positions in the step that shows most. ``cached``: each
    pass runs one query position against a key/value cache; else it runs the whole sequence again."""

    positions: int
    first: int
    last: int
    cached: bool = True
    via: str = ""  # a recurrent decoder's feedback (fed_back_cells), "" for attention's

    def phrase(self) -> str:
        if self.via:
            return f"once per generated token ({self.positions} a step: {self.via})"
        return (f"once per generated token ({self.positions} a step: attention of one query position over a key/value "
                f"cache growing from {self.first} to {self.last} positions)")

    def evidence(self) -> str:
        run = (self.first + self.last) * self.positions // 2
        return (f"each generated token runs the model over the whole sequence again, with no key/value cache: "
                f"attention of as many query positions as keys, the sequence growing from {self.first} to {self.last} "
                f"positions ({self.positions} passes a step, {run:,} positions run where a cache runs "
                f"{self.first + self.positions - 1:,}): the work per token grows with the length")

    def remedy(self) -> str:
        return ("keep a key/value cache between tokens: generate(use_cache=True), or in a hand-written loop pass "
                "past_key_values (a static cache: cache_implementation=\"static\") and feed only the new token; each "
                "token then runs one position (a 2-layer GPT-2 making 12 tokens for 4 prompts of 8 on a CPU: 49.7 ms "
                "a call against 72.5 ms without the cache, a gap that grows with the length)")

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"positions_per_step": self.positions, "first": self.first, "last": self.last,
                                  "cached": self.cached}
        if self.via:
            out["via"] = self.via
        return out


def decoding(frame: Frame, used: list[int] | None) -> Decoding | None:
    """The steps' decode loop (module doc), or None where the attention calls' dims do not show one.
    Read once per frame and steps (the skinny-GEMM remedy and the verdict both ask)."""
    return frame.memo(f"decoding {used}", lambda: _decoding(frame, used))


def _decoding(frame: Frame, used: list[int] | None) -> Decoding | None:
    found = _attention_decoding(frame, used)
    if found is None:
        cells, _ = calls_in_steps(frame, RNN_CELL_OPS, used)
        found = fed_back_cells(frame, cells)
    return found


def _attention_decoding(frame: Frame, used: list[int] | None) -> Decoding | None:
    if "args" not in frame.table.column_names:
        return None
    from tracekit.analyze.top_ops import args_text  # top_ops reads this module's result

    calls, _ = calls_in_steps(frame, SDPA_OPS + PRODUCT_OPS, used)
    if calls.size < MIN_POSITIONS:
        return None
    calls = calls[:MAX_CALLS]
    found = pc.extract_regex(args_text(frame.table, calls), _TWO_INPUTS)
    first = pc.fill_null(pc.struct_field(found, "first"), "").to_pylist()
    second = pc.fill_null(pc.struct_field(found, "second"), "").to_pylist()
    sdpa = set(SDPA_OPS)
    # Per (cached?, step): calls per key length. Cached: one query position; uncached: as many as keys.
    lengths: dict[tuple[bool, int], dict[int, int]] = {}
    for i, row in enumerate(calls.tolist()):
        q, k = _dims(first[i]), _dims(second[i])
        if len(q) < 3 or len(k) < 3:
            continue
        if frame.name(row) in sdpa:
            if k[-1] != q[-1]:
                continue
            length = k[-2]
        elif k[-2] == q[-1]:  # q [.., Q, d] @ k^T [.., d, L]
            length = k[-1]
        else:
            continue
        if q[-2] == 1 or q[-2] == length:
            seen = lengths.setdefault((q[-2] == 1, int(frame.step[row])), {})
            seen[length] = seen.get(length, 0) + 1
    for cached in (True, False):
        mine = [seen for (c, _), seen in lengths.items() if c == cached]
        runs = [run for run in map(_longest_run, mine) if run[0] >= MIN_POSITIONS]
        if runs and 2 * len(runs) >= len(mine):
            _, lo, hi = max(runs)
            return Decoding(positions=int(np.median([n for n, _, _ in runs])), first=lo, last=hi, cached=cached)
    return None


def fed_back_cells(frame: Frame, cells: np.ndarray) -> Decoding | None:
    """A recurrent decoder (module doc) among these cell op rows: the outermost cells, paired with the
    next on their thread in the same step; a decode loop where at least half of the gaps between them
    choose indices and then read by them, and the cells' steps run no backward pass. None otherwise."""
    is_cell = np.zeros(len(frame), bool)
    is_cell[cells] = True
    cells = cells[nearest_ancestor(frame.parent, cells, is_cell) < 0]  # lstm_cell calls a fused cell on a GPU
    cells = cells[np.lexsort((frame.start[cells], frame.step[cells], frame.thread_key[cells]))]
    thread, step = frame.thread_key[cells], frame.step[cells]
    paired = (thread[:-1] == thread[1:]) & (step[:-1] == step[1:])
    if int(paired.sum()) < MIN_POSITIONS:
        return None
    gap_start, gap_end = frame.end[cells[:-1]][paired], frame.start[cells[1:]][paired]
    gap_thread = thread[:-1][paired]
    choosing, reading = _named_ops(frame, CHOOSING_OPS), _named_ops(frame, READING_OPS)
    choosing = np.concatenate([choosing, _dim_overloads(frame, _named_ops(frame, DIM_CHOOSING_OPS))])
    chooser, reader = np.full(gap_start.size, -1, np.int64), np.full(gap_start.size, -1, np.int64)
    for key in np.unique(gap_thread).tolist():
        mine = gap_thread == key
        chooser[mine] = _first_after(frame, choosing[frame.thread_key[choosing] == key], gap_start[mine], gap_end[mine])
        chose = mine & (chooser >= 0)
        reader[chose] = _first_after(frame, reading[frame.thread_key[reading] == key],
                                     frame.start[chooser[chose]] + 1, gap_end[chose])
    fed = reader >= 0
    if 2 * int(fed.sum()) < fed.size:
        return None
    loop_length = int(np.median(np.unique(gap_step := step[:-1][paired], return_counts=True)[1])) + 1
    fed[fed] = ~_read_by_position(frame, chooser[fed], reader[fed], loop_length)
    if 2 * int(fed.sum()) < fed.size:
        return None
    steps = np.unique(gap_step).tolist()
    backward, _ = calls_in_steps(frame, [n for n in frame.names if BACKWARD_NODE.match(n)], steps)
    if backward.size:
        return None  # teacher forcing: the next input comes from the target, known up front
    per_step = [int((step == s).sum()) for s in steps]

    def most(rows: np.ndarray) -> str:  # ties by name: the table's name codes follow its row order
        codes, counts = np.unique(frame.name_code[rows], return_counts=True)
        return min(zip((-counts).tolist(), (frame.names[c] for c in codes.tolist()), strict=True))[1]
    via = (f"{most(cells)} once a token, its next input chosen from its output ({most(chooser[fed])}, then "
           f"{most(reader[fed])} between one call and the next)")
    return Decoding(positions=int(np.median(per_step)), first=0, last=0, via=via)


def _read_by_position(frame: Frame, chooser: np.ndarray, reader: np.ndarray, loop_length: int) -> np.ndarray:
    """For each (chooser, reader) pair: whether a top-level op between them on its thread reads a
    sequence by position (``POSITIONAL_READS`` of a tensor with a dim of ``loop_length`` or more, not
    written into next: ``target[:, t]``), as teacher forcing feeds the next input; a decoder writing its
    token into an output buffer (``out[:, t] = tok``) writes there. Without recorded shapes any such
    read counts."""
    ops = frame.rows("cpu_op")
    ops = ops[frame.op_parent[ops] < 0]
    ops = ops[np.lexsort((frame.start[ops], frame.thread_key[ops]))]
    names = np.asarray(frame.names, object)[frame.name_code[ops]] if ops.size else np.zeros(0, object)
    positional = np.isin(names, POSITIONAL_READS)
    written = np.zeros(ops.size, bool)
    written[:-1] = np.isin(names[1:], WRITE_OPS) & (frame.thread_key[ops[1:]] == frame.thread_key[ops[:-1]])
    candidates = np.flatnonzero(positional & ~written)
    if candidates.size and "args" in frame.table.column_names:
        from tracekit.analyze.top_ops import args_text

        long = np.ones(candidates.size, bool)  # past MAX_CALLS read, any such read counts
        for i, text in enumerate(args_text(frame.table, ops[candidates[:MAX_CALLS]]).to_pylist()):
            found = re.search(_FIRST_DIMS, text or "")
            dims = [int(d) for d in found.group(1).split(",") if d.strip()] if found else []
            long[i] = not found or max(dims, default=0) >= loop_length
        candidates = candidates[long]
    reads = np.zeros(ops.size + 1, np.int64)
    reads[1:][candidates] = 1
    reads = np.cumsum(reads)
    # Rows -> positions in the sorted top-level ops (chooser and reader are top-level or inside one).
    at = np.full(len(frame), -1, np.int64)
    at[ops] = np.arange(ops.size)
    lo, hi = at[_outermost(frame, chooser)], at[_outermost(frame, reader)]
    known = (lo >= 0) & (hi > lo)
    out = np.zeros(chooser.size, bool)
    out[known] = reads[hi[known]] - reads[lo[known] + 1] > 0
    return out


def _outermost(frame: Frame, rows: np.ndarray) -> np.ndarray:
    """Each op row's outermost enclosing op (itself at the top level)."""
    out = rows.copy()
    parent = frame.op_parent[out]
    while (parent >= 0).any():
        out = np.where(parent >= 0, parent, out)
        parent = frame.op_parent[out]
    return out


def _named_ops(frame: Frame, names: tuple[str, ...]) -> np.ndarray:
    codes = [c for c, n in enumerate(frame.names) if n in names]
    ops = frame.rows("cpu_op")
    return ops[member_mask(frame.name_code[ops], codes)] if codes else ops[:0]


def _dim_overloads(frame: Frame, rows: np.ndarray) -> np.ndarray:
    """Those of ``rows`` (max / min) recorded with the dim overload's inputs (none without shapes)."""
    if not rows.size or "args" not in frame.table.column_names:
        return rows[:0]
    from tracekit.analyze.top_ops import args_text

    rows = rows[:MAX_CALLS]
    return rows[np.asarray(pc.fill_null(pc.match_substring_regex(args_text(frame.table, rows), _DIM_OVERLOAD), False))]


def _first_after(frame: Frame, rows: np.ndarray, after: np.ndarray, before: np.ndarray) -> np.ndarray:
    """For each window [after, before): the first of ``rows`` (one thread's) starting in it, -1 if none."""
    out = np.full(after.size, -1, np.int64)
    if not rows.size:
        return out
    rows = rows[np.argsort(frame.start[rows], kind="stable")]
    at = np.searchsorted(frame.start[rows], after, side="left")
    found = at < rows.size
    found[found] = frame.start[rows[at[found]]] < before[found]
    out[found] = rows[at[found]]
    return out


def _longest_run(calls: dict[int, int]) -> tuple[int, int, int]:
    """(count, first, last) of the longest run of consecutive lengths called equally often (each token
    runs every layer once; eager attention's weights @ v product adds the head dim, a constant,
    beside them)."""
    values = np.array(sorted(calls))
    counts = np.array([calls[v] for v in values.tolist()])
    breaks = np.flatnonzero((np.diff(values) != 1) | (np.diff(counts) != 0))
    starts, ends = np.r_[0, breaks + 1], np.r_[breaks, values.size - 1]
    k = int(np.argmax(ends - starts))
    return int(ends[k] - starts[k] + 1), int(values[starts[k]]), int(values[ends[k]])


def uncached_generation(frame: Frame, used: list[int] | None) -> Decoding | None:
    """The steps' decode loop where it runs without a key/value cache (module doc), else None. Steps that
    run a backward pass are training, not generation: sequences of growing lengths there (a loop over
    samples sorted by length) are not one sequence run again."""
    found = decoding(frame, used)
    if found is None or found.cached:
        return None
    backward, _ = calls_in_steps(frame, [n for n in frame.names if BACKWARD_NODE.match(n)], used)
    return None if backward.size else found


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip()) if text else ()
