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


#: the device search (:mod:`metricopt.search`, JAX) replaces the NumPy passes below when JAX is importable and
#: the pass's work reaches this many multiply-adds: ``n * n * d`` for the triplet search and hinge totals,
#: ``sum over classes of n_c^2 * d`` for target neighbours. Measured with ``benchmarks/device_search.py``
#: (``benchmarks/results/device_search.md``; 2 shared cores (load about 4), XLA's CPU device, k = 3,
#: margin 0; warm = kernel compiled; both searches give identical triplets, hinge values bit for bit):
#:
#: ====================  =========  =======  ======  ===========  ===============
#: triplet search        n^2 d      NumPy s  tree s  device warm  device 1st call
#: ====================  =========  =======  ======  ===========  ===============
#: digits PCA-30         4.7e7      0.056    0.028   0.018        1.7
#: letter 14,000 x 16    3.1e9      6.0      0.87    1.11         2.7
#: synthetic 20k x 50    2.0e10     10.7     6.0     1.02         2.4
#: ====================  =========  =======  ======  ===========  ===============
#:
#: The device beats NumPy warm at every size, but each new kernel shape compiles (1-3 s on 2 cores, a few
#: times per solve as the active set changes size); below about 1e9 the saving per search (0.04 s at
#: digits) does not repay that, so NumPy stays the small-n path. (Where the ball tree applies, d <= 25,
#: it is as fast as the device on the CPU: letter 0.87 s vs 1.11 s.) Target neighbours are computed once
#: per problem, so the first call counts: letter (per-class work 1.2e8) NumPy 0.83 s, tree 0.55 s, device
#: 0.92 s warm / 1.26 s first; synthetic 20k x 50 (2.0e9) NumPy 1.87 s, tree 0.72 s, device 0.88 / 1.33 s:
#: this threshold on every platform.
DEVICE_MIN_WORK_CPU = 1e9

#: the triplet search's threshold on an accelerator (GPU, TPU; measured on one H100, 16 host cores, in the
#: same file): letter-like 14,000 x 16 NumPy 5.4 s, tree 0.90 s, device 0.014 s warm / 2.3 s first;
#: synthetic 20,000 x 50 at margin 0.5, NumPy 12.1 s, device 0.027 s; synthetic 60,000 x 164 device
#: 0.15 s; digits (4.7e7) NumPy 0.062 s, device 0.010 s warm / 2.1 s first.
DEVICE_MIN_WORK_ACCELERATOR = 1e8


def use_device_search(n: int, d: int) -> bool:
    """Whether :func:`active_triplets` and :func:`hinge_total` run on the JAX device for ``n`` points in
    ``d`` dimensions.

    Rule: JAX importable, and ``n * n * d`` at least :data:`DEVICE_MIN_WORK_CPU` (1e9) when JAX's default
    device is the CPU, :data:`DEVICE_MIN_WORK_ACCELERATOR` (1e8) on a GPU or TPU (the measurements are in
    the comments of those constants). :func:`target_neighbors`, done once per problem, uses the device
    when its per-class work ``sum_c n_c^2 d`` reaches :data:`DEVICE_MIN_WORK_CPU` on any platform. The
    environment variable ``METRICOPT_DEVICE_SEARCH=0`` (or ``1``) turns the device search off (or on
    whenever JAX is importable).

    Parameters
    ----------
    n : int
        The number of points.
    d : int
        Their dimension (``c * r`` for a stack of ``c`` transforms to ``r`` dimensions).

    Returns
    -------
    bool
        ``True``: the device search.
    """
    return _device_worth(float(n) * float(n) * float(d))


def _device_worth(work, once=False):
    """The rule of :func:`use_device_search` for ``work`` multiply-adds (``once``: a pass done once per problem,
    target neighbours, which must repay its compilation at once: :data:`DEVICE_MIN_WORK_CPU` everywhere)."""
    import os

    forced = os.environ.get("METRICOPT_DEVICE_SEARCH", "").strip()
    if forced in ("0", "1"):
        return forced == "1" and _jax_importable()
    if work < (DEVICE_MIN_WORK_CPU if once else DEVICE_MIN_WORK_ACCELERATOR) or not _jax_importable():
        return False
    from .search import default_platform

    return once or work >= (DEVICE_MIN_WORK_CPU if default_platform() == "cpu" else DEVICE_MIN_WORK_ACCELERATOR)


def _jax_importable():
    from .search import jax_available

    return jax_available()


def _block_size(n, extra=1):
    return max(1, int(BLOCK_BYTES // (8 * max(n, 1) * max(extra, 1))))


def target_neighbors(X: ArrayLike, y: ArrayLike, k: int, *, device: bool | None = None) -> np.ndarray:
    """The ``k`` nearest same-class points of every point (self excluded).

    Distances are Euclidean in the given ``X``; equal distances are broken by the
    lower index. Returns an ``(n, k)`` int64 array of point indices. Large inputs run on the JAX
    device (:func:`metricopt.search.device_target_neighbors`, the same result; rule:
    :func:`use_device_search`).

    (Weinberger & Saul, JMLR 2009, Sec. 3.1.)

    Parameters
    ----------
    X : (n, d) array_like
        The points.
    y : (n,) array_like
        The labels.
    k : int
        The number of target neighbours.
    device : bool, optional
        ``True``: the JAX device search, ``False``: NumPy; ``None`` (default): by the rule of
        :func:`use_device_search` on the per-class work ``sum_c n_c^2 d``.

    Returns
    -------
    (n, k) ndarray of int64
        Point indices.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    n = X.shape[0]
    if device is None and n:
        _, counts = np.unique(y, return_counts=True)
        device = _device_worth(float(np.sum(counts.astype(np.float64) ** 2)) * (X.shape[1] if X.ndim == 2 else 1),
                               once=True)
    if device:
        from .search import device_target_neighbors

        return device_target_neighbors(X, y, k)
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
                  clusters: ArrayLike | None = None, *,
                  device: bool | None = None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
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
    device : bool, optional
        ``True``: the JAX device search (:func:`metricopt.search.device_iter_triplets`, one group of blocks
        per yield; ``block_size`` then sets its block), ``False``: NumPy; ``None`` (default): NumPy with a
        ``block_size``, else by :func:`use_device_search`.

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
    if device or (device is None and block_size is None and _device_for(Z)):
        from .search import device_iter_triplets

        yield from device_iter_triplets(Z, y, targets, margin, block_size, clusters)
        return
    Zs, cl = _check_clusters(Z, clusters)
    y = np.asarray(y)
    n, k = targets.shape
    bs = block_size or _block_size(n, 2)
    norms = np.einsum("cij,cij->ci", Zs, Zs).max(axis=0)
    norms_max = float(norms.max()) if norms.size else 0.0
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
        dt = np.einsum("bkd,bkd->bk", Tz, Tz)
        # one pass over the block: the candidates of the anchor's farthest target, with the expansion's rounding
        # slack 1e-9 (|z_i|^2 + |z_l|^2 + 1) bounded by the largest |z_l|^2 (a superset of every target's candidates,
        # each then checked against its own threshold and finally by the hinge recomputed from differences)
        rows = dt.max(axis=1) + 1.0 + margin + 1e-9 * (norms[I] + norms_max + 1.0)
        cand = D < rows[:, None]
        cand &= y[None, :] != y[I][:, None]
        ci, cand_l = np.nonzero(cand)
        if ci.size == 0:
            continue
        dc = D[ci, cand_l]
        slack = 1e-9 * (norms[I][ci] + norms[cand_l] + 1.0)
        for kk in range(k):
            sel = dc < dt[ci, kk] + 1.0 + margin + slack
            ii, ll = ci[sel], cand_l[sel]
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
                    clusters: ArrayLike | None = None, *, device: bool | None = None) -> tuple[np.ndarray, ...] | None:
    """All triplets with hinge argument ``h > -margin``, as int64 arrays ``(i, j, l)`` and ``h``;
    ``None`` as soon as more than ``limit`` (when given) have been found. ``clusters``: see
    :func:`iter_triplets`.

    Without a ``block_size``, large inputs run on the JAX device
    (:func:`metricopt.search.device_active_triplets`; rule: :func:`use_device_search`): the same
    triplets with bit-for-bit the same hinge values (recomputed on the host with the expressions below),
    in the order of the device's blocks.

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
    device : bool, optional
        ``True``: the JAX device search (``block_size`` then sets its block), ``False``: NumPy; ``None``
        (default): NumPy with a ``block_size``, else by :func:`use_device_search`.

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
    if device or (device is None and block_size is None and _device_for(Z)):
        from .search import device_active_triplets

        return device_active_triplets(Z, y, targets, margin, limit, clusters, block_size)
    parts, count = [], 0
    for part in iter_triplets(Z, y, targets, margin, block_size, clusters=clusters, device=False):
        parts.append(part)
        count += part[0].size
        if limit is not None and count > limit:
            return None
    if not parts:
        e = np.zeros(0, dtype=np.int64)
        return e, e.copy(), e.copy(), np.zeros(0)
    return tuple(np.concatenate([p[c] for p in parts]) for c in range(4))


def _device_for(Z):
    shape = np.shape(Z)
    return len(shape) >= 2 and use_device_search(shape[-2], shape[-1] * (shape[0] if len(shape) == 3 else 1))


def hinge_total(Z: ArrayLike, y: ArrayLike, targets: np.ndarray, block_size: int | None = None,
                clusters: ArrayLike | None = None, *, device: bool | None = None) -> float:
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
    device : bool, optional
        As in :func:`active_triplets` (the device search's hinge values are NumPy's, so is the sum).

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
    if device or (device is None and block_size is None and _device_for(Z)):
        from .search import device_hinge_total

        return device_hinge_total(Z, y, targets, block_size, clusters)
    return math.fsum(itertools.chain.from_iterable(
        h[h > 0].tolist() for *_, h in iter_triplets(Z, y, targets, 0.0, block_size, clusters=clusters, device=False)))


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
