"""scikit-learn estimators for LMNN, MMC and POLA."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import check_choice, check_X, check_y
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

    Attributes
    ----------
    components_ : (d, d) ndarray
        ``L`` with ``M = L^T L``.
    solution_ : Solution
    certificate_ : Certificate
        Duality-gap certificate of the learned metric.
    problem_ : LMNNProblem
    n_iter_ : int
    """

    def __init__(self, k=3, mu=0.5, regularizer=None, backend="cvxpy", solver=None, tol=1e-8,
                 max_iter=100_000, verbose=False):
        self.k = k
        self.mu = mu
        self.regularizer = regularizer
        self.backend = backend
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose

    def _make_problem(self, X, y):
        return LMNNProblem(X, y, k=self.k, mu=self.mu, regularizer=self.regularizer)

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
        M = self.solution_.M
        if rule == "knn":
            return knn_predict(problem.X, problem.y, X, k=problem.k, M=M)
        return energy_predict(problem.X, problem.y, X, k=problem.k, mu=problem.mu, M=M,
                              train_targets=problem.target_neighbors)

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
