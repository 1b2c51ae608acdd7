"""Reliability catalogue (issue 16): bad inputs walked through every public entry point.

Every bad input must end in a clear :class:`metricopt.errors.MetricoptError` subclass (``InputError`` is
also a ``ValueError``) whose message names what was received and what to do -- never an exception type of
a dependency (numpy, scipy, cvxpy, jax, zipfile), a hang or a silent wrong answer; inputs that are merely
unusual (string or float labels, constant or duplicated features, duplicate points, more features than
samples) must work. The module is table driven: ``CASES`` (entry point, bad input, expected error class,
message fragment), ``WORKS`` (entry point, unusual input), ``MODEL_FILE_CASES`` (a damaged model file) and
``CLI_CASES`` (a command line that must exit with status 2 and one line on stderr).

Not repeated here (already pinned down, with exact messages):

* ``tests/test_errors.py``: the problems' NaN/inf, 1-D/3-D, empty, complex and sparse ``X``; ``y`` of the
  wrong length, shape or with NaN; one class; a class smaller than k+1; ``k`` <= 0, non-integer or bool;
  ``mu`` outside [0, 1]; non-numeric ``X`` (LMNN); target neighbours of the wrong shape, out of range, a
  point its own neighbour, of another class; MMC's and POLA's pairs and POLA's labels 0 / 2; the exact
  backend's unknown option, solver and backend names; ``certify`` with a wrong-shape or non-PSD ``M``
  (an "infeasible" verdict).
* ``tests/test_io.py``: a missing file, a text file, a file cut in half, a foreign ``.npz``, a foreign
  format name, a newer format version, a checksum mismatch, one flipped byte inside ``X_train``,
  undecodable metadata, an object array whose unpickling would create a marker file, an unknown
  parameter, an interrupted save over a previous model (``OSError`` and ``KeyboardInterrupt``).
* ``tests/test_cli.py``: unknown data set, ``--k 0``, a missing or non-numeric CSV, a missing output
  folder, a missing or junk model, features of the wrong number, ``--rule energy`` for MMC.
* ``tests/test_certify.py``: a non-symmetric ``M`` is symmetrised.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import time
import zipfile

import types

import numpy as np
import pytest
from test_errors import N0, X0, Y0  # the 12-point, 3-class set of the error tests
from test_io import _Payload, _raw, _rewrite

import metricopt as mo
from metricopt.cli import main
from metricopt.errors import InputError, InputTypeError, MetricoptError, UnknownOptionError
from metricopt.io import METADATA_KEY, ModelFileError, _payload_sha256, load_model, save_model

#: every error (and every damaged model file) is reported within this many seconds
QUICK = 5.0

# a few dozen points for the fits: 3 classes of 8 in 3-D
_rng = np.random.default_rng(0)
XB = np.r_[_rng.normal(0, 1, (8, 3)), _rng.normal(3, 1, (8, 3)), _rng.normal([0, 4, 0], 1, (8, 3))]
YB = np.repeat([0, 1, 2], 8)
NAMES = np.array(["setosa", "versicolor", "virginica"])

ESTIMATORS = {
    "LMNN": lambda **kw: mo.LMNN(k=2, **kw),
    "MMC": lambda **kw: mo.MMC(**kw),
    "POLA": lambda **kw: mo.POLA(**kw),
    "NCA": lambda **kw: mo.NCA(max_iter=50, **kw),
}
PROBLEMS = {
    "LMNN": lambda X, y: mo.LMNNProblem(X, y, k=2),
    "MMC": lambda X, y: mo.MMCProblem(X, y),
    "POLA": lambda X, y: mo.POLAProblem(X, y, C=1.0),
}


def _with_nan(X):
    X = np.array(X, dtype=float)
    X[3, 1] = np.nan
    return X


def _lmnn0():
    return mo.LMNNProblem(X0, Y0, k=2)


def _pola0():
    return mo.POLAProblem(X0, Y0, C=1.0)


_T0 = _lmnn0().target_neighbors
_WIDE = np.random.default_rng(1).normal(size=(9, 15))  # more features than samples
_Y9 = np.repeat([0, 1, 2], 3)

CASES = []


def case(id_, call, exc, fragment):
    CASES.append(pytest.param(call, exc, fragment, id=id_))


# --- X and y through the estimators (the problems' cases are in tests/test_errors.py) ----------------------
_BAD_XY = {
    "nan": (lambda: (_with_nan(XB), YB), InputError, "X contains 1 NaN or infinite value(s); remove or impute"),
    "inf": (lambda: (np.where(XB > 4.5, np.inf, XB), YB), InputError, "NaN or infinite value(s)"),
    "empty": (lambda: (np.zeros((0, 3)), np.zeros(0, int)), InputError, "X is empty (shape (0, 3)); it needs at least"),
    "one-sample": (lambda: (XB[:1], YB[:1]), InputError, "needs at least two classes; y has only one class (0)"),
    "one-class": (lambda: (XB, np.zeros(24, int)), InputError, "needs at least two classes; y has only one class (0)"),
    "X-strings": (lambda: (np.full((24, 3), "a"), YB), InputError, "X must be a numeric array; could not convert it"),
    "X-object-None": (lambda: (np.array([[1.0, None, 2.0]] * 24, dtype=object), YB), InputError,
                      "X contains 24 NaN or infinite value(s)"),  # None is a missing value
    "X-object-dict": (lambda: (np.array([[1.0, {}, 2.0]] * 24, dtype=object), YB), InputTypeError,
                      "X must be a numeric array; could not convert it to float64"),
    "X-1d": (lambda: (XB[:, 0], YB), InputError, "X must be a 2-D array of shape (n_samples, n_features); got an array "
             "with 1 dimension(s) and shape (24,). Reshape it"),
    "X-3d": (lambda: (XB[:, :, None], YB), InputError, "got an array with 3 dimension(s) and shape (24, 3, 1). Reshape"),
    "length-mismatch": (lambda: (XB, YB[:-1]), InputError, "y has 23 labels but X has 24 samples; pass one label per row"),
    "y-None": (lambda: (XB, None), InputError, "requires y to be passed, but the target y is None"),
}
for est_name in ESTIMATORS:
    for bad_name, (data, exc, fragment) in _BAD_XY.items():
        if est_name != "LMNN" and bad_name in ("one-class", "one-sample"):
            fragment = "needs at least two classes"
        case(f"{est_name}.fit-{bad_name}", lambda e=est_name, data=data: ESTIMATORS[e]().fit(*data()), exc, fragment)
    case(f"{est_name}.fit-X-too-large", lambda e=est_name: ESTIMATORS[e]().fit(XB * 1e200, YB), InputError,
         "too large for float64 arithmetic; metricopt needs the widest feature range between 1e-100 and 1e+100. "
         "Rescale the features first")
    case(f"{est_name}-tol-negative", lambda e=est_name: ESTIMATORS[e](tol=-1.0).fit(XB, YB), InputError,
         "tol must be > 0.0; got -1.0.")
    case(f"{est_name}-unknown-solver", lambda e=est_name: ESTIMATORS[e](solver="nope").fit(XB, YB),
         UnknownOptionError, "unknown solver ")
for est_name in ("LMNN", "MMC", "POLA"):
    case(f"{est_name}-unknown-backend", lambda e=est_name: ESTIMATORS[e](backend="nope").fit(XB, YB),
         UnknownOptionError, "unknown backend 'nope'; choose one of: 'cvxpy', 'jax'.")
case("LMNN.fit-small-class", lambda: mo.LMNN(k=2).fit(XB, np.r_[np.zeros(22, int), [1, 1]]), InputError,
     "LMNN with k=2 needs at least k+1=3 points in every class (each point needs k target neighbours of its own "
     "class); these classes have fewer: 1: 2. Lower k or drop those classes.")
for k, fragment in [(0, "k must be >= 1; got 0."), (-3, "k must be >= 1; got -3."),
                    (2.5, "k must be an integer; got 2.5."), ("3", "k must be an integer; got '3'.")]:
    case(f"LMNN-k={k!r}", lambda k=k: mo.LMNN(k=k).fit(XB, YB), InputError, fragment)
for mu, fragment in [(1.5, "mu must be <= 1.0 and >= 0.0; got 1.5."), (-0.1, "mu must be >= 0.0 and <= 1.0; got -0.1."),
                     (float("nan"), "mu must be a finite real number; got nan.")]:
    case(f"LMNN-mu={mu!r}", lambda mu=mu: mo.LMNN(mu=mu).fit(XB, YB), InputError, fragment)
case("LMNN-jax-unknown-solver", lambda: mo.LMNN(backend="jax", solver="nope").fit(XB, YB), UnknownOptionError,
     "unknown solver 'nope'; choose one of: 'fista'")
case("NCA-unknown-objective", lambda: mo.NCA(objective="h").fit(XB, YB), UnknownOptionError,
     "unknown objective 'h'; choose one of: 'f', 'g'.")
case("NCA-unknown-init", lambda: mo.NCA(init="zzz").fit(XB, YB), UnknownOptionError,
     "unknown init 'zzz'; choose one of: 'auto', 'pca', 'lda', 'identity', 'random'.")
case("NCA-n_components-too-large", lambda: mo.NCA(n_components=9).fit(XB, YB), InputError,
     "n_components must be between 1 and the number of features d=3; got 9.")
case("LMNN.predict-unknown-rule", lambda: mo.LMNN(k=2).fit(X0, Y0).predict(X0, rule="vote"), UnknownOptionError,
     "unknown rule 'vote'; choose one of: 'knn', 'energy'.")

# --- problems: cases tests/test_errors.py does not hold ------------------------------------------------------
for name, make in PROBLEMS.items():
    case(f"{name}Problem-one-sample", lambda make=make: make(X0[:1], Y0[:1]), InputError, "needs at least two classes")
    case(f"{name}Problem-X-strings", lambda make=make: make(np.full((N0, 2), "x"), Y0), InputError,
         "X must be a numeric array; could not convert it to float64 (could not convert string to float")
    case(f"{name}Problem-X-object-dict", lambda make=make: make(np.array([[{}, 1.0]] * N0, dtype=object), Y0),
         InputTypeError, "X must be a numeric array; could not convert it to float64")
    case(f"{name}Problem-X-too-small", lambda make=make: make(X0 * 1e-200, Y0), InputError,
         "squared distances between samples (about 1e-400) are too small for float64 arithmetic")
case("MMCProblem-empty-dissimilar", lambda: mo.MMCProblem(X0, similar=[[0, 1]], dissimilar=np.zeros((0, 2), int)),
     InputError, "MMC needs at least one similar and one dissimilar pair; got 1 similar and 0 dissimilar.")
case("MMCProblem-empty-both", lambda: mo.MMCProblem(X0, similar=[], dissimilar=[]), InputError,
     "MMC needs at least one similar and one dissimilar pair; got 0 similar and 0 dissimilar.")
case("MMCProblem-d>n-unbounded", lambda: mo.MMCProblem(_WIDE, _Y9), InputError,
     "MMC is unbounded on this data: the similar-pair scatter S is singular on the data's range (the pair differences "
     "span 8 of d = 15 directions, the 9 similar pairs 6 of them)")
case("MMC.fit-d>n-unbounded", lambda: mo.MMC().fit(_WIDE, _Y9), InputError,
     "Reduce the dimension (e.g. PCA to at most 6 components) or add similar pairs.")
_PAIRS = [[0, 1], [0, 4], [5, 9]]
for labels, fragment in [([1, np.nan, -1], "Got nan for pair 1; map the labels to +1/-1."),
                         ([1, 0.5, -1], "Got 0.5 for pair 1"),
                         (["same", "diff", "diff"], "Got non-numeric labels (['same', 'diff', 'diff']...)")]:
    case(f"POLAProblem-pair-labels-{labels[1]}", lambda labels=labels: mo.POLAProblem(X0, pairs=_PAIRS,
                                                                                       pair_labels=labels),
         InputError, "pair_labels must be +1 (similar) or -1 (dissimilar). " + fragment)
_T_CLASS, _T_SELF, _T_RANGE = _T0.copy(), _T0.copy(), _T0.copy()
_T_CLASS[0, 0], _T_SELF[5, 1], _T_RANGE[2, 0] = 4, 5, N0
for id_, T, fragment in [("other-class", _T_CLASS, "Point 0 (label 0) lists 4 (label 1); pick neighbours of the same"),
                         ("self", _T_SELF, "Point 5 lists itself"), ("out-of-range", _T_RANGE, "Row 2 lists 12; X has 12"),
                         ("float", _T0.astype(float), "Got dtype float64; pass an integer array"),
                         ("wrong-shape", _T0[:, :, None], "target_neighbors must have shape (n, k) = (12, k); got")]:
    case(f"LMNNProblem-target-neighbors-{id_}", lambda T=T: mo.LMNNProblem(X0, Y0, target_neighbors=T), InputError,
         fragment)
case("solve-jax-unknown-option", lambda: _lmnn0().solve(backend="jax", maxiter=3), UnknownOptionError,
     "unknown option(s) for backend='jax': ['maxiter']; accepted: solver, max_iter, tol")
case("solve-jax-unknown-solver", lambda: mo.solve(_lmnn0(), backend="jax", solver="adam"), UnknownOptionError,
     "unknown solver 'adam'; choose one of: 'fista'")
case("metricopt.solve-unknown-backend", lambda: mo.solve(mo.MMCProblem(X0, Y0), backend="torch"), UnknownOptionError,
     "unknown backend 'torch'; choose one of: 'cvxpy', 'jax'.")

# --- certify and check_agreement -----------------------------------------------------------------------------
_NAN_M = np.array([[1.0, np.nan], [np.nan, 1.0]])
case("certify-nan-M", lambda: mo.certify(_lmnn0(), _NAN_M), InputError,
     "M must be a finite (2, 2) array; got 2 NaN or infinite entries. Pass the metric of a finished solve")
case("certify-inf-M", lambda: mo.certify(_pola0(), np.diag([1.0, np.inf])), InputError,
     "M must be a finite (2, 2) array; got 1 NaN or infinite entries.")
case("certify-string-M", lambda: mo.certify(_lmnn0(), "identity"), InputError,
     "M must be a finite (2, 2) array of numbers or a metricopt.Solution; got str")
case("certify-None-M", lambda: mo.certify(_lmnn0(), None), InputError,
     "M must be a finite (2, 2) array or a metricopt.Solution (or pass L=, a linear map: M = L^T L); got None.")
case("certify-1d-M", lambda: mo.certify(_lmnn0(), np.ones(2)), InputError,
     "M must be a finite (2, 2) array; got shape (2,).")
case("certify-unknown-keyword", lambda: mo.certify(_lmnn0(), np.eye(2), tolerance=1e-3), UnknownOptionError,
     "unknown keyword(s) for certify: ['tolerance']; accepted: tol, psd_tol, feas_tol, dual (LMNN's variables besides M: "
     "none).")
case("certify-POLA-b-nan", lambda: mo.certify(_pola0(), np.eye(2), b=float("nan")), InputError,
     "b must be a finite real number (or None: chosen optimally for M); got nan.")
case("certify-POLA-b-string", lambda: mo.certify(_pola0(), np.eye(2), b="1"), InputError,
     "b must be a finite real number")
case("certify-psd_tol-negative", lambda: mo.certify(_lmnn0(), np.eye(2), psd_tol=-1.0), InputError,
     "psd_tol must be >= 0.0; got -1.0.")
case("certify-not-a-problem", lambda: mo.certify((X0, Y0), np.eye(2)), InputError,
     "certify needs a metricopt problem (e.g. metricopt.LMNNProblem(X, y)) as its first argument; got tuple.")
case("check_agreement-nan-M", lambda: mo.check_agreement(_lmnn0(), np.eye(2), _NAN_M), InputError,
     "M must be a finite (2, 2) array; got 2 NaN or infinite entries.")
case("check_agreement-string-M", lambda: mo.check_agreement(_lmnn0(), "a", np.eye(2)), InputError,
     "M must be a finite (2, 2) array of numbers or a metricopt.Solution; got str")
case("check_agreement-wrong-shape", lambda: mo.check_agreement(_lmnn0(), np.eye(2), np.eye(3)), InputError,
     "M must be a finite (2, 2) array; got shape (3, 3).")
case("check_agreement-k-0", lambda: mo.check_agreement(_lmnn0(), np.eye(2), np.eye(2), k=0), InputError,
     "k must be >= 1; got 0.")
case("check_agreement-k-float", lambda: mo.check_agreement(_lmnn0(), np.eye(2), np.eye(2), k=1.5), InputError,
     "k must be an integer; got 1.5.")
case("check_agreement-min_knn_agreement-2",
     lambda: mo.check_agreement(_lmnn0(), np.eye(2), np.eye(2), min_knn_agreement=2), InputError,
     "min_knn_agreement must be <= 1.0 and >= 0.0; got 2.0.")
case("check_agreement-X_test-features", lambda: mo.check_agreement(_lmnn0(), np.eye(2), np.eye(2), X_test=XB),
     InputError, "X_test has 3 features but X_train has 2; they must have the same number of columns.")
case("check_agreement-X_test-nan", lambda: mo.check_agreement(_lmnn0(), np.eye(2), np.eye(2), X_test=_with_nan(X0)),
     InputError, "X_test contains 1 NaN or infinite value(s)")


def _check_error(err, exc, fragment):
    assert isinstance(err, MetricoptError), f"{type(err).__module__}.{type(err).__name__}: {err}"
    assert isinstance(err, exc), type(err)
    if isinstance(err, InputError):
        assert isinstance(err, ValueError)
    assert fragment in str(err), str(err)


@pytest.mark.parametrize("call, exc, fragment", CASES)
def test_bad_input_gives_a_clear_error(call, exc, fragment):
    t0 = time.perf_counter()
    with pytest.raises(Exception) as info:
        call()
    assert time.perf_counter() - t0 < QUICK
    _check_error(info.value, exc, fragment)


def test_non_symmetric_metric_is_certified_as_its_symmetric_part():
    # d_M only sees the symmetric part of M: a non-symmetric M gets exactly the certificate of (M + M^T) / 2
    p = _lmnn0()
    A = np.array([[1.0, 3.0], [-1.0, 2.0]])
    a, b = mo.certify(p, A), mo.certify(p, (A + A.T) / 2)
    assert (a.upper, a.lower, a.verdict) == (b.upper, b.lower, b.verdict)
    assert np.isfinite(a.upper) and np.isfinite(a.lower)


# --------------------------------------------------------------------------- unusual but valid inputs


def _blobs_with(kind):
    X, y = XB, YB
    if kind == "constant-feature":
        return np.c_[X, np.full(len(X), 7.0)], y
    if kind == "duplicated-feature":
        return np.c_[X, X[:, 0]], y
    if kind == "duplicate-points-same-class":
        return np.r_[X, X[[0, 9, 17]]], np.r_[y, y[[0, 9, 17]]]
    if kind == "duplicate-points-other-class":
        return np.r_[X, X[[0, 9, 17]]], np.r_[y, (y[[0, 9, 17]] + 1) % 3]
    assert kind == "d>n"
    rows = [0, 3, 6, 8, 11, 14, 16, 19, 22]  # 3 points of each class
    return np.c_[X[rows], np.random.default_rng(2).normal(size=(9, 9))], y[rows]  # 9 points, 12 features


#: (estimator, data) pairs that must fit; MMC with d > n is unbounded (a clear error above)
WORKS = [(e, kind) for e in ("LMNN", "MMC", "POLA") for kind in
         ("constant-feature", "duplicated-feature", "duplicate-points-same-class", "duplicate-points-other-class", "d>n")
         if (e, kind) != ("MMC", "d>n")]


@pytest.fixture(scope="module")
def plain_fits():
    return {name: ESTIMATORS[name]().fit(XB, YB) for name in ("LMNN", "MMC", "POLA")}


@pytest.mark.parametrize("est_name, kind", WORKS, ids=[f"{e}-{k}" for e, k in WORKS])
def test_unusual_inputs_work(est_name, kind, plain_fits):
    X, y = _blobs_with(kind)
    est = ESTIMATORS[est_name]().fit(X, y)
    sol, cert = est.solution_, est.certificate_
    assert sol.M is not None and np.all(np.isfinite(sol.M)) and np.all(np.isfinite(est.components_))
    assert np.linalg.eigvalsh(sol.M)[0] >= -1e-8 * max(1.0, np.abs(sol.M).max())
    assert np.isfinite(sol.objective)
    # honest: optimal only with a certificate that proves it, and a certificate's upper bound is the objective
    assert (sol.status is mo.Status.OPTIMAL) == bool(cert is not None and cert.is_optimal)
    assert cert.upper == pytest.approx(sol.objective, rel=1e-9, abs=1e-12)
    Z = est.transform(X)
    pred = mo.knn_predict(X, y, X, k=1, L=est.components_)
    assert np.all(np.isfinite(Z)) and set(pred) <= set(y)
    if est_name == "LMNN" or kind == "d>n":
        assert sol.status.has_point
    if kind in ("duplicate-points-same-class", "duplicate-points-other-class") or est_name == "POLA":
        assert cert.is_optimal, cert.report()
    if kind == "constant-feature" or (kind == "duplicated-feature" and est_name == "MMC"):
        # the extra column adds no direction: the optimum is that of the plain data (a duplicated column does
        # change LMNN's Euclidean target neighbours and POLA's Frobenius norm, so for them only the constant one)
        assert sol.objective == pytest.approx(plain_fits[est_name].solution_.objective, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("scale", [1e200, 1e-200], ids=["1e200", "1e-200"])
@pytest.mark.parametrize("est_name", list(ESTIMATORS))
def test_extreme_feature_scales_are_certified_or_refused(est_name, scale):
    t0 = time.perf_counter()
    try:
        est = ESTIMATORS[est_name]().fit(XB * scale, YB)
    except Exception as err:  # noqa: BLE001 - what was raised is checked here
        _check_error(err, InputError, "Rescale the features first, e.g. with sklearn.preprocessing.StandardScaler.")
    else:  # a result must be a certified one (NCA: stationary), never NaN
        assert np.all(np.isfinite(est.solution_.M)) and np.isfinite(est.solution_.objective)
        assert est_name == "NCA" or est.certificate_.is_optimal
    assert time.perf_counter() - t0 < QUICK


# --------------------------------------------------------------------------- labels of any type


@pytest.mark.parametrize("est_name", list(ESTIMATORS))
def test_string_and_float_labels_work_and_round_trip_in_predictions(est_name, tmp_path):
    codes = np.array([0, 2, 1])[YB]  # not sorted like the names, so a confusion of codes and names shows
    Xq = XB[::2] + 0.3
    fits = {}
    for kind, y in [("int", codes), ("str", NAMES[codes]), ("float", codes * 0.5 - 0.25)]:
        est = ESTIMATORS[est_name]().fit(XB, y)
        fits[kind] = (est, y)
    ref = fits["int"][0]
    for kind, (est, y) in fits.items():
        assert np.array_equal(est.components_, ref.components_)  # relabelling the classes changes no metric
        pred = est.predict(Xq) if est_name == "LMNN" else mo.knn_predict(XB, est.problem_.y, Xq, 3, L=est.components_)
        assert pred.dtype.kind == np.asarray(y).dtype.kind and set(pred) <= set(y)
        int_pred = fits["int"][0].predict(Xq) if est_name == "LMNN" else mo.knn_predict(XB, codes, Xq, 3,
                                                                                        L=ref.components_)
        lookup = {c: v for c, v in zip(codes, y)}
        assert np.array_equal(pred, np.array([lookup[c] for c in int_pred]))
    est, y = fits["str"]
    got = load_model(save_model(tmp_path / "labels.npz", est))
    assert got.problem_.y.dtype.kind == "U" and np.array_equal(got.problem_.y, y)
    if est_name == "LMNN":
        assert np.array_equal(got.predict(Xq), est.predict(Xq))


# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("backend", ["cvxpy", "jax"])
def test_the_same_fit_twice_gives_a_bit_identical_metric(backend, iris_std):
    X, y = iris_std[0][::5], iris_std[1][::5]  # 30 points of iris, 10 per class
    first, second = (mo.LMNN(k=3, backend=backend, tol=1e-4 if backend == "jax" else None).fit(X, y)
                     for _ in range(2))
    assert first.certificate_.is_optimal
    assert np.array_equal(first.solution_.M, second.solution_.M)
    assert np.array_equal(first.components_, second.components_)
    assert first.solution_.objective == second.solution_.objective


def test_a_jax_fit_does_not_depend_on_how_long_its_certificates_take(iris_std, monkeypatch):
    """A loaded machine makes certificates slow; by default (``deterministic="auto"`` on a small problem) the
    certificate schedule counts iterations only, so the iterate the solve stops at cannot move. Simulated by a
    clock on which every certificate takes 100 s and everything else 1 ms a reading; ``deterministic=False``
    must then space the certificates out and move it."""
    import sys

    import metricopt.backends.jax.driver as driver

    X, y = iris_std
    p = mo.LMNNProblem(X, y, k=3)
    quiet = p.solve(backend="jax", tol=1e-6)
    clock = {"t": 0.0}

    def slow_clock():
        clock["t"] += 1e-3
        return clock["t"]

    package = sys.modules["metricopt.certify"]
    real_certify = package.certify

    def slow_certify(*args, **kwargs):
        clock["t"] += 100.0
        return real_certify(*args, **kwargs)

    monkeypatch.setattr(driver, "time", types.SimpleNamespace(perf_counter=slow_clock))
    monkeypatch.setattr(package, "certify", slow_certify)
    loaded = p.solve(backend="jax", tol=1e-6)
    assert np.array_equal(loaded.M, quiet.M)
    assert loaded.stats["iterations"] == quiet.stats["iterations"]
    timed = p.solve(backend="jax", tol=1e-6, deterministic=False)
    assert timed.stats["iterations"] != quiet.stats["iterations"]


def test_deterministic_option_is_checked():
    p = mo.LMNNProblem(X0, Y0, k=2)
    with pytest.raises(mo.InputError, match="deterministic must be 'auto', True or False; got 'yes'"):
        p.solve(backend="jax", deterministic="yes")


# --------------------------------------------------------------------------- model files


@pytest.fixture(scope="module")
def model_bytes(tmp_path_factory):
    """The bytes of a small LMNN model file, its POLA sibling, and the fitted LMNN."""
    folder = tmp_path_factory.mktemp("models")
    lmnn = mo.LMNN(k=2).fit(X0, Y0)
    pola = mo.POLA().fit(X0, Y0)
    return {"LMNN": save_model(folder / "lmnn.npz", lmnn).read_bytes(),
            "POLA": save_model(folder / "pola.npz", pola).read_bytes(), "est": lmnn}


def _edit_meta(edit, which="LMNN"):
    def corrupt(path, blobs):
        path.write_bytes(blobs[which])
        arrays, meta = _raw(path)
        edit(meta)
        _rewrite(path, arrays, meta)
    return corrupt


def _forge_arrays(edit, which="LMNN"):
    """Edit the arrays and record their new checksum: a consistent file with impossible content."""
    def corrupt(path, blobs):
        path.write_bytes(blobs[which])
        arrays, meta = _raw(path)
        edit(arrays)
        meta["sha256"] = _payload_sha256(arrays)
        _rewrite(path, arrays, meta)
    return corrupt


def _npy_header(shape, descr="<f8"):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _metadata_member():
    buf = io.BytesIO()
    np.save(buf, np.frombuffer(json.dumps({"format": "metricopt-model", "format_version": 1}).encode(), np.uint8))
    return buf.getvalue()


def _huge_array(shape):
    def corrupt(path, blobs):
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("M.npy", _npy_header(shape) + b"\0" * 64)  # declares far more than it holds
            zf.writestr(METADATA_KEY + ".npy", _metadata_member())
    return corrupt


def _inflated_member(path, blobs):
    """A deflated member whose directory entry claims 10 GB uncompressed (a forged size)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("M.npy", _npy_header((4,)) + np.ones(4).tobytes())
        zf.writestr(METADATA_KEY + ".npy", _metadata_member())
    data = bytearray(path.read_bytes())
    central = data.find(b"PK\x01\x02")  # first central directory entry: M.npy; uncompressed size at +24
    data[central + 24:central + 28] = (10**10 % 2**32).to_bytes(4, "little")
    path.write_bytes(bytes(data))


def _pickled(where):
    def corrupt(path, blobs):
        path.write_bytes(blobs["LMNN"])
        arrays, meta = _raw(path)
        evil = np.empty(1, dtype=object)
        evil[0] = _Payload(str(path.parent / "code-ran"))
        blob = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
        with open(path, "wb") as fh:
            if where == "metadata":
                np.savez(fh, **arrays, **{METADATA_KEY: evil})
            elif where == "compressed":
                np.savez_compressed(fh, **arrays, evil=evil, **{METADATA_KEY: blob})
            else:  # a foreign archive: only the payload
                np.savez(fh, evil=evil)
    return corrupt


def _flip_central_directory(offset):
    """Flip a bit of the first central directory entry (+8: general-purpose flags, bit 0 'encrypted';
    +10: compression method)."""
    def corrupt(path, blobs):
        data = bytearray(blobs["LMNN"])
        data[data.find(b"PK\x01\x02") + offset] ^= 0x01
        path.write_bytes(bytes(data))
    return corrupt


def _cut(keep):
    def corrupt(path, blobs):
        data = blobs["LMNN"]
        path.write_bytes(data[:keep(len(data))])
    return corrupt


def _non_npy_member(path, blobs):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("notes.txt", "not an array")
        zf.writestr(METADATA_KEY + ".npy", _metadata_member())


_CORRUPT = "is corrupt: its metadata does not describe a model"
MODEL_FILE_CASES = [
    ("directory", None, "is not a file; give the path of a .npz model file."),
    ("empty-file", lambda p, b: p.write_bytes(b""), "is not a metricopt model file: it is not an .npz (zip) archive"),
    ("first-100-bytes", _cut(lambda n: 100), "is not a metricopt model file: it is not an .npz (zip) archive"),
    ("end-record-cut", _cut(lambda n: n - 10), "is not a metricopt model file: it is not an .npz (zip) archive"),
    ("encrypted-flag-flipped", _flip_central_directory(8), "its archive cannot be read (RuntimeError"),
    ("compression-method-flipped", _flip_central_directory(10), "its archive cannot be read (NotImplementedError"),
    ("member-not-an-array", _non_npy_member, "its archive cannot be read (ValueError"),
    ("huge-array-2d", _huge_array((100_000, 100_000)), "array 'M' declares shape (100000, 100000) of float64 "
     "(80000000000 bytes), but the archive holds 64 bytes for it; the file is truncated, forged or damaged."),
    ("huge-array-8TiB", _huge_array((2**40,)), "array 'M' declares shape (1099511627776,)"),
    ("huge-array-overflowing", _huge_array((2**62,)), "array 'M' declares shape (4611686018427387904,)"),
    ("inflated-member", _inflated_member, "claims 1410065408 bytes from"),
    ("pickle-as-metadata", _pickled("metadata"), "array '__metricopt__' holds Python objects, which metricopt never "
     "writes and will not unpickle."),
    ("pickle-compressed", _pickled("compressed"), "array 'evil' holds Python objects"),
    ("pickle-only", _pickled("foreign"), "array 'evil' holds Python objects"),
    ("meta-solution-list", _edit_meta(lambda m: m.__setitem__("solution", [1])), _CORRUPT + " (AttributeError"),
    ("meta-params-list", _edit_meta(lambda m: m.__setitem__("params", [1, 2])), _CORRUPT + " (TypeError"),
    ("meta-estimator-list", _edit_meta(lambda m: m.__setitem__("estimator", ["LMNN"])), _CORRUPT + " (TypeError"),
    ("meta-certificate-incomplete", _edit_meta(lambda m: m.__setitem__("certificate", {"upper": 1.0})),
     _CORRUPT + " (KeyError: 'lower')"),
    ("meta-verdict-unknown", _edit_meta(lambda m: m["certificate"].__setitem__("verdict", "perfect")),
     _CORRUPT + " (ValueError: 'perfect' is not a valid Verdict)"),
    ("meta-objective-string", _edit_meta(lambda m: m["solution"].__setitem__("objective", "low")),
     _CORRUPT + " (ValueError"),
    ("meta-variables-list", _edit_meta(lambda m: m["solution"].__setitem__("variables", [1])), _CORRUPT),
    ("meta-stats-list", _edit_meta(lambda m: m["solution"].__setitem__("stats", [1])), _CORRUPT),
    ("meta-fitted-n_iter-string", _edit_meta(lambda m: m.__setitem__("fitted", {"n_iter": "many"})), _CORRUPT),
    ("meta-preprocessing-list", _edit_meta(lambda m: m.__setitem__("preprocessing", [1])), _CORRUPT),
    ("meta-preprocessing-scale", _edit_meta(lambda m: m.__setitem__("preprocessing", {"scale": "log"})),
     _CORRUPT + " (ValueError: preprocessing scale 'log'"),
    ("meta-status-unknown", _edit_meta(lambda m: m["solution"].__setitem__("status", "great")),
     "is corrupt: unknown status 'great'."),
    ("meta-k-negative", _edit_meta(lambda m: m["params"].__setitem__("k", -1)),
     "is corrupt: its LMNN cannot be rebuilt (k must be >= 1; got -1.)."),
    ("meta-kind-missing", _edit_meta(lambda m: m.pop("kind")), "is corrupt: unknown kind None."),
    ("meta-sha256-missing", _edit_meta(lambda m: m.pop("sha256")), "but the file records None; the file was damaged "
     "or edited."),
    ("forged-M-nan", _forge_arrays(lambda a: a["M"].fill(np.nan)), "is corrupt: array M must be a finite real "
     "matrix; got dtype float64, shape (2, 2) with NaN or inf."),
    ("forged-L-shape", _forge_arrays(lambda a: a.__setitem__("L", np.ones((2, 7)))), "array L must be a finite real "
     "matrix; got dtype float64, shape (2, 7)."),
    ("forged-components-complex", _forge_arrays(lambda a: a.__setitem__("components", a["components"] + 1j)),
     "components (dtype complex128) must be a finite real matrix"),
    ("forged-b-vector", _forge_arrays(lambda a: a.__setitem__("b", np.ones(3)), "POLA"), "array b must be a finite "
     "real number; got dtype float64, shape (3,)."),
    ("forged-X-nan", _forge_arrays(lambda a: a["X_train"].fill(np.nan)), "its LMNN cannot be rebuilt (X contains 24 "
     "NaN or infinite value(s)"),
]


@pytest.mark.parametrize("corrupt, fragment", [c[1:] for c in MODEL_FILE_CASES], ids=[c[0] for c in MODEL_FILE_CASES])
def test_damaged_model_file_is_refused_quickly(corrupt, fragment, model_bytes, tmp_path):
    path = tmp_path / "model.npz"
    if corrupt is None:
        path = tmp_path
    else:
        corrupt(path, model_bytes)
    t0 = time.perf_counter()
    with pytest.raises(ModelFileError) as info:
        load_model(path)
    assert time.perf_counter() - t0 < QUICK
    _check_error(info.value, ModelFileError, fragment)
    assert str(path) in str(info.value)  # the message names the file
    assert not (tmp_path / "code-ran").exists()  # no unpickling, ever


def test_any_flipped_byte_is_refused_or_harmless(model_bytes, tmp_path):
    """Flip one bit at a spread of offsets over the whole file (headers, arrays, metadata, central directory):
    the file is refused with a ModelFileError, or the flip hit a field zipfile ignores and the model is intact."""
    data = model_bytes["LMNN"]
    est = model_bytes["est"]
    path = tmp_path / "flipped.npz"
    outcomes = {"refused": 0, "harmless": 0}
    t0 = time.perf_counter()
    for offset in range(0, len(data), 23):
        flipped = bytearray(data)
        flipped[offset] ^= 0x01
        path.write_bytes(bytes(flipped))
        try:
            got = load_model(path)
        except ModelFileError:
            outcomes["refused"] += 1
            continue
        outcomes["harmless"] += 1
        assert np.array_equal(got.solution_.M, est.solution_.M) and np.array_equal(got.predict(X0), est.predict(X0))
    assert outcomes["refused"] > 5 * outcomes["harmless"] > 0, outcomes
    assert time.perf_counter() - t0 < 30 * QUICK


@pytest.mark.parametrize("where", ["payload", "fsync"])
def test_interrupted_save_leaves_the_previous_model_and_no_new_file(where, model_bytes, tmp_path, monkeypatch):
    # tests/test_io.py interrupts np.savez over a previous model; here a save is interrupted after the payload
    # was written (at fsync) and a first save to a new path is interrupted midway: no file, no temporary
    previous = tmp_path / "model.npz"
    previous.write_bytes(model_bytes["LMNN"])
    fresh = tmp_path / "fresh.npz"
    est = load_model(previous)  # any fitted estimator
    if where == "payload":
        real = np.savez

        def half(file, *args, **kwds):
            real(file, *args, **kwds)
            file.truncate(file.tell() // 2)
            raise OSError("No space left on device")

        monkeypatch.setattr(np, "savez", half)
    else:
        def fail(fd):
            raise OSError("Input/output error")

        monkeypatch.setattr(os, "fsync", fail)
    for path in (previous, fresh):
        with pytest.raises(OSError):
            save_model(path, est)
    monkeypatch.undo()
    assert previous.read_bytes() == model_bytes["LMNN"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.npz"]
    assert np.array_equal(load_model(previous).predict(X0), model_bytes["est"].predict(X0))


# --------------------------------------------------------------------------- the command line


def _csv(rows_X, rows_y):
    return "".join(",".join([repr(float(v)) for v in r] + [str(label)]) + "\n" for r, label in zip(rows_X, rows_y))


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory, model_bytes):
    d = tmp_path_factory.mktemp("cli")
    good = _csv(XB, YB)
    files = {
        "good": good,
        "nan": good.replace(repr(float(XB[3, 1])), "nan", 1),
        "one-row": _csv(XB[:1], YB[:1]),
        "one-class": _csv(XB, np.zeros(24, int)),
        "empty": "",
        "header-only": "a,b,c,label\n",
        "ragged": "1,2,0\n1,0\n",
        "small-class": _csv(XB, np.r_[np.zeros(22, int), [1, 1]]),
        "big": _csv(XB * 1e200, YB),
        "tiny": _csv(XB * 1e-200, YB),
        "wide": _csv(np.random.default_rng(3).normal(size=(30, 40)), np.repeat([0, 1, 2], 10)),
    }
    for name, text in files.items():
        (d / f"{name}.csv").write_text(text)
    (d / "binary.csv").write_bytes(bytes(range(256)) * 4)
    save_model(d / "model.npz", mo.MMC().fit(XB, YB))  # a model of the CSV files' three features
    _huge_array((2**40,))(d / "huge.npz", model_bytes)
    _flip_central_directory(8)(d / "flipped.npz", model_bytes)
    (d / "folder").mkdir()
    return d


CLI_CASES = [
    ("fit-nan-csv", "fit --data {d}/nan.csv", "X contains 1 NaN or infinite value(s); remove or impute them"),
    ("fit-one-row", "fit --data {d}/one-row.csv", "stratified splitting needs at least 2 samples per class"),
    ("fit-one-class", "fit --data {d}/one-class.csv", "LMNN needs at least two classes; y has only one class (0)."),
    ("fit-empty-csv", "fit --data {d}/empty.csv", "empty.csv' has no data rows."),
    ("fit-header-only", "fit --data {d}/header-only.csv", "header-only.csv' has no data rows."),
    ("fit-ragged-csv", "fit --data {d}/ragged.csv", "data row 2 has 2 columns, the first row has 3; every row needs"),
    ("fit-binary-file", "fit --data {d}/binary.csv", "it is not a UTF-8 text (CSV) file."),
    ("fit-small-class", "fit --data {d}/small-class.csv --k 2", "LMNN with k=2 needs at least k+1=3 points"),
    ("fit-1e200-unscaled", "fit --data {d}/big.csv --no-scale", "are too large for float64 arithmetic"),
    ("fit-1e-200-unscaled", "fit --data {d}/tiny.csv --no-scale", "are too small for float64 arithmetic"),
    ("fit-mmc-d>n", "fit --data {d}/wide.csv --method mmc", "MMC is unbounded on this data"),
    ("fit-k-negative", "fit --data {d}/good.csv --k -2", "k must be >= 1; got -2."),
    ("fit-mu-2", "fit --data {d}/good.csv --mu 2", "mu must be <= 1.0 and >= 0.0; got 2.0."),
    ("fit-C-negative", "fit --data {d}/good.csv --C -1", "C must be > 0.0; got -1.0."),
    ("fit-n-components-0", "fit --data {d}/good.csv --n-components 0", "n-components must be >= 1; got 0."),
    ("fit-tol-negative", "fit --data {d}/good.csv --tol -1", "tol must be > 0.0; got -1.0."),
    ("fit-max-iter-0", "fit --data {d}/good.csv --max-iter 0", "max_iter must be >= 1; got 0."),
    ("fit-test-size-2", "fit --data {d}/good.csv --test-size 2", "test-size must be <= 1.0 and >= 0.0; got 2.0."),
    ("fit-seed-negative", "fit --data {d}/good.csv --seed -1", "seed must be >= 0; got -1."),
    ("fit-seed-too-large", "fit --data {d}/good.csv --seed 1099511627776", "seed must be <= 2**32 - 1"),
    ("fit-unknown-solver", "fit --data {d}/good.csv --solver adam", "unknown solver 'ADAM'; choose one of: 'SCS'"),
    ("fit-nca-unknown-solver", "fit --data {d}/good.csv --method nca --solver adam", "unknown solver 'adam'"),
    ("fit-pca-negative", "fit --data {d}/good.csv --pca -1", "pca=-1 dimensions is out of range"),
    ("fit-pca-fraction", "fit --data {d}/good.csv --pca 1.5", "must lie in (0, 1); got 1.5."),
    ("fit-plot-format", "fit --data {d}/good.csv --plot {d}/fig.unknownext",
     "unknown image format 'unknownext'; use a file name ending in .png, .pdf or .svg"),
    ("fit-out-folder", "fit --data {d}/good.csv --out {d}/folder", "folder': it is a folder; give a file name."),
    ("demo-seed-negative", "demo --dataset iris --seed -1", "seed must be >= 0; got -1."),
    ("demo-mu-2", "demo --dataset iris --mu 2", "mu must be <= 1.0 and >= 0.0; got 2.0."),
    ("predict-model-folder", "predict --model {d}/folder --data {d}/good.csv", "folder' is not a file; give the path"),
    ("predict-huge-array", "predict --model {d}/huge.npz --data {d}/good.csv", "array 'M' declares shape"),
    ("predict-nan-csv", "predict --model {d}/model.npz --data {d}/nan.csv", "NaN or infinite value(s)"),
    ("predict-out-folder", "predict --model {d}/model.npz --data {d}/good.csv --out {d}/folder",
     "folder': it is a folder; give a file name."),
    ("info-folder", "info --model {d}/folder", "folder' is not a file; give the path of a .npz model file."),
    ("info-flipped-flag", "info --model {d}/flipped.npz", "its archive cannot be read (RuntimeError"),
    ("fit-k-not-an-integer", "fit --data {d}/good.csv --k 1.5", "argument --k: invalid int value: '1.5'"),
]


@pytest.mark.parametrize("argv, fragment", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_command_line_exits_2_with_one_clear_line(argv, fragment, cli_files):
    argv = argv.format(d=cli_files).split()
    if argv[0] == "fit":
        argv += ["--quiet"] + (["--k", "2"] if "--k" not in argv else []) + (
            ["--out", str(cli_files / "out.npz")] if "--out" not in argv else [])
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own errors: usage and one error line, status 2
            code = exc.code
    assert time.perf_counter() - t0 < QUICK
    err = err.getvalue()
    assert code == 2, (code, err)
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(("metricopt: error: ", "metricopt fit: error: ")), err
    assert fragment in last, last
    assert not (cli_files / "out.npz").exists()
    assert not list(pathlib.Path(cli_files).glob(".*.tmp"))
