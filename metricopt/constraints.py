"""Constraint structures: target neighbours, triplets, impostor search, pairs.

Nothing here ever forms an ``n x n x k`` array: distances are computed for a
block of anchor points against all points at a time (memory ``O(block * n)``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np
from numpy.typing import ArrayLike

from .errors import InputError
from .linalg import sq_dists

#: bytes of float64 work space one block may use
BLOCK_BYTES = 32 * 2**20


def _block_size(n, extra=1):
    return max(1, int(BLOCK_BYTES // (8 * max(n, 1) * max(extra, 1))))


def target_neighbors(X: ArrayLike, y: ArrayLike, k: int) -> np.ndarray:
    """The ``k`` nearest same-class points of every point (self excluded).

    Distances are Euclidean in the given ``X``; equal distances are broken by the
    lower index. Returns an ``(n, k)`` int64 array of point indices.

    (Weinberger & Saul, JMLR 2009, Sec. 3.1.)

    Parameters
    ----------
    X : (n, d) array_like
        The points.
    y : (n,) array_like
        The labels.
    k : int
        The number of target neighbours.

    Returns
    -------
    (n, k) ndarray of int64
        Point indices.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    n = X.shape[0]
    T = np.empty((n, k), dtype=np.int64)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)  # ascending, so stable order == lower index first
        Xc = X[idx]
        bs = _block_size(idx.size, 2)
        for s in range(0, idx.size, bs):
            rows = np.arange(s, min(s + bs, idx.size))
            D = sq_dists(Xc[rows], Xc)
            D[np.arange(rows.size), rows] = np.inf
            order = np.argsort(D, axis=1, kind="stable")[:, :k]
            T[idx[rows]] = idx[order]
    return T


#: the most pairs :func:`labels_to_pairs` forms (every pair of ``n`` points: ``n (n - 1) / 2``): 50 million pairs are
#: 0.8 GB of indices before any pair difference (the differences alone are ``8 d`` bytes a pair), about 10,000
#: points; MNIST's 60,000 would be 1.8 billion pairs, 29 GB of indices
MAX_ALL_PAIRS = 50_000_000


def labels_to_pairs(y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """All similar (same-label) and dissimilar pairs ``(a, b)`` with ``a < b``.

    Parameters
    ----------
    y : (n,) array_like
        The labels.

    Returns
    -------
    similar : (m_s, 2) ndarray of int
        The same-label pairs.
    dissimilar : (m_d, 2) ndarray of int
        The other pairs.

    Raises
    ------
    InputError
        When the ``n (n - 1) / 2`` pairs exceed :data:`MAX_ALL_PAIRS` (the message gives the memory and what to
        pass instead).
    """
    y = np.asarray(y)
    n = y.shape[0]
    count = n * (n - 1) // 2
    if count > MAX_ALL_PAIRS:
        raise InputError(
            f"every pair of the {n:,} points is {count:,} pairs ({16 * count / 1e9:.1f} GB of indices alone, more "
            f"than the {MAX_ALL_PAIRS:,}-pair limit): pass a sample of pairs instead (MMC: similar= and dissimilar=; "
            "POLA: pairs= and pair_labels=), or fewer points (every pair suits up to about 10,000)."
        )
    a, b = np.triu_indices(n, k=1)
    same = y[a] == y[b]
    return np.stack([a[same], b[same]], 1), np.stack([a[~same], b[~same]], 1)


def _check_clusters(Z, clusters):
    """``Z`` as a stack ``(c, n, r)`` of transformed copies of the data and the cluster of every point."""
    Z = np.asarray(Z, dtype=np.float64)
    if clusters is None:
        if Z.ndim != 2:
            raise ValueError("Z must be (n, r) without clusters")
        return Z[None], None
    clusters = np.asarray(clusters, dtype=np.int64)
    if Z.ndim != 3 or clusters.shape != (Z.shape[1],) or clusters.min() < 0 or clusters.max() >= Z.shape[0]:
        raise ValueError("with clusters, Z must be (c, n, r) and clusters (n,) integers in [0, c)")
    return Z, clusters


def iter_triplets(Z: ArrayLike, y: ArrayLike, targets: np.ndarray, margin: float = 0.0, block_size: int | None = None,
                  clusters: ArrayLike | None = None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(i, j, l, h)`` blocks of LMNN triplets with hinge argument ``h > -margin``.

    A triplet is an anchor ``i``, one of its target neighbours ``j`` and a
    differently labelled point ``l``; its hinge argument is
    ``h = 1 + ||z_i - z_j||^2 - ||z_i - z_l||^2`` in the transformed space
    ``Z = X L^T``. Candidates are found with the fast expansion formula and a
    safety slack, then ``h`` is recomputed from explicit differences, so the
    returned values are accurate to rounding in the differences.

    With ``clusters`` (multi-metric LMNN, JMLR 2009 Sec. 5.2), ``Z`` is a stack
    ``(c, n, r)`` with ``Z[c] = X L_c^T`` and the distance from ``x_i`` to ``x_j``
    uses the metric of ``x_j``'s cluster: ``||Z[c_j, i] - Z[c_j, j]||^2``.

    (Weinberger & Saul, JMLR 2009, Eq. 14.)

    Parameters
    ----------
    Z : (n, r) or (c, n, r) array_like
        The transformed points ``Z = X L^T`` (a stack with ``clusters``).
    y : (n,) array_like
        The labels.
    targets : (n, k) ndarray of int
        The target neighbours of every point.
    margin : float, default 0.0
        Triplets with ``h > -margin`` are returned.
    block_size : int, optional
        Anchors per block (default: from a memory budget).
    clusters : (n,) array_like of int, optional
        The cluster of every point (multi-metric LMNN); ``None``: one metric.

    Yields
    ------
    (i, j, l, h) : tuple of ndarray
        Anchors, targets, impostors (int) and hinge arguments of one block.

    Raises
    ------
    ValueError
        When ``Z`` and ``clusters`` do not match (``Z`` must be ``(n, r)`` without clusters, ``(c, n, r)``
        with).
    """
    Zs, cl = _check_clusters(Z, clusters)
    y = np.asarray(y)
    n, k = targets.shape
    bs = block_size or _block_size(n, 2)
    norms = np.einsum("cij,cij->ci", Zs, Zs).max(axis=0)
    members = None if cl is None else [np.flatnonzero(cl == c) for c in range(Zs.shape[0])]
    for s in range(0, n, bs):
        I = np.arange(s, min(s + bs, n))
        if cl is None:
            Z = Zs[0]
            D = sq_dists(Z[I], Z)
            Tz = Z[targets[I]] - Z[I][:, None, :]
        else:
            D = np.empty((I.size, n))
            for c, idx in enumerate(members):
                if idx.size:
                    D[:, idx] = sq_dists(Zs[c][I], Zs[c][idx])
            cT = cl[targets[I]]  # (b, k): the metric of each target neighbour
            Tz = Zs[cT, targets[I]] - Zs[cT, I[:, None]]
        diff = y[None, :] != y[I][:, None]
        dt = np.einsum("bkd,bkd->bk", Tz, Tz)
        slack = 1e-9 * (norms[I][:, None] + norms[None, :] + 1.0)
        for kk in range(k):
            thr = dt[:, kk:kk + 1] + 1.0 + margin + slack
            ii, ll = np.nonzero((D < thr) & diff)
            if ii.size == 0:
                continue
            i = I[ii]
            j = targets[i, kk]
            if cl is None:
                dl = Zs[0][i] - Zs[0][ll]
            else:
                dl = Zs[cl[ll], i] - Zs[cl[ll], ll]
            h = 1.0 + dt[ii, kk] - np.einsum("md,md->m", dl, dl)
            keep = h > -margin
            if np.any(keep):
                yield i[keep], j[keep], ll[keep], h[keep]


def active_triplets(Z: ArrayLike, y: ArrayLike, targets: np.ndarray, margin: float = 0.0,
                    block_size: int | None = None, limit: int | None = None,
                    clusters: ArrayLike | None = None) -> tuple[np.ndarray, ...] | None:
    """All triplets with hinge argument ``h > -margin``, as int64 arrays ``(i, j, l)`` and ``h``;
    ``None`` as soon as more than ``limit`` (when given) have been found. ``clusters``: see
    :func:`iter_triplets`.

    Parameters
    ----------
    Z : (n, r) or (c, n, r) array_like
        The transformed points ``Z = X L^T`` (a stack with ``clusters``).
    y : (n,) array_like
        The labels.
    targets : (n, k) ndarray of int
        The target neighbours of every point.
    margin : float, default 0.0
        Triplets with ``h > -margin`` are returned.
    block_size : int, optional
        Anchors per block (default: from a memory budget).
    limit : int, optional
        Give up (``None``) above this many triplets.
    clusters : (n,) array_like of int, optional
        The cluster of every point (multi-metric LMNN); ``None``: one metric.

    Returns
    -------
    tuple or None
        ``(i, j, l, h)``, or ``None`` above ``limit``.

    Raises
    ------
    ValueError
        When ``Z`` and ``clusters`` do not match (``Z`` must be ``(n, r)`` without clusters, ``(c, n, r)``
        with).
    """
    parts, count = [], 0
    for part in iter_triplets(Z, y, targets, margin, block_size, clusters=clusters):
        parts.append(part)
        count += part[0].size
        if limit is not None and count > limit:
            return None
    if not parts:
        e = np.zeros(0, dtype=np.int64)
        return e, e.copy(), e.copy(), np.zeros(0)
    return tuple(np.concatenate([p[c] for p in parts]) for c in range(4))


def hinge_total(Z: ArrayLike, y: ArrayLike, targets: np.ndarray, block_size: int | None = None,
                clusters: ArrayLike | None = None) -> float:
    """``sum over all triplets of [1 + d_ij - d_il]_+`` (blocked, exact differences), summed exactly rounded
    (``math.fsum``): the value depends on the hinge values only, not on the blocks or their order, so it equals
    the exactly rounded sum of the ``h > 0`` of any search at the same ``Z`` (:func:`active_triplets`).

    Parameters
    ----------
    Z : (n, r) or (c, n, r) array_like
        The transformed points ``Z = X L^T`` (a stack with ``clusters``).
    y : (n,) array_like
        The labels.
    targets : (n, k) ndarray of int
        The target neighbours of every point.
    block_size : int, optional
        Anchors per block (default: from a memory budget).
    clusters : (n,) array_like of int, optional
        The cluster of every point (multi-metric LMNN); ``None``: one metric.

    Returns
    -------
    float
        The sum.

    Raises
    ------
    ValueError
        When ``Z`` and ``clusters`` do not match (``Z`` must be ``(n, r)`` without clusters, ``(c, n, r)``
        with).
    """
    return math.fsum(itertools.chain.from_iterable(
        h[h > 0].tolist() for *_, h in iter_triplets(Z, y, targets, 0.0, block_size, clusters=clusters)))


def n_triplets(y: ArrayLike, targets: np.ndarray) -> int:
    """The number of LMNN triplets: sum over anchors of k times the differently labelled points.

    Parameters
    ----------
    y : (n,) array_like
        The labels.
    targets : (n, k) ndarray of int
        The target neighbours of every point.

    Returns
    -------
    int
        The number of triplets.
    """
    y = np.asarray(y)
    _, inv, counts = np.unique(y, return_inverse=True, return_counts=True)
    return int(targets.shape[1] * np.sum(y.shape[0] - counts[inv]))
