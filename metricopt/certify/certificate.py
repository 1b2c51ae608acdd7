"""The :class:`Certificate` returned by :func:`metricopt.certify`."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np


class Verdict(str, enum.Enum):
    """What a certificate says of its candidate. A ``str`` enum: its value is the text stored in
    model files and printed in reports (``Verdict.OPTIMAL == "optimal within tol"``)."""

    OPTIMAL = "optimal within tol"
    SUBOPTIMAL = "suboptimal"
    INFEASIBLE = "infeasible"

    def __str__(self) -> str:
        return self.value


OPTIMAL = Verdict.OPTIMAL
SUBOPTIMAL = Verdict.SUBOPTIMAL
INFEASIBLE = Verdict.INFEASIBLE


@dataclass
class Certificate:
    """A duality-gap certificate for a candidate point of a convex problem.

    Attributes
    ----------
    upper : float
        The objective at the (feasible, PSD-projected) candidate, evaluated by
        metricopt in float64 over all triplets / pairs: an upper bound on the optimum.
    lower : float
        The dual objective at a dual-feasible point: a lower bound on the optimum.
    gap, rel_gap : float
        ``upper - lower`` and ``gap / max(|upper|, 1e-12)``.
    verdict : Verdict
        ``Verdict.OPTIMAL`` ("optimal within tol": ``rel_gap <= tol``), ``Verdict.SUBOPTIMAL`` or
        ``Verdict.INFEASIBLE`` (a string given here, e.g. read from a file, is converted).
    tol : float
    problem : str
        The problem's method name.
    details : dict
        How the bound was built (dual support sizes, projections, scalings).
    """

    upper: float
    lower: float
    verdict: Verdict
    tol: float
    problem: str
    details: dict = field(default_factory=dict)

    def __post_init__(self):
        self.verdict = Verdict(self.verdict)

    @classmethod
    def infeasible(cls, tol: float, problem: str, reason: str) -> "Certificate":
        """The certificate of a candidate outside the feasible set (no bound: gap infinite).

        Parameters
        ----------
        tol : float
            The relative gap tolerance the certificate was asked for.
        problem : str
            The problem's method name.
        reason : str
            Why the candidate is infeasible (stored in ``details["reason"]``).

        Returns
        -------
        Certificate
            ``upper = inf``, ``lower = -inf``, verdict ``Verdict.INFEASIBLE``.
        """
        return cls(float("inf"), -float("inf"), Verdict.INFEASIBLE, tol, problem, {"reason": reason})

    @classmethod
    def from_bounds(cls, upper: float, lower: float, tol: float, problem: str, details: dict) -> "Certificate":
        """The certificate of bounds ``lower <= optimum <= upper``: optimal when ``rel_gap <= tol``.

        Parameters
        ----------
        upper : float
            The objective at the feasible candidate (an upper bound on the optimum).
        lower : float
            The dual objective at a dual-feasible point (a lower bound on the optimum).
        tol : float
            The relative gap under which the verdict is ``Verdict.OPTIMAL``.
        problem : str
            The problem's method name.
        details : dict
            How the bound was built.

        Returns
        -------
        Certificate
            Verdict ``Verdict.OPTIMAL`` when ``rel_gap <= tol``, else ``Verdict.SUBOPTIMAL``.
        """
        cert = cls(float(upper), float(lower), Verdict.SUBOPTIMAL, tol, problem, details)
        if cert.rel_gap <= tol:
            cert.verdict = Verdict.OPTIMAL
        return cert

    @property
    def gap(self) -> float:
        """``upper - lower``."""
        return float(self.upper - self.lower)

    @property
    def rel_gap(self) -> float:
        """``gap / max(|upper|, 1e-12)`` (``inf`` when ``upper`` is not finite)."""
        if not np.isfinite(self.upper):
            return float("inf")
        return float(self.gap / max(abs(self.upper), 1e-12))

    @property
    def is_optimal(self) -> bool:
        """Whether the verdict is ``Verdict.OPTIMAL``."""
        return self.verdict is Verdict.OPTIMAL

    def report(self) -> str:
        """A readable multi-line summary.

        Returns
        -------
        str
            The verdict, the bounds, the gap and the details, one per line.
        """
        lines = [
            f"{self.problem} certificate: {self.verdict.value} (tol {self.tol:.1e})",
            f"  upper bound (objective at M) : {self.upper:.12g}",
            f"  lower bound (dual objective) : {self.lower:.12g}",
            f"  gap                          : {self.gap:.3e}  (relative {self.rel_gap:.3e})",
        ]
        for k, v in self.details.items():
            if isinstance(v, float):
                v = f"{v:.6g}"
            lines.append(f"  {k:<29}: {v}")
        return "\n".join(lines)

    def __str__(self):
        return self.report()

    def __repr__(self):
        return (f"Certificate(verdict={self.verdict.value!r}, upper={self.upper:.10g}, lower={self.lower:.10g}, "
                f"rel_gap={self.rel_gap:.3g})")
