"""The protocols every term, problem and backend follows, and the declarations the rest of metricopt reads.

metricopt's layers talk through these declarations, never through concrete classes:

* a term declares its capabilities, each a protocol of the members one layer reads: its exact float64 value
  and CVXPY form (:class:`ExactTerm`), its JAX piece (:class:`JaxTerm`, and optionally a proximal map,
  :class:`ProxTerm` / :class:`PsdProxTerm`, or a projection, :class:`IndicatorTerm`), its certificate piece
  (:class:`CertifiableTerm`: a :class:`DualPiece`, or ``None``), and for a loss with a working set
  :class:`WorkingSetLoss` (exact backend) and :class:`ActiveSetLoss` (JAX backend); :class:`TermLike` is the union
  the base class :class:`metricopt.problems.terms.Term` satisfies;
* a :class:`ProblemLike` declares its data, terms, variables, its :class:`Geometry` (the feasible set the
  variables live on) and whether it is convex; a problem family adds its capability protocol
  (:class:`TripletProblem`, :class:`PairProblem`, :class:`BudgetProblem`, :class:`LatentProblem`,
  :class:`NeighbourPredictor`);
* a :class:`Backend` declares which problems it ``accepts`` and solves them.

The backends (:mod:`metricopt.backends`) and the certificates (:mod:`metricopt.certify`, the agreement
checker included) read only members of problems and terms declared here: tests/test_architecture.py checks
it, and ``python -m mypy`` that the built-in classes satisfy the protocols
(:mod:`metricopt.methods._protocol_check`). A new term or problem plugs in by declaring them; a
certifier refuses, with :class:`~metricopt.errors.NotCertifiableError`, a term that is no
:class:`CertifiableTerm`. This module imports nothing of metricopt: it is the bottom layer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, Protocol, runtime_checkable

import numpy as np

__all__ = ["GeometryKind", "Geometry", "DualPiece", "TermLike", "ExactTerm", "JaxTerm", "ProxTerm", "PsdProxTerm",
           "IndicatorTerm", "CertifiableTerm", "WorkingSetLoss", "ActiveSetLoss", "ScalarLossTerm", "HasPairs",
           "RepairingTerm", "ProblemConstraint", "ProblemLike", "TripletProblem", "PairProblem", "BudgetProblem",
           "LatentProblem", "NeighbourPredictor", "Backend", "TERM_PROTOCOLS", "PROBLEM_PROTOCOLS",
           "protocol_members", "missing_members"]


class GeometryKind(str, enum.Enum):
    """The feasible sets a problem's metric can live on."""

    #: ``M`` positive semidefinite (LMNN and its variants)
    PSD = "psd"
    #: ``M`` PSD with a linear budget ``<S, M> <= 1`` (MMC)
    BUDGET = "budget"
    #: ``M`` PSD and a scalar threshold ``b >= 1`` (POLA)
    THRESHOLD = "threshold"
    #: a rectangular factor ``L`` (``r x d``, unconstrained) with ``M = L^T L``: non-convex (LMNN-R, NCA)
    FACTOR = "factor"


@dataclass(frozen=True, eq=False)
class Geometry:
    r"""The feasible set of a problem's variables, as a problem declares it.

    Parameters
    ----------
    kind : GeometryKind
    diagonal : bool
        ``M`` restricted to (non-negative) diagonal matrices.
    blocks : (count, size) or None
        ``M`` block-diagonal with ``count`` PSD blocks of ``size x size`` (multi-metric LMNN).
    rank : int or None
        For ``FACTOR``: the number of rows ``r`` of ``L``.
    budget : (d, d) ndarray or None
        For ``BUDGET``: the matrix ``S`` of the constraint :math:`\langle S, M\rangle \le 1`.
    threshold : str or None
        For ``THRESHOLD``: the name of the scalar variable ``b`` (constrained to ``b >= 1``).
    """

    kind: GeometryKind = GeometryKind.PSD
    diagonal: bool = False
    blocks: tuple[int, int] | None = None
    rank: int | None = None
    budget: np.ndarray | None = None
    threshold: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "kind", GeometryKind(self.kind))
        if self.kind is GeometryKind.BUDGET and self.budget is None:
            raise ValueError("a budget geometry needs its budget matrix S.")
        if self.kind is GeometryKind.THRESHOLD and self.threshold is None:
            raise ValueError("a threshold geometry needs the name of its threshold variable.")
        if self.kind is GeometryKind.FACTOR and (self.rank is None or self.rank < 1):
            raise ValueError("a factor geometry needs a positive rank r (L is r x d).")

    @property
    def convex(self) -> bool:
        """Whether the feasible set is convex (every kind but ``FACTOR``)."""
        return self.kind is not GeometryKind.FACTOR

    def describe(self) -> str:
        """A short description (messages): the kind and its qualifiers.

        Returns
        -------
        str
            E.g. ``"psd, diagonal"``.
        """
        parts = [self.kind.value]
        if self.diagonal:
            parts.append("diagonal")
        if self.blocks is not None:
            parts.append(f"{self.blocks[0]} blocks of {self.blocks[1]}")
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        return ", ".join(parts)


@dataclass(frozen=True)
class DualPiece:
    r"""How a term enters the Lagrange dual that the certificates build.

    A term whose value is, on the feasible set, exactly

    .. math::

        \langle P, M\rangle + \tfrac{\lambda}{2}\|M\|_F^2 + c

    declares ``linear = P`` (or ``None`` for 0), ``strong_convexity = lambda`` and ``constant = c``:
    the certificates fold such pieces into their closed-form inner minimisation (LMNN:
    :math:`\min_{M \succeq 0} \langle P - B, M\rangle + \tfrac{\lambda}{2}\|M\|_F^2`).

    A problem's *loss* (the term whose multipliers a certificate chooses) declares ``loss`` with
    the name of its dual structure and its ``weight``: ``"triplet_hinge"`` (LMNN's push term,
    multipliers in ``[0, weight]``), ``"pair_hinge"`` (POLA's soft margins, ``[0, C]``),
    ``"sqrt_distances"`` (MMC's objective, ``weight * sum sqrt(d_M)``) and
    ``"threshold_square"`` (``weight/2 * b^2`` on the threshold variable).
    """

    linear: np.ndarray | None = None
    strong_convexity: float = 0.0
    constant: float = 0.0
    loss: str | None = None
    weight: float = 0.0

    @property
    def is_loss(self) -> bool:
        return self.loss is not None


# ------------------------------------------------------------------ terms
# A term's capabilities, each a protocol of the members some layer reads (issue 29): the exact backend and
# every evaluation read :class:`ExactTerm`, the JAX backend :class:`JaxTerm` (and the optional proximal
# declarations), the certificates :class:`CertifiableTerm`, the working-set loops :class:`WorkingSetLoss`.
# :class:`TermLike` is their union, which :class:`metricopt.problems.terms.Term` (the base class) satisfies.


@runtime_checkable
class ExactTerm(Protocol):
    """A term's exact float64 value and its CVXPY form (what every term gives)."""

    #: whether the term is convex in the problem's variables
    convex: bool
    #: whether the exact program keeps a working set of the term's constraints (:class:`WorkingSetLoss`)
    uses_working_set: bool

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        """The exact float64 value at a numpy point ``V`` (over every triplet / pair).

        Parameters
        ----------
        problem : ProblemLike
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        float
            The term's value.
        """

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        """``(expression, constraints)`` over CVXPY variables (``ws``: the working set, if any).

        Parameters
        ----------
        problem : ProblemLike
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The CVXPY variables by name: ``V["M"]`` the metric, ``V["Mvec"]`` its row-major vectorisation,
            ``V["b"]`` where the problem has a threshold (and the exact backend's scaling entries).
        ws : ndarray or None
            The term's working set (rows of triplets or sets) when ``uses_working_set`` is true; ignored
            otherwise.

        Returns
        -------
        expression : cvxpy.Expression
            The term over the variables.
        constraints : list
            Extra constraints (e.g. on slack variables), possibly empty.
        """

    def config(self) -> dict | None:
        """JSON form for model files, or ``None`` when not storable.

        Returns
        -------
        dict or None
            ``{"term": class name, **constructor arguments}``, from which
            :func:`metricopt.problems.terms.term_from_config` rebuilds it; ``None`` for a term that holds data
            arrays.
        """

    def describe(self) -> str:
        """A short human-readable name (messages, ``repr``).

        Returns
        -------
        str
            The name.
        """


@runtime_checkable
class JaxTerm(Protocol):
    """A term's JAX piece (the JAX backend's jitted loop); ``has_jax`` says whether it is given."""

    #: whether the term provides the JAX pieces below
    has_jax: bool
    #: whether the JAX value is smoothed by the loop's width (the loop then drives the width down)
    jax_smoothed: bool

    def jax_data(self, problem: Any) -> dict:
        """The arrays the JAX value needs (dynamic inputs of the jitted loop).

        Parameters
        ----------
        problem : ProblemLike
            The problem the term belongs to (its points, labels, pairs or triplets).

        Returns
        -------
        dict
            Numpy float64 / int arrays by name.
        """

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        """The (smoothed) value alone, in pure JAX.

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        V : dict
            The point, a dict of JAX arrays (``V["M"]`` symmetric; ``V["b"]`` where the problem has a
            threshold).
        active : dict or None
            The padded active set of a working-set loss (``jax_active_set``); unused by other terms.
        smoothing : float
            The smoothing width of a non-smooth term (0: the exact value).

        Returns
        -------
        jax.Array
            The scalar value (smoothed to ``smoothing`` where the term is smoothed).
        """

    @staticmethod
    def jax_value_grad(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> tuple[Any, Any, dict]:
        """``(value, exact_value, gradients)`` at ``V`` (a dict of JAX arrays), in pure JAX.

        Parameters
        ----------
        data : dict
            The arrays of :meth:`jax_data` (as JAX arrays).
        V : dict
            The point, a dict of JAX arrays (``V["M"]`` symmetric; ``V["b"]`` where the problem has a
            threshold).
        active : dict or None
            The padded active set of a working-set loss (``jax_active_set``); unused by other terms.
        smoothing : float
            The smoothing width of a non-smooth term (0: the exact value).

        Returns
        -------
        value : jax.Array
            The (smoothed) value a solver minimises.
        exact_value : jax.Array
            The unsmoothed value.
        gradients : dict
            The gradient of ``value`` for each variable the term depends on (``"M"`` symmetric).
        """


@runtime_checkable
class ProxTerm(Protocol):
    """A non-smooth JAX term with a proximal map: FISTA takes it out of the smooth part
    (:mod:`metricopt.backends.jax.prox`; optional, a term without it is smoothed)."""

    @staticmethod
    def jax_prox(data: Any, M: Any, step: Any) -> Any:
        """The prox of ``step * R`` over symmetric matrices, in pure JAX.

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


@runtime_checkable
class PsdProxTerm(Protocol):
    """A term whose prox composed with the PSD cone has a closed form (optional, :mod:`metricopt.backends.jax.prox`)."""

    @staticmethod
    def jax_prox_psd(data: Any, M: Any, step: Any) -> Any:
        """The exact prox of ``step * R`` plus the PSD cone's indicator (an indicator term: the projection).

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


@runtime_checkable
class IndicatorTerm(Protocol):
    """A constraint term: a set's indicator, enforced by the JAX loop through its ``jax_prox_psd``
    (:class:`PsdProxTerm`), the projection onto the set intersected with the PSD cone (optional,
    :mod:`metricopt.backends.jax.prox`)."""

    #: true for a set's indicator (the loop projects instead of smoothing)
    jax_indicator: bool


@runtime_checkable
class CertifiableTerm(Protocol):
    """A term the certificates read (:func:`metricopt.certify.dual.dual_summary`)."""

    #: ``False`` when the generic certificate cannot bound the term from its CVXPY form (it compiles to
    #: exponential or power cones) and it declares no dual piece
    generic_certificate: bool

    def dual_piece(self, problem: Any) -> DualPiece | None:
        """The term's place in the certificate's dual, or ``None`` (then bounded generically, or refused).

        Parameters
        ----------
        problem : ProblemLike
            The problem the term belongs to (its points, labels, pairs or triplets).

        Returns
        -------
        DualPiece or None
            Its :class:`~metricopt.protocols.DualPiece`, or ``None``: bounded generically from its CVXPY
            expression (:mod:`metricopt.certify.generic`) where possible.
        """


@runtime_checkable
class TermLike(ExactTerm, JaxTerm, CertifiableTerm, Protocol):
    """An objective term, written once for every backend: exact, JAX and certifiable (the union of those
    capabilities, which the base class :class:`metricopt.problems.terms.Term` satisfies; see
    :mod:`metricopt.problems.terms`)."""


@runtime_checkable
class WorkingSetLoss(Protocol):
    """A loss whose exact program keeps a working set of its constraints (LMNN's triplets, the latent hinge's
    sets), grown by the exact backend's cutting-plane loop."""

    #: true: the exact backend passes the working set to ``cvxpy``
    uses_working_set: bool

    def initial_working_set(self, problem: Any, V: Mapping[str, Any]) -> np.ndarray:
        """The rows the loop starts from at the point ``V``.

        Parameters
        ----------
        problem : ProblemLike
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        ndarray
            The rows (int), one per constraint of the working set.
        """

    def violators(self, problem: Any, V: Mapping[str, Any], ws: np.ndarray, slack: float = 1e-9,
                  max_add: int | None = None) -> tuple[np.ndarray, float]:
        """``(new rows, largest violation)``: rows outside ``ws`` violated at ``V``.

        Parameters
        ----------
        problem : ProblemLike
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.
        ws : ndarray
            The current working set (rows).
        slack : float
            Violations up to this are ignored.
        max_add : int or None
            At most this many new rows (the most violated); ``None``: all.

        Returns
        -------
        new : ndarray
            The violated rows outside ``ws`` (empty when the largest violation is at most ``slack``).
        worst : float
            The largest violation outside ``ws`` (``-inf`` when none).
        """

    def all_triplets(self, problem: Any) -> np.ndarray:
        """Every row of the full (textbook) program.

        Parameters
        ----------
        problem : ProblemLike
            The problem the term belongs to (its points, labels, pairs or triplets).

        Returns
        -------
        ndarray
            The rows (int).
        """


@runtime_checkable
class ActiveSetLoss(Protocol):
    """A working-set loss's JAX piece: the JAX backend evaluates it over a padded active set it rebuilds at
    every re-check (the triplet losses)."""

    def jax_active_set(self, problem: Any, M: np.ndarray, margin: float, min_capacity: int = 256, multiple: int = 1,
                       limit: int | None = None, min_pair_capacity: int = 256,
                       form: str = "auto") -> tuple[dict, int, float, np.ndarray] | None:
        """``(active, size, exact value over every row, hinge arguments)``, or ``None`` above ``limit``.

        Parameters
        ----------
        problem : ProblemLike
            The problem the term belongs to (its points, labels, pairs or triplets).
        M : (d, d) ndarray
            The metric.
        margin : float
            Rows with hinge argument above ``-margin`` are active.
        min_capacity : int, default 256
            The smallest padded capacity.
        multiple : int, default 1
            The capacity is rounded up to a multiple of this.
        limit : int or None
            Give up (``None``) above this many active rows.
        min_pair_capacity : int, default 256
            The smallest padded capacity of the set's distinct pairs, where the piece keeps them.
        form : str, default "auto"
            The piece's form (the term's choice with ``"auto"``; ``"gather"``: arrays whose shapes depend on the
            capacity alone, for a batch of problems).

        Returns
        -------
        tuple or None
            ``(active, size, exact_value, h)``: the padded active set, its size, the term's exact value over
            every row and the padded hinge arguments; ``None`` above ``limit``.
        """


@runtime_checkable
class ScalarLossTerm(Protocol):
    """A triplet loss term of dual piece ``"triplet_loss"``: the scalar loss it applies."""

    #: the scalar loss (a :class:`metricopt.losses.ScalarLoss`: value, derivative, conjugate, dual_upper, ...)
    loss: Any


@runtime_checkable
class HasPairs(Protocol):
    """A term or constraint over pairs of points (MMC's roots, POLA's margins)."""

    #: the pairs ``(a, b)``, an ``(m, 2)`` int array
    pairs: np.ndarray


@runtime_checkable
class RepairingTerm(Protocol):
    """A term that maps a solver's point slightly outside its set back onto it (optional: the exact backend
    applies it to the solver's answer, e.g. a trace ball)."""

    def repair(self, problem: Any, V: Mapping[str, Any]) -> dict:
        """The point ``V`` moved onto the term's feasible set.

        Parameters
        ----------
        problem : ProblemLike
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        dict
            The point on the feasible set.
        """


@runtime_checkable
class ProblemConstraint(Protocol):
    """A constraint of a problem beyond ``M`` PSD (:class:`metricopt.problems.base.Constraint`)."""

    def cvxpy(self, problem: Any, V: Mapping[str, Any]) -> list:
        """Its CVXPY constraints over the variables ``V``.

        Parameters
        ----------
        problem : ProblemLike
            The problem the constraint belongs to.
        V : dict
            The CVXPY variables by name: ``V["M"]`` the metric, ``V["Mvec"]`` its row-major vectorisation,
            ``V["b"]`` where the problem has a threshold (and the exact backend's scaling entries).

        Returns
        -------
        list
            CVXPY constraints.
        """

    def violation(self, problem: Any, V: Mapping[str, Any]) -> float:
        """Its largest violation at a numpy point (0 when satisfied).

        Parameters
        ----------
        problem : ProblemLike
            The problem the constraint belongs to.
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        float
            The largest violation.
        """


# ------------------------------------------------------------------ problems
# What the backends, the certificates and the terms read of a problem: :class:`ProblemLike` (every problem; the base
# class :class:`metricopt.problems.base.Problem` gives each member a default) and the capability protocols of the
# problem families. tests/test_architecture.py checks that every member read in ``metricopt/backends`` and
# ``metricopt/certify`` is declared here.


@runtime_checkable
class ProblemLike(Protocol):
    """A declarative problem: data, terms, constraints and the declarations backends read."""

    @property
    def method(self) -> str:
        """The method's name (messages)."""

    @property
    def default_solver(self) -> str:
        """The exact backend's conic solver when none is named ("SCS" or "CLARABEL")."""

    @property
    def terms(self) -> list:
        """The objective's terms (:class:`TermLike`)."""

    @property
    def constraints(self) -> list:
        """The constraints beyond ``M`` PSD (:class:`ProblemConstraint`)."""

    @property
    def extra_variables(self) -> tuple:
        """Names of the scalar variables beyond ``M`` (POLA: ``("b",)``)."""

    @property
    def X(self) -> np.ndarray:
        """The data, ``(n, d)`` float64."""

    @property
    def y(self) -> np.ndarray | None:
        """The points' labels, or ``None`` (pair-constrained problems built without labels)."""

    @property
    def sample_weight(self) -> np.ndarray | None:
        """Per-point (anchor) weights, or ``None``: unweighted (every problem but weighted LMNN)."""

    @property
    def var_scale(self) -> Any:
        """The exact backend solves for ``var_scale * M`` (a scalar, or one per coordinate for a diagonal ``M``)."""

    @property
    def obj_scale(self) -> float:
        """The exact backend minimises ``objective / obj_scale``."""

    @property
    def cone_scale(self) -> float:
        """Factor bringing the distances inside conic constraints to order one (the exact backend, Clarabel)."""

    @property
    def online_solvable(self) -> bool:
        """Whether the JAX backend's online solver applies (POLA)."""

    @property
    def n(self) -> int:
        """The number of points."""

    @property
    def d(self) -> int:
        """The size of the metric ``M`` (``d x d``)."""

    @property
    def geometry(self) -> Geometry:
        """The feasible set of the variables."""

    @property
    def is_convex(self) -> bool:
        """Whether every term and the geometry are convex."""

    @property
    def X_lifted(self) -> np.ndarray:
        """The points whose pair differences the metric acts on (``X``; multi-metric LMNN: one copy per metric)."""

    def objective(self, M: np.ndarray, **variables: float) -> float:
        """The exact objective in float64 (``M`` checked).

        Parameters
        ----------
        M : (d, d) ndarray
            The metric.
        **variables
            The extra variables by name.

        Returns
        -------
        float
            The objective.
        """

    def _objective(self, V: Mapping[str, Any]) -> float:
        """The exact objective at a point ``V`` already checked (the sum of the terms' values)."""

    def point(self, M: np.ndarray, **variables: float) -> dict:
        """A checked numpy point ``V`` (extra variables chosen optimally where not given).

        Parameters
        ----------
        M : (d, d) ndarray
            The metric.
        **variables
            The extra variables by name.

        Returns
        -------
        dict
            ``{"M": M, **extra variables}``.
        """

    def check_metric(self, M: Any, name: str = "M", psd_tol: float = 1e-8) -> np.ndarray:
        """``M`` symmetrised as float64 after checking its shape and PSD-ness.

        Parameters
        ----------
        M : (d, d) array_like
            The metric to check.
        name : str, default "M"
            Its name in messages.
        psd_tol : float, default 1e-8
            Relative tolerance on negative eigenvalues.

        Returns
        -------
        (d, d) ndarray
            The checked metric.
        """

    def best_extra(self, M: np.ndarray, name: str) -> float:
        """The optimal value of the extra variable ``name`` at ``M``.

        Parameters
        ----------
        M : (d, d) ndarray
            The metric.
        name : str
            The variable's name.

        Returns
        -------
        float
            The optimal value.
        """

    def initial_point(self) -> dict:
        """The default start ``V`` (``M = I``, extra variables 1).

        Returns
        -------
        dict
            The point.
        """

    def repair(self, V: Mapping[str, Any]) -> dict:
        """A point slightly outside the constraints moved onto the feasible set.

        Parameters
        ----------
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        dict
            The point on the feasible set.
        """

    def max_violation(self, V: Mapping[str, Any]) -> float:
        """The largest violation of the constraints at ``V``.

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

    def pair_rows(self, a: Any, b: Any) -> np.ndarray:
        """Rows ``r`` with ``r @ vec(M) = d_M(x_a, x_b)`` (the exact backend's vectorised variable).

        Parameters
        ----------
        a : array_like of int
            The pairs' first points.
        b : array_like of int
            Their second points.

        Returns
        -------
        ndarray
            One row per pair.
        """

    def pair_distances(self, a: Any, b: Any, M: np.ndarray) -> np.ndarray:
        """``d_M(x_a, x_b)`` for each pair, in float64.

        Parameters
        ----------
        a : array_like of int
            The pairs' first points.
        b : array_like of int
            Their second points.
        M : (d, d) ndarray
            The metric.

        Returns
        -------
        (m,) ndarray
            One distance per pair.
        """

    def coordinate_scale(self) -> np.ndarray:
        """Per-coordinate powers of two the exact backend rescales ``M`` by.

        Returns
        -------
        (d,) ndarray
            The powers of two.
        """

    def variable_basis(self) -> np.ndarray | None:
        """A basis ``T`` for the exact backend's ``M = T Z T^T``, or ``None``.

        Returns
        -------
        (d, r) ndarray or None
            The basis, or ``None``.
        """

    def factored(self, rank: int) -> ProblemLike:
        """The same objective over ``M = L^T L`` with an ``(rank, d)`` factor ``L`` (non-convex).

        Parameters
        ----------
        rank : int
            The number of rows of ``L``.

        Returns
        -------
        ProblemLike
            The factored problem.
        """

    def jax_terms(self, online: bool = False) -> list:
        """The terms the JAX backend's loop minimises (``online``: for an online solver).

        Parameters
        ----------
        online : bool, default False
            For an online solver.

        Returns
        -------
        list of TermLike
            The terms.
        """


@runtime_checkable
class TripletProblem(ProblemLike, Protocol):
    """A problem over LMNN triplets ``(i, j, l)``: anchor ``i``, target neighbour ``j``, impostor ``l``
    (LMNN and its variants); what the triplet losses, the JAX start and the triplet certificates read."""

    @property
    def target_neighbors(self) -> np.ndarray:
        """The ``(n, k)`` target neighbours of every point."""

    @property
    def clusters(self) -> np.ndarray | None:
        """The cluster of every point (multi-metric LMNN), or ``None``: one metric."""

    @property
    def n_triplets(self) -> int:
        """The number of triplets of the full problem."""

    @property
    def searches(self) -> int:
        """The searches of all triplets :meth:`find_triplets` has made so far (calls its kept search answered
        not counted): what a solver's time estimates follow."""

    def lift(self, a: Any, b: Any) -> tuple[Any, Any]:
        """Rows of :attr:`X_lifted` whose difference is the pair ``(a, b)``.

        Parameters
        ----------
        a : array_like of int
            The pairs' first points.
        b : array_like of int
            Their second points.

        Returns
        -------
        tuple
            The rows ``(a', b')``.
        """

    def transformed(self, M: np.ndarray) -> np.ndarray:
        """The points ``X L^T`` with ``M = L^T L`` (multi-metric: a stack, one per metric).

        Parameters
        ----------
        M : (d, d) ndarray
            The metric.

        Returns
        -------
        ndarray
            The mapped points.
        """

    def find_triplets(self, M: np.ndarray, margin: float = 0.0, limit: int | None = None,
                      reuse_within: float = 0.0, at_least: float | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """``(i, j, l, h)`` of every triplet with hinge argument ``h > -margin`` (``None`` above ``limit``).

        Parameters
        ----------
        M : (d, d) ndarray
            The metric.
        margin : float, default 0.0
            The margin.
        limit : int or None
            Give up (``None``) above this many triplets.
        reuse_within : float, default 0.0
            Relative distance within which a kept search may be reused.
        at_least : float, optional
            A kept search with a margin narrower than ``margin`` but at least this one may serve (for callers
            that use the triplets as a selection only).

        Returns
        -------
        tuple or None
            ``(i, j, l, h)``, or ``None`` above ``limit``.
        """

    def anchor_weights(self, i: Any) -> np.ndarray | None:
        """The weights of the anchors ``i``, or ``None`` when unweighted.

        Parameters
        ----------
        i : array_like of int
            The anchors.

        Returns
        -------
        ndarray or None
            The weights.
        """

    def hinge_sum(self, M: np.ndarray) -> float:
        """The (weighted) sum of the hinges over every triplet, exactly rounded.

        Parameters
        ----------
        M : (d, d) ndarray
            The metric.

        Returns
        -------
        float
            The sum.
        """

    def loss_sum(self, M: np.ndarray, loss: Any = None) -> float:
        """The (weighted) sum of a scalar loss over every triplet, exactly rounded.

        Parameters
        ----------
        M : (d, d) ndarray
            The metric.
        loss : ScalarLoss, optional
            The loss (default: the problem's).

        Returns
        -------
        float
            The sum.
        """

    def triplet_rows(self, i: Any, j: Any, l: Any) -> np.ndarray:
        """Rows ``A_t`` with ``A_t . vec(M) = d_M(x_i, x_l) - d_M(x_i, x_j)``.

        Parameters
        ----------
        i : array_like of int
            The anchors.
        j : array_like of int
            The target neighbours.
        l : array_like of int
            The impostors.

        Returns
        -------
        ndarray
            One row per triplet.
        """

    def triplet_factors(self, i: Any, j: Any, l: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(U, V)``: rows ``x_i - x_l`` and ``x_i - x_j`` (lifted), ``A_t = vec(u u^T - v v^T)``.

        Parameters
        ----------
        i : array_like of int
            The anchors.
        j : array_like of int
            The target neighbours.
        l : array_like of int
            The impostors.

        Returns
        -------
        tuple of ndarray
            ``(U, V)``.
        """

    def triplet_scatter(self, i: Any, j: Any, l: Any, w: Any = None) -> np.ndarray:
        """``sum_t w_t (C_il - C_ij)`` as a ``(d, d)`` matrix.

        Parameters
        ----------
        i : array_like of int
            The anchors.
        j : array_like of int
            The target neighbours.
        l : array_like of int
            The impostors.
        w : array_like or None
            The weights (``None``: all 1).

        Returns
        -------
        (d, d) ndarray
            The weighted sum.
        """


@runtime_checkable
class PairProblem(ProblemLike, Protocol):
    """A problem over labelled pairs (POLA: a threshold ``b`` and pair margins)."""

    @property
    def pairs(self) -> np.ndarray:
        """The pairs ``(a, b)``, an ``(m, 2)`` int array."""

    @property
    def pair_labels(self) -> np.ndarray:
        """``+1`` (similar) or ``-1`` (dissimilar) for every pair."""



@runtime_checkable
class BudgetProblem(ProblemLike, Protocol):
    """A problem over a similar-pair budget ``<S, M> <= 1`` (MMC)."""

    @property
    def similar(self) -> np.ndarray:
        """The similar pairs, an ``(m, 2)`` int array."""

    def budget_whitening(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(T, T^+)`` mapping ``{Z PSD, trace Z <= 1}`` onto the budget set, or ``None`` (``S^{-1/2}`` serves).

        Returns
        -------
        tuple or None
            ``(T, T^+)``, or ``None``.
        """


@runtime_checkable
class LatentProblem(ProblemLike, Protocol):
    """The convex step of neighbourhood gerrymandering: a structural hinge over latent sets (the latent
    certificate)."""

    @property
    def h_star(self) -> np.ndarray:
        """The correct (latent) set of every point, ``(n, k)``."""

    @property
    def rows(self) -> np.ndarray | None:
        """The rows ``(i, h)`` of the exact backend's working set, or ``None``."""

    @property
    def pull(self) -> np.ndarray:
        """The correct sets' pull ``P* = C sum_i K_{i h*_i}``."""

    def latent_at(self, M: np.ndarray) -> Any:
        """The loss-augmented inference at ``M`` (its ``h_hat``).

        Parameters
        ----------
        M : (d, d) ndarray
            The metric.

        Returns
        -------
        object
            The inference result.
        """

    def set_losses(self, anchors: Any, members: Any) -> np.ndarray:
        """``Lambda(y_i, y_h)`` for rows ``(i, h)``.

        Parameters
        ----------
        anchors : array_like of int
            The points ``i`` of the rows.
        members : (m, k) array_like of int
            Their latent sets ``h``.

        Returns
        -------
        (m,) ndarray
            One loss per row.
        """

    def set_scatter(self, anchors: Any, members: Any, w: Any) -> np.ndarray:
        """``sum_r w_r K_{i_r h_r}`` as a ``(d, d)`` matrix.

        Parameters
        ----------
        anchors : array_like of int
            The points ``i`` of the rows.
        members : (m, k) array_like of int
            Their latent sets ``h``.
        w : (m,) array_like
            The weights.

        Returns
        -------
        (d, d) ndarray
            The weighted sum.
        """

    def row_values(self, rows: np.ndarray, M: np.ndarray) -> np.ndarray:
        """``Lambda_r - <K_r, M>`` for rows ``(i, h)``.

        Parameters
        ----------
        rows : (m, 1 + k) ndarray
            Rows ``(i, h)``.
        M : (d, d) ndarray
            The metric.

        Returns
        -------
        (m,) ndarray
            One value per row.
        """


@runtime_checkable
class NeighbourPredictor(Protocol):
    """A problem with its own ``k``-NN rule (multi-metric LMNN: cluster-dependent distances)."""

    def knn_predict(self, X_test: Any, M: np.ndarray, k: int | None = None) -> np.ndarray:
        """``k``-NN predictions for ``X_test`` under ``M``.

        Parameters
        ----------
        X_test : (m, d) array_like
            The test points.
        M : (d, d) ndarray
            The metric.
        k : int, optional
            The number of neighbours.

        Returns
        -------
        (m,) ndarray
            The predicted labels.
        """

    def knn_loo_predict(self, M: np.ndarray, k: int | None = None) -> np.ndarray:
        """Leave-one-out ``k``-NN predictions on the training points under ``M``.

        Parameters
        ----------
        M : (d, d) ndarray
            The metric.
        k : int, optional
            The number of neighbours.

        Returns
        -------
        (n,) ndarray
            The predicted labels.
        """


#: every protocol of the terms, the problems and the backends (tests/test_architecture.py reads their members)
TERM_PROTOCOLS = (ExactTerm, JaxTerm, ProxTerm, PsdProxTerm, IndicatorTerm, CertifiableTerm, TermLike, WorkingSetLoss,
                  ActiveSetLoss, ScalarLossTerm, HasPairs, RepairingTerm, ProblemConstraint)
PROBLEM_PROTOCOLS = (ProblemLike, TripletProblem, PairProblem, BudgetProblem, LatentProblem, NeighbourPredictor)


def protocol_members(protocol: type) -> frozenset[str]:
    """The names a protocol declares (its own and those of the protocols it extends).

    Parameters
    ----------
    protocol : type
        A :class:`typing.Protocol` class.

    Returns
    -------
    frozenset of str
        The member names.
    """
    names: set[str] = set()
    for base in protocol.__mro__:
        if base in (Protocol, Generic, object) or not getattr(base, "_is_protocol", False):
            continue
        for name in (*vars(base), *vars(base).get("__annotations__", {})):
            if not name.startswith(("__", "_abc_")) and name not in ("_is_protocol", "_is_runtime_protocol"):
                names.add(name)
    return frozenset(names)


def missing_members(obj: Any, protocol: type) -> list[str]:
    """The members of ``protocol`` that ``obj`` lacks (sorted; empty when it has them all).

    Parameters
    ----------
    obj : object
        The object to check.
    protocol : type
        A :class:`typing.Protocol` class.

    Returns
    -------
    list of str
        The missing member names.
    """
    return sorted(name for name in protocol_members(protocol) if not hasattr(obj, name))


@runtime_checkable
class Backend(Protocol):
    """A backend: ``accepts(problem)`` says whether (and why not) it solves a problem; ``solve`` does."""

    name: str
    solve: Callable[..., Any]

    def accepts(self, problem: Any) -> tuple[bool, str]:
        """``(True, "")`` or ``(False, reason)``.

        Parameters
        ----------
        problem : ProblemLike
            The problem.

        Returns
        -------
        tuple
            ``(True, "")`` when the backend solves it, else ``(False, reason)``.
        """
