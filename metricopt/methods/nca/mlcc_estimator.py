"""The scikit-learn estimator for MLCC, metric learning by collapsing classes (Globerson & Roweis, NIPS 2006)."""

from __future__ import annotations

import numpy as np

from ...estimators._params import SOLVE_CONSTRAINTS
from ...estimators.base import MetricLearner
from .mlcc_problem import MLCCProblem

__all__ = ["MLCC"]

class MLCC(MetricLearner):
    r"""Metric learning by collapsing classes (Globerson & Roweis, NIPS 2006).

    Fits :class:`~metricopt.MLCCProblem`:

    .. math::

        \min_{M \succeq 0} \sum_i \mathrm{KL}\big(p_0(\cdot \mid i) \,\|\, p_M(\cdot \mid i)\big),
        \qquad p_M(j \mid i) \propto e^{-d_M(x_i, x_j)},\ p_0(\cdot \mid i) \text{ uniform on } i\text{'s class}.

    Convex, but no certificate covers its log-partition term yet: the status is ``uncertified`` (the
    solver's word), never ``optimal``; ``certificate_`` is None.

    Parameters
    ----------
    backend, solver, tol, solver_tol, max_iter, time_limit, verbose
        As for :class:`LMNN` (exact backend: Clarabel by default, exponential cones; ``"jax"``: projected
        gradient, stopped at first-order optimality).

    Attributes
    ----------
    components_, solution_, certificate_, problem_, n_iter_
    """

    _parameter_constraints = {**SOLVE_CONSTRAINTS}

    def __init__(self, backend: str = "cvxpy", solver: str | None = None, tol: float | None = None,
                 solver_tol: float | None = None, max_iter: int | None = None, time_limit: float | None = None,
                 verbose: bool = False) -> None:
        self.backend = backend
        self.solver = solver
        self.tol = tol
        self.solver_tol = solver_tol
        self.max_iter = max_iter
        self.time_limit = time_limit
        self.verbose = verbose

    def _make_problem(self, X: np.ndarray, y: np.ndarray) -> MLCCProblem:
        return MLCCProblem(X, y)
