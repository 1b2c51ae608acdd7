r"""Space-partitioning trees for the neighbour searches of LMNN.

Large Margin Nearest Neighbor (LMNN) needs three neighbour searches
(Weinberger & Saul, JMLR 10:207-244, 2009, Section 6 "Extensions / ball
trees"):

1. **target neighbours** -- the :math:`k` nearest same-label points of every
   training point, in the input metric;
2. the **impostor search** -- every triplet :math:`(i, j, l)` with :math:`j`
   a target neighbour of :math:`i`, :math:`y_l \ne y_i` and a hinge argument

   .. math:: h_{ijl} = 1 + \lVert z_i - z_j \rVert^2 - \lVert z_i - z_l \rVert^2
             > -\text{margin}, \qquad Z = X L^T ,

   repeated at every (few) iterations of the solver;
3. **kNN classification** of test points under the learned metric
   :math:`d_M(a, b) = \lVert L(a - b) \rVert^2`, :math:`M = L^T L`.

The brute-force versions in :mod:`metricopt.constraints` and
:mod:`metricopt.knn` compute all :math:`n^2` distances in blocks (time
:math:`O(n^2 d)`). This module answers the same questions with scikit-learn's
:class:`~sklearn.neighbors.BallTree` (Omohundro, 1989; Liu, Moore & Gray,
2006) or :class:`~sklearn.neighbors.KDTree` (Bentley, 1975), whose queries
prune whole nodes with the triangle inequality and, in low intrinsic
dimension, touch far fewer than :math:`n` points per query.

Exact agreement with the brute force
------------------------------------
Every function here returns *the same output* as its brute-force reference,
not merely an equally valid one:

* :func:`tree_target_neighbors` equals :func:`metricopt.constraints.target_neighbors`
  (distance order, exact ties broken by the lower index);
* :func:`tree_active_triplets` finds the same set of triplets, with bit-for-bit
  the same hinge values, as :func:`metricopt.constraints.active_triplets`;
* :func:`knn_tree_predict` equals :func:`metricopt.knn.knn_predict`.

Trees only *generate candidates*; every decision is then taken on numbers
computed the way the reference computes them. For the impostor search the
reference decides on :math:`h` recomputed from explicit differences, which is
a function of the pair alone, so the tree version recomputes it identically
and only needs a candidate set that provably contains every triplet (the query
radius carries a relative slack of ``1e-9``, far above the rounding error of a
distance).

Orderings are harder: the reference orders points by distances that carry
rounding errors (the expansion :math:`\lVert a\rVert^2 + \lVert b\rVert^2 -
2 a^T b` through a BLAS product for the target neighbours; a sum of squared
differences in :func:`scipy.spatial.distance.cdist` for kNN), so two points
whose distances agree to within rounding -- exact ties such as duplicated
points, and ties that are exact in real arithmetic but not in floating point
-- may be ordered either way. The tree versions therefore *certify* each
ordering with a forward error bound (Higham, 2002, Sec. 3.1: a dot product of
length :math:`d` is accurate to :math:`\gamma_d = d u / (1 - d u)` relative to
:math:`\sum |a_m b_m|`, :math:`u = 2^{-53}`): if every consecutive gap between
the sorted candidate distances exceeds a generous multiple of that bound, the
reference must order them the same way. The few rows that cannot be certified
(on standardized letter-recognition, whose integer features give many duplicated
points and ties: 1,968 of 14,000 rows for the target neighbours, 404 of 6,000
test points for kNN; none on USPS after PCA) are recomputed with the reference's own arithmetic -- the same blocked call for
target neighbours, the reference's block routine for kNN -- so the result is
identical by construction, also on exact ties.

References
----------
K. Q. Weinberger and L. K. Saul, "Distance Metric Learning for Large Margin
Nearest Neighbor Classification", JMLR 10:207-244, 2009 (Section 6).

S. M. Omohundro, "Five Balltree Construction Algorithms", ICSI Technical
Report TR-89-063, 1989.

T. Liu, A. W. Moore and A. Gray, "New Algorithms for Efficient
High-Dimensional Nonparametric Classification", JMLR 7:1135-1158, 2006.

J. L. Bentley, "Multidimensional binary search trees used for associative
searching", Communications of the ACM 18(9):509-517, 1975.

N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
SIAM, 2002.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.neighbors import BallTree, KDTree

from . import constraints as _constraints
from . import knn as _knn
from ._validation import check_int, check_train_test
from .errors import InputError, UnknownOptionError
from .linalg import sq_dists

__all__ = [
    "tree_target_neighbors",
    "tree_active_triplets",
    "knn_tree_predict",
    "choose_search",
    "TREE_MAX_DIM",
    "TREE_MIN_N",
]

#: bytes of float64 work space one chunk of queries may use (as in :mod:`metricopt.constraints`)
_CHUNK_BYTES = 32 * 2**20

#: unit roundoff of float64
_U = np.finfo(np.float64).eps / 2

#: relative slack on squared query radii: far above the ~d * 1e-16 rounding of a distance
_RADIUS_SLACK = 1e-9

#: :func:`choose_search` answers "tree" up to this (intrinsic, e.g. PCA) dimension ...
TREE_MAX_DIM = 25
#: ... and from this many points on (measured in ``benchmarks/ball_trees.py``)
TREE_MIN_N = 2000

_TREES = {"ball": BallTree, "kd": KDTree}


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _tree_class(tree):
    try:
        return _TREES[tree]
    except (KeyError, TypeError):
        raise UnknownOptionError(
            f"unknown tree {tree!r}; use 'ball' (sklearn.neighbors.BallTree) or 'kd' (sklearn.neighbors.KDTree)."
        ) from None


def _chunks(n, per_row_bytes):
    """Consecutive ``slice`` objects over ``range(n)`` of at most ``_CHUNK_BYTES / per_row_bytes`` rows."""
    step = max(1, int(_CHUNK_BYTES // max(int(per_row_bytes), 1)))
    for s in range(0, n, step):
        yield slice(s, min(s + step, n))


def _sorted_by_distance(cand, e):
    """Sort each row of ``(cand, e)`` by ``(e, cand)``: distance, then lower index."""
    order = np.lexsort((cand, e), axis=-1)
    return np.take_along_axis(cand, order, axis=1), np.take_along_axis(e, order, axis=1)


# ---------------------------------------------------------------------------
# target neighbours
# ---------------------------------------------------------------------------


def tree_target_neighbors(X: ArrayLike, y: ArrayLike, k: int, leaf_size: int = 40, *, tree: str = "ball",
                          return_stats: bool = False) -> Any:
    r"""The ``k`` nearest same-class points of every point, found with one tree per class.

    Same contract and same output as :func:`metricopt.constraints.target_neighbors`:
    for every point :math:`x_i` the ``k`` points :math:`x_j \ne x_i` (as rows)
    with :math:`y_j = y_i` that are nearest in the Euclidean distance,
    nearest first, equal distances ordered by the lower index.

    For each class :math:`c` a tree is built on :math:`X_c = \{x_i : y_i = c\}`
    and queried for the ``k + 2`` nearest points of each member (itself, its
    ``k`` target neighbours and the next point, which decides whether the
    ``k``-th place is contested). The candidates' squared distances
    :math:`e_{ij} = \sum_m (x_{im} - x_{jm})^2` are sorted by
    :math:`(e_{ij}, j)`. The reference ranks points by the expansion
    :math:`\hat D_{ij} = \lVert x_i\rVert^2 + \lVert x_j\rVert^2 - 2 x_i^T x_j`
    (BLAS product, clipped at 0), whose error is at most about
    :math:`2\gamma_d (\lVert x_i\rVert^2 + \lVert x_j\rVert^2)`. A row is
    *certified* when every consecutive gap among its ``k + 1`` sorted candidate
    distances exceeds

    .. math:: \tau_i = 32 (d + 3)\, u \,\bigl(\lVert x_i\rVert^2 + \max_{j \in c} \lVert x_j\rVert^2\bigr),

    which is at least four times the worst disagreement of the two
    computations; the reference then ranks its candidates in the same order.
    Rows that are not certified (ties, duplicated points, rounding-level near
    ties) are recomputed exactly as :func:`~metricopt.constraints.target_neighbors`
    computes them -- the same block of the same distance call, the same stable
    sort -- so the output is identical in every case.

    Parameters
    ----------
    X : array-like of shape (n, d)
        Inputs (any metric is applied beforehand: pass ``X @ L.T``).
    y : array-like of shape (n,)
        Labels; every class needs at least ``k + 1`` points.
    k : int
        Number of target neighbours, ``k >= 1``.
    leaf_size : int, default=40
        Leaf size of the trees (does not change the result).
    tree : {"ball", "kd"}, default="ball"
        :class:`sklearn.neighbors.BallTree` (as in Weinberger & Saul, 2009,
        Sec. 6) or :class:`sklearn.neighbors.KDTree`.
    return_stats : bool, default=False
        Also return a dict ``{"rows": n, "recomputed": number of rows that
        needed the reference arithmetic}``.

    Returns
    -------
    targets : ndarray of int64, shape (n, k)
        ``targets[i]`` are the indices of the target neighbours of point ``i``,
        nearest first.
    stats : dict
        Only with ``return_stats=True``.

    Raises
    ------
    ValueError
        (:class:`metricopt.errors.InputError`) if ``k < 1`` or a class has
        ``k`` points or fewer.

    References
    ----------
    Weinberger & Saul, JMLR 10:207-244, 2009, Sections 3 and 6.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    k = check_int(k, "k", low=1)
    leaf_size = check_int(leaf_size, "leaf_size", low=1)
    cls = _tree_class(tree)
    n, d = X.shape
    T = np.empty((n, k), dtype=np.int64)
    recomputed = 0
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)  # ascending: local order == global order
        nc = idx.size
        if nc < k + 1:
            raise InputError(
                f"class {c!r} has {nc} point(s); {k} target neighbours need at least {k + 1} points per class."
            )
        Xc = X[idx]
        norms = np.einsum("ij,ij->i", Xc, Xc)
        tau = 32.0 * (d + 3) * _U * (norms + norms.max())
        m = min(k + 2, nc)  # self + k targets + the next point (if any)
        index = cls(Xc, leaf_size=leaf_size)
        ambiguous = []
        for sl in _chunks(nc, 8 * m * (d + 4)):
            rows = np.arange(sl.start, sl.stop)
            nb = index.query(Xc[sl], k=m, return_distance=False)
            # drop the point itself; if duplicates crowded it out, drop the farthest instead
            is_self = nb == rows[:, None]
            drop = np.where(is_self.any(axis=1), np.argmax(is_self, axis=1), m - 1)
            keep = np.ones(nb.shape, dtype=bool)
            keep[np.arange(rows.size), drop] = False
            cand = nb[keep].reshape(rows.size, m - 1)
            diff = Xc[cand] - Xc[sl][:, None, :]
            e = np.einsum("bkd,bkd->bk", diff, diff)
            cand, e = _sorted_by_distance(cand, e)
            bad = np.any(np.diff(e, axis=1) <= tau[sl, None], axis=1)
            T[idx[sl]] = idx[cand[:, :k]]
            ambiguous.append(rows[bad])
        ambiguous = np.concatenate(ambiguous)
        recomputed += ambiguous.size
        if ambiguous.size:
            _reference_target_rows(Xc, idx, ambiguous, k, T)
    if return_stats:
        return T, {"rows": n, "recomputed": int(recomputed)}
    return T


def _reference_target_rows(Xc, idx, rows, k, T):
    """Recompute the local ``rows`` of one class exactly as ``constraints.target_neighbors`` does.

    The reference computes ``sq_dists(Xc[block], Xc)`` for consecutive blocks of
    ``constraints._block_size(nc, 2)`` rows and sorts each row stably; the same
    calls on the same blocks give the same numbers, whichever rows we keep.
    """
    nc = idx.size
    bs = _constraints._block_size(nc, 2)
    for s in np.unique(rows // bs) * bs:
        block = np.arange(s, min(s + bs, nc))
        D = sq_dists(Xc[block], Xc)
        D[np.arange(block.size), block] = np.inf
        sel = rows[(rows >= s) & (rows < s + bs)]
        order = np.argsort(D[sel - s], axis=1, kind="stable")[:, :k]
        T[idx[sel]] = idx[order]


# ---------------------------------------------------------------------------
# impostor search
# ---------------------------------------------------------------------------


def tree_active_triplets(Z: ArrayLike, y: ArrayLike, targets: ArrayLike, margin: float = 0.0, leaf_size: int = 40,
                         limit: int | None = None, *,
                         tree: str = "ball") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    r"""All LMNN triplets with hinge argument ``h > -margin``, found with per-class trees.

    Same contract and the same set of triplets (with bit-for-bit equal hinge
    values) as :func:`metricopt.constraints.active_triplets`. A triplet is an
    anchor :math:`i`, one of its target neighbours :math:`j` (``targets[i]``)
    and a differently labelled point :math:`l`, with

    .. math:: h_{ijl} = 1 + \lVert z_i - z_j\rVert^2 - \lVert z_i - z_l\rVert^2 > -\text{margin}
              \iff \lVert z_i - z_l\rVert^2 < \lVert z_i - z_j\rVert^2 + 1 + \text{margin}.

    So every impostor :math:`l` of :math:`i` lies in the ball of squared radius
    :math:`r_i^2 = \max_j \lVert z_i - z_j\rVert^2 + 1 + \text{margin}` around
    :math:`z_i`. One tree is built per class :math:`c` over its members
    :math:`\{z_l : y_l = c\}`; each anchor :math:`i` queries the trees of all
    classes other than :math:`y_i` once, with its largest target radius
    :math:`\sqrt{r_i^2 (1 + 10^{-9})}` (the slack keeps rounding in the tree's
    distances from dropping a point on the boundary), and the candidates are
    then filtered per target. For every candidate pair the squared distance
    :math:`\lVert z_i - z_l\rVert^2` is recomputed from the explicit
    difference, :math:`h` is formed for each of the ``k`` targets with the
    reference's expressions, and the final filter is ``h > -margin``, exactly
    as in the reference. (Trees over the class members are built once, in
    :math:`O(n \log n)` in total; one tree per class over its complement
    would cost :math:`C` times that and measured slower, see
    ``benchmarks/ball_trees.py``.)

    Parameters
    ----------
    Z : array-like of shape (n, r)
        Transformed inputs ``Z = X L^T``.
    y : array-like of shape (n,)
        Labels.
    targets : array-like of int, shape (n, k)
        Target neighbours, e.g. from :func:`tree_target_neighbors`.
    margin : float, default=0.0
        Triplets with ``h > -margin`` are returned (``margin > 0`` keeps a
        safety band of nearly active triplets, as working-set solvers do).
    leaf_size : int, default=40
        Leaf size of the trees (does not change the result).
    limit : int, optional
        Return ``None`` as soon as more than ``limit`` triplets have been found
        (so ``None`` exactly when the total exceeds ``limit``).
    tree : {"ball", "kd"}, default="ball"
        The tree type.

    Returns
    -------
    i, j, l : ndarray of int64, shape (m,)
        Anchors, targets and impostors, in the canonical order: sorted
        lexicographically by ``(i, j, l)``. (The reference returns its triplets
        in block order; sort it the same way to compare.)
    h : ndarray of float64, shape (m,)
        Hinge arguments, ``h > -margin``.

    or ``None`` if ``limit`` is given and more than ``limit`` triplets exist.

    Notes
    -----
    Work is proportional to the number of candidate pairs :math:`(i, l)` inside
    the balls plus the tree traversal, instead of :math:`n^2 k` for the brute
    force; it pays off when the balls are small compared with the spread of the
    data (low intrinsic dimension, few impostors), which is the situation LMNN
    drives towards (Weinberger & Saul, 2009, Sec. 6). Memory per chunk of
    anchors is bounded like the reference's, :math:`O(\text{chunk} \cdot n)`
    in the worst case.

    References
    ----------
    Weinberger & Saul, JMLR 10:207-244, 2009, Eq. (13) and Section 6.

    Raises
    ------
    InputError
        For an invalid ``leaf_size`` or ``limit``.
    UnknownOptionError
        For an unknown ``tree``.
    """
    Z = np.asarray(Z, dtype=np.float64)
    y = np.asarray(y)
    targets = np.asarray(targets, dtype=np.int64)
    leaf_size = check_int(leaf_size, "leaf_size", low=1)
    if limit is not None:
        limit = check_int(limit, "limit", low=0)
    cls = _tree_class(tree)
    n, k = targets.shape
    r = Z.shape[1]
    # squared target distances, with the reference's expression
    dt = np.empty((n, k))
    for sl in _chunks(n, 8 * k * r):
        Tz = Z[targets[sl]] - Z[sl][:, None, :]
        dt[sl] = np.einsum("bkd,bkd->bk", Tz, Tz)
    r2 = dt.max(axis=1, initial=-np.inf) + 1.0 + margin
    live = r2 > 0  # r2 <= 0: no l can have h > -margin
    radius = np.sqrt(np.where(live, r2, 0.0) * (1.0 + _RADIUS_SLACK))
    parts, count = [], 0
    for c in np.unique(y):
        members = np.flatnonzero(y == c)  # the impostor candidates of this tree
        anchors = np.flatnonzero((y != c) & live)
        if anchors.size == 0:
            continue
        index = cls(Z[members], leaf_size=leaf_size)
        for sl in _chunks(anchors.size, 8 * 4 * members.size):
            a = anchors[sl]
            found = index.query_radius(Z[a], radius[a])
            sizes = np.fromiter((f.size for f in found), dtype=np.int64, count=a.size)
            if not sizes.any():
                continue
            ii = np.repeat(a, sizes)
            ll = members[np.concatenate(found)]
            dl2 = np.empty(ii.size)
            for ps in _chunks(ii.size, 8 * r):
                dl = Z[ii[ps]] - Z[ll[ps]]
                dl2[ps] = np.einsum("md,md->m", dl, dl)
            for kk in range(k):
                h = 1.0 + dt[ii, kk] - dl2
                keep = h > -margin
                if np.any(keep):
                    i_k = ii[keep]
                    parts.append((i_k, targets[i_k, kk], ll[keep], h[keep]))
                    count += i_k.size
                    if limit is not None and count > limit:
                        return None
    if not parts:
        e = np.zeros(0, dtype=np.int64)
        return e, e.copy(), e.copy(), np.zeros(0)
    i, j, l, h = (np.concatenate([p[q] for p in parts]) for q in range(4))
    order = np.lexsort((l, j, i))
    return i[order], j[order], l[order], h[order]


# ---------------------------------------------------------------------------
# kNN classification
# ---------------------------------------------------------------------------


def knn_tree_predict(X_train: ArrayLike, y_train: ArrayLike, X_test: ArrayLike, k: int = 3, *,
                     L: ArrayLike | None = None, M: ArrayLike | None = None, leaf_size: int = 40, tree: str = "kd",
                     return_stats: bool = False) -> Any:
    r"""kNN prediction under a Mahalanobis metric through a tree; same output as :func:`metricopt.knn.knn_predict`.

    The distance is :math:`d_M(a, b) = (a - b)^T M (a - b) = \lVert L(a - b)\rVert^2`.
    Training and test points are mapped to :math:`z = L x` exactly as the
    reference maps them, a tree is built on the training images and queried
    for the ``k + 1`` nearest training points of each test point. The
    candidates are sorted by :math:`(e, \text{index})` with :math:`e` the sum
    of squared coordinate differences. The rule of Weinberger & Saul (2009)
    then applies: majority vote among the ``k`` nearest, equal distances
    ordered by lower training index, and on a tied vote the farthest
    neighbour is dropped and the vote repeated (down to ``k = 1``).

    The reference (:func:`scipy.spatial.distance.cdist`, ``'sqeuclidean'``)
    orders by a sum of squared differences whose error is below
    :math:`\gamma_{d+2} e`; a row is certified when all consecutive gaps among
    its ``k + 1`` sorted candidates exceed :math:`16 (d + 3) u` times the
    larger distance, except that candidates with bit-for-bit identical
    coordinates inside the first ``k`` are exact ties (any per-pair arithmetic
    gives them equal distances) and are ordered by index, as in the
    reference. Uncertified rows (ties at the ``k``-th place, rounding-level
    near ties) are recomputed by the reference routine itself, so the
    predictions are identical in every case.

    Parameters
    ----------
    X_train : array-like of shape (n_train, d)
        Training inputs (finite).
    y_train : array-like of shape (n_train,)
        Training labels (any sortable dtype).
    X_test : array-like of shape (n_test, d)
        Query inputs, same number of features.
    k : int, default=3
        Number of neighbours, ``1 <= k <= n_train``.
    L : array-like of shape (r, d), optional
        Linear map of the metric, ``M = L^T L``; exclusive with ``M``.
    M : array-like of shape (d, d), optional
        PSD metric matrix, factored as in :func:`metricopt.knn.knn_predict`;
        exclusive with ``L``. Neither: Euclidean.
    leaf_size : int, default=40
        Leaf size of the tree (does not change the result).
    tree : {"kd", "ball"}, default="kd"
        The tree type. For these ``k + 1``-nearest queries the kd tree measured
        faster at low dimension (speed-up over brute force 1.54 vs 0.87 on
        letter, d = 16; 3.14 vs 2.06 on USPS PCA 10), the ball tree at
        ``d = 50`` (0.70 vs 0.58); see ``benchmarks/results/ball_trees.md``.
    return_stats : bool, default=False
        Also return ``{"rows": n_test, "recomputed": rows done by the reference}``.

    Returns
    -------
    y_pred : ndarray of shape (n_test,)
        Predicted labels, with the dtype of ``np.asarray(y_train)``.
    stats : dict
        Only with ``return_stats=True``.

    Raises
    ------
    ValueError
        (:class:`metricopt.errors.InputError`) on invalid input, as
        :func:`metricopt.knn.knn_predict`.

    References
    ----------
    Weinberger & Saul, JMLR 10:207-244, 2009, Sections 2 and 6.
    """
    X_train, y_train, X_test = check_train_test(X_train, y_train, X_test)
    k = _knn._check_k(k, X_train.shape[0], " in X_train")
    leaf_size = check_int(leaf_size, "leaf_size", low=1)
    cls = _tree_class(tree)
    Lmap = _knn._resolve_transform(L, M, X_train.shape[1])
    classes, codes = _knn._encode(y_train)
    Ztr = _knn._apply(X_train, Lmap)
    Zte = _knn._apply(X_test, Lmap)
    if not (np.all(np.isfinite(Ztr)) and np.all(np.isfinite(Zte))):
        raise InputError("the transformed data overflowed to infinity; rescale X (or the metric) to smaller values.")
    n_train, r = Ztr.shape
    n_test = Zte.shape[0]
    m = min(k + 1, n_train)
    index = cls(Ztr, leaf_size=leaf_size)
    pred = np.empty(n_test, dtype=np.intp)
    ambiguous = []
    for sl in _chunks(n_test, 8 * m * (r + 4)):
        rows = np.arange(sl.start, sl.stop)
        cand = index.query(Zte[sl], k=m, return_distance=False)
        diff = Ztr[cand] - Zte[sl][:, None, :]
        e = np.einsum("bkd,bkd->bk", diff, diff)
        cand, e = _sorted_by_distance(cand, e)
        tol = 16.0 * (r + 3) * _U * e
        close = np.diff(e, axis=1) <= tol[:, 1:]
        if m > k:  # the k-th place must be uncontested
            bad = close[:, k - 1].copy()
            close = close[:, : k - 1]
        else:
            bad = np.zeros(rows.size, dtype=bool)
        if close.shape[1]:
            same = np.all(Ztr[cand[:, 1:k]] == Ztr[cand[:, : k - 1]], axis=2)
            bad |= np.any(close & ~same, axis=1)
        if np.any(~bad):
            good = ~bad
            pred[rows[good]] = _knn._vote(codes[cand[good, :k]], classes.size)
        ambiguous.append(rows[bad])
    ambiguous = np.concatenate(ambiguous)
    if ambiguous.size:
        bs = _knn._block_size(None, n_train)
        pred[ambiguous] = _knn._predict_codes(Ztr, codes, classes.size, Zte[ambiguous], k, bs, loo=False)
    y_pred = classes[pred]
    if return_stats:
        return y_pred, {"rows": n_test, "recomputed": int(ambiguous.size)}
    return y_pred


# ---------------------------------------------------------------------------
# brute force or tree?
# ---------------------------------------------------------------------------


def choose_search(n: int, d: int) -> str:
    r"""``"tree"`` or ``"brute"``: which neighbour search to use for ``n`` points in dimension ``d``.

    Rule: ``"tree"`` when ``n >= TREE_MIN_N`` (2,000) and ``d <= TREE_MAX_DIM``
    (25), otherwise ``"brute"``. ``d`` is the dimension of the data the search
    runs on -- after PCA, or the number of rows of ``L`` for ``Z = X L^T`` --
    and stands in for the intrinsic dimension, which is what tree pruning
    really depends on.

    The rule comes from ``benchmarks/ball_trees.py``
    (``benchmarks/results/ball_trees.md``: one BLAS thread, 2-core machine
    shared with other work, ball trees, speed-up = brute time / tree time):

    ===================  ======  ==  ==========  =========  ===========  ====
    data                 n       d   target nbr  impostors  impostors    3-NN
                                                 M = I      M = 0.25 I
    ===================  ======  ==  ==========  =========  ===========  ====
    letter (standard.)   14,000  16  1.89        2.26       1.03         0.87
    USPS, PCA 10         7,700   10  4.05        5.03       4.44         2.06
    USPS, PCA 25         7,700   25  3.26        1.73       1.98         1.01
    USPS, PCA 50         7,700   50  2.01        0.63       1.07         0.70
    ===================  ======  ==  ==========  =========  ===========  ====

    The impostor search, repeated at every few solver iterations, decides
    the rule. At ``d = 50`` the tree loses or breaks even (0.63-1.07); at
    ``d <= 25`` it wins (1.03-5.07, the 1.03 being letter at ``M = 0.25 I``,
    where 2.8 million triplets -- about 200 per anchor --
    fill the balls and leave nothing to prune). On the first ``n`` training
    points the impostor search breaks even near ``n = 2,000`` (speed-up 0.48 /
    0.84 / 1.29 on letter at n = 1,000 / 2,000 / 4,000; 0.73 / 1.30 / 1.69 on
    USPS PCA 25), since brute force costs :math:`O(n^2 d)` and a tree query
    roughly :math:`O(n^{1 - 1/d_\text{intr}})` per point. With few impostors
    (the regime LMNN converges to, Weinberger & Saul, 2009, Sec. 6) the tree
    gains grow with ``n``; with hundreds of impostors per point use brute
    force. Whatever the answer, both searches give identical results.

    Parameters
    ----------
    n : int
        Number of points searched (training points, or points per search).
    d : int
        Dimension of the (transformed) data, ``d >= 1``.

    Returns
    -------
    {"tree", "brute"}
    """
    n = check_int(n, "n", low=0)
    d = check_int(d, "d", low=1)
    return "tree" if (d <= TREE_MAX_DIM and n >= TREE_MIN_N) else "brute"
