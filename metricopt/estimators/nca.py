"""scikit-learn estimator for neighbourhood components analysis (NCA)."""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..backends.jax import LBFGS
from ..errors import InputError
from ..problems import NCAProblem
from ..solution import Status
from ..solving import solve_from_starts
from ._params import Choices, Interval
from .base import FitResult, MetricLearner

__all__ = ["NCA"]

#: L-BFGS steps move ``A`` by at most this fraction of its norm. NCA's softmax saturates as ``A`` grows
#: (each point keeps one neighbour, the gradient vanishes): long early steps end at such flat points.
#: Measured from the PCA start, 2-D maps (f: expected correct points, higher is better): letter (3,000
#: training points) f = 1330 / 1393 / 1479 for caps 1 / 0.1 / 0.03 (scikit-learn: 1411); digits (PCA 30)
#: f = 1014 / 1018 / 1038 (scikit-learn: 989); ``benchmarks/results/nca_anchors.md``
LBFGS_MAX_STEP = 0.03


class NCA(MetricLearner):
    r"""Neighbourhood components analysis (Goldberger, Roweis, Hinton & Salakhutdinov, NIPS 2004).

    Fits :class:`~metricopt.NCAProblem` on the JAX backend's loop:

    .. math::

        \max_{A \in \mathbb R^{r \times d}} \sum_i \sum_{j \in C_i} p_{ij}(A) \quad (f)
        \quad\text{or}\quad \sum_i \log \sum_{j \in C_i} p_{ij}(A) \quad (g),
        \qquad p_{ij} = \operatorname{softmax}_{j \ne i}\big(-\lVert A x_i - A x_j\rVert^2\big).

    Not convex: the result is a stationary point of the best of ``n_restarts`` starts (status
    ``stationary``, or ``iteration_limit`` where the solver ran out of iterations), never certified
    as optimal (``certificate_`` is None).

    Parameters
    ----------
    n_components : int, optional
        Rows of ``A`` (the output dimension); default the number of features.
    objective : {"f", "g"}, default "f"
        Expected number of correctly classified points (Eq. 2; scikit-learn's
        ``NeighborhoodComponentsAnalysis`` maximises this one) or its log-likelihood form (Eq. 6).
    init : {"auto", "pca", "lda", "identity", "random"} or array, default "pca"
        First start, as scikit-learn's ``init``: the top principal directions (``"pca"``), the
        ``LinearDiscriminantAnalysis`` scalings (``"lda"``; needs ``n_components <= min(d, n_classes - 1)``),
        the first ``n_components`` rows of the identity, a standard normal matrix, or an
        ``(n_components, d)`` array (diagonal: a length-``d`` vector; with ``n_components=None`` the
        array's rows set it). ``"auto"``: ``"lda"`` when ``n_components <= min(d, n_classes - 1)``, else
        ``"pca"`` when ``n_components < min(d, n_samples)``, else ``"identity"``. With ``diagonal=True``
        every start but ``"random"`` and an array is the identity. Further restarts are random.
    diagonal : bool, default False
        Learn a diagonal ``A`` (feature weights).
    n_restarts : int, default 1
    solver : {"lbfgs", "newton", "cg"}, default "lbfgs"
        L-BFGS, trust-region Newton (Hessian-vector products by autodiff: few iterations, each costing
        up to one Hessian-vector product per variable), or nonlinear conjugate gradients (the paper's
        optimiser); all on the same jitted loop. L-BFGS steps are capped at ``LBFGS_MAX_STEP`` (3 %) of
        ``||A||`` (see there). CG reached its 2000-iteration limit on digits (PCA 30, r=2) after 70 s
        (``benchmarks/results/nca_anchors.md``).
    tol : float, optional
        Relative gradient norm ``||grad|| ||A|| / |objective|`` to stop at (default 1e-6).
    max_iter : int, optional
        Iterations per start (default 2000).
    random_state : int or None, default 0
        Seed of the random starts.
    verbose : bool, default False
    warm_start : bool, default False
        Start the next ``fit`` from the ``components_`` of the previous one (as scikit-learn's
        ``warm_start``) when their shape is the one asked for; a previous fit on another number of
        features is refused.
    callback : callable, optional
        ``callback(transformation, n_iter)`` after every iteration (as scikit-learn's): the flattened
        ``(n_components * d,)`` current map -- a map with the iterate's metric ``M = A^T A`` (equal to
        the iterate up to a rotation of its rows) -- and the iterations done. Setting it re-checks the
        iterate at every iteration (slower).

    Warns
    -----
    sklearn.exceptions.ConvergenceWarning
        When the best start stopped at ``max_iter`` without reaching ``tol``.

    Attributes
    ----------
    components_ : (n_components, d) ndarray
        The learned map ``A`` (``transform(X) = X @ components_.T``).
    solution_, problem_, n_iter_
    certificate_ : None
    restarts_ : list of dict
        Per start: name, objective, iterations, stationarity, status.
    effective_neighbours_ : float
        Mean perplexity of the learned stochastic neighbour distributions (how many neighbours a
        point votes with).
    """

    _parameter_constraints = {
        "n_components": [None, Interval(Integral, 1, None, closed="left")],
        "objective": [Choices("f", "g")],
        "init": [Choices("auto", "pca", "lda", "identity", "random"), "array-like"],
        "diagonal": ["boolean"],
        "n_restarts": [Interval(Integral, 1, None, closed="left")],
        "solver": [Choices("newton", "lbfgs", "cg")],
        "tol": [None, Interval(Real, 0, None, closed="neither")],
        "max_iter": [None, Interval(Integral, 1, None, closed="left")],
        "random_state": [None, Interval(Integral, 0, None, closed="left")],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
        "callback": [None, callable],
    }
    backend = "jax"

    def __init__(self, n_components: int | None = None, objective: str = "f", init: Any = "pca",
                 diagonal: bool = False, n_restarts: int = 1, solver: str = "lbfgs", tol: float | None = None,
                 max_iter: int | None = None, random_state: int | None = 0, verbose: bool = False,
                 warm_start: bool = False, callback: Any = None) -> None:
        self.n_components = n_components
        self.objective = objective
        self.init = init
        self.diagonal = diagonal
        self.n_restarts = n_restarts
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.callback = callback

    def _make_problem(self, X: np.ndarray, y: np.ndarray) -> NCAProblem:
        r = self.n_components
        if r is None and not self.diagonal and not isinstance(self.init, str):  # as scikit-learn: init's rows
            init = np.asarray(self.init)
            if init.ndim == 2 and 1 <= init.shape[0] <= X.shape[1]:
                r = init.shape[0]
        return NCAProblem(X, y, n_components=r, objective=self.objective, diagonal=self.diagonal)

    def _warm(self, problem: NCAProblem) -> np.ndarray | None:
        """The previous fit's map as this fit's first start (``warm_start``), when its shape fits."""
        previous = getattr(self, "components_", None) if self.warm_start else None
        if previous is None:
            return None
        previous = np.asarray(previous, dtype=np.float64)
        if previous.shape[1] != problem.d:
            raise InputError(f"The new inputs dimensionality ({problem.d}) does not match the input dimensionality "
                             f"of the previously learned transformation ({previous.shape[1]}).")
        if problem.diagonal:
            return np.diag(previous)[None, :].copy() if previous.shape == (problem.d, problem.d) else None
        return previous.copy() if previous.shape == (problem.n_components, problem.d) else None

    def _init_kind(self, problem: NCAProblem) -> str:
        """``init`` as a start's name; ``"auto"`` resolved as scikit-learn's ``_initialize`` does."""
        kind = self.init.lower()
        if kind != "auto":
            return kind
        r, (n, d) = problem.n_components, problem.X.shape
        if r <= min(d, len(problem.classes) - 1):
            return "lda"
        return "pca" if r < min(d, n) else "identity"

    def _starts(self, problem: NCAProblem) -> list:
        r, d, diagonal = problem.n_components, problem.d, problem.diagonal
        rng = np.random.default_rng(self.random_state)
        random = lambda: rng.standard_normal((1, d) if diagonal else (r, d))
        warm = self._warm(problem)
        if warm is not None:
            return [("warm", warm)] + [("random", random()) for _ in range(self.n_restarts - 1)]
        if isinstance(self.init, str):
            kind = self._init_kind(problem)
            if kind == "random":
                first = random()
            elif diagonal:
                first = np.ones((1, d))
            elif kind == "identity":
                first = np.eye(r, d)
            elif kind == "lda":  # scikit-learn's init="lda": the discriminant directions
                from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

                if r > min(d, len(problem.classes) - 1):
                    raise InputError(f"init='lda' gives at most min(n_features, n_classes - 1) = "
                                     f"{min(d, len(problem.classes) - 1)} components; n_components is {r}. Use "
                                     "init='auto' or 'pca'.")
                lda = LinearDiscriminantAnalysis(n_components=r).fit(problem.X, problem.y)
                first = np.asarray(lda.scalings_, dtype=np.float64).T[:r]
                if first.shape[0] < r:  # rank-deficient within-class scatter: the top principal directions fill in
                    first = np.vstack([first, _principal(problem.X, r - first.shape[0])])
            else:  # pca: the top-r principal directions, as scikit-learn's init="pca"
                first = _principal(problem.X, r)
        else:
            first = np.asarray(self.init, dtype=np.float64)
            want = (d,) if diagonal else (r, d)
            if first.shape != want and not (diagonal and first.shape == (1, d)):
                raise InputError(f"init must be 'auto', 'pca', 'lda', 'identity', 'random' or an array of shape "
                                 f"{want}; got an array of shape {first.shape}.")
            if not np.all(np.isfinite(first)):
                raise InputError("init contains NaN or infinite entries.")
        name = self._init_kind(problem) if isinstance(self.init, str) else "array"
        return [(name, first)] + [("random", random()) for _ in range(self.n_restarts - 1)]

    def _solve_options(self) -> dict[str, Any]:
        solver = self.solver.lower()
        if solver == "lbfgs":
            solver = LBFGS(max_step=LBFGS_MAX_STEP)
        options = {"solver": solver, "tol": 1e-6 if self.tol is None else float(self.tol),
                   "max_iter": 2000 if self.max_iter is None else int(self.max_iter), "verbose": bool(self.verbose)}
        return options

    def _loop_callback(self, user: Any, r: int, diagonal: bool) -> Any:
        """The JAX loop's ``callback(info)`` calling scikit-learn's ``callback(transformation, n_iter)`` with an
        ``r x d`` map of the iterate's metric."""

        def call(info: dict[str, Any]) -> None:
            it = int(info["iteration"])
            if it == 0:  # the start, before any iteration
                return None
            M = np.asarray(info["M"], dtype=np.float64)
            if diagonal:
                A = np.diag(np.sqrt(np.maximum(np.diag(M), 0.0)))
            else:
                w, U = np.linalg.eigh(M)
                top = np.argsort(w)[::-1][:r]
                A = np.sqrt(np.maximum(w[top], 0.0))[:, None] * U[:, top].T
            user(A.ravel(), it)
            return None

        return call

    def _fit_solution(self, X: np.ndarray, y: np.ndarray, options: dict[str, Any]) -> FitResult:
        problem = self._make_problem(X, y)
        if self.callback is not None:  # scikit-learn's callback(transformation, n_iter), after every iteration
            options = {**options, "check_every": 1,
                       "callback": self._loop_callback(self.callback, problem.n_components, problem.diagonal)}
        best, runs = solve_from_starts(problem, self._starts(problem), backend="jax", **options)
        if best.status is Status.ITERATION_LIMIT:
            warnings.warn(f"[{type(self).__name__}] NCA did not converge: {best.message}", ConvergenceWarning,
                          stacklevel=4)
        restarts = [{k: v for k, v in run.items() if k != "solution"} for run in runs]
        return FitResult(problem, best, certificate=None, attributes={"restarts_": restarts})

    def _fitted_extras(self) -> dict[str, Any]:
        return {"effective_neighbours_": self.problem_.effective_neighbours(self.components_)}

    # ---------------------------------------------------------------- model-file state
    def _params_to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        params, arrays = super()._params_to_state()
        params["callback"] = None  # a function has no file form; a loaded model has none
        return params, arrays

    def _fitted_meta(self) -> dict[str, Any]:
        return {**super()._fitted_meta(), "restarts": self.restarts_}

    def _fit_from_state(self, problem: NCAProblem, state: Any) -> FitResult:
        fit = super()._fit_from_state(problem, state)
        fit.attributes["restarts_"] = (state.meta.get("fitted") or {}).get("restarts")
        return fit


def _principal(X: np.ndarray, r: int) -> np.ndarray:
    """The top-``r`` principal directions of ``X`` as the rows of an ``(r, d)`` array."""
    Xc = X - X.mean(axis=0)
    w, U = np.linalg.eigh(Xc.T @ Xc)
    return U[:, np.argsort(w)[::-1][:r]].T.copy()
