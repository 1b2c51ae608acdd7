"""Solving the small restricted dual programs used to build certificates."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np

from .verified import EPS, min_eig_lower


def solve_small(prog):
    """Solve a small restricted dual program: Clarabel first, SCS as a fall-back.

    Returns True when some solver produced values (any inaccuracy is harmless: the
    bound is recomputed exactly from the returned point, which only has to lie in
    the dual box). Under a ``time_limit`` (a deadline in force, :mod:`metricopt._deadline`) each solver gets
    the seconds left (Clarabel's ``time_limit``, SCS's ``time_limit_secs``) and a point it stopped at on
    that limit counts too; too little left (:func:`~metricopt._deadline.conic_seconds`): False at once (the
    caller keeps its cheaper bound).
    """
    from .._deadline import conic_seconds

    for solver, kw in (("CLARABEL", {}), ("SCS", {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200_000})):
        left = conic_seconds(prog)
        if left is not None:
            if left <= 0.0:
                return False
            kw = {**kw, ("time_limit" if solver == "CLARABEL" else "time_limit_secs"): left}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prog.solve(solver=solver, **kw)
        except (cp.error.SolverError, ValueError, ArithmeticError):
            continue
        accepted = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) + ((cp.USER_LIMIT,) if left is not None else ())
        if prog.status in accepted and prog.variables()[0].value is not None:
            return True
    return False


def restricted_dual_program(objective, constraints, B, P, lam):
    r"""The restricted dual program shared by the hinge-type certificates: maximise
    ``objective - ||Pi_+(B - P)||_F^2 / (2 lam)`` (``lam > 0``, through a PSD slack ``W``:
    ``min_W ||B - P + W||^2``) or ``objective`` subject to ``P - B`` PSD (``lam = 0``), ``B`` an affine CVXPY
    expression of the multipliers. Returns whether a solver produced a point (:func:`solve_small`)."""
    if lam > 0:
        W = cp.Variable(P.shape, PSD=True)
        prog = cp.Problem(cp.Maximize(objective - cp.sum_squares(B - P + W) / (2 * lam)), constraints)
    else:
        S = P - B
        prog = cp.Problem(cp.Maximize(objective), constraints + [0.5 * (S + S.T) >> 0])
    return solve_small(prog)


def largest_psd_step(A, D, hi):
    """The largest ``s`` in ``[0, hi]`` with ``A + s D`` certifiably PSD (``A`` PSD), by bisection (60 halvings)
    on eigenvalue lower bounds that rounding can only lower (:func:`.verified.min_eig_lower`): the returned
    ``s`` always passes the test, and ``0`` is returned when no positive ``s`` does."""

    def psd(s):
        H = A + s * D
        return min_eig_lower(H, 2 * EPS * (np.abs(A) + np.abs(s * D))) >= 0

    if psd(hi):
        return hi
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if psd(mid):
            lo = mid
        else:
            hi = mid
    return lo
