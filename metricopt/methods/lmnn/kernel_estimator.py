"""scikit-learn estimator for kernel LMNN (Weinberger & Saul, JMLR 2009, Section 5.3)."""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.validation import check_is_fitted

from ..._validation import check_y
from ...knn import knn_predict
from .kernel_problem import KernelLMNNProblem
from .problem import LMNNProblem
from ...estimators.base import FitResult, MetricLearner, ModelState, check_fitted_input
from ...estimators._params import LMNN_CONSTRAINTS, SOLVE_CONSTRAINTS, Interval

#: model-file array -> attribute of the problem: the kernel-PCA map, restored on load (never
#: recomputed, so that a loaded model does not depend on the eigensolver's signs and rounding)
_KERNEL_MAP = {"kernel_Z": "X", "kernel_U": "_U", "kernel_eig": "_eig", "kernel_W": "_W", "kernel_kbar": "_kbar",
               "kernel_eigenvalues": "kernel_eigenvalues"}


class KernelLMNN(MetricLearner):
    r"""Kernel LMNN metric learning (Weinberger & Saul, JMLR 2009, Sec. 5.3; Torresani & Lee, NIPS 2007).

    Fits :class:`~metricopt.methods.lmnn.kernel_problem.KernelLMNNProblem`: LMNN (JMLR 2009,
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
        posed, at most 50 (see :class:`~metricopt.methods.lmnn.kernel_problem.KernelLMNNProblem`).
    k, mu, regularizer, backend, solver, tol, solver_tol, max_iter, time_limit, verbose
        As for :class:`~metricopt.LMNN` (``None``: the defaults of :mod:`metricopt.options`).

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

    _parameter_constraints = {
        "kernel": ["no_validation"],  # the problem checks the name against scikit-learn's kernels
        "kernel_params": ["no_validation"],  # ... and these against the kernel's parameters
        "n_components": [None, Interval(Integral, 1, None, closed="left")],
        **LMNN_CONSTRAINTS,
        **SOLVE_CONSTRAINTS,
    }

    def __init__(self, kernel: str = "rbf", kernel_params: dict | None = None, n_components: int | None = None,
                 k: int = 3, mu: float = 0.5, regularizer: Any = None, backend: str = "cvxpy",
                 solver: str | None = None, tol: float | None = None, solver_tol: float | None = None,
                 max_iter: int | None = None, time_limit: float | None = None,
                 verbose: bool = False) -> None:
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.k = k
        self.mu = mu
        self.regularizer = regularizer
        self.backend = backend
        self.solver = solver
        self.tol = tol
        self.solver_tol = solver_tol
        self.max_iter = max_iter
        self.time_limit = time_limit
        self.verbose = verbose

    def _make_problem(self, X: np.ndarray, y: np.ndarray) -> KernelLMNNProblem:
        return KernelLMNNProblem(X, y, kernel=self.kernel, kernel_params=self.kernel_params,
                                 n_components=self.n_components, k=self.k, mu=self.mu,
                                 regularizer=self.regularizer)

    def _fitted_extras(self) -> dict[str, Any]:
        return {"embedding_": self.problem_.X @ self.components_.T}

    # ---------------------------------------------------------------- model-file state
    def _training_inputs(self) -> np.ndarray:
        return self.problem_.X_input

    def _model_state(self) -> ModelState:
        state = super()._model_state()
        state.arrays["embedding"] = np.asarray(self.embedding_, dtype=np.float64)
        state.arrays.update({key: getattr(self.problem_, attr) for key, attr in _KERNEL_MAP.items()})
        return state

    def _problem_from_state(self, X: np.ndarray, y: np.ndarray, state: ModelState) -> KernelLMNNProblem:
        """The problem with the stored kernel (its resolved parameters, e.g. the ``gamma`` chosen from
        the data, are in the file's problem description) and the stored kernel-PCA map."""
        described = state.meta["problem"]
        common = {"k": self.k, "mu": self.mu, "target_neighbors": state.array("target_neighbors"),
                  "regularizer": self.regularizer}
        problem = KernelLMNNProblem(X, y, kernel=described["kernel"], kernel_params=described["kernel_params"],
                                    n_components=described["n_components"], **common)
        for key, attr in _KERNEL_MAP.items():
            setattr(problem, attr, state.array(key))
        LMNNProblem.__init__(problem, problem.X, y, **common)  # the LMNN part over the restored coordinates
        return problem

    def _fit_from_state(self, problem: KernelLMNNProblem, state: ModelState) -> FitResult:
        fit = super()._fit_from_state(problem, state)
        fit.attributes["embedding_"] = state.array("embedding")
        return fit

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Map ``X`` through its kernel columns: ``z(X) @ components_.T``; Euclidean distances
        there are the learned :math:`d_A`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs with the features seen at fit.

        Returns
        -------
        ndarray of shape (n_samples, r)
            The kernel-PCA coordinates ``z(x)`` of each row mapped by ``L`` (``B = L^T L``).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        metricopt.errors.InputError
            For NaN or infinite values, a 1-D or empty ``X``, or another number of features than at fit.
        """
        check_is_fitted(self, "components_")
        return self.problem_.kernel_features(check_fitted_input(self, X)) @ self.components_.T

    def get_kernel_matrix_A(self) -> np.ndarray:
        """The ``n x n`` matrix ``A`` with ``d(x, x') = (k_x - k_x')^T A (k_x - k_x')``.

        Returns
        -------
        ndarray of shape (n_train, n_train)
            ``A = W B W^T`` (PSD) over the training points' kernel columns.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        """
        check_is_fitted(self, "components_")
        return self.problem_.kernel_matrix_A(self.solution_.M)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """kNN (:func:`metricopt.knn_predict`, ``k`` of the fit) in the learned space.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs with the features seen at fit.

        Returns
        -------
        ndarray of shape (n_samples,)
            The predicted labels.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        metricopt.errors.InputError
            For NaN or infinite values, a 1-D or empty ``X``, or another number of features than at fit.
        """
        Z = self.transform(X)
        return knn_predict(self.embedding_, self.problem_.y, Z, k=self.problem_.k)

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
        y = check_y(y, pred.shape[0])
        return float(np.mean(pred == y))
