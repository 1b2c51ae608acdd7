"""The sort-based set operations answer exactly as ``np.unique`` and ``np.isin``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from metricopt.setops import member, sorted_unique

keys = st.lists(st.integers(-5, 40), max_size=60)


@settings(max_examples=200, deadline=None)
@given(keys, st.booleans())
def test_sorted_unique_is_numpy_unique(values, presorted):
    a = np.array(sorted(values) if presorted else values, dtype=np.int64)
    got = sorted_unique(a)
    np.testing.assert_array_equal(got, np.unique(a))
    assert got.dtype == a.dtype


@settings(max_examples=200, deadline=None)
@given(keys, keys)
def test_member_is_numpy_isin(a, b):
    a, b = np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)
    np.testing.assert_array_equal(member(a, b), np.isin(a, b))


def test_large_keys_and_shapes():
    rng = np.random.default_rng(0)
    n = 60_000
    a = np.sort(rng.integers(0, n, 5_000)) * n + rng.integers(0, n, 5_000)  # the searches' (i, l) keys
    b = rng.choice(a, 3_000)
    np.testing.assert_array_equal(sorted_unique(a), np.unique(a))
    grid = a[:100].reshape(10, 10)
    assert member(grid, b).shape == (10, 10)
    np.testing.assert_array_equal(member(grid, b), np.isin(grid, b))
    assert not member(a, a[:0]).any() and sorted_unique(a[:0]).size == 0
