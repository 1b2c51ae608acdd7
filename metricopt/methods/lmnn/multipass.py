r"""Multi-pass LMNN (Weinberger & Saul, JMLR 10:207-244, 2009, Section 5.1).

LMNN's target neighbours are fixed before learning, from the Euclidean metric. Section
5.1 of the paper re-picks them under the metric just learned and trains again, for a few
passes. Here pass ``p`` solves the convex LMNN program (Eq. 14)

.. math::

    \min_{B_p \succeq 0}\ (1-\mu)\sum_{i,\,j \rightsquigarrow_p i} \|z^{(p)}_i - z^{(p)}_j\|^2_{B_p}
    + \mu \sum_{i,\,j \rightsquigarrow_p i}\sum_{l:\,y_l \ne y_i}
      \big[1 + \|z^{(p)}_i - z^{(p)}_j\|^2_{B_p} - \|z^{(p)}_i - z^{(p)}_l\|^2_{B_p}\big]_+ + R(B_p)

on the mapped data :math:`z^{(p)}_i = L_{p-1}\cdots L_1 x_i` with target neighbours
:math:`j \rightsquigarrow_p i` re-picked as the ``k`` nearest same-label points of the
:math:`z^{(p)}`, and composes :math:`L = L_p L_{p-1} \cdots L_1` with
:math:`B_p = L_p^\top L_p`; the learned metric is :math:`M = L^\top L`.

Each pass is convex and certified on its own (its :class:`~metricopt.Solution` carries the
duality-gap certificate of that pass's program). The passes together minimise no single
objective: the composition is the paper's heuristic. When :math:`L_{p-1}\cdots L_1` is
invertible, pass ``p`` is exactly LMNN on the original ``x`` with the re-picked targets
(substitute :math:`M = (L_{p-1}\cdots L_1)^\top B_p (L_{p-1}\cdots L_1)`); otherwise it is
that problem restricted to the range of the metric learned so far. LMNN's optima are
often of low rank, and a numerical solution carries tiny spurious eigenvalues (of the
order of the solver's accuracy) whose coordinates would make the next pass's program
badly scaled; so each row of the composed map whose share of the mapped data's spread,
:math:`\sum_i (\ell^\top (x_i - \bar x))^2`, is below ``rank_tol`` times the largest row's
is dropped (it changes squared distances by at most about that fraction), and the next
pass works on well-scaled, full-rank coordinates.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._deadline import Budget
from ..._validation import check_classes, check_int, check_real, check_X, check_y
from ...errors import InputError, SolverError
from ...linalg import factor
from ...options import default
from .problem import LMNNProblem
from ...solution import Status

#: default relative eigenvalue below which a direction of a pass's metric is dropped
RANK_TOL = 1e-6


@dataclass
class MultiPassResult:
    """The outcome of :func:`multipass_lmnn`.

    Attributes
    ----------
    L : (r, d) ndarray
        The composed map ``L = L_p ... L_2 L_1``; the learned metric is ``M = L^T L``.
    solutions : list of Solution
        One per pass; ``solutions[p].M`` is the metric ``B_p`` of pass ``p`` on that pass's
        data, with the certificate of that pass's convex program.
    problems : list of LMNNProblem
        One per pass; ``problems[p].X`` is ``X L_{p-1..1}^T`` and
        ``problems[p].target_neighbors`` the targets re-picked there.
    maps : list of ndarray
        The per-pass maps ``L_p`` (``L_1`` first).
    times : list of float
        Seconds per pass.
    time_limited : bool
        Whether ``time_limit`` cut the run short: a pass stopped by it, or passes left undone.
    """

    L: np.ndarray
    solutions: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    maps: list = field(default_factory=list)
    times: list = field(default_factory=list)
    time_limited: bool = False

    @property
    def M(self) -> np.ndarray:
        """The learned metric ``L^T L`` on the input features."""
        return self.L.T @ self.L

    @property
    def passes(self) -> int:
        """The number of passes made (fewer than asked for when ``time_limit`` cut the run short)."""
        return len(self.solutions)

    @property
    def target_neighbors(self) -> np.ndarray:
        """Target neighbours of the last pass (picked under the metric of the previous passes)."""
        return self.problems[-1].target_neighbors

    def transform(self, X: ArrayLike) -> np.ndarray:
        """``X @ L.T``: Euclidean distances there are ``d_M``.

        Parameters
        ----------
        X : (n, d) array_like
            Inputs with the ``d`` features the passes were learned on.

        Returns
        -------
        ndarray of shape (n, r)
            ``X L^T`` with the composed map ``L`` (``r x d``).

        Raises
        ------
        InputError
            For NaN or infinite values, a 1-D or empty ``X``, or another number of features.
        """
        X = check_X(X)
        if X.shape[1] != self.L.shape[1]:
            raise InputError(f"X has {X.shape[1]} features; the multi-pass metric was learned on {self.L.shape[1]}.")
        return X @ self.L.T


def multipass_lmnn(X: ArrayLike, y: ArrayLike, passes: int = 2, k: int = 3, mu: float = 0.5, regularizer: Any = None,
                   backend: str = "cvxpy", rank_tol: float = RANK_TOL, **options: Any) -> MultiPassResult:
    r"""Multi-pass LMNN (Weinberger & Saul, JMLR 2009, Section 5.1): see the module docstring.

    Parameters
    ----------
    X : (n, d) array_like
    y : (n,) array_like
    passes : int >= 1, default 2
        Number of LMNN solves. ``passes=1`` is plain LMNN.
    k, mu, regularizer
        As for :class:`~metricopt.LMNNProblem` (the same for every pass).
    backend : {"cvxpy", "jax"}, default "cvxpy"
    rank_tol : float, default 1e-6
        Rows of the composed map whose share of the mapped (centred) data's spread is below
        ``rank_tol`` times the largest row's are dropped after each pass (see above).
    **options
        Passed to :meth:`~metricopt.problems.base.Problem.solve` at every pass, but ``time_limit``
        (seconds) bounds the whole run: each pass gets the seconds left as its own, no pass starts once they
        are spent (fewer passes are then made; ``time_limited`` says so), and the call returns within
        ``max(1.1 time_limit, time_limit + 5 s)`` (:mod:`metricopt._deadline`).

    Returns
    -------
    MultiPassResult

    Raises
    ------
    InputError
        Bad data or parameters (e.g. ``passes < 1``).
    SolverError
        A pass returned no metric (its status and message are quoted).
    """
    X = check_X(X)
    y = check_y(y, X.shape[0])
    passes = check_int(passes, "passes", low=1)
    k = check_int(k, "k", low=1)
    rank_tol = check_real(rank_tol, "rank_tol", low=0.0, high=1.0)
    check_classes(y, k, "multi-pass LMNN")
    time_limit = options.pop("time_limit", None)
    if time_limit is not None:
        time_limit = check_real(time_limit, "time_limit", low=0.0, low_open=True)
    budget = Budget.start(time_limit)
    with budget.running():
        return _passes(X, y, passes, k, mu, regularizer, backend, rank_tol, options, budget)


def _passes(X, y, passes, k, mu, regularizer, backend, rank_tol, options, budget):
    """The passes of :func:`multipass_lmnn` within ``budget`` (its deadlines in force)."""
    L = np.eye(X.shape[1])
    result = MultiPassResult(L=L)
    for p in range(passes):
        if p > 0 and budget.expired():
            result.time_limited = True
            break
        t0 = time.perf_counter()
        Z = X if p == 0 else X @ L.T
        problem = LMNNProblem(Z, y, k=k, mu=mu, regularizer=regularizer)
        timed = {} if not budget.limited else {"time_limit": max(budget.left(), 1e-3)}
        sol = problem.solve(backend=backend, **options, **timed)
        result.time_limited |= sol.status is Status.TIME_LIMIT
        if sol.M is None:
            raise SolverError(
                f"multi-pass LMNN: pass {p + 1} of {passes} returned no metric (status '{sol.status}': {sol.message})."
            )
        Lp = factor(sol.M)
        spread = np.sum(((Z - Z.mean(axis=0)) @ Lp.T) ** 2, axis=0)  # per row of L_p (= of L_p L)
        keep = spread > rank_tol * max(float(spread.max(initial=0.0)), 1e-300)
        if not np.any(keep):
            raise SolverError(
                f"multi-pass LMNN: pass {p + 1} of {passes} learned the zero metric (status '{sol.status}'); "
                "no distance is left to re-pick target neighbours with. Lower mu or check the data."
            )
        Lp = Lp[keep]
        L = Lp @ L
        result.solutions.append(sol)
        result.problems.append(problem)
        result.maps.append(Lp)
        result.times.append(time.perf_counter() - t0)
    result.L = L
    return result


def fit_multipass(estimator: Any, X: ArrayLike, y: ArrayLike, passes: int, options: dict[str, Any] | None = None
                  ) -> Any:
    """Fit an :class:`~metricopt.LMNN` estimator by multi-pass LMNN (for a ``passes=`` option).

    Runs :func:`multipass_lmnn` with the estimator's ``k``, ``mu``, ``regularizer``,
    ``backend`` and solver options and sets its fitted attributes so that ``transform``
    and ``predict`` use the composed map:

    * ``components_``: the composed ``L`` (``r x d``);
    * ``problem_``: :class:`~metricopt.LMNNProblem` on the *input* ``X`` with the last
      pass's target neighbours (what ``predict(rule="energy")`` needs);
    * ``solution_``: a :class:`~metricopt.Solution` with ``M = L^T L``, its objective for
      ``problem_``, and the certificate of ``M`` for ``problem_`` (computed afresh,
      :func:`metricopt.certify`): its status is ``optimal`` only when that certificate
      proves it, which holds when the earlier passes' maps are invertible (the last pass
      is then exactly ``problem_``); otherwise ``heuristic`` with the gap stated;
    * ``certificate_``, ``n_iter_`` (summed over passes), ``passes_`` (the
      :class:`MultiPassResult`).

    Usage inside ``LMNN.fit``: ``if self.passes > 1: return fit_multipass(self, X, y, self.passes)``
    (after ``validate_data``).

    Parameters
    ----------
    estimator : LMNN
        The estimator to fit (its ``k``, ``mu``, ``regularizer``, ``backend`` and ``_solve_options()`` are read).
    X : (n, d) array_like
    y : (n,) array_like
    passes : int >= 1
        Number of LMNN solves (:func:`multipass_lmnn`).
    options : dict, optional
        The solve options (default the estimator's own); a ``time_limit`` there bounds the passes and the
        closing certificate together, and a run it cut short has status ``time_limit`` (``optimal`` where the
        certificate proves it) instead of ``heuristic``.

    Returns
    -------
    estimator
        The same estimator, fitted.

    Raises
    ------
    InputError
        Bad data or parameters.
    SolverError
        A pass returned no metric, or learned the zero metric.
    """
    from ...certify import policy
    from ...certify.policy import Outcome, SolverReport

    options = dict(estimator._solve_options() if options is None else options)
    time_limit = options.get("time_limit")
    if time_limit is not None:
        time_limit = check_real(time_limit, "time_limit", low=0.0, low_open=True)
    budget = Budget.start(time_limit)
    with budget.running():
        res = multipass_lmnn(X, y, passes=passes, k=estimator.k, mu=estimator.mu, regularizer=estimator.regularizer,
                             backend=estimator.backend, **options)
    t0 = time.perf_counter() - sum(res.times)
    X = check_X(X)
    problem = LMNNProblem(X, y, k=estimator.k, mu=estimator.mu, regularizer=estimator.regularizer,
                          target_neighbors=res.target_neighbors)
    M = problem.check_metric(res.M)
    iters = sum(int(s.stats.get("iterations", 0)) for s in res.solutions)
    last = res.solutions[-1]
    point = {"M": M, "objective": problem.objective(M), "backend": last.backend, "solver": last.solver,
             "stats": {"iterations": iters, "passes": res.passes, "pass_times": res.times}, "L": res.L}
    message = (f"multi-pass LMNN, {res.passes} passes, each certified on its own (last pass: {last.message}); "
               f"composed map of rank {res.L.shape[0]} on {X.shape[1]} features, certified below against LMNN on the "
               "input features with the last pass's target neighbours, of which it solves the restriction to the "
               "range of the earlier passes")
    if res.time_limited:
        limit_text = "the enclosing deadline" if time_limit is None else f"time limit {time_limit:g}s"
        message += f"; {limit_text} reached after {res.passes} of {passes} passes"
    # the composition is a heuristic step (cut short: a time limit); a last pass without a point passes its status on
    if last.status.has_point:
        report = SolverReport(Outcome.TIME_LIMIT if res.time_limited else Outcome.COMPOSED, message)
    else:
        report = SolverReport.inherit(last.status, message)
    tol = options.get("tol")  # the certified relative gap on both backends (metricopt.options), as given
    with budget.closing():
        sol = policy.settle(problem, report, point, default("tol", estimator.backend) if tol is None else float(tol),
                            t0)
    estimator.problem_ = problem
    estimator.solution_ = sol
    estimator.certificate_ = sol.certificate
    estimator.components_ = res.L
    estimator.n_iter_ = iters
    estimator.passes_ = res
    return estimator
