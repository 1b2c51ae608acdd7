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
* :math:`\lambda = 0`: for every :math:`0 \le s \le s_{\max} = \min_{t:\, \alpha_t > 0} \mu w_t / \alpha_t` (so that
  :math:`s\alpha` stays dual feasible; :math:`\mu / \max_t \alpha_t` unweighted) and every :math:`c \ge 0` with
  :math:`(1 + c) P - sB \succeq 0`, :math:`LB = s \sum_t \alpha_t - c\, U`, :math:`U` the objective at the candidate
  (the optimum lies in :math:`\{\langle P, M\rangle \le U\}`, on which :math:`\langle P - sB, M\rangle \ge -cU`).
  With :math:`P \succ 0` the best :math:`c` is :math:`s\gamma - 1`, :math:`\gamma` the largest generalised eigenvalue
  of :math:`(B, P)`; :func:`_pencil_bound` certifies :math:`c` through eigenvalue bounds that rounding can only
  lower (:mod:`.verified`), after dropping the coordinates on which ``P`` and ``B`` are exactly zero (a constant
  feature) and an exact power-of-two equilibration. Where ``P`` is singular or nearly so along a direction on
  which ``B`` is not negative, no :math:`c` qualifies and only :math:`c = 0` remains (:math:`P - sB \succeq 0`): the
  hinge can then vanish at almost no pull cost (a label-leaking feature at 1e-12 of the others), and a
  tolerance that called such a direction "outside the range of P" gave bounds above the optimum.

The point :math:`\alpha` is chosen from the candidate ``M``: 0 on triplets clearly
satisfied, one shared multiplier :math:`\tau \in [0, \mu]` on the triplets clearly violated
(:math:`\alpha_t = \tau w_t`: they enter as :math:`\tau \sum_t w_t A_t` and add
:math:`\tau \sum_t w_t`), and free values :math:`0 \le \alpha_t \le \mu w_t` on the triplets near the
margin, found by a small restricted dual program (the rank-two solver of :mod:`.rank2_dual` takes
the per-triplet bounds). Every number of the bound is then recomputed in float64 from that
:math:`\alpha`, each rounding (the sums forming ``P`` and ``B``, the eigenvalues, the scalings, the objective
at the candidate) taken on the side that lowers the bound: no tolerance can raise it.

Other scalar triplet losses (dual piece ``"triplet_loss"``: the squared hinge, the Huber hinge; see
:mod:`metricopt.losses`) replace :math:`\sum_t \alpha_t` by :math:`\sum_t (\alpha_t - \mu w_t\,
\ell^*(\alpha_t / (\mu w_t)))` with :math:`0 \le \alpha_t \le \mu w_t \bar a` and need no restricted dual: a
differentiable loss determines its multipliers, :math:`\alpha_t = \mu w_t\, \ell'(h_t)` at the candidate (exact
at the optimum). For :math:`\lambda = 0` the scaling :math:`s` of the pencil bound then trades the concave
:math:`\varphi(s) = s \sum_t \alpha_t - \sum_t \mu w_t \ell^*(s \alpha_t / (\mu w_t))` against :math:`c\,U`
(:func:`loss_lower_bound`, :func:`_pencil_bound_conjugate`); the conjugates are rounded up.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import math
from typing import TYPE_CHECKING, Any

import cvxpy as cp
import numpy as np
from numpy.typing import ArrayLike

from ..errors import NotCertifiableError
from ..linalg import pair_abs_scatter, symmetrize
from ..losses import ScalarLoss, round_up
from ._dual import restricted_dual_program
from .dual import dual_summary
from .rank2_dual import solve_rank2_dual
from .verified import EPS, congruence, eig_error, gamma, min_eig_lower, power_of_two_scaling

if TYPE_CHECKING:
    from .dual import DualSummary

#: half-width of the band of hinge arguments treated as "at the margin"
BAND = 1e-3
#: largest number of free multipliers in the restricted dual
MAX_FREE = 4000
#: the wider second attempt (see :func:`triplet_bound`): band half-width and number of free multipliers,
#: tried when the first bound's relative gap is above ``tol`` and at most WIDE_CEIL (whatever ``tol``: a smaller
#: ``tol`` never gets a looser bound), unless the caller asked for the narrow band only (:func:`narrow_only`)
WIDE_BAND = 1e-2
WIDE_MAX_FREE = 400
WIDE_CEIL = 1e-2
#: largest size (free multipliers x d^2) of the restricted dual's dense constraint block; beyond it the
#: free multipliers are capped (the bound stays valid, only looser): d <= 70 keeps MAX_FREE, d = 100 2000
MAX_FREE_ENTRIES = 20_000_000
#: lambda of the probabilistic summation bound lambda sqrt(N) eps (see :func:`_formation_errors`)
SUM_ROUNDING_LAMBDA = 14.0
#: a kept search at an M this close (relative, max-norm) selects the free multipliers
REUSE_WITHIN = 1e-10
#: up to this many free multipliers the dedicated rank-two solver (:mod:`.rank2_dual`, O(m^2 d + m^3) per Newton
#: step) is used; beyond it, or when it cannot start (P singular) or with a Frobenius term, the CVXPY program
RANK2_MAX_FREE = 1500
#: above this dimension the restricted dual's CVXPY program (over the d x d PSD cone) is not built: at d = 200 it
#: took the 23 GB of a 2-core machine and was killed (the Olivetti faces at 200 eigenfaces, P singular so that the
#: rank-two solver could not start); without it the bound keeps its other dual points (valid, looser)
CONIC_MAX_D = 100
#: inside :func:`narrow_only` with a solver's :func:`ramp_hint`, where the ramp dual points leave a relative gap above
#: this, the restricted dual around the ramp (:func:`_ramp_restricted`) is not tried: it lowered MNIST-5k's gaps by
#: factors of 1.6-2.3 (not at all at the start, 0.963 by the ramps), so from there it certifies nothing a solver
#: asks, and at d = 164 it cost about half the first certificate (whatever ``tol``: a smaller ``tol`` never gets a
#: looser bound). The band's program is still tried: at an exact optimum it certifies where wide ramps do not
RESTRICTED_CEIL = 0.05
#: in the same case, the band's restricted program keeps at most this many free multipliers (a valid, looser bound: far
#: from the optimum it certifies nothing either; synthetic 20,000 x 50 at its start on an H100's 16 host cores, 1,500
#: of them took 11 s of a 34 s solve). Not skipped: at an exact optimum of a small problem the band certifies where
#: the ramps cannot
FAR_MAX_FREE = 200


def _restricted_dual(problem, P, lam, mu, Tv, Tn, Bv, accuracy, wv=None, wn=None):
    """The restricted dual's multipliers ``(tau, alpha near the margin)``, or ``None`` when no solver produced
    a point. One multiplier ``tau in [0, mu]`` is shared by the violated triplets ``Tv`` (their alpha is
    ``tau w_t``, ``Bv = sum_t w_t A_t``); those of the triplets ``Tn`` near the margin are free in
    ``[0, mu w_t]``. ``wv``, ``wn``: the anchors' weights of ``Tv`` and ``Tn`` (``None``: unweighted). Above
    :data:`CONIC_MAX_D` dimensions only the rank-two solver is tried (the conic program would not fit in memory)."""
    cv = len(Tv) if wv is None else float(np.sum(wv))
    un = mu if wn is None else mu * wn  # upper bounds of the free multipliers
    factors = problem.triplet_factors
    if lam == 0 and factors is not None and len(Tn) <= RANK2_MAX_FREE:
        U, Vf = factors(Tn[:, 0], Tn[:, 1], Tn[:, 2])
        found = solve_rank2_dual(P, U, Vf, mu, G0=Bv if len(Tv) else None, c0=cv, accuracy=accuracy,
                                 upper=None if wn is None else un)
        if found is not None:
            return found
    d = problem.d
    if d > CONIC_MAX_D:
        return None
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


def largest_dual_scaling(alpha: ArrayLike, caps: ArrayLike) -> float:
    r"""The largest :math:`s` with :math:`s\,\alpha_t \le \text{cap}_t` for every :math:`t` (the dual box of the
    hinge, :math:`\text{cap}_t = \mu w_t`; a scalar cap for unweighted LMNN): :math:`\min_{t: \alpha_t > 0}
    \text{cap}_t / \alpha_t`, lowered by a few ulps so that the products hold after rounding. The binding
    multiplier is the one with the smallest ratio: a larger :math:`s` would push it out of its box.

    Parameters
    ----------
    alpha : (m,) array_like
        The multipliers :math:`\alpha_t`.
    caps : (m,) array_like or float
        Their upper bounds :math:`\text{cap}_t` (broadcast to ``alpha``'s shape).

    Returns
    -------
    float
        The largest scaling (``inf`` when no multiplier is positive).
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    caps = np.broadcast_to(np.asarray(caps, dtype=np.float64), alpha.shape)
    pos = alpha > 0
    if not pos.any():
        return np.inf
    return float(np.min(caps[pos] / alpha[pos])) * (1.0 - 4 * EPS)


def _safe_upper(upper):
    """The objective at the candidate, rounded up: the optimum lies in ``{<P, M> <= U}`` for the exact objective,
    which the float64 evaluation may undershoot by a few ulps per term."""
    return max(float(upper), 0.0) * (1.0 + 1e-12) + 1e-300


def _pencil_prepare(P, B, EP=0.0, EB=0.0):
    """The common part of the pencil bounds (:func:`_pencil_bound`, :func:`_pencil_bound_conjugate`): ``None`` when
    ``P``, ``B`` and their rounding bounds vanish, else ``(lower_of, lP, gam, live)`` with ``lower_of(s)`` a certified
    lower bound on the smallest eigenvalue of ``W^T (P - sB) W``, ``lP`` one on that of ``W^T P W``, ``gam`` the
    (computed) largest generalised eigenvalue of ``(B, P)`` and ``live`` the coordinates kept (see
    :func:`_pencil_bound`)."""
    EP = np.broadcast_to(np.asarray(EP, dtype=np.float64), P.shape)
    EB = np.broadcast_to(np.asarray(EB, dtype=np.float64), P.shape)
    live = np.any(P != 0, axis=0) | np.any(B != 0, axis=0) | np.any(EP != 0, axis=0) | np.any(EB != 0, axis=0)
    if not live.any():
        return None
    ix = np.ix_(live, live)
    P, B, EP, EB = P[ix], B[ix], EP[ix], EB[ix]
    c = power_of_two_scaling(np.maximum(np.diag(P), np.abs(np.diag(B))))
    C = np.outer(c, c)
    P, B, EP, EB = P * C, B * C, EP * C, EB * C  # exact
    w, V = np.linalg.eigh(P)
    top = max(float(w[-1]), 0.0)
    W = V / np.sqrt(np.maximum(w, 1e-13 * top))[None, :] if top > 0 else np.eye(len(w))
    Pw, EPw = congruence(W, P, EP)
    lP = min_eig_lower(Pw, EPw)
    gam = float(np.linalg.eigvalsh(W.T @ B @ W)[-1])

    def lower_of(s):
        H = P - s * B
        G, EG = congruence(W, H, EP + s * EB + 2 * EPS * (np.abs(P) + np.abs(s * B)))
        return min_eig_lower(G, EG)

    return lower_of, lP, gam, live


def _best_scaling(value, cands, s_top, U, lower_of, lP, live):
    r"""The best certified bound over the candidate scalings (:func:`_pencil_bound`): ``value(s)`` the loss part of
    the dual function along :math:`s\alpha` (a certified lower bound: :math:`s\sum_t\alpha_t` for the hinge), each
    ``s`` paying :math:`cU` with :math:`c = \max(0, -\ell_G) / \ell_P`; where ``P`` is singular and nothing
    positive was found, the largest ``s <= s_top`` with ``P - sB`` certifiably PSD (bisection). Returns
    ``(bound, form, s)``."""
    best, form, scale = 0.0, "none (P - sB is not certifiably PSD for any s > 0)", 0.0
    for s in cands:
        lG = lower_of(s)
        if lG >= 0:
            lb = value(s)
        elif lP > 0:
            lb = value(s) + U * lG / lP
        else:
            continue
        if lb > best:
            k = int(live.sum())
            best, scale = lb, s
            form = ("scaled to P - sB PSD" if lP <= 0 else "scaled (P positive definite)" if k == len(live)
                    else f"scaled on the range of P (rank {k} of {len(live)})")
    if lP <= 0 and best <= 0:  # P (numerically) singular there: the largest s with P - sB certifiably PSD
        lo, hi = 0.0, s_top
        if lower_of(hi) >= 0:
            lo = hi
        else:
            for _ in range(60):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if lower_of(mid) >= 0 else (lo, mid)
        if value(lo) > best:
            best, form, scale = value(lo), "scaled to P - sB PSD (P singular)", lo
    return best, form, scale


def _pencil_bound(P, B, alpha_sum, smax, upper, EP=0.0, EB=0.0):
    r"""The bound of the module docstring for :math:`\lambda = 0`, every step on the safe side of rounding
    (:mod:`.verified`): ``(bound, details)``.

    For any invertible :math:`W`, :math:`s \in [0, s_{\max}]` and :math:`c \ge 0` with
    :math:`(1 + c) P - sB \succeq 0`, every :math:`M \succeq 0` with :math:`\langle P, M\rangle \le U` has
    :math:`\langle P - sB, M\rangle \ge -cU`, so :math:`g \ge s\sum_t\alpha_t - cU`. With
    :math:`\ell_G \le \lambda_{\min}(W^\top (P - sB) W)` and :math:`\ell_P \le \lambda_{\min}(W^\top P W)`
    certified lower bounds, :math:`c = \max(0, -\ell_G) / \ell_P` qualifies when :math:`\ell_P > 0`, and
    :math:`c = 0` whenever :math:`\ell_G \ge 0` (whatever :math:`P`). :math:`W` is an approximate
    :math:`P^{-1/2}` (any invertible matrix is valid; this one makes the bound tight: then :math:`c \approx
    s\gamma - 1`, :math:`\gamma` the largest generalised eigenvalue of :math:`(B, P)`). Before that, rows and
    columns that are exactly zero in both ``P`` and ``B`` (a feature constant over every difference) are
    dropped, and a power-of-two congruence gives ``P`` a unit diagonal: both exact. No tolerance decides which
    directions count as "outside the range of P": a direction on which ``P`` is exactly or nearly singular
    and ``B`` is not negative makes :math:`\ell_G < 0` and :math:`\ell_P \le 0`, and the bound falls back to
    the largest ``s`` with :math:`\ell_G \ge 0` (``0`` when there is none: the hinge can then vanish at no pull
    cost, and no positive bound holds). ``EP``, ``EB``: elementwise bounds on the rounding in ``P`` and ``B``."""
    U = _safe_upper(upper)
    prepared = _pencil_prepare(P, B, EP, EB)
    if prepared is None:
        return smax * alpha_sum, {"dual form": "P = B = 0"}
    lower_of, lP, gam, live = prepared

    cands = [smax] + ([min(smax, 1.0 / gam)] if gam > 0 else [])
    best, form, _ = _best_scaling(lambda s: s * alpha_sum, cands, smax, U, lower_of, lP, live)
    return best, {"dual form": form}


def bound_from_alpha(P: np.ndarray, lam: float, B: np.ndarray, alpha_sum: float, smax: float, upper: float,
                     EP: np.ndarray | float = 0.0, EB: np.ndarray | float = 0.0) -> tuple[float, dict]:
    r"""The weak-duality bound for one dual point (see the module docstring; Weinberger & Saul, JMLR 2009,
    Sec. 3.4, Eq. 14, for the LMNN program).

    :math:`\lambda > 0`: :math:`g(\alpha) = \sum_t \alpha_t - \|\Pi_+(B - P)\|_F^2 / (2\lambda)`;
    :math:`\lambda = 0`: the pencil bound over the scalings :math:`s \le s_{\max}`. Every rounding lowers the
    bound (:mod:`.verified`).

    Parameters
    ----------
    P : (d, d) ndarray
        The linear part (pull and regularisers).
    lam : float
        The Frobenius (strong-convexity) constant :math:`\lambda`.
    B : (d, d) ndarray
        :math:`B = \sum_t \alpha_t A_t`.
    alpha_sum : float
        :math:`\sum_t \alpha_t`.
    smax : float
        The largest scaling ``s`` with ``s alpha_t <= mu w_t`` for every ``t`` (``mu / max_t alpha_t``
        unweighted; used for ``lam = 0`` only).
    upper : float
        The objective at the candidate (the pencil bound's :math:`U`).
    EP, EB : (d, d) ndarray or float, default 0.0
        Elementwise bounds on the rounding in ``P`` and ``B``.

    Returns
    -------
    lower : float
        The lower bound (0.0 when ``alpha_sum <= 0``).
    details : dict
        The dual form used.
    """
    if alpha_sum <= 0:
        return 0.0, {}
    if lam > 0:
        D = symmetrize(B - P)
        err = eig_error(D, np.asarray(EP) + np.asarray(EB) + 2 * EPS * (np.abs(B) + np.abs(P)))
        w = np.linalg.eigvalsh(D) + err  # each exact eigenvalue is at most its computed one plus err
        lb = alpha_sum - float(np.sum(np.clip(w, 0, None) ** 2)) / (2 * lam) * (1 + 8 * EPS * len(w))
        return lb, {"dual form": "Frobenius-regularised (closed form)"}
    return _pencil_bound(P, B, alpha_sum, smax, upper, EP, EB)


_NARROW_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("narrow_only", default=False)
_RAMP_HINT: contextvars.ContextVar[tuple] = contextvars.ContextVar("ramp_hint", default=())


@contextlib.contextmanager
def ramp_hint(*widths: float) -> Iterator[None]:
    """Within this block, the LMNN bound tries the ramp dual points of these widths instead of
    :data:`RAMP_WIDTHS` (:func:`_ramp_bounds`): the JAX backend passes the smoothing widths its iterate was computed
    at, whose ramps are that iterate's own dual estimate (three bounds instead of six at every certificate). Only a
    selection of dual points: every bound stays valid.

    Parameters
    ----------
    *widths : float
        The widths (non-positive ones are ignored).

    Yields
    ------
    None
        A context manager (``with ramp_hint(s): ...``).
    """
    token = _RAMP_HINT.set(tuple(float(w) for w in widths if w > 0))
    try:
        yield
    finally:
        _RAMP_HINT.reset(token)


@contextlib.contextmanager
def narrow_only() -> Iterator[None]:
    """Within this block, :func:`triplet_bound` uses the narrow band only, with at most :data:`RANK2_MAX_FREE` free
    multipliers (the rank-two solver's size: 20,000 x 50 at its start spent 23 s of a 32 s certificate in a conic
    program over 4,000), and POLA's certificate skips a large
    restricted dual program far from the optimum (:data:`metricopt.certify.pairs.NARROW_MAX_FREE`): cheaper, possibly
    looser, bounds, never higher ones.

    Yields
    ------
    None
        A context manager (``with narrow_only(): ...``).
    """
    token = _NARROW_ONLY.set(True)
    try:
        yield
    finally:
        _NARROW_ONLY.reset(token)


def triplet_bound(problem: Any, M: np.ndarray, variables: dict, summary: DualSummary, feas_tol: float,
                  tol: float) -> tuple[float, float, dict]:
    """The certifier of problems over a PSD ``M`` whose loss is a triplet hinge (LMNN and its
    variants, any linear / Frobenius terms) or another scalar triplet loss (``"triplet_loss"``:
    :func:`loss_lower_bound`): ``(upper, lower, details)``.

    First the restricted dual over the narrow band (:data:`BAND`, cheap). Where its relative gap
    is above ``tol`` and at most :data:`WIDE_CEIL`, a second restricted dual frees the
    :data:`WIDE_MAX_FREE` triplets nearest the margin within :data:`WIDE_BAND` (dearer: a larger
    conic program), and the better bound is kept. Near the optimum the narrow band fixes the
    multipliers of triplets whose hinge is small but not yet within ``BAND`` of the margin, and
    its bound lags the iterate by orders of magnitude (digits PCA-30: 2.9e-2 against 3.8e-5 for
    the same ``M``); far from it the second program would not reach ``tol`` and is not tried. The rule
    depends on ``tol`` only through "the first bound already suffices", so a smaller ``tol`` never gets a
    looser bound for the same ``M``. Inside :func:`narrow_only` (the JAX backend's certificates before its
    last one: the wide program rarely certifies earlier and its cost spaces the certificates out) only the
    narrow band is used.

    The dual of the LMNN program follows Weinberger & Saul, JMLR 2009, Eq. 14 (module docstring).

    Parameters
    ----------
    problem : Problem
        The problem (accepted by this certifier; see :func:`metricopt.certify.register_certifier`).
    M : (d, d) ndarray
        The candidate metric (symmetric, PSD up to rounding: :func:`metricopt.certify` checked it).
    variables : dict
        The candidate's extra variables by name (e.g. POLA's ``b``); missing ones are chosen for ``M``.
    summary : DualSummary
        The problem's terms folded by :func:`~metricopt.certify.dual.dual_summary`.
    feas_tol : float
        Relative tolerance on the problem's own constraints.
    tol : float
        The relative gap the caller asks for.

    Returns
    -------
    upper : float
        The objective at the candidate.
    lower : float
        The weak-duality lower bound.
    details : dict
        How the bound was built.
    """
    V = problem.point(M)
    upper = problem._objective(V)
    if summary.losses.get("triplet_loss"):
        lower, info = loss_lower_bound(problem, V, upper, summary=summary)
        return upper, lower, info
    lower, info = lmnn_lower_bound(problem, V, upper, summary=summary, tol=tol)
    rel = (upper - lower) / max(abs(upper), 1e-12)
    # no multiplier at all in the narrow band (every triplet satisfied beyond it): the bound is that of alpha = 0,
    # so the wide band is worth its cost whatever the gap
    empty = info.get("triplets near margin (alpha free)", 0) == 0 and info.get("violated triplets (alpha fixed)", 0) == 0
    if tol < rel and (rel <= WIDE_CEIL or empty) and not _NARROW_ONLY.get():
        wide, wide_info = lmnn_lower_bound(problem, V, upper, band=WIDE_BAND, max_free=WIDE_MAX_FREE, summary=summary,
                                           ramps=False)  # the ramps do not depend on the band: tried once
        if wide > lower:
            lower, info = wide, wide_info
    return upper, lower, info


def _formation_errors(problem, summary, n_terms):
    r"""An elementwise bound on the rounding in the summed linear part ``P`` (:func:`scatter_error` bounds that of
    ``B = sum_t alpha_t A_t``).

    * ``P`` (the pull scatter plus linear regularisers): :math:`\tilde\gamma_N (\sqrt{P_{jj} P_{kk}} \cdot 4 +
      |P_{jk}|)`, the Cauchy-Schwarz bound :math:`\sum_t w_t |\delta_{tj}| |\delta_{tk}| \le \sqrt{P_{jj} P_{kk}}`
      of a sum of PSD outer products, with a factor 4 for the centred Laplacian form used on large inputs. (The
      problem's linear term holds its matrix as computed, and its objective is evaluated with that matrix, so the
      bound stays valid without this allowance: it only lowers it.)
    * :math:`\tilde\gamma_N = \lambda \sqrt{N}\, \epsilon` (:data:`SUM_ROUNDING_LAMBDA`), ``N`` the rows plus
      ``n_terms`` plus 8: the probabilistic bound of Higham & Mary (SIAM J. Sci. Comput. 41(5), 2019, Thm. 3.1),
      which holds with probability at least :math:`1 - 2N e^{-\lambda^2/2}` (above :math:`1 - 10^{-30}` here for any
      :math:`N < 10^{12}`) for independent rounding errors. The worst-case :math:`\gamma_N = N\epsilon` is never
      approached by real sums and, on lifted data with many terms (multi-metric LMNN), would alone exceed a 1e-6
      gap; this and :func:`scatter_error` are the one place where a modelled, not a worst-case, rounding enters a
      bound (the eigenvalues and products of :mod:`.verified` are worst-case).

    Problems without lifted data (``X_lifted`` or ``X`` of width ``d``) get zeros: their matrices are then taken
    as exact."""
    X = problem.X_lifted  # X itself, or the lifted points (multi-metric LMNN)
    d = problem.d
    if X is None or np.ndim(X) != 2 or X.shape[1] != d:
        return 0.0
    N = X.shape[0] + n_terms + 8
    g = SUM_ROUNDING_LAMBDA * np.sqrt(N) * EPS
    dP = np.sqrt(np.clip(np.diag(summary.P), 0.0, None))
    return g * 4.0 * np.outer(dP, dP) + g * np.abs(summary.P)


#: the multiple of the summation constant bounding a scatter's rounding (:func:`scatter_error`)
SCATTER_ROUNDINGS = 3.0


def scatter_error(problem: Any, T: np.ndarray, w: ArrayLike, n_terms: int | None = None) -> np.ndarray | float:
    r"""An elementwise bound on the rounding of ``problem.triplet_scatter`` over the triplets ``T`` with weights
    ``w >= 0`` (symmetrised): the ``E_B`` of a dual point's :math:`B = \sum_t \alpha_t A_t`.

    The scatter is two pair scatters (:func:`metricopt.linalg.pair_scatter`) and their difference. Either form of a
    pair scatter (the products of the differences, or :math:`\tilde X^\top (L \tilde X)` with the graph Laplacian on
    the centred points) rounds each entry by at most :math:`2\tilde\gamma_N` times the matching entry of
    :math:`\sum_t w_t z_t z_t^\top`, :math:`z_t = |\tilde x_a| + |\tilde x_b|` (:func:`metricopt.linalg.pair_abs_scatter`:
    a nested sum of two levels, with :math:`|x_a - x_b| \le z_t`), the Laplacian's degrees add one more
    :math:`\tilde\gamma_N`, and the differences, products, difference of the two scatters and symmetrisation a few
    :math:`\epsilon` each: :math:`E_B = (3\tilde\gamma_N + 8\epsilon)(1 + 4\tilde\gamma_N)\, S`, with ``S`` the
    computed magnitudes of both pairs of every triplet (a sum of non-negative terms, within a relative
    :math:`2\tilde\gamma_N` of the exact one). :math:`\tilde\gamma_N = \lambda\sqrt N \epsilon` as in
    :func:`_formation_errors` (``N`` the rows plus ``n_terms``, default ``len(T)``, plus 8).

    Against that function's entrywise :math:`\tilde\gamma_N \cdot 8 \sum_t \alpha_t\, r_j r_k` (every coordinate at
    its range ``r``), the magnitudes of the triplets actually summed: on digits PCA-30 at its optimum the older bound
    alone held the certified gap above 7.4e-7 (relative), which a ``tol=1e-6`` solve then had to beat by 2,600
    iterations.

    Problems without lifted data (``X_lifted`` of width ``d``) get 0.0, as in :func:`_formation_errors`.

    Parameters
    ----------
    problem : TripletProblem
        The problem (its ``X_lifted`` and ``lift``).
    T : (m, 3) ndarray of int
        The triplets ``(i, j, l)``.
    w : (m,) array_like or float
        Their non-negative weights (a dual point's multipliers).
    n_terms : int, optional
        The terms summed, for ``N`` (default ``len(T)``).

    Returns
    -------
    (d, d) ndarray or float
        The elementwise bound (0.0 where the data are taken as exact).
    """
    X = problem.X_lifted
    if X is None or np.ndim(X) != 2 or X.shape[1] != problem.d or len(T) == 0:
        return 0.0
    T = np.asarray(T)
    N = X.shape[0] + (len(T) if n_terms is None else int(n_terms)) + 8
    g = SUM_ROUNDING_LAMBDA * np.sqrt(N) * EPS
    (a, b), (c, e) = problem.lift(T[:, 0], T[:, 2]), problem.lift(T[:, 0], T[:, 1])
    w = np.asarray(w, dtype=np.float64)
    w = np.broadcast_to(w, (len(T),)) if w.ndim == 0 else w
    S = pair_abs_scatter(X, a, b, w) + pair_abs_scatter(X, c, e, w)
    return (SCATTER_ROUNDINGS * g + 8 * EPS) * (1 + 4 * g) * S


def alpha0_bound(P: np.ndarray, lam: float, EP: np.ndarray | float = 0.0) -> float:
    r"""The bound at :math:`\alpha = 0`: :math:`\min_{M \succeq 0} \langle P, M\rangle + \tfrac{\lambda}{2}\|M\|_F^2`,
    i.e. :math:`-\|\Pi_+(-P)\|_F^2 / (2\lambda)` for :math:`\lambda > 0` (rounded down, :mod:`.verified`), and 0 for
    :math:`\lambda = 0` (the callers have checked that :math:`P` is PSD). It is the floor every other candidate must
    beat: with an indefinite linear part (a Linear term, a pull towards a prior metric) it is negative, and 0 would
    overstate the bound.

    Parameters
    ----------
    P : (d, d) ndarray
        The linear part.
    lam : float
        The Frobenius constant :math:`\lambda`.
    EP : (d, d) ndarray or float, default 0.0
        An elementwise bound on the rounding in ``P``.

    Returns
    -------
    float
        The bound, rounded down.
    """
    if lam <= 0:
        return 0.0
    D = symmetrize(-P)
    err = eig_error(D, np.asarray(EP) + 2 * EPS * np.abs(P))
    w = np.linalg.eigvalsh(D) + err
    return -float(np.sum(np.clip(w, 0, None) ** 2)) / (2 * lam) * (1 + 8 * EPS * len(w))


def lmnn_lower_bound(problem: Any, V: dict, upper: float, band: float = BAND, max_free: int = MAX_FREE,
                     summary: DualSummary | None = None, accuracy: float | None = None, *, ramps: bool = True,
                     tol: float | None = None) -> tuple[float, dict]:
    r"""A weak-duality lower bound for an LMNN-type problem (triplet hinge) at the point ``V``.

    The bound :math:`g(\alpha)` of the module docstring (the dual of Weinberger & Saul, JMLR 2009, Eq. 14), with
    :math:`\alpha` fixed on clearly satisfied and clearly violated triplets and free within ``band`` of the
    margin (a restricted dual program).

    Parameters
    ----------
    problem : Problem
        An LMNN-type problem.
    V : dict
        The point (``problem.point(M)``).
    upper : float
        The objective at ``V``.
    band : float, default BAND
        Half-width of the band of hinge arguments treated as "at the margin".
    max_free : int, default MAX_FREE
        The largest number of free multipliers in the restricted dual.
    summary : DualSummary, optional
        The problem's :class:`~metricopt.certify.DualSummary`, computed when not given.
    accuracy : float, optional
        The absolute accuracy asked of the restricted dual, default ``1e-9 |upper|``.
    ramps : bool, default True
        Also try the ramp dual points (:func:`_ramp_bounds`), first.
    tol : float, optional
        Where the ramp dual points already bound the relative gap by ``tol``, the band's dual points (the
        restricted dual program over the band) are not tried: a smaller ``tol`` never gets a looser bound.

    Returns
    -------
    lower : float
        The lower bound (``-inf`` when the linear part is indefinite with nothing bounding ``M``).
    details : dict
        How the bound was built.
    """
    if summary is None:
        summary = dual_summary(problem)
    P, lam, const = summary.P, summary.lam, summary.constant
    _, piece = summary.loss("triplet_hinge")
    mu = piece.weight if piece is not None else 0.0
    if lam == 0.0 and np.linalg.eigvalsh(P)[0] < -1e-12 * max(1.0, float(np.abs(P).max())):
        # <P, M> unbounded below on the PSD cone along a negative direction of P: no finite bound here
        return -np.inf, {"dual form": "none: the linear part is indefinite and nothing bounds M"}
    if piece is None or mu == 0.0:
        # min <P, M> + lam/2 ||M||^2 over the PSD cone: 0 for P PSD, negative otherwise
        return alpha0_bound(P, lam) + const, {"dual form": "no hinge term"}
    upper = upper - const  # the bounds below are for the objective without its constant
    accuracy = 1e-9 * max(abs(upper), 1e-12) if accuracy is None else float(accuracy)
    max_free = min(int(max_free), max(1, MAX_FREE_ENTRIES // problem.d ** 2))
    info: dict[str, Any] = {}
    best = -np.inf
    # a solver's certificate before its last: far from certifying by the ramps, no restricted program around them
    ceil = (RESTRICTED_CEIL * max(abs(upper + const), 1e-12) if _NARROW_ONLY.get() and _RAMP_HINT.get() else None)
    for width, (lb, inf) in (_ramp_bounds(problem, V, summary, mu, upper, max_free, ceil) if ramps else []):
        if lb > best:
            best, info = lb, {**inf, "dual form": f"{inf.get('dual form', '')}; ramp of width {width:g}"}
    if tol is not None and upper - best <= tol * max(abs(upper + const), 1e-12):
        info.update({"margin band": "not tried (the ramps bound the gap by tol)"})
        return best + const, info
    if _NARROW_ONLY.get():  # a solve's certificate before its last: the rank-two solver's size at most
        max_free = min(max_free, RANK2_MAX_FREE)
    if ceil is not None and upper - best > ceil:  # far from certifying: a small band program, not none (FAR_MAX_FREE)
        max_free = min(max_free, FAR_MAX_FREE)
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
    w = problem.sample_weight
    wv, wn = (None, None) if w is None else (w[Tv[:, 0]], w[Tn[:, 0]])
    Bv = _scatter(problem, Tv, wv) if len(Tv) else np.zeros_like(P)  # sum_t w_t A_t over the violated
    EBv = scatter_error(problem, Tv, 1.0 if wv is None else wv, len(Tv) + len(Tn))

    EP = _formation_errors(problem, summary, len(Tv) + len(Tn))
    floor = alpha0_bound(P, lam, EP)
    if floor > best:
        best, info = floor, {"dual form": "alpha = 0"}
    candidates = []
    # heuristic dual point: alpha_t = mu w_t on every violated triplet
    if len(Tv):
        candidates.append((mu, np.zeros(len(Tn))))
    # restricted dual: one shared multiplier on the violated triplets, free ones near the margin
    point = _restricted_dual(problem, P, lam, mu, Tv, Tn, Bv, accuracy, wv, wn)
    if point is not None:
        candidates.append(point)

    for tau, an in candidates:
        av = np.full(len(Tv), tau) if wv is None else tau * wv  # alpha on the violated triplets
        # rounding may only lower the bound: the computed sum of the alpha_t is shrunk by its error bound and
        # smax by a few ulps, so that s alpha_t <= mu w_t holds exactly for the s used
        alpha_sum = float(av.sum() + an.sum()) * (1.0 - gamma(len(av) + len(an) + 1))
        if alpha_sum <= 0:
            continue
        caps = mu if wv is None else mu * np.concatenate([wv, wn])
        smax = largest_dual_scaling(np.concatenate([av, an]), caps)
        B = np.zeros_like(P)
        EB = np.zeros_like(P)
        if len(av):
            B += tau * Bv  # one shared multiplier on the violated triplets
            EB += tau * (EBv + 2 * EPS * np.abs(Bv))
        if len(Tn):
            B += _scatter(problem, Tn, an)
            EB += scatter_error(problem, Tn, an, len(Tv) + len(Tn))
        lb, inf = bound_from_alpha(P, lam, symmetrize(B), alpha_sum, smax, upper, EP, EB + 2 * EPS * np.abs(B))
        if lb > best:
            best, info = lb, inf
    best += const
    info.update({"violated triplets (alpha fixed)": int(len(Tv)), "triplets near margin (alpha free)": int(len(Tn)),
                 "margin band": band})
    return best, info


#: the widths ``s`` of the ramp dual points (:func:`_ramp_bounds`) of a certificate outside a JAX solve: the smoothing
#: widths FISTA passes through (0.5 down by factors of 2; the bound is sensitive to the width: wine's FISTA iterate at
#: 1e-3 is certified to 3.9e-2 by widths a factor 3 apart, to 1e-3 by its own)
RAMP_WIDTHS = tuple(0.5 * 2.0 ** -k for k in range(20))


def _ramp_bounds(problem, V, summary, mu, upper, max_free=MAX_FREE, ceil=None):
    r"""The bounds at the ramp dual points :math:`\alpha_t = \mu w_t \operatorname{clip}((h_t + s/2)/s, 0, 1)`, one
    per width ``s`` of the :func:`ramp_hint` in force (a solver's widths), else of :data:`RAMP_WIDTHS`: the derivative of the hinge smoothed to width ``s``
    (:func:`metricopt.losses.smoothed_hinge`) at the hinge arguments of ``V``, times the anchor's weight. A solver
    of the smoothed problem converges to such a point (Nesterov, *Math. Program.* 103, 2005: the smoothed
    objective's gradient is the dual estimate), so near a smoothed optimum one of them is close to dual optimal
    where the restricted dual program frees too few multipliers (it frees at most ``MAX_FREE_ENTRIES / d^2``).
    Every :math:`\alpha_t \in [0, \mu w_t]`: each is a dual point, and its bound is computed as any other
    (:func:`bound_from_alpha`, rounding on the safe side); the triplets and their ``h`` are only a selection (a kept
    search at a nearby ``M`` serves).

    Where the band's restricted dual is capped below :data:`MAX_FREE` multipliers (:data:`MAX_FREE_ENTRIES` /
    :math:`d^2`, :math:`d > 70`; below, it frees enough and costs little, and this program would cost more than the
    small solve: digits PCA-20, 300 points, 0.07 s of certificates became 1.5 s), at the width of the best ramp, a
    restricted dual program then frees the multipliers of up to ``max_free`` (and :data:`RANK2_MAX_FREE`) triplets on
    the ramp's slope (:math:`0 < \alpha_t < \mu w_t`, nearest :math:`h_t = 0` first) and scales the
    others, ramp values included, by one shared multiplier (:func:`_ramp_restricted`): an iterate of the smoothed
    problem is not its exact optimum, so the ramp point is dual infeasible by a little, which costs the pencil bound
    its relative size; freeing the slope repairs most of it (MNIST-5k, PCA 164, after 490 FISTA iterations:
    relative gap 1.5e-3 by the ramp, 6.4e-4 with 743 free multipliers); not where the ramps leave a gap above
    ``ceil`` (absolute, without the constant; :data:`RESTRICTED_CEIL`). Returns
    ``[(width, (bound without the constant, details)), ...]``."""
    widths = sorted(set(_RAMP_HINT.get() or RAMP_WIDTHS), reverse=True)  # a solver's hint replaces the fixed list
    if not widths:
        return []
    widest = max(widths) / 2
    # a selection only: the re-check's search of this iterate serves when it holds every ramp but the widest (that
    # one then leaves out triplets of small multiplier): at the iterate's widths (s, 2s, 4s) the widest needs h > -2s,
    # beyond the re-check's max(margin, s), and a search of every triplet would cost as much as the re-check
    # (letter, s = 0.125: 0.7 s of a 1.3 s certificate)
    narrower = widths[1] / 2 if len(widths) > 1 else widest
    found = problem.find_triplets(V["M"], margin=widest, reuse_within=REUSE_WITHIN, at_least=narrower)
    if found is None:
        return []
    i, j, l, h = found
    T = np.stack([i, j, l], 1)
    w = problem.sample_weight
    caps = mu if w is None else mu * w[i]
    out = []
    for width in widths:
        a = caps * np.clip((h + width / 2) / width, 0.0, 1.0)
        keep = a > 0
        if not keep.any():
            continue
        Tk, ak = T[keep], a[keep]
        EP = _formation_errors(problem, summary, len(Tk))
        alpha_sum = float(ak.sum()) * (1.0 - gamma(len(ak) + 1))
        smax = largest_dual_scaling(ak, caps if w is None else caps[keep])
        B = symmetrize(_scatter(problem, Tk, ak))
        EB = scatter_error(problem, Tk, ak)
        out.append((width, bound_from_alpha(summary.P, summary.lam, B, alpha_sum, smax, upper, EP, EB)))
    best = max((o[1][0] for o in out), default=-np.inf)
    far = ceil is not None and upper - best > ceil  # (:data:`RESTRICTED_CEIL`)
    if out and problem.d ** 2 * MAX_FREE > MAX_FREE_ENTRIES and not far:  # where the band frees fewer than MAX_FREE
        width = max(out, key=lambda o: o[1][0])[0]
        found = _ramp_restricted(problem, summary, mu, upper, T, h, caps, width, max_free)
        if found is not None:
            out.append((width, found))
    return out


#: the restricted dual around the ramp is solved to this accuracy relative to the objective (its point, not its
#: bound: the bound is recomputed from the point; MNIST-5k at iteration 490: the same bound to 1e-7 as at 1e-9, 3.1 -> 1.8 s)
RAMP_ACCURACY = 1e-7


def _ramp_restricted(problem, summary, mu, upper, T, h, caps, width, max_free):
    r"""The restricted dual around the ramp of ``width`` (:func:`_ramp_bounds`): ``(bound without the constant,
    details)``, or ``None`` when there is no slope or no solver produced a point.

    With :math:`a_t = \mu w_t \operatorname{clip}((h_t + s/2)/s, 0, 1)` the ramp, the triplets on its slope
    (:math:`0 < a_t < \mu w_t`) nearest the margin get free multipliers :math:`\alpha_t \in [0, \mu w_t]`, and every
    other triplet with :math:`a_t > 0` the multiplier :math:`\tau a_t / \mu` with one shared
    :math:`\tau \in [0, \mu]` (so :math:`\alpha_t \le a_t \le \mu w_t`): the program of :func:`_restricted_dual` with
    the fixed triplets weighted by :math:`a_t / \mu`. Its point is then bounded as any other
    (:func:`bound_from_alpha`, rounding on the safe side)."""
    a = caps * np.clip((h + width / 2) / width, 0.0, 1.0)
    slope = np.flatnonzero((a > 0) & (a < caps))
    if not slope.size:
        return None
    free = np.zeros(a.size, dtype=bool)
    # at most RANK2_MAX_FREE: the rank-two solver's size (a conic program over thousands would cost seconds)
    free[slope[np.argsort(np.abs(h[slope]), kind="stable")[:min(max_free, RANK2_MAX_FREE)]]] = True
    fixed = (a > 0) & ~free
    Tv, Tn = T[fixed], T[free]
    wv = a[fixed] / mu  # the fixed multipliers are tau * wv, tau in [0, mu]: at most the ramp's
    w = problem.sample_weight
    wn = None if w is None else w[Tn[:, 0]]
    Bv = _scatter(problem, Tv, wv) if len(Tv) else np.zeros_like(summary.P)
    accuracy = RAMP_ACCURACY * max(abs(upper), 1e-12)
    point = _restricted_dual(problem, summary.P, summary.lam, mu, Tv, Tn, Bv, accuracy, wv, wn)
    if point is None:
        return None
    tau, an = point
    av = tau * wv
    alpha_sum = float(av.sum() + an.sum()) * (1.0 - gamma(len(av) + len(an) + 1))
    if alpha_sum <= 0:
        return None
    smax = largest_dual_scaling(np.concatenate([av, an]), caps if w is None else np.concatenate([caps[fixed],
                                                                                                 caps[free]]))
    Bn = _scatter(problem, Tn, an) if len(Tn) else 0.0
    B = tau * Bv + Bn
    EP = _formation_errors(problem, summary, len(Tv) + len(Tn))
    EB = (tau * (scatter_error(problem, Tv, wv, len(Tv) + len(Tn)) + 2 * EPS * np.abs(Bv))
          + scatter_error(problem, Tn, an, len(Tv) + len(Tn)) + 2 * EPS * np.abs(B))
    lb, info = bound_from_alpha(summary.P, summary.lam, symmetrize(B), alpha_sum, smax, upper, EP, EB)
    return lb, {**info, "dual form": f"{info.get('dual form', '')}; restricted around the ramp ({len(Tn)} free)"}


# ---------------------------------------------------------------- scalar triplet losses (squared / Huber hinge)
#: golden-section steps of the choice of the dual scaling ``s`` (a selection only: the bound holds for any ``s``)
GOLDEN_STEPS = 60


def _round_down(x, roundings=1):
    """A lower bound on the exact value of ``x`` computed with at most ``roundings`` correctly rounded operations."""
    x = float(x)
    return float(np.nextafter(x - abs(x) * roundings * EPS, -np.inf))


def _golden_max(f, a, b, steps=GOLDEN_STEPS):
    """An approximate maximiser of a concave ``f`` on ``[a, b]`` (golden-section search; a selection only)."""
    g = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = b - g * (b - a), a + g * (b - a)
    f1, f2 = f(x1), f(x2)
    for _ in range(steps):
        if f1 >= f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - g * (b - a)
            f1 = f(x1)
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + g * (b - a)
            f2 = f(x2)
    return x1 if f1 >= f2 else x2


def _bracket(f, start=1.0, limit=2.0 ** 60):
    """An ``s >= start`` beyond the maximiser of a concave ``f`` on ``[0, inf)`` (doubling while ``f`` grows)."""
    s = start
    while s < limit and f(2.0 * s) > f(s):
        s *= 2.0
    return 2.0 * s


class _DualValue:
    r"""The loss part of the dual function along the ray :math:`s\alpha`:
    :math:`\varphi(s) = s \sum_t \alpha_t - \sum_t W_t\, \ell^*(s \alpha_t / W_t)`, concave in :math:`s`, each
    value a certified lower bound (``W_t = mu w_t`` the triplet's weight, ``alpha_t`` its multiplier).

    The sum of the :math:`\alpha_t` is exactly rounded (``math.fsum``) and moved down one ulp; each ratio
    :math:`s\alpha_t / W_t` (divided by the weight rounded down, :math:`W_t^-`) is rounded up and, as
    :math:`s\alpha_t \le W_t^- \bar a` holds exactly for every admissible ``s``, clipped to :math:`\bar a`
    (``loss.dual_upper``): the conjugate is non-decreasing on its domain, so the clipped ratio still bounds it
    from above; the conjugate itself is rounded up (``loss.conjugate``), multiplied by the weight rounded up and
    summed exactly rounded, then moved up one ulp."""

    def __init__(self, loss, alpha, W_down, W_up):
        self.loss, self.alpha, self.W_down, self.W_up = loss, alpha, W_down, W_up
        self.alpha_sum = float(np.nextafter(math.fsum(alpha.tolist()), -np.inf))

    def conjugate_sum(self, s):
        """An upper bound on :math:`\\sum_t W_t \\ell^*(s \\alpha_t / W_t)`."""
        q = round_up((s * self.alpha) / self.W_down, 2)
        if math.isfinite(self.loss.dual_upper):
            q = np.minimum(q, self.loss.dual_upper)
        c = np.asarray(self.loss.conjugate(q), dtype=np.float64)
        if not np.all(np.isfinite(c)):
            return math.inf
        return float(np.nextafter(math.fsum(round_up(self.W_up * c, 1).tolist()), np.inf))

    def __call__(self, s):
        s = float(s)
        if s <= 0.0:
            return 0.0
        conj = self.conjugate_sum(s)
        if not math.isfinite(conj):
            return -math.inf
        return _round_down(_round_down(s * self.alpha_sum) - conj)

    def approx(self, s):
        """:math:`\varphi(s)` in plain float64 (no rounding control): for choosing ``s`` only."""
        s = float(s)
        if s <= 0.0:
            return 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            c = self.loss.conjugate(np.minimum(s * self.alpha / self.W_down, self.loss.dual_upper))
            return float(s * self.alpha_sum - np.sum(self.W_up * c))


def _pencil_bound_conjugate(P, B, phi, smax, upper, EP=0.0, EB=0.0):
    r""":func:`_pencil_bound` for a loss with a conjugate (:math:`\lambda = 0`): for :math:`s \in [0, s_{\max}]`
    and :math:`c \ge 0` with :math:`(1 + c) P - sB \succeq 0`, :math:`g \ge \varphi(s) - cU` with
    :math:`\varphi(s) = s\sum_t \alpha_t - \sum_t W_t \ell^*(s\alpha_t / W_t)` (``phi``, a :class:`_DualValue`;
    the hinge's :math:`\varphi` is linear). :math:`\varphi` is concave, so the candidate scalings are
    ``s = 1`` (the multipliers as chosen), ``1 / gamma`` (the largest with ``P - sB`` PSD, :math:`P \succ 0`),
    the maximiser of the approximate bound :math:`\varphi(s) - \max(0, s\gamma - 1) U` (concave: golden-section
    search) and the maximiser of :math:`\varphi` alone, each within ``[0, smax]``; every candidate's bound is
    then certified as in :func:`_pencil_bound` and the best kept. Where ``P`` is singular, the largest
    ``s`` up to the maximiser of :math:`\varphi` with ``P - sB`` certifiably PSD (bisection)."""
    U = _safe_upper(upper)
    s_hi = smax if math.isfinite(smax) else _bracket(phi.approx)
    s_peak = min(smax, _golden_max(phi.approx, 0.0, s_hi))
    prepared = _pencil_prepare(P, B, EP, EB)
    if prepared is None:
        return max(phi(s_peak), 0.0), {"dual form": "P = B = 0", "dual scaling": s_peak}
    lower_of, lP, gam, live = prepared
    approx = lambda s: phi.approx(s) - max(0.0, s * gam - 1.0) * U
    cands = {min(1.0, smax), s_peak, min(smax, _golden_max(approx, 0.0, s_hi))}
    if gam > 0:
        cands.add(min(smax, 1.0 / gam))
    best, form, scale = _best_scaling(phi, [s for s in sorted(cands) if s > 0], s_peak, U, lower_of, lP, live)
    return best, {"dual form": form, "dual scaling": scale}


def loss_lower_bound(problem: Any, V: dict, upper: float,
                     summary: DualSummary | None = None) -> tuple[float, dict]:
    r"""``(lower_bound, details)`` for an LMNN-type problem whose push term is a scalar triplet loss
    :math:`\mu \sum_t w_t \ell(h_t)` (dual piece ``"triplet_loss"``, the loss object as ``term.loss``; see
    :mod:`metricopt.losses`) at the point ``V``.

    For any :math:`0 \le \alpha_t \le W_t \bar a` (:math:`W_t = \mu w_t`, :math:`\bar a` = ``loss.dual_upper``)
    and :math:`B = \sum_t \alpha_t A_t`, weak duality gives

    .. math::

        g(\alpha) = \sum_t \big(\alpha_t - W_t\,\ell^*(\alpha_t / W_t)\big)
        + \min_{M \succeq 0}\ \langle P - B, M\rangle + \tfrac{\lambda}{2}\|M\|_F^2 \;\le\; f(M^\star).

    The multipliers are :math:`\alpha_t = W_t\,\ell'(h_t)` at the candidate (for a differentiable loss the
    optimum's: then :math:`g(\alpha^\star) = f(M^\star)` by the Fenchel--Young equality and the optimality of
    :math:`M^\star`); only triplets with :math:`h_t > 0` get one. :math:`\lambda > 0`: the closed form
    :math:`\min = -\|\Pi_+(B - P)\|_F^2 / (2\lambda)` as for the hinge; :math:`\lambda = 0`: the pencil bound over
    the scalings :math:`s\alpha` (:func:`_pencil_bound_conjugate`). Every rounding lowers the bound: the sums of
    :math:`\alpha_t` rounded down, the conjugates up (:class:`_DualValue`), the matrices with the error bounds of
    :func:`_formation_errors` and the eigenvalues of :mod:`.verified`.

    Parameters
    ----------
    problem : Problem
        An LMNN-type problem whose push term is a scalar triplet loss.
    V : dict
        The point (``problem.point(M)``).
    upper : float
        The objective at ``V``.
    summary : DualSummary, optional
        The problem's folded terms, computed when not given.

    Returns
    -------
    lower : float
        The lower bound.
    details : dict
        How the bound was built.
    """
    if summary is None:
        summary = dual_summary(problem)
    P, lam, const = summary.P, summary.lam, summary.constant
    term, piece = summary.loss("triplet_loss")
    loss = getattr(term, "loss", None)
    if piece is None or not isinstance(loss, ScalarLoss):
        raise NotCertifiableError(f"the term {term!r} declares the dual piece 'triplet_loss' but has no scalar loss "
                                  "(term.loss, a metricopt.losses.ScalarLoss) the certificate could read.")
    mu = piece.weight
    if lam == 0.0 and np.linalg.eigvalsh(P)[0] < -1e-12 * max(1.0, float(np.abs(P).max())):
        return -np.inf, {"dual form": "none: the linear part is indefinite and nothing bounds M"}
    if mu == 0.0:
        return alpha0_bound(P, lam) + const, {"dual form": "no triplet loss term"}
    upper = upper - const
    # which triplets get a multiplier, and its value, are a choice: any alpha in the box is valid, so a search at
    # an M within rounding of this one serves (its h differ by rounding)
    i, j, l, h = problem.find_triplets(V["M"], margin=0.0, reuse_within=REUSE_WITHIN)
    sw = problem.sample_weight
    if sw is None:  # the weight mu itself: exact
        W_down = W_up = np.full(len(i), mu)
    else:
        W = mu * sw[i]
        W_down, W_up = np.nextafter(W, -np.inf), np.nextafter(W, np.inf)  # bracket the exact mu w_t
    top = loss.dual_upper
    alpha = W_up * np.clip(loss.derivative(h), 0.0, top)
    alpha = np.minimum(alpha, W_down * top) if math.isfinite(top) else alpha
    keep = alpha > 0
    info = {"triplets with a multiplier": int(keep.sum()), "loss": loss.name}
    if not keep.any():  # alpha = 0: the bound min <P, M> + lam/2 ||M||^2 (0 for P PSD)
        return alpha0_bound(P, lam) + const, {**info, "dual form": "alpha = 0"}
    i, j, l, alpha, W_down, W_up = i[keep], j[keep], l[keep], alpha[keep], W_down[keep], W_up[keep]
    phi = _DualValue(loss, alpha, W_down, W_up)
    B = symmetrize(problem.triplet_scatter(i, j, l, alpha))
    EP = _formation_errors(problem, summary, len(alpha))
    EB = scatter_error(problem, np.stack([i, j, l], 1), alpha) * (1.0 + 4 * EPS)
    smax = largest_dual_scaling(alpha, W_down * top) if math.isfinite(top) else math.inf
    if lam > 0:
        s = min(1.0, smax)
        D = symmetrize(s * B - P)
        err = eig_error(D, np.asarray(EP) + s * np.asarray(EB) + 2 * EPS * (np.abs(s * B) + np.abs(P)))
        w = np.linalg.eigvalsh(D) + err  # each exact eigenvalue is at most its computed one plus err
        lb = phi(s) - float(np.sum(np.clip(w, 0, None) ** 2)) / (2 * lam) * (1 + 8 * EPS * len(w))
        info.update({"dual form": "Frobenius-regularised (closed form)", "dual scaling": s})
        floor = alpha0_bound(P, lam, EP)
        if floor > lb:
            lb = floor
            info.update({"dual form": "alpha = 0", "dual scaling": 0.0})
    else:
        lb, extra = _pencil_bound_conjugate(P, B, phi, smax, upper, EP, EB)
        info.update(extra)
    return lb + const, info
