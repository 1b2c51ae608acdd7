"""Tests for the JAX backend on the pair-based problems: MMC (full and diagonal) and POLA
(soft margin by FISTA, hard and soft margin by the paper's online algorithm).

Certified solutions that agree with the exact backend, matrix-form gradients against a
brute-force loop over pairs and ``jax.grad``, the budget / threshold projections against
an independent computation, the online step, one compilation per shape, and the errors."""

from __future__ import annotations

import importlib

import jax

# JAX's global x64 flag before the backend is imported (checked again after the solves)
X64_BEFORE = bool(jax.config.jax_enable_x64)

import cvxpy as cp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from sklearn.datasets import load_iris, load_wine  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import metricopt  # noqa: E402
from metricopt.errors import InputError  # noqa: E402
from metricopt.problems.terms import Frobenius, HalfSquare, PairHinge, SqrtDistances  # noqa: E402
from metricopt.solution import Status  # noqa: E402

mj = importlib.import_module("metricopt.backends.jax")
terms_module = importlib.import_module("metricopt.problems.terms")
from metricopt.backends.jax.geometry import Parametrization, Setup  # noqa: E402
from metricopt.backends.jax.loop import Objective  # noqa: E402
from metricopt.backends.jax.solvers import OnlinePOLA  # noqa: E402

TOL = 1e-6


def _split(loader, n_train=10, n_test=5):
    """The first ``n_train`` points of each class (standardized), and the next ``n_test`` of each
    class as test points (standardized with the training statistics)."""
    X, y = loader(return_X_y=True)
    classes = np.unique(y)
    tr = np.concatenate([np.flatnonzero(y == c)[:n_train] for c in classes])
    te = np.concatenate([np.flatnonzero(y == c)[n_train:n_train + n_test] for c in classes])
    scaler = StandardScaler().fit(X[tr])
    return scaler.transform(X[tr]), y[tr], scaler.transform(X[te])


def _random_psd(d, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(d, d))
    return scale * (B @ B.T / d + 0.1 * np.eye(d))


def _jdata(term, problem):
    import jax.numpy as jnp

    return {k: jnp.asarray(v) for k, v in term.jax_data(problem).items()}


def _sym(A):
    A = np.asarray(A, dtype=np.float64)
    return 0.5 * (A + A.T)


# --------------------------------------------------------------------------- problems, solved once
CASES = {
    # name: (loader, problem factory)
    "mmc_full": (load_iris, lambda X, y: metricopt.MMCProblem(X, y)),
    "mmc_diag": (load_wine, lambda X, y: metricopt.MMCProblem(X, y, diagonal=True)),
    "pola_soft": (load_iris, lambda X, y: metricopt.POLAProblem(X, y, C=1.0)),
}


@pytest.fixture(scope="module")
def solved():
    """Each problem with its exact and its JAX solution (computed once, lazily)."""
    cache = {}

    def get(name):
        if name not in cache:
            loader, make = CASES[name]
            X, y, X_test = _split(loader)
            problem = make(X, y)
            exact = problem.solve()
            sol = problem.solve(backend="jax", tol=TOL)
            cache[name] = (problem, exact, sol, X_test)
        return cache[name]

    return get


@pytest.mark.parametrize("name", list(CASES))
def test_certified_and_agrees_with_exact_backend(solved, name):
    problem, exact, sol, X_test = solved(name)
    assert exact.status is Status.OPTIMAL
    assert sol.backend == "jax" and sol.solver == "fista"
    assert sol.status is Status.OPTIMAL, sol.message
    cert = sol.certificate
    assert cert is not None and cert.rel_gap <= TOL
    assert sol.stats["certificate_rel_gap"] == cert.rel_gap
    assert sol.stats["dtype"] == "float64" and sol.M.dtype == np.float64
    # the reported objective is metricopt's own float64 value at the returned point
    assert sol.objective == pytest.approx(problem.objective(sol.M, **sol.variables), rel=1e-13)
    assert sol.objective == pytest.approx(cert.upper, rel=1e-13)

    # objectives: each solution is within its certified relative gap of the common optimum,
    # so they differ by at most the larger gap (<= 1e-6 relative) -- stated tolerance 2e-6 relative
    f_jax, f_ex = sol.objective, exact.objective
    gap_ex = exact.certificate.rel_gap if exact.certificate is not None else TOL
    assert abs(f_jax - f_ex) <= (cert.rel_gap + gap_ex + 1e-12) * abs(f_ex)
    assert abs(f_jax - f_ex) <= 2e-6 * abs(f_ex)
    # the exact solution's objective is an upper bound on the optimum >= the JAX lower bound
    assert f_ex >= cert.lower - 1e-12 * abs(f_ex)

    # feasibility of the returned point
    M = sol.M
    assert np.linalg.eigvalsh(M).min() >= -1e-10 * max(1.0, np.abs(M).max())
    if isinstance(problem, metricopt.MMCProblem):
        assert float(np.sum(problem.similar_matrix * M)) <= 1.0 + 1e-9
        if problem.diagonal:
            np.testing.assert_array_equal(M, np.diag(np.diag(M)))
    else:
        assert sol.variables["b"] >= 1.0

    rep = metricopt.check_agreement(problem, exact, sol, X_test)
    assert rep.passed, rep.report()
    metric_check = next(c for c in rep.checks if c.name == "metrics")
    # POLA is strongly convex in M (1/2 ||M||_F^2): the metrics themselves must agree; MMC's need not
    assert metric_check.applies == isinstance(problem, metricopt.POLAProblem)
    assert any(c.name.endswith("test predictions") and c.applies for c in rep.checks)
    assert bool(jax.config.jax_enable_x64) == X64_BEFORE


# --------------------------------------------------------------------------- gradients
def _huber(h, s):
    """Independent numpy centred Huber (value, derivative); ``s = 0`` is the hinge."""
    if s == 0:
        return np.maximum(h, 0.0), (h > 0).astype(float)
    phi = np.where(h >= s / 2, h, np.where(h > -s / 2, (h + s / 2) ** 2 / (2 * s), 0.0))
    return phi, np.clip((h + s / 2) / s, 0.0, 1.0)


@pytest.fixture(scope="module")
def mmc_small():
    X, y, _ = _split(load_iris, n_train=6)
    return metricopt.MMCProblem(X, y)


@pytest.fixture(scope="module")
def pola_small():
    X, y, _ = _split(load_iris, n_train=6)
    return metricopt.POLAProblem(X, y, C=0.7)


@pytest.fixture(params=["gram", "differences"])
def pair_form(request, monkeypatch):
    """Both forms of the pair terms' JAX data (points and indices with ``K = X M X^T``, or the differences)."""
    monkeypatch.setattr(terms_module, "PAIR_FORM", request.param)
    return request.param


def _check_form(data, form):
    assert ("D" in data) == (form == "differences") and ("X" in data) == (form == "gram")


@pytest.mark.parametrize("smoothing", [0.0, 0.4])
@pytest.mark.parametrize("diagonal", [False, True])
def test_sqrt_distances_gradient_matches_brute_force_and_autodiff(mmc_small, smoothing, diagonal, pair_form):
    problem = mmc_small
    term = next(t for t in problem.terms if isinstance(t, SqrtDistances))
    _check_form(term.jax_data(problem), pair_form)
    M = _random_psd(problem.d, 1, scale=0.05)
    if diagonal:
        M = np.diag(np.diag(M))
    data_np = term.jax_data(problem)
    eps = smoothing * float(data_np["scale"])
    assert smoothing == 0 or eps > 0

    # brute force: one pair at a time
    value, exact, G_ref = 0.0, 0.0, np.zeros_like(M)
    X = problem.X
    for a, b in term.pairs:
        v = X[a] - X[b]
        dist = v @ M @ v
        r = np.sqrt(dist + eps ** 2)
        value += term.weight * r
        exact += term.weight * np.sqrt(dist)
        G_ref += term.weight * np.outer(v, v) / (2.0 * r)
    assert exact == pytest.approx(term.value(problem, {"M": M}), rel=1e-13)

    with jax.enable_x64(True):
        import jax.numpy as jnp

        data = _jdata(term, problem)
        V = {"M": jnp.asarray(M)}
        val, ex, g = SqrtDistances.jax_value_grad(data, V, None, smoothing)
        assert set(g) == {"M"} and g["M"].dtype == jnp.float64
        G_auto = jax.grad(lambda Mx: SqrtDistances.jax_value(data, {"M": Mx}, None, smoothing))(V["M"])
        jv = SqrtDistances.jax_value(data, V, None, smoothing)

    scale = np.abs(G_ref).max()
    np.testing.assert_allclose(np.asarray(g["M"]), G_ref, atol=1e-11 * scale, rtol=0)
    np.testing.assert_allclose(_sym(G_auto), G_ref, atol=1e-11 * scale, rtol=0)
    assert float(val) == pytest.approx(value, rel=1e-12)
    assert float(jv) == pytest.approx(value, rel=1e-12)
    assert float(ex) == pytest.approx(exact, rel=1e-12)
    if smoothing == 0:
        assert float(val) == pytest.approx(term.value(problem, {"M": M}), rel=1e-12)
    else:
        # the smoothed root lies above the root (weight -1: the smoothed value below the exact one)
        assert float(val) < float(ex)


@pytest.mark.parametrize("smoothing", [0.0, 0.5])
def test_pair_hinge_gradient_matches_brute_force_and_autodiff(pola_small, smoothing, pair_form):
    problem = pola_small
    term = next(t for t in problem.terms if isinstance(t, PairHinge))
    _check_form(term.jax_data(problem), pair_form)
    M = _random_psd(problem.d, 2, scale=0.3)
    b = 2.3
    X, C = problem.X, term.C

    value, exact, G_ref, gb_ref, hs = 0.0, 0.0, np.zeros_like(M), 0.0, []
    for (p, q), yt in zip(term.pairs, term.labels):
        v = X[p] - X[q]
        h = 1.0 - yt * (b - v @ M @ v)
        hs.append(h)
        phi, dphi = _huber(np.array(h), smoothing)
        value += C * float(phi)
        exact += C * max(h, 0.0)
        G_ref += C * float(dphi) * yt * np.outer(v, v)
        gb_ref += -C * float(dphi) * yt
    hs = np.array(hs)
    # a meaningful point: active and inactive pairs, of both labels
    assert 0 < np.sum(hs > 0) < hs.size
    assert np.any((hs > 0) & (term.labels > 0)) and np.any((hs > 0) & (term.labels < 0))
    if smoothing == 0:
        assert np.min(np.abs(hs)) > 1e-6  # no pair at a kink: the hinge is differentiable here
    else:
        assert np.any(np.abs(hs) < smoothing / 2)  # some pairs in the quadratic zone
    V_np = {"M": M, "b": b}
    assert exact == pytest.approx(term.value(problem, V_np), rel=1e-13)

    with jax.enable_x64(True):
        import jax.numpy as jnp

        data = _jdata(term, problem)
        V = {"M": jnp.asarray(M), "b": jnp.asarray(b)}
        val, ex, g = PairHinge.jax_value_grad(data, V, None, smoothing)
        assert set(g) == {"M", "b"}
        g_auto = jax.grad(lambda Vx: PairHinge.jax_value(data, Vx, None, smoothing))(V)

    scale = np.abs(G_ref).max()
    np.testing.assert_allclose(np.asarray(g["M"]), G_ref, atol=1e-11 * scale, rtol=0)
    np.testing.assert_allclose(_sym(g_auto["M"]), G_ref, atol=1e-11 * scale, rtol=0)
    assert float(g["b"]) == pytest.approx(gb_ref, rel=1e-12, abs=1e-12)
    assert float(g_auto["b"]) == pytest.approx(gb_ref, rel=1e-12, abs=1e-12)
    assert float(val) == pytest.approx(value, rel=1e-12)
    assert float(ex) == pytest.approx(exact, rel=1e-12)
    if smoothing == 0:
        assert float(val) == pytest.approx(term.value(problem, V_np), rel=1e-12)
    else:
        # [h]_+ <= phi_s(h) <= [h]_+ + s/8 per pair
        assert exact <= float(val) <= exact + C * hs.size * smoothing / 8


def test_pola_regularizer_pieces(pola_small):
    problem = pola_small
    M = _random_psd(problem.d, 3)
    V_np = {"M": M, "b": 1.7}
    with jax.enable_x64(True):
        import jax.numpy as jnp

        V = {"M": jnp.asarray(M), "b": jnp.asarray(1.7)}
        for t in problem.terms:
            if not isinstance(t, (Frobenius, HalfSquare)):
                continue
            data = _jdata(t, problem)
            val, ex, g = type(t).jax_value_grad(data, V)
            assert float(val) == pytest.approx(t.value(problem, V_np), rel=1e-13)
            assert float(ex) == pytest.approx(t.value(problem, V_np), rel=1e-13)
            g_auto = jax.grad(lambda Vx: type(t).jax_value(data, Vx))(V)
            for name, gv in g.items():
                np.testing.assert_allclose(np.asarray(gv), np.asarray(g_auto[name]), atol=1e-12)
            # no gradient for a variable the term does not depend on
            for name in set(V) - set(g):
                assert float(jnp.abs(g_auto[name]).max()) == 0.0


@pytest.mark.parametrize("kind", ["mmc_full", "mmc_diag", "pola"])
def test_objective_chain_rule_through_the_geometry(kind):
    """The solver's gradient in ``Z`` (terms' matrix-form gradients mapped back by
    ``Parametrization.pack_grad``) equals ``jax.grad`` of the terms' values through ``unpack``."""
    X, y, _ = _split(load_wine if kind == "mmc_diag" else load_iris, n_train=6)
    if kind == "pola":
        problem = metricopt.POLAProblem(X, y, C=0.8)
    else:
        problem = metricopt.MMCProblem(X, y, diagonal=(kind == "mmc_diag"))
    setup = Setup(problem)
    geometry = setup.geometry
    Z = setup.from_point({"M": _random_psd(problem.d, 4, scale=0.3), "b": 1.9})
    if kind == "mmc_diag":
        Z = np.diag(np.diag(Z))
    s = 0.2
    with jax.enable_x64(True):
        import jax.numpy as jnp

        classes = tuple(type(t) for t in problem.terms)
        data = tuple(_jdata(t, problem) for t in problem.terms)
        gdata = {"T": jnp.asarray(setup.gdata["T"])} if "T" in setup.gdata else {}
        objective = Objective(classes, data, (None,) * len(classes), geometry, gdata)
        Zj = jnp.asarray(Z)
        val, ex, G = objective(Zj, s)

        def f(Zx):
            V = geometry.unpack(Zx, gdata)
            return sum(c.jax_value(dat, V, None, s) for c, dat in zip(classes, data))

        G_auto = _sym(jax.grad(f)(Zj))
        fv = float(f(Zj))
    if kind == "mmc_diag":
        G_auto = np.diag(np.diag(G_auto))  # the diagonal variant moves on diagonal Z only
    G = np.asarray(G)
    np.testing.assert_allclose(G, G_auto, atol=1e-11 * np.abs(G_auto).max(), rtol=0)
    assert float(val) == pytest.approx(fv, rel=1e-12)
    # the exact value at Z is the problem's objective at the unpacked point
    V = setup.to_point(Z)
    assert float(ex) == pytest.approx(problem._objective(V), rel=1e-12)


# --------------------------------------------------------------------------- projections
def _cvxpy_budget_projection(S, diagonal):
    n = S.shape[0]
    if diagonal:
        z = cp.Variable(n, nonneg=True)
        prog = cp.Problem(cp.Minimize(cp.sum_squares(z - np.diag(S))), [cp.sum(z) <= 1])
    else:
        Z = cp.Variable((n, n), PSD=True)
        prog = cp.Problem(cp.Minimize(cp.sum_squares(Z - S)), [cp.trace(Z) <= 1])
    prog.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    assert prog.status == cp.OPTIMAL
    return np.diag(z.value) if diagonal else _sym(Z.value)


def _assert_is_budget_projection(S, P, diagonal, atol=1e-10):
    """Exact optimality of ``P`` as the projection of ``S`` onto K = {PSD, trace <= 1} (diagonal:
    non-negative diagonal, sum <= 1): K is the convex hull of 0 and the unit-trace rank-one
    matrices v v^T (diagonal: e_i e_i^T), so <S - P, Q - P> <= 0 for all Q in K reduces to
    <S - P, P> >= 0 and lambda_max(S - P) <= <S - P, P> (diagonal: max_i (S - P)_ii)."""
    if diagonal:
        np.testing.assert_array_equal(P, np.diag(np.diag(P)))
        assert np.diag(P).min() >= 0
    assert np.linalg.eigvalsh(P).min() >= -atol
    assert np.trace(P) <= 1.0 + atol
    R = _sym(S) if not diagonal else np.diag(np.diag(S))
    R = R - P
    inner = float(np.sum(R * P))
    top = float(np.diag(R).max()) if diagonal else float(np.linalg.eigvalsh(R).max())
    assert inner >= -atol
    assert top <= inner + atol


def _budget_cases():
    rng = np.random.default_rng(7)
    A = rng.normal(size=(5, 5))
    A = A + A.T
    B = rng.normal(size=(5, 5))  # not symmetric: the projection uses the symmetric part
    return {
        "below": 0.05 * A,  # clipped trace < 1: the trace bound is inactive, eigenvalues clipped at 0
        "above": 1.5 * A + np.diag([0.5, 0.0, 0.0, 0.0, 0.5]),  # clipped trace > 1: eigenvalues shifted down
        "nonsym_above": 2.0 * B,
        "identity_ties": 3.0 * np.eye(5),  # repeated eigenvalues: the projection is I / 5
        "all_negative": -np.eye(5) - 0.1 * np.ones((5, 5)),  # projection 0
    }


@pytest.mark.parametrize("diagonal", [False, True])
@pytest.mark.parametrize("case", list(_budget_cases()))
def test_project_psd_with_trace_bound(case, diagonal):
    S = _budget_cases()[case]
    with jax.enable_x64(True):
        P = np.asarray(mj.project_psd(jax.numpy.asarray(S), trace_bound=1.0, diagonal=diagonal))
        P_geom = np.asarray(Parametrization("budget", diagonal).project(jax.numpy.asarray(S)))
    np.testing.assert_array_equal(P, P_geom)
    assert P.dtype == np.float64
    _assert_is_budget_projection(S, P, diagonal)
    np.testing.assert_allclose(P, _cvxpy_budget_projection(_sym(S), diagonal), atol=1e-6, rtol=0)

    sd = np.diag(S) if diagonal else np.linalg.eigvalsh(_sym(S))
    clipped_trace = float(np.sum(np.maximum(sd, 0.0)))
    if clipped_trace <= 1.0:
        # the bound is inactive: the plain projection onto the cone (diagonal: clipping)
        plain = np.diag(np.maximum(np.diag(S), 0)) if diagonal else metricopt.linalg.project_psd(_sym(S))
        np.testing.assert_allclose(P, plain, atol=1e-12)
    else:
        assert np.trace(P) == pytest.approx(1.0, abs=1e-12)
    if case == "identity_ties":
        np.testing.assert_allclose(P, np.eye(5) / 5, atol=1e-14)
    if case == "all_negative":
        np.testing.assert_allclose(P, 0.0, atol=1e-14)
    assert case != "below" or clipped_trace < 1.0
    assert case not in ("above", "nonsym_above") or clipped_trace > 1.0


def test_threshold_projection_gives_psd_metric_and_b_at_least_one():
    rng = np.random.default_rng(8)
    geom = Parametrization("threshold")
    for c in (-0.7, 0.0, 0.4):
        A = rng.normal(size=(5, 5))
        Z = A + A.T
        Z[-1, -1] = c
        with jax.enable_x64(True):
            P = np.asarray(geom.project(jax.numpy.asarray(Z)))
            V = geom.unpack(P, {})
        M, b = np.asarray(V["M"]), float(V["b"])
        assert np.linalg.eigvalsh(M).min() >= -1e-12
        assert b >= 1.0
        assert b == pytest.approx(1.0 + max(c, 0.0), abs=1e-15)
        np.testing.assert_allclose(M, metricopt.linalg.project_psd(Z[:-1, :-1]), atol=1e-12)
        # the projection is block diagonal: nothing couples M and b
        np.testing.assert_array_equal(P[-1, :-1], 0.0)
        np.testing.assert_array_equal(P[:-1, -1], 0.0)


# --------------------------------------------------------------------------- the online step
def _online_step(X, pairs, labels, M0, b0):
    """One pass of OnlinePOLA over the given pairs (the jitted pieces, without the driver)."""
    problem = metricopt.POLAProblem(X, pairs=pairs, pair_labels=labels)
    carrier = PairHinge(problem.pairs, problem.pair_labels, 1.0)
    Z0 = np.zeros((problem.d + 1,) * 2)
    Z0[:-1, :-1], Z0[-1, -1] = M0, b0 - 1.0
    solver = OnlinePOLA()
    with jax.enable_x64(True):
        import jax.numpy as jnp

        objective = Objective((PairHinge,), (_jdata(carrier, problem),), (None,), Parametrization("threshold"), {},
                              roles=("pair_hinge",))
        st = solver.update(objective, solver.init(jnp.asarray(Z0)))
        Z = np.asarray(st["M"])
    return Z[:-1, :-1], Z[-1, -1] + 1.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_online_step_on_a_violated_dissimilar_pair_lands_on_the_margin(seed, pair_form):
    rng = np.random.default_rng(seed)
    d = 4
    X = rng.normal(size=(2, d))
    v = X[0] - X[1]
    M0 = _random_psd(d, seed + 10, scale=0.2)
    d0 = float(v @ M0 @ v)
    # dissimilar pair inside the margin: y (b - d) = d - b < 1; b large enough that b - tau >= 1,
    # so that neither the PSD cone (M only grows along v v^T) nor b >= 1 corrects the step
    b0 = d0 + 0.5 + 3.0 * (float(v @ v) ** 2 + 1.0)
    loss = 1.0 - (d0 - b0)
    tau = loss / (float(v @ v) ** 2 + 1.0)
    assert loss > 0 and b0 - tau > 1.0
    M, b = _online_step(X, [[0, 1]], [-1.0], M0, b0)
    margin = -(b - float(v @ M @ v))
    assert margin == pytest.approx(1.0, abs=1e-12)
    # the closed form of the half-space projection
    np.testing.assert_allclose(M, M0 + tau * np.outer(v, v), atol=1e-12)
    assert b == pytest.approx(b0 - tau, abs=1e-12)

    # a pair already beyond its margin is left alone
    M2, b2 = _online_step(X, [[0, 1]], [-1.0], M, b - 0.5)
    np.testing.assert_array_equal(M2, M)
    assert b2 == pytest.approx(b - 0.5, abs=1e-14)


@pytest.fixture(scope="module")
def separable():
    """Two tight, far-apart clusters: hard-margin POLA is feasible."""
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(size=(6, 2)) * 0.3 + [3.0, 0.0], rng.normal(size=(6, 2)) * 0.3 - [3.0, 0.0]])
    y = np.repeat([0, 1], 6)
    problem = metricopt.POLAProblem(X, y)
    exact = problem.solve()
    assert exact.status is Status.OPTIMAL
    return problem, exact


def _margins(problem, sol):
    d = problem.pair_distances(problem.pairs[:, 0], problem.pairs[:, 1], sol.M)
    return problem.pair_labels * (sol.variables["b"] - d)


def _check_online_solution(problem, sol, f_star, max_iter):
    assert sol.backend == "jax" and sol.solver == "online"
    cert = sol.certificate
    assert cert is not None
    # never optimal without a certificate within tol; a run stopped by max_iter says so
    assert (sol.status is Status.OPTIMAL) == (cert.rel_gap <= TOL)
    if sol.status is not Status.OPTIMAL:
        assert sol.status in (Status.ITERATION_LIMIT, Status.OPTIMAL_INACCURATE)
        if sol.stats["iterations"] >= max_iter:
            assert sol.status is Status.ITERATION_LIMIT
    # the certificate brackets the exact optimum
    slack = 1e-7 * abs(f_star)
    assert cert.lower <= f_star + slack
    assert f_star <= cert.upper + slack
    assert sol.variables["b"] >= 1.0
    assert np.linalg.eigvalsh(sol.M).min() >= -1e-10


@pytest.mark.parametrize("max_iter", [1, 3, 30])
def test_online_hard_margin_on_a_separable_problem(separable, max_iter):
    problem, exact = separable
    sol = problem.solve(backend="jax", solver="online", max_iter=max_iter, tol=TOL)
    _check_online_solution(problem, sol, exact.objective, max_iter)
    assert sol.stats["iterations"] <= max_iter
    if sol.status is Status.OPTIMAL:
        assert _margins(problem, sol).min() >= 1.0 - 1e-6
    if sol.status is Status.OPTIMAL_INACCURATE:
        # stalled: a full pass made no update, so no pair violates its margin
        assert _margins(problem, sol).min() >= 1.0 - 1e-12
    if max_iter >= 30:
        # after several passes on this well-separated problem the iterate is feasible
        assert _margins(problem, sol).min() >= 1.0 - 1e-6
        assert sol.certificate.verdict != "infeasible"
        assert sol.objective >= exact.objective * (1 - 1e-9)


def test_online_iteration_limit_on_non_separable_start():
    """Hard-margin POLA on iris (2 classes): after few passes the online iterate violates margins;
    it is reported (iteration_limit) with an infeasible certificate, never as optimal."""
    X, y, _ = _split(load_iris, n_train=8)
    keep = y < 2
    problem = metricopt.POLAProblem(X[keep], y[keep])
    exact = problem.solve()
    assert exact.status is Status.OPTIMAL
    for max_iter in (2, 5):
        sol = problem.solve(backend="jax", solver="online", max_iter=max_iter, tol=TOL)
        _check_online_solution(problem, sol, exact.objective, max_iter)
        assert sol.status is Status.ITERATION_LIMIT
        if _margins(problem, sol).min() < 1.0 - 1e-6:
            assert sol.certificate.verdict == "infeasible"


def test_online_on_soft_margin_pola(solved):
    problem, exact, _, _ = solved("pola_soft")
    sol = problem.solve(backend="jax", solver="online", max_iter=4, tol=TOL)
    _check_online_solution(problem, sol, exact.objective, 4)
    assert sol.status is Status.ITERATION_LIMIT
    assert sol.stats["iterations"] == 4


# --------------------------------------------------------------------------- compilation
def test_no_recompilation_for_a_second_mmc_solve_of_the_same_shape(solved):
    problem, _, first, _ = solved("mmc_full")
    before = mj.TRACES["run_chunk"]
    again = problem.solve(backend="jax", tol=TOL)
    assert mj.TRACES["run_chunk"] == before
    np.testing.assert_array_equal(again.M, first.M)  # deterministic
    rng = np.random.default_rng(0)
    other = metricopt.MMCProblem(problem.X + 1e-2 * rng.normal(size=problem.X.shape), problem.y)
    sol = other.solve(backend="jax", tol=TOL)
    assert sol.status is Status.OPTIMAL
    assert mj.TRACES["run_chunk"] == before
    assert bool(jax.config.jax_enable_x64) == X64_BEFORE


# --------------------------------------------------------------------------- errors
def test_singular_similar_pair_scatter_is_refused():
    rng = np.random.default_rng(0)
    # 6 points in 10 dimensions: the similar-pair differences span at most 4 directions
    X = rng.normal(size=(6, 10))
    y = np.array([0, 0, 0, 1, 1, 1])
    with pytest.raises(InputError, match="singular"):
        metricopt.MMCProblem(X, y).solve(backend="jax")
    # diagonal: a feature constant within each class has no similar-pair spread
    X = rng.normal(size=(8, 3))
    y = np.repeat([0, 1], 4)
    X[:, 1] = y
    with pytest.raises(InputError, match="singular"):
        metricopt.MMCProblem(X, y, diagonal=True).solve(backend="jax")


@pytest.mark.parametrize("solver", [None, "fista", "subgradient"])
def test_hard_margin_pola_needs_the_online_solver(solver):
    X, y, _ = _split(load_iris, n_train=4)
    problem = metricopt.POLAProblem(X, y)
    with pytest.raises(InputError, match="only with solver='online'"):
        problem.solve(backend="jax", solver=solver)
