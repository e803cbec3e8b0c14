"""``columns.factorize`` is ``np.unique(values, return_inverse=True)`` without the full sort: the
same distinct values and codes for any integer column, on both of its paths (small range, runs)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.ingest.columns import factorize

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


def test_factorize_keeps_narrow_dtypes() -> None:
    distinct, codes = factorize(np.array([3, -1, 3, 7], np.int32))
    assert distinct.dtype == np.int32 and distinct.tolist() == [-1, 3, 7] and codes.tolist() == [1, 0, 1, 2]
