"""Weighted LMNN (``LMNNProblem(..., sample_weight=w)``; Ramanan & Baker, PAMI 33(4), 2011): the anchor's
weight multiplies its pull terms and all its hinge terms, in the value, both backends and the certificate."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

import metricopt as mo
from metricopt.certify import Verdict
from metricopt.certify import triplets as lm
from metricopt.certify.rank2_dual import solve_rank2_dual
from metricopt.errors import InputError
from metricopt.problems.terms import Frobenius


def _iris(per_class=12):
    X, y = load_iris(return_X_y=True)
    idx = np.concatenate([np.flatnonzero(y == c)[:per_class] for c in range(3)])
    return StandardScaler().fit_transform(X[idx]), y[idx]


def _weights(n, seed=0):
    w = np.random.default_rng(seed).uniform(0.2, 2.0, size=n)
    w[[0, 5, 20]] = 0.0  # some anchors count nowhere
    return w


def _random_psd(rng, d, scale=1.0):
    A = rng.normal(size=(d, d))
    return scale * (A @ A.T) / d


@pytest.fixture(scope="module")
def weighted():
    """A weighted LMNN problem on 36 iris points and its exact (cvxpy) solution."""
    X, y = _iris()
    p = mo.LMNNProblem(X, y, k=3, mu=0.5, sample_weight=_weights(len(y)))
    sol = mo.solve(p, backend="cvxpy")
    assert sol.status is mo.Status.OPTIMAL
    return p, sol


# ----------------------------------------------------------------------------- the objective
def test_unit_weights_are_exactly_the_unweighted_problem():
    X, y = _iris()
    p0 = mo.LMNNProblem(X, y, k=3, mu=0.4)
    p1 = mo.LMNNProblem(X, y, k=3, mu=0.4, sample_weight=np.ones(len(y)))
    assert p0.sample_weight is None
    assert p1.sample_weight.dtype == np.float64 and p1.sample_weight.shape == (len(y),)
    np.testing.assert_array_equal(p1.pull_matrix, p0.pull_matrix)
    rng = np.random.default_rng(1)
    for M in (np.eye(4), _random_psd(rng, 4, 0.5), _random_psd(rng, 4, 2.0)):
        assert p1.hinge_sum(M) == p0.hinge_sum(M)
        assert p1.objective(M) == p0.objective(M)


def test_weights_two_double_the_objective_and_keep_the_optimum(weighted):
    X, y = _iris()
    p1 = mo.LMNNProblem(X, y, k=3, mu=0.5)
    p2 = mo.LMNNProblem(X, y, k=3, mu=0.5, sample_weight=np.full(len(y), 2.0))
    np.testing.assert_array_equal(p2.pull_matrix, 2.0 * p1.pull_matrix)
    rng = np.random.default_rng(2)
    for M in (np.eye(4), _random_psd(rng, 4, 0.3), _random_psd(rng, 4, 3.0)):
        assert p2.objective(M) == 2.0 * p1.objective(M)  # scaling by 2 is exact in floating point
    sol1 = mo.solve(p1, backend="cvxpy")
    # the optimum of p1 is certified optimal for p2, at twice the value
    cert = mo.certify(p2, sol1.M)
    assert cert.verdict is Verdict.OPTIMAL
    assert cert.upper == 2.0 * sol1.objective


def _brute_weighted_objective(X, y, T, mu, w, M):
    pull = hinge = 0.0
    dist = lambda a, b: float((X[a] - X[b]) @ M @ (X[a] - X[b]))
    for i in range(X.shape[0]):
        for j in T[i]:
            dij = dist(i, j)
            pull += w[i] * dij
            for l in np.flatnonzero(y != y[i]):
                hinge += w[i] * max(0.0, 1.0 + dij - dist(i, l))
    return (1 - mu) * pull + mu * hinge, hinge


def _brute_gradient(X, y, T, mu, w, M):
    """``(1 - mu) sum w_i C_ij + mu sum_t w_i 1[h_t > 0] (C_ij - C_il)``."""
    C = lambda a, b: np.outer(X[a] - X[b], X[a] - X[b])
    G = np.zeros_like(M)
    for i in range(X.shape[0]):
        for j in T[i]:
            G += (1 - mu) * w[i] * C(i, j)
            for l in np.flatnonzero(y != y[i]):
                if 1.0 + np.trace(C(i, j) @ M) - np.trace(C(i, l) @ M) > 0:
                    G += mu * w[i] * (C(i, j) - C(i, l))
    return G


def test_objective_equals_brute_force_over_all_triplets_with_random_weights():
    rng = np.random.default_rng(0)
    n, d, k, mu = 18, 3, 2, 0.3
    X = rng.normal(size=(n, d))
    y = np.repeat([0, 1, 2], 6)
    X[y == 1] += 0.7
    w = rng.uniform(0.0, 3.0, size=n)
    w[3] = 0.0
    p = mo.LMNNProblem(X, y, k=k, mu=mu, sample_weight=w)
    for _ in range(3):
        M = _random_psd(rng, d, scale=0.5)
        expected, hinge = _brute_weighted_objective(X, y, p.target_neighbors, mu, w, M)
        assert 0 < hinge
        assert p.objective(M) == pytest.approx(expected, rel=1e-12)
        assert p.hinge.value(p, p.point(M)) == pytest.approx(mu * hinge, rel=1e-12)
        # the JAX piece: the exact value of the active set (weights in its mask) and its gradient
        act, size, exact, _ = p.hinge.jax_active_set(p, M, 0.1)
        assert exact == pytest.approx(mu * hinge, rel=1e-12)
        assert np.all(act["mask"][:size] > 0) and np.all(act["mask"][size:] == 0)
    from metricopt.backends.jax.backend import evaluate

    _, exact, grad = evaluate(p, M)
    assert exact == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(grad, _brute_gradient(X, y, p.target_neighbors, mu, w, M), rtol=1e-10, atol=1e-10)


def test_best_scale_minimises_the_weighted_objective_along_the_ray():
    from metricopt.backends.jax.backend import best_scale

    X, y = _iris()
    p = mo.LMNNProblem(X, y, k=3, sample_weight=_weights(len(y), seed=3))
    c = best_scale(p)
    f = lambda s: p.objective(s * np.eye(4))
    assert f(c) <= min(f(0.99 * c), f(1.01 * c)) + 1e-12 * f(c)


# ----------------------------------------------------------------------------- backends and certificate
def test_exact_and_jax_backends_agree_and_are_certified(weighted):
    p, se = weighted
    sj = mo.solve(p, backend="jax", tol=1e-6)
    for sol in (se, sj):
        assert sol.status is mo.Status.OPTIMAL
        assert sol.certificate.rel_gap <= sol.certificate.tol
        assert p.objective(sol.M) == pytest.approx(sol.objective, rel=1e-12)
    assert sj.objective == pytest.approx(se.objective, rel=1e-4)
    # a weight-0 anchor is in no working set / active set: the exact optimum does not depend on it
    assert se.stats["working_set_size"] > 0
    c = mo.certify(p, se.M)
    assert c.verdict is Verdict.OPTIMAL and c.rel_gap <= 1e-6
    bad = mo.certify(p, 1.3 * se.M + 0.1 * np.eye(4))
    assert bad.verdict is not Verdict.OPTIMAL
    assert bad.lower <= se.objective + 1e-6


def test_certificate_bound_below_the_optimum_at_non_optimal_points(weighted):
    p, se = weighted
    f_opt = se.objective
    rng = np.random.default_rng(4)
    for M in (np.eye(4), 0.5 * se.M, 1.02 * se.M, se.M + _random_psd(rng, 4, 0.05), _random_psd(rng, 4, 1.0)):
        c = mo.certify(p, M)
        assert c.upper >= f_opt - 1e-6
        assert c.lower <= f_opt + 1e-6


def test_certificate_with_a_frobenius_term_is_valid():
    X, y = _iris(8)
    p = mo.LMNNProblem(X, y, k=2, sample_weight=_weights(len(y), seed=5), regularizer=Frobenius(0.1))
    se = mo.solve(p, backend="cvxpy")
    assert se.status is mo.Status.OPTIMAL and se.certificate.rel_gap <= se.certificate.tol
    for M in (np.eye(4), 1.5 * se.M):
        assert mo.certify(p, M).lower <= se.objective + 1e-6


def test_rank2_route_equals_the_cvxpy_route_with_weights(weighted, monkeypatch):
    p, se = weighted
    M = 1.01 * se.M  # triplets near the margin, some violated
    V = p.point(M)
    upper = p._objective(V)
    calls = []

    def spy(*args, **kw):
        calls.append(kw.get("upper"))
        return solve_rank2_dual(*args, **kw)

    monkeypatch.setattr(lm, "solve_rank2_dual", spy)
    fast, info = lm.lmnn_lower_bound(p, V, upper, band=lm.WIDE_BAND, max_free=lm.WIDE_MAX_FREE)
    assert calls and calls[-1] is not None and info["triplets near margin (alpha free)"] > 0
    monkeypatch.setattr(lm, "RANK2_MAX_FREE", -1)  # force the CVXPY program
    slow, _ = lm.lmnn_lower_bound(p, V, upper, band=lm.WIDE_BAND, max_free=lm.WIDE_MAX_FREE)
    assert fast == pytest.approx(slow, rel=1e-6)
    assert fast <= se.objective + 1e-9 * se.objective


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rank2_dual_with_per_multiplier_bounds_matches_clarabel(seed):
    rng = np.random.default_rng(seed)
    d, m, mu = 3, 8, 0.7
    A = rng.normal(size=(d, d))
    P = A @ A.T + 0.1 * np.eye(d)
    U, V = rng.normal(size=(m, d)), 0.7 * rng.normal(size=(m, d))
    Z = rng.normal(size=(3, d))
    G0, c0 = Z.T @ Z - 0.5 * np.outer(Z[0], Z[0]), 4.5
    ub = mu * rng.uniform(0.1, 3.0, size=m)
    x0, a = solve_rank2_dual(P, U, V, mu, G0=G0, c0=c0, accuracy=1e-9, upper=ub)
    assert np.all(a > 0) and np.all(a < ub) and 0 <= x0 <= mu
    S = P - U.T @ np.diag(a) @ U + V.T @ np.diag(a) @ V - x0 * G0
    assert np.linalg.eigvalsh(0.5 * (S + S.T))[0] >= -1e-10
    av, t = cp.Variable(m), cp.Variable()
    Sx = P - U.T @ cp.diag(av) @ U + V.T @ cp.diag(av) @ V - t * G0
    prog = cp.Problem(cp.Maximize(cp.sum(av) + c0 * t), [av >= 0, av <= ub, t >= 0, t <= mu, 0.5 * (Sx + Sx.T) >> 0])
    prog.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert a.sum() + c0 * x0 == pytest.approx(prog.value, rel=1e-6, abs=1e-6)


# ----------------------------------------------------------------------------- input checks
@pytest.mark.parametrize("w, message", [
    (np.ones(5), "sample_weight must have shape (n,) = (36,), one weight per sample of X; got shape (5,)."),
    (np.ones((36, 1)), "sample_weight must have shape (n,) = (36,), one weight per sample of X; got shape (36, 1)."),
    (np.r_[np.nan, np.inf, np.ones(34)],
     "sample_weight contains 2 NaN or infinite value(s); every weight must be a finite number >= 0."),
    (np.r_[np.ones(7), -0.5, np.ones(28)],
     "sample_weight must be >= 0; sample 7 has weight -0.5. Give a sample weight 0 to leave it out."),
    (np.zeros(36), "sample_weight is zero for every sample; at least one sample needs a positive weight."),
    (["a"] * 36, "sample_weight must be a numeric array of one weight per sample; could not convert it to float64."),
    (np.ones(36) * 1j, "sample_weight has complex entries; pass real, non-negative weights."),
])
def test_bad_weights_are_refused_with_clear_messages(w, message):
    X, y = _iris()
    with pytest.raises(InputError) as exc:
        mo.LMNNProblem(X, y, sample_weight=w)
    assert str(exc.value) == message
