"""The status policy's threshold and the dual box of the weighted bound, pinned.

Two rules a certificate rests on, each tested where a planted bug would show: the one status policy calls a
point optimal exactly when its certificate's relative gap is within ``tol`` (not 10 ``tol``), and the scaling
``s`` of a dual point keeps every multiplier in its box ``0 <= s alpha_t <= mu w_t`` (the minimum ratio, not
the maximum). ``tests/conftest.py`` also checks the first rule on every solve of the suite.
"""

from __future__ import annotations

import numpy as np
import pytest

import metricopt as mo
from metricopt.certify import triplets as lm
from metricopt.certify import Certificate, decide_status
from metricopt.certify.triplets import largest_dual_scaling
from metricopt.solution import Status


@pytest.mark.parametrize("tol", [1e-3, 1e-6])
@pytest.mark.parametrize("factor, optimal", [(0.0, True), (0.5, True), (0.999, True), (1.001, False), (2.0, False),
                                             (10.0, False)])
@pytest.mark.parametrize("solver_status", [Status.OPTIMAL, Status.OPTIMAL_INACCURATE, Status.ITERATION_LIMIT])
def test_optimal_exactly_when_the_relative_gap_is_within_tol(tol, factor, optimal, solver_status):
    upper = 7.25
    cert = Certificate.from_bounds(upper, upper - factor * tol * upper, tol, "LMNN", {})
    assert cert.rel_gap == pytest.approx(factor * tol, rel=1e-9, abs=1e-18)
    status, _ = decide_status(solver_status, cert)
    if optimal:
        assert status is Status.OPTIMAL
    else:
        assert status is not Status.OPTIMAL
        assert status is (Status.OPTIMAL_INACCURATE if solver_status is Status.OPTIMAL else solver_status)


def test_non_convex_and_uncertified_points_are_never_optimal():
    cert = Certificate.from_bounds(1.0, 1.0, 1e-6, "LMNN", {})
    assert decide_status(Status.OPTIMAL, cert, convex=False)[0] is Status.STATIONARY
    assert decide_status(Status.OPTIMAL_INACCURATE, None)[0] is Status.OPTIMAL_INACCURATE


def test_largest_dual_scaling_is_the_smallest_ratio():
    alpha = np.array([0.5, 0.1, 0.0, 2.0])
    caps = np.array([1.0, 1.0, 1e-9, 3.0])
    s = largest_dual_scaling(alpha, caps)
    assert s == pytest.approx(1.5, rel=1e-12)  # 3.0 / 2.0 binds; 1.0 / 0.1 = 10 would break the last box
    assert np.all(s * alpha <= caps)
    assert largest_dual_scaling(np.array([0.25, 0.5]), 0.5) == pytest.approx(1.0, rel=1e-12)
    assert largest_dual_scaling(np.zeros(3), 1.0) == np.inf


def test_weighted_bound_keeps_every_multiplier_in_its_box(monkeypatch):
    """Weighted LMNN, weights over three decades: every dual point the certificate scales stays in
    ``[0, mu w_t]`` after scaling, and every bound stays below an independent optimum."""
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    idx = np.concatenate([np.flatnonzero(y == c)[:10] for c in range(3)])
    X, y = X[idx], y[idx]
    X = (X - X.mean(0)) / X.std(0)
    w = 10.0 ** np.random.default_rng(0).uniform(-3, 0, size=len(y))
    p = mo.LMNNProblem(X, y, k=2, mu=0.5, sample_weight=w)
    ref = p.solve(solver="CLARABEL", working_set=False, certify=None, solver_tol=1e-10)
    seen = []
    real = lm.largest_dual_scaling

    def spy(alpha, caps):
        s = real(alpha, caps)
        seen.append((np.asarray(alpha).copy(), np.broadcast_to(caps, np.shape(alpha)).copy(), s))
        return s

    monkeypatch.setattr(lm, "largest_dual_scaling", spy)
    for M in (np.eye(4), 0.3 * np.eye(4), 0.5 * ref.M, 1.02 * ref.M, ref.M):
        assert mo.certify(p, M).lower <= ref.objective + 1e-7
    assert seen and any(len(np.unique(c)) > 1 for _, c, _ in seen)  # the weighted caps were exercised
    for alpha, caps, s in seen:
        assert np.all(alpha <= caps * (1 + 1e-12)) and np.all(s * alpha <= caps)
        pos = alpha > 0
        assert np.any(s * alpha[pos] >= caps[pos] * (1 - 1e-12))  # and s is the largest such: one box binds


def test_a_dual_piece_field_no_certifier_reads_is_refused():
    """A term whose dual piece sets a field the accepting certifier does not read (here a new field of a
    DualPiece subclass) is refused with a message, not certified as if the field were not there; left at its
    default, the field changes nothing."""
    from dataclasses import dataclass

    from metricopt.errors import NotCertifiableError
    from metricopt.protocols import DualPiece
    from metricopt.terms import Trace

    @dataclass(frozen=True)
    class WithNuclear(DualPiece):
        nuclear: float = 0.0

    class NuclearTrace(Trace):
        def __init__(self, lam, nuclear):
            super().__init__(lam)
            self.nuclear = nuclear

        def dual_piece(self, problem):
            base = super().dual_piece(problem)
            return WithNuclear(linear=base.linear, nuclear=self.nuclear)

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(12, 2)), np.repeat([0, 1, 2], 4)
    plain = mo.certify(mo.LMNNProblem(X, y, k=1, regularizer=Trace(0.1)), np.eye(2))
    same = mo.certify(mo.LMNNProblem(X, y, k=1, regularizer=NuclearTrace(0.1, 0.0)), np.eye(2))
    assert same.lower == plain.lower and same.upper == plain.upper
    with pytest.raises(NotCertifiableError) as exc:
        mo.certify(mo.LMNNProblem(X, y, k=1, regularizer=NuclearTrace(0.1, 2.0)), np.eye(2))
    msg = str(exc.value)
    assert msg.startswith("no certifier reads every part of this problem: 'triplet hinge (LMNN family)' accepts LMNN but "
                          "does not read the field(s) ['nuclear'] of its terms' dual pieces")
    assert "'generic conic bound (any convex term's CVXPY expression)' accepts LMNN but does not read the field(s) " \
           "['nuclear']" in msg
