r"""A kept triplet search and when it answers a later one exactly.

A search of every triplet at a metric :math:`M_0` with margin :math:`m_0` returns the triplets with hinge argument
:math:`h^0_t = 1 + d_{M_0}(x_i, x_j) - d_{M_0}(x_i, x_l) > -m_0`. A later call at :math:`M` with a narrower margin
:math:`m < m_0` needs the triplets with :math:`h_t > -m` at :math:`M`. Every triplet the kept search left out has
:math:`d_{M_0}(x_i, x_l) \ge 1 + d_{M_0}(x_i, x_j) + m_0`. For any :math:`\rho > 0` and :math:`\delta \ge 0` with
:math:`M - \rho M_0 \succeq -\delta I`, :math:`d_M(x_i, x_l) \ge \rho\, d_{M_0}(x_i, x_l) - \delta q_i`, where
:math:`q_i \ge \|x_i - x_l\|^2` for every :math:`l` (:func:`point_radii`), so such a triplet has

.. math::

    h_t = 1 + d_M(x_i, x_j) - d_M(x_i, x_l) \le 1 + d_M(x_i, x_j) + \delta q_i - \rho\,(1 + d_{M_0}(x_i, x_j) + m_0),

which depends on the target pair :math:`(i, j)` alone (:func:`coverage`). When the right side is at most :math:`-m` for
every target pair, no left-out triplet is within :math:`m` at :math:`M`: the kept triplets, their :math:`h_t`
recomputed at :math:`M`, filtered to :math:`h_t > -m`, are exactly the triplets a new search would return. Where
:math:`M \succeq \rho M_0` (the smallest eigenvalue of the pencil :math:`(M, M_0)`) :math:`\delta` is 0; a low-rank
metric, whose pencil value is 0, is covered by the additive term (:func:`pencil_candidates`). The test costs a few
``d x d`` eigenvalue problems and the ``n k`` target distances; a search costs ``n^2 d``.

Where the test fails it also says how wide the kept margin would have had to be (:attr:`KeptSearch.need`): the next
search is then widened by twice that (:func:`headroom`), when it is small against the margin, so that the searches of
the iterations that follow are answered from it. Weinberger & Saul's solver (JMLR 2009, Appendix A.1) re-checks every
triplet only every 10-20 iterations and checks its active list in between, verifying the whole set at convergence;
here an answer between searches is exact by the bound above.

Every rounding errs towards a new search: each :math:`\delta` is minus the smallest computed eigenvalue of
:math:`M - \rho M_0` plus that eigenvalue's rounding, and the test has a slack of :data:`SLACK` relative to the
distances.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

#: relative slack of the coverage test (the searches' and this test's rounding of the distances)
SLACK = 1e-9
#: a new search is widened by this many times the margin the last failed test needed
HEADROOM_GROWTH = 2.0
#: ... when that is at most max(margin, HEADROOM_FLOOR) (a larger drift is not expected to settle within one search's
#: margin: the widened search would only cost more)
HEADROOM_FLOOR = 0.05
#: triplets per block when their hinge arguments are recomputed (memory ``O(block * d)``)
BLOCK = 1 << 16


@dataclass
class KeptSearch:
    """The last search of every triplet: at ``M`` (copied) with ``margin``, its ``found`` ``(i, j, l, h)``, the
    target distances ``target_d`` (``n x k``) at ``M``; ``need`` is the margin the last failed coverage test asked of
    it beyond the caller's (``inf`` when unknown)."""

    M: np.ndarray
    margin: float
    found: tuple
    target_d: np.ndarray
    need: float = field(default=np.inf)
    #: the last metric the kept search was tested at, with what the test computed there (``(M, Z, target
    #: distances, pencil bounds)``: a certificate asks at one iterate several times, with several margins)
    memo: tuple | None = None


def target_distances(Z: np.ndarray, T: np.ndarray) -> np.ndarray:
    """``d(i, T[i, kk]) = ||Z_{T[i, kk]} - Z_i||^2``, shape ``T.shape``, rounded as the searches round them
    (:func:`metricopt.constraints.iter_triplets`), in blocks of :data:`BLOCK` anchors.

    Parameters
    ----------
    Z : (n, d) ndarray
        The mapped points (``Z = X L^T``).
    T : (n, k) ndarray of int
        The target neighbours.

    Returns
    -------
    (n, k) ndarray
        The squared distances.
    """
    out = np.empty(T.shape)
    step = max(1, BLOCK // max(T.shape[1], 1))
    for s in range(0, T.shape[0], step):
        Tz = Z[T[s:s + step]] - Z[s:s + step][:, None, :]
        out[s:s + step] = np.einsum("bkd,bkd->bk", Tz, Tz)
    return out


def point_radii(X: np.ndarray) -> np.ndarray:
    r"""``q_i >= ||x_i - x_l||^2`` for every point ``l``: :math:`(r_i + R)^2` with :math:`r_i = \|x_i - c\|`,
    :math:`R = \max_l \|x_l - c\|`, ``c`` the mean (rounded up by :data:`SLACK`).

    Parameters
    ----------
    X : (n, d) ndarray
        The points.

    Returns
    -------
    (n,) ndarray
        The bounds.
    """
    r = np.sqrt(((X - X.mean(axis=0)) ** 2).sum(axis=1))
    return (r + r.max(initial=0.0)) ** 2 * (1.0 + SLACK) + SLACK


def _floor_at(M: np.ndarray, M0: np.ndarray, rho: float) -> float:
    r"""``delta >= 0`` with :math:`M - \rho M_0 \succeq -\delta I`: minus the smallest computed eigenvalue, plus the
    rounding of a backward-stable symmetric eigensolver (a few :math:`d\,\epsilon\,\|\cdot\|`)."""
    d = M.shape[0]
    E = M - rho * M0
    rounding = 8.0 * d * np.finfo(float).eps * (np.linalg.norm(M) + rho * np.linalg.norm(M0))
    return max(-float(np.linalg.eigvalsh(E)[0]), 0.0) + rounding


def pencil_candidates(M: np.ndarray, M0: np.ndarray) -> list[float]:
    r"""The values of :math:`\rho` that :func:`coverage` tries: the smallest eigenvalue of the pencil
    :math:`(M, M_0 + \gamma I)` (tiny :math:`\gamma`: the second matrix definite) and a few fractions of the trace
    ratio (a low-rank metric's pencil value is 0, its null space's drift then bounded additively)."""
    d = M.shape[0]
    scale = max(float(np.abs(np.diag(M0)).max(initial=0.0)), 1e-300)
    out = []
    try:
        rho = float(scipy.linalg.eigh(M, M0 + 1e-9 * scale * np.eye(d), eigvals_only=True,
                                      subset_by_index=[0, 0])[0])
        if np.isfinite(rho) and rho > 0.0:
            out.append(rho * (1.0 - 1e-7))
    except (np.linalg.LinAlgError, ValueError):
        pass
    ratio = float(np.trace(M)) / max(float(np.trace(M0)), 1e-300)
    out += [f * min(ratio, 1.0) for f in PENCIL_FRACTIONS]
    return [r for r in out if np.isfinite(r) and r > 0.0]


#: fractions of ``min(1, tr M / tr M0)`` tried as :math:`\rho` (:func:`pencil_candidates`)
PENCIL_FRACTIONS = (1.0, 0.999, 0.99, 0.97, 0.9, 0.7)


def pencil_bounds(M: np.ndarray, M0: np.ndarray) -> list[tuple[float, float]]:
    r"""Pairs :math:`(\rho, \delta)` with :math:`\rho > 0` and :math:`M - \rho M_0 \succeq -\delta I`, one per
    :func:`pencil_candidates` value.

    Parameters
    ----------
    M, M0 : (d, d) ndarray
        The metric of the call and the kept search's.

    Returns
    -------
    list of (float, float)
        The pairs.
    """
    return [(rho, _floor_at(M, M0, rho)) for rho in pencil_candidates(M, M0)]


def coverage(kept: KeptSearch, target_d: np.ndarray, margin: float, radii: np.ndarray,
             bounds: list[tuple[float, float]]) -> float:
    r"""The margin, beyond ``margin``, that a kept search needs to answer a call at ``M`` exactly: the kept search
    answers it when the result is at most ``kept.margin - margin``.

    For any :math:`\rho > 0` and :math:`\delta \ge 0` with :math:`M - \rho M_0 \succeq -\delta I`,
    :math:`d_M(x_i, x_l) \ge \rho\, d_{M_0}(x_i, x_l) - \delta q_i` (``q_i = radii[i]`` bounds
    :math:`\|x_i - x_l\|^2`), so every triplet the kept search left out has
    :math:`h_t \le 1 + d_M(x_i, x_j) + \delta q_i - \rho\,(1 + d_{M_0}(x_i, x_j) + m_0)`: the module docstring's
    bound, with the additive term for a metric whose null space moved (:math:`\delta = 0` where
    :math:`M \succeq \rho M_0`). The best of the ``bounds`` is taken.

    Parameters
    ----------
    kept : KeptSearch
        The kept search.
    target_d : (n, k) ndarray
        The target distances at ``M``.
    margin : float
        The call's margin.
    radii : (n,) ndarray
        :func:`point_radii` of the points.
    bounds : list of (float, float)
        :func:`pencil_bounds` of ``M`` and ``kept.M``.

    Returns
    -------
    float
        The margin needed beyond ``margin`` (``inf`` when no bound holds).
    """
    a, a0 = target_d, kept.target_d
    best = np.inf
    for rho, delta in bounds:
        # 1 + a + delta q + m <= rho (1 + a0 + m0) up to the slack, solved for m0
        m0 = (1.0 + a + delta * radii[:, None] + margin) * (1.0 + SLACK) / rho - 1.0 - a0 + SLACK * (1.0 + a0)
        best = min(best, float(m0.max(initial=-np.inf)) - margin)
    return max(best, 0.0)


def headroom(kept: KeptSearch | None, margin: float) -> float:
    """How much wider than ``margin`` a new search goes: :data:`HEADROOM_GROWTH` times the need the last failed
    test measured, when that is at most ``max(margin, HEADROOM_FLOOR)``; else 0.

    Parameters
    ----------
    kept : KeptSearch or None
        The search being replaced.
    margin : float
        The new search's margin.

    Returns
    -------
    float
        The extra margin.
    """
    if kept is None or not np.isfinite(kept.need):
        return 0.0
    extra = HEADROOM_GROWTH * kept.need
    return extra if extra <= max(margin, HEADROOM_FLOOR) else 0.0


def hinge_arguments(Z: np.ndarray, T: np.ndarray, target_d: np.ndarray, i: np.ndarray, j: np.ndarray,
                    l: np.ndarray) -> np.ndarray:
    """``h_t = 1 + ||Z_j - Z_i||^2 - ||Z_i - Z_l||^2`` for the triplets ``(i, j, l)``, in blocks of :data:`BLOCK`,
    with the searches' expressions (:func:`metricopt.constraints.iter_triplets`), so that the values are theirs bit
    for bit (an objective summed from them is the one a fresh search gives).

    Parameters
    ----------
    Z : (n, d) ndarray
        The mapped points.
    T : (n, k) ndarray of int
        The target neighbours.
    target_d : (n, k) ndarray
        :func:`target_distances` at ``Z``.
    i, j, l : (m,) ndarray of int
        The triplets.

    Returns
    -------
    (m,) ndarray
        The hinge arguments.
    """
    h = np.empty(i.size)
    for s in range(0, i.size, BLOCK):
        e = min(s + BLOCK, i.size)
        ii = i[s:e]
        kk = np.argmax(T[ii] == j[s:e, None], axis=1)
        dl = Z[ii] - Z[l[s:e]]
        h[s:e] = 1.0 + target_d[ii, kk] - np.einsum("md,md->m", dl, dl)
    return h
