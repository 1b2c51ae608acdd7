"""Solving the small restricted dual programs used to build certificates."""

from __future__ import annotations

import warnings

import cvxpy as cp


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
