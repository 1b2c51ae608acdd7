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

import cvxpy as cp
import numpy as np
import scipy.linalg

from ..linalg import pair_scatter, symmetrize
from ._dual import solve_small
from .dual import dual_summary


def budget_bound(problem, M, variables, summary, feas_tol, tol):
    """The certifier of problems over ``{M PSD, <S, M> <= 1}`` whose loss is ``w sum sqrt(d_M)``
    with ``w <= 0`` (MMC), plus any linear terms and constants: ``(upper, lower, details)``."""
    res = mmc_certify(problem, M, feas_tol, summary=summary)
    if res is None:
        from .certificate import Certificate

        return Certificate.infeasible(tol, problem.method, "sum of similar-pair distances exceeds 1 beyond feas_tol")
    return res


def mmc_certify(problem, M, feas_tol, tight=1e-7, max_pairs_sdp=5_000, summary=None):
    r"""Return ``(upper, lower, details)`` for MMC, or ``None`` when ``M`` is infeasible.

    With the loss :math:`w \sum_{l \in D} \sqrt{d_M(l)}` (:math:`w \le 0`), linear terms
    :math:`\langle P, M\rangle` and a constant :math:`c`, the bound of the module docstring becomes
    :math:`c - |w| \sum_l c_l / 2 - \max(0, \lambda_{\max}(|w| G(c) - P, S))`."""
    if summary is None:
        summary = dual_summary(problem)
    term, piece = summary.loss("sqrt_distances")
    scale, P, const = -float(piece.weight), summary.P, summary.constant
    S = problem.geometry.budget
    budget = float(np.sum(S * M))
    if budget > 1.0 + feas_tol:
        return None
    details = {}
    if budget > 1.0:
        details["rescaled onto budget by"] = 1.0 / budget
    V = problem.repair({"M": M})
    M = V["M"]
    upper = problem._objective(V)
    dis = term.pairs
    diagonal = problem.geometry.diagonal
    dl = problem.pair_distances(dis[:, 0], dis[:, 1], M)
    c0 = np.sqrt(np.maximum(dl, 0.0))
    top = max(float(c0.max(initial=0.0)), 1e-12)
    # c_l = sqrt(d_l) is the tight choice at an optimum; pairs with d_l ~ 0 (a boundary
    # solution) blow G up, so also try flooring c at a few levels and keep the best bound
    best = np.inf
    for floor in [1e-8 * top] + list(top * np.logspace(-6, 0, 25)):
        c = np.maximum(c0, floor)
        G = scale * pair_scatter(problem.X, dis[:, 0], dis[:, 1], 0.5 / c) - P
        lam_max = _max_gen_eig(G, S, diagonal, details)
        best = min(best, 0.5 * scale * float(np.sum(c)) + lam_max)
    F_upper = best
    if F_upper + upper - const > tight * abs(upper) and len(dis) <= max_pairs_sdp and scale > 0:
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
            G = scale * pair_scatter(problem.X, dis[:, 0], dis[:, 1], 0.5 / c) - P
            F_upper = min(F_upper, 0.5 * scale * float(np.sum(c)) + _max_gen_eig(G, S, diagonal, details))
            details["dual program"] = "solved (dual function minimised over c)"
    details["similar-pair budget <S, M>"] = budget
    return upper, const - F_upper, details


def _max_gen_eig(G, S, diagonal, details):
    """``max {<G, M> : M PSD (diagonal if asked), <S, M> <= 1}`` (``inf`` when unbounded)."""
    if diagonal:
        g, s = np.diag(G), np.diag(S)
        if np.any((s <= 0) & (g > 0)):
            return np.inf
        pos = s > 0
        return max(0.0, float(np.max(g[pos] / s[pos])))
    wS = np.linalg.eigvalsh(S)
    if wS[0] <= 1e-12 * max(wS[-1], 1e-300):
        details["note"] = "the similar-pair scatter S is singular: the MMC bound is unavailable (possibly unbounded)"
        return np.inf
    lam = float(scipy.linalg.eigh(G, S, eigvals_only=True, subset_by_index=[S.shape[0] - 1] * 2)[0])
    return max(0.0, lam * (1 + 1e-10) + 1e-14 * abs(lam))


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


def threshold_bound(problem, M, variables, summary, feas_tol, tol):
    """The certifier of problems over ``{M PSD, b >= 1}`` with pair margins (POLA: soft margins as a
    ``pair_hinge`` loss, or hard-margin constraints), a Frobenius part, linear terms, constants and a
    ``threshold_square`` term on ``b``: ``(upper, lower, details)``."""
    res = pola_certify(problem, M, variables.get("b"), feas_tol, tol=tol, summary=summary)
    if res is None:
        from .certificate import Certificate

        return Certificate.infeasible(tol, problem.method,
                                      "pair margins y_t (b - d_t) >= 1 violated beyond feas_tol (or b < 1)")
    return res


def pola_certify(problem, M, b, feas_tol, band=1e-3, max_free=4000, tol=0.0, summary=None):
    """Return ``(upper, lower, details)`` for POLA, or ``None`` when ``(M, b)`` is infeasible.

    Soft margin: first the dual function at the cheap points ``alpha_t = C phi_s'(h_t)``
    (the derivative of the hinge smoothed with width ``s``, a few widths) is tried; the
    restricted dual program runs only when none of them certifies within ``tol``."""
    if summary is None:
        summary = dual_summary(problem)
    details = {}
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
    if cand.size and upper - best > tol * max(abs(upper), 1e-12):
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
            alpha[cand] = np.clip(a.value, 0, Cbox if Cbox is not None else np.inf)
            best = max(best, _pola_g(problem, alpha, summary))
            details["dual"] = "restricted dual program"
    details.update({"threshold b": b, "pairs in dual support": int(cand.size)})
    return upper, best, details
