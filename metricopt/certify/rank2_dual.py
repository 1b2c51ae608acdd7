r"""A dedicated interior-point solver for LMNN's restricted dual: one small LMI with rank-two pieces.

The certificate of :mod:`metricopt.certify.triplets` (with no Frobenius term) needs a good point of

.. math::

    \max_{x_0,\ a}\ c_0 x_0 + \sum_{t=1}^m a_t
    \quad\text{s.t.}\quad S(x_0, a) = P - x_0 G_0 - \sum_t a_t (u_t u_t^\top - v_t v_t^\top) \succeq 0,
    \qquad 0 \le x_0 \le \mu,\ 0 \le a_t \le \mu_t ,

where :math:`P \succ 0` is the pull matrix, :math:`G_0` the summed :math:`A_t` of the triplets whose
multiplier is tied to one value, and :math:`A_t = u_t u_t^\top - v_t v_t^\top` (with
:math:`u_t = x_i - x_l`, :math:`v_t = x_i - x_j`) the rank-two matrices of the triplets near the margin;
:math:`\mu_t = \mu` (unweighted LMNN) or :math:`\mu_t = \mu w_{i_t}` (weighted LMNN, the anchor's weight).

It is solved by the primal log-barrier method (Boyd & Vandenberghe, *Convex Optimization*, 2004,
Section 11.3): Newton's method on

.. math::

    \phi_\tau(x) = -\tau\, c^\top x - \log\det S(x) - \sum_i \log x_i - \sum_i \log(\mu_i - x_i)

for increasing :math:`\tau`; a centred point is within :math:`\nu / \tau` of the optimum,
:math:`\nu = d + 2(m + 1)`. The rank-two structure makes a Newton step cost :math:`O(m^2 d + m^3)`:
with :math:`S = L L^\top`, :math:`Y_u = L^{-1} U^\top`, :math:`Y_v = L^{-1} V^\top` and the Gram
matrices :math:`K_{uu} = Y_u^\top Y_u` (etc.), the barrier's Hessian is

.. math::

    \operatorname{tr}(S^{-1} A_s S^{-1} A_t) = (K_{uu})_{st}^2 - (K_{uv})_{st}^2 - (K_{vu})_{st}^2 + (K_{vv})_{st}^2 ,

where a generic conic solver (Clarabel through CVXPY) works with the :math:`m \times d^2` dense
constraint block. Only a good point is needed: the certificate recomputes its bound in float64
from the returned multipliers, so an early or inexact stop loosens the bound and never falsifies it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

__all__ = ["solve_rank2_dual"]

#: barrier parameter growth per centring (long-step method)
GROWTH = 10.0
#: Newton steps are stopped once half the squared Newton decrement is below this (approximate centring)
CENTRED = 0.1
#: at most this many Newton steps in all
MAX_NEWTON = 300


def _chol(S):
    try:
        return np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        return None


def solve_rank2_dual(P: np.ndarray, U: np.ndarray, V: np.ndarray, mu: float, G0: np.ndarray | None = None,
                     c0: float = 0.0, accuracy: float | None = None,
                     upper: np.ndarray | None = None) -> tuple[float, np.ndarray] | None:
    r"""A near-optimal point of the restricted dual above, or ``None`` when it has no strictly
    feasible point that this method can start from (``P`` not positive definite).

    Parameters
    ----------
    P : (d, d) ndarray, symmetric positive definite
        The pull matrix.
    U, V : (m, d) ndarrays
        Row ``t`` gives :math:`A_t = u_t u_t^\top - v_t v_t^\top`.
    mu : float > 0
        Upper bound of the tied multiplier :math:`x_0` and, without ``upper``, of every multiplier.
    G0 : (d, d) ndarray or None
        The matrix of the tied multiplier :math:`x_0` (``None``: no such variable).
    c0 : float
        The objective's coefficient of :math:`x_0` (the number of tied triplets).
    accuracy : float or None
        Absolute accuracy wanted on the objective (the barrier's :math:`\nu / \tau`); default
        ``1e-9 * mu * (c0 + m)`` (with ``upper``: ``1e-9 * (c0 mu + sum(upper))``).
    upper : (m,) ndarray of floats > 0, or None
        Upper bounds :math:`\mu_t` of the multipliers :math:`a_t` (``None``: all ``mu``).

    Returns
    -------
    (x0, a) or None
        ``x0`` (0.0 without ``G0``) and the ``(m,)`` multipliers, strictly inside their boxes
        ``[0, mu]`` and ``[0, upper]``.

    Raises
    ------
    ValueError
        When ``upper`` does not hold ``m`` positive bounds.
    """
    P = np.asarray(P, dtype=np.float64)
    U = np.asarray(U, dtype=np.float64)
    V = np.asarray(V, dtype=np.float64)
    m, d = U.shape
    tied = G0 is not None
    nvar = m + int(tied)
    if nvar == 0 or _chol(P) is None:
        return None
    c = np.ones(nvar)
    if tied:
        c[0] = float(c0)
    ub: Any
    if upper is None:  # one bound for all (kept a scalar: the unweighted iterates stay as they were)
        ub = mu
        scale = mu * float(c.sum())
    else:
        ub = np.asarray(upper, dtype=np.float64).ravel()
        if ub.shape != (m,) or not np.all(ub > 0):
            raise ValueError(f"upper must hold {m} positive bounds; got shape {ub.shape}.")
        ub = np.concatenate([[mu], ub]) if tied else ub
        scale = float(c @ ub)
    accuracy = 1e-9 * scale if accuracy is None else float(accuracy)
    nu = d + 2.0 * nvar

    def S_of(x):
        a = x[int(tied):]
        S = P - (U.T * a) @ U + (V.T * a) @ V
        if tied:
            S = S - x[0] * G0
        return 0.5 * (S + S.T)

    def phi(x, tau, L):
        return -tau * c @ x - 2.0 * np.sum(np.log(np.diag(L))) - np.sum(np.log(x)) - np.sum(np.log(ub - x))

    # a strictly feasible start: every multiplier at the same fraction of its bound
    x = np.full(nvar, 0.5 * mu) if upper is None else 0.5 * ub
    L = _chol(S_of(x))
    while L is None:
        x *= 0.1
        if np.all(x < 1e-14 * ub):
            return None
        L = _chol(S_of(x))
    tau = nu / max(scale, 1e-300)
    steps = 0
    while True:
        for _ in range(50):  # centring
            if steps >= MAX_NEWTON:
                break
            steps += 1
            Yu = scipy.linalg.solve_triangular(L, U.T, lower=True, check_finite=False)
            Yv = scipy.linalg.solve_triangular(L, V.T, lower=True, check_finite=False)
            Kuu, Kuv, Kvv = Yu.T @ Yu, Yu.T @ Yv, Yv.T @ Yv
            H = Kuu * Kuu - Kuv * Kuv - Kuv.T * Kuv.T + Kvv * Kvv
            tr = np.einsum("dm,dm->m", Yu, Yu) - np.einsum("dm,dm->m", Yv, Yv)
            if tied:
                W = scipy.linalg.solve_triangular(L, G0, lower=True, check_finite=False)
                W = scipy.linalg.solve_triangular(L, W.T, lower=True, check_finite=False)  # L^-1 G0 L^-T
                # u^T W u per column, through one matrix product each (a three-operand einsum loops in C, no BLAS:
                # 2.3 of a 5 s certificate at m = 743, d = 164)
                h0 = np.einsum("dm,dm->m", Yu, W @ Yu) - np.einsum("dm,dm->m", Yv, W @ Yv)
                H = np.block([[np.array([[np.sum(W * W)]]), h0[None, :]], [h0[:, None], H]])
                tr = np.concatenate([[np.trace(W)], tr])
            g = -tau * c + tr - 1.0 / x + 1.0 / (ub - x)
            H[np.diag_indices_from(H)] += 1.0 / x ** 2 + 1.0 / (ub - x) ** 2
            try:
                dx = -scipy.linalg.cho_solve(scipy.linalg.cho_factor(H, check_finite=False), g, check_finite=False)
            except (np.linalg.LinAlgError, ValueError):
                return _result(x, tied)
            dec = -float(g @ dx)
            if not np.isfinite(dec) or dec / 2 <= CENTRED:
                break
            # largest step inside the box, then backtracking on phi (S must stay positive definite)
            with np.errstate(divide="ignore", invalid="ignore"):
                lim = np.where(dx < 0, -x / dx, np.where(dx > 0, (ub - x) / dx, np.inf))
            s = min(1.0, 0.99 * float(lim.min()))
            f0 = phi(x, tau, L)
            while s > 1e-12:
                xn = x + s * dx
                Ln = _chol(S_of(xn))
                if Ln is not None and phi(xn, tau, Ln) <= f0 - 0.25 * s * dec:
                    break
                s *= 0.5
            else:
                return _result(x, tied)
            x, L = xn, Ln
        if nu / tau <= accuracy or steps >= MAX_NEWTON:
            return _result(x, tied)
        tau *= GROWTH


def _result(x, tied):
    return (float(x[0]), x[1:].copy()) if tied else (0.0, x.copy())
