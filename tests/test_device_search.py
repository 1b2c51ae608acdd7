"""The JAX device search (metricopt.search) against a brute-force NumPy reference and the blocked NumPy search."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("jax")

from metricopt import constraints  # noqa: E402
from metricopt.search import device_active_triplets, device_hinge_total, device_target_neighbors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------- brute-force reference
def ref_targets(X, y, k):
    """Full matrix of explicit squared differences; ties broken by the lower index."""
    n = X.shape[0]
    D = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    T = np.empty((n, k), dtype=np.int64)
    for i in range(n):
        cand = [j for j in range(n) if j != i and y[j] == y[i]]
        cand.sort(key=lambda j: (D[i, j], j))
        T[i] = cand[:k]
    return T


def ref_triplets(Z, y, T, margin, clusters=None):
    """Every triplet by loops: the distance to x_j in the metric of x_j's cluster."""
    Zs = Z[None] if clusters is None else Z
    cl = np.zeros(Zs.shape[1], dtype=np.int64) if clusters is None else np.asarray(clusters)
    out = []
    n, k = T.shape
    for i in range(n):
        for kk in range(k):
            j = T[i, kk]
            dj = Zs[cl[j], i] - Zs[cl[j], j]
            dij = float(dj @ dj)
            for l in range(n):
                if y[l] == y[i]:
                    continue
                dl = Zs[cl[l], i] - Zs[cl[l], l]
                h = 1.0 + dij - float(dl @ dl)
                if h > -margin:
                    out.append((i, j, l, h))
    if not out:
        return (np.zeros(0, np.int64),) * 3 + (np.zeros(0),)
    a = np.array(out)
    return a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2].astype(np.int64), a[:, 3]


def canonical(found):
    i, j, l, h = found
    o = np.lexsort((l, j, i))
    return i[o], j[o], l[o], h[o]


def assert_same(found, ref, margin, scale):
    """Equal sets, except triplets whose h is within rounding of -margin; equal h to 1e-12 of the scale."""
    a, b = canonical(found), canonical(ref)
    ka = {(int(p), int(q), int(r)): h for p, q, r, h in zip(*a)}
    kb = {(int(p), int(q), int(r)): h for p, q, r, h in zip(*b)}
    tol = 1e-12 * scale
    for key in set(ka) ^ set(kb):
        h = ka.get(key, kb.get(key))
        assert abs(h + margin) <= tol, (key, h)
    common = set(ka) & set(kb)
    assert len(common) >= 0.99 * max(len(ka), 1)
    assert all(abs(ka[t] - kb[t]) <= tol for t in common)


def data(kind, n, d, classes, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    y[:classes * 4] = np.repeat(np.arange(classes), 4)  # every class has >= 4 members
    if kind == "int":  # many exact ties and duplicate points
        X = rng.integers(0, 3, size=(n, d)).astype(np.float64)
    else:
        X = rng.normal(size=(n, d))
    return X, y


# ---------------------------------------------------------------------------- target neighbours
@pytest.mark.parametrize("kind", ["float", "int"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_target_neighbors_match_reference(kind, k):
    X, y = data(kind, 70, 3, 3, seed=k)
    ref = ref_targets(X, y, k)
    for block in (1, None):
        T = device_target_neighbors(X, y, k, block=block)
        assert T.dtype == np.int64
        np.testing.assert_array_equal(T, ref)
    np.testing.assert_array_equal(constraints.target_neighbors(X, y, k, device=False), ref)


def test_target_neighbors_too_small_class():
    with pytest.raises(ValueError):
        device_target_neighbors(np.zeros((4, 2)), np.array([0, 0, 1, 1]), 2)


# ---------------------------------------------------------------------------- triplets
@pytest.mark.parametrize("kind", ["float", "int"])
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("margin", [0.0, 0.7])
def test_triplets_match_reference_and_numpy(kind, k, margin):
    X, y = data(kind, 60, 3, 3, seed=10 + k)
    T = ref_targets(X, y, k)
    rng = np.random.default_rng(3)
    Z = X @ (0.6 * rng.normal(size=(3, 3)) if kind == "float" else np.eye(3))
    ref = ref_triplets(Z, y, T, margin)
    scale = 1.0 + 2.0 * float(np.max(np.sum(Z * Z, 1))) * 4
    for block in (1, 7, 1000):
        found = device_active_triplets(Z, y, T, margin, block=block)
        assert [a.dtype for a in found] == [np.int64] * 3 + [np.float64]
        assert_same(found, ref, margin, scale)
        # the NumPy blocked search at the same block size: identical, order and hinge values bit for bit
        npy = constraints.active_triplets(Z, y, T, margin, block_size=block, device=False)
        for a, b in zip(found, npy):
            np.testing.assert_array_equal(a, b)
    pos = ref[3][ref[3] > 0]
    assert math.isclose(device_hinge_total(Z, y, T), math.fsum(pos.tolist()), rel_tol=1e-12, abs_tol=1e-12)
    assert device_hinge_total(Z, y, T) == constraints.hinge_total(Z, y, T, device=False)


@pytest.mark.parametrize("threads", [1, 4])
def test_the_host_part_on_threads_keeps_the_order(monkeypatch, threads):
    """The host recomputes each block's hinge values on HOST_THREADS threads; the triplets come out in the NumPy
    search's order with its values, bit for bit, whatever the number of threads."""
    import metricopt.search as search

    monkeypatch.setattr(search, "HOST_THREADS", threads)
    monkeypatch.setattr(search.os, "cpu_count", lambda: 8)
    X, y = data("float", 90, 3, 3, seed=5)
    T = ref_targets(X, y, 3)
    for block in (1, 4):
        found = device_active_triplets(X, y, T, 0.4, block=block)
        npy = constraints.active_triplets(X, y, T, 0.4, block_size=block, device=False)
        assert found[0].size > 100
        for a, b in zip(found, npy):
            np.testing.assert_array_equal(a, b)


def test_limit():
    X, y = data("float", 60, 3, 3, seed=4)  # the shapes of the tests above: no new compilation
    T = ref_targets(X, y, 3)
    total = device_active_triplets(X, y, T, 0.5)[0].size
    assert total > 5
    assert device_active_triplets(X, y, T, 0.5, limit=total - 1, block=7) is None
    assert device_active_triplets(X, y, T, 0.5, limit=total, block=7)[0].size == total
    assert device_active_triplets(X, y, T, 0.5, limit=0, block=7) is None
    # dense: every triplet active (the device's lower bound proves the limit exceeded without compaction)
    every = constraints.n_triplets(y, T)
    assert device_active_triplets(1e-3 * X, y, T, 0.5, limit=every - 1, block=7) is None
    assert device_active_triplets(1e-3 * X, y, T, 0.5, limit=every, block=7)[0].size == every


def test_no_triplets():
    X = np.array([[0.0], [0.1], [100.0], [100.1]])
    y = np.array([0, 0, 1, 1])
    T = np.array([[1], [0], [3], [2]])
    i, j, l, h = device_active_triplets(X, y, T)
    assert i.size == j.size == l.size == h.size == 0 and i.dtype == np.int64


@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_clusters_multimetric(margin):
    X, y = data("float", 48, 3, 3, seed=7)
    rng = np.random.default_rng(8)
    clusters = rng.integers(0, 2, X.shape[0])
    L = rng.normal(size=(2, 2, 3)) * 0.7
    Z = np.einsum("crd,nd->cnr", L, X)
    T = ref_targets(X, y, 2)
    ref = ref_triplets(Z, y, T, margin, clusters)
    scale = 1.0 + 8.0 * float(np.max(np.sum(Z * Z, -1)))
    for block in (1, 48):
        found = device_active_triplets(Z, y, T, margin, clusters=clusters, block=block)
        assert_same(found, ref, margin, scale)
        npy = constraints.active_triplets(Z, y, T, margin, block_size=block, clusters=clusters, device=False)
        for a, b in zip(found, npy):
            np.testing.assert_array_equal(a, b)
    assert device_hinge_total(Z, y, T, clusters=clusters) == constraints.hinge_total(Z, y, T, clusters=clusters,
                                                                                     device=False)
    with pytest.raises(ValueError):
        device_active_triplets(Z[0], y, T, clusters=clusters)


def test_dispatch_rule_gives_the_same_answer():
    X, y = data("float", 60, 3, 3, seed=9)
    T = constraints.target_neighbors(X, y, 3, device=True)
    np.testing.assert_array_equal(T, constraints.target_neighbors(X, y, 3, device=False))
    a = constraints.active_triplets(X, y, T, 0.2, device=True)
    b = constraints.active_triplets(X, y, T, 0.2, device=False)
    for p, q in zip(canonical(a), canonical(b)):
        np.testing.assert_array_equal(p, q)
    assert constraints.hinge_total(X, y, T, device=True) == constraints.hinge_total(X, y, T, device=False)
    parts = list(constraints.iter_triplets(X, y, T, 0.2, block_size=7, device=True))
    np.testing.assert_array_equal(np.concatenate([p[3] for p in parts]),
                                  constraints.active_triplets(X, y, T, 0.2, block_size=7, device=False)[3])


def test_rule():
    assert not constraints.use_device_search(100, 5)  # tiny: NumPy without importing anything
    os.environ["METRICOPT_DEVICE_SEARCH"] = "0"
    try:
        assert not constraints.use_device_search(10**6, 100)
    finally:
        del os.environ["METRICOPT_DEVICE_SEARCH"]


# ---------------------------------------------------------------------------- sharded over 2 CPU devices
SHARDED = textwrap.dedent("""
    import numpy as np, jax
    from metricopt import constraints
    from metricopt.search import device_active_triplets, device_hinge_total
    assert len(jax.devices()) == 2, jax.devices()
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("data",))
    rng = np.random.default_rng(0)
    n = 203
    X = rng.normal(size=(n, 4)); y = rng.integers(0, 3, n)
    T = constraints.target_neighbors(X, y, 2, device=False)
    for block in (None, 13):
        a = device_active_triplets(X, y, T, 0.3, block=block, mesh=mesh)
        c = constraints.active_triplets(X, y, T, 0.3, device=False)
        if block is not None:  # each device's block is a block: the order of the one-device search
            for p, q in zip(a, device_active_triplets(X, y, T, 0.3, block=block)):
                np.testing.assert_array_equal(p, q)
        oa, oc = np.lexsort(a[2::-1]), np.lexsort(c[2::-1])
        for p, q in zip(a, c):
            np.testing.assert_array_equal(p[oa], q[oc])
    assert device_active_triplets(X, y, T, 0.3, limit=5, mesh=mesh) is None
    Zs = np.stack([X, 0.5 * X]); cl = rng.integers(0, 2, n)
    assert device_hinge_total(Zs, y, T, clusters=cl, mesh=mesh) == constraints.hinge_total(Zs, y, T, clusters=cl,
                                                                                          device=False)
    print("ok")
""")


def test_sharded_over_two_cpu_devices():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", SHARDED], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")
