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
  dimensions, ``k`` targets, all triplets in one padded active set), so
  :func:`metricopt.backends.jax.loop.run_chunk` (FISTA on the smoothed hinge, the backend's default
  solver) runs under ``jax.vmap`` over the batch, compiled once per shape; between chunks the
  solver's own continuation (:meth:`~metricopt.backends.jax.solvers.FISTA.between_chunks`) shrinks
  each problem's smoothing width. The active set holds every triplet (no re-checks are needed).
* **Honest statuses.** Each problem's exact objective is recomputed in float64 from its metric;
  ``certify=True`` certifies each one (:func:`metricopt.certify`, status ``optimal`` only when its
  relative gap is at most ``tol``, else ``optimal_inaccurate``), otherwise the status is ``uncertified``;
  every status is the one status policy's (:func:`metricopt.certify.policy.decide`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from .._validation import check_int, check_real
from ..errors import InputError

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


@functools.lru_cache(maxsize=1)
def _run_batch_fn():
    """The jitted, vmapped chunk (built once: JAX then caches one compilation per shape)."""
    import jax

    from ..backends.jax.loop import run_chunk

    @functools.partial(jax.jit, static_argnames=("solver", "term_classes", "geometry", "roles"))
    def run_batch(solver, term_classes, geometry, data, gdata, actives, state, n_steps, roles=()):
        one = lambda d, g, a, s: run_chunk(solver, term_classes, geometry, d, g, a, s, n_steps, roles)
        return jax.vmap(one)(data, gdata, actives, state)

    return run_batch


def _stack(trees):
    import jax

    return jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *trees)


def _unstack(tree, b):
    import jax

    return jax.tree_util.tree_map(lambda x: np.asarray(x)[b], tree)


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
        Solve the local problems in the JAX backend's preconditioned coordinates (``Setup(..., precondition=...)``
        of :mod:`metricopt.backends.jax.geometry`: the pull matrix whitened).

    Returns
    -------
    BatchResult

    Raises
    ------
    InputError
        For an empty list of sets or sets of different shapes (and invalid options).
    """
    import jax
    import jax.numpy as jnp

    from ..backends.jax.backend import best_scale
    from ..backends.jax.geometry import Setup
    from ..backends.jax.solvers import FISTA
    from ..certify import certify as certify_fn
    from ..certify import policy
    from ..certify.policy import NoCertificate, Outcome, SolverReport
    from ..problems.lmnn import LMNNProblem
    from ..problems.terms import Trace

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
    solver = FISTA()
    problems, bases, setups = [], [], []
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
        setups.append(Setup(p, precondition=precondition))
    terms0 = problems[0].jax_terms(online=False)
    term_classes = tuple(type(t) for t in terms0)
    pieces = [t.dual_piece(problems[0]) for t in terms0]
    roles = tuple(None if piece is None else piece.loss for piece in pieces)
    geometry = setups[0].geometry
    # every triplet active, in one padded capacity for the whole batch
    hinge_idx = [i for i, t in enumerate(terms0) if t.uses_working_set]
    counts = [p.n_triplets for p in problems]
    cap = max(256, 1 << max(max(counts) - 1, 0).bit_length())
    data, actives, states = [], [], []
    with jax.enable_x64(True):
        for p, st in zip(problems, setups):
            terms = p.jax_terms(online=False)
            data.append(tuple({kk: np.asarray(v) for kk, v in t.jax_data(p).items()} for t in terms))
            Z0 = st.from_point({"M": best_scale(p) * np.eye(r)})
            M0 = st.to_point(Z0)["M"]
            acts = []
            for i, t in enumerate(terms):
                if i in hinge_idx:
                    act = t.jax_active_set(p, M0, np.inf, min_capacity=cap)[0]
                    acts.append(act)
                else:
                    acts.append(None)
            actives.append(tuple(acts))
            states.append({kk: np.asarray(v) for kk, v in solver.init(jnp.asarray(Z0)).items()})
        data_b, act_b, state_b = _stack(data), _stack(actives), _stack(states)
        gdata_b = _stack([{"T": np.asarray(st.gdata["T"])} if "T" in st.gdata else {} for st in setups])
        run_batch = _run_batch_fn()
        it = 0
        B = len(sets)
        while it < max_iter:
            n = min(chunk, max_iter - it)
            state_b = run_batch(solver, term_classes, geometry, data_b, gdata_b,
                                act_b, state_b, n, roles)
            state_b = jax.tree_util.tree_map(np.asarray, state_b)
            it += n
            # the solver's own continuation, problem by problem (host side, cheap)
            new = [solver.between_chunks(_unstack(state_b, b), True) for b in range(B)]
            state_b = _stack([{kk: np.asarray(v) for kk, v in st.items()} for st in new])
            if np.all(state_b["s"] <= s_stop) and it >= min_iter:
                break
    metrics, objectives, statuses, gaps = [], [], [], []
    P_perp = [np.eye(d) - Q @ Q.T for Q in bases]
    # the loop's own word: its continuation ran (to s_stop or max_iter); the certificate, where taken, decides
    report = SolverReport(Outcome.CONVERGED, f"batched FISTA continuation, {it} iterations")
    for b, (p, Q) in enumerate(zip(problems, bases)):
        N = setups[b].to_point(state_b["M"][b])["M"]
        objectives.append(p.objective(N))
        cert = certify_fn(p, N, tol=tol) if certify else None
        gaps.append(None if cert is None else float(cert.rel_gap))
        statuses.append(policy.decide(report, NoCertificate.NOT_TAKEN if cert is None else cert, p.is_convex)[0])
        Mb = Q @ N @ Q.T + P_perp[b] @ G @ P_perp[b]
        metrics.append(0.5 * (Mb + Mb.T))
    return BatchResult(metrics, np.asarray(objectives), statuses, gaps, it,
                       {"capacity": cap, "span_dim": r, "batch": len(sets)})

