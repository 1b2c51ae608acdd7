r"""LMNN's passes over all points on the JAX device: target neighbours, the triplet search, hinge totals.

The same blocked passes as :mod:`metricopt.constraints`, written once in JAX and run on whatever device
JAX has (XLA on the CPU, or a GPU), in float64 (inside ``jax.enable_x64(True)``, never set globally).
A pass takes a block of ``b`` anchor rows at a time against all ``n`` points, so memory is
:math:`O(b\,n)`, never :math:`n \times n`; only the active triplets (their indices and hinge values)
leave a block.

LMNN's triplets (Weinberger & Saul, JMLR 2009, Sec. 3, Eq. 14): an anchor :math:`i`, one of its
target neighbours :math:`j` (the ``k`` nearest points of the same class in the Euclidean metric,
Sec. 3.1) and an impostor candidate :math:`l` with :math:`y_l \ne y_i`; in the transformed space
:math:`z = L x` the hinge argument is

.. math:: h_{ijl} = 1 + \lVert z_i - z_j \rVert^2 - \lVert z_i - z_l \rVert^2 ,

and a search returns every triplet with :math:`h_{ijl} > -\text{margin}`. As in
:func:`metricopt.constraints.iter_triplets`, candidates :math:`(i, l)` are found with the expansion
:math:`\lVert z_i \rVert^2 + \lVert z_l \rVert^2 - 2 z_i^\top z_l` (one matrix product per block)
below :math:`\max_j \lVert z_i - z_j\rVert^2 + 1 + \text{margin}` plus the same safety slack
:math:`10^{-9} (\max\lVert z_i\rVert^2 + \max\lVert z_l\rVert^2 + 1)`, and :math:`h` is then recomputed
on the host from the explicit differences :math:`z_i - z_j` and :math:`z_i - z_l`, with the same
expressions, for the candidates whose device value passes the filter within the slack; the final filter is
:math:`h > -\text{margin}`. The hinge values are therefore NumPy's bit for bit, and so is the set unless the
expansion's rounding exceeded the slack.

The candidates of a block are compacted on the device in two stages: the ``(b, n)`` candidate mask is
cut into chunks of :data:`CHUNK` columns, the chunks holding any candidate are listed
(``jnp.nonzero`` with a power-of-two capacity), and only those chunks are scanned pair by pair (a
second power-of-two capacity). A capacity that turns out too small is doubled and the block run again;
the capacities of the last search of the same shape are the first guess of the next, so a solver's
repeated re-checks compile once.
"""

from __future__ import annotations

import itertools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .setops import sorted_unique

_U = np.finfo(np.float64).eps / 2

#: columns per chunk of the candidate mask (the first compaction stage lists chunks holding a candidate)
CHUNK = 128

#: bytes of work space one block may use, by JAX platform (a ``(b, n)`` block of the triplet search needs
#: about ``8 (3 + c) n`` bytes a row for ``c`` metrics: the distances, the candidate mask, the matrix product;
#: the results of the device calls waiting to be read back are held under the same budget). On 2 CPU
#: cores 64 MiB (about 100 rows at 20,000 points) measured fastest (cache); a GPU gains from larger blocks.
DEVICE_BLOCK_BYTES = {"cpu": 64 * 2**20, "gpu": 1024 * 2**20, "cuda": 1024 * 2**20, "rocm": 1024 * 2**20,
                      "tpu": 512 * 2**20}

#: target neighbours on the CPU: rows per block at most (cache-sized: at 2,000 points a class, d = 50, 2 cores,
#: 0.11 s a class with 128 rows against 0.34 s with 1,365)
TARGET_ROWS_CPU = 128

#: anchor rows per device call, by platform (a call runs ``GROUP_ROWS // block`` blocks one after another, to
#: save the per-call overhead)
GROUP_ROWS = {"cpu": 2048, "gpu": 8192, "cuda": 8192, "rocm": 8192, "tpu": 8192}

#: device calls dispatched before their results are read back (the device works ahead of the host)
WINDOW = 16

#: threads for the host's part of a window of device calls, one block at a time (recomputing the candidates' ``h``
#: with NumPy), at most the machine's cores
HOST_THREADS = 8

# capacities (chunks, pairs) of the last search of each shape: the first guess of the next one
_CAPACITY: dict[tuple, tuple[int, int]] = {}


def jax_available() -> bool:
    """Whether JAX can be imported (the device search needs it).

    Returns
    -------
    bool
        ``True`` when ``import jax`` succeeds.
    """
    try:
        import jax  # noqa: F401
    except Exception:  # pragma: no cover - depends on the environment
        return False
    return True


def default_platform() -> str:
    """The platform of JAX's default device: ``"cpu"``, ``"gpu"``, ``"tpu"``, ...

    Returns
    -------
    str
        ``jax.default_backend()``.
    """
    import jax

    return str(jax.default_backend())


def _pow2(x: int, low: int = 64) -> int:
    return max(low, 1 << max(0, int(x - 1).bit_length()))


def _remember(key, cb, bucket, max_cb, max_bucket):
    """Keep the capacities for the next search of this shape: shrunk only when 4 times too large (a new
    capacity compiles the kernel again)."""
    def fit(cap, need):
        need = _pow2(need)
        return cap if need <= cap < 4 * need else need

    _CAPACITY[key] = (fit(cb, max_cb), fit(bucket, max_bucket))


def _block_rows(n: int, per_row: int, block: int | None, platform: str, ndev: int = 1) -> int:
    if block is not None:
        b = int(block)
        if b < 1:
            raise ValueError("block must be a positive number of rows")
    else:
        budget = DEVICE_BLOCK_BYTES.get(platform, DEVICE_BLOCK_BYTES["cpu"])
        b = max(8, int(budget // max(per_row, 1)))
    return max(1, min(b, -(-n // ndev)))


def _check(Z, y, targets, clusters):
    Z = np.asarray(Z, dtype=np.float64)
    y = np.asarray(y)
    targets = np.asarray(targets, dtype=np.int64)
    if clusters is None:
        if Z.ndim != 2:
            raise ValueError("Z must be (n, r) without clusters")
        Zs, cl = Z[None], None
    else:
        cl = np.asarray(clusters, dtype=np.int64)
        if Z.ndim != 3 or cl.shape != (Z.shape[1],) or cl.min() < 0 or cl.max() >= Z.shape[0]:
            raise ValueError("with clusters, Z must be (c, n, r) and clusters (n,) integers in [0, c)")
        Zs = Z
    n = Zs.shape[1]
    if y.shape != (n,) or targets.ndim != 2 or targets.shape[0] != n:
        raise ValueError("y must be (n,) and targets (n, k) for the n points of Z")
    return Zs, cl, np.unique(y, return_inverse=True)[1].astype(np.int32), targets


# ---------------------------------------------------------------------------
# the per-block kernels (traced once per shape and capacity)
# ---------------------------------------------------------------------------


def _triplet_block(Zs, sq, v, norms, y, cl, T, s, margin, *, b, cb, bucket):
    """Candidates and hinge arguments of the anchors ``s, ..., s + b - 1`` (rows past ``n`` are padding).

    ``Zs`` (c, N, r) holds the points padded with zero rows to ``N``, a multiple of :data:`CHUNK`;
    ``v[q] = ||Zs[q, l]||^2 - 1e-9 max_q ||Zs[q, l]||^2`` (``+inf`` on padding, which is never a candidate);
    ``sq[q]`` the squared norms, ``norms`` their maximum over ``q``. The candidate test
    ``||z_i||^2 + ||z_l||^2 - 2 z_i.z_l < max_j d_ij + 1 + margin + 1e-9 (norms_i + norms_l + 1)`` of
    :func:`metricopt.constraints.iter_triplets` is evaluated rearranged (per-row and per-column terms
    moved out of the ``(b, N)`` loop); it differs from it by rounding only, far inside the slack.
    """
    import jax.numpy as jnp

    c, N, _ = Zs.shape
    n = T.shape[0]
    nc = N // CHUNK
    I = s + jnp.arange(b)
    valid = I < n
    Ic = jnp.where(valid, I, 0)
    Tb = T[Ic]  # (b, k)
    if c == 1:
        Z = Zs[0]
        A = Z[Ic]
        Tz = Z[Tb] - A[:, None, :]
    else:
        cT = cl[Tb]
        Tz = Zs[cT, Tb] - Zs[cT, Ic[:, None]]
    dt = jnp.sum(Tz * Tz, axis=-1)  # (b, k), the exact target distances
    t = jnp.max(dt, axis=1) + 1.0 + margin + 1e-9 * (norms[Ic] + 1.0)
    t = jnp.where(valid, t, -jnp.inf)
    # surely active (a lower bound on the block's triplets, for ``limit``): below each target's threshold by more
    # than twice the slack, whatever the rounding
    ts = dt + 1.0 + margin - 3e-9 * (norms[Ic] + jnp.max(norms) + 1.0)[:, None]
    ts = jnp.where(valid[:, None], ts, -jnp.inf)
    if c == 1:
        E = (-2.0 * A) @ Z.T + v[0][None, :]
        U = E < (t - sq[0][Ic])[:, None]
        ts = ts - sq[0][Ic][:, None]
    else:
        E = jnp.zeros((b, N))
        for q in range(c):
            Eq = sq[q][Ic][:, None] + ((-2.0 * Zs[q][Ic]) @ Zs[q].T + v[q][None, :])
            E = jnp.where((cl == q)[None, :], Eq, E)
        U = E < t[:, None]
    other = y[None, :] != y[Ic][:, None]
    # every l below the nearest target's threshold is an impostor for all k targets
    n_sure = ts.shape[1] * jnp.sum((E < jnp.min(ts, axis=1)[:, None]) & other, dtype=jnp.int32)
    U = (U & other).reshape(b, nc, CHUNK)
    live = jnp.any(U, axis=-1)
    n_chunks = jnp.sum(live, dtype=jnp.int32)
    rc, cc = jnp.nonzero(live, size=cb, fill_value=0)
    G = U[rc, cc] & (jnp.arange(cb) < n_chunks)[:, None]
    n_pairs = jnp.sum(G, dtype=jnp.int32)
    p, q_ = jnp.nonzero(G, size=bucket, fill_value=0)
    ii = rc[p]
    ll = cc[p] * CHUNK + q_
    i = Ic[ii]
    if c == 1:
        dl = Zs[0][i] - Zs[0][ll]
    else:
        dl = Zs[cl[ll], i] - Zs[cl[ll], ll]
    h = 1.0 + dt[ii] - jnp.sum(dl * dl, axis=-1)[:, None]  # (bucket, k)
    return n_chunks, n_pairs, ii.astype(jnp.int32), ll.astype(jnp.int32), h, n_sure


def _triplet_group(Zs, sq, v, norms, y, cl, T, starts, margin, *, b, cb, bucket):
    """:func:`_triplet_block` for each of ``starts`` in turn (one device call for several blocks)."""
    import jax

    return jax.lax.map(lambda s: _triplet_block(Zs, sq, v, norms, y, cl, T, s, margin, b=b, cb=cb, bucket=bucket),
                       starts)


def _neighbor_block(Xc, sq, m, s, *, b, k):
    """The ``k + 1`` nearest of the class members ``0..m-1`` for the members ``s, ..., s + b - 1``, and their
    squared distances (expansion form, as :func:`metricopt.linalg.sq_dists`)."""
    import jax.numpy as jnp

    mp = Xc.shape[0]
    I = s + jnp.arange(b)
    Ic = jnp.minimum(I, mp - 1)
    D = sq[Ic][:, None] + sq[None, :] - 2.0 * (Xc[Ic] @ Xc.T)
    D = jnp.where(D > 0.0, D, 0.0)  # clipped at 0, and -0.0 made +0.0
    col = jnp.arange(mp)[None, :]
    D = jnp.where((col == Ic[:, None]) | (col >= m), jnp.inf, D)
    rows = jnp.arange(b)
    idx, dist = [], []
    for _ in range(k + 1):  # argmin returns the first minimum: ties go to the lower index, as a stable sort
        a = jnp.argmin(D, axis=1)
        idx.append(a)
        dist.append(D[rows, a])
        D = jnp.where(col == a[:, None], jnp.inf, D)  # taken (m > k finite entries: never picked again)
    return jnp.stack(idx, axis=1).astype(jnp.int32), jnp.stack(dist, axis=1)


def _numpy_rows(Xc, idx, rows, k, T):
    """Recompute the local ``rows`` of one class exactly as ``constraints.target_neighbors`` does: its blocks of
    ``max(1, 2**25 // (16 m))`` rows (``constraints._block_size(m, 2)``), ``sq_dists`` and a stable sort; the
    same calls on the same blocks give the same numbers, whichever rows are kept."""
    from .linalg import sq_dists

    m = idx.size
    bs = max(1, int(_NUMPY_BLOCK_BYTES // (8 * m * 2)))
    for s in np.unique(rows // bs) * bs:
        blk = np.arange(s, min(s + bs, m))
        D = sq_dists(Xc[blk], Xc)
        D[np.arange(blk.size), blk] = np.inf
        sel = rows[(rows >= s) & (rows < s + bs)]
        T[idx[sel]] = idx[np.argsort(D[sel - s], axis=1, kind="stable")[:, :k]]


#: ``metricopt.constraints.BLOCK_BYTES`` (not imported: constraints imports this module)
_NUMPY_BLOCK_BYTES = 32 * 2**20


_JITTED: dict[Any, Any] = {}


def _jitted(name, mesh=None):
    """The jitted kernel ``name`` (``"triplets"`` or ``"neighbors"``), sharded over ``mesh``'s blocks when given."""
    key = (name, None if mesh is None else id(mesh))
    if key in _JITTED:
        return _JITTED[key][0]
    import jax

    if name == "neighbors":
        fn = jax.jit(_neighbor_block, static_argnames=("b", "k"))
    elif mesh is None:
        fn = jax.jit(_triplet_group, static_argnames=("b", "cb", "bucket"))
    else:
        from jax.sharding import PartitionSpec as P

        axis = mesh.axis_names[0]

        def sharded(Zs, sq, v, norms, y, cl, T, starts, margin, *, b, cb, bucket):
            def one(starts_, *rest):
                return _triplet_group(*rest[:7], starts_, rest[7], b=b, cb=cb, bucket=bucket)

            return jax.shard_map(one, mesh=mesh, in_specs=(P(axis),) + (P(),) * 8, out_specs=P(axis))(
                starts, Zs, sq, v, norms, y, cl, T, margin)

        fn = jax.jit(sharded, static_argnames=("b", "cb", "bucket"))
    _JITTED[key] = (fn, mesh)  # the mesh is kept alive so that its id stays unique
    return fn


# ---------------------------------------------------------------------------
# public functions
# ---------------------------------------------------------------------------


def device_target_neighbors(X: ArrayLike, y: ArrayLike, k: int, block: int | None = None) -> np.ndarray:
    r"""The ``k`` nearest same-class points of every point (self excluded), on the JAX device.

    The same result as :func:`metricopt.constraints.target_neighbors`: Euclidean distances
    :math:`\lVert x_i - x_j \rVert^2` in the expansion form (clipped at 0) between members of one class,
    equal distances broken by the lower index (Weinberger & Saul, JMLR 2009, Sec. 3.1). Exact ties (integer
    data, duplicates) are resolved exactly as there. The device's matrix product rounds differently from
    BLAS, so where two of the ``k + 1`` nearest are within rounding of each other (a gap of at most
    :math:`64 (d + 3) u (\lVert x_i\rVert^2 + \max_j \lVert x_j\rVert^2)`, :math:`u` the unit roundoff), the
    row is recomputed on the host exactly as the NumPy search does (its blocks, ``sq_dists``, a stable
    sort): the result equals :func:`metricopt.constraints.target_neighbors` row for row.

    Each class is padded to a size from a short ladder (powers of two and 1.5 times them), so that the
    kernel compiles for few shapes; a block of ``block`` members at a time is compared with all members.

    Parameters
    ----------
    X : (n, d) array_like
        The points.
    y : (n,) array_like
        The labels.
    k : int
        The number of target neighbours (at most the size of the smallest class minus one).
    block : int, optional
        Members per block (default: from :data:`DEVICE_BLOCK_BYTES`).

    Returns
    -------
    (n, k) ndarray of int64
        Point indices.

    Raises
    ------
    ValueError
        When a class has ``k`` members or fewer.
    """
    import jax
    import jax.numpy as jnp

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    n = X.shape[0]
    k = int(k)
    T = np.empty((n, k), dtype=np.int64)
    platform = default_platform()
    fn = _jitted("neighbors")
    with jax.enable_x64(True):
        for c in np.unique(y):
            idx = np.flatnonzero(y == c)
            m = idx.size
            if m <= k:
                raise ValueError(f"class {c!r} has {m} points: at most {m - 1} target neighbours")
            p = _pow2(m, 16)
            mp = p if m > p * 3 // 4 or p < 32 else p * 3 // 4
            Xp = np.zeros((mp, X.shape[1]))
            Xp[:m] = X[idx]
            Xd = jnp.asarray(Xp)
            sq = jnp.sum(Xd * Xd, axis=1)
            b = _block_rows(mp, 24 * mp, block, platform)  # from the padded size: one compilation per size
            if block is None and platform == "cpu":
                b = min(b, TARGET_ROWS_CPU)
            outs = [(s, fn(Xd, sq, m, s, b=b, k=k)) for s in range(0, m, b)]
            Xc = X[idx]
            norms = np.einsum("ij,ij->i", Xc, Xc)
            tau = 64.0 * (X.shape[1] + 3) * _U * (norms + norms.max())
            ambiguous = []
            for s, (o, e) in outs:
                rows = np.arange(s, min(s + b, m))
                o, e = np.asarray(o)[: rows.size], np.asarray(e)[: rows.size]
                T[idx[rows]] = idx[o[:, :k]]
                # two of the k + 1 nearest within rounding of each other: the order is BLAS's rounding's
                with np.errstate(invalid="ignore"):
                    ambiguous.append(rows[np.any(np.diff(e, axis=1) <= tau[rows, None], axis=1)])
            rows = np.concatenate(ambiguous)
            if rows.size:
                _numpy_rows(Xc, idx, rows, k, T)
    return T


def device_iter_triplets(Z: ArrayLike, y: ArrayLike, targets: ArrayLike, margin: float = 0.0,
                         block: int | None = None, clusters: ArrayLike | None = None, *,
                         mesh: Any = None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    r"""Yield ``(i, j, l, h)`` groups of LMNN triplets with :math:`h > -\text{margin}`, found on the JAX device.

    The generator of :func:`device_active_triplets` (see there for the triplets, their order and the
    agreement with NumPy), one group per device call (several blocks); the counterpart of
    :func:`metricopt.constraints.iter_triplets`.

    Parameters
    ----------
    Z : (n, r) or (c, n, r) array_like
        The transformed points ``Z = X L^T`` (a stack with ``clusters``).
    y : (n,) array_like
        The labels.
    targets : (n, k) array_like of int
        The target neighbours of every point.
    margin : float, default 0.0
        Triplets with ``h > -margin`` are yielded.
    block : int, optional
        Anchors per block (per device with a ``mesh``; default: from :data:`DEVICE_BLOCK_BYTES`).
    clusters : (n,) array_like of int, optional
        The cluster of every point (multi-metric LMNN); ``None``: one metric.
    mesh : jax.sharding.Mesh, optional
        Shard the blocks over the first axis of this mesh; ``None``: JAX's default device.

    Yields
    ------
    (i, j, l, h) : tuple of ndarray
        Anchors, targets, impostors (int64) and hinge arguments (float64) of one group of blocks.

    Raises
    ------
    ValueError
        When ``Z``, ``y``, ``targets`` and ``clusters`` do not match.
    """
    for group in _groups(Z, y, targets, margin, block, clusters, mesh, None):
        assert group is not None
        yield group


def _groups(Z, y, targets, margin, block, clusters, mesh, limit):
    """The groups of :func:`device_iter_triplets`; with a ``limit``, ``None`` (and the end) once more than ``limit``
    triplets are sure to exist: the device counts, over the whole ``(b, n)`` grid of a window of calls, the
    triplets whose candidate distance is below their threshold by more than twice the slack (a lower bound), so
    a dense search is given up without compacting or rerunning anything."""
    import jax
    import jax.numpy as jnp

    Zs, cl, yc, T = _check(Z, y, targets, clusters)
    c, n, r = Zs.shape
    k = T.shape[1]
    margin = float(margin)
    ndev = 1 if mesh is None else int(mesh.devices.size)
    platform = default_platform() if mesh is None else str(mesh.devices.flat[0].platform)
    b = _block_rows(n, 8 * (3 + c) * n + 8 * k * r, block, platform, ndev)
    g = max(1, GROUP_ROWS.get(platform, GROUP_ROWS["cpu"]) // b)  # blocks per device call
    nc = -(-n // CHUNK)
    N = nc * CHUNK
    key = (n, b, r, c, k, ndev, g)
    # first guess: room for every chunk and pair of a block when that is small, else 4 chunks and 16 pairs a row
    cb, bucket = _CAPACITY.get(key, (_pow2(max(b * 4, b * nc // 16)), _pow2(max(b * 16, b * N // 64))))
    cb, bucket = min(cb, _pow2(b * nc)), min(bucket, _pow2(b * N))
    fn = _jitted("triplets", mesh)
    max_cb = max_bucket = 64
    step = b * g * ndev  # rows per device call
    calls = [np.arange(s, s + step, b, dtype=np.int32) for s in range(0, n, step)]
    host_norms = np.einsum("cij,cij->ci", Zs, Zs).max(axis=0)
    found = 0  # triplets yielded so far
    with jax.enable_x64(True):
        Zp = np.zeros((c, N, r))
        Zp[:, :n] = Zs
        Zd = jnp.asarray(Zp)
        sq = jnp.sum(Zd * Zd, axis=-1)
        norms = jnp.max(sq, axis=0)
        v = jnp.where(jnp.arange(N) < n, sq - 1e-9 * norms, jnp.inf)
        yd = jnp.asarray(np.concatenate([yc, np.full(N - n, -1, np.int32)]))
        cld = jnp.asarray(np.zeros(N, np.int32) if cl is None else np.concatenate([cl, np.zeros(N - n, np.int64)])
                          .astype(np.int32))
        Td = jnp.asarray(T.astype(np.int32))
        mg = jnp.asarray(margin)

    def run(starts, cb_, bucket_):
        with jax.enable_x64(True):
            return fn(Zd, sq, v, norms, yd, cld, Td, jnp.asarray(starts), mg, b=b, cb=cb_, bucket=bucket_)

    # the device works ahead of the host: a window of calls is dispatched, then read back in order; nothing is
    # yielded inside ``enable_x64`` (the consumer runs between two yields)
    w = 0
    while w < len(calls):
        ahead = int(DEVICE_BLOCK_BYTES.get(platform, DEVICE_BLOCK_BYTES["cpu"]) // (g * bucket * (k + 2) * 8))
        window = calls[w:w + max(1, min(WINDOW, ahead))]  # results held: at most the block budget, or one call's
        w += len(window)
        pending = [(st, run(st, cb, bucket), (cb, bucket)) for st in window]
        if limit is not None:
            sure = sum(int(np.asarray(out[5]).sum()) for _, out, _ in pending)
            if found + sure > limit:
                yield None
                return
        read = []
        for st, out, used in pending:
            got = [np.asarray(o) for o in out[:5]]
            # too small a capacity: run again with more (pairs are counted in the listed chunks only, so a
            # chunk overflow can hide a pair overflow: repeat until neither overflows)
            while got[0].max() > used[0] or got[1].max() > used[1]:
                cb = min(max(cb, _pow2(2 * int(got[0].max()))), _pow2(b * nc))
                bucket = min(max(bucket, _pow2(2 * int(got[1].max()))), _pow2(b * N))
                used = (cb, bucket)
                got = [np.asarray(o) for o in run(st, cb, bucket)[:5]]
            max_cb, max_bucket = max(max_cb, int(got[0].max())), max(max_bucket, int(got[1].max()))
            _remember(key, cb, bucket, max_cb, max_bucket)
            read.append((st, got))

        # the host's part, block by block (NumPy, which releases the GIL), on a few threads; the groups in order
        blocks = [(c_, blk) for c_, (_, got) in enumerate(read) for blk in np.flatnonzero(got[1])]

        def host(item):
            st, got = read[item[0]]
            return _host_block(int(st[item[1]]), [g[item[1]] for g in got[1:]], Zs, cl, T, k, margin, host_norms)

        threads = min(len(blocks), HOST_THREADS, os.cpu_count() or 1)
        if threads > 1:
            with ThreadPoolExecutor(threads) as pool:
                done = list(pool.map(host, blocks))
        else:
            done = [host(item) for item in blocks]
        per_call: list[list] = [[] for _ in read]
        for (c_, _), block in zip(blocks, done):
            per_call[c_].extend(block)
        for parts in per_call:
            if parts:
                group = tuple(np.concatenate([p[q] for p in parts]) for q in range(4))
                found += group[0].size
                yield group


def _host_block(start, got, Zs, cl, T, k, margin, host_norms):
    """The triplets of one block of a device call of :func:`_groups` (anchors from row ``start``; ``got``: its
    pair count, candidates and device hinge values) with ``h`` recomputed on the host with NumPy's expressions, in
    :func:`metricopt.constraints.iter_triplets`' order: a list of ``(i, j, l, h)`` parts, one per target slot."""
    m, ii, ll, h = got
    m = int(m)
    i = ii[:m].astype(np.int64) + start
    l_ = ll[:m].astype(np.int64)
    # the device's h decides within the slack only; h itself is recomputed with NumPy's expressions
    near = np.any(h[:m] > (-margin - 1e-9 * (host_norms[i] + host_norms[l_] + 1.0))[:, None], axis=1)
    if not np.any(near):
        return []
    i, l_ = i[near], l_[near]
    I = sorted_unique(i)  # the anchors come sorted: no hash table, no sort
    if cl is None:
        Tz = Zs[0][T[I]] - Zs[0][I][:, None, :]
        dl = Zs[0][i] - Zs[0][l_]
    else:
        cT = cl[T[I]]
        Tz = Zs[cT, T[I]] - Zs[cT, I[:, None]]
        dl = Zs[cl[l_], i] - Zs[cl[l_], l_]
    dt = np.einsum("bkd,bkd->bk", Tz, Tz)[np.searchsorted(I, i)]
    dl2 = np.einsum("md,md->m", dl, dl)
    parts = []
    for kk in range(k):
        hk = 1.0 + dt[:, kk] - dl2
        keep = hk > -margin
        if np.any(keep):
            ik = i[keep]
            parts.append((ik, T[ik, kk], l_[keep], hk[keep]))
    return parts


def device_active_triplets(Z: ArrayLike, y: ArrayLike, targets: ArrayLike, margin: float = 0.0,
                           limit: int | None = None, clusters: ArrayLike | None = None, block: int | None = None,
                           *, mesh: Any = None) -> tuple[np.ndarray, ...] | None:
    r"""All LMNN triplets with hinge argument :math:`h > -\text{margin}`, found on the JAX device.

    The contract of :func:`metricopt.constraints.active_triplets`: int64 anchors ``i``, targets ``j``
    (from ``targets[i]``), impostors ``l`` with :math:`y_l \ne y_i`, and float64
    :math:`h = 1 + \lVert z_i - z_j\rVert^2 - \lVert z_i - z_l\rVert^2` (Weinberger & Saul, JMLR 2009,
    Eq. 14); ``None`` when more than ``limit`` triplets exist. In the order of
    :func:`metricopt.constraints.iter_triplets` with ``block_size=block``: block by block, in a block
    target by target (``targets[:, 0]`` first), in a target anchor by anchor and impostors ascending
    (with a ``mesh``, the block of each device is one such block).

    Agreement with the NumPy search: the device finds the candidates and forms :math:`h` in its own
    rounding; every candidate whose device :math:`h` exceeds :math:`-\text{margin}` less the slack
    :math:`10^{-9} (\lVert z_i\rVert^2 + \lVert z_l\rVert^2 + 1)` then has :math:`h` recomputed on the host
    with NumPy's expressions (the explicit differences, ``einsum``, ``1.0 + d_ij - d_il``), and the final
    filter :math:`h > -\text{margin}` is applied to those. So the hinge values are bit for bit NumPy's, and
    the set differs from :func:`metricopt.constraints.active_triplets`'s only if a rounding error of the
    expansion :math:`\lVert z_i\rVert^2 + \lVert z_l\rVert^2 - 2 z_i^\top z_l` exceeded that slack
    (about :math:`10^{6}` units of rounding: not seen in any test or benchmark). At the same ``block`` the
    output is identical, order included.

    With ``clusters`` (multi-metric LMNN, JMLR 2009 Sec. 5.2), ``Z`` is a stack ``(c, n, r)`` of
    ``Z[c] = X L_c^T`` and a distance to a point ``x_j`` uses the metric of ``x_j``'s cluster:
    :math:`\lVert Z_{c_j, i} - Z_{c_j, j}\rVert^2` (the candidate distances of a block are formed for
    every cluster, ``c`` matrix products).

    Parameters
    ----------
    Z : (n, r) or (c, n, r) array_like
        The transformed points ``Z = X L^T`` (a stack with ``clusters``).
    y : (n,) array_like
        The labels.
    targets : (n, k) array_like of int
        The target neighbours of every point.
    margin : float, default 0.0
        Triplets with ``h > -margin`` are returned.
    limit : int, optional
        Give up (``None``) above this many triplets.
    clusters : (n,) array_like of int, optional
        The cluster of every point (multi-metric LMNN); ``None``: one metric.
    block : int, optional
        Anchors per block (per device with a ``mesh``; default: from :data:`DEVICE_BLOCK_BYTES`).
    mesh : jax.sharding.Mesh, optional
        Shard the blocks over the first axis of this mesh (one block per device at a time);
        ``None``: JAX's default device.

    Returns
    -------
    tuple or None
        ``(i, j, l, h)``, or ``None`` above ``limit``.

    Raises
    ------
    ValueError
        When ``Z``, ``y``, ``targets`` and ``clusters`` do not match.
    """
    if limit is not None and int(limit) < 0:
        raise ValueError("limit must be >= 0")
    parts, count = [], 0
    for part in _groups(Z, y, targets, margin, block, clusters, mesh, limit):
        if part is None:  # more than limit are sure to exist
            return None
        parts.append(part)
        count += part[0].size
        if limit is not None and count > limit:
            return None
    if not parts:
        e = np.zeros(0, dtype=np.int64)
        return e, e.copy(), e.copy(), np.zeros(0)
    return tuple(np.concatenate([p[q] for p in parts]) for q in range(4))


def device_hinge_total(Z: ArrayLike, y: ArrayLike, targets: ArrayLike, block: int | None = None,
                       clusters: ArrayLike | None = None, *, mesh: Any = None) -> float:
    r"""``sum over all triplets of [1 + d_ij - d_il]_+`` on the JAX device, summed exactly rounded.

    The push term of LMNN without its weight (Weinberger & Saul, JMLR 2009, Eq. 14, second sum):
    :math:`\sum_{i, j \in T(i), l: y_l \ne y_i} [h_{ijl}]_+` with
    :math:`h_{ijl} = 1 + \lVert z_i - z_j\rVert^2 - \lVert z_i - z_l\rVert^2`, over the ``h > 0`` of
    :func:`device_iter_triplets` at ``margin = 0``, summed with ``math.fsum`` as they stream (the groups of one
    window of device calls are held at a time, as many as the device's block budget allows, never the whole set;
    the value depends on
    the hinge values only, as :func:`metricopt.constraints.hinge_total`; the hinge values being NumPy's bit
    for bit, so is the sum, see :func:`device_active_triplets`).

    Parameters
    ----------
    Z : (n, r) or (c, n, r) array_like
        The transformed points ``Z = X L^T`` (a stack with ``clusters``).
    y : (n,) array_like
        The labels.
    targets : (n, k) array_like of int
        The target neighbours of every point.
    block : int, optional
        Anchors per block (default: from :data:`DEVICE_BLOCK_BYTES`).
    clusters : (n,) array_like of int, optional
        The cluster of every point (multi-metric LMNN); ``None``: one metric.
    mesh : jax.sharding.Mesh, optional
        Shard the blocks over this mesh's first axis.

    Returns
    -------
    float
        The sum.

    Raises
    ------
    ValueError
        When ``Z``, ``y``, ``targets`` and ``clusters`` do not match.
    """
    # streamed: one group of blocks at a time is held (``math.fsum`` keeps only its partial sums)
    return math.fsum(itertools.chain.from_iterable(
        h[h > 0].tolist() for *_, h in device_iter_triplets(Z, y, targets, 0.0, block, clusters, mesh=mesh)))


__all__ = ["CHUNK", "DEVICE_BLOCK_BYTES", "default_platform", "device_active_triplets", "device_hinge_total",
           "device_iter_triplets", "device_target_neighbors", "jax_available"]
