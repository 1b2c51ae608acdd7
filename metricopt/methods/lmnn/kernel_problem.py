r"""Kernel LMNN through the kernel PCA trick.

References
----------
* K. Q. Weinberger & L. K. Saul, *Distance Metric Learning for Large Margin Nearest
  Neighbor Classification*, JMLR 10:207-244, 2009, Section 5.3 (kernel LMNN).
* L. Torresani & K.-C. Lee, *Large Margin Component Analysis*, NIPS 2007 (metrics
  ``M = sum_lm A_lm phi(x_l) phi(x_m)^T`` in a kernel feature space).
* R. Chatpatanasiri, T. Korsrilabutr, P. Tangchanachaianan & B. Kijsirikul, *A new
  kernelization framework for Mahalanobis distance learning algorithms*,
  Neurocomputing 73:1570-1579, 2010 (the kernel PCA trick used here: learning over
  ``A`` equals learning a plain metric over empirical kernel-PCA coordinates).
"""

from __future__ import annotations

import inspect
import numbers
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._validation import check_classes, check_int, check_real, check_X, check_y
from ...constraints import target_neighbors as default_target_neighbors
from ...errors import InputError, UnknownOptionError
from ...linalg import factor, pair_scatter, symmetrize
from .problem import LMNNProblem

#: largest number of kernel principal components kept by default (``n_components=None``)
MAX_COMPONENTS = 50
#: default ``n_components=None`` also keeps the pull matrix P positive definite: the
#: smallest eigenvalue of P must exceed ``PULL_TOL`` times its largest
PULL_TOL = 1e-8
#: components whose centred-kernel eigenvalue is below ``rank_tol * max`` are discarded
RANK_TOL = 1e-10


def _kernel_functions():
    from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS

    return PAIRWISE_KERNEL_FUNCTIONS


#: kernel names accepted (scikit-learn's :data:`sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`)
KERNELS = tuple(sorted(_kernel_functions()))


#: kernels whose ``gamma`` defaults to ``1 / (n_features * Var(X))`` (scikit-learn SVC's "scale")
SCALED_GAMMA = ("rbf", "laplacian", "polynomial", "poly", "sigmoid")


def check_kernel(kernel: Any, kernel_params: Any) -> tuple[str, dict]:
    """Return ``(name, params)`` checked against scikit-learn's pairwise kernels.

    Raises
    ------
    UnknownOptionError
        ``kernel`` is not one of :data:`KERNELS`.
    InputError
        ``kernel_params`` is not a dict, names a parameter the kernel does not take, or
        gives an invalid value (``gamma <= 0``, ``degree <= 0``, a non-finite number).

    Parameters
    ----------
    kernel : str
        The kernel's name (case-insensitive).
    kernel_params : dict or None
        Keyword arguments of the kernel.

    Returns
    -------
    name : str
        The kernel's name, lower case.
    params : dict
        The checked parameters.
    """
    if not isinstance(kernel, str) or kernel.lower() not in KERNELS:
        raise UnknownOptionError(f"unknown kernel {kernel!r}; choose one of: {', '.join(KERNELS)}.")
    name = kernel.lower()
    if kernel_params is None:
        return name, {}
    if not isinstance(kernel_params, dict):
        raise InputError(
            f"kernel_params must be a dict of keyword arguments for the {name!r} kernel (e.g. "
            f"{{'gamma': 0.5}}); got {kernel_params!r}."
        )
    func = _kernel_functions()[name]
    accepted = [p for p in inspect.signature(func).parameters if p not in ("X", "Y")]
    unknown = sorted(set(kernel_params) - set(accepted))
    if unknown:
        takes = ", ".join(accepted) if accepted else "no parameters"
        raise InputError(f"kernel_params {unknown} are not parameters of the {name!r} kernel; it takes: {takes}.")
    params: dict[str, Any] = {}
    for key, value in kernel_params.items():
        if key == "dense_output":
            params[key] = bool(value)
            continue
        if value is None and key == "gamma":  # resolved from the data by KernelLMNNProblem
            params[key] = None
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):  # type: ignore[call-overload]
            raise InputError(f"kernel_params[{key!r}] must be a finite real number; got {value!r}.")
        if key in ("gamma", "degree") and value <= 0:
            raise InputError(f"kernel_params[{key!r}] must be > 0 for the {name!r} kernel; got {value!r}.")
        params[key] = float(value) if key != "degree" else value
    return name, params


def kernel_matrix(A: ArrayLike, B: ArrayLike, kernel: str, params: dict) -> np.ndarray:
    """``K[a, b] = kappa(A_a, B_b)`` through :func:`sklearn.metrics.pairwise.pairwise_kernels`,
    as a finite float64 array (bad data for the kernel raises :class:`InputError`).

    Parameters
    ----------
    A : (m, d) array_like
        The first points.
    B : (p, d) array_like
        The second points.
    kernel : str
        The kernel's name (:func:`check_kernel`).
    params : dict
        Its parameters.

    Returns
    -------
    (m, p) ndarray
        The kernel matrix.

    Raises
    ------
    InputError
        When the kernel fails on the data or gives NaN or infinite values.
    """
    from sklearn.metrics.pairwise import pairwise_kernels

    try:
        K = np.asarray(pairwise_kernels(A, B, metric=kernel, **params), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"the {kernel!r} kernel with parameters {params} failed on this data: {exc}") from None
    if not np.all(np.isfinite(K)):
        raise InputError(
            f"the {kernel!r} kernel with parameters {params} gave NaN or infinite values on this data; "
            "scale the data or change the kernel parameters (e.g. a smaller gamma or degree)."
        )
    return K


def _auto_components(Z, anchors, targets, pull_tol):
    """Largest ``r`` such that the pull matrix of the leading ``r`` coordinates is positive
    definite to ``pull_tol`` (its condition number is monotone in ``r`` by interlacing)."""
    P = pair_scatter(Z, anchors, targets)
    best = 1
    for r in range(1, Z.shape[1] + 1):
        w = np.linalg.eigvalsh(P[:r, :r])
        if w[0] > pull_tol * max(w[-1], 1e-300):
            best = r
        else:
            break
    return best


class KernelLMNNProblem(LMNNProblem):
    r"""Kernel LMNN (Weinberger & Saul, JMLR 2009, Section 5.3), solved through the kernel PCA trick.

    **The problem.** With a kernel :math:`\kappa(x, x') = \phi(x)^\top\phi(x')` and the
    training points :math:`x_1..x_n`, the metric is restricted to the span of the training
    features (Torresani & Lee, NIPS 2007),

    .. math::

        M = \sum_{l,m} A_{lm}\,\phi(x_l)\phi(x_m)^\top,\quad A \succeq 0, \qquad
        d_A(x, x') = (k_x - k_{x'})^\top A\,(k_x - k_{x'}),\quad
        k_x = [\kappa(x, x_1), \dots, \kappa(x, x_n)]^\top,

    and LMNN's objective (JMLR 2009, Eq. 14) is minimised over :math:`A`:

    .. math::

        \min_{A \succeq 0}\ (1-\mu)\sum_{i,\,j\rightsquigarrow i} d_A(x_i, x_j)
        + \mu \sum_{i,\,j\rightsquigarrow i}\sum_{l:\,y_l\ne y_i}
          \big[1 + d_A(x_i, x_j) - d_A(x_i, x_l)\big]_+ + R .

    **The kernel PCA trick** (Chatpatanasiri et al., Neurocomputing 2010). Every pair
    difference :math:`\phi(x) - \phi(x')` acts on :math:`M` only through its projection on
    the span of the *centred* training features. Let :math:`H = I - \mathbf 1\mathbf 1^\top/n`,
    :math:`HKH = U\Lambda U^\top` with the ``r`` leading eigenpairs kept
    (:math:`\Lambda_r \succ 0`), and the empirical kernel-PCA coordinates

    .. math::

        z(x) = \Lambda_r^{-1/2} U_r^\top H\,(k_x - K\mathbf 1/n) = W^\top (k_x - K\mathbf 1/n),
        \qquad W = H U_r \Lambda_r^{-1/2}

    (for a training point :math:`z(x_a) = \Lambda_r^{1/2} U_r^\top e_a`, so the Euclidean
    distances of the ``z`` are the feature-space distances). This problem is **plain LMNN
    over** :math:`Z = z(X_{train})` with an ``r x r`` PSD variable :math:`B`; the two are
    linked by

    .. math::

        A = W B W^\top, \qquad d_A(x, x') = (k_x - k_{x'})^\top W B W^\top (k_x - k_{x'})
        = d_B\big(z(x), z(x')\big) \quad\text{exactly},

    because :math:`z(x) - z(x') = W^\top (k_x - k_{x'})` (the centring cancels in
    differences). With every component above ``rank_tol`` kept, every :math:`A` has an
    equivalent :math:`B` (its restriction to the centred span), so both problems have the
    same optimum. With fewer components (``n_components`` smaller than the rank, or the
    default below) it is LMNN **restricted to the leading kernel principal subspace**.
    Since the feature-space directions :math:`\Phi^\top W` are orthonormal, the feature-space
    metric is :math:`M = (\Phi^\top W) B (\Phi^\top W)^\top`, so trace and Frobenius
    regularisers of :math:`B` are those of :math:`M`. Because this is an
    :class:`LMNNProblem` on :math:`Z`, both backends, the working set and the duality-gap
    certificates apply unchanged; ``self.X`` holds :math:`Z`.

    **Default number of components.** With the full rank (up to ``n - 1`` components for an
    RBF kernel) the pull matrix :math:`P = \sum_{ij} (z_i - z_j)(z_i - z_j)^\top` is
    singular: a direction orthogonal to every target-neighbour difference exists (each
    class can collapse onto a point) and the hinge can be driven to zero by growing
    :math:`B` along it at no pull cost, so the infimum is not attained (measured on 40
    points of two rings, RBF, all 39 components: objective 2e-15 with ``trace B`` 5e3, and
    no certificate, whose lower bound needs :math:`P - sB \succeq 0`). Close to that
    rank the problem is still nearly degenerate (same data, 38 components: :math:`P`
    positive definite, yet objective 0.008 with ``trace B`` 3e3; the JAX backend stops
    uncertified and the exact one needs 300 s for a 2e-4 gap), whereas with 20 components
    both certify 1e-6 in seconds. ``n_components=None`` therefore keeps the leading
    components with eigenvalue above ``rank_tol * max``, at most
    ``min(`` :data:`MAX_COMPONENTS` ``= 50, n // 3)`` (a heuristic from these measurements:
    far from the collapse at ``n - n_classes``, and at most 1275 unknowns for the exact
    backend), and at most as many as keep :math:`P` positive definite (smallest
    eigenvalue above :data:`PULL_TOL` times the largest; the leading blocks of :math:`P`
    only get worse conditioned as ``r`` grows). The optimum is then attained and the
    certificate uses its :math:`P \succ 0` form. Fewer components restrict (and
    regularise) the metric further and make the exact backend faster; pass
    ``n_components`` to choose (e.g. by cross-validation).

    Parameters
    ----------
    X : (n, d) array_like
        Training points in the input space.
    y : (n,) array_like
        Class labels.
    kernel : str, default "rbf"
        One of scikit-learn's pairwise kernels (:data:`KERNELS`). An indefinite kernel
        (e.g. ``"sigmoid"``) is replaced by the positive part of its centred training
        kernel matrix (a warning says so); the identity :math:`d_A = d_B` still holds.
    kernel_params : dict, optional
        Keyword arguments of the kernel, e.g. ``{"gamma": 0.5}``. For the kernels of
        :data:`SCALED_GAMMA` an omitted (or ``None``) ``gamma`` becomes
        ``1 / (n_features * X.var())`` (SVC's ``gamma="scale"``; scikit-learn's own default
        ``1 / n_features`` ignores the data's scale), stored in ``self.kernel_params``.
    n_components : int, optional
        Number ``r`` of leading kernel principal components (at most the rank of ``HKH``).
        Default: see above.
    k, mu, regularizer
        As for :class:`LMNNProblem`.
    target_neighbors : (n, k) int array, optional
        Default: the ``k`` nearest same-label points by Euclidean distance in the *input*
        space, as in plain LMNN.
    rank_tol : float, default 1e-10
        Relative eigenvalue threshold of the centred kernel matrix.

    Attributes
    ----------
    X_input : (n, d) ndarray
        The training points (``self.X`` holds their coordinates ``Z``).
    kernel, kernel_params : the checked kernel
    n_components : int
        ``r``, the number of coordinates.
    rank : int
        Number of eigenvalues of ``HKH`` above ``rank_tol * max``.
    kernel_eigenvalues : (n,) ndarray
        All eigenvalues of ``HKH``, decreasing.
    """

    method = "KernelLMNN"
    reference = ("Weinberger & Saul, JMLR 2009, Sec. 5.3; Torresani & Lee, NIPS 2007; "
                 "kernel PCA trick: Chatpatanasiri et al., Neurocomputing 2010")

    def __init__(self, X, y, kernel="rbf", kernel_params=None, n_components=None, k=3, mu=0.5,
                 target_neighbors=None, regularizer=None, rank_tol=RANK_TOL):
        X = check_X(X)
        n = X.shape[0]
        yc = check_y(y, n)
        kk = check_int(k, "k", low=1)
        self.kernel, self.kernel_params = check_kernel(kernel, kernel_params)
        if self.kernel in SCALED_GAMMA and self.kernel_params.get("gamma") is None:
            # scikit-learn's default 1 / n_features ignores the data's scale (on raw pixels an RBF kernel
            # matrix is then the identity and nothing can be learned); like SVC's gamma="scale", use
            # 1 / (n_features * Var(X)), fixed here so new points go through the same kernel
            var = float(X.var())
            self.kernel_params["gamma"] = 1.0 / (X.shape[1] * var) if var > 0 else 1.0 / X.shape[1]
        self.rank_tol = check_real(rank_tol, "rank_tol", low=0.0, high=1.0, low_open=True)
        if n_components is not None:
            n_components = check_int(n_components, "n_components", low=1)
        if target_neighbors is None:
            check_classes(yc, kk, self.method)
            target_neighbors = default_target_neighbors(X, yc, kk)
        T = np.asarray(target_neighbors)
        self.X_input = X

        K = symmetrize(kernel_matrix(X, X, self.kernel, self.kernel_params))
        Kc = K - K.mean(axis=0)[None, :]
        Kc = symmetrize(Kc - Kc.mean(axis=1)[:, None])  # H K H
        w, U = np.linalg.eigh(Kc)
        w, U = w[::-1], U[:, ::-1]
        self.kernel_eigenvalues = w.copy()
        top = float(w[0])
        if top <= 0:
            raise InputError(
                f"the centred {self.kernel!r} kernel matrix of X is zero: every training point has the same "
                "feature vector, so there is no metric to learn; check the data and kernel_params."
            )
        if w[-1] < -1e-8 * top:
            warnings.warn(
                f"the {self.kernel!r} kernel is indefinite on X (smallest centred eigenvalue {w[-1]:.3g}, "
                f"largest {top:.3g}); its negative part is dropped (kernel PCA keeps the positive eigenvalues).",
                stacklevel=2,
            )
        self.rank = int(np.sum(w > self.rank_tol * top))
        if n_components is not None and n_components > self.rank:
            raise InputError(
                f"n_components={n_components} exceeds the rank {self.rank} of the centred kernel matrix "
                f"(eigenvalues above rank_tol={self.rank_tol:g} times the largest); pass n_components <= "
                f"{self.rank} or None."
            )
        Zall = U[:, :self.rank] * np.sqrt(w[:self.rank])
        if n_components is None:
            r0 = max(1, min(self.rank, MAX_COMPONENTS, n // 3))
            Tc = T.astype(np.int64) if T.dtype.kind in "iu" and T.ndim == 2 and T.shape[0] == n else None
            if Tc is None or np.any(Tc < 0) or np.any(Tc >= n):
                r = r0  # malformed targets: LMNNProblem below reports them
            else:
                r = _auto_components(Zall[:, :r0], np.repeat(np.arange(n), Tc.shape[1]), Tc.ravel(), PULL_TOL)
        else:
            r = n_components
        self.n_components = int(r)
        self._U = U[:, :r]
        self._eig = w[:r]
        # W = H U_r Lambda_r^{-1/2}; z(x) = W^T (k_x - K 1/n)
        self._W = (self._U - self._U.mean(axis=0)) / np.sqrt(self._eig)
        self._kbar = K.mean(axis=1)
        Z = Zall[:, :r]
        super().__init__(Z, yc, k=kk, mu=mu, target_neighbors=T, regularizer=regularizer)

    # ------------------------------------------------------------------ mappings
    def _check_new(self, X, name="X"):
        X = check_X(X, name)
        if X.shape[1] != self.X_input.shape[1]:
            raise InputError(
                f"{name} has {X.shape[1]} features, but the kernel problem was built on data with "
                f"{self.X_input.shape[1]}; pass points with the training data's features."
            )
        return X

    def kernel_columns(self, X: ArrayLike) -> np.ndarray:
        r"""``K(X, X_train)``: row ``a`` is :math:`k_{x_a}^\top` (uncentred kernel values).

        Parameters
        ----------
        X : (m, d) array_like
            Points in the input space (the training data's features).

        Returns
        -------
        (m, n) ndarray
            The kernel values against the training points.

        Raises
        ------
        InputError
            When the points have the wrong number of features or ``B`` is not a valid metric.
        """
        return kernel_matrix(self._check_new(X), self.X_input, self.kernel, self.kernel_params)

    def kernel_features(self, X: ArrayLike) -> np.ndarray:
        r"""Kernel-PCA coordinates :math:`z(x) = W^\top (k_x - K\mathbf 1/n)` of points ``X``
        (``(m, r)``); on the training points they equal ``self.X``.

        Parameters
        ----------
        X : (m, d) array_like
            Points in the input space (the training data's features).

        Returns
        -------
        (m, r) ndarray
            The coordinates.

        Raises
        ------
        InputError
            When the points have the wrong number of features or ``B`` is not a valid metric.
        """
        return (self.kernel_columns(X) - self._kbar[None, :]) @ self._W

    def kernel_matrix_A(self, B: ArrayLike) -> np.ndarray:
        r"""The ``n x n`` matrix :math:`A = W B W^\top` of the metric on kernel columns,
        :math:`d(x, x') = (k_x - k_{x'})^\top A (k_x - k_{x'})`.

        Parameters
        ----------
        B : (r, r) array_like
            The metric over the kernel-PCA coordinates (checked PSD).

        Returns
        -------
        (n, n) ndarray
            :math:`A`.

        Raises
        ------
        InputError
            When the points have the wrong number of features or ``B`` is not a valid metric.
        """
        B = self.check_metric(B, name="B")
        return symmetrize(self._W @ B @ self._W.T)

    def transform(self, X: ArrayLike, B: ArrayLike) -> np.ndarray:
        """Points whose Euclidean distances are the learned ones: ``z(X) @ L^T`` with ``B = L^T L``.

        Parameters
        ----------
        X : (m, d) array_like
            Points in the input space (the training data's features).
        B : (r, r) array_like
            The metric over the kernel-PCA coordinates (checked PSD).

        Returns
        -------
        (m, r) ndarray
            The mapped points.

        Raises
        ------
        InputError
            When the points have the wrong number of features or ``B`` is not a valid metric.
        """
        B = self.check_metric(B, name="B")
        return self.kernel_features(X) @ factor(B).T

    def distances_through_kernel(self, X1: ArrayLike, X2: ArrayLike, B: ArrayLike) -> np.ndarray:
        r"""Squared learned distances ``D[a, b] = (k_a - k_b)^T A (k_a - k_b)`` between the rows
        of ``X1`` and ``X2``, from the raw kernel columns and :math:`A = W B W^\top` (no kernel
        PCA coordinates involved).

        Parameters
        ----------
        X1 : (m, d) array_like
            Points in the input space (the training data's features).
        X2 : (p, d) array_like
            The second points.
        B : (r, r) array_like
            The metric over the kernel-PCA coordinates (checked PSD).

        Returns
        -------
        (m, p) ndarray
            The squared distances (clipped at 0).

        Raises
        ------
        InputError
            When the points have the wrong number of features or ``B`` is not a valid metric.
        """
        A = self.kernel_matrix_A(B)
        K1 = self.kernel_columns(X1)
        K2 = self.kernel_columns(X2)
        KA1 = K1 @ A
        q1 = np.einsum("an,an->a", KA1, K1)
        q2 = np.einsum("bn,nm,bm->b", K2, A, K2)
        return np.maximum(q1[:, None] + q2[None, :] - 2.0 * KA1 @ K2.T, 0.0)

    def __repr__(self):
        base = super().__repr__()
        return base.replace("(n=", f"(kernel={self.kernel!r}, r={self.n_components}, n=", 1)
