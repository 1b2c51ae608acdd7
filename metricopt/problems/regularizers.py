r"""Non-smooth convex regularizers of the metric ``M`` (issue 29), with their proximal maps.

Each is a :class:`~metricopt.problems.terms.Term` (value, CVXPY expression, smoothed JAX value, ``config``)
that declares **no dual piece** (:meth:`Term.dual_piece` is ``None``): until a certificate covers any convex
term from its CVXPY expression, :func:`metricopt.certify` refuses problems holding them
(:class:`~metricopt.errors.NotCertifiableError`), the exact backend marks its solutions ``uncertified`` and the
JAX backend stops at first-order optimality with the same status.

=======================  =============================================  ==========================================
term                     :math:`R(M)`                                   JAX backend
=======================  =============================================  ==========================================
:class:`OffDiagonalL1`   :math:`\lambda \sum_{i \ne j} |M_{ij}|`        prox (soft thresholding)
:class:`TraceBall`       :math:`0` if :math:`\operatorname{tr} M \le r`,  projection onto the ball :math:`\cap` PSD
                         else :math:`+\infty`                           (exact: eigenvalues onto a capped simplex)
:class:`FrobeniusNorm`   :math:`\lambda \|M\|_F` (not squared)          prox, and its exact prox with the PSD cone
:class:`RowL21`          :math:`\lambda \sum_i \|M_{i,:}\|_2`           smoothed (Moreau envelope, continuation)
=======================  =============================================  ==========================================

The proximal declarations
-------------------------
Besides the smooth JAX value of every term (``jax_value(data, V, active, smoothing)``, here the term's Moreau
envelope of width ``smoothing * data["scale"]``, used by solvers that take no proximal steps and on geometries
other than the PSD cone), a term may declare, as static methods over a symmetric JAX matrix:

``jax_prox(data, M, step)``
    :math:`\operatorname{prox}_{tR}(M) = \arg\min_Z\, t R(Z) + \tfrac12 \|Z - M\|_F^2` over symmetric ``Z``
    (``t = step``), without the feasible set;
``jax_prox_psd(data, M, step)`` (optional)
    the exact :math:`\operatorname{prox}_{tR + \iota_{\succeq 0}}(M)` where a closed form exists. The prox of a
    sum is **not** the composition of the two proxes in general; the JAX backend
    (:mod:`metricopt.backends.jax.prox`) uses this one when it is the only non-smooth term, and otherwise an
    inner dual loop that needs ``jax_prox`` only;
``jax_indicator = True``
    the term is the indicator of a closed convex set :math:`S` (value 0 on it, :math:`+\infty` off it);
    ``jax_prox_psd`` is then the Euclidean projection onto :math:`S \cap \{M \succeq 0\}`, which the JAX
    backend uses as its feasible set (every iterate lies in it, exactly in float64).

The backend reads these declarations only (never the classes). Values are exact float64 sums
(:func:`math.fsum`); ``jax`` is imported inside the JAX methods only.

References: N. Parikh & S. Boyd, *Proximal Algorithms*, Found. Trends Optim. 1(3), 2014 (Sec. 6: the proxes of
norms and of spectral functions); B. Kulis, *Metric Learning: A Survey*, 2013 (Sec. 4: sparse and low-rank
regularizers of the metric); G.-J. Qi et al., *An efficient sparse metric learning in high-dimensional space via
l1-penalized log-determinant regularization*, ICML 2009 (the off-diagonal L1 penalty); Y. Ying, K. Huang &
C. Campbell, *Sparse metric learning via smooth optimization*, NIPS 2009 (the (2,1)-norm of ``M`` for feature
selection).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._validation import check_real
from .terms import Term, register

from typing import TYPE_CHECKING

from .._lazy import lazy_module

if TYPE_CHECKING:
    import cvxpy as cp
else:
    cp = lazy_module("cvxpy")  # imported on first use: building a term's CVXPY expression

__all__ = ["OffDiagonalL1", "TraceBall", "FrobeniusNorm", "RowL21"]


# ----------------------------------------------------------------------------- shared pieces
def _metric_scale(problem) -> np.float64:
    r"""A typical size of the entries of a metric for ``problem``'s data: :math:`1 / \overline{\|x - \bar x\|^2}`
    (``M`` at this multiple of the identity puts the points at unit mean squared distance from their mean). The
    smoothing widths of the JAX values are ``smoothing`` times it, so that they follow the data's units."""
    X = np.asarray(problem.X, dtype=np.float64)
    spread = float(np.mean(np.sum((X - X.mean(axis=0)) ** 2, axis=1))) if X.size else 1.0
    return np.float64(1.0 / spread if spread > 0 and np.isfinite(spread) else 1.0)


def _abs_envelope(x, width):
    r"""The Moreau envelope of :math:`|x|` of width :math:`\mu` (the Huber function), elementwise:
    :math:`x^2 / (2\mu)` for :math:`|x| \le \mu`, :math:`|x| - \mu/2` beyond; :math:`|x|` for :math:`\mu = 0`.
    :math:`|x| - \mu/2 \le e_\mu(x) \le |x|`, and :math:`e_\mu'` is :math:`1/\mu`-Lipschitz."""
    import jax.numpy as jnp

    a = jnp.abs(x)
    safe = jnp.where(width > 0, width, 1.0)
    return jnp.where(a <= width, 0.5 * x * x / safe, a - 0.5 * width)


def _norm_envelope(sq, width):
    r"""The Moreau envelope of the Euclidean norm from the squared norms ``sq``: :math:`\|v\|^2 / (2\mu)` for
    :math:`\|v\| \le \mu`, :math:`\|v\| - \mu/2` beyond. The root is taken of ``sq`` floored at the smallest
    normal float only where it is used, so that its gradient stays finite at :math:`v = 0`."""
    import jax.numpy as jnp

    tiny = jnp.finfo(sq.dtype).tiny
    inside = sq <= width * width
    root = jnp.sqrt(jnp.where(inside, 1.0, jnp.maximum(sq, tiny)))
    safe = jnp.where(width > 0, width, 1.0)
    return jnp.where(inside, 0.5 * sq / safe, root - 0.5 * width)


def _eigh_sym(M):
    """``(w, Q)``: the eigen-decomposition of the symmetric part of ``M`` (JAX)."""
    import jax.numpy as jnp

    return jnp.linalg.eigh(0.5 * (M + M.T))


def _from_eig(w, Q):
    """``Q diag(w) Q^T``, symmetrised (JAX)."""
    Z = (Q * w) @ Q.T
    return 0.5 * (Z + Z.T)


def psd_part(M: Any) -> Any:
    r"""The Euclidean projection of a symmetric matrix onto the PSD cone, :math:`Q \max(\Lambda, 0) Q^\top`
    (JAX; Higham, *Computing a nearest symmetric positive semidefinite matrix*, Linear Algebra Appl. 103, 1988).

    Parameters
    ----------
    M : jax.Array
        A (d, d) symmetric matrix.

    Returns
    -------
    jax.Array
        Its projection onto the PSD cone.
    """
    import jax.numpy as jnp

    w, Q = _eigh_sym(M)
    return _from_eig(jnp.maximum(w, 0.0), Q)


def capped_simplex(w: Any, radius: Any) -> Any:
    r"""The Euclidean projection of a vector ``w`` onto :math:`\{\lambda \ge 0,\ \sum_k \lambda_k \le r\}` (JAX).

    If :math:`\sum_k [w_k]_+ \le r` it is :math:`[w]_+`; otherwise the constraint is tight and the projection is
    :math:`[w - \theta]_+` with the :math:`\theta > 0` that makes the sum :math:`r`: with :math:`u` the entries
    sorted decreasingly, :math:`\theta = (\sum_{k \le \rho} u_k - r)/\rho` for the largest :math:`\rho` with
    :math:`u_\rho > (\sum_{k \le \rho} u_k - r)/\rho` (Held, Wolfe & Crowder 1974; Duchi et al., ICML 2008,
    Fig. 1). The candidates :math:`\theta_\rho` satisfy the test on a prefix of :math:`\rho`, so counting them
    gives :math:`\rho`.

    Parameters
    ----------
    w : jax.Array
        The vector to project.
    radius : float
        The radius :math:`r \ge 0`.

    Returns
    -------
    jax.Array
        The projection.
    """
    import jax.numpy as jnp

    clipped = jnp.maximum(w, 0.0)
    u = -jnp.sort(-w)
    ranks = jnp.arange(1, w.shape[0] + 1, dtype=w.dtype)
    thetas = (jnp.cumsum(u) - radius) / ranks
    rho = jnp.maximum(jnp.sum(u > thetas), 1)
    theta = thetas[rho - 1]
    return jnp.where(jnp.sum(clipped) <= radius, clipped, jnp.maximum(w - theta, 0.0))


# ----------------------------------------------------------------------------- the terms
class _Penalty(Term):
    """A penalty ``lam * norm(M)`` smoothed on the JAX backend: the weight, its description and configuration."""

    jax_smoothed = True

    def __init__(self, lam: float = 1.0) -> None:
        self.lam = check_real(lam, "lam", low=0.0)

    def describe(self) -> str:
        return f"{type(self).__name__}(lam={self.lam:g})"

    def config(self) -> dict:
        return {"term": type(self).__name__, "lam": float(self.lam)}


@register
class OffDiagonalL1(_Penalty):
    r"""Off-diagonal L1 penalty :math:`R(M) = \lambda \sum_{i \ne j} |M_{ij}|` (sparse metrics: features that do
    not interact; Qi et al., ICML 2009). The diagonal is not penalised.

    Prox (declared, ``jax_prox``): on symmetric matrices, where every off-diagonal pair :math:`M_{ij} = M_{ji}`
    enters both :math:`R` and :math:`\tfrac12\|Z - M\|_F^2` twice, soft thresholding of the off-diagonal entries
    at :math:`t\lambda`, :math:`Z_{ij} = \operatorname{sign}(M_{ij}) [|M_{ij}| - t\lambda]_+` (:math:`i \ne j`),
    :math:`Z_{ii} = M_{ii}`. With the PSD cone there is no closed form: the JAX backend's inner dual loop
    combines the two (:mod:`metricopt.backends.jax.prox`). JAX value: the Huber function (the Moreau envelope of
    :math:`|x|`) of width ``smoothing * scale`` on each entry.

    Parameters
    ----------
    lam : float, >= 0
        The penalty weight :math:`\lambda`.
    """

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        M = np.asarray(V["M"], dtype=np.float64)
        off = ~np.eye(M.shape[0], dtype=bool)
        return self.lam * math.fsum(np.abs(M[off]).tolist())

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        mask = 1.0 - np.eye(problem.d)
        return self.lam * cp.sum(cp.abs(cp.multiply(mask, V["M"]))), []

    def jax_data(self, problem: Any) -> dict:
        return {"lam": np.float64(self.lam), "mask": 1.0 - np.eye(problem.d), "scale": _metric_scale(problem)}

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        import jax.numpy as jnp

        return data["lam"] * jnp.sum(data["mask"] * _abs_envelope(V["M"], smoothing * data["scale"]))

    @staticmethod
    def jax_prox(data: Any, M: Any, step: Any) -> Any:
        """Soft thresholding of the off-diagonal entries at ``step * lam`` (the diagonal kept).

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        M : jax.Array
            The (d, d) point.
        step : float
            The proximal step size.

        Returns
        -------
        jax.Array
            The proximal point.
        """
        import jax.numpy as jnp

        cut = step * data["lam"] * data["mask"]
        return jnp.sign(M) * jnp.maximum(jnp.abs(M) - cut, 0.0)



@register
class TraceBall(Term):
    r"""The constraint :math:`\operatorname{tr} M \le r`: on the PSD cone, the nuclear-norm ball of radius
    :math:`r` (a convex set of low-rank-promoting metrics; Kulis 2013, Sec. 4).

    As a term it is the set's indicator: its :meth:`value` is ``0.0`` when the float64 trace (exactly rounded,
    :func:`math.fsum` of the diagonal) is at most ``radius`` and ``+inf`` otherwise, so that an objective is
    finite exactly at the feasible metrics. Its CVXPY form is the constraint, ``(0, [trace(M) <= radius])``.

    Projection (declared, ``jax_prox_psd``, ``jax_indicator``): the Euclidean projection onto
    :math:`\{M \succeq 0,\ \operatorname{tr} M \le r\}` is :math:`Q \operatorname{diag}(\lambda^+) Q^\top`, with
    :math:`M = Q \operatorname{diag}(w) Q^\top` and :math:`\lambda^+` the projection of :math:`w` onto the capped
    simplex :math:`\{\lambda \ge 0, \sum \lambda \le r\}` (:func:`capped_simplex`; the set is unitarily invariant,
    so its projection acts on the spectrum: Lewis, *Convex analysis on the Hermitian matrices*, SIAM J. Optim.
    6(1), 1996). The result is then scaled down, when its float64 trace exceeds
    :math:`r (1 - 4 d \varepsilon)`, onto that value: every JAX iterate has a trace at most ``radius`` in float64
    (the rounding of the trace's sum is at most :math:`d \varepsilon` of it), so :meth:`value` is finite at
    every metric the backend returns. ``jax_prox`` (without the cone) moves the diagonal by the same amount.

    Parameters
    ----------
    radius : float, > 0
        The bound :math:`r` on the trace.
    """

    jax_indicator = True

    def __init__(self, radius: float = 1.0) -> None:
        self.radius = check_real(radius, "radius", low=0.0, low_open=True)

    def trace(self, M: ArrayLike) -> float:
        """The exactly rounded float64 trace of ``M``.

        Parameters
        ----------
        M : (d, d) array_like
            The matrix.

        Returns
        -------
        float
            Its trace.
        """
        return math.fsum(np.diag(np.asarray(M, dtype=np.float64)).tolist())

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        return 0.0 if self.trace(V["M"]) <= self.radius else math.inf

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        return cp.Constant(0.0), [cp.trace(V["M"]) <= self.radius]

    def repair(self, problem: Any, V: Mapping[str, Any]) -> dict:
        """``V`` with ``M`` scaled onto the ball when a solver left it slightly outside (a positive multiple of a
        PSD matrix stays PSD); the exact backend applies it to its answer.

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        dict
            The point on the feasible set (``V`` itself when it already lies there).
        """
        M = np.asarray(V["M"], dtype=np.float64)
        tr = self.trace(M)
        if tr <= self.radius:
            return V  # type: ignore[return-value]
        target = self.radius * (1.0 - 4.0 * M.shape[0] * np.finfo(np.float64).eps)
        return {**V, "M": M * (target / tr)}

    def jax_data(self, problem: Any) -> dict:
        return {"radius": np.float64(self.radius)}

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        import jax.numpy as jnp

        return jnp.where(jnp.trace(V["M"]) <= data["radius"], 0.0, jnp.inf)

    @staticmethod
    def _inside(data, Z):
        """``Z`` scaled down, where its float64 trace exceeds ``radius (1 - 4 d eps)``, onto that value."""
        import jax.numpy as jnp

        d = Z.shape[0]
        target = data["radius"] * (1.0 - 4.0 * d * jnp.finfo(Z.dtype).eps)
        tr = jnp.trace(Z)
        return jnp.where(tr > target, Z * (target / jnp.where(tr > 0, tr, 1.0)), Z)

    @staticmethod
    def jax_prox_psd(data: Any, M: Any, step: Any = None) -> Any:
        """The projection onto ``{M PSD, trace M <= radius}`` (``step`` ignored: the prox of an indicator).

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        M : jax.Array
            The (d, d) point.
        step : float or None
            The proximal step size (ignored: the prox of an indicator is the projection).

        Returns
        -------
        jax.Array
            The proximal point (PSD).
        """
        w, Q = _eigh_sym(M)
        return TraceBall._inside(data, _from_eig(capped_simplex(w, data["radius"]), Q))

    @staticmethod
    def jax_prox(data: Any, M: Any, step: Any = None) -> Any:
        """The projection onto the half-space ``{trace M <= radius}`` of symmetric matrices:
        ``M - [tr M - r]_+ I / d``.

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        M : jax.Array
            The (d, d) point.
        step : float or None
            The proximal step size (ignored: the prox of an indicator is the projection).

        Returns
        -------
        jax.Array
            The proximal point.
        """
        import jax.numpy as jnp

        d = M.shape[0]
        excess = jnp.maximum(jnp.trace(M) - data["radius"], 0.0)
        return TraceBall._inside(data, M - (excess / d) * jnp.eye(d, dtype=M.dtype))

    def describe(self) -> str:
        return f"TraceBall(radius={self.radius:g})"

    def config(self) -> dict:
        return {"term": "TraceBall", "radius": float(self.radius)}


@register
class FrobeniusNorm(_Penalty):
    r"""The Frobenius norm itself, :math:`R(M) = \lambda \|M\|_F` (not squared: unlike
    :class:`~metricopt.problems.terms.Frobenius`, non-smooth at :math:`M = 0`, so a large enough :math:`\lambda`
    makes :math:`M = 0` optimal; a group lasso over all entries).

    Prox (declared): block soft thresholding, :math:`\operatorname{prox}_{tR}(M) = \max(0, 1 - t\lambda/\|M\|_F)\,M`
    (Parikh & Boyd 2014, Sec. 6.5.1). With the PSD cone, exactly (``jax_prox_psd``):
    :math:`\operatorname{prox}_{tR + \iota_{\succeq 0}}(M) = \max(0, 1 - t\lambda/\|M_+\|_F)\,M_+` with
    :math:`M_+` the PSD part of :math:`M`. Proof: write :math:`M = M_+ - M_-` (:math:`M_\pm \succeq 0`,
    :math:`M_+ M_- = 0`); for :math:`Z = c M_+`, :math:`c > 0`, the optimality condition
    :math:`0 \in t\lambda Z/\|Z\|_F + Z - M + N_{\succeq 0}(Z)` holds with the normal vector :math:`-M_-`
    (PSD, orthogonal to :math:`Z`) exactly when :math:`c = 1 - t\lambda/\|M_+\|_F`; for
    :math:`\|M_+\|_F \le t\lambda`, :math:`Z = 0` with the subgradient :math:`M_+/(t\lambda)` and normal
    vector :math:`-M_-`. JAX value: the Moreau envelope of the norm of width ``smoothing * scale``.

    Parameters
    ----------
    lam : float, >= 0
        The penalty weight :math:`\lambda`.
    """

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        return self.lam * float(np.linalg.norm(np.asarray(V["M"], dtype=np.float64)))

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        return self.lam * cp.norm(V["M"], "fro"), []

    def jax_data(self, problem: Any) -> dict:
        return {"lam": np.float64(self.lam), "scale": _metric_scale(problem)}

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        import jax.numpy as jnp

        M = V["M"]
        return data["lam"] * _norm_envelope(jnp.sum(M * M), smoothing * data["scale"])

    @staticmethod
    def _shrink(data, M, step):
        import jax.numpy as jnp

        norm = jnp.sqrt(jnp.sum(M * M))
        return M * jnp.maximum(0.0, 1.0 - step * data["lam"] / jnp.where(norm > 0, norm, 1.0))

    @staticmethod
    def jax_prox(data: Any, M: Any, step: Any) -> Any:
        """Block soft thresholding of the whole matrix.

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        M : jax.Array
            The (d, d) point.
        step : float
            The proximal step size.

        Returns
        -------
        jax.Array
            The proximal point.
        """
        return FrobeniusNorm._shrink(data, M, step)

    @staticmethod
    def jax_prox_psd(data: Any, M: Any, step: Any) -> Any:
        """The PSD part of ``M``, block soft-thresholded (exact; see the class docstring).

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        M : jax.Array
            The (d, d) point.
        step : float
            The proximal step size.

        Returns
        -------
        jax.Array
            The proximal point (PSD).
        """
        return FrobeniusNorm._shrink(data, psd_part(M), step)



@register
class RowL21(_Penalty):
    r"""The (2,1)-norm of the metric, :math:`R(M) = \lambda \sum_i \|M_{i,:}\|_2` (a group lasso whose groups are
    the rows: on the PSD cone :math:`M_{ii} = 0` forces row :math:`i` to 0, so zero rows are features the metric
    does not use; Ying, Huang & Campbell, NIPS 2009).

    No prox is declared: on *symmetric* matrices every off-diagonal entry belongs to two groups (its row and its
    column), so the groups overlap and the prox has no closed form (row-wise block soft thresholding would break
    the symmetry). The JAX backend minimises its Moreau envelope instead, row by row of width
    :math:`\mu = ` ``smoothing * scale`` (:math:`\|v\|^2/(2\mu)` for :math:`\|v\| \le \mu`, :math:`\|v\| - \mu/2`
    beyond: within :math:`\lambda d \mu / 2` below :math:`R`), the width driven down with the hinge's
    (continuation; Nesterov, *Smooth minimization of non-smooth functions*, Math. Program. 103, 2005).

    Parameters
    ----------
    lam : float, >= 0
        The penalty weight :math:`\lambda`.
    """

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        M = np.asarray(V["M"], dtype=np.float64)
        return self.lam * math.fsum(np.linalg.norm(M, axis=1).tolist())

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        return self.lam * cp.sum(cp.norm(V["M"], 2, axis=1)), []

    def jax_data(self, problem: Any) -> dict:
        return {"lam": np.float64(self.lam), "scale": _metric_scale(problem)}

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        import jax.numpy as jnp

        M = V["M"]
        return data["lam"] * jnp.sum(_norm_envelope(jnp.sum(M * M, axis=1), smoothing * data["scale"]))

