"""scikit-learn estimator for metric learning by neighbourhood gerrymandering."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.validation import check_is_fitted

from ..._validation import check_choice, check_y
from .inference import latent_knn_predict
from .cccp import cccp, sgd
from ...linalg import sq_dists
from .problem import GerrymanderingProblem
from ...estimators._params import SOLVE_CONSTRAINTS, Choices, Interval
from ...estimators.base import FitResult, MetricLearner, check_fitted_input

__all__ = ["GerrymanderingKNN"]


class GerrymanderingKNN(MetricLearner):
    r"""Metric learning by neighbourhood gerrymandering (Trivedi, McAllester & Shakhnarovich, NIPS 2014).

    Fits :class:`~metricopt.GerrymanderingProblem`,

    .. math::

        \min_{M \succeq 0} R(M) + C \sum_i \Big[\max_h \big(S_M(x_i, h) + \Lambda(y_i, y_h)\big)
        - \max_{h:\ y_i \text{ wins } h} S_M(x_i, h)\Big],
        \qquad S_M(x_i, h) = -\sum_{j \in h} d_M(x_i, x_j),

    over latent sets ``h`` of ``k`` other training points, with exact inference
    (:mod:`metricopt.methods.gerrymander.inference`). Not convex: the result is ``stationary`` (CCCP) or the best epoch
    end of SGD (``iteration_limit``), never certified optimal; with ``solver="cccp"`` each convex step
    is certified (``solution_.stats["step_gaps"]``).

    Parameters
    ----------
    k : int, default 3
        Latent set size and the kNN rule's ``k``.
    C : float, default 1.0
    lam : float, default 1.0
        Regulariser weight (``"frobenius"``: ``lam/2 ||M||_F^2``, i.e. the paper's ``lambda = lam / 2``).
    regularizer : {"frobenius", "trace", "identity"}, default "frobenius"
    solver : {"sgd", "cccp", "paper"}, default "sgd"
        Pegasos-style mini-batch SGD, CCCP with certified convex steps (exact backend; small data), or the
        paper's Algorithm 1 as printed (see :mod:`metricopt.methods.gerrymander.cccp`).
    inference : {"exact", "paper"}, default "exact"
        Exact inference, or the paper's greedy Algorithm 2 (SGD only; CCCP always infers exactly).
    init : {"identity", "zeros", "relieff"} or array, default "identity"
    loss : (R, R) array, optional
        Loss matrix over the sorted classes (default 0/1).
    max_iter : int, optional
        CCCP steps (default 50) or SGD epochs (default 10).
    batch_size : int, default 64
    tol : float, optional
        CCCP: relative decrease to stop at (default 1e-6).
    random_state : int, default 0
    verbose : bool, default False
    time_limit : float, optional
        Seconds for the whole fit (:mod:`metricopt.options`); default none.

    Attributes
    ----------
    components_, solution_, problem_, n_iter_
    certificate_ : None
    """

    _parameter_constraints = {
        "k": [Interval(Integral, 1, None, closed="left")],
        "C": [Interval(Real, 0, None, closed="neither")],
        "lam": [Interval(Real, 0, None, closed="neither")],
        "regularizer": [Choices("frobenius", "trace", "identity")],
        "solver": [Choices("sgd", "cccp", "paper")],
        "inference": [Choices("exact", "paper")],
        "init": [Choices("identity", "zeros", "relieff"), "array-like"],
        "loss": [None, "array-like"],
        "max_iter": [None, Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "tol": [None, Interval(Real, 0, None, closed="left")],
        "random_state": [None, Interval(Integral, 0, None, closed="left")],
        "verbose": ["verbose"],
        "time_limit": SOLVE_CONSTRAINTS["time_limit"],
    }
    backend = "cvxpy"

    def __init__(self, k: int = 3, C: float = 1.0, lam: float = 1.0, regularizer: str = "frobenius",
                 solver: str = "sgd", inference: str = "exact", init: Any = "identity", loss: Any = None,
                 max_iter: int | None = None, batch_size: int = 64, tol: float | None = None,
                 random_state: int | None = 0, verbose: bool = False, time_limit: float | None = None) -> None:
        self.k = k
        self.C = C
        self.lam = lam
        self.regularizer = regularizer
        self.solver = solver
        self.inference = inference
        self.init = init
        self.loss = loss
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.tol = tol
        self.random_state = random_state
        self.verbose = verbose
        self.time_limit = time_limit

    def _make_problem(self, X: np.ndarray, y: np.ndarray) -> GerrymanderingProblem:
        inference = "exact" if self.solver == "cccp" else self.inference
        return GerrymanderingProblem(X, y, k=self.k, C=self.C, lam=self.lam, regularizer=self.regularizer,
                                     loss=self.loss, inference=inference)

    def _solve_options(self) -> dict[str, Any]:
        return {} if self.time_limit is None else {"time_limit": self.time_limit}

    def _fit_solution(self, X: np.ndarray, y: np.ndarray, options: dict[str, Any]) -> FitResult:
        problem = self._make_problem(X, y)
        init = self.init if isinstance(self.init, str) else np.asarray(self.init, dtype=np.float64)
        if self.solver == "cccp":
            sol = cccp(problem, init=init, max_iter=50 if self.max_iter is None else self.max_iter,
                       tol=1e-6 if self.tol is None else self.tol, time_limit=options.get("time_limit"),
                       verbose=bool(self.verbose))
        else:
            sol = sgd(problem, init=init, method="pegasos" if self.solver == "sgd" else "paper",
                      n_epochs=10 if self.max_iter is None else self.max_iter, batch_size=self.batch_size,
                      random_state=self.random_state, verbose=bool(self.verbose), time_limit=options.get("time_limit"))
        return FitResult(problem, sol, components=problem.factor(sol.M), certificate=None)

    def predict(self, X: ArrayLike, rule: str = "knn") -> np.ndarray:
        """The paper's kNN rule under the learned metric: the majority of the ``k`` nearest training points,
        a tie broken by the nearest point of the tied classes (:func:`metricopt.methods.gerrymander.inference.latent_knn_predict`).

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
        check_is_fitted(self, "components_")
        X = check_fitted_input(self, X)
        L, problem = self.components_, self.problem_
        return latent_knn_predict(sq_dists(X @ L.T, problem.X @ L.T), problem.y, problem.k, classes=problem.classes)

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
    def _params_to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        params, arrays = super()._params_to_state()
        for name in ("init", "loss"):  # arrays given as lists are stored as arrays too
            value = params[name]
            if value is not None and not isinstance(value, (str, dict)):
                arrays["param_" + name] = np.asarray(value, dtype=np.float64)
                params[name] = {"array": "param_" + name}
        return params, arrays
