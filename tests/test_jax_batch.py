"""The JAX backend's public batch solve (:func:`metricopt.backends.jax.solve_batch`): a problem solved in a
batch is solved as it would be alone, and the batched local LMNN solver agrees with one-at-a-time solves."""

from __future__ import annotations

import numpy as np
import pytest

import metricopt as mo
from metricopt.backends.jax import BatchSolution, solve_batch
from metricopt.methods.local import LocalSet, solve_lmnn_batch


def _sets(count, S=12, d=5, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        y = np.repeat([0, 1, 2], S // 3)
        X = rng.normal(size=(S, d)) + 1.5 * y[:, None] * rng.normal(size=d)[None, :]
        out.append(LocalSet(X, y))
    return out


def test_solve_batch_agrees_with_one_at_a_time_solves():
    problems = [mo.LMNNProblem(s.X, s.y, k=2, search="brute") for s in _sets(3)]
    # s_stop=0: every solve runs max_iter iterations, in the batch as alone
    together = solve_batch(problems, max_iter=200, chunk=40, s_stop=0.0)
    assert isinstance(together, BatchSolution)
    assert together.iterations == 200 and together.stats["batch"] == 3
    for p, point in zip(problems, together.points):
        alone = solve_batch([p], max_iter=200, chunk=40, s_stop=0.0)
        # vmapped and single reductions round differently, and 200 FISTA steps down to a small smoothing width
        # amplify last-bit differences (measured: 3e-7 relative with SMOOTHING_DECREASE 0.25, 3e-10 with 0.5)
        assert p.objective(point["M"]) == pytest.approx(p.objective(alone.points[0]["M"]), rel=1e-6)


def test_batched_local_lmnn_agrees_with_one_at_a_time_solves():
    sets = _sets(3, seed=1)
    opts = dict(k=2, max_iter=240, chunk=40, s_stop=0.0, certify=True, tol=1e-2)
    together = solve_lmnn_batch(sets, **opts)
    for b, s in enumerate(sets):
        alone = solve_lmnn_batch([s], **opts)
        assert together.objectives[b] == pytest.approx(alone.objectives[0], rel=1e-8)
        assert together.statuses[b] == alone.statuses[0]


def test_solve_batch_refuses_an_empty_batch_and_mixed_shapes():
    with pytest.raises(mo.InputError, match="at least one problem"):
        solve_batch([])
    a, b = _sets(2)
    problems = [mo.LMNNProblem(a.X, a.y, k=2, search="brute"), mo.LMNNProblem(b.X[:, :4], b.y, k=2, search="brute")]
    with pytest.raises(mo.InputError, match="one kind and shape|one shape"):
        solve_batch(problems)
