"""check_agreement: two solutions of one convex problem, compared only where the math allows."""

import numpy as np
import pytest

import metricopt as mo
from metricopt.terms import Frobenius


@pytest.fixture(scope="module")
def iris(iris_std):
    return iris_std


def _check(rep, name):
    return next(c for c in rep.checks if c.name.startswith(name))


def test_exact_and_jax_lmnn_agree_and_metric_check_does_not_apply(iris):
    X, y = iris
    p = mo.LMNNProblem(X, y)
    exact = p.solve(backend="cvxpy")
    fast = p.solve(backend="jax", tol=1e-7)
    rep = mo.check_agreement(p, exact, fast, X_test=X[::3] + 0.05)
    assert rep.passed, rep.report()
    metrics = _check(rep, "metrics")
    assert not metrics.applies and "not strongly convex" in metrics.detail
    assert _check(rep, "3-NN test predictions").applies
    assert "PASSED" in rep.report()


def test_strongly_convex_problem_compares_metrics_within_the_certified_distance(iris):
    X, y = iris
    p = mo.LMNNProblem(X[::2], y[::2], regularizer=Frobenius(0.5))
    a, b = p.solve(solver="SCS"), p.solve(solver="CLARABEL")
    rep = mo.check_agreement(p, a, b)
    m = _check(rep, "metrics")
    assert m.applies and m.passed, rep.report()
    assert rep.passed


def test_pola_soft_margin_is_strongly_convex(iris):
    X, y = iris
    p = mo.POLAProblem(X[::4], y[::4], C=1.0)
    rep = mo.check_agreement(p, p.solve(solver="SCS"), p.solve(solver="CLARABEL"))
    assert _check(rep, "metrics").applies
    assert rep.passed, rep.report()


def test_a_worse_metric_fails_the_certificate_and_objective_checks(iris):
    X, y = iris
    p = mo.LMNNProblem(X, y)
    sol = p.solve()
    rep = mo.check_agreement(p, sol, 1.3 * sol.M)
    assert not rep.passed
    assert not _check(rep, "certificates").passed
    assert not _check(rep, "objectives").passed
    assert "FAIL" in rep.report()


def test_metric_bound_is_tight_at_solutions_and_valid_at_perturbed_points(iris):
    X, y = iris
    p = mo.LMNNProblem(X[::2], y[::2], regularizer=Frobenius(0.5))
    sol = p.solve()
    lam = 0.5
    # at two certified solutions the guaranteed distance is small ...
    rep = mo.check_agreement(p, sol, p.solve(solver="CLARABEL"))
    m = _check(rep, "metrics")
    bound = float(m.detail.split("<=")[1].split()[0])
    assert m.passed and bound < 1e-3
    # ... and at a perturbed point the true distance obeys the theorem the check relies on
    Mp = sol.M + 0.2 * np.eye(4)
    gap = mo.certify(p, Mp).gap
    assert np.linalg.norm(Mp - sol.M) <= np.sqrt(2 * gap / lam) + np.sqrt(2 * mo.certify(p, sol).gap / lam)
    rep = mo.check_agreement(p, sol, Mp)
    assert not rep.passed and not _check(rep, "certificates").passed


def test_solution_without_metric_is_refused(iris):
    X, y = iris
    p = mo.POLAProblem(X[::10], y[::10])  # hard margin: infeasible here
    bad = p.solve()
    assert bad.M is None
    with pytest.raises(mo.InputError, match="sol_a has no metric"):
        mo.check_agreement(p, bad, np.eye(4))
