"""Multi-metric LMNN (Weinberger & Saul, JMLR 2009, Section 5.2)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

import metricopt
from metricopt.errors import InputError, UnknownOptionError
from metricopt.methods.lmnn.multimetric_problem import MultiMetricLMNNProblem, multi_metric_knn_predict


def _iris(per_class=12):
    X, y = load_iris(return_X_y=True)
    idx = np.concatenate([np.flatnonzero(y == c)[:per_class] for c in range(3)])
    return StandardScaler().fit_transform(X[idx]), y[idx]


def _rings(n=30, radii=(1.0, 1.15), seed=0):
    """Two concentric rings (the toy of the paper's Fig. 7): points of the other ring are closer
    (radial gap 0.15) than the neighbours on the same ring (arc spacing ~0.2), so Euclidean kNN and
    any single linear metric fail, while one metric per angular sector can stretch the radial
    direction there."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for c, r in enumerate(radii):
        t = (np.arange(n) + rng.uniform()) * 2 * np.pi / n + rng.normal(scale=0.02, size=n)
        rr = r + rng.normal(scale=0.01, size=n)
        X.append(np.c_[rr * np.cos(t), rr * np.sin(t)])
        y.append(np.full(n, c))
    return np.vstack(X), np.concatenate(y)


def _random_blocks(p, seed=0):
    rng = np.random.default_rng(seed)
    Ms = []
    for _ in range(p.n_clusters):
        A = rng.normal(size=(p.input_dim, p.input_dim))
        Ms.append(A @ A.T / p.input_dim)
    return Ms


def _naive_objective(X, y, T, clusters, Ms, mu):
    """Eq. of Sec. 5.2 written with explicit loops (the reference)."""
    def D(i, j):
        v = X[i] - X[j]
        return float(v @ Ms[clusters[j]] @ v)

    pull, push = 0.0, 0.0
    for i in range(len(y)):
        for j in T[i]:
            pull += D(i, j)
            for l in np.flatnonzero(y != y[i]):
                push += max(0.0, 1.0 + D(i, j) - D(i, l))
    return (1 - mu) * pull + mu * push


def test_lifted_objective_equals_the_formula_with_one_metric_per_cluster():
    X, y = _iris(6)
    p = MultiMetricLMNNProblem(X, y, clusters="kmeans", n_clusters=3, mu=0.4)
    Ms = _random_blocks(p)
    ref = _naive_objective(X, y, p.target_neighbors, p.clusters, Ms, 0.4)
    assert p.objective(p.lifted_metric(Ms)) == pytest.approx(ref, rel=1e-12)
    # off-diagonal blocks do not enter the objective (they only have to keep M PSD)
    full = np.vstack([np.hstack([Ms[a] if a == b else 0.1 * np.eye(4) for b in range(3)]) for a in range(3)])
    full = full + 2 * np.eye(12)
    Ms2 = [m + 2 * np.eye(4) for m in Ms]
    assert p.objective(full) == pytest.approx(_naive_objective(X, y, p.target_neighbors, p.clusters, Ms2, 0.4),
                                              rel=1e-12)


def test_cluster_triplet_search_matches_enumeration():
    X, y = _iris(6)
    p = MultiMetricLMNNProblem(X, y, clusters="kmeans", n_clusters=2)
    M = p.lifted_metric(_random_blocks(p, seed=3))
    i, j, l, h = p.find_triplets(M, margin=0.5)
    Ms = p.metrics(M)
    ref = set()
    for a in range(len(y)):
        for b in p.target_neighbors[a]:
            for c in np.flatnonzero(y != y[a]):
                dab = (X[a] - X[b]) @ Ms[p.clusters[b]] @ (X[a] - X[b])
                dac = (X[a] - X[c]) @ Ms[p.clusters[c]] @ (X[a] - X[c])
                if 1 + dab - dac > -0.5:
                    ref.add((a, b, c, round(1 + dab - dac, 9)))
    got = {(a, b, c, round(v, 9)) for a, b, c, v in zip(i, j, l, h)}
    assert got == ref and len(ref) > 0


def test_one_cluster_equals_single_metric_lmnn():
    X, y = _iris()
    single = metricopt.LMNNProblem(X, y).solve()
    multi = MultiMetricLMNNProblem(X, y, clusters=np.zeros(len(y), dtype=int)).solve()
    assert single.status is metricopt.Status.OPTIMAL and multi.status is metricopt.Status.OPTIMAL
    assert multi.objective == pytest.approx(single.objective, rel=1e-9)
    np.testing.assert_allclose(multi.M, single.M, atol=1e-9 * np.abs(single.M).max())


def test_exact_and_jax_agree_with_certificates():
    X, y = _iris()
    p = MultiMetricLMNNProblem(X, y)  # clusters = labels: three metrics
    assert p.n_clusters == 3 and p.d == 12
    ex = p.solve()
    jx = p.solve(backend="jax", tol=1e-5)
    assert ex.status is metricopt.Status.OPTIMAL and ex.certificate.rel_gap <= 1e-6
    assert jx.status is metricopt.Status.OPTIMAL and jx.certificate.rel_gap <= 1e-5
    rep = metricopt.check_agreement(p, ex, jx, tol=1e-5)
    assert rep.passed, str(rep)
    # both answers are block diagonal: one metric per cluster, nothing between them
    for M in (ex.M, jx.M):
        assert np.abs(M - p.lifted_metric(p.metrics(M))).max() <= 1e-9 * np.abs(M).max()


def test_several_metrics_fix_the_rings_one_metric_cannot():
    X, y = _rings()
    eucl = metricopt.loo_knn_error(X, y, k=3)
    single = metricopt.LMNNProblem(X, y).solve()
    one = metricopt.loo_knn_error(X, y, k=3, M=single.M)
    p = MultiMetricLMNNProblem(X, y, clusters="kmeans", n_clusters=8)
    sol = p.solve()
    assert sol.status is metricopt.Status.OPTIMAL and sol.certificate.rel_gap <= 1e-6
    several = float(np.mean(p.knn_loo_predict(sol.M) != y))
    assert eucl >= 0.5 and one >= 0.5  # Euclidean kNN and one metric fail
    assert several <= 0.15  # measured 0.083


def test_multi_metric_knn_matches_a_loop_reference():
    X, y = _iris(8)
    rng = np.random.default_rng(1)
    clusters = rng.integers(0, 3, size=len(y))
    p = MultiMetricLMNNProblem(X, y, clusters=clusters)
    Ms = p.metrics(p.lifted_metric(_random_blocks(p, seed=5)))
    Xq = X[:7] + 0.3 * rng.normal(size=(7, 4))
    pred = multi_metric_knn_predict(X, y, p.clusters, Ms, Xq, k=3)
    for q in range(7):
        d = np.array([(Xq[q] - X[j]) @ Ms[p.clusters[j]] @ (Xq[q] - X[j]) for j in range(len(y))])
        nn = np.argsort(d, kind="stable")[:3]
        votes = np.bincount(y[nn], minlength=3)
        if np.sum(votes == votes.max()) == 1:
            assert pred[q] == np.argmax(votes)
    loo = multi_metric_knn_predict(X, y, p.clusters, Ms, None, k=1)
    for q in range(len(y)):
        d = np.array([(X[q] - X[j]) @ Ms[p.clusters[j]] @ (X[q] - X[j]) if j != q else np.inf
                      for j in range(len(y))])
        assert loo[q] == y[np.argmin(d)]


def test_multi_metric_knn_with_equal_metrics_is_the_single_metric_rule_under_both_tie_rules():
    # integer points on a grid: many exact distance ties, which the two rules resolve differently
    rng = np.random.default_rng(3)
    X = rng.integers(0, 3, size=(40, 2)).astype(float)
    y = rng.integers(0, 3, size=40)
    Xq = rng.integers(0, 3, size=(25, 2)).astype(float)
    clusters = rng.integers(0, 2, size=40)
    M = np.array([[2.0, 0.0], [0.0, 1.0]])
    for ties in ("index", "inclusive"):
        got = multi_metric_knn_predict(X, y, clusters, [M, M], Xq, k=3, ties=ties)
        np.testing.assert_array_equal(got, metricopt.knn_predict(X, y, Xq, k=3, M=M, ties=ties))
        loo = multi_metric_knn_predict(X, y, clusters, [M, M], None, k=3, ties=ties)
        np.testing.assert_array_equal(loo, metricopt.knn_loo_predict(X, y, k=3, M=M, ties=ties))
    moved = int(np.sum(multi_metric_knn_predict(X, y, clusters, [M, M], Xq, k=3, ties="index")
                       != multi_metric_knn_predict(X, y, clusters, [M, M], Xq, k=3, ties="inclusive")))
    assert moved > 0  # the data has ties that the rules break differently, so the test can tell them apart
    with pytest.raises(InputError, match=r"ties must be one of \['index', 'inclusive'\]; got 'nearest'"):
        multi_metric_knn_predict(X, y, clusters, [M, M], Xq, k=3, ties="nearest")


def test_estimator_fit_predict_and_single_metric_start():
    X, y = _iris()
    est = metricopt.MultiMetricLMNN(init="single").fit(X, y)
    assert len(est.metrics_) == 3 and est.certificate_.rel_gap <= 1e-6
    assert est.single_solution_ is not None and est.single_solution_.status is metricopt.Status.OPTIMAL
    # the jointly learned metrics can only improve on one shared metric (a feasible point of the program)
    assert est.solution_.objective <= est.single_solution_.objective * (1 + 1e-7)
    plain = metricopt.MultiMetricLMNN().fit(X, y)
    assert plain.solution_.objective == pytest.approx(est.solution_.objective, rel=1e-5)
    pred = est.predict(X)
    np.testing.assert_array_equal(pred, multi_metric_knn_predict(X, y, est.clusters_, est.metrics_, X, k=3))
    assert est.score(X, y) == pytest.approx(np.mean(pred == y))


def test_errors():
    X, y = _iris(6)
    with pytest.raises(InputError, match=r"clusters='kmeans' needs n_clusters \(the number of metrics\)"):
        MultiMetricLMNNProblem(X, y, clusters="kmeans")
    with pytest.raises(InputError, match="n_clusters is set by the labels when clusters='labels'"):
        MultiMetricLMNNProblem(X, y, n_clusters=2)
    with pytest.raises(InputError, match=r"clusters must be 'labels', 'kmeans' or an array of shape \(n,\) = \(18,\)"):
        MultiMetricLMNNProblem(X, y, clusters=np.zeros(5))
    with pytest.raises(UnknownOptionError, match="clusters"):
        MultiMetricLMNNProblem(X, y, clusters="spectral")
    p = MultiMetricLMNNProblem(X, y)
    with pytest.raises(InputError, match="expected 3 metrics"):
        p.lifted_metric([np.eye(4)] * 2)
    with pytest.raises(UnknownOptionError, match="init"):
        metricopt.MultiMetricLMNN(init="pca").fit(X, y)
    with pytest.raises(InputError, match="X_test has 3 features"):
        multi_metric_knn_predict(X, y, p.clusters, p.metrics(np.eye(12)), X[:, :3])


class _FullVariable(MultiMetricLMNNProblem):
    """The same problem with one Cd x Cd PSD variable in the exact backend (no block structure)."""

    psd_blocks = None


def test_block_diagonal_variable_has_the_full_variables_optimum():
    X, y = _iris(10)
    blocks = MultiMetricLMNNProblem(X, y).solve(backend="cvxpy", solver="CLARABEL")
    full = _FullVariable(X, y).solve(backend="cvxpy", solver="CLARABEL")
    assert blocks.status is metricopt.Status.OPTIMAL and full.status is metricopt.Status.OPTIMAL
    assert blocks.objective == pytest.approx(full.objective, rel=1e-6)
    # the block variable returns an exactly block-diagonal lifted metric
    b = X.shape[1]
    assert np.array_equal(blocks.M, blocks.M * np.kron(np.eye(3), np.ones((b, b))))
