"""The dedicated rank-two solver of LMNN's restricted dual (metricopt.certify.rank2_dual).

Checked against the same program solved by Clarabel through CVXPY (random instances, tied multiplier
included), for feasibility of what it returns, and, inside the LMNN certificate, against the CVXPY
route and the exact optimum."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import assume, HealthCheck, given, settings
from hypothesis import strategies as st

import metricopt as mo
from metricopt.certify import triplets as lm
from metricopt.certify.rank2_dual import solve_rank2_dual

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def reference(P, U, V, mu, G0, c0):
    """The restricted dual as a CVXPY program (Clarabel, tight tolerances): its optimal value."""
    m, d = U.shape
    a = cp.Variable(m)
    S = P - U.T @ cp.diag(a) @ U + V.T @ cp.diag(a) @ V
    obj = cp.sum(a)
    cons = [a >= 0, a <= mu]
    if G0 is not None:
        x0 = cp.Variable()
        S = S - x0 * G0
        obj = obj + c0 * x0
        cons += [x0 >= 0, x0 <= mu]
    prog = cp.Problem(cp.Maximize(obj), cons + [0.5 * (S + S.T) >> 0])
    prog.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    # a case the reference cannot solve to its tight tolerances (Clarabel 'optimal_inaccurate', seen on a
    # random 2-D case with a tie term) cannot check anything: discard it
    assume(prog.status == cp.OPTIMAL)
    return prog.value


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 31 - 1), d=st.integers(2, 5), m=st.integers(1, 12), tied=st.booleans(),
       mu=st.sampled_from([0.3, 1.0, 5.0]))
def test_matches_clarabel_and_is_feasible(seed, d, m, tied, mu):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(d, d))
    P = A @ A.T + 0.1 * np.eye(d)
    U = rng.normal(size=(m, d))
    V = 0.7 * rng.normal(size=(m, d))
    G0, c0 = None, 0.0
    if tied:
        Z = rng.normal(size=(3, d))
        G0, c0 = Z.T @ Z - 0.5 * np.outer(Z[0], Z[0]), float(rng.integers(1, 20))
    x0, a = solve_rank2_dual(P, U, V, mu, G0=G0, c0=c0, accuracy=1e-9)
    # strictly inside the box, S(x) positive semidefinite
    assert np.all(a > 0) and np.all(a < mu) and 0 <= x0 <= mu
    S = P - U.T @ np.diag(a) @ U + V.T @ np.diag(a) @ V - (x0 * G0 if tied else 0)
    assert np.linalg.eigvalsh(0.5 * (S + S.T))[0] >= -1e-10
    value = a.sum() + c0 * x0
    best = reference(P, U, V, mu, G0, c0)
    assert value <= best + 1e-6 * max(1.0, abs(best))
    assert value == pytest.approx(best, rel=1e-6, abs=1e-6)


def test_refuses_a_singular_pull_matrix():
    P = np.diag([1.0, 0.0])
    U = np.array([[1.0, 0.0]])
    assert solve_rank2_dual(P, U, U, 1.0) is None


def test_certificate_same_bound_as_the_cvxpy_route_and_below_the_optimum(monkeypatch):
    """On iris, far from and near the optimum: the bound through the rank-two solver equals the bound
    through the CVXPY program (to the accuracy asked) and never exceeds the exact optimum."""
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    P = mo.LMNNProblem(X[::2], y[::2], k=3, mu=0.5)
    f_opt = P.solve(backend="cvxpy").certificate.upper
    calls = []

    def spy(*args, **kw):
        calls.append(len(args[1]))
        return solve_rank2_dual(*args, **kw)

    for M in (np.eye(4), P.solve(backend="jax", tol=1e-2).M):
        V = P.point(M)
        upper = P._objective(V)
        for band, free in ((lm.BAND, lm.MAX_FREE), (lm.WIDE_BAND, lm.WIDE_MAX_FREE)):
            monkeypatch.setattr(lm, "solve_rank2_dual", spy)
            fast, info = lm.lmnn_lower_bound(P, V, upper, band=band, max_free=free)
            assert calls and calls[-1] == info["triplets near margin (alpha free)"]
            monkeypatch.setattr(lm, "RANK2_MAX_FREE", -1)  # force the CVXPY program
            slow, _ = lm.lmnn_lower_bound(P, V, upper, band=band, max_free=free)
            monkeypatch.undo()
            assert fast <= f_opt + 1e-9 * abs(f_opt)
            assert fast == pytest.approx(slow, rel=1e-6)
