"""Agreement of two solutions of the same convex problem (e.g. the exact and the scalable one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import check_int, check_real
from ..errors import InputError
from ..knn import knn_loo_predict, knn_predict
from ..protocols import CertifiableTerm, NeighbourPredictor
from ..solution import Solution
from .core import certify


@dataclass
class Check:
    """One check of an agreement report: whether it applies, whether it passed, and why."""

    name: str
    applies: bool
    passed: bool
    detail: str


@dataclass
class AgreementReport:
    """The result of :func:`check_agreement`: ``passed`` is true when every applicable check passed."""

    checks: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Whether every applicable check passed."""
        return all(c.passed for c in self.checks if c.applies)

    def __bool__(self) -> bool:
        return self.passed

    def report(self) -> str:
        """A readable multi-line summary.

        Returns
        -------
        str
            The overall verdict, then one line per check (``pass``, ``FAIL`` or ``n/a``).
        """
        lines = [f"agreement: {'PASSED' if self.passed else 'FAILED'}"]
        for c in self.checks:
            state = ("pass" if c.passed else "FAIL") if c.applies else "n/a "
            lines.append(f"  [{state}] {c.name}: {c.detail}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _strong_convexity(problem):
    """Modulus of strong convexity of the objective in ``M``, from the terms' dual pieces (0 when not
    strongly convex; a term without a dual piece contributes nothing, which is safe: the modulus can
    only be larger)."""
    total = 0.0
    for term in problem.terms:
        piece = term.dual_piece(problem) if isinstance(term, CertifiableTerm) else None
        if piece is not None:
            total += float(piece.strong_convexity)
    return total


def check_agreement(problem: Any, sol_a: Any, sol_b: Any, X_test: Any = None, tol: float = 1e-6, k: int = 3,
                    min_knn_agreement: float = 1.0) -> "AgreementReport":
    r"""Check that two solutions of a convex problem agree, and say which checks apply.

    Checks
    ------
    1. both metrics carry certificates with relative gap ``<= tol`` (recomputed here);
    2. their objectives agree: ``|f_a - f_b| <= 2 tol max(|f_a|, |f_b|)`` (two points each
       certified within ``tol`` of the common optimum differ by at most that);
    3. their ``k``-NN leave-one-out predictions on the training data agree (fraction
       ``>= min_knn_agreement``), and on ``X_test`` when given;
    4. only where the objective is :math:`\lambda`-strongly convex in ``M`` (a Frobenius
       term, or POLA's :math:`\tfrac12\|M\|_F^2`): :math:`f(M) - f^* \ge \tfrac{\lambda}{2}
       \|M - M^*\|_F^2` gives :math:`\|M_a - M_b\|_F \le \sqrt{2 g_a/\lambda} + \sqrt{2 g_b/\lambda}`.
       Elsewhere (plain LMNN, MMC) the optimum need not be unique, so metrics far apart with
       equal objectives are both correct, and the report says the check does not apply.

    Parameters
    ----------
    problem : Problem
        A convex problem (certifiable: :func:`~metricopt.certify.certify` is called on both solutions).
    sol_a, sol_b : Solution or (d, d) array
        The two solutions (or metrics) to compare.
    X_test : (m, d) array, optional
        Test points on which the ``k``-NN predictions are compared too.
    tol : float, default 1e-6
        The certificates' relative-gap tolerance.
    k : int, default 3
        The number of neighbours of the ``k``-NN check.
    min_knn_agreement : float in [0, 1], default 1.0
        The smallest fraction of agreeing ``k``-NN predictions.

    Returns
    -------
    AgreementReport
        The checks, whether each applies and passed, and why.

    Raises
    ------
    InputError
        When a solution has no metric, or ``tol``, ``k`` or ``min_knn_agreement`` is invalid.
    NotConvexError, NotCertifiableError
        From :func:`~metricopt.certify.certify`, for a problem it cannot certify.
    """
    tol = check_real(tol, "tol", low=0.0)  # checked before the (costly) certificates
    k = check_int(k, "k", low=1)
    min_knn_agreement = check_real(min_knn_agreement, "min_knn_agreement", low=0.0, high=1.0)
    Ms = []
    for name, s in (("sol_a", sol_a), ("sol_b", sol_b)):
        if isinstance(s, Solution):
            if s.M is None:
                raise InputError(f"{name} has no metric (status '{s.status}'); nothing to compare.")
        Ms.append(s)
    ca, cb = certify(problem, Ms[0], tol=tol), certify(problem, Ms[1], tol=tol)
    Ma, Mb = (np.asarray(s.M if isinstance(s, Solution) else s, dtype=np.float64) for s in Ms)
    rep = AgreementReport()
    rep.checks.append(Check("certificates", True, ca.is_optimal and cb.is_optimal,
                            f"relative gaps {ca.rel_gap:.2e} and {cb.rel_gap:.2e} (tol {tol:.0e})"))
    diff = abs(ca.upper - cb.upper)
    allowed = 2.0 * tol * max(abs(ca.upper), abs(cb.upper), 1e-12)
    rep.checks.append(Check("objectives", True, diff <= allowed,
                            f"{ca.upper:.12g} vs {cb.upper:.12g}: difference {diff:.2e}, allowed {allowed:.2e}"))
    y = problem.y
    own = problem if isinstance(problem, NeighbourPredictor) else None  # multi-metric LMNN: its own distances
    if y is not None:
        pa = own.knn_loo_predict(Ma, k) if own is not None else knn_loo_predict(problem.X, y, k, M=Ma)
        pb = own.knn_loo_predict(Mb, k) if own is not None else knn_loo_predict(problem.X, y, k, M=Mb)
        agree = float(np.mean(pa == pb))
        rep.checks.append(Check(f"{k}-NN leave-one-out predictions", True, agree >= min_knn_agreement,
                                f"{100 * agree:.2f}% of {len(pa)} training points agree"))
        if X_test is not None:
            ta = own.knn_predict(X_test, Ma, k) if own is not None else knn_predict(problem.X, y, X_test, k, M=Ma)
            tb = own.knn_predict(X_test, Mb, k) if own is not None else knn_predict(problem.X, y, X_test, k, M=Mb)
            agree = float(np.mean(ta == tb))
            rep.checks.append(Check(f"{k}-NN test predictions", True, agree >= min_knn_agreement,
                                    f"{100 * agree:.2f}% of {len(ta)} test points agree"))
    else:
        rep.checks.append(Check("kNN predictions", False, True, "the problem has no labels"))
    lam = _strong_convexity(problem)
    if lam > 0:
        dist = float(np.linalg.norm(Ma - Mb))
        bound = np.sqrt(2 * max(ca.gap, 0) / lam) + np.sqrt(2 * max(cb.gap, 0) / lam)
        bound += 1e-9 * max(1.0, float(np.abs(Ma).max()))
        rep.checks.append(Check("metrics", True, dist <= bound,
                                f"||M_a - M_b||_F = {dist:.2e} <= {bound:.2e} (strong convexity {lam:g})"))
    else:
        rep.checks.append(Check("metrics", False, True,
                                "not applicable: the objective is not strongly convex in M, so its optimum need not be "
                                "unique (two correct metrics can differ with equal objectives)"))
    return rep
