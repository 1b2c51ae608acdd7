r"""Validation and early stopping for LMNN on the JAX backend.

Weinberger & Saul (*Distance Metric Learning for Large Margin Nearest Neighbor
Classification*, JMLR 10:207-244, 2009, Section 4, the experiments on face images) held
out part of the training set and stopped training at the lowest error on that held-out
part. This module does the same with the first-order solver of
:func:`metricopt.backends.jax.solve`:

1. the training set :math:`(X, y)` is split, stratified, into a *fit* part
   :math:`F` and a *validation* part :math:`V` (:func:`metricopt.datasets.validation_split`);
2. the LMNN problem (JMLR 2009, Eq. 14) is built on the fit part only,

   .. math::

       \min_{M \succeq 0}\; (1-\mu) \sum_{i \in F,\, j \rightsquigarrow i} d_M(x_i, x_j)
       + \mu \sum_{i \in F,\, j \rightsquigarrow i} \sum_{l \in F:\, y_l \ne y_i}
         \big[1 + d_M(x_i, x_j) - d_M(x_i, x_l)\big]_+ \;+\; R(M),

   and solved by the JAX backend; at each of its re-checks (iterate :math:`M_t`) the
   validation error

   .. math::

       e_t = \frac{1}{|V|} \sum_{v \in V} \mathbb{1}\big[\hat y_{M_t}(x_v) \ne y_v\big]

   is computed, :math:`\hat y_M` being the k-NN rule under :math:`d_M` with the fit part as
   the reference set (:func:`metricopt.knn_error`, ``rule="knn"``) or the energy rule
   (Eq. 15, :func:`metricopt.methods.lmnn.energy.energy_predict`, ``rule="energy"``);
3. the metric returned is :math:`M_{t^\*}` with :math:`t^\* = \min \arg\min_t e_t` (the
   earliest of the lowest), and the solve stops once ``patience`` consecutive re-checks
   have not lowered the best error.

:math:`M_{t^\*}` minimises a validation error, not the training objective: the returned
:class:`~metricopt.solution.Solution` carries its exact objective and its own duality-gap
certificate, with status ``early_stopped`` unless that certificate proves it optimal
within ``tol``.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._deadline import Budget
from ..._validation import check_choice, check_int, check_real, check_X, check_y
from ...errors import InputError
from ...solution import Solution, Status

__all__ = ["EarlyStopping", "ValidationCurve", "fit_with_validation"]

RULES = ("knn", "energy")


@dataclass
class ValidationCurve:
    """The validation error at every re-check of a solve.

    Attributes
    ----------
    iterations, times, objectives, rel_gaps, errors : ndarray
        Per re-check: the solver's iteration count, seconds since the start, the exact
        training objective, the certified relative gap (NaN where none was taken) and the
        validation error.
    best_index : int
        Index of the re-check with the lowest validation error (the earliest of equals);
        -1 when there was no re-check.
    rule : str
        ``"knn"`` or ``"energy"``.
    k : int
        Neighbours of the validation rule.
    fit_idx, val_idx : ndarray of int or None
        Rows of the training set used for fitting and for validation
        (set by :func:`fit_with_validation`).
    """

    iterations: np.ndarray
    times: np.ndarray
    objectives: np.ndarray
    rel_gaps: np.ndarray
    errors: np.ndarray
    best_index: int
    rule: str
    k: int
    fit_idx: np.ndarray | None = None
    val_idx: np.ndarray | None = None

    @property
    def best_iteration(self) -> int | None:
        """The solver's iteration of the best re-check (``None`` without re-checks)."""
        return int(self.iterations[self.best_index]) if self.best_index >= 0 else None

    @property
    def best_error(self) -> float | None:
        """The lowest validation error (``None`` without re-checks)."""
        return float(self.errors[self.best_index]) if self.best_index >= 0 else None


class EarlyStopping:
    r"""A callback for ``problem.solve(backend="jax", callback=...)`` that tracks a validation error.

    At every re-check of the solve (iterate :math:`M_t`) it computes the validation error
    :math:`e_t` (the fraction of ``X_val`` misclassified by the k-NN rule, or the LMNN energy
    rule of Weinberger & Saul, JMLR 2009, Eq. 15, with ``(X_train, y_train)`` as reference
    set), keeps the metric with the lowest :math:`e_t` (the earliest of equal errors) and
    asks the solve to stop once ``patience`` consecutive re-checks brought no strictly lower
    error. After the solve, :meth:`finish` turns the backend's Solution into the one of the
    kept metric (objective and certificate recomputed for it).

    Parameters
    ----------
    X_train, y_train : arrays
        The reference set of the validation rule: the data the metric is fitted on.
    X_val, y_val : arrays
        The held-out validation points.
    k : int, default 3
        Neighbours of the rule (use the problem's ``k``).
    patience : int, default 10
        Re-checks without improvement after which the solve is stopped. Re-checks are
        ``check_every`` iterations apart (the FISTA solver lengthens the interval, up to
        8 times, while no new violated triplet appears).
    rule : {"knn", "energy"}, default "knn"
    mu : float, default 0.5
        Push weight of the energy rule (the problem's ``mu``).
    train_targets : (n_train, k) int array, optional
        Target neighbours of the reference points for the energy rule (the problem's).

    Attributes
    ----------
    records : list of dict
        Per re-check: ``iteration``, ``time``, ``objective``, ``rel_gap``, ``error``.
    best_M, best_variables, best_iteration, best_error, best_index
        The kept metric (and other variables), where it was found and its error.
    wait : int
        Re-checks since the last improvement.
    stop_requested : bool
        Whether the callback asked the solve to stop.

    Examples
    --------
    >>> es = EarlyStopping.for_problem(problem, X_val, y_val, patience=5)   # doctest: +SKIP
    >>> sol = es.finish(problem, problem.solve(backend="jax", callback=es))  # doctest: +SKIP
    """

    def __init__(self, X_train, y_train, X_val, y_val, k=3, patience=10, rule="knn", mu=0.5, train_targets=None):
        self.X_train = check_X(X_train, "X_train")
        self.y_train = check_y(y_train, self.X_train.shape[0], "y_train")
        self.X_val = check_X(X_val, "X_val")
        self.y_val = check_y(y_val, self.X_val.shape[0], "y_val")
        if self.X_val.shape[1] != self.X_train.shape[1]:
            raise InputError(
                f"X_val has {self.X_val.shape[1]} features but X_train has {self.X_train.shape[1]}; "
                "validation points must live in the space of the training points."
            )
        self.k = check_int(k, "k", low=1)
        self.patience = check_int(patience, "patience", low=1)
        self.rule = check_choice(str(rule).lower(), "rule", RULES)
        self.mu = float(mu)
        self.train_targets = train_targets
        self.records = []
        self.best_M, self.best_variables, self.best_iteration = None, {}, None
        self.best_error, self.best_index = np.inf, -1
        self.wait, self.stop_requested = 0, False

    @classmethod
    def for_problem(cls, problem: Any, X_val: ArrayLike, y_val: ArrayLike, patience: int = 10,
                    rule: str = "knn") -> EarlyStopping:
        """An EarlyStopping whose reference set, ``k``, ``mu`` and target neighbours are the problem's.

        Parameters
        ----------
        problem : Problem
            A labelled problem (its ``X``, ``y``, ``k``, ``mu``, ``target_neighbors``).
        X_val : (m, d) array_like
            The validation points.
        y_val : (m,) array_like
            Their labels.
        patience : int, default 10
            Re-checks without improvement after which the solve is stopped.
        rule : {"knn", "energy"}, default "knn"
            The validation rule.

        Returns
        -------
        EarlyStopping
            The callback.

        Raises
        ------
        InputError
            For a problem without labels or invalid validation data.
        """
        if getattr(problem, "y", None) is None:
            raise InputError(f"early stopping on a validation error needs a labelled problem; {problem.method} has no y.")
        return cls(problem.X, problem.y, X_val, y_val, k=getattr(problem, "k", 3), patience=patience, rule=rule,
                   mu=getattr(problem, "mu", 0.5), train_targets=getattr(problem, "target_neighbors", None))

    def error(self, M: ArrayLike) -> float:
        """The validation error of the rule at metric ``M``.

        Parameters
        ----------
        M : (d, d) array_like
            The metric.

        Returns
        -------
        float
            The fraction of ``X_val`` misclassified.
        """
        if self.rule == "knn":
            from ...knn import knn_error

            return knn_error(self.X_train, self.y_train, self.X_val, self.y_val, self.k, M=M)
        from .energy import energy_predict

        pred = energy_predict(self.X_train, self.y_train, self.X_val, self.k, self.mu, M=M,
                              train_targets=self.train_targets)
        return float(np.mean(pred != self.y_val))

    def __call__(self, info):
        err = self.error(info["M"])
        self.records.append({"iteration": int(info["iteration"]), "time": float(info["time"]),
                             "objective": float(info["objective"]), "rel_gap": info.get("rel_gap"), "error": err})
        if err < self.best_error:  # strict: of equal errors the earliest is kept
            self.best_error, self.best_index = err, len(self.records) - 1
            self.best_M, self.best_iteration = np.array(info["M"], dtype=np.float64), int(info["iteration"])
            self.best_variables = dict(info.get("variables") or {})
            self.wait = 0
        else:
            self.wait += 1
        self.stop_requested = self.wait >= self.patience
        return self.stop_requested

    def curve(self) -> ValidationCurve:
        """The recorded :class:`ValidationCurve`.

        Returns
        -------
        ValidationCurve
            The validation errors at every re-check so far.
        """
        col = lambda key, dtype=float: np.array([r[key] for r in self.records], dtype=dtype)
        gaps = np.array([np.nan if r["rel_gap"] is None else r["rel_gap"] for r in self.records], dtype=float)
        return ValidationCurve(iterations=col("iteration", np.int64), times=col("time"), objectives=col("objective"),
                               rel_gaps=gaps, errors=col("error"), best_index=self.best_index, rule=self.rule,
                               k=self.k)

    def finish(self, problem: Any, solution: Solution) -> Solution:
        """The Solution of the kept metric, from the backend's ``solution`` of the same solve.

        Where the backend returned another point (its last iterate on a stop requested here, a
        certified optimum reached before ``patience`` ran out, or the best-objective iterate at
        the iteration limit), the kept metric's exact objective and certificate (with the
        solve's ``tol``) are computed; its status is then ``early_stopped`` (``time_limit`` where the
        solve's time limit ended it), or ``optimal`` when the certificate proves it optimal within ``tol``.
        Under a deadline (:mod:`metricopt._deadline`) that certificate's conic programs stay within it.
        ``stats`` gain ``validation_errors``,
        ``validation_iterations``, ``best_validation_error``, ``best_validation_iteration``,
        ``validation_rule``, ``patience`` and ``stopped_early``; ``best_iteration`` becomes the
        iteration of the returned metric.

        Parameters
        ----------
        problem : Problem
            The problem solved.
        solution : Solution
            The backend's solution of the solve that used this callback.

        Returns
        -------
        Solution
            The solution of the kept metric (``solution`` itself, with the validation stats, when it is that
            metric).
        """
        from ...certify import certify, policy
        from ...certify.policy import Outcome, SolverReport

        stats = dict(solution.stats)
        stats.update({
            "validation_errors": [r["error"] for r in self.records],
            "validation_iterations": [r["iteration"] for r in self.records],
            "best_validation_error": None if self.best_index < 0 else float(self.best_error),
            "best_validation_iteration": self.best_iteration,
            "validation_rule": self.rule,
            "patience": self.patience,
            "stopped_early": self.stop_requested,
        })
        if self.best_M is None or not solution.status.has_point or solution.M is None:
            return dataclasses.replace(solution, stats=stats)
        same = np.array_equal(self.best_M, solution.M) and all(
            solution.variables.get(k) == v for k, v in self.best_variables.items())
        if same:
            return dataclasses.replace(solution, stats=stats)
        tol = solution.certificate.tol if solution.certificate is not None else 1e-6
        cert = certify(problem, self.best_M, tol=tol, **self.best_variables)
        stats["certify_calls"] = stats.get("certify_calls", 0) + 1
        stats["certificate_rel_gap"] = cert.rel_gap
        stats["best_iteration"] = self.best_iteration
        ended = f"the solve ended with '{solution.status}' at iteration {stats.get('iterations')}"
        # a solve the time limit ended (patience not run out) keeps that status for the metric kept here
        kept = Outcome.TIME_LIMIT if solution.status is Status.TIME_LIMIT else Outcome.STOPPED
        status, _ = policy.decide(SolverReport(kept), cert, convex=problem.is_convex)
        if status is Status.OPTIMAL:
            detail = (f"lowest validation error {self.best_error:.4g} at iteration {self.best_iteration}; {ended}; "
                      f"the certificate of this metric proves optimality (relative gap {cert.rel_gap:.2e})")
        else:
            detail = (f"kept the metric of the lowest validation error {self.best_error:.4g} (iteration "
                      f"{self.best_iteration}); {ended}; certified relative gap {cert.rel_gap:.2e}")
        return Solution(M=self.best_M, objective=float(problem.objective(self.best_M, **self.best_variables)),
                        status=status, backend=solution.backend, solver=solution.solver, stats=stats,
                        variables=dict(self.best_variables), message=f"{status.message} ({detail})",
                        certificate=cert)


def _check_fraction(value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not 0.0 < float(value) < 1.0:
        raise InputError(
            f"validation_fraction must be a fraction strictly between 0 and 1 (the share of the training set held "
            f"out for validation, e.g. 0.2); got {value!r}."
        )
    return float(value)


def fit_with_validation(X: ArrayLike, y: ArrayLike, k: int = 3, mu: float = 0.5, regularizer: Any = None, *,
                        problem_factory: Any = None, validation_fraction: float = 0.2, patience: int = 10,
                        rule: str = "knn", random_state: Any = 0, backend: str = "jax", **jax_options: Any) -> Solution:
    r"""Fit LMNN on part of ``(X, y)`` and keep the metric of lowest validation error.

    Splits ``(X, y)`` (stratified, :func:`metricopt.datasets.validation_split` with seed
    ``random_state``) into a fit part :math:`F` and a validation part :math:`V` of
    ``validation_fraction`` of the points, solves LMNN (Weinberger & Saul, JMLR 10:207-244,
    2009, Eq. 14) on :math:`F`,

    .. math::

        \min_{M \succeq 0}\; (1-\mu) \sum_{i \in F,\, j \rightsquigarrow i} d_M(x_i, x_j)
        + \mu \sum_{i \in F,\, j \rightsquigarrow i} \sum_{l \in F:\, y_l \ne y_i}
          \big[1 + d_M(x_i, x_j) - d_M(x_i, x_l)\big]_+ \;+\; R(M),

    with the JAX backend, computes the validation error :math:`e_t` of the iterate
    :math:`M_t` at every re-check (k-NN rule with the problem's ``k`` and :math:`F` as
    reference set, or the energy rule, Eq. 15) and returns :math:`M_{t^\*}`,
    :math:`t^\* = \min\arg\min_t e_t`, stopping once ``patience`` re-checks in a row did not
    lower the best error -- the protocol of the paper's face experiments (Section 4), where part
    of the training set was held out and training stopped at the lowest validation error.
    See :mod:`metricopt.methods.lmnn.early_stopping`.

    Parameters
    ----------
    X : (n, d) array_like
    y : (n,) array_like
    k, mu, regularizer
        Of the :class:`~metricopt.LMNNProblem` built on the fit part (ignored with ``problem_factory``).
    problem_factory : callable, optional
        ``problem_factory(X_fit, y_fit) -> problem`` (e.g. an LMNNProblem with other options);
        the validation rule then uses the problem's ``k`` (and ``mu`` for the energy rule).
    validation_fraction : float in (0, 1), default 0.2
    patience : int, default 10
        Re-checks without a lower validation error before stopping.
    rule : {"knn", "energy"}, default "knn"
    random_state : int, default 0
        Seed of the split.
    backend : {"jax"}
        Only the JAX backend exposes its iterates.
    **jax_options
        Options of :func:`metricopt.backends.jax.solve` (``tol``, ``max_iter``, ``time_limit``,
        ``check_every``, ...), except ``callback``. ``time_limit`` bounds the whole call (the split, the
        solve with its validation errors, the kept metric's certificate): it returns within
        ``max(1.1 time_limit, time_limit + 5 s)`` (:mod:`metricopt._deadline`).

    Returns
    -------
    solution : Solution
        The kept metric, its exact objective on the fit part and its certificate; status
        ``early_stopped`` unless the certificate proves it optimal (see
        :meth:`EarlyStopping.finish` for the added ``stats``).
    curve : ValidationCurve
        The validation error at every re-check, with ``fit_idx`` and ``val_idx``.

    Raises
    ------
    InputError
        ``validation_fraction`` outside (0, 1), a class with fewer than ``k + 1`` points left
        in the fit part, a backend other than ``"jax"``, a ``callback`` option, bad ``patience``
        or ``rule``.
    """
    if str(backend).lower() != "jax":
        raise InputError(
            f"fit_with_validation needs backend='jax': early stopping follows the iterates of a first-order solve, "
            f"and the exact backend ({backend!r}) returns only its final point; got backend={backend!r}."
        )
    if "callback" in jax_options:
        raise InputError(
            "fit_with_validation installs its own callback; to combine it with yours, build "
            "metricopt.methods.lmnn.early_stopping.EarlyStopping.for_problem(...) and call it from your callback, then "
            "EarlyStopping.finish(problem, solution)."
        )
    time_limit = jax_options.get("time_limit")
    if time_limit is not None:
        time_limit = check_real(time_limit, "time_limit", low=0.0, low_open=True)
    budget = Budget.start(time_limit)
    with budget.running():
        return _fit_with_validation(X, y, k, mu, regularizer, problem_factory, validation_fraction, patience, rule,
                                    random_state, jax_options, budget)


def _fit_with_validation(X, y, k, mu, regularizer, problem_factory, validation_fraction, patience, rule,
                         random_state, jax_options, budget):
    """:func:`fit_with_validation` within ``budget`` (its deadlines in force)."""
    from ...datasets import validation_split
    from .problem import LMNNProblem

    validation_fraction = _check_fraction(validation_fraction)
    patience = check_int(patience, "patience", low=1)
    rule = check_choice(str(rule).lower(), "rule", RULES)
    X = check_X(X)
    y = check_y(y, X.shape[0])
    if problem_factory is None:
        k = check_int(k, "k", low=1)
    elif not callable(problem_factory):
        raise InputError(f"problem_factory must be a callable problem_factory(X_fit, y_fit) -> problem; "
                         f"got {problem_factory!r}.")
    fit_idx, val_idx = validation_split(y, fraction=validation_fraction, seed=random_state)
    if problem_factory is None:
        classes, counts = np.unique(y[fit_idx], return_counts=True)
        small = counts < k + 1
        if np.any(small):
            detail = ", ".join(f"{c.item() if isinstance(c, np.generic) else c!r}: {n}"
                               for c, n in zip(classes[small], counts[small]))
            raise InputError(
                f"with validation_fraction={validation_fraction} the fit part keeps fewer than k+1={k + 1} points "
                f"of some classes ({detail}); LMNN needs k target neighbours of the same class for every point. "
                "Lower validation_fraction or k, or gather more data of those classes."
            )
        problem = LMNNProblem(X[fit_idx], y[fit_idx], k=k, mu=mu, regularizer=regularizer)
    else:
        problem = problem_factory(X[fit_idx], y[fit_idx])
    stopper = EarlyStopping.for_problem(problem, X[val_idx], y[val_idx], patience=patience, rule=rule)
    if budget.limited:  # the solve gets what the split and the problem left of the limit
        jax_options = {**jax_options, "time_limit": max(budget.left(), 1e-3)}
    solution = problem.solve(backend="jax", callback=stopper, **jax_options)
    with budget.closing():
        solution = stopper.finish(problem, solution)
    curve = stopper.curve()
    curve.fit_idx, curve.val_idx = fit_idx, val_idx
    return solution, curve
