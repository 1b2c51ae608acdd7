"""Neighbourhood gerrymandering: the problems, the certified CCCP steps, SGD and the estimator (issue 14)."""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

import metricopt as mo
from metricopt.errors import InputError, NotConvexError
from metricopt.methods.gerrymander.cccp import _batch_gradient, cccp, relieff_weights, sgd, sgd_step
from metricopt.linalg import pair_rows, project_psd
from metricopt import GerrymanderingProblem, GerrymanderStepProblem
from metricopt.methods.gerrymander.problem import FrobeniusTo


def iris_subset(n_per_class=15, seed=0):
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    rng = np.random.default_rng(seed)
    idx = np.concatenate([rng.choice(np.flatnonzero(y == c), n_per_class, replace=False) for c in range(3)])
    return X[idx], y[idx]


def random_psd(rng, d):
    A = rng.normal(size=(d, d))
    return A @ A.T / d


def brute_objective(p, M):
    """The surrogate by enumerating every k-subset (tiny problems only)."""
    X, k, C = p.X, p.k, p.C
    total = 0.0
    for i in range(p.n):
        others = [j for j in range(p.n) if j != i]
        d = {j: float((X[i] - X[j]) @ M @ (X[i] - X[j])) for j in others}
        best_aug, best_correct = -np.inf, -np.inf
        for h in itertools.combinations(others, k):
            counts = np.bincount([p.codes[j] for j in h], minlength=p.classes.size)
            tied = np.flatnonzero(counts == counts.max())
            s = -sum(d[j] for j in h)
            best_aug = max(best_aug, s + max(p.loss_matrix[p.codes[i], t] for t in tied))
            if counts[p.codes[i]] > np.delete(counts, p.codes[i]).max():
                best_correct = max(best_correct, s)
        total += best_aug - best_correct
    reg = {"frobenius": 0.5 * p.lam * np.sum(M * M), "trace": p.lam * np.trace(M),
           "identity": 0.5 * p.lam * np.sum((M - np.eye(p.d)) ** 2)}[p.regularizer]
    return reg + C * total


@pytest.fixture(scope="module")
def tiny():
    rng = np.random.default_rng(5)
    y = np.repeat([0, 1, 2], 3)
    X = rng.normal(size=(9, 2)) + 1.2 * rng.normal(size=(3, 2))[y]
    return X, y


@pytest.mark.parametrize("reg", ["frobenius", "trace", "identity"])
def test_objective_equals_brute_force_and_the_step_majorises_it(tiny, reg):
    X, y = tiny
    p = GerrymanderingProblem(X, y, k=2, C=0.7, lam=0.3, regularizer=reg)
    rng = np.random.default_rng(1)
    M0 = random_psd(rng, 2)
    assert p.objective(M0) == pytest.approx(brute_objective(p, M0), rel=1e-12)
    step = p.step(M0)
    assert step.objective(M0) == pytest.approx(p.objective(M0), rel=1e-12)  # tight at the expansion point
    for _ in range(5):
        M = random_psd(rng, 2)
        assert step.objective(M) >= p.objective(M) - 1e-12 * abs(p.objective(M))  # and above it elsewhere


def _full_step_optimum(step):
    """The CCCP step over every k-subset of every point (tiny problems): the exact optimum."""
    n, k, d = step.n, step.k, step.d
    rows = np.array([(i, *h) for i in range(n) for h in itertools.combinations([j for j in range(n) if j != i], k)])
    Mv = cp.Variable((d, d), PSD=True)
    xi = cp.Variable(n)
    A = pair_rows(step.X, np.repeat(rows[:, 0], k), rows[:, 1:].ravel()).reshape(len(rows), k, -1).sum(axis=1)
    lam_r = step.set_losses(rows[:, 0], rows[:, 1:])
    reg = {"frobenius": 0.5 * step.lam * cp.sum_squares(Mv), "trace": step.lam * cp.trace(Mv),
           "identity": 0.5 * step.lam * cp.sum_squares(Mv - np.eye(d))}[step.regularizer]
    obj = reg + cp.sum(cp.multiply(step.pull, Mv)) + step.C * cp.sum(xi)
    prog = cp.Problem(cp.Minimize(obj), [xi[rows[:, 0]] >= lam_r - A @ cp.vec(Mv, order="C")])
    prog.solve(solver="CLARABEL")
    return prog.value


@pytest.mark.parametrize("reg", ["frobenius", "trace", "identity"])
def test_cutting_plane_step_reaches_the_full_programs_optimum_and_is_certified(tiny, reg):
    X, y = tiny
    p = GerrymanderingProblem(X, y, k=2, C=0.7, lam=0.3, regularizer=reg)
    step = p.step(np.eye(2))
    sol = mo.solve(step, backend="cvxpy", tol=1e-7)
    assert sol.status is mo.Status.OPTIMAL, sol.message
    exact = _full_step_optimum(step)
    assert sol.objective == pytest.approx(exact, rel=1e-6)
    cert = sol.certificate
    assert cert.rel_gap <= 1e-7 and cert.lower <= exact + 1e-7 * abs(exact)
    # a certificate of any other candidate is a valid bound too, and says 'suboptimal'
    other = mo.certify(step, np.eye(2) * 3.0)
    assert other.lower <= exact + 1e-7 * abs(exact) and other.verdict == "suboptimal"


def test_certificates_of_the_step_are_lower_bounds_on_random_problems():
    for seed in range(4):
        rng = np.random.default_rng(seed)
        y = np.repeat([0, 1], 4)
        X = rng.normal(size=(8, 2)) + rng.normal(size=(2, 2))[y]
        for reg in ("frobenius", "trace"):
            p = GerrymanderingProblem(X, y, k=1, C=1.3, lam=0.5, regularizer=reg)
            step = p.step(random_psd(rng, 2))
            exact = _full_step_optimum(step)
            for M in (np.eye(2), random_psd(rng, 2), np.zeros((2, 2))):
                c = mo.certify(step, M)
                assert c.lower <= exact + 1e-7 * max(1.0, abs(exact)), (seed, reg, c.report())
                assert c.upper == pytest.approx(step.objective(M), rel=1e-12)


def test_cccp_is_monotone_with_certified_steps_and_reported_stationary():
    X, y = iris_subset()
    p = GerrymanderingProblem(X, y, k=3)
    sol = cccp(p, init="identity", step_tol=1e-7)
    objs = [h["objective"] for h in sol.stats["history"]]
    assert sol.status is mo.Status.STATIONARY, sol.message
    assert all(b <= a + 1e-12 * abs(a) for a, b in zip(objs, objs[1:]))
    assert objs[-1] < 0.8 * objs[0]
    assert sol.stats["step_gaps"] and max(sol.stats["step_gaps"]) <= 1e-7
    assert sol.objective == pytest.approx(p.objective(sol.M), rel=1e-12)
    # tol's measure, named in the result: the last step's relative decrease (objectives of the last two entries)
    assert "relative decrease" in sol.stats["stationarity_measure"]
    if len(objs) >= 2 and objs[-1] != objs[-2]:
        assert sol.stats["stationarity"] == pytest.approx((objs[-2] - objs[-1]) / abs(objs[-1]), rel=1e-12)
    with pytest.raises(NotConvexError):
        mo.certify(p, sol.M)
    with pytest.raises(InputError):
        mo.solve(p, backend="cvxpy")


def test_cccp_from_zeros_and_relieff():
    X, y = iris_subset(10)
    p = GerrymanderingProblem(X, y, k=3)
    zero = cccp(p, init="zeros")
    # every distance is 0: each point's worst set scores 0 with loss 1, the sets come from the index tie-break
    assert zero.stats["history"][0]["objective"] == pytest.approx(p.n * p.C)
    w = relieff_weights(X, y)
    assert w.shape == (4,) and np.all(w >= 0) and np.argmax(w) in (2, 3)  # the petal features separate iris
    rel = cccp(p, init="relieff", max_iter=3)
    assert rel.stats["history"][0]["objective"] == pytest.approx(p.objective(np.diag(w)))


def test_pegasos_sgd_lowers_the_objective_and_reports_iteration_limit():
    X, y = iris_subset()
    p = GerrymanderingProblem(X, y, k=3, C=1.0, lam=1.0)
    sol = sgd(p, n_epochs=5, batch_size=16, random_state=0)
    assert sol.status is mo.Status.ITERATION_LIMIT and "no stationarity test" in sol.message
    assert sol.objective < p.objective(np.eye(4))
    again = sgd(p, n_epochs=5, batch_size=16, random_state=0)
    assert np.array_equal(sol.M, again.M)  # deterministic for a seed


def test_the_papers_sgd_erases_its_start_at_the_first_step():
    X, y = iris_subset(8)
    p = GerrymanderingProblem(X, y, k=3, C=1.0, lam=1.0)
    M0 = np.diag([5.0, 0.1, 2.0, 0.3])
    # eta_1 = 1 and lam = 1: M_1 = P(M_0 - (M_0 + C dW)) = P(-C dW): nothing of M_0 is left but its sets
    G = _batch_gradient(p, M0, np.array([4]))
    assert np.allclose(sgd_step(p, M0, [4], 1, method="paper"), project_psd(-p.C * G), atol=1e-12)
    # Pegasos: eta_1 = 1 / lam, the same erasure at t = 1 but with the batch scaled by n / b
    assert np.allclose(sgd_step(p, M0, [4, 5], 1), project_psd(-p.C * p.n / 2 * _batch_gradient(p, M0, np.array([4, 5]))),
                       atol=1e-10)
    a = sgd(p, init="identity", method="paper", n_epochs=1, random_state=3)
    assert a.stats["steps"] == p.n


def test_estimator_fits_predicts_and_round_trips(tmp_path):
    X, y = iris_subset()
    Xte, yte = iris_subset(5, seed=9)
    est = mo.GerrymanderingKNN(k=3, solver="cccp").fit(X, y)
    assert est.solution_.status is mo.Status.STATIONARY and est.certificate_ is None
    M = est.get_mahalanobis_matrix()
    assert np.allclose(est.components_.T @ est.components_, M, atol=1e-10)
    pred = est.predict(Xte)
    D = ((Xte[:, None, :] - X[None]) @ M * (Xte[:, None, :] - X[None])).sum(-1)
    assert np.array_equal(pred, mo.gerrymander.latent_knn_predict(D, y, 3))
    assert est.score(Xte, yte) >= 0.9
    path = tmp_path / "g.npz"
    mo.io.save_model(path, est)
    back = mo.io.load_model(path)
    assert isinstance(back, mo.GerrymanderingKNN) and back.get_params() == est.get_params()
    assert np.array_equal(back.components_, est.components_) and np.array_equal(back.predict(Xte), pred)


@pytest.mark.parametrize("params, message", [
    ({"solver": "adam"}, "solver"),
    ({"regularizer": "l1"}, "regularizer"),
    ({"k": 0}, "k"),
    ({"C": -1.0}, "C"),
])
def test_estimator_rejects_bad_parameters(params, message):
    X, y = iris_subset(5)
    with pytest.raises(InputError, match=message):
        mo.GerrymanderingKNN(**params).fit(X, y)


def test_problem_input_errors():
    X, y = iris_subset(5)
    with pytest.raises(InputError, match="at least two classes"):
        GerrymanderingProblem(X[y == 0], y[y == 0], k=2)
    yy = y.copy()
    yy[:4] = 7  # a class of 4 points cannot win a strict majority of 9 neighbours
    with pytest.raises(InputError, match=r"h\* does not exist for k=9.*Use a smaller k or drop those classes"):
        GerrymanderingProblem(X, yy, k=9)
    with pytest.raises(InputError, match="h_star must be"):
        GerrymanderStepProblem(X, y, 3, np.zeros((3, 3), int))
    with pytest.raises(InputError):
        GerrymanderingProblem(X, y, k=3, inference="greedy")


def test_frobenius_to_term_matches_its_dual_piece_and_cvxpy():
    rng = np.random.default_rng(0)
    X, y = iris_subset(5)
    p = GerrymanderingProblem(X, y, k=2)
    t = FrobeniusTo(0.7)
    M = project_psd(random_psd(rng, 4))
    piece = t.dual_piece(p)
    assert t.value(p, {"M": M}) == pytest.approx(np.sum(piece.linear * M) + piece.strong_convexity / 2 * np.sum(M * M)
                                                 + piece.constant, rel=1e-12)
    expr, _ = t.cvxpy(p, {"M": cp.Constant(M)})
    assert float(expr.value) == pytest.approx(t.value(p, {"M": M}), rel=1e-12)
