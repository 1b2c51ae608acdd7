"""Tests for metricopt.knn: the Weinberger & Saul (JMLR 2009) kNN evaluation rule."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.neighbors import KNeighborsClassifier

from metricopt.knn import knn_error, knn_loo_predict, knn_predict, loo_knn_error


# ---------------------------------------------------------------------------
# slow, obviously-correct reference implementation of the rule
# ---------------------------------------------------------------------------


def _ref_predict_one(X_train, y_train, x, k, L):
    Z = X_train @ L.T
    z = L @ x
    d = np.array([float(np.sum((zi - z) ** 2)) for zi in Z])
    order = sorted(range(len(d)), key=lambda i: (d[i], i))  # distance, then lower index
    for kk in range(k, 0, -1):
        labels = [y_train[i] for i in order[:kk]]
        values, counts = np.unique(labels, return_counts=True)
        if np.sum(counts == counts.max()) == 1:
            return values[np.argmax(counts)]
    raise AssertionError("unreachable: k=1 always decides")


def _ref_predict(X_train, y_train, X_test, k, L=None):
    L = np.eye(X_train.shape[1]) if L is None else np.asarray(L, float)
    return np.array([_ref_predict_one(X_train, y_train, x, k, L) for x in X_test])


def _ref_loo_predict(X, y, k, L=None):
    n = X.shape[0]
    out = []
    for i in range(n):
        keep = np.arange(n) != i
        out.append(_ref_predict(X[keep], y[keep], X[i : i + 1], k, L)[0])
    return np.array(out)


# ---------------------------------------------------------------------------
# agreement with scikit-learn where no ties can occur
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "k, n_classes",
    [(1, 4), (1, 2), (3, 2), (5, 2), (7, 2)],
)
def test_matches_sklearn_without_ties(k, n_classes):
    rng = np.random.default_rng(100 + 10 * k + n_classes)
    X_train = rng.normal(size=(80, 4))
    y_train = rng.integers(0, n_classes, size=80)
    X_test = rng.normal(size=(50, 4))
    L = rng.normal(size=(3, 4))

    for T in (None, L):
        Z_train = X_train if T is None else X_train @ T.T
        Z_test = X_test if T is None else X_test @ T.T
        ref = KNeighborsClassifier(n_neighbors=k, algorithm="brute").fit(Z_train, y_train).predict(Z_test)
        ours = knn_predict(X_train, y_train, X_test, k, L=T)
        np.testing.assert_array_equal(ours, ref)
        err = knn_error(X_train, y_train, X_test, ref, k, L=T)
        assert err == 0.0
    # the test is not vacuous: a different metric changes some predictions
    assert np.any(knn_predict(X_train, y_train, X_test, k) != knn_predict(X_train, y_train, X_test, k, L=L))


def test_matches_reference_on_integer_data_with_many_ties():
    # small integer coordinates: many exactly equal distances and tied votes
    rng = np.random.default_rng(7)
    X_train = rng.integers(0, 3, size=(40, 2)).astype(float)
    y_train = rng.integers(0, 3, size=40)
    X_test = rng.integers(0, 3, size=(25, 2)).astype(float)
    for k in (1, 2, 3, 4, 6, 9):
        np.testing.assert_array_equal(
            knn_predict(X_train, y_train, X_test, k), _ref_predict(X_train, y_train, X_test, k)
        )
    L = np.array([[1.0, 2.0]])
    for k in (2, 5):
        np.testing.assert_array_equal(
            knn_predict(X_train, y_train, X_test, k, L=L), _ref_predict(X_train, y_train, X_test, k, L)
        )


# ---------------------------------------------------------------------------
# tie rule for votes
# ---------------------------------------------------------------------------


def test_tied_vote_reduces_k():
    # 1-D training points at distances 1..5 from the query at 0.
    X_train = np.array([[1.0], [2.0], [3.0], [4.0], [5.0]])
    y_train = np.array([1, 3, 3, 1, 2])
    X_test = np.array([[0.0]])
    # k=5: {1:2, 3:2, 2:1} tie; k=4: {1:2, 3:2} tie; k=3: {1:1, 3:2} -> 3.
    # (nearest-neighbour label would be 1; smallest-label tie-break would be 1.)
    assert knn_predict(X_train, y_train, X_test, k=5).tolist() == [3]
    assert knn_predict(X_train, y_train, X_test, k=4).tolist() == [3]
    assert knn_predict(X_train, y_train, X_test, k=3).tolist() == [3]
    # k=2: {1:1, 3:1} tie -> k=1 -> label of nearest = 1
    assert knn_predict(X_train, y_train, X_test, k=2).tolist() == [1]
    assert knn_predict(X_train, y_train, X_test, k=1).tolist() == [1]


def test_all_distinct_labels_fall_back_to_nearest_and_keep_dtype():
    X_train = np.array([[0.0, 0.0], [0.0, 1.0], [3.0, 0.0], [0.0, -2.5], [4.0, 4.0]])
    y_train = np.array(["e", "d", "c", "b", "a"])
    X_test = np.array([[0.0, 0.9], [0.1, -2.0], [2.9, 0.2]])
    pred = knn_predict(X_train, y_train, X_test, k=5)  # every vote ties down to k=1
    assert pred.dtype == y_train.dtype
    assert pred.tolist() == ["d", "b", "c"]


def test_tie_rule_batch_of_queries():
    # two clusters on a line; queries whose k=4 votes tie 2-2 and are decided at k=3
    X_train = np.array([[-3.0], [-2.0], [-1.0], [1.0], [2.0], [3.0]])
    y_train = np.array([0, 0, 1, 1, 0, 0])
    X_test = np.array([[-0.6], [0.6], [-2.6], [2.4]])
    # q=-0.6: order -1(1), 1(1), -2(0), -3(0) -> tie 2-2; k=3 -> 1
    # q=+0.6: order 1(1), -1(1), 2(0), 3(0)   -> tie 2-2; k=3 -> 1
    # q=-2.6: order -3(0), -2(0), -1(1), 1(1) -> tie 2-2; k=3 -> 0
    # q=+2.4: order 2(0), 3(0), 1(1), -1(1)   -> tie 2-2; k=3 -> 0
    assert knn_predict(X_train, y_train, X_test, k=4).tolist() == [1, 1, 0, 0]
    # scikit-learn breaks these ties differently (smallest label), so this is not its rule
    skl = KNeighborsClassifier(n_neighbors=4, algorithm="brute").fit(X_train, y_train).predict(X_test)
    assert skl.tolist() != [1, 1, 0, 0]


# ---------------------------------------------------------------------------
# equal distances are ordered by lower training index
# ---------------------------------------------------------------------------


def test_equal_distance_prefers_lower_index_k1():
    X_test = np.array([[0.0]])
    assert knn_predict(np.array([[-1.0], [1.0]]), np.array([7, 8]), X_test, k=1).tolist() == [7]
    assert knn_predict(np.array([[1.0], [-1.0]]), np.array([7, 8]), X_test, k=1).tolist() == [7]
    assert knn_predict(np.array([[1.0], [-1.0]]), np.array([8, 7]), X_test, k=1).tolist() == [8]
    # duplicate training points: the first copy wins
    assert knn_predict(np.array([[5.0], [2.0], [2.0]]), np.array([0, 1, 2]), X_test, k=1).tolist() == [1]


def test_equal_distance_at_kth_position_keeps_lower_indices():
    # nearest point (index 0, label 0) at distance 1; four points tied at distance 4
    X_train = np.array(
        [
            [1.0, 0.0],  # 0: label 0, d=1
            [0.0, 2.0],  # 1: label 1, d=4
            [2.0, 0.0],  # 2: label 1, d=4
            [-2.0, 0.0],  # 3: label 0, d=4
            [0.0, -2.0],  # 4: label 0, d=4
        ]
    )
    y_train = np.array([0, 1, 1, 0, 0])
    X_test = np.array([[0.0, 0.0]])
    # k=3 -> neighbours 0, 1, 2 -> labels 0, 1, 1 -> 1 (indices 3/4 would give 0)
    assert knn_predict(X_train, y_train, X_test, k=3).tolist() == [1]
    # permuting the training order changes which tied points are "nearer"
    perm = np.array([0, 3, 4, 1, 2])
    assert knn_predict(X_train[perm], y_train[perm], X_test, k=3).tolist() == [0]
    # k=2 -> neighbours 0, 1 -> tie 1-1 -> k=1 -> 0
    assert knn_predict(X_train, y_train, X_test, k=2).tolist() == [0]


# ---------------------------------------------------------------------------
# metrics: L vs M, and a metric that removes a noisy feature
# ---------------------------------------------------------------------------


def test_M_and_L_give_identical_predictions():
    rng = np.random.default_rng(3)
    X_train = rng.normal(size=(60, 5))
    y_train = rng.integers(0, 3, size=60)
    X_test = rng.normal(size=(40, 5))
    for r in (5, 2):  # full rank and rank-deficient M
        L = rng.normal(size=(r, 5))
        M = L.T @ L
        for k in (1, 3, 4):
            pL = knn_predict(X_train, y_train, X_test, k, L=L)
            pM = knn_predict(X_train, y_train, X_test, k, M=M)
            np.testing.assert_array_equal(pL, pM)
            np.testing.assert_array_equal(
                knn_loo_predict(X_train, y_train, k, L=L), knn_loo_predict(X_train, y_train, k, M=M)
            )
    # identity metric = Euclidean
    np.testing.assert_array_equal(
        knn_predict(X_train, y_train, X_test, 3, M=np.eye(5)), knn_predict(X_train, y_train, X_test, 3)
    )


def test_M_with_small_negative_eigenvalue_is_clipped():
    rng = np.random.default_rng(4)
    X_train = rng.normal(size=(30, 3))
    y_train = rng.integers(0, 2, size=30)
    X_test = rng.normal(size=(20, 3))
    M_psd = np.diag([2.0, 1.0, 0.0])
    M_neg = np.diag([2.0, 1.0, -4.0])  # the -4 is clipped to 0
    p_psd = knn_predict(X_train, y_train, X_test, 3, M=M_psd)
    np.testing.assert_array_equal(knn_predict(X_train, y_train, X_test, 3, M=M_neg), p_psd)
    # rotated: the clipped direction is not a coordinate axis
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    np.testing.assert_array_equal(
        knn_predict(X_train @ Q.T, y_train, X_test @ Q.T, 3, M=Q @ M_neg @ Q.T), p_psd
    )
    # not vacuous: keeping that direction (|w| instead of clipping) changes predictions
    assert np.any(knn_predict(X_train, y_train, X_test, 3, M=np.diag([2.0, 1.0, 4.0])) != p_psd)


def test_metric_that_removes_noisy_feature_fixes_error():
    rng = np.random.default_rng(5)
    n = 60
    y = np.repeat([0, 1], n // 2)
    signal = 3.0 * y + rng.uniform(-0.5, 0.5, size=n)  # classes separated by a gap of 2
    noise = rng.normal(scale=50.0, size=n)
    X = np.column_stack([signal, noise])
    y_te = np.repeat([0, 1], 20)
    X_te = np.column_stack([3.0 * y_te + rng.uniform(-0.5, 0.5, size=40), rng.normal(scale=50.0, size=40)])

    L_keep_signal = np.array([[1.0, 0.0]])
    M_keep_signal = np.diag([1.0, 0.0])
    assert knn_error(X, y, X_te, y_te, 3) > 0.25
    assert knn_error(X, y, X_te, y_te, 3, L=L_keep_signal) == 0.0
    assert knn_error(X, y, X_te, y_te, 3, M=M_keep_signal) == 0.0
    assert loo_knn_error(X, y, 3) > 0.25
    assert loo_knn_error(X, y, 3, L=L_keep_signal) == 0.0
    # scaling the noise down (not fully away) already helps a lot
    assert loo_knn_error(X, y, 3, M=np.diag([1.0, 1e-4])) < loo_knn_error(X, y, 3)


# ---------------------------------------------------------------------------
# leave-one-out
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_loo_matches_explicit_loop(k):
    rng = np.random.default_rng(11 + k)
    # integer data: ties in distance and in votes, and duplicate points
    X = rng.integers(0, 3, size=(30, 2)).astype(float)
    y = rng.integers(0, 3, size=30)
    ref = _ref_loo_predict(X, y, k)
    np.testing.assert_array_equal(knn_loo_predict(X, y, k), ref)
    assert loo_knn_error(X, y, k) == pytest.approx(np.mean(ref != y))
    # continuous data under a metric
    Xc = rng.normal(size=(25, 3))
    L = rng.normal(size=(2, 3))
    refc = _ref_loo_predict(Xc, y[:25], k, L)
    assert loo_knn_error(Xc, y[:25], k, L=L) == pytest.approx(np.mean(refc != y[:25]))


def test_loo_excludes_self_even_with_duplicates():
    # point 1 duplicates point 0 but has another label
    X = np.array([[0.0], [0.0], [10.0], [11.0]])
    y = np.array([0, 1, 2, 2])
    # k=1: 0 -> its duplicate 1 (label 1); 1 -> duplicate 0 (label 0); 2 -> 3; 3 -> 2
    assert knn_loo_predict(X, y, 1).tolist() == [1, 0, 2, 2]
    assert loo_knn_error(X, y, 1) == 0.5
    # k = n - 1 is allowed
    assert knn_loo_predict(X, y, 3).shape == (4,)


# ---------------------------------------------------------------------------
# blocking does not change results
# ---------------------------------------------------------------------------


def test_blocked_equals_unblocked():
    rng = np.random.default_rng(21)
    X_train = rng.integers(0, 4, size=(50, 3)).astype(float)
    y_train = rng.integers(0, 4, size=50)
    X_test = rng.integers(0, 4, size=(37, 3)).astype(float)
    L = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]])
    for k in (1, 4, 7):
        full = knn_predict(X_train, y_train, X_test, k, L=L, block_size=10_000)
        full_loo = knn_loo_predict(X_train, y_train, k, L=L, block_size=10_000)
        for bs in (1, 2, 7, 36, 37):
            np.testing.assert_array_equal(knn_predict(X_train, y_train, X_test, k, L=L, block_size=bs), full)
            np.testing.assert_array_equal(knn_loo_predict(X_train, y_train, k, L=L, block_size=bs), full_loo)
        np.testing.assert_array_equal(knn_predict(X_train, y_train, X_test, k, L=L), full)
        assert loo_knn_error(X_train, y_train, k, L=L, block_size=3) == loo_knn_error(X_train, y_train, k, L=L)


# ---------------------------------------------------------------------------
# input validation
# ---------------------------------------------------------------------------


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(10, 3)), np.arange(10) % 2, rng.normal(size=(4, 3))


def test_error_both_L_and_M(data):
    X, y, Xt = data
    with pytest.raises(ValueError, match="not both"):
        knn_predict(X, y, Xt, L=np.eye(3), M=np.eye(3))
    with pytest.raises(ValueError, match="not both"):
        loo_knn_error(X, y, L=np.eye(3), M=np.eye(3))


def test_error_X_not_2d(data):
    X, y, Xt = data
    with pytest.raises(ValueError, match="X_train must be a 2-D array"):
        knn_predict(X[:, 0], y, Xt)
    with pytest.raises(ValueError, match="X_test must be a 2-D array"):
        knn_predict(X, y, Xt[0])
    with pytest.raises(ValueError, match="X must be a 2-D array"):
        loo_knn_error(X[None], y)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_error_nonfinite(data, bad):
    X, y, Xt = data
    Xb = X.copy()
    Xb[2, 1] = bad
    with pytest.raises(ValueError, match="X_train contains 1 NaN or infinite"):
        knn_predict(Xb, y, Xt)
    with pytest.raises(ValueError, match="X_test contains 1 NaN or infinite"):
        knn_predict(X, y, Xb)
    with pytest.raises(ValueError, match="X contains 1 NaN or infinite"):
        knn_loo_predict(Xb, y)
    with pytest.raises(ValueError, match="L contains NaN or infinite"):
        knn_predict(X, y, Xt, L=np.full((2, 3), bad))
    with pytest.raises(ValueError, match="M contains NaN or infinite"):
        knn_predict(X, y, Xt, M=np.full((3, 3), bad))


def test_error_mismatched_lengths(data):
    X, y, Xt = data
    with pytest.raises(ValueError, match="y_train has 9 labels but X has 10 samples"):
        knn_predict(X, y[:-1], Xt)
    with pytest.raises(ValueError, match="y_test has 3 labels but X has 4 samples"):
        knn_error(X, y, Xt, np.zeros(3))
    with pytest.raises(ValueError, match="y has 11 labels but X has 10 samples"):
        loo_knn_error(X, np.arange(11))
    with pytest.raises(ValueError, match="X_test has 2 features but X_train has 3"):
        knn_predict(X, y, Xt[:, :2])


def test_error_bad_k(data):
    X, y, Xt = data
    with pytest.raises(ValueError, match="k must be >= 1"):
        knn_predict(X, y, Xt, k=0)
    with pytest.raises(ValueError, match="k must be >= 1"):
        loo_knn_error(X, y, k=-2)
    with pytest.raises(ValueError, match="k must be an integer"):
        knn_predict(X, y, Xt, k=2.5)
    with pytest.raises(ValueError, match=r"k=11 is larger than the number of available training points \(10"):
        knn_predict(X, y, Xt, k=11)
    # leave-one-out has only n - 1 = 9 points available
    with pytest.raises(ValueError, match=r"k=10 is larger than the number of available training points \(9"):
        loo_knn_error(X, y, k=10)
    assert 0.0 <= loo_knn_error(X, y, k=9) <= 1.0
    assert knn_predict(X, y, Xt, k=10).shape == (4,)


def test_error_feature_count_vs_metric(data):
    X, y, Xt = data
    with pytest.raises(ValueError, match=r"L has shape \(2, 4\), so it expects 4 features, but X has 3"):
        knn_predict(X, y, Xt, L=np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"M has shape \(4, 4\), but X has 3 features"):
        loo_knn_error(X, y, M=np.eye(4))
    with pytest.raises(ValueError, match="M must be a square 2-D array"):
        knn_predict(X, y, Xt, M=np.ones((3, 2)))
    with pytest.raises(ValueError, match="L must be a 2-D array"):
        knn_predict(X, y, Xt, L=np.ones(3))


def test_error_bad_block_size(data):
    X, y, Xt = data
    with pytest.raises(ValueError, match="block_size must be >= 1"):
        knn_predict(X, y, Xt, block_size=0)
