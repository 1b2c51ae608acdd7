r"""Lower bounds for a structural (latent-set) hinge: the convex CCCP step of neighbourhood gerrymandering.

The problem (:class:`metricopt.methods.gerrymander.problem.GerrymanderStepProblem`, regularisers and
the correct sets' pull folded into :math:`P`, :math:`\lambda`, :math:`c` by
:func:`~metricopt.certify.dual.dual_summary`) is

.. math::

    \min_{M \succeq 0}\ \langle P, M\rangle + \tfrac{\lambda}{2}\|M\|_F^2 + c
    + C \sum_i \max_{h} \big(\Lambda_{ih} - \langle K_{ih}, M\rangle\big).

Writing each maximum as :math:`\max_{\alpha_i \in C\Delta} \sum_h \alpha_{ih}(\Lambda_{ih} -
\langle K_{ih}, M\rangle)` (:math:`\Delta` the simplex over point :math:`i`'s sets) gives, for any
such :math:`\alpha` with :math:`B = \sum \alpha_{ih} K_{ih}`, the weak-duality bound

* :math:`\lambda > 0`: :math:`g(\alpha) = c + \sum \alpha_{ih}\Lambda_{ih} - \|\Pi_+(B - P)\|_F^2 / (2\lambda)`;
* :math:`\lambda = 0` (trace regulariser, :math:`P = \lambda_{tr} I + P^*`, :math:`P^* = \sum_i C K_{ih^*_i}`):
  moving a share :math:`1 - s` of every :math:`\alpha_i` onto the correct set :math:`h^*_i` (loss 0)
  keeps :math:`\alpha` feasible and turns :math:`P - B` into :math:`P - P^* + s(P^* - B)`;
  :math:`g = c + s\sum \alpha_{ih}\Lambda_{ih}` for the largest :math:`s \in [0, 1]` making that PSD.

The multipliers are chosen from the candidate ``M``: every point's sets in the exact backend's
working set (kept by the problem) and its loss-augmented set at ``M``; sets within a band of the
point's maximum are free (a small restricted dual program), the point's weight ``C`` goes to its
best set otherwise. Every number of the bound is recomputed in float64 from that :math:`\alpha`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import cvxpy as cp
import numpy as np

from ..linalg import symmetrize
from ._dual import largest_psd_step, restricted_dual_program
from .verified import EPS, eig_error, gamma

if TYPE_CHECKING:
    from .dual import DualSummary

#: sets whose value is within BAND (relative to 1 + |value|) of their point's maximum get free multipliers
BAND = 1e-3
#: at most this many free multipliers in the restricted dual program
MAX_FREE = 3000


def _candidates(problem, M):
    """Rows ``(i, h)``: the kept working set, the correct sets and the loss-augmented sets at ``M``."""
    n = problem.n
    res = problem.latent_at(M)
    rows = [np.concatenate([np.arange(n)[:, None], problem.h_star], 1),
            np.concatenate([np.arange(n)[:, None], res.h_hat], 1)]
    if problem.rows is not None:
        rows.append(problem.rows)
    return np.unique(np.concatenate(rows), axis=0)


def latent_bound(problem: Any, M: np.ndarray, variables: dict, summary: DualSummary, feas_tol: float,
                 tol: float) -> tuple[float, float, dict]:
    r"""The certifier of problems whose loss is a latent-set hinge (the convex CCCP step of neighbourhood
    gerrymandering, Trivedi et al., NIPS 2014; module docstring).

    The weak-duality bound :math:`g(\alpha)` of the module docstring at multipliers chosen from ``M``; every
    number recomputed in float64, each rounding on the side that lowers the bound.

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
    P, lam, const = summary.P, summary.lam, summary.constant
    _, piece = summary.loss("latent_hinge")
    C = piece.weight
    V = problem.point(M)
    upper = problem._objective(V)
    rows = _candidates(problem, V["M"])
    lam_r = problem.set_losses(rows[:, 0], rows[:, 1:])
    val = problem.row_values(rows, V["M"])
    n = problem.n
    best = np.full(n, -np.inf)
    np.maximum.at(best, rows[:, 0], val)
    near = val >= best[rows[:, 0]] - BAND * (1.0 + np.abs(best[rows[:, 0]]))
    # fixed points: one row in the band gets the whole weight C; points with several rows in the band are free
    per_point = np.bincount(rows[:, 0][near], minlength=n)
    free_pt = per_point > 1
    if free_pt.sum() and near[free_pt[rows[:, 0]]].sum() > MAX_FREE:
        free_pt[:] = False  # too many: fix every point on its best row (still a valid bound)
    alpha = np.zeros(len(rows))
    top = np.full(n, -1)
    order = np.lexsort((-val, rows[:, 0]))
    first = np.ones(len(order), bool)
    first[1:] = rows[order[1:], 0] != rows[order[:-1], 0]
    top[rows[order[first], 0]] = order[first]
    fixed = ~free_pt
    alpha[top[fixed]] = C
    Bfix = problem.set_scatter(rows[top[fixed], 0], rows[top[fixed], 1:], np.full(fixed.sum(), C))
    details: dict[str, Any] = {"latent sets (candidates)": int(len(rows)), "points with free multipliers": int(free_pt.sum())}
    free = np.flatnonzero(near & free_pt[rows[:, 0]])
    if len(free):
        found = _restricted_dual(problem, P, lam, C, rows[free], lam_r[free], Bfix, float(alpha @ lam_r))
        if found is not None:
            alpha[free] = found
        else:  # no solver answered: the best row of each free point
            alpha[top[free_pt]] = C
    # the exact bound from alpha: clip, renormalise each point's multipliers to sum to C
    alpha = np.clip(alpha, 0.0, None)
    sums = np.bincount(rows[:, 0], weights=alpha, minlength=n)
    empty = sums <= 0
    alpha[top[empty]] = C
    sums[empty] = C
    alpha *= C / sums[rows[:, 0]]
    B = symmetrize(problem.set_scatter(rows[:, 0], rows[:, 1:], alpha))
    # rounding lowers the bound: the dot product rounded down by its error bound, the eigenvalues raised by theirs
    linear = float(alpha @ lam_r) - gamma(len(alpha) + 1) * float(np.abs(alpha) @ np.abs(lam_r))
    if lam > 0:
        D = symmetrize(B - P)
        w = np.linalg.eigvalsh(D) + eig_error(D, 2 * EPS * (np.abs(B) + np.abs(P)))
        lower = const + linear - float(np.sum(np.clip(w, 0, None) ** 2)) / (2 * lam) * (1 + 8 * EPS * len(w))
        details["dual form"] = "Frobenius-regularised (closed form)"
    else:
        P_star = problem.pull
        base = symmetrize(P - P_star)
        s = largest_psd_step(base, symmetrize(P_star - B), 1.0)
        lower = const + s * linear
        details["dual form"] = f"share s = {s:.6g} on the latent sets, the rest on h* (trace regulariser)"
    return upper, lower, details


def _restricted_dual(problem, P, lam, C, rows, lam_r, Bfix, fixed_linear):
    """Free multipliers on ``rows`` (each point's sum equal to ``C``) maximising the bound, or ``None``."""
    d = problem.d
    pts, inv = np.unique(rows[:, 0], return_inverse=True)
    K = np.stack([problem.set_scatter(rows[r:r + 1, 0], rows[r:r + 1, 1:], np.ones(1)).ravel()
                  for r in range(len(rows))])
    a = cp.Variable(len(rows), nonneg=True)
    E = np.zeros((len(pts), len(rows)))
    E[inv, np.arange(len(rows))] = 1.0
    B = Bfix + cp.reshape(K.T @ a, (d, d), order="C")
    obj = fixed_linear + lam_r @ a
    cons = [E @ a == C]
    if not restricted_dual_program(obj, cons, B, P, lam):
        return None
    return np.clip(a.value, 0.0, None)
