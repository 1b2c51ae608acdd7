r"""Certificates for the pair-based problems MMC and POLA.

**MMC** (maximise :math:`F(M) = \sum_{l \in D} \sqrt{\langle C_l, M\rangle}` over
:math:`\{M \succeq 0,\ \langle S, M\rangle \le 1\}`). For every :math:`c > 0`,
:math:`\sqrt{t} \le (c + t/c)/2`, so with :math:`G(c) = \sum_l C_l / (2 c_l)`

.. math::

    \max F \le \sum_l c_l / 2 + \max_{M \succeq 0,\ \langle S, M\rangle \le 1} \langle G(c), M\rangle
    = \sum_l c_l / 2 + \lambda_{\max}(G(c), S),

the largest generalised eigenvalue (for diagonal ``M``: :math:`\max_i G_{ii}/S_{ii}`).
Choosing :math:`c_l = \sqrt{d_M(l)}` at the candidate makes the bound tight at the
optimum (it is then the KKT multiplier). In metricopt's minimisation form the
objective is :math:`-F` and the lower bound is minus this value.

**POLA** (:math:`\min \tfrac12(\|M\|_F^2 + b^2) + C\sum_t \xi_t` s.t.
:math:`y_t(b - \langle C_t, M\rangle) \ge 1 - \xi_t`, :math:`b \ge 1`, :math:`M \succeq 0`).
Its Lagrange dual function, for :math:`0 \le \alpha_t \le C` (no upper bound for hard
margins), :math:`K = \sum_t \alpha_t y_t C_t` and :math:`s = \sum_t \alpha_t y_t`, is

.. math::

    g(\alpha) = \sum_t \alpha_t - \tfrac12 \|\Pi_+(-K)\|_F^2 + h(s),\qquad
    h(s) = \min_{b \ge 1} \tfrac12 b^2 - s b = \tfrac12 - s - \tfrac12 [s - 1]_+^2 ,

a lower bound for every such :math:`\alpha`. The point :math:`\alpha` comes from a
small restricted dual over the pairs at or inside the margin at the candidate.
"""

from __future__ import annotations

import hashlib
import weakref

from typing import TYPE_CHECKING, Any

import cvxpy as cp
import numpy as np
import scipy.linalg

from ..linalg import pair_scatter, symmetrize
from ._dual import solve_small
from .triplets import _NARROW_ONLY
from .dual import dual_summary
from .verified import EPS, gamma

if TYPE_CHECKING:
    from .certificate import Certificate
    from .dual import DualSummary


def budget_bound(problem: Any, M: np.ndarray, variables: dict, summary: DualSummary, feas_tol: float,
                 tol: float) -> tuple[float, float, dict] | Certificate:
    """The certifier of problems over ``{M PSD, <S, M> <= 1}`` whose loss is ``w sum sqrt(d_M)``
    with ``w <= 0`` (MMC: Xing et al., NIPS 2002, Section 2), plus any linear terms and constants (module docstring).

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
    tuple or Certificate
        ``(upper, lower, details)`` (:func:`mmc_certify`), or an infeasible
        :class:`~metricopt.certify.Certificate` when the budget is exceeded beyond ``feas_tol``.
    """
    res = mmc_certify(problem, M, feas_tol, summary=summary)
    if res is None:
        from .certificate import Certificate

        return Certificate.infeasible(tol, problem.method, "sum of similar-pair distances exceeds 1 beyond feas_tol")
    return res


def mmc_certify(problem: Any, M: np.ndarray, feas_tol: float, tight: float = 1e-7, max_pairs_sdp: int = 5_000,
                summary: DualSummary | None = None) -> tuple[float, float, dict] | None:
    r"""The duality bound for MMC (Xing et al., NIPS 2002), or ``None`` when ``M`` is infeasible.

    With the loss :math:`w \sum_{l \in D} \sqrt{d_M(l)}` (:math:`w \le 0`), linear terms
    :math:`\langle P, M\rangle` and a constant :math:`c`, the bound of the module docstring becomes
    :math:`c - |w| \sum_l c_l / 2 - \max(0, \lambda_{\max}(|w| G(c) - P, S))`; :class:`_BudgetMax` computes an
    upper bound of that generalised eigenvalue that accounts for its own rounding.

    Parameters
    ----------
    problem : Problem
        An MMC-type problem (budget geometry, a ``sqrt_distances`` loss).
    M : (d, d) ndarray
        The candidate metric.
    feas_tol : float
        Relative tolerance on the budget :math:`\langle S, M\rangle \le 1`; a candidate within it is rescaled
        onto the feasible set.
    tight : float, default 1e-7
        Relative tolerance of the bound's own search.
    max_pairs_sdp : int, default 5000
        The largest number of pairs for which the tighter conic program is tried.
    summary : DualSummary, optional
        The problem's folded terms, computed when not given.

    Returns
    -------
    tuple or None
        ``(upper, lower, details)``, or ``None`` when ``M`` exceeds the budget beyond ``feas_tol``.
    """
    if summary is None:
        summary = dual_summary(problem)
    term, piece = summary.loss("sqrt_distances")
    scale, P, const = -float(piece.weight), summary.P, summary.constant
    S = problem.geometry.budget
    budget = float(np.sum(S * M))
    if budget > 1.0 + feas_tol:
        return None
    details: dict[str, Any] = {}
    if budget > 1.0:
        details["rescaled onto budget by"] = 1.0 / budget
    V = problem.repair({"M": M})
    M = V["M"]
    upper = problem._objective(V)
    dis = term.pairs
    diagonal = problem.geometry.diagonal
    bmax = _budget_max(problem, dis, S, P, scale, diagonal, details)
    dl = problem.pair_distances(dis[:, 0], dis[:, 1], M)
    c0 = np.sqrt(np.maximum(dl, 0.0))
    top = max(float(c0.max(initial=0.0)), 1e-12)
    # c_l = sqrt(d_l) is the tight choice at an optimum; pairs with d_l ~ 0 (a boundary
    # solution) blow G up, so also try flooring c at a few levels and keep the best bound
    best = np.inf
    floors = np.array([1e-8 * top] + list(top * np.logspace(-6, 0, 25)))
    for c, lam in bmax.floored(c0, floors):
        best = min(best, 0.5 * scale * float(np.sum(c)) * (1 + 4 * _U) + lam)
    F_upper = best
    if (np.isfinite(F_upper) and F_upper + upper - const > tight * abs(upper) and len(dis) <= max_pairs_sdp
            and scale > 0):
        # The linearisation at c = sqrt(d_M) is only first-order tight when the optimum has rank > 1
        # (its top generalised eigenvalue is then repeated); minimise the dual function itself,
        #   min_{w > 0, nu} sum_l 1 / (4 w_l) + nu   s.t.   nu S - sum_l w_l C_l PSD   (w_l = 1 / (2 c_l)),
        # in variables scaled by the current c and nu, and re-evaluate the bound exactly at its answer.
        c_best = np.maximum(c0, 1e-8 * top)
        nu0 = max(F_upper - 0.5 * scale * float(np.sum(c_best)), 1e-12)
        w = cp.Variable(len(dis), pos=True)
        nu = cp.Variable(nonneg=True)
        R = scale * problem.pair_rows(dis[:, 0], dis[:, 1]) / (2.0 * c_best)[:, None]
        Gw = R.T @ w
        if diagonal:
            cons = [nu * nu0 * np.diag(S) - Gw + np.diag(P) >= 0]
        else:
            Z = nu * nu0 * S - cp.reshape(Gw, S.shape, order="C") + P
            cons = [0.5 * (Z + Z.T) >> 0]
        prog = cp.Problem(cp.Minimize((cp.sum(cp.multiply(0.5 * scale * c_best, cp.inv_pos(w))) + nu0 * nu) / F_upper),
                          cons)
        if solve_small(prog) and w.value is not None:
            c = c_best / np.maximum(np.asarray(w.value, dtype=np.float64), 1e-300)
            F_upper = min(F_upper, 0.5 * scale * float(np.sum(c)) * (1 + 4 * _U) + bmax(0.5 / c))
            details["dual program"] = "solved (dual function minimised over c)"
    details["similar-pair budget <S, M>"] = budget
    return upper, const - F_upper, details


#: the unit roundoff of float64
_U = EPS / 2

#: per problem (held weakly), the last :class:`_BudgetMax` and the digest of everything it was built from: a solve
#: certifies the same problem many times, and building one (the pair differences and their whitened magnitudes)
#: took 1.9 s of each 2.9 s certificate on digits (711,000 pairs)
_BUDGET_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _digest(*arrays):
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype, a.shape)).encode())
        h.update(a.data)
    return h.digest()


def _budget_max(problem, pairs, S, P, scale, diagonal, details):
    """:class:`_BudgetMax` for these inputs, reused when the same problem was certified with identical ones (compared
    by a digest of the arrays' bytes, so a changed array is never served a stale bound)."""
    P_arr = np.zeros((0,)) if P is None else np.asarray(P, dtype=np.float64)
    key = (_digest(problem.X, pairs, S, P_arr), float(scale), bool(diagonal))
    try:
        hit = _BUDGET_CACHE.get(problem)
    except TypeError:  # an unhashable problem: no cache
        return _BudgetMax(problem.X, pairs, S, P, scale, diagonal, details)
    if hit is None or hit[0] != key:
        own: dict = {}  # the notes the construction writes (null directions, an unavailable bound)
        hit = (key, _BudgetMax(problem.X, pairs, S, P, scale, diagonal, own), own)
        _BUDGET_CACHE[problem] = hit
    bmax = hit[1]
    details.update(hit[2])
    bmax.details = details  # where its calls write their notes
    return bmax


class _BudgetMax:
    r"""An upper bound of :math:`\lambda(w) = \max\{\langle G(w), M\rangle : M \succeq 0` (diagonal if asked),
    :math:`\langle S, M\rangle \le 1\}` for :math:`G(w) = s \sum_l w_l C_l - P`, :math:`C_l = \Delta_l \Delta_l^\top`
    the dissimilar differences (``inf`` when it cannot be bounded), that holds for the exact :math:`\lambda` of the
    problem as stored (``X``, the pairs, ``S``) whatever the rounding of the computation.

    **Exactly null directions.** A feature constant over the pairs' points, or an exact copy of another one
    (:func:`metricopt.linalg.exact_structure`), gives differences :math:`\Delta = B \Delta_F` exactly; where
    ``S`` is exactly :math:`B S_F B^\top` (verified entry by entry: MMC builds it so) and ``P = 0``,
    :math:`\lambda = \lambda_{\max}(G_F, S_F)` over the remaining features, exactly. No tolerance decides this: a
    direction that is only nearly null is kept, and then fails the test below (no bound) rather than being dropped.

    **Full M.** With :math:`S_F = L L^\top` (Cholesky) and :math:`H = L^{-1} G_F L^{-\top}`,
    :math:`\lambda = \max(0, \lambda_{\max}(H))`. The computed :math:`\hat\lambda` is inflated by first-order rounding
    bounds (Higham, Thm. 10.3 and Sec. 8.1; Wilkinson's reduction of the pencil, Golub & Van Loan Sec. 8.7):
    the Cholesky factor is exact for :math:`S_F + \delta S`, :math:`|\delta S| \le \gamma_{f+1}|L||L^\top|`, so
    :math:`S_F \succeq (1 - \rho) L L^\top` with :math:`\rho = \gamma_{f+1}\,\|\,|L^{-1}||L|\,\|_F^2`; the scatter and
    the products carry :math:`|\delta G| \le \gamma_{m+f+3} \sum_l w_l |\Delta_l||\Delta_l|^\top`, whose whitened
    norm is at most :math:`\gamma_{m+f+3} \sum_l w_l q_l`, :math:`q_l = \|\,|L^{-1}||\Delta_l|\,\|^2`; the inverse
    factor and the symmetric eigensolver add :math:`(1 + \gamma_f k)^2` (:math:`k = \|\,|L^{-1}||L|\,\|_F`) and
    :math:`2 f u \|H\|_F`. Everything is doubled, and the bound is ``inf`` when :math:`\rho \ge 1/2`
    (``S`` too ill-conditioned for a float64 certificate). All of it can only raise :math:`\lambda`, i.e. lower
    the certificate's lower bound.

    **Diagonal M.** :math:`\lambda = \max_j g_j / S_{jj}` with :math:`g_j = s \sum_l w_l \Delta_{lj}^2 - P_{jj}`
    (sums of non-negative terms, relative error :math:`\gamma_{m+3}`); ``inf`` when some ``S_jj = 0`` on a
    feature some dissimilar pair differs in (tested exactly, not through ``g_j``, which may underflow).
    """

    def __init__(self, X, pairs, S, P, scale, diagonal, details):
        from ..linalg import exact_structure, expansion

        self.scale, self.diagonal, self.details = float(scale), bool(diagonal), details
        X = np.asarray(X, dtype=np.float64)
        S = np.asarray(S, dtype=np.float64)
        P = np.zeros_like(S) if P is None else np.asarray(P, dtype=np.float64)
        self.D = X[pairs[:, 0]] - X[pairs[:, 1]]
        d = S.shape[0]
        if diagonal:
            self.s, self.p = np.diag(S).copy(), np.diag(P).copy()
            moves = np.any(self.D != 0, axis=0)
            self.unbounded = bool(np.any((self.s <= 0) & (moves | (self.p < 0))))
            self.live = (self.s > 0)
            return
        rep = exact_structure(X, np.unique(pairs))
        free, B = expansion(rep)
        if not (np.all(P == 0) and np.array_equal(S, B @ S[np.ix_(free, free)] @ B.T)):
            free = np.arange(d)  # no exact reduction: the full S must be definite
        if free.size < d:
            details["exactly null directions of S"] = int(d - free.size)
        self.free = free
        self.P = P[np.ix_(free, free)]
        self.Df = self.D[:, free]
        S_F = S[np.ix_(free, free)]
        f = free.size
        self.L = None
        try:
            L = np.linalg.cholesky(S_F) if f else np.zeros((0, 0))
        except np.linalg.LinAlgError:
            details["note"] = ("the similar-pair scatter S is singular beyond its exactly null directions: the MMC bound is "
                               "unavailable (possibly unbounded)")
            return
        Li = scipy.linalg.solve_triangular(L, np.eye(f), lower=True) if f else L
        k = float(np.linalg.norm(np.abs(Li) @ np.abs(L)))
        self.rho = 2.0 * gamma(f + 1) * k * k
        if not np.all(np.isfinite(Li)) or self.rho >= 0.5:
            details["note"] = ("the similar-pair scatter S is too ill-conditioned for a float64 bound: the MMC bound is "
                               "unavailable")
            return
        self.L, self.Li, self.k, self.f = L, Li, k, f
        self.q = np.einsum("md,md->m", *(2 * [np.abs(self.Df) @ np.abs(Li).T]))  # || |L^-1| |Delta_l| ||^2
        self.m = len(pairs)
        self.gam = 2.0 * gamma(self.m + f + 3)

    def floored(self, c0, floors):
        """``(c, bound at w = 1 / (2 c))`` for ``c = max(c0, floor)`` at each of the increasing ``floors``.

        Full ``M``: the scatters are not formed afresh for each floor (``len(floors)`` passes over the pairs) but
        from two running sums over the pairs sorted by ``c0`` (one pass): the pairs below the floor,
        ``S_k = sum_{c0_l < f_k} C_l`` (weighted ``1 / (2 f_k)`` as a whole), and the pairs above it with their own
        weights ``1 / (2 c0_l)``. Each is a floating-point sum of the same terms in another order, and the
        weighting of ``S_k`` and the final addition are three more roundings per entry, which
        :meth:`_bound` covers (``extra=3``)."""
        c0 = np.asarray(c0, dtype=np.float64)
        floors = np.asarray(floors, dtype=np.float64)
        if self.diagonal or self.L is None or self.f == 0:
            for floor in floors:
                c = np.maximum(c0, floor)
                yield c, self(0.5 / c)
            return
        order = np.argsort(c0, kind="stable")
        cs, Ds = c0[order], self.Df[order]
        cuts = np.searchsorted(cs, floors, side="left")  # pairs [0, cut) lie below the floor
        f = self.f
        low, acc = [], np.zeros((f, f))
        start = 0
        for cut in cuts:
            if cut > start:
                acc = acc + Ds[start:cut].T @ Ds[start:cut]
            low.append(acc)
            start = max(start, cut)
        high, acc = [None] * len(cuts), np.zeros((f, f))
        end = len(cs)
        for k in range(len(cuts) - 1, -1, -1):
            if cuts[k] < end:
                w = 0.5 / cs[cuts[k]:end]
                acc = acc + (Ds[cuts[k]:end] * w[:, None]).T @ Ds[cuts[k]:end]
            high[k] = acc
            end = min(end, cuts[k])
        for k, floor in enumerate(floors):
            c = np.maximum(c0, floor)
            G = self.scale * (high[k] + (0.5 / floor) * low[k]) - self.P
            yield c, self._bound(G, 0.5 / c, extra=3)

    def __call__(self, w):
        """The bound at weights ``w`` (``w_l = 1 / (2 c_l)``)."""
        s = self.scale
        if self.diagonal:
            if self.unbounded:
                self.details["note"] = "a feature varies within dissimilar pairs but has S_jj = 0: MMC is unbounded"
                return np.inf
            g = s * np.einsum("m,md->d", w, self.D * self.D) * (1 + 2 * gamma(len(w) + 3)) - self.p
            g, sj = g[self.live], self.s[self.live]
            return max(0.0, float(np.max(g / sj, initial=0.0)) * (1 + 4 * _U))
        if self.L is None:
            return np.inf
        if self.f == 0:
            return 0.0
        return self._bound(s * ((self.Df * w[:, None]).T @ self.Df) - self.P, w)

    def _bound(self, G, w, extra=0):
        """The bound from the computed ``G = s sum_l w_l C_l - P`` (its rounding: ``extra`` roundings per entry
        beyond the direct sum's)."""
        s = self.scale
        H = self.Li @ G @ self.Li.T
        H = 0.5 * (H + H.T)
        lam = float(np.linalg.eigvalsh(H)[-1])
        err_eig = 4.0 * self.f * _U * float(np.linalg.norm(H))
        gam = self.gam if not extra else 2.0 * gamma(self.m + self.f + 3 + extra)
        err_G = gam * (s * float(np.sum(w * self.q)) + float(np.linalg.norm(np.abs(self.Li) @ np.abs(self.P)
                                                                                 @ np.abs(self.Li).T)))
        grow = (1.0 + 2.0 * gamma(self.f) * self.k) ** 2
        return max(0.0, (max(lam, 0.0) + err_eig + err_G) * grow / (1.0 - self.rho))


def _threshold_h(s, wb):
    """``h(s) = min_{b >= 1} (wb/2) b^2 - s b`` (``-inf`` when unbounded)."""
    if wb <= 0:
        return -s if s >= 0 else -np.inf
    return 0.5 * wb - s - max(s - wb, 0.0) ** 2 / (2.0 * wb)


def _pola_g(problem, alpha, summary):
    """The POLA dual function at ``alpha`` (float64, exact), with the problem's strong convexity
    ``lam``, linear part ``P``, constant and threshold weight from its dual pieces."""
    pr, y = problem.pairs, problem.pair_labels
    K = pair_scatter(problem.X, pr[:, 0], pr[:, 1], alpha * y)
    w = np.linalg.eigvalsh(symmetrize(-K - summary.P))
    s = float(np.sum(alpha * y))
    h = _threshold_h(s, _threshold_weight(summary))
    return (float(np.sum(alpha)) - float(np.sum(np.clip(w, 0, None) ** 2)) / (2.0 * summary.lam) + h
            + summary.constant)


def _threshold_weight(summary):
    return float(sum(p.weight for _, p in summary.losses.get("threshold_square", [])))


def threshold_bound(problem: Any, M: np.ndarray, variables: dict, summary: DualSummary, feas_tol: float,
                    tol: float) -> tuple[float, float, dict] | Certificate:
    """The certifier of problems over ``{M PSD, b >= 1}`` with pair margins (POLA: Shalev-Shwartz et al., ICML
    2004; soft margins as a ``pair_hinge`` loss, or hard-margin constraints), a Frobenius part, linear terms,
    constants and a ``threshold_square`` term on ``b`` (module docstring).

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
    tuple or Certificate
        ``(upper, lower, details)`` (:func:`pola_certify`), or an infeasible
        :class:`~metricopt.certify.Certificate` when the margins are violated beyond ``feas_tol`` (or ``b < 1``).
    """
    res = pola_certify(problem, M, variables.get("b"), feas_tol, tol=tol, summary=summary)
    if res is None:
        from .certificate import Certificate

        return Certificate.infeasible(tol, problem.method,
                                      "pair margins y_t (b - d_t) >= 1 violated beyond feas_tol (or b < 1)")
    return res


#: soft-margin POLA inside :func:`metricopt.certify.triplets.narrow_only` (a JAX solve's certificates before its last):
#: the restricted dual program is skipped when it has more than this many free multipliers. It is a conic solve at
#: every certificate: breast_cancer (398 points, 30 features, 79,003 pairs, 4,000 free multipliers) 42 s at the solve's
#: start for a relative gap of 0.999999697 with and without it (0.17 s without), 29 s at a gap of 1.6e-3 (2 cores);
#: the solve's certificates then left no time for another under the demo's 30 s limit. Direct calls and a solve's
#: last certificate always run it
NARROW_MAX_FREE = 500


def pola_certify(problem: Any, M: np.ndarray, b: float | None, feas_tol: float, band: float = 1e-3,
                 max_free: int = 4000, tol: float = 0.0,
                 summary: DualSummary | None = None) -> tuple[float, float, dict] | None:
    r"""The duality bound for POLA's batch problem (Shalev-Shwartz et al., ICML 2004), or ``None`` when
    ``(M, b)`` is infeasible.

    The Lagrange dual function :math:`g(\alpha) = \sum_t \alpha_t - \tfrac12 \|\Pi_+(-K)\|_F^2 + h(s)` of the
    module docstring. Soft margin: first the dual function at the cheap points ``alpha_t = C phi_s'(h_t)``
    (the derivative of the hinge smoothed with width ``s``, a few widths) is tried; the
    restricted dual program runs only when none of them certifies within ``tol`` (and, inside
    :func:`~metricopt.certify.triplets.narrow_only`, not when it is large, :data:`NARROW_MAX_FREE`; the bound is
    then looser, never higher).

    Parameters
    ----------
    problem : Problem
        A POLA-type problem (threshold geometry, pair margins).
    M : (d, d) ndarray
        The candidate metric.
    b : float or None
        The candidate threshold (``None``: the best one for ``M``, ``problem.best_extra(M, "b")``).
    feas_tol : float
        Relative tolerance on the margins (hard margins) and on ``b >= 1``.
    band : float, default 1e-3
        Half-width of the band of pairs treated as "at the margin".
    max_free : int, default 4000
        The largest number of free multipliers in the restricted dual program.
    tol : float, default 0.0
        The relative gap at which the cheap points suffice.
    summary : DualSummary, optional
        The problem's folded terms, computed when not given.

    Returns
    -------
    tuple or None
        ``(upper, lower, details)``, or ``None`` when ``(M, b)`` is infeasible beyond ``feas_tol``.
    """
    if summary is None:
        summary = dual_summary(problem)
    details: dict[str, Any] = {}
    b = problem.best_extra(M, "b") if b is None else float(b)
    pr, y = problem.pairs, problem.pair_labels
    d_all = problem.pair_distances(pr[:, 0], pr[:, 1], M)
    if summary.loss("pair_hinge")[1] is None:  # hard margins
        marg = y * (b - d_all)
        worst = float(marg.min())
        if b < 1.0 - feas_tol or worst < 1.0 - feas_tol or worst <= 0:
            return None
        if worst < 1.0:
            details["rescaled onto margins by"] = 1.0 / worst
    V = problem.repair({"M": M, "b": b})
    M, b = V["M"], V["b"]
    d_all = problem.pair_distances(pr[:, 0], pr[:, 1], M)
    upper = problem._objective({"M": M, "b": b})
    marg = y * (b - d_all)
    cand = np.flatnonzero(marg <= 1.0 + band)
    if cand.size > max_free:
        cand = cand[np.argsort(marg[cand])[:max_free]]
    _, hinge = summary.loss("pair_hinge")
    Cbox = None if hinge is None else float(hinge.weight)  # None: hard margins (unbounded multipliers)
    lam, wb = summary.lam, _threshold_weight(summary)
    best = _pola_g(problem, np.zeros(len(pr)), summary)
    if Cbox is not None:
        h = 1.0 - marg
        for width in np.logspace(-8, 0, 9):
            alpha = Cbox * np.clip((h + 0.5 * width) / width, 0.0, 1.0)
            best = max(best, _pola_g(problem, alpha, summary))
        details["dual"] = "smoothed-hinge multipliers"
    gap = (upper - best) / max(abs(upper), 1e-12)
    # inside narrow_only (a JAX solve's certificates before its last), a large restricted program is skipped: it costs
    # a conic solve each time (a looser bound, never a higher one; the last certificate runs it)
    skip = _NARROW_ONLY.get() and Cbox is not None and cand.size > NARROW_MAX_FREE
    if skip and cand.size and gap > tol:
        details["restricted dual program"] = (f"skipped before the last certificate: {cand.size} free multipliers "
                                              f"(the cheap ones' relative gap {gap:.2g})")
    if cand.size and gap > tol and not skip:
        rows = problem.pair_rows(pr[cand, 0], pr[cand, 1])
        dd = problem.d
        a = cp.Variable(cand.size, nonneg=True)
        K = cp.reshape(rows.T @ cp.multiply(y[cand], a), (dd, dd), order="C")
        W = cp.Variable((dd, dd), PSD=True)
        s = y[cand] @ a
        if wb > 0:
            h_s = 0.5 * wb - s - cp.square(cp.pos(s - wb)) / (2.0 * wb)
        else:
            h_s = -s
        obj = cp.sum(a) - cp.sum_squares(W - K - summary.P) / (2.0 * lam) + h_s
        cons = [a <= Cbox] if Cbox is not None else []
        prog = cp.Problem(cp.Maximize(obj), cons)
        if solve_small(prog):
            alpha = np.zeros(len(pr))
            alpha[cand] = np.clip(a.value, 0, Cbox if Cbox is not None else np.inf)  # type: ignore[arg-type]
            best = max(best, _pola_g(problem, alpha, summary))
            details["dual"] = "restricted dual program"
    details.update({"threshold b": b, "pairs in dual support": int(cand.size)})
    return upper, best, details
