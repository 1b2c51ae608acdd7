"""The searches' mapped points on the metric's numerical range (:func:`metricopt.linalg.range_columns`).

A metric of rank ``r`` maps the points to about ``r`` coordinates (the rounding left in a PSD projection's zero
eigenvalues dropped), every squared distance moving by at most the stated bound; a direction of tiny eigenvalue
along which the data spread widely is kept; and the searches on the fewer coordinates find the same triplets.
"""

from __future__ import annotations

import numpy as np
import pytest

import metricopt as mo
from metricopt.linalg import RANGE_ROUNDINGS, factor, project_psd, range_columns

EPS = float(np.finfo(np.float64).eps)


def _low_rank_metric(d, r, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(d, d))
    w = np.r_[rng.uniform(0.5, 2.0, size=r), -rng.uniform(0.1, 1.0, size=d - r)]
    Q, _ = np.linalg.qr(A)
    return project_psd((Q * w) @ Q.T)  # the projection leaves rounding in the d - r zero eigenvalues


def test_a_projected_rank_r_metric_maps_to_r_coordinates_and_keeps_the_distances():
    rng = np.random.default_rng(0)
    d, r = 40, 7
    X = rng.normal(size=(300, d)) * rng.uniform(0.1, 10.0, size=d) + 5.0
    M = _low_rank_metric(d, r, 1)
    P = mo.LMNNProblem(X, np.repeat(np.arange(3), 100), k=2)
    assert int(range_columns(X @ factor(M).T).sum()) == r
    Z = P.transformed(M)
    assert Z.shape == (300, 8)  # the leading r = 7 columns, rounded up to a multiple of RANGE_BUCKET
    Zf = X @ factor(M).T
    i, l = rng.integers(0, 300, size=2000), rng.integers(0, 300, size=2000)
    full = np.sum((Zf[i] - Zf[l]) ** 2, 1)
    kept = np.sum((Z[i] - Z[l]) ** 2, 1)
    bound = RANGE_ROUNDINGS * d * EPS * float(np.max(np.ptp(Zf, axis=0)) ** 2)
    assert np.all(np.abs(full - kept) <= bound)
    # and against the distances under M itself, to the rounding of the two computations
    exact = np.einsum("td,de,te->t", X[i] - X[l], M, X[i] - X[l])
    np.testing.assert_allclose(kept, exact, rtol=1e-9, atol=1e-9 * float(exact.max()))


def test_a_tiny_eigenvalue_along_a_wide_spread_is_kept():
    # the metric weighs a direction by 1e-14 of the largest eigenvalue, below the eigensolver's error (a rule on the
    # eigenvalues would drop it), while the data spread 1e9 times wider along it: it carries distance and must stay
    rng = np.random.default_rng(2)
    d = 30
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    w = np.r_[np.ones(5), 1e-14, np.zeros(d - 6)]
    M = (Q * w) @ Q.T
    assert np.sort(np.linalg.eigvalsh(M))[-6] < RANGE_ROUNDINGS * d * EPS
    X = rng.normal(size=(200, d)) @ Q.T + 1e9 * rng.normal(size=(200, 1)) * Q[:, 5]
    Z = X @ factor(M).T
    keep = range_columns(Z)
    spread = np.ptp(Z, axis=0)
    assert spread.max() > 10 * np.median(spread[:5])  # the wide direction dominates the distances
    assert keep[int(np.argmax(spread))]
    assert keep.sum() >= 6


def test_a_full_rank_metric_keeps_every_column():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(100, 12))
    assert range_columns(X @ factor(np.eye(12)).T).all()
    assert range_columns(np.zeros((5, 3))).tolist() == [True, False, False]


@pytest.mark.parametrize("search", ["brute", "tree"])
def test_the_search_on_the_range_finds_the_full_searchs_triplets(search):
    rng = np.random.default_rng(4)
    y = np.repeat(np.arange(4), 150)
    X = rng.normal(size=(600, 35)) + 1.5 * rng.normal(size=(4, 35))[y]
    M = _low_rank_metric(35, 6, 5) * 3.0
    P = mo.LMNNProblem(X, y, k=3, mu=0.5, search=search)
    assert P.transformed(M).shape[1] == 8
    i, j, l, h = P.find_triplets(M, margin=0.5)
    Zf = X @ factor(M).T  # the search on every coordinate, as before the range was taken
    from metricopt.constraints import active_triplets

    i2, j2, l2, h2 = active_triplets(Zf, y, P.target_neighbors, 0.5)
    a = np.lexsort((l, j, i))
    b = np.lexsort((l2, j2, i2))
    # triplets with h at the margin within rounding may differ; every other one is found by both
    core = np.abs(h2[b] + 0.5) > 1e-9
    key = lambda *t: set(zip(*(x.tolist() for x in t)))
    assert key(i2[b][core], j2[b][core], l2[b][core]) <= key(i[a], j[a], l[a])
    np.testing.assert_allclose(np.sort(h), np.sort(h2), atol=1e-9)


def test_searches_on_an_accelerator_keep_every_column(monkeypatch):
    # there each new width of Z costs a compilation of the search (seconds) for a pass of milliseconds
    from metricopt import constraints, search

    rng = np.random.default_rng(6)
    y = np.repeat(np.arange(3), 50)
    X = rng.normal(size=(150, 30))
    M = _low_rank_metric(30, 5, 7)
    P = mo.LMNNProblem(X, y, k=2)
    assert P.transformed(M).shape[1] == 8
    monkeypatch.setattr(search, "default_platform", lambda: "gpu")
    monkeypatch.setattr(constraints, "use_device_search", lambda n, d: True)
    assert P.transformed(M).shape[1] == 30


def test_a_range_wider_than_the_trees_keeps_every_column():
    # above TREE_MAX_DIM the brute-force kernel searches: a new width would compile it again for little gain
    from metricopt.balltree import TREE_MAX_DIM

    rng = np.random.default_rng(8)
    y = np.repeat(np.arange(3), 40)
    X = rng.normal(size=(120, 100))
    P = mo.LMNNProblem(X, y, k=2)
    assert P.transformed(_low_rank_metric(100, TREE_MAX_DIM + 1, 9)).shape[1] == 100
    assert P.transformed(_low_rank_metric(100, 20, 9)).shape[1] == 24
