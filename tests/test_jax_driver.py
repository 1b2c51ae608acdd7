"""The pieces of the JAX backend's driver (:mod:`metricopt.backends.jax.driver`): the stop policy and the
certificate schedule, on their own."""

from __future__ import annotations

import types

import numpy as np

from metricopt.backends.jax.backend import Options
from metricopt.backends.jax.driver import CERTIFY_GROWTH, CertificateSchedule, stop_reason
from metricopt.certify.policy import Outcome


def _entry(rel_gap=None, **kw):
    return {"rel_gap": rel_gap, **kw}


def test_stop_policy_order_certificate_then_callback_then_limits():
    opts = Options.resolve({"tol": 1e-3, "max_iter": 100})
    common = dict(opts=opts, certifiable=True, online=False)
    cert = types.SimpleNamespace(rel_gap=1e-4)
    assert stop_reason(_entry(1e-4), cert, False, True, True, it=100, **common).kind is Outcome.CONVERGED
    assert stop_reason(_entry(), None, False, True, True, it=100, **common).kind is Outcome.STOPPED
    assert stop_reason(_entry(), None, False, False, True, it=100, **common).kind is Outcome.ITERATION_LIMIT
    assert stop_reason(_entry(), None, False, False, True, it=50, **common).kind is Outcome.TIME_LIMIT
    assert stop_reason(_entry(), None, False, False, False, it=50, **common) is None
    loose = types.SimpleNamespace(rel_gap=1e-2)
    assert stop_reason(_entry(1e-2), loose, False, False, False, it=50, **common) is None
    assert stop_reason(_entry(stationarity=1e-5), None, True, False, False, it=50, **common).kind is Outcome.STATIONARY
    report = stop_reason(_entry(first_order=1e-5), None, True, False, False, it=50, opts=opts, certifiable=False,
                         online=False)
    assert report.kind is Outcome.CONVERGED and "first-order" in report.reason


def test_certificate_schedule_spaces_certificates_out_as_the_solve_goes_on():
    problem = types.SimpleNamespace(n=10, d=2)
    schedule = CertificateSchedule(problem, Options.resolve({"certify_every": 50, "deterministic": True}))
    assert schedule.due(0, now=0.0)  # no certificate yet
    schedule.record(types.SimpleNamespace(rel_gap=1.0), {"M": np.eye(2)}, 1000)
    assert not schedule.due(1000 + 50, now=0.0)
    assert schedule.due(1000 + int(CERTIFY_GROWTH * 1000), now=0.0)
    assert not schedule.timed_spacing
    # re-checks every 80 iterations: the certificate is due at the re-check nearest to 1000 + 200, not the first after
    assert not schedule.due(1000 + 159, now=0.0, interval=80) and schedule.due(1000 + 160, now=0.0, interval=80)
    assert not schedule.due(1000 + 160, now=0.0)
    cold = CertificateSchedule(problem, Options.resolve({"certify_every": 50, "deterministic": True}), first=50)
    assert not cold.due(0, now=0.0) and not cold.due(49, now=0.0) and cold.due(50, now=0.0)


def test_a_cold_start_is_not_certified_before_certify_every_a_given_start_at_once():
    """The solver's own start (the scaled identity) is never where a solve stops: its first certificate waits
    ``certify_every`` iterations; a given ``init`` may be optimal already and is certified at its first re-check."""
    from sklearn.datasets import load_digits

    import metricopt

    X, y = load_digits(return_X_y=True)
    p = metricopt.LMNNProblem(X[:150] / 16.0, y[:150], k=3, mu=0.5)
    cold = p.solve(backend="jax", max_iter=60, certify_every=30, check_every=10)
    first = [h["iteration"] for h in cold.stats["history"] if h["rel_gap"] is not None]
    assert first[0] == 30
    warm = p.solve(backend="jax", max_iter=60, certify_every=30, check_every=10, init=cold)
    assert warm.stats["history"][0]["iteration"] == 0 and warm.stats["history"][0]["rel_gap"] is not None


def test_a_rolled_back_chunk_keeps_the_loops_input_types(monkeypatch):
    """A rollback restores the iteration counter as the loop returns it (int32, not weak): a Python int is a weak
    int64 for jit, and every chunk after a rollback compiled the loop again (synthetic 20,000 x 50: 10 compilations
    for 3 capacity buckets)."""
    from sklearn.datasets import load_digits

    import metricopt
    from metricopt.backends.jax import driver

    X, y = load_digits(return_X_y=True)
    p = metricopt.LMNNProblem(X[:150] / 16.0, y[:150], k=3, mu=0.5)
    monkeypatch.setattr(driver, "BLOWUP", -1.0)  # every chunk "failed": rolled back, MAX_REJECTIONS in a row
    seen = []
    real = driver.Run.rolled_back

    def spy(run, *a, **k):
        back = real(run, *a, **k)
        if back:
            seen.append(run.state["iterations"])
        return back

    monkeypatch.setattr(driver.Run, "rolled_back", spy)
    p.solve(backend="jax", max_iter=40)
    assert seen and all(it.dtype == np.int32 and not it.weak_type for it in seen)
