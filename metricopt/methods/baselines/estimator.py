"""scikit-learn transformers for the closed-form baselines: PCA, whitening, LDA and RCA (see
:mod:`metricopt.methods.baselines.transforms` for the math and the references)."""

from __future__ import annotations

import time
from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .transforms import ClosedForm, lda_map, pca_map, rca_map, whitening_map
from ...errors import InputError
from ...linalg import symmetrize
from ...solution import Solution
from ...estimators._params import Interval
from ...estimators.base import FitResult, MetricLearner, fit_estimator

__all__ = ["PCA", "Whitening", "LDA", "RCA"]


class _ClosedFormLearner(MetricLearner):
    """A baseline: ``fit`` computes the map in closed form (status ``closed_form``, no certificate)."""

    method = "closed form"
    supervised = True

    def _solve_options(self) -> dict[str, Any]:
        return {}

    def _make_problem(self, X: np.ndarray, y: np.ndarray) -> ClosedForm:
        return ClosedForm(X, y, self.method)

    def _map(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float, dict]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _fit_solution(self, X: np.ndarray, y: np.ndarray, options: dict[str, Any]) -> FitResult:
        if X.shape[0] < 2:
            raise InputError(f"{self.method} needs at least two samples to estimate a covariance; got "
                             f"n_samples = {X.shape[0]}.")
        t0 = time.perf_counter()
        L, criterion, stats = self._map(X, y)
        stats["time"] = time.perf_counter() - t0
        from ...certify import policy
        from ...certify.policy import NoCertificate, Outcome, SolverReport

        # an eigendecomposition: no certificate, its status the policy's (as every status)
        status, _ = policy.decide(SolverReport(Outcome.CLOSED_FORM), NoCertificate.NOT_TAKEN)
        sol = Solution(M=symmetrize(L.T @ L), L=L, objective=float(criterion), status=status,
                       backend="numpy", solver=self.method, stats={"iterations": 0, **stats},
                       message=f"{status.message} ({self.method}: {stats.get('criterion', '')})")
        return FitResult(self._make_problem(X, y), sol, components=L, certificate=None)

    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> _ClosedFormLearner:
        """Compute the map from ``X`` (n, d) (and labels ``y`` for the supervised baselines).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (at least two samples).
        y : array-like of shape (n_samples,), optional
            Class labels; required by the supervised baselines (LDA, RCA), ignored by PCA and whitening.

        Returns
        -------
        self
            The fitted estimator (status ``closed_form``, ``certificate_`` None).

        Raises
        ------
        metricopt.errors.InputError
            For invalid hyperparameters or data, or fewer than two samples.
        """
        if y is None and not self.supervised:
            y = np.zeros(np.shape(X)[0] if np.ndim(X) > 0 else 0, dtype=int)  # labels unused: a placeholder
        return fit_estimator(self, X, y)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = self.supervised
        return tags


class PCA(_ClosedFormLearner):
    """Principal components as a metric: ``L`` = the top ``n_components`` eigenvectors of the covariance
    (rows); ``n_components`` an int, a variance fraction in (0, 1), or None (all). ``solution_.objective``:
    the fraction of the variance kept. Labels are ignored."""

    method = "PCA"
    supervised = False
    _parameter_constraints = {"n_components": [None, Interval(Integral, 1, None, closed="left"),
                                               Interval(Real, 0, 1, closed="neither")]}

    def __init__(self, n_components: int | float | None = None) -> None:
        self.n_components = n_components

    def _map(self, X, y):
        L, kept = pca_map(X, self.n_components)
        return L, kept, {"criterion": f"{100 * kept:.2f}% of the variance kept in {L.shape[0]} dimensions"}


class Whitening(_ClosedFormLearner):
    """The data's own Mahalanobis distance: ``M`` = the pseudo-inverse of its covariance. Labels are ignored."""

    method = "whitening"
    supervised = False
    _parameter_constraints: dict = {}

    def _map(self, X, y):
        L, rank = whitening_map(X)
        return L, float(rank), {"criterion": f"covariance of rank {rank} whitened"}


class LDA(_ClosedFormLearner):
    r"""LDA as JMLR 2009 (Sec. 2.2) defines it: the rows of ``L`` are the unit eigenvectors of
    :math:`C_w^{-1} C_b` with the largest eigenvalues, at most ``C - 1`` (``n_components``; default
    ``C - 1``). ``solution_.objective``: the sum of the kept eigenvalues (Fisher ratios)."""

    method = "LDA"
    _parameter_constraints = {"n_components": [None, Interval(Integral, 1, None, closed="left")]}

    def __init__(self, n_components: int | None = None) -> None:
        self.n_components = n_components

    def _map(self, X, y):
        L, w = lda_map(X, y, self.n_components)
        return L, float(np.sum(w)), {"criterion": f"{L.shape[0]} directions, Fisher ratios {np.round(w, 4).tolist()}",
                                     "eigenvalues": w}


class RCA(_ClosedFormLearner):
    """Relevant components analysis (Bar-Hillel, Hertz, Shental & Weinshall, JMLR 2005): whitening of the
    within-chunklet covariance after a PCA keeping ``pca`` (a variance fraction, a number of
    dimensions, or None: all non-null ones). Chunklets: ``chunklets`` (one id per training point,
    ``-1`` for none) or, by default, one chunklet per class of ``y``."""

    method = "RCA"
    _parameter_constraints = {"pca": [None, Interval(Integral, 1, None, closed="left"),
                                      Interval(Real, 0, 1, closed="neither")],
                              "chunklets": [None, "array-like"]}

    def __init__(self, pca: int | float | None = 0.999, chunklets: ArrayLike | None = None) -> None:
        self.pca = pca
        self.chunklets = chunklets

    def _map(self, X, y):
        chunks = np.searchsorted(np.unique(y), y) if self.chunklets is None else np.asarray(self.chunklets)
        L, P = rca_map(X, chunks, self.pca)
        return L, float(P.shape[0]), {"criterion": f"within-chunklet whitening in {P.shape[0]} PCA dimensions"}
