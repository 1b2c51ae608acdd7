"""``time_limit`` is a wall: a solve returns within ``max(1.1 limit, limit + 5 s)`` (:func:`hard_limit`), status
``time_limit``, with the best certified iterate reached (a certificate that would overrun is skipped, the last one
reported), on both backends, whatever no limit interrupts (issue 32, item 3).

Each case makes one piece of work that no limit interrupts expensive, and would overrun the promise without the
estimates of :mod:`metricopt._deadline` (measured on the code before them: the scale search of a JAX solve ran
11.8 s of a 10 s limit on 8,000 synthetic points, a first-order solve of 20,000 points 40.8 s of a 30 s one). The
expensive pieces are simulated with sleeps (a search of all triplets, a certificate's dual), which take the same
time on a loaded machine: the margins come from the promise's slack, not from the machine being quiet. One case
is a real problem large enough for its searches to cost seconds on 2 cores. JAX's import and the compilation of its
loop (once per process) are done by a warm-up before the timed solves, as in ``test_reliability_time_limit.py``.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import metricopt as mo
from metricopt import Status
from metricopt._deadline import hard_limit


@pytest.fixture(scope="module")
def digits20():
    """scikit-learn's digits in PCA-20 coordinates, standardized, shuffled with a fixed seed."""
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA

    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(y))
    X = PCA(20, random_state=0).fit_transform(X[idx])
    return (X - X.mean(axis=0)) / X.std(axis=0), y[idx]


def _lmnn(data, n):
    return mo.LMNNProblem(data[0][:n], data[1][:n], k=3)


@pytest.fixture(scope="module")
def warm(digits20):
    """JAX imported and its loop compiled for the first active-set bucket of the 300-point problem (untimed)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mo.solve(_lmnn(digits20, 300), backend="jax", max_iter=10)
    return True


def _timed(call):
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = call()
    return out, time.perf_counter() - t


def _check_wall(sol, wall, limit):
    """The promise: within the bound, status ``time_limit``, a metric with its certificate's gap reported."""
    assert wall <= hard_limit(limit), f"{wall:.2f} s for time_limit={limit:g} (promised {hard_limit(limit):.2f} s)"
    assert sol.status is Status.TIME_LIMIT, sol.message
    assert sol.M is not None and np.all(np.isfinite(sol.M))
    assert "time limit" in sol.message


def _slow_search(monkeypatch, problem, seconds):
    """Every search of all triplets of ``problem`` takes ``seconds`` more (a search kept for the same metric is
    reused without one, as on a large problem)."""
    real = problem._search

    def slow(*args, **kwargs):
        time.sleep(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(problem, "_search", slow)


def _slow_objective(monkeypatch, problem, seconds):
    """Every exact objective of ``problem`` takes ``seconds`` more (a search of all triplets on a large problem)."""
    real = problem.objective

    def slow(*args, **kwargs):
        time.sleep(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(problem, "objective", slow)


def _slow_dual(monkeypatch, seconds):
    """Every certificate's restricted dual (the rank-two solver, which reads no deadline) takes ``seconds`` more."""
    import importlib

    try:
        cert_lmnn = importlib.import_module("metricopt.certify.triplets")
    except ImportError:  # before the certifiers' move (metricopt.certify.lmnn)
        cert_lmnn = importlib.import_module("metricopt.certify.lmnn")
    real = cert_lmnn.solve_rank2_dual

    def slow(*args, **kwargs):
        time.sleep(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(cert_lmnn, "solve_rank2_dual", slow)


# ----------------------------------------------------------------------------- JAX backend
def test_jax_scale_search_stops_at_the_deadline(digits20, warm, monkeypatch):
    """The start's scale search evaluates the exact objective at a dozen scales (each a search of all triplets) when
    too many triplets are active to collect: 1 s each here, 14 s and more against a 3 s limit (8 s promised) before
    it was timed. Now it stops at the best scale found, and the start is re-checked and certified."""
    from metricopt.backends.jax import backend

    problem = _lmnn(digits20, 300)
    monkeypatch.setattr(backend.best_scale, "__defaults__", (None, 0))  # max_triplets=0: the scan of the objective
    _slow_objective(monkeypatch, problem, 1.0)
    _slow_search(monkeypatch, problem, 1.0)
    limit = 3.0
    sol, wall = _timed(lambda: mo.solve(problem, backend="jax", time_limit=limit))
    _check_wall(sol, wall, limit)
    assert sol.certificate is not None and sol.stats["certificate_rel_gap"] == sol.certificate.rel_gap


def test_jax_slow_certificate_is_not_started_past_the_deadline(digits20, warm, monkeypatch):
    """A certificate's dual that takes 5 s: the first one (iteration 0) is taken, its cost measured, and no later one
    is started that would end past the deadline. Before, the closing certificate (dual, and the wide dual) followed
    the limit whatever it cost: 3 + 5 s and more against a 3 s limit (8 s promised)."""
    _slow_dual(monkeypatch, 5.0)
    problem = _lmnn(digits20, 300)
    limit = 3.0
    sol, wall = _timed(lambda: mo.solve(problem, backend="jax", time_limit=limit))
    _check_wall(sol, wall, limit)
    assert sol.certificate is not None and sol.stats["certificate_rel_gap"] == sol.certificate.rel_gap


@pytest.mark.parametrize("fallback_worse", [float("inf"), None])
def test_jax_returns_the_best_certified_iterate_when_the_last_certificate_would_overrun(digits20, warm, monkeypatch,
                                                                                      fallback_worse):
    """Iterations go on after the first certificate (3.5 s; no other is due before the end); at the limit, certifying
    the best iterate would take about 10 s (dual and wide dual, with the estimates' margin), past the promised 11 s:
    it is skipped. The best certified iterate (iteration 0) is returned with its certificate, its objective and gap
    reported, saying so, when it is within ``FALLBACK_WORSE`` of the best iterate (here: made infinite); else (the
    default 1e-3: the start is far worse) the best iterate is returned uncertified, the message giving the certified
    iterate's lower bound. Before, the best iterate was certified whatever it cost. (The start is given, ``init``:
    a given start is certified at once, a cold start only after ``certify_every`` iterations.)"""
    from metricopt.backends.jax import driver

    if fallback_worse is not None:
        monkeypatch.setattr(driver, "FALLBACK_WORSE", fallback_worse)
    _slow_dual(monkeypatch, 3.5)
    problem = _lmnn(digits20, 300)
    limit = 6.0
    sol, wall = _timed(lambda: mo.solve(problem, backend="jax", time_limit=limit, certify_every=10**6,
                                        init=np.eye(problem.d)))
    _check_wall(sol, wall, limit)
    history = sol.stats["history"]
    certified = [h for h in history if h["rel_gap"] is not None]
    assert [h["iteration"] for h in certified] == [0]
    best = min(h["objective"] for h in history)
    assert best < history[0]["objective"] * (1 - 1e-3)  # better iterates went uncertified
    assert sol.status == mo.Status.TIME_LIMIT and "certificate skipped" in sol.message
    if fallback_worse is not None:
        assert "returned the best certified iterate (iteration 0)" in sol.message
        assert sol.certificate is not None
        assert sol.stats["certificate_rel_gap"] == sol.certificate.rel_gap == history[0]["rel_gap"]
        assert sol.stats["best_iteration"] == 0
        assert sol.objective == pytest.approx(history[0]["objective"], rel=1e-12)
    else:
        assert "returned uncertified: the best certified iterate (iteration 0, lower bound" in sol.message
        assert sol.certificate is None and sol.stats["certificate_rel_gap"] is None
        assert sol.stats["best_iteration"] > 0
        assert sol.objective == pytest.approx(best, rel=1e-12)


def test_jax_large_problem_keeps_the_wall():
    """A real problem whose searches of all triplets take seconds on 2 cores (8,000 points, d = 50, ``jax_device.py``'s
    generator): before, its scale search alone (a dozen searches) ran past the promise (13.6 s for a 10 s limit, 42 s
    on a loaded machine)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        from jax_device import synthetic
    finally:
        sys.path.pop(0)
    X, y = synthetic(8000, 50)
    problem = mo.LMNNProblem(X, y, k=3, mu=0.5)
    limit = 5.0
    sol, wall = _timed(lambda: mo.solve(problem, backend="jax", tol=1e-3, time_limit=limit))
    _check_wall(sol, wall, limit)


def test_jax_no_search_fits_returns_the_start_unevaluated(digits20, warm, monkeypatch):
    """When not even the first search of all triplets fits (estimated from the start's scale search: 6 s against a
    0.5 s limit, 5.5 s promised), the start comes back unsolved, uncertified, status ``time_limit``."""
    problem = _lmnn(digits20, 300)
    _slow_search(monkeypatch, problem, 6.0)
    from metricopt.backends.jax import driver

    monkeypatch.setattr(driver, "SEARCH_SECONDS_PER_UNIT", 1.0)  # the a-priori estimate: far too long
    limit = 0.5
    sol, wall = _timed(lambda: mo.solve(problem, backend="jax", time_limit=limit))
    assert wall <= hard_limit(limit), wall
    assert sol.status is Status.TIME_LIMIT and sol.certificate is None and sol.M is not None
    assert "unevaluated" in sol.message


# ----------------------------------------------------------------------------- exact backend
@pytest.mark.parametrize("solver", ["SCS", "CLARABEL"])
def test_exact_backend_does_not_start_a_round_it_cannot_search_after(digits20, solver, monkeypatch):
    """Each search of all triplets takes 4.5 s: the initial working set's ends past the 2 s limit (7 s promised).
    Before, a round was still solved and its point certified by another search (9.2 s and more); now the start,
    whose search is done, is returned unsolved, and its certificate skipped as it would overrun."""
    problem = _lmnn(digits20, 100)
    _slow_search(monkeypatch, problem, 4.5)
    limit = 2.0
    sol, wall = _timed(lambda: mo.solve(problem, backend="cvxpy", solver=solver, time_limit=limit))
    _check_wall(sol, wall, limit)
    assert "returned the start" in sol.message


def test_exact_backend_keeps_the_wall_with_slow_searches_for_violators(digits20, monkeypatch):
    """Searches for violated triplets of 2 s each after the rounds: none is started that would end past the soft
    deadline (estimated from the last one, its margin included), and the last round's point comes back certified."""
    problem = _lmnn(digits20, 100)
    term = next(t for t in problem.terms if t.uses_working_set)
    real = type(term).violators

    def slow(self, *args, **kwargs):
        time.sleep(2.0)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(term), "violators", slow)
    limit = 5.0
    sol, wall = _timed(lambda: mo.solve(problem, backend="cvxpy", time_limit=limit))
    assert wall <= hard_limit(limit), wall
    assert sol.M is not None and sol.status in (Status.TIME_LIMIT, Status.OPTIMAL), sol.message
    assert sol.certificate is not None


# ----------------------------------------------------------------------------- memory and progress (item 4)
def test_jax_refuses_a_problem_that_cannot_fit(digits20, monkeypatch):
    """The bytes a solve needs are estimated before they are allocated; a problem that cannot fit is refused with
    the numbers and what to change (simulated: 1 MB of memory available)."""
    from metricopt.backends.jax import memory

    monkeypatch.setattr(memory, "host_available", lambda: 1_000_000)
    monkeypatch.setattr(memory, "device_available", lambda device=None: None)  # a CPU device: the host's memory
    problem = _lmnn(digits20, 300)
    with pytest.raises(mo.errors.ProblemTooLargeError, match=r"on the host .* available") as err:
        mo.solve(problem, backend="jax", max_iter=1)
    message = str(err.value)
    assert "n=300" in message and "search blocks" in message and "fewer points" in message
    assert "BLOCK_BYTES" in message and "float64" in message


def test_jax_memory_estimate_counts_the_active_sets_on_the_device(digits20):
    from metricopt.backends.jax import memory

    problem = _lmnn(digits20, 300)
    data = [t.jax_data(problem) for t in problem.jax_terms()]
    small, large = memory.estimate(problem, data, 256), memory.estimate(problem, data, 1 << 20)
    slot = memory.DEVICE_BYTES_PER_SLOT + memory.GATHERS_PER_TRIPLET * problem.d * 8
    assert large.device - small.device == ((1 << 20) - 256) * slot
    assert large.host > small.host
    with pytest.raises(mo.errors.ProblemTooLargeError, match="on the device"):
        memory.check(problem, large, host=10**12, on_device=large.device)  # a GPU with too little free


def test_verbose_prints_one_line_per_recheck(digits20, warm, capsys):
    """``verbose=True``: a memory line, then one line per re-check with the iteration, objective, certified gap,
    active set and seconds."""
    sol = mo.solve(_lmnn(digits20, 300), backend="jax", max_iter=30, verbose=True)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[metricopt jax/")]
    assert "memory estimate" in lines[0]
    rechecks = [ln for ln in lines if " iter " in ln and "objective" in ln]
    assert len(rechecks) == len(sol.stats["history"])
    for ln, entry in zip(rechecks, sol.stats["history"]):
        assert f"iter {entry['iteration']:6d}" in ln and "certified gap" in ln and "active" in ln and ln.rstrip()
        assert f"active {entry['active_set']:7d}" in ln


def test_jax_factor_geometry_keeps_the_wall(digits20, monkeypatch):
    """A non-convex solve (``problem.factored(r)``, no certificate): the same estimates hold its wall, and when no
    search fits the start comes back unevaluated."""
    from metricopt.backends.jax import driver

    problem = _lmnn(digits20, 300).factored(5)
    _slow_search(monkeypatch, problem, 1.5)
    limit = 2.0
    sol, wall = _timed(lambda: mo.solve(problem, backend="jax", time_limit=limit))
    assert wall <= hard_limit(limit), wall
    assert sol.status is Status.TIME_LIMIT and sol.L is not None and "time limit" in sol.message
    monkeypatch.setattr(driver, "SEARCH_SECONDS_PER_UNIT", 1.0)
    sol, wall = _timed(lambda: mo.solve(_lmnn(digits20, 300).factored(5), backend="jax", time_limit=0.5))
    assert wall <= hard_limit(0.5), wall
    assert sol.status is Status.TIME_LIMIT and sol.M is not None and "unevaluated" in sol.message


def test_certificate_estimate_is_the_median_of_the_last_three(monkeypatch):
    """One slow certificate (the first, with its compilations) does not hold back the later ones: the estimate is
    ESTIMATE_MARGIN times the median of the last ESTIMATE_WINDOW measured durations."""
    from types import SimpleNamespace

    from metricopt.backends.jax import driver

    sched = driver.CertificateSchedule(SimpleNamespace(n=10, d=2), SimpleNamespace(certify_every=10,
                                                                                   deterministic=True))
    clock = iter([10.0, 10.0, 11.0, 11.0, 12.0, 12.0, 12.5, 12.5])  # two reads per took(): 10 s, 1 s, 1 s, 0.5 s
    monkeypatch.setattr(driver.time, "perf_counter", lambda: next(clock))
    for start in (0.0, 10.0, 11.0):
        sched.took(start)
    assert sched.recent == [10.0, 1.0, 1.0]
    assert sched.estimate(search=5.0, active=100, d=2) == pytest.approx(driver.ESTIMATE_MARGIN * 1.0)
    assert sched.estimate(search=5.0, active=100, d=2, kept=False, final=True) == pytest.approx(
        driver.ESTIMATE_MARGIN * driver.FINAL_CERTIFY_FACTOR * 1.0 + 5.0)
    sched.took(12.0)
    assert sched.recent == [1.0, 1.0, 0.5]


def test_certificate_estimate_scales_to_the_active_set(monkeypatch):
    """A certificate measured at a large active set (a solve's first, at its start) is scaled by the a-priori model
    CERTIFY_SECONDS + CERTIFY_SECONDS_PER_UNIT x active x d^2 to the set now: it does not hold back the cheaper ones
    that follow (synthetic 20,000 x 50 on an H100: 12 s at 1.19 million triplets, then no certificate in the 33 s
    that followed at about 100,000, and the solve ended uncertified)."""
    from types import SimpleNamespace

    from metricopt.backends.jax import driver

    d = 50
    sched = driver.CertificateSchedule(SimpleNamespace(n=20_000, d=d), SimpleNamespace(certify_every=10,
                                                                                       deterministic=False))
    assert sched.timed_spacing
    model = lambda a: driver.CERTIFY_SECONDS + driver.CERTIFY_SECONDS_PER_UNIT * a * d * d
    assert sched.expected(100_000) == pytest.approx(model(100_000))  # nothing measured yet
    clock = iter([12.0, 12.0])  # two reads in took(): it ended at 12 s
    monkeypatch.setattr(driver.time, "perf_counter", lambda: next(clock))
    sched.took(0.0, active=1_190_000)
    sched.record(SimpleNamespace(rel_gap=0.9), {"M": None}, 0)
    small = 12.0 * model(100_000) / model(1_190_000)
    assert sched.expected(100_000) == pytest.approx(small) and small < 2.0
    assert sched.expected(1_190_000) == pytest.approx(12.0)
    assert sched.estimate(search=1.0, active=100_000, d=d) == pytest.approx(driver.ESTIMATE_MARGIN * small)
    # timed spacing waits CERTIFY_SHARE times the expected cost at the set now, not the last certificate's 12 s
    assert sched.due(100, now=12.0 + driver.CERTIFY_SHARE * small + 0.01, active=100_000)
    assert not sched.due(100, now=12.0 + driver.CERTIFY_SHARE * small + 0.01)  # unscaled: 36 s
    assert not sched.due(100, now=12.0 + driver.CERTIFY_SHARE * small - 0.01, active=100_000)
    # the spacing follows the last certificate (scaled), the time wall's estimate the median of the last three
    clock = iter([20.0, 20.0, 23.0, 23.0])
    for start, active in ((19.0, 100_000), (20.0, 200_000)):  # 1 s at 100,000, then 3 s at 200,000
        sched.took(start, active=active)
    last = 3.0 * model(100_000) / model(200_000)
    assert sched.expected(100_000) == pytest.approx(float(np.median([small, 1.0, last])))
    # ... and is scaled only where the model's cost changed by more than SPACING_SCALE_ABOVE times
    assert model(200_000) / model(100_000) < driver.SPACING_SCALE_ABOVE
    assert sched.expected(100_000, last=True) == pytest.approx(3.0)
    assert sched.expected(1_000, last=True) == pytest.approx(3.0 * model(1_000) / model(200_000))


def test_the_search_prior_follows_where_the_search_runs(monkeypatch):
    """Before a search is measured, its cost is the a-priori unit x n^2 d: the CPU's, or the accelerator's where the
    device search runs on a GPU (the CPU's refused a 60 s solve at 60,000 x 164 on an H100 before its first search,
    estimating 177 s; a search took 11.5 s there)."""
    import metricopt.search
    from metricopt.backends.jax import driver

    rng = np.random.default_rng(0)
    p = mo.LMNNProblem(rng.standard_normal((60, 4)), np.arange(60) % 3, k=2)
    unit = 60.0 * 60.0 * 4.0
    monkeypatch.setenv("METRICOPT_DEVICE_SEARCH", "1")
    assert driver.search_prior(p) == pytest.approx(driver.SEARCH_SECONDS_PER_UNIT * unit)  # the CPU device
    monkeypatch.setattr(metricopt.search, "default_platform", lambda: "gpu")
    assert driver.search_prior(p) == pytest.approx(driver.SEARCH_SECONDS_PER_UNIT_ACCELERATOR * unit)
    monkeypatch.setenv("METRICOPT_DEVICE_SEARCH", "0")  # a host search on a GPU machine: the CPU's unit
    assert driver.search_prior(p) == pytest.approx(driver.SEARCH_SECONDS_PER_UNIT * unit)


def test_the_first_chunks_rate_follows_where_the_iterations_run(monkeypatch):
    """Before a chunk is measured its rate is a-priori, per unit of capacity x d^2: the CPU's unit, or the
    accelerator's on a GPU (the CPU's gave 180 s an iteration at 60,000 x 164 with 9.2 million triplets on an H100 and
    refused the first chunk of a 150 s solve; a gradient there took 0.039 s)."""
    from types import SimpleNamespace

    from metricopt.backends.jax import driver

    monkeypatch.setattr(driver, "_loop_key", lambda run, actives: "compiled")
    monkeypatch.setattr(driver, "_COMPILED", {"compiled"})
    actives = [{"mask": np.zeros(2 ** 24)}, None]
    run = SimpleNamespace(chunk_rate=None, problem=SimpleNamespace(d=164), platform="cpu")
    unit = 2.0 ** 24 * 164 ** 2 * driver.ESTIMATE_MARGIN
    assert driver.Run.chunk_seconds(run, actives) == (pytest.approx(driver.ITERATION_SECONDS_PER_UNIT * unit), 0.0,
                                                      False)
    run.platform = "gpu"
    rate, _, _ = driver.Run.chunk_seconds(run, actives)
    assert rate == pytest.approx(driver.ITERATION_SECONDS_PER_UNIT_ACCELERATOR * unit) and rate < 1.0
    run.chunk_rate = 0.2  # measured: the platform no longer matters
    assert driver.Run.chunk_seconds(run, actives)[0] == pytest.approx(driver.ESTIMATE_MARGIN * 0.2)


def test_jax_refuses_a_search_that_would_fill_the_memory(digits20, monkeypatch):
    """The triplet search stops at the memory's triplet limit and the solve is refused with the numbers, instead of
    filling the memory."""
    from metricopt.backends.jax import memory

    problem = _lmnn(digits20, 400)
    monkeypatch.setattr(memory, "host_available", lambda: 10 * 2**30)
    monkeypatch.setattr(memory, "device_available", lambda device=None: None)
    per = memory.HOST_BYTES_PER_TRIPLET + memory.DEVICE_BYTES_PER_SLOT + memory.GATHERS_PER_TRIPLET * 8 * problem.d
    assert memory.triplet_limit(problem) == int(memory.USABLE_SHARE * 10 * 2**30 / per)
    monkeypatch.setattr(memory, "triplet_limit", lambda problem, device=None: 50)
    with pytest.raises(mo.ProblemTooLargeError, match=r"found more than 50 active triplets .* To fit: fewer points"):
        problem.solve(backend="jax", tol=1e-3)


def test_jax_narrows_the_start_width_where_the_first_search_would_fill_the_memory(digits20, monkeypatch):
    """A first search (width 0.5, the start's smoothing) that finds more triplets than the memory holds is retried at
    a narrower smoothing width (here 0.125, the margin 0.2 then the search's width) instead of refusing the solve,
    and the solve is still certified to the same optimum; a limit below even the narrowest width is refused."""
    from metricopt.backends.jax import memory
    from metricopt.backends.jax.backend import best_scale

    problem = _lmnn(digits20, 400)
    M0 = best_scale(problem) * np.eye(problem.d)
    wide, narrow = (problem.find_triplets(M0, w)[0].size for w in (0.5, 0.2))
    assert narrow < wide
    reference = _lmnn(digits20, 400).solve(backend="jax", tol=1e-4)
    assert reference.stats["history"][0]["smoothing"] == 0.5
    monkeypatch.setattr(memory, "triplet_limit", lambda problem, device=None: (narrow + wide) // 2)
    sol = problem.solve(backend="jax", tol=1e-4)
    assert sol.stats["history"][0]["smoothing"] == 0.125 and sol.stats["history"][0]["active_set"] == narrow
    assert sol.status is mo.Status.OPTIMAL and sol.certificate.rel_gap <= 1e-4
    assert sol.objective == pytest.approx(reference.objective, rel=2e-4)
    monkeypatch.setattr(memory, "triplet_limit", lambda problem, device=None: narrow - 1)
    with pytest.raises(mo.ProblemTooLargeError, match=r"search at width 0.2 found more than"):
        _lmnn(digits20, 400).solve(backend="jax", tol=1e-4)


def test_jax_a_sampled_start_narrows_its_width_before_searching(digits20, monkeypatch, capsys):
    """Where the start's scale came from a sample of the triplets (a dense start), the sample's estimate of the first
    active set narrows the width before any search: no search at the wide width is run to fail."""
    from metricopt.backends.jax import backend, memory

    problem = _lmnn(digits20, 400)
    real = backend._sampled_deltas
    # every triplet, weight 1 (n < SCALE_SAMPLE), reported above the budget: the sampled ray search is taken
    monkeypatch.setattr(backend, "_sampled_deltas", lambda *a, **k: real(*a, **k)[:2] + (1e12,))
    M0 = backend.best_scale(problem, max_triplets=10) * np.eye(problem.d)
    wide, narrow = (problem.find_triplets(M0, w)[0].size for w in (0.5, 0.2))
    monkeypatch.setattr(memory, "triplet_limit", lambda problem, device=None: (narrow + wide) // 2)
    widths = []
    find = type(problem).find_triplets
    monkeypatch.setattr(type(problem), "find_triplets",
                        lambda self, M, margin=0.0, **kw: widths.append(margin) or find(self, M, margin, **kw))
    sol = problem.solve(backend="jax", tol=1e-4, verbose=True)
    assert "at width 0.5 a sample estimates more active triplets than the memory holds" in capsys.readouterr().out
    assert widths[0] == 0.2 and sol.stats["history"][0]["active_set"] == narrow
    assert sol.status is mo.Status.OPTIMAL and sol.certificate.rel_gap <= 1e-4


def test_jax_search_estimate_follows_the_searches_not_the_kept_answers(digits20, warm, monkeypatch):
    """Re-checks that the kept search answers (``LMNNProblem.find_triplets``) take milliseconds; the time wall's
    estimate of the next re-check must stay the last real search's, or a re-check that does search would be started
    past the deadline."""
    from metricopt.backends.jax import driver

    problem = _lmnn(digits20, 300)
    _slow_search(monkeypatch, problem, 0.3)
    estimates = []
    real = driver.Run.out_of_time

    def recording(self):
        estimates.append((self.it, self.search_estimate))
        return real(self)

    monkeypatch.setattr(driver.Run, "out_of_time", recording)
    sol = problem.solve(backend="jax", tol=1e-5, time_limit=120)
    assert sol.status is Status.OPTIMAL
    rechecks = len(sol.stats["history"])
    assert problem.searches < rechecks  # some re-checks were answered by the kept search
    later = [e for it, e in estimates if it > 0]
    assert later and min(later) >= driver.ESTIMATE_MARGIN * 0.3
