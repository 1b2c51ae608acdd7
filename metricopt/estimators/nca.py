"""scikit-learn estimator for neighbourhood components analysis (NCA)."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np

from ..backends.jax import LBFGS
from ..errors import InputError
from ..problems import NCAProblem
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
    init : {"pca", "identity", "random"} or array, default "pca"
        First start: the top principal directions (as scikit-learn's ``init="pca"``), the first
        ``n_components`` rows of the identity, a standard normal matrix, or an ``(n_components, d)``
        array (diagonal: a length-``d`` vector). Further restarts are random.
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
        "init": [Choices("pca", "identity", "random"), "array-like"],
        "diagonal": ["boolean"],
        "n_restarts": [Interval(Integral, 1, None, closed="left")],
        "solver": [Choices("newton", "lbfgs", "cg")],
        "tol": [None, Interval(Real, 0, None, closed="neither")],
        "max_iter": [None, Interval(Integral, 1, None, closed="left")],
        "random_state": [None, Interval(Integral, 0, None, closed="left")],
        "verbose": ["verbose"],
    }
    backend = "jax"

    def __init__(self, n_components: int | None = None, objective: str = "f", init: Any = "pca",
                 diagonal: bool = False, n_restarts: int = 1, solver: str = "lbfgs", tol: float | None = None,
                 max_iter: int | None = None, random_state: int | None = 0, verbose: bool = False) -> None:
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

    def _make_problem(self, X: np.ndarray, y: np.ndarray) -> NCAProblem:
        return NCAProblem(X, y, n_components=self.n_components, objective=self.objective, diagonal=self.diagonal)

    def _starts(self, problem: NCAProblem) -> list:
        r, d, diagonal = problem.n_components, problem.d, problem.diagonal
        rng = np.random.default_rng(self.random_state)
        random = lambda: rng.standard_normal((1, d) if diagonal else (r, d))
        if isinstance(self.init, str):
            kind = self.init.lower()
            if kind == "random":
                first = random()
            elif diagonal:
                first = np.ones((1, d))
            elif kind == "identity":
                first = np.eye(r, d)
            else:  # pca: the top-r principal directions, as scikit-learn's init="pca"
                Xc = problem.X - problem.X.mean(axis=0)
                w, U = np.linalg.eigh(Xc.T @ Xc)
                first = U[:, np.argsort(w)[::-1][:r]].T.copy()
        else:
            first = np.asarray(self.init, dtype=np.float64)
            want = (d,) if diagonal else (r, d)
            if first.shape != want and not (diagonal and first.shape == (1, d)):
                raise InputError(f"init must be 'pca', 'identity', 'random' or an array of shape {want}; got an "
                                 f"array of shape {first.shape}.")
            if not np.all(np.isfinite(first)):
                raise InputError("init contains NaN or infinite entries.")
        name = self.init.lower() if isinstance(self.init, str) else "array"
        return [(name, first)] + [("random", random()) for _ in range(self.n_restarts - 1)]

    def _solve_options(self) -> dict[str, Any]:
        solver = self.solver.lower()
        if solver == "lbfgs":
            solver = LBFGS(max_step=LBFGS_MAX_STEP)
        return {"solver": solver, "tol": 1e-6 if self.tol is None else self.tol,
                "max_iter": 2000 if self.max_iter is None else self.max_iter, "verbose": bool(self.verbose)}

    def _fit_solution(self, X: np.ndarray, y: np.ndarray, options: dict[str, Any]) -> FitResult:
        problem = self._make_problem(X, y)
        best, runs = solve_from_starts(problem, self._starts(problem), backend="jax", **options)
        restarts = [{k: v for k, v in run.items() if k != "solution"} for run in runs]
        return FitResult(problem, best, certificate=None, attributes={"restarts_": restarts})

    def _fitted_extras(self) -> dict[str, Any]:
        return {"effective_neighbours_": self.problem_.effective_neighbours(self.components_)}

    # ---------------------------------------------------------------- model-file state
    def _fitted_meta(self) -> dict[str, Any]:
        return {**super()._fitted_meta(), "restarts": self.restarts_}

    def _fit_from_state(self, problem: NCAProblem, state: Any) -> FitResult:
        fit = super()._fit_from_state(problem, state)
        fit.attributes["restarts_"] = (state.meta.get("fitted") or {}).get("restarts")
        return fit
