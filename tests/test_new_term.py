r"""A new term written in one place (this file) is solved by both backends and certified, with no
other file touched (issue 11).

The term: :math:`R(M) = \tfrac{\lambda}{2}\|M - I\|_F^2`, a pull towards the Euclidean metric
(Kulis, *Metric Learning: A Survey*, 2013, Sec. 4: regularisers towards a prior metric). On the
PSD cone it is exactly :math:`\langle -\lambda I, M\rangle + \tfrac{\lambda}{2}\|M\|_F^2 +
\tfrac{\lambda d}{2}`, which is its dual piece. Its JAX value is given; its gradient comes from
autodiff (the term does not write one).
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.preprocessing import StandardScaler

import metricopt as mo
from metricopt.protocols import DualPiece
from metricopt.terms import Term


class TowardsIdentity(Term):
    """``(lam / 2) ||M - I||_F^2``."""

    def __init__(self, lam=1.0):
        self.lam = float(lam)

    def value(self, problem, V):
        D = V["M"] - np.eye(problem.d)
        return 0.5 * self.lam * float(np.sum(D * D))

    def cvxpy(self, problem, V, ws=None):
        return 0.5 * self.lam * cp.sum_squares(V["M"] - np.eye(problem.d)), []

    def jax_data(self, problem):
        return {"lam": np.float64(self.lam), "I": np.eye(problem.d)}

    @staticmethod
    def jax_value(data, V, active=None, smoothing=0.0):
        import jax.numpy as jnp

        D = V["M"] - data["I"]
        return 0.5 * data["lam"] * jnp.sum(D * D)

    def dual_piece(self, problem):
        d = problem.d
        return DualPiece(linear=-self.lam * np.eye(d), strong_convexity=self.lam, constant=0.5 * self.lam * d)


@pytest.fixture(scope="module")
def problem():
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)[::3]
    return mo.LMNNProblem(X, y[::3], k=3, regularizer=[TowardsIdentity(2.0)])


def test_the_term_declares_a_jax_value_and_its_gradient_comes_from_autodiff(problem):
    import jax

    term = problem.terms[-1]
    assert term.has_jax and term.config() is None
    rng = np.random.default_rng(0)
    G = rng.normal(size=(problem.d, problem.d))
    M = G @ G.T
    with jax.enable_x64(True):
        data = {k: jax.numpy.asarray(v) for k, v in term.jax_data(problem).items()}
        value, exact, grads = TowardsIdentity.jax_value_grad(data, {"M": jax.numpy.asarray(M)})
    assert float(value) == pytest.approx(term.value(problem, {"M": M}), rel=1e-12)
    assert float(exact) == float(value)
    np.testing.assert_allclose(np.asarray(grads["M"]), 2.0 * (M - np.eye(problem.d)), rtol=1e-12, atol=1e-12)
    # the dual piece is the term itself on the PSD cone
    piece = term.dual_piece(problem)
    assert (np.sum(piece.linear * M) + 0.5 * piece.strong_convexity * np.sum(M * M) + piece.constant
            == pytest.approx(term.value(problem, {"M": M}), rel=1e-12))


def test_both_backends_solve_it_and_certify_it_and_agree(problem):
    exact = mo.solve(problem, backend="cvxpy", solver="CLARABEL")
    fast = mo.solve(problem, backend="jax", tol=1e-7)
    assert exact.status is mo.Status.OPTIMAL and fast.status is mo.Status.OPTIMAL
    for sol in (exact, fast):
        cert = mo.certify(problem, sol, tol=1e-6)
        assert cert.is_optimal and cert.lower <= cert.upper + 1e-9 * abs(cert.upper)
    report = mo.check_agreement(problem, exact, fast, tol=1e-6)
    metric = [c for c in report.checks if c.name == "metrics"][0]
    assert report.passed and metric.applies  # strongly convex (lam = 2): the metrics themselves agree


def test_the_bound_is_a_true_lower_bound_at_suboptimal_points(problem):
    optimum = mo.solve(problem, backend="cvxpy", solver="CLARABEL").objective
    for scale in (0.3, 1.0, 3.0):
        cert = mo.certify(problem, scale * np.eye(problem.d))
        assert cert.lower <= optimum + 1e-7 * abs(optimum)
        assert cert.upper >= optimum - 1e-7 * abs(optimum)
