"""Tests for the closed-form baselines (metricopt.methods.baselines.transforms; estimators PCA, Whitening, LDA, RCA).

Each map is compared with a hand computation written here from its definition (JMLR 2009 Sec. 2.2
for PCA and LDA, Bar-Hillel et al. 2005 for RCA); the estimators report status ``closed_form`` (never
optimal, no certificate), pass scikit-learn's estimator checks and round-trip through model files.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.datasets import load_iris, load_wine
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import metricopt as mo
from metricopt.errors import InputError
from metricopt.solution import Status


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def same_rows_up_to_sign(A, B, tol=1e-8):
    assert A.shape == B.shape
    for a, b in zip(A, B):
        s = np.sign(a @ b)
        np.testing.assert_allclose(a, s * b, atol=tol)


def test_pca_rows_are_the_top_covariance_eigenvectors(wine):
    X, _ = wine
    C = np.cov(X.T, bias=True)
    w, U = np.linalg.eigh(C)
    est = mo.PCA(3).fit(X)
    same_rows_up_to_sign(est.components_, U[:, ::-1][:, :3].T)
    assert est.solution_.objective == pytest.approx(w[::-1][:3].sum() / w.sum(), rel=1e-12)
    assert est.solution_.status is Status.CLOSED_FORM and est.certificate_ is None
    frac = mo.PCA(0.8).fit(X)
    r = frac.components_.shape[0]
    kept = np.cumsum(w[::-1]) / w.sum()
    assert kept[r - 1] >= 0.8 > kept[r - 2]


def test_whitening_is_the_inverse_covariance(wine):
    X, _ = wine
    est = mo.Whitening().fit(X)
    np.testing.assert_allclose(est.get_mahalanobis_matrix(), np.linalg.inv(np.cov(X.T, bias=True)), rtol=1e-8,
                               atol=1e-10)
    Z = est.transform(X)
    np.testing.assert_allclose(np.cov(Z.T, bias=True), np.eye(X.shape[1]), atol=1e-8)


def test_lda_follows_jmlr_2009_definition(wine):
    X, y = wine
    classes = np.unique(y)
    mu = X.mean(0)
    Cb = sum(np.outer(X[y == c].mean(0) - mu, X[y == c].mean(0) - mu) for c in classes) / len(classes)
    Cw = sum((X[y == c] - X[y == c].mean(0)).T @ (X[y == c] - X[y == c].mean(0)) for c in classes) / len(X)
    w, V = np.linalg.eig(np.linalg.solve(Cw, Cb))
    order = np.argsort(w.real)[::-1][:2]
    expected = (V[:, order].real / np.linalg.norm(V[:, order].real, axis=0)).T
    est = mo.LDA().fit(X, y)
    assert est.components_.shape == (len(classes) - 1, X.shape[1])
    same_rows_up_to_sign(est.components_, expected, tol=1e-7)
    assert est.solution_.objective == pytest.approx(w.real[order].sum(), rel=1e-8)
    with pytest.raises(InputError, match=re.escape(
            "LDA gives at most C - 1 = 2 directions for 3 classes and 13 features; got n_components=3.")):
        mo.LDA(n_components=3).fit(X, y)


def test_rca_whitens_the_within_chunklet_covariance():
    X, y = load_iris(return_X_y=True)
    Chat = sum((X[y == c] - X[y == c].mean(0)).T @ (X[y == c] - X[y == c].mean(0)) for c in range(3)) / len(X)
    est = mo.RCA(pca=None).fit(X, y)  # all four (non-null) directions kept: M is the inverse of C-hat
    np.testing.assert_allclose(est.get_mahalanobis_matrix(), np.linalg.inv(Chat), rtol=1e-8)
    # given chunklets: two per class (ids), the rest unassigned
    chunk = np.full(len(X), -1)
    for c in range(3):
        idx = np.flatnonzero(y == c)
        chunk[idx[:10]], chunk[idx[10:20]] = 2 * c, 2 * c + 1
    given = mo.RCA(pca=None, chunklets=chunk).fit(X, y)
    C2 = sum((X[chunk == j] - X[chunk == j].mean(0)).T @ (X[chunk == j] - X[chunk == j].mean(0))
             for j in range(6)) / 60
    np.testing.assert_allclose(given.get_mahalanobis_matrix(), np.linalg.inv(C2), rtol=1e-8)
    with pytest.raises(InputError, match="RCA needs at least one chunklet of two or more points"):
        mo.RCA(chunklets=np.arange(len(X))).fit(X, y)


@pytest.mark.parametrize("est", [mo.PCA(2), mo.Whitening(), mo.LDA(), mo.RCA()], ids=lambda e: type(e).__name__)
def test_round_trip_and_knn(est, wine, tmp_path):
    X, y = wine
    est.fit(X, y)
    path = tmp_path / "m.npz"
    mo.io.save_model(path, est)
    back = mo.io.load_model(path)
    np.testing.assert_array_equal(back.components_, est.components_)
    np.testing.assert_array_equal(back.transform(X), est.transform(X))
    assert back.solution_.status is Status.CLOSED_FORM
    assert 0.0 <= mo.loo_knn_error(X, y, k=3, L=est.components_) < 0.5


@parametrize_with_checks([mo.PCA(), mo.Whitening(), mo.LDA(), mo.RCA()])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_lmnn_on_lda_inputs_is_a_pipeline_with_a_certified_lmnn(wine):
    """JMLR 2009 Table 1's "LMNN on LDA inputs": LMNN learns a certified metric on the (C - 1)-dimensional
    LDA projection, whose LMNN objective is below that of LDA's Euclidean metric there."""
    from sklearn.pipeline import make_pipeline

    X, y = wine
    pipe = make_pipeline(mo.LDA(), mo.LMNN(k=3, mu=0.5)).fit(X, y)
    lda, lmnn = pipe[0], pipe[1]
    assert lda.components_.shape == (2, X.shape[1])
    assert lmnn.solution_.status == Status.OPTIMAL and lmnn.certificate_.rel_gap <= 1e-6
    Z = lda.transform(X)
    assert pipe.transform(X).shape == (X.shape[0], 2)
    problem = mo.LMNNProblem(Z, y, k=3, mu=0.5)
    assert problem.objective(lmnn.get_mahalanobis_matrix()) < 0.9 * problem.objective(np.eye(2))
