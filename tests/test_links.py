"""Fast paths of the ingest's link helpers against the numpy calls they replace: the nesting order
(one sort of a combined key, ties sorted apart) against a three-key lexsort, and the one-byte
column mask against np.isin. The digest tests check whole ingested tables."""

from __future__ import annotations

import numpy as np
import pytest

from tracekit.ingest.links import byte_mask, member_mask, nesting_order


@pytest.mark.parametrize("scale", [1, 10**15])  # 10**15: the combined key would overflow, so lexsort is used
def test_nesting_order_is_lexsort_by_group_start_and_end_descending(scale):
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(0, 300))
        group = rng.integers(-2, 4, n)
        start = rng.integers(0, 30, n) * scale  # few distinct starts: many ties
        end = start + rng.integers(0, 5, n) * scale
        assert np.array_equal(nesting_order(group, start, end), np.lexsort((np.negative(end), start, group)))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_byte_mask_is_isin_for_few_and_many_codes(dtype):
    rng = np.random.default_rng(1)
    lo, hi = (-128, 128) if dtype == np.int8 else (0, 256)
    values = rng.integers(lo, hi, 10_000).astype(dtype)
    for k in (0, 1, 3, 8, 9, 40):  # up to 8 codes: comparisons; more: a lookup table
        codes = [int(c) for c in rng.integers(lo, hi, k)]
        assert np.array_equal(byte_mask(values, codes), np.isin(values, codes)), (dtype, codes)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64, np.uint32])
def test_member_mask_is_isin(dtype):
    rng = np.random.default_rng(2)
    info = np.iinfo(dtype)
    for spread in (10, 5_000, int(info.max)):  # a dense range: a table; a sparse one: np.isin
        lo = max(int(info.min), -spread)
        values = rng.integers(lo, min(spread, int(info.max)), 3_000, endpoint=True).astype(dtype)
        for k in (0, 1, 3, 8, 9, 40):
            wanted = rng.integers(lo, min(spread, int(info.max)), k, endpoint=True)
            for among in (wanted.tolist(), wanted, wanted.tolist() + [int(info.max) + 1, int(info.min) - 1]):
                assert np.array_equal(member_mask(values, among), np.isin(values, among)), (dtype, spread, among)
    assert np.array_equal(member_mask(np.zeros(0, dtype), [1, 2]), np.zeros(0, bool))
    assert np.array_equal(member_mask(np.arange(5, dtype=dtype), np.array([], np.float64)), np.zeros(5, bool))
