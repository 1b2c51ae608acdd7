"""scikit-learn estimator for local distance functions (Ramanan & Baker, IEEE PAMI 33(4), 2011)."""

from __future__ import annotations

import time
from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from ..._validation import check_choice, check_y
from ..baselines.transforms import ClosedForm
from ...linalg import symmetrize
from .taxonomy import DEFAULTS, HOW, WHEN, WHERE, LocalMetrics, _Space, check_cell, column_of, fit_local_metrics
from ...solution import Solution
from ...estimators._params import SOLVE_CONSTRAINTS, Choices, Interval
from ...estimators.base import (
    FitResult, ModelState, ModelStateError, ProblemFitMixin, check_fitted_input, fit_estimator)

__all__ = ["LocalMetricKNN"]

#: the options of :func:`metricopt.methods.local.fit_local_metrics` the estimator exposes, by parameter name
_OPTIONS = ("k", "shortlist", "neighborhood_size", "n_references", "interpolation", "sigma", "reference_cv",
            "class_form", "class_set_size", "lda_reg", "n_bags", "lmnn_k", "lmnn_mu", "local_reg", "local_max_iter",
            "certify_local", "tol", "max_iter", "time_limit", "random_state")


class LocalMetricKNN(ProblemFitMixin, ClassifierMixin, BaseEstimator):
    r"""Two-stage kNN with a local distance function: one cell of Ramanan & Baker's taxonomy.

    ``how`` learns the metrics (``"lda"``, ``"lmnn"``, ``"hybrid"``: LMNN global, LDA local),
    ``where`` they live (``"global"``, ``"class"``, ``"exemplar"``, ``"test"``) and ``when`` they are
    learned (``"offline"``, ``"online"``, ``"interpolated"``, ``"line"``); the cells and every formula
    are in :mod:`metricopt.methods.local.taxonomy`. ``predict`` shortlists the ``shortlist`` nearest training
    points under the global metric and lets the ``k`` nearest under the local distance vote.

    Parameters
    ----------
    how : {"lmnn", "lda", "hybrid"}, default "lmnn"
    where : {"exemplar", "global", "class", "test"}, default "exemplar"
    when : {"offline", "online", "interpolated", "line"}, default "offline"
        Cells: global and class take ``"offline"``; exemplar all four; test ``"online"`` and
        ``"interpolated"``.
    k : int, default 3
        Neighbours voting.
    shortlist : int, default 20
    neighborhood_size : int, default 50
        ``S``, the points each local metric is learned on.
    n_references : int, default 500
        ``R`` (interpolated and line-integral cells).
    interpolation : {"rbf", "nn"}, default "rbf"
    sigma : float, optional
        RBF width (relative to the mean squared global distance); default chosen by leave-one-out.
    reference_cv : bool, default False
        Cross-validated reference metrics (``M_CV``).
    class_form : {"joint", "anchor"}, default "joint"
        Per-class LMNN: multi-metric (JMLR 2009 Eq. 16) or the paper's Eq. 8 (one weighted LMNN per class).
    class_set_size : int, optional
        Per-class LDA set size (default twice the largest class).
    lda_reg : float, default 1.0
    n_bags : int, default 10
    lmnn_k : int, default 3
    lmnn_mu : float, default 0.5
    local_reg : float, default 1e-2
        Relative trace weight of the local LMNN problems (:func:`metricopt.methods.local.solve_lmnn_batch`).
    local_max_iter : int, default 300
    certify_local : bool, default False
        Certify every local LMNN problem (costs about a solve each).
    tol : float, default 1e-3
        Certified relative gap of the global (and per-class) LMNN.
    max_iter : int, default 2000
    time_limit : float, optional
        Wall-clock seconds for the whole fit (:mod:`metricopt.options`): the global and per-class LMNN solves keep
        its deadline (status ``time_limit`` with the best certified point when they reach it), and no batch of local
        solves starts that would end past it, judged by the last batch's time; the local sets left keep the global
        metric and count as ``time_limit`` in ``local_.statuses``. Learning at prediction time (``when="online"``)
        is not bounded by it.
    random_state : int, default 0
    verbose : bool, default False

    Attributes
    ----------
    local_ : LocalMetrics
        The fitted cell (metrics, references, chosen ``sigma``, statuses of the local solves).
    solution_ : Solution
        The global metric (LMNN's certified solve, or LDA's closed form).
    column_ : str
        The paper's table column of the cell.
    classes_ : ndarray
        The sorted class labels.
    n_iter_ : int
        Iterations of the global LMNN solve (1 for the closed-form LDA).
    components_ : (r, d) ndarray
        The global metric's factor ``L_G`` (shortlists and neighbourhoods).
    """

    _parameter_constraints = {
        "how": [Choices(*HOW)],
        "where": [Choices(*WHERE)],
        "when": [Choices(*WHEN)],
        "k": [Interval(Integral, 1, None, closed="left")],
        "shortlist": [Interval(Integral, 1, None, closed="left")],
        "neighborhood_size": [Interval(Integral, 2, None, closed="left")],
        "n_references": [Interval(Integral, 1, None, closed="left")],
        "interpolation": [Choices("rbf", "nn")],
        "sigma": [None, Interval(Real, 0, None, closed="neither")],
        "reference_cv": ["boolean"],
        "class_form": [Choices("joint", "anchor")],
        "class_set_size": [None, Interval(Integral, 2, None, closed="left")],
        "lda_reg": [Interval(Real, 0, None, closed="left")],
        "n_bags": [Interval(Integral, 0, None, closed="left")],
        "lmnn_k": [Interval(Integral, 1, None, closed="left")],
        "lmnn_mu": [Interval(Real, 0, 1, closed="both")],
        "local_reg": [Interval(Real, 0, None, closed="left")],
        "local_max_iter": [Interval(Integral, 1, None, closed="left")],
        "certify_local": ["boolean"],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "time_limit": SOLVE_CONSTRAINTS["time_limit"],
        "random_state": [Interval(Integral, 0, None, closed="left")],
        "verbose": ["verbose"],
    }

    def __init__(self, how: str = "lmnn", where: str = "exemplar", when: str = "offline", k: int = 3,
                 shortlist: int = 20, neighborhood_size: int = 50, n_references: int = 500,
                 interpolation: str = "rbf", sigma: float | None = None, reference_cv: bool = False,
                 class_form: str = "joint", class_set_size: int | None = None, lda_reg: float = 1.0,
                 n_bags: int = 10, lmnn_k: int = 3, lmnn_mu: float = 0.5, local_reg: float = 1e-2,
                 local_max_iter: int = 300, certify_local: bool = False, tol: float = 1e-3,
                 max_iter: int = 2000, time_limit: float | None = None, random_state: int = 0,
                 verbose: bool = False) -> None:
        self.how = how
        self.where = where
        self.when = when
        self.k = k
        self.shortlist = shortlist
        self.neighborhood_size = neighborhood_size
        self.n_references = n_references
        self.interpolation = interpolation
        self.sigma = sigma
        self.reference_cv = reference_cv
        self.class_form = class_form
        self.class_set_size = class_set_size
        self.lda_reg = lda_reg
        self.n_bags = n_bags
        self.lmnn_k = lmnn_k
        self.lmnn_mu = lmnn_mu
        self.local_reg = local_reg
        self.local_max_iter = local_max_iter
        self.certify_local = certify_local
        self.tol = tol
        self.max_iter = max_iter
        self.time_limit = time_limit
        self.random_state = random_state
        self.verbose = verbose

    # ---------------------------------------------------------------- fit
    def fit(self, X: ArrayLike, y: ArrayLike) -> LocalMetricKNN:
        """Learn the global metric and the cell's local metrics from ``X`` (n, d) and ``y`` (n,)
        (:func:`metricopt.methods.local.fit_local_metrics`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (finite, real).
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self
            The fitted estimator.

        Raises
        ------
        metricopt.errors.InputError
            For invalid hyperparameters, a ``(how, where, when)`` that is not a cell of the taxonomy, or invalid
            data.
        ValueError
            For a continuous target (scikit-learn's ``check_classification_targets``).
        """
        return fit_estimator(self, X, y)

    def _check_param_combination(self) -> None:
        check_cell(self.how, self.where, self.when)

    def _options(self) -> dict[str, Any]:
        opts = {name: getattr(self, name) for name in _OPTIONS}
        opts["interpolation"] = opts["interpolation"].lower()
        opts["class_form"] = opts["class_form"].lower()
        return opts

    def _solve_options(self) -> dict[str, Any]:
        return {}

    def _make_problem(self, X: np.ndarray, y: np.ndarray) -> Any:
        if self.how.lower() == "lda":
            return ClosedForm(X, y, "regularised LDA")
        from ..lmnn.problem import LMNNProblem

        return LMNNProblem(X, y, k=self.lmnn_k, mu=self.lmnn_mu)

    def _fit_solution(self, X: np.ndarray, y: np.ndarray, options: dict[str, Any]) -> FitResult:
        from sklearn.utils.multiclass import check_classification_targets

        check_classification_targets(y)  # a continuous target: scikit-learn's ValueError ("Unknown label type")
        t0 = time.perf_counter()
        model = fit_local_metrics(X, y, self.how.lower(), self.where.lower(), self.when.lower(), **self._options())
        sol = model.global_solution
        if sol is None:  # LDA: the global metric in closed form (its status the policy's, as every status)
            from ...certify import policy
            from ...certify.policy import NoCertificate, Outcome, SolverReport

            L = model.space.L
            status, _ = policy.decide(SolverReport(Outcome.CLOSED_FORM), NoCertificate.NOT_TAKEN)
            sol = Solution(M=symmetrize(L.T @ L), L=L, objective=0.0, status=status, backend="numpy",
                           solver="regularised LDA", stats={"iterations": 0, "time": time.perf_counter() - t0},
                           message=f"{status.message} (regularised LDA, lambda = {self.lda_reg:g})")
        attributes = {"local_": model, "column_": column_of(model.where, model.when), "components_": model.space.L,
                      "classes_": model.classes}
        return FitResult(self._make_problem(X, y), sol, components=model.space.L, attributes=attributes,
                         n_iter=max(1, int(sol.stats.get("iterations", 0))))

    # ---------------------------------------------------------------- predict
    def predict(self, X: ArrayLike, rule: str = "knn") -> np.ndarray:
        """Two-stage kNN labels (shortlist under the global metric, re-ranked by the local distance).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs with the features seen at fit.
        rule : {"knn"}, default "knn"
            Accepts only ``"knn"`` (the command line's option).

        Returns
        -------
        ndarray of shape (n_samples,)
            The predicted labels.

        Raises
        ------
        metricopt.errors.UnknownOptionError
            For another ``rule``.
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        metricopt.errors.InputError
            For NaN or infinite values, a 1-D or empty ``X``, or another number of features than at fit.
        """
        check_choice(rule, "rule", ("knn",))
        check_is_fitted(self, "local_")
        X = check_fitted_input(self, X)
        return self.local_.predict(X)

    def score(self, X: ArrayLike, y: ArrayLike) -> float:
        """Accuracy of :meth:`predict` on ``X`` against ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs with the features seen at fit.
        y : array-like of shape (n_samples,)
            The true labels.

        Returns
        -------
        float
            The fraction of ``X`` whose predicted label equals ``y`` (in [0, 1]).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        metricopt.errors.InputError
            For NaN or infinite values, a 1-D or empty ``X``, or another number of features than at fit.
            Also for a ``y`` of another length than ``X``.
        """
        pred = self.predict(X)
        return float(np.mean(pred == check_y(y, pred.shape[0])))

    # ---------------------------------------------------------------- model-file state
    def _fitted_meta(self) -> dict[str, Any]:
        m = self.local_
        return {"n_iter": int(self.n_iter_), "column": self.column_, "sigma": m.sigma, "mean_sq": m.mean_sq,
                "statuses": {k: int(v) for k, v in m.statuses.items()}}

    def _model_state(self) -> ModelState:
        state = super()._model_state()
        m = self.local_
        state.arrays["global_L"] = np.asarray(m.space.L, dtype=np.float64)
        if m.metrics is not None:
            state.arrays["local_metrics"] = np.asarray(m.metrics, dtype=np.float64)
        if m.references is not None:
            state.arrays["references"] = np.asarray(m.references, dtype=np.int64)
        return state

    def _restore_model_state(self, state: ModelState) -> None:
        self.set_params(**self._params_from_state(state))
        check_cell(self.how, self.where, self.when)
        X, y = state.array("X_train"), state.array("y_train")
        fitted = state.meta.get("fitted") or {}
        model = LocalMetrics(X, y, self.how.lower(), self.where.lower(), self.when.lower(),
                             {**DEFAULTS, **self._options()})
        L = state.array("global_L")
        if L.ndim != 2 or L.shape[1] != X.shape[1]:
            raise ModelStateError(f"global_L {L.shape} does not fit {X.shape[1]} features.")
        model.space = _Space(X, y, L)
        model.global_solution = state.solutions["solution"]
        model.metrics = state.arrays.get("local_metrics")
        model.references = state.arrays.get("references")
        model.sigma, model.mean_sq = fitted.get("sigma"), fitted.get("mean_sq")
        model.statuses = dict(fitted.get("statuses") or {})
        fit = FitResult(ClosedForm(X, y, "local metrics"), state.solutions["solution"], components=L,
                        certificate=state.certificate, n_iter=int(fitted.get("n_iter", 0)),
                        attributes={"local_": model, "column_": column_of(model.where, model.when), "components_": L,
                                    "classes_": model.classes})
        self._set_fitted(fit)
        self.n_features_in_ = X.shape[1]
