"""scikit-learn estimators for the pair methods: MMC (Xing, Ng, Jordan & Russell, NIPS 2002) and POLA
(Shalev-Shwartz, Singer & Ng, ICML 2004), fitted on all pairs of a labelled set."""

from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np

from ...estimators._params import SOLVE_CONSTRAINTS, Interval
from ...estimators.base import MetricLearner
from .mmc_problem import MMCProblem
from .pola_problem import POLAProblem

__all__ = ["MMC", "POLA"]

class MMC(MetricLearner):
    r"""MMC metric learning from labels (Xing, Ng, Jordan & Russell, NIPS 2002).

    Fits :class:`~metricopt.MMCProblem` with all same-label pairs similar and all
    differently labelled pairs dissimilar:

    .. math::

        \max_{M \succeq 0} \sum_{(a,b) \in D} \sqrt{d_M(x_a, x_b)}
        \ \text{s.t.}\ \sum_{(a,b) \in S} d_M(x_a, x_b) \le 1.

    Parameters
    ----------
    diagonal : bool, default False
    backend, solver, tol, solver_tol, max_iter, time_limit, verbose
        As for :class:`LMNN` (default solver Clarabel; ``None``: the defaults of :mod:`metricopt.options`).

    Attributes
    ----------
    components_, solution_, certificate_, problem_, n_iter_
    """

    _parameter_constraints = {"diagonal": ["boolean"], **SOLVE_CONSTRAINTS}

    def __init__(self, diagonal: bool = False, backend: str = "cvxpy", solver: str | None = None,
                 tol: float | None = None, solver_tol: float | None = None, max_iter: int | None = None,
                 time_limit: float | None = None, verbose: bool = False) -> None:
        self.diagonal = diagonal
        self.backend = backend
        self.solver = solver
        self.tol = tol
        self.solver_tol = solver_tol
        self.max_iter = max_iter
        self.time_limit = time_limit
        self.verbose = verbose

    def _make_problem(self, X: np.ndarray, y: np.ndarray) -> MMCProblem:
        return MMCProblem(X, y, diagonal=self.diagonal)


class POLA(MetricLearner):
    r"""POLA pseudo-metric learning, batch form (Shalev-Shwartz, Singer & Ng, ICML 2004).

    Fits :class:`~metricopt.POLAProblem` over all pairs (similar = same label):

    .. math::

        \min_{M \succeq 0, b \ge 1} \tfrac12(\|M\|_F^2 + b^2) + C \sum_t \xi_t
        \ \text{s.t.}\ y_t (b - d_M(x_t, x'_t)) \ge 1 - \xi_t,\ \xi \ge 0.

    Parameters
    ----------
    C : float or None, default 1.0
        Soft-margin weight; ``None`` asks for the hard-margin program (often infeasible).
    backend, solver, tol, solver_tol, max_iter, time_limit, verbose
        As for :class:`LMNN` (default solver Clarabel; ``None``: the defaults of :mod:`metricopt.options`).

    Attributes
    ----------
    components_, solution_, certificate_, problem_, n_iter_
    threshold_ : float
        The learned threshold ``b``: pairs with ``d_M < b`` are predicted similar.
    """

    _parameter_constraints = {"C": [None, Interval(Real, 0, None, closed="neither")], **SOLVE_CONSTRAINTS}

    def __init__(self, C: float | None = 1.0, backend: str = "cvxpy", solver: str | None = None,
                 tol: float | None = None, solver_tol: float | None = None, max_iter: int | None = None,
                 time_limit: float | None = None, verbose: bool = False) -> None:
        self.C = C
        self.backend = backend
        self.solver = solver
        self.tol = tol
        self.solver_tol = solver_tol
        self.max_iter = max_iter
        self.time_limit = time_limit
        self.verbose = verbose

    def _make_problem(self, X: np.ndarray, y: np.ndarray) -> POLAProblem:
        return POLAProblem(X, y, C=self.C)

    def _fitted_extras(self) -> dict[str, Any]:
        return {"threshold_": float(self.solution_.variables["b"])}
