"""Solving the small restricted dual programs used to build certificates."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np


def solve_small(prog):
    """Solve a small restricted dual program: Clarabel first, SCS as a fall-back.

    Returns True when some solver produced values (any inaccuracy is harmless: the
    bound is recomputed exactly from the returned point, which only has to lie in
    the dual box).
    """
    for solver, kw in (("CLARABEL", {}), ("SCS", {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200_000})):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prog.solve(solver=solver, **kw)
        except (cp.error.SolverError, ValueError, ArithmeticError):
            continue
        if prog.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) and prog.variables()[0].value is not None:
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
    """The largest ``s`` in ``[0, hi]`` with ``A + s D`` PSD (``A`` PSD), by bisection on exact eigenvalues
    (60 halvings; the returned ``s`` always passes the test)."""
    if np.linalg.eigvalsh(A + hi * D)[0] >= 0:
        return hi
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if np.linalg.eigvalsh(A + mid * D)[0] >= 0:
            lo = mid
        else:
            hi = mid
    return lo
