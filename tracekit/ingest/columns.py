"""Columns of the event table: Arrow arrays from numpy, the trace's metadata, and the final table in
schema order. Shared by every ingester."""

from __future__ import annotations

import hashlib
import json
import mmap
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tracekit import _version, schema
from tracekit.ingest.links import Links


def _numpy_dtype(t: pa.DataType) -> np.dtype:
    """The numpy dtype of an integer Arrow type (pyarrow's to_pandas_dtype would import pandas: slow start-up)."""
    if pa.types.is_signed_integer(t):
        return np.dtype(f"int{t.bit_width}")
    if pa.types.is_unsigned_integer(t):
        return np.dtype(f"uint{t.bit_width}")
    return np.dtype(t.to_pandas_dtype())


# Arrays are built from their buffers: pyarrow's pa.array imports pandas on its first call, even for
# numpy input, and that import is most of `tracekit info`'s start-up (0.25 s of ~0.9 s).
def numeric_array(values: np.ndarray, dtype: pa.DataType, mask: np.ndarray | None = None) -> pa.Array:
    """Arrow array of a fixed-width type over numpy values (no copy when the dtype already matches);
    rows where ``mask`` is True are null."""
    data = np.ascontiguousarray(values, _numpy_dtype(dtype))
    validity, nulls = None, 0
    if mask is not None:
        nulls = int(np.count_nonzero(mask))
        if nulls:
            validity = pa.py_buffer(np.packbits(~np.asarray(mask, bool), bitorder="little"))
    return pa.Array.from_buffers(dtype, data.size, [validity, pa.py_buffer(data)], null_count=nulls)


def null_array(n: int, dtype: pa.DataType) -> pa.Array:
    """``n`` nulls of ``dtype`` (fixed width, string or dictionary of either) over a read-only
    anonymous mapping of zeros, which the OS fills with pages only when written, so never: an absent
    column costs no resident memory. ``pa.nulls`` writes its zeros, and on CPU-only traces the
    absent GPU columns were 35-55% of the table."""
    if isinstance(dtype, pa.BaseExtensionType):  # arrow.json (the args)
        return pa.ExtensionArray.from_storage(dtype, null_array(n, dtype.storage_type))
    if pa.types.is_dictionary(dtype):
        return pa.DictionaryArray.from_arrays(null_array(n, dtype.index_type), null_array(0, dtype.value_type))
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        width = 8 if pa.types.is_large_string(dtype) else 4
        zeros = _zero_buffer(max((n + 1) * width, (n + 7) // 8))
        return pa.Array.from_buffers(dtype, n, [zeros, zeros, pa.py_buffer(b"")], null_count=n)
    if not (pa.types.is_integer(dtype) or pa.types.is_floating(dtype)):
        return pa.nulls(n, dtype)
    zeros = _zero_buffer(max(n * dtype.bit_width // 8, (n + 7) // 8))
    return pa.Array.from_buffers(dtype, n, [zeros, zeros], null_count=n)


# The largest zero mapping made so far, sliced for every null column: one mapping, not one per
# column per trace (a process may hold thousands of traces; mappings per process are limited).
_ZEROS: list[pa.Buffer] = []


def _zero_buffer(size: int) -> pa.Buffer:
    if size < 1 << 20:  # small: not worth a mapping
        return pa.py_buffer(bytes(size))
    zeros = _ZEROS[0] if _ZEROS else None
    if zeros is None or zeros.size < size:
        # Private: a shared anonymous mapping is shmem, and reading it allocates pages.
        zeros = pa.py_buffer(mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=mmap.PROT_READ))
        _ZEROS[:] = [zeros]
    return zeros.slice(0, size)


def validity_mask(array: pa.Array) -> np.ndarray:
    """True where an array (its own validity bitmap, not a dictionary's) holds a value."""
    n = len(array)
    bitmap = array.buffers()[0]
    if not array.null_count or bitmap is None:
        return np.ones(n, bool)
    bits = np.unpackbits(np.frombuffer(bitmap, np.uint8), bitorder="little")
    return bits[array.offset:array.offset + n].astype(bool)


def values_view(array: pa.Array) -> np.ndarray:
    """The values buffer of a fixed-width array as a read-only numpy view (null slots hold whatever
    the buffer holds)."""
    n = len(array)
    if n == 0:
        return np.zeros(0, _numpy_dtype(array.type))
    view = np.frombuffer(array.buffers()[1], _numpy_dtype(array.type), n, array.offset * array.type.byte_width)
    view.flags.writeable = False  # Arrow arrays are immutable; writing here would change the table
    return view


def values_and_validity(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A fixed-width column (a dictionary column: its codes) as numpy values and a validity mask,
    read from its buffers: pyarrow.compute's import costs 40 ms of a short command's start-up.
    Dictionary codes index the first chunk's dictionary; unify the column's dictionaries first."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    values, valid = [], []
    for chunk in chunks:
        data = chunk.indices if pa.types.is_dictionary(chunk.type) else chunk
        values.append(values_view(data))
        valid.append(validity_mask(data))
    if not values:
        dtype = column.type.index_type if pa.types.is_dictionary(column.type) else column.type
        return np.zeros(0, _numpy_dtype(dtype)), np.zeros(0, bool)
    return np.concatenate(values), np.concatenate(valid)


def codes_and_values(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """A dictionary column's codes as int64 (-1 for null) and its values as text, over all chunks."""
    column = column.unify_dictionaries() if column.num_chunks > 1 else column
    codes, valid = values_and_validity(column)
    values = [str(v) for v in column.chunk(0).dictionary.to_pylist()] if column.num_chunks else []
    return np.where(valid, codes.astype(np.int64), -1), values


def int64_or(column: pa.ChunkedArray, null: int) -> np.ndarray:
    """A fixed-width column as int64, nulls as ``null``."""
    values, valid = values_and_validity(column)
    return np.where(valid, values.astype(np.int64), null)


def replaced(table: pa.Table, name: str, array: pa.Array) -> pa.Table:
    """The table with column ``name`` replaced by ``array``, cast to the schema's type."""
    index = table.schema.get_field_index(name)
    field = table.schema.field(index)
    return table.set_column(index, field, array.cast(field.type) if array.type != field.type else array)


def kind_codes(column: pa.ChunkedArray) -> np.ndarray:
    """``schema.KIND_CODES`` of every row of a ``kind`` column, whatever its dictionary's order;
    null and unknown kinds are ``other``."""
    column = column.unify_dictionaries() if column.num_chunks > 1 else column
    values = column.chunk(0).dictionary.to_pylist() if column.num_chunks else []
    codes, valid = values_and_validity(column)
    other = schema.KIND_CODES["other"]
    remap = np.array([schema.KIND_CODES.get(v, other) for v in values] + [other], np.int8)
    return remap[np.where(valid, codes, len(values))]


def take_strings(array: pa.Array, index: np.ndarray) -> pa.Array:
    """``array.take(index)`` for a (large_)string array, gathered from its buffers with numpy: the
    same array, without importing pyarrow.compute (40 ms of a short command's start-up)."""
    large = pa.types.is_large_string(array.type)
    offsets_type = np.int64 if large else np.int32
    n = len(array)
    _, data_buffer_offsets, data_buffer = array.buffers()
    offsets = np.frombuffer(data_buffer_offsets, offsets_type, n + 1, array.offset * np.dtype(offsets_type).itemsize) \
        if data_buffer_offsets is not None else np.zeros(n + 1, offsets_type)
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    index = np.asarray(index, np.int64)
    starts = offsets[index].astype(np.int64)
    lengths = offsets[index + 1].astype(np.int64) - starts
    new_offsets = np.zeros(index.size + 1, np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    out = np.empty(int(new_offsets[-1]), np.uint8)
    # Byte positions are gathered a block of rows at a time (~16 MB of bytes) to bound the temporaries.
    cuts = np.searchsorted(new_offsets, np.arange(0, out.size + 1, 16 << 20), side="right") - 1
    bounds = np.concatenate([[0], cuts, [index.size]])  # ascending: drop repeats
    bounds = bounds[np.concatenate([[True], bounds[1:] != bounds[:-1]])]
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        first = int(new_offsets[a])
        total = int(new_offsets[b]) - first
        shift = np.repeat(starts[a:b] - (new_offsets[a:b] - first), lengths[a:b])
        out[first:first + total] = data[shift + np.arange(total)]
    if large:
        offsets_out = new_offsets
    elif out.size < 2**31:
        offsets_out = new_offsets.astype(np.int32)
    else:
        raise OverflowError("string data over 2 GiB in a string (not large_string) array")
    validity, nulls = None, 0
    if array.null_count:
        kept = validity_mask(array)[index]
        nulls = int(index.size - np.count_nonzero(kept))
        validity = pa.py_buffer(np.packbits(kept, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(array.type, index.size, [validity, pa.py_buffer(offsets_out), pa.py_buffer(out)],
                                 null_count=nulls)


def string_array(values: Sequence[str | None], dtype: pa.DataType | None = None) -> pa.Array:
    """Arrow string (or large_string) array of Python strings; None is null."""
    dtype = dtype or pa.string()
    try:
        encoded = [b"" if v is None else v.encode("utf-8") for v in values]
    except UnicodeEncodeError:  # lone surrogates: let pyarrow report them as it always has
        return pa.array(values, dtype)
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    large = pa.types.is_large_string(dtype)
    if not large and int(lengths.sum()) >= 2**31:
        return pa.array(values, dtype)
    offsets = np.zeros(len(encoded) + 1, np.int64 if large else np.int32)
    np.cumsum(lengths, out=offsets[1:])
    missing = np.fromiter((v is None for v in values), bool, len(encoded))
    nulls = int(np.count_nonzero(missing))
    validity = pa.py_buffer(np.packbits(~missing, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(dtype, len(encoded), [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))],
                                 null_count=nulls)


KIND_DICTIONARY = string_array(list(schema.KINDS))


def distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` for integer columns, without sorting every row (as ``factorize``).
    Use it for sorted distinct ids on any path that start-up counts (``info``)."""
    values = np.asarray(values).reshape(-1)
    if values.size == 0:
        return values.copy()
    lo, hi = int(values.min()), int(values.max())
    if hi - lo < max(4 * values.size, 1 << 16):
        present = np.zeros(hi - lo + 1, bool)
        present[values - lo] = True
        return (np.flatnonzero(present) + lo).astype(values.dtype, copy=False)
    starts = np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]]))
    ordered = np.sort(values[starts])  # not np.unique: numpy 2.4's imports numpy.ma (15 ms of start-up)
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])]


def stable_order(codes: np.ndarray) -> np.ndarray:
    """``np.argsort(codes, kind="stable")`` for integer codes: codes in [0, 2**16) sort as uint16,
    which numpy sorts by radix (6x faster than int64's merge sort on a million rows)."""
    codes = np.asarray(codes)
    if codes.size and codes.dtype.kind in "iu" and codes.itemsize > 2 and 0 <= int(codes.min()) and int(codes.max()) < 1 << 16:
        codes = codes.astype(np.uint16)
    return np.argsort(codes, kind="stable")


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` (sorted distinct values, each row's code) for
    integer columns, without sorting every row: ids in a small range are counted into a table, and
    other columns are cut into runs of equal values first (a thread's rows share its id)."""
    values = np.asarray(values).reshape(-1)
    if values.size == 0:
        return values.astype(np.int64), np.zeros(0, np.int64)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo < max(4 * values.size, 1 << 16):
        present = np.zeros(hi - lo + 1, bool)
        shifted = values - lo
        present[shifted] = True
        distinct = np.flatnonzero(present)
        code_of = np.cumsum(present, dtype=np.int64) - 1
        return (distinct + lo).astype(values.dtype, copy=False), code_of[shifted]
    starts = np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]]))
    runs = values[starts]
    # Not np.unique(return_inverse=True): on the 183k thread-id runs of the 1M-event benchmark trace it
    # took 20-26 ms, a sort and a binary search 3 ms (and np.unique imports numpy.ma: 15 ms of start-up).
    ordered = np.sort(runs)
    distinct = ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])]
    run_codes = np.searchsorted(distinct, runs)
    return distinct, np.repeat(run_codes, np.diff(np.append(starts, values.size)))


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dir_sha256(files: list[Path]) -> str:
    """sha256 over the sorted files of a trace directory."""
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.name.encode())
        h.update(bytes.fromhex(file_sha256(f)))
    return h.hexdigest()


def dictionary(codes: np.ndarray, values: list[str] | pa.Array, index_type: pa.DataType | None = None) -> pa.DictionaryArray:
    """Dictionary array from integer codes (negative = null) and their values."""
    index_type = index_type or pa.int32()
    codes = np.asarray(codes)
    if not isinstance(values, pa.Array) and len(set(values)) != len(values):
        # Several codes can carry the same label (e.g. thread "0" in many processes): keep each
        # value once, so the dictionary survives a Parquet round trip unchanged.
        first: dict[str, int] = {}
        remap = np.array([first.setdefault(v, len(first)) for v in values] + [-1], np.int64)
        codes = remap[np.where(codes < 0, len(values), codes)]
        values = list(first)
    mask = codes < 0
    # Without nulls the codes are the indices as they are (no copy when the width matches).
    idx = numeric_array(np.where(mask, 0, codes), index_type, mask) if mask.any() else numeric_array(codes, index_type)
    vals = values if isinstance(values, pa.Array) else string_array(values)
    return pa.DictionaryArray.from_arrays(idx, vals)


def nullable(values: np.ndarray, null: np.ndarray | int, dtype: pa.DataType) -> pa.Array:
    """Arrow array from numpy values where ``values == null`` (or a boolean mask) marks nulls."""
    mask = null if isinstance(null, np.ndarray) and null.dtype == bool else values == null
    if mask.size and mask.all():
        return null_array(mask.size, dtype)
    return numeric_array(values, dtype, mask)


def json_args(offsets: np.ndarray, data: Any) -> pa.Array:
    """The args column from int64 offsets and UTF-8 JSON bytes (a pa.Buffer or any object with the
    buffer protocol, kept without a copy); empty entries become null."""
    n = offsets.size - 1
    valid = offsets[1:] != offsets[:-1]  # not np.diff: no int64 temporary the size of the column
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if not valid.all() else None
    storage = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), data if isinstance(data, pa.Buffer) else pa.py_buffer(data), bitmap)
    return pa.ExtensionArray.from_storage(schema.ARGS_TYPE, storage)


# json.dumps with options builds a new encoder per call: a tenth of a per-event ingest loop.
ARGS_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


def json_args_from_objects(objs: Sequence[Mapping[str, Any] | None]) -> pa.Array:
    """The args column from Python mappings (empty ones are null)."""
    return json_args_from_texts([ARGS_ENCODER.encode(o) if o else None for o in objs])


def json_args_from_texts(texts: Sequence[str | None]) -> pa.Array:
    """The args column from JSON texts (None is null)."""
    return pa.ExtensionArray.from_storage(schema.ARGS_TYPE, string_array(texts, pa.large_string()))


@dataclass
class TraceMeta:
    """Trace-level facts, stored in the table's metadata."""

    source: str
    source_file: str
    source_sha256: str
    source_format: str
    capture_start_ns: int | None = None
    profiler_version: str = ""
    framework_version: str = ""
    devices: list[dict[str, object]] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def trace_id(self) -> str:
        return self.source_sha256[:16]

    def to_metadata(self) -> dict[str, str]:
        return {
            schema.META_SCHEMA_VERSION: schema.SCHEMA_VERSION,
            schema.META_SOURCE: self.source,
            schema.META_TRACE_ID: self.trace_id,
            schema.META_SOURCE_FILE: self.source_file,
            schema.META_SOURCE_SHA256: self.source_sha256,
            schema.META_SOURCE_FORMAT: self.source_format,
            schema.META_CAPTURE_START_NS: "" if self.capture_start_ns is None else str(self.capture_start_ns),
            schema.META_PROFILER_VERSION: self.profiler_version,
            schema.META_FRAMEWORK_VERSION: self.framework_version,
            schema.META_DEVICES_JSON: json.dumps(self.devices, sort_keys=True, default=str),
            schema.META_TRACE_META_JSON: json.dumps(self.extra, sort_keys=True, default=str),
            schema.META_TRACEKIT_VERSION: _version.__version__,
        }


def trace_extra(table: pa.Table) -> dict[str, Any]:
    """The reader's other trace-level facts (``TraceMeta.extra``) of a table; {} when absent or unreadable."""
    raw = (table.schema.metadata or {}).get(schema.META_TRACE_META_JSON.encode())
    try:
        extra = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return extra if isinstance(extra, dict) else {}


def with_extra(table: pa.Table, **facts: object) -> pa.Table:
    """The table with ``facts`` added to its reader's trace-level facts (``TraceMeta.extra``)."""
    metadata = dict(table.schema.metadata or {})
    metadata[schema.META_TRACE_META_JSON.encode()] = json.dumps({**trace_extra(table), **facts}, sort_keys=True,
                                                                default=str).encode()
    return table.replace_schema_metadata(metadata)


def assemble(n: int, columns: dict[str, pa.Array], meta: TraceMeta, links: Links,
             wanted: Collection[str] | None = None) -> pa.Table:
    """Put columns in schema order, fill absent ones with nulls, attach links and metadata.
    ``wanted``: the columns the caller reads (None: all); the others are nulls too."""
    cols = dict(columns)
    cols["trace_id"] = dictionary(np.zeros(n, np.int32), [meta.trace_id])
    cols["source"] = dictionary(np.zeros(n, np.int8), [meta.source], pa.int8())
    cols["parent"] = nullable(links.parent, -1, pa.int64())
    cols["depth"] = numeric_array(links.depth, pa.int16())
    cols["step"] = nullable(links.step, -1, pa.int32())
    cols["launch_row"] = nullable(links.launch_row, -1, pa.int64())
    cols["op_row"] = nullable(links.op_row, -1, pa.int64())
    arrays = []
    for col in schema.COLUMNS:
        arr = cols.get(col.name) if wanted is None or col.name in wanted else None
        if arr is None:
            arr = null_array(n, col.type)
        elif arr.type != col.type:
            arr = arr.cast(col.type)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=schema.ARROW_SCHEMA.with_metadata(meta.to_metadata()))
