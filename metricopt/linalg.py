"""Small dense linear-algebra helpers shared by every backend.

The one PSD projection of the package lives here (:func:`project_psd`), together
with the factorisation ``M = L^T L`` and the scatter matrices
``sum_t w_t (x_a - x_b)(x_a - x_b)^T`` that turn sums over pairs and triplets
into ``d x d`` matrices.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
import scipy.sparse as sp

#: Dimension up to which :func:`small_blas` runs NumPy's and SciPy's BLAS on one thread.
SMALL_BLAS_DIM = 128
#: the same for a certificate (:func:`metricopt.certify.certify`): its largest dense pieces are ``d x d`` products,
#: ``m x m`` factorisations (``m <= 2e7 / d^2`` free multipliers) and ``n x d`` by ``d x d`` products. MNIST-5k at
#: ``d = 164``, 2 cores with one busy: a certificate 11.8 s on two OpenBLAS threads, 2.9 s on one, and a whole
#: ``tol=1e-3, time_limit=300`` solve spent 215.7 s in certificates and returned after 456.9 s (past its wall), against
#: 9.6 s and 306.8 s on one; on an H100 machine's 16 host cores a ``200 x 200`` Cholesky factorisation inside it took
#: 48 ms (0.3 ms on one thread)
CERTIFY_BLAS_DIM = 512


@functools.cache
def _blas_controller():
    import scipy.linalg  # noqa: F401  (its BLAS is a library of its own: load it before the controller looks)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def small_blas(d: int, up_to: int | None = None) -> contextlib.AbstractContextManager[Any]:
    """A context in which the host BLAS runs on one thread when ``d <= up_to`` (default ``SMALL_BLAS_DIM``).

    The certificates' linear algebra is many small ``d x d`` (and ``m x d``) products,
    triangular solves and factorisations. A multi-threaded OpenBLAS makes these slower,
    not faster: on LMNN's digits PCA-30 problem, 8 certificates took 34-36 s with
    OpenBLAS's 16 default threads (16 cores) and 29 s with 2 threads on a loaded 2-core
    machine, against 2-3 s on one thread (``benchmarks/results/jax_device.md``). Above
    ``up_to`` the threads are left as they are. Results are unchanged up to the
    rounding of a reduction's order. The limit uses ``threadpoolctl`` (a scikit-learn
    dependency); its controller is made once, at the first call.

    Parameters
    ----------
    d : int
        The dimension of the linear algebra to come.
    up_to : int, optional
        The largest ``d`` run on one thread (default :data:`SMALL_BLAS_DIM`; a certificate's is
        :data:`CERTIFY_BLAS_DIM`).

    Returns
    -------
    context manager
        The thread limit, or a null context above ``up_to``.
    """
    if d > (SMALL_BLAS_DIM if up_to is None else up_to):
        return contextlib.nullcontext()
    return _blas_controller().limit(limits=1, user_api="blas")


def symmetrize(M: ArrayLike) -> np.ndarray:
    """Return ``(M + M^T) / 2`` as float64.

    Parameters
    ----------
    M : (d, d) array_like
        The matrix.

    Returns
    -------
    (d, d) ndarray
        The symmetric part.
    """
    M = np.asarray(M, dtype=np.float64)
    return 0.5 * (M + M.T)


def project_psd(M: ArrayLike, return_eigs: bool = False) -> Any:
    """Euclidean (Frobenius) projection of a symmetric matrix onto the PSD cone.

    ``argmin_{Z >= 0} ||Z - M||_F`` is obtained by clipping the negative
    eigenvalues of ``(M + M^T)/2`` to zero.

    Parameters
    ----------
    M : (d, d) array_like
    return_eigs : bool
        Also return the eigenvalues of the symmetrised input.

    Examples
    --------
    >>> import numpy as np
    >>> project_psd(np.array([[1.0, 0.0], [0.0, -2.0]]))
    array([[1., 0.],
           [0., 0.]])

    (Higham, *Computing a nearest symmetric positive semidefinite matrix*, Linear Algebra Appl. 103, 1988.)

    Returns
    -------
    Z : (d, d) ndarray
        The projection.
    w : (d,) ndarray
        The eigenvalues of ``(M + M^T)/2`` (only with ``return_eigs``).
    """
    S = symmetrize(M)
    w, V = np.linalg.eigh(S)
    Z = (V * np.clip(w, 0.0, None)) @ V.T
    Z = symmetrize(Z)
    return (Z, w) if return_eigs else Z


def power_of_two_scaling(diag: ArrayLike) -> np.ndarray:
    r"""Powers of two :math:`c_j \approx 1/\sqrt{\text{diag}_j}` (1 where the entry is not positive): the
    congruence :math:`\operatorname{diag}(c)\, H \operatorname{diag}(c)` is exact in floating point and gives
    ``H`` a unit diagonal up to a factor of two.

    Parameters
    ----------
    diag : (d,) array_like
        The diagonal of ``H``.

    Returns
    -------
    (d,) ndarray
        The powers of two :math:`c`.
    """
    diag = np.asarray(diag, dtype=np.float64)
    c = np.ones_like(diag)
    pos = diag > 0
    c[pos] = np.exp2(-np.round(0.5 * np.log2(diag[pos])))
    return c


#: :func:`factor` works at a unit diagonal when ``M``'s diagonal spans more than this factor
WIDE_DIAGONAL = 1e6


def factor(M: ArrayLike, rank_tol: float = 0.0) -> np.ndarray:
    """Return ``L`` with ``L^T L = M`` for a PSD matrix ``M`` (negative eigenvalues clipped).

    Rows are ordered by decreasing eigenvalue; ``L`` is square ``(d, d)``. A diagonal spanning more than
    :data:`WIDE_DIAGONAL` (a metric that stretches one feature by 1e16) is factored at a unit diagonal, through
    the exact power-of-two congruence ``M = D^-1 (D M D) D^-1``: the eigensolver's rounding, relative to the
    largest entry, would otherwise swamp the small ones (and with them the distances along the other features).

    Parameters
    ----------
    M : (d, d) array_like
        The PSD matrix (its symmetric part).
    rank_tol : float, default 0.0
        Eigenvalues below ``rank_tol`` times the largest are set to 0.

    Returns
    -------
    L : (d, d) ndarray
        The factor.
    """
    M = symmetrize(M)
    dg = np.clip(np.diag(M), 0.0, None)
    pos = dg[dg > 0]
    if pos.size and dg.max() > WIDE_DIAGONAL * pos.min():
        c = power_of_two_scaling(dg)
        return factor(M * np.outer(c, c), rank_tol) / c[None, :]
    w, V = np.linalg.eigh(M)
    w = np.clip(w, 0.0, None)
    if rank_tol > 0:
        w[w < rank_tol * max(w.max(initial=0.0), 1e-300)] = 0.0
    order = np.argsort(w)[::-1]
    return (np.sqrt(w[order])[:, None] * V[:, order].T).astype(np.float64)


#: :func:`range_columns` drops columns whose squared spreads sum to at most this many ``d eps`` of the largest
#: column's (the rounding of a ``d``-term dot product, Higham 2002, Sec. 3.1, times a margin)
RANGE_ROUNDINGS = 8.0


def range_columns(Z: ArrayLike) -> np.ndarray:
    r"""Which columns of ``Z = X L^T`` (``L`` from :func:`factor`, rows by decreasing eigenvalue) carry distance:
    a boolean mask keeping all but the trailing columns whose squared spreads :math:`\operatorname{ptp}(z_k)^2` sum
    to at most ``RANGE_ROUNDINGS * d * eps`` times the largest one.

    Every squared distance between two points changes by at most that sum when those columns are dropped (column
    ``k`` adds :math:`(z_{ik} - z_{lk})^2 \le \operatorname{ptp}(z_k)^2`), i.e. by less than the rounding of a
    ``d``-term dot product at the scale of the largest distance (Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2nd ed., 2002, Sec. 3.1): such columns are the rounding left in the zero eigenvalues of a PSD
    projection. A metric of rank ``r`` so maps the points to ``r`` coordinates: LMNN's iterates are often of low
    rank (synthetic 20,000 x 50 at its ``tol=1e-3`` optimum: 22), and a search of every triplet costs
    :math:`O(n^2 r)` brute force, while a ball tree (which wins up to about 25 dimensions,
    :func:`metricopt.balltree.choose_search`) becomes usable. The spread, not the eigenvalue, decides: a direction
    of tiny eigenvalue along which the data spread widely still carries distance.

    Parameters
    ----------
    Z : (n, d) array_like
        The mapped points, columns ordered by decreasing eigenvalue of the metric.

    Returns
    -------
    (d,) ndarray of bool
        The columns kept (at least the first).
    """
    Z = np.asarray(Z, dtype=np.float64)
    d = Z.shape[1]
    keep = np.ones(d, dtype=bool)
    if Z.shape[0] == 0 or d <= 1:
        return keep
    spread = np.ptp(Z, axis=0) ** 2
    allowed = RANGE_ROUNDINGS * d * float(np.finfo(np.float64).eps) * float(spread.max())
    tail = np.cumsum(spread[::-1])[::-1]  # tail[k]: the spreads of columns k..d-1
    drop = np.flatnonzero(tail <= allowed)
    if drop.size:
        keep[max(int(drop[0]), 1):] = False
    return keep


def min_eig(M: ArrayLike) -> float:
    """Smallest eigenvalue of the symmetric part of ``M``.

    Parameters
    ----------
    M : (d, d) array_like
        The matrix.

    Returns
    -------
    float
        The eigenvalue.
    """
    return float(np.linalg.eigvalsh(symmetrize(M))[0])


def psd_defect(M: np.ndarray, psd_tol: float) -> tuple[float, bool]:
    """The one PSD test of metricopt: ``(smallest eigenvalue, failed)`` for the symmetric part of
    ``M``, where ``failed`` means the eigenvalue is below ``-psd_tol * max(1, max |M_ij|)`` (milder
    negative eigenvalues are rounding, clipped by :func:`project_psd` / :func:`factor`).

    Parameters
    ----------
    M : (d, d) ndarray
        The matrix.
    psd_tol : float
        The relative tolerance.

    Returns
    -------
    lo : float
        The smallest eigenvalue.
    failed : bool
        Whether it is below ``-psd_tol * max(1, max |M_ij|)``.
    """
    lo = min_eig(M)
    return lo, lo < -psd_tol * max(1.0, float(np.abs(M).max()))


def pair_scatter(X: ArrayLike, a: ArrayLike, b: ArrayLike, w: ArrayLike | None = None, dense_limit: int = 4_000_000
                 ) -> np.ndarray:
    """Return ``sum_t w_t (x_{a_t} - x_{b_t})(x_{a_t} - x_{b_t})^T`` as a ``(d, d)`` matrix.

    Small inputs are summed from the differences directly (most accurate); large
    ones through the graph-Laplacian identity ``X^T (D_w - W - W^T) X`` with a
    sparse weight matrix, so no ``(m, d)`` array of differences is formed.

    Parameters
    ----------
    X : (n, d) array_like
        The points.
    a : (m,) array_like of int
        The pairs' first points.
    b : (m,) array_like of int
        Their second points.
    w : (m,) array_like or None
        The weights (``None``: all 1).
    dense_limit : int, default 4000000
        Largest ``m * d`` summed from explicit differences.

    Returns
    -------
    (d, d) ndarray
        The scatter matrix (symmetrised).
    """
    X = np.asarray(X, dtype=np.float64)
    a = np.asarray(a, dtype=np.int64).ravel()
    b = np.asarray(b, dtype=np.int64).ravel()
    n, d = X.shape
    if w is None:
        w = np.ones(a.shape[0])
    w = np.asarray(w, dtype=np.float64).ravel()
    if a.size == 0:
        return np.zeros((d, d))
    if a.size * d <= dense_limit:
        D = X[a] - X[b]
        S = (D * w[:, None]).T @ D
    else:
        Xc = X - X.mean(axis=0)
        W = sp.coo_matrix((w, (a, b)), shape=(n, n)).tocsr()
        deg = np.asarray(W.sum(axis=1)).ravel() + np.asarray(W.sum(axis=0)).ravel()
        Lap = sp.diags(deg) - W - W.T
        S = Xc.T @ (Lap @ Xc)
    return symmetrize(S)


def pair_abs_scatter(X: ArrayLike, a: ArrayLike, b: ArrayLike, w: ArrayLike | None = None,
                     dense_limit: int = 4_000_000) -> np.ndarray:
    r"""Return ``sum_t w_t z_t z_t^T`` with ``z_t = |x~_{a_t}| + |x~_{b_t}|``, ``x~ = x - mean(X)``: the magnitudes
    that bound the rounding of :func:`pair_scatter` (``w >= 0``).

    :func:`pair_scatter` sums either the products of the differences (each :math:`|x_a - x_b| \le |\tilde x_a| +
    |\tilde x_b|` elementwise) or, on large inputs, :math:`\tilde X^\top (L \tilde X)` with the graph Laplacian
    :math:`L = D - W - W^\top`, whose absolute value :math:`|L| = D + W + W^\top` gives
    :math:`|\tilde X|^\top |L|\, |\tilde X| = \sum_t w_t z_t z_t^\top`. Either way each entry of the computed scatter
    is within a small multiple of the summation's rounding constant times this matrix (Higham, *Accuracy and
    Stability of Numerical Algorithms*, 2nd ed., 2002, Sec. 3.1 and 3.5): the certificates' bound on the
    rounding of :math:`B = \sum_t \alpha_t A_t` (:mod:`metricopt.certify.triplets`). Every term is non-negative,
    so the computed matrix is within a relative ``gamma(m)`` of the exact one.

    Parameters
    ----------
    X : (n, d) array_like
        The points.
    a, b : (m,) array_like of int
        The pairs.
    w : (m,) array_like or None
        Non-negative weights (``None``: all 1).
    dense_limit : int, default 4000000
        Largest ``m * d`` summed from explicit rows ``z_t``; beyond it the signless Laplacian form.

    Returns
    -------
    (d, d) ndarray
        The symmetric, elementwise non-negative matrix.
    """
    X = np.asarray(X, dtype=np.float64)
    a = np.asarray(a, dtype=np.int64).ravel()
    b = np.asarray(b, dtype=np.int64).ravel()
    n, d = X.shape
    w = np.ones(a.shape[0]) if w is None else np.asarray(w, dtype=np.float64).ravel()
    if a.size == 0:
        return np.zeros((d, d))
    Xa = np.abs(X - X.mean(axis=0))  # the centred coordinates pair_scatter's Laplacian form uses
    if a.size * d <= dense_limit:
        Z = Xa[a] + Xa[b]
        S = (Z * w[:, None]).T @ Z
    else:
        W = sp.coo_matrix((w, (a, b)), shape=(n, n)).tocsr()
        deg = np.asarray(W.sum(axis=1)).ravel() + np.asarray(W.sum(axis=0)).ravel()
        S = Xa.T @ ((sp.diags(deg) + W + W.T) @ Xa)
    return symmetrize(S)


def pair_rows(X: ArrayLike, a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Rows ``vec((x_a - x_b)(x_a - x_b)^T)`` (row-major), shape ``(m, d*d)``.

    ``pair_rows(X, a, b) @ M.ravel()`` are the squared distances ``d_M(x_a, x_b)``.

    Parameters
    ----------
    X : (n, d) array_like
        The points.
    a : (m,) array_like of int
        The pairs' first points.
    b : (m,) array_like of int
        Their second points.

    Returns
    -------
    (m, d*d) ndarray
        The rows.
    """
    D = np.asarray(X, dtype=np.float64)[np.asarray(a)] - np.asarray(X, dtype=np.float64)[np.asarray(b)]
    return (D[:, :, None] * D[:, None, :]).reshape(D.shape[0], -1)


def sq_dists(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances between the rows of ``A`` and ``B`` (expansion form, clipped at 0).

    Parameters
    ----------
    A : (m, d) ndarray
        The first points.
    B : (p, d) ndarray
        The second points.

    Returns
    -------
    (m, p) ndarray
        The squared distances.
    """
    aa = np.einsum("ij,ij->i", A, A)
    bb = np.einsum("ij,ij->i", B, B)
    D = aa[:, None] + bb[None, :] - 2.0 * (A @ B.T)
    np.maximum(D, 0.0, out=D)
    return D


def exact_structure(X: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For every feature ``j``, the feature ``rep[j]`` whose values it repeats exactly on ``rows`` (``rep[j] = j``
    for a feature repeating no earlier one), or ``-1`` for a feature constant on ``rows``.

    Both relations are exact in floating point, so every difference ``x_a - x_b`` (``a, b`` in ``rows``) satisfies,
    in exact arithmetic, ``(x_a - x_b)_j = 0`` for a constant feature and ``(x_a - x_b)_j = (x_a - x_b)_{rep[j]}``
    for a repeated one: ``x_a - x_b = B (x_a - x_b)_F`` with ``F`` the features where ``rep[j] = j`` and ``B`` the
    0/1 matrix of :func:`expansion`.

    Parameters
    ----------
    X : (n, d) ndarray
        The points.
    rows : (m,) ndarray of int
        The points considered.

    Returns
    -------
    rep : (d,) ndarray of int
        ``rep[j]``: ``j`` itself, the earlier feature it repeats, or ``-1`` for a constant feature.
    """
    Xr = np.asarray(X, dtype=np.float64)[np.asarray(rows, dtype=np.int64)] + 0.0  # + 0.0: -0.0 becomes 0.0
    d = Xr.shape[1]
    rep = np.arange(d)
    if Xr.shape[0] == 0:
        return np.full(d, -1)
    dead = np.all(Xr == Xr[:1], axis=0)
    rep[dead] = -1
    live = np.flatnonzero(~dead)
    if live.size > 1:
        _, first, inverse = np.unique(Xr[:, live].T, axis=0, return_index=True, return_inverse=True)
        rep[live] = live[first[np.ravel(inverse)]]
    return rep


def expansion(rep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(free, B)``: the features with ``rep[j] = j`` and the ``(d, f)`` 0/1 matrix with ``B[j, k] = 1`` where
    ``rep[j] = free[k]`` (rows of constant features are 0).

    Parameters
    ----------
    rep : (d,) ndarray of int
        The result of :func:`exact_structure`.

    Returns
    -------
    free : (f,) ndarray of int
        The features with ``rep[j] = j``.
    B : (d, f) ndarray
        The 0/1 expansion matrix.
    """
    d = rep.shape[0]
    free = np.flatnonzero(rep == np.arange(d))
    B = np.zeros((d, free.size))
    pos = np.full(d, -1)
    pos[free] = np.arange(free.size)
    live = rep >= 0
    B[np.flatnonzero(live), pos[rep[live]]] = 1.0
    return free, B
