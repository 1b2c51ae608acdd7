r"""NCA's NumPy path: limited-memory BFGS in NumPy on :meth:`~metricopt.NCAProblem.value_and_gradient`.

The same iteration as the JAX backend's :class:`~metricopt.backends.jax.LBFGS` (Nocedal & Wright,
*Numerical Optimization*, 2nd ed., Alg. 7.4 and 7.5: the two-loop recursion over ``memory`` pairs
``(s_k, y_k)``, a pair kept only when :math:`\langle s_k, y_k\rangle > 10^{-12} \lVert s_k\rVert
\lVert y_k\rVert`; Armijo backtracking :math:`F(A + t d) \le F(A) + 10^{-4}\, t \langle \nabla F, d\rangle`
from the unit step, halved at most 40 times; the step capped at ``max_step`` times :math:`\lVert A\rVert`),
without JAX: nothing is traced or compiled, so that a small problem (iris, wine) fits in milliseconds in
a fresh process, where the JAX loop first spends about a second compiling; and on a CPU it is also the faster
one warm, at every size measured (:data:`metricopt.methods.nca.estimator.ACCELERATOR_WORK`), so that
:class:`metricopt.NCA` (``backend="auto"``) runs it unless an accelerator is at hand for a large problem. The
blocked value and gradient run with one BLAS thread (:data:`ONE_THREAD_ABOVE`: their products are skinny, and
a multi-threaded OpenBLAS made an evaluation 2-8 times slower on 2 loaded cores).

The stopping rule and the result are the JAX path's (:meth:`metricopt.backends.jax.driver.Run.factor_result`):
the relative gradient norm

.. math::

    \rho(A) = \frac{\lVert \nabla F(A)\rVert\, \lVert A\rVert}{|F(A)|}

is tested every ``check_every`` iterations (10, the JAX loop's re-checks: both paths stop at the same iteration
of the same run) and when the solve ends; the status is ``stationary`` when :math:`\rho \le` ``tol``, else
``iteration_limit`` (``max_iter`` iterations, or no decrease left to the line search from the quasi-Newton
direction nor from the gradient: "stalled") or ``time_limit``: the solver reports what it saw
(:class:`~metricopt.certify.policy.SolverReport`) and :func:`metricopt.certify.policy.decide` gives the status
(never ``optimal``: the problem is not convex).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

import numpy as np

from ..._deadline import Budget
from ..._validation import check_int, check_real
from ...certify import policy
from ...certify.policy import NoCertificate, Outcome, SolverReport
from ...errors import InputError
from ...linalg import small_blas
from .problem import NCAProblem
from ...solution import Solution

__all__ = ["NAME", "solve", "solve_from_starts"]

#: the backend name the solutions carry (``solution.backend``)
NAME = "numpy"
#: a relative gradient norm at most this stops at once (the JAX ``LBFGS``'s own ``gtol``), not only at a test
GTOL = 1e-11
#: from this ``n^2 r`` on, the solve runs on one BLAS thread (:func:`metricopt.linalg.small_blas`). Measured on 2
#: loaded cores, ms per evaluation on 1 / 2 threads: 2000 points, d=16, r=2: 13 / 32; d=64, r=64: 44 / 144; 4000
#: points, r=2: 61 / 514; 1000 points, d=30, r=30: 7.4 / 15; at r=2: 4.5 / 4.4, and 150 points: 0.27 / 0.26 (where
#: OpenBLAS keeps such small products on one thread anyway). Below it the limit is not set: the first one in a
#: process costs some 15 ms (threadpoolctl's look at the loaded libraries), half a cold fit of wine
ONE_THREAD_ABOVE = 1e6
#: Armijo's sufficient-decrease constant, step halving and trials (as the JAX loop's ``_armijo``)
ARMIJO_C1, ARMIJO_SHRINK, ARMIJO_TRIALS = 1e-4, 0.5, 40


def _first_step(A: np.ndarray, g: np.ndarray) -> float:
    """A step length along ``-g`` that moves ``A`` by a tenth of its norm (at least 1e-3)."""
    return 0.1 * max(float(np.linalg.norm(A)), 1e-3) / max(float(np.linalg.norm(g)), 1e-300)


def _direction(g: np.ndarray, S: list[np.ndarray], Y: list[np.ndarray], A: np.ndarray) -> np.ndarray:
    """``-H g`` by the two-loop recursion over the stored pairs (oldest first in ``S``, ``Y``); without pairs
    the first step along ``-g``."""
    if not S:
        return -_first_step(A, g) * g
    q = g.copy()
    alpha = []
    for s, y in zip(reversed(S), reversed(Y)):
        a = float(np.vdot(s, q)) / float(np.vdot(s, y))
        alpha.append(a)
        q -= a * y
    s, y = S[-1], Y[-1]
    q *= float(np.vdot(s, y)) / max(float(np.vdot(y, y)), 1e-300)
    for (s, y), a in zip(zip(S, Y), reversed(alpha)):
        b = float(np.vdot(y, q)) / float(np.vdot(s, y))
        q += (a - b) * s
    return -q


def solve(problem: NCAProblem, init: Any = None, *, tol: float = 1e-6, max_iter: int = 2000, max_step: float = 1.0,
          memory: int = 10, check_every: int = 10, time_limit: float | None = None,
          callback: Callable[[dict[str, Any]], Any] | None = None) -> Solution:
    r"""Minimise NCA's objective (``-f`` or ``-g``) over the map ``A`` from ``init`` by L-BFGS in NumPy.

    Parameters
    ----------
    problem : NCAProblem
    init : (r, d) array_like, or (d,) / (1, d) for a diagonal problem, optional
        The start; default the top principal directions (a diagonal problem: all ones), as the JAX backend.
    tol : float, default 1e-6
        Relative gradient norm :math:`\lVert\nabla F\rVert \lVert A\rVert / |F|` to stop at (status ``stationary``).
    max_iter : int, default 2000
        Iterations (accepted steps); reaching it ends with status ``iteration_limit``.
    max_step : float, default 1.0
        A step moves ``A`` by at most ``max_step * max(||A||, 1e-3)`` (:class:`metricopt.NCA` uses its
        ``LBFGS_MAX_STEP``).
    memory : int, default 10
        Pairs ``(s_k, y_k)`` kept.
    check_every : int, default 10
        Iterations between the tests of ``tol`` (and at ``max_iter``), as the JAX loop's re-checks, so that
        both paths stop at the same iteration of the same run; a gradient of relative norm at most
        ``GTOL`` (the JAX solver's own test) stops at once.
    time_limit : float, optional
        Seconds; past them the solve ends with status ``time_limit`` (after the iteration under way).
    callback : callable, optional
        ``callback(info)`` at the start (iteration 0) and after every iteration, as the JAX loop's: ``info`` a
        dict: ``iteration``, ``objective``, ``stationarity``, ``time`` (seconds since the solve began),
        ``evaluations`` and ``L`` (the iterate, a copy; a diagonal problem: the ``(1, d)`` diagonal). Its return
        value is ignored.

    Returns
    -------
    Solution
        ``backend="numpy"``, ``solver="lbfgs"``, ``L`` the map (diagonal: ``diag(a)``), ``M = L^T L``;
        ``stats``: ``time``, ``iterations``, ``best_iteration``, ``evaluations``, ``stationarity``, ``history``
        (per iteration: ``iteration``, ``time``, ``objective``, ``stationarity``), ``solver_objective``, ``rank``.
    """
    if not isinstance(problem, NCAProblem):
        raise InputError(f"the NumPy NCA solver takes an NCAProblem; got {type(problem).__name__}.")
    tol = check_real(tol, "tol", low=0.0)
    max_iter = check_int(max_iter, "max_iter", low=1)
    memory = check_int(memory, "memory", low=1)
    check_every = check_int(check_every, "check_every", low=1)
    max_step = check_real(max_step, "max_step", low=0.0, low_open=True)
    budget = Budget.start(time_limit)
    A = _start(problem, init)
    # the blocks' products are skinny (inner or outer dimension r + 2): one BLAS thread (linalg.small_blas)
    small = problem.n ** 2 * problem.n_components < ONE_THREAD_ABOVE
    with contextlib.nullcontext() if small else small_blas(problem.n_components):
        return _solve(problem, A, budget, tol, max_iter, max_step, memory, check_every, time_limit, callback)


def _solve(problem: NCAProblem, A: np.ndarray, budget: Budget, tol: float, max_iter: int, max_step: float,
           memory: int, check_every: int, time_limit: float | None,
           callback: Callable[[dict[str, Any]], Any] | None) -> Solution:
    """:func:`solve` from the checked start ``A``."""
    t0 = budget.t0
    F, g = problem.value_and_gradient(A)
    evals = 1
    if not (np.isfinite(F) and np.all(np.isfinite(g))):
        raise InputError("NCA's objective or gradient is not finite at the start; scale init down.")

    def stationarity(F: float, g: np.ndarray, A: np.ndarray) -> float:
        return float(np.linalg.norm(g)) * float(np.linalg.norm(A)) / max(abs(F), 1e-300)

    rel = stationarity(F, g, A)
    history = [{"iteration": 0, "time": time.perf_counter() - t0, "objective": F, "stationarity": rel}]
    if callback is not None:
        callback({**history[0], "evaluations": evals, "L": A.copy()})
    S: list[np.ndarray] = []
    Y: list[np.ndarray] = []
    it = 0
    while True:
        done = it >= max_iter or budget.expired()
        if rel <= tol and (done or it % check_every == 0 or rel <= GTOL):
            report = SolverReport(Outcome.STATIONARY, f"relative gradient norm {rel:.2e} <= tol {tol:.1e} after {it} "
                                                      "iterations")
            break
        if it >= max_iter:
            report = SolverReport(Outcome.ITERATION_LIMIT, f"stopped after {it} iterations")
            break
        if budget.expired():
            limit = "the enclosing solve's deadline" if time_limit is None else f"time limit {time_limit:g}s"
            report = SolverReport(Outcome.TIME_LIMIT, f"{limit} reached after {it} iterations")
            break
        d = _direction(g, S, Y, A)
        slope = float(np.vdot(g, d))
        if not slope < 0:  # not a descent direction: the memory starts afresh
            S, Y = [], []
            d = -_first_step(A, g) * g
            slope = float(np.vdot(g, d))
        # the unit quasi-Newton step, capped so that one step moves A by at most max_step * ||A||
        t = min(1.0, max_step * max(float(np.linalg.norm(A)), 1e-3) / max(float(np.linalg.norm(d)), 1e-300))
        ok = False
        for _ in range(ARMIJO_TRIALS):
            An = A + t * d
            Fn, gn = problem.value_and_gradient(An)
            evals += 1
            if np.isfinite(Fn) and Fn <= F + ARMIJO_C1 * t * slope:
                ok = True
                break
            t *= ARMIJO_SHRINK
        if not ok:
            if S:  # the quasi-Newton model failed: once more from the gradient alone
                S, Y = [], []
                continue
            if rel <= tol:
                report = SolverReport(Outcome.STATIONARY, f"relative gradient norm {rel:.2e} <= tol {tol:.1e} after "
                                                          f"{it} iterations (no decrease left to the line search)")
                break
            report = SolverReport(Outcome.ITERATION_LIMIT, (
                f"the iterates stalled at iteration {it} (relative gradient norm {rel:.2e} > tol {tol:.1e}; no "
                "decrease left to the line search): not shown stationary"))
            break
        s, y = (An - A).ravel(), (gn - g).ravel()
        if float(np.vdot(s, y)) > 1e-12 * float(np.linalg.norm(s)) * float(np.linalg.norm(y)):
            S.append(s.reshape(A.shape))
            Y.append(y.reshape(A.shape))
            if len(S) > memory:
                del S[0], Y[0]
        A, F, g = An, Fn, gn
        it += 1
        rel = stationarity(F, g, A)
        entry = {"iteration": it, "time": time.perf_counter() - t0, "objective": F, "stationarity": rel}
        history.append(entry)
        if callback is not None:
            callback({**entry, "evaluations": evals, "L": A.copy()})
    # the status is the policy's (as the JAX loop's factor_result): never 'optimal', no certificate
    status, note = policy.decide(report, NoCertificate.NOT_TAKEN, convex=problem.is_convex)
    message = report.reason + (f"; {note}" if note else "")
    L = np.diag(A.ravel()) if problem.diagonal else A
    M = L.T @ L
    stats = {"time": time.perf_counter() - t0, "iterations": it, "best_iteration": it, "evaluations": evals,
             "history": history, "stationarity": rel, "solver_objective": F,
             "rank": problem.d if problem.diagonal else problem.n_components}
    # F is the problem's own float64 value over all pairs at L (NCAProblem.value_and_gradient), not a model's
    return Solution(M=0.5 * (M + M.T), L=L, objective=float(F), status=status, backend=NAME, solver="lbfgs",
                    stats=stats, message=f"{status.message} ({message})")


def _start(problem: NCAProblem, init: Any) -> np.ndarray:
    """The start as the solver's ``A``: ``(r, d)``, or ``(1, d)`` for a diagonal problem."""
    r, d = problem.n_components, problem.d
    if init is None:
        if problem.diagonal:
            return np.ones((1, d))
        Xc = problem.X - problem.X.mean(axis=0)
        w, U = np.linalg.eigh(Xc.T @ Xc)
        return U[:, np.argsort(w)[::-1][:r]].T.copy()
    A = np.array(init, dtype=np.float64)
    if not np.all(np.isfinite(A)):
        raise InputError("init contains NaN or infinite entries.")
    if problem.diagonal:
        if A.shape == (d, d):
            A = np.diag(A)
        if A.size != d:
            raise InputError(f"init of a diagonal NCA problem must have {d} entries (or be {d} x {d}); got shape "
                             f"{A.shape}.")
        return A.reshape(1, d)
    if A.shape != (r, d):
        raise InputError(f"init must be an array of shape {(r, d)}; got {A.shape}.")
    return A


def solve_from_starts(problem: NCAProblem, starts: list, **options: Any) -> tuple[Solution, list]:
    """:func:`metricopt.solving.solve_from_starts` on this solver: every start (``(name, init)``) solved, the
    lowest objective kept (the first among equals); ``time_limit`` shared out the same way.

    Parameters
    ----------
    problem : NCAProblem
    starts : list of (str, array_like)
        ``(name, init)`` per start, tried in order; each ``init`` as :func:`solve` takes it.
    **options
        :func:`solve`'s keyword options (``tol``, ``max_iter``, ``max_step``, ``memory``, ``check_every``,
        ``callback``); ``time_limit`` (seconds) bounds all the starts together: each gets an equal share of the
        seconds left, and starts left when they are spent are not tried.

    Returns
    -------
    best : Solution
        The run of lowest objective (the first among equals).
    runs : list of dict
        Per start the same record as :func:`metricopt.solving.solve_from_starts`'s: ``start``, ``objective``,
        ``iterations``, ``evaluations``, ``stationarity``, ``status``, ``message`` and the ``solution``.

    Raises
    ------
    metricopt.errors.InputError
        For a problem that is not an :class:`~metricopt.NCAProblem`, invalid options or starts.
    """
    from ...solving import _record

    runs: list[dict[str, Any]] = []
    best: Solution | None = None
    budget = Budget.start(options.pop("time_limit", None))
    with budget.running():
        for i, (name, init) in enumerate(starts):
            if runs and budget.expired():
                break
            timed: dict[str, Any] = {"time_limit": max(budget.left() or 0.0, 1e-3) / (len(starts) - i)} \
                if budget.limited else {}
            sol = solve(problem, init=init, **options, **timed)
            _record(runs, name, sol)
            if best is None or sol.objective < best.objective:
                best = sol
    assert best is not None
    return best, runs
