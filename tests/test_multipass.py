"""Multi-pass LMNN (Weinberger & Saul, JMLR 2009, Section 5.1)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.preprocessing import StandardScaler

import metricopt
from metricopt.constraints import target_neighbors
from metricopt.errors import InputError
from metricopt.linalg import factor, sq_dists
from metricopt.methods.lmnn.multipass import MultiPassResult, fit_multipass, multipass_lmnn


def _small_wine(per_class=20):
    X, y = load_wine(return_X_y=True)
    idx = np.concatenate([np.flatnonzero(y == c)[:per_class] for c in range(3)])
    return StandardScaler().fit_transform(X[idx]), y[idx]


@pytest.fixture(scope="module")
def wine60():
    return _small_wine()


@pytest.fixture(scope="module")
def three_passes(wine60):
    X, y = wine60
    return multipass_lmnn(X, y, passes=3)


def test_one_pass_equals_plain_lmnn(wine60):
    X, y = wine60
    res = multipass_lmnn(X, y, passes=1)
    plain = metricopt.LMNNProblem(X, y).solve()
    assert isinstance(res, MultiPassResult) and res.passes == 1
    np.testing.assert_array_equal(res.problems[0].target_neighbors, metricopt.LMNNProblem(X, y).target_neighbors)
    np.testing.assert_array_equal(res.solutions[0].M, plain.M)  # the same program, solved the same way
    assert res.solutions[0].objective == plain.objective
    # the map keeps every direction of the data that the metric uses
    D, Dp = sq_dists(res.transform(X), res.transform(X)), sq_dists(X @ plain.L.T, X @ plain.L.T)
    np.testing.assert_allclose(D, Dp, atol=1e-5 * Dp.max())


def test_passes_compose_and_repick_targets(wine60, three_passes):
    X, y = wine60
    res = three_passes
    assert res.passes == 3 and len(res.problems) == 3 and len(res.maps) == 3
    for sol in res.solutions:  # every pass is a convex program, certified on its own
        assert sol.status is metricopt.Status.OPTIMAL and sol.certificate.rel_gap <= 1e-6
    L1, L2, L3 = res.maps
    # pass 2 learns on X L1^T with the targets re-picked there (they differ from the Euclidean ones)
    second = res.problems[1]
    np.testing.assert_allclose(second.X, X @ L1.T, atol=1e-12)
    np.testing.assert_array_equal(second.target_neighbors, target_neighbors(X @ L1.T, y, 3))
    assert np.any(second.target_neighbors != res.problems[0].target_neighbors)
    np.testing.assert_allclose(res.problems[2].X, X @ (L2 @ L1).T, atol=1e-10)
    np.testing.assert_array_equal(res.target_neighbors, target_neighbors(X @ (L2 @ L1).T, y, 3))
    # each map is a factor of its pass's metric (up to dropped negligible directions)
    for Lp, prob, sol in zip(res.maps, res.problems, res.solutions):
        Z = prob.X
        np.testing.assert_allclose(sq_dists(Z @ Lp.T, Z @ Lp.T), sq_dists(Z @ factor(sol.M).T, Z @ factor(sol.M).T),
                                   atol=1e-5 * sq_dists(Z @ Lp.T, Z @ Lp.T).max())
    np.testing.assert_allclose(res.L, L3 @ L2 @ L1, atol=1e-12)
    np.testing.assert_allclose(res.M, res.L.T @ res.L)
    np.testing.assert_allclose(res.transform(X), X @ res.L.T)


def test_training_loo_error_does_not_rise(wine60, three_passes):
    X, y = wine60
    errs = [metricopt.loo_knn_error(X, y, k=3)]
    L = np.eye(X.shape[1])
    for Lp in three_passes.maps:
        L = Lp @ L
        errs.append(metricopt.loo_knn_error(X, y, k=3, L=L))
    assert errs[1] < errs[0]
    assert all(b <= a for a, b in zip(errs[1:], errs[2:]))


def test_errors(wine60):
    X, y = wine60
    with pytest.raises(InputError, match="passes must be >= 1; got 0"):
        multipass_lmnn(X, y, passes=0)
    with pytest.raises(InputError, match="passes must be an integer"):
        multipass_lmnn(X, y, passes=1.5)
    with pytest.raises(InputError, match="needs at least k\\+1=21 points in every class"):
        multipass_lmnn(X, y, k=20)
    res = multipass_lmnn(X[:, :4], y, passes=1)
    with pytest.raises(InputError, match="X has 3 features; the multi-pass metric was learned on 4"):
        res.transform(X[:, :3])


def test_fit_multipass_sets_estimator_attributes(wine60, three_passes):
    X, y = wine60
    est = metricopt.LMNN()
    est.n_features_in_ = X.shape[1]  # what LMNN.fit's validate_data sets before calling fit_multipass
    assert fit_multipass(est, X, y, passes=3) is est
    np.testing.assert_allclose(est.components_, three_passes.L, atol=1e-12)
    assert isinstance(est.problem_, metricopt.LMNNProblem)
    np.testing.assert_array_equal(est.problem_.target_neighbors, three_passes.target_neighbors)
    np.testing.assert_allclose(est.transform(X), X @ three_passes.L.T)
    # the certificate is that of the composed metric for LMNN on X with the last pass's targets
    assert est.certificate_.upper == pytest.approx(est.problem_.objective(est.solution_.M), rel=1e-12)
    assert est.solution_.status is (metricopt.Status.OPTIMAL if est.certificate_.rel_gap <= 1e-6
                                    else metricopt.Status.HEURISTIC)
    assert est.score(X, y) == 1.0 - metricopt.knn_error(X, y, X, y, k=3, L=three_passes.L)
