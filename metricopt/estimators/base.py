"""Shared machinery of the scikit-learn estimators: one fit path, and model-file state.

Fitting (:func:`fit_estimator`, behind every estimator's ``fit``) is one sequence:

1. check the hyperparameters against the class's ``_parameter_constraints``
   (:func:`~metricopt.estimators._params.validate_parameters`), then ``_check_param_combination()``;
2. check ``X`` and ``y`` (metricopt's checks, then scikit-learn's ``validate_data``, which sets
   ``n_features_in_``);
3. ``_fit_solution(X, y, options)``: build the problem (``_make_problem``) and solve it with the
   estimator's backend and ``_solve_options()`` -- the hook the variants replace (multi-pass,
   low-rank and early-stopped LMNN, multi-metric LMNN's single-metric start);
4. refuse a solution without a metric (:class:`~metricopt.errors.SolverError`);
5. ``_set_fitted``: ``problem_``, ``solution_``, ``certificate_``, ``components_`` (estimators
   with a linear map), ``n_iter_``, then the estimator's own attributes (``_fitted_extras()``:
   POLA's ``threshold_``, kernel LMNN's ``embedding_``, ...).

Model files (:mod:`metricopt.io`) ask each estimator for its state (``_model_state()`` ->
:class:`ModelState`) and give it back on load (``_restore_model_state(state)``), which rebuilds
the problem from the stored arrays (``_problem_from_state``), collects the fitted result
(``_fit_from_state``) and sets it through the same ``_set_fitted``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, TypeVar

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import check_n_features, check_X, check_y
from ..errors import InputError, SolverError
from ..options import ESTIMATOR_OPTIONS
from ..protocols import ProblemLike
from ..solution import Solution
from ..solving import solve
from ._params import validate_parameters

__all__ = ["FitResult", "MetricLearner", "ModelState", "ModelStateError", "ProblemFitMixin", "check_fitted_input",
           "fit_estimator", "solve_options"]

_E = TypeVar("_E", bound="ProblemFitMixin")



class _FromSolution:
    """``FitResult.certificate``'s default: the certificate the solution carries."""

    def __repr__(self) -> str:
        return "<the solution's certificate>"


_FROM_SOLUTION: Any = _FromSolution()


def solve_options(estimator: Any) -> dict[str, Any]:
    """The solve options an estimator's parameters give: those of :data:`metricopt.options.ESTIMATOR_OPTIONS`
    (``solver``, ``tol``, ``solver_tol``, ``max_iter``, ``time_limit``, ``verbose``), with the meanings of
    :mod:`metricopt.options` on every backend.

    Only the options that are set are passed: ``None`` leaves the backend's own default (the table's), so
    that an estimator and ``metricopt.solve`` with the same backend run with the same defaults.

    Parameters
    ----------
    estimator : MetricLearner
        An estimator with a ``verbose`` attribute; each option of ``ESTIMATOR_OPTIONS`` it has is read.

    Returns
    -------
    dict of str to object
        ``{"verbose": bool(estimator.verbose)}`` and every other of those options whose value is not ``None``.
    """
    opts: dict[str, Any] = {"verbose": bool(estimator.verbose)}
    for name in ESTIMATOR_OPTIONS:
        value = getattr(estimator, name, None)
        if value is not None and name != "verbose":
            opts[name] = value
    return opts


@dataclasses.dataclass
class FitResult:
    """What one fit produced, before it becomes the estimator's fitted attributes.

    Attributes
    ----------
    problem : ProblemLike
        The problem ``predict`` and the certificate refer to (``problem_``).
    solution : Solution
        The solve that produced the metric (``solution_``).
    components : ndarray, optional
        The linear map (``components_``); default: ``solution.L``.
    certificate : Certificate or None, optional
        The estimator's certificate (``certificate_``); default: the solution's.
    n_iter : int, optional
        Iterations (``n_iter_``); default: ``solution.stats["iterations"]``.
    attributes : dict
        Further fitted attributes by name (e.g. ``passes_``), set after ``_fitted_extras()``.
    """

    problem: Any
    solution: Solution
    components: np.ndarray | None = None
    certificate: Any = _FROM_SOLUTION
    n_iter: int | None = None
    attributes: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.components is None:
            self.components = self.solution.L
        if self.certificate is _FROM_SOLUTION:
            self.certificate = self.solution.certificate
        if self.n_iter is None:
            self.n_iter = int(self.solution.stats.get("iterations", 0))


class ModelStateError(InputError):
    """A model file's stored state does not rebuild a fitted estimator (a missing array, shapes that do
    not fit); :mod:`metricopt.io` reports it as a corrupt file, naming the file."""


@dataclasses.dataclass
class ModelState:
    """An estimator's fitted state as a model file holds it.

    :mod:`metricopt.io` adds the container (format, version, checksums), the Solution form and
    the preprocessing. On save the estimator fills ``meta`` with its part of the file's
    metadata (``estimator``, ``params``, ``fitted``, ...) and ``arrays`` with its arrays; on load
    ``meta`` is the file's whole metadata (``meta["problem"]`` included) and ``arrays`` all of its
    arrays.

    Attributes
    ----------
    meta : dict
        JSON-ready metadata.
    arrays : dict of str to ndarray
    problem : ProblemLike or None
        The fitted problem (save only: the file records its method and description).
    solutions : dict of str to Solution or None
        ``"solution"`` (the fitted one) and any other the estimator keeps (e.g.
        ``"single_solution"``); each is stored under that metadata key with its arrays named with
        the key's prefix (``"single_solution"``: ``single_M``, ``single_L``). ``None`` is not stored.
    certificate : Certificate or None
        The estimator's certificate (``certificate_``).
    """

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]
    problem: Any = None
    solutions: dict[str, Solution | None] = dataclasses.field(default_factory=dict)
    certificate: Any = None

    def array(self, name: str) -> np.ndarray:
        """The stored array ``name``.

        Parameters
        ----------
        name : str
            The array's key in ``arrays`` (e.g. ``"X_train"``, ``"components"``).

        Returns
        -------
        ndarray
            ``arrays[name]`` (not copied).

        Raises
        ------
        ModelStateError
            When the file lacks it.
        """
        if name not in self.arrays:
            raise ModelStateError(f"array(s) {name} missing; the file was not written by metricopt.io.save_model or "
                                  "was edited. Fit and save the model again.")
        return self.arrays[name]


def fit_estimator(estimator: _E, X: ArrayLike, y: ArrayLike, **extra_options: Any) -> _E:
    """Fit ``estimator`` on ``X`` (n, d) and ``y`` (n,): the one fit path (see the module docstring).

    Parameters
    ----------
    estimator : ProblemFitMixin
    X, y : array-like
    **extra_options
        Solve options added to the estimator's own (the command line's ``time_limit``).

    Returns
    -------
    estimator

    Raises
    ------
    metricopt.errors.InputError
        For invalid hyperparameters or data (``UnknownOptionError`` for an unknown option).
    metricopt.errors.SolverError
        When the solve returns no metric.
    """
    name = type(estimator).__name__
    validate_parameters(estimator)
    estimator._check_param_combination()
    if y is None:
        raise InputError(f"{name} requires y to be passed, but the target y is None.")
    Xc = check_X(X)
    yc = check_y(y, Xc.shape[0])
    validate_data(estimator, _for_sklearn(X), _for_sklearn(y), dtype=np.float64)  # n_features_in_, feature_names_in_
    fit = estimator._fit_solution(Xc, yc, {**estimator._solve_options(), **extra_options})
    sol = fit.solution
    if sol.M is None:
        raise SolverError(f"{name} could not be fitted: status '{sol.status}': {sol.message}")
    estimator._set_fitted(fit)
    return estimator


def _for_sklearn(X: Any) -> Any:
    """``X`` (or ``y``) as scikit-learn's ``validate_data`` takes it: an ``np.matrix`` (which it refuses, and
    which :func:`~metricopt._validation.check_X` and ``check_y`` convert) as a plain array; anything else as it
    is (a DataFrame keeps its column names)."""
    return np.asarray(X) if isinstance(X, np.matrix) else X


def check_fitted_input(estimator: Any, X: ArrayLike) -> np.ndarray:
    """``X`` for a fitted estimator's ``predict`` / ``transform``: metricopt's checks
    (:func:`~metricopt._validation.check_X`: 2-D, non-empty, finite, real), the number of features seen
    at fit, then scikit-learn's feature-name checks; call it after ``check_is_fitted``.

    Parameters
    ----------
    estimator : estimator
        The fitted estimator (``n_features_in_``, and ``feature_names_in_`` where it was fitted on a DataFrame).
    X : array-like of shape (n_samples, n_features)
        The inputs to predict or transform.

    Returns
    -------
    ndarray of float64, shape (n_samples, n_features_in_)

    Raises
    ------
    metricopt.errors.InputError
        For NaN or infinite values, a 1-D or empty ``X``, or another number of features than at fit.
    """
    Xc = check_X(X)
    n_features = getattr(estimator, "n_features_in_", None)
    if n_features is not None:
        check_n_features(Xc, int(n_features), type(estimator).__name__)
    validate_data(estimator, _for_sklearn(X), reset=False, dtype=np.float64)
    return Xc


def regularizer_config(regularizer: Any) -> list[dict[str, Any]] | None:
    """The regularizer (a term, a list of terms or None) as JSON: ``[term.config(), ...]``.

    Parameters
    ----------
    regularizer : Term, list of Term or None
        An estimator's ``regularizer`` parameter.

    Returns
    -------
    list of dict or None
        ``[term.config(), ...]`` (one entry per term); ``None`` for ``None``.

    Raises
    ------
    metricopt.errors.InputError
        For a term without a file form (its ``config()`` is ``None`` or missing).
    """
    if regularizer is None:
        return None
    out = []
    for term in regularizer if isinstance(regularizer, (list, tuple)) else [regularizer]:
        config = term.config() if callable(getattr(term, "config", None)) else None
        if config is None:
            raise InputError(f"cannot save a model with the regularizer {term!r}: model files store only terms that "
                             "describe themselves by term.config() (e.g. metricopt.terms.Frobenius and "
                             "metricopt.terms.Trace); fit with such a regularizer to save the model.")
        out.append(config)
    return out


class ProblemFitMixin:
    """Fit = hyperparameter checks -> problem -> backend -> certificate; model-file state.

    The base of every metricopt estimator (see the module docstring for the sequence and the
    hooks). A subclass declares ``_parameter_constraints`` and implements ``_make_problem(X, y)``;
    it overrides the other hooks only where it differs.
    """

    #: parameter name -> constraints (any one satisfied), checked at fit
    _parameter_constraints: ClassVar[dict[str, list]] = {}
    #: whether the estimator is a linear map (``components_``, ``transform``)
    _linear_map: ClassVar[bool] = False
    #: metadata keys of the solutions its model files hold (see :class:`ModelState`)
    _model_solutions: ClassVar[tuple[str, ...]] = ("solution",)

    def fit(self: _E, X: ArrayLike, y: ArrayLike) -> _E:
        """Learn the metric from ``X`` and labels ``y`` (:func:`fit_estimator`: see the module docstring).

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
            For invalid hyperparameters or data (``y=None`` included).
        metricopt.errors.SolverError
            When the solve returns no metric.
        """
        return fit_estimator(self, X, y)

    # ---------------------------------------------------------------- fit hooks
    def _check_param_combination(self) -> None:
        """Checks that involve several hyperparameters (after each was checked on its own)."""

    def _make_problem(self, X: np.ndarray, y: np.ndarray) -> ProblemLike:  # pragma: no cover - abstract
        raise NotImplementedError

    def _solve_options(self) -> dict[str, Any]:
        return solve_options(self)

    def _fit_solution(self, X: np.ndarray, y: np.ndarray, options: dict[str, Any]) -> FitResult:
        """Build the problem on checked ``X``, ``y`` and solve it with ``options``."""
        problem = self._make_problem(X, y)
        return FitResult(problem, solve(problem, backend=self.backend, **options))

    def _fitted_extras(self) -> dict[str, Any]:
        """Fitted attributes derived from ``problem_``, ``solution_`` and ``components_``."""
        return {}

    def _set_fitted(self, fit: FitResult) -> None:
        self.problem_ = fit.problem
        self.solution_ = fit.solution
        self.certificate_ = fit.certificate
        if self._linear_map:
            self.components_ = fit.components
        self.n_iter_ = fit.n_iter
        for name, value in {**self._fitted_extras(), **fit.attributes}.items():
            setattr(self, name, value)

    # ---------------------------------------------------------------- model-file state
    def _fitted_meta(self) -> dict[str, Any]:
        return {"n_iter": int(self.n_iter_), "passes": False}

    def _training_inputs(self) -> np.ndarray:
        """The training inputs as ``fit`` received them (checked)."""
        return self.problem_.X

    def _model_state(self) -> ModelState:
        """The fitted state for a model file: hyperparameters (array values and regularizers in file
        form), training data and labels, target neighbours, the solution and the certificate."""
        problem = self.problem_
        params, arrays = self._params_to_state()
        arrays.update(X_train=self._training_inputs(), y_train=np.asarray(problem.y), classes=np.unique(problem.y))
        targets = getattr(problem, "target_neighbors", None)
        if targets is not None:
            arrays["target_neighbors"] = np.asarray(targets, dtype=np.int64)
        if hasattr(self, "feature_names_in_"):
            arrays["feature_names_in"] = np.asarray(self.feature_names_in_)
        meta = {"estimator": type(self).__name__, "params": params, "fitted": self._fitted_meta()}
        return ModelState(meta, arrays, problem, {"solution": self.solution_}, self.certificate_)

    def _params_to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        params = self.get_params(deep=False)
        arrays = {}
        if "regularizer" in params and not isinstance(params["regularizer"], str):  # terms (a name stays a name)
            params["regularizer"] = regularizer_config(params["regularizer"])
        for name, value in params.items():  # e.g. MultiMetricLMNN's clusters=array: stored as an array
            if isinstance(value, np.ndarray):
                arrays["param_" + name] = value
                params[name] = {"array": "param_" + name}
        return params, arrays

    def _params_from_state(self, state: ModelState) -> dict[str, Any]:
        from ..problems.terms import term_from_config

        params = dict(state.meta.get("params") or {})
        if isinstance(params.get("regularizer"), list):
            params["regularizer"] = [term_from_config(config) for config in params["regularizer"]]
        for name, value in params.items():
            if isinstance(value, dict) and set(value) == {"array"}:
                params[name] = state.array(value["array"])
        if "solver_tol" not in params and "solver_tol" in self.get_params(deep=False):
            params = self._params_before_shared_options(params)
        return params

    def _params_before_shared_options(self, params: dict[str, Any]) -> dict[str, Any]:
        """The parameters of a file written before the shared options (:mod:`metricopt.options`, issue 31), in
        today's names: an exact-backend fit's ``tol`` was then the conic solver's accuracy, now ``solver_tol``
        (``tol`` is the certified gap, left at its default)."""
        if params.get("backend") == "cvxpy" and params.get("tol") is not None:
            params = {**params, "solver_tol": params["tol"], "tol": None}
        return params

    def _problem_from_state(self, X: np.ndarray, y: np.ndarray, state: ModelState) -> ProblemLike:
        """The fitted problem rebuilt from the stored data (no neighbour or cluster search)."""
        return self._make_problem(X, y)

    def _fit_from_state(self, problem: ProblemLike, state: ModelState) -> FitResult:
        components = state.array("components") if self._linear_map else None
        n_iter = (state.meta.get("fitted") or {}).get("n_iter")
        return FitResult(problem, state.solutions["solution"], components=components, certificate=state.certificate,
                         n_iter=None if n_iter is None else int(n_iter))

    def _restore_model_state(self, state: ModelState) -> None:
        """Become the fitted estimator ``state`` describes (the inverse of :meth:`_model_state`).

        Raises
        ------
        ModelStateError
            For a missing array or stored shapes that do not fit the rebuilt problem.
        metricopt.errors.InputError
            When the stored hyperparameters or data do not rebuild the problem.
        """
        self.set_params(**self._params_from_state(state))
        X, y = state.array("X_train"), state.array("y_train")
        fit = self._fit_from_state(self._problem_from_state(X, y, state), state)
        _check_state_shapes(fit, self._linear_map)
        self._set_fitted(fit)
        self.n_features_in_ = X.shape[1]
        if "feature_names_in" in state.arrays:
            self.feature_names_in_ = state.arrays["feature_names_in"].astype(object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


def _check_state_shapes(fit: FitResult, linear_map: bool) -> None:
    d = fit.problem.d
    M, comp = fit.solution.M, fit.components if linear_map else None
    if M.shape != (d, d) or (comp is not None and (comp.ndim != 2 or comp.shape[1] != d)):
        shapes = f"M {M.shape}" + (f" and components {comp.shape}" if comp is not None else "")
        raise ModelStateError(f"{shapes} do not fit its problem with a {d} x {d} metric.")
    if comp is not None and (comp.dtype.kind != "f" or not np.all(np.isfinite(comp))):
        raise ModelStateError(f"components (dtype {comp.dtype}) must be a finite real matrix; the file was edited or "
                              "damaged. Fit and save the model again.")


class MetricLearner(ProblemFitMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Base class: a supervised Mahalanobis metric learner, a linear map ``x -> L x``.

    Subclasses declare ``_parameter_constraints`` and implement ``_make_problem(X, y)``;
    ``fit`` (:func:`fit_estimator`) builds the declarative problem, solves it with the chosen
    backend, keeps the :class:`~metricopt.Solution` (``solution_``) and its certificate
    (``certificate_``), and exposes ``components_`` (``L``, with ``M = L^T L``).
    ``get_feature_names_out()`` names the ``transform`` columns as scikit-learn's transformers do: the
    lower-case class name and the column number (``nca0``, ``nca1``, ...; one per row of ``components_``).
    """

    _linear_map = True

    @property
    def _n_features_out(self) -> int:
        """Columns of ``transform``'s output (scikit-learn's ``get_feature_names_out`` reads it)."""
        return int(self.components_.shape[0])

    def _model_state(self) -> ModelState:
        state = super()._model_state()
        state.arrays["components"] = np.asarray(self.components_, dtype=np.float64)
        return state

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Map ``X`` to the learned space: ``X @ components_.T`` (Euclidean there = ``d_M`` here).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs with the features seen at fit.

        Returns
        -------
        ndarray of shape (n_samples, n_components)
            ``X L^T``, one column per row of ``components_``; squared Euclidean distances there are
            ``d_M(x, x') = (x - x')^T M (x - x')`` with ``M = L^T L``.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        metricopt.errors.InputError
            For NaN or infinite values, a 1-D or empty ``X``, or another number of features than at fit.
        """
        check_is_fitted(self, "components_")
        return check_fitted_input(self, X) @ self.components_.T

    def get_mahalanobis_matrix(self) -> np.ndarray:
        """The learned PSD matrix ``M = components_.T @ components_``.

        Returns
        -------
        ndarray of shape (n_features, n_features)
            The metric ``M`` of ``solution_`` (symmetric positive semidefinite).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        """
        check_is_fitted(self, "components_")
        return self.solution_.M
