"""A problem's terms as the certificates see them: their dual pieces folded into one summary."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field
from dataclasses import fields as dataclass_fields
from typing import Any

import numpy as np

from ..errors import InputError, NotCertifiableError
from ..linalg import symmetrize
from ..protocols import CertifiableTerm, DualPiece, missing_members

__all__ = ["DualSummary", "dual_summary"]


@dataclass
class DualSummary:
    r"""A problem's terms as the certificates see them (from each term's :meth:`dual_piece`):
    the objective is :math:`\langle P, M\rangle + \tfrac{\lambda}{2}\|M\|_F^2 + c + \sum` losses.

    Attributes
    ----------
    P : (d, d) ndarray
        Sum of the linear parts.
    lam : float
        Sum of the strong-convexity constants.
    constant : float
    losses : dict
        Loss name -> list of ``(term, DualPiece)``.
    """

    P: np.ndarray
    lam: float = 0.0
    constant: float = 0.0
    losses: dict = field(default_factory=dict)
    #: the names of the :class:`~metricopt.protocols.DualPiece` fields some term set away from their defaults: a
    #: certifier must read every one of them (:func:`metricopt.certify.register_certifier`, ``reads``)
    fields: set = field(default_factory=set)
    #: the terms without a dual piece (a certifier reading ``"generic"`` bounds them from their CVXPY expressions)
    generic: list = field(default_factory=list)

    def loss(self, name: str) -> tuple[Any, Any]:
        """The first ``(term, piece)`` of loss ``name``.

        Parameters
        ----------
        name : str
            The loss name a dual piece declares (``DualPiece.loss``, e.g. ``"triplet_hinge"``).

        Returns
        -------
        tuple
            ``(term, piece)``, or ``(None, None)`` when no term has that loss.
        """
        found = self.losses.get(name, [])
        return found[0] if found else (None, None)


def _is_default(value, f) -> bool:
    """Whether a dual piece's field ``f`` holds its declared default (a field without one never does)."""
    if f.default is MISSING:
        return False
    if f.default is None or value is None:
        return value is f.default
    return bool(np.all(np.asarray(value) == f.default))


def dual_summary(problem: Any) -> DualSummary:
    r"""Fold the problem's terms' dual pieces into a :class:`DualSummary`.

    The objective is read as :math:`\langle P, M\rangle + \tfrac{\lambda}{2}\|M\|_F^2 + c + \sum` losses,
    with ``P``, :math:`\lambda` and ``c`` the sums of the pieces' ``linear``, ``strong_convexity`` and
    ``constant`` fields. A term without a dual piece is listed in ``generic`` (and ``"generic"`` in ``fields``):
    only a certifier that reads it may certify the problem.

    Parameters
    ----------
    problem : Problem
        The problem whose ``terms`` are folded (its ``d`` gives the shape of ``P``).

    Returns
    -------
    DualSummary
        The folded linear part (symmetrized), strong convexity, constant and losses.

    Raises
    ------
    NotCertifiableError
        When a term is no :class:`~metricopt.protocols.CertifiableTerm` at all (no ``dual_piece``).
    InputError
        When a term's ``dual_piece`` returns something other than a
        :class:`~metricopt.protocols.DualPiece` or ``None``.
    """
    d = problem.d
    out = DualSummary(P=np.zeros((d, d)))
    for term in problem.terms:
        if not isinstance(term, CertifiableTerm):
            missing = ", ".join(missing_members(term, CertifiableTerm))
            raise NotCertifiableError(
                f"the term {term!r} of {problem.method} is not certifiable: it lacks {missing} "
                "(metricopt.protocols.CertifiableTerm), so no certificate can read it. Derive it from "
                "metricopt.terms.Term (dual_piece None: bounded from its CVXPY expression where possible) or give it "
                "a dual_piece returning a metricopt.protocols.DualPiece.")
        piece = term.dual_piece(problem)
        if piece is None:
            # certified through its CVXPY expression by a certifier that reads "generic" (metricopt.certify.generic)
            out.generic.append(term)
            out.fields.add("generic")
            continue
        if not isinstance(piece, DualPiece):
            raise InputError(f"{type(term).__name__}.dual_piece must return a metricopt.protocols.DualPiece or None; "
                             f"got {type(piece).__name__}.")
        out.fields |= {f.name for f in dataclass_fields(piece) if not _is_default(getattr(piece, f.name), f)}
        if piece.linear is not None:
            out.P = out.P + np.asarray(piece.linear, dtype=np.float64)
        out.lam += float(piece.strong_convexity)
        out.constant += float(piece.constant)
        if piece.is_loss:
            out.losses.setdefault(piece.loss, []).append((term, piece))
    out.P = symmetrize(out.P)
    return out
