"""Tests for low-rank LMNN (metricopt.methods.lmnn.lowrank): LMNN-R and LMNN-S (Weinberger & Saul, JMLR 2009, Sec. 5.4).

What is pinned down:

* the objective in ``L`` equals ``problem.objective(L^T L)`` and a brute-force sum over every
  triplet written here from Eq. 14; its gradient ``2 L G`` and the Hessian-vector product of the
  smoothed objective match central finite differences at a generic point;
* with ``r = d``, LMNN-R reaches the convex optimum (a tight Clarabel solve, certified) within a
  small relative tolerance: the global optimum of the convex problem is some ``L^T L``;
* for ``r < d``: rank exactly ``r``, objective ``>=`` the convex optimum ``>=`` the reported lower
  bound, status STATIONARY (never OPTIMAL);
* LMNN-S is exactly the eigen-truncation of the convex solution (recomputed here with numpy);
* restarts keep the best; descending from LMNN-S's point never ends above it;
* errors: exact messages.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import metricopt as mo
from metricopt.datasets import load_iris
from metricopt.errors import InputError, UnknownOptionError
from metricopt.backends.jax import evaluate
from metricopt.methods.lmnn.lowrank import (
    lmnn_low_rank, lmnn_r, lmnn_s, low_rank_objective, stationarity, truncate_metric)
from metricopt.solution import Solution, Status
from metricopt.terms import Frobenius, Trace

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def iris_subset(per_class, seed):
    X, y = load_iris()
    rng = np.random.default_rng(seed)
    idx = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), per_class, replace=False) for c in range(3)]))
    X, y = X[idx], y[idx]
    return (X - X.mean(0)) / X.std(0), y


@pytest.fixture(scope="module")
def small():
    """45 iris points (standardised), k=3, mu=0.5, and its convex optimum (Clarabel, certified)."""
    X, y = iris_subset(15, 0)
    p = mo.LMNNProblem(X, y, k=3, mu=0.5)
    sol = p.solve(backend="cvxpy", solver="CLARABEL", solver_tol=1e-9)
    assert sol.status is Status.OPTIMAL and sol.certificate.rel_gap < 1e-7
    return p, sol


def brute_objective(X, y, T, mu, L, frob=0.0, trace=0.0):
    """Eq. 14 at M = L^T L, one triplet at a time, plus (frob/2)||M||_F^2 + trace * tr(M)."""
    Z = X @ L.T
    n, k = T.shape
    pull = push = 0.0
    for i in range(n):
        for jj in range(k):
            dij = float(np.sum((Z[i] - Z[T[i, jj]]) ** 2))
            pull += dij
            for l in np.flatnonzero(y != y[i]):
                push += max(0.0, 1.0 + dij - float(np.sum((Z[i] - Z[l]) ** 2)))
    M = L.T @ L
    return (1 - mu) * pull + mu * push + 0.5 * frob * float(np.sum(M * M)) + trace * float(np.trace(M))


# ---------------------------------------------------------------------------------- gradients
def generic_point(p, r, seed):
    """A random L at which no triplet lies within 1e-3 of its hinge's kink."""
    rng = np.random.default_rng(seed)
    for _ in range(100):
        L = 0.6 * rng.standard_normal((r, p.d))
        h = p.find_triplets(L.T @ L, 1.0)[3]
        if np.all(np.abs(h) > 1e-3):
            return L
    raise AssertionError("no generic point found")


def test_objective_value_matches_problem_and_brute_force():
    X, y = iris_subset(8, 1)
    p = mo.LMNNProblem(X, y, k=2, mu=0.3, regularizer=[Frobenius(0.2), Trace(0.1)])
    L = generic_point(p, 2, 0)
    value, _ = low_rank_objective(p, L)
    assert value == pytest.approx(p.objective(L.T @ L), rel=1e-12)
    assert value == pytest.approx(brute_objective(X, y, p.target_neighbors, 0.3, L, 0.2, 0.1), rel=1e-12)
    # the smoothed value lies within [f, f + mu * (#triplets near the kink) * s / 8]
    s = 0.05
    vs, _ = low_rank_objective(p, L, smoothing=s)
    assert value <= vs <= value + 0.3 * p.n_triplets * s / 8


@pytest.mark.parametrize("smoothing", [0.0, 0.5])
def test_gradient_matches_finite_differences(smoothing):
    X, y = iris_subset(8, 1)
    p = mo.LMNNProblem(X, y, k=2, mu=0.6, regularizer=[Frobenius(0.3), Trace(0.05)])
    L = generic_point(p, 3, 1)
    _, g = low_rank_objective(p, L, smoothing=smoothing)
    eps = 1e-6
    fd = np.zeros_like(L)
    for a in range(L.shape[0]):
        for b in range(L.shape[1]):
            E = np.zeros_like(L)
            E[a, b] = eps
            fd[a, b] = (low_rank_objective(p, L + E, smoothing)[0] - low_rank_objective(p, L - E, smoothing)[0]) / (2 * eps)
    assert np.abs(g).max() > 1.0  # a point that is not stationary: the check has something to compare
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * np.abs(g).max())


def test_hessian_vector_product_matches_finite_differences():
    X, y = iris_subset(8, 2)
    p = mo.LMNNProblem(X, y, k=2, mu=0.5, regularizer=Frobenius(0.3))
    low = p.factored(2)
    L = generic_point(p, 2, 2)
    V = np.random.default_rng(3).standard_normal(L.shape)
    s = 0.8  # wide: many triplets in the quadratic zone of the smoothed hinge
    eps = 1e-6
    fd = (evaluate(low, L + eps * V, s)[2] - evaluate(low, L - eps * V, s)[2]) / (2 * eps)
    hv = evaluate(low, L, s, direction=V)[3]  # what the trust-region Newton solver uses
    np.testing.assert_allclose(hv, fd, rtol=1e-5, atol=1e-6 * np.abs(hv).max())


# ---------------------------------------------------------------------------------- LMNN-R
def test_full_rank_reaches_convex_optimum(small):
    p, convex = small
    sol = lmnn_low_rank(p, p.d, method="R", n_restarts=1, convex_bound=convex)
    assert sol.L.shape == (p.d, p.d)
    assert sol.objective == pytest.approx(convex.objective, rel=1e-7)
    # and never below the certified lower bound of the convex problem (the global optimum here)
    assert sol.objective >= convex.certificate.lower - 1e-9 * abs(convex.objective)
    assert sol.status is Status.STATIONARY


@pytest.mark.parametrize("r", [1, 2])
def test_low_rank_r_bounds_and_status(small, r):
    p, convex = small
    sol = lmnn_low_rank(p, r, method="R", n_restarts=2, random_state=1)
    assert sol.L.shape == (r, p.d)
    sv = np.linalg.svd(sol.L, compute_uv=False)
    assert sv.min() > 1e-6 * sv.max()  # rank exactly r
    assert np.linalg.matrix_rank(sol.M, tol=1e-8 * np.abs(sol.M).max()) == r
    np.testing.assert_allclose(sol.M, sol.L.T @ sol.L, atol=1e-12)
    assert sol.objective == pytest.approx(p.objective(sol.L.T @ sol.L), rel=1e-12)
    # rank-r objective >= convex optimum >= reported lower bound
    assert sol.objective >= convex.objective - 1e-9 * abs(convex.objective)
    lower = sol.stats["convex_lower_bound"]
    assert lower <= convex.objective + 1e-7 * abs(convex.objective)
    assert sol.stats["rel_gap_to_convex_bound"] == pytest.approx((sol.objective - lower) / sol.objective)
    # a strict rank constraint costs objective here (the convex optimum has rank 3)
    assert sol.objective > convex.objective * (1 + 1e-4)
    assert sol.status is Status.STATIONARY and not sol.is_optimal
    assert sol.stats["stationarity"] <= 1e-6
    assert "not a certificate" in sol.message


def test_descent_lowers_stationarity_from_its_start(small):
    p, _ = small
    sol = lmnn_r(p, 2, n_restarts=1, convex_bound=False)
    L0 = sol.stats["restarts"][0]
    assert L0["start"] == "pca"
    from metricopt.methods.lmnn.lowrank import _pca_directions, _scaled_start

    start = _scaled_start(p, _pca_directions(p.X, 2))
    assert stationarity(p, start)["relative"] > 1e-3
    assert stationarity(p, sol.L)["relative"] <= 1e-6
    assert sol.objective < p.objective(start.T @ start)


def test_restarts_keep_the_best(small):
    p, _ = small
    one = lmnn_r(p, 1, n_restarts=1, random_state=3, convex_bound=False)
    four = lmnn_r(p, 1, n_restarts=4, random_state=3, convex_bound=False)
    objs = four.stats["restart_objectives"]
    assert len(objs) == 4 and [run["start"] for run in four.stats["restarts"]] == ["pca"] + ["random"] * 3
    assert four.stats["best_restart"] == int(np.argmin(objs))
    assert four.objective == pytest.approx(min(objs), rel=1e-12)
    # the first restart is the same start in both runs: more restarts can only do better
    assert objs[0] == pytest.approx(one.objective, rel=1e-12)
    assert four.objective <= one.objective * (1 + 1e-12)
    # the same seed gives the same result
    again = lmnn_r(p, 1, n_restarts=4, random_state=3, convex_bound=False)
    assert again.stats["restart_objectives"] == objs


def test_smoothing_beats_plain_subgradient(small):
    p, _ = small
    smooth = lmnn_r(p, 2, n_restarts=1, convex_bound=False)
    plain = lmnn_r(p, 2, n_restarts=1, convex_bound=False, smoothing=False)
    assert smooth.objective <= plain.objective * (1 + 1e-12)
    assert plain.status in (Status.STATIONARY, Status.ITERATION_LIMIT)


def test_iteration_limit_is_reported(small):
    p, _ = small
    sol = lmnn_r(p, 2, n_restarts=1, max_iter=3, convex_bound=False)
    assert sol.status is Status.ITERATION_LIMIT
    assert "max_iter=3 was reached" in sol.message


# ---------------------------------------------------------------------------------- LMNN-S
@pytest.mark.parametrize("r", [1, 2, 4])
def test_s_is_the_eigen_truncation(small, r):
    p, convex = small
    sol = lmnn_low_rank(p, r, method="S", convex_solution=convex)
    w, U = np.linalg.eigh((convex.M + convex.M.T) / 2)
    w, U = w[::-1][:r], U[:, ::-1][:, :r]
    np.testing.assert_allclose(sol.M, (U * np.clip(w, 0, None)) @ U.T, atol=1e-12)
    np.testing.assert_allclose(np.abs(sol.L), np.abs(np.sqrt(np.clip(w, 0, None))[:, None] * U.T), atol=1e-12)
    f_conv = p.objective(mo.linalg.project_psd(convex.M))
    assert sol.stats["convex_objective"] == pytest.approx(f_conv, rel=1e-12)
    assert sol.stats["truncation_loss"] == pytest.approx(sol.objective - f_conv, abs=1e-9)
    assert sol.objective == pytest.approx(p.objective(sol.M), rel=1e-12)
    assert sol.status is not Status.OPTIMAL
    if r < 3:  # the convex optimum has rank 3: truncating below it loses objective and is not stationary
        assert sol.stats["truncation_loss"] > 1e-3
        assert sol.status is Status.HEURISTIC
    else:
        assert sol.stats["truncation_loss"] == pytest.approx(0.0, abs=1e-7)
        assert sol.status is Status.STATIONARY


def test_s_certifies_a_bare_metric(small):
    p, convex = small
    sol = lmnn_s(p, p.d, convex_solution=convex.M)  # r = d: nothing is truncated
    np.testing.assert_allclose(sol.M, mo.linalg.project_psd(convex.M), atol=1e-12)
    assert sol.stats["convex_status"] == "optimal"  # certified by metricopt.certify
    assert sol.status is Status.STATIONARY
    assert sol.stats["rel_gap_to_convex_bound"] <= 1e-7


def test_r_from_s_never_ends_above_s(small):
    p, convex = small
    s = lmnn_s(p, 2, convex_solution=convex)
    r = lmnn_r(p, 2, n_restarts=1, init=s.L, convex_bound=False)
    assert r.stats["restarts"][0]["start"] == "init"
    assert r.objective <= s.objective
    assert r.objective < s.objective * (1 - 1e-3)  # and here it improves on it clearly


def test_s_solves_the_convex_problem_itself(small):
    p, convex = small
    sol = lmnn_low_rank(p, 2, method="S", backend="cvxpy", solver="CLARABEL", tol=1e-9, convex_bound=False)
    assert sol.stats["convex_status"] == "optimal"
    assert sol.stats["convex_objective"] == pytest.approx(convex.objective, rel=1e-7)
    # rows of L_r are sqrt(lambda_k) u_k^T: orthogonal, with squared norms the top eigenvalues
    eig = sol.stats["eigenvalues"]
    np.testing.assert_allclose(sol.L @ sol.L.T, np.diag(eig[:2]), atol=1e-10)
    assert sol.objective == pytest.approx(p.objective(truncate_metric(convex.M, 2)[0].T
                                                      @ truncate_metric(convex.M, 2)[0]), rel=1e-4)


def test_s_inherits_a_failed_convex_status(small):
    p, convex = small
    bad = Solution(M=convex.M, objective=convex.objective, status=Status.ITERATION_LIMIT, backend="jax",
                   solver="fista", message="stopped")
    sol = lmnn_s(p, 2, convex_solution=bad, convex_bound=False)
    assert sol.status is Status.ITERATION_LIMIT
    assert "inherits" in sol.message
    none = Solution(M=None, objective=float("nan"), status=Status.ERROR, backend="jax", solver="fista",
                    message="failed")
    sol = lmnn_s(p, 2, convex_solution=none)
    assert sol.M is None and sol.status is Status.ERROR


# ---------------------------------------------------------------------------------- errors
def test_error_messages(small):
    p, _ = small
    d = p.d
    for bad in (0, d + 1):
        with pytest.raises(InputError, match=re.escape(
                f"n_components must be between 1 and the number of features d={d}; got {bad}. "
                f"A rank-{bad} metric needs an L with {bad} rows of length d.")):
            lmnn_low_rank(p, bad)
    with pytest.raises(InputError, match=re.escape(f"n_components must be an integer between 1 and d={d}; got 2.5.")):
        lmnn_low_rank(p, 2.5, method="S")
    with pytest.raises(UnknownOptionError, match=re.escape("unknown method 'Q'; choose one of: 'R', 'S'.")):
        lmnn_low_rank(p, 2, method="Q")
    with pytest.raises(UnknownOptionError, match=re.escape(
            "unknown option(s) ['solver'] for method='R'; its options are: smoothing, init, band (plus "
            "n_restarts, random_state, tol, max_iter, time_limit, convex_bound).")):
        lmnn_low_rank(p, 2, method="R", solver="SCS")
    with pytest.raises(InputError, match=re.escape(f"init must have shape (2, {d}); got (3, {d}).")):
        lmnn_r(p, 2, init=np.ones((3, d)))
    X, y = iris_subset(5, 0)
    mmc = mo.MMCProblem(X, y)
    with pytest.raises(InputError, match=re.escape(
            "low-rank LMNN needs an LMNNProblem; got MMCProblem. Build one with "
            "metricopt.LMNNProblem(X, y, k=..., mu=...).")):
        lmnn_low_rank(mmc, 2)


# ------------------------------------------------------------------ the factor geometry on the shared loop
def test_factor_geometry_is_solved_by_the_shared_loop_and_reported_stationary(small):
    p, convex = small
    low = p.factored(2)
    assert not low.is_convex
    sol = mo.solve(low, backend="jax", solver="newton", tol=1e-6)
    assert sol.status is Status.STATIONARY and not sol.is_optimal and sol.certificate is None
    assert sol.backend == "jax" and sol.solver == "newton" and sol.L.shape == (2, p.d)
    assert sol.stats["stationarity"] <= 1e-6
    np.testing.assert_allclose(sol.M, sol.L.T @ sol.L, atol=1e-12)
    assert sol.objective >= convex.objective * (1 - 1e-9)  # the convex optimum bounds every rank-2 point
    with pytest.raises(mo.NotConvexError):
        mo.certify(low, sol.M)
    # the same problem from the same start: the same point (deterministic), no retrace of the loop
    from metricopt.backends.jax import TRACES

    traces = TRACES["run_chunk"]
    again = mo.solve(low, backend="jax", solver="newton", tol=1e-6)
    assert TRACES["run_chunk"] == traces
    np.testing.assert_array_equal(again.L, sol.L)


def test_newton_refuses_a_constrained_geometry(small):
    p, _ = small
    with pytest.raises(InputError, match=re.escape(
            "solver='newton' takes unconstrained steps and runs on a factor geometry only (problem.factored(r): "
            "M = L^T L); LMNN has the constrained geometry 'psd'. Use solver='fista'.")):
        mo.solve(p, backend="jax", solver="newton")
