r"""Line-integral distances through a piecewise-constant metric field (exact), and grid geodesics.

Reference: D. Ramanan and S. Baker, "Local distance functions: a taxonomy, new algorithms, and an
evaluation", IEEE PAMI 33(4):794-806, 2011 (Sec. 3 and Eq. 21 for the interpolation, Sec. 3.3 for
the line-integral and geodesic distances).

The metric field
----------------
``R`` reference points :math:`r_1, \dots, r_R` (rows of ``refs``, shape ``(R, d)``) carry symmetric
PSD metrics :math:`M_1, \dots, M_R` (``metrics``, shape ``(R, d, d)``). The field is interpolated by
*nearest neighbour with own-metric cells* (the paper's Eq. 21): a point :math:`x` belongs to the cell

.. math:: c(x) = \operatorname*{argmin}_s \; q_s(x), \qquad q_s(x) = (x - r_s)^\top M_s (x - r_s),

(ties go to the lowest index), and the metric tensor at :math:`x` is :math:`M_{c(x)}`: piecewise
constant, with cell boundaries that are pieces of quadrics.

Line-integral distance
----------------------
The length of the straight segment :math:`x(\lambda) = a + \lambda D`, :math:`D = b - a`,
:math:`\lambda \in [0, 1]`, under that tensor:

.. math:: D_{\rm line}(a, b) = \int_0^1 \sqrt{D^\top M_{c(x(\lambda))} D}\; d\lambda .

Along the segment each score is a quadratic in :math:`\lambda`,

.. math::

    q_s(\lambda) = A_s \lambda^2 + B_s \lambda + C_s, \quad
    A_s = D^\top M_s D, \quad B_s = 2 D^\top M_s (a - r_s), \quad C_s = (a - r_s)^\top M_s (a - r_s),

so two cells :math:`s, t` can only swap where :math:`q_s(\lambda) = q_t(\lambda)` (at most two
roots). Sorting all such crossings in :math:`[0, 1]` splits the segment into pieces of constant cell
(the cell of a piece is the argmin at its midpoint), and

.. math:: D_{\rm line}(a, b) = \sum_k (\lambda_{k+1} - \lambda_k) \sqrt{A_{c_k}} .

That is :func:`_line_integral_bruteforce` (the reference; :math:`O(R^2)` pairs). The production code
(:func:`line_integral_distance`) walks the *lower envelope* of the :math:`R` parabolas instead: from
the current cell :math:`c` at :math:`\lambda_{\rm cur}`, the next event is the smallest root
:math:`> \lambda_{\rm cur}` of some :math:`f_t = q_t - q_c` at which :math:`f_t` turns negative
(:math:`t` becomes strictly smaller than :math:`c`); the next cell is the argmin *just after* the
event (lexicographic minimum of :math:`(q_s, q_s', q_s''/2, s)` at the event, with a relative tolerance
on the ties; each piece is then checked against the direct argmin at its midpoint, the brute force's
own rule, and redone in that cell if the tie was decided wrongly). Two parabolas cross at most twice, so the envelope has at most :math:`2R - 1` pieces
(a Davenport-Schinzel sequence of order 2) and the walk costs :math:`O(R)` per piece after the
:math:`O(R d^2)` computation of :math:`A, B, C`.

Grid geodesic
-------------
For 2-D fields :func:`grid_geodesic` runs Dijkstra on an ``n x n`` grid with 8- or 16-neighbour
stencils, each edge weighted by its exact line integral: the result is the length of an actual path
from ``a`` to ``b`` (through the nodes nearest to them), hence an upper bound on the geodesic
distance :math:`\inf_\gamma \int \sqrt{\dot\gamma^\top M_{c(\gamma)} \dot\gamma}`.

Metrics must be symmetric (not checked: a symmetry check costs a pass over the ``R d^2`` array, as
much as the distance itself). Rank-deficient metrics are fine.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "GridGeodesic",
    "cell_of",
    "grid_geodesic",
    "line_coefficients",
    "line_integral_distance",
    "line_integral_distances",
]

#: relative tolerance under which two scores (or derivatives, or curvatures) count as tied when the
#: walk picks the cell just after an event; rounding in the scores is ~1e-16 of the same scale
TIE_RTOL = 1e-12
#: block size (elements of the ``(points, R, d)`` temporaries) for the vectorised routines
_BLOCK = 1 << 21


def _max_steps(R):
    """The walk's step guard: the envelope of ``R`` parabolas has at most ``2R - 1`` pieces; past
    ``4R + 64`` events the walk gives up and the brute force answers (a guard against rounding loops,
    never seen in the tests)."""
    return 4 * R + 64


# ----------------------------------------------------------------------------- validation
def _field(refs, metrics):
    refs = np.asarray(refs, dtype=float)
    metrics = np.asarray(metrics, dtype=float)
    if refs.ndim != 2:
        raise ValueError(f"refs must be (R, d), got shape {refs.shape}")
    R, d = refs.shape
    if R == 0:
        raise ValueError("the field needs at least one reference point")
    if metrics.shape != (R, d, d):
        raise ValueError(f"metrics must be (R, d, d) = {(R, d, d)}, got shape {metrics.shape}")
    return refs, metrics


def _point(x, d, name):
    x = np.asarray(x, dtype=float)
    if x.shape != (d,):
        raise ValueError(f"{name} must have shape ({d},), got {x.shape}")
    return x


# ----------------------------------------------------------------------------- cells
def _scores(points, refs, metrics):
    """``q[n, s] = (x_n - r_s)^T M_s (x_n - r_s)`` for a block of points, shape ``(n, R)``."""
    diff = points[None, :, :] - refs[:, None, :]  # (R, n, d)
    Md = np.matmul(diff, metrics)  # (R, n, d): rows diff_n^T M_s (= (M_s diff_n)^T, M_s symmetric)
    return np.einsum("snd,snd->ns", Md, diff)


def cell_of(points: ArrayLike, refs: ArrayLike, metrics: ArrayLike) -> Any:
    r"""Own-metric nearest-neighbour cell of each point (Ramanan & Baker 2011, Eq. 21).

    .. math:: c(x) = \operatorname*{argmin}_s (x - r_s)^\top M_s (x - r_s),

    ties to the lowest index (``numpy.argmin``).

    Parameters
    ----------
    points : array_like, shape (n, d) or (d,)
    refs : array_like, shape (R, d)
        Reference points :math:`r_s`.
    metrics : array_like, shape (R, d, d)
        Symmetric PSD metrics :math:`M_s`.

    Returns
    -------
    ndarray of int, shape (n,) (or a scalar int for a single point)
        Index of the cell of each point. Computed in blocks of points so that the ``(n, R, d)``
        temporaries stay below a few tens of MB.

    Raises
    ------
    ValueError
        When ``refs`` is not ``(R, d)`` with ``R >= 1`` or ``metrics`` not ``(R, d, d)``, or the points do not
        have ``d`` columns.
    """
    refs, metrics = _field(refs, metrics)
    X = np.asarray(points, dtype=float)
    single = X.ndim == 1
    X = np.atleast_2d(X)
    R, d = refs.shape
    if X.shape[1] != d:
        raise ValueError(f"points must have {d} columns, got shape {X.shape}")
    out = np.empty(len(X), dtype=np.intp)
    step = max(1, _BLOCK // (R * d))
    for i in range(0, len(X), step):
        out[i:i + step] = np.argmin(_scores(X[i:i + step], refs, metrics), axis=1)
    return int(out[0]) if single else out


# ----------------------------------------------------------------------------- coefficients
def line_coefficients(a: ArrayLike, B: ArrayLike, refs: ArrayLike,
                      metrics: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Coefficients of the scores along the segments from one start ``a`` to many ends ``B``.

    For each end :math:`b_j` (row of ``B``), with :math:`D_j = b_j - a`,

    .. math::

        q_s(\lambda) = A_{js} \lambda^2 + B_{js} \lambda + C_s, \quad
        A_{js} = D_j^\top M_s D_j, \quad B_{js} = 2 D_j^\top M_s (a - r_s), \quad
        C_s = (a - r_s)^\top M_s (a - r_s).

    The query-side products :math:`M_s (a - r_s)` are computed once (:math:`O(R d^2)`), so each
    extra end costs one column of a single ``(R d, d) @ (d, J)`` matrix product for :math:`A` plus
    :math:`O(R d)` for :math:`B`: the cheap way to re-rank a shortlist of ends for one query.

    Parameters
    ----------
    a : array_like, shape (d,)
    B : array_like, shape (J, d)
    refs, metrics : the field, shapes ``(R, d)`` and ``(R, d, d)`` (symmetric metrics).

    Returns
    -------
    A : ndarray, shape (J, R)
    Bc : ndarray, shape (J, R)
    C : ndarray, shape (R,)

    Raises
    ------
    ValueError
        When ``refs`` is not ``(R, d)`` with ``R >= 1`` or ``metrics`` not ``(R, d, d)``, ``a`` is not ``(d,)``
        or ``B`` not ``(J, d)``.
    """
    refs, metrics = _field(refs, metrics)
    R, d = refs.shape
    a = _point(a, d, "a")
    Bp = np.asarray(B, dtype=float)
    if Bp.ndim != 2 or Bp.shape[1] != d:
        raise ValueError(f"B must be (J, {d}), got shape {Bp.shape}")
    return _coefficients(a, Bp - a, refs, metrics)


def _coefficients(a, D, refs, metrics):
    """:func:`line_coefficients` on validated arrays, with the directions ``D = B - a`` given."""
    R, d = refs.shape
    am = a - refs  # (R, d)
    Ma = np.matmul(metrics, am[:, :, None])[:, :, 0]  # (R, d): M_s (a - r_s)
    C = np.einsum("sd,sd->s", am, Ma)
    Bc = 2.0 * (D @ Ma.T)  # (J, R), M_s symmetric
    J = len(D)
    A = np.empty((J, R))
    step = max(1, _BLOCK // max(1, R * d))
    flat = metrics.reshape(R * d, d)
    for j in range(0, J, step):
        Dj = D[j:j + step]
        MD = (flat @ Dj.T).reshape(R, d, len(Dj))  # M_s D_j
        A[j:j + step] = np.einsum("sdj,jd->js", MD, Dj)
    return A, Bc, C


# ----------------------------------------------------------------------------- quadratics
def _quad_roots(qa, qb, qc):
    r"""Real roots of :math:`q_a x^2 + q_b x + q_c = 0`, elementwise, without cancellation.

    Uses :math:`q = -\tfrac12 (q_b + \operatorname{sign}(q_b)\sqrt{q_b^2 - 4 q_a q_c})`, roots
    :math:`q / q_a` and :math:`q_c / q` (Numerical Recipes, Sec. 5.6). The formula degrades
    gracefully: for :math:`q_a \to 0` the second root tends to the linear root
    :math:`-q_c / q_b` and the first one to :math:`\pm\infty`. Missing roots (negative
    discriminant, constant equations) are ``nan``; a double root may be reported once.

    Returns
    -------
    r1, r2 : ndarray
        Not ordered.
    """
    with np.errstate(all="ignore"):
        disc = qb * qb - 4.0 * qa * qc
        sq = np.sqrt(disc)  # nan where disc < 0
        q = -0.5 * (qb + np.where(qb >= 0, sq, -sq))
        r1 = q / qa
        r2 = qc / q
    return r1, r2


def _entering_roots(dA, dB, dC):
    r"""For :math:`f = dA\,\lambda^2 + dB\,\lambda + dC`, the root after which ``f`` turns negative.

    With :math:`dA > 0` ``f`` is negative between its roots (the smaller one enters), with
    :math:`dA < 0` outside them (the larger one enters), with :math:`dA = 0` after the linear root
    when :math:`dB < 0`. ``nan`` where there is none. A tiny :math:`dA` of either sign gives the
    linear root plus a root far outside :math:`[0, 1]`, so the choice stays right.
    """
    r1, r2 = _quad_roots(dA, dB, dC)
    with np.errstate(invalid="ignore"):
        lo, hi = np.fmin(r1, r2), np.fmax(r1, r2)
        lin = np.where(dB < 0, r2, np.nan)
    return np.where(dA > 0, lo, np.where(dA < 0, hi, lin))


def _cell_after(lam, A, B, C, scale):
    r"""The cell that is minimal just after :math:`\lambda`: the lexicographic minimum of
    :math:`(q_s(\lambda), q_s'(\lambda), A_s, s)`, each comparison up to :data:`TIE_RTOL` relative
    to the coefficients' scale (Taylor: :math:`q_s(\lambda + h) = q_s + h q_s' + h^2 A_s`)."""
    q = (A * lam + B) * lam + C
    m = int(np.argmin(q))
    cand = np.flatnonzero(q - q[m] <= TIE_RTOL * (scale + scale[m]))
    if len(cand) == 1:
        return int(cand[0])
    dq = 2.0 * A[cand] * lam + B[cand]
    dscale = 2.0 * np.abs(A[cand]) + np.abs(B[cand])
    m = int(np.argmin(dq))
    cand = cand[dq - dq[m] <= TIE_RTOL * (dscale + dscale[m])]
    if len(cand) == 1:
        return int(cand[0])
    Ac = A[cand]
    m = int(np.argmin(Ac))
    cand = cand[Ac - Ac[m] <= TIE_RTOL * (np.abs(Ac) + abs(Ac[m]))]
    return int(cand.min())


def _walk(A, B, C):
    r"""Lower-envelope walk over the parabolas :math:`q_s(\lambda) = A_s\lambda^2 + B_s\lambda + C_s`
    on :math:`[0, 1]`.

    From the current cell :math:`c` at :math:`\lambda_{\rm cur}` the next event :math:`\lambda_n` is
    the smallest root :math:`> \lambda_{\rm cur}` at which some :math:`q_t - q_c` turns negative
    (:func:`_entering_roots`), or 1. Before the piece :math:`[\lambda_{\rm cur}, \lambda_n]` is
    recorded, :math:`c` is checked against the direct argmin at its midpoint (the brute force's
    rule): if another cell is lower there by more than rounding (8 ulp of the scores' scale), the
    choice made at :math:`\lambda_{\rm cur}` was wrong (a tie decided within :data:`TIE_RTOL`, a root
    lost to rounding) and the step is redone from :math:`\lambda_{\rm cur}` in that cell. After the
    piece, the next cell is the one minimal just after :math:`\lambda_n` (:func:`_cell_after`).

    Returns
    -------
    breaks : ndarray, shape (K + 1,)
        :math:`0 = \lambda_0 < \dots < \lambda_K = 1`.
    cells : ndarray of int, shape (K,)
        The cell of each piece (consecutive pieces have different cells). ``(None, None)`` when the
        step guard (:func:`_max_steps`) was hit: the caller then falls back to the brute force.
    """
    R = len(A)
    scale = np.abs(A) + np.abs(B) + np.abs(C)
    ulp8 = 8.0 * np.finfo(float).eps
    lam = 0.0
    c = _cell_after(0.0, A, B, C, scale)
    breaks, cells = [0.0], []
    for _ in range(_max_steps(R)):
        ent = _entering_roots(A - A[c], B - B[c], C - C[c])
        with np.errstate(invalid="ignore"):
            ok = (ent > lam) & (ent < 1.0)
        nxt = float(ent[ok].min()) if ok.any() else 1.0
        mid = 0.5 * (lam + nxt)
        q = (A * mid + B) * mid + C
        m = int(np.argmin(q))
        if m != c and q[m] < q[c] - ulp8 * (scale[m] + scale[c]):
            c = m  # the cell chosen at lam is not the one below: redo the step in the right one
            continue
        if cells and cells[-1] == c:  # a spurious event (rounding, tangency): the piece goes on
            breaks[-1] = nxt
        else:
            cells.append(c)
            breaks.append(nxt)
        if nxt >= 1.0:
            return np.asarray(breaks), np.asarray(cells, dtype=np.intp)
        lam = nxt
        c = _cell_after(lam, A, B, C, scale)
    return None, None


def _finish(breaks, cells, A, squared, return_pieces):
    length = float(np.dot(np.diff(breaks), np.sqrt(np.maximum(A[cells], 0.0))))
    value = length * length if squared else length
    if return_pieces:
        return value, (breaks, cells)
    return value


# ----------------------------------------------------------------------------- distances
def line_integral_distance(a: ArrayLike, b: ArrayLike, refs: ArrayLike, metrics: ArrayLike, squared: bool = False,
                           return_pieces: bool = False) -> Any:
    r"""Exact line-integral distance through the own-metric NN field (Ramanan & Baker 2011).

    .. math::

        D_{\rm line}(a, b) = \int_0^1 \sqrt{(b - a)^\top M_{c(a + \lambda (b - a))} (b - a)}\;
        d\lambda = \sum_k (\lambda_{k+1} - \lambda_k) \sqrt{(b - a)^\top M_{c_k} (b - a)},

    the pieces :math:`[\lambda_k, \lambda_{k+1}]` and their cells :math:`c_k` found by the
    lower-envelope walk (module docstring): :math:`O(R d^2 + K R)` for :math:`K` pieces, never the
    :math:`R^2` pairs.

    Parameters
    ----------
    a, b : array_like, shape (d,)
    refs : array_like, shape (R, d)
    metrics : array_like, shape (R, d, d)
        Symmetric PSD (rank-deficient allowed).
    squared : bool, default False
        Return the square of the length instead.
    return_pieces : bool, default False
        Also return ``(breaks, cells)``: the breakpoints :math:`0 = \lambda_0 < \dots <
        \lambda_K = 1` and the cell of each piece.

    Returns
    -------
    float, or ``(float, (breaks, cells))`` with ``return_pieces``.

    Raises
    ------
    ValueError
        When ``refs`` is not ``(R, d)`` with ``R >= 1`` or ``metrics`` not ``(R, d, d)``, or ``a`` or ``b`` is
        not ``(d,)``.
    """
    refs, metrics = _field(refs, metrics)
    d = refs.shape[1]
    a = _point(a, d, "a")
    b = _point(b, d, "b")
    A, Bc, C = _coefficients(a, (b - a)[None, :], refs, metrics)
    return _from_coefficients(A[0], Bc[0], C, a, b, refs, metrics, squared, return_pieces)


def _from_coefficients(A, B, C, a, b, refs, metrics, squared, return_pieces):
    breaks, cells = _walk(A, B, C)
    if breaks is None:  # step guard hit: the reference answer
        return _line_integral_bruteforce(a, b, refs, metrics, squared, return_pieces)
    return _finish(breaks, cells, A, squared, return_pieces)


def line_integral_distances(A: ArrayLike, B: ArrayLike, refs: ArrayLike, metrics: ArrayLike,
                            squared: bool = False) -> np.ndarray:
    r"""Line-integral distances :math:`D_{\rm line}(a_i, b_i)` for many pairs.

    Parameters
    ----------
    A : array_like, shape (n, d) or (d,)
        Starts. A single start (shape ``(d,)``) is paired with every row of ``B`` and uses the
        shared query-side precomputation of :func:`line_coefficients` (one matrix product for all
        ends: the shortlist re-ranking case).
    B : array_like, shape (n, d)
        Ends.
    refs, metrics, squared : as in :func:`line_integral_distance`.

    Returns
    -------
    ndarray, shape (n,)

    Raises
    ------
    ValueError
        When ``refs`` is not ``(R, d)`` with ``R >= 1`` or ``metrics`` not ``(R, d, d)``, or ``A`` and ``B`` do
        not match.
    """
    refs, metrics = _field(refs, metrics)
    R, d = refs.shape
    Aa = np.asarray(A, dtype=float)
    Bb = np.asarray(B, dtype=float)
    if Bb.ndim != 2 or Bb.shape[1] != d:
        raise ValueError(f"B must be (n, {d}), got shape {Bb.shape}")
    out = np.empty(len(Bb))
    if Aa.ndim == 1:
        a = _point(Aa, d, "A")
        cA, cB, cC = _coefficients(a, Bb - a, refs, metrics)
        for j in range(len(Bb)):
            out[j] = _from_coefficients(cA[j], cB[j], cC, a, Bb[j], refs, metrics, squared, False)
        return out
    if Aa.shape != Bb.shape:
        raise ValueError(f"A and B must have the same shape, got {Aa.shape} and {Bb.shape}")
    for j in range(len(Bb)):
        cA, cB, cC = _coefficients(Aa[j], (Bb[j] - Aa[j])[None, :], refs, metrics)
        out[j] = _from_coefficients(cA[0], cB[0], cC, Aa[j], Bb[j], refs, metrics, squared, False)
    return out


def _line_integral_bruteforce(a, b, refs, metrics, squared=False, return_pieces=False):
    r"""Reference implementation of :func:`line_integral_distance` by all pairwise crossings.

    For every pair :math:`s < t` the roots of :math:`q_s(\lambda) - q_t(\lambda) = 0` in
    :math:`(0, 1)` are collected; with 0 and 1 they are sorted (duplicates removed); the cell of each
    piece is the direct argmin :func:`cell_of` at its midpoint point :math:`a + \bar\lambda D`
    (ties to the lowest index), and the distance is
    :math:`\sum_k (\lambda_{k+1} - \lambda_k)\sqrt{D^\top M_{c_k} D}` with :math:`D^\top M D`
    computed directly. :math:`O(R^2)` roots and :math:`O(R^2 \cdot R d^2)` cell evaluations: for
    tests only. Pieces are returned unmerged (consecutive pieces may share a cell).
    """
    refs, metrics = _field(refs, metrics)
    d = refs.shape[1]
    a = _point(a, d, "a")
    b = _point(b, d, "b")
    D = b - a
    am = a - refs
    MD = np.einsum("sde,e->sd", metrics, D)
    A = MD @ D
    Bq = 2.0 * np.einsum("sd,sd->s", MD, am)
    C = np.einsum("sd,sde,se->s", am, metrics, am)
    s, t = np.triu_indices(len(refs), k=1)
    r1, r2 = _quad_roots(A[s] - A[t], Bq[s] - Bq[t], C[s] - C[t])
    roots = np.concatenate([r1, r2])
    with np.errstate(invalid="ignore"):
        roots = roots[(roots > 0.0) & (roots < 1.0)]
    breaks = np.unique(np.concatenate([[0.0, 1.0], roots]))
    mids = 0.5 * (breaks[:-1] + breaks[1:])
    cells = np.atleast_1d(cell_of(a + mids[:, None] * D, refs, metrics))
    DMD = np.einsum("d,kde,e->k", D, metrics[cells], D)
    length = float(np.dot(np.diff(breaks), np.sqrt(np.maximum(DMD, 0.0))))
    value = length * length if squared else length
    if return_pieces:
        return value, (breaks, cells)
    return value


# ----------------------------------------------------------------------------- grid geodesic
class GridGeodesic(NamedTuple):
    """Result of :func:`grid_geodesic`."""

    #: length of the path a -> a_node -> (grid path) -> b_node -> b: an upper bound on the geodesic
    length: float
    #: the path's vertices, shape (m, 2): a, the grid nodes from a_node to b_node, b
    path: np.ndarray
    #: the grid nodes that a and b were snapped to
    a_node: np.ndarray
    b_node: np.ndarray
    #: the grid part alone (a_node to b_node)
    grid_length: float


_STENCIL8 = [(1, 0), (0, 1), (1, 1), (1, -1)]
_STENCIL16 = _STENCIL8 + [(2, 1), (1, 2), (2, -1), (1, -2)]


def _min_on(dA, dB, dC, lo, hi):
    """Minimum of ``dA x^2 + dB x + dC`` over ``[lo, hi]`` (elementwise, broadcasting): at an end or,
    for an upward parabola, at its vertex when that lies inside."""
    with np.errstate(divide="ignore", invalid="ignore"):
        v = -dB / (2.0 * dA)
        inside = (dA > 0) & (v > lo) & (v < hi)
        fv = np.where(inside, (dA * v + dB) * v + dC, np.inf)
    f_lo = (dA * lo + dB) * lo + dC
    f_hi = (dA * hi + dB) * hi + dC
    return np.minimum(np.minimum(f_lo, f_hi), fv)


def _edge_weights(starts, D, refs, metrics, node_scores, node_ids):
    r"""Exact line integrals of the edges :math:`x_e \to x_e + D` (one direction ``D``, many starts).

    With :math:`c_0` the cell of the start and :math:`f_t = q_t - q_{c_0}` (quadratics in
    :math:`\lambda`), an edge lies in one cell exactly when :math:`\min_{[0,1]} f_t \ge 0` for all
    :math:`t` (:func:`_min_on`): it weighs :math:`\sqrt{D^\top M_{c_0} D}`. Otherwise, with
    :math:`c_1` the cell of the end and :math:`\lambda_1` the root where :math:`c_1` enters below
    :math:`c_0`, the edge crosses exactly one boundary when :math:`c_0` is minimal on
    :math:`[0, \lambda_1]` and :math:`c_1` on :math:`[\lambda_1, 1]` (same test): it weighs
    :math:`\lambda_1 \sqrt{A_{c_0}} + (1 - \lambda_1)\sqrt{A_{c_1}}`. The remaining edges (several
    crossings, ties at a node) go through the walk. All three are exact.
    """
    MD = metrics @ D  # (R, d)
    A = MD @ D  # (R,)
    sqA = np.sqrt(np.maximum(A, 0.0))
    diff = starts[:, None, :] - refs[None, :, :]  # (E, R, d)
    Bq = 2.0 * np.einsum("erd,rd->er", diff, MD)
    Cq = node_scores[node_ids]  # (E, R)
    E = len(Cq)
    rows = np.arange(E)
    c0 = np.argmin(Cq, axis=1)
    w = sqA[c0]
    rel = (A[None, :] - A[c0][:, None], Bq - Bq[rows, c0][:, None], Cq - Cq[rows, c0][:, None])
    single = (_min_on(*rel, 0.0, 1.0) >= 0).all(axis=1)
    idx = np.flatnonzero(~single)
    if len(idx) == 0:
        return w
    # one crossing c0 -> c1
    Br, Cr, b0 = Bq[idx], Cq[idx], c0[idx]
    r = np.arange(len(idx))
    c1 = np.argmin(A[None, :] + Br + Cr, axis=1)
    lam1 = _entering_roots(A[c1] - A[b0], Br[r, c1] - Br[r, b0], Cr[r, c1] - Cr[r, b0])
    with np.errstate(invalid="ignore"):
        ok = (c1 != b0) & (lam1 >= 0.0) & (lam1 <= 1.0)
    lam1 = np.where(ok, lam1, 0.5)[:, None]
    m0 = _min_on(A[None, :] - A[b0][:, None], Br - Br[r, b0][:, None], Cr - Cr[r, b0][:, None], 0.0, lam1)
    m0[r, c1] = np.inf  # c1 is above c0 before its entering root (c0 is the argmin at 0)
    m1 = _min_on(A[None, :] - A[c1][:, None], Br - Br[r, c1][:, None], Cr - Cr[r, c1][:, None], lam1, 1.0)
    m1[r, b0] = np.inf  # c0 is above c1 after it (c1 is the argmin at 1)
    ok &= (m0 >= 0).all(axis=1) & (m1 >= 0).all(axis=1)
    l1 = lam1[:, 0]
    w[idx[ok]] = l1[ok] * sqA[b0[ok]] + (1.0 - l1[ok]) * sqA[c1[ok]]
    for e in idx[~ok]:
        breaks, cells = _walk(A, Bq[e], Cq[e])
        if breaks is None:
            w[e] = _line_integral_bruteforce(starts[e], starts[e] + D, refs, metrics)
        else:
            w[e] = _finish(breaks, cells, A, False, False)
    return w


def grid_geodesic(a: ArrayLike, b: ArrayLike, refs: ArrayLike, metrics: ArrayLike, bounds: Any, n: int = 201,
                  connectivity: int = 16) -> GridGeodesic:
    r"""Approximate geodesic distance in a 2-D field by Dijkstra on a grid (upper bound).

    The grid has ``n x n`` nodes spanning ``bounds = ((xmin, xmax), (ymin, ymax))`` (spacings
    :math:`h_x = (x_{\max} - x_{\min}) / (n - 1)`, likewise :math:`h_y`). Each node is joined to its
    8 neighbours (``connectivity=8``: steps :math:`(\pm1, 0), (0, \pm1), (\pm1, \pm1)`) or 16
    (``connectivity=16``: also the knight moves :math:`(\pm2, \pm1), (\pm1, \pm2)`), each edge
    weighted by its *exact* line integral through the field (the same quantity as
    :func:`line_integral_distance`, vectorised: edges inside one cell weigh
    :math:`\sqrt{D^\top M_c D}`, only edges that meet a cell boundary are walked). Dijkstra
    (:func:`scipy.sparse.csgraph.dijkstra`) gives the shortest grid path between the nodes nearest to
    ``a`` and ``b`` (snapped, clipped to the grid), and the straight connectors
    :math:`a \to a_{\rm node}` and :math:`b_{\rm node} \to b` are added by their line integrals.

    The returned length is the length of an actual polyline from ``a`` to ``b``, so it is an upper
    bound on the geodesic distance
    :math:`\inf_\gamma \int_0^1 \sqrt{\dot\gamma^\top M_{c(\gamma)} \dot\gamma}\, dt`; it converges
    to it up to the stencil's metrication error (for the Euclidean metric at most ~8.2% with 8
    neighbours and ~2.7% with 16; more for anisotropic metrics).

    Parameters
    ----------
    a, b : array_like, shape (2,)
    refs : array_like, shape (R, 2)
    metrics : array_like, shape (R, 2, 2)
    bounds : ((xmin, xmax), (ymin, ymax))
    n : int, default 201
        Nodes per axis.
    connectivity : {8, 16}, default 16

    Returns
    -------
    GridGeodesic
        ``length`` (the upper bound), ``path`` (vertices, ``a`` first and ``b`` last), ``a_node``,
        ``b_node`` (the snapped nodes) and ``grid_length`` (the node-to-node part).

    Raises
    ------
    ValueError
        For a field that is not 2-D, ``connectivity`` not 8 or 16, ``n < 3`` or bounds that are not increasing.
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import dijkstra

    refs, metrics = _field(refs, metrics)
    if refs.shape[1] != 2:
        raise ValueError(f"grid_geodesic needs a 2-D field, got d = {refs.shape[1]}")
    if connectivity not in (8, 16):
        raise ValueError(f"connectivity must be 8 or 16, got {connectivity}")
    n = int(n)
    if n < 3:
        raise ValueError("n must be at least 3")
    a = _point(a, 2, "a")
    b = _point(b, 2, "b")
    (x0, x1), (y0, y1) = bounds
    if not (x1 > x0 and y1 > y0):
        raise ValueError(f"bounds must be increasing, got {bounds}")
    xs, ys = np.linspace(x0, x1, n), np.linspace(y0, y1, n)
    hx, hy = xs[1] - xs[0], ys[1] - ys[0]
    I, Jg = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    I, Jg = I.ravel(), Jg.ravel()  # node k = i * n + j at (xs[i], ys[j])
    nodes = np.column_stack([xs[I], ys[Jg]])
    R = len(refs)
    node_scores = np.empty((n * n, R))
    step = max(1, _BLOCK // (R * 2))
    for k in range(0, n * n, step):
        node_scores[k:k + step] = _scores(nodes[k:k + step], refs, metrics)

    us, vs, ws = [], [], []
    stencil = _STENCIL16 if connectivity == 16 else _STENCIL8
    for di, dj in stencil:
        valid = (I + di >= 0) & (I + di < n) & (Jg + dj >= 0) & (Jg + dj < n)
        src = np.flatnonzero(valid)
        dst = (I[src] + di) * n + (Jg[src] + dj)
        D = np.array([di * hx, dj * hy])
        w = np.empty(len(src))
        estep = max(1, _BLOCK // (R * 2))
        for k in range(0, len(src), estep):
            ids = src[k:k + estep]
            w[k:k + estep] = _edge_weights(nodes[ids], D, refs, metrics, node_scores, ids)
        us.append(src)
        vs.append(dst)
        ws.append(w)
    # explicit zeros (null directions of rank-deficient metrics) stay edges in csgraph's sparse input
    G = sp.csr_matrix((np.concatenate(ws), (np.concatenate(us), np.concatenate(vs))),
                      shape=(n * n, n * n))

    def snap(p):
        i = int(np.clip(np.rint((p[0] - x0) / hx), 0, n - 1))
        j = int(np.clip(np.rint((p[1] - y0) / hy), 0, n - 1))
        return i * n + j

    ka, kb = snap(a), snap(b)
    dist, pred = dijkstra(G, directed=False, indices=ka, return_predecessors=True)
    grid_len = float(dist[kb])
    chain = [kb]
    while chain[-1] != ka:
        chain.append(int(pred[chain[-1]]))
    chain.reverse()
    a_node, b_node = nodes[ka].copy(), nodes[kb].copy()
    length = (grid_len + line_integral_distance(a, a_node, refs, metrics)
              + line_integral_distance(b_node, b, refs, metrics))
    path = np.vstack([a[None, :], nodes[chain], b[None, :]])
    return GridGeodesic(length, path, a_node, b_node, grid_len)
