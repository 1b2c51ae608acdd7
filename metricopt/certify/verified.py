r"""Floating-point facts a certificate may rely on: eigenvalue bounds that rounding can only lower.

A lower bound on the optimum is a theorem about exact matrices, computed with rounded ones. Each
function here returns a number that is provably on the safe side of the exact quantity, given
the matrices it was handed and an elementwise bound ``E`` on how far they may be from the exact
ones (:math:`|\tilde H - H| \le E`):

* the computed eigenvalues of a symmetric matrix :math:`\tilde H` are those of
  :math:`\tilde H + \Delta` with :math:`\|\Delta\|_2 \le p(d)\,\epsilon\,\|\tilde H\|_2` (a backward-stable
  eigensolver; Golub & Van Loan, *Matrix Computations*, 4th ed., Sec. 8.4, with :math:`p(d)` a modest
  function of :math:`d`; :data:`EIG_FACTOR` :math:`\cdot d` here), and by Weyl's inequality each moves
  by at most :math:`\|\Delta\|_2 + \|E\|_2 \le \|\Delta\|_2 + \|E\|_F`;
* a product :math:`W^\top H W` computed in floating point is within
  :math:`\gamma_{2d}\, |W|^\top |H|\, |W|` of the exact one, :math:`\gamma_m = m\epsilon / (1 - m\epsilon)`
  (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Sec. 3.5);
* scaling by powers of two is exact (barring overflow and underflow, which the data checks rule out).
"""

from __future__ import annotations

import numpy as np

from ..linalg import power_of_two_scaling

__all__ = ["EPS", "congruence", "eig_error", "gamma", "min_eig_lower", "power_of_two_scaling"]

EPS = float(np.finfo(np.float64).eps)
#: the eigensolver's backward error is taken as ``EIG_FACTOR * d * eps * ||H||_F`` (LAPACK's symmetric
#: solvers are backward stable with a small multiple of ``d eps ||H||``; the factor is generous)
EIG_FACTOR = 8.0


def gamma(m: int) -> float:
    r"""The rounding-error constant of an ``m``-term sum or dot product.

    .. math:: \gamma_m = \frac{m\epsilon}{1 - m\epsilon}

    (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002, Sec. 3.1), with the machine
    epsilon :math:`\epsilon = 2^{-52}` in place of the unit roundoff :math:`2^{-53}`: twice as cautious.

    Parameters
    ----------
    m : int
        The number of terms (or the length of the dot product).

    Returns
    -------
    float
        :math:`\gamma_m`, the relative error bound; ``inf`` once :math:`m\epsilon \ge 1/2`.
    """
    mf = float(m)
    return mf * EPS / (1.0 - mf * EPS) if mf * EPS < 0.5 else np.inf


def min_eig_lower(H: np.ndarray, E: np.ndarray | float = 0.0) -> float:
    r"""A verified lower bound on the smallest eigenvalue of every matrix near ``H``.

    The result is at most :math:`\lambda_{\min}(H^\star)` for every symmetric :math:`H^\star` with
    :math:`|H^\star - H| \le E` elementwise: the computed smallest eigenvalue minus :func:`eig_error`
    (Weyl's inequality; module docstring). It may only be lower than the exact value, never higher.

    Parameters
    ----------
    H : (d, d) ndarray
        The computed, symmetric matrix.
    E : (d, d) ndarray or float, default 0.0
        An elementwise bound on the distance of ``H`` to the exact matrix (a matrix, or a scalar bound on every
        entry).

    Returns
    -------
    float
        The lower bound (``inf`` for an empty ``H``).
    """
    H = np.asarray(H, dtype=np.float64)
    if H.size == 0:
        return np.inf
    lo = float(np.linalg.eigvalsh(H)[0])
    return lo - eig_error(H, E)


def eig_error(H: np.ndarray, E: np.ndarray | float = 0.0) -> float:
    r"""A bound on how far the computed eigenvalues of ``H`` may lie from exact ones.

    The largest distance between a computed eigenvalue of ``H`` and the matching exact eigenvalue of any
    symmetric matrix within ``E`` of ``H`` (module docstring):

    .. math:: \mathrm{EIG\_FACTOR}\cdot d\,\epsilon\,\|H\|_F + \|E\|_F

    (Golub & Van Loan, *Matrix Computations*, 4th ed., Sec. 8.4, and Weyl's inequality), with
    :math:`\|E\|_F` replaced by :math:`d\,E` for a scalar ``E``.

    Parameters
    ----------
    H : (d, d) ndarray
        The computed, symmetric matrix.
    E : (d, d) ndarray or float, default 0.0
        An elementwise bound on the distance of ``H`` to the exact matrix.

    Returns
    -------
    float
        The eigenvalue error bound.
    """
    H = np.asarray(H, dtype=np.float64)
    d = H.shape[0]
    err = EIG_FACTOR * d * EPS * float(np.linalg.norm(H))
    return err + (float(np.linalg.norm(E)) if np.ndim(E) else float(E) * d)


def congruence(W: np.ndarray, H: np.ndarray, E: np.ndarray | float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    r"""A congruence :math:`W^\top H W` with an elementwise bound on its rounding error.

    The product computed in floating point is within :math:`\gamma_{2d}\,|W|^\top |H|\,|W|` of the exact
    one (Higham 2002, Sec. 3.5); the bound returned also covers the error ``E`` of ``H`` (with a
    :func:`gamma` safety factor) and the symmetrization.

    Parameters
    ----------
    W : (d, k) ndarray
        The basis, taken as exact.
    H : (d, d) ndarray
        The computed, symmetric matrix.
    E : (d, d) ndarray or float, default 0.0
        An elementwise bound on the distance of ``H`` to the exact matrix.

    Returns
    -------
    G : (k, k) ndarray
        :math:`W^\top H W` computed in floating point (symmetrized).
    E_G : (k, k) ndarray
        An elementwise bound on :math:`|G - W^\top H^\star W|` for every :math:`H^\star` within ``E`` of ``H``.
    """
    W = np.asarray(W, dtype=np.float64)
    Wa = np.abs(W)
    G = W.T @ H @ W
    G = 0.5 * (G + G.T)
    d = H.shape[0]
    Eh = gamma(2 * d + 2) * np.abs(H) + (E if np.ndim(E) else np.full_like(H, float(E)))
    EG = (Wa.T @ Eh @ Wa) * (1.0 + gamma(2 * d + 2)) + EPS * np.abs(G)
    return G, EG
