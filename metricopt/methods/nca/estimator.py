"""scikit-learn estimator for neighbourhood components analysis (NCA)."""

from __future__ import annotations

import time
import warnings
from numbers import Integral, Real
from typing import Any, Callable

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ...errors import InputError
from .problem import NCAProblem
from ...solution import Solution, Status
from ...estimators._params import SOLVE_CONSTRAINTS, Choices, Interval
from ...estimators.base import FitResult, MetricLearner

__all__ = ["NCA"]

#: L-BFGS steps move ``A`` by at most this fraction of its norm. NCA's softmax saturates as ``A`` grows
#: (each point keeps one neighbour, the gradient vanishes): long early steps end at such flat points.
#: Measured from the PCA start, 2-D maps (f: expected correct points, higher is better): letter (3,000
#: training points) f = 1330 / 1393 / 1479 for caps 1 / 0.1 / 0.03 (scikit-learn: 1411); digits (PCA 30)
#: f = 1014 / 1018 / 1038 (scikit-learn: 989); ``benchmarks/results/nca_anchors.md``
LBFGS_MAX_STEP = 0.03

#: ``backend="auto"`` runs the NumPy L-BFGS (:mod:`metricopt.methods.nca.numpy_path`) for ``solver="lbfgs"`` unless the
#: problem has ``n^2 r >= ACCELERATOR_WORK`` and JAX's default device is an accelerator (GPU, TPU). On a CPU the NumPy
#: path is the faster one at every size measured, warm JAX included (2 cores under a load of 5-7, Gaussian classes,
#: 30 L-BFGS iterations from the same start, ms per objective-and-gradient evaluation, NumPy / warm JAX; n x d -> r):
#: 150 x 4 -> 4: 0.52 / 0.78 (JAX's first fit compiles for 3 s); 500 x 16 -> 2: 1.6 / 5.9; 1000 x 30 -> 2: 7.3 / 22;
#: 1000 x 30 -> 30: 8.6 / 50; 2000 x 16 -> 2: 19 / 45; 2000 x 64 -> 64: 44 / 154; 4000 x 16 -> 2: 50 / 363;
#: 3000 x 100 -> 100: 172 / 444. On an accelerator nothing was measured (none was at hand); above this size (a NumPy
#: fit of seconds on a CPU, where a compilation is a small share) the JAX loop is kept there, as before the NumPy
#: path existed
ACCELERATOR_WORK = 1e7
#: the backends of :class:`NCA` (``backend=``)
NCA_BACKENDS = ("auto", "numpy", "jax")


class NCA(MetricLearner):
    r"""Neighbourhood components analysis (Goldberger, Roweis, Hinton & Salakhutdinov, NIPS 2004).

    Fits :class:`~metricopt.NCAProblem` by L-BFGS in NumPy (:mod:`metricopt.methods.nca.numpy_path`, no compilation) or on
    the JAX backend's loop:

    .. math::

        \max_{A \in \mathbb R^{r \times d}} \sum_i \sum_{j \in C_i} p_{ij}(A) \quad (f)
        \quad\text{or}\quad \sum_i \log \sum_{j \in C_i} p_{ij}(A) \quad (g),
        \qquad p_{ij} = \operatorname{softmax}_{j \ne i}\big(-\lVert A x_i - A x_j\rVert^2\big).

    Not convex: the result is a stationary point of the best of ``n_restarts`` starts (status
    ``stationary``, or ``iteration_limit`` where the solver ran out of iterations), never certified
    as optimal (``certificate_`` is None).

    Measured against scikit-learn's ``NeighborhoodComponentsAnalysis`` from the same PCA start, cold fits on 2
    shared cores (``benchmarks/results/nca_anchors.md``): digits PCA-30 (1257 points) to 2 dimensions in about
    half the time scikit-learn takes to converge (tol 1e-8), and in less than its defaults (50 iterations)
    take, at ``f`` = 1038 against 990 and 986; to 30 dimensions in 0.8 of scikit-learn's converged time at
    ``f`` = 1248 against 1247 (its defaults stop sooner, at 1245, in half our time); wine in 0.01-0.1 s.

    Parameters
    ----------
    n_components : int, optional
        Rows of ``A`` (the output dimension); default the number of features.
    objective : {"f", "g"}, default "f"
        Expected number of correctly classified points (Eq. 3; scikit-learn's
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
        L-BFGS (NumPy or JAX), trust-region Newton (Hessian-vector products by autodiff: few iterations,
        each costing up to one Hessian-vector product per variable), or nonlinear conjugate gradients (the
        paper's optimiser); the last two on the jitted JAX loop only. L-BFGS steps are capped at
        ``LBFGS_MAX_STEP`` (3 %) of ``||A||`` (see there) on either backend. CG reached its 2000-iteration
        limit on digits (PCA 30, r=2) after 70 s (``benchmarks/results/nca_anchors.md``).
    backend : {"auto", "numpy", "jax"}, default "auto"
        ``"numpy"``: the L-BFGS iteration in NumPy (:mod:`metricopt.methods.nca.numpy_path`; nothing to compile: iris in
        milliseconds in a fresh process, where the JAX loop first compiles for about a second), blocked
        value and gradient (:meth:`~metricopt.NCAProblem.value_and_gradient`); ``solver="lbfgs"`` only.
        ``"jax"``: the JAX backend's jitted loop (every solver; GPU). ``"auto"``: NumPy for
        ``solver="lbfgs"`` except for problems of ``n^2 r >= ACCELERATOR_WORK`` when JAX's default device is
        an accelerator; the JAX loop for the other solvers. On a CPU the NumPy path was the faster one at
        every size measured (``ACCELERATOR_WORK``). Both paths run the same iteration from the same start,
        test ``tol`` every 10 iterations (the JAX loop's re-checks) and report alike (``solution_.backend``
        says which ran): they differ by floating-point rounding only (wine: the same 80 iterations and ``f``).
    tol : float, optional
        Relative gradient norm ``||grad|| ||A|| / |objective|`` to stop at (default 1e-6).
    max_iter : int, optional
        Iterations per start (default 2000).
    random_state : int or None, default 0
        Seed of the random starts.
    verbose : bool, default False
        Print scikit-learn's NCA table (``[NCA]  Iteration  Objective Value  Time(s)``): the objective being
        maximised (``f`` or ``g``) at the start (iteration 0) and after every iteration, with the seconds
        it took; then the training time. On the JAX loop this re-checks the iterate at every iteration
        (slower), as ``callback`` does.
    warm_start : bool, default False
        Start the next ``fit`` from the ``components_`` of the previous one (as scikit-learn's
        ``warm_start``) when their shape is the one asked for; a previous fit on another number of
        features is refused.
    callback : callable, optional
        ``callback(transformation, n_iter)`` after every iteration (as scikit-learn's): the flattened
        ``(n_components * d,)`` current map (a diagonal one as its ``d x d`` matrix) and the iterations done.
        The NumPy path passes the iterate itself; the JAX loop, which reports the metric, a map with the
        iterate's ``M = A^T A`` (the iterate up to a rotation of its rows), and it re-checks the iterate at
        every iteration then (slower).
    time_limit : float, optional
        Wall-clock seconds for the fit, all starts together (:mod:`metricopt.options`); a start cut short
        reports status ``time_limit`` with the point it reached. Default: none.

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
        "backend": [Choices(*NCA_BACKENDS)],
        "time_limit": SOLVE_CONSTRAINTS["time_limit"],
    }

    def __init__(self, n_components: int | None = None, objective: str = "f", init: Any = "pca",
                 diagonal: bool = False, n_restarts: int = 1, solver: str = "lbfgs", tol: float | None = None,
                 max_iter: int | None = None, random_state: int | None = 0, verbose: bool = False,
                 warm_start: bool = False, callback: Any = None, backend: str = "auto",
                 time_limit: float | None = None) -> None:
        self.n_components = n_components
        self.objective = objective
        self.init = init
        self.diagonal = diagonal
        self.n_restarts = n_restarts
        self.solver = solver
        self.backend = backend
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.callback = callback
        self.time_limit = time_limit

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

    def _starts(self, problem: NCAProblem, table: "_Table | None" = None) -> list:
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

                t = time.perf_counter()
                if r > min(d, len(problem.classes) - 1):
                    raise InputError(f"init='lda' gives at most min(n_features, n_classes - 1) = "
                                     f"{min(d, len(problem.classes) - 1)} components; n_components is {r}. Use "
                                     "init='auto' or 'pca'.")
                lda = LinearDiscriminantAnalysis(n_components=r).fit(problem.X, problem.y)
                first = np.asarray(lda.scalings_, dtype=np.float64).T[:r]
                if first.shape[0] < r:  # rank-deficient within-class scatter: the top principal directions fill in
                    first = np.vstack([first, _principal(problem.X, r - first.shape[0])])
                if table is not None:
                    table.say(f"Finding most discriminative components... done in {time.perf_counter() - t:5.2f}s")
            else:  # pca: the top-r principal directions, as scikit-learn's init="pca"
                t = time.perf_counter()
                first = _principal(problem.X, r)
                if table is not None:
                    table.say(f"Finding principal components... done in {time.perf_counter() - t:5.2f}s")
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

    def _check_param_combination(self) -> None:
        if self.backend.lower() == "numpy" and self.solver.lower() != "lbfgs":
            raise InputError(f"backend='numpy' runs L-BFGS only; solver={self.solver!r} runs on the JAX loop: use "
                             "backend='jax' (or 'auto'), or solver='lbfgs'.")

    def _backend_for(self, problem: NCAProblem) -> str:
        """``backend`` resolved for ``problem`` (``"auto"``: see ``ACCELERATOR_WORK``)."""
        backend = self.backend.lower()
        if backend != "auto":
            return backend
        if self.solver.lower() != "lbfgs":
            return "jax"
        rank = problem.d if problem.diagonal else problem.n_components
        if problem.n ** 2 * rank < ACCELERATOR_WORK:
            return "numpy"
        return "jax" if _jax_on_accelerator() else "numpy"

    def _solve_options(self) -> dict[str, Any]:
        options = {"tol": 1e-6 if self.tol is None else float(self.tol),
                   "max_iter": 2000 if self.max_iter is None else int(self.max_iter)}
        if self.time_limit is not None:  # wall-clock seconds for all the starts together (metricopt.options)
            options["time_limit"] = float(self.time_limit)
        return options

    def _fit_solution(self, X: np.ndarray, y: np.ndarray, options: dict[str, Any]) -> FitResult:
        t0 = time.perf_counter()
        table = _Table(type(self).__name__) if self.verbose else None
        problem = self._make_problem(X, y)
        starts = self._starts(problem, table)
        if self._backend_for(problem) == "numpy":
            best, runs = self._solve_numpy(problem, starts, options, table)
        else:
            best, runs = self._solve_jax(problem, starts, options, table)
        if table is not None:
            table.end(time.perf_counter() - t0)
        if best.status is Status.ITERATION_LIMIT:
            warnings.warn(f"[{type(self).__name__}] NCA did not converge: {best.message}", ConvergenceWarning,
                          stacklevel=4)
        restarts = [{k: v for k, v in run.items() if k != "solution"} for run in runs]
        return FitResult(problem, best, certificate=None, attributes={"restarts_": restarts})

    def _solve_numpy(self, problem: NCAProblem, starts: list, options: dict[str, Any],
                     table: "_Table | None") -> tuple[Solution, list]:
        from .numpy_path import solve_from_starts

        call = self._iteration_hook(problem, starts, table, lambda info: np.asarray(info["L"]))
        return solve_from_starts(problem, starts, max_step=LBFGS_MAX_STEP, **options,
                                 **({} if call is None else {"callback": call}))

    def _solve_jax(self, problem: NCAProblem, starts: list, options: dict[str, Any],
                   table: "_Table | None") -> tuple[Solution, list]:
        from ...backends.jax import LBFGS
        from ...solving import solve_from_starts

        solver = self.solver.lower()
        options = {**options, "solver": LBFGS(max_step=LBFGS_MAX_STEP) if solver == "lbfgs" else solver,
                   "verbose": False}
        call = self._iteration_hook(problem, starts, table, lambda info: _map_of_metric(info["M"], problem))
        if call is not None:  # re-checked (and reported) after every iteration
            options.update(check_every=1, callback=call)
        return solve_from_starts(problem, starts, backend="jax", **options)

    def _iteration_hook(self, problem: NCAProblem, starts: list, table: "_Table | None",
                        current_map: Callable[[dict[str, Any]], np.ndarray]) -> Callable[[dict[str, Any]], None] | None:
        """The solvers' ``callback(info)`` (called at the start, iteration 0, and after every iteration) printing
        the verbose table and calling scikit-learn's ``callback(transformation, n_iter)`` with the iterate's
        ``(n_components, d)`` map flattened (``current_map(info)``; a diagonal map as its ``d x d`` matrix);
        ``None`` when there is neither."""
        user = self.callback
        if user is None and table is None:
            return None
        seen = [-1]  # the start under way

        def call(info: dict[str, Any]) -> None:
            it = int(info["iteration"])
            if table is not None:
                if it == 0:
                    seen[0] += 1
                    table.header(seen[0], len(starts), starts[min(seen[0], len(starts) - 1)][0])
                table.row(it, -float(info["objective"]), float(info["time"]))
            if user is not None and it > 0:
                A = current_map(info)
                if problem.diagonal and A.size == problem.d:
                    A = np.diag(A.ravel())
                user(A.ravel(), it)

        return call

    def _fitted_extras(self) -> dict[str, Any]:
        return {"effective_neighbours_": self.problem_.effective_neighbours(self.components_)}

    # ---------------------------------------------------------------- model-file state
    def _params_to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        params, arrays = super()._params_to_state()
        params["callback"] = None  # a function has no file form; a loaded model has none
        return params, arrays

    def _fitted_meta(self) -> dict[str, Any]:
        return {**super()._fitted_meta(), "restarts": self.restarts_}

    def _fit_from_state(self, problem: Any, state: Any) -> FitResult:
        fit = super()._fit_from_state(problem, state)
        fit.attributes["restarts_"] = (state.meta.get("fitted") or {}).get("restarts")
        return fit


def _principal(X: np.ndarray, r: int) -> np.ndarray:
    """The top-``r`` principal directions of ``X`` as the rows of an ``(r, d)`` array."""
    Xc = X - X.mean(axis=0)
    w, U = np.linalg.eigh(Xc.T @ Xc)
    return U[:, np.argsort(w)[::-1][:r]].T.copy()


def _map_of_metric(M: Any, problem: NCAProblem) -> np.ndarray:
    """An ``(n_components, d)`` map with the metric ``M = A^T A`` (the JAX loop reports ``M``): equal to the
    iterate up to a rotation of its rows; a diagonal problem's ``diag(sqrt(M_jj))``."""
    M = np.asarray(M, dtype=np.float64)
    if problem.diagonal:
        return np.diag(np.sqrt(np.maximum(np.diag(M), 0.0)))
    w, U = np.linalg.eigh(M)
    top = np.argsort(w)[::-1][: problem.n_components]
    return np.sqrt(np.maximum(w[top], 0.0))[:, None] * U[:, top].T


def _jax_on_accelerator() -> bool:
    """Whether JAX's default device is an accelerator (GPU, TPU); imports JAX."""
    import jax

    return jax.default_backend() != "cpu"


class _Table:
    """scikit-learn's NCA verbose output (``sklearn.neighbors.NeighborhoodComponentsAnalysis(verbose=1)``) with
    ``name`` in the brackets: a header per start, a line per iteration (the objective maximised and the seconds
    since the line before), the training time at the end."""

    HEADER = "{:>10} {:>20} {:>10}".format("Iteration", "Objective Value", "Time(s)")

    def __init__(self, name: str) -> None:
        self.name = name
        self.last = 0.0

    def say(self, text: str) -> None:
        print(text, flush=True)

    def header(self, index: int = 0, count: int = 1, start: str = "") -> None:
        """The table's header before start ``index`` of ``count`` (named ``start`` when there are several)."""
        if count > 1:
            self.say(f"[{self.name}] start {index + 1} of {count} ({start})")
        self.say(f"[{self.name}]\n[{self.name}] {self.HEADER}\n[{self.name}] {'-' * len(self.HEADER)}")
        self.last = 0.0

    def row(self, iteration: int, value: float, elapsed: float) -> None:
        """The line of ``iteration``: ``value`` and the seconds since the line before (``elapsed``: since the
        start's solve began)."""
        self.say("[{}] {:>10} {:>20.6e} {:>10.2f}".format(self.name, iteration, value, max(elapsed - self.last, 0.0)))
        self.last = elapsed

    def end(self, seconds: float) -> None:
        self.say("[{}] Training took {:8.2f}s.".format(self.name, seconds))
