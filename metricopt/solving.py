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
(:func:`metricopt.problems.base.register_action`) when it is imported (on first use of one of them: :mod:`metricopt` is imported lazily).
"""

from __future__ import annotations

from typing import Any

from ._deadline import Budget
from ._validation import check_problem
from .backends import backend_module
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

    Returns
    -------
    Solution
        The metric (``M``, and ``L`` where the backend has a factor), its objective, status, certificate
        (convex problems) and solver statistics.

    Raises
    ------
    InputError
        When ``problem`` is not a metricopt problem, or the backend does not accept it (its message says
        why and which backend does).
    """
    check_problem(problem, "solve")
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
        As for :func:`solve`; ``time_limit`` bounds all the starts together: each start gets an equal share
        of the seconds left, the call returns within ``max(1.1 time_limit, time_limit + 5 s)``
        (:mod:`metricopt._deadline`), and starts left when they are spent are not tried.

    Returns
    -------
    best : Solution
        The run of lowest objective (the first among equals).
    runs : list of dict
        Per start: ``start``, ``objective``, ``iterations``, ``evaluations``, ``stationarity``,
        ``status``, ``message`` and the ``solution``.
    """
    runs, best = [], None
    budget = Budget.start(options.pop("time_limit", None))
    with budget.running():
        for i, (name, init) in enumerate(starts):
            if runs and budget.expired():
                break
            timed = {"time_limit": max(budget.left() / (len(starts) - i), 1e-3)} if budget.limited else {}
            sol = solve(problem, backend=backend, init=init, **options, **timed)
            _record(runs, name, sol)
            if best is None or sol.objective < best.objective:
                best = sol
    return best, runs


def _record(runs, name, sol):
    """Append the summary of the start ``name``'s solution ``sol`` to ``runs``."""
    rel = sol.stats.get("stationarity")
    runs.append({"start": name, "objective": sol.objective, "iterations": int(sol.stats.get("iterations", 0)),
                 "evaluations": int(sol.stats.get("evaluations", 0)),
                 "stationarity": float("inf") if rel is None else float(rel), "status": sol.status.code,
                 "message": sol.message, "solution": sol})


def _to_cvxpy(problem, working_set=None):
    from .backends.cvxpy_backend import build_program

    return build_program(problem, working_set)


def _certify(problem, *args, **kwargs):
    """:func:`metricopt.certify`, imported on first use (the certifiers load CVXPY)."""
    from .certify.core import certify

    return certify(problem, *args, **kwargs)


register_action("solve", solve)
register_action("certify", _certify)
register_action("to_cvxpy", _to_cvxpy)
