"""scikit-learn estimator for kernel LMNN (Weinberger & Saul, JMLR 2009, Section 5.3)."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import check_X, check_y
from ..knn import knn_predict
from ..problems.kernel_lmnn import KernelLMNNProblem
from .base import MetricLearner


class KernelLMNN(MetricLearner):
    r"""Kernel LMNN metric learning (Weinberger & Saul, JMLR 2009, Sec. 5.3; Torresani & Lee, NIPS 2007).

    Fits :class:`~metricopt.problems.kernel_lmnn.KernelLMNNProblem`: LMNN (JMLR 2009,
    Eq. 14) over metrics :math:`d_A(x, x') = (k_x - k_{x'})^\top A (k_x - k_{x'})`,
    :math:`A \succeq 0`, :math:`k_x = [\kappa(x, x_i)]_i`, solved exactly as plain LMNN over
    the empirical kernel-PCA coordinates :math:`z(x)` with an ``r x r`` PSD matrix
    :math:`B` (:math:`A = W B W^\top`; Chatpatanasiri et al., Neurocomputing 2010):

    .. math::

        \min_{B \succeq 0} (1-\mu) \sum_{i, j \rightsquigarrow i} d_B(z_i, z_j)
        + \mu \sum_{i, j \rightsquigarrow i, l: y_l \ne y_i} [1 + d_B(z_i, z_j) - d_B(z_i, z_l)]_+ + R(B).

    Parameters
    ----------
    kernel : str, default "rbf"
        A scikit-learn pairwise kernel name (``"rbf"``, ``"poly"``, ``"laplacian"``, ...).
    kernel_params : dict, optional
        Its parameters, e.g. ``{"gamma": 0.5}``.
    n_components : int, optional
        Number of kernel principal components; default: as many as keep the problem well
        posed, at most 50 (see :class:`~metricopt.problems.kernel_lmnn.KernelLMNNProblem`).
    k, mu, regularizer, backend, solver, tol, max_iter, verbose
        As for :class:`~metricopt.LMNN`.

    Attributes
    ----------
    components_ : (r, r) ndarray
        ``L`` with ``B = L^T L``, acting on the kernel-PCA coordinates.
    problem_ : KernelLMNNProblem
        Holds the training points, the kernel and the coordinates map.
    solution_, certificate_, n_iter_
        As for :class:`~metricopt.LMNN` (the certificate is that of the problem over ``B``).
    embedding_ : (n, r) ndarray
        The training points in the learned space (``transform`` of the training data).
    """

    def __init__(self, kernel="rbf", kernel_params=None, n_components=None, k=3, mu=0.5, regularizer=None,
                 backend="cvxpy", solver=None, tol=1e-8, max_iter=100_000, verbose=False):
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.k = k
        self.mu = mu
        self.regularizer = regularizer
        self.backend = backend
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose

    def _make_problem(self, X, y):
        return KernelLMNNProblem(X, y, kernel=self.kernel, kernel_params=self.kernel_params,
                                 n_components=self.n_components, k=self.k, mu=self.mu,
                                 regularizer=self.regularizer)

    def fit(self, X, y):
        """Learn the kernel metric from ``X`` (n, d) and labels ``y`` (n,)."""
        super().fit(X, y)
        self.embedding_ = self.problem_.X @ self.components_.T
        return self

    def transform(self, X):
        """Map ``X`` through its kernel columns: ``z(X) @ components_.T``; Euclidean distances
        there are the learned :math:`d_A`."""
        check_is_fitted(self, "components_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.problem_.kernel_features(check_X(X)) @ self.components_.T

    def get_kernel_matrix_A(self):
        """The ``n x n`` matrix ``A`` with ``d(x, x') = (k_x - k_x')^T A (k_x - k_x')``."""
        check_is_fitted(self, "components_")
        return self.problem_.kernel_matrix_A(self.solution_.M)

    def predict(self, X):
        """kNN (:func:`metricopt.knn_predict`, ``k`` of the fit) in the learned space."""
        Z = self.transform(X)
        return knn_predict(self.embedding_, self.problem_.y, Z, k=self.problem_.k)

    def score(self, X, y):
        """Accuracy of :meth:`predict` on ``X`` against ``y``."""
        pred = self.predict(X)
        y = check_y(y, pred.shape[0])
        return float(np.mean(pred == y))
