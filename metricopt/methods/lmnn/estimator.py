"""The scikit-learn estimator for LMNN (Weinberger & Saul, JMLR 2009) and its extensions (multiple passes, low rank,
early stopping, the energy rule)."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.validation import check_is_fitted

from ..._validation import check_choice, check_y
from ...backends import BACKENDS
from .energy import energy_predict
from ...errors import InputError
from ...knn import knn_predict
from .problem import LMNNProblem
from ...estimators.base import FitResult, MetricLearner, ModelState, check_fitted_input
from ...estimators._params import LMNN_CONSTRAINTS, SOLVE_CONSTRAINTS, Choices, Interval

__all__ = ["LMNN", "SavedPasses"]

#: classification rules of :meth:`LMNN.predict`
_LMNN_RULES = ("knn", "energy")


class SavedPasses:
    """``passes_`` of a loaded multi-pass LMNN: the composed map ``L`` and the number of passes
    (the per-pass solutions are not stored in model files)."""

    def __init__(self, L: np.ndarray, passes: int) -> None:
        self.L = L
        self.passes = passes

    def __repr__(self) -> str:
        return f"SavedPasses(passes={self.passes}, L shape {self.L.shape})"


class LMNN(MetricLearner):
    r"""Large margin nearest neighbour metric learning (Weinberger & Saul, JMLR 2009).

    Fits :class:`~metricopt.LMNNProblem`:

    .. math::

        \min_{M \succeq 0} (1-\mu) \sum_{i, j \rightsquigarrow i} d_M(x_i, x_j)
        + \mu \sum_{i, j \rightsquigarrow i, l: y_l \ne y_i} [1 + d_M(x_i, x_j) - d_M(x_i, x_l)]_+ + R(M).

    Parameters
    ----------
    k : int, default 3
        Target neighbours per point (each class needs at least k+1 points).
    mu : float in [0, 1], default 0.5
        Push weight (paper convention).
    regularizer : metricopt term or list of terms, optional
    backend : {"cvxpy", "jax"}, default "cvxpy"
    solver : str, optional
        ``"SCS"`` or ``"CLARABEL"`` (cvxpy); ``"fista"`` or ``"subgradient"`` (jax).
    tol : float, optional
        The certified relative duality gap at which the metric is ``optimal``, on both backends
        (:mod:`metricopt.options`; the JAX backend stops there). Default (None): 1e-6, the same as
        :func:`metricopt.solve`'s. With ``n_components`` (not convex): the relative stationarity threshold
        of :func:`metricopt.methods.lmnn.lowrank.lmnn_low_rank` (``stats["stationarity"]``; default its own, 1e-6), used
        as given.
    solver_tol : float, optional
        Exact backend only: the conic solver's accuracy (default 1e-8).
    max_iter : int, optional
        Solver iteration limit. Default (None): the backend's (SCS 100000, Clarabel 500; jax 20000). For
        ``low_rank="R"``: solver iterations per restart, used as given (default: LMNN-R's 2000).
    time_limit : float, optional
        Seconds for the whole fit, certificate included (every variant: passes, low rank, early stopping);
        default none.
    verbose : bool, default False
    search : {"auto", "brute", "tree"}, default "auto"
        Neighbour and impostor searches (Section 6): blocked brute force or per-class ball
        trees (identical results); ``"auto"`` picks trees for ``n >= 2000``, ``d <= 25``.
    passes : int, default 1
        Multi-pass LMNN (Section 5.1): after each pass the target neighbours are re-picked
        under the learned metric and LMNN is solved again on the transformed data; the
        transformations compose (:func:`metricopt.methods.lmnn.multipass.multipass_lmnn`). Each pass is
        certified on its own (``passes_.solutions``); the composed metric is then certified
        against LMNN on the input features with the last pass's target neighbours.
    n_components : int, optional
        Low-rank LMNN (Section 5.4): learn a rank-``r`` map ``L`` (``r x d``) with
        ``low_rank="R"`` (gradient method on the non-convex loss, reported *stationary*, never
        optimal; ``certificate_`` is None) or ``"S"`` (the convex solution truncated to its top
        ``r`` eigenvectors). ``transform`` then returns ``r`` columns.
    low_rank : {"R", "S"}, default "R"
    validation_fraction : float in (0, 1), optional
        Early stopping as the paper did for faces: hold out this stratified fraction of the
        training set, solve on the rest (JAX backend) and keep the metric of lowest
        validation kNN error (:func:`metricopt.methods.lmnn.early_stopping.fit_with_validation`); the
        status is then ``early_stopped`` unless the certificate proves optimality. Prediction
        uses the whole training set.
    patience : int, default 10
        Re-checks without a lower validation error before stopping.
    random_state : int, default 0
        Seed of the validation split and of LMNN-R's restarts.

    Attributes
    ----------
    components_ : (d, d) ndarray (``(r, d)`` with ``n_components``)
        ``L`` with ``M = L^T L``.
    solution_ : Solution
        The solve that produced the metric (for ``passes > 1``: ``M = L^T L`` of the composed
        map, with its objective for ``problem_``).
    certificate_ : Certificate or None
        Duality-gap certificate of the learned metric for ``problem_`` (None for a low-rank
        metric, which solves no convex problem).
    problem_ : LMNNProblem
        The problem on the whole training set (data, labels, ``k``, ``mu``, target neighbours;
        for ``passes > 1`` those re-picked by the last pass) used by :meth:`predict`.
    n_iter_ : int
    passes_ : MultiPassResult or None
    validation_curve_ : ValidationCurve or None
    """

    _parameter_constraints = {
        **LMNN_CONSTRAINTS,
        **SOLVE_CONSTRAINTS,
        "search": [Choices("auto", "brute", "tree")],
        "passes": [Interval(Integral, 1, None, closed="left")],
        "n_components": [None, Interval(Integral, 1, None, closed="left")],
        "low_rank": [Choices("R", "S")],
        "validation_fraction": [None, Interval(Real, 0, 1, closed="neither")],
        "patience": [Interval(Integral, 1, None, closed="left")],
        "random_state": [None, Interval(Integral, 0, None, closed="left")],
    }

    def __init__(self, k: int = 3, mu: float = 0.5, regularizer: Any = None, backend: str = "cvxpy",
                 solver: str | None = None, tol: float | None = None, solver_tol: float | None = None,
                 max_iter: int | None = None, time_limit: float | None = None,
                 verbose: bool = False, search: str = "auto", passes: int = 1, n_components: int | None = None,
                 low_rank: str = "R", validation_fraction: float | None = None, patience: int = 10,
                 random_state: int | None = 0) -> None:
        self.k = k
        self.mu = mu
        self.regularizer = regularizer
        self.backend = backend
        self.solver = solver
        self.tol = tol
        self.solver_tol = solver_tol
        self.max_iter = max_iter
        self.time_limit = time_limit
        self.verbose = verbose
        self.search = search
        self.passes = passes
        self.n_components = n_components
        self.low_rank = low_rank
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.random_state = random_state

    def _make_problem(self, X: np.ndarray, y: np.ndarray, target_neighbors: np.ndarray | None = None) -> LMNNProblem:
        return LMNNProblem(X, y, k=self.k, mu=self.mu, regularizer=self.regularizer, search=self.search,
                           target_neighbors=target_neighbors)

    # ---------------------------------------------------------------- the variants
    def _variants(self) -> list[str]:
        return [name for name, on in (("passes > 1", self.passes > 1), ("n_components", self.n_components is not None),
                                      ("validation_fraction", self.validation_fraction is not None)) if on]

    def _check_param_combination(self) -> None:
        variants = self._variants()
        if len(variants) > 1:
            raise InputError(f"LMNN combines at most one of passes > 1, n_components and validation_fraction; "
                             f"got {' and '.join(variants)}. Fit them one at a time.")
        if self.validation_fraction is not None and check_choice(self.backend, "backend", BACKENDS) != "jax":
            raise InputError("validation_fraction (early stopping) needs backend='jax': the exact backend "
                             "has no iterates to stop at.")

    def _fit_solution(self, X: np.ndarray, y: np.ndarray, options: dict[str, Any]) -> FitResult:
        """Plain LMNN, or the one variant asked for: multi-pass, low rank or early stopping."""
        if self.passes > 1:
            return self._fit_passes(X, y, options)
        if self.n_components is not None:
            return self._fit_low_rank(X, y, options)
        if self.validation_fraction is not None:
            return self._fit_early_stopped(X, y, options)
        return super()._fit_solution(X, y, options)

    def _fit_passes(self, X: np.ndarray, y: np.ndarray, options: dict[str, Any]) -> FitResult:
        from .multipass import fit_multipass

        fit_multipass(self, X, y, self.passes, options)  # sets problem_, solution_ (M = L^T L, certified), components_, ...
        return FitResult(self.problem_, self.solution_, components=self.components_, certificate=self.certificate_,
                         n_iter=self.n_iter_, attributes={"passes_": self.passes_})

    def _fit_low_rank(self, X: np.ndarray, y: np.ndarray, options: dict[str, Any]) -> FitResult:
        from .lowrank import lmnn_low_rank

        full = self._make_problem(X, y)
        if check_choice(self.low_rank, "low_rank", ("R", "S")) == "R":
            # LMNN-R (its own JAX loop): tol (stationarity), max_iter (per restart) and time_limit as given
            given = {name: options[name] for name in ("tol", "max_iter", "time_limit") if name in options}
            if "solver_tol" in options:
                raise InputError("solver_tol is the exact backend's conic accuracy; LMNN-R (n_components with "
                                 "low_rank='R') solves no conic program. Leave solver_tol unset, or use "
                                 "low_rank='S' with backend='cvxpy'.")
            sol = lmnn_low_rank(full, self.n_components, method="R", random_state=self.random_state, **given)
        else:
            sol = lmnn_low_rank(full, self.n_components, method="S", backend=self.backend, **options)
        return FitResult(full, sol, certificate=None)  # a rank-r metric solves no convex problem

    def _fit_early_stopped(self, X: np.ndarray, y: np.ndarray, options: dict[str, Any]) -> FitResult:
        from .early_stopping import fit_with_validation

        full = self._make_problem(X, y)
        sol, curve = fit_with_validation(X, y, k=self.k, mu=self.mu, regularizer=self.regularizer,
                                         validation_fraction=self.validation_fraction, patience=self.patience,
                                         random_state=self.random_state, **options)
        # the certificate is that of the metric on the fit part's problem; predict uses the whole set
        return FitResult(full, sol, attributes={"validation_curve_": curve})

    def _fitted_extras(self) -> dict[str, Any]:
        return {"passes_": None, "validation_curve_": None}

    # ---------------------------------------------------------------- model-file state
    def _fitted_meta(self) -> dict[str, Any]:
        return {**super()._fitted_meta(), "passes": self.passes_ is not None}

    def _problem_from_state(self, X: np.ndarray, y: np.ndarray, state: ModelState) -> LMNNProblem:
        return self._make_problem(X, y, target_neighbors=state.array("target_neighbors"))

    def _params_before_shared_options(self, params: dict[str, Any]) -> dict[str, Any]:
        # low rank (n_components): tol was already the stationarity threshold, as it is today
        return params if params.get("n_components") is not None else super()._params_before_shared_options(params)

    def _fit_from_state(self, problem: LMNNProblem, state: ModelState) -> FitResult:
        fit = super()._fit_from_state(problem, state)
        if (state.meta.get("fitted") or {}).get("passes"):
            fit.attributes["passes_"] = SavedPasses(fit.components, self.passes)
        return fit

    def predict(self, X: ArrayLike, rule: str = "knn") -> np.ndarray:
        r"""Classify ``X`` with the learned metric, using the training data of ``fit``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        rule : {"knn", "energy"}, default "knn"
            ``"knn"``: the kNN rule of :func:`metricopt.knn_predict` with ``k``
            neighbours under :math:`d_M`. ``"energy"``: the energy-based rule of
            Weinberger & Saul (JMLR 2009, Section 3.5, Eq. 15),
            :func:`metricopt.methods.lmnn.energy.energy_predict`, with the fitted ``k`` and
            ``mu`` and the training target neighbours of the fit
            (``problem_.target_neighbors``).

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)

        Raises
        ------
        metricopt.errors.UnknownOptionError
            For a ``rule`` other than ``"knn"`` or ``"energy"``.
        """
        rule = check_choice(rule, "rule", _LMNN_RULES)
        check_is_fitted(self, "components_")
        X = check_fitted_input(self, X)
        problem = self.problem_  # holds the training data, labels, k, mu and target neighbours of fit
        M = self.get_mahalanobis_matrix()
        if rule == "knn":
            return knn_predict(problem.X, problem.y, X, k=problem.k, M=M)
        return energy_predict(problem.X, problem.y, X, k=problem.k, mu=problem.mu, M=M,
                              train_targets=problem.target_neighbors)

    def get_mahalanobis_matrix(self) -> np.ndarray:
        """The learned PSD matrix ``M = components_.T @ components_`` (multi-pass: the composition).

        Returns
        -------
        ndarray of shape (n_features, n_features)
            ``solution_.M``; for ``passes > 1`` (or a loaded multi-pass model) ``L^T L`` of the composed map
            ``L = components_``.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        """
        check_is_fitted(self, "components_")
        if getattr(self, "passes_", None) is not None:
            return self.components_.T @ self.components_
        return self.solution_.M

    def score(self, X: ArrayLike, y: ArrayLike, rule: str = "knn") -> float:
        """Accuracy of :meth:`predict` (with the given ``rule``) on ``X`` against the labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs with the features seen at fit.
        y : array-like of shape (n_samples,)
            The true labels.
        rule : {"knn", "energy"}, default "knn"
            As for :meth:`predict`.

        Returns
        -------
        float
            The fraction of ``X`` whose predicted label equals ``y`` (in [0, 1]).

        Raises
        ------
        metricopt.errors.UnknownOptionError
            For another ``rule``.
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        metricopt.errors.InputError
            For NaN or infinite values, a 1-D or empty ``X``, or another number of features than at fit.
            Also for a ``y`` of another length than ``X``.
        """
        pred = self.predict(X, rule=rule)
        y = check_y(y, pred.shape[0])
        return float(np.mean(pred == y))
