"""The tie-inclusive kNN rule (``ties="inclusive"`` in :mod:`metricopt.knn`).

Every training point tied (to ``TIE_RTOL``) with the k-th nearest one votes; on a tied vote the group
tied at the largest distance of the set is dropped and the vote repeated; if the nearest group alone
still ties, the smallest tied label wins. The rule must not depend on the training order or on the
rounding of distances that are tied in exact arithmetic (balance-scale: integer features 1..5).
"""

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from metricopt.errors import InputError
from metricopt.knn import TIE_RTOL, knn_error, knn_loo_predict, knn_predict, loo_knn_error


def reference_predict(D, y, k, rtol=TIE_RTOL):
    """The rule written point by point from its definition (D: squared distances, query x train)."""
    out = []
    for row in D:
        kth = np.sort(row)[k - 1]
        S = [j for j in range(len(row)) if row[j] <= kth * (1 + rtol)]
        while True:
            labels, counts = np.unique(y[S], return_counts=True)
            tied = labels[counts == counts.max()]
            if len(tied) == 1:
                out.append(tied[0])
                break
            dmax = max(row[j] for j in S)
            far = [j for j in S if row[j] * (1 + rtol) >= dmax]
            if len(far) == len(S):
                out.append(tied.min())
                break
            S = [j for j in S if j not in far]
    return np.array(out)


def integer_data(seed, n=60, d=3, classes=3):
    rng = np.random.default_rng(seed)
    return rng.integers(1, 4, size=(n, d)).astype(float), rng.integers(0, classes, size=n)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 3, 5])
def test_matches_the_rule_written_point_by_point(seed, k):
    X, y = integer_data(seed)
    Xq = np.random.default_rng(100 + seed).integers(1, 4, size=(25, 3)).astype(float)
    D = cdist(Xq, X, "sqeuclidean")
    np.testing.assert_array_equal(knn_predict(X, y, Xq, k, ties="inclusive"), reference_predict(D, y, k))
    Dl = cdist(X, X, "sqeuclidean")
    np.fill_diagonal(Dl, np.inf)
    np.testing.assert_array_equal(knn_loo_predict(X, y, k, ties="inclusive"), reference_predict(Dl, y, k))


def test_independent_of_training_order_where_the_index_rule_is_not():
    X, y = integer_data(7, n=80)
    Xq = np.random.default_rng(8).integers(1, 4, size=(200, 3)).astype(float)
    changed_index = changed_inclusive = 0
    for s in range(5):
        perm = np.random.default_rng(s).permutation(len(y))
        for k in (3, 5):
            a = knn_predict(X, y, Xq, k, ties="index")
            b = knn_predict(X[perm], y[perm], Xq, k, ties="index")
            changed_index += int(np.sum(a != b))
            a = knn_predict(X, y, Xq, k, ties="inclusive")
            b = knn_predict(X[perm], y[perm], Xq, k, ties="inclusive")
            changed_inclusive += int(np.sum(a != b))
    assert changed_index > 0  # the data do exercise ties
    assert changed_inclusive == 0


def test_robust_to_perturbing_the_metric_below_the_tolerance():
    """Distances tied in exact arithmetic, split by a 1e-10 perturbation of M (and by rounding)."""
    X, y = integer_data(11, n=100, d=4)
    rng = np.random.default_rng(0)
    M = np.diag([1.0, 2.0, 3.0, 4.0])
    moved_index = 0
    for t in range(5):
        E = rng.normal(size=(4, 4))
        Mp = M + 1e-10 * (E @ E.T) / 4
        for k in (3, 5):
            base = knn_loo_predict(X, y, k, M=M, ties="inclusive")
            np.testing.assert_array_equal(knn_loo_predict(X, y, k, M=Mp, ties="inclusive"), base)
            moved_index += int(np.sum(knn_loo_predict(X, y, k, M=M) != knn_loo_predict(X, y, k, M=Mp)))
    assert moved_index > 0  # the index rule does move under the same perturbations


def test_without_ties_it_is_the_index_rule():
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(80, 5)), rng.integers(0, 4, 80)
    Xq = rng.normal(size=(50, 5))
    for k in (1, 2, 4, 7):
        np.testing.assert_array_equal(knn_predict(X, y, Xq, k, ties="inclusive"), knn_predict(X, y, Xq, k))
        assert loo_knn_error(X, y, k, ties="inclusive") == loo_knn_error(X, y, k)


def test_hand_cases():
    # query at 0; training points on a line. Distances (squared): 1, 1, 4, 4, 4
    X = np.array([[1.0], [-1.0], [2.0], [-2.0], [2.0]])
    y = np.array([0, 1, 1, 0, 0])
    q = np.zeros((1, 1))
    # k = 3: the k-th distance is 4, so all five vote: 0 gets 3 votes, 1 gets 2 -> 0
    assert knn_predict(X, y, q, 3, ties="inclusive")[0] == 0
    # the index rule takes points 0, 1, 2 only: 1 gets 2 votes -> 1
    assert knn_predict(X, y, q, 3)[0] == 1
    # k = 2: nearest group {0: label 0, 1: label 1} ties and is the last group -> smallest label 0
    assert knn_predict(X, y, q, 2, ties="inclusive")[0] == 0
    assert knn_predict(X[[1, 0]], y[[1, 0]], q, 2, ties="inclusive")[0] == 0
    # a tied vote over two groups drops the farther group: labels 1, 1 | 0, 0 at distances 1, 1, 4, 4
    X2 = np.array([[1.0], [-1.0], [2.0], [-2.0]])
    y2 = np.array([1, 1, 0, 0])
    assert knn_predict(X2, y2, q, 4, ties="inclusive")[0] == 1
    assert knn_error(X2, y2, q, np.array([1]), 4, ties="inclusive") == 0.0


def test_unknown_tie_rule_is_refused():
    X, y = integer_data(0, n=10)
    with pytest.raises(InputError, match=r"ties must be one of \['index', 'inclusive'\]; got 'random'"):
        knn_predict(X, y, X, 3, ties="random")
    with pytest.raises(InputError, match="ties must be one of"):
        loo_knn_error(X, y, 3, ties=None)
