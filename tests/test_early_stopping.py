"""Tests for the JAX backend's ``callback`` option and for metricopt.methods.lmnn.early_stopping: the callback
sees every re-check, a stop request gives an honest ``early_stopped`` solution whose objective and
certificate are those of the returned metric, and the validation wrapper returns the metric of the
lowest recorded validation error (checked against an independent k-NN evaluation)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

import metricopt
from metricopt.methods.lmnn.early_stopping import EarlyStopping, ValidationCurve, fit_with_validation
from metricopt.methods.lmnn.energy import energy_predict
from metricopt.errors import InputError, SolverError, UnknownOptionError
from metricopt.knn import knn_error
from metricopt.solution import Status

DOCUMENTED_KEYS = {"iteration", "time", "M", "objective", "rel_gap", "active_set", "certificate", "variables"}


def _iris(n_per_class=15):
    X, y = load_iris(return_X_y=True)
    idx = np.concatenate([np.flatnonzero(y == c)[:n_per_class] for c in range(3)])
    return StandardScaler().fit_transform(X[idx]), y[idx]


@pytest.fixture(scope="module")
def small():
    X, y = _iris(12)
    return metricopt.LMNNProblem(X, y, k=2, mu=0.6)


def _blobs(n_per_class=12, seed=0):
    """Three far-apart blobs: the k-NN validation error is 0 from the first iterate on (a plateau)."""
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0, 0.0], [10.0, 0.0, 0.0], [0.0, 10.0, 0.0]])
    X = np.concatenate([c + rng.normal(size=(n_per_class, 3)) for c in centers])
    y = np.repeat(np.arange(3), n_per_class)
    return X, y


# ---------------------------------------------------------------------------
# the backend's callback option
# ---------------------------------------------------------------------------


def test_callback_is_a_documented_option():
    mj = pytest.importorskip("metricopt.backends.jax.backend")
    assert "callback" in mj.OPTIONS
    assert "callback(info) -> bool | None" in mj.solve.__doc__


def test_callback_sees_every_recheck_with_documented_keys(small):
    infos = []

    def spy(info):
        infos.append(info)
        info["M"][0, 0] = 1e6  # a copy: scribbling on it must not touch the solve

    sol = small.solve(backend="jax", tol=1e-12, max_iter=150, callback=spy)
    history = sol.stats["history"]
    assert sol.status is Status.ITERATION_LIMIT
    assert len(infos) == len(history) == sol.stats["callback_calls"] >= 3
    assert [i["iteration"] for i in infos] == [h["iteration"] for h in history]
    assert infos[-1]["iteration"] == 150
    for info, h in zip(infos, history):
        assert DOCUMENTED_KEYS <= set(info)
        assert info["M"].dtype == np.float64 and info["M"].shape == (small.d, small.d)
        assert info["objective"] == h["objective"] and info["active_set"] == h["active_set"]
        assert info["time"] == h["time"]
        if h["rel_gap"] is None:
            assert info["rel_gap"] is None and info["certificate"] is None
        else:
            assert info["rel_gap"] == h["rel_gap"] == info["certificate"].rel_gap
    # a cold start is first certified at the first re-check at or after certify_every (default 50) iterations
    certified = [i["iteration"] for i in infos if i["rel_gap"] is not None]
    assert infos[0]["rel_gap"] is None and certified[0] >= 50 and certified[-1] == 150
    # the objective reported is the exact objective of the (unscribbled) iterate
    sol2 = small.solve(backend="jax", tol=1e-12, max_iter=150, callback=lambda info: infos.append(info["M"]))
    for M, h in zip(infos[len(history):], sol2.stats["history"]):
        assert small.objective(M) == pytest.approx(h["objective"], rel=1e-9)
    assert np.array_equal(sol.M, sol2.M)  # the scribbling changed nothing


def test_callback_true_stops_at_that_iterate_with_early_stopped(small):
    seen = []

    def stop_at_40(info):
        seen.append(info["M"])
        return info["iteration"] >= 40

    sol = small.solve(backend="jax", tol=1e-9, callback=stop_at_40)
    assert sol.status is Status.EARLY_STOPPED
    assert sol.status.has_point and not sol.is_optimal
    assert sol.stats["iterations"] == sol.stats["best_iteration"] >= 40
    assert sol.stats["iterations"] < 20_000
    assert np.array_equal(sol.M, seen[-1])  # the point the callback stopped at, not an earlier one
    assert sol.objective == pytest.approx(small.objective(sol.M), rel=1e-12)
    assert sol.certificate.upper == pytest.approx(sol.objective, rel=1e-9)
    assert sol.certificate.rel_gap > 1e-9
    assert sol.certificate.rel_gap == pytest.approx(metricopt.certify(small, sol.M, tol=1e-9).rel_gap, rel=1e-9)
    assert "the callback stopped the solve at iteration" in sol.message
    with pytest.raises(SolverError, match="status 'early_stopped'"):
        sol.raise_for_status()


def test_certified_optimum_wins_over_a_stop_request(small):
    opt = small.solve(backend="jax", tol=1e-6)
    assert opt.status is Status.OPTIMAL
    calls = []
    sol = small.solve(backend="jax", tol=1e-6, init=opt.M, callback=lambda info: calls.append(1) or True)
    assert len(calls) == 1
    assert sol.status is Status.OPTIMAL and sol.certificate.rel_gap <= 1e-6


def test_callback_errors_and_exceptions(small):
    with pytest.raises(InputError, match=re.escape("callback must be a callable callback(info) -> bool | None; "
                                                   "got 3.")):
        small.solve(backend="jax", callback=3)
    with pytest.raises(InputError, match=re.escape("callback must return True (stop at this iterate), False or None "
                                                   "(go on); it returned ndarray at iteration 0.")):
        small.solve(backend="jax", callback=lambda info: info["M"])

    class Boom(RuntimeError):
        pass

    def boom(info):
        if info["iteration"] > 0:
            raise Boom("from the callback")

    with pytest.raises(Boom, match="from the callback"):
        small.solve(backend="jax", max_iter=100, callback=boom)


# ---------------------------------------------------------------------------
# the EarlyStopping callback
# ---------------------------------------------------------------------------


def test_early_stopping_keeps_earliest_lowest_and_counts_patience():
    X, y = _iris(5)
    es = EarlyStopping(X, y, X, y, k=1, patience=3)
    errors = iter([0.5, 0.3, 0.3, 0.4, 0.3, 0.2])
    es.error = lambda M: next(errors)
    answers = []
    for it in range(5):
        info = {"iteration": 10 * it, "time": 0.0, "objective": 1.0, "rel_gap": None, "M": np.eye(4) * (it + 1)}
        answers.append(es(info))
    assert answers == [False, False, False, False, True]  # 3 re-checks after the best without improvement
    assert es.best_index == 1 and es.best_iteration == 10 and es.best_error == 0.3  # the earliest of the 0.3s
    assert np.array_equal(es.best_M, 2 * np.eye(4))
    curve = es.curve()
    assert isinstance(curve, ValidationCurve)
    assert curve.errors.tolist() == [0.5, 0.3, 0.3, 0.4, 0.3]
    assert curve.best_iteration == 10 and curve.best_error == 0.3
    assert np.isnan(curve.rel_gaps).all()


def test_fit_with_validation_returns_metric_of_lowest_recorded_error():
    X, y = _iris(20)
    sol, curve = fit_with_validation(X, y, k=3, validation_fraction=0.25, patience=4, random_state=0, tol=1e-9,
                                     max_iter=3000)
    fit, val = curve.fit_idx, curve.val_idx
    assert np.intersect1d(fit, val).size == 0 and np.union1d(fit, val).size == len(y)
    assert [int(np.sum(y[val] == c)) for c in range(3)] == [5, 5, 5]  # stratified
    # the returned metric is the one of the earliest lowest recorded validation error ...
    assert curve.best_index == int(np.argmin(curve.errors))
    assert sol.stats["best_validation_error"] == curve.errors.min() == curve.best_error
    assert sol.stats["validation_errors"] == curve.errors.tolist()
    assert sol.stats["best_iteration"] == sol.stats["best_validation_iteration"] == curve.best_iteration
    # ... and its error, recomputed independently, is that minimum
    assert knn_error(X[fit], y[fit], X[val], y[val], 3, M=sol.M) == curve.errors.min()
    # the objective and certificate are those of the returned metric, on the fit part
    problem = metricopt.LMNNProblem(X[fit], y[fit], k=3)
    assert sol.objective == pytest.approx(problem.objective(sol.M), rel=1e-12)
    assert sol.certificate.upper == pytest.approx(sol.objective, rel=1e-9)
    assert sol.status is (Status.OPTIMAL if sol.certificate.rel_gap <= 1e-9 else Status.EARLY_STOPPED)
    assert sol.stats["stopped_early"]
    assert len(curve.errors) - 1 - curve.best_index == 4  # exactly `patience` re-checks after the best
    # the kept metric is not the backend's last iterate: it was swapped in, and differs from that iterate
    assert sol.stats["iterations"] > sol.stats["best_iteration"]
    assert "kept the metric of the lowest validation error" in sol.message or sol.status is Status.OPTIMAL


def test_patience_stops_long_before_max_iter_on_a_plateau():
    X, y = _blobs()
    sol, curve = fit_with_validation(X, y, k=2, validation_fraction=0.25, patience=3, tol=1e-12, max_iter=20_000)
    assert curve.errors.tolist() == [0.0, 0.0, 0.0, 0.0]  # a plateau from the start: best at the first re-check
    assert sol.stats["stopped_early"] and sol.stats["iterations"] < 1000
    assert curve.best_index == 0 and sol.stats["best_iteration"] == 0
    assert sol.status is Status.EARLY_STOPPED
    fit = curve.fit_idx
    problem = metricopt.LMNNProblem(X[fit], y[fit], k=2)
    assert sol.objective == pytest.approx(problem.objective(sol.M), rel=1e-12)
    # without early stopping the same solve runs on
    full = problem.solve(backend="jax", tol=1e-12, max_iter=1000)
    assert full.stats["iterations"] > sol.stats["iterations"]


def test_energy_rule_is_recomputed_independently():
    X, y = _iris(15)
    sol, curve = fit_with_validation(X, y, k=2, mu=0.5, validation_fraction=0.2, patience=2, rule="energy",
                                     max_iter=400)
    fit, val = curve.fit_idx, curve.val_idx
    problem = metricopt.LMNNProblem(X[fit], y[fit], k=2, mu=0.5)
    pred = energy_predict(X[fit], y[fit], X[val], 2, 0.5, M=sol.M, train_targets=problem.target_neighbors)
    assert float(np.mean(pred != y[val])) == curve.errors.min() == sol.stats["best_validation_error"]
    assert curve.rule == sol.stats["validation_rule"] == "energy"


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("fraction", [0, 0.0, 1, 1.5, -0.2, True, "0.2"])
def test_validation_fraction_outside_open_unit_interval(fraction):
    X, y = _iris(10)
    msg = ("validation_fraction must be a fraction strictly between 0 and 1 (the share of the training set held "
           f"out for validation, e.g. 0.2); got {fraction!r}.")
    with pytest.raises(InputError, match=re.escape(msg)):
        fit_with_validation(X, y, validation_fraction=fraction)


def test_class_too_small_in_fit_part():
    X, y = _iris(10)
    keep = np.concatenate([np.flatnonzero(y == 0), np.flatnonzero(y == 1), np.flatnonzero(y == 2)[:5]])
    X, y = X[keep], y[keep]
    with pytest.raises(InputError, match=re.escape(
            "with validation_fraction=0.4 the fit part keeps fewer than k+1=4 points of some classes (2: 3); LMNN "
            "needs k target neighbours of the same class for every point. Lower validation_fraction or k")):
        fit_with_validation(X, y, k=3, validation_fraction=0.4)


def test_only_the_jax_backend_and_no_foreign_callback():
    X, y = _iris(10)
    with pytest.raises(InputError, match=re.escape("fit_with_validation needs backend='jax'")) as exc:
        fit_with_validation(X, y, backend="cvxpy")
    assert "got backend='cvxpy'" in str(exc.value)
    with pytest.raises(InputError, match=re.escape("fit_with_validation installs its own callback")):
        fit_with_validation(X, y, callback=lambda info: None)
    with pytest.raises(InputError, match=re.escape("patience must be >= 1; got 0.")):
        fit_with_validation(X, y, patience=0)
    with pytest.raises(UnknownOptionError, match=re.escape("unknown rule 'loo'; choose one of: 'knn', 'energy'.")):
        fit_with_validation(X, y, rule="loo")
    with pytest.raises(UnknownOptionError, match="unknown option"):
        fit_with_validation(X, y, max_iter=10, stepsize=3)


def test_early_stopped_status_is_honest():
    s = Status.EARLY_STOPPED
    assert s.code == "early_stopped" and s.has_point and not s.is_optimal
    assert "not an optimum of the training problem" in s.message
