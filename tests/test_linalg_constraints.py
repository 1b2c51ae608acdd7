"""The shared numerical helpers: PSD projection, factorisation, scatter matrices, triplet search."""

import itertools

import numpy as np
import pytest

from metricopt.constraints import active_triplets, hinge_total, labels_to_pairs, target_neighbors
from metricopt.linalg import factor, min_eig, pair_rows, pair_scatter, project_psd, sq_dists


def _sym(rng, d):
    A = rng.normal(size=(d, d))
    return A + A.T


def test_project_psd_is_the_nearest_psd_matrix():
    rng = np.random.default_rng(0)
    S = _sym(rng, 5)
    P = project_psd(S)
    assert min_eig(P) >= -1e-12
    # optimality: S - P is NSD and orthogonal to P (Moreau decomposition)
    assert np.linalg.eigvalsh(S - P).max() <= 1e-10
    assert abs(np.sum((S - P) * P)) <= 1e-9
    # no PSD matrix among random ones is closer
    for _ in range(50):
        B = rng.normal(size=(5, 5))
        Q = B @ B.T * rng.uniform(0, 2)
        assert np.linalg.norm(S - Q) >= np.linalg.norm(S - P) - 1e-12
    np.testing.assert_allclose(project_psd(P), P, atol=1e-12)


def test_factor_reconstructs_psd_matrices_and_clips_negative_eigenvalues():
    rng = np.random.default_rng(1)
    B = rng.normal(size=(4, 2))
    M = B @ B.T  # rank 2
    L = factor(M)
    np.testing.assert_allclose(L.T @ L, M, atol=1e-12)
    assert np.all(np.diff(np.linalg.norm(L, axis=1)) <= 1e-12)  # rows by decreasing eigenvalue
    np.testing.assert_allclose(factor(np.diag([2.0, -1.0])).T @ factor(np.diag([2.0, -1.0])), np.diag([2.0, 0.0]))


def test_pair_scatter_dense_and_laplacian_paths_agree_with_the_definition():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 4)) + 5.0
    a, b = rng.integers(0, 30, size=(2, 200))
    w = rng.uniform(0, 2, size=200)
    ref = sum(wi * np.outer(X[i] - X[j], X[i] - X[j]) for i, j, wi in zip(a, b, w))
    np.testing.assert_allclose(pair_scatter(X, a, b, w), ref, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(pair_scatter(X, a, b, w, dense_limit=0), ref, rtol=1e-10, atol=1e-8)
    M = _sym(rng, 4)
    np.testing.assert_allclose(pair_rows(X, a, b) @ M.ravel(), np.einsum("md,de,me->m", X[a] - X[b], M, X[a] - X[b]))


def test_sq_dists():
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(5, 3)), rng.normal(size=(7, 3))
    np.testing.assert_allclose(sq_dists(A, B), ((A[:, None] - B[None]) ** 2).sum(-1), atol=1e-12)


def _brute_triplets(Z, y, T, margin):
    out = {}
    for i in range(len(y)):
        for j in T[i]:
            for l in range(len(y)):
                if y[l] != y[i]:
                    h = 1 + np.sum((Z[i] - Z[j]) ** 2) - np.sum((Z[i] - Z[l]) ** 2)
                    if h > -margin:
                        out[(i, j, l)] = h
    return out


@pytest.mark.parametrize("margin", [0.0, 0.3])
@pytest.mark.parametrize("block_size", [1, 7, None])
def test_blocked_triplet_search_finds_exactly_the_brute_force_violators(margin, block_size):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(40, 3))
    y = rng.integers(0, 3, size=40)
    T = target_neighbors(X, y, 2)
    Z = X @ rng.normal(size=(3, 3)).T * 0.7
    i, j, l, h = active_triplets(Z, y, T, margin=margin, block_size=block_size)
    got = {(a, b, c): v for a, b, c, v in zip(i, j, l, h)}
    ref = _brute_triplets(Z, y, T, margin)
    assert set(got) == set(ref)
    for key, v in ref.items():
        assert got[key] == pytest.approx(v, abs=1e-12)
    assert hinge_total(Z, y, T, block_size=block_size) == pytest.approx(
        sum(v for v in ref.values() if v > 0), rel=1e-12)


def test_labels_to_pairs():
    y = np.array([0, 1, 0, 2, 1])
    sim, dis = labels_to_pairs(y)
    all_pairs = set(itertools.combinations(range(5), 2))
    assert {tuple(p) for p in sim} == {(a, b) for a, b in all_pairs if y[a] == y[b]}
    assert {tuple(p) for p in dis} == {(a, b) for a, b in all_pairs if y[a] != y[b]}
    assert np.all(sim[:, 0] < sim[:, 1]) and np.all(dis[:, 0] < dis[:, 1])


@pytest.mark.skipif((__import__("os").cpu_count() or 1) < 2, reason="OpenBLAS runs one thread on one core")
def test_small_blas_runs_small_problems_on_one_blas_thread_and_restores_the_threads():
    import scipy.linalg  # noqa: F401  (SciPy's own BLAS loaded before the threads are read: the test alone)
    from threadpoolctl import threadpool_info, threadpool_limits

    from metricopt.linalg import CERTIFY_BLAS_DIM, SMALL_BLAS_DIM, small_blas

    def blas_threads():  # {library file: threads} of every BLAS loaded (SCS bundles a one-thread OpenBLAS)
        return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        assert max(before.values()) == 2  # NumPy's and SciPy's OpenBLAS are threaded
        with small_blas(SMALL_BLAS_DIM):
            assert set(blas_threads().values()) == {1}
        assert blas_threads() == before
        with small_blas(SMALL_BLAS_DIM + 1):  # large problems keep their threads
            assert blas_threads() == before
        with small_blas(CERTIFY_BLAS_DIM, up_to=CERTIFY_BLAS_DIM):  # a certificate's limit
            assert set(blas_threads().values()) == {1}
        with small_blas(CERTIFY_BLAS_DIM + 1, up_to=CERTIFY_BLAS_DIM):
            assert blas_threads() == before
