r"""Regularised, weighted LDA metrics (Ramanan & Baker, PAMI 33(4), 2011, Sec. 4.1).

For points :math:`x_i` with labels :math:`y_i` and non-negative weights :math:`w_i` (a local set,
soft-weighted around a reference point), with :math:`W_c = \sum_{i: y_i = c} w_i`, weighted class
means :math:`m_c` and weighted mean :math:`m`:

.. math::

    \Sigma_W = \frac{1}{\sum_i w_i} \sum_i w_i (x_i - m_{y_i})(x_i - m_{y_i})^\top + \lambda I,
    \qquad
    \Sigma_B = \frac{1}{\sum_c W_c} \sum_c W_c (m_c - m)(m_c - m)^\top .

The metric is :math:`M = L^\top L` whose ``r`` rows are the generalised eigenvectors of
:math:`\Sigma_B v = \gamma \Sigma_W v` with the largest :math:`\gamma`, normalised to
:math:`v^\top \Sigma_W v = 1` (distances in units of the regularised within-class spread), and
``r`` = the number of classes present (capped at ``d``), as the paper uses for local sets:
with few classes in a neighbourhood the between-class scatter has rank ``c - 1`` and the last
direction is the regularised within-class one of least spread.

The between-class scatter of a small local set is noisy; it is *bagged*: :math:`\Sigma_B` is the
mean of the scatters of ``n_bags`` bootstrap resamples of the set (drawn with replacement,
weights carried along), as the paper does. ``n_bags=0`` uses the set itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
import scipy.linalg

from ..._validation import check_int, check_real, check_X, check_y
from ...errors import InputError

__all__ = ["regularized_lda", "scatters"]


def _check_weights(w, n):
    if w is None:
        return np.ones(n)
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (n,):
        raise InputError(f"weights must have shape (n,) = ({n},); got {w.shape}.")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise InputError("weights must be finite, non-negative and not all zero.")
    return w


def scatters(X: np.ndarray, codes: np.ndarray, w: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(Sigma_W without lambda, Sigma_B)`` of the weighted set (see the module docstring).

    Parameters
    ----------
    X : (n, d) ndarray
        The points.
    codes : (n,) ndarray of int
        Their class codes in ``[0, n_classes)``.
    w : (n,) ndarray
        Their non-negative weights.
    n_classes : int
        The number of classes.

    Returns
    -------
    Sigma_W : (d, d) ndarray
        The weighted within-class scatter (without the ridge).
    Sigma_B : (d, d) ndarray
        The weighted between-class scatter of the classes present.
    """
    tot = w.sum()
    Wc = np.bincount(codes, weights=w, minlength=n_classes)
    sums = np.zeros((n_classes, X.shape[1]))
    np.add.at(sums, codes, w[:, None] * X)
    present = Wc > 0
    means = np.zeros_like(sums)
    means[present] = sums[present] / Wc[present, None]
    m = (w[:, None] * X).sum(axis=0) / tot
    R = X - means[codes]
    Sw = (R * w[:, None]).T @ R / tot
    Dm = (means - m)[present]
    Sb = (Dm * Wc[present, None]).T @ Dm / Wc[present].sum()
    return Sw, Sb


def _check_rank(rank, d):
    r = check_int(rank, "rank", low=1)
    if r > d:
        raise InputError(f"rank must be at most the number of features d={d}; got {r}.")
    return r


def regularized_lda(X: ArrayLike, y: ArrayLike, weights: ArrayLike | None = None, lam: float = 1.0,
                    rank: int | None = None, n_bags: int = 10, random_state: Any = 0) -> np.ndarray:
    r"""The regularised weighted LDA factor ``L`` (``r x d``; ``M = L^T L``), see the module docstring.

    Parameters
    ----------
    X : (n, d) array
    y : (n,) labels
    weights : (n,) array, optional
        Non-negative weights (default all 1).
    lam : float, default 1.0
        The ridge :math:`\lambda` added to the within-class scatter (the paper's 1).
    rank : int, optional
        Rows of ``L``; default the number of classes with positive weight (capped at ``d``).
    n_bags : int, default 10
        Bootstrap resamples averaged into :math:`\Sigma_B` (0: no bagging).
    random_state : int
        Seed of the bootstrap.

    Returns
    -------
    L : (r, d) ndarray
        The factor (``M = L^T L``).

    Raises
    ------
    InputError
        For invalid data, weights, ``lam``, ``n_bags`` or ``rank`` (above ``d``).
    """
    X = check_X(X)
    n, d = X.shape
    y = check_y(y, n)
    w = _check_weights(weights, n)
    lam = check_real(lam, "lam", low=0.0)
    n_bags = check_int(n_bags, "n_bags", low=0)
    classes, codes = np.unique(y, return_inverse=True)
    codes = codes.reshape(-1)
    C = classes.size
    present = int(np.count_nonzero(np.bincount(codes, weights=w, minlength=C) > 0))
    r = min(present, d) if rank is None else _check_rank(rank, d)
    Sw, Sb = scatters(X, codes, w, C)
    if n_bags:
        rng = np.random.default_rng(random_state)
        Sb = np.zeros((d, d))
        done = 0
        while done < n_bags:
            idx = rng.integers(0, n, n)
            if w[idx].sum() <= 0:
                continue
            Sb += scatters(X[idx], codes[idx], w[idx], C)[1]
            done += 1
        Sb /= n_bags
    B = Sw + lam * np.eye(d)
    if lam == 0:
        B += 1e-10 * max(np.trace(B), 1e-300) / d * np.eye(d)
    g, V = scipy.linalg.eigh(0.5 * (Sb + Sb.T), 0.5 * (B + B.T))  # V^T B V = I
    order = np.argsort(g)[::-1][:r]
    return V[:, order].T.copy()
