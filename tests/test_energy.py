"""Tests for metricopt.methods.lmnn.energy: LMNN energy-based classification (Weinberger & Saul, JMLR 2009, Eq. 15).

1. the vectorised energies equal a slow reference written term by term from Eq. 15;
2. a point deep inside a class is given that class;
3. iris / wine sanity: with M = I the energy rule is no worse than the kNN rule + 5 points;
4. exact error messages;
5. the block size does not change the result;
6. LMNN.predict / score with rule="knn" | "energy".
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_iris, load_wine
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import metricopt
from metricopt.constraints import target_neighbors
from metricopt.methods.lmnn.energy import energy_predict, energy_scores
from metricopt.errors import InputError, UnknownOptionError

# ---------------------------------------------------------------------------
# slow reference, straight from Eq. 15
# ---------------------------------------------------------------------------


def _d(M, a, b):
    diff = a - b
    return float(diff @ M @ diff)


def _ref_energies(X_train, y_train, X_test, M, k, mu, train_targets, targets_metric="learned"):
    """E[t, c] from Eq. 15 with explicit loops over test points, classes, targets and impostors."""
    classes = sorted(set(y_train.tolist()))
    n = len(y_train)
    E = np.zeros((len(X_test), len(classes)))
    for t, x in enumerate(X_test):
        for ci, c in enumerate(classes):
            same = [i for i in range(n) if y_train[i] == c]
            if targets_metric == "learned":
                key = [(_d(M, x, X_train[i]), i) for i in same]
            else:
                key = [(float(np.sum((x - X_train[i]) ** 2)), i) for i in same]
            targets = [i for _, i in sorted(key)[:k]]
            pull = 0.0
            for j in targets:
                pull += _d(M, x, X_train[j])
            push_t = 0.0  # impostors l invading the perimeter of x_t (labelled c)
            for j in targets:
                for l in range(n):
                    if y_train[l] != c:
                        push_t += max(0.0, 1.0 + _d(M, x, X_train[j]) - _d(M, x, X_train[l]))
            push_i = 0.0  # x_t (labelled c) invading the perimeter of training points i of other labels
            for i in range(n):
                if y_train[i] == c:
                    continue
                for j in train_targets[i]:
                    push_i += max(0.0, 1.0 + _d(M, X_train[i], X_train[j]) - _d(M, X_train[i], x))
            E[t, ci] = (1.0 - mu) * pull + mu * (push_t + push_i)
    return E


@pytest.fixture(scope="module")
def small():
    """3 classes x 8 points in 4 dimensions, overlapping, a random PSD M of rank 3."""
    rng = np.random.default_rng(7)
    centers = rng.normal(scale=1.0, size=(3, 4))
    X = np.concatenate([c + rng.normal(scale=0.8, size=(8, 4)) for c in centers])
    y = np.repeat(np.array(["a", "b", "c"]), 8)
    X_test = rng.normal(scale=1.2, size=(15, 4))
    A = rng.normal(size=(3, 4))
    M = A.T @ A
    return X, y, X_test, M


# ---------------------------------------------------------------------------
# 1. agreement with the reference
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("targets_metric", ["learned", "euclidean"])
@pytest.mark.parametrize("k, mu", [(3, 0.5), (1, 0.2), (2, 1.0), (3, 0.0)])
def test_energies_match_reference(small, k, mu, targets_metric):
    X, y, X_test, M = small
    T = target_neighbors(X, y, k)
    ref = _ref_energies(X, y, X_test, M, k, mu, T, targets_metric)
    got, classes = energy_scores(X, y, X_test, k=k, mu=mu, M=M, targets_metric=targets_metric,
                                 return_classes=True)
    assert_array_equal(classes, ["a", "b", "c"])
    assert got.shape == (X_test.shape[0], 3)
    assert np.all(ref > 0)
    assert_allclose(got, ref, rtol=1e-10, atol=1e-10)
    # on this data about 20-40% of the hinge arguments are positive, so both sides of [.]_+ are exercised
    assert_array_equal(energy_predict(X, y, X_test, k=k, mu=mu, M=M, targets_metric=targets_metric),
                       np.array(["a", "b", "c"])[ref.argmin(axis=1)])


def test_energies_with_given_train_targets_and_L(small):
    X, y, X_test, M = small
    rng = np.random.default_rng(3)
    # arbitrary same-label training targets, 2 per point (k_train differs from k)
    T = np.empty((X.shape[0], 2), dtype=np.int64)
    for i in range(X.shape[0]):
        same = np.flatnonzero((y == y[i]) & (np.arange(X.shape[0]) != i))
        T[i] = rng.choice(same, size=2, replace=False)
    L = np.linalg.cholesky(M + 0.1 * np.eye(4)).T  # M' = L^T L
    ref = _ref_energies(X, y, X_test, L.T @ L, 3, 0.4, T)
    got = energy_scores(X, y, X_test, k=3, mu=0.4, L=L, train_targets=T)
    assert_allclose(got, ref, rtol=1e-10, atol=1e-10)
    # M given as L^T L gives the same energies as L
    assert_allclose(energy_scores(X, y, X_test, k=3, mu=0.4, M=L.T @ L, train_targets=T), got,
                    rtol=1e-10, atol=1e-10)


def test_euclidean_default_metric_is_identity(small):
    X, y, X_test, _ = small
    assert_allclose(energy_scores(X, y, X_test), energy_scores(X, y, X_test, M=np.eye(4)), rtol=1e-12)
    # with M = I the two choices of test targets coincide
    assert_allclose(energy_scores(X, y, X_test, targets_metric="euclidean"), energy_scores(X, y, X_test),
                    rtol=1e-12)


# ---------------------------------------------------------------------------
# 2. a point deep inside a class
# ---------------------------------------------------------------------------


def test_point_deep_inside_a_class_gets_that_class(small):
    X, y, _, M = small
    shift = {"a": 0.0, "b": 20.0, "c": 40.0}
    Xs = X + np.array([shift[v] for v in y])[:, None]  # the classes moved far apart
    for c in ("a", "b", "c"):
        x = Xs[y == c].mean(axis=0)[None, :]  # the class mean: a training-like point deep inside class c
        assert energy_predict(Xs, y, x, k=3, M=np.eye(4))[0] == c
        assert energy_predict(Xs, y, x, k=3, M=M + np.eye(4))[0] == c


# ---------------------------------------------------------------------------
# 3. iris / wine sanity against the kNN rule
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("loader", [load_iris, load_wine], ids=["iris", "wine"])
def test_energy_error_close_to_knn_error_with_identity(loader, capsys):
    """Sanity: with M = I the energy rule errs at most 5 percentage points more than the kNN rule
    (70/30 stratified split of the standardized data)."""
    X, y = loader(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
    M = np.eye(X.shape[1])
    err_energy = float(np.mean(energy_predict(X_tr, y_tr, X_te, k=3, M=M) != y_te))
    err_knn = metricopt.knn_error(X_tr, y_tr, X_te, y_te, k=3, M=M)
    with capsys.disabled():
        print(f"\n[{loader.__name__}] M=I, k=3: energy error {err_energy:.4f}, kNN error {err_knn:.4f}")
    assert err_energy <= err_knn + 0.05, (err_energy, err_knn)


# ---------------------------------------------------------------------------
# 4. error messages
# ---------------------------------------------------------------------------


def _raises(exc, message):
    return pytest.raises(exc, match="^" + re.escape(message) + "$")


def test_error_messages(small):
    X, y, X_test, M = small
    with _raises(InputError, "X_test has 3 features but X_train has 4; they must have the same number of columns."):
        energy_scores(X, y, X_test[:, :3])
    with _raises(InputError, "y_train has 23 labels but X has 24 samples; pass one label per row of X."):
        energy_scores(X, y[:-1], X_test)
    with _raises(InputError, "k must be >= 1; got 0."):
        energy_scores(X, y, X_test, k=0)
    with _raises(InputError, "k must be an integer; got 2.5."):
        energy_scores(X, y, X_test, k=2.5)
    with _raises(InputError, "mu must be <= 1.0 and >= 0.0; got 1.5."):
        energy_scores(X, y, X_test, mu=1.5)
    with _raises(InputError,
                 "energy classification with k=8 needs at least k+1=9 points in every class of y_train (each "
                 "training point needs k target neighbours of its own class, and the test point k of each "
                 "class); these classes have fewer: 'a': 8, 'b': 8, 'c': 8. Lower k or drop those classes."):
        energy_scores(X, y, X_test, k=8)
    T = target_neighbors(X, y, 2)
    with _raises(InputError,
                 "energy classification with k=9 needs at least k=9 points in every class of y_train (the test "
                 "point needs k target neighbours of each class); these classes have fewer: 'a': 8, 'b': 8, "
                 "'c': 8. Lower k or drop those classes."):
        energy_scores(X, y, X_test, k=9, train_targets=T)
    # k = class size is fine once the training targets are given
    assert energy_scores(X, y, X_test, k=8, train_targets=T).shape == (15, 3)
    with _raises(InputError, "pass either L (the linear map, M = L^T L) or M (the PSD metric matrix), not both."):
        energy_scores(X, y, X_test, M=M, L=np.eye(4))
    with _raises(InputError, "M must have shape (4, 4) for data with 4 features; got (3, 3)."):
        energy_scores(X, y, X_test, M=np.eye(3))
    with _raises(InputError, "L must have shape (r, 4) with r >= 1 for data with 4 features; got (2, 3)."):
        energy_scores(X, y, X_test, L=np.ones((2, 3)))
    with _raises(InputError, "M is not positive semidefinite (smallest eigenvalue -1); project it first with "
                             "metricopt.linalg.project_psd."):
        energy_scores(X, y, X_test, M=-np.eye(4))
    with _raises(UnknownOptionError, "unknown targets_metric 'cosine'; choose one of: 'learned', 'euclidean'."):
        energy_scores(X, y, X_test, targets_metric="cosine")
    with _raises(InputError, "block_size must be >= 1; got 0."):
        energy_scores(X, y, X_test, block_size=0)
    with _raises(InputError, "train_targets must have shape (n_train, k_train) = (24, k_train) with k_train >= 1; "
                             "got (23, 2)."):
        energy_scores(X, y, X_test, train_targets=T[:-1])
    bad = T.copy()
    bad[0, 0] = 0
    with _raises(InputError, "train_targets: a training point cannot be its own target neighbour."):
        energy_scores(X, y, X_test, train_targets=bad)
    bad[0, 0] = 20  # label 'c', point 0 is 'a'
    with _raises(InputError,
                 "train_targets: every target neighbour must have the same label as its training point."):
        energy_scores(X, y, X_test, train_targets=bad)
    bad[0, 0] = 24
    with _raises(InputError, "train_targets must hold indices in [0, 23] (X_train has 24 samples)."):
        energy_scores(X, y, X_test, train_targets=bad)
    with _raises(InputError, "train_targets must hold integer indices into X_train; got dtype float64."):
        energy_scores(X, y, X_test, train_targets=T.astype(float))
    Xnan = X_test.copy()
    Xnan[0, 0] = np.nan
    with pytest.raises(InputError, match=r"^X_test contains 1 NaN or infinite value\(s\)"):
        energy_predict(X, y, Xnan)


# ---------------------------------------------------------------------------
# 5. block size
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def larger():
    """4 overlapping classes, 200 training and 61 test points in 5 dimensions, a random PSD M."""
    rng = np.random.default_rng(11)
    y = rng.integers(0, 4, size=200)
    X = rng.normal(size=(4, 5))[y] + rng.normal(size=(200, 5))
    A = rng.normal(size=(5, 5))
    return X, y, rng.normal(size=(61, 5)), A.T @ A


@pytest.mark.parametrize("data", ["small", "larger"])
@pytest.mark.parametrize("targets_metric", ["learned", "euclidean"])
def test_block_size_does_not_change_result(data, targets_metric, request):
    X, y, X_test, M = request.getfixturevalue(data)
    full = energy_scores(X, y, X_test, M=M, targets_metric=targets_metric)
    for bs in (1, 2, 7, 15, 16, 60, 1000):
        got = energy_scores(X, y, X_test, M=M, targets_metric=targets_metric, block_size=bs)
        assert_array_equal(got, full)
        assert_array_equal(energy_predict(X, y, X_test, M=M, targets_metric=targets_metric, block_size=bs),
                           energy_predict(X, y, X_test, M=M, targets_metric=targets_metric))


# ---------------------------------------------------------------------------
# 6. the LMNN estimator
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wine_split():
    X, y = load_wine(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    scaler = StandardScaler().fit(X_tr)
    return scaler.transform(X_tr), scaler.transform(X_te), y_tr, y_te


@pytest.fixture(scope="module")
def wine_lmnn(wine_split):
    X_tr, _, y_tr, _ = wine_split
    return metricopt.LMNN().fit(X_tr, y_tr)


def test_lmnn_predict_rules(wine_lmnn, wine_split, capsys):
    X_tr, X_te, y_tr, y_te = wine_split
    est = wine_lmnn
    M = est.get_mahalanobis_matrix()
    knn = est.predict(X_te)
    assert_array_equal(knn, est.predict(X_te, rule="knn"))
    assert_array_equal(knn, metricopt.knn_predict(X_tr, y_tr, X_te, k=est.k, M=M))
    energy = est.predict(X_te, rule="ENERGY")  # case-insensitive, like every option
    T = target_neighbors(X_tr, y_tr, est.k)
    assert_array_equal(energy, energy_predict(X_tr, y_tr, X_te, k=est.k, mu=est.mu, M=M, train_targets=T))
    err_knn, err_energy = float(np.mean(knn != y_te)), float(np.mean(energy != y_te))
    assert est.score(X_te, y_te) == pytest.approx(1.0 - err_knn)
    assert est.score(X_te, y_te, rule="energy") == pytest.approx(1.0 - err_energy)
    with capsys.disabled():
        print(f"\n[wine, LMNN metric] energy error {err_energy:.4f}, kNN error {err_knn:.4f}")
    assert err_energy <= err_knn + 0.05


def test_lmnn_predict_errors(wine_lmnn, wine_split):
    from sklearn.exceptions import NotFittedError

    _, X_te, _, _ = wine_split
    with _raises(UnknownOptionError, "unknown rule 'vote'; choose one of: 'knn', 'energy'."):
        wine_lmnn.predict(X_te, rule="vote")
    with pytest.raises(NotFittedError):
        metricopt.LMNN().predict(X_te)
    with pytest.raises(ValueError, match="features"):
        wine_lmnn.predict(X_te[:, :5], rule="energy")
