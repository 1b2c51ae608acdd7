"""Duality-gap certificates for any candidate metric of a convex problem.

``certify(problem, M)`` evaluates the objective at ``M`` (after checking that ``M``
is feasible: PSD within a tolerance, the problem's constraints) and builds a
dual-feasible point from ``M`` whose dual objective is a lower bound on the
optimum. Nothing about the solver that produced ``M`` is trusted.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_real
from ..errors import InputError, NotConvexError
from ..linalg import min_eig, project_psd, symmetrize
from ..problems import LMNNProblem, MMCProblem, POLAProblem
from ..solution import Solution
from .certificate import INFEASIBLE, OPTIMAL, SUBOPTIMAL, Certificate
from .lmnn import lmnn_lower_bound
from .pairs import mmc_certify, pola_certify

__all__ = ["certify", "Certificate", "check_agreement", "AgreementReport"]


def certify(problem, M, tol=1e-6, psd_tol=1e-7, feas_tol=1e-6, **variables):
    """Certify a candidate ``M`` (or a :class:`~metricopt.Solution`) of a convex problem.

    Parameters
    ----------
    problem : LMNNProblem, MMCProblem or POLAProblem
    M : (d, d) array or Solution
        The candidate metric. A Solution also supplies its extra variables (POLA's ``b``).
    tol : float
        Relative gap under which the verdict is ``"optimal within tol"``.
    psd_tol : float
        ``M`` whose smallest eigenvalue is below ``-psd_tol * max(1, max|M_ij|)`` is
        declared infeasible; milder negative eigenvalues are clipped (the upper bound
        is then the objective at the projected, feasible ``M``).
    feas_tol : float
        Relative tolerance on the problem's own constraints (MMC's budget, POLA's
        margins); candidates within it are rescaled onto the feasible set.
    **variables
        Extra variables (POLA: ``b``; chosen optimally for ``M`` when omitted).

    Returns
    -------
    Certificate
    """
    if not problem.is_convex:
        raise NotConvexError(
            f"{problem.method} with terms {problem.terms} is not convex: a duality gap cannot certify global "
            "optimality; report such solutions as stationary."
        )
    tol = check_real(tol, "tol", low=0.0)
    if isinstance(M, Solution):
        if M.M is None:
            raise InputError(f"the solution has no metric to certify (status '{M.status}': {M.message}).")
        variables = {**M.variables, **variables}
        M = M.M
    M = np.asarray(M, dtype=np.float64)
    if M.shape != (problem.d, problem.d) or not np.all(np.isfinite(M)):
        raise InputError(f"M must be a finite ({problem.d}, {problem.d}) array; got shape {M.shape}.")
    M = symmetrize(M)
    details = {}
    lo = min_eig(M)
    scale = max(1.0, float(np.abs(M).max()))
    if lo < -psd_tol * scale:
        return Certificate(float("inf"), -float("inf"), INFEASIBLE, tol, problem.method,
                           {"reason": f"M is not PSD: smallest eigenvalue {lo:.3g}"})
    if problem.diagonal:
        off = float(np.abs(M - np.diag(np.diag(M))).max())
        if off > psd_tol * scale:
            return Certificate(float("inf"), -float("inf"), INFEASIBLE, tol, problem.method,
                               {"reason": f"M must be diagonal for this problem; largest off-diagonal entry {off:.3g}"})
        M = np.diag(np.clip(np.diag(M), 0.0, None))
    elif lo < 0:
        Mp = project_psd(M)
        details["psd projection change"] = float(np.linalg.norm(Mp - M))
        M = Mp

    if isinstance(problem, LMNNProblem):
        V = problem.point(M)
        upper = problem._objective(V)
        lower, info = lmnn_lower_bound(problem, V, upper)
    elif isinstance(problem, MMCProblem):
        res = mmc_certify(problem, M, feas_tol)
        if res is None:
            return Certificate(float("inf"), -float("inf"), INFEASIBLE, tol, problem.method,
                               {"reason": "sum of similar-pair distances exceeds 1 beyond feas_tol"})
        upper, lower, info = res
    elif isinstance(problem, POLAProblem):
        res = pola_certify(problem, M, variables.get("b"), feas_tol, tol=tol)
        if res is None:
            return Certificate(float("inf"), -float("inf"), INFEASIBLE, tol, problem.method,
                               {"reason": "pair margins y_t (b - d_t) >= 1 violated beyond feas_tol (or b < 1)"})
        upper, lower, info = res
    else:
        raise InputError(f"no certificate is implemented for {type(problem).__name__}.")
    details.update(info)
    cert = Certificate(float(upper), float(lower), SUBOPTIMAL, tol, problem.method, details)
    if cert.rel_gap <= tol:
        cert.verdict = OPTIMAL
    return cert


from .agreement import AgreementReport, check_agreement  # noqa: E402  (uses certify)
