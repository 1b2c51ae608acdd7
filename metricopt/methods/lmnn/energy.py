r"""Energy-based classification with a learned Mahalanobis metric (LMNN).

Weinberger & Saul, "Distance Metric Learning for Large Margin Nearest Neighbor
Classification", JMLR 10:207-244, 2009, Section 3.5, Eq. 15.

Instead of a majority vote among nearest neighbours, a test point ``x_t`` is
given, in turn, every candidate label ``c``; the LMNN loss (Eq. 13) that the
training set *plus* ``x_t`` labelled ``c`` would incur is evaluated, and the
label with the smallest loss is predicted. Terms of the loss that do not involve
``x_t`` are the same for every ``c`` and are left out, which leaves the energy

.. math::

    E_c(x_t) = (1-\mu) \sum_{j \in N_k^c(t)} d_M(x_t, x_j)
      + \mu \sum_{j \in N_k^c(t)} \sum_{l:\, y_l \ne c}
            \big[1 + d_M(x_t, x_j) - d_M(x_t, x_l)\big]_+
      + \mu \sum_{i:\, y_i \ne c} \sum_{j \rightsquigarrow i}
            \big[1 + d_M(x_i, x_j) - d_M(x_i, x_t)\big]_+ ,

    \hat y_t = \arg\min_c E_c(x_t),

with the squared distance :math:`d_M(a, b) = (a-b)^\top M (a-b) = \lVert L(a-b)\rVert^2`,
:math:`M = L^\top L`. The three terms are, in the paper's words, the pull on the
test point's target neighbours of the hypothesised label, the hinge loss of the
impostors that invade the perimeter those targets set around ``x_t``, and the
hinge loss of the training points of other labels whose perimeter ``x_t``
(labelled ``c``) would invade. The paper writes the label conditions with the
indicator :math:`y_{il} \in \{0, 1\}` (1 iff the labels agree) as factors
:math:`(1 - y_{tl})` and :math:`(1 - y_{it})`.

Target neighbours
-----------------
* ``N_k^c(t)``, the test point's target neighbours for label ``c``: its ``k``
  nearest training points of label ``c``. Eq. 15 does not restate how they are
  found; by default (``targets_metric="learned"``) they are the nearest under the
  learned metric ``d_M`` -- the metric the classifier uses, and the choice that
  minimises the pull term over all ``k``-subsets of class ``c``. With
  ``targets_metric="euclidean"`` they are the nearest in the Euclidean metric of
  the input space, the way the training targets are chosen before learning.
  Ties (equal selection distances) are broken by the lower training index; under
  ``"learned"`` they do not change the energy.
* ``j \rightsquigarrow i``, the training points' target neighbours: fixed, as
  in training -- by default :func:`metricopt.constraints.target_neighbors`
  (the ``k`` nearest same-label points by Euclidean distance, self excluded), or
  the ``train_targets`` given. Their distances ``d_M(x_i, x_j)`` are computed
  once per training point. Adding ``x_t`` does not change them.

Computation
-----------
Everything is evaluated in the transformed space ``Z = X L^T`` (``L`` from ``M``
by the eigendecomposition of :func:`metricopt.linalg.factor`), where ``d_M`` is
the squared Euclidean distance. Test points are processed in blocks: one block
holds its ``(block, n_train)`` distances and a few arrays of the same size, so
memory is ``O(block_size * n_train)``; there are loops over blocks, classes and
target-neighbour ranks, never over test points. Cost per test point is
``O(n_train * (d + n_classes * (k + k_train)))``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.spatial.distance import cdist

from ..._validation import check_choice, check_int, check_real, check_train_test
from ...constraints import target_neighbors
from ...errors import InputError
from ...linalg import factor, psd_defect, symmetrize

__all__ = ["energy_scores", "energy_predict"]

#: approximate bytes of float64 work space per block of test points
_BLOCK_BYTES = 32 * 2**20
#: arrays of shape (block, n_train) alive at the same time in one block
_ARRAYS_PER_BLOCK = 5
_TARGETS_METRICS = ("learned", "euclidean")


# ---------------------------------------------------------------------------
# input handling
# ---------------------------------------------------------------------------


def _metric_map(L, M, d):
    """The linear map ``L`` (r x d) of the metric: given, from ``M``, or the identity."""
    if L is not None and M is not None:
        raise InputError("pass either L (the linear map, M = L^T L) or M (the PSD metric matrix), not both.")
    if L is not None:
        try:
            L = np.asarray(L, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"L must be a numeric array; could not convert it to float64 ({exc}).") from None
        if L.ndim != 2 or L.shape[0] == 0 or L.shape[1] != d:
            raise InputError(f"L must have shape (r, {d}) with r >= 1 for data with {d} features; got {L.shape}.")
        if not np.all(np.isfinite(L)):
            raise InputError("L contains NaN or infinite entries.")
        return L
    if M is not None:
        try:
            M = np.asarray(M, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"M must be a numeric array; could not convert it to float64 ({exc}).") from None
        if M.shape != (d, d):
            raise InputError(f"M must have shape ({d}, {d}) for data with {d} features; got {M.shape}.")
        if not np.all(np.isfinite(M)):
            raise InputError("M contains NaN or infinite entries.")
        M = symmetrize(M)
        lo, failed = psd_defect(M, 1e-8)
        if failed:
            raise InputError(
                f"M is not positive semidefinite (smallest eigenvalue {lo:.3g}); project it first with "
                "metricopt.linalg.project_psd."
            )
        return factor(M)
    return np.eye(d)


def _check_train_targets(T, y, codes, k):
    """Validate user-given training target neighbours: (n_train, k_train) same-label indices."""
    n = y.shape[0]
    T = np.asarray(T)
    if T.ndim != 2 or T.shape[0] != n or T.shape[1] < 1:
        raise InputError(
            f"train_targets must have shape (n_train, k_train) = ({n}, k_train) with k_train >= 1; got {T.shape}."
        )
    if T.dtype.kind not in "iu":
        raise InputError(f"train_targets must hold integer indices into X_train; got dtype {T.dtype}.")
    if np.any(T < 0) or np.any(T >= n):
        raise InputError(f"train_targets must hold indices in [0, {n - 1}] (X_train has {n} samples).")
    T = T.astype(np.int64)
    if np.any(T == np.arange(n)[:, None]):
        raise InputError("train_targets: a training point cannot be its own target neighbour.")
    if np.any(codes[T] != codes[:, None]):
        raise InputError("train_targets: every target neighbour must have the same label as its training point.")
    return T


def _check_class_sizes(classes, counts, k, need_train_targets):
    """Each class needs k points (the test point's targets), k+1 to build default training targets."""
    need = k + 1 if need_train_targets else k
    small = counts < need
    if np.any(small):
        detail = ", ".join(f"{(c.item() if isinstance(c, np.generic) else c)!r}: {n}"
                           for c, n in zip(classes[small], counts[small]))
        if need_train_targets:
            why = (f"at least k+1={need} points in every class of y_train (each training point needs k target "
                   f"neighbours of its own class, and the test point k of each class)")
        else:
            why = (f"at least k={need} points in every class of y_train (the test point needs k target "
                   f"neighbours of each class)")
        raise InputError(
            f"energy classification with k={k} needs {why}; these classes have fewer: {detail}. "
            f"Lower k or drop those classes."
        )


def _prepare(X_train, y_train, X_test, k, mu, L, M, train_targets, targets_metric, block_size):
    X_train, y_train, X_test = check_train_test(X_train, y_train, X_test)
    k = check_int(k, "k", low=1)
    mu = check_real(mu, "mu", low=0.0, high=1.0)
    targets_metric = check_choice(targets_metric, "targets_metric", _TARGETS_METRICS)
    n_train = X_train.shape[0]
    if block_size is None:
        block_size = max(1, _BLOCK_BYTES // (8 * _ARRAYS_PER_BLOCK * n_train))
    else:
        block_size = check_int(block_size, "block_size", low=1)
    try:
        classes, codes, counts = np.unique(y_train, return_inverse=True, return_counts=True)
    except TypeError as exc:
        raise InputError(f"labels in y_train must be mutually comparable (sortable); {exc}") from None
    codes = codes.reshape(-1)
    _check_class_sizes(classes, counts, k, train_targets is None)
    if train_targets is None:
        T = target_neighbors(X_train, codes, k)
    else:
        T = _check_train_targets(train_targets, y_train, codes, k)
    Lmap = _metric_map(L, M, X_train.shape[1])
    return X_train, X_test, classes, codes, k, mu, T, Lmap, targets_metric, block_size


# ---------------------------------------------------------------------------
# core
# ---------------------------------------------------------------------------


def _row_sums(A):
    """Sums of the rows of ``A``, added strictly left to right.

    ``A.sum(axis=1)`` may order the additions differently for different numbers
    of rows; a sequential accumulation makes every row's sum independent of the
    other rows in its block, so energies do not depend on ``block_size`` at all.
    """
    return np.add.accumulate(A, axis=1)[:, -1]


def _energies(X_train, X_test, codes, n_classes, k, mu, T, Lmap, targets_metric, block_size):
    Z_train = X_train @ Lmap.T
    Z_test = X_test @ Lmap.T
    # 1 + d_M(x_i, x_j) for every training point i and each of its targets j (explicit differences)
    Dt = Z_train[T] - Z_train[:, None, :]
    margin = 1.0 + np.einsum("nkd,nkd->nk", Dt, Dt)  # (n_train, k_train)
    members = [np.flatnonzero(codes == c) for c in range(n_classes)]
    others = [np.flatnonzero(codes != c) for c in range(n_classes)]
    n_test = X_test.shape[0]
    E = np.empty((n_test, n_classes))
    for start in range(0, n_test, block_size):
        stop = min(start + block_size, n_test)
        D = cdist(Z_test[start:stop], Z_train, metric="sqeuclidean")  # d_M(x_t, x_i), (b, n_train)
        if not np.all(np.isfinite(D)):
            raise InputError("squared distances overflowed to infinity; rescale X (or the metric) to smaller values.")
        # invasion of training perimeters by x_t: G[t, i] = sum_{j ~> i} [1 + d_M(x_i, x_j) - d_M(x_i, x_t)]_+
        G = np.zeros_like(D)
        if mu > 0:
            for r in range(T.shape[1]):
                G += np.maximum(margin[:, r] - D, 0.0)
        for c in range(n_classes):
            Dc = D[:, members[c]]
            if targets_metric == "learned":
                dt = np.partition(Dc, k - 1, axis=1)[:, :k]  # the k smallest d_M to class c
            else:
                De = cdist(X_test[start:stop], X_train[members[c]], metric="sqeuclidean")
                nearest = np.argsort(De, axis=1, kind="stable")[:, :k]  # ties: lower training index
                dt = np.take_along_axis(Dc, nearest, axis=1)
            pull = _row_sums(dt)
            push = np.zeros(stop - start)
            if mu > 0:
                Do = D[:, others[c]]  # distances to impostor candidates l (y_l != c)
                for r in range(k):
                    push += _row_sums(np.maximum(1.0 + dt[:, r:r + 1] - Do, 0.0))
                push += _row_sums(G[:, others[c]])
            E[start:stop, c] = (1.0 - mu) * pull + mu * push
    return E


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------


def energy_scores(X_train: ArrayLike, y_train: ArrayLike, X_test: ArrayLike, k: int = 3, mu: float = 0.5, *,
                  L: ArrayLike | None = None, M: ArrayLike | None = None, train_targets: ArrayLike | None = None,
                  targets_metric: str = "learned", block_size: int | None = None, return_classes: bool = False) -> Any:
    r"""LMNN energies of every test point under every candidate label (Weinberger & Saul 2009, Eq. 15).

    For a test point :math:`x_t` and a label :math:`c` of the training set,

    .. math::

        E_c(x_t) = (1-\mu) \sum_{j \in N_k^c(t)} d_M(x_t, x_j)
          + \mu \sum_{j \in N_k^c(t)} \sum_{l:\, y_l \ne c} [1 + d_M(x_t, x_j) - d_M(x_t, x_l)]_+
          + \mu \sum_{i:\, y_i \ne c} \sum_{j \rightsquigarrow i} [1 + d_M(x_i, x_j) - d_M(x_i, x_t)]_+

    where :math:`d_M(a, b) = (a-b)^\top M (a-b)`, :math:`[z]_+ = \max(z, 0)`,
    the sums over :math:`l` and :math:`i` run over all training points of other
    labels, :math:`N_k^c(t)` are the ``k`` nearest training points of label ``c``
    (under ``d_M``, or Euclidean with ``targets_metric="euclidean"``) and
    :math:`j \rightsquigarrow i` are the fixed target neighbours of training
    point :math:`x_i`. This is the loss of LMNN (Eq. 13) with :math:`x_t` added
    as a point of label ``c``, less the terms that do not involve :math:`x_t`
    (the same for every ``c``). See the module docstring of
    :mod:`metricopt.methods.lmnn.energy`.

    Parameters
    ----------
    X_train : array-like of shape (n_train, d)
        Training inputs (finite).
    y_train : array-like of shape (n_train,)
        Training labels (any sortable dtype). Every class needs ``k + 1`` points
        when ``train_targets`` is not given, ``k`` when it is.
    X_test : array-like of shape (n_test, d)
        Points to score.
    k : int, default 3
        Number of target neighbours of the test point in each class (``k >= 1``);
        also the number of training targets when ``train_targets`` is not given.
    mu : float in [0, 1], default 0.5
        Push weight, as in training: pull weighted ``1 - mu``, the two hinge
        terms ``mu``.
    L : array-like of shape (r, d), optional
        Linear map of the metric, ``M = L^T L``. Exclusive with ``M``.
    M : array-like of shape (d, d), optional
        PSD metric matrix, factored as ``L = diag(sqrt(w)) V^T`` from ``M = V diag(w) V^T``
        (:func:`metricopt.linalg.factor`). Exclusive with ``L``; neither: Euclidean.
    train_targets : int array of shape (n_train, k_train), optional
        Target neighbours of the training points (same label, not the point
        itself), e.g. ``LMNNProblem.target_neighbors`` of the training run.
        Default: :func:`metricopt.constraints.target_neighbors` ``(X_train, y_train, k)``,
        the ``k`` nearest same-label points by Euclidean distance, as LMNN
        training uses by default.
    targets_metric : {"learned", "euclidean"}, default "learned"
        Metric in which the test point's target neighbours ``N_k^c(t)`` are chosen.
    block_size : int, optional
        Test points processed at once; memory is ``O(block_size * n_train)``.
        Default: about 32 MB of work space. The result does not depend on it
        (row sums are accumulated in a fixed order, so not even in the last bit).
    return_classes : bool, default False
        Also return the labels of the columns.

    Returns
    -------
    energies : ndarray of shape (n_test, n_classes)
        ``energies[t, c]`` is :math:`E_c(x_t)` for the ``c``-th label of
        ``np.unique(y_train)``.
    classes : ndarray of shape (n_classes,)
        The column labels, ``np.unique(y_train)`` (only if ``return_classes``).

    Raises
    ------
    metricopt.errors.InputError
        (a ``ValueError``) on non-finite or badly shaped input, ``X_test`` and
        ``X_train`` with different numbers of features, ``k < 1``, a class with
        too few points, ``mu`` outside [0, 1], both ``L`` and ``M``, a markedly
        indefinite ``M`` or invalid ``train_targets``;
        :class:`metricopt.errors.UnknownOptionError` for an unknown ``targets_metric``.

    References
    ----------
    K. Q. Weinberger and L. K. Saul, "Distance Metric Learning for Large Margin
    Nearest Neighbor Classification", JMLR 10:207-244, 2009, Section 3.5, Eq. 15.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [0.1], [0.2], [5.0], [5.1], [5.2]])
    >>> y = np.array([0, 0, 0, 1, 1, 1])
    >>> E = energy_scores(X, y, np.array([[0.05], [5.15]]), k=2)
    >>> E.argmin(axis=1)
    array([0, 1])
    """
    X_train, X_test, classes, codes, k, mu, T, Lmap, tm, bs = _prepare(
        X_train, y_train, X_test, k, mu, L, M, train_targets, targets_metric, block_size)
    E = _energies(X_train, X_test, codes, classes.size, k, mu, T, Lmap, tm, bs)
    return (E, classes) if return_classes else E


def energy_predict(X_train: ArrayLike, y_train: ArrayLike, X_test: ArrayLike, k: int = 3, mu: float = 0.5, *,
                   L: ArrayLike | None = None, M: ArrayLike | None = None, train_targets: ArrayLike | None = None,
                   targets_metric: str = "learned", block_size: int | None = None) -> np.ndarray:
    r"""Energy-based LMNN classification: :math:`\hat y_t = \arg\min_c E_c(x_t)` (Weinberger & Saul 2009, Eq. 15).

    The energies :math:`E_c(x_t)` are those of :func:`energy_scores` (same
    parameters): the LMNN loss the training set would incur with :math:`x_t`
    added under label ``c``, restricted to the terms that involve :math:`x_t`.
    Equal lowest energies go to the label that sorts first in ``np.unique(y_train)``.

    Parameters
    ----------
    X_train, y_train, X_test, k, mu, L, M, train_targets, targets_metric, block_size
        As for :func:`energy_scores`.

    Returns
    -------
    y_pred : ndarray of shape (n_test,)
        Predicted labels, with the dtype of ``np.unique(y_train)``.

    Raises
    ------
    metricopt.errors.InputError
        On invalid input, as in :func:`energy_scores`.

    References
    ----------
    K. Q. Weinberger and L. K. Saul, JMLR 10:207-244, 2009, Section 3.5, Eq. 15.
    """
    E, classes = energy_scores(X_train, y_train, X_test, k, mu, L=L, M=M, train_targets=train_targets,
                               targets_metric=targets_metric, block_size=block_size, return_classes=True)
    return classes[np.argmin(E, axis=1)]
