"""Shared machinery of the scikit-learn estimators: fit = problem -> backend -> certificate."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import check_X, check_y
from ..errors import InputError, SolverError


def solve_options(estimator):
    """The ``problem.solve`` options an estimator's ``tol``, ``max_iter``, ``verbose`` and ``solver`` give."""
    opts = {"tol": estimator.tol, "max_iter": estimator.max_iter, "verbose": bool(estimator.verbose)}
    if estimator.solver is not None:
        opts["solver"] = estimator.solver
    return opts


class MetricLearner(TransformerMixin, BaseEstimator):
    """Base class: a supervised Mahalanobis metric learner.

    Subclasses implement ``_make_problem(X, y)`` and ``_solve_options()``.
    ``fit`` builds the declarative problem, solves it with the chosen backend,
    keeps the :class:`~metricopt.Solution` (``solution_``) and its certificate
    (``certificate_``), and exposes ``components_`` (``L``, with ``M = L^T L``).
    """

    def _make_problem(self, X, y):  # pragma: no cover - abstract
        raise NotImplementedError

    def _solve_options(self):
        return solve_options(self)

    def fit(self, X, y):
        """Learn the metric from ``X`` (n, d) and labels ``y`` (n,)."""
        if y is None:
            raise InputError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        Xc = check_X(X)
        yc = check_y(y, Xc.shape[0])
        validate_data(self, X, y, dtype=np.float64)
        problem = self._make_problem(Xc, yc)
        sol = problem.solve(backend=self.backend, **self._solve_options())
        if sol.M is None:
            raise SolverError(f"{type(self).__name__} could not be fitted: status '{sol.status}': {sol.message}")
        self.problem_ = problem
        self.solution_ = sol
        self.certificate_ = sol.certificate
        self.components_ = sol.L
        self.n_iter_ = int(sol.stats.get("iterations", 0))
        return self

    def transform(self, X):
        """Map ``X`` to the learned space: ``X @ components_.T`` (Euclidean there = ``d_M`` here)."""
        check_is_fitted(self, "components_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        check_X(X)
        return X @ self.components_.T

    def get_mahalanobis_matrix(self):
        """The learned PSD matrix ``M = components_.T @ components_``."""
        check_is_fitted(self, "components_")
        return self.solution_.M

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags
