"""Kernel LMNN (Weinberger & Saul, JMLR 2009, Sec. 5.3) through the kernel PCA trick."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

import metricopt
from metricopt.errors import InputError, UnknownOptionError
from metricopt.methods.lmnn.kernel_estimator import KernelLMNN
from metricopt.linalg import pair_scatter, sq_dists
from metricopt.methods.lmnn.kernel_problem import MAX_COMPONENTS, PULL_TOL, KernelLMNNProblem, _auto_components

#: the rings toy: RBF width and number of kernel principal components used by the tests
GAMMA = 0.05
R = 12


def _small_iris(per_class=10):
    X, y = load_iris(return_X_y=True)
    idx = np.concatenate([np.flatnonzero(y == c)[:per_class] for c in range(3)])
    return StandardScaler().fit_transform(X[idx]), y[idx]


def _rings(n_per_ring=20, seed=0):
    """Two concentric rings (radii 1 and 2) plus a nuisance coordinate of spread 2: Euclidean
    kNN is fooled by the nuisance, and no linear map separates the rings."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * np.pi, size=2 * n_per_ring)
    r = np.repeat([1.0, 2.0], n_per_ring) + rng.normal(scale=0.08, size=2 * n_per_ring)
    X = np.c_[r * np.cos(t), r * np.sin(t), rng.normal(scale=2.0, size=2 * n_per_ring)]
    return X, np.repeat([0, 1], n_per_ring)


@pytest.fixture(scope="module")
def rings():
    return _rings()


@pytest.fixture(scope="module")
def rings_problem(rings):
    X, y = rings
    return KernelLMNNProblem(X, y, kernel="rbf", kernel_params={"gamma": GAMMA}, n_components=R)


@pytest.fixture(scope="module")
def rings_exact(rings_problem):
    return rings_problem.solve()


def test_linear_kernel_reproduces_plain_lmnn():
    X, y = _small_iris()
    plain = metricopt.LMNNProblem(X, y)
    kern = KernelLMNNProblem(X, y, kernel="linear")
    assert kern.n_components == kern.rank == 4
    np.testing.assert_array_equal(kern.target_neighbors, plain.target_neighbors)
    # the kernel-PCA coordinates of a linear kernel are a rotation of the centred data
    np.testing.assert_allclose(sq_dists(kern.X, kern.X), sq_dists(X, X), atol=1e-10)
    a = plain.solve()
    b = kern.solve()
    assert a.status is metricopt.Status.OPTIMAL and b.status is metricopt.Status.OPTIMAL
    assert a.certificate.rel_gap <= 1e-6 and b.certificate.rel_gap <= 1e-6
    # equal optima: both objectives lie within each other's certified bounds
    assert b.objective >= a.certificate.lower - 1e-12 and a.objective >= b.certificate.lower - 1e-12
    assert b.objective == pytest.approx(a.objective, rel=2e-6)
    # d_B(z(x), z(x')) is d_M on the inputs with M = G^T B G, z(x) = G x + c (linear kernel)
    G = (kern.kernel_features(np.eye(4)) - kern.kernel_features(np.zeros((1, 4)))).T  # column m: z(e_m) - z(0)
    np.testing.assert_allclose(kern.kernel_features(X), X @ G.T + kern.kernel_features(np.zeros((1, 4))), atol=1e-10)
    Mk = G.T @ b.M @ G
    assert plain.objective(Mk) == pytest.approx(b.objective, rel=1e-10)
    # and the learned distances are plain LMNN's (the optimum's distances, to solver accuracy)
    Da = sq_dists(X @ a.L.T, X @ a.L.T)
    Db = sq_dists(kern.transform(X, b.M), kern.transform(X, b.M))
    np.testing.assert_allclose(Db, Da, atol=1e-5 * Da.max())


def test_rbf_kernel_lmnn_separates_concentric_rings(rings, rings_problem, rings_exact):
    X, y = rings
    euclid = metricopt.loo_knn_error(X, y, k=3)
    linear = metricopt.loo_knn_error(X, y, k=3, L=metricopt.LMNNProblem(X, y).solve().L)
    sol = rings_exact
    assert sol.status is metricopt.Status.OPTIMAL
    assert sol.certificate.rel_gap <= 1e-6
    kernel = metricopt.loo_knn_error(rings_problem.transform(X, sol.M), y, k=3)
    assert euclid >= 0.2        # the nuisance coordinate fools Euclidean kNN ...
    assert kernel <= 0.05       # ... kernel LMNN learns the radius
    assert kernel < linear      # which no linear map (plain LMNN) can
    # new points from the same distribution are classified well too
    Xt, yt = _rings(100, seed=1)
    err = metricopt.knn_error(rings_problem.transform(X, sol.M), y, rings_problem.transform(Xt, sol.M), yt, k=3)
    assert err <= 0.1 < metricopt.knn_error(X, y, Xt, yt, k=3)


def test_exact_and_jax_backends_agree(rings_problem, rings_exact):
    c = rings_exact
    j = rings_problem.solve(backend="jax", tol=1e-6)
    assert j.status is metricopt.Status.OPTIMAL and j.certificate.rel_gap <= 1e-6
    # both objectives are upper bounds on the optimum, both lower bounds below it
    assert j.objective >= c.certificate.lower - 1e-12
    assert c.objective >= j.certificate.lower - 1e-12
    assert abs(j.objective - c.objective) <= max(c.certificate.gap, j.certificate.gap) + 1e-12


def test_distances_through_kernel_columns_equal_transform(rings, rings_problem, rings_exact):
    X, _ = rings
    B = rings_exact.M
    Xt, _ = _rings(5, seed=3)
    for X1, X2 in ((X, X), (Xt, X), (Xt, Xt)):
        via_A = rings_problem.distances_through_kernel(X1, X2, B)
        Z1, Z2 = rings_problem.transform(X1, B), rings_problem.transform(X2, B)
        via_z = sq_dists(Z1, Z2)
        np.testing.assert_allclose(via_A, via_z, atol=1e-8 * via_z.max())
    A = rings_problem.kernel_matrix_A(B)
    assert A.shape == (X.shape[0], X.shape[0])
    assert np.linalg.eigvalsh(A)[0] >= -1e-10 * np.abs(A).max()
    # the objective through A is the problem's objective through B
    K = rings_problem.kernel_columns(X)
    T = rings_problem.target_neighbors
    D = K[:, None, :] - K[T]  # (n, k, n): k_i - k_j for every target pair
    pull = np.einsum("ijn,nm,ijm->", D, A, D)
    assert (1 - rings_problem.mu) * pull == pytest.approx(rings_problem.terms[0].value(rings_problem, {"M": B}),
                                                          rel=1e-9)


def test_new_points_transform_consistently(rings, rings_problem, rings_exact):
    X, _ = rings
    # training points mapped through their kernel columns land on the training coordinates
    np.testing.assert_allclose(rings_problem.kernel_features(X), rings_problem.X, atol=1e-10)
    B = rings_exact.M
    Zt = rings_problem.transform(X, B)
    np.testing.assert_allclose(Zt, rings_problem.X @ metricopt.linalg.factor(B).T, atol=1e-9)
    # one point at a time = all at once; a copy of a training point maps onto it
    Xn, _ = _rings(3, seed=7)
    batch = rings_problem.transform(Xn, B)
    for a in range(Xn.shape[0]):
        np.testing.assert_allclose(rings_problem.transform(Xn[a:a + 1], B)[0], batch[a], atol=1e-12)
    np.testing.assert_allclose(rings_problem.transform(X[[4]], B)[0], Zt[4], atol=1e-9)


def test_default_components_keep_the_problem_well_posed(rings):
    X, y = rings
    p = KernelLMNNProblem(X, y, kernel_params={"gamma": GAMMA})
    n = X.shape[0]
    assert p.rank == n - 1  # the RBF kernel: every centred direction
    assert p.n_components == min(MAX_COMPONENTS, n // 3) == 13
    w = np.linalg.eigvalsh(p.pull_matrix)
    assert w[0] > 1e-8 * w[-1]  # P positive definite: the optimum is attained
    # with every component, some direction is orthogonal to all target differences: P singular
    full = KernelLMNNProblem(X, y, kernel_params={"gamma": GAMMA}, n_components=p.rank)
    wf = np.linalg.eigvalsh(full.pull_matrix)
    assert wf[0] <= 1e-10 * wf[-1]
    # the default also stops before P becomes singular when that comes first
    anchors = np.repeat(np.arange(n), 3)
    r_sing = next(r for r in range(1, n) if np.linalg.eigvalsh(
        pair_scatter(full.X[:, :r], anchors, full.target_neighbors.ravel()))[[0, -1]] @ [1, -1e-8] <= 0)
    assert r_sing > 13
    # ... which the rule detects: a coordinate constant on every target pair stops it there
    Z = np.random.default_rng(0).normal(size=(12, 4))
    Z[1::2, 2] = Z[0::2, 2]
    pairs = np.arange(12) ^ 1  # targets: 0 <-> 1, 2 <-> 3, ...
    assert _auto_components(Z, np.arange(12), pairs, PULL_TOL) == 2
    assert _auto_components(Z[:, [0, 1, 3]], np.arange(12), pairs, PULL_TOL) == 3
    tiny = KernelLMNNProblem(X[:, :2], y, kernel="poly", kernel_params={"degree": 2})  # rank 5 features
    assert tiny.n_components == tiny.rank == 5


def test_error_messages(rings):
    X, y = rings
    with pytest.raises(UnknownOptionError, match=r"unknown kernel 'gauss'; choose one of: additive_chi2, chi2, "
                                                 r"cosine, laplacian, linear, poly"):
        KernelLMNNProblem(X, y, kernel="gauss")
    with pytest.raises(InputError, match=r"kernel_params \['sigma'\] are not parameters of the 'rbf' kernel; "
                                         r"it takes: gamma"):
        KernelLMNNProblem(X, y, kernel_params={"sigma": 1.0})
    with pytest.raises(InputError, match=r"kernel_params\['gamma'\] must be > 0 for the 'rbf' kernel; got -1"):
        KernelLMNNProblem(X, y, kernel_params={"gamma": -1})
    with pytest.raises(InputError, match=r"kernel_params\['degree'\] must be a finite real number; got 'two'"):
        KernelLMNNProblem(X, y, kernel="poly", kernel_params={"degree": "two"})
    with pytest.raises(InputError, match="kernel_params must be a dict"):
        KernelLMNNProblem(X, y, kernel_params=0.5)
    with pytest.raises(InputError, match=r"n_components=40 exceeds the rank 39 of the centred kernel matrix"):
        KernelLMNNProblem(X, y, n_components=40)
    with pytest.raises(InputError, match="the 'chi2' kernel .* failed on this data"):
        KernelLMNNProblem(X, y, kernel="chi2")  # chi2 needs non-negative features
    with pytest.raises(InputError, match="centred 'rbf' kernel matrix of X is zero"):
        KernelLMNNProblem(np.ones((8, 2)), [0] * 4 + [1] * 4)
    p = KernelLMNNProblem(X, y, kernel_params={"gamma": GAMMA}, n_components=3)
    with pytest.raises(InputError, match="X has 2 features, but the kernel problem was built on data with 3"):
        p.kernel_features(X[:, :2])
    with pytest.raises(InputError, match=r"B must have shape \(3, 3\)"):
        p.transform(X, np.eye(4))


def test_indefinite_kernel_warns(rings):
    X, y = rings
    with pytest.warns(UserWarning, match="the 'sigmoid' kernel is indefinite on X"):
        p = KernelLMNNProblem(X, y, kernel="sigmoid")
    assert p.rank < X.shape[0] - 1 and np.all(p.kernel_eigenvalues[:p.rank] > 0)
    np.testing.assert_allclose(p.kernel_features(X), p.X, atol=1e-9)


def test_estimator_fit_transform_predict(rings):
    X, y = rings
    est = KernelLMNN(kernel_params={"gamma": GAMMA}, n_components=R)
    assert est.fit(X, y) is est
    assert est.n_features_in_ == 3 and est.components_.shape == (R, R)
    assert est.certificate_.rel_gap <= 1e-6
    np.testing.assert_allclose(est.transform(X), est.embedding_, atol=1e-9)
    np.testing.assert_allclose(est.transform(X), est.problem_.transform(X, est.solution_.M), atol=1e-12)
    Xt, yt = _rings(50, seed=1)
    assert est.score(Xt, yt) >= 0.9
    assert est.get_kernel_matrix_A().shape == (40, 40)
    assert clone(est).get_params() == est.get_params()
    with pytest.raises(ValueError, match="features"):
        est.transform(X[:, :2])


@pytest.mark.slow
def test_sklearn_estimator_checks():
    """scikit-learn's estimator checks (about 2.5 min on 2 cores with 3 components)."""
    from sklearn.utils.estimator_checks import check_estimator

    results = check_estimator(KernelLMNN(n_components=3), on_fail=None)
    failed = {r["check_name"] for r in results if r["status"] == "failed"}
    # as for LMNN: the check's labels leave a class with fewer than k+1 points, which LMNN refuses
    assert failed <= {"check_fit2d_1feature"}


def test_default_gamma_follows_the_data_scale(rings):
    X, y = rings[0], rings[1]
    p = KernelLMNNProblem(X, y, kernel="rbf", n_components=10)
    assert p.kernel_params["gamma"] == pytest.approx(1.0 / (X.shape[1] * X.var()), rel=1e-15)
    # with gamma = 1 / (d Var X) the kernel matrix, hence the coordinates, do not change when X is rescaled
    q = KernelLMNNProblem(1000.0 * X, y, kernel="rbf", n_components=10)
    np.testing.assert_allclose(np.abs(q.X), np.abs(p.X), atol=1e-8 * np.abs(p.X).max())
    # an explicit gamma is kept
    assert KernelLMNNProblem(X, y, kernel_params={"gamma": 0.3}, n_components=10).kernel_params["gamma"] == 0.3
