"""The LMNN certificate's ramp dual points (metricopt.certify.triplets._ramp_bounds): the smoothed hinge's
derivative at a few widths. Each is a valid dual point (never above the exact optimum, wherever it is evaluated),
and near a smoothed solve's iterate one of them beats the restricted dual program when that frees few
multipliers (as at d = 164, where it frees at most MAX_FREE_ENTRIES / d^2 = 743)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import metricopt
from metricopt.certify.dual import dual_summary
from metricopt.problems.terms import Frobenius

triplets = importlib.import_module("metricopt.certify.triplets")


def _points(problem, M_opt):
    rng = np.random.default_rng(0)
    B = rng.normal(size=(problem.d, problem.d))
    yield M_opt
    yield 1.3 * M_opt
    yield 0.7 * M_opt + 0.3 * np.eye(problem.d)
    yield B @ B.T / problem.d


@pytest.mark.parametrize("weighted", [False, True])
def test_ramp_bounds_never_exceed_the_exact_optimum(iris_std, weighted):
    X, y = iris_std
    w = np.random.default_rng(1).uniform(0.3, 2.0, size=len(y)) if weighted else None
    p = metricopt.LMNNProblem(X, y, k=3, mu=0.5, sample_weight=w)
    exact = p.solve(backend="cvxpy", solver="CLARABEL", tol=1e-7)
    assert str(exact.status) == "optimal"
    opt_lower = exact.objective * (1 - exact.stats["certificate_rel_gap"])  # the exact optimum is at least this
    summary = dual_summary(p)
    for M in _points(p, exact.M):
        V = p.point(M)
        upper = p.objective(M) - summary.constant
        bounds = triplets._ramp_bounds(p, V, summary, 0.5, upper)
        # one per width, then the restricted dual around the best of them (where its ramp has a slope)
        assert len(bounds) - len(triplets.RAMP_WIDTHS) in (0, 1)
        assert all("restricted around the ramp" in b[1][1]["dual form"] for b in bounds[len(triplets.RAMP_WIDTHS):])
        for width, (lb, _) in bounds:
            assert lb + summary.constant <= exact.objective + 1e-9 * abs(exact.objective), (width, lb)
        # at the optimum itself, the best ramp is a near-optimal dual point
    best = max(lb for _, (lb, _) in triplets._ramp_bounds(p, p.point(exact.M), summary, 0.5,
                                                          exact.objective - summary.constant))
    assert best + summary.constant >= opt_lower - 5e-2 * abs(opt_lower)


def test_ramps_tighten_the_bound_where_few_multipliers_are_free(wine_std, monkeypatch):
    X, y = wine_std
    p = metricopt.LMNNProblem(X, y, k=3, mu=0.5)
    sol = p.solve(backend="jax", tol=1e-12, max_iter=400)  # a smoothed solve's iterate, not yet optimal
    M = sol.M
    monkeypatch.setattr(triplets, "MAX_FREE_ENTRIES", 20 * p.d ** 2)  # 20 free multipliers, as d = 164 frees 743
    upper = p.objective(M)
    with_ramps, info = triplets.lmnn_lower_bound(p, p.point(M), upper)
    monkeypatch.setattr(triplets, "RAMP_WIDTHS", ())
    without, _ = triplets.lmnn_lower_bound(p, p.point(M), upper)
    assert "ramp of width" in info["dual form"]
    assert (upper - with_ramps) < 0.75 * (upper - without)  # measured: 0.51 (gap 9.7 against 18.9)
    exact = p.solve(backend="cvxpy", solver="CLARABEL", tol=1e-7)
    assert with_ramps <= exact.objective + 1e-9 * abs(exact.objective)


def test_no_conic_restricted_dual_above_conic_max_d(iris_std, monkeypatch):
    """Above CONIC_MAX_D dimensions the restricted dual's CVXPY program is never built (at d = 200 it took 23 GB);
    the bound keeps its other dual points: still valid."""
    X, y = iris_std
    p = metricopt.LMNNProblem(X, y, k=3, mu=0.5, regularizer=Frobenius(0.1))  # lam > 0: the conic route
    built = []
    real = triplets.restricted_dual_program
    monkeypatch.setattr(triplets, "restricted_dual_program", lambda *a: built.append(1) or real(*a))
    M = p.solve(backend="jax", tol=1e-3).M
    V, upper = p.point(M), p.objective(M)
    with_conic, _ = triplets.lmnn_lower_bound(p, V, upper)
    assert built
    built.clear()
    monkeypatch.setattr(triplets, "CONIC_MAX_D", p.d - 1)
    without, info = triplets.lmnn_lower_bound(p, V, upper)
    assert built == []
    exact = p.solve(backend="cvxpy", solver="CLARABEL", tol=1e-7)
    assert without <= with_conic + 1e-12 * abs(upper) and without <= exact.objective


def test_ramp_hint_adds_the_solvers_width(wine_std):
    X, y = wine_std
    p = metricopt.LMNNProblem(X, y, k=3, mu=0.5)
    summary = dual_summary(p)
    M = np.eye(p.d)
    upper = p.objective(M) - summary.constant
    plain = [w for w, _ in triplets._ramp_bounds(p, p.point(M), summary, 0.5, upper)]
    with triplets.ramp_hint(0.037, 0.0, -1.0):
        hinted = [w for w, _ in triplets._ramp_bounds(p, p.point(M), summary, 0.5, upper)]
    assert plain == sorted(triplets.RAMP_WIDTHS, reverse=True) and hinted == [0.037]  # the hint replaces the list
    assert [w for w, _ in triplets._ramp_bounds(p, p.point(M), summary, 0.5, upper)] == plain  # reset on exit


def test_a_solve_keeps_its_highest_lower_bound():
    """Every certificate's lower bound bounds the same optimum: a later certificate carries the highest so far."""
    from types import SimpleNamespace

    from metricopt.backends.jax import driver
    from metricopt.certify import Certificate, Verdict

    sched = driver.CertificateSchedule(SimpleNamespace(n=10, d=2), SimpleNamespace(certify_every=10,
                                                                                   deterministic=True))
    first = sched.with_best_lower(Certificate.from_bounds(10.5, 10.0, 1e-3, "LMNN", {}), 100)
    assert first.lower == 10.0 and first.verdict is Verdict.SUBOPTIMAL
    later = sched.with_best_lower(Certificate.from_bounds(10.005, 9.0, 1e-3, "LMNN", {"dual form": "x"}), 200)
    assert later.lower == 10.0 and later.upper == 10.005 and later.verdict is Verdict.OPTIMAL  # 5e-4 <= 1e-3
    assert "iteration 100" in later.details["lower bound"] and later.details["dual form"] == "x"
    better = sched.with_best_lower(Certificate.from_bounds(10.004, 10.001, 1e-3, "LMNN", {}), 300)
    assert better.lower == 10.001 and sched.best_lower == (10.001, 300)
    bad = Certificate.infeasible(1e-3, "LMNN", "not PSD")
    assert sched.with_best_lower(bad, 400) is bad


def test_jax_solve_with_kept_lower_bound_is_still_below_the_optimum(wine_std):
    X, y = wine_std
    p = metricopt.LMNNProblem(X, y, k=3, mu=0.5)
    sol = p.solve(backend="jax", tol=1e-5)
    exact = p.solve(backend="cvxpy", solver="CLARABEL", tol=1e-7)
    assert str(sol.status) == "optimal"
    assert sol.certificate.lower <= exact.objective + 1e-9 * abs(exact.objective)
    assert sol.certificate.rel_gap <= 1e-5


@pytest.mark.parametrize("weighted", [False, True])
def test_the_restricted_dual_around_the_ramp(wine_std, monkeypatch, weighted):
    """A smoothed solve's iterate (wine, FISTA stopped at 300 iterations) with 20 free multipliers (the band's program
    capped by MAX_FREE_ENTRIES, as at d > 70): the restricted dual around the iterate's own ramp tightens the ramp's
    bound, and stays below the exact optimum; uncapped (d <= 70), it is not solved."""
    X, y = wine_std
    w = np.random.default_rng(2).uniform(0.3, 2.0, size=len(y)) if weighted else None
    p = metricopt.LMNNProblem(X, y, k=3, mu=0.5, sample_weight=w)
    sol = p.solve(backend="jax", tol=1e-12, max_iter=300)
    s = sol.stats["smoothing"]
    summary = dual_summary(p)
    upper = p.objective(sol.M) - summary.constant
    with triplets.ramp_hint(s):
        assert len(triplets._ramp_bounds(p, p.point(sol.M), summary, 0.5, upper)) == 1
    monkeypatch.setattr(triplets, "MAX_FREE_ENTRIES", 20 * p.d ** 2)
    with triplets.ramp_hint(s):
        (width, (ramp, _)), (width_r, (restricted, info)) = triplets._ramp_bounds(p, p.point(sol.M), summary, 0.5,
                                                                                   upper, max_free=20)
    assert width == width_r == s and "restricted around the ramp (20 free)" in info["dual form"]
    assert upper - restricted < 0.5 * (upper - ramp)
    exact = p.solve(backend="cvxpy", solver="CLARABEL", tol=1e-8)
    assert restricted + summary.constant <= exact.objective + 1e-9 * abs(exact.objective)


def test_a_certificate_is_put_off_while_the_iterate_settles_into_a_new_width():
    """Run.settling: within SETTLE_SHARE of the previous width's iterations after the smoothing width shrank, the
    iterate is near neither width's smoothed optimum (its ramps are poor dual points); the first width never
    settles."""
    from types import SimpleNamespace

    from metricopt.backends.jax import driver

    run = SimpleNamespace(smoothed=True, phase=(None, 0, 0), state={}, it=0)
    seen = []
    for it, width in [(0, 0.5), (100, 0.5), (200, 0.125), (260, 0.125), (300, 0.125), (310, 0.03125), (330, 0.03125),
                      (370, 0.03125)]:
        run.it, run.state = it, {"s": width}
        seen.append(driver.Run.settling(run))
    assert driver.SETTLE_SHARE == 0.5
    # 0.125 from 200 after 200 iterations of 0.5: settling until 300; 0.03125 from 310 after 110: until 365
    assert seen == [False, False, True, True, False, True, True, False]


def test_far_from_certifying_a_solvers_interim_certificate_tries_no_restricted_program_around_the_ramp(
        wine_std, monkeypatch):
    """Inside narrow_only with a solver's ramp hint, where the ramps leave a relative gap above RESTRICTED_CEIL, the
    restricted program around the ramp is skipped (the band's is still tried); outside narrow_only (a solve's last
    certificate, a direct call) it is tried as before. Every bound stays below the exact optimum."""
    X, y = wine_std
    p = metricopt.LMNNProblem(X, y, k=3, mu=0.5)
    monkeypatch.setattr(triplets, "MAX_FREE_ENTRIES", 20 * p.d ** 2)  # the ramp's restricted program, as at d > 70
    summary = dual_summary(p)
    start = 0.05 * np.eye(p.d)  # far from the optimum: the ramps' gap is large
    V = p.point(start)
    upper = p.objective(start)
    calls = []
    real = triplets._ramp_restricted
    monkeypatch.setattr(triplets, "_ramp_restricted", lambda *a, **k: calls.append(1) or real(*a, **k))
    with triplets.narrow_only(), triplets.ramp_hint(0.5, 1.0, 2.0):
        lower, info = triplets.lmnn_lower_bound(p, V, upper, summary=summary, tol=1e-3)
    with triplets.ramp_hint(0.5, 1.0, 2.0):
        ramps = triplets._ramp_bounds(p, V, summary, 0.5, upper - summary.constant, 20, ceil=0.0)
    assert min(upper - summary.constant - lb for _, (lb, _) in ramps) / upper > triplets.RESTRICTED_CEIL
    assert not calls and "triplets near margin (alpha free)" in info  # the band's program was tried
    with triplets.ramp_hint(0.5, 1.0, 2.0):
        full, _ = triplets.lmnn_lower_bound(p, V, upper, summary=summary, tol=1e-3)
    assert calls
    exact = p.solve(backend="cvxpy", solver="CLARABEL", tol=1e-8)
    assert max(lower, full) <= exact.objective + 1e-9 * abs(exact.objective)


def test_far_from_certifying_the_bands_program_keeps_few_free_multipliers(wine_std):
    """In the same case the band's restricted program keeps at most FAR_MAX_FREE free multipliers (a smaller program,
    a valid looser bound); a direct call keeps them all. Both bounds stay below the exact optimum."""
    X, y = wine_std
    p = metricopt.LMNNProblem(X, y, k=3, mu=0.5)
    summary = dual_summary(p)
    start = 0.05 * np.eye(p.d)
    V, upper = p.point(start), p.objective(start)
    with triplets.narrow_only(), triplets.ramp_hint(0.5, 1.0, 2.0):
        lower, info = triplets.lmnn_lower_bound(p, V, upper, band=0.5, summary=summary, tol=1e-3)
    with triplets.ramp_hint(0.5, 1.0, 2.0):
        full, full_info = triplets.lmnn_lower_bound(p, V, upper, band=0.5, summary=summary, tol=1e-3)
    assert info["triplets near margin (alpha free)"] == triplets.FAR_MAX_FREE
    assert full_info["triplets near margin (alpha free)"] > triplets.FAR_MAX_FREE
    exact = p.solve(backend="cvxpy", solver="CLARABEL", tol=1e-8)
    assert max(lower, full) <= exact.objective + 1e-9 * abs(exact.objective)
