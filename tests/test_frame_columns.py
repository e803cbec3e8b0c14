"""The Frame reads integer and dictionary columns from their buffers, chunk by chunk: the same int64
values as pyarrow's own fill_null + to_numpy, for every width, with nulls, sliced chunks and
several chunks (a Parquet file gives one chunk per row group)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.analyze.frame import _int64, dictionary_codes

TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]


def _reference(column: pa.ChunkedArray, null: int) -> np.ndarray:
    if column.null_count:
        column = column.fill_null(null)
    return column.to_numpy().astype(np.int64, copy=False)


chunk_values = st.lists(st.one_of(st.none(), st.integers(-128, 127)), max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.lists(chunk_values, max_size=4), st.sampled_from(TYPES), st.integers(0, 2), st.integers(-9, 9))
def test_int64_is_fill_null_then_to_numpy(chunks: list[list[int | None]], dtype: pa.DataType, cut: int, null: int):
    arrays = [pa.array(c, dtype) for c in chunks]
    arrays = [a.slice(cut, max(len(a) - 2 * cut, 0)) for a in arrays]  # chunks that start at an offset
    column = pa.chunked_array(arrays, dtype)
    got = _int64(column, null)
    assert got.dtype == np.int64
    assert np.array_equal(got, _reference(column, null))


def test_one_int64_chunk_without_nulls_is_not_copied():
    values = np.arange(10, dtype=np.int64)
    column = pa.chunked_array([pa.array(values)])
    got = _int64(column)
    assert np.array_equal(got, values) and not got.flags.writeable  # a view of the Arrow buffer


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), st.sampled_from("abcde")), max_size=20), min_size=1, max_size=4))
def test_dictionary_codes_index_the_unified_dictionary(chunks: list[list[str | None]]):
    column = pa.chunked_array([pa.array(c, pa.string()).dictionary_encode() for c in chunks])
    codes, values = dictionary_codes(column)
    want = [v for c in chunks for v in c]
    assert [None if k < 0 else values[k] for k in codes.tolist()] == want
