r"""Lower bounds for LMNN-type problems from a dual-feasible point.

Write the problem (with optional trace / Frobenius regularisers folded into
:math:`P` and :math:`\lambda`) as

.. math::

    \min_{M \succeq 0}\ \langle P, M\rangle + \tfrac{\lambda}{2}\|M\|_F^2
    + \mu \sum_t w_t [1 - \langle A_t, M\rangle]_+ ,
    \qquad A_t = C_{il} - C_{ij},\ C_{ab} = (x_a - x_b)(x_a - x_b)^\top ,

with :math:`w_t = w_{i_t}` the weight of the triplet's anchor in weighted LMNN
(``problem.sample_weight``; :math:`w_t = 1` unweighted; triplets of weight-0 anchors are left out).
Writing each hinge as :math:`\max_{0 \le \alpha_t \le \mu w_t} \alpha_t (1 - \langle A_t, M\rangle)`
gives, for **any** :math:`\alpha` with :math:`0 \le \alpha_t \le \mu w_t` and
:math:`B = \sum_t \alpha_t A_t`, the weak-duality bound :math:`g(\alpha) = \sum_t \alpha_t + \min_{M \succeq 0} \langle P - B, M\rangle
+ \tfrac{\lambda}{2}\|M\|_F^2`:

* :math:`\lambda > 0`: :math:`g(\alpha) = \sum_t \alpha_t - \|\Pi_+(B - P)\|_F^2 / (2\lambda)`.
* :math:`\lambda = 0`, :math:`P \succ 0`: with :math:`\gamma` the largest generalised
  eigenvalue of :math:`(B, P)` and :math:`U` the objective at the candidate, every
  :math:`0 \le s \le s_{\max} = \min_{t:\, \alpha_t > 0} \mu w_t / \alpha_t` (so that :math:`s\alpha`
  stays dual feasible; :math:`\mu / \max_t \alpha_t` unweighted) gives
  :math:`LB(s) = s \sum_t \alpha_t + U \min(0, 1 - s\gamma)` (the optimum lies in
  :math:`\{\langle P, M\rangle \le U\}`, on which :math:`\langle P - sB, M\rangle \ge
  \min(0, 1 - s\gamma) U`).
* :math:`\lambda = 0`, :math:`P` singular, :math:`B` supported on the range of :math:`P`
  (:math:`B = Q Q^\top B Q Q^\top`, :math:`Q` an orthonormal basis of the range; a constant
  feature or data in a subspace): :math:`\langle P - sB, M\rangle = \langle Q^\top (P - sB) Q,
  Q^\top M Q\rangle` with :math:`Q^\top P Q \succ 0` and :math:`Q^\top M Q \succeq 0`, so the
  previous case applies to the pencil :math:`(Q^\top B Q, Q^\top P Q)`.
* otherwise (:math:`P` singular): :math:`LB = s \sum_t \alpha_t` for the
  largest :math:`s` with :math:`P - sB \succeq 0` (found by bisection on exact
  eigenvalues).

The point :math:`\alpha` is chosen from the candidate ``M``: 0 on triplets clearly
satisfied, one shared multiplier :math:`\tau \in [0, \mu]` on the triplets clearly violated
(:math:`\alpha_t = \tau w_t`: they enter as :math:`\tau \sum_t w_t A_t` and add
:math:`\tau \sum_t w_t`), and free values :math:`0 \le \alpha_t \le \mu w_t` on the triplets near the
margin, found by a small restricted dual program (the rank-two solver of :mod:`.rank2_dual` takes
the per-triplet bounds). Every number of the bound is then recomputed in float64 from that
:math:`\alpha`.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import scipy.linalg

from ..linalg import symmetrize
from ._dual import largest_psd_step, restricted_dual_program
from .dual import dual_summary
from .rank2_dual import solve_rank2_dual

#: half-width of the band of hinge arguments treated as "at the margin"
BAND = 1e-3
#: largest number of free multipliers in the restricted dual
MAX_FREE = 4000
#: the wider second attempt (see :func:`triplet_bound`): band half-width and number of free multipliers,
#: tried when the first bound's relative gap is above ``tol`` but within WIDE_WITHIN times it
WIDE_BAND = 1e-2
WIDE_MAX_FREE = 400
WIDE_WITHIN = 100.0
#: ... and only for tolerances of at least WIDE_MIN_TOL: at tol 1e-6 (digits PCA-30) the wide program did not
#: certify earlier and its cost spaced the certificates out (JAX solve 26 s without, 33 s with it)
WIDE_MIN_TOL = 1e-5
#: largest size (free multipliers x d^2) of the restricted dual's dense constraint block; beyond it the
#: free multipliers are capped (the bound stays valid, only looser): d <= 70 keeps MAX_FREE, d = 100 2000
MAX_FREE_ENTRIES = 20_000_000
#: P singular: B counts as living on the range of P when its part outside is below this, relative (rounding of
#: the eigenvectors; a constant feature gives exact zeros)
SUPPORT_RTOL = 1e-10
#: a kept search at an M this close (relative, max-norm) selects the free multipliers
REUSE_WITHIN = 1e-10
#: up to this many free multipliers the dedicated rank-two solver (:mod:`.rank2_dual`, O(m^2 d + m^3) per Newton
#: step) is used; beyond it, or when it cannot start (P singular) or with a Frobenius term, the CVXPY program
RANK2_MAX_FREE = 1500


def _restricted_dual(problem, P, lam, mu, Tv, Tn, Bv, accuracy, wv=None, wn=None):
    """The restricted dual's multipliers ``(tau, alpha near the margin)``, or ``None`` when no solver produced
    a point. One multiplier ``tau in [0, mu]`` is shared by the violated triplets ``Tv`` (their alpha is
    ``tau w_t``, ``Bv = sum_t w_t A_t``); those of the triplets ``Tn`` near the margin are free in
    ``[0, mu w_t]``. ``wv``, ``wn``: the anchors' weights of ``Tv`` and ``Tn`` (``None``: unweighted)."""
    cv = len(Tv) if wv is None else float(np.sum(wv))
    un = mu if wn is None else mu * wn  # upper bounds of the free multipliers
    factors = getattr(problem, "triplet_factors", None)
    if lam == 0 and factors is not None and len(Tn) <= RANK2_MAX_FREE:
        U, Vf = factors(Tn[:, 0], Tn[:, 1], Tn[:, 2])
        found = solve_rank2_dual(P, U, Vf, mu, G0=Bv if len(Tv) else None, c0=cv, accuracy=accuracy,
                                 upper=None if wn is None else un)
        if found is not None:
            return found
    d = problem.d
    A = problem.triplet_rows(Tn[:, 0], Tn[:, 1], Tn[:, 2]) if len(Tn) else np.zeros((0, d * d))
    t = cp.Variable(nonneg=True)
    a = cp.Variable(len(Tn), nonneg=True) if len(Tn) else None
    Bexpr = t * Bv + (cp.reshape(A.T @ a, (d, d), order="C") if a is not None else 0)
    cons = [t <= mu] + ([a <= un] if a is not None else [])
    obj = t * cv + (cp.sum(a) if a is not None else 0)
    if not restricted_dual_program(obj, cons, Bexpr, P, lam):
        return None
    tv = float(np.clip(t.value, 0, mu))
    an = np.clip(a.value, 0, un) if a is not None else np.zeros(0)
    return tv, an


def _scatter(problem, T, w):
    return problem.triplet_scatter(T[:, 0], T[:, 1], T[:, 2], w)


def _scaled_bound(P, B, alpha_sum, smax, upper):
    """``max_s s sum(alpha) + U min(0, 1 - s gamma)`` over ``s in {smax, 1/gamma}``, ``gamma`` the largest
    generalised eigenvalue of ``(B, P)``, ``P`` positive definite (the module docstring's second case)."""
    gamma = float(scipy.linalg.eigh(B, P, eigvals_only=True, subset_by_index=[P.shape[0] - 1] * 2)[0])
    gamma = gamma * (1 + 1e-10) + 1e-14 * abs(gamma)  # guard against rounding in the eigensolver
    cands = [smax]
    if gamma > 0:
        cands.append(min(smax, 1.0 / gamma))
    return max(s * alpha_sum + upper * min(0.0, 1.0 - s * gamma) for s in cands)


def bound_from_alpha(P, lam, B, alpha_sum, smax, upper):
    """The weak-duality bound for one dual point (see the module docstring): ``B = sum_t alpha_t A_t``,
    ``alpha_sum = sum_t alpha_t`` and ``smax`` the largest scaling ``s`` with ``s alpha_t <= mu w_t`` for
    every ``t`` (``mu / max_t alpha_t`` unweighted; used for ``lam = 0`` only)."""
    if alpha_sum <= 0:
        return 0.0, {}
    if lam > 0:
        w = np.linalg.eigvalsh(symmetrize(B - P))
        lb = alpha_sum - float(np.sum(np.clip(w, 0, None) ** 2)) / (2 * lam)
        return lb, {"dual form": "Frobenius-regularised (closed form)"}
    wP, VP = np.linalg.eigh(P)
    if wP[0] > 1e-12 * max(wP[-1], 1e-300):
        return _scaled_bound(P, B, alpha_sum, smax, upper), {"dual form": "scaled (P positive definite)"}
    Q = VP[:, wP > 1e-12 * max(wP[-1], 1e-300)]
    if Q.shape[1]:
        Bq = symmetrize(Q.T @ B @ Q)
        if np.linalg.norm(B - Q @ Bq @ Q.T) <= SUPPORT_RTOL * np.linalg.norm(B):
            # B lives on the range of P (a constant feature, data in a subspace): the scaled bound holds there
            return (_scaled_bound(symmetrize(Q.T @ P @ Q), Bq, alpha_sum, smax, upper),
                    {"dual form": f"scaled on the range of P (rank {Q.shape[1]} of {P.shape[0]})"})
    return largest_psd_step(P, -B, smax) * alpha_sum, {"dual form": "scaled to P - sB PSD (P singular)"}


def triplet_bound(problem, M, variables, summary, feas_tol, tol):
    """The certifier of problems over a PSD ``M`` whose loss is a triplet hinge (LMNN and its
    variants, any linear / Frobenius terms): ``(upper, lower, details)``.

    First the restricted dual over the narrow band (:data:`BAND`, cheap). Where its relative gap
    is above ``tol`` but within :data:`WIDE_WITHIN` times it, a second restricted dual frees the
    :data:`WIDE_MAX_FREE` triplets nearest the margin within :data:`WIDE_BAND` (dearer: a larger
    conic program), and the better bound is kept. Near the optimum the narrow band fixes the
    multipliers of triplets whose hinge is small but not yet within ``BAND`` of the margin, and
    its bound lags the iterate by orders of magnitude (digits PCA-30: 2.9e-2 against 3.8e-5 for
    the same ``M``); far from it the second program would not reach ``tol`` and is not tried, nor
    for ``tol`` below :data:`WIDE_MIN_TOL`."""
    V = problem.point(M)
    upper = problem._objective(V)
    lower, info = lmnn_lower_bound(problem, V, upper, summary=summary)
    rel = (upper - lower) / max(abs(upper), 1e-12)
    if tol >= WIDE_MIN_TOL and tol < rel <= WIDE_WITHIN * tol:
        wide, wide_info = lmnn_lower_bound(problem, V, upper, band=WIDE_BAND, max_free=WIDE_MAX_FREE, summary=summary)
        if wide > lower:
            lower, info = wide, wide_info
    return upper, lower, info


def lmnn_lower_bound(problem, V, upper, band=BAND, max_free=MAX_FREE, summary=None, accuracy=None):
    """Return ``(lower_bound, details)`` for an LMNN-type problem at the point ``V`` (``summary``:
    the problem's :class:`~metricopt.certify.DualSummary`, computed when not given; ``accuracy``:
    the absolute accuracy asked of the restricted dual, default ``1e-9 |upper|``)."""
    if summary is None:
        summary = dual_summary(problem)
    P, lam, const = summary.P, summary.lam, summary.constant
    _, piece = summary.loss("triplet_hinge")
    mu = piece.weight if piece is not None else 0.0
    if lam == 0.0 and np.linalg.eigvalsh(P)[0] < -1e-12 * max(1.0, float(np.abs(P).max())):
        # <P, M> unbounded below on the PSD cone along a negative direction of P: no finite bound here
        return -np.inf, {"dual form": "none: the linear part is indefinite and nothing bounds M"}
    if piece is None or mu == 0.0:
        # min <P, M> + lam/2 ||M||^2 over the PSD cone is 0 (P PSD), attained at M = 0
        return const, {"dual form": "no hinge term"}
    upper = upper - const  # the bounds below are for the objective without its constant
    accuracy = 1e-9 * max(abs(upper), 1e-12) if accuracy is None else float(accuracy)
    max_free = min(int(max_free), max(1, MAX_FREE_ENTRIES // problem.d ** 2))
    # which multipliers are free is a selection only (the bound holds for any): a search at an M within
    # rounding of this one (the JAX backend's re-check of the same iterate, before the PSD clean-up) serves
    i, j, l, h = problem.find_triplets(V["M"], margin=band, reuse_within=REUSE_WITHIN)
    T = np.stack([i, j, l], 1)
    viol = h > band
    near = ~viol
    if near.sum() > max_free:  # keep the ones closest to the margin free, fix the rest
        order = np.argsort(np.abs(h[near]))
        idx = np.flatnonzero(near)
        near = np.zeros_like(near)
        near[idx[order[:max_free]]] = True
        viol = ~near & (h > 0)
    Tv, Tn = T[viol], T[near]
    # weighted LMNN: alpha_t in [0, mu w_t] (w_t > 0: find_triplets leaves weight-0 anchors out)
    w = getattr(problem, "sample_weight", None)
    wv, wn = (None, None) if w is None else (w[Tv[:, 0]], w[Tn[:, 0]])
    Bv = _scatter(problem, Tv, wv) if len(Tv) else np.zeros_like(P)  # sum_t w_t A_t over the violated

    candidates = []
    # heuristic dual point: alpha_t = mu w_t on every violated triplet
    if len(Tv):
        candidates.append((mu, np.zeros(len(Tn))))
    # restricted dual: one shared multiplier on the violated triplets, free ones near the margin
    point = _restricted_dual(problem, P, lam, mu, Tv, Tn, Bv, accuracy, wv, wn)
    if point is not None:
        candidates.append(point)

    best, info = 0.0, {}
    for tau, an in candidates:
        av = np.full(len(Tv), tau) if wv is None else tau * wv  # alpha on the violated triplets
        alpha_sum = float(av.sum() + an.sum())
        if alpha_sum <= 0:
            continue
        if wv is None:
            smax = mu / float(max(av.max(initial=0.0), an.max(initial=0.0)))
        else:  # largest s with s alpha_t <= mu w_t for every t
            a, cap = np.concatenate([av, an]), mu * np.concatenate([wv, wn])
            smax = float(np.min(cap[a > 0] / a[a > 0]))
        B = np.zeros_like(P)
        if len(av):
            B += tau * Bv  # one shared multiplier on the violated triplets
        if len(Tn):
            B += _scatter(problem, Tn, an)
        lb, inf = bound_from_alpha(P, lam, symmetrize(B), alpha_sum, smax, upper)
        if lb > best:
            best, info = lb, inf
    best += const
    info.update({"violated triplets (alpha fixed)": int(len(Tv)), "triplets near margin (alpha free)": int(len(Tn)),
                 "margin band": band})
    return best, info
