"""Multi-metric LMNN (Weinberger & Saul, JMLR 2009, Section 5.2)."""

from __future__ import annotations

from typing import Any
from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike

from ..._validation import check_choice, check_int, check_X, check_y
from ...errors import InputError
from ...linalg import factor
from ...protocols import Geometry, GeometryKind
from .problem import LMNNProblem

#: how the clusters are chosen when not given as an array
CLUSTERINGS = ("labels", "kmeans")


def _make_clusters(X, y, clusters, n_clusters, random_state):
    """Integer cluster codes ``0..c-1`` for every point."""
    if isinstance(clusters, str):
        how = check_choice(clusters, "clusters", CLUSTERINGS)
        if how == "labels":
            if n_clusters is not None:
                raise InputError("n_clusters is set by the labels when clusters='labels'; leave it None, or "
                                 "use clusters='kmeans'.")
            return np.unique(y, return_inverse=True)[1].reshape(-1).astype(np.int64)
        if n_clusters is None:
            raise InputError("clusters='kmeans' needs n_clusters (the number of metrics), e.g. n_clusters=4.")
        c = check_int(n_clusters, "n_clusters", low=1)
        if c > X.shape[0]:
            raise InputError(f"n_clusters={c} exceeds the number of points ({X.shape[0]}).")
        from sklearn.cluster import KMeans

        km = KMeans(n_clusters=c, n_init=10, random_state=random_state).fit(X)
        codes = np.unique(km.labels_, return_inverse=True)[1].reshape(-1)
        return codes.astype(np.int64)
    arr = np.asarray(clusters)
    if arr.shape != (X.shape[0],):
        raise InputError(f"clusters must be 'labels', 'kmeans' or an array of shape (n,) = ({X.shape[0]},) with "
                         f"the cluster of every point; got shape {arr.shape}.")
    if n_clusters is not None:
        raise InputError("n_clusters is set by the given cluster array; leave it None.")
    try:
        return np.unique(arr, return_inverse=True)[1].reshape(-1).astype(np.int64)
    except TypeError as exc:
        raise InputError(f"cluster ids must be mutually comparable (sortable): {exc}") from None


class MultiMetricLMNNProblem(LMNNProblem):
    r"""Multi-metric LMNN: one metric per cluster, learned jointly
    (Weinberger & Saul, JMLR 10:207-244, 2009, Section 5.2).

    The points are partitioned into clusters :math:`c(i) \in \{1..C\}` (by default the
    classes); the distance from :math:`x_i` to :math:`x_j` uses the metric of
    :math:`x_j`'s cluster, :math:`D(x_i, x_j) = (x_i - x_j)^\top M^{c(j)} (x_i - x_j)`, and
    all metrics are learned in one convex program (the paper's SDP with
    :math:`M^1, \dots, M^C`):

    .. math::

        \min_{M^1..M^C \succeq 0}\ (1-\mu)\sum_{i, j \rightsquigarrow i} D(x_i, x_j)
        + \mu \sum_{i, j \rightsquigarrow i, l: y_l \ne y_i} [1 + D(x_i, x_j) - D(x_i, x_l)]_+ + R.

    **How it is solved.** Lift every point into one copy per metric,
    :math:`\tilde x_i^{c} = e_c \otimes x_i \in \mathbb R^{Cd}`, and write the pair
    :math:`(i, j)` as :math:`\tilde x_i^{c(j)} - \tilde x_j^{c(j)}`. Then
    :math:`D(x_i, x_j) = (\tilde x_i^{c(j)} - \tilde x_j^{c(j)})^\top \tilde M
    (\tilde x_i^{c(j)} - \tilde x_j^{c(j)})` for :math:`\tilde M = \mathrm{blockdiag}(M^1..M^C)`,
    and every term of the objective reads only the diagonal blocks of :math:`\tilde M`.
    The diagonal blocks of a PSD matrix are PSD and any PSD blocks are the diagonal of
    a PSD (block-diagonal) matrix, so optimising over one PSD :math:`\tilde M` of size
    :math:`Cd` is the same program: the LMNN machinery (exact SDP with a working set,
    the JAX solvers, the duality-gap certificate) applies unchanged to the lifted
    pairs. Returned metrics are the diagonal blocks; the JAX backend keeps
    :math:`\tilde M` block diagonal exactly (block-diagonal gradients, and the PSD
    projection of a block-diagonal matrix is block-wise), the exact backend's answer is
    made block diagonal by :meth:`repair` (the objective does not change; a Frobenius
    regulariser can only decrease).

    Parameters
    ----------
    X : (n, d) array_like
    y : (n,) labels
    clusters : "labels", "kmeans" or (n,) array, default "labels"
        The cluster of every point: its class (the paper's default), k-means on ``X``
        with ``n_clusters`` clusters, or given.
    n_clusters : int, optional
        Number of k-means clusters (``clusters="kmeans"`` only).
    k, mu, target_neighbors, regularizer
        As for :class:`LMNNProblem` (regularisers act on the lifted :math:`\tilde M`:
        ``Trace`` is :math:`\lambda \sum_c \mathrm{tr} M^c`, ``Frobenius``
        :math:`\frac\lambda2\sum_c \|M^c\|_F^2` on block-diagonal points).
    random_state : int, default 0
        Seed of k-means.

    Attributes
    ----------
    clusters : (n,) int array
        Cluster code of every point (``0..n_clusters-1``).
    n_clusters : int
    """

    method = "MultiMetricLMNN"
    reference = "Weinberger & Saul, JMLR 10:207-244, 2009, Section 5.2"

    def __init__(self, X, y, clusters="labels", n_clusters=None, k=3, mu=0.5, target_neighbors=None,
                 regularizer=None, random_state=0):
        Xc = check_X(X)
        yc = check_y(y, Xc.shape[0])
        codes = _make_clusters(Xc, yc, clusters, n_clusters, random_state)
        self.clusters = codes
        self.n_clusters = int(codes.max()) + 1
        n, d = Xc.shape
        C = self.n_clusters
        # lifted points: row c*n + i is e_c (x) x_i
        lifted = np.zeros((C * n, C * d))
        for c in range(C):
            lifted[c * n:(c + 1) * n, c * d:(c + 1) * d] = Xc
        self._X_lifted = lifted
        self.input_dim = d
        super().__init__(Xc, yc, k=k, mu=mu, target_neighbors=target_neighbors, regularizer=regularizer,
                         search="brute")

    # ------------------------------------------------------------------ lifted structure
    @property
    def d(self) -> int:
        """Size of the lifted variable :math:`\\tilde M` (``n_clusters * input_dim``)."""
        return self.n_clusters * self.X.shape[1]

    def _geometry(self):
        """Block-diagonal PSD: one ``input_dim x input_dim`` block per metric."""
        return Geometry(GeometryKind.PSD, blocks=self.psd_blocks)

    @property
    def psd_blocks(self) -> tuple[int, int]:
        """``(n_clusters, input_dim)``: the optimum is block diagonal, so the exact backend declares one
        PSD block per metric instead of one ``Cd x Cd`` PSD variable (same optimum, smaller program)."""
        return self.n_clusters, self.X.shape[1]

    @property
    def X_lifted(self) -> np.ndarray:
        """The points, one copy per metric (``(n_clusters * n, input_dim)``)."""
        return self._X_lifted

    def lift(self, a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
        """The pair ``(a, b)`` under the metric of ``b``'s cluster: rows ``c_b n + a``, ``c_b n + b``.

        Parameters
        ----------
        a : array_like of int
            The pairs' first points.
        b : array_like of int
            Their second points.

        Returns
        -------
        (a, b) : tuple of ndarray
            The rows of :attr:`X_lifted`.
        """
        a = np.asarray(a)
        b = np.asarray(b)
        off = self.clusters[b] * self.n  # type: ignore[index]
        return off + a, off + b

    def metrics(self, M: ArrayLike) -> list[np.ndarray]:
        """The diagonal blocks ``[M^1, ..., M^C]`` of the lifted ``M`` (each ``d x d``).

        Parameters
        ----------
        M : (D, D) array_like
            The lifted metric (``D = n_clusters * input_dim``).

        Returns
        -------
        list of (d, d) ndarray
            One metric per cluster (copies).
        """
        M = np.asarray(M, dtype=np.float64)
        d = self.input_dim
        return [M[c * d:(c + 1) * d, c * d:(c + 1) * d].copy() for c in range(self.n_clusters)]

    def lifted_metric(self, Ms: Any) -> np.ndarray:
        """Block-diagonal lifted ``M`` from one metric (repeated for every cluster) or a list of them.

        Parameters
        ----------
        Ms : (d, d) ndarray or list of them
            One metric, or one per cluster.

        Returns
        -------
        (D, D) ndarray
            The block-diagonal lifted metric.

        Raises
        ------
        InputError
            For a wrong number of metrics or a metric of the wrong shape.
        """
        d = self.input_dim
        if isinstance(Ms, np.ndarray) and Ms.ndim == 2:
            Ms = [Ms] * self.n_clusters
        if len(Ms) != self.n_clusters:
            raise InputError(f"expected {self.n_clusters} metrics (one per cluster); got {len(Ms)}.")
        out = np.zeros((self.d, self.d))
        for c, Mc in enumerate(Ms):
            Mc = np.asarray(Mc, dtype=np.float64)
            if Mc.shape != (d, d):
                raise InputError(f"each metric must have shape ({d}, {d}); got {Mc.shape}.")
            out[c * d:(c + 1) * d, c * d:(c + 1) * d] = Mc
        return out

    def transformed(self, M: ArrayLike) -> np.ndarray:
        """The stack ``Z[c] = X L_c^T`` (``M^c = L_c^T L_c``), shape ``(C, n, d)``.

        Parameters
        ----------
        M : (D, D) array_like
            The lifted metric (``D = n_clusters * input_dim``).

        Returns
        -------
        (C, n, d) ndarray
            The mapped points, one stack per metric.
        """
        return np.stack([self.X @ factor(Mc).T for Mc in self.metrics(M)])

    def repair(self, V: Mapping[str, Any]) -> dict:
        """Zero the off-diagonal blocks (the objective reads only the diagonal ones).

        Parameters
        ----------
        V : dict
            The point (``V["M"]`` the lifted metric).

        Returns
        -------
        dict
            The repaired point (a new dict).
        """
        return {**V, "M": self.lifted_metric(self.metrics(V["M"]))}

    def initial_point(self) -> dict:
        """The starting point: the lifted identity.

        Returns
        -------
        dict
            ``{"M": I}``.
        """
        return {"M": np.eye(self.d)}

    # ------------------------------------------------------------------ prediction
    def knn_predict(self, X_test: ArrayLike, M: ArrayLike, k: int | None = None, ties: str = "index") -> np.ndarray:
        """kNN labels of ``X_test`` under the cluster-dependent distance (see :func:`multi_metric_knn_predict`).

        Parameters
        ----------
        X_test : (m, input_dim) array_like
            The test points.
        M : (D, D) array_like
            The lifted metric (``D = n_clusters * input_dim``).
        k : int, optional
            The number of neighbours (default: the problem's ``k``).
        ties : {"index", "inclusive"}, default "index"
            The tie rule of :func:`metricopt.knn_predict`.

        Returns
        -------
        (m,) ndarray
            The predicted labels.

        Raises
        ------
        InputError
            For invalid test points, ``k`` or ``ties``.
        """
        return multi_metric_knn_predict(self.X, self.y, self.clusters, self.metrics(M), X_test,  # type: ignore[arg-type]
                                        k=self.k if k is None else k, ties=ties)

    def knn_loo_predict(self, M: ArrayLike, k: int | None = None, ties: str = "index") -> np.ndarray:
        """Leave-one-out kNN labels of the training points under the cluster-dependent distance.

        Parameters
        ----------
        M : (D, D) array_like
            The lifted metric (``D = n_clusters * input_dim``).
        k : int, optional
            The number of neighbours (default: the problem's ``k``).
        ties : {"index", "inclusive"}, default "index"
            The tie rule of :func:`metricopt.knn_predict`.

        Returns
        -------
        (n,) ndarray
            The predicted labels.

        Raises
        ------
        InputError
            For an invalid ``k`` or ``ties``.
        """
        return multi_metric_knn_predict(self.X, self.y, self.clusters, self.metrics(M), None,  # type: ignore[arg-type]
                                        k=self.k if k is None else k, ties=ties)


def multi_metric_distances(X_train: ArrayLike, clusters: np.ndarray, metrics: Any, X_query: ArrayLike) -> np.ndarray:
    r"""Squared distances :math:`D_{qj} = (x_q - x_j)^\top M^{c(j)} (x_q - x_j)` from every query
    to every training point (``(n_query, n_train)``), each training point under its cluster's metric.

    Parameters
    ----------
    X_train : (n, d) array_like
        The training points.
    clusters : (n,) ndarray of int
        The cluster of each training point.
    metrics : list of (d, d) ndarray
        One metric per cluster.
    X_query : (m, d) array_like
        The queries.

    Returns
    -------
    (m, n) ndarray
        The squared distances.
    """
    X_train = np.asarray(X_train, dtype=np.float64)
    X_query = np.asarray(X_query, dtype=np.float64)
    from scipy.spatial.distance import cdist

    D = np.empty((X_query.shape[0], X_train.shape[0]))
    for c, Mc in enumerate(metrics):
        idx = np.flatnonzero(clusters == c)
        if idx.size:
            L = factor(Mc)
            D[:, idx] = cdist(X_query @ L.T, X_train[idx] @ L.T, metric="sqeuclidean")
    return D


def multi_metric_knn_predict(X_train: ArrayLike, y_train: ArrayLike, clusters: ArrayLike, metrics: Any,
                             X_test: ArrayLike | None, k: int = 3, block_size: int = 2048, ties: str = "index"
                             ) -> np.ndarray:
    """kNN rule of :func:`metricopt.knn_predict` under the multi-metric distance (the metric of the
    *training* point's cluster, JMLR 2009 Sec. 5.2). ``X_test=None``: leave-one-out on the training set.

    ``ties`` is the tie rule of :func:`metricopt.knn_predict`: ``"index"`` breaks exact distance
    ties by lower training index (a tied vote drops the farthest neighbour); ``"inclusive"`` lets
    every point tied with the k-th nearest vote.

    Parameters
    ----------
    X_train : (n, d) array_like
        The training points.
    y_train : (n,) array_like
        Their labels.
    clusters : (n,) array_like of int
        The cluster of each training point.
    metrics : list of (d, d) ndarray
        One metric per cluster.
    X_test : (m, d) array_like or None
        The test points; ``None``: leave-one-out on the training set.
    k : int, default 3
        The number of neighbours.
    block_size : int, default 2048
        Queries per block (bounds the memory).
    ties : {"index", "inclusive"}, default "index"
        The tie rule of :func:`metricopt.knn_predict`.

    Returns
    -------
    ndarray
        The predicted labels (one per test point, or per training point for leave-one-out).

    Raises
    ------
    InputError
        For invalid data, ``k`` larger than the available training points, or an invalid ``ties``.
    """
    from ...knn import TIE_RTOL, _check_ties, _encode, _inclusive_sets, _k_smallest_stable, _vote, _vote_inclusive

    ties = _check_ties(ties)

    X_train = check_X(X_train, "X_train")
    y_train = check_y(y_train, X_train.shape[0], "y_train")
    clusters = np.asarray(clusters, dtype=np.int64)
    loo = X_test is None
    Xq = X_train if loo else check_X(X_test, "X_test")
    if Xq.shape[1] != X_train.shape[1]:
        raise InputError(f"X_test has {Xq.shape[1]} features; the training data has {X_train.shape[1]}.")
    n_avail = X_train.shape[0] - (1 if loo else 0)
    k = check_int(k, "k", low=1)
    if k > n_avail:
        raise InputError(f"k={k} is larger than the number of available training points ({n_avail}).")
    classes, codes = _encode(y_train)
    out = np.empty(Xq.shape[0], dtype=np.intp)
    for s in range(0, Xq.shape[0], block_size):
        e = min(s + block_size, Xq.shape[0])
        D = multi_metric_distances(X_train, clusters, metrics, Xq[s:e])
        if loo:
            D[np.arange(e - s), np.arange(s, e)] = np.inf
        if ties == "inclusive":
            idx, dist, valid = _inclusive_sets(D, k, TIE_RTOL)
            out[s:e] = _vote_inclusive(codes[idx], dist, valid, classes.size, TIE_RTOL)
        else:
            out[s:e] = _vote(codes[_k_smallest_stable(D, k)], classes.size)
    return classes[out]
