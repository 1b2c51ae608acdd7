r"""Many small LMNN problems of one shape, solved together by the JAX backend's one loop under ``vmap``.

Local metrics (Ramanan & Baker, PAMI 2011) need one LMNN problem per training exemplar, per test
point or per reference point: hundreds to thousands of problems on ``S`` points each (``S = 50``
neighbours). Solving them one by one costs a Python driver, a compilation per shape and
certificates each; here they are solved as one batch:

* **The local span.** A problem on ``S`` points in ``d`` dimensions depends on ``M`` only through
  :math:`Q^\top M Q`, ``Q`` an orthonormal basis of the span of the centred points
  (:math:`r \le S - 1` columns): every distance is :math:`d_M(x_a, x_b) = (x_a - x_b)^\top M (x_a -
  x_b)` with :math:`x_a - x_b = Q z`. The map :math:`M \mapsto Q^\top M Q` sends the PSD cone of
  :math:`\mathbb R^d` *onto* that of :math:`\mathbb R^r`, so

  .. math::

      \min_{M \succeq 0} f(Q^\top M Q) = \min_{N \succeq 0} f(N)

  (LMNN without a regulariser): the problem is solved exactly in ``r = min(d, S - 1)`` dimensions
  (zero-padded to one shape when a set spans fewer), and its certificate there is a certificate of the
  full problem. Every :math:`M` with :math:`Q^\top M Q = N^\star` is optimal; the one returned is
  :math:`M = Q N^\star Q^\top + P_\perp G P_\perp` (:math:`P_\perp = I - QQ^\top`), which agrees
  with a given base metric ``G`` (the global one) off the local span.
* **One compiled loop.** Every problem of the batch has the same shapes (``S`` points, ``r``
  dimensions, ``k`` targets, all triplets in one padded active set), so the JAX backend's public batch
  solve, :func:`metricopt.backends.jax.solve_batch` (its one loop, FISTA on the smoothed hinge, under
  ``jax.vmap`` over the batch, compiled once per shape, the solver's continuation between chunks),
  solves them together. The active set holds every triplet (no re-checks are needed).
* **Honest statuses.** Each problem's exact objective is recomputed in float64 from its metric;
  ``certify=True`` certifies each one (:func:`metricopt.certify`, status ``optimal`` only when its
  relative gap is at most ``tol``, else ``optimal_inaccurate``), otherwise the status is ``uncertified``;
  every status is the one status policy's (:func:`metricopt.certify.policy.decide`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from ..._validation import check_int, check_real
from ...errors import InputError

__all__ = ["LocalSet", "BatchResult", "solve_lmnn_batch", "span_basis"]


@dataclass
class LocalSet:
    """One local LMNN problem: points ``X`` (``S x d``), labels ``y`` and optional weights ``w``."""

    X: np.ndarray
    y: np.ndarray
    w: np.ndarray | None = None


@dataclass
class BatchResult:
    """Per problem: the metric in input space, the exact objective, the status (a
    :class:`~metricopt.solution.Status`), the certified gap."""

    metrics: list
    objectives: np.ndarray
    statuses: list
    rel_gaps: list
    iterations: int
    stats: dict = field(default_factory=dict)


def span_basis(X: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, Q)``: the centre of ``X`` and an orthonormal ``d x r`` basis of the span of the centred
    rows (zero columns where the span has fewer than ``r`` dimensions).

    Parameters
    ----------
    X : (m, d) ndarray
        The rows.
    r : int
        The number of basis columns.

    Returns
    -------
    mean : (d,) ndarray
        The centre of ``X``.
    Q : (d, r) ndarray
        The basis.
    """
    mu = X.mean(axis=0)
    Xc = X - mu
    U, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    rank = int(np.sum(s > 1e-10 * max(s[0] if s.size else 0.0, 1e-300)))
    Q = np.zeros((X.shape[1], r))
    m = min(rank, r)
    Q[:, :m] = Vt[:m].T
    return mu, Q


def solve_lmnn_batch(sets: list, k: int = 3, mu: float = 0.5, reg: float = 1e-2, base: ArrayLike | None = None,
                     max_iter: int = 2000, chunk: int = 40, tol: float = 1e-3, certify: bool = False,
                     s_stop: float = 1e-4, min_iter: int = 0, precondition: bool = True) -> BatchResult:
    r"""Solve one LMNN problem per local set, batched (see the module docstring).

    Parameters
    ----------
    sets : list of LocalSet
        All with the same number of points ``S`` and features ``d``; every class of a set must
        have at least ``k + 1`` points (of positive weight) and a set at least two classes.
    k, mu : LMNN's target-neighbour count and push weight.
    reg : float, default 1e-2
        Weight of a trace regulariser :math:`\lambda\,\mathrm{tr}(N)`, relative:
        :math:`\lambda = \text{reg}\,(1-\mu)\,\mathrm{tr}(P)/r` with ``P`` the pull matrix. On ``S``
        points in ``S - 1`` dimensions the pull matrix is singular (a target graph inside ``C`` classes
        spans at most ``S - C`` directions) and plain LMNN's infimum is approached only as ``M`` grows
        without bound along between-class directions; the trace term makes the minimum attained and the
        certificate's linear part positive definite. ``0``: plain LMNN.
    base : (d, d) array, optional
        The metric kept off each local span (default the identity).
    max_iter : int
        Iterations per problem at most.
    chunk : int
        Iterations per jitted chunk (continuation steps in between).
    tol : float
        Certified relative gap that makes a problem ``optimal`` (``certify=True``).
    certify : bool
        Certify every problem (a restricted dual each: costs about as much as the solve).
    s_stop : float
        Smoothing width at which a problem's continuation ends.
    min_iter : int, default 0
        Iterations run at least before the continuation may end at ``s_stop``.
    precondition : bool, default True
        Solve the local problems in the JAX backend's preconditioned coordinates (the pull matrix whitened;
        :func:`metricopt.backends.jax.solve_batch`).

    Returns
    -------
    BatchResult

    Raises
    ------
    InputError
        For an empty list of sets or sets of different shapes (and invalid options).
    """
    from ...backends.jax import solve_batch
    from ...certify import certify as certify_fn
    from ...certify import policy
    from ...certify.policy import NoCertificate, Outcome, SolverReport
    from ..lmnn.problem import LMNNProblem
    from ...problems.terms import Trace

    if not sets:
        raise InputError("solve_lmnn_batch needs at least one local set.")
    k = check_int(k, "k", low=1)
    mu = check_real(mu, "mu", low=0.0, high=1.0)
    max_iter = check_int(max_iter, "max_iter", low=1)
    chunk = check_int(chunk, "chunk", low=1)
    S, d = sets[0].X.shape
    for s in sets:
        if s.X.shape != (S, d):
            raise InputError(f"every local set must have the same shape ({S}, {d}); got {s.X.shape}.")
    r = min(d, S - 1)
    G = np.eye(d) if base is None else np.asarray(base, dtype=np.float64)
    problems, bases = [], []
    for s in sets:
        mean, Q = span_basis(s.X, r)
        Z = (s.X - mean) @ Q
        kw = {} if s.w is None else {"sample_weight": s.w}
        p = LMNNProblem(Z, s.y, k=k, mu=mu, search="brute", **kw)
        if reg > 0:  # the trace term, relative to the pull term's own scale
            lam = reg * (1.0 - mu) * float(np.trace(p.pull_matrix)) / r
            p = LMNNProblem(Z, s.y, k=k, mu=mu, search="brute", regularizer=Trace(lam),
                            target_neighbors=p.target_neighbors, **kw)  # the targets once, not searched again
        problems.append(p)
        bases.append(Q)
    solved = solve_batch(problems, max_iter=max_iter, chunk=chunk, s_stop=s_stop, min_iter=min_iter,
                         precondition=precondition)
    it, cap = solved.iterations, solved.stats["capacity"]
    metrics, objectives, statuses, gaps = [], [], [], []
    P_perp = [np.eye(d) - Q @ Q.T for Q in bases]
    # the loop's own word: its continuation ran (to s_stop or max_iter); the certificate, where taken, decides
    report = (SolverReport(Outcome.TIME_LIMIT, f"batched FISTA continuation stopped at the time limit after {it} "
                           "iterations") if solved.stats["out_of_time"] else
              SolverReport(Outcome.CONVERGED, f"batched FISTA continuation, {it} iterations"))
    for b, (p, Q) in enumerate(zip(problems, bases)):
        N = solved.points[b]["M"]
        objectives.append(p.objective(N))
        cert = certify_fn(p, N, tol=tol) if certify else None
        gaps.append(None if cert is None else float(cert.rel_gap))
        statuses.append(policy.decide(report, NoCertificate.NOT_TAKEN if cert is None else cert, p.is_convex)[0])
        Mb = Q @ N @ Q.T + P_perp[b] @ G @ P_perp[b]
        metrics.append(0.5 * (Mb + Mb.T))
    return BatchResult(metrics, np.asarray(objectives), statuses, gaps, it,
                       {"capacity": cap, "span_dim": r, "batch": len(sets)})

