"""The feasible sets the JAX solvers move on, and the one JAX PSD projection.

A solver iterates on one square matrix ``Z`` and projects it with :meth:`Parametrization.project`;
:meth:`Parametrization.unpack` maps ``Z`` to the problem's variables ``V`` (a dict: ``V["M"]``,
and ``V["b"]`` for POLA) and :meth:`Parametrization.pack_grad` maps the terms' gradients back
(the chain rule). Three geometries cover the problems:

``"psd"`` (LMNN)
    ``Z = M``, feasible set ``{M PSD}``; **preconditioned** (the default of the smoothing
    solvers): ``M = T Z T`` with ``T = (P / mean eig P)^{-1/2}`` for the problem's linear part
    ``P`` (LMNN's pull matrix ``(1 - mu) sum C_ij``, plus a trace term's ``lam I``; by default only
    when ``cond P > PRECONDITION_ABOVE``), so that the
    linear part becomes isotropic in ``Z``: the same problem in the data whitened by the pull
    (``x -> T x``), and ``Z PSD`` exactly when ``M PSD``. It only changes the solver's coordinates
    (objective, certificates and results are in ``M``). Ill-conditioned features need it: 300
    points of breast_cancer (``cond P = 7.8e3``) end ``iteration_limit`` after 20,000 FISTA
    iterations without it and certify 1e-6 in 2,160 with it. Eigenvalues of ``P`` below
    ``PRECONDITION_FLOOR`` times their mean are raised to it (``P`` singular: directions no pull
    spans are left unscaled rather than blown up).
``"budget"`` (MMC)
    ``M = T Z T^T`` with ``T = S^{-1/2}`` for the similar-pair scatter ``S`` (or the problem's own
    ``budget_whitening()``: MMC's ``T`` with ``T^T S T = I`` on the data's range, for a scatter singular
    there but bounded, e.g. a constant or duplicated column, or ill-conditioned), so that the
    budget ``<S, M> <= 1`` becomes ``trace(Z) <= 1``: the feasible set
    ``{Z PSD, trace Z <= 1}`` has an exact projection (the eigenvalues projected onto
    ``{lambda >= 0, sum lambda <= 1}``), where Xing et al. (NIPS 2002) alternate
    projections onto the budget and the PSD cone. Diagonal MMC: ``Z`` diagonal,
    ``T = diag(S)^{-1/2}``, the same map applied to the diagonal.
``"threshold"`` (POLA)
    ``Z = blockdiag(M, b - 1)`` of size ``d + 1``: ``Z PSD`` is exactly
    ``M PSD, b >= 1`` (Shalev-Shwartz et al., ICML 2004, the set ``C^b``).
``"factor"`` (LMNN-R; any problem after ``problem.factored(r)``; NCA)
    ``Z = L``, a rectangular ``r x d`` matrix, unconstrained, ``M = L^T L``; the point holds both
    ``V["M"]`` and ``V["L"]`` (a term may read either: NCA's softmax is cheaper in ``L``), the
    gradient is ``2 L dM + dL`` (chain rule, ``dM`` symmetric). Diagonal: ``Z`` is the row ``a``
    (``1 x d``) of ``L = diag(a)``, ``M = diag(a^2)``, gradient ``2 a * diag(dM) + diag(dL)``. Not
    convex: the loop stops at stationary points.

:class:`Setup` reads the problem's declared :class:`metricopt.protocols.Geometry`, never its class.

``unpack`` uses only slicing and matrix products, so it works on numpy arrays too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InputError
from ...protocols import BudgetProblem, GeometryKind, JaxTerm
from .prox import declares_indicator


def _clip_spectrum(w, trace_bound=None):
    """Project eigenvalues ``w`` onto ``{lambda >= 0}`` or, with a bound ``tau``, onto
    ``{lambda >= 0, sum lambda <= tau}`` (sort-based simplex projection when the clipped
    sum exceeds ``tau``: ``lambda = [w - theta]_+`` with ``sum = tau``)."""
    import jax.numpy as jnp

    clipped = jnp.maximum(w, 0.0)
    if trace_bound is None:
        return clipped
    u = jnp.sort(w)[::-1]
    css = jnp.cumsum(u)
    j = jnp.arange(1, w.shape[0] + 1, dtype=w.dtype)
    rho = jnp.max(jnp.where(u - (css - trace_bound) / j > 0, j, 1.0))
    theta = (jnp.take(css, rho.astype(jnp.int32) - 1) - trace_bound) / rho
    return jnp.where(jnp.sum(clipped) <= trace_bound, clipped, jnp.maximum(w - theta, 0.0))


def project_psd(S: Any, trace_bound: float | None = None, diagonal: bool = False) -> Any:
    r"""Frobenius projection onto ``{Z PSD}`` (or ``{Z PSD, trace Z <= trace_bound}``):
    ``eigh`` of the symmetric part and its eigenvalues projected by :func:`_clip_spectrum`.
    With ``diagonal=True`` the same map is applied to the diagonal (the projection onto
    non-negative diagonal matrices). The JAX backend's only PSD projection (the numpy one
    is :func:`metricopt.linalg.project_psd`).

    With :math:`\tfrac12(S + S^T) = V \operatorname{diag}(w) V^T`, the projection is
    :math:`V \operatorname{diag}(\lambda) V^T` with :math:`\lambda = [w]_+` or, with a bound :math:`\tau` that
    :math:`[w]_+` exceeds, :math:`\lambda = [w - \theta]_+` with :math:`\theta` such that :math:`\sum \lambda = \tau`
    (the Euclidean projection of the spectrum onto :math:`\{\lambda \ge 0, \sum \lambda \le \tau\}`). For the
    PSD cone alone this is Higham's nearest PSD matrix in the Frobenius norm (*Linear Algebra Appl.* 103, 1988).

    Parameters
    ----------
    S : jax.Array
        A square matrix (its symmetric part is projected).
    trace_bound : float or None, optional
        The bound ``tau`` on the trace (``None``: the PSD cone alone).
    diagonal : bool, optional
        Project the diagonal only (``S`` is taken as diagonal).

    Returns
    -------
    jax.Array
        The projection, symmetric.
    """
    import jax.numpy as jnp

    if diagonal:
        return jnp.diag(_clip_spectrum(jnp.diag(S), trace_bound))
    S = 0.5 * (S + S.T)
    w, V = jnp.linalg.eigh(S)
    Z = (V * _clip_spectrum(w, trace_bound)) @ V.T
    return 0.5 * (Z + Z.T)


@dataclass(frozen=True)
class Parametrization:
    """The JAX solvers' parametrization of a problem's feasible set: how the solver's matrix ``Z`` maps to the
    problem's variables (``unpack``), the gradients back (``pack_grad``), and the projection onto ``Z``'s set
    (``project``). Built by :class:`Setup` from the problem's declared :class:`metricopt.protocols.Geometry` (what
    the set is) plus the backend's choices (preconditioning: ``scaled``); named apart from it because it is how
    the solver moves on that set, not the set. Static and hashable: an argument of the jitted loop. Dynamic
    arrays (``T``) travel in ``gdata``."""

    kind: str = "psd"
    diagonal: bool = False
    #: psd only: ``M = T Z T`` (a preconditioner ``T`` in ``gdata``)
    scaled: bool = False

    def unpack(self, Z: Any, gdata: dict) -> dict:
        """The problem's variables at the solver's ``Z`` (slicing and matrix products only: numpy or JAX arrays).

        Parameters
        ----------
        Z : array
            The solver's matrix.
        gdata : dict
            The geometry's arrays (``T`` for the scaled and budget geometries).

        Returns
        -------
        dict
            ``{"M": M}``; POLA adds ``"b"``, a factor ``"L"`` (module docstring for each map).
        """
        if self.kind == "factor":
            if self.diagonal:
                a = Z[0]
                L = a[:, None] * np.eye(a.shape[0])  # diag(a), with numpy or JAX arrays alike
                return {"M": L * a[None, :], "L": L}
            return {"M": Z.T @ Z, "L": Z}
        if self.kind == "budget":
            T = gdata["T"]
            return {"M": T @ Z @ T.T}
        if self.scaled:
            T = gdata["T"]
            return {"M": T @ Z @ T}
        if self.kind == "threshold":
            return {"M": Z[:-1, :-1], "b": Z[-1, -1] + 1.0}
        return {"M": Z}

    def pack_grad(self, grads: dict, Z: Any, gdata: dict) -> Any:
        """The gradient in ``Z`` from the terms' gradients in the problem's variables (the chain rule of
        :meth:`unpack`; module docstring).

        Parameters
        ----------
        grads : dict
            Gradients with respect to ``"M"`` (and ``"b"``, ``"L"``), as :meth:`unpack` names the variables.
        Z : jax.Array
            The solver's matrix.
        gdata : dict
            The geometry's arrays.

        Returns
        -------
        jax.Array
            The gradient, of ``Z``'s shape.
        """
        import jax.numpy as jnp

        if self.kind == "factor":
            d = Z.shape[1]
            GM = grads.get("M", jnp.zeros((d, d), Z.dtype))
            GL = grads.get("L")
            if self.diagonal:
                G = 2.0 * Z[0] * jnp.diagonal(GM)
                return (G if GL is None else G + jnp.diagonal(GL))[None, :]
            G = 2.0 * Z @ (0.5 * (GM + GM.T))
            return G if GL is None else G + GL
        GM = grads.get("M", jnp.zeros_like(Z if self.kind != "threshold" else Z[:-1, :-1]))
        if self.kind == "budget":
            T = gdata["T"]
            G = T.T @ GM @ T  # MMC's whitener need not be symmetric
            return jnp.diag(jnp.diag(G)) if self.diagonal else G
        if self.scaled:
            T = gdata["T"]
            G = T @ GM @ T
            return jnp.diag(jnp.diag(G)) if self.diagonal else G
        if self.kind == "threshold":
            G = jnp.zeros_like(Z).at[:-1, :-1].set(GM)
            return G.at[-1, -1].set(grads.get("b", jnp.zeros((), Z.dtype)))
        return GM

    def project(self, Z: Any) -> Any:
        """The Frobenius projection onto ``Z``'s feasible set (:func:`project_psd`; identity for a factor).

        Parameters
        ----------
        Z : jax.Array
            The solver's matrix.

        Returns
        -------
        jax.Array
            The projection: ``{Z PSD}``, ``{Z PSD, trace Z <= 1}`` (budget) or ``{M PSD, b >= 1}`` (threshold).
        """
        import jax.numpy as jnp

        if self.kind == "factor":
            return Z
        if self.kind == "budget":
            return project_psd(Z, trace_bound=1.0, diagonal=self.diagonal)
        if self.kind == "threshold":
            P = jnp.zeros_like(Z).at[:-1, :-1].set(project_psd(Z[:-1, :-1]))
            return P.at[-1, -1].set(jnp.maximum(Z[-1, -1], 0.0))
        return project_psd(Z)


def accepts(problem: Any) -> tuple[bool, str]:
    """``(True, "")`` when the JAX backend solves ``problem``, else ``(False, reason)``: read from its
    declared geometry and terms.

    Parameters
    ----------
    problem : Problem
        The declarative problem.

    Returns
    -------
    accepted : bool
        Whether every term has a JAX piece and the geometry and constraint terms are ones the backend handles.
    reason : str
        Why not (empty when accepted).
    """
    geo = problem.geometry
    name = type(problem).__name__
    if not problem.terms:
        return False, (f"backend='jax' solves problems whose terms all have a JAX piece; got {name}, which has no "
                       "objective terms. Use backend='cvxpy'.")
    if geo.kind is GeometryKind.PSD and (geo.diagonal or problem.constraints or problem.extra_variables):
        return False, "backend='jax' handles unconstrained LMNN-type problems over a full PSD M only."
    bad = [t for t in problem.terms if not (isinstance(t, JaxTerm) and t.has_jax)]
    if bad:
        return False, f"backend='jax' has no JAX piece for the term(s) {bad}; use backend='cvxpy'."
    constraints = [t for t in problem.terms if declares_indicator(t)]
    if constraints and geo.kind is not GeometryKind.PSD:
        return False, (f"backend='jax' enforces the constraint term(s) {constraints} by projection within the PSD "
                       f"cone of a full metric M; {name} has the geometry '{geo.describe()}'. Use backend='cvxpy'.")
    return True, ""


class Setup:
    """A problem as the JAX backend sees it: its geometry (from ``problem.geometry``), the geometry's
    data, and the maps between points ``V`` (numpy) and the solver's ``Z``."""

    def __init__(self, problem, precondition=False):
        ok, reason = accepts(problem)
        if not ok:
            raise InputError(reason)
        self.problem = problem
        self.declared = geo = problem.geometry
        self.gdata = {}
        scaled = False
        if precondition and geo.kind is GeometryKind.PSD and not geo.diagonal:
            T = pull_preconditioner(problem, min_condition=PRECONDITION_ABOVE if precondition == "auto" else 1.0)
            if T is not None:
                self.gdata = {"T": T[0], "Tinv": T[1]}
                scaled = True
        if geo.kind is GeometryKind.BUDGET:
            self.gdata = _budget_whitening(problem, geo)
        self.geometry = Parametrization(geo.kind.value, geo.diagonal, scaled)

    @property
    def factor(self):
        """Whether the solver moves a rectangular factor ``L`` (non-convex)."""
        return self.declared.kind is GeometryKind.FACTOR

    def to_point(self, Z: Any) -> dict:
        """``V`` (numpy float64) from the solver's ``Z`` (for a factor, ``V["L"]`` too).

        Parameters
        ----------
        Z : array_like
            The solver's matrix.

        Returns
        -------
        dict
            The point: ``"M"`` symmetrised, ``"L"`` for a factor, ``"b"`` (a float) for POLA.
        """
        Z = np.asarray(Z, dtype=np.float64)
        V = self.geometry.unpack(Z, self.gdata)
        V = {k: (0.5 * (v + v.T) if k == "M" else np.asarray(v, dtype=np.float64) if k == "L" else float(v))
             for k, v in V.items()}
        if self.declared.diagonal and self.declared.kind in (GeometryKind.BUDGET, GeometryKind.FACTOR):
            V["M"] = np.diag(np.diag(V["M"]))
        return V

    def from_point(self, V: dict) -> np.ndarray:
        """The solver's ``Z`` (numpy) for a point ``V``; for MMC the metric is first scaled onto
        the budget ``<S, M> = 1`` (MMC's objective grows with the scale of ``M``); for a factor, ``V["L"]``.

        Parameters
        ----------
        V : dict
            The point: ``"M"`` (and the threshold variable for POLA, ``"L"`` for a factor).

        Returns
        -------
        numpy.ndarray
            The solver's matrix ``Z``.

        Raises
        ------
        InputError
            For MMC, when ``<S, M> <= 0``.
        """
        kind = self.declared.kind
        if kind is GeometryKind.FACTOR:
            L = np.asarray(V["L"], dtype=np.float64)
            return np.diag(L)[None, :].copy() if self.declared.diagonal and L.ndim == 2 and L.shape[0] > 1 else L
        M = np.asarray(V["M"], dtype=np.float64)
        if kind is GeometryKind.BUDGET:
            budget = float(np.sum(self.declared.budget * M))
            if budget <= 0:
                raise InputError("init must have a positive similar-pair budget <S, M> for MMC.")
            Z = self.gdata["Tinv"] @ (M / budget) @ self.gdata["Tinv"].T
            return np.diag(np.diag(Z)) if self.declared.diagonal else 0.5 * (Z + Z.T)
        if self.geometry.scaled:
            Z = self.gdata["Tinv"] @ M @ self.gdata["Tinv"]
            return 0.5 * (Z + Z.T)
        if kind is GeometryKind.THRESHOLD:
            Z = np.zeros((M.shape[0] + 1,) * 2)
            Z[:-1, :-1] = M
            Z[-1, -1] = float(V.get(self.declared.threshold, 1.0)) - 1.0
            return Z
        return M

    def initial_point(self) -> np.ndarray:
        """The identity metric (MMC: scaled onto the budget; POLA: ``b = 1``; a factor: the top
        principal directions of the data, ``L = U_r^T``).

        Returns
        -------
        numpy.ndarray
            The solver's starting ``Z``.
        """
        if self.factor:
            if self.declared.diagonal:
                return np.ones((1, self.problem.d))
            X = self.problem.X
            Xc = X - X.mean(axis=0)
            w, U = np.linalg.eigh(Xc.T @ Xc)
            return U[:, np.argsort(w)[::-1][: self.declared.rank]].T.copy()
        return self.from_point({"M": np.eye(self.problem.d), "b": 1.0})


#: eigenvalues of the linear part below this fraction of their mean are raised to it (see the "psd" geometry)
PRECONDITION_FLOOR = 1e-6


#: ``precondition="auto"`` preconditions when the linear part's condition number exceeds this: on
#: well-conditioned problems it changed little (digits PCA-30, cond 12: 9.5 s either way to 1e-3) and
#: could slow the end-game (multi-metric iris, cond 105: 1e-5 not reached in 20,000 iterations with it,
#: 2,600 without)
PRECONDITION_ABOVE = 1e3


def pull_preconditioner(problem: Any, min_condition: float = 1.0) -> tuple[np.ndarray, np.ndarray] | None:
    """``(T, T^{-1})`` with ``T = (P / mean eig P)^{-1/2}`` for the linear part ``P`` of ``problem``'s
    terms (their declared dual pieces), or ``None`` when there is none to use (no linear part, a term
    without a dual piece, ``P`` not positive semidefinite) or ``P``'s condition number is at most
    ``min_condition``.

    Parameters
    ----------
    problem : Problem
        The declarative problem (its terms' dual pieces, :func:`metricopt.certify.dual.dual_summary`).
    min_condition : float, optional
        Precondition only when the condition number of ``P`` exceeds this.

    Returns
    -------
    tuple of numpy.ndarray or None
        ``(T, T^{-1})`` (eigenvalues of ``P / mean eig P`` raised to ``PRECONDITION_FLOOR`` first), or ``None``.
    """
    from ...certify.dual import dual_summary
    from ...errors import NotCertifiableError

    try:
        P = dual_summary(problem).P
    except (NotCertifiableError, InputError):
        return None
    w, U = np.linalg.eigh(P)
    mean = float(np.mean(w))
    if not np.all(np.isfinite(w)) or mean <= 0 or w[0] < -1e-9 * mean:
        return None
    if w[-1] <= min_condition * max(w[0], 0.0):
        return None
    w = np.maximum(w / mean, PRECONDITION_FLOOR)
    return (U * w ** -0.5) @ U.T, (U * w ** 0.5) @ U.T


def _budget_whitening(problem, geo):
    """``{"T": T, "Tinv": T^+}`` (both ``d x d``) with ``M = T Z T^T`` mapping ``{Z PSD, trace Z <= 1}`` onto the
    budget set: the problem's own ``budget_whitening()`` where it declares one (MMC: ``T^T S T = I`` on the data's
    range, which handles a similar scatter that is singular there but bounded, and an ill-conditioned one; the
    ``d x r`` whitener is padded with zero columns, so ``Z`` keeps the shape ``d x d`` and its last ``d - r`` rows and
    columns stay 0), else ``S^{-1/2}`` (diagonal: ``diag(S)^{-1/2}``, features with ``S_jj = 0`` weighted 0: the
    problem, having been constructed, is bounded, so no dissimilar pair differs along them)."""
    S = geo.budget
    d = S.shape[0]
    pair = problem.budget_whitening() if isinstance(problem, BudgetProblem) and not geo.diagonal else None
    if pair is not None:
        T, Tinv = (np.asarray(a, dtype=np.float64) for a in pair)
        r = T.shape[1]
        Td, Tinvd = np.zeros((d, d)), np.zeros((d, d))
        Td[:, :r], Tinvd[:r] = T, Tinv
        return {"T": Td, "Tinv": Tinvd}
    if geo.diagonal:
        s = np.diag(S).copy()
        live = s > 0
        if not live.any():
            raise InputError(_singular_budget_message(problem))
        t = np.zeros(d)
        t[live] = s[live] ** -0.5
        return {"T": np.diag(t), "Tinv": np.diag(np.sqrt(np.maximum(s, 0.0)))}
    w, U = np.linalg.eigh(S)
    if w[0] <= 1e-12 * max(w[-1], 1e-300):
        raise InputError(_singular_budget_message(problem))
    return {"T": (U * w ** -0.5) @ U.T, "Tinv": (U * w ** 0.5) @ U.T}


def _singular_budget_message(problem):
    return (
        "the similar-pair scatter S is singular: MMC's objective is unbounded along directions no similar pair "
        f"spans (d = {problem.d}, {len(problem.similar)} similar pairs). Reduce the dimension (e.g. PCA) or add "
        "similar pairs."
    )
