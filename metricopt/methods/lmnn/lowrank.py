r"""Low-rank LMNN: LMNN-R and LMNN-S (Weinberger & Saul, JMLR 10:207-244, 2009, Section 5.4).

A rank-:math:`r` metric :math:`M = L^\top L` with a rectangular :math:`L \in \mathbb R^{r \times d}`
maps the data to :math:`r` dimensions (:math:`z = Lx`), which makes kNN search cheaper and
gives a supervised dimensionality reduction. The rank constraint makes LMNN non-convex;
Section 5.4 of the paper describes two ways around it, both implemented here for an
:class:`~metricopt.LMNNProblem` (any convex regulariser of the problem included):

**LMNN-R** (rectangular :math:`L`, learned directly): minimise over :math:`L \in \mathbb R^{r \times d}`

.. math::

    \varepsilon(L) = (1-\mu) \sum_{i,\, j \rightsquigarrow i} \lVert L(x_i - x_j)\rVert^2
    + \mu \sum_{i,\, j \rightsquigarrow i,\, l:\, y_l \ne y_i}
      \big[1 + \lVert L(x_i - x_j)\rVert^2 - \lVert L(x_i - x_l)\rVert^2\big]_+ + R(L^\top L),

the LMNN objective of Eq. 14 (Section 3.4 writes it in :math:`L` before the convex
reformulation in :math:`M`) evaluated at :math:`M = L^\top L`. This is the problem
``problem.factored(r)`` (a factor geometry) and it is solved on the JAX backend's one loop, like
every other problem: the terms' own JAX pieces give the value and, through the geometry's chain
rule :math:`\partial_L \varepsilon = 2 L\, \nabla f(L^\top L)`, the gradient; the Hessian-vector
products of the trust-region Newton solver come from differentiating that gradient. This module
adds only what is specific to low-rank LMNN: the restarts, the stationarity verdict with the bound
of the convex relaxation, and LMNN-S.

**LMNN-S** (solve, then truncate): solve the convex problem, then keep the top :math:`r`
eigenpairs of its solution, :math:`L_r = \operatorname{diag}(\sqrt{\lambda_1}, \dots,
\sqrt{\lambda_r})\, U_r^\top`; the objective lost by the truncation is reported.

Both give a feasible point of the rank-constrained problem, so their objective is an
upper bound on its optimum. Since :math:`\{L^\top L: L \in \mathbb R^{r\times d}\}` is a
subset of the PSD cone, the convex optimum :math:`f^\star` is a lower bound:
:math:`\varepsilon(L) \ge \min_{L'} \varepsilon(L') \ge f^\star \ge \text{lower}`, where
``lower`` is the dual bound of :func:`metricopt.certify`. The gap to that bound is reported
for information only: for :math:`r < d` it usually does not close (the relaxation is not
tight), so it is a *bound*, not a certificate of the rank-constrained problem. Solutions
of LMNN-R are reported as ``STATIONARY`` (or ``ITERATION_LIMIT``), never ``OPTIMAL``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..._deadline import Budget
from ..._validation import check_choice, check_int, check_real
from ...backends.jax import TrustNewton, best_scale, evaluate
from ...errors import InputError, UnknownOptionError
from ...linalg import project_psd, symmetrize
from ...certify import policy
from ...certify.policy import NoCertificate, Outcome, SolverReport
from ...solution import Solution, Status
from ...solving import solve_from_starts

__all__ = ["lmnn_low_rank", "lmnn_r", "lmnn_s", "low_rank_objective", "stationarity", "truncate_metric", "METHODS"]

#: the two methods of Section 5.4
METHODS = ("R", "S")
#: options of LMNN-R (passed through ``**solve_options`` of :func:`lmnn_low_rank`)
R_OPTIONS = ("smoothing", "init", "band")
#: default half-width of the band of hinge arguments treated as sitting on the kink: the last smoothing
#: width of LMNN-R and the width at which :func:`stationarity` measures is ``2 * band`` (the centred
#: Huber of width ``s`` differs from the hinge only for ``|h| < s / 2``); 2e-8, the last width of the
#: scipy implementation this replaced, which it matches on wine and balance-scale
#: (``benchmarks/results/lmnn_r.md``)
BAND = 1e-8


# ----------------------------------------------------------------------------- checks
def _check_problem(problem):
    from .problem import LMNNProblem

    if not isinstance(problem, LMNNProblem):
        raise InputError(
            f"low-rank LMNN needs an LMNNProblem; got {type(problem).__name__}. Build one with "
            "metricopt.LMNNProblem(X, y, k=..., mu=...)."
        )
    if getattr(problem, "clusters", None) is not None:
        raise InputError(
            "low-rank LMNN learns one metric; a multi-metric problem (one metric per cluster) is not supported. "
            "Use metricopt.LMNNProblem."
        )
    if problem.diagonal:
        raise InputError("low-rank LMNN learns a full rectangular L; the diagonal variant is not supported.")


def _check_rank(n_components, d):
    if isinstance(n_components, bool) or not isinstance(n_components, (int, np.integer)):
        raise InputError(f"n_components must be an integer between 1 and d={d}; got {n_components!r}.")
    r = int(n_components)
    if r < 1 or r > d:
        raise InputError(
            f"n_components must be between 1 and the number of features d={d}; got {r}. "
            f"A rank-{r} metric needs an L with {r} rows of length d."
        )
    return r


# --------------------------------------------------------------------- the objective in L
def low_rank_objective(problem: Any, L: Any, smoothing: float = 0.0) -> tuple[float, np.ndarray]:
    r"""The LMNN objective :math:`\varepsilon(L) = f(L^\top L)` and its (sub)gradient in ``L``.

    See the module docstring (Weinberger & Saul, JMLR 2009, Eq. 14 at :math:`M = L^\top L`,
    Section 5.4): :math:`\partial_L \varepsilon = 2 L G` with
    :math:`G = (1-\mu)P + \mu\sum_{h_{ijl} > 0}(C_{ij} - C_{il}) + \nabla R(L^\top L)`, evaluated by the
    terms' JAX pieces on ``problem.factored(r)`` (:func:`metricopt.backends.jax.evaluate`).

    Parameters
    ----------
    problem : LMNNProblem
        A single-metric, full (not diagonal) LMNN problem.
    L : (r, d) array_like
        The factor, ``M = L^T L``.
    smoothing : float, default 0
        Width ``s`` of the Huber-smoothed hinge :math:`\phi_s` (0: the hinge itself, gradient
        with the subgradient ``1[h > 0]``).

    Returns
    -------
    value : float
        The (smoothed) objective.
    gradient : (r, d) ndarray
        Its (sub)gradient in ``L``.

    Raises
    ------
    InputError
        For a problem other than a single-metric full LMNNProblem, a non-finite ``L`` or a negative ``smoothing``.
    """
    _check_problem(problem)
    L = _check_L(L, None, problem.d)
    smoothing = check_real(smoothing, "smoothing", low=0.0)
    value, _, grad = evaluate(problem.factored(L.shape[0]), L, smoothing)
    return value, grad


def _check_L(L, r, d, name="L"):
    L = np.asarray(L, dtype=np.float64)
    if L.ndim != 2 or L.shape[1] != d or (r is not None and L.shape[0] != r):
        want = f"({r}, {d})" if r is not None else f"(r, {d})"
        raise InputError(f"{name} must have shape {want}; got {L.shape}.")
    if not np.all(np.isfinite(L)):
        raise InputError(f"{name} contains NaN or infinite entries.")
    return L


# ------------------------------------------------------------------------ stationarity
def stationarity(problem: Any, L: Any, band: float = BAND) -> dict:
    r"""Relative stationarity of ``L`` for the rank-constrained LMNN objective :math:`\varepsilon(L)`.

    :math:`\varepsilon` is piecewise smooth; at a local minimum some triplets usually sit
    exactly on the kink of their hinge (:math:`h_{ijl} = 0`), where no single gradient vanishes.
    The measure is the gradient of the hinge smoothed to a centred Huber of width ``s = 2 band``,

    .. math::

        g_s = 2L\Big(G_0 + \mu \textstyle\sum_{t} \phi_s'(h_t)\,(C_{ij} - C_{il})\Big), \qquad
        \phi_s'(h) = \operatorname{clip}(h/s + 1/2, 0, 1),

    with :math:`G_0` the gradient of the smooth terms: the weights are ``1`` above the band, ``0``
    below it and in :math:`[0, 1]` only for :math:`|h_t| < \text{band}`, so :math:`g_s` belongs to the
    convex hull of the gradients of the pieces met within ``band`` of the kink, and
    :math:`\lVert g_s\rVert` bounds the norm of that hull's smallest element from above. It is made
    scale-free as :math:`\lVert g_s\rVert \lVert L\rVert_F / \varepsilon_s(L)` (invariant to rescaling
    the data and the objective): the quantity LMNN-R's solve stops on.

    Parameters
    ----------
    problem : LMNNProblem
        A single-metric, full (not diagonal) LMNN problem.
    L : (r, d) array_like
        The factor, ``M = L^T L``.
    band : float, default 1e-8
        Half-width of the kink band (the smoothing width is ``2 band``); positive.

    Returns
    -------
    dict
        ``relative``, ``gradient_norm`` (:math:`\lVert g_s\rVert`), ``objective`` (the exact
        :math:`\varepsilon(L)`) and ``band_triplets`` (triplets with :math:`|h_t| < \text{band}`).

    Raises
    ------
    InputError
        For a problem other than a single-metric full LMNNProblem, a non-finite ``L`` or a non-positive ``band``.
    """
    _check_problem(problem)
    L = _check_L(L, None, problem.d)
    band = check_real(band, "band", low=0.0, low_open=True)
    value, exact, g = evaluate(problem.factored(L.shape[0]), L, 2.0 * band)
    gn = float(np.linalg.norm(g))
    rel = 0.0 if gn == 0.0 else gn * float(np.linalg.norm(L)) / max(abs(value), 1e-300)
    found = problem.find_triplets(symmetrize(L.T @ L), band)
    n_band = 0 if found is None else int(np.count_nonzero(np.abs(found[3]) < band))
    return {"relative": rel, "gradient_norm": gn, "objective": exact, "band_triplets": n_band}


# ----------------------------------------------------------------------------- starts
def _pca_directions(X, r):
    """The top-``r`` principal directions of ``X`` as the rows of an ``(r, d)`` matrix."""
    Xc = X - X.mean(axis=0)
    w, V = np.linalg.eigh(symmetrize(Xc.T @ Xc))
    return V[:, np.argsort(w)[::-1][:r]].T.copy()


def _scaled_start(problem, U):
    """``sqrt(c) U`` with ``c`` the best scale of ``U^T U`` (:func:`metricopt.backends.jax.best_scale`:
    ``f(c U^T U)`` is convex in ``c``)."""
    return np.sqrt(best_scale(problem, U.T @ U)) * U


def _random_start(problem, r, rng):
    Q, _ = np.linalg.qr(rng.standard_normal((problem.d, r)))
    return _scaled_start(problem, Q.T)


# ------------------------------------------------------------------------------ bound
def _convex_bound(problem, M, extra=()):
    """The best dual lower bound on the convex optimum from :func:`metricopt.certify` at ``M`` and at
    the candidates in ``extra`` (metrics, or Solutions of the convex problem, whose own certificate
    is used when they carry one)."""
    from ...certify import certify

    lows = []
    for cand in (M, *extra):
        if isinstance(cand, Solution):
            if cand.certificate is not None and np.isfinite(cand.certificate.lower):
                lows.append(float(cand.certificate.lower))
                continue
            cand = cand.M
            if cand is None:
                continue
        try:
            lows.append(float(certify(problem, cand).lower))
        except Exception:  # noqa: BLE001 - the bound is information only
            continue
    return max(lows) if lows else -np.inf


def _bound_candidates(convex_bound, problem):
    """``(wanted, extra candidates)`` from the ``convex_bound`` argument (bool, Solution or metric)."""
    if isinstance(convex_bound, (bool, np.bool_)):
        return bool(convex_bound), ()
    if isinstance(convex_bound, Solution):
        return True, (convex_bound,)
    try:
        return True, (problem.check_metric(convex_bound, name="convex_bound"),)
    except InputError as exc:
        raise InputError(f"convex_bound must be True, False, a Solution of the convex problem or a PSD "
                         f"({problem.d}, {problem.d}) metric: {exc}") from None


def _verdict(stats, tol):
    """``(stationary, reason)``: the relative stationarity is at most ``tol``, or the objective is within
    ``tol`` (relative) of the lower bound of the convex relaxation, which bounds the rank-constrained
    optimum from below too (the point is then tol-optimal for the rank-constrained problem)."""
    if stats["stationarity"] <= tol:
        return True, f"relative stationarity {stats['stationarity']:.2e} <= tol {tol:g}"
    gap = stats.get("rel_gap_to_convex_bound", np.inf)
    if gap <= tol:
        return True, (f"objective within {gap:.2e} <= tol {tol:g} of the convex relaxation's lower bound (relative "
                      f"stationarity {stats['stationarity']:.2e})")
    return False, ""


def _with_bound(stats, objective, lower):
    stats["convex_lower_bound"] = lower
    stats["rel_gap_to_convex_bound"] = (float((objective - lower) / max(abs(objective), 1e-12))
                                        if np.isfinite(lower) else float("inf"))


# ------------------------------------------------------------------------------ LMNN-R
def lmnn_r(problem: Any, n_components: int, n_restarts: int = 3, random_state: int | None = 0, tol: float = 1e-6,
           max_iter: int = 2000, smoothing: bool = True, init: Any = None, band: float = BAND, convex_bound: Any = True,
           time_limit: float | None = None) -> Solution:
    r"""LMNN-R: learn a rectangular ``L`` (``r x d``) on the non-convex LMNN loss
    (Weinberger & Saul, JMLR 2009, Section 5.4; Eq. 14 at :math:`M = L^\top L`).

    .. math::

        \min_{L \in \mathbb R^{r\times d}}\ (1-\mu)\sum_{i, j \rightsquigarrow i} \lVert L(x_i - x_j)\rVert^2
        + \mu \sum_{i, j \rightsquigarrow i, l: y_l \ne y_i} [1 + \lVert L(x_i - x_j)\rVert^2
        - \lVert L(x_i - x_l)\rVert^2]_+ + R(L^\top L).

    The problem is not convex: the result is a stationary point at best, reported as
    ``stationary`` when :func:`stationarity` (relative) is at most ``tol`` -- or when the
    objective is within ``tol`` (relative) of the lower bound of the convex relaxation, which
    makes it tol-optimal even for the rank-constrained problem -- else ``iteration_limit``;
    never ``OPTIMAL``.

    Method: ``n_restarts`` solves of ``problem.factored(r)`` on the JAX backend's loop, keeping the
    lowest objective. The first starts from the top-``r`` principal directions of ``X`` (or
    ``init``), the others from random orthonormal rows; each start is scaled by the best factor
    along its ray (a convex 1-D problem). With ``smoothing`` (default) the solver is the
    trust-region Newton-CG of :class:`metricopt.backends.jax.TrustNewton` on the hinge smoothed to a
    centred Huber of width :math:`s`, driven from 1 down to ``2 * band`` by factors of 10
    (continuation; Hessian-vector products by differentiating the terms' gradient), stopping once
    the smoothed gradient at the last width is ``tol``-small. Without it, the paper's own method:
    (sub)gradient steps on the hinge itself with the step adapted as in its Appendix A
    (``solver="subgradient"``), which does not reach stationarity on a kink and ends at
    ``max_iter`` or when its steps stall.

    The stats also give a *lower bound* for information: the dual bound of
    :func:`metricopt.certify` at :math:`L^\top L` bounds the convex (full-rank) optimum, which
    bounds the rank-:math:`r` optimum from below. ``rel_gap_to_convex_bound`` is a bound on the
    suboptimality, not a certificate of the rank-constrained problem: for :math:`r < d` the
    relaxation is rarely tight and the gap does not close.

    Parameters
    ----------
    problem : LMNNProblem
        A single-metric, full (not diagonal) LMNN problem.
    n_components : int
        The rank ``r``, ``1 <= r <= d``.
    n_restarts : int, default 3
        Descents from different starts (the lowest objective is kept).
    random_state : int or None, default 0
        Seed of the random starts.
    tol : float, default 1e-6
        Relative stationarity under which a descent is declared stationary.
    max_iter : int, default 2000
        Solver iterations per restart (shared by the continuation stages).
    smoothing : bool, default True
        Huber-smoothed hinge with continuation and Newton steps (True) or subgradient steps on the
        hinge (False).
    init : (r, d) array, optional
        First start instead of the PCA directions (used as given, not rescaled).
    band : float, default 1e-8
        Half-width of the kink band of :func:`stationarity` (the last smoothing width is ``2 * band``).
    convex_bound : bool, Solution or (d, d) array, default True
        Compute the lower bound of the convex relaxation (a dual certificate computation) at
        :math:`L^\top L`; a Solution (or metric) of the convex problem given here is certified
        too (its own certificate reused), which gives a tighter bound.
    time_limit : float, optional
        Seconds for the restarts and the bound together (:func:`metricopt.solving.solve_from_starts`); a
        descent it cut short that is not shown stationary has status ``time_limit``.

    Returns
    -------
    Solution
        ``M = L^T L``, ``L`` the ``(r, d)`` factor (``solution.L``), objective by
        ``problem.objective``. ``stats``: ``restarts`` (per restart: start, objective,
        iterations, evaluations, stationarity, status), ``best_restart``, ``iterations``,
        ``gradient_norm``, ``stationarity``, ``convex_lower_bound``, ``rel_gap_to_convex_bound``,
        ``time``.

    Raises
    ------
    InputError
        ``n_components`` outside ``[1, d]``, a problem other than a single-metric full LMNNProblem, or an
        invalid option value or ``init``.
    """
    t0 = time.perf_counter()
    _check_problem(problem)
    r = _check_rank(n_components, problem.d)
    n_restarts = check_int(n_restarts, "n_restarts", low=1)
    tol = check_real(tol, "tol", low=0.0)
    max_iter = check_int(max_iter, "max_iter", low=1)
    band = check_real(band, "band", low=0.0, low_open=True)
    if time_limit is not None:
        time_limit = check_real(time_limit, "time_limit", low=0.0, low_open=True)
    if not isinstance(smoothing, (bool, np.bool_)):
        raise InputError(f"smoothing must be True (smoothed hinge with continuation) or False; got {smoothing!r}.")
    if init is not None:
        init = _check_L(init, r, problem.d, "init")
    want_bound, bound_extra = _bound_candidates(convex_bound, problem)
    low = problem.factored(r)
    solver = TrustNewton(s_min=2.0 * band) if smoothing else "subgradient"
    rng = np.random.default_rng(random_state)

    starts = [("init", init) if init is not None else ("pca", _scaled_start(problem, _pca_directions(problem.X, r)))]
    starts += [("random", _random_start(problem, r, rng)) for _ in range(n_restarts - 1)]
    budget = Budget.start(time_limit, t0)
    with budget.running():
        timed = {"time_limit": max(budget.left(), 1e-3)} if budget.limited else {}
        best_sol, runs = solve_from_starts(low, starts, backend="jax", solver=solver, tol=max(tol, 1e-300),
                                           max_iter=max_iter, **timed)
    timed_out = budget.limited and (len(runs) < len(starts)
                                    or any(run["solution"].status is Status.TIME_LIMIT for run in runs))
    best = next(run for run in runs if run["solution"] is best_sol)
    best["hit_limit"] = best["iterations"] >= max_iter
    L = best_sol.L
    M = symmetrize(L.T @ L)
    objective = problem.objective(M)
    measured = stationarity(problem, L, band)
    stats = {
        "method": "LMNN-R", "n_components": r, "smoothing": bool(smoothing), "band": band, "tol": tol,
        "solver": "newton" if smoothing else "subgradient",
        "restarts": [{k: v for k, v in run.items() if k != "solution"} for run in runs],
        "restart_objectives": [run["objective"] for run in runs],
        "best_restart": runs.index(best), "iterations": best["iterations"],
        "total_iterations": sum(run["iterations"] for run in runs),
        "gradient_norm": measured["gradient_norm"], "stationarity": measured["relative"],
        "band_triplets": measured["band_triplets"], "objective_in_L": best["objective"],
    }
    if want_bound:
        with budget.closing():  # under a time limit, the bound's conic programs stay within it
            _with_bound(stats, objective, _convex_bound(problem, M, bound_extra))
    ok, why = _verdict(stats, tol)
    # the rank-constrained problem is not convex: the policy never calls it optimal
    failed = Outcome.TIME_LIMIT if timed_out else Outcome.ITERATION_LIMIT
    status, _ = policy.decide(SolverReport(Outcome.STATIONARY if ok else failed), NoCertificate.NOT_TAKEN,
                              convex=False)
    if ok:
        message = f"{status.message}: LMNN-R rank {r}, {why} (best of {n_restarts} restart(s))"
    elif timed_out:
        message = (f"LMNN-R rank {r}: the time limit of {time_limit:g} s was reached ({len(runs)} of {n_restarts} "
                   f"restart(s) run) with relative stationarity {stats['stationarity']:.2e} > tol {tol:g}; the "
                   "point is not shown stationary. Raise time_limit")
    elif best["hit_limit"]:
        message = (f"LMNN-R rank {r}: the iteration limit max_iter={max_iter} was reached with relative "
                   f"stationarity {stats['stationarity']:.2e} > tol {tol:g}; the point is not shown stationary. "
                   "Raise max_iter")
    else:
        message = (f"LMNN-R rank {r}: the descent stopped (no further decrease in floating point) with relative "
                   f"stationarity {stats['stationarity']:.2e} > tol {tol:g}; the point is not shown stationary. "
                   "Try more restarts, a larger band or a looser tol")
    if "rel_gap_to_convex_bound" in stats:
        message += (f"; objective is within {stats['rel_gap_to_convex_bound']:.2e} (relative) of a lower bound on "
                    "the convex relaxation (a bound, not a certificate of the rank-constrained problem)")
    stats["time"] = time.perf_counter() - t0
    return Solution(M=M, objective=objective, status=status, backend="jax", solver=stats["solver"], stats=stats,
                    message=message + ".", L=L)


# ------------------------------------------------------------------------------ LMNN-S
def truncate_metric(M: Any, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    r"""The rank-``r`` eigen-truncation of a PSD ``M``: ``L_r = diag(sqrt(lambda_1..r)) U_r^T``.

    ``lambda_1 >= ... >= lambda_d`` are the eigenvalues of ``(M + M^T)/2`` (negative ones clipped
    to 0) and ``U_r`` the matching eigenvectors; ``L_r^T L_r`` is the best rank-``r`` PSD
    approximation of ``M`` in Frobenius norm (Eckart-Young). Weinberger & Saul, JMLR 2009,
    Section 5.4 (LMNN-S).

    Parameters
    ----------
    M : (d, d) array_like
        A finite square (PSD) matrix.
    n_components : int
        The rank ``r``, ``1 <= r <= d``.

    Returns
    -------
    L_r : (r, d) ndarray
        The truncated factor.
    eigenvalues : (d,) ndarray, decreasing
        The eigenvalues of ``(M + M^T)/2``, negative ones clipped to 0.

    Raises
    ------
    InputError
        When ``M`` is not a finite square matrix or ``n_components`` is outside ``[1, d]``.
    """
    M = np.asarray(M, dtype=np.float64)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or not np.all(np.isfinite(M)):
        raise InputError(f"M must be a finite square matrix; got shape {M.shape}.")
    r = _check_rank(n_components, M.shape[0])
    w, V = np.linalg.eigh(symmetrize(M))
    order = np.argsort(w)[::-1]
    w, V = np.clip(w[order], 0.0, None), V[:, order]
    return np.sqrt(w[:r])[:, None] * V[:, :r].T, w


def lmnn_s(problem: Any, n_components: int, tol: float = 1e-6, backend: str = "cvxpy", convex_solution: Any = None,
           convex_bound: Any = True, band: float = BAND, **solve_options: Any) -> Solution:
    r"""LMNN-S: solve the convex LMNN problem, then truncate its solution to rank ``r``
    (Weinberger & Saul, JMLR 2009, Section 5.4).

    .. math::

        M^\star = \arg\min_{M \succeq 0} f(M)\ \text{(Eq. 14)}, \qquad
        L_r = \operatorname{diag}(\sqrt{\lambda_1}, \dots, \sqrt{\lambda_r})\, U_r^\top,

    with :math:`M^\star = U \operatorname{diag}(\lambda) U^\top`, :math:`\lambda` decreasing. The
    objective lost, :math:`f(L_r^\top L_r) - f(M^\star)`, is reported in the stats.

    The truncated point is feasible for the rank-constrained problem but carries no optimality
    guarantee for it. Status: the convex solve's status when that was not optimal; otherwise
    ``STATIONARY`` when :func:`stationarity` of :math:`L_r` is at most ``tol`` or its objective is
    within ``tol`` of the convex lower bound (e.g. when :math:`M^\star` has rank :math:`\le r` and
    nothing is lost), and ``HEURISTIC`` when neither holds (the truncation left a
    suboptimal point); never ``OPTIMAL``.

    Parameters
    ----------
    problem : LMNNProblem
        A single-metric, full (not diagonal) LMNN problem.
    n_components : int
        The rank ``r``, ``1 <= r <= d``.
    tol : float
        Relative stationarity threshold (see above).
    backend : {"cvxpy", "jax"}
        Backend of the convex solve; ``**solve_options`` go to ``problem.solve``.
    convex_solution : Solution or (d, d) array, optional
        A solution of the convex problem to truncate (no solve then); a bare metric is certified
        with :func:`metricopt.certify` (optimal when its relative gap is at most ``tol``).
    convex_bound : bool, Solution or (d, d) array
        Also report the dual lower bound of the convex problem (see :func:`lmnn_r`); the convex
        solution's own certificate is used too.
    band : float
        Kink band of :func:`stationarity`.
    **solve_options
        Options of ``problem.solve`` for the convex solve (e.g. ``tol``, ``max_iter``, ``solver``).

    Returns
    -------
    Solution
        ``L`` the ``(r, d)`` truncation; stats: ``convex_objective``, ``truncation_loss``
        (absolute), ``rel_truncation_loss``, ``eigenvalues``, ``convex_status``,
        ``stationarity``, ``convex_lower_bound``, ``rel_gap_to_convex_bound``, ``time``.

    Raises
    ------
    InputError
        ``n_components`` outside ``[1, d]``, a problem other than a single-metric full LMNNProblem, an invalid
        ``tol``, ``band`` or ``convex_solution``, or solve options given with ``convex_solution``.
    """
    t0 = time.perf_counter()
    _check_problem(problem)
    r = _check_rank(n_components, problem.d)
    tol = check_real(tol, "tol", low=0.0)
    band = check_real(band, "band", low=0.0, low_open=True)
    if convex_solution is None:
        sol = problem.solve(backend=backend, **solve_options)
    elif isinstance(convex_solution, Solution):
        if solve_options:
            raise InputError(f"solve options {sorted(solve_options)} are unused when convex_solution is given.")
        sol = convex_solution
    else:
        if solve_options:
            raise InputError(f"solve options {sorted(solve_options)} are unused when convex_solution is given.")
        from ...certify import certify

        Mc = problem.check_metric(convex_solution, name="convex_solution")
        cert = certify(problem, Mc, tol=max(tol, 1e-12))
        # a given metric claims nothing: its certificate alone makes it optimal (else optimal_inaccurate)
        given, _ = policy.decide(SolverReport(Outcome.INACCURATE, "a metric given by the caller"), cert,
                                 convex=problem.is_convex)
        sol = Solution(M=Mc, objective=problem.objective(Mc), status=given, backend="given", solver="given",
                       certificate=cert,
                       message=f"a metric given by the caller, certified relative gap {cert.rel_gap:.2e}")
    if sol.M is None:
        status, _ = policy.decide(SolverReport.inherit(sol.status), NoCertificate.NOT_TAKEN, convex=False)
        return Solution(M=None, objective=float("nan"), status=status, backend=sol.backend, solver=sol.solver,
                        stats={"method": "LMNN-S", "n_components": r, "convex_status": sol.status.code},
                        message=f"LMNN-S: the convex solve returned no metric ({sol.status}: {sol.message}).")
    L, eig = truncate_metric(sol.M, r)
    M = symmetrize(L.T @ L)
    objective = problem.objective(M)
    convex_objective = problem.objective(project_psd(sol.M))
    measured = stationarity(problem, L, band)
    rel, gn, nb = measured["relative"], measured["gradient_norm"], measured["band_triplets"]
    loss = objective - convex_objective
    stats = {
        "method": "LMNN-S", "n_components": r, "convex_objective": convex_objective, "truncation_loss": loss,
        "rel_truncation_loss": float(loss / max(abs(convex_objective), 1e-12)), "eigenvalues": eig,
        "dropped_eigenvalue_sum": float(eig[r:].sum()), "convex_status": sol.status.code,
        "convex_stats": sol.stats, "stationarity": rel, "gradient_norm": gn, "band_triplets": nb,
        "iterations": int(sol.stats.get("iterations", 0)),
    }
    want_bound, bound_extra = _bound_candidates(convex_bound, problem)
    if want_bound:
        _with_bound(stats, objective, _convex_bound(problem, M, (sol, *bound_extra)))
    ok, why = _verdict(stats, tol)
    # the truncation inherits a convex solve that was not optimal (a failure where it has no point), else it is
    # stationary or a heuristic point; the rank-constrained problem is not convex: never optimal
    if sol.status is not Status.OPTIMAL:
        report = SolverReport.inherit(sol.status) if sol.status.has_point else SolverReport(Outcome.FAILED)
    else:
        report = SolverReport(Outcome.STATIONARY if ok else Outcome.COMPOSED)
    status, _ = policy.decide(report, NoCertificate.NOT_TAKEN, convex=False)
    if sol.status is not Status.OPTIMAL:
        message = (f"LMNN-S: the convex solve ended with status '{sol.status}' ({sol.message}); its truncation to "
                   f"rank {r} inherits it")
    elif ok:
        message = (f"{status.message}: LMNN-S rank {r}, truncation of the convex optimum, {why}; objective lost "
                   f"by the truncation {loss:.3g}")
    else:
        message = (f"LMNN-S rank {r}: truncation of the convex optimum, a feasible rank-{r} point but not a "
                   f"stationary one (relative stationarity {rel:.2e} > tol {tol:g}); objective lost by the "
                   f"truncation {loss:.3g} ({stats['rel_truncation_loss']:.2e} relative). LMNN-R (method='R') "
                   "descends further")
    if want_bound:
        message += (f"; objective within {stats['rel_gap_to_convex_bound']:.2e} (relative) of a lower bound on the "
                    "convex relaxation (a bound, not a certificate of the rank-constrained problem)")
    stats["time"] = time.perf_counter() - t0
    return Solution(M=M, objective=objective, status=status, backend=sol.backend, solver=sol.solver, stats=stats,
                    message=message + ".", L=L)


# ------------------------------------------------------------------------------- entry
def lmnn_low_rank(problem: Any, n_components: int, method: str = "R", n_restarts: int = 3,
                  random_state: int | None = 0, tol: float = 1e-6, max_iter: int = 2000, backend: str = "cvxpy",
                  convex_bound: Any = True, **solve_options: Any) -> Solution:
    r"""Low-rank LMNN (Weinberger & Saul, JMLR 10:207-244, 2009, Section 5.4): a rank-``r`` metric
    ``M = L^T L`` with ``L`` of shape ``(r, d)``.

    .. math::

        \min_{L \in \mathbb R^{r\times d}} f(L^\top L), \qquad f \text{ the LMNN objective of Eq. 14}.

    Parameters
    ----------
    problem : LMNNProblem
        A single-metric, full (not diagonal) LMNN problem.
    n_components : int
        The rank ``r``, ``1 <= r <= d``.
    method : {"R", "S"}, default "R"
        ``"R"``: learn ``L`` directly on the non-convex loss, trust-region Newton on the JAX loop (:func:`lmnn_r`).
        ``"S"``: solve the convex problem, then keep its top ``r`` eigenpairs (:func:`lmnn_s`).
    n_restarts, random_state, max_iter : LMNN-R only
        Restarts (the first from the PCA directions, the rest random), their seed, and
        solver iterations per restart.
    tol : float, default 1e-6
        Relative stationarity threshold (both methods; see :func:`stationarity`).
    backend : {"cvxpy", "jax"}, default "cvxpy"
        LMNN-S only: backend of the convex solve.
    convex_bound : bool, Solution or (d, d) array, default True
        Report the dual lower bound of the convex relaxation (``stats["convex_lower_bound"]``,
        ``stats["rel_gap_to_convex_bound"]``): a bound, not a certificate of the rank-constrained
        problem. A Solution (or metric) of the convex problem given here tightens it.
    **solve_options
        LMNN-R: ``smoothing`` (bool), ``init`` (an ``(r, d)`` first start), ``band``, ``time_limit``.
        LMNN-S: options of ``problem.solve`` (e.g. ``tol``, ``max_iter``, ``solver``) and
        ``convex_solution`` (a convex Solution to truncate instead of solving), ``band``.

    Returns
    -------
    Solution
        ``solution.L`` is the ``(r, d)`` factor, ``solution.M = L^T L``; status ``STATIONARY``,
        ``ITERATION_LIMIT`` or (LMNN-S) ``HEURISTIC`` / the convex solve's, never ``OPTIMAL``.

    Raises
    ------
    InputError
        ``n_components`` outside ``[1, d]``, a problem other than a single-metric LMNNProblem.
    UnknownOptionError
        An unknown ``method`` or LMNN-R option.
    """
    m = check_choice(method, "method", METHODS)
    if m == "R":
        unknown = sorted(set(solve_options) - set(R_OPTIONS) - {"time_limit"})
        if unknown:
            raise UnknownOptionError(
                f"unknown option(s) {unknown} for method='R'; its options are: "
                f"{', '.join(R_OPTIONS)} (plus n_restarts, random_state, tol, max_iter, time_limit, convex_bound)."
            )
        return lmnn_r(problem, n_components, n_restarts=n_restarts, random_state=random_state, tol=tol,
                      max_iter=max_iter, convex_bound=convex_bound, **solve_options)
    return lmnn_s(problem, n_components, tol=tol, backend=backend, convex_bound=convex_bound, **solve_options)
