"""A kept triplet search answers a later call exactly (metricopt.methods.lmnn.kept_search): the bound against a
brute-force enumeration of every triplet, the answers against fresh searches, the headroom."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricopt import LMNNProblem
from metricopt.methods.lmnn import kept_search as ks


def _data(seed, n=60, d=5, classes=3, ties=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if ties:  # repeated points and coordinates on a coarse grid
        X = np.round(X * 2) / 2
        X[n // 2:n // 2 + 5] = X[:5]
    y = rng.integers(0, classes, n)
    return X, y


def _psd(rng, d, rank=None):
    A = rng.normal(size=(d, rank or d))
    return A @ A.T / d


def _all_h(P, M):
    """Every triplet's hinge argument (brute force): {(i, j, l): h}."""
    Z = P.transformed(M)
    T = P.target_neighbors
    out = {}
    for i in range(P.n):
        for j in T[i]:
            for l in np.flatnonzero(P.y != P.y[i]):
                out[(i, int(j), int(l))] = 1.0 + ((Z[i] - Z[j]) ** 2).sum() - ((Z[i] - Z[l]) ** 2).sum()
    return out


def _as_set(found):
    i, j, l, _ = found
    return set(zip(i.tolist(), j.tolist(), l.tolist()))


@pytest.mark.parametrize("rank", [None, 2])
@pytest.mark.parametrize("step", [1e-3, 3e-2, 0.3])
def test_the_bound_holds_for_every_left_out_triplet(rank, step):
    """Brute force: with m0 = margin + coverage(...), every triplet with h <= -m0 at M0 has h <= -margin at M
    (a low-rank M0 and M exercise the additive term of the bound)."""
    X, y = _data(1)
    P = LMNNProblem(X, y, k=3)
    rng = np.random.default_rng(2)
    d = X.shape[1]
    M0 = _psd(rng, d, rank)
    M = M0 + step * _psd(rng, d, rank) - step * 0.5 * _psd(rng, d, rank)
    w, V = np.linalg.eigh(M)
    M = (V * np.clip(w, 0, None)) @ V.T
    margin = 0.1
    kept = ks.KeptSearch(M0, np.inf, (), ks.target_distances(P.transformed(M0), P.target_neighbors))
    need = ks.coverage(kept, ks.target_distances(P.transformed(M), P.target_neighbors), margin,
                       ks.point_radii(P.X), ks.pencil_bounds(M, M0))
    assert need >= 0
    if not np.isfinite(need):
        return
    h0, h = _all_h(P, M0), _all_h(P, M)
    left_out = [t for t, v in h0.items() if v <= -(margin + need)]
    assert all(h[t] <= -margin for t in left_out)


def test_the_bound_is_tight_enough_to_be_used():
    """A small step of a full-rank metric needs a small extra margin; the identity needs none."""
    X, y = _data(3)
    P = LMNNProblem(X, y, k=3)
    rng = np.random.default_rng(4)
    M0 = _psd(rng, X.shape[1]) + np.eye(X.shape[1])
    td0 = ks.target_distances(P.transformed(M0), P.target_neighbors)
    kept = ks.KeptSearch(M0, 0.5, (), td0)
    radii = ks.point_radii(P.X)
    assert ks.coverage(kept, td0, 0.2, radii, ks.pencil_bounds(M0, M0)) < 1e-6
    M = M0 * (1 - 1e-4)  # distances shrink by 1e-4: impostors may come closer
    need = ks.coverage(kept, ks.target_distances(P.transformed(M), P.target_neighbors), 0.2, radii,
                       ks.pencil_bounds(M, M0))
    assert 0 < need < 1e-2
    M = M0 * (1 + 1e-4)  # every distance grows: nothing comes closer
    assert ks.coverage(kept, ks.target_distances(P.transformed(M), P.target_neighbors), 0.2, radii,
                       ks.pencil_bounds(M, M0)) == 0.0


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), ties=st.booleans(), rank=st.sampled_from([None, 1, 3]),
       step=st.sampled_from([0.0, 1e-4, 1e-2, 0.1, 1.0]), search=st.sampled_from(["brute", "tree"]))
def test_an_answer_from_the_kept_search_is_a_fresh_search(seed, ties, rank, step, search):
    """Whatever the step, the kept search either answers with exactly the triplets and hinge arguments (bit for
    bit) of a fresh search, or a new search is made."""
    X, y = _data(seed, n=50, d=4, ties=ties)
    P = LMNNProblem(X, y, k=2, search=search)
    rng = np.random.default_rng(seed)
    M0 = _psd(rng, 4, rank)
    M = M0 + step * (_psd(rng, 4, rank) - _psd(rng, 4, rank))
    w, V = np.linalg.eigh(M)
    M = (V * np.clip(w, 0, None)) @ V.T
    P.find_triplets(M0, 0.6)
    got = P.find_triplets(M, 0.2)
    fresh = P._search(M, 0.2, None)
    assert _as_set(got) == _as_set(fresh)
    order_got, order_fresh = np.lexsort(got[:3]), np.lexsort(fresh[:3])
    np.testing.assert_array_equal(got[3][order_got], fresh[3][order_fresh])  # the searches' rounding, bit for bit


def _full_rank(seed):
    """A brute-force-searched problem and a full-rank metric."""
    X, y = _data(seed, n=80)
    M0 = _psd(np.random.default_rng(seed + 1), X.shape[1]) + 0.5 * np.eye(X.shape[1])
    return LMNNProblem(X, y, k=3, search="brute"), M0


def test_a_small_step_is_answered_without_a_search_and_a_large_one_searches():
    P, M0 = _full_rank(5)
    P.find_triplets(M0, 0.5)
    M = M0 * (1 - 1e-3)
    P.find_triplets(M, 0.2)
    assert P._last_search.M is not M and np.array_equal(P._last_search.M, M0)  # answered from the kept search
    M2 = M0 / 3.0  # every distance a third: impostors come closer
    P.find_triplets(M2, 0.2)
    assert np.array_equal(P._last_search.M, M2)  # searched again
    # the objective from the kept search is the brute-force sum
    P.find_triplets(M0, 0.5)
    want = sum(max(v, 0.0) for v in _all_h(P, M).values())
    assert P.hinge_sum(M) == pytest.approx(want, rel=1e-12)
    assert np.array_equal(P._last_search.M, M0)


def test_a_failed_test_widens_the_next_search_by_the_drift():
    P, M0 = _full_rank(7)
    P.find_triplets(M0, 0.2)
    M = M0 * (1 - 5e-3)
    P.find_triplets(M, 0.2)  # the kept margin is no wider: the test measures the drift, then a search
    kept = P._last_search
    assert np.array_equal(kept.M, M)
    assert 0.2 < kept.margin <= 0.4
    M3 = M * (1 - 5e-3)  # the same drift again: answered by the widened search
    P.find_triplets(M3, 0.2)
    assert P._last_search is kept
    assert ks.headroom(None, 0.2) == 0.0
    far = ks.KeptSearch(M0, 0.2, (), np.zeros((0, 0)), need=1.0)
    assert ks.headroom(far, 0.2) == 0.0  # a drift far above the margin: no widening


def test_multi_metric_problems_keep_only_the_exact_reuse():
    from metricopt import MultiMetricLMNNProblem

    X, y = _data(9, n=40, d=3)
    P = MultiMetricLMNNProblem(X, y, k=2)
    M0 = np.eye(P.d)
    P.find_triplets(M0, 0.5)
    M = M0 * (1 - 1e-6)
    P.find_triplets(M, 0.2)
    assert np.array_equal(P._last_search.M, M)
