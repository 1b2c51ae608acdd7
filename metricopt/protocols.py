"""The protocols every term, problem and backend follows, and the declarations the rest of metricopt reads.

metricopt's layers talk through these declarations, never through concrete classes:

* a :class:`Term` carries its exact float64 value, its CVXPY form, its JAX value (the gradient
  by autodiff unless the term gives it) and its certificate piece (:class:`DualPiece`), or says
  it has none (``None``);
* a :class:`Problem` declares its variables, its :class:`Geometry` (the feasible set the
  variables live on) and whether it is convex;
* a :class:`Backend` declares which problems it ``accepts`` and solves them.

The certificate (:mod:`metricopt.certify`), the JAX backend, model files and the agreement
checker read ``problem.geometry``, ``problem.is_convex`` and each term's ``dual_piece``; a new
term or problem plugs in by declaring them. This module imports nothing of metricopt: it is the
bottom layer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

import numpy as np

__all__ = ["GeometryKind", "Geometry", "DualPiece", "Term", "Problem", "Backend"]


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


@runtime_checkable
class Term(Protocol):
    """An objective term, written once for every backend (see :mod:`metricopt.problems.terms`)."""

    convex: bool
    uses_working_set: bool
    has_jax: bool

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        """The exact float64 value at a numpy point ``V`` (over every triplet / pair)."""

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        """``(expression, constraints)`` over CVXPY variables."""

    def jax_data(self, problem: Any) -> dict:
        """The arrays the JAX value needs (dynamic inputs of the jitted loop)."""

    def dual_piece(self, problem: Any) -> DualPiece | None:
        """The term's place in the certificate's dual, or ``None`` when it has none."""

    def config(self) -> dict | None:
        """JSON form for model files, or ``None`` when not storable."""


@runtime_checkable
class Problem(Protocol):
    """A declarative problem: data, terms, constraints and the declarations backends read."""

    method: str
    terms: list
    constraints: list
    extra_variables: tuple

    @property
    def geometry(self) -> Geometry:
        """The feasible set of the variables."""

    @property
    def is_convex(self) -> bool:
        """Whether every term and the geometry are convex."""

    def objective(self, M: np.ndarray, **variables: float) -> float:
        """The exact objective in float64."""


@runtime_checkable
class Backend(Protocol):
    """A backend: ``accepts(problem)`` says whether (and why not) it solves a problem; ``solve`` does."""

    name: str
    solve: Callable[..., Any]

    def accepts(self, problem: Any) -> tuple[bool, str]:
        """``(True, "")`` or ``(False, reason)``."""
