"""Numpy views of the event table that every analysis reads (built once per table).

Analyses work on plain arrays: kind codes, ns times, row links. Dictionary columns keep their
codes; names are decoded only for the few rows a report shows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import cached_property, wraps
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from tracekit import schema
from tracekit.analyze import intervals
from tracekit.ingest.columns import distinct, kind_codes, validity_mask, values_view
from tracekit.ingest.links import byte_mask, member_mask, nearest_ancestor

KIND_INDEX = schema.KIND_CODES
# autograd's range around each backward node it runs: "autograd::engine::evaluate_function: AddmmBackward0".
BACKWARD_NODE = re.compile(r"^autograd::engine::evaluate_function: ")
GPU_BUSY_KINDS = schema.GPU_BUSY_KINDS  # analyses import it from here
# PyTorch's per-timestep recurrent cells (nn.LSTMCell, nn.GRUCell, nn.RNNCell), which a Python loop calls.
RNN_CELL_OPS = ("aten::lstm_cell", "aten::_thnn_fused_lstm_cell", "aten::gru_cell", "aten::_thnn_fused_gru_cell",
                "aten::rnn_tanh_cell", "aten::rnn_relu_cell")

# Views and metadata: no arithmetic however long a call takes (autograd's anomaly mode stores a Python
# traceback inside each forward op's own time, aten::t's included).
VIEW_OPS = frozenset(f"aten::{n}" for n in (
    "t", "transpose", "permute", "view", "_unsafe_view", "as_strided", "expand", "reshape", "unsqueeze", "squeeze",
    "flatten", "unflatten", "slice", "select", "narrow", "split", "chunk", "unbind", "detach", "alias", "numpy_T"))

LAUNCH_SIDE_KINDS = ("runtime_api", "driver_api")

# The kinds of row whose ``args`` an analysis reads: cpu_op (a copy's dtypes in classify, an op's
# Input Dims in top_ops), gpu_sync (Kineto's CUDA-event waits in critical_path) and gpu_memcpy (nsys's
# memory kinds in copies). The analysis
# commands read traces with ``load(path, args_of_kinds=ARGS_READ_OF_KINDS)``; an analysis that reads
# args of another kind adds it here (tests/test_args_projection.py compares their documents).
ARGS_READ_OF_KINDS: frozenset[str] = frozenset({"cpu_op", "gpu_sync", "gpu_memcpy"})
# The columns the analyses read (the Frame's, and those read from the table directly: correlation
# ids, args, process names, copies' bytes). The analysis commands read a tracekit Parquet file or an nsys export
# with ``load(path, columns=COLUMNS_READ)``, the others left null; an analysis that reads another column
# adds it here (tests/test_args_projection.py compares the documents of every command).
COLUMNS_READ: frozenset[str] = frozenset({
    "kind", "name", "start_ns", "dur_ns", "pid", "tid", "process_name", "device_id", "stream_id", "parent", "depth",
    "step", "launch_row", "op_row", "correlation_id", "args", "thread_name", "bytes"})


def _int(table: pa.Table, name: str, null: int = -1) -> np.ndarray:
    return _int64(table.column(name), null)


def _int64(column: pa.ChunkedArray, null: int = -1) -> np.ndarray:
    """An integer (or dictionary: its codes) column as int64, nulls as ``null``, read-only. An int64
    column of one chunk without nulls is not copied (a view of its buffer), nor is one of nulls only
    (a broadcast of ``null``: absent GPU columns of a CPU trace take no memory); other columns are
    read chunk by chunk into one array, nulls set from the validity bitmap. (Not ``pc.fill_null``:
    its first calls in a process cost 0.1-0.17 s each on a 5M-row column, against 0.02 s here.)"""
    if len(column) and column.null_count == len(column):
        return np.broadcast_to(np.int64(null), len(column))
    if column.num_chunks == 1:
        chunk = column.chunk(0)
        data = chunk.indices if pa.types.is_dictionary(chunk.type) else chunk
        values = values_view(data)
        if not data.null_count and values.dtype == np.int64:
            return values
        out = np.where(validity_mask(data), values, np.int64(null)) if data.null_count else values.astype(np.int64)
        out.flags.writeable = False
        return out
    out = np.empty(len(column), np.int64)
    at = 0
    for chunk in column.chunks:
        data = chunk.indices if pa.types.is_dictionary(chunk.type) else chunk
        values = values_view(data)
        part = out[at:at + values.size]
        part[:] = values
        if data.null_count:
            part[~validity_mask(data)] = null
        at += values.size
    out.flags.writeable = False
    return out


_LAST: list[Frame] = []
_T = TypeVar("_T")


def per_frame(compute: Callable[[Frame], _T]) -> Callable[[Frame], _T]:
    """``compute(frame)`` run once per frame (``Frame.memo``, keyed by the function's name): for what
    several analyses of one report read."""
    key = f"{compute.__module__}.{compute.__qualname__}"

    @wraps(compute)
    def once(frame: Frame) -> _T:
        return frame.memo(key, lambda: compute(frame))
    return once


def frame_of(table: pa.Table) -> Frame:
    """The Frame of a table, reused when several analyses run on the same table object in turn."""
    if _LAST and _LAST[0].table is table:
        return _LAST[0]
    frame = Frame(table)
    _LAST[:] = [frame]
    return frame


@dataclass
class Frame:
    """Columns of one trace's event table as numpy arrays (null ids are -1)."""

    table: pa.Table
    kind: np.ndarray = field(init=False)
    start: np.ndarray = field(init=False)
    dur: np.ndarray = field(init=False)
    end: np.ndarray = field(init=False)
    name_code: np.ndarray = field(init=False)
    names: list[str] = field(init=False)
    _masks: dict[tuple[str, ...], np.ndarray] = field(init=False, default_factory=dict, repr=False)
    _rows: dict[tuple[str, ...], np.ndarray] = field(init=False, default_factory=dict, repr=False)
    _memo: dict[str, Any] = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        t = self.table
        self.kind = kind_codes(t.column("kind"))
        self.start = _int(t, "start_ns", 0)
        self.dur = np.maximum(_int(t, "dur_ns", 0), 0)
        self.end = self.start + self.dur
        self.name_code, self.names = dictionary_codes(t.column("name"))

    def __len__(self) -> int:
        return int(self.kind.shape[0])

    def mask(self, *kinds: str) -> np.ndarray:
        """Rows of these kinds, as a read-only boolean array (cached: a report asks for the same
        masks dozens of times)."""
        key = tuple(sorted(set(kinds)))
        found = self._masks.get(key)
        if found is None:
            found = byte_mask(self.kind, [KIND_INDEX[k] for k in key])
            found.flags.writeable = False
            self._masks[key] = found
        return found

    def rows(self, *kinds: str) -> np.ndarray:
        """Row indices of these kinds, read-only (cached like ``mask``)."""
        key = tuple(sorted(set(kinds)))
        found = self._rows.get(key)
        if found is None:
            found = np.flatnonzero(self.mask(*key))
            found.flags.writeable = False
            self._rows[key] = found
        return found

    def memo(self, key: str, compute: Callable[[], _T]) -> _T:
        """``compute()``, run once per frame: a finding several analyses read (the verdict, the gap
        attribution and the GPU measures all ask for the launch loops)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def name(self, row: int) -> str:
        code = int(self.name_code[row])
        return self.names[code] if code >= 0 else ""

    def name_mask(self, pattern: re.Pattern[str]) -> np.ndarray:
        """Per row of the whole table: whether its name matches ``pattern`` (searched once per name)."""
        return member_mask(self.name_code, [c for c, n in enumerate(self.names) if pattern.search(n)])

    def named(self, rows: np.ndarray, pattern: re.Pattern[str]) -> np.ndarray:
        """Per row of ``rows``: whether its name matches ``pattern`` (searched once per distinct name)."""
        codes = self.name_code[rows]
        return member_mask(codes, [c for c in distinct(codes).tolist() if c >= 0 and pattern.search(self.names[c])])

    @cached_property
    def parent(self) -> np.ndarray:
        return _int(self.table, "parent")

    @cached_property
    def op_parent(self) -> np.ndarray:
        """Each cpu_op row's nearest enclosing cpu_op (-1 for top-level ops and for other rows). Not
        ``parent``: a range can sit between an op and the ops it calls (torch.compile's ``## Call
        CompiledFxGraph`` between ``CompiledFunction`` and the graph's ``aten::addmm``)."""
        out = np.full(len(self), -1, np.int64)
        ops = self.rows("cpu_op")
        out[ops] = nearest_ancestor(self.parent, ops, self.mask("cpu_op"))
        out.flags.writeable = False
        return out

    @cached_property
    def launch_row(self) -> np.ndarray:
        return _int(self.table, "launch_row")

    @cached_property
    def op_row(self) -> np.ndarray:
        return _int(self.table, "op_row")

    @cached_property
    def step(self) -> np.ndarray:
        return _int(self.table, "step")

    @cached_property
    def device(self) -> np.ndarray:
        return _int(self.table, "device_id")

    @cached_property
    def stream(self) -> np.ndarray:
        return _int(self.table, "stream_id")

    @cached_property
    def pid(self) -> np.ndarray:
        return _int(self.table, "pid")

    @cached_property
    def tid(self) -> np.ndarray:
        return _int(self.table, "tid")

    @cached_property
    def depth(self) -> np.ndarray:
        return _int(self.table, "depth", 0)

    @cached_property
    def thread_key(self) -> np.ndarray:
        """One int64 per host thread (pid, tid), for grouping."""
        key = self.pid << 32
        tid = self.tid
        # In place where thread ids fit 32 bits (each fresh million-row array costs its page faults).
        key ^= tid if tid.size == 0 or (int(tid.min()) >= 0 and int(tid.max()) <= 0xFFFFFFFF) else tid & 0xFFFFFFFF
        return key


def ops_in_steps(frame: Frame, used: list[int] | None) -> np.ndarray:
    """Every op row of the steps ``used`` (every op row when None)."""
    ops = frame.rows("cpu_op")
    return ops[member_mask(frame.step[ops], used)] if used is not None else ops


def calls_in_steps(frame: Frame, names: Collection[str], used: list[int] | None) -> tuple[np.ndarray, np.ndarray]:
    """The op rows named one of ``names`` and the step rows, both of the steps ``used`` (every row when
    None): what a rule that reads some ops' share of the steps' time starts from."""
    wanted = set(names)  # a list of many names (every backward node's) is searched once per name otherwise
    codes = [c for c, n in enumerate(frame.names) if n in wanted]
    ops = frame.rows("cpu_op")
    calls = ops[member_mask(frame.name_code[ops], codes)] if codes else ops[:0]
    if used is not None:
        calls = calls[member_mask(frame.step[calls], used)]
    return calls, step_rows(frame, used)


def launched_kernel_time(frame: Frame, calls: np.ndarray, gpu: np.ndarray) -> int:
    """GPU time of the activities among ``gpu`` (rows) that the op rows ``calls``, or ops inside them,
    launched: what those calls cost on a GPU trace, where their host time is launching."""
    launcher = frame.op_row[gpu]
    linked = launcher >= 0
    wanted = np.zeros(len(frame), bool)
    wanted[calls] = True
    ops = launcher[linked]
    mine = wanted[ops] | (nearest_ancestor(frame.parent, ops, wanted) >= 0)
    return int(frame.dur[gpu[linked][mine]].sum())


def wall_time(frame: Frame, rows: np.ndarray) -> int:
    """The time during which at least one of ``rows`` runs: their durations' sum where they run one
    after another (one thread's outermost calls), less where calls on several threads overlap (a
    ``torch.jit.fork`` branch beside the main thread). A share of the step is of this, not of the sum,
    which on such a trace exceeds the step."""
    return intervals.total(frame.start[rows], frame.end[rows]) if rows.size else 0


def step_rows(frame: Frame, used: list[int] | None) -> np.ndarray:
    """The step rows of the steps ``used`` (every step row when None): the time a rule's share is of."""
    steps = frame.rows("step")
    return steps[member_mask(frame.step[steps], used)] if used is not None else steps


def dictionary_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Codes (-1 for null) and dictionary values of a dictionary column, over all chunks."""
    col = column.unify_dictionaries() if column.num_chunks > 1 else column
    if col.num_chunks == 0:
        return np.zeros(0, np.int64), []
    values = col.chunk(0).dictionary.to_pylist()
    return _int64(col), values
