"""The declarative problem: data, constraint structure, hyperparameters and a sum of terms.

A problem says *what* is minimised; it holds no solver loop and imports no backend.
Backends compile it (:func:`metricopt.solve`, or its alias ``problem.solve``) and
:func:`metricopt.certify` bounds its optimum; both read only the problem's declarations
(:mod:`metricopt.protocols`): its :attr:`Problem.geometry`, :attr:`Problem.is_convex` and
its terms' pieces.
Every problem is written as a minimisation over a PSD matrix ``M`` (and possibly
extra scalar variables, e.g. POLA's threshold ``b``)::

    minimise    sum_k term_k(M, ...)
    subject to  M PSD,  constraint_c(M, ...) for every constraint c.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike

from .._validation import as_real_array, check_scale, check_X
from ..errors import InputError
from ..linalg import factor, pair_rows, psd_defect, symmetrize
from ..protocols import Geometry, GeometryKind

#: actions of the layers above (``solve``, ``certify``, ``to_cvxpy``), registered by :mod:`metricopt.solving`
#: when it is imported, so that ``problem.solve(...)`` works while this layer imports no backend
#: (see :func:`register_action`)
_ACTIONS: dict[str, Callable[..., Any]] = {}


def register_action(name: str, function: Callable[..., Any]) -> None:
    """Make ``function(problem, ...)`` available as the problem method ``name`` (used by
    :mod:`metricopt.solving` for ``solve``, ``certify`` and ``to_cvxpy``).

    Parameters
    ----------
    name : str
        The method name (``"solve"``, ``"certify"``, ``"to_cvxpy"``).
    function : callable
        ``function(problem, ...)``.
    """
    _ACTIONS[name] = function


def _action(name):
    if name not in _ACTIONS:  # ``import metricopt`` is lazy: load the layer that registers the actions on first use
        importlib.import_module("metricopt.solving")
    return _ACTIONS[name]


class Constraint:
    """A constraint of a problem, beyond ``M`` PSD: a CVXPY form and a float64 violation."""

    def cvxpy(self, problem: Any, V: Mapping[str, Any]) -> list:  # pragma: no cover - abstract
        """Its CVXPY constraints over the variables ``V``.

        Parameters
        ----------
        problem : Problem
            The problem the constraint belongs to.
        V : dict
            The CVXPY variables by name: ``V["M"]`` the metric, ``V["Mvec"]`` its row-major vectorisation,
            ``V["b"]`` where the problem has a threshold (and the exact backend's scaling entries).

        Returns
        -------
        list
            CVXPY constraints.

        Raises
        ------
        NotImplementedError
            In the base class (abstract).
        """
        raise NotImplementedError

    def violation(self, problem: Any, V: Mapping[str, Any]) -> float:  # pragma: no cover - abstract
        """Largest violation at a numpy point (0 when satisfied).

        Parameters
        ----------
        problem : Problem
            The problem the constraint belongs to.
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        float
            The largest violation.

        Raises
        ------
        NotImplementedError
            In the base class (abstract).
        """
        raise NotImplementedError


class Problem:
    """Base class of declarative metric-learning problems.

    Subclasses set ``self.terms`` (objective terms), ``self.constraints`` and,
    where the problem has variables beyond ``M``, ``extra_variables``.
    """

    method = "problem"
    reference = ""
    diagonal = False
    extra_variables: tuple = ()
    #: the points' labels, or ``None`` (a problem built from pairs alone); subclasses with labels set them
    y: np.ndarray | None = None
    #: per-point (anchor) weights, or ``None``: unweighted (weighted LMNN sets them)
    sample_weight: np.ndarray | None = None
    #: whether the JAX backend's online solver (``solver="online"``) applies: POLA's online algorithm
    online_solvable = False
    #: the exact backend solves for ``var_scale * M`` and minimises ``objective / obj_scale``
    #: (pure rescalings that keep the conic solver's numbers of order one)
    var_scale = 1.0
    obj_scale = 1.0
    #: factor bringing distances inside conic constraints (e.g. MMC's square roots) to order one
    #: (applied by the exact backend for Clarabel)
    cone_scale = 1.0
    #: solver the exact backend uses when none is named
    default_solver = "SCS"
    #: :meth:`coordinate_scale` leaves the coordinates as they are while every feature's spread lies within
    #: this factor of 1 (2**3: SCS already stalls on LMNN with every feature at 1e-3)
    COORDINATE_SCALE_WITHIN = 2.0**3

    def __init__(self, X):
        self.X = check_scale(check_X(X))
        self.terms = []
        self.constraints = []

    # ------------------------------------------------------------------ shape
    @property
    def n(self) -> int:
        """The number of points."""
        return self.X.shape[0]

    @property
    def d(self) -> int:
        """The number of features."""
        return self.X.shape[1]

    @property
    def X_lifted(self) -> np.ndarray:
        """The points whose pair differences the metric acts on: ``X`` itself (multi-metric LMNN lifts them,
        one copy per metric)."""
        return self.X

    #: rows of ``L`` when the problem is the factor form ``M = L^T L`` (see :meth:`factored`)
    _factor_rank: int | None = None

    @property
    def geometry(self) -> Geometry:
        """The feasible set of the variables (:class:`metricopt.protocols.Geometry`): ``M`` PSD
        (diagonal where the problem says so) unless a subclass declares a budget, a threshold or
        blocks (:meth:`_geometry`); a rectangular factor ``L`` after :meth:`factored`."""
        if self._factor_rank is not None:
            return Geometry(GeometryKind.FACTOR, rank=self._factor_rank)
        return self._geometry()

    def _geometry(self) -> Geometry:
        return Geometry(GeometryKind.PSD, diagonal=bool(self.diagonal))

    @property
    def variables(self) -> tuple:
        """Names of the variables: ``M`` (or ``L`` for a factor geometry) and the extra ones."""
        return ("M", *self.extra_variables)

    @property
    def is_convex(self) -> bool:
        """True when every term is convex and the geometry is a convex set (constraints here are
        always convex); a factor geometry (``M = L^T L``, ``L`` rectangular) is not."""
        return self.geometry.convex and all(t.convex for t in self.terms)

    def factored(self, rank: int) -> "Problem":
        """The same objective over ``M = L^T L`` with a rectangular ``L`` of ``rank`` rows: a
        non-convex problem with a factor geometry (LMNN-R; Weinberger & Saul, JMLR 2009, Sec. 5.4).
        Shares the data and terms of ``self``; solved on the JAX backend, reported ``stationary``.

        Parameters
        ----------
        rank : int
            The number of rows of ``L``, between 1 and ``d``.

        Returns
        -------
        Problem
            A shallow copy with a factor geometry.

        Raises
        ------
        InputError
            For a constrained, diagonal or non-PSD problem, or a rank outside ``[1, d]``.
        """
        if self.diagonal or self.extra_variables or self.constraints or self.geometry.kind is not GeometryKind.PSD:
            raise InputError(f"a factor (low-rank L) form is defined for unconstrained problems over a full PSD M; "
                             f"{self.method} has the geometry '{self.geometry.describe()}'.")
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 1 <= int(rank) <= self.d:
            raise InputError(f"the rank of L must be an integer between 1 and d={self.d}; got {rank!r}.")
        low = copy.copy(self)
        low._factor_rank = int(rank)
        return low

    def coordinate_scale(self) -> np.ndarray:
        r"""Per-coordinate powers of two :math:`c` for the exact backend, which solves for :math:`M'` with
        :math:`M = \operatorname{diag}(c)\, M' \operatorname{diag}(c) / \text{var\_scale}`.

        :math:`d_M(a, b) = (c \circ (x_a - x_b))^\top M' (c \circ (x_a - x_b))`: in :math:`M'` every feature has
        unit spread, so a feature at 1e-12 of the others (or all of them at 1e-6) neither leaves the conic
        solver with coefficients of 1e-24 nor with an optimum of 1e24. Powers of two make the change of
        variables exact in floating point (the compiled program is the problem itself, not a rounded copy),
        and :math:`M' \succeq 0 \iff M \succeq 0`. Each :math:`c_j` is :math:`2^{-\operatorname{round}(\log_2
        \sigma_j)}`, :math:`\sigma_j` the standard deviation of feature :math:`j` (1 for a constant feature).
        All ones (no change) while every :math:`\sigma_j` lies within :data:`COORDINATE_SCALE_WITHIN` of 1:
        well-scaled data is compiled exactly as written.

        Returns
        -------
        ndarray of shape (d,)
        """
        X = getattr(self, "X", None)
        ones = np.ones(self.d)
        if X is None or X.ndim != 2 or X.shape[1] != self.d or X.shape[0] < 2:
            return ones
        sigma = np.std(X, axis=0)
        live = sigma > 0
        if not live.any():
            return ones
        if np.all((sigma[live] <= self.COORDINATE_SCALE_WITHIN) & (sigma[live] >= 1 / self.COORDINATE_SCALE_WITHIN)):
            return ones
        c = ones.copy()
        c[live] = np.exp2(-np.round(np.log2(sigma[live])))
        return c

    def variable_basis(self) -> np.ndarray | None:
        r"""A ``(d, r)`` matrix :math:`T` for the exact backend to solve over :math:`M = T Z T^\top`,
        :math:`Z \succeq 0` (``r x r``), or ``None`` (the default: it solves for ``M`` itself, rescaled by
        :meth:`coordinate_scale`). A problem declares one when ``M``'s optimum has entries that cancel in every
        distance (MMC with correlated features: :meth:`metricopt.MMCProblem.variable_basis`); the columns of
        ``T`` must span every direction the problem's data can use, so that nothing is lost.

        Returns
        -------
        (d, r) ndarray or None
            The basis :math:`T`, or ``None``.
        """
        return None

    # ---------------------------------------------------------- evaluation
    def check_metric(self, M: Any, name: str = "M", psd_tol: float = 1e-8) -> np.ndarray:
        """Return ``M`` symmetrised as float64 after checking its shape and PSD-ness.

        Parameters
        ----------
        M : (d, d) array_like
            The metric to check.
        name : str, default "M"
            Its name in error messages.
        psd_tol : float, default 1e-8
            Relative tolerance on negative eigenvalues (:func:`metricopt.linalg.psd_defect`).

        Returns
        -------
        (d, d) ndarray
            ``M`` symmetrised, as float64.

        Raises
        ------
        InputError
            When ``M`` has the wrong shape, NaN or infinite entries, is not PSD within ``psd_tol``, or is not
            diagonal for a diagonal problem.
        """
        M = as_real_array(M, name, f"a finite ({self.d}, {self.d}) array of numbers")
        if M.shape != (self.d, self.d):
            raise InputError(f"{name} must have shape ({self.d}, {self.d}) for data with {self.d} features; got {M.shape}.")
        if not np.all(np.isfinite(M)):
            raise InputError(f"{name} contains NaN or infinite entries.")
        M = symmetrize(M)
        lo, failed = psd_defect(M, psd_tol)
        if failed:
            raise InputError(
                f"{name} is not positive semidefinite (smallest eigenvalue {lo:.3g}); project it first with "
                "metricopt.linalg.project_psd."
            )
        if self.diagonal and np.any(np.abs(M - np.diag(np.diag(M))) > 0):
            raise InputError(f"{name} must be diagonal for the diagonal variant of {self.method}.")
        return M

    def factor(self, M: ArrayLike) -> np.ndarray:
        """``L`` with ``L^T L = M`` (negative eigenvalues clipped).

        Parameters
        ----------
        M : (d, d) array_like
            The metric.

        Returns
        -------
        (d, d) ndarray
            ``L``.
        """
        return factor(M)

    def pair_rows(self, a: ArrayLike, b: ArrayLike) -> np.ndarray:
        """Rows ``r`` with ``r @ vec = d_M(x_a, x_b)`` for the backend's vectorised variable.

        Parameters
        ----------
        a : (m,) array_like of int
            Indices of the pairs' first points.
        b : (m,) array_like of int
            Indices of the pairs' second points.

        Returns
        -------
        ndarray
            One row per pair: ``(m, d*d)`` (the row-major ``vec(M)``), or ``(m, d)`` for a diagonal problem (the
            squared differences).
        """
        if self.diagonal:
            D = self.X[np.asarray(a)] - self.X[np.asarray(b)]
            return D * D
        return pair_rows(self.X, a, b)

    def pair_distances(self, a: ArrayLike, b: ArrayLike, M: ArrayLike, chunk: int = 200_000) -> np.ndarray:
        r"""``d_M(x_a, x_b) = (x_a - x_b)^T M (x_a - x_b)`` from explicit differences.

        With more pairs than points, through the eigendecomposition of the symmetric part,
        :math:`M = U_+ \Lambda_+ U_+^\top - U_- \Lambda_- U_-^\top`: the points are mapped once,
        :math:`Z_\pm = X U_\pm \Lambda_\pm^{1/2}` (``n d^2`` flops), and
        :math:`d = \lVert z^+_a - z^+_b\rVert^2 - \lVert z^-_a - z^-_b\rVert^2` from the mapped differences
        (``T d`` flops instead of ``T d^2``: 0.05 s against 0.44 s for digits' 789,000 pairs). Both forms
        take differences before any product (no cancellation of large terms, unlike ``K_aa + K_bb - 2 K_ab``);
        the eigensolver's backward error, of order ``d eps ||M||``, is that of the explicit product.

        Parameters
        ----------
        a : (m,) array_like of int
            Indices of the pairs' first points.
        b : (m,) array_like of int
            Indices of the pairs' second points.
        M : (d, d) array_like
            The metric.
        chunk : int, default 200000
            Pairs per block (bounds the memory).

        Returns
        -------
        (m,) ndarray
            One distance per pair.
        """
        a = np.asarray(a)
        b = np.asarray(b)
        out = np.empty(a.shape[0])
        n, d = self.X.shape
        if a.shape[0] > n + d:
            w, U = np.linalg.eigh(symmetrize(np.asarray(M, dtype=np.float64)))
            Zp = self.X @ (U[:, w > 0] * np.sqrt(w[w > 0]))
            Zm = self.X @ (U[:, w < 0] * np.sqrt(-w[w < 0]))
            for s in range(0, a.shape[0], chunk):
                aa, bb = a[s:s + chunk], b[s:s + chunk]
                Dp, Dm = Zp[aa] - Zp[bb], Zm[aa] - Zm[bb]
                out[s:s + chunk] = np.einsum("md,md->m", Dp, Dp) - np.einsum("md,md->m", Dm, Dm)
            return out
        for s in range(0, a.shape[0], chunk):
            D = self.X[a[s:s + chunk]] - self.X[b[s:s + chunk]]
            out[s:s + chunk] = np.einsum("md,md->m", D @ M, D)
        return out

    def point(self, M: ArrayLike, **variables: float) -> dict:
        """A numpy point ``V`` of the problem (checked ``M`` plus extra variables).

        Parameters
        ----------
        M : (d, d) array_like
            The metric (checked: :meth:`check_metric`).
        **variables
            Values of the extra variables by name (e.g. POLA's ``b``); omitted or ``None``: chosen for ``M``
            (:meth:`best_extra`).

        Returns
        -------
        dict
            ``{"M": M, **extra variables}``.

        Raises
        ------
        InputError
            For an invalid ``M`` or a variable the problem does not have.
        """
        V: dict[str, Any] = {"M": self.check_metric(M)}
        for name in self.extra_variables:
            if variables.get(name) is None:
                V[name] = self.best_extra(V["M"], name)
            else:
                V[name] = float(variables[name])
        unknown = set(variables) - set(self.extra_variables)
        if unknown:
            raise InputError(
                f"{self.method} has no variable(s) {sorted(unknown)}; its variables are M"
                + "".join(f", {v}" for v in self.extra_variables) + "."
            )
        return V

    def best_extra(self, M: np.ndarray, name: str) -> float:  # pragma: no cover - overridden where needed
        """The best value of the extra variable ``name`` for ``M`` (overridden by problems with extra variables).

        Parameters
        ----------
        M : (d, d) ndarray
            The metric.
        name : str
            The variable's name.

        Returns
        -------
        float
            The value.

        Raises
        ------
        InputError
            In the base class: the value must be passed.
        """
        raise InputError(f"pass the value of variable {name!r}.")

    def objective(self, M: ArrayLike, **variables: float) -> float:
        """The objective at ``M`` (and the extra variables), in float64, over all data.

        Parameters
        ----------
        M : (d, d) array_like
            The metric.
        **variables
            Values of the extra variables by name (e.g. POLA's ``b``); omitted or ``None``: chosen for ``M``
            (:meth:`best_extra`).

        Returns
        -------
        float
            The sum of the terms' exact values.

        Raises
        ------
        InputError
            For an invalid ``M`` or an unknown variable (:meth:`point`).
        """
        V = self.point(M, **variables)
        return self._objective(V)

    def _objective(self, V):
        return float(sum(t.value(self, V) for t in self.terms))

    def max_violation(self, V: Mapping[str, Any]) -> float:
        """Largest violation of the problem's constraints (beyond PSD) at ``V``.

        Parameters
        ----------
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        float
            The largest violation (0 when feasible).
        """
        return max([0.0] + [float(c.violation(self, V)) for c in self.constraints])

    def repair(self, V: Mapping[str, Any]) -> dict:
        """Map a point that violates the constraints slightly onto the feasible set.

        The exact backend applies it to the solver's answer so that the returned
        metric is feasible and its objective a true upper bound. Default: no change.

        Parameters
        ----------
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        dict
            The point on the feasible set (``V`` itself by default).
        """
        return V  # type: ignore[return-value]

    def initial_point(self) -> dict:
        """The starting point: ``M = I`` and every extra variable 1.

        Returns
        -------
        dict
            The point.
        """
        V: dict[str, Any] = {"M": np.eye(self.d)}
        for name in self.extra_variables:
            V[name] = 1.0
        return V

    # ------------------------------------------------------------- actions
    def solve(self, backend: str = "cvxpy", **options: Any) -> Any:
        """Alias of :func:`metricopt.solve` ``(self, backend, **options)``: returns a
        :class:`~metricopt.solution.Solution`.

        Parameters
        ----------
        backend : {"cvxpy", "jax"}
            ``"cvxpy"``: the exact conic program solved by SCS or Clarabel; see
            :func:`metricopt.backends.cvxpy_backend.solve` for its options.
            ``"jax"``: jitted first-order solvers in float64, stopped at a certified relative
            gap (convex problems) or at a stationary point (factor geometry); see
            :func:`metricopt.backends.jax.solve`.
        **options
            The backend's options.

        Returns
        -------
        Solution
            The solution.
        """
        return _action("solve")(self, backend=backend, **options)

    def certify(self, M: Any, **kwargs: Any) -> Any:
        """Alias of :func:`metricopt.certify` ``(self, M, ...)``.

        Parameters
        ----------
        M : (d, d) array_like or Solution
            The candidate.
        **kwargs
            The options of :func:`metricopt.certify` (``tol``, ``psd_tol``, ``feas_tol``, ``dual``, ``L``, extra
            variables).

        Returns
        -------
        Certificate
            The certificate.
        """
        return _action("certify")(self, M, **kwargs)

    def to_cvxpy(self, working_set: Any = None) -> Any:
        """The exact program as a ``cvxpy.Problem`` (for teaching and inspection).

        Returns ``(cvxpy_problem, variables)``; for LMNN, ``working_set=None`` gives
        the textbook program with one slack per triplet (every triplet).

        Parameters
        ----------
        working_set : ndarray or None
            The triplets of the program; ``None``: every triplet.

        Returns
        -------
        cvxpy_problem : cvxpy.Problem
            The program.
        variables : dict
            Its CVXPY variables by name.
        """
        return _action("to_cvxpy")(self, working_set)

    def jax_terms(self, online: bool = False) -> list:
        """The terms the JAX backend's loop minimises (default: the problem's own). ``online``:
        for an online solver that visits a loss's pairs (POLA overrides this).

        Parameters
        ----------
        online : bool, default False
            For an online solver that visits a loss's pairs.

        Returns
        -------
        list of Term
            The terms.
        """
        return list(self.terms)

    def __repr__(self):
        terms = " + ".join(t.describe() for t in self.terms)
        return f"{type(self).__name__}(n={self.n}, d={self.d}, objective={terms})"
