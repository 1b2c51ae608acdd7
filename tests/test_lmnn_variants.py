"""The LMNN estimator's variants (JMLR 2009 Sections 5 and 6): low rank, early stopping, passes, search."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

import metricopt
from metricopt.errors import InputError, UnknownOptionError
from metricopt.methods.lmnn.lowrank import truncate_metric


def _iris(per_class=15):
    X, y = load_iris(return_X_y=True)
    idx = np.concatenate([np.flatnonzero(y == c)[:per_class] for c in range(3)])
    return StandardScaler().fit_transform(X[idx]), y[idx]


def test_low_rank_r_is_stationary_with_r_columns():
    X, y = _iris()
    est = metricopt.LMNN(n_components=2).fit(X, y)
    assert est.components_.shape == (2, 4)
    assert est.transform(X).shape == (len(y), 2)
    assert est.solution_.status is metricopt.Status.STATIONARY  # non-convex: never "optimal"
    assert est.certificate_ is None
    np.testing.assert_allclose(est.get_mahalanobis_matrix(), est.components_.T @ est.components_, atol=1e-12)
    full = metricopt.LMNN().fit(X, y)
    # the rank-2 objective is at least the convex optimum (a feasible point of the relaxation)
    assert est.solution_.objective >= full.solution_.objective * (1 - 1e-9)


def test_low_rank_s_truncates_the_convex_solution():
    X, y = _iris()
    full = metricopt.LMNN().fit(X, y)
    est = metricopt.LMNN(n_components=2, low_rank="S").fit(X, y)
    L2, _ = truncate_metric(full.solution_.M, 2)
    np.testing.assert_allclose(est.components_.T @ est.components_, L2.T @ L2, atol=1e-7 * np.abs(L2).max() ** 2)
    pred = est.predict(X)
    np.testing.assert_array_equal(pred, metricopt.knn_predict(X, y, X, k=3, M=est.get_mahalanobis_matrix()))


def test_early_stopping_from_the_estimator():
    X, y = _iris(20)
    est = metricopt.LMNN(backend="jax", tol=1e-6, validation_fraction=0.25, patience=3).fit(X, y)
    assert est.solution_.status in (metricopt.Status.EARLY_STOPPED, metricopt.Status.OPTIMAL)
    curve = est.validation_curve_
    assert curve is not None and len(curve.errors) >= 1
    assert min(curve.errors) == pytest.approx(curve.best_error)
    # prediction uses the whole training set under the kept metric
    assert est.problem_.n == len(y)
    np.testing.assert_array_equal(est.predict(X), metricopt.knn_predict(X, y, X, k=3, M=est.solution_.M))


def test_variant_errors():
    X, y = _iris()
    with pytest.raises(InputError, match="validation_fraction \\(early stopping\\) needs backend='jax'"):
        metricopt.LMNN(validation_fraction=0.2).fit(X, y)
    with pytest.raises(InputError, match="LMNN combines at most one of passes > 1, n_components and "
                                         "validation_fraction; got n_components and validation_fraction"):
        metricopt.LMNN(n_components=2, validation_fraction=0.2, backend="jax").fit(X, y)
    with pytest.raises(UnknownOptionError, match="unknown low_rank 'Q'"):
        metricopt.LMNN(n_components=2, low_rank="Q").fit(X, y)
    with pytest.raises(InputError, match="passes"):
        metricopt.LMNN(passes=0).fit(X, y)
    with pytest.raises(UnknownOptionError, match="unknown search"):
        metricopt.LMNN(search="kd").fit(X, y)


def test_one_pass_equals_plain_lmnn_and_two_passes_compose():
    X, y = _iris()
    plain = metricopt.LMNN().fit(X, y)
    one = metricopt.multipass_lmnn(X, y, passes=1)
    np.testing.assert_allclose(one.M, plain.solution_.M, atol=1e-6 * np.abs(plain.solution_.M).max())
    est = metricopt.LMNN(passes=2).fit(X, y)
    res = est.passes_
    assert res.passes == 2 and len(res.maps) == 2
    # the composed map is the product of the per-pass maps, and transform applies it
    np.testing.assert_allclose(est.components_, res.maps[1] @ res.maps[0], atol=1e-12)
    np.testing.assert_allclose(est.transform(X), X @ est.components_.T, atol=1e-12)
    np.testing.assert_allclose(est.get_mahalanobis_matrix(), est.components_.T @ est.components_, atol=1e-12)
    # pass 2's targets are the k nearest same-label points under pass 1's metric
    Z = X @ res.maps[0].T
    expected = metricopt.LMNNProblem(Z, y, k=3).target_neighbors
    np.testing.assert_array_equal(np.sort(res.problems[1].target_neighbors, axis=1), np.sort(expected, axis=1))
    # the estimator predicts with those targets and certifies the composed metric
    np.testing.assert_array_equal(est.problem_.target_neighbors, res.target_neighbors)
    # composed metric: certified against the full problem, called optimal only when the certificate proves it
    cert = est.certificate_
    assert cert is not None and cert.lower <= est.solution_.objective <= cert.upper + 1e-9
    expected_status = metricopt.Status.OPTIMAL if cert.is_optimal else metricopt.Status.HEURISTIC
    assert est.solution_.status is expected_status
