"""An adversarial search for a certificate that is wrong: a lower bound above the true optimum.

A lower bound is wrong as soon as it exceeds the objective of ANY PSD matrix, so the search needs no trusted
solver: for each generated problem it collects feasible metrics (an exact Clarabel solve of the full program,
the metrics that exploit a degenerate column, scaled identities) and evaluates each with the brute-force
objective of ``tests/test_certify.py`` (written from JMLR 2009, Eq. 14, independent of metricopt's own code).
The smallest of these is an upper bound on the optimum; every certificate's lower bound, at every candidate,
must stay below it (up to float64 rounding of the brute-force sums, :func:`vtol`).

The problems are built to break bounds that trust a tolerance: a column scaled down to 1e-14 of the others, a
label-leaking column (class-constant, so pulling costs nothing along it while every impostor moves away),
duplicated and collinear columns, a constant column, all of them with and without regularisers.

Two profiles: the default suite's (a few dozen cases) and a long one behind the ``slow`` marker
(``python -m pytest tests/test_certificate_soundness.py -m slow``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import metricopt as mo
from metricopt.terms import Frobenius, Trace

from test_certify import lmnn_objective_bf, vtol

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

FAST = settings(max_examples=30, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
LONG = settings(FAST, max_examples=400)

#: the label-leaking columns, the ones that broke the bound, drawn most often
KINDS = ("tiny_leak", "tiny_leak", "tiny_leak_duplicate", "tiny_feature", "duplicate", "collinear", "constant")


@st.composite
def adversarial_lmnn(draw):
    kind = draw(st.sampled_from(KINDS))
    k = draw(st.integers(1, 2))
    n_classes = draw(st.integers(2, 3))
    per = draw(st.integers(k + 1, 6))
    d = draw(st.integers(1, 3))
    mu = draw(st.floats(0.1, 0.9))
    reg = draw(st.sampled_from(("none", "none", "none", "trace", "frobenius")))
    lam = draw(st.floats(1e-3, 1.0))
    tiny = 10.0 ** draw(st.integers(-14, -6))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), per)
    X = rng.normal(size=(y.size, d)) + 0.5 * rng.normal(size=(n_classes, d))[y]
    if kind == "tiny_leak":
        X = np.c_[X, tiny * y]
    elif kind == "tiny_feature":
        X = np.c_[X, tiny * rng.normal(size=y.size)]
    elif kind == "duplicate":
        X = np.c_[X, X[:, 0]]
    elif kind == "collinear":
        X = np.c_[X, 3.0 * X[:, 0] - 0.7]
    elif kind == "constant":
        X = np.c_[X, np.full(y.size, 2.5)]
    else:  # a duplicated tiny label-leaking column
        X = np.c_[X, tiny * y, tiny * y]
    regularizer = {"none": None, "trace": Trace(lam), "frobenius": Frobenius(lam)}[reg]
    note(f"kind={kind} seed={seed} n={y.size} d={X.shape[1]} k={k} mu={mu!r} reg={reg} lam={lam!r} tiny={tiny:g}")
    p = mo.LMNNProblem(X, y, k=k, mu=mu, regularizer=regularizer)
    regs = {"frob": lam if reg == "frobenius" else 0.0, "trace": lam if reg == "trace" else 0.0}
    return p, regs, rng


def _feasible_metrics(p, rng):
    """PSD metrics whose brute-force objectives bound the optimum from above."""
    d = p.d
    out = [("identity", np.eye(d)), ("zero", np.zeros((d, d)))]
    sol = p.solve(solver="CLARABEL", working_set=False, certify=None, solver_tol=1e-10)
    if sol.M is not None:
        out.append(("clarabel", sol.M))
    # along each column alone, and added to the solution, at scales that make the column's spread about 1..100:
    # a label-leaking column then separates the classes at no pull cost
    spread = np.ptp(p.X, axis=0)
    for j in range(d):
        if spread[j] == 0:
            continue
        E = np.zeros((d, d))
        E[j, j] = 1.0 / spread[j] ** 2
        for t in (1.0, 4.0, 100.0):
            out.append((f"column {j} x{t:g}", t * E))
            if sol.M is not None:
                out.append((f"clarabel + column {j} x{t:g}", sol.M + t * E))
    A = rng.normal(size=(d, d))
    out.append(("random", A @ A.T))
    return out


def _check_no_bound_above_the_optimum(case):
    p, regs, rng = case
    metrics = _feasible_metrics(p, rng)
    values = {name: lmnn_objective_bf(p.X, p.y, p.target_neighbors, p.mu, M, **regs) for name, M in metrics}
    best_name = min(values, key=values.get)
    best = values[best_name]
    note(f"smallest feasible objective {best!r} at {best_name}")
    certified = {"identity", "clarabel", "random", best_name}  # the others only pin the optimum from above
    for name, M in metrics:
        if name not in certified:
            continue
        cert = mo.certify(p, M)
        assert cert.lower <= best + vtol(best), (
            f"lower bound {cert.lower!r} at the candidate '{name}' exceeds the objective {best!r} of the feasible "
            f"metric '{best_name}'\n{cert.report()}")
        # the upper bound is the objective at the (PSD) candidate itself
        assert cert.upper == pytest.approx(values[name], rel=1e-6, abs=1e-9)


@FAST
@given(adversarial_lmnn())
def test_no_lower_bound_above_a_feasible_objective(case):
    _check_no_bound_above_the_optimum(case)


@pytest.mark.slow
@LONG
@given(adversarial_lmnn())
def test_no_lower_bound_above_a_feasible_objective_long(case):
    _check_no_bound_above_the_optimum(case)


def test_the_reported_label_leak_case():
    """The case of the reliability report: a class offset of 1e-12 in a third column. The optimum is 0 (the
    column separates the classes, and pulling along it costs nothing), so no bound may be positive, and no
    backend may call a metric with a positive objective optimal."""
    y = np.repeat([0, 1, 2], 7)
    X = np.c_[np.random.default_rng(4).normal(size=(21, 2)), 1e-12 * y]
    p = mo.LMNNProblem(X, y, k=2)
    assert p.objective(np.diag([0.0, 0.0, 2e24])) == 0.0
    for M in (np.eye(3), np.diag([1.0, 1.0, 1e20])):
        assert mo.certify(p, M).lower <= 0.0
    for backend in ("cvxpy", "jax"):
        sol = mo.solve(p, backend=backend)
        assert sol.certificate is not None and sol.certificate.lower <= 0.0, backend
        if sol.status is mo.Status.OPTIMAL:  # only at the optimum 0 itself
            assert sol.objective <= 1e-9, (backend, sol)
    # the exact backend, which works in per-feature powers of two, reaches the optimum itself
    sol = mo.solve(p, backend="cvxpy", solver="CLARABEL")
    assert sol.objective <= 1e-6, sol


def test_scaled_down_data_solves_exactly_on_the_conic_solvers():
    """LMNN on data scaled by 1e-6 has the optimum of the unscaled data (the metric scales by 1e12): the exact
    backend, on both conic solvers, reaches and certifies it."""
    r = np.random.default_rng(0)
    X = np.vstack([r.normal(0, 1, (8, 3)) + 3 * i * np.eye(3)[i] for i in range(3)])
    y = np.repeat(np.arange(3), 8)
    ref = mo.solve(mo.LMNNProblem(X, y, k=2), solver="CLARABEL")
    assert ref.status is mo.Status.OPTIMAL
    for scale in (1e-6, 1e-3, 1e3):
        for solver in ("SCS", "CLARABEL"):
            sol = mo.solve(mo.LMNNProblem(X * scale, y, k=2), solver=solver)
            assert sol.status is mo.Status.OPTIMAL, (scale, solver, sol.message)
            assert sol.objective == pytest.approx(ref.objective, rel=1e-5), (scale, solver)
            # the optimum need not be unique, but the metric's distances are the unscaled data's
            assert p_objective_unscaled(X, y, sol.M * scale**2) == pytest.approx(ref.objective, rel=1e-5)


def p_objective_unscaled(X, y, M):
    return mo.LMNNProblem(X, y, k=2).objective(M)


def test_verified_eigenvalue_bounds_hold_for_every_matrix_within_their_error():
    """``min_eig_lower(H, E)`` is below the smallest eigenvalue of every symmetric ``H + D`` with ``|D| <= E`` (here
    the extreme ``D = +-E`` patterns and random ones), ``congruence`` bounds the rounding of ``W^T H W``, and the
    power-of-two scaling gives a unit diagonal up to a factor of two, exactly."""
    from metricopt.certify.verified import congruence, gamma, min_eig_lower, power_of_two_scaling

    rng = np.random.default_rng(0)
    for d in (1, 3, 8):
        A = rng.normal(size=(d, d))
        H = A @ A.T - 0.5 * np.eye(d)
        E = 1e-6 * np.abs(rng.normal(size=(d, d)))
        E = 0.5 * (E + E.T)
        lo = min_eig_lower(H, E)
        for _ in range(50):
            D = rng.uniform(-1, 1, size=(d, d)) * E
            D = 0.5 * (D + D.T)
            assert lo <= np.linalg.eigvalsh(H + D)[0]
        assert lo <= np.linalg.eigvalsh(H - E)[0] and lo <= np.linalg.eigvalsh(H + E)[0]
        assert np.linalg.eigvalsh(H)[0] - lo < 1e-4  # and not uselessly low
        W = rng.normal(size=(d, d))
        G, EG = congruence(W, H)
        exact = W.T @ H @ W  # the reference in float64 too: the bound covers both roundings' difference
        assert np.all(np.abs(G - exact) <= 2 * EG + 1e-300)
        c = power_of_two_scaling(np.abs(np.diag(H)) * 10.0 ** rng.integers(-12, 12, size=d))
        assert np.all(np.log2(c) == np.round(np.log2(c)))
    assert gamma(10) > 0 and gamma(2**60) == np.inf
    dg = np.array([4e-24, 1.0, 3e16, 0.0])
    c = power_of_two_scaling(dg)
    scaled = dg * c * c
    assert np.all((scaled[:3] >= 0.5) & (scaled[:3] <= 2.0)) and c[3] == 1.0


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge", "smooth_hinge"])
def test_an_indefinite_linear_part_never_gives_a_bound_above_the_optimum(loss):
    """A linear term with a negative part (here -5 I) and a Frobenius term: the optimum is negative, and with every
    triplet satisfied at the candidate (no multiplier) the bound is the alpha = 0 bound -||Pi_+(-P)||^2 / (2 lam),
    not 0 (which the fast path returned before: 0 > -24.85, an 'optimal' status for a wrong bound)."""
    from metricopt.terms import Frobenius, Linear

    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(size=(10, 2)) * 0.05, rng.normal(size=(10, 2)) * 0.05 + [3.0, 0.0]]
    y = np.repeat([0, 1], 10)
    problem = mo.LMNNProblem(X, y, k=2, loss=loss, regularizer=[Linear(-5 * np.eye(2)), Frobenius(1.0)])
    optimum = mo.solve(problem, backend="cvxpy", solver="CLARABEL").objective
    assert optimum < -20
    for M in (5 * np.eye(2), 20 * np.eye(2), np.zeros((2, 2))):
        for dual in ("auto", "generic"):
            cert = mo.certify(problem, M, dual=dual)
            assert cert.lower <= optimum + 1e-9 * abs(optimum), (dual, M[0, 0], cert.lower)
