"""Inputs that were silently accepted or crashed with a dependency's exception (issue 28, items 7 and 9).

Each case is ``(callable, expected exception type, exact fragment of the message)``: every one is
now a clear error of metricopt's (an :class:`~metricopt.errors.InputError`, or scikit-learn's
``NotFittedError`` before ``fit``, which metricopt's estimators follow), whose message says what
was wrong and what to do. The inputs that have a correct answer (explicit one-column target
neighbours, ``np.matrix`` data) are checked for that answer.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import NotFittedError

import metricopt as mo
from metricopt import datasets
from metricopt._validation import check_label_cells
from metricopt.errors import InputError
from metricopt.terms import Frobenius, Linear

# 2 classes of 6 points in 2-D
X0 = np.array([[0.0, 0.0], [0.4, 0.1], [0.1, 0.5], [0.5, 0.4], [0.2, 0.2], [0.3, 0.6],
               [2.0, 0.0], [2.4, 0.2], [2.1, 0.6], [2.3, 0.3], [2.6, 0.1], [2.2, 0.5]])
Y0 = np.repeat([0, 1], 6)
N0 = X0.shape[0]


@functools.cache
def _fitted():
    return mo.LMNN(k=2).fit(X0, Y0)


@pytest.fixture(scope="module")
def fitted():
    return _fitted()


def _lmnn():
    return mo.LMNNProblem(X0, Y0, k=2)


def _labels(*changes):
    y = Y0.astype(object)
    for i, value in changes:
        y[i] = value
    return y


def _nan_X():
    X = X0[:3].copy()
    X[1, 0] = np.nan
    return X


_DATES = np.arange(2 * N0).astype("datetime64[D]").reshape(N0, 2)
_P_NAN = np.eye(2)
_P_NAN[0, 1] = np.nan
_FIT_CASES = {  # estimator calls, given the fitted LMNN
    "predict-nan": (lambda e: e.predict(_nan_X()), InputError,
                    "X contains 1 NaN or infinite value(s); remove or impute them"),
    "transform-nan": (lambda e: e.transform(_nan_X()), InputError,
                      "X contains 1 NaN or infinite value(s); remove or impute them"),
    "predict-wrong-width": (lambda e: e.predict(np.ones((3, 3))), InputError,
                            "X has 3 features, but LMNN is expecting 2 features as input; pass X with the same 2 "
                            "columns, in the same order, as at fit."),
    "transform-wrong-width": (lambda e: e.transform(np.ones((3, 1))), InputError,
                              "X has 1 features, but LMNN is expecting 2 features as input;"),
    "predict-1d": (lambda e: e.predict(X0[0]), InputError,
                   "X must be a 2-D array of shape (n_samples, n_features); got an array with 1 dimension(s) and "
                   "shape (2,). Reshape it, e.g. X.reshape(-1, 1) for one feature. Reshape your data as "
                   "X.reshape(1, -1) instead if it holds a single sample."),
    "predict-empty": (lambda e: e.predict(np.zeros((0, 2))), InputError,
                      "X is empty (shape (0, 2)); it needs at least one sample and one feature."),
    "transform-empty": (lambda e: e.transform(np.zeros((0, 2))), InputError, "X is empty (shape (0, 2));"),
}

CASES = {
    # certify: complex M (was: imaginary part dropped, a certificate of M.real); refused even with imaginary parts 0
    "certify-complex-M": (lambda: mo.certify(_lmnn(), np.eye(2) + 1j * np.eye(2)), InputError,
                          "M has complex entries (largest imaginary part 1); M must be a finite (2, 2) array of "
                          "numbers or a metricopt.Solution, and metricopt refuses complex input rather than drop "
                          "imaginary parts. Pass M.real if they are rounding."),
    "certify-complex-M-zero-imag": (lambda: mo.certify(_lmnn(), np.eye(2).astype(complex)), InputError,
                                    "M has complex entries (all imaginary parts are 0);"),
    "objective-complex-M": (lambda: _lmnn().objective(np.eye(2) + 1j), InputError,
                            "M has complex entries (largest imaginary part 1);"),
    # target neighbours with 0 columns (was: optimal at 0)
    "target-neighbors-0-columns": (
        lambda: mo.LMNNProblem(X0, Y0, target_neighbors=np.zeros((N0, 0), dtype=np.int64)), InputError,
        f"target_neighbors has shape ({N0}, 0): 0 target neighbours per point, which leaves LMNN without pull or "
        "push terms (its optimum would be 0 at M = 0)."),
    # dates as features (was: days since 1970 as numbers)
    "X-datetime64": (lambda: mo.LMNNProblem(_DATES, Y0), InputError,
                     "X holds dates (datetime64) of dtype datetime64[D]; metricopt needs numeric features. Convert "
                     "them to numbers first"),
    "X-timedelta64": (lambda: mo.LMNN().fit(_DATES - _DATES[0, 0], Y0), InputError,
                      "X holds durations (timedelta64) of dtype timedelta64[D]; metricopt needs numeric features."),
    # empty labels (an empty CSV cell; was: a class "")
    "y-blank-string": (lambda: mo.LMNNProblem(X0, np.where(np.arange(N0) == 3, "", Y0.astype(str)), k=2),
                       InputError, "y contains empty labels (blank strings); every sample needs a valid class label. "
                                   "Found at sample(s) 3: drop those samples or fill in their labels."),
    "splits-blank-label": (lambda: datasets.random_splits(["a", "b", " ", "a", "b", "a"]), InputError,
                           "y contains empty labels (blank strings); every sample needs a valid class label. Found "
                           "at sample(s) 2:"),
    "csv-blank-label-rows": (lambda: check_label_cells(["a", "b", "a", "", "b", "a", "b", "a", " "], "data.csv"),
                             InputError, "'data.csv': data row(s) 4, 9 have an empty label (the last column); give "
                                         "every row a class label or remove those rows."),
    # labels that are None, of mixed types, NaN or complex (was: TypeError from np.unique, or strings)
    "y-None": (lambda: mo.LMNNProblem(X0, _labels((2, None)), k=2), InputError,
               "y contains missing labels (None); every sample needs a valid class label. Found at sample(s) 2: drop "
               "those samples or fill in their labels."),
    "y-None-estimator": (lambda: mo.LMNN(k=2).fit(X0, _labels((2, None), (5, None))), InputError,
                         "y contains missing labels (None); every sample needs a valid class label. Found at "
                         "sample(s) 2, 5:"),
    "y-mixed-types": (lambda: mo.LMNNProblem(X0, _labels((2, "a")), k=1), InputError,
                      "y mixes label types: numbers (e.g. sample 0: 0) and strings (e.g. sample 2: 'a'). Labels must "
                      "all be numbers or all strings"),
    "y-mixed-types-list": (lambda: mo.POLAProblem(X0, [0, 1, "1"] + [0, 1] * 4 + [0], C=1.0), InputError,
                           "y mixes label types: numbers (e.g. sample 0: 0) and strings (e.g. sample 2: '1')."),
    "y-NaN": (lambda: mo.LMNNProblem(X0, np.where(np.arange(N0) == 3, np.nan, Y0), k=2), InputError,
              "y contains NaN or infinite labels; every sample needs a valid class label. Found at sample(s) 3:"),
    "y-NaN-object": (lambda: mo.LMNN(k=1).fit(X0, _labels((3, float("nan")))), InputError,
                     "y contains NaN or infinite labels; every sample needs a valid class label. Found at "
                     "sample(s) 3:"),
    "y-complex": (lambda: mo.LMNN(k=2).fit(X0, Y0 + 0j), InputError,
                  "y has complex labels (dtype complex128); class labels must be integers, strings or real numbers."),
    # a fitted estimator's predict / transform on bad input (was: scikit-learn's ValueError / TypeError)
    **{name: (lambda case=case: case[0](_fitted()), case[1], case[2])
       for name, case in _FIT_CASES.items()},
    # before fit: scikit-learn's NotFittedError (also a ValueError and an AttributeError), as sklearn's checks want
    "predict-before-fit": (lambda: mo.LMNN().predict(X0), NotFittedError,
                           "This LMNN instance is not fitted yet. Call 'fit' with appropriate arguments"),
    "transform-before-fit": (lambda: mo.POLA().transform(X0), NotFittedError, "This POLA instance is not fitted yet."),
    # a linear term with NaN (was: CVXPY's "Problem data contains NaN or Inf" at solve)
    "Linear-NaN": (lambda: Linear(_P_NAN), InputError,
                   "Linear's P contains 1 NaN or infinite entries; it must be a finite square (d, d) matrix"),
    "Linear-NaN-regularizer": (lambda: mo.LMNNProblem(X0, Y0, k=2, regularizer=Linear(np.full((2, 2), np.inf))),
                               InputError, "Linear's P contains 4 NaN or infinite entries;"),
    "Linear-complex": (lambda: Linear(np.eye(2) * 1j), InputError, "P has complex entries (largest imaginary part 1);"),
    # weights of 1e300 (was: the exact backend's 'error', the JAX backend's OverflowError)
    "POLA-C-1e300": (lambda: mo.POLAProblem(X0, Y0, C=1e300), InputError,
                     "C must be > 0.0 and <= 1e+50; got 1e+300. Larger magnitudes overflow float64 arithmetic"),
    "POLA-estimator-C-1e300": (lambda: mo.POLA(C=1e300).fit(X0, Y0), InputError,
                               "C must be > 0.0 and <= 1e+50; got 1e+300."),
    "Frobenius-lam-1e300": (lambda: Frobenius(1e300), InputError, "lam must be >= 0.0 and <= 1e+50; got 1e+300."),
    "certify-tol-1e300": (lambda: mo.certify(_lmnn(), np.eye(2), tol=1e300), InputError,
                          "tol must be >= 0.0 and <= 1e+50; got 1e+300."),
    "certify-b-1e300": (lambda: mo.certify(mo.POLAProblem(X0, Y0, C=1.0), np.eye(2), b=1e300), InputError,
                        "b must be between -1e+50 and 1e+50; got 1e+300 (its square overflows float64 in the "
                        "objective). Pass b=None to have it chosen optimally for M."),
    "certify-b-complex": (lambda: mo.certify(mo.POLAProblem(X0, Y0, C=1.0), np.eye(2), b=2 + 1j), InputError,
                          "b has complex entries (largest imaginary part 1);"),
    "preprocess-complex": (lambda: datasets.preprocess(X0 + 1j, scale="standard"), InputError,
                           "X_train has complex entries (largest imaginary part 1);"),
    # solve(None) (was: AttributeError 'NoneType' object has no attribute 'geometry')
    "solve-None": (lambda: mo.solve(None), InputError,
                   "solve needs a metricopt problem (e.g. metricopt.LMNNProblem(X, y)) as its first argument; got "
                   "NoneType."),
    "solve-estimator": (lambda: mo.solve(mo.LMNN()), InputError,
                        "got LMNN. For an estimator, pass its fitted problem, estimator.problem_."),
}


@pytest.mark.parametrize("fn, exc, fragment", list(CASES.values()), ids=list(CASES))
def test_bad_input_is_a_clear_error(fn, exc, fragment):
    with pytest.raises(exc, match=re.escape(fragment)):
        fn()


def test_explicit_one_column_target_neighbors_define_k_and_solve():
    # class 0 has 2 points: the default k=3 would need 4 per class, but explicit target neighbours define k
    X = np.array([[0.0, 0.0], [0.3, 0.1], [2.0, 0.0], [2.2, 0.3], [2.5, 0.1], [2.1, 0.6]])
    y = np.array([0, 0, 1, 1, 1, 1])
    q = mo.LMNNProblem(X, y, k=1)  # the default search's one nearest same-class neighbour
    T = q.target_neighbors.copy()
    assert T.shape == (6, 1)
    p = mo.LMNNProblem(X, y, target_neighbors=T)  # k left at its default, 3
    assert p.k == 1
    assert_array_equal(p.target_neighbors, T)
    sol = p.solve()
    assert sol.status is mo.Status.OPTIMAL
    assert sol.objective > 0
    assert_allclose(sol.objective, q.solve().objective, rtol=1e-6)
    # an estimator fitted with explicit target neighbours is accepted the same way
    assert mo.LMNN()._make_problem(X, y, target_neighbors=T).k == 1


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.filterwarnings("ignore:A column-vector y was passed")  # scikit-learn's warning for a column y
def test_np_matrix_X_is_converted(fitted):
    Xm = np.matrix(X0)
    p = mo.LMNNProblem(Xm, Y0, k=2)
    assert type(p.X) is np.ndarray
    assert_array_equal(p.X, X0)
    est = mo.LMNN(k=2).fit(Xm, np.matrix(Y0).T)  # a column matrix of labels too
    assert_allclose(est.components_, fitted.components_, rtol=1e-12, atol=1e-12)
    assert_array_equal(fitted.predict(np.matrix(X0[:4])), fitted.predict(X0[:4]))
    assert_array_equal(fitted.transform(np.matrix(X0[:4])), fitted.transform(X0[:4]))


def test_valid_object_and_list_labels_still_pass():
    names = np.array(["a", "b"], dtype=object)[Y0]
    assert_array_equal(mo.LMNNProblem(X0, names, k=2).classes_, ["a", "b"])
    assert_array_equal(mo.LMNNProblem(X0, list(Y0.astype(float)), k=2).classes_, [0.0, 1.0])
