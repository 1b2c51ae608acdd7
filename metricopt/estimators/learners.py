"""scikit-learn estimators for LMNN, MMC and POLA."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import check_choice, check_int, check_X, check_y
from ..errors import InputError, SolverError
from ..energy import energy_predict
from ..knn import knn_predict
from ..problems import LMNNProblem, MMCProblem, POLAProblem
from .base import MetricLearner

#: classification rules of :meth:`LMNN.predict`
_LMNN_RULES = ("knn", "energy")


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
    tol : float, default 1e-8
        Solver accuracy (cvxpy); the certified relative gap to stop at (jax).
    max_iter : int, default 100000
        Solver iteration limit.
    verbose : bool, default False
    search : {"auto", "brute", "tree"}, default "auto"
        Neighbour and impostor searches (Section 6): blocked brute force or per-class ball
        trees (identical results); ``"auto"`` picks trees for ``n >= 2000``, ``d <= 25``.
    passes : int, default 1
        Multi-pass LMNN (Section 5.1): after each pass the target neighbours are re-picked
        under the learned metric and LMNN is solved again on the transformed data; the
        transformations compose (:func:`metricopt.multipass.multipass_lmnn`). Each pass is
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
        validation kNN error (:func:`metricopt.early_stopping.fit_with_validation`); the
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

    def __init__(self, k=3, mu=0.5, regularizer=None, backend="cvxpy", solver=None, tol=1e-8,
                 max_iter=100_000, verbose=False, search="auto", passes=1, n_components=None, low_rank="R",
                 validation_fraction=None, patience=10, random_state=0):
        self.k = k
        self.mu = mu
        self.regularizer = regularizer
        self.backend = backend
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose
        self.search = search
        self.passes = passes
        self.n_components = n_components
        self.low_rank = low_rank
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.random_state = random_state

    def _make_problem(self, X, y, target_neighbors=None):
        return LMNNProblem(X, y, k=self.k, mu=self.mu, regularizer=self.regularizer, search=self.search,
                           target_neighbors=target_neighbors)

    def fit(self, X, y):
        """Learn the metric from ``X`` (n, d) and labels ``y`` (n,) (see the class parameters for
        the variants: passes, low rank, early stopping)."""
        passes = check_int(self.passes, "passes", low=1)
        check_choice(self.low_rank, "low_rank", ("R", "S"))
        variants = [name for name, on in (("passes > 1", passes > 1), ("n_components", self.n_components is not None),
                                          ("validation_fraction", self.validation_fraction is not None)) if on]
        if len(variants) > 1:
            raise InputError(f"LMNN combines at most one of passes > 1, n_components and validation_fraction; "
                             f"got {' and '.join(variants)}. Fit them one at a time.")
        self.passes_ = None
        self.validation_curve_ = None
        if not variants:
            return super().fit(X, y)
        if y is None:
            raise InputError("LMNN requires y to be passed, but the target y is None.")
        Xc = check_X(X)
        yc = check_y(y, Xc.shape[0])
        validate_data(self, X, y, dtype=np.float64)
        if passes > 1:
            from ..multipass import fit_multipass

            # sets problem_, solution_ (M = L^T L, certified), components_ and passes_
            return fit_multipass(self, Xc, yc, passes)
        full = self._make_problem(Xc, yc)
        opts = self._solve_options()
        if self.n_components is not None:
            from ..lowrank import lmnn_low_rank

            if self.low_rank == "R":
                sol = lmnn_low_rank(full, self.n_components, method="R", random_state=self.random_state,
                                    tol=max(float(self.tol), 1e-6), max_iter=min(int(self.max_iter), 2000))
            else:
                sol = lmnn_low_rank(full, self.n_components, method="S", backend=self.backend, **opts)
            L, cert = sol.L, None
        else:
            from ..early_stopping import fit_with_validation

            if self.backend != "jax":
                raise InputError("validation_fraction (early stopping) needs backend='jax': the exact backend "
                                 "has no iterates to stop at.")
            sol, curve = fit_with_validation(Xc, yc, k=self.k, mu=self.mu, regularizer=self.regularizer,
                                             validation_fraction=self.validation_fraction, patience=self.patience,
                                             random_state=self.random_state, **opts)
            self.validation_curve_ = curve
            L, cert = sol.L, sol.certificate  # certifies the metric on the fit part's problem
        if sol.M is None:
            raise SolverError(f"LMNN could not be fitted: status '{sol.status}': {sol.message}")
        self.problem_ = full
        self.solution_ = sol
        self.certificate_ = cert
        self.components_ = L
        self.n_iter_ = int(sol.stats.get("iterations", 0))
        return self

    def predict(self, X, rule="knn"):
        r"""Classify ``X`` with the learned metric, using the training data of ``fit``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        rule : {"knn", "energy"}, default "knn"
            ``"knn"``: the kNN rule of :func:`metricopt.knn_predict` with ``k``
            neighbours under :math:`d_M`. ``"energy"``: the energy-based rule of
            Weinberger & Saul (JMLR 2009, Section 3.5, Eq. 15),
            :func:`metricopt.energy.energy_predict`, with the fitted ``k`` and
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
        X = validate_data(self, X, reset=False, dtype=np.float64)
        X = check_X(X)
        problem = self.problem_  # holds the training data, labels, k, mu and target neighbours of fit
        M = self.get_mahalanobis_matrix()
        if rule == "knn":
            return knn_predict(problem.X, problem.y, X, k=problem.k, M=M)
        return energy_predict(problem.X, problem.y, X, k=problem.k, mu=problem.mu, M=M,
                              train_targets=problem.target_neighbors)

    def get_mahalanobis_matrix(self):
        """The learned PSD matrix ``M = components_.T @ components_`` (multi-pass: the composition)."""
        check_is_fitted(self, "components_")
        if getattr(self, "passes_", None) is not None:
            return self.components_.T @ self.components_
        return self.solution_.M

    def score(self, X, y, rule="knn"):
        """Accuracy of :meth:`predict` (with the given ``rule``) on ``X`` against the labels ``y``."""
        pred = self.predict(X, rule=rule)
        y = check_y(y, pred.shape[0])
        return float(np.mean(pred == y))


class MMC(MetricLearner):
    r"""MMC metric learning from labels (Xing, Ng, Jordan & Russell, NIPS 2002).

    Fits :class:`~metricopt.MMCProblem` with all same-label pairs similar and all
    differently labelled pairs dissimilar:

    .. math::

        \max_{M \succeq 0} \sum_{(a,b) \in D} \sqrt{d_M(x_a, x_b)}
        \ \text{s.t.}\ \sum_{(a,b) \in S} d_M(x_a, x_b) \le 1.

    Parameters
    ----------
    diagonal : bool, default False
    backend, solver, tol, max_iter, verbose
        As for :class:`LMNN` (default solver Clarabel).

    Attributes
    ----------
    components_, solution_, certificate_, problem_, n_iter_
    """

    def __init__(self, diagonal=False, backend="cvxpy", solver=None, tol=1e-8, max_iter=100_000,
                 verbose=False):
        self.diagonal = diagonal
        self.backend = backend
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose

    def _make_problem(self, X, y):
        return MMCProblem(X, y, diagonal=self.diagonal)


class POLA(MetricLearner):
    r"""POLA pseudo-metric learning, batch form (Shalev-Shwartz, Singer & Ng, ICML 2004).

    Fits :class:`~metricopt.POLAProblem` over all pairs (similar = same label):

    .. math::

        \min_{M \succeq 0, b \ge 1} \tfrac12(\|M\|_F^2 + b^2) + C \sum_t \xi_t
        \ \text{s.t.}\ y_t (b - d_M(x_t, x'_t)) \ge 1 - \xi_t,\ \xi \ge 0.

    Parameters
    ----------
    C : float or None, default 1.0
        Soft-margin weight; ``None`` asks for the hard-margin program (often infeasible).
    backend, solver, tol, max_iter, verbose
        As for :class:`LMNN` (default solver Clarabel).

    Attributes
    ----------
    components_, solution_, certificate_, problem_, n_iter_
    threshold_ : float
        The learned threshold ``b``: pairs with ``d_M < b`` are predicted similar.
    """

    def __init__(self, C=1.0, backend="cvxpy", solver=None, tol=1e-8, max_iter=100_000, verbose=False):
        self.C = C
        self.backend = backend
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose

    def _make_problem(self, X, y):
        return POLAProblem(X, y, C=self.C)

    def fit(self, X, y):
        super().fit(X, y)
        self.threshold_ = float(self.solution_.variables["b"])
        return self
