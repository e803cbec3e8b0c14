"""The ingest's nesting order (one sort of a combined key, ties sorted apart) equals the three-key
lexsort it replaces, ties and all; the digest tests check whole ingested tables."""

from __future__ import annotations

import numpy as np
import pytest

from tracekit.ingest.links import nesting_order


@pytest.mark.parametrize("scale", [1, 10**15])  # 10**15: the combined key would overflow, so lexsort is used
def test_nesting_order_is_lexsort_by_group_start_and_end_descending(scale):
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(0, 300))
        group = rng.integers(-2, 4, n)
        start = rng.integers(0, 30, n) * scale  # few distinct starts: many ties
        end = start + rng.integers(0, 5, n) * scale
        assert np.array_equal(nesting_order(group, start, end), np.lexsort((np.negative(end), start, group)))
