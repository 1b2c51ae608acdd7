"""The triplet hinge's JAX piece in each of its forms (per-triplet gathers, distinct pairs with a GEMM gradient,
distinct pairs with a Laplacian gradient, dense n x n) gives the value and gradient of a brute-force NumPy
reference, one triplet at a time; the measured choice between the gradient forms (metricopt.costmodel); and whole
solves that agree whichever form the driver is handed."""

from __future__ import annotations

import time

import jax
import numpy as np
import pytest

import metricopt
from metricopt import costmodel
from metricopt.problems.terms import TripletLoss

FORMS = ("gather", "pairs", "laplacian")


def _tied_problem(seed=0, n=60, d=4, weights=False, **kw):
    """Integer coordinates with duplicated points: exactly tied distances and hinge arguments at 0."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-2, 3, size=(n, d)).astype(float)
    X[n // 2: n // 2 + 5] = X[:5]  # duplicates (zero-length pairs)
    y = rng.integers(0, 3, size=n)
    w = rng.uniform(0.2, 2.0, size=n) if weights else None
    return metricopt.LMNNProblem(X, y, k=2, mu=0.5, sample_weight=w, **kw)


def _hinge_arguments(problem, M):
    """``h = 1 + d_ij - d_il`` of every triplet ``(i, j, l)`` (lifted points), one at a time in NumPy."""
    X = problem.X_lifted
    hs = {}
    for i, j, l in problem.hinge.all_triplets(problem):
        a, b = problem.lift(np.array([i]), np.array([l]))
        c, e = problem.lift(np.array([i]), np.array([j]))
        dil, dij = X[a[0]] - X[b[0]], X[c[0]] - X[e[0]]
        hs[(i, j, l)] = 1.0 + dij @ M @ dij - dil @ M @ dil
    return hs


def _random_psd(d, seed):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(d, d))
    return B @ B.T / d + 0.2 * np.eye(d)


def _evaluate(term, problem, M, form, margin=1e12, multiple=1):
    import jax.numpy as jnp

    act, size, _, _ = term.jax_active_set(problem, M, margin, form=form, multiple=multiple)
    with jax.enable_x64(True):
        data = {k: jnp.asarray(v) for k, v in term.jax_data(problem).items()}
        A = {k: jnp.asarray(v) for k, v in act.items()}
        margins = np.asarray(type(term).jax_margins(data, jnp.asarray(M), A))
        w = jnp.asarray(act["mask"] * (np.asarray(act["p"]) % 3 + 1.0))  # arbitrary per-triplet weights
        adj = np.asarray(type(term).jax_adjoint(data, A, w))
    return act, size, margins, adj


@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("form", FORMS)
def test_each_form_matches_the_brute_force_reference_with_ties(form, weights):
    p = _tied_problem(weights=weights)
    M = _random_psd(p.d, 1)
    term = p.hinge
    act, size, margins, adj = _evaluate(term, p, M, form)
    assert size == p.n_triplets  # margin 1e12: every triplet
    assert ("DU" in act) == (form != "gather") and ("ui" in act) == (form == "laplacian")
    hs = _hinge_arguments(p, M)
    T = p.target_neighbors
    l, kk = act["l"][:size], act["p"][:size] % T.shape[1]
    # the margins are d_il - d_ij = 1 - h, triplet by triplet
    anchors = act["p"][:size] // T.shape[1]
    h_ref = np.array([hs[(int(a), int(T[a, k]), int(b))] for a, k, b in zip(anchors, kk, l)])
    np.testing.assert_allclose(1.0 - margins[:size], h_ref, rtol=0, atol=1e-12)
    # the adjoint with weights w_t (times the anchor weight carried by the mask) against one triplet at a time
    wt = act["mask"][:size] * (act["p"][:size] % 3 + 1.0)
    X = p.X_lifted
    G = np.zeros((p.d, p.d))
    for a, k, b, w in zip(anchors, kk, l, wt):
        dil, dij = X[a] - X[b], X[a] - X[T[a, k]]
        G += w * (np.outer(dil, dil) - np.outer(dij, dij))
    np.testing.assert_allclose(adj, G, rtol=0, atol=1e-11 * np.abs(G).max())


@pytest.mark.parametrize("form", FORMS)
def test_each_form_matches_on_multi_metric_lifted_points(form):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(45, 3))
    y = np.repeat([0, 1, 2], 15)
    p = metricopt.MultiMetricLMNNProblem(X, y, k=2, mu=0.5)
    M = _random_psd(p.X_lifted.shape[1], 2)
    ref_act, ref_size, ref_m, ref_adj = _evaluate(p.hinge, p, M, "gather")
    act, size, margins, adj = _evaluate(p.hinge, p, M, form)
    assert size == ref_size
    np.testing.assert_allclose(margins[:size], ref_m[:size], rtol=0, atol=1e-12)
    np.testing.assert_allclose(adj, ref_adj, rtol=0, atol=1e-12 * np.abs(ref_adj).max())


def test_pair_arrays_hold_each_distinct_impostor_pair_once_and_shard_evenly():
    p = _tied_problem(n=80)
    act, size, _, _ = p.hinge.jax_active_set(p, np.eye(p.d), 1e12, form="pairs", multiple=4, min_pair_capacity=8)
    keys = act["i"][:size].astype(np.int64) * p.n + act["l"][:size]
    npairs = np.unique(keys).size
    pcap = act["DU"].shape[0]
    assert pcap % 4 == 0 and pcap >= npairs and pcap < 2 * max(npairs, 8)
    # every triplet's pair row is the difference of its own impostor pair
    X = p.X_lifted
    np.testing.assert_array_equal(act["DU"][act["u"][:size]], X[act["i"][:size]] - X[act["l"][:size]])
    assert not act["DU"][npairs:].any()
    # the solver's sets hold the pairs' rows; their differences, formed on the device, are the host's bit for bit
    dev, dsize, _, _ = p.hinge.jax_active_set(p, np.eye(p.d), 1e12, form="pairs", multiple=4, min_pair_capacity=8,
                                              device_pairs=True)
    assert dsize == size and "DU" not in dev and dev["DU_rows"].shape == (pcap, 2)
    assert type(p.hinge).pair_capacity(dev) == pcap == type(p.hinge).pair_capacity(act)
    with jax.enable_x64(True):
        moved = type(p.hinge).to_device(dev, X)
        assert set(moved) == set(act) and moved["DU"].dtype == np.float64
        for key in act:
            np.testing.assert_array_equal(np.asarray(moved[key]), act[key])


def test_unknown_form_is_refused():
    p = _tied_problem()
    with pytest.raises(metricopt.InputError, match="form must be 'auto', 'pairs', 'laplacian' or 'gather'; got 'x'"):
        p.hinge.jax_active_set(p, np.eye(p.d), 0.1, form="x")


def test_cheapest_times_the_candidates_once_per_key():
    import jax.numpy as jnp

    calls = {"slow": 0, "fast": 0}

    def slow():
        calls["slow"] += 1
        time.sleep(0.02)
        return jnp.zeros(1)

    def fast():
        calls["fast"] += 1
        return jnp.zeros(1)

    key = ("test", time.time())
    assert costmodel.cheapest(key, {"slow": slow, "fast": fast}) == "fast"
    assert calls == {"slow": 1 + costmodel.REPEATS, "fast": 1 + costmodel.REPEATS}
    assert costmodel.cheapest(key, {"slow": slow, "fast": fast}) == "fast"  # remembered: not timed again
    assert calls["slow"] == 1 + costmodel.REPEATS
    winner, seconds = costmodel.choices()[key]
    assert winner == "fast" and seconds["slow"] >= 0.02 > seconds["fast"]


def test_auto_measures_the_gradient_forms_only_where_they_cost_enough(monkeypatch):
    measured = []
    real = TripletLoss._laplacian_measured_faster

    def spy(*args, **kw):
        measured.append(True)
        return real(*args, **kw)

    monkeypatch.setattr(TripletLoss, "_laplacian_measured_faster", staticmethod(spy))
    monkeypatch.setattr(TripletLoss, "DENSE_MAX_N", 0)  # never the dense form
    p = _tied_problem(n=60)
    p.hinge.jax_active_set(p, np.eye(p.d), 1e12, form="auto")  # every triplet, but too small to be worth timing
    assert measured == []
    monkeypatch.setattr(TripletLoss, "MEASURE_ABOVE", 0.0)
    act, _, _, _ = p.hinge.jax_active_set(p, np.eye(p.d), 1e12, form="auto")
    assert measured == [True] and "DU" in act
    key = next(k for k in costmodel.choices() if k[0] == "triplet_adjoint" and k[2:4] == (p.n, p.d))
    assert ("ui" in act) == (costmodel.choices()[key][0] == "laplacian")


@pytest.mark.parametrize("laplacian", [False, True])
def test_whole_solves_agree_whichever_gradient_form(monkeypatch, laplacian):
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    base = metricopt.LMNNProblem(X, y, k=3, mu=0.5).solve(backend="jax", tol=1e-7, max_iter=3000)
    monkeypatch.setattr(TripletLoss, "DENSE_MAX_N", 0)  # never the dense form
    monkeypatch.setattr(TripletLoss, "MEASURE_ABOVE", 0.0)
    monkeypatch.setattr(TripletLoss, "_laplacian_measured_faster", staticmethod(lambda *a, **k: laplacian))
    sol = metricopt.LMNNProblem(X, y, k=3, mu=0.5).solve(backend="jax", tol=1e-7, max_iter=3000)
    assert str(base.status) == str(sol.status) == "optimal"
    assert sol.objective == pytest.approx(base.objective, rel=1e-6)
    assert sol.stats["certificate_rel_gap"] <= 1e-7
    cert = metricopt.certify(metricopt.LMNNProblem(X, y, k=3, mu=0.5), sol.M)
    assert cert.lower <= base.objective + 1e-9 * abs(base.objective) and cert.rel_gap <= 1e-6


def test_the_pair_bucket_moves_down_to_its_headroom(monkeypatch):
    """Once settled, the distinct pairs' bucket moves down to the power of two holding PAIR_HEADROOM times the pairs
    where that at least halves it (every pair row costs a d x d product per evaluation): a set of between a quarter
    and a third of its bucket's pairs moves down (the triplets' rule, below a quarter, kept it: MNIST-5k's 33,700
    pairs in 131,072); a bucket within a factor 2 of that is kept (a new bucket compiles the loop again)."""
    from sklearn.datasets import load_digits

    from metricopt.backends.jax import driver
    from metricopt.backends.jax.backend import best_scale

    X, y = load_digits(return_X_y=True)
    p = metricopt.LMNNProblem(X[:500] / 16.0, y[:500], k=3, mu=0.5)
    hinge = next(t for t in p.terms if t.uses_working_set)
    monkeypatch.setattr(type(hinge), "jax_dense", lambda self, n, cap: False)  # the pair forms at this size
    monkeypatch.setattr(driver, "SHRINK_WORK", 0.0)  # settled at once
    sets = driver.ActiveSets(p, p.terms)
    idx = p.terms.index(hinge)
    M = best_scale(p) * np.eye(p.d)
    sets.rebuild(M, 2.0, 0, False)
    wide = sets.pair_capacity[idx]

    def pairs_within(width):
        i, _, l, _ = p.find_triplets(M, width)
        return np.unique(i * p.n + l).size

    width = next(w for w in np.linspace(1.9, 0.0, 96) if pairs_within(w) < wide / 3)
    pairs = pairs_within(width)
    assert wide / 4 < pairs < wide / 3
    sets.rebuild(M, width, 100, False)
    fit = 1 << (int(driver.PAIR_HEADROOM * pairs) - 1).bit_length()
    assert fit == wide // 2 and sets.pair_capacity[idx] == fit
    sets.rebuild(M, width, 200, False)  # the set in its new bucket: kept
    assert type(hinge).pair_capacity(sets.current[idx]) == fit and sets.pair_capacity[idx] == fit


def test_a_clear_winner_decides_for_the_buckets_near_it(monkeypatch):
    """A measurement won by at least CLEAR_WIN decides for keys its predicate accepts; a close call does not. The
    Laplacian check then times nothing for a bucket within a factor 2 of a clear measurement on the same points."""
    monkeypatch.setattr(costmodel, "_CHOICES", {})
    p = _tied_problem(n=80)
    act, size, _, _ = p.hinge.jax_active_set(p, np.eye(p.d), 1e12, form="pairs")
    X = p.X_lifted
    n_targets = p.target_neighbors.size
    near = ("triplet_adjoint", jax.devices()[0].platform, X.shape[0], X.shape[1], 2 * act["i"].shape[0],
            act["DU"].shape[0], n_targets)
    costmodel._CHOICES[near] = ("laplacian", {"pairs": 2.0, "laplacian": 1.0})
    assert costmodel.decided(lambda k: k == near) == "laplacian"
    assert costmodel.decided(lambda k: False) is None
    monkeypatch.setattr(costmodel, "cheapest", lambda *a, **k: pytest.fail("timed a decided bucket"))
    pairs = act["DU"].shape[0]
    ui, ul = np.zeros(pairs, np.int32), np.zeros(pairs, np.int32)
    assert TripletLoss._laplacian_measured_faster(act, X, ui, ul, n_targets)
    costmodel._CHOICES[near] = ("laplacian", {"pairs": 1.2, "laplacian": 1.0})  # a close call decides nothing
    assert costmodel.decided(lambda k: k == near) is None
    with pytest.raises(pytest.fail.Exception, match="timed a decided bucket"):
        TripletLoss._laplacian_measured_faster(act, X, ui, ul, n_targets)
