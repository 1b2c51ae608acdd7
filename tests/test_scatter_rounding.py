"""The certificate's bound on the rounding of ``B = sum_t alpha_t A_t`` (:func:`metricopt.certify.triplets.scatter_error`).

The bound must hold for the scatter as computed (both forms of :func:`metricopt.linalg.pair_scatter`: the products
of the differences and the Laplacian form), against a reference summed in extended precision; and it must be
tight enough that an exact solve certifies at a small tolerance (the range-based bound it replaced held the
certified gap of digits PCA-30's optimum above 7.4e-7).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA

import metricopt as mo
from metricopt import linalg
from metricopt.certify.triplets import scatter_error
from metricopt.methods.lmnn import problem as lmnn_problem


def _brute_abs_scatter(X, a, b, w):
    Xc = X - X.mean(axis=0)
    S = np.zeros((X.shape[1], X.shape[1]))
    for t in range(len(a)):
        z = np.abs(Xc[a[t]]) + np.abs(Xc[b[t]])
        S += w[t] * np.outer(z, z)
    return S


@pytest.mark.parametrize("dense_limit", [4_000_000, 0])
def test_pair_abs_scatter_is_its_definition_in_both_forms(dense_limit):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5)) * [1.0, 10.0, 0.1, 3.0, 1.0] + 7.0
    a, b = rng.integers(0, 40, size=200), rng.integers(0, 40, size=200)
    w = rng.uniform(0.0, 2.0, size=200)
    S = linalg.pair_abs_scatter(X, a, b, w, dense_limit=dense_limit)
    np.testing.assert_allclose(S, _brute_abs_scatter(X, a, b, w), rtol=1e-12)
    assert np.all(S >= 0) and np.array_equal(S, S.T)


def _exact_triplet_scatter(X, T, w):
    """sum_t w_t ((x_i - x_l)(x_i - x_l)^T - (x_i - x_j)(x_i - x_j)^T) in extended precision."""
    Xe = X.astype(np.longdouble)
    U, V = Xe[T[:, 0]] - Xe[T[:, 2]], Xe[T[:, 0]] - Xe[T[:, 1]]
    we = np.asarray(w, dtype=np.longdouble)[:, None]
    return (U * we).T @ U - (V * we).T @ V


@pytest.mark.parametrize("dense_limit", [4_000_000, 0])
def test_scatter_error_bounds_the_computed_scatter(monkeypatch, dense_limit):
    # points far from the origin and of very different scales: the rounding is largest relative to the result
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(4), 60)
    X = (rng.normal(size=(240, 6)) + 3.0 * rng.normal(size=(4, 6))[y]) * [1e3, 1.0, 1e-2, 5.0, 1.0, 1.0] + 1e4
    monkeypatch.setattr(lmnn_problem, "pair_scatter", functools.partial(linalg.pair_scatter, dense_limit=dense_limit))
    P = mo.LMNNProblem(X, y, k=3, mu=0.5)
    i, j, l, _ = P.find_triplets(np.eye(6), margin=1e30)
    T = np.stack([i, j, l], 1)
    w = rng.uniform(0.0, 0.5, size=len(T))
    B = linalg.symmetrize(P.triplet_scatter(i, j, l, w))
    err = np.abs(B.astype(np.longdouble) - _exact_triplet_scatter(X, T, w)).astype(np.float64)
    E = scatter_error(P, T, w)
    assert np.all(err <= E), float(np.max(err / E))
    assert np.max(err) > 0  # the reference is not the computed scatter itself


def test_an_exact_solve_certifies_at_1e_9():
    """Clarabel's optimum of digits (300 points, PCA 10) certified to 1e-9: 3.6e-9 with the range-based bound,
    3.0e-10 with the magnitudes of the triplets summed."""
    X, y = load_digits(return_X_y=True)
    X = PCA(10, random_state=0).fit_transform(X[:300])
    P = mo.LMNNProblem(X, y[:300], k=3, mu=0.5)
    sol = P.solve(backend="cvxpy", solver="CLARABEL", tol=1e-9, solver_tol=1e-10)
    assert str(sol.status) == "optimal"
    c = mo.certify(P, sol.M, tol=1e-9)
    assert c.lower <= c.upper
    assert (c.upper - c.lower) / abs(c.upper) <= 1e-9
