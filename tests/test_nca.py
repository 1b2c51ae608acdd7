"""Tests for NCA (Goldberger, Roweis, Hinton & Salakhutdinov, NIPS 2004): metricopt.NCAProblem and metricopt.NCA.

What is pinned down:

* the objectives f (Eq. 3) and g (Eq. 6) equal a loop over points written here from Eq. 1, for a full,
  a rectangular and a diagonal A; the blocked softmax equals the unblocked one;
* the gradient the solvers use (autodiff of the blocked JAX value) equals the paper's closed forms,
  Eq. 5 for f and Eq. 7 for g, and central finite differences;
* the problem is non-convex: reported stationary (never optimal), certify raises NotConvexError, the
  exact backend refuses it;
* from scikit-learn's own initialisation (init="pca") metricopt reaches an f at least as high as
  scikit-learn's NeighborhoodComponentsAnalysis (which maximises f);
* the estimator: restarts keep the best, model files round-trip exactly, errors with exact messages;
* the NumPy path (``metricopt.methods.nca.numpy_path``): its value and gradient equal the JAX loop's (1e-8 relative)
  and central differences, with blocks that split and share classes and with floored exponentials; from the same
  start it takes the JAX loop's iterations to the same f (and at least scikit-learn's); ``backend="auto"`` routes
  by solver, size and device; its statuses (stationary, iteration_limit, time_limit) come from the policy.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.datasets import load_iris, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.neighbors import NeighborhoodComponentsAnalysis
from sklearn.preprocessing import StandardScaler

import metricopt as mo
from metricopt.backends.jax import evaluate
from metricopt.errors import InputError, NotConvexError
from metricopt.methods.nca import estimator as nca_estimator_module
from metricopt.methods.nca import problem as nca_problem_module
from metricopt.methods.nca import softmax as softmax_module
from metricopt.solution import Status


def small(seed=0, per_class=8):
    X, y = load_iris(return_X_y=True)
    rng = np.random.default_rng(seed)
    idx = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), per_class, replace=False) for c in range(3)]))
    return StandardScaler().fit_transform(X[idx]), y[idx]


def loop_objective(X, y, A, kind):
    """Eq. 1-2 (f) and Eq. 6 (g), one point at a time."""
    Z = X @ A.T
    total = 0.0
    for i in range(len(X)):
        e = np.array([np.exp(-np.sum((Z[i] - Z[k]) ** 2)) if k != i else 0.0 for k in range(len(X))])
        p = e / e.sum()
        pi = p[(y == y[i]) & (np.arange(len(X)) != i)].sum()
        total += pi if kind == "f" else np.log(pi)
    return total


def closed_form_gradient(X, y, A, kind):
    """d f / d A (Eq. 5) or d g / d A (Eq. 7), with x_ij = x_i - x_j."""
    Z = X @ A.T
    n, d = X.shape
    S = np.zeros((d, d))
    for i in range(n):
        e = np.array([np.exp(-np.sum((Z[i] - Z[k]) ** 2)) if k != i else 0.0 for k in range(n)])
        p = e / e.sum()
        same = (y == y[i]) & (np.arange(n) != i)
        pi = p[same].sum()
        Dk = X[i] - X
        all_term = (Dk * p[:, None]).T @ Dk
        same_term = (Dk[same] * p[same][:, None]).T @ Dk[same]
        S += pi * all_term - same_term if kind == "f" else all_term - same_term / pi
    return 2.0 * A @ S


@pytest.mark.parametrize("kind", ["f", "g"])
@pytest.mark.parametrize("shape", ["square", "rectangular", "diagonal"])
def test_objective_and_gradient_match_the_paper(kind, shape):
    X, y = small()
    rng = np.random.default_rng(1)
    d = X.shape[1]
    if shape == "diagonal":
        p = mo.NCAProblem(X, y, objective=kind, diagonal=True)
        a = 0.7 * rng.standard_normal(d)
        A, Z = np.diag(a), a[None, :]
    else:
        r = d if shape == "square" else 2
        p = mo.NCAProblem(X, y, n_components=r, objective=kind)
        A = Z = 0.7 * rng.standard_normal((r, d))
    ref = loop_objective(X, y, A, kind)
    assert p.objective_at(A) == pytest.approx(-ref, rel=1e-12)
    assert p.objective(A.T @ A) == pytest.approx(-ref, rel=1e-10)  # through M = A^T A (any factor of it)
    value, exact, grad = evaluate(p, Z)
    assert value == pytest.approx(-ref, rel=1e-12) and exact == value
    G = -closed_form_gradient(X, y, A, kind)  # the loop minimises -f (or -g)
    expected = np.diag(G)[None, :] if shape == "diagonal" else G
    np.testing.assert_allclose(grad, expected, rtol=1e-9, atol=1e-11 * np.abs(expected).max())
    # and central finite differences of the exact value
    eps, fd = 1e-6, np.zeros_like(Z)
    for idx in np.ndindex(*Z.shape):
        E = np.zeros_like(Z)
        E[idx] = eps
        plus = A + (np.diag(E[0]) if shape == "diagonal" else E)
        minus = A - (np.diag(E[0]) if shape == "diagonal" else E)
        fd[idx] = (p.objective_at(plus) - p.objective_at(minus)) / (2 * eps)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7 * np.abs(fd).max())


@pytest.mark.parametrize("kind", ["f", "g"])
def test_blocked_softmax_equals_one_block(kind, monkeypatch):
    X, y = small(per_class=10)
    A = np.random.default_rng(2).standard_normal((3, X.shape[1]))
    p = mo.NCAProblem(X, y, n_components=3, objective=kind)
    whole = (p.objective_at(A), evaluate(p, A)[2])
    monkeypatch.setattr(softmax_module, "BLOCK_ENTRIES", 7 * len(X))  # blocks of 7 rows, the last one padded
    assert softmax_module.block_rows(len(X)) == 7
    p7 = mo.NCAProblem(X, y, n_components=3, objective=kind)
    assert p7.objective_at(A) == pytest.approx(whole[0], rel=1e-13)
    np.testing.assert_allclose(evaluate(p7, A)[2], whole[1], rtol=1e-11, atol=1e-13)


def test_nca_is_reported_stationary_and_never_certified():
    X, y = small()
    p = mo.NCAProblem(X, y, n_components=2)
    assert not p.is_convex and p.geometry.kind.value == "factor"
    sol = mo.solve(p, backend="jax", solver="newton")
    assert sol.status is Status.STATIONARY and not sol.is_optimal and sol.certificate is None
    assert sol.stats["stationarity"] <= 1e-6 and sol.L.shape == (2, X.shape[1])
    assert sol.objective == pytest.approx(p.objective_at(sol.L), rel=1e-10)
    with pytest.raises(NotConvexError):
        mo.certify(p, sol.M)
    with pytest.raises(InputError, match="not convex"):
        mo.solve(p, backend="cvxpy")


@pytest.mark.parametrize("solver", ["newton", "lbfgs", "cg"])
def test_every_solver_of_the_loop_reaches_a_stationary_point(solver):
    X, y = small(seed=3)
    y = y.copy()
    y[[0, 12]] = y[[12, 0]]  # two swapped labels: no map separates the classes, so g has a finite optimum
    p = mo.NCAProblem(X, y, n_components=2, objective="g")
    # the paper's nonlinear CG needs 3,260 iterations here with jax 0.10.2 (3,000 was on the edge)
    sol = mo.solve(p, backend="jax", solver=solver, max_iter=10_000 if solver == "cg" else 3000)
    assert sol.status is Status.STATIONARY, sol.message
    assert sol.solver == solver
    start = p.objective_at(mo.backends.jax.geometry.Setup(p).initial_point())
    assert sol.objective < start


@pytest.mark.parametrize("n_components", [2, None])
def test_at_least_as_good_as_scikit_learn_from_the_same_start(n_components):
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    sk = NeighborhoodComponentsAnalysis(n_components=n_components, init="pca", random_state=0, max_iter=500,
                                        tol=1e-8).fit(X, y)
    ours = mo.NCA(n_components=n_components, init="pca").fit(X, y)
    p = ours.problem_
    f_sk, f_ours = -p.objective_at(sk.components_), -p.objective_at(ours.components_)
    assert f_ours >= f_sk - 1e-6 * abs(f_sk)
    assert ours.solution_.status is Status.STATIONARY


def test_estimator_restarts_round_trip_and_transform(tmp_path):
    X, y = small(seed=4, per_class=12)
    one = mo.NCA(n_components=2, objective="g", n_restarts=1, random_state=5).fit(X, y)
    three = mo.NCA(n_components=2, objective="g", n_restarts=3, random_state=5).fit(X, y)
    objs = [run["objective"] for run in three.restarts_]
    assert [run["start"] for run in three.restarts_] == ["pca", "random", "random"]
    assert objs[0] == pytest.approx(one.solution_.objective, rel=1e-12)
    assert three.solution_.objective == pytest.approx(min(objs), rel=1e-14)
    Z = three.transform(X)
    np.testing.assert_allclose(Z, X @ three.components_.T)
    assert 1.0 <= three.effective_neighbours_ <= len(X) - 1
    path = tmp_path / "nca.npz"
    mo.io.save_model(path, three)
    back = mo.io.load_model(path)
    np.testing.assert_array_equal(back.components_, three.components_)
    np.testing.assert_array_equal(back.transform(X), Z)
    assert back.restarts_ == three.restarts_ and back.effective_neighbours_ == three.effective_neighbours_
    assert back.solution_.status is three.solution_.status and back.solution_.objective == three.solution_.objective


def test_errors_are_clear():
    X, y = small()
    y1 = y.copy()
    y1[0] = 7
    with pytest.raises(InputError, match=re.escape(
            "NCA with objective='g' needs at least two points in every class (a point alone in its class has no "
            "neighbour that could classify it correctly: log p_i = -inf); these classes have one: 7. Drop them, add "
            "points or use objective='f'.")):
        mo.NCAProblem(X, y1, objective="g")
    with pytest.raises(InputError, match=re.escape(
            "a diagonal A is d x d: n_components must be None or d=4 with diagonal=True; got 2.")):
        mo.NCAProblem(X, y, n_components=2, diagonal=True)
    with pytest.raises(InputError, match=re.escape(
            "init must be 'auto', 'pca', 'lda', 'identity', 'random' or an array of shape (2, 4); got an array of "
            "shape (3, 4).")):
        mo.NCA(n_components=2, init=np.ones((3, 4))).fit(X, y)
    with pytest.raises(mo.UnknownOptionError, match="objective"):
        mo.NCA(objective="h").fit(X, y)
    with pytest.raises(InputError, match="needs at least two classes"):
        mo.NCAProblem(X, np.zeros(len(X)))


# ------------------------------------------------------------------------------------------------------------
# the NumPy path (metricopt.methods.nca.numpy_path): its value and gradient, its iteration against the JAX loop's, routing
# ------------------------------------------------------------------------------------------------------------


def _numpy_vs_jax_and_fd(p, Z):
    """The NumPy value and gradient at ``Z`` against the JAX loop's (autodiff) and central differences."""
    value, grad = p.value_and_gradient(Z)
    jvalue, _, jgrad = evaluate(p, Z)
    jgrad = np.asarray(jgrad)
    assert value == pytest.approx(jvalue, rel=1e-10)
    assert np.abs(grad - jgrad).max() <= 1e-8 * np.abs(jgrad).max()  # 1e-8 relative
    eps, fd = 1e-6, np.zeros_like(Z)
    for idx in np.ndindex(*Z.shape):
        E = np.zeros_like(Z)
        E[idx] = eps
        fd[idx] = (p.value_and_gradient(Z + E)[0] - p.value_and_gradient(Z - E)[0]) / (2 * eps)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7 * np.abs(fd).max())


@pytest.mark.parametrize("kind", ["f", "g"])
@pytest.mark.parametrize("shape", ["square", "rectangular", "diagonal"])
def test_numpy_gradient_matches_jax_and_finite_differences(kind, shape):
    X, y = small(per_class=7)
    rng = np.random.default_rng(11)
    d = X.shape[1]
    r = d if shape != "rectangular" else 2
    p = mo.NCAProblem(X, y, n_components=None if shape == "diagonal" else r, objective=kind,
                      diagonal=shape == "diagonal")
    Z = 0.8 * rng.standard_normal((1, d) if shape == "diagonal" else (r, d))
    _numpy_vs_jax_and_fd(p, Z)
    assert p.value_and_gradient(Z)[0] == pytest.approx(p.objective_at(np.diag(Z[0]) if shape == "diagonal" else Z),
                                                       rel=1e-12)


@pytest.mark.parametrize("kind", ["f", "g"])
def test_numpy_gradient_blocks_classes_and_far_points(kind, monkeypatch):
    # blocks of a few rows (a large class split, small classes sharing a block), a class of one point (f), unsorted
    # labels, and a map so long that most exponentials are floored (LOGIT_FLOOR): the same value and gradient
    rng = np.random.default_rng(3)
    X = rng.standard_normal((45, 4))
    counts = [20, 9, 6, 4, 5, 1] if kind == "f" else [19, 9, 6, 4, 5, 2]  # g: no class of one point
    y = rng.permutation(np.repeat(np.arange(6), counts))
    monkeypatch.setattr(nca_problem_module, "GRADIENT_BLOCK_ENTRIES", 7 * 45)
    p = mo.NCAProblem(X, y, n_components=3, objective=kind)
    layout = nca_problem_module.GradientLayout(p.X, p.codes)
    assert len(layout.blocks) > 4 and any(len(segments) > 1 for _, _, segments in layout.blocks)
    _numpy_vs_jax_and_fd(p, 0.6 * rng.standard_normal((3, 4)))
    far = 12.0 * rng.standard_normal((3, 4))
    Z = p.X @ far.T
    D = np.sum((Z[:, None] - Z[None]) ** 2, axis=2) + np.diag(np.full(len(Z), np.inf))
    assert np.mean(D - D.min(axis=1, keepdims=True) > -nca_problem_module.LOGIT_FLOOR) > 0.3  # the floor acts
    value, grad = p.value_and_gradient(far)
    jvalue, _, jgrad = evaluate(p, far)
    assert value == pytest.approx(jvalue, rel=1e-9) and np.all(np.isfinite(grad))
    jgrad = np.asarray(jgrad)
    # f saturates: a gradient of order 1e-9, the cancellation of terms some 1e5 times larger (both sides round them)
    np.testing.assert_allclose(grad, jgrad, rtol=0, atol=(1e-4 if kind == "f" else 1e-12) * np.abs(jgrad).max())


def test_numpy_and_jax_paths_agree_and_match_scikit_learn():
    # the same L-BFGS iteration (step cap, memory, Armijo, a test of tol every 10 iterations) from the same start
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    fits = {b: mo.NCA(n_components=2, backend=b).fit(X, y) for b in ("numpy", "jax")}
    sk = NeighborhoodComponentsAnalysis(n_components=2, init="pca", random_state=0).fit(X, y)
    f = {b: -e.solution_.objective for b, e in fits.items()}
    assert fits["numpy"].solution_.backend == "numpy" and fits["jax"].solution_.backend == "jax"
    assert all(e.solution_.status is Status.STATIONARY for e in fits.values())
    assert fits["numpy"].n_iter_ == fits["jax"].n_iter_  # 80 on scikit-learn 1.9's wine
    assert f["numpy"] == pytest.approx(f["jax"], rel=1e-8)
    np.testing.assert_allclose(fits["numpy"].components_, fits["jax"].components_, rtol=1e-4, atol=1e-4)
    assert f["numpy"] >= -fits["numpy"].problem_.objective_at(sk.components_) - 1e-6 * f["numpy"]
    assert fits["numpy"].solution_.objective == pytest.approx(
        fits["numpy"].problem_.objective_at(fits["numpy"].components_), rel=1e-12)


def test_backend_routing(monkeypatch):
    X, y = small()
    p = mo.NCAProblem(X, y, n_components=2)
    assert mo.NCA()._backend_for(p) == "numpy"
    assert mo.NCA(solver="cg")._backend_for(p) == mo.NCA(solver="newton")._backend_for(p) == "jax"
    assert mo.NCA(backend="JAX")._backend_for(p) == "jax" and mo.NCA(backend="numpy")._backend_for(p) == "numpy"
    # above ACCELERATOR_WORK (n^2 r) the JAX loop, where JAX's default device is an accelerator
    monkeypatch.setattr(nca_estimator_module, "ACCELERATOR_WORK", p.n ** 2 * 2)
    monkeypatch.setattr(nca_estimator_module, "_jax_on_accelerator", lambda: True)
    assert mo.NCA()._backend_for(p) == "jax"
    assert mo.NCA(n_components=1)._backend_for(mo.NCAProblem(X, y, n_components=1)) == "numpy"  # below it
    monkeypatch.setattr(nca_estimator_module, "_jax_on_accelerator", lambda: False)
    assert mo.NCA()._backend_for(p) == "numpy"
    est = mo.NCA(n_components=2).fit(X, y)
    assert est.solution_.backend == "numpy" and est.solution_.solver == "lbfgs"
    with pytest.raises(InputError, match=re.escape("backend='numpy' runs L-BFGS only; solver='cg' runs on the JAX "
                                                   "loop")):
        mo.NCA(backend="numpy", solver="cg").fit(X, y)
    with pytest.raises(mo.UnknownOptionError, match="backend"):
        mo.NCA(backend="cvxpy").fit(X, y)


def test_numpy_path_status_iteration_and_time_limits():
    X, y = load_iris(return_X_y=True)
    with pytest.warns(ConvergenceWarning, match=re.escape("stopped after 3 iterations")):
        est = mo.NCA(max_iter=3, backend="numpy").fit(X, y)
    sol = est.solution_
    assert sol.status is Status.ITERATION_LIMIT and est.n_iter_ == 3 and sol.stats["iterations"] == 3
    assert sol.stats["stationarity"] > 1e-6 and len(sol.stats["history"]) == 4
    assert est.restarts_[0]["status"] == "iteration_limit"
    done = mo.NCA(backend="numpy", tol=1e-3).fit(X, y)
    assert done.solution_.status is Status.STATIONARY and done.solution_.stats["stationarity"] <= 1e-3
    assert done.n_iter_ % 10 == 0  # tol is tested every 10 iterations, as the JAX loop's re-checks
    from metricopt.methods.nca import numpy_path as nca_numpy

    p = mo.NCAProblem(X, y, n_components=2)
    timed = nca_numpy.solve(p, time_limit=1e-9, max_step=0.03)
    assert timed.status is Status.TIME_LIMIT and timed.stats["iterations"] <= 1
    assert timed.objective == pytest.approx(p.objective_at(timed.L), rel=1e-12)
    with pytest.raises(InputError, match=re.escape("init must be an array of shape (2, 4)")):
        nca_numpy.solve(p, init=np.ones((3, 4)))


def test_numpy_path_restarts_callback_and_diagonal():
    X, y = small(seed=2, per_class=10)
    seen = []
    with pytest.warns(ConvergenceWarning):
        est = mo.NCA(diagonal=True, n_restarts=2, backend="numpy", max_iter=30,
                     callback=lambda A, it: seen.append((A.shape, it))).fit(X, y)
    assert len(est.restarts_) == 2 and est.restarts_[1]["start"] == "random"
    assert est.solution_.objective == min(run["objective"] for run in est.restarts_)
    d = X.shape[1]
    assert seen and all(shape == (d * d,) for shape, _ in seen) and seen[0][1] == 1
    assert est.components_.shape == (d, d)
    assert np.count_nonzero(est.components_ - np.diag(np.diag(est.components_))) == 0


def test_numpy_path_takes_its_status_from_the_policy(monkeypatch):
    # the NumPy solver reports what it saw (SolverReport); metricopt.certify.policy.decide alone gives the status
    from metricopt.certify import policy
    from metricopt.certify.policy import Outcome

    X, y = small()
    seen = []
    real = policy.decide

    def overruling(report, certificate=None, convex=True):
        seen.append((report.kind, convex, real(report, certificate, convex)[0]))
        return Status.HEURISTIC, ""

    monkeypatch.setattr(policy, "decide", overruling)
    sol = mo.NCA(n_components=2, backend="numpy").fit(X, y).solution_
    assert seen == [(Outcome.STATIONARY, False, Status.STATIONARY)]
    assert sol.status is Status.HEURISTIC and sol.message.startswith(Status.HEURISTIC.message)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_the_time_limit_is_an_estimator_parameter(backend):
    """``NCA(time_limit=...)`` (the options table's name, as every estimator): a tiny limit ends the fit with status
    ``time_limit`` and the point reached; none leaves the fit to its tolerance."""
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    cut = mo.NCA(n_components=2, backend=backend, time_limit=1e-9).fit(X, y)
    assert cut.solution_.status is mo.Status.TIME_LIMIT and np.all(np.isfinite(cut.components_))
    assert cut.get_params()["time_limit"] == 1e-9
    with pytest.raises(mo.InputError):
        mo.NCA(time_limit=-1.0).fit(X, y)
