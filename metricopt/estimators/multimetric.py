"""scikit-learn estimator for multi-metric LMNN (Weinberger & Saul, JMLR 2009, Section 5.2)."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import check_choice, check_X, check_y
from ..errors import InputError, SolverError
from ..problems.lmnn import LMNNProblem
from ..problems.multimetric import MultiMetricLMNNProblem, multi_metric_knn_predict
from .base import solve_options


class MultiMetricLMNN(ClassifierMixin, BaseEstimator):
    r"""Multi-metric LMNN: one Mahalanobis metric per cluster, learned jointly and certified.

    Fits :class:`~metricopt.problems.multimetric.MultiMetricLMNNProblem`

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
    backend, solver, tol, max_iter, verbose
        As for :class:`~metricopt.LMNN`.
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

    def __init__(self, clusters="labels", n_clusters=None, k=3, mu=0.5, regularizer=None, init=None,
                 backend="cvxpy", solver=None, tol=1e-8, max_iter=100_000, verbose=False, random_state=0):
        self.clusters = clusters
        self.n_clusters = n_clusters
        self.k = k
        self.mu = mu
        self.regularizer = regularizer
        self.init = init
        self.backend = backend
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose
        self.random_state = random_state

    def fit(self, X, y):
        """Learn one metric per cluster from ``X`` (n, d) and labels ``y``."""
        if y is None:
            raise InputError("MultiMetricLMNN requires y to be passed, but the target y is None.")
        if self.init is not None:
            check_choice(self.init, "init", ("single",))
        Xc = check_X(X)
        yc = check_y(y, Xc.shape[0])
        validate_data(self, X, y, dtype=np.float64)
        problem = MultiMetricLMNNProblem(Xc, yc, clusters=self.clusters, n_clusters=self.n_clusters, k=self.k,
                                         mu=self.mu, regularizer=self.regularizer, random_state=self.random_state)
        opts = solve_options(self)
        self.single_solution_ = None
        if self.init == "single":
            single = LMNNProblem(Xc, yc, k=self.k, mu=self.mu, target_neighbors=problem.target_neighbors,
                                 regularizer=self.regularizer).solve(backend=self.backend, **opts)
            if single.M is None:
                raise SolverError(f"the single-metric start failed: status '{single.status}': {single.message}")
            self.single_solution_ = single
            opts["init"] = problem.lifted_metric(single.M)
        sol = problem.solve(backend=self.backend, **opts)
        if sol.M is None:
            raise SolverError(f"MultiMetricLMNN could not be fitted: status '{sol.status}': {sol.message}")
        self.problem_ = problem
        self.solution_ = sol
        self.certificate_ = sol.certificate
        self.metrics_ = problem.metrics(sol.M)
        self.clusters_ = problem.clusters
        self.classes_ = problem.classes_
        self.n_iter_ = int(sol.stats.get("iterations", 0))
        return self

    def predict(self, X):
        """kNN labels of ``X`` under the cluster-dependent distance (``k`` of the fit)."""
        check_is_fitted(self, "metrics_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return multi_metric_knn_predict(self.problem_.X, self.problem_.y, self.clusters_, self.metrics_, X,
                                        k=self.problem_.k)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags
