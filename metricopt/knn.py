"""k-nearest-neighbour classification under a Mahalanobis metric.

This module implements the kNN evaluation rule used by Weinberger & Saul,
"Distance Metric Learning for Large Margin Nearest Neighbor Classification",
JMLR 10:207-244, 2009 (LMNN), to score learned metrics.

Distances are squared Mahalanobis distances

.. math:: d_M(a, b) = (a - b)^T M (a - b) = \\lVert L (a - b) \\rVert^2,
          \\qquad M = L^T L .

Every public function takes the metric either as a linear map ``L`` of shape
``(r, d)`` or as a PSD matrix ``M`` of shape ``(d, d)`` -- never both. With
neither, the Euclidean metric (``L = I``) is used.

Classification rule
-------------------
* The k nearest training points are found; points at exactly equal distance
  are ordered by lower training index (a stable ordering), so the neighbour
  list is unique.
* The predicted label is the majority label among those k neighbours. If
  the largest vote count is shared by two or more labels, the farthest of the
  k neighbours is dropped and the vote is repeated with k-1 neighbours, and so
  on. With one neighbour the vote is always decisive, so the rule always
  returns a label. This is ``ties="index"`` (the default): the result can
  depend on the order of the training points and, where distances are tied
  only in exact arithmetic, on the last bits of their rounding.
* ``ties="inclusive"`` is robust to exact ties and to the order of the data.
  Two squared distances are *tied* when they differ by at most ``TIE_RTOL``
  (1e-7) relative to the larger: far above the rounding of ``cdist`` (about
  1e-16 relative) and below any difference a metric solved to a 1e-6
  certified gap can be said to make. Every training point tied with the
  k-th nearest one votes (the set may hold more than k points). On a tied
  vote, the group of points tied at the largest distance in the set is
  dropped and the vote repeated (the paper's reduce-k rule applied to whole
  tie groups); if the nearest group alone still ties, the smallest tied label
  wins. The prediction depends only on the multiset of (distance, label)
  pairs, never on the training order.

Distances are computed on the transformed data ``X @ L.T`` with
:func:`scipy.spatial.distance.cdist` (``'sqeuclidean'``), which sums squared
coordinate differences pair by pair; equal distances are therefore detected
exactly whenever the transformed coordinates and their differences are
exactly representable (e.g. small integers). Test points are processed in
blocks, so memory is ``O(block_size * n_train)``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.spatial.distance import cdist

from ._validation import check_int, check_train_test, check_X, check_y
from .errors import InputError
from .linalg import factor

__all__ = ["knn_predict", "knn_error", "knn_loo_predict", "loo_knn_error"]

#: Target size in bytes of one block of float64 distances (block x n_train).
_BLOCK_BYTES = 64 * 2**20

#: Relative tolerance under which two squared distances count as tied (``ties="inclusive"``).
TIE_RTOL = 1e-7

_TIES = ("index", "inclusive")


def _check_ties(ties):
    if ties not in _TIES:
        raise InputError(f"ties must be one of {list(_TIES)}; got {ties!r}.")
    return ties


# ---------------------------------------------------------------------------
# input handling
# ---------------------------------------------------------------------------


def _resolve_transform(L, M, n_features):
    """Return the linear map ``L`` (r x d) for the metric, or ``None`` for Euclidean."""
    if L is not None and M is not None:
        raise InputError(
            "pass either L (the linear map, M = L^T L) or M (the PSD metric matrix), not both."
        )
    if L is not None:
        try:
            L = np.asarray(L, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"L must be a numeric array; could not convert it to float64 ({exc}).") from None
        if L.ndim != 2:
            raise InputError(
                f"L must be a 2-D array of shape (r, n_features); got shape {L.shape}."
            )
        if L.shape[1] != n_features:
            raise InputError(
                f"L has shape {L.shape}, so it expects {L.shape[1]} features, but X has "
                f"{n_features} features; L must have shape (r, {n_features})."
            )
        if L.shape[0] == 0:
            raise InputError(f"L has shape {L.shape}; it needs at least one row.")
        if not np.all(np.isfinite(L)):
            raise InputError("L contains NaN or infinite values.")
        return L
    if M is not None:
        try:
            M = np.asarray(M, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"M must be a numeric array; could not convert it to float64 ({exc}).") from None
        if M.ndim != 2 or M.shape[0] != M.shape[1]:
            raise InputError(f"M must be a square 2-D array of shape (d, d); got shape {M.shape}.")
        if M.shape[0] != n_features:
            raise InputError(
                f"M has shape {M.shape}, but X has {n_features} features; M must have shape "
                f"({n_features}, {n_features})."
            )
        if not np.all(np.isfinite(M)):
            raise InputError("M contains NaN or infinite values.")
        return _transform_from_metric(M)
    return None


def _transform_from_metric(M):
    """``L`` with ``L^T L = M`` (negative eigenvalues clipped), via :func:`metricopt.linalg.factor`."""
    return factor(M)


def _apply(X, L):
    return X if L is None else X @ L.T


def _block_size(block_size, n_train):
    if block_size is None:
        return max(1, _BLOCK_BYTES // (8 * n_train))
    return check_int(block_size, "block_size", low=1)


def _check_k(k, n_available, what):
    k = check_int(k, "k", low=1)
    if k > n_available:
        raise InputError(
            f"k={k} is larger than the number of available training points ({n_available}{what}); "
            f"use k <= {n_available}."
        )
    return k


def _encode(y):
    """Return (classes, integer codes) for the labels ``y``."""
    try:
        classes, codes = np.unique(y, return_inverse=True)
    except TypeError as exc:
        raise InputError(f"labels must be mutually comparable (sortable); {exc}") from None
    return classes, codes.reshape(-1)


# ---------------------------------------------------------------------------
# core: neighbour selection and voting
# ---------------------------------------------------------------------------


def _k_smallest_stable(D, k):
    """Column indices of the k smallest entries of each row of ``D``.

    Rows of the result are ordered by (distance, column index): among equal
    distances the lower column index comes first, and it is also the lower
    index that is kept when equal distances straddle the k-th position.
    ``D`` must not contain NaN.
    """
    b, n = D.shape
    if k == n:
        return np.argsort(D, axis=1, kind="stable")
    part = np.argpartition(D, k - 1, axis=1)
    # k-th smallest value of each row
    kth = np.take_along_axis(D, part[:, k - 1 : k], axis=1)
    sel = D <= kth
    n_le = np.count_nonzero(sel, axis=1)
    over = np.flatnonzero(n_le > k)
    if over.size:
        # more candidates than k: keep all strictly closer points plus the
        # lowest-index points at exactly the k-th distance
        D_o = D[over]
        kth_o = kth[over]
        eq = D_o == kth_o
        n_lt = n_le[over] - np.count_nonzero(eq, axis=1)
        keep_eq = eq & (np.cumsum(eq, axis=1, dtype=np.int64) <= (k - n_lt)[:, None])
        sel[over] = (D_o < kth_o) | keep_eq
    cols = np.nonzero(sel)[1].reshape(b, k)  # ascending column index per row
    order = np.argsort(np.take_along_axis(D, cols, axis=1), axis=1, kind="stable")
    return np.take_along_axis(cols, order, axis=1)


def _vote(nbr_codes, n_classes):
    """Majority vote with the tie rule: on a tie drop the farthest neighbour and revote.

    ``nbr_codes`` is (b, k), neighbours ordered nearest first. Returns (b,) codes.
    """
    b, k = nbr_codes.shape
    rows = np.arange(b)
    counts = np.zeros((b, n_classes), dtype=np.int64)
    for j in range(k):
        counts[rows, nbr_codes[:, j]] += 1
    pred = np.empty(b, dtype=np.intp)
    todo = rows
    kk = k
    while True:
        c = counts[todo]
        top = c.max(axis=1)
        decided = np.count_nonzero(c == top[:, None], axis=1) == 1
        pred[todo[decided]] = np.argmax(c[decided], axis=1)
        todo = todo[~decided]
        if todo.size == 0:
            return pred
        # kk >= 2 here: a single neighbour always decides
        kk -= 1
        counts[todo, nbr_codes[todo, kk]] -= 1


def _inclusive_sets(D, k, rtol):
    """Every point tied with the k-th nearest one, per row, nearest first.

    Returns ``(idx, d, valid)``, each ``(b, m)``: candidate columns sorted by distance, their
    distances, and which of them lie within ``rtol`` (relative) of the row's k-th distance.
    """
    b, n = D.shape
    kth = np.partition(D, k - 1, axis=1)[:, k - 1]
    thr = kth * (1.0 + rtol)
    m = int(np.count_nonzero(D <= thr[:, None], axis=1).max())
    idx = np.argsort(D, axis=1, kind="stable") if m >= n else np.argpartition(D, m - 1, axis=1)[:, :m]
    idx = idx[:, :m]
    d = np.take_along_axis(D, idx, axis=1)
    order = np.argsort(d, axis=1, kind="stable")
    idx, d = np.take_along_axis(idx, order, axis=1), np.take_along_axis(d, order, axis=1)
    return idx, d, d <= thr[:, None]


def _vote_inclusive(nbr_codes, d, valid, n_classes, rtol):
    """Vote over tie-inclusive sets; on a tied vote drop the farthest tie group and revote.

    If only the nearest tie group is left and the vote still ties, the smallest tied code wins.
    """
    b, m = nbr_codes.shape
    rows = np.arange(b)
    valid = valid.copy()
    pred = np.empty(b, dtype=np.intp)
    todo = rows
    while True:
        counts = np.zeros((todo.size, n_classes), dtype=np.int64)
        np.add.at(counts, (np.repeat(np.arange(todo.size), m), nbr_codes[todo].ravel()), valid[todo].ravel())
        top = counts.max(axis=1)
        winners = counts == top[:, None]
        dmax = np.where(valid[todo], d[todo], -np.inf).max(axis=1)
        far = valid[todo] & (d[todo] * (1.0 + rtol) >= dmax[:, None])
        last_group = np.count_nonzero(far, axis=1) == np.count_nonzero(valid[todo], axis=1)
        decided = (np.count_nonzero(winners, axis=1) == 1) | last_group
        pred[todo[decided]] = np.argmax(winners[decided], axis=1)  # first True: the smallest tied code
        keep = ~decided
        valid[todo[keep]] &= ~far[keep]
        todo = todo[keep]
        if todo.size == 0:
            return pred


def _predict_codes(Z_train, codes, n_classes, Z_query, k, block_size, loo, ties="index"):
    """Predicted class codes for the rows of ``Z_query`` (already transformed)."""
    n_query = Z_query.shape[0]
    out = np.empty(n_query, dtype=np.intp)
    for start in range(0, n_query, block_size):
        stop = min(start + block_size, n_query)
        D = cdist(Z_query[start:stop], Z_train, metric="sqeuclidean")
        if not np.all(np.isfinite(D)):
            raise InputError(
                "squared distances overflowed to infinity; rescale X (or the metric) to smaller values."
            )
        if loo:
            # query i is training point i: exclude it. k <= n - 1, so a point at
            # +inf is never among the k nearest.
            D[np.arange(stop - start), np.arange(start, stop)] = np.inf
        if ties == "inclusive":
            idx, d, valid = _inclusive_sets(D, k, TIE_RTOL)
            out[start:stop] = _vote_inclusive(codes[idx], d, valid, n_classes, TIE_RTOL)
        else:
            nbrs = _k_smallest_stable(D, k)
            out[start:stop] = _vote(codes[nbrs], n_classes)
    return out


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------


def knn_predict(X_train: ArrayLike, y_train: ArrayLike, X_test: ArrayLike, k: int = 3, *, L: ArrayLike | None = None,
                M: ArrayLike | None = None, block_size: int | None = None, ties: str = "index") -> np.ndarray:
    """Predict labels with the kNN rule of Weinberger & Saul under a Mahalanobis metric.

    The distance is ``d_M(a, b) = (a - b)^T M (a - b) = ||L (a - b)||^2`` with
    ``M = L^T L``. For each test point the k nearest training points are
    taken, ordered by distance with exact ties broken by lower training index.
    The label with the most votes among them is predicted; if the top vote is
    tied between labels, k is reduced by one (the farthest neighbour is
    dropped) and the vote is repeated, down to k = 1, which always decides.
    This is the evaluation rule of Weinberger & Saul, "Distance Metric
    Learning for Large Margin Nearest Neighbor Classification", JMLR
    10:207-244, 2009.

    Parameters
    ----------
    X_train : array-like of shape (n_train, d)
        Training inputs (finite).
    y_train : array-like of shape (n_train,)
        Training labels (any sortable dtype).
    X_test : array-like of shape (n_test, d)
        Query inputs (finite), same number of features as ``X_train``.
    k : int, default=3
        Number of neighbours, ``1 <= k <= n_train``.
    L : array-like of shape (r, d), optional
        Linear map of the metric, ``M = L^T L``. Mutually exclusive with ``M``.
    M : array-like of shape (d, d), optional
        PSD metric matrix. It is symmetrised and factored by a symmetric
        eigendecomposition ``M = V diag(w) V^T``, negative eigenvalues clipped
        to 0, ``L = diag(sqrt(w)) V^T``. Mutually exclusive with ``L``. With
        neither ``L`` nor ``M`` the Euclidean metric is used.
    block_size : int, optional
        Number of test points whose distances to all training points are held
        in memory at once. Default: about 64 MB of float64 per block. The
        result does not depend on it.
    ties : {"index", "inclusive"}, default="index"
        Rule for points at equal distance (see the module docstring):
        ``"index"`` keeps the lower training index at the k-th place;
        ``"inclusive"`` lets every point tied (to ``TIE_RTOL``) with the k-th
        nearest vote and drops whole tie groups on a tied vote, so the result
        does not depend on the training order or on rounding.

    Returns
    -------
    y_pred : ndarray of shape (n_test,)
        Predicted labels, with the dtype of ``np.asarray(y_train)``.

    Raises
    ------
    ValueError
        (:class:`metricopt.errors.InputError`) if an input is not 2-D, holds
        NaN/inf, lengths or feature counts do not match, ``k < 1`` or
        ``k > n_train``, or both ``L`` and ``M`` are given.
    """
    X_train, y_train, X_test = check_train_test(X_train, y_train, X_test)
    k = _check_k(k, X_train.shape[0], " in X_train")
    T = _resolve_transform(L, M, X_train.shape[1])
    bs = _block_size(block_size, X_train.shape[0])
    classes, codes = _encode(y_train)
    ties = _check_ties(ties)
    pred = _predict_codes(_apply(X_train, T), codes, classes.size, _apply(X_test, T), k, bs, loo=False, ties=ties)
    return classes[pred]


def knn_error(X_train: ArrayLike, y_train: ArrayLike, X_test: ArrayLike, y_test: ArrayLike, k: int = 3, *,
              L: ArrayLike | None = None, M: ArrayLike | None = None, block_size: int | None = None,
              ties: str = "index") -> float:
    """Test error of the Weinberger & Saul kNN rule under a Mahalanobis metric.

    Classifies every test point with :func:`knn_predict` (majority vote among
    the k nearest training points under ``d_M(a, b) = ||L (a - b)||^2``;
    equal distances ordered by lower training index; on a tied vote k is
    reduced by one and the vote repeated, down to k = 1) and returns the
    fraction misclassified. Rule from Weinberger & Saul, JMLR 10:207-244,
    2009.

    Parameters
    ----------
    X_train : array-like of shape (n_train, d)
        Training inputs.
    y_train : array-like of shape (n_train,)
        Training labels.
    X_test : array-like of shape (n_test, d)
        Test inputs.
    y_test : array-like of shape (n_test,)
        True test labels.
    k : int, default=3
        Number of neighbours, ``1 <= k <= n_train``.
    L : array-like of shape (r, d), optional
        Linear map of the metric (``M = L^T L``); exclusive with ``M``.
    M : array-like of shape (d, d), optional
        PSD metric matrix; exclusive with ``L``. Neither: Euclidean.
    block_size : int, optional
        Test points per distance block (see :func:`knn_predict`).
    ties : {"index", "inclusive"}, default="index"
        Rule for points at equal distance (see :func:`knn_predict`).

    Returns
    -------
    error : float
        Fraction of test points whose predicted label differs from ``y_test``,
        in [0, 1].

    Raises
    ------
    ValueError
        On invalid input, as in :func:`knn_predict`, or if ``y_test`` does not
        have one label per row of ``X_test``.
    """
    X_test = check_X(X_test, "X_test")
    y_test = check_y(y_test, X_test.shape[0], "y_test")
    pred = knn_predict(X_train, y_train, X_test, k, L=L, M=M, block_size=block_size, ties=ties)
    return float(np.mean(pred != y_test))


def knn_loo_predict(X: ArrayLike, y: ArrayLike, k: int = 3, *, L: ArrayLike | None = None, M: ArrayLike | None = None,
                    block_size: int | None = None, ties: str = "index") -> np.ndarray:
    """Leave-one-out predictions of the Weinberger & Saul kNN rule.

    Each point ``x_i`` is classified by the other ``n - 1`` points (itself
    excluded, even if duplicates of it exist) with the rule of
    :func:`knn_predict`: majority vote among the k nearest points under
    ``d_M(a, b) = ||L (a - b)||^2``, equal distances ordered by lower index,
    and on a tied vote k reduced by one and the vote repeated, down to k = 1.
    Rule from Weinberger & Saul, JMLR 10:207-244, 2009.

    Parameters
    ----------
    X : array-like of shape (n, d)
        Inputs.
    y : array-like of shape (n,)
        Labels.
    k : int, default=3
        Number of neighbours, ``1 <= k <= n - 1``.
    L : array-like of shape (r, d), optional
        Linear map of the metric (``M = L^T L``); exclusive with ``M``.
    M : array-like of shape (d, d), optional
        PSD metric matrix; exclusive with ``L``. Neither: Euclidean.
    block_size : int, optional
        Query points per distance block (see :func:`knn_predict`).
    ties : {"index", "inclusive"}, default="index"
        Rule for points at equal distance (see :func:`knn_predict`).

    Returns
    -------
    y_pred : ndarray of shape (n,)
        Leave-one-out predicted label of each point, dtype of ``np.asarray(y)``.

    Raises
    ------
    ValueError
        On invalid input as in :func:`knn_predict`; here ``k`` must not exceed
        ``n - 1``.
    """
    X = check_X(X, "X")
    y = check_y(y, X.shape[0], "y")
    k = _check_k(k, X.shape[0] - 1, " in X once the held-out point is excluded")
    T = _resolve_transform(L, M, X.shape[1])
    bs = _block_size(block_size, X.shape[0])
    classes, codes = _encode(y)
    Z = _apply(X, T)
    ties = _check_ties(ties)
    pred = _predict_codes(Z, codes, classes.size, Z, k, bs, loo=True, ties=ties)
    return classes[pred]


def loo_knn_error(X: ArrayLike, y: ArrayLike, k: int = 3, *, L: ArrayLike | None = None, M: ArrayLike | None = None,
                  block_size: int | None = None, ties: str = "index") -> float:
    """Leave-one-out kNN error on a training set (Weinberger & Saul rule).

    Fraction of points misclassified when each point is classified by all the
    others (itself excluded) with the rule of :func:`knn_predict`: majority
    vote among the k nearest under ``d_M(a, b) = ||L (a - b)||^2``, equal
    distances ordered by lower index, on a tied vote k reduced by one and the
    vote repeated, down to k = 1. Rule from Weinberger & Saul, JMLR
    10:207-244, 2009.

    Parameters
    ----------
    X : array-like of shape (n, d)
        Inputs.
    y : array-like of shape (n,)
        Labels.
    k : int, default=3
        Number of neighbours, ``1 <= k <= n - 1``.
    L : array-like of shape (r, d), optional
        Linear map of the metric (``M = L^T L``); exclusive with ``M``.
    M : array-like of shape (d, d), optional
        PSD metric matrix; exclusive with ``L``. Neither: Euclidean.
    block_size : int, optional
        Query points per distance block (see :func:`knn_predict`).
    ties : {"index", "inclusive"}, default="index"
        Rule for points at equal distance (see :func:`knn_predict`).

    Returns
    -------
    error : float
        Leave-one-out error in [0, 1].

    Raises
    ------
    ValueError
        On invalid input, as in :func:`knn_loo_predict`.
    """
    pred = knn_loo_predict(X, y, k, L=L, M=M, block_size=block_size, ties=ties)
    y = check_y(y, pred.shape[0], "y")
    return float(np.mean(pred != y))
