"""Local distance functions (Ramanan & Baker, PAMI 2011): the taxonomy's cells, regularised weighted LDA, the
batched local LMNN solver, the estimator, its model files and the command line."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris, load_wine
from sklearn.utils.estimator_checks import parametrize_with_checks

import metricopt as mo
from metricopt.methods.local import VALID, LocalSet, fit_local_metrics, regularized_lda, solve_lmnn_batch
from metricopt.methods.local.batch import span_basis
from metricopt.methods.local.line_integral import cell_of

SMALL = {"neighborhood_size": 12, "n_references": 8, "shortlist": 10, "local_max_iter": 60, "max_iter": 300}


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))
    return X[idx[:90]], y[idx[:90]], X[idx[90:140]], y[idx[90:140]]


@pytest.fixture(scope="module")
def global_lmnn(wine):
    Xtr, ytr, _, _ = wine
    # a fixed global metric shared by the cells (its own fit is tested below): a short solve serves
    sol = mo.solve(mo.LMNNProblem(Xtr, ytr, k=3), backend="jax", tol=1e-2, max_iter=200)
    return mo.linalg.factor(sol.M)


CELLS = [(how, where, when) for how in ("lda", "lmnn", "hybrid") for where, whens in VALID.items() for when in whens]


@pytest.mark.parametrize("how,where,when", CELLS)
def test_every_cell_is_reachable_from_the_estimator(wine, global_lmnn, how, where, when, monkeypatch):
    Xtr, ytr, Xte, yte = wine
    if how != "lda":  # share one global LMNN between the cells (its own fit is tested below)
        import metricopt.methods.local.taxonomy as tax

        monkeypatch.setattr(tax, "fit_global", lambda X, y, how, p: (global_lmnn, None))
    est = mo.LocalMetricKNN(how=how, where=where, when=when, **SMALL).fit(Xtr, ytr)
    err = 1.0 - est.score(Xte, yte)
    # wine standardised: Euclidean 3-NN errs on about 4 % of these 50 points; a broken local distance does far worse
    assert err <= 0.16, (how, where, when, err)
    assert est.column_ == mo.local.column_of(where, when)
    assert sum(est.local_.statuses.values()) >= (0 if where == "global" else 1)
    if how == "lmnn" and where in ("exemplar", "test"):
        assert "uncertified" in est.local_.statuses or "single_class" in est.local_.statuses


def test_global_lmnn_fit_is_the_certified_jax_solve(wine):
    Xtr, ytr, _, _ = wine
    est = mo.LocalMetricKNN(how="lmnn", where="global", tol=1e-3).fit(Xtr, ytr)
    assert est.solution_.status.code == "optimal"
    assert est.solution_.certificate.rel_gap <= 1e-3
    np.testing.assert_allclose(est.components_.T @ est.components_, est.solution_.M, atol=1e-9)


def test_a_cell_outside_the_taxonomy_is_refused_with_the_cells_listed(wine):
    Xtr, ytr, _, _ = wine
    with pytest.raises(mo.InputError) as exc:
        mo.LocalMetricKNN(how="lda", where="global", when="line").fit(Xtr, ytr)
    assert str(exc.value) == (
        "where='global' with when='line' is not a cell of the taxonomy; the cells are where='global': when in "
        "('offline',); where='class': when in ('offline',); where='exemplar': when in ('offline', 'online', "
        "'interpolated', 'line'); where='test': when in ('online', 'interpolated').")
    with pytest.raises(mo.UnknownOptionError):
        mo.LocalMetricKNN(how="pca").fit(Xtr, ytr)


def test_online_exemplar_metrics_equal_the_offline_ones(wine):
    Xtr, ytr, Xte, _ = wine
    off = fit_local_metrics(Xtr, ytr, "lda", "exemplar", "offline", **SMALL)
    on = fit_local_metrics(Xtr, ytr, "lda", "exemplar", "online", **SMALL)
    np.testing.assert_array_equal(off.predict(Xte), on.predict(Xte))
    some = sorted(on.cache)[:5]
    np.testing.assert_allclose(np.stack([on.cache[i] for i in some]), off.metrics[some], rtol=1e-12, atol=1e-12)


def test_nn_interpolation_is_the_own_metric_cell_and_rbf_tends_to_it(wine):
    Xtr, ytr, Xte, _ = wine
    nn = fit_local_metrics(Xtr, ytr, "lda", "test", "interpolated", interpolation="nn", **SMALL)
    cells = cell_of(Xte, Xtr[nn.references], nn.metrics)
    np.testing.assert_array_equal(nn.field_at(Xte), nn.metrics[cells])
    rbf = fit_local_metrics(Xtr, ytr, "lda", "test", "interpolated", interpolation="rbf", sigma=1e-6, **SMALL)
    # a vanishing width puts all the weight on the reference nearest under the global metric
    Zq, Zr = Xte @ rbf.space.L.T, Xtr[rbf.references] @ rbf.space.L.T
    nearest = np.argmin(((Zq[:, None] - Zr[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_allclose(rbf.field_at(Xte), rbf.metrics[nearest], atol=1e-8)
    cv = fit_local_metrics(Xtr, ytr, "lda", "test", "interpolated", **SMALL)
    assert cv.sigma in SMALL.get("sigma_grid", (0.001, 0.003, 0.01))
    assert set(cv.sigma_errors) == {0.001, 0.003, 0.01}


def test_line_cell_uses_the_line_integral(wine):
    Xtr, ytr, Xte, _ = wine
    m = fit_local_metrics(Xtr, ytr, "lda", "exemplar", "line", **SMALL)
    _, cand = m.space.nearest(Xte[:3], 5)
    D = m.distances(Xte[:3], cand)
    refs = Xtr[m.references]
    for q in range(3):
        for j in range(5):
            want = mo.local.line_integral_distance(Xte[q], Xtr[cand[q, j]], refs, m.metrics)
            assert D[q, j] == pytest.approx(want, rel=1e-12)


# --------------------------------------------------------------------------- regularised weighted LDA


def test_regularized_lda_finds_the_discriminant_direction():
    rng = np.random.default_rng(1)
    X = np.concatenate([rng.normal([0, 0], [3, 0.2], (200, 2)), rng.normal([0, 1], [3, 0.2], (200, 2))])
    y = np.repeat([0, 1], 200)
    L = regularized_lda(X, y, lam=1e-3, rank=1, n_bags=0)
    v = L[0] / np.linalg.norm(L[0])
    assert abs(v[1]) > 0.999  # the classes differ along the second axis, where the spread is small


def test_regularized_lda_weights():
    X, y = load_iris(return_X_y=True)
    L1 = regularized_lda(X, y, n_bags=0)
    # the C - 1 = 2 discriminant rows are unique up to sign (the third spans a null space of Sigma_B)
    np.testing.assert_allclose(regularized_lda(X, y, weights=np.ones(len(y)), n_bags=0), L1, atol=1e-12)
    np.testing.assert_allclose(np.abs(regularized_lda(X, y, weights=3 * np.ones(len(y)), n_bags=0)[:2]),
                               np.abs(L1[:2]), atol=1e-10)
    keep = np.arange(len(y)) % 2 == 0
    w = keep.astype(float)
    Lw = regularized_lda(X, y, weights=w, n_bags=0)
    Ls = regularized_lda(X[keep], y[keep], n_bags=0)
    np.testing.assert_allclose(np.abs(Lw[:2]), np.abs(Ls[:2]), atol=1e-10)
    assert L1.shape == (3, 4)  # rank = classes present
    assert regularized_lda(X[y < 2], y[y < 2], n_bags=0).shape == (2, 4)
    with pytest.raises(mo.InputError, match=r"weights must be finite, non-negative and not all zero\."):
        regularized_lda(X, y, weights=-np.ones(len(y)))


# --------------------------------------------------------------------------- the batched local LMNN solver


def _digit_sets(count, S=14, seed=0):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    rng = np.random.default_rng(seed)
    sets = []
    while len(sets) < count:
        q = X[rng.integers(len(X))]
        idx = np.argsort(((X - q) ** 2).sum(1), kind="stable")[:60]
        labels, counts = np.unique(y[idx[:S]], return_counts=True)
        ok = labels[counts >= 4]
        if ok.size < 2:
            continue
        pick = idx[np.isin(y[idx], ok)][:S]
        if pick.size == S:
            sets.append(LocalSet(X[pick], y[pick]))
    return sets


def test_batched_local_lmnn_is_certified_and_compiles_once_per_shape():
    from metricopt.backends.jax import loop

    sets = _digit_sets(6)
    before = loop.TRACES["run_chunk"]
    res = solve_lmnn_batch(sets[:3], max_iter=3000, certify=True, tol=1e-3)
    res2 = solve_lmnn_batch(sets[3:], max_iter=3000, certify=True, tol=1e-3)
    assert loop.TRACES["run_chunk"] - before <= 1  # one trace for both batches (same shapes)
    assert res.stats["span_dim"] == 13  # 14 points in 64 dimensions: solved in their 13-dimensional span
    for r in (res, res2):
        assert r.statuses == [mo.Status.OPTIMAL] * 3, r.rel_gaps
        assert max(r.rel_gaps) <= 1e-3


def test_local_span_reduction_is_exact_and_keeps_the_base_metric_off_the_span():
    s = _digit_sets(1)[0]
    G = np.diag(np.linspace(1, 2, 64))
    res = solve_lmnn_batch([s], max_iter=300, base=G, reg=1e-2)
    M = res.metrics[0]
    mean, Q = span_basis(s.X, 13)
    N = Q.T @ M @ Q
    # the plain LMNN objective of the full metric equals that of its compression to the span
    full = mo.LMNNProblem(s.X, s.y, k=3).objective(M)
    reduced = mo.LMNNProblem((s.X - mean) @ Q, s.y, k=3).objective(N)
    assert full == pytest.approx(reduced, rel=1e-10)
    P = np.eye(64) - Q @ Q.T
    np.testing.assert_allclose(P @ M @ P, P @ G @ P, atol=1e-10)
    assert np.linalg.eigvalsh(M)[0] >= -1e-10


def test_batch_refuses_sets_of_different_shapes():
    sets = _digit_sets(2)
    sets[1] = LocalSet(sets[1].X[:10], sets[1].y[:10])
    with pytest.raises(mo.InputError, match=r"every local set must have the same shape \(14, 64\); got \(10, 64\)\."):
        solve_lmnn_batch(sets)


# --------------------------------------------------------------------------- model files and the command line


@pytest.mark.parametrize("how,where,when", [("lda", "exemplar", "offline"), ("hybrid", "test", "interpolated"),
                                            ("lda", "exemplar", "line"), ("lda", "class", "offline")])
def test_model_files_round_trip_exactly(wine, global_lmnn, tmp_path, monkeypatch, how, where, when):
    import metricopt.methods.local.taxonomy as tax

    monkeypatch.setattr(tax, "fit_global", lambda X, y, how, p: (global_lmnn, None))
    Xtr, ytr, Xte, _ = wine
    est = mo.LocalMetricKNN(how=how, where=where, when=when, **SMALL).fit(Xtr, ytr)
    path = tmp_path / "local.npz"
    mo.io.save_model(path, est)
    back = mo.io.load_model(path)
    np.testing.assert_array_equal(back.predict(Xte), est.predict(Xte))
    assert back.get_params() == est.get_params()
    assert back.local_.sigma == est.local_.sigma


def test_cli_fits_a_local_cell_and_predicts(tmp_path, capsys):
    from metricopt.cli import main

    out = tmp_path / "m.npz"
    assert main(["fit", "--method", "local", "--how", "lda", "--where", "test", "--data", "iris", "--out", str(out),
                 "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "the paper's 'Test' column" in text
    assert main(["predict", "--model", str(out), "--data", "iris", "--split", "test"]) == 0
    assert main(["fit", "--method", "lmnn", "--how", "lda", "--data", "iris", "--out", str(out)]) == 2
    assert "--how, --where and --when choose a cell of the local-metric taxonomy" in capsys.readouterr().err


def test_with_cell_reuses_the_reference_metrics(wine):
    from metricopt.methods.local.taxonomy import with_cell

    Xtr, ytr, Xte, _ = wine
    a = fit_local_metrics(Xtr, ytr, "lda", "exemplar", "interpolated", **SMALL)
    b = with_cell(a, "test", "interpolated")
    c = fit_local_metrics(Xtr, ytr, "lda", "test", "interpolated", **SMALL)
    np.testing.assert_array_equal(b.references, c.references)
    np.testing.assert_allclose(b.metrics, c.metrics, rtol=1e-12, atol=1e-12)
    assert b.metrics is a.metrics and b.where == "test"
    with pytest.raises(mo.InputError, match="with_cell moves a fitted interpolated or line-integral cell"):
        with_cell(fit_local_metrics(Xtr, ytr, "lda", "global", "offline"), "test", "interpolated")


def test_per_class_lmnn_anchor_form_is_one_weighted_lmnn_per_class():
    X, y = load_iris(return_X_y=True)
    X, y = X[::3], y[::3]
    m = fit_local_metrics(X, y, "lmnn", "class", "offline", class_form="anchor", max_iter=3000, tol=1e-3)
    assert m.metrics.shape == (3, 4, 4)
    for c in range(3):
        prob = mo.LMNNProblem(X, y, k=3, sample_weight=(y == c).astype(float))
        cert = mo.certify(prob, m.metrics[c], tol=1e-3)
        assert cert.rel_gap <= 1e-3  # each class metric is certified for its class's Eq. 8 problem


@parametrize_with_checks([mo.LocalMetricKNN(how="lda", where="test", when="online")])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_time_limit_bounds_the_local_batches(monkeypatch):
    """``time_limit`` (issue 31): no batch of local solves, and no chunk of one, starts that would end past the
    deadline; the sets left keep the global metric and count as ``time_limit``; without a limit all are solved.

    The deadline batches are held to is the hard one, ``max(1.1 L, L + 5 s)``: its 5 s slack would let the second of
    two batches of about 2 s start. The test narrows the slack to 2 s (``_deadline.hard_limit``), so that the second
    batch, or the first's last chunks, must be refused whatever the machine's speed."""
    import time

    from metricopt import _deadline
    from metricopt.methods.local import taxonomy

    X, y = load_wine(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    opts = dict(global_L=np.eye(X.shape[1]), batch_size=32, local_max_iter=2000, neighborhood_size=30)
    full = fit_local_metrics(X, y, "lmnn", "exemplar", "offline", **opts)  # also compiles the batch shapes
    assert "time_limit" not in full.statuses
    monkeypatch.setattr(taxonomy, "FIRST_BATCH_SECONDS", 0.0)  # compiled already: the first batch is no slower
    monkeypatch.setattr(_deadline, "hard_limit", lambda limit: limit + 2.0)
    limit = 0.5
    t0 = time.perf_counter()
    cut = fit_local_metrics(X, y, "lmnn", "exemplar", "offline", time_limit=limit, **opts)
    wall = time.perf_counter() - t0
    assert wall <= limit + 2.0 + 1.0, wall  # the narrowed deadline, and one chunk's overrun of its estimate
    assert cut.statuses.get("time_limit", 0) > 0, cut.statuses
    assert sum(cut.statuses.values()) == sum(full.statuses.values())
    with pytest.raises(mo.InputError, match="time_limit"):
        fit_local_metrics(X, y, "lmnn", "exemplar", "offline", time_limit=-1.0, **opts)
