"""Tree-based neighbour searches (metricopt.balltree) against their brute-force references.

Each tree function must return exactly what the brute force returns: the same target
neighbours (ties by lower index), the same impostor triplets with the same hinge values,
the same kNN predictions. The data include duplicated points and small-integer grids,
where exact distance ties and hinge values of exactly ``-margin`` are common.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricopt import datasets
from metricopt.balltree import choose_search, knn_tree_predict, tree_active_triplets, tree_target_neighbors
from metricopt.constraints import active_triplets, target_neighbors
from metricopt.errors import InputError, UnknownOptionError
from metricopt.knn import knn_predict

TREES = ("ball", "kd")


def _canonical(result):
    """Sort a triplet result lexicographically by (i, j, l)."""
    i, j, l, h = result
    order = np.lexsort((l, j, i))
    return i[order], j[order], l[order], h[order]


def _assert_same_triplets(ref, got):
    ref = _canonical(ref)
    for a, b in zip(ref[:3], got[:3]):
        assert b.dtype == np.int64
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ref[3], got[3])  # same expressions: bit-for-bit equal hinges


def _data(seed, n=60, d=3, n_classes=3, kind="float", n_dup=10):
    """Labelled data with every class large enough; ``kind`` "grid" gives many exact ties."""
    rng = np.random.default_rng(seed)
    if kind == "grid":
        X = rng.integers(0, 3, size=(n, d)).astype(float)
    else:
        X = rng.normal(size=(n, d))
    y = np.arange(n) % n_classes
    rng.shuffle(y)
    if n_dup:  # duplicate some rows (sometimes with another label)
        src = rng.integers(0, n, size=n_dup)
        X = np.vstack([X, X[src]])
        y = np.concatenate([y, np.where(rng.random(n_dup) < 0.5, y[src], rng.integers(0, n_classes, n_dup))])
        perm = rng.permutation(y.size)
        X, y = X[perm], y[perm]
    return X, y


# ---------------------------------------------------------------------------
# target neighbours
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize("kind", ["float", "grid"])
@pytest.mark.parametrize("seed", range(3))
def test_target_neighbors_identical_to_brute_force(seed, kind, tree):
    X, y = _data(seed, kind=kind)
    for k in (1, 3, 5):
        ref = target_neighbors(X, y, k)
        got = tree_target_neighbors(X, y, k, leaf_size=4, tree=tree)
        assert got.dtype == np.int64 and got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)


def test_target_neighbors_certified_and_recomputed_paths_are_both_used():
    X, y = _data(0, n=200, d=4, n_dup=0)  # continuous: no ties, every row certified by the tree
    T, stats = tree_target_neighbors(X, y, 3, return_stats=True)
    assert stats == {"rows": X.shape[0], "recomputed": 0}
    np.testing.assert_array_equal(T, target_neighbors(X, y, 3))
    X, y = _data(0, n=200, d=4, n_dup=40)  # duplicates: tied rows go to the reference arithmetic
    T, stats = tree_target_neighbors(X, y, 3, return_stats=True)
    assert stats["recomputed"] > 0
    np.testing.assert_array_equal(T, target_neighbors(X, y, 3))


def test_target_neighbors_all_points_identical_and_minimal_classes():
    X = np.ones((12, 2))
    y = np.repeat([0, 1, 2], 4)
    np.testing.assert_array_equal(tree_target_neighbors(X, y, 3), target_neighbors(X, y, 3))
    np.testing.assert_array_equal(tree_target_neighbors(X, y, 2), target_neighbors(X, y, 2))
    with pytest.raises(InputError, match="at least 5 points"):
        tree_target_neighbors(X, y, 4)
    with pytest.raises(UnknownOptionError):
        tree_target_neighbors(X, y, 1, tree="cover")


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(8, 30),
    d=st.integers(1, 3),
    k=st.integers(1, 3),
    levels=st.integers(2, 4),
    seed=st.integers(0, 2**16),
)
def test_target_neighbors_on_small_integer_grids(n, d, k, levels, seed):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, levels, size=(n, d)).astype(float) * 0.5 - 1.0
    y = np.arange(n) % 2
    ref = target_neighbors(X, y, k)
    np.testing.assert_array_equal(tree_target_neighbors(X, y, k, leaf_size=2), ref)


# ---------------------------------------------------------------------------
# impostor search
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize("kind", ["float", "grid"])
@pytest.mark.parametrize("seed", range(3))
def test_active_triplets_identical_to_brute_force(seed, kind, tree):
    X, y = _data(seed, kind=kind, d=2)
    T = target_neighbors(X, y, 3)
    rng = np.random.default_rng(100 + seed)
    L = rng.normal(size=(2, 2)) if kind == "float" else np.eye(2)  # integer Z: h hits -margin exactly
    Z = X @ L.T
    # 1 + 1e-12: on the grid, impostors with h = -1 lie a hair inside the query ball
    for margin in (0.0, 0.5, 1.0, 1.0 + 1e-12, 3.0):
        ref = active_triplets(Z, y, T, margin, block_size=7)
        got = tree_active_triplets(Z, y, T, margin, leaf_size=3, tree=tree)
        _assert_same_triplets(ref, got)
        assert np.all(got[3] > -margin)


def test_active_triplets_scaled_metrics_and_negative_margin():
    X, y = _data(5, n=80, d=3)
    T = target_neighbors(X, y, 2)
    for scale in (0.05, 1.0, 20.0):
        Z = np.sqrt(scale) * X
        for margin in (-0.5, 0.0, 0.25):
            _assert_same_triplets(active_triplets(Z, y, T, margin), tree_active_triplets(Z, y, T, margin))
    # margin so negative that no triplet can qualify
    got = tree_active_triplets(X, y, T, margin=-1e6)
    assert all(a.size == 0 for a in got)


@pytest.mark.parametrize("name", ["iris", "wine"])
def test_iris_and_wine_with_a_random_map(name):
    X, y = datasets.load(name, scale="standard")
    rng = np.random.default_rng(7)
    L = rng.normal(size=(X.shape[1], X.shape[1])) / np.sqrt(X.shape[1])
    Z = X @ L.T
    T = target_neighbors(X, y, 3)
    np.testing.assert_array_equal(tree_target_neighbors(X, y, 3), T)
    np.testing.assert_array_equal(tree_target_neighbors(Z, y, 3), target_neighbors(Z, y, 3))
    for margin in (0.0, 1.0):
        _assert_same_triplets(active_triplets(Z, y, T, margin), tree_active_triplets(Z, y, T, margin))
    raw, _ = datasets.load(name)  # raw decimals: distances tie up to rounding
    np.testing.assert_array_equal(tree_target_neighbors(raw, y, 3), target_neighbors(raw, y, 3))


def test_limit_returns_none_exactly_when_more_triplets_exist():
    X, y = _data(11, n=60, d=2)
    T = target_neighbors(X, y, 3)
    total = _canonical(active_triplets(X, y, T, 0.0))[0].size
    assert total > 5
    full = tree_active_triplets(X, y, T, 0.0, limit=total)
    assert full is not None and full[0].size == total
    assert tree_active_triplets(X, y, T, 0.0, limit=total - 1) is None
    assert active_triplets(X, y, T, 0.0, limit=total - 1) is None
    assert tree_active_triplets(X, y, T, 0.0, limit=0) is None
    # no triplet at all: empty arrays, also with limit=0
    far = X + 100.0 * y[:, None]
    Tf = target_neighbors(far, y, 3)
    empty = tree_active_triplets(far, y, Tf, 0.0, limit=0)
    assert empty is not None and all(a.size == 0 for a in empty)
    assert empty[0].dtype == np.int64 and empty[3].dtype == np.float64


def test_output_is_in_lexicographic_order():
    X, y = _data(12, n=50, d=2)
    T = target_neighbors(X, y, 3)
    i, j, l, _ = tree_active_triplets(X, y, T, 0.5)
    keys = np.stack([i, j, l], 1)
    assert np.all(np.diff(np.lexsort((l, j, i))) == 1)
    assert len({tuple(r) for r in keys}) == keys.shape[0]  # no triplet twice


# ---------------------------------------------------------------------------
# kNN prediction
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize("kind", ["float", "grid"])
@pytest.mark.parametrize("seed", range(3))
def test_knn_predictions_identical_to_knn_predict(seed, kind, tree):
    X, y = _data(seed, n=90, d=3, kind=kind, n_classes=4)
    Xtr, ytr, Xte = X[:70], y[:70], np.vstack([X[70:], X[:10]])  # some test points equal training points
    rng = np.random.default_rng(seed)
    L = rng.normal(size=(2, 3))
    for k in (1, 2, 3, 4, 7):
        np.testing.assert_array_equal(knn_tree_predict(Xtr, ytr, Xte, k, tree=tree), knn_predict(Xtr, ytr, Xte, k))
        np.testing.assert_array_equal(
            knn_tree_predict(Xtr, ytr, Xte, k, L=L, tree=tree, leaf_size=5), knn_predict(Xtr, ytr, Xte, k, L=L)
        )
    M = L.T @ L
    np.testing.assert_array_equal(knn_tree_predict(Xtr, ytr, Xte, 3, M=M), knn_predict(Xtr, ytr, Xte, 3, M=M))


def test_knn_string_labels_k_equal_n_train_and_errors():
    X, y = _data(3, n=30, d=2, kind="grid", n_dup=5)
    labels = np.array(["a", "b", "c"])[y]
    Xte = X[::3] + 0.5
    np.testing.assert_array_equal(knn_tree_predict(X, labels, Xte, 5), knn_predict(X, labels, Xte, 5))
    n = X.shape[0]
    np.testing.assert_array_equal(knn_tree_predict(X, labels, Xte, n), knn_predict(X, labels, Xte, n))
    with pytest.raises(InputError):
        knn_tree_predict(X, labels, Xte, n + 1)
    with pytest.raises(InputError):
        knn_tree_predict(X, labels, Xte, 3, L=np.eye(2), M=np.eye(2))
    with pytest.raises(InputError):
        knn_tree_predict(X, labels, Xte[:, :1], 3)


@pytest.mark.parametrize("name", ["iris", "wine"])
def test_knn_on_iris_and_wine(name):
    X, y = datasets.load(name)
    rng = np.random.default_rng(3)
    perm = rng.permutation(y.size)
    tr, te = perm[: y.size * 2 // 3], perm[y.size * 2 // 3:]
    L = rng.normal(size=(X.shape[1], X.shape[1]))
    for k in (1, 3, 4):
        pred, stats = knn_tree_predict(X[tr], y[tr], X[te], k, L=L, return_stats=True)
        np.testing.assert_array_equal(pred, knn_predict(X[tr], y[tr], X[te], k, L=L))
        assert stats["rows"] == te.size
    np.testing.assert_array_equal(knn_tree_predict(X[tr], y[tr], X[te], 3), knn_predict(X[tr], y[tr], X[te], 3))


# ---------------------------------------------------------------------------
# the rule
# ---------------------------------------------------------------------------


def test_choose_search_rule():
    assert choose_search(14000, 16) == "tree"
    assert choose_search(100, 4) == "brute"
    assert choose_search(14000, 256) == "brute"
    assert choose_search(10**6, 10) == "tree"
    with pytest.raises(InputError):
        choose_search(100, 0)


# ---------------------------------------------------------------------------
# the search option of LMNNProblem: trees inside training
# ---------------------------------------------------------------------------


def test_lmnn_problem_search_tree_equals_brute_in_training():
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    import metricopt

    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    brute = metricopt.LMNNProblem(X, y, search="brute")
    tree = metricopt.LMNNProblem(X, y, search="tree")
    np.testing.assert_array_equal(tree.target_neighbors, brute.target_neighbors)
    rng = np.random.default_rng(0)
    A = rng.normal(size=(13, 13))
    M = A @ A.T / 13
    key = lambda t: set(zip(*(np.asarray(a).tolist() for a in t[:3])))
    assert key(tree.find_triplets(M, 0.2)) == key(brute.find_triplets(M, 0.2))
    assert tree.objective(M) == pytest.approx(brute.objective(M), rel=1e-12)
    # a whole solve: the same optimum through either search
    idx = np.concatenate([np.flatnonzero(y == c)[:15] for c in range(3)])
    a = metricopt.LMNNProblem(X[idx, :5], y[idx], search="brute").solve()
    b = metricopt.LMNNProblem(X[idx, :5], y[idx], search="tree").solve()
    assert a.status is metricopt.Status.OPTIMAL and b.status is metricopt.Status.OPTIMAL
    assert b.objective == pytest.approx(a.objective, rel=1e-7)


def test_lmnn_problem_search_auto_and_errors():
    import metricopt
    from metricopt.errors import UnknownOptionError

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2100, 5))
    y = np.arange(2100) % 3
    assert metricopt.LMNNProblem(X, y, search="auto")._use_tree(5)  # n >= 2000, d <= 25
    assert not metricopt.LMNNProblem(X[:300], y[:300], search="auto")._use_tree(5)
    with pytest.raises(UnknownOptionError, match="unknown search 'kd'; choose one of: 'auto', 'brute', 'tree'"):
        metricopt.LMNNProblem(X[:30], y[:30], search="kd")
