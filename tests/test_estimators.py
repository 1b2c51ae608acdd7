"""scikit-learn compatibility of the estimators LMNN, MMC and POLA.

1. scikit-learn's own estimator checks (``parametrize_with_checks``), with every
   expected failure listed together with the reason it fails;
2. functional tests on iris and wine (standardized): the learned map, the Mahalanobis
   matrix, certificates, kNN accuracy, hard-margin POLA errors, clone / params,
   determinism, pickling;
3. use inside a ``Pipeline`` and ``cross_val_score``;
4. hyperparameter checks (``_parameter_constraints``, metricopt's errors) and the solver
   defaults left to the backend.
"""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import load_iris, load_wine
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import metricopt
from metricopt import LMNN, MMC, NCA, POLA, Certificate, SolverError, Status
from metricopt.errors import InputError, UnknownOptionError
from metricopt.terms import Frobenius

ESTIMATORS = {"LMNN": LMNN, "MMC": MMC, "POLA": POLA}

# ------------------------------------------------------------------------------------------
# 1. scikit-learn's estimator checks
# ------------------------------------------------------------------------------------------

#: checks that fail by design, per estimator: {check name: why}
EXPECTED_FAILED_CHECKS = {
    "LMNN": {
        "check_fit2d_1feature": (
            "the check's labels int(3 * uniform) leave a class with fewer than k+1 = 4 points, which "
            "LMNN legitimately refuses (every point needs k same-class target neighbours)"
        ),
    },
    "MMC": {},
    "POLA": {},
    "NCA": {},
    "MultiMetricLMNN": {
        "check_fit2d_1feature": "as LMNN's: the check's labels leave a class with fewer than k+1 = 4 points",
    },
    "LocalMetricKNN": {
        "check_fit2d_1feature": "as LMNN's: the check's labels leave a class with fewer than k+1 = 4 points",
    },
    "GerrymanderingKNN": {}, "MLCC": {}, "PCA": {}, "LDA": {}, "RCA": {}, "Whitening": {},
}

def _expected_failed_checks(estimator):
    name = type(estimator).__name__
    return EXPECTED_FAILED_CHECKS[name]


@parametrize_with_checks(
    [LMNN(), MMC(), POLA(), NCA(max_iter=200, solver="cg")],  # cg: the cheapest of the NCA loops to compile
    expected_failed_checks=_expected_failed_checks,
    xfail_strict=True,
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


@parametrize_with_checks(
    # MultiMetricLMNN: scikit-learn's checks set n_clusters=2, which clusters="labels" (one metric per class) refuses
    [metricopt.MultiMetricLMNN(clusters="kmeans", n_clusters=2), metricopt.GerrymanderingKNN(), metricopt.MLCC(),
     metricopt.PCA(), metricopt.LDA(), metricopt.RCA(), metricopt.Whitening()],
    expected_failed_checks=_expected_failed_checks,
    xfail_strict=True,
)
def test_sklearn_estimator_checks_on_the_other_estimators(estimator, check):
    check(estimator)


@pytest.mark.slow  # about 3 minutes on 2 cores
@parametrize_with_checks([metricopt.LocalMetricKNN()], expected_failed_checks=_expected_failed_checks,
                         xfail_strict=True)
def test_sklearn_estimator_checks_on_local_metrics(estimator, check):
    check(estimator)


# ------------------------------------------------------------------------------------------
# data and fitted estimators shared by the functional tests
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="module")
def iris_raw():
    return load_iris(return_X_y=True)


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="module", params=list(ESTIMATORS))
def fitted(request, iris):
    """Each estimator, with its default parameters, fitted on standardized iris."""
    X, y = iris
    return ESTIMATORS[request.param]().fit(X, y)


# ------------------------------------------------------------------------------------------
# 2. functional tests
# ------------------------------------------------------------------------------------------


def test_fit_returns_self_and_fitted_attributes(iris):
    X, y = iris
    est = LMNN()
    assert est.fit(X, y) is est
    assert est.n_features_in_ == X.shape[1]
    assert est.components_.ndim == 2 and est.components_.shape[1] == X.shape[1]
    assert isinstance(est.n_iter_, int) and est.n_iter_ >= 1
    assert isinstance(est.solution_, metricopt.Solution)
    assert isinstance(est.certificate_, Certificate)
    assert isinstance(est.problem_, metricopt.LMNNProblem)


def test_transform_is_x_times_components_transpose(fitted, iris):
    X, _ = iris
    Z = fitted.transform(X)
    assert Z.shape == (X.shape[0], fitted.components_.shape[0])
    assert_allclose(Z, X @ fitted.components_.T, rtol=1e-12, atol=1e-12)
    # Euclidean distances in the learned space are the Mahalanobis distances d_M
    M = fitted.get_mahalanobis_matrix()
    diff = X[:20] - X[-1]
    assert_allclose(np.sum((Z[:20] - Z[-1]) ** 2, axis=1), np.einsum("ij,jk,ik->i", diff, M, diff),
                    rtol=1e-9, atol=1e-12)


def test_mahalanobis_matrix_is_components_gram(fitted):
    M = fitted.get_mahalanobis_matrix()
    L = fitted.components_
    assert_array_equal(M, fitted.solution_.M)
    assert_allclose(M, L.T @ L, rtol=1e-9, atol=1e-10 * np.abs(M).max())
    assert_allclose(M, M.T, rtol=0, atol=1e-12 * np.abs(M).max())
    assert np.linalg.eigvalsh(M).min() >= -1e-10 * np.abs(M).max()


def test_lmnn_iris_certified_optimal(iris):
    X, y = iris
    est = LMNN().fit(X, y)
    assert est.certificate_.verdict == "optimal within tol"
    assert est.solution_.status is Status.OPTIMAL
    # the measured exact optimum of LMNN (k=3, mu=0.5) on standardized iris
    assert est.solution_.objective == pytest.approx(234.3345137, rel=1e-6)


def test_lmnn_beats_euclidean_loo_knn_on_wine(wine):
    X, y = wine
    est = LMNN().fit(X, y)
    err_euclid = metricopt.loo_knn_error(X, y, k=3)
    err_lmnn = metricopt.loo_knn_error(X, y, k=3, L=est.components_)
    assert err_lmnn < err_euclid, (err_lmnn, err_euclid)


@pytest.mark.parametrize("name", ["MMC", "POLA"])
def test_mmc_pola_fit_and_certify(name, iris):
    X, y = iris
    est = ESTIMATORS[name]().fit(X, y)
    cert = est.certificate_
    assert isinstance(cert, Certificate)
    assert cert.verdict == "optimal within tol", cert.report()
    assert cert.rel_gap <= 1e-6
    assert est.solution_.status is Status.OPTIMAL
    assert np.all(np.isfinite(est.components_))
    if name == "POLA":
        assert est.threshold_ == est.solution_.variables["b"]
        assert est.threshold_ >= 1.0


def test_pola_hard_margin_on_overlapping_data_raises_solver_error():
    # interleaved classes on a line: for every M, d_M(x0, x2) = 4 d_M(x0, x1), so the margins
    # d_M(x0, x2) <= b - 1 (similar) and d_M(x0, x1) >= b + 1 (dissimilar) would need 4b + 4 <= b - 1
    X = np.array([[0.0, 0.0], [1.0, 0.5], [2.0, 1.0], [3.0, 1.5]])
    y = np.array([0, 1, 0, 1])
    est = POLA(C=None)
    with pytest.raises(SolverError, match=r"\bC\b") as info:
        est.fit(X, y)
    assert "infeasible" in str(info.value)
    assert not hasattr(est, "components_")
    # the soft margin fits the same data
    assert POLA(C=1.0).fit(X, y).certificate_.verdict == "optimal within tol"


def test_pola_hard_margin_iris_raises_solver_error(iris):
    X, y = iris  # versicolor and virginica overlap
    with pytest.raises(SolverError, match=r"\bC\b"):
        POLA(C=None).fit(X, y)


NON_DEFAULT_PARAMS = {
    "LMNN": dict(k=2, mu=0.25, solver="CLARABEL", tol=1e-6, max_iter=500, verbose=False),
    "MMC": dict(diagonal=True, solver="SCS", tol=1e-6, max_iter=5000),
    "POLA": dict(C=0.5, solver="SCS", tol=1e-6, max_iter=5000),
}


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_get_params_set_params_clone_round_trip(name):
    cls = ESTIMATORS[name]
    params = NON_DEFAULT_PARAMS[name]
    est = cls(**params)
    got = est.get_params()
    for key, value in params.items():
        assert got[key] == value
    # set_params on a default instance reproduces the same parameters
    other = cls()
    assert other.set_params(**got) is other
    assert other.get_params() == got
    # clone keeps the parameters
    twin = clone(est)
    assert twin is not est and type(twin) is cls
    assert twin.get_params() == got
    # every constructor argument is a parameter, and the defaults survive a round trip
    assert cls(**cls().get_params()).get_params() == cls().get_params()
    with pytest.raises(ValueError):
        est.set_params(not_a_parameter=1)


def test_clone_with_regularizer_and_of_fitted_estimator(fitted):
    est = LMNN(regularizer=Frobenius(1e-3))
    twin = clone(est)
    assert isinstance(twin.regularizer, Frobenius)
    assert twin.regularizer is not est.regularizer  # clone deep-copies non-estimator parameters
    # a clone of a fitted estimator is unfitted, with the same parameters
    unfitted = clone(fitted)
    assert unfitted.get_params() == fitted.get_params()
    for attr in ("components_", "solution_", "certificate_", "problem_", "n_iter_", "n_features_in_"):
        assert not hasattr(unfitted, attr)


def test_fit_is_deterministic(fitted, iris):
    X, y = iris
    again = clone(fitted).fit(X, y)
    assert_array_equal(again.components_, fitted.components_)
    assert_array_equal(again.get_mahalanobis_matrix(), fitted.get_mahalanobis_matrix())
    # refitting the same instance gives the same result too
    assert_array_equal(again.fit(X, y).components_, fitted.components_)


def test_pickle_round_trip(fitted, iris):
    X, _ = iris
    restored = pickle.loads(pickle.dumps(fitted))
    assert type(restored) is type(fitted)
    assert restored.get_params() == fitted.get_params()
    assert_array_equal(restored.transform(X), fitted.transform(X))
    assert_array_equal(restored.get_mahalanobis_matrix(), fitted.get_mahalanobis_matrix())
    assert restored.certificate_.verdict == fitted.certificate_.verdict
    assert restored.solution_.status is fitted.solution_.status


def test_transform_before_fit_and_wrong_width_raise(iris):
    from sklearn.exceptions import NotFittedError

    X, y = iris
    with pytest.raises(NotFittedError):
        LMNN().transform(X)
    with pytest.raises(NotFittedError):
        LMNN().get_mahalanobis_matrix()
    est = LMNN().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.transform(X[:, :3])


def test_fit_without_y_raises(iris):
    X, _ = iris
    with pytest.raises(ValueError, match="requires y"):
        LMNN().fit(X, None)


# ------------------------------------------------------------------------------------------
# 3. Pipeline and cross-validation
# ------------------------------------------------------------------------------------------


def _pipeline(name, **params):
    return Pipeline([
        ("scale", StandardScaler()),
        ("metric", ESTIMATORS[name](**params)),
        ("knn", KNeighborsClassifier(n_neighbors=3)),
    ])


def test_pipeline_matches_manual_composition(iris_raw):
    X, y = iris_raw
    pipe = _pipeline("LMNN").fit(X, y)
    Xs = StandardScaler().fit_transform(X)
    lmnn = LMNN().fit(Xs, y)
    assert_allclose(pipe.named_steps["metric"].components_, lmnn.components_, rtol=1e-9, atol=1e-12)
    knn = KNeighborsClassifier(n_neighbors=3).fit(lmnn.transform(Xs), y)
    assert_array_equal(pipe.predict(X), knn.predict(lmnn.transform(Xs)))
    assert pipe.score(X, y) >= 0.95


@pytest.mark.parametrize("name", ["LMNN", "MMC", "POLA"])
def test_cross_val_score_iris(name, iris_raw):
    X, y = iris_raw
    cv = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    scores = cross_val_score(_pipeline(name), X, y, cv=cv, error_score="raise")
    assert scores.shape == (5,)
    assert np.all(np.isfinite(scores))
    assert scores.mean() >= 0.9, scores


def test_grid_search_sets_nested_params(iris_raw):
    X, y = iris_raw
    search = GridSearchCV(_pipeline("LMNN"), {"metric__mu": [0.25, 0.75]}, cv=3, error_score="raise")
    search.fit(X, y)
    assert search.best_params_["metric__mu"] in (0.25, 0.75)
    assert search.best_estimator_.named_steps["metric"].mu == search.best_params_["metric__mu"]
    assert search.best_score_ >= 0.9


# ------------------------------------------------------------------------------------------
# 4. hyperparameter checks (_parameter_constraints) and solver defaults
# ------------------------------------------------------------------------------------------

ALL_ESTIMATORS = {**ESTIMATORS, "MultiMetricLMNN": metricopt.MultiMetricLMNN, "KernelLMNN": metricopt.KernelLMNN}


@pytest.mark.parametrize("name", list(ALL_ESTIMATORS))
def test_every_parameter_has_constraints(name):
    cls = ALL_ESTIMATORS[name]
    assert set(cls._parameter_constraints) == set(cls().get_params(deep=False))


BAD_PARAMS = [
    (LMNN(k=0), InputError, "k must be >= 1; got 0."),
    (LMNN(k=True), InputError, "k must be an integer; got True."),
    (LMNN(mu=1.5), InputError, "mu must be <= 1.0 and >= 0.0; got 1.5."),
    (LMNN(mu=float("nan")), InputError, "mu must be a finite real number; got nan."),
    (LMNN(tol=0.0), InputError, "tol must be > 0.0; got 0.0."),
    (LMNN(tol="small"), InputError, "tol must be a finite real number or None; got 'small'."),
    (LMNN(max_iter=0), InputError, "max_iter must be >= 1; got 0."),
    (LMNN(backend="torch"), UnknownOptionError, "unknown backend 'torch'; choose one of: 'cvxpy', 'jax'."),
    (LMNN(solver=3), InputError, "solver must be None or a str; got 3."),
    (LMNN(passes=0), InputError, "passes must be >= 1; got 0."),
    (LMNN(n_components=1.5), InputError, "n_components must be an integer or None; got 1.5."),
    (LMNN(validation_fraction=1.0), InputError, "validation_fraction must be < 1.0 and > 0.0; got 1.0."),
    (LMNN(search="kd"), UnknownOptionError, "unknown search 'kd'; choose one of: 'auto', 'brute', 'tree'."),
    (MMC(diagonal="no"), InputError, "diagonal must be a bool; got 'no'."),
    (POLA(C=0), InputError, "C must be > 0.0; got 0.0."),
    (metricopt.MultiMetricLMNN(init="pca"), UnknownOptionError, "unknown init 'pca'; choose one of: 'single'."),
    (metricopt.MultiMetricLMNN(clusters=3), InputError,
     "clusters must be one of 'labels', 'kmeans' or an array-like; got 3."),
    (metricopt.KernelLMNN(n_components=0), InputError, "n_components must be >= 1; got 0."),
]


@pytest.mark.parametrize("est, exc, msg", BAD_PARAMS, ids=[repr(c[0]) for c in BAD_PARAMS])
def test_bad_parameters_raise_metricopt_errors_at_fit(est, exc, msg, iris):
    X, y = iris
    with pytest.raises(exc, match=f"^{re.escape(msg)}$"):
        est.fit(X, y)
    assert not hasattr(est, "solution_")


def test_unset_tol_and_max_iter_leave_the_backends_defaults(iris, monkeypatch):
    from metricopt.estimators import base

    assert base.solve_options(LMNN(backend="jax")) == {"verbose": False}
    assert base.solve_options(LMNN(tol=1e-5, max_iter=50, solver="SCS")) == {
        "verbose": False, "tol": 1e-5, "max_iter": 50, "solver": "SCS"}
    seen = []
    real_solve = base.solve
    monkeypatch.setattr(base, "solve", lambda problem, backend, **options: seen.append((backend, options))
                        or real_solve(problem, backend=backend, **options))
    X, y = iris
    MMC().fit(X[::3], y[::3])
    assert seen == [("cvxpy", {"verbose": False})]
