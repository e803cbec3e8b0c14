"""The framework ops that take the time, by name and input shapes, and what to do about the worst.

Self time (an op's duration minus its child ops') per (op name, class, input shapes) over the steps used
(``tracekit.analyze.steps``; the whole trace when no step is marked). Shapes come from Kineto's
``Input Dims`` (``record_shapes=True``); without them ops group by name alone. The same time per (op
name, class), all shapes summed, is ``by_name``: where shapes vary from call to call (a mixture of
experts routing a different number of tokens to each expert, sequences padded per batch) one op's time
is spread over many (name, shapes) rows, each small, and only the sum says that op takes the time.

An op on the driving thread (the one holding the steps) that is not a compute op and that runs, for
at least ``WAITING_SHARE`` of its duration, while other threads of its process are busy with ops or
TF's runtime work (``TF_WORKER_EVENTS``: TF's ``EagerExecute`` of a function while the inter-op pool
runs the function's ops and tf.data produces its batch, and blocked on the function until the OS
wakes it) spends its self time waiting for them: it is listed in ``waiting``, not ranked, so a wait never tops the table as if it were
work. A thread is busy during its ops and in the gaps between them shorter than
``WORKER_GAP_SHARE`` of the waiting op: there TF's executor picks the next op, untraced (on TF 2.21
Keras GRU steps, thousands of sub-microsecond to 70 us gaps are a third to half of the call).

Remedies are rules over this table, each checking its own evidence:
* a GEMM op (``aten::mm``/``addmm``/``bmm``/``matmul``/``linear``, TF ``MatMul``) whose inner
  dimension K, or whose row count M, is at most ``SKINNY_DIM`` and that takes at least
  ``REMEDY_SHARE`` of the time: a skinny GEMM that runs far below the machine's GEMM throughput;
  batch it (across timesteps, or fuse the weights of several small GEMMs into one). Where most of
  its self time runs inside a recurrent op, the remedy says what can be batched there: inside a
  recurrent layer (``aten::gru``, ``aten::lstm``: PyTorch's own per-timestep loop, as for nn.GRU on
  a CPU) M is the batch and the hidden-state GEMM cannot be batched across timesteps, so only more
  sequences at once widen it; inside a cell called per timestep (``aten::gru_cell``) the recurrent
  layer makes the input GEMMs of all timesteps one.
* the same for a GEMM op whose skinny calls are spread over several shapes, none ``REMEDY_SHARE``
  alone but together at least that (a server's dynamic batches: M from 1 to 16), one remedy for them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.analyze.breakdown import COMPUTE_OP_CLASSES, op_self_time
from tracekit.analyze.classify import EAGER_OP, OP_CLASSES, RowClasses, op_name_codes, short_name, tf_base_op
from tracekit.analyze.decoding import Decoding, decoding
from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame
from tracekit.analyze.gpu_presence import unrecorded_gpu_work
from tracekit.analyze.waiting import WAITING_SHARE, covered_by_other_threads
from tracekit.ingest.columns import distinct, factorize, stable_order
from tracekit.ingest.links import member_mask, nearest_ancestor

SKINNY_DIM = 16
REMEDY_SHARE = 0.10
TOP = 15
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear")
# Input Dims is a list of per-input dims lists, [[1000, 8], [8, 512], []], a tensor-list input one more
# level deep: aten::cat's [[[1592, 512], [8, 512]], []].
_INPUT_DIMS_KEY = b'"Input Dims":'
_INPUT_DIMS = r'"Input Dims":(?P<dims>\[(?:\[(?:\[[^\[\]]*\]|[^\[\]])*\]|[^\[\]])*\])'


@dataclass
class TopOps:
    """Result of ``top_ops``. Times in ns.

    ops: one row per (name, class, shapes), largest self time first: name, shapes (JSON text of the
        input dims, "" when not recorded), op_class, calls, self_ns, mean_ns, share (of the time
        the ops ran in: the steps used, or the trace), gflops (the GEMM rate a CPU trace's
        GEMM_FLOP_OPS op (aten::mm / addmm / bmm / mv and their variants) achieved from its shapes: 10**9 FLOP per second of self
        time; NaN for other ops, without shapes, and on GPU traces).
    remedies: sentences naming an op, its shapes and the share of time it accounts for.
    waiting: ops left out of ``ops`` because they wait for compute ops on other threads: name,
        calls, self_ns, covered (share of their duration with other threads busy with ops, or blocked on
        a TF function they run).
    by_name: the ranked ops per (name, class), all their shapes summed, largest self time first: name,
        op_class, calls, self_ns, mean_ns, share, shapes (how many distinct input dims its calls had; 0
        when none were recorded).
    """

    ops: pd.DataFrame
    window_ns: int
    shapes_recorded: bool
    remedies: list[str] = field(default_factory=list)
    waiting: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["name", "calls", "self_ns", "covered"]))
    threads: int = 1  # host threads the ops ran on: with several, shares of the window can add to over 100%
    # TF ops are named per layer (``…/block_1_expand/Conv2D:_MklNativeConv2D``): their self time per op
    # type (``tf_base_op``), largest first, as (type, share); empty where names are already types (torch).
    op_types: list[tuple[str, float]] = field(default_factory=list)
    by_name: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["name", "op_class", "calls", "self_ns", "mean_ns", "share", "shapes"]))

    def shapes_vary(self, rows: int = TOP) -> bool:
        """Whether one of the first ``rows`` ops by name ran at several input shapes (its time split
        over several rows of ``ops``)."""
        return bool((self.by_name.shapes.head(rows) > 1).any())

    def describe_waiting(self) -> list[str]:
        return [f"{short_name(w.name)} ({w.self_ns / 1e6:,.1f} ms self time) runs {w.covered:.0%} of its time while "
                f"other threads are busy with ops or it is blocked on them: waiting, not ranked" for w in self.waiting.itertuples()]


def top_ops(frame: Frame, classes: RowClasses, used_steps: list[int] | None = None, top: int = TOP) -> TopOps:
    """The ops with the most self time (see the module doc)."""
    rows = frame.rows("cpu_op")
    if used_steps is not None:
        rows = rows[member_mask(frame.step[rows], used_steps)]
    window = _window(frame, used_steps)
    empty = pd.DataFrame(columns=["name", "shapes", "op_class", "calls", "self_ns", "mean_ns", "share", "gflops"])
    if rows.size == 0:
        return TopOps(empty, window, False)
    code, self_ns, cls = op_name_codes(frame)[rows], op_self_time(frame, rows), classes.op[rows]
    # An op is its name and class. Most names have one class; those that take it from where they
    # run do not: a copy_ is GEMM work inside addmm and data movement in DDP's bucket copy, and an
    # XLA instruction name repeats across modules (``ynn_fusion`` a matrix product in one, a sum in
    # another). One row per name would label all of its calls with the first call's class.
    key = code.astype(np.int64) * (len(OP_CLASSES) + 1) + cls.astype(np.int64) + 1
    # Per op: ops that mostly wait while other threads run are set apart, not ranked.
    by_name = _Groups(key)
    name_self, name_cls = by_name.sums(self_ns), cls[by_name.first]
    candidate = ~member_mask(name_cls, [OP_CLASSES.index(c) for c in COMPUTE_OP_CLASSES])  # compute ops never wait
    asked = np.flatnonzero(candidate[by_name.index])
    covered_rows = np.zeros(rows.size, np.int64)
    covered_rows[asked] = covered_by_other_threads(frame, rows[asked], among=rows)
    dur, covered = by_name.sums(frame.dur[rows]), by_name.sums(covered_rows)
    waiting = candidate & (covered >= WAITING_SHARE * dur) & (name_self > 0)
    ranked = ~waiting[by_name.index]
    # Per (op name, input dims) among the rest: the top by self time, ties in order of first call.
    shape_code, shape_texts, shapes_recorded = _top_input_dims(frame.table, rows, key, self_ns, ranked, top)
    by_op = _Groups(key[ranked] * max(len(shape_texts), 1) + shape_code[ranked])
    op_self, op_calls = by_op.sums(self_ns[ranked]), by_op.counts
    first = np.flatnonzero(ranked)[by_op.first]
    chosen = np.lexsort((first, -op_self))[:top]
    out = pd.DataFrame({
        "name": [frame.names[code[first[g]]] if code[first[g]] >= 0 else "" for g in chosen],
        "shapes": [shape_texts[shape_code[first[g]]] for g in chosen],
        "op_class": [OP_CLASSES[cls[first[g]]] if cls[first[g]] >= 0 else "other" for g in chosen],
        "calls": op_calls[chosen].astype(np.int64),
        "self_ns": op_self[chosen].astype(np.int64),
    })
    out["mean_ns"] = out.self_ns / out.calls
    out["share"] = out.self_ns / window if window else 0.0
    # On the CPU a GEMM op's self time is the GEMM; on a GPU trace it is the launch, and no rate is
    # said (nor where the GPU's activity went unrecorded: its launch calls or GPU-only ops show it).
    cpu_only = frame.rows(*GPU_BUSY_KINDS).size == 0 and not unrecorded_gpu_work(frame, classes)
    flops = [gemm_flops(n, sh) if cpu_only else None for n, sh in zip(out.name, out.shapes, strict=True)]
    out["gflops"] = [f * c / t if f and t > 0 else np.nan for f, c, t in zip(flops, out.calls, out.self_ns, strict=True)]
    result = TopOps(out.reset_index(drop=True), window, shapes_recorded,
                    threads=int(distinct(frame.thread_key[rows]).size))
    waits = np.flatnonzero(waiting)
    waits = waits[np.lexsort((by_name.first[waits], -name_self[waits]))]
    result.waiting = pd.DataFrame({"name": [frame.names[code[by_name.first[g]]] if code[by_name.first[g]] >= 0 else ""
                                            for g in waits],
                                   "calls": by_name.counts[waits].astype(np.int64),
                                   "self_ns": name_self[waits].astype(np.int64),
                                   "covered": (covered[waits] / np.maximum(dur[waits], 1)).astype(float)})
    ranked_rows = np.flatnonzero(ranked)

    def recurrent_op_around(i: int) -> str:  # asked only of a row the skinny-GEMM rule fires on
        mine = ranked_rows[by_op.index == chosen[i]]
        return _recurrent_op_around(frame, classes, rows[mine], self_ns[mine])

    def weight_type(row: int) -> str | None:  # asked only of a decode loop's skinny GEMM
        return second_factor_type(frame.table, int(rows[row]), frame.name(int(rows[row])))

    # Ops on threads side by side (serving threads, a jit.fork branch): a share is of their summed time.
    summed = f", summed over {result.threads} threads" if result.threads > 1 and op_self.sum() > window else ""
    result.remedies = _skinny_gemm_remedies(result.ops, used_steps is not None, recurrent_op_around,
                                            lambda: decoding(frame, used_steps),
                                            lambda i: weight_type(int(first[chosen[i]])), summed)
    # Per row: whether its input dims were recorded (code 0 is "" here, not always in a test's reference).
    has_dims = np.array([bool(text) for text in shape_texts] or [False])[shape_code]
    gemm_codes = [c for c in distinct(code[first]).tolist() if c >= 0 and _is_gemm_op(frame.names[c])]
    gemm = np.flatnonzero(member_mask(code[first], gemm_codes) & has_dims[first])
    result.remedies += _spread_skinny_gemm_remedies(pd.DataFrame({
        "name": [frame.names[code[first[g]]] for g in gemm.tolist()],
        "shapes": [shape_texts[shape_code[first[g]]] for g in gemm.tolist()],
        "calls": op_calls[gemm].astype(np.int64), "self_ns": op_self[gemm].astype(np.int64),
        "row": first[gemm].astype(np.int64)}),
        window, used_steps is not None, lambda: decoding(frame, used_steps), weight_type, summed)
    result.op_types = _op_types(frame, code[by_name.first[~waiting]], name_self[~waiting], window)
    result.by_name = _by_name(frame, code, cls, by_name, name_self, ~waiting, shape_code, has_dims, window, top)
    return result


def _by_name(frame: Frame, code: np.ndarray, cls: np.ndarray, by_name: _Groups, name_self: np.ndarray,
             ranked: np.ndarray, shape_code: np.ndarray, has_dims: np.ndarray, window: int,
             top: int) -> pd.DataFrame:
    """The ``top`` ranked (name, class) groups by self time summed over shapes, with how many input
    dims each ran at (the top names' args are always read: ``_top_input_dims`` reads names in order of
    this same sum)."""
    groups = np.flatnonzero(ranked)
    chosen = groups[np.lexsort((by_name.first[groups], -name_self[groups]))][:top]
    codes = int(shape_code.max(initial=0)) + 1
    pairs = distinct(by_name.index[has_dims].astype(np.int64) * codes + shape_code[has_dims])
    shapes = np.bincount(pairs // codes, minlength=by_name.keys.size)
    first = by_name.first[chosen]
    out = pd.DataFrame({
        "name": [frame.names[code[r]] if code[r] >= 0 else "" for r in first],
        "op_class": [OP_CLASSES[cls[r]] if cls[r] >= 0 else "other" for r in first],
        "calls": by_name.counts[chosen].astype(np.int64),
        "self_ns": name_self[chosen].astype(np.int64),
    })
    out["mean_ns"] = out.self_ns / out.calls
    out["share"] = out.self_ns / window if window else 0.0
    out["shapes"] = shapes[chosen].astype(np.int64)
    return out


# An XLA HLO instruction as XLA names it: its kind or the TF op it came from, and an instance number
# (MatMul.14, divide_subtract_fusion.3, all-reduce.3); a TF op's own name is scoped ("dense/MatMul:MatMul").
HLO_INSTRUCTION = re.compile(r"^(?P<kind>[A-Za-z_][\w\-]*)\.\d+$")


def op_type_of(name: str) -> str:
    """The op type an op name ran: a TF op's type (``tf_base_op``), an XLA instruction's name without
    its instance number (``MatMul.14`` -> ``MatMul``); other names unchanged."""
    op_type = tf_base_op(name)
    if op_type == name and (instruction := HLO_INSTRUCTION.match(name)):
        return instruction.group("kind")
    return op_type


def _op_types(frame: Frame, codes: np.ndarray, self_ns: np.ndarray, window: int) -> list[tuple[str, float]]:
    """Self time per op type of the named ops (``op_type_of``), as shares of the window; [] when no name
    is a scoped TF op or an XLA instruction, or no type holds two names (the types would repeat the ops)."""
    per_type: dict[str, int] = {}
    names_of_type: dict[str, int] = {}
    scoped = False
    for c, t in zip(codes.tolist(), self_ns.tolist(), strict=True):
        name = frame.names[c] if c >= 0 else ""
        op_type = op_type_of(name)
        names_of_type[op_type] = names_of_type.get(op_type, 0) + 1
        scoped |= op_type != name and not name.startswith(EAGER_OP)
        per_type[op_type] = per_type.get(op_type, 0) + int(t)
    if not scoped or not window or max(names_of_type.values()) < 2:
        return []
    return [(k, v / window) for k, v in sorted(per_type.items(), key=lambda kv: -kv[1])]


def sentence_labels(names: list[str], shapes: list[str], classes: list[str] | None = None) -> list[str]:
    """Ops named for a sentence (``short_name``), told apart where two would read the same: by their
    class when those differ (one XLA instruction name in two modules: ``ynn_fusion (gemm)``), by their
    input shapes when those differ (one op at two shapes), else by as many more of their name's scopes
    as it takes (one TF op in two replicas: ``replica_1/…/MatMul`` and ``…/MatMul``)."""
    labels = [short_name(n) for n in names]
    for label in set(labels):
        same = [i for i, x in enumerate(labels) if x == label]
        if len(same) < 2:
            continue
        if classes is not None and len({classes[i] for i in same}) == len(same):
            for i in same:
                labels[i] = f"{label} ({classes[i]})"
            continue
        if len({shapes[i] for i in same}) == len(same) and all(shapes[i] for i in same):
            for i in same:
                labels[i] = f"{label} ({compact_shapes(shapes[i])})"
            continue
        scopes = [names[i].split("/") for i in same]
        for k in range(1, max(len(x) for x in scopes) + 1):
            tails = ["/".join(x[-k:]) for x in scopes]
            if len(set(tails)) == len(tails):
                break
        for i, x, tail in zip(same, scopes, tails, strict=True):
            labels[i] = tail if k >= len(x) else "…/" + tail
    return labels


MAX_INPUTS_SAID = 6


def compact_shapes(shapes: str) -> str:
    """Input dims for a sentence: ``[[8,32,128],[],[]]`` -> ``8x32x128``, ``[[64,128],[128,256]]`` ->
    ``64x128, 128x256``, a tensor list ``[[[16,512],[8,512]],[]]`` -> ``16x512+8x512`` (scalars and empty
    inputs left out); a list of more than 3 tensors by its count and first two (a fused optimizer's
    ``10 tensors (1000x128+128x128+…)``), the same list passed again as ``(xN)``; of more than
    ``MAX_INPUTS_SAID`` inputs (a compiled graph's call) the first few and the count; the text itself
    when it is not such a list."""
    def one_input(dims: list) -> str:
        if dims and all(isinstance(d, list) for d in dims):
            parts = [p for p in (one_input(d) for d in dims) if p]
            if len(parts) > 3:
                return f"{len(parts)} tensors ({'+'.join(parts[:2])}+…)"
            return "+".join(parts)
        return "x".join(str(d) for d in dims)

    try:
        dims = json.loads(shapes)
        texts = [t for t in (one_input(one) for one in dims if isinstance(one, list) and one) if t]
    except (ValueError, TypeError):
        return shapes
    out: list[str] = []
    for text in texts:
        repeated = re.fullmatch(r"(.*) \(x(\d+)\)", out[-1]) if out and "tensors" in text else None
        if repeated and repeated.group(1) == text:
            out[-1] = f"{text} (x{int(repeated.group(2)) + 1})"
        elif out and "tensors" in text and out[-1] == text:
            out[-1] = f"{text} (x2)"
        else:
            out.append(text)
    if len(out) > MAX_INPUTS_SAID:  # a compiled graph's call takes every weight: its first inputs and the count
        return ", ".join(out[:MAX_INPUTS_SAID - 2]) + f", … ({len(out)} inputs)"
    return ", ".join(out) or shapes


class _Groups:
    """Rows grouped by an integer key: each row's group (``index``), each group's first row and row
    count, and exact int64 sums per group (a float-weighted bincount rounds past 2**53)."""

    def __init__(self, key: np.ndarray) -> None:
        self.keys, self.index = factorize(np.asarray(key, np.int64))
        n = self.keys.size
        self.counts = np.bincount(self.index, minlength=n)
        self.first = np.full(n, key.size, np.int64)
        np.minimum.at(self.first, self.index, np.arange(key.size))
        self._order = stable_order(self.index)
        self._bounds = np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.intp)

    def sums(self, values: np.ndarray) -> np.ndarray:
        if not self._order.size:
            return np.zeros(0, np.int64)
        return np.add.reduceat(np.asarray(values, np.int64)[self._order], self._bounds)


def _window(frame: Frame, used_steps: list[int] | None) -> int:
    steps = frame.rows("step")
    if used_steps is not None and steps.size:
        chosen = steps[member_mask(frame.step[steps], used_steps)]
        return int(frame.dur[chosen].sum())
    ops = frame.rows("cpu_op")
    return int(frame.end[ops].max() - frame.start[ops].min()) if ops.size else 0


def _top_input_dims(table: pa.Table, rows: np.ndarray, code: np.ndarray, self_ns: np.ndarray, ranked: np.ndarray,
                    top: int) -> tuple[np.ndarray, list[str], bool]:
    """Each row's code into the Input Dims texts (code 0 is "", not recorded), those texts, and
    whether any op row has them; ``code`` is each row's op (its name and class, as ``top_ops`` keys them).

    The args JSON is read only for the op names that can place a (name, dims) group in the top:
    names in order of their positive self time, in growing batches, until the next name's positive
    self time is below the ``top``-th group read so far (no group of it or of any later name can
    outrank that many). The rows of names not read keep code 0 and stay outranked whatever their
    dims. Ranked by that bound, a long trace reads the args of a few op names, not of every op.
    """
    shape_code = np.zeros(rows.size, np.int64)
    texts, code_of_text = [""], {"": 0}
    if not args_mention(table, _INPUT_DIMS_KEY):  # torch.profiler's default, record_shapes=False
        return shape_code, texts, False
    positions = np.flatnonzero(ranked)
    by_name = _Groups(code[positions])
    bound = by_name.sums(np.maximum(self_ns[positions], 0))
    order = np.lexsort((by_name.first, -bound))
    done, batch = 0, top
    others_have_dims: bool | None = None  # whether any row not read has Input Dims, once asked
    while done < order.size:
        names = order[done:done + batch]
        done += names.size
        read = positions[member_mask(by_name.index, names)]
        found, found_texts = input_dims(table, rows[read])
        recode = np.zeros(max(len(found_texts), 1), np.int64)
        for i, text in enumerate(found_texts):
            if text not in code_of_text:
                code_of_text[text] = len(texts)
                texts.append(text)
            recode[i] = code_of_text[text]
        shape_code[read] = recode[found]
        if done == order.size:
            break
        if len(texts) == 1 and others_have_dims is None:
            others_have_dims = _any_input_dims(table, rows[_unread(rows.size, positions, by_name, order[:done])])
            if not others_have_dims:
                break  # a trace without shapes: the top names had none, nor has any other op
        read_so_far = positions[member_mask(by_name.index, order[:done])]
        key = code[read_so_far].astype(np.int64) * (len(texts) + 1) + shape_code[read_so_far]
        group_self = _Groups(key).sums(self_ns[read_so_far])
        if group_self.size >= top and np.sort(group_self)[-top] > bound[order[done]]:
            break
        batch *= 2
    recorded = len(texts) > 1 or bool(others_have_dims)
    if not recorded and others_have_dims is None:  # all names read at once: a waiting op may have shapes
        recorded = _any_input_dims(table, rows[_unread(rows.size, positions, by_name, order)])
    return shape_code, texts, recorded


def _unread(n: int, positions: np.ndarray, by_name: _Groups, names_read: np.ndarray) -> np.ndarray:
    """The rows (of ``n``) whose args were not read: the waiting ops and the ranked names not read."""
    unread = np.ones(n, bool)
    unread[positions[member_mask(by_name.index, names_read)]] = False
    return unread


def _any_input_dims(table: pa.Table, rows: np.ndarray) -> bool:
    """Whether any of these rows records Input Dims (a substring test first: half the regex's cost)."""
    if not rows.size:
        return False
    storage = args_text(table, rows)
    if not pc.any(pc.match_substring(storage, '"Input Dims":')).as_py():
        return False
    return pc.any(pc.is_valid(pc.extract_regex(storage, _INPUT_DIMS))).as_py()


def first_input_shape(dims_text: str) -> list[int] | None:
    """The first input's dims from one op's ``Input Dims`` JSON text ([] for a 0-d tensor); None where
    none is recorded or the first input is not one tensor (a tensor list)."""
    try:
        dims = json.loads(dims_text) if dims_text else None
    except ValueError:
        return None
    if not isinstance(dims, list) or not dims or not isinstance(dims[0], list):
        return None
    return dims[0] if all(isinstance(d, int) for d in dims[0]) else None


def main_input_dims(frame: Frame, name: str) -> str:
    """The input dims (JSON text) the op rows named ``name`` spent most of their own time on; "" where
    none were recorded (record_shapes=False) or no op has the name."""
    codes = [c for c, n in enumerate(frame.names) if n == name]
    if not codes or "args" not in frame.table.column_names:
        return ""
    ops = frame.rows("cpu_op")
    calls = ops[member_mask(frame.name_code[ops], codes)]
    dims_code, texts = input_dims(frame.table, calls)
    spent = np.bincount(dims_code, weights=op_self_time(frame, calls), minlength=len(texts))
    recorded = [i for i, t in enumerate(texts) if t]
    return texts[max(recorded, key=lambda i: spent[i])] if recorded else ""


def input_dims(table: pa.Table, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Each row's code into the distinct ``Input Dims`` JSON texts ("" when absent), and those texts,
    in one vectorized regex pass. Ops group by the integer code: far cheaper than by the text."""
    found = pc.fill_null(pc.struct_field(pc.extract_regex(args_text(table, rows), _INPUT_DIMS), "dims"), "")
    encoded = found.dictionary_encode()
    return encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist()


def args_mention(table: pa.Table, text: bytes) -> bool:
    """Whether the args column's character data holds ``text`` anywhere: False proves that no row's
    args do, without taking the rows out (one pass at ~1 GB/s over the buffers; on a 5M-event trace
    0.08 s, against 0.3 s for the row-wise regex passes it spares). True is a maybe: the bytes can
    belong to rows of any kind, or to a slice's neighbours."""
    if "args" not in table.column_names:
        return False
    pattern = re.compile(re.escape(text))
    for chunk in table.column("args").chunks:
        storage = chunk.storage if isinstance(chunk, pa.ExtensionArray) else chunk
        if not (pa.types.is_string(storage.type) or pa.types.is_large_string(storage.type)):
            return True  # another layout: the row-wise passes decide
        data = storage.buffers()[2]
        if storage.null_count < len(storage) and data is not None and pattern.search(memoryview(data)):
            return True
    return False


def args_text(table: pa.Table, rows: np.ndarray) -> pa.Array:
    """These rows' args JSON as one plain string array."""
    args = table.column("args").take(pa.array(rows))
    return pa.chunked_array([c.storage for c in args.chunks], args.type.storage_type).combine_chunks()


RECURRENT_LAYER_OPS = re.compile(r"^aten::(lstm|gru|rnn_tanh|rnn_relu)$")
RECURRENT_CELL_OPS = re.compile(r"^aten::(lstm|gru|rnn_tanh|rnn_relu)_cell$")


def _recurrent_op_around(frame: Frame, classes: RowClasses, rows: np.ndarray, self_ns: np.ndarray) -> str:
    """The recurrent layer or cell op (``aten::gru``, ``aten::lstm_cell``) that encloses most of these
    op rows' self time, the outermost where a layer calls cells; "" when none does."""
    rnn = classes.op == OP_CLASSES.index("rnn")
    around = nearest_ancestor(frame.parent, rows, rnn)
    outer = around.copy()
    while True:  # climb to the outermost recurrent op (a layer calling its cells)
        has = outer >= 0
        up = np.full(outer.size, -1, np.int64)
        up[has] = nearest_ancestor(frame.parent, outer[has], rnn)
        if not (up >= 0).any():
            break
        outer = np.where(up >= 0, up, outer)
    names = [frame.name(int(r)) if r >= 0 else "" for r in outer.tolist()]
    weight: dict[str, int] = {}
    for name, t in zip(names, self_ns.tolist(), strict=True):
        if RECURRENT_LAYER_OPS.match(name) or RECURRENT_CELL_OPS.match(name):
            weight[name] = weight.get(name, 0) + int(t)
    if not weight:
        return ""
    name, t = max(weight.items(), key=lambda kv: kv[1])
    return name if 2 * t >= int(self_ns.sum()) else ""


def _is_gemm_op(name: str) -> bool:
    return name in GEMM_OPS or name.endswith(("MatMul", ":_MklMatMul"))


# Shapes parsed per op name for the spread-out skinny GEMMs, largest self time first.
SPREAD_SHAPES_READ = 2_000


# What widens a decode loop's GEMMs (tracekit.analyze.decoding), and what shrinks them.
DECODE_BATCHING = ("M is the sequences decoded at once, and one sequence's tokens cannot be batched (each needs the "
                   "last); decode more sequences at once (a larger batch, or continuous batching in a server)")
DECODE_EXAMPLE = "A 4-layer GPT-2 on 2 CPU cores: 16 prompts at once gave 3.1x the tokens/s of 4, its LM head in int8 1.3x"
# Element types as torch.profiler records them ("Input type"), by bytes.
SIXTEEN_BIT_TYPES = frozenset({"c10::BFloat16", "c10::Half"})
EIGHT_BIT_TYPES = frozenset({"signed char", "unsigned char", "c10::qint8", "c10::quint8", "c10::Float8_e4m3fn",
                             "c10::Float8_e5m2", "c10::Float8_e4m3fnuz", "c10::Float8_e5m2fnuz"})


def decode_remedy(weight_type: str | None) -> str:
    """The decode loop's remedy: batch more sequences, and weights in fewer bytes than the ones the
    GEMMs read (``weight_type``: the recorded type of their second factor, None when not recorded;
    a bf16 model is not told to use bf16)."""
    fewer = "as each token reads every weight, weights in fewer bytes cut its time"
    if weight_type in SIXTEEN_BIT_TYPES:
        fewer += (f": they are 16-bit already ({weight_type}); int8 or int4 weight-only quantization (torchao) "
                  "halves or quarters them")
    elif weight_type in EIGHT_BIT_TYPES:
        fewer += f": they are 8-bit already ({weight_type}); int4 weight-only quantization (torchao) halves them"
    else:
        fewer += " (int8 weight-only quantization, torchao; bf16 where the CPU has native bf16 math)"
    return f"{DECODE_BATCHING}, and {fewer}. {DECODE_EXAMPLE}"


# Kineto's op args: "Input type":["float","float","float","Scalar","Scalar"]
INPUT_TYPES = r'"Input type":(?P<types>\[[^\]]*\])'


def factor_types(name: str, types_text: str) -> tuple[str, str] | None:
    """The element types of this product's two factors (the add* ops take the added term first), from
    its recorded ``Input type``; None when they are not there."""
    try:
        types = json.loads(types_text)
    except ValueError:
        return None
    first = 1 if name in ("aten::addmm", "aten::_addmm_activation", "aten::baddbmm", "aten::addbmm", "aten::addmv") else 0
    if not isinstance(types, list) or len(types) < first + 2:
        return None
    return str(types[first]), str(types[first + 1])


def second_factor_type(table: pa.Table, row: int, name: str) -> str | None:
    """The recorded element type of a product op's second factor (its weight in a linear layer's
    ``mm(x, w.t())``) at this row; None where types were not recorded."""
    text = args_text(table, np.array([row], np.int64))[0].as_py() or ""
    found = re.search(INPUT_TYPES, text)
    factors = factor_types(name, found.group("types")) if found else None
    return factors[1] if factors else None


def _spread_skinny_gemm_remedies(groups: pd.DataFrame, window: int, per_step: bool,
                                 decode_loop: Callable[[], Decoding | None] = lambda: None,
                                 weight_type: Callable[[int], str | None] = lambda row: None,
                                 summed: str = "") -> list[str]:
    """The skinny-GEMM remedy for an op whose skinny calls are spread over several shapes, none of
    them ``REMEDY_SHARE`` of the time alone but together at least that (dynamic batching at M of 1 to
    16, a batch that shrinks at the end of each sequence): ``_skinny_gemm_remedies`` reads one shape
    at a time. ``groups``: one row per (GEMM op, shapes): name, shapes, calls, self_ns; ``decode_loop()``
    the steps' decoding, where M is the sequences decoded at once (a beam search's projections at 4 shapes);
    ``weight_type(row)`` the element type of the GEMM's second factor at ``groups.row`` (a row of the op)."""
    out: list[str] = []
    if not window or groups.empty:
        return out
    where = ("of the steps" if per_step else "of the trace") + summed
    for name, g in groups.groupby("name", sort=False):
        g = g.sort_values("self_ns", ascending=False, kind="stable").head(SPREAD_SHAPES_READ)
        dims = [_gemm_dims(str(name), text) for text in g.shapes]
        skinny = np.array([d is not None and min(d[0], d[1]) <= SKINNY_DIM for d in dims], bool)
        self_ns = g.self_ns.to_numpy()[skinny]
        if skinny.sum() < 2 or self_ns.sum() < REMEDY_SHARE * window or self_ns.max() >= REMEDY_SHARE * window:
            continue  # one shape of REMEDY_SHARE or more gets the remedy of its own
        m = [d[0] for d, s in zip(dims, skinny, strict=True) if s and d is not None]
        k = [d[1] for d, s in zip(dims, skinny, strict=True) if s and d is not None]
        which = (_span("M", m) if max(m) <= SKINNY_DIM else _span("K", k) if max(k) <= SKINNY_DIM else
                 f"M or K of {SKINNY_DIM} or less")
        said = (f"{name} at {int(skinny.sum())} shapes, each a skinny GEMM ({which}), "
                f"{int(g.calls.to_numpy()[skinny].sum()):,} calls, {self_ns.sum() / window:.0%} {where} in all "
                f"though no one shape holds {REMEDY_SHARE:.0%}")
        decode = decode_loop() if max(m) <= SKINNY_DIM else None
        if decode is not None and decode.cached:
            heaviest = int(g.row.to_numpy()[skinny][np.argmax(self_ns)])
            out.append(f"{said}: skinny GEMMs run far below GEMM throughput, {decode.phrase()}: "
                       f"{decode_remedy(weight_type(heaviest))}")
        else:
            out.append(f"{said}: skinny GEMMs run far below GEMM throughput; batch them (more rows a call: several "
                       "requests or sequences at once, or a fixed larger batch)")
    return out


def _cell_decoder(asked: list[Decoding | None], decode_loop: Callable[[], Decoding | None]) -> Decoding | None:
    """The steps' recurrent decoder (a cell loop fed its chosen output), asking ``decode_loop`` once."""
    if not asked:
        asked.append(decode_loop())
    return asked[0] if asked[0] is not None and asked[0].via else None


def _span(dim: str, values: list[int]) -> str:
    return f"{dim}={values[0]}" if min(values) == max(values) else f"{dim} from {min(values)} to {max(values)}"


def _skinny_gemm_remedies(ops: pd.DataFrame, per_step: bool,
                          recurrent_op_around: Callable[[int], str] = lambda i: "",
                          decode_loop: Callable[[], Decoding | None] = lambda: None,
                          weight_type: Callable[[int], str | None] = lambda i: None, summed: str = "") -> list[str]:
    """The skinny-GEMM remedy of each qualifying row; ``recurrent_op_around(i)`` names the recurrent op
    enclosing most of row ``i``'s time ("" when none), ``decode_loop()`` the steps' autoregressive
    decoding (``tracekit.analyze.decoding``), which change what can be batched, and ``weight_type(i)``
    the element type of row ``i``'s second factor (None when not recorded); ``summed`` follows the
    share where it is of threads' time summed past the window (", summed over 4 threads")."""
    out = []
    decode: list[Decoding | None] = []  # asked once, and only for a skinny M
    where = ("of the steps" if per_step else "of the trace") + summed
    for i, r in enumerate(ops.itertuples()):
        if r.share < REMEDY_SHARE or not _is_gemm_op(r.name):
            continue
        dims = _gemm_dims(r.name, r.shapes)
        if dims is None:
            continue
        m, k, n = dims
        if min(k, m) > SKINNY_DIM:
            continue
        which = f"K={k}" if k <= SKINNY_DIM else f"M={m}"
        said = (f"{r.name} {r.shapes} {r.calls:,} calls, {r.share:.0%} {where}: a skinny GEMM ({which}, "
                f"{m}x{k} by {k}x{n}) runs far below GEMM throughput")
        recurrent = recurrent_op_around(i) if m <= SKINNY_DIM else ""
        if RECURRENT_LAYER_OPS.match(recurrent):
            out.append(f"{said}, once per timestep inside {recurrent} (the recurrent layer's own loop): M is the "
                       f"batch, and the hidden-state GEMM cannot be batched across timesteps; only more "
                       f"sequences at once (a larger batch) widen it")
        elif recurrent and (found := _cell_decoder(decode, decode_loop)) is not None:
            out.append(f"{said}, once per timestep inside {recurrent}, {found.phrase()}: {decode_remedy(weight_type(i))}")
        elif recurrent:
            layer = {"lstm": "nn.LSTM", "gru": "nn.GRU"}.get(recurrent[6:-5], "nn.RNN")
            out.append(f"{said}, once per timestep inside {recurrent}: the recurrent layer ({layer}) makes "
                       f"the input GEMMs of all timesteps one; the hidden-state GEMM stays per timestep, with M the "
                       f"batch")
        else:
            if m <= SKINNY_DIM and not decode:
                decode.append(decode_loop())
            if m <= SKINNY_DIM and decode[0] is not None and decode[0].cached:
                # Tokens of one sequence cannot be batched: each needs the one before.
                out.append(f"{said}, {decode[0].phrase()}: {decode_remedy(weight_type(i))}")
            else:
                out.append(f"{said}; batch it (across timesteps, or several small GEMMs into one)")
    return out


# Their self time is the GEMM (or GEMV): leaf ops that call BLAS / oneDNN themselves.
# _addmm_activation is addmm with the bias and ReLU/GELU in its epilogue (nn.Linear + activation
# in inference, the fused transformer layer's feed-forward).
GEMM_FLOP_OPS = ("aten::mm", "aten::addmm", "aten::_addmm_activation", "aten::bmm", "aten::baddbmm", "aten::addbmm",
                 "aten::mv", "aten::addmv")


def gemm_flops(name: str, shapes: str) -> float | None:
    """Floating-point operations of one call of a GEMM op (2 x M x K x N, times the batch of a bmm;
    2 x M x N for a matrix-vector product) from its input dims; None for other ops (``linear`` and
    ``matmul`` are wrappers: their GEMM is a child op's self time), when the dims are not recorded or
    do not fit together."""
    shape = gemm_shape(name, shapes)
    return 2.0 * float(np.prod(shape)) if shape else None


def gemm_shape(name: str, shapes: str) -> tuple[int, int, int, int] | None:
    """(batch, M, K, N) of one call of a GEMM op from its input dims (batch 1 but for a bmm; N 1 for a
    matrix-vector product); its output holds batch x M x N elements. None as for ``gemm_flops``."""
    if name not in GEMM_FLOP_OPS:
        return None
    try:
        dims = json.loads(shapes) if shapes else []
    except ValueError:
        return None
    if not isinstance(dims, list) or not all(isinstance(d, list) for d in dims):
        return None
    if name in ("aten::bmm", "aten::baddbmm", "aten::addbmm"):
        # bmm(b1, b2); baddbmm(self, b1, b2) and addbmm(self, b1, b2): self may be broadcast or empty
        dims = dims[1:3] if name != "aten::bmm" else dims[:2]
        if len(dims) != 2 or len(dims[0]) != 3 or len(dims[1]) != 3 or dims[0][2] != dims[1][1] or dims[0][0] != dims[1][0]:
            return None
        (b, m, k), (_, _, n) = dims
        return int(b), int(m), int(k), int(n)
    if name in ("aten::mv", "aten::addmv"):
        # mv(mat [M, N], vec [N]); addmv(self [M], mat, vec)
        dims = dims[1:3] if name == "aten::addmv" else dims[:2]
        if len(dims) != 2 or len(dims[0]) != 2 or len(dims[1]) != 1 or dims[0][1] != dims[1][0]:
            return None
        return 1, int(dims[0][0]), int(dims[0][1]), 1
    mkn = _gemm_dims(name, shapes)
    return (1, *mkn) if mkn else None


def _gemm_dims(name: str, shapes: str) -> tuple[int, int, int] | None:
    """(M, K, N) of a 2-D GEMM op from its input dims; None when they are not recorded or not 2-D."""
    try:
        dims = [d for d in json.loads(shapes) if d] if shapes else []
    except ValueError:
        return None
    if name in ("aten::addmm", "aten::_addmm_activation") and len(dims) >= 3:
        dims = dims[1:3]
    elif name == "aten::linear" and len(dims) >= 2 and len(dims[0]) >= 2 and len(dims[1]) == 2:
        # linear(x [.., M, K], weight [N, K])
        return int(np.prod(dims[0][:-1])), int(dims[0][-1]), int(dims[1][0])
    if len(dims) < 2 or len(dims[0]) != 2 or len(dims[1]) != 2:
        return None
    (m, k), (k2, n) = dims[0], dims[1]
    return (int(m), int(k), int(n)) if k == k2 else None
