"""The result of a solve: the metric, its objective, a status with a message, statistics."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from .errors import SolverError
from .linalg import factor


class Status(enum.Enum):
    """Outcome of a solve. ``status.message`` explains it in words."""

    OPTIMAL = ("optimal", "solved: the solver reached its requested accuracy on the full problem")
    OPTIMAL_INACCURATE = (
        "optimal_inaccurate",
        "the solver stopped before reaching its requested accuracy; the metric may be suboptimal "
        "(raise max_iter, try the other solver, or check it with metricopt.certify)",
    )
    STATIONARY = (
        "stationary",
        "a stationary point of a non-convex problem: locally optimal at best, never certified globally",
    )
    INFEASIBLE = ("infeasible", "the problem has no feasible point")
    UNBOUNDED = ("unbounded", "the objective is unbounded below on the feasible set")
    ITERATION_LIMIT = (
        "iteration_limit",
        "the iteration (or working-set round) limit was reached before convergence; raise max_iter "
        "or max_rounds",
    )
    TIME_LIMIT = (
        "time_limit",
        "the time limit was reached before convergence; the metric is the last (or best) point reached, its "
        "certified gap in the certificate where one was taken; raise time_limit",
    )
    EARLY_STOPPED = (
        "early_stopped",
        "stopped by the caller (e.g. at the lowest validation error); the metric is not an optimum of the "
        "training problem -- its certified gap is in the certificate",
    )
    HEURISTIC = (
        "heuristic",
        "built from certified solves by a heuristic step (multi-pass LMNN's composition, LMNN-S's eigen-"
        "truncation): optimal for no single convex problem; a certificate, where attached, gives its gap to "
        "the problem it is compared with",
    )
    UNCERTIFIED = (
        "uncertified",
        "the solver reports an optimum of this convex problem, but no certificate exists for its terms (no dual "
        "piece): the solver's word only, not a certified fact",
    )
    CLOSED_FORM = (
        "closed_form",
        "computed in closed form (an eigendecomposition: PCA, whitening, LDA, RCA): exact for its own criterion, "
        "the optimum of no metric-learning objective solved here; no certificate",
    )
    ERROR = ("error", "the solver failed; see the solution's message and stats")

    def __init__(self, code, message):
        self.code = code
        self.message = message

    def __str__(self):
        return self.code

    @property
    def is_optimal(self) -> bool:
        """Whether the status is OPTIMAL."""
        return self is Status.OPTIMAL

    @property
    def has_point(self) -> bool:
        """Whether the solve returned a usable (if possibly inaccurate) point."""
        return self in (Status.OPTIMAL, Status.OPTIMAL_INACCURATE, Status.STATIONARY, Status.ITERATION_LIMIT,
                        Status.TIME_LIMIT, Status.EARLY_STOPPED, Status.HEURISTIC, Status.CLOSED_FORM,
                        Status.UNCERTIFIED)


@dataclass
class Solution:
    """A learned metric and how it was obtained.

    Attributes
    ----------
    M : (d, d) ndarray or None
        The learned PSD matrix, ``d_M(a, b) = (a-b)^T M (a-b)``.
    L : (r, d) ndarray or None
        A factor with ``M = L^T L`` (derived from ``M`` when not given).
    objective : float
        The problem's objective evaluated by metricopt itself at ``M`` (float64,
        over every triplet / pair), not the solver's own report.
    status : Status
    backend, solver : str
    stats : dict
        Time, iterations, working-set rounds and sizes, the solver's reported value.
    variables : dict
        Other variables of the problem (e.g. POLA's threshold ``b``).
    message : str
        What happened, in words (status message plus details).
    certificate : Certificate or None
        The duality-gap certificate of ``M`` (convex problems), which decides
        between ``optimal`` and ``optimal_inaccurate``.
    """

    M: np.ndarray | None
    objective: float
    status: Status
    backend: str
    solver: str
    stats: dict = field(default_factory=dict)
    variables: dict = field(default_factory=dict)
    message: str = ""
    L: np.ndarray | None = None
    certificate: object = None

    def __post_init__(self):
        if self.M is not None and self.L is None:
            self.L = factor(self.M)
        if not self.message:
            self.message = self.status.message

    @property
    def is_optimal(self) -> bool:
        """Whether the status is OPTIMAL (certified)."""
        return self.status.is_optimal

    def raise_for_status(self) -> Solution:
        """Raise :class:`~metricopt.errors.SolverError` unless the status is OPTIMAL.

        Returns
        -------
        Solution
            ``self``, when the status is OPTIMAL.

        Raises
        ------
        SolverError
            When the status is not OPTIMAL.
        """
        if not self.status.is_optimal:
            raise SolverError(f"solve ended with status '{self.status}': {self.message}")
        return self

    def __repr__(self):
        obj = "nan" if self.objective is None else f"{self.objective:.10g}"
        return (
            f"Solution(status={self.status.code!r}, objective={obj}, backend={self.backend!r}, "
            f"solver={self.solver!r}, time={self.stats.get('time', float('nan')):.3g}s)"
        )
