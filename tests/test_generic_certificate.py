r"""The generic certificate (:mod:`metricopt.certify.generic`): any convex term, written with no dual code, is
certified from its CVXPY expression, and the bound is a true lower bound (issue 29, item 1).

Every check compares the certified lower bound with something computed independently: an objective value at a
feasible point (a true upper bound on the optimum), the textbook program solved by Clarabel
(``problem.to_cvxpy()``), or the closed-form fast path where a term declares a dual piece.
"""

from __future__ import annotations

import importlib
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_wine
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

import metricopt as mo
from metricopt.certify import Verdict
from metricopt.errors import NotCertifiableError
from metricopt.terms import Frobenius, Term, Trace
from test_new_term import TowardsIdentity  # lam/2 ||M - I||_F^2 with its closed-form dual piece (the fast path)

generic = importlib.import_module("metricopt.certify.generic")


# ---------------------------------------------------------------- user terms, written as a user would: no dual code
class OffDiagonalAbs(Term):
    """``lam * sum_{i != j} |M_ij|``: value and CVXPY form only."""

    def __init__(self, lam):
        self.lam = float(lam)

    def value(self, problem, V):
        M = V["M"]
        return self.lam * float(np.abs(M - np.diag(np.diag(M))).sum())

    def cvxpy(self, problem, V, ws=None):
        M = V["M"]
        return self.lam * cp.sum(cp.abs(M - cp.diag(cp.diag(M)))), []


class FrobeniusNormTerm(Term):
    """``lam * ||M||_F`` (not squared: non-smooth at 0)."""

    def __init__(self, lam):
        self.lam = float(lam)

    def value(self, problem, V):
        return self.lam * float(np.linalg.norm(V["M"]))

    def cvxpy(self, problem, V, ws=None):
        return self.lam * cp.norm(V["M"], "fro"), []


class RowGroupNorm(Term):
    """``lam * sum_i ||M_i,:||_2`` (group lasso over the rows: feature selection)."""

    def __init__(self, lam):
        self.lam = float(lam)

    def value(self, problem, V):
        return self.lam * float(np.linalg.norm(V["M"], axis=1).sum())

    def cvxpy(self, problem, V, ws=None):
        return self.lam * cp.sum(cp.norm(V["M"], 2, axis=1)), []


class TraceAtMost(Term):
    """The constraint ``trace(M) <= radius`` (0 inside, +inf outside)."""

    def __init__(self, radius):
        self.radius = float(radius)

    def value(self, problem, V):
        return 0.0 if np.trace(V["M"]) <= self.radius else np.inf

    def cvxpy(self, problem, V, ws=None):
        return cp.Constant(0.0), [cp.trace(V["M"]) <= self.radius]


class NegLogDet(Term):
    """``-log det M``: compiles to exponential cones, which the generic bound refuses."""

    def value(self, problem, V):
        return -float(np.linalg.slogdet(V["M"])[1])

    def cvxpy(self, problem, V, ws=None):
        return -cp.log_det(V["M"]), []


class Concave(Term):
    """A term CVXPY sees as non-convex."""

    def value(self, problem, V):
        return -float(np.sum(V["M"] ** 2))

    def cvxpy(self, problem, V, ws=None):
        return -cp.sum_squares(V["M"]), []


def _value(G, M, terms):
    return float(np.sum(G * M)) + sum(t.value(None, {"M": M}) for t in terms)


def _feasible_optimum(G, terms, tau, d):
    """A feasible point of the inner program (Clarabel, projected onto the PSD cone and the trace caps) and its
    objective: an upper bound on the inner minimum."""
    M = cp.Variable((d, d), PSD=True)
    expr, cons = cp.sum(cp.multiply(G, M)), [cp.trace(M) <= tau]
    for t in terms:
        e, c = t.cvxpy(None, {"M": M})
        expr, cons = expr + e, cons + list(c)
    cp.Problem(cp.Minimize(expr), cons).solve(solver=cp.CLARABEL)
    w, V = np.linalg.eigh(0.5 * (M.value + M.value.T))
    Mp = (V * np.maximum(w, 0.0)) @ V.T
    cap = min([tau] + [t.radius for t in terms if isinstance(t, TraceAtMost)])
    if np.trace(Mp) > cap:
        Mp *= cap / np.trace(Mp) * (1 - 1e-14)
    return _value(G, Mp, terms)


# ---------------------------------------------------------------- the inner bound
@pytest.mark.parametrize("terms", [
    [OffDiagonalAbs(0.3), Frobenius(1.0)],
    [Frobenius(1.0)],
    [FrobeniusNormTerm(0.7), OffDiagonalAbs(0.1)],
    [TraceAtMost(2.0), OffDiagonalAbs(0.2)],
    [RowGroupNorm(0.4)],
], ids=["l1+fro", "fro", "fronorm+l1", "traceball+l1", "rowgroup"])
@pytest.mark.parametrize("d", [3, 8])
def test_inner_bound_is_below_a_feasible_value_and_tight(terms, d):
    rng = np.random.default_rng(d)
    A = rng.normal(size=(d, d))
    G = A + A.T - 0.5 * np.eye(d)
    tau = 50.0
    lower, info = generic.inner_lower_bound(None, G, 0.0, terms, tau)
    upper = _feasible_optimum(G, terms, tau, d)
    assert info["generic bound"] == "conic dual with exact auxiliary residuals"
    assert lower <= upper
    assert upper - lower <= 1e-6 * max(1.0, abs(upper))


def test_the_auxiliary_residuals_are_exactly_zero():
    """Step 3 of the module docstring: after the pivot repair, ``c_j + (A^T y)_j`` is exactly 0 (rationals) on every
    auxiliary column of the compiled program."""
    d = 4
    rng = np.random.default_rng(3)
    A0 = rng.normal(size=(d, d))
    G = A0 + A0.T
    v, M, _ = generic.symmetric_matrix_variable(d)
    term = OffDiagonalAbs(0.3)
    e, _ = term.cvxpy(None, {"M": M})
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(G, M)) + e + 0.5 * cp.sum_squares(M)), [M >> 0])
    data, _, _ = prob.get_problem_data(cp.CLARABEL, solver_opts={"use_quad_obj": False})
    A, b, c = sp.csc_matrix(data["A"]), data["b"], data["c"]
    blocks = generic._blocks(data["dims"])
    col = data["param_prob"].var_id_to_col[v.id]
    aux = np.setdiff1d(np.arange(A.shape[1]), np.arange(col, col + v.size))
    z, _ = generic._solve_conic(A, b, c, blocks, 1e-9)
    y = generic._project_dual(z, blocks, 0.0)
    exact = generic._pivot_repair(A, c, y, aux, blocks)
    assert len(exact) == aux.size
    for j in aux:
        rows, vals = A.indices[A.indptr[j]:A.indptr[j + 1]], A.data[A.indptr[j]:A.indptr[j + 1]]
        r = Fraction(float(c[j])) + sum(Fraction(float(a)) * (exact[k] if k in exact else Fraction(float(y[k])))
                                        for k, a in zip(rows, vals))
        assert r == 0


def test_no_trace_bound_and_an_unbounded_direction_gives_no_bound_never_a_wrong_one():
    """``G`` with a zero direction that no term penalises: without a trace bound the shifted program is unbounded
    and the generic bound says so (``-inf``) instead of returning a number."""
    G = np.diag([1.0, 0.0])
    lower, info = generic.inner_lower_bound(None, G, 0.0, [OffDiagonalAbs(0.1)], np.inf)
    assert lower == -np.inf or lower <= 0.0


# ---------------------------------------------------------------- LMNN with user terms
@pytest.fixture(scope="module")
def wine5():
    X, y = load_wine(return_X_y=True)
    X = PCA(5).fit_transform(StandardScaler().fit_transform(X))[::3]
    return X, y[::3]


def _textbook(problem):
    prog, _ = problem.to_cvxpy()
    return prog.solve(solver=cp.CLARABEL)


@pytest.mark.parametrize("make", [lambda: [OffDiagonalAbs(0.05)], lambda: [FrobeniusNormTerm(0.2)],
                                  lambda: [RowGroupNorm(0.05)], lambda: [TraceAtMost(1.2)],
                                  lambda: [OffDiagonalAbs(0.05), Frobenius(0.1)]],
                         ids=["l1", "fronorm", "rowgroup", "traceball", "l1+fro"])
def test_a_user_term_with_no_dual_code_is_solved_and_certified(wine5, make):
    X, y = wine5
    problem = mo.LMNNProblem(X, y, k=2, regularizer=make())
    sol = mo.solve(problem, backend="cvxpy", solver="CLARABEL")
    assert sol.status is mo.Status.OPTIMAL
    cert = mo.certify(problem, sol, tol=1e-6)
    assert cert.is_optimal and cert.details["dual form"].startswith("generic")
    reference = _textbook(problem)
    assert cert.lower <= reference + 1e-7 * abs(reference)
    assert cert.upper == pytest.approx(reference, rel=1e-5)
    # at points far from the optimum the bound stays below it
    for scale in (0.1, 1.0):
        far = mo.certify(problem, scale * np.eye(problem.d))
        assert far.lower <= reference + 1e-7 * abs(reference)


@pytest.mark.parametrize("make", [lambda: [], lambda: [Frobenius(0.1)], lambda: [Trace(0.1)],
                                  lambda: [TowardsIdentity(0.5)]], ids=["none", "frobenius", "trace", "towards-I"])
def test_the_generic_path_matches_the_closed_form_where_a_term_has_one(wine5, make):
    X, y = wine5
    problem = mo.LMNNProblem(X, y, k=2, regularizer=make())
    sol = mo.solve(problem, backend="cvxpy", solver="CLARABEL")
    fast = mo.certify(problem, sol, tol=1e-6)
    slow = mo.certify(problem, sol, tol=1e-6, dual="generic")
    assert not fast.details["dual form"].startswith("generic")
    assert slow.details["dual form"].startswith("generic")
    assert fast.upper == slow.upper
    # the stated accuracy: both within 1e-8 relative of each other at the optimum, both certify it
    assert slow.lower == pytest.approx(fast.lower, rel=1e-8)
    assert slow.is_optimal and fast.is_optimal


def test_refusals_say_what_is_wrong(wine5):
    X, y = wine5
    with pytest.raises(NotCertifiableError, match="exponential or power cones"):
        mo.certify(mo.LMNNProblem(X, y, k=2, regularizer=[NegLogDet()]), np.eye(5))
    with pytest.raises(NotCertifiableError, match="DCP-convex"):
        mo.certify(mo.LMNNProblem(X, y, k=2, regularizer=[Concave()]), np.eye(5))


def test_a_violated_term_constraint_is_an_infeasible_candidate(wine5):
    X, y = wine5
    problem = mo.LMNNProblem(X, y, k=2, regularizer=[TraceAtMost(1.0)])
    cert = mo.certify(problem, np.eye(5))
    assert cert.verdict is Verdict.INFEASIBLE


# ---------------------------------------------------------------- degenerate data: every bound stays valid
_COLUMNS = st.sampled_from(["constant", "duplicate", "tiny", "leak", "wide"])


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(kind=_COLUMNS, seed=st.integers(0, 10_000), lam=st.sampled_from([0.01, 0.1]),
       frob=st.sampled_from([0.0, 0.05]))
def test_degenerate_data_never_gives_a_bound_above_a_feasible_value(kind, seed, lam, frob):
    rng = np.random.default_rng(seed)
    n, d = 12, 3
    X = rng.normal(size=(n, d))
    y = np.repeat([0, 1], n // 2)
    if kind == "constant":
        X = np.c_[X, np.full(n, 2.5)]
    elif kind == "duplicate":
        X = np.c_[X, X[:, 0]]
    elif kind == "tiny":
        X = np.c_[X, 1e-7 * rng.normal(size=n)]
    elif kind == "leak":
        X = np.c_[X, 1e-9 * y]
    else:  # d > n
        X = rng.normal(size=(n, n + 3))
    regs = [OffDiagonalAbs(lam)] + ([Frobenius(frob)] if frob else [])
    problem = mo.LMNNProblem(X, y, k=2, regularizer=regs)
    prog, V = problem.to_cvxpy()
    prog.solve(solver=cp.CLARABEL)
    w, U = np.linalg.eigh(0.5 * (V["M"].value + V["M"].value.T))
    candidates = [(U * np.maximum(w, 0.0)) @ U.T, np.eye(problem.d), np.zeros((problem.d, problem.d))]
    best = min(problem.objective(M) for M in candidates)  # a true upper bound on the optimum
    for M in candidates:
        cert = mo.certify(problem, M)
        assert cert.lower <= best


class OffDiagonalAbsJax(OffDiagonalAbs):
    """The same user term with a JAX value (autodiff subgradient; no prox, no dual piece)."""

    def jax_data(self, problem):
        return {"lam": np.float64(self.lam), "off": 1.0 - np.eye(problem.d)}

    @staticmethod
    def jax_value(data, V, active=None, smoothing=0.0):
        import jax.numpy as jnp

        return data["lam"] * jnp.sum(jnp.abs(V["M"]) * data["off"])


def test_a_user_term_is_certified_on_the_jax_backend_too(wine5):
    X, y = wine5
    problem = mo.LMNNProblem(X, y, k=2, regularizer=[OffDiagonalAbsJax(0.05)])
    exact = mo.solve(problem, backend="cvxpy", solver="CLARABEL")
    fast = mo.solve(problem, backend="jax", tol=1e-6)
    for sol in (exact, fast):
        assert sol.status is mo.Status.OPTIMAL, sol.message
        assert sol.certificate.rel_gap <= 1e-6 and sol.certificate.details["dual form"].startswith("generic")
    assert fast.objective == pytest.approx(exact.objective, rel=1e-5)
    reference = _textbook(problem)
    assert max(exact.certificate.lower, fast.certificate.lower) <= reference + 1e-7 * abs(reference)
