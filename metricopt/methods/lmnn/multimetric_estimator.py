"""scikit-learn estimator for multi-metric LMNN (Weinberger & Saul, JMLR 2009, Section 5.2)."""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from ..._deadline import Budget
from ...errors import SolverError
from .problem import LMNNProblem
from .multimetric_problem import CLUSTERINGS, MultiMetricLMNNProblem, multi_metric_knn_predict
from ...solving import solve
from ...estimators.base import FitResult, ModelState, ProblemFitMixin, check_fitted_input
from ...estimators._params import LMNN_CONSTRAINTS, SOLVE_CONSTRAINTS, Choices, Interval


class MultiMetricLMNN(ProblemFitMixin, ClassifierMixin, BaseEstimator):
    r"""Multi-metric LMNN: one Mahalanobis metric per cluster, learned jointly and certified.

    Fits :class:`~metricopt.methods.lmnn.multimetric_problem.MultiMetricLMNNProblem`

    .. math::

        \min_{M^1..M^C \succeq 0} (1-\mu)\sum_{i, j \rightsquigarrow i} D(x_i, x_j)
        + \mu \sum_{i, j \rightsquigarrow i, l: y_l \ne y_i} [1 + D(x_i, x_j) - D(x_i, x_l)]_+ + R,
        \qquad D(x_i, x_j) = (x_i - x_j)^\top M^{c(j)} (x_i - x_j),

    and classifies by the kNN rule under :math:`D` (the metric of each *training* point's
    cluster; JMLR 2009, Sec. 5.2). There is no single linear map for all metrics, so the
    estimator has no ``transform``.

    Parameters
    ----------
    clusters : "labels", "kmeans" or array of shape (n,), default "labels"
    n_clusters : int, optional
        For ``clusters="kmeans"``.
    k, mu, regularizer
        As for :class:`~metricopt.LMNN`.
    init : None or "single", default None
        ``"single"``: start from the single-metric LMNN solution (solved first, same
        backend), every cluster's metric equal to it, as the paper suggests.
    backend, solver, tol, solver_tol, max_iter, time_limit, verbose
        As for :class:`~metricopt.LMNN` (``None``: the defaults of :mod:`metricopt.options`).
    random_state : int, default 0
        Seed of k-means.

    Attributes
    ----------
    metrics_ : list of (d, d) ndarray
        ``M^c`` for every cluster.
    clusters_ : (n,) int ndarray
        Cluster code of every training point.
    solution_, certificate_, problem_, n_iter_
    single_solution_ : Solution or None
        The single-metric solution used as the start (``init="single"``).
    """

    _parameter_constraints = {
        "clusters": [Choices(*CLUSTERINGS), "array-like"],
        "n_clusters": [None, Interval(Integral, 1, None, closed="left")],
        **LMNN_CONSTRAINTS,
        "init": [None, Choices("single")],
        **SOLVE_CONSTRAINTS,
        "random_state": ["random_state"],
    }
    _model_solutions = ("solution", "single_solution")

    def __init__(self, clusters: Any = "labels", n_clusters: int | None = None, k: int = 3, mu: float = 0.5,
                 regularizer: Any = None, init: str | None = None, backend: str = "cvxpy", solver: str | None = None,
                 tol: float | None = None, solver_tol: float | None = None, max_iter: int | None = None,
                 time_limit: float | None = None, verbose: bool = False,
                 random_state: Any = 0) -> None:
        self.clusters = clusters
        self.n_clusters = n_clusters
        self.k = k
        self.mu = mu
        self.regularizer = regularizer
        self.init = init
        self.backend = backend
        self.solver = solver
        self.tol = tol
        self.solver_tol = solver_tol
        self.max_iter = max_iter
        self.time_limit = time_limit
        self.verbose = verbose
        self.random_state = random_state

    def _make_problem(self, X: np.ndarray, y: np.ndarray, clusters: Any = None,
                      target_neighbors: np.ndarray | None = None) -> MultiMetricLMNNProblem:
        return MultiMetricLMNNProblem(X, y, clusters=self.clusters if clusters is None else clusters,
                                      n_clusters=self.n_clusters if clusters is None else None, k=self.k, mu=self.mu,
                                      target_neighbors=target_neighbors, regularizer=self.regularizer,
                                      random_state=self.random_state)

    def _fit_solution(self, X: np.ndarray, y: np.ndarray, options: dict[str, Any]) -> FitResult:
        """Solve, from the single-metric LMNN solution with ``init="single"``."""
        problem = self._make_problem(X, y)
        single = None
        budget = Budget.start(options.get("time_limit"))  # time_limit bounds both solves together
        with budget.running():
            if self.init is not None:
                single = solve(LMNNProblem(X, y, k=self.k, mu=self.mu, target_neighbors=problem.target_neighbors,
                                           regularizer=self.regularizer), backend=self.backend, **options)
                if single.M is None:
                    raise SolverError(f"the single-metric start failed: status '{single.status}': {single.message}")
                options = {**options, "init": problem.lifted_metric(single.M)}
                if budget.limited:
                    options["time_limit"] = max(budget.left(), 1e-3)
            sol = solve(problem, backend=self.backend, **options)
        return FitResult(problem, sol, attributes={"single_solution_": single})

    def _fitted_extras(self) -> dict[str, Any]:
        problem = self.problem_
        return {"metrics_": problem.metrics(self.solution_.M), "clusters_": problem.clusters,
                "classes_": problem.classes_, "single_solution_": None}

    # ---------------------------------------------------------------- model-file state
    def _model_state(self) -> ModelState:
        state = super()._model_state()
        state.arrays["clusters"] = np.asarray(self.problem_.clusters, dtype=np.int64)
        state.solutions["single_solution"] = self.single_solution_
        return state

    def _problem_from_state(self, X: np.ndarray, y: np.ndarray, state: ModelState) -> MultiMetricLMNNProblem:
        """The problem with the stored cluster codes (k-means is not run again)."""
        return self._make_problem(X, y, clusters=state.array("clusters"),
                                  target_neighbors=state.array("target_neighbors"))

    def _fit_from_state(self, problem: MultiMetricLMNNProblem, state: ModelState) -> FitResult:
        fit = super()._fit_from_state(problem, state)
        fit.attributes["single_solution_"] = state.solutions.get("single_solution")
        return fit

    def predict(self, X: ArrayLike) -> np.ndarray:
        r"""kNN labels of ``X`` under the cluster-dependent distance (``k`` of the fit): a test point ``x`` is at
        :math:`D(x, x_j) = (x - x_j)^\top M^{c(j)} (x - x_j)` from the training point ``x_j`` (JMLR 2009,
        Sec. 5.2, Eq. 16, with the clusters of the fit in place of the classes).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs with the features seen at fit.

        Returns
        -------
        ndarray of shape (n_samples,)
            The predicted labels.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        metricopt.errors.InputError
            For NaN or infinite values, a 1-D or empty ``X``, or another number of features than at fit.
        """
        check_is_fitted(self, "metrics_")
        X = check_fitted_input(self, X)
        return multi_metric_knn_predict(self.problem_.X, self.problem_.y, self.clusters_, self.metrics_, X,
                                        k=self.problem_.k)
