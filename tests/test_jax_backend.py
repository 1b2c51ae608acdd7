"""Tests for the JAX backend (metricopt.backends.jax): matrix-form gradients, certified
solutions that agree with the exact backend, one compilation per shape, float64 without
touching JAX's global configuration."""

from __future__ import annotations

import importlib
import re

import jax

# JAX's global x64 flag before the backend is imported (checked after import and solves)
X64_BEFORE = bool(jax.config.jax_enable_x64)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from sklearn.datasets import load_iris, load_wine  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import metricopt  # noqa: E402
import metricopt.backends  # noqa: E402
from metricopt.errors import InputError, UnknownOptionError  # noqa: E402
from metricopt.linalg import project_psd  # noqa: E402
from metricopt.problems.terms import Frobenius, Trace, TripletHinge  # noqa: E402
from metricopt.solution import Status  # noqa: E402

mj = importlib.import_module("metricopt.backends.jax")


@pytest.fixture(scope="module")
def iris(iris_lmnn):
    return iris_lmnn


@pytest.fixture(scope="module")
def iris_exact(iris_lmnn_exact):
    return iris_lmnn_exact


@pytest.fixture(scope="module")
def iris_jax(iris):
    return mj.solve(iris, tol=1e-6)


def _small_problem(regularizer=None, n_per_class=10, k=2):
    X, y = load_iris(return_X_y=True)
    idx = np.concatenate([np.flatnonzero(y == c)[:n_per_class] for c in range(3)])
    X = StandardScaler().fit_transform(X[idx])
    return metricopt.LMNNProblem(X, y[idx], k=k, mu=0.6, regularizer=regularizer)


def _random_psd(d, seed):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(d, d))
    return B @ B.T / d + 0.1 * np.eye(d)


def _jax_inputs(problem, M):
    """Every term's JAX data and (for the hinge) the full set of triplets as the active set."""
    import jax.numpy as jnp

    data, actives = [], []
    for t in problem.terms:
        data.append({k: jnp.asarray(v) for k, v in t.jax_data(problem).items()})
        if t.uses_working_set:
            act, size, _, _ = t.jax_active_set(problem, M, margin=1e12)
            assert size == problem.n_triplets
            actives.append({k: jnp.asarray(v) for k, v in act.items()})
        else:
            actives.append(None)
    return data, actives


# --------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("seed", [0, 1])
def test_matrix_form_gradient_matches_brute_force_and_autodiff(seed):
    problem = _small_problem()
    M = _random_psd(problem.d, seed)
    X, mu = problem.X, problem.mu
    T = problem.hinge.all_triplets(problem)

    # brute force: one triplet at a time (the obviously-correct reference)
    G_ref = (1 - mu) * problem.pull_matrix
    value = float(np.sum((1 - mu) * problem.pull_matrix * M))
    hs = []
    for i, j, l in T:
        dij, dil = X[i] - X[j], X[i] - X[l]
        h = 1.0 + dij @ M @ dij - dil @ M @ dil
        hs.append(h)
        if h > 0:
            G_ref = G_ref + mu * (np.outer(dij, dij) - np.outer(dil, dil))
            value += mu * h
    assert np.min(np.abs(hs)) > 1e-6  # no ties: the hinge is differentiable at M
    assert value == pytest.approx(problem.objective(M), rel=1e-12)

    with jax.enable_x64(True):
        import jax.numpy as jnp

        data, actives = _jax_inputs(problem, M)
        Mj = jnp.asarray(M)
        v, ex, G = 0.0, 0.0, 0.0
        for t, dat, act in zip(problem.terms, data, actives):
            a, b, g = type(t).jax_value_grad(dat, {"M": Mj}, act, 0.0)
            v, ex, G = v + a, ex + b, G + g["M"]
        assert G.dtype == jnp.float64

        def total(Mx, s=0.0):
            return sum(type(t).jax_value(dat, {"M": Mx}, act, s) for t, dat, act in zip(problem.terms, data, actives))

        G_auto = jax.grad(total)(Mj)
        G_auto = 0.5 * (G_auto + G_auto.T)

        # the smoothed hinge: matrix form == autodiff as well
        hinge_idx = next(i for i, t in enumerate(problem.terms) if isinstance(t, TripletHinge))
        Gs = TripletHinge.jax_value_grad(data[hinge_idx], {"M": Mj}, actives[hinge_idx], 0.3)[2]["M"]
        Gs_auto = jax.grad(lambda Mx: TripletHinge.jax_value(data[hinge_idx], {"M": Mx}, actives[hinge_idx], 0.3))(Mj)

    scale = np.abs(G_ref).max()
    np.testing.assert_allclose(np.asarray(G), G_ref, atol=1e-10 * scale, rtol=0)
    np.testing.assert_allclose(np.asarray(G_auto), G_ref, atol=1e-10 * scale, rtol=0)
    Gs_auto = np.asarray(Gs_auto)
    np.testing.assert_allclose(np.asarray(Gs), 0.5 * (Gs_auto + Gs_auto.T), atol=1e-10 * scale, rtol=0)
    assert float(v) == pytest.approx(value, rel=1e-12)
    assert float(ex) == pytest.approx(value, rel=1e-12)


def test_regularizer_pieces_match_their_values():
    problem = _small_problem(regularizer=[Frobenius(0.3), Trace(0.2)])
    M = _random_psd(problem.d, 3)
    V = {"M": M}
    with jax.enable_x64(True):
        import jax.numpy as jnp

        for t in problem.terms:
            if t.uses_working_set:
                continue
            dat = {k: jnp.asarray(v) for k, v in t.jax_data(problem).items()}
            val, ex, g = type(t).jax_value_grad(dat, {"M": jnp.asarray(M)})
            assert float(val) == pytest.approx(t.value(problem, V), rel=1e-13)
            g_auto = jax.grad(lambda Mx: type(t).jax_value(dat, {"M": Mx}))(jnp.asarray(M))
            np.testing.assert_allclose(np.asarray(g["M"]), np.asarray(g_auto), atol=1e-12)


def test_project_psd_matches_numpy():
    rng = np.random.default_rng(4)
    S = rng.normal(size=(6, 6))
    with jax.enable_x64(True):
        P = np.asarray(mj.project_psd(jax.numpy.asarray(S)))
    np.testing.assert_allclose(P, project_psd(S), atol=1e-12)
    assert np.linalg.eigvalsh(P).min() > -1e-12


# --------------------------------------------------------------------------- solutions
def test_iris_certified_and_agrees_with_exact_backend(iris, iris_exact, iris_jax):
    sol = iris_jax
    assert sol.backend == "jax" and sol.solver == mj.DEFAULT_SOLVER
    assert sol.status is Status.OPTIMAL
    gap = sol.stats["certificate_rel_gap"]
    assert gap <= 1e-6
    assert sol.certificate is not None and sol.certificate.rel_gap == gap
    assert sol.objective == pytest.approx(iris.objective(sol.M), rel=1e-14)
    # the exact optimum lies between the JAX certificate's bounds (up to the exact solve's own gap)
    exact = iris_exact.objective
    assert abs(sol.objective - exact) <= (gap + iris_exact.stats["certificate_rel_gap"] + 1e-9) * exact
    assert exact >= sol.certificate.lower * (1 - 1e-9)
    assert sol.stats["iterations"] > 0 and sol.stats["time"] > 0
    for key in ("time", "iterations", "certificate_rel_gap", "history", "active_set_size"):
        assert key in sol.stats


def test_float64_and_global_x64_flag_unchanged(iris_jax):
    assert bool(jax.config.jax_enable_x64) == X64_BEFORE  # after import and a solve
    assert iris_jax.stats["dtype"] == "float64"
    assert iris_jax.M.dtype == np.float64
    # the JAX loop's own objective (active set) agrees with metricopt's float64 value to
    # float64 precision (float32 would be off by ~1e-6 relative)
    assert iris_jax.stats["solver_objective"] == pytest.approx(iris_jax.objective, rel=1e-11)


def test_a_small_problem_compiles_the_loop_once():
    """Its active set falls from 711 triplets at the start (bucket 1024) to 184, less than a quarter of the bucket;
    a small bucket is kept (padding is cheaper than a compilation), so the loop is traced once (the former rule,
    moving down to bucket 512, traced it twice). The shape (57 points, 11 features) is used by no other test, so
    the loop is not in JAX's cache beforehand."""
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)[::3, :11]
    problem = metricopt.LMNNProblem(X[:57], y[::3][:57], k=3, mu=0.5)
    before = mj.TRACES["run_chunk"]
    sol = mj.solve(problem, tol=1e-6)
    assert sol.status is Status.OPTIMAL
    assert mj.TRACES["run_chunk"] - before == 1


def test_a_long_used_bucket_moves_down(monkeypatch):
    """A problem like the one above with SHRINK_WORK = 0 (as if it had run long in its bucket): its active set,
    mostly padding of its first bucket, moves down to a smaller one, which compiles the loop a second time, at
    the same optimum."""
    from metricopt.backends.jax import driver

    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)[::3, :11]
    problem = metricopt.LMNNProblem(X[:56], y[::3][:56], k=3, mu=0.5)  # a shape of its own (no cached loop)
    kept = mj.solve(problem, tol=1e-6)
    monkeypatch.setattr(driver, "SHRINK_WORK", 0.0)
    before = mj.TRACES["run_chunk"]
    moved = mj.solve(problem, tol=1e-6)
    assert mj.TRACES["run_chunk"] - before == 1  # one new bucket
    assert moved.status is Status.OPTIMAL and kept.status is Status.OPTIMAL
    assert moved.objective == pytest.approx(kept.objective, rel=1e-6)


def test_no_recompilation_for_a_second_problem_of_the_same_shape(iris, iris_jax):
    before = mj.TRACES["run_chunk"]
    again = mj.solve(iris, tol=1e-6)
    assert mj.TRACES["run_chunk"] == before
    np.testing.assert_array_equal(again.M, iris_jax.M)  # deterministic
    rng = np.random.default_rng(0)
    other = metricopt.LMNNProblem(iris.X + 1e-3 * rng.normal(size=iris.X.shape), iris.y)
    sol = mj.solve(other, tol=1e-4)
    assert sol.status is Status.OPTIMAL
    assert mj.TRACES["run_chunk"] == before
    assert bool(jax.config.jax_enable_x64) == X64_BEFORE


def test_reference_solver_follows_the_paper(iris):
    sol = mj.solve(iris, solver="subgradient", max_iter=300, tol=1e-6)
    assert sol.solver == "subgradient"
    assert sol.objective < iris.objective(np.eye(iris.d))
    hist = sol.stats["history"]
    # a full re-check of all triplets every 10 iterations (the paper's schedule)
    assert [h["iteration"] for h in hist[:4]] == [0, 10, 20, 30]
    # never optimal unless certified
    assert (sol.status is Status.OPTIMAL) == (sol.stats["certificate_rel_gap"] <= 1e-6)
    assert sol.status in (Status.OPTIMAL, Status.ITERATION_LIMIT, Status.OPTIMAL_INACCURATE)


def test_iteration_limit_is_never_optimal_unless_certified(iris):
    sol = mj.solve(iris, max_iter=5, tol=1e-9)
    assert sol.status is Status.ITERATION_LIMIT
    assert sol.stats["iterations"] == 5
    assert sol.stats["certificate_rel_gap"] > 1e-9
    assert sol.M is not None and np.linalg.eigvalsh(sol.M).min() > -1e-10


def test_frobenius_regularized_agrees_with_exact_backend():
    X, y = load_wine(return_X_y=True)
    idx = np.concatenate([np.flatnonzero(y == c)[:20] for c in range(3)])
    problem = metricopt.LMNNProblem(StandardScaler().fit_transform(X[idx]), y[idx], regularizer=Frobenius(0.5))
    sol = mj.solve(problem, tol=1e-5)
    exact = problem.solve(backend="cvxpy")
    assert sol.status is Status.OPTIMAL and sol.stats["certificate_rel_gap"] <= 1e-5
    assert abs(sol.objective - exact.objective) <= 2e-5 * exact.objective


def test_verbose_prints_progress(iris, capsys):
    mj.solve(iris, max_iter=20, verbose=True)
    out = capsys.readouterr().out
    for word in ("iter", "objective", "certified gap", "active"):
        assert word in out


# --------------------------------------------------------------------------- errors, registry
def test_unknown_options_and_solvers(iris):
    with pytest.raises(UnknownOptionError, match="accepted: solver, max_iter, tol, verbose"):
        mj.solve(iris, max_iters=10)
    with pytest.raises(UnknownOptionError, match="fista"):
        mj.solve(iris, solver="adam")


def test_unsupported_problems_and_solvers_are_refused():
    X, y = load_iris(return_X_y=True)
    with pytest.raises(InputError, match="only with solver='online'"):
        mj.solve(metricopt.POLAProblem(X[::5], y[::5]))
    with pytest.raises(InputError, match="solver='online' is POLA's online algorithm"):
        mj.solve(metricopt.MMCProblem(X[::5], y[::5]), solver="online")

    class Other(metricopt.Problem):
        pass

    with pytest.raises(InputError, match="solves problems whose terms all have a JAX piece; got Other, which has no objective terms"):
        mj.solve(Other(X))


def test_problem_solve_backend_jax(iris):
    assert "jax" in metricopt.backends.BACKENDS
    assert metricopt.backends.get_backend("JAX") is mj.solve
    sol = iris.solve(backend="jax", solver="fista", max_iter=2000, tol=1e-4, verbose=False)
    assert sol.backend == "jax" and sol.status is Status.OPTIMAL


def _ill_conditioned_lmnn():
    """90 points, 12 correlated features of breast_cancer (standardised): cond(pull) ~ 3.9e3."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    idx = np.random.default_rng(0).choice(len(y), 90, replace=False)
    return metricopt.LMNNProblem(StandardScaler().fit_transform(X[idx][:, :12]), y[idx], k=3)


def test_preconditioning_certifies_an_ill_conditioned_lmnn():
    """precondition="auto" iterates on Z with M = T Z T (T from the pull matrix) when cond(P) > 1e3: the
    ill-conditioned problem is certified within 1e-5, where plain FISTA is still far after the same budget;
    the result is a metric of the original problem (objective and certificate recomputed on it)."""
    from metricopt.backends.jax.geometry import PRECONDITION_ABOVE, Setup

    p = _ill_conditioned_lmnn()
    w = np.linalg.eigvalsh(p.pull_matrix)
    assert w[-1] / w[0] > PRECONDITION_ABOVE
    assert Setup(p, precondition="auto").geometry.scaled
    fast = p.solve(backend="jax", tol=1e-5, max_iter=3000)
    plain = p.solve(backend="jax", tol=1e-5, max_iter=3000, precondition=False)
    assert fast.status is Status.OPTIMAL and fast.certificate.rel_gap <= 1e-5
    assert fast.objective == pytest.approx(p.objective(fast.M), rel=1e-12)
    assert metricopt.certify(p, fast.M, tol=1e-5).rel_gap == pytest.approx(fast.certificate.rel_gap, rel=1e-6)
    assert plain.status is Status.ITERATION_LIMIT and plain.certificate.rel_gap > 10 * fast.certificate.rel_gap


def test_preconditioning_options():
    from metricopt.backends.jax.geometry import Setup

    X, y = load_iris(return_X_y=True)
    p = metricopt.LMNNProblem(StandardScaler().fit_transform(X), y)
    assert not Setup(p, precondition="auto").geometry.scaled  # well conditioned: left alone
    assert Setup(p, precondition=True).geometry.scaled
    forced = p.solve(backend="jax", tol=1e-4, precondition=True)
    assert forced.status is Status.OPTIMAL and forced.certificate.rel_gap <= 1e-4
    with pytest.raises(InputError, match=re.escape("precondition must be 'auto', True or False; got 'yes'.")):
        p.solve(backend="jax", precondition="yes")
