r"""Classic linear baselines in closed form: PCA, whitening, LDA and RCA (JMLR 2009, Sec. 2.2 and Table 1).

Each one is a linear map ``L`` (``x -> L x``, ``M = L^T L``) computed from an eigendecomposition,
not by optimisation; metricopt reports it with status ``closed_form`` (exact for its own criterion,
never certified for a metric-learning objective). With ``C`` classes, class means :math:`\mu_c`
(of the data centred on its mean) and class sizes :math:`n_c`:

* **PCA**: the top-``r`` eigenvectors of the covariance :math:`\Sigma = \frac1n \sum_i (x_i - \bar x)(x_i - \bar x)^\top`
  as the rows of ``L`` (``r`` given, or the smallest ``r`` keeping a fraction of the variance);
* **whitening**: :math:`L = \Lambda^{-1/2} U^\top` over the non-null eigenpairs of :math:`\Sigma`
  (``M = \Sigma^+``, the Mahalanobis distance of the data's own covariance);
* **LDA** as Weinberger & Saul (JMLR 2009, Sec. 2.2) define it:
  :math:`C_b = \frac1C \sum_c \mu_c \mu_c^\top`, :math:`C_w = \frac1n \sum_c \sum_{i \in c} (x_i - \mu_c)(x_i - \mu_c)^\top`
  and the rows of ``L`` the top eigenvectors of :math:`C_w^{-1} C_b` (unit length, at most ``C - 1``);
* **RCA** (Bar-Hillel, Hertz, Shental & Weinshall, JMLR 6, 2005): chunklets :math:`H_j` of points known
  to share a class (from the labels, one chunklet per class, or given), the within-chunklet covariance
  :math:`\hat C = \frac1N \sum_j \sum_{i \in H_j} (x_i - m_j)(x_i - m_j)^\top` and :math:`L = \hat C^{-1/2} P`,
  after a PCA projection ``P`` that removes the directions of negligible variance (the paper's
  denoising step; there :math:`\hat C` is singular).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
import scipy.linalg

from ..._validation import check_classes, check_X, check_y
from ...errors import InputError

__all__ = ["pca_map", "whitening_map", "lda_map", "rca_map", "ClosedForm"]

#: eigenvalues below this fraction of the largest count as zero (null directions)
NULL = 1e-10


def _eig_desc(S):
    w, U = np.linalg.eigh(0.5 * (S + S.T))
    order = np.argsort(w)[::-1]
    return np.clip(w[order], 0.0, None), U[:, order]


def _covariance(X):
    Xc = X - X.mean(axis=0)
    return Xc.T @ Xc / X.shape[0]


def _rank_for(w, n_components, name):
    """``r`` from an int (``1 <= r <= len(w)``), a variance fraction in ``(0, 1)``, or None (all)."""
    d = w.size
    if n_components is None:
        return d
    if isinstance(n_components, (bool, np.bool_)):
        raise InputError(f"{name} must be an integer number of dimensions, a variance fraction in (0, 1) or None; "
                         f"got {n_components!r}.")
    if isinstance(n_components, (int, np.integer)):
        if not 1 <= n_components <= d:
            raise InputError(f"{name} must be between 1 and the number of features d={d}; got {n_components}.")
        return int(n_components)
    frac = float(n_components)
    if not 0.0 < frac < 1.0:
        raise InputError(f"{name} as a variance fraction must lie in (0, 1); got {n_components!r}.")
    cum = np.cumsum(w) / max(w.sum(), 1e-300)
    return int(min(d, np.searchsorted(cum, frac - 1e-12) + 1))


def pca_map(X: ArrayLike, n_components: Any = None) -> tuple[np.ndarray, float]:
    """``(L, retained variance fraction)``: the top principal directions of ``X`` as rows.

    Parameters
    ----------
    X : (n, d) array_like
        The data.
    n_components : int, float or None
        The number of directions (an int) or the fraction of the variance to keep (a float in (0, 1)); ``None``:
        all.

    Returns
    -------
    L : (r, d) ndarray
        The principal directions.
    fraction : float
        The variance fraction retained.

    Raises
    ------
    InputError
        For invalid data or ``n_components``.
    """
    X = check_X(X)
    w, U = _eig_desc(_covariance(X))
    r = _rank_for(w, n_components, "n_components")
    return U[:, :r].T.copy(), float(w[:r].sum() / max(w.sum(), 1e-300))


def whitening_map(X: ArrayLike) -> tuple[np.ndarray, int]:
    """``(L, rank)`` with ``L^T L`` the pseudo-inverse of the covariance of ``X``.

    Parameters
    ----------
    X : (n, d) array_like
        The data.

    Returns
    -------
    L : (r, d) ndarray
        The whitening map.
    rank : int
        The number of non-null directions kept.

    Raises
    ------
    InputError
        For invalid data, or data without variance.
    """
    X = check_X(X)
    w, U = _eig_desc(_covariance(X))
    keep = w > NULL * max(w[0], 1e-300)
    if not np.any(keep):
        raise InputError("whitening needs data with some variance; every feature of X is constant.")
    return (U[:, keep] / np.sqrt(w[keep])).T.copy(), int(keep.sum())


def _class_scatters(X, y):
    classes, counts = check_classes(y, method="LDA")
    mu = X.mean(axis=0)
    means = np.stack([X[y == c].mean(axis=0) - mu for c in classes])
    Cb = means.T @ means / classes.size
    R = X - mu - means[np.searchsorted(classes, y)]
    Cw = R.T @ R / X.shape[0]
    return Cb, Cw, classes


def lda_map(X: ArrayLike, y: ArrayLike, n_components: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """``(L, eigenvalues)``: the rows of ``L`` are the unit eigenvectors of ``C_w^{-1} C_b`` with the largest
    eigenvalues (JMLR 2009, Sec. 2.2), at most ``C - 1``; a singular ``C_w`` is regularised by
    ``NULL * trace(C_w) / d`` on its diagonal.

    Parameters
    ----------
    X : (n, d) array_like
        The data.
    y : (n,) array_like
        The labels.
    n_components : int, float or None
        The number of directions (at most ``C - 1``), a variance fraction, or ``None``: ``C - 1``.

    Returns
    -------
    L : (r, d) ndarray
        The directions.
    eigenvalues : (r,) ndarray
        Their generalised eigenvalues.

    Raises
    ------
    InputError
        For invalid data or labels, or more than ``C - 1`` directions.
    """
    X = check_X(X)
    y = check_y(y, X.shape[0])
    Cb, Cw, classes = _class_scatters(X, y)
    d = X.shape[1]
    rmax = min(classes.size - 1, d)
    if isinstance(n_components, (int, np.integer)) and not isinstance(n_components, bool) and n_components > rmax:
        raise InputError(f"LDA gives at most C - 1 = {rmax} directions for {classes.size} classes and {d} features; "
                         f"got n_components={n_components}.")
    r = rmax if n_components is None else _rank_for(np.ones(rmax), n_components, "n_components")
    reg = NULL * max(np.trace(Cw), 1e-300) / d
    w, V = scipy.linalg.eigh(Cb, Cw + reg * np.eye(d))
    order = np.argsort(w)[::-1][:r]
    V = V[:, order]
    V = V / np.linalg.norm(V, axis=0, keepdims=True)
    return V.T.copy(), w[order]


def rca_map(X: ArrayLike, chunklets: ArrayLike, pca: Any = 0.999) -> tuple[np.ndarray, np.ndarray]:
    """``(L, P)``: RCA's ``L = C^{-1/2} P`` from chunklet ids (``-1``: in no chunklet) after the PCA ``P``
    keeping the fraction ``pca`` of the variance (or ``pca`` dimensions; ``None``: all non-null ones).

    (Bar-Hillel, Hertz, Shental & Weinshall, JMLR 6, 2005.)

    Parameters
    ----------
    X : (n, d) array_like
        The data.
    chunklets : (n,) array_like
        The chunklet id of every point (``-1``: in none).
    pca : float, int or None, default 0.999
        The PCA before RCA.

    Returns
    -------
    L : (r, d) ndarray
        RCA's map.
    P : (r, d) ndarray
        The PCA.

    Raises
    ------
    InputError
        For invalid data or chunklets, no chunklet of two points, or a singular within-chunklet covariance.
    """
    X = check_X(X)
    chunklets = np.asarray(chunklets)
    if chunklets.shape != (X.shape[0],):
        raise InputError(f"chunklets must hold one chunklet id per row of X ({X.shape[0]}); got shape "
                         f"{chunklets.shape}.")
    ids, counts = np.unique(chunklets[chunklets != -1], return_counts=True)
    if ids.size == 0 or np.all(counts < 2):
        raise InputError("RCA needs at least one chunklet of two or more points (points known to share a class).")
    w, U = _eig_desc(_covariance(X))
    if pca is None:
        r = int(np.sum(w > NULL * max(w[0], 1e-300)))
    else:
        r = _rank_for(w, pca, "pca")
    P = U[:, :r].T
    Z = X @ P.T
    C = np.zeros((r, r))
    N = 0
    for c, m in zip(ids, counts):
        if m < 2:
            continue
        R = Z[chunklets == c] - Z[chunklets == c].mean(axis=0)
        C += R.T @ R
        N += m
    C /= N
    wc, Uc = _eig_desc(C)
    if wc[-1] <= NULL * max(wc[0], 1e-300):
        raise InputError(f"the within-chunklet covariance is singular in the {r} PCA dimensions kept (too few chunklet "
                         "points per dimension); keep fewer dimensions with pca= (e.g. pca=0.95 or a smaller count).")
    W = (Uc / np.sqrt(wc)) @ Uc.T
    return W @ P, P


class ClosedForm:
    """The data of a closed-form baseline (what a model file records): no terms, no solver."""

    REFERENCES = {"RCA": "Bar-Hillel, Hertz, Shental & Weinshall, JMLR 6, 2005"}
    diagonal = False
    is_convex = False  # nothing is optimised: the map is an eigendecomposition
    terms: list = []
    constraints: list = []
    extra_variables: tuple = ()

    def __init__(self, X, y, method):
        self.X = check_X(X)
        self.y = None if y is None else check_y(y, self.X.shape[0])
        self.method = method
        self.reference = self.REFERENCES.get(method, "Weinberger & Saul, JMLR 2009, Sec. 2.2")

    @property
    def n(self) -> int:
        """The number of points."""
        return self.X.shape[0]

    @property
    def d(self) -> int:
        """The number of features."""
        return self.X.shape[1]

    def __repr__(self):
        return f"ClosedForm({self.method}, n={self.n}, d={self.d})"
