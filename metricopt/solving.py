"""The top-level entry points: :func:`solve` (any problem, any backend) and its problem aliases.

Layering (each layer imports only the ones below it)::

    errors, protocols, _validation, linalg, constraints, balltree, knn     (foundations)
    problems                      what is minimised (declarations, terms)
    solution                      Solution and Status
    certify                       certificates, the status policy, agreement
    backends                      cvxpy (exact) and jax (first-order) solvers
    solving                       metricopt.solve (this module)
    lowrank, multipass, early_stopping, energy, estimators, io, cli, datasets

The problem layer offers ``problem.solve``, ``problem.certify`` and ``problem.to_cvxpy`` as aliases
without importing anything above it: this module registers them
(:func:`metricopt.problems.base.register_action`) when :mod:`metricopt` is imported.
"""

from __future__ import annotations

from typing import Any

from .backends import backend_module
from .certify import certify
from .errors import InputError
from .problems.base import register_action
from .solution import Solution

__all__ = ["solve", "solve_from_starts"]


def solve(problem: Any, backend: str = "cvxpy", **options: Any) -> Solution:
    """Solve ``problem`` with ``backend`` and return a :class:`~metricopt.Solution`.

    Parameters
    ----------
    problem : Problem
        Any declarative problem (:mod:`metricopt.problems`).
    backend : {"cvxpy", "jax"}, default "cvxpy"
        ``"cvxpy"``: the exact conic program solved by SCS or Clarabel (options: see
        :class:`metricopt.backends.cvxpy_backend.Options`). ``"jax"``: jitted first-order
        solvers in float64, stopped at a certified relative gap (convex problems) or at a
        stationary point (a factor geometry, e.g. ``problem.factored(r)``) (options:
        :class:`metricopt.backends.jax.Options`).
    **options
        The backend's options; an unknown name raises
        :class:`~metricopt.errors.UnknownOptionError` listing the accepted ones.

    Raises
    ------
    InputError
        When the backend does not accept the problem (its message says why and which backend does).
    """
    module = backend_module(backend)
    ok, reason = module.accepts(problem)
    if not ok:
        raise InputError(reason)
    return module.solve(problem, **options)


def solve_from_starts(problem: Any, starts: list, backend: str = "jax", **options: Any) -> tuple[Solution, list]:
    """Solve a non-convex problem from several starts (``init=`` each) and keep the lowest objective.

    Parameters
    ----------
    problem : Problem
        Typically over a factor geometry (``problem.factored(r)``, NCA).
    starts : list of (name, init)
        The starting points, tried in order (e.g. ``("pca", L0)``, ``("random", L1)``).
    backend, **options
        As for :func:`solve`.

    Returns
    -------
    best : Solution
        The run of lowest objective (the first among equals).
    runs : list of dict
        Per start: ``start``, ``objective``, ``iterations``, ``evaluations``, ``stationarity``,
        ``status``, ``message`` and the ``solution``.
    """
    runs, best = [], None
    for name, init in starts:
        sol = solve(problem, backend=backend, init=init, **options)
        rel = sol.stats.get("stationarity")
        runs.append({"start": name, "objective": sol.objective, "iterations": int(sol.stats.get("iterations", 0)),
                     "evaluations": int(sol.stats.get("evaluations", 0)),
                     "stationarity": float("inf") if rel is None else float(rel), "status": sol.status.code,
                     "message": sol.message, "solution": sol})
        if best is None or sol.objective < best.objective:
            best = sol
    return best, runs


def _to_cvxpy(problem, working_set=None):
    from .backends.cvxpy_backend import build_program

    return build_program(problem, working_set)


register_action("solve", solve)
register_action("certify", certify)
register_action("to_cvxpy", _to_cvxpy)
