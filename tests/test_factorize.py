"""``columns.factorize`` is ``np.unique(values, return_inverse=True)`` without the full sort: the
same distinct values and codes for any integer column, on both of its paths (small range, runs).
``columns.stable_order`` is a stable argsort, by radix where the codes fit 16 bits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.ingest.columns import distinct, factorize, stable_order

INT64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(-3, 40), INT64), max_size=200), st.integers(1, 5))
def test_factorize_is_np_unique(values: list[int], repeat: int) -> None:
    column = np.repeat(np.array(values, np.int64), repeat)  # runs of equal values, as threads give
    distinct, codes = factorize(column)
    want_distinct, want_codes = np.unique(column, return_inverse=True)
    assert distinct.dtype == want_distinct.dtype
    assert np.array_equal(distinct, want_distinct)
    assert np.array_equal(codes, want_codes.reshape(-1))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(-3, 40), INT64), max_size=200), st.integers(1, 5), st.booleans())
def test_distinct_is_np_unique(values: list[int], repeat: int, narrow: bool) -> None:
    column = np.repeat(np.array(values, np.int64), repeat)
    if narrow:
        column = column.astype(np.int32)  # wraps the wide values: still a valid int32 column
    got, want = distinct(column), np.unique(column)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_factorize_keeps_narrow_dtypes() -> None:
    distinct, codes = factorize(np.array([3, -1, 3, 7], np.int32))
    assert distinct.dtype == np.int32 and distinct.tolist() == [-1, 3, 7] and codes.tolist() == [1, 0, 1, 2]


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("sliced", [False, True])
def test_take_strings_is_arrow_take(large: bool, sliced: bool) -> None:
    # Oracle: pyarrow.compute's take, on strings with nulls, empty strings and multi-byte text.
    import pyarrow as pa
    import pyarrow.compute as pc

    from tracekit.ingest import columns

    rng = np.random.default_rng(7)
    words = ["", "a", "éλ", "x" * 300, None, "{\"k\": 1}"]
    values = [words[i] for i in rng.integers(0, len(words), 5000)]
    array = pa.array(values, pa.large_string() if large else pa.string())
    if sliced:
        array = array.slice(17, 4000)
    index = rng.integers(0, len(array), 9000)
    got = columns.take_strings(array, index)
    assert got.equals(pc.take(array, pa.array(index)))
    assert columns.take_strings(array, np.zeros(0, np.int64)).equals(pc.take(array, pa.array([], pa.int64())))


def test_values_and_validity_reads_sliced_chunks_with_nulls() -> None:
    import pyarrow as pa

    from tracekit.ingest import columns

    chunked = pa.chunked_array([pa.array([1, None, 3, 4], pa.int64()).slice(1), pa.array([None, 7], pa.int64())])
    values, valid = columns.values_and_validity(chunked)
    assert valid.tolist() == [False, True, True, False, True]
    assert values[valid].tolist() == [3, 4, 7]
    dictionary = pa.chunked_array([pa.array(["b", None, "a"]).dictionary_encode()])
    codes, valid = columns.values_and_validity(dictionary)
    assert valid.tolist() == [True, False, True]
    assert [dictionary.chunk(0).dictionary[c].as_py() for c in codes[valid]] == ["b", "a"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(-3, 40), st.integers(2**16 - 2, 2**16 + 1), INT64), max_size=200),
       st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint32]))
def test_stable_order_is_stable_argsort(values: list[int], dtype: type) -> None:
    """Equal codes keep their row order on both paths: codes that fit 16 bits (radix) and others
    (negative, 2**16 and above, or narrow types)."""
    codes = np.array(values, np.int64).astype(dtype)  # wraps out-of-range values: still valid codes
    assert np.array_equal(stable_order(codes), np.argsort(codes, kind="stable"))
