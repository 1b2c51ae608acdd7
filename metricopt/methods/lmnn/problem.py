"""Large margin nearest neighbour (LMNN) as a declarative problem."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._validation import _py, check_choice, check_classes, check_int, check_real, check_sample_weight, check_y
from ...constraints import active_triplets, hinge_total, iter_triplets, n_triplets
from ...constraints import target_neighbors as default_target_neighbors
from ...balltree import TREE_MAX_DIM
from ...errors import InputError
from ...linalg import pair_scatter, range_columns
from ...losses import Hinge, ScalarLoss, as_loss
from ...problems.base import Problem
from ...problems.terms import Linear, Term, TripletLoss


def _regularizer_terms(regularizer):
    if regularizer is None:
        return []
    regs = list(regularizer) if isinstance(regularizer, (list, tuple)) else [regularizer]
    for r in regs:
        if not isinstance(r, Term):
            raise InputError(
                f"regularizer must be a metricopt term (e.g. metricopt.terms.Frobenius(1e-3) or "
                f"metricopt.terms.Trace(1e-3)) or a list of them; got {r!r}."
            )
    return regs


def _within(found: tuple, margin: float) -> tuple:
    """The triplets of ``found = (i, j, l, h)`` with ``h > -margin``."""
    keep = found[3] > -margin
    return tuple(a[keep] for a in found)


#: :meth:`LMNNProblem.transformed` keeps a multiple of this many columns (synthetic 20,000 x 50 at its optimum:
#: rank 22, 24 columns, within the ball tree's 25 dimensions)
RANGE_BUCKET = 8


class LMNNProblem(Problem):
    r"""LMNN: Weinberger & Saul, *Distance Metric Learning for Large Margin Nearest
    Neighbor Classification*, JMLR 10:207-244, 2009 (Eq. 14 and Section 3.4).

    .. math::

        \min_{M \succeq 0}\; (1-\mu) \sum_{i,\, j \rightsquigarrow i} d_M(x_i, x_j)
        + \mu \sum_{i,\, j \rightsquigarrow i} \sum_{l:\, y_l \ne y_i}
          \big[1 + d_M(x_i, x_j) - d_M(x_i, x_l)\big]_+ \;+\; R(M)

    with :math:`d_M(a, b) = (a-b)^\top M (a-b)`, :math:`j \rightsquigarrow i` the
    ``k`` target neighbours of :math:`x_i` and :math:`R` an optional convex
    regulariser. The exact program (Section 3.4) has one slack per triplet:

    .. math::

        \min_{M \succeq 0,\ \xi \ge 0}\ (1-\mu)\sum_{ij} \langle C_{ij}, M\rangle + \mu \sum_{ijl} \xi_{ijl}
        \quad\text{s.t.}\quad \langle C_{il} - C_{ij}, M\rangle \ge 1 - \xi_{ijl},

    :math:`C_{ab} = (x_a - x_b)(x_a - x_b)^\top`.

    With per-example weights :math:`w_i \ge 0` (``sample_weight``) the anchor's weight multiplies
    its pull terms and all its hinge terms (the weighted LMNN of Ramanan & Baker, *Local distance
    functions: a taxonomy, new algorithms, and an evaluation*, PAMI 33(4), 2011, which uses it to
    learn local metrics):

    .. math::

        \min_{M \succeq 0}\; (1-\mu) \sum_i w_i \sum_{j \rightsquigarrow i} d_M(x_i, x_j)
        + \mu \sum_i w_i \sum_{j \rightsquigarrow i} \sum_{l:\, y_l \ne y_i}
          \big[1 + d_M(x_i, x_j) - d_M(x_i, x_l)\big]_+ \;+\; R(M),

    i.e. the slack :math:`\xi_{ijl}` costs :math:`\mu w_i` in the exact program. All weights 1
    is the unweighted problem; the triplets of an anchor of weight 0 are left out altogether.

    With another triplet loss :math:`\ell` (``loss``; :mod:`metricopt.losses`) the push term is
    :math:`\mu \sum_i w_i \sum_{j \rightsquigarrow i} \sum_{l:\, y_l \ne y_i} \ell(1 + d_M(x_i, x_j) - d_M(x_i, x_l))`
    and the slack of the exact program costs :math:`\mu w_i\, \ell(\xi_{ijl})`; e.g. the squared hinge
    :math:`[\,\cdot\,]_+^2` of PyLMNN, whose objective (pull weight :math:`(1 - \mu)/\mu`, push weight 1) is this
    problem's divided by :math:`\mu` (same target neighbours), or the Huber hinge, smooth at the margin.

    Parameters
    ----------
    X : (n, d) array_like
    y : (n,) array_like of class labels
    k : int, default 3
        Number of target neighbours per point.
    mu : float in [0, 1], default 0.5
        Push weight; the pull term has weight ``1 - mu``.
    target_neighbors : (n, k) int array, optional
        Default: the ``k`` nearest same-class points by Euclidean distance in ``X``
        (self excluded, ties broken by the lower index). When given, its number of columns
        (at least 1) is ``k``, and classes need only two points (not ``k + 1``).
    regularizer : Term or list of Term, optional
        E.g. ``metricopt.terms.Frobenius(lam)`` or ``metricopt.terms.Trace(lam)``.
    search : {"auto", "brute", "tree"}, default "auto"
        How target neighbours and impostors are searched (Section 6 of the paper):
        ``"brute"`` blocked brute force (on the JAX device when large enough,
        :func:`metricopt.constraints.use_device_search`; NumPy below), ``"tree"`` per-class ball trees
        (:mod:`metricopt.balltree`; identical results), ``"auto"`` the faster one: the device search on
        an accelerator, else :func:`metricopt.balltree.choose_search` (trees for ``n >= 2000`` points in
        ``d <= 25`` dimensions).
    sample_weight : (n,) array_like of float, optional
        Weight ``w_i >= 0`` of each anchor point (finite, not all zero); ``None`` (default): all
        ones, the unweighted problem. Target neighbours and impostors are the same as without
        weights (a point of weight 0 still serves as another point's target neighbour or impostor).
    loss : {"hinge", "squared_hinge", "smooth_hinge"} or ScalarLoss, default "hinge"
        The loss of each triplet's hinge argument :math:`h = 1 + d_M(x_i, x_j) - d_M(x_i, x_l)` in the push
        term: ``"hinge"`` :math:`[h]_+` (the paper's), ``"squared_hinge"`` :math:`[h]_+^2` (PyLMNN's),
        ``"smooth_hinge"`` the Huber hinge of width 0.5 (:class:`metricopt.losses.SmoothHinge`; pass
        ``SmoothHinge(width=s)`` for another width), or any :class:`metricopt.losses.ScalarLoss`. Stored
        as :attr:`loss` (the loss object); both backends solve and the certificate certifies every one.
    """

    method = "LMNN"
    reference = "Weinberger & Saul, JMLR 10:207-244, 2009, Eq. 14"
    #: the searches of all triplets made so far (:meth:`find_triplets`; the calls a kept search answered not counted)
    searches: int = 0
    #: cluster of every point (multi-metric LMNN); ``None``: one metric
    clusters = None
    n_clusters = 1
    #: the class labels (required here)
    y: np.ndarray

    def __init__(self, X: ArrayLike, y: ArrayLike, k: int = 3, mu: float = 0.5, target_neighbors: ArrayLike | None = None,
                 regularizer: Any = None, search: str = "auto", sample_weight: ArrayLike | None = None,
                 loss: str | ScalarLoss = "hinge") -> None:
        super().__init__(X)
        #: the push term's loss (:class:`metricopt.losses.ScalarLoss`)
        self.loss = as_loss(loss, "loss")
        self.y = check_y(y, self.n)
        self.k = check_int(k, "k", low=1)
        self.mu = check_real(mu, "mu", low=0.0, high=1.0)
        self.search = check_choice(search, "search", ("auto", "brute", "tree"))
        #: per-anchor weights (float64, shape (n,)), or ``None``: unweighted
        self.sample_weight = check_sample_weight(sample_weight, self.n)
        # explicit target neighbours define k (their number of columns): the class sizes the default search
        # needs (k + 1 points per class) do not apply to them
        self.classes_, _ = check_classes(self.y, self.k if target_neighbors is None else None, self.method)
        if target_neighbors is None:
            if self._use_tree(self.X.shape[1]):
                from ...balltree import tree_target_neighbors

                T = tree_target_neighbors(self.X, self.y, self.k)
            else:
                T = default_target_neighbors(self.X, self.y, self.k)
        else:
            T = np.asarray(target_neighbors)
            if T.ndim != 2 or T.shape[0] != self.n:
                raise InputError(f"target_neighbors must have shape (n, k) = ({self.n}, k); got {T.shape}.")
            if T.shape[1] == 0:
                raise InputError(f"target_neighbors has shape {T.shape}: 0 target neighbours per point, which leaves "
                                 "LMNN without pull or push terms (its optimum would be 0 at M = 0). Give every point "
                                 "at least one same-class target neighbour (k >= 1 columns), or leave "
                                 "target_neighbors=None.")
            if T.dtype.kind not in "iu":
                raise InputError(f"target_neighbors must hold integer indices in [0, {self.n - 1}]. Got dtype "
                                 f"{T.dtype}; pass an integer array (or leave target_neighbors=None).")
            if np.any(T < 0) or np.any(T >= self.n):
                i, j = np.argwhere((T < 0) | (T >= self.n))[0]
                raise InputError(f"target_neighbors must hold integer indices in [0, {self.n - 1}]. Row {i} lists "
                                 f"{T[i, j]}; X has {self.n} samples.")
            T = T.astype(np.int64)
            if np.any(self.y[T] != self.y[:, None]):
                i, j = np.argwhere(self.y[T] != self.y[:, None])[0]
                raise InputError(f"every target neighbour must have the same label as its anchor point. Point {i} "
                                 f"(label {_py(self.y[i])!r}) lists {T[i, j]} (label {_py(self.y[T[i, j]])!r}); "
                                 "pick neighbours of the same class, or leave target_neighbors=None.")
            if np.any(T == np.arange(self.n)[:, None]):
                i = int(np.flatnonzero(np.any(T == np.arange(self.n)[:, None], axis=1))[0])
                raise InputError(f"a point cannot be its own target neighbour. Point {i} lists itself; pick other "
                                 "points of its class, or leave target_neighbors=None.")
            self.k = T.shape[1]
        self.target_neighbors = T
        anchors = np.repeat(np.arange(self.n), self.k)
        pull_w = None if self.sample_weight is None else self.sample_weight[anchors]
        a, b = self.lift(anchors, T.ravel())
        self.pull_matrix = pair_scatter(self.X_lifted, a, b, pull_w)
        self.regularizer = _regularizer_terms(regularizer)
        self.terms = [
            Linear((1.0 - self.mu) * self.pull_matrix, name="pull"),
            TripletLoss(self.loss, self.mu),  # the hinge: TripletHinge(mu)
            *self.regularizer,
        ]

    # ------------------------------------------------------------------
    # the triplet structure, written once for one metric and for several (multi-metric LMNN
    # overrides ``X_lifted``, ``lift`` and ``transformed``): the hinge term, both backends and
    # the certificate reach the data only through these
    @property
    def X_lifted(self) -> np.ndarray:
        """The points whose pair differences the metric acts on (here ``X`` itself)."""
        return self.X

    def lift(self, a: Any, b: Any) -> tuple[Any, Any]:
        """Rows of :attr:`X_lifted` whose difference is the pair ``(a, b)`` as the metric sees it.

        Parameters
        ----------
        a : array_like of int
            The pairs' first points.
        b : array_like of int
            Their second points.

        Returns
        -------
        (a, b) : tuple
            The rows (here ``a`` and ``b`` themselves).
        """
        return a, b

    def transformed(self, M: ArrayLike) -> np.ndarray:
        """``Z = X L^T`` with ``M = L^T L`` (distances in ``Z`` are ``d_M``), on ``M``'s numerical range
        (:func:`metricopt.linalg.range_columns`): for a metric of rank ``r``, its leading ``r`` columns rounded up
        to a multiple of :data:`RANGE_BUCKET`, where that lets the ball tree serve (at most
        :data:`~metricopt.balltree.TREE_MAX_DIM` columns; every search of all triplets then costs far less than the
        brute force's ``O(n^2 d)``). Every column otherwise, and where the searches run on an accelerator: the
        brute-force search runs as a jitted kernel, and each new width compiles it again (MNIST-5k at 164 dimensions,
        whose rank drifts between 56 and 164: compilations 3.2 s -> 10.5 s and re-checks 7.7 s -> 14.8 s of a 126 s
        solve with every width, against searches of 5,000 points that a narrower width shortens by 0.2 s).

        Parameters
        ----------
        M : (d, d) array_like
            The metric.

        Returns
        -------
        (n, r) ndarray
            ``Z``, ``r <= d``.
        """
        Z = self.X @ self.factor(M).T
        r = int(range_columns(Z).sum())
        # whole multiples of RANGE_BUCKET columns (the leading ones, by decreasing eigenvalue): a few widths only, so
        # that a jitted search below the tree's size (a small problem on the device) compiles for few shapes
        r = min(self.d, -(-r // RANGE_BUCKET) * RANGE_BUCKET)
        if r == self.d or r > TREE_MAX_DIM or self._accelerated_search():
            return Z
        return np.ascontiguousarray(Z[:, :r])

    def _accelerated_search(self) -> bool:
        """Whether the searches run on an accelerator (there each new width of ``Z`` costs a compilation of the
        search, seconds, against milliseconds for the pass it saves: ``Z`` keeps every column)."""
        if self.search != "auto":
            return False
        from ...constraints import use_device_search
        from ...search import default_platform

        return use_device_search(self.n, self.d) and default_platform() != "cpu"

    def _use_tree(self, dim):
        if self.clusters is not None or self.search == "brute":
            return False
        if self.search == "tree":
            return True
        from ...constraints import use_device_search
        from ...search import default_platform

        if use_device_search(self.n, dim) and default_platform() != "cpu":
            return False  # on an accelerator the device search wins (letter-like 14,000 x 16: 0.014 s vs 0.90 s)
        from ...balltree import choose_search

        return choose_search(self.n, dim) == "tree"

    def find_triplets(self, M: ArrayLike, margin: float = 0.0, limit: int | None = None, reuse_within: float = 0.0,
                      at_least: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Every triplet with hinge argument ``1 + d_ij - d_il > -margin`` at ``M``:
        ``(i, j, l, h)`` (``None`` above ``limit``), by the search of :attr:`search`.

        The last search is kept: a later call at the same ``M`` and a margin no wider filters it
        instead of searching again (the JAX backend's re-check, the exact objective and the certificate
        at one iterate then share one search). With ``reuse_within > 0`` a kept search at an ``M'``
        with ``max|M - M'| <= reuse_within * max(1, max|M|)`` is reused too: its ``h`` are then those at
        ``M'``, which only callers that use the triplets as a *selection* may accept (the certificate
        choosing which multipliers to free: its bound is valid for any selection).

        With one metric, a kept search at another ``M'`` with a wider margin also answers exactly, its ``h``
        recomputed at ``M``, where a bound (:mod:`metricopt.methods.lmnn.kept_search`: the smallest eigenvalue of
        the pencil ``(M, M')`` and the target distances) shows that no triplet it left out is within ``margin`` at
        ``M``. Where that fails, the next search is made wider by about the drift measured, so that the iterates
        that follow are answered from it (the JAX backend's re-checks, searched every few iterations).

        With :attr:`sample_weight`, triplets whose anchor has weight 0 are left out (they count in no
        objective, working set, active set or certificate).

        Parameters
        ----------
        M : (d, d) array_like
            The metric.
        margin : float, default 0.0
            Triplets with hinge argument above ``-margin`` are returned.
        limit : int or None
            Give up (``None``) above this many triplets.
        reuse_within : float, default 0.0
            Relative distance within which a kept search is reused (see above).
        at_least : float, optional
            A caller that uses the triplets as a selection may accept fewer: a kept search (as above) whose margin
            is narrower than ``margin`` but at least ``at_least`` serves, and its triplets are returned (those within
            its own margin). The certificate's ramp dual points take the re-check's search so instead of searching
            every triplet again at their widest ramp's margin.

        Returns
        -------
        tuple or None
            ``(i, j, l, h)``: the anchors, targets, impostors and hinge arguments; ``None`` above ``limit``.
        """
        M = np.ascontiguousarray(M, dtype=np.float64)
        found = self._from_kept(M, margin, reuse_within, at_least)
        if found is None:
            return self._search_and_keep(M, margin, limit)
        return None if limit is not None and found[0].size > limit else found

    def _from_kept(self, M: np.ndarray, margin: float, reuse_within: float = 0.0, at_least: float | None = None):
        """The kept search's answer at ``M`` (see :meth:`find_triplets`), or ``None`` when a new search is needed:
        the kept search at this ``M`` (or within ``reuse_within``, or narrower down to ``at_least``), filtered;
        else, for one metric, the kept triplets with their ``h`` recomputed at ``M`` where
        :mod:`.kept_search`'s bound shows that no triplet it left out is within ``margin`` at ``M``."""
        kept = getattr(self, "_last_search", None)
        if kept is None or kept.M.shape != M.shape:
            return None
        enough = margin if at_least is None else min(margin, at_least)
        if kept.margin >= enough:
            diff = float(np.abs(kept.M - M).max())
            if diff == 0.0 or diff <= reuse_within * max(1.0, float(np.abs(M).max())):
                return _within(kept.found, margin) if margin < kept.margin else kept.found
        if self.clusters is not None:
            return None
        from .kept_search import coverage, hinge_arguments, pencil_bounds, point_radii, target_distances

        radii = getattr(self, "_radii", None)
        if radii is None:
            radii = self._radii = point_radii(self.X)
        if kept.memo is not None and np.array_equal(kept.memo[0], M):
            _, Z, tdist, bounds = kept.memo
        else:
            Z = self.transformed(M)
            tdist = target_distances(Z, self.target_neighbors)
            bounds = pencil_bounds(M, kept.M)
            kept.memo = (M.copy(), Z, tdist, bounds)
        need = coverage(kept, tdist, margin, radii, bounds)
        if not need <= kept.margin - margin:  # (a kept margin no wider than this one measures the drift only)
            kept.need = need  # the next search's headroom
            return None
        i, j, l, _ = kept.found
        return _within((i, j, l, hinge_arguments(Z, self.target_neighbors, tdist, i, j, l)), margin)

    def _search_and_keep(self, M: np.ndarray, margin: float, limit: int | None):
        """A new search at ``M``, kept; widened by :func:`.kept_search.headroom` where the drift of the iterates
        makes it likely to answer the next calls (a widened search past ``limit`` is repeated at ``margin``).
        :attr:`searches` counts the completed ones (a solver's time estimates follow the searches, not the calls
        a kept search answered)."""
        from .kept_search import KeptSearch, headroom, target_distances

        extra = headroom(getattr(self, "_last_search", None), margin) if self.clusters is None else 0.0
        Z = self.transformed(M)  # once for the search(es) and the target distances
        found = self._search(M, margin + extra, limit, Z) if extra > 0 else None
        if found is None:
            extra = 0.0
            found = self._search(M, margin, limit, Z)
        if found is None:
            return None
        self.searches += 1
        tdist = target_distances(Z, self.target_neighbors) if self.clusters is None else np.zeros((0, 0))
        self._last_search = KeptSearch(M.copy(), float(margin + extra), found, tdist)
        return _within(found, margin) if extra > 0 else found

    def _search(self, M, margin, limit, Z=None):
        Z = self.transformed(M) if Z is None else Z
        if self._use_tree(Z.shape[-1]):
            from ...balltree import tree_active_triplets

            found = tree_active_triplets(Z, self.y, self.target_neighbors, margin, limit=limit)
        else:
            found = active_triplets(Z, self.y, self.target_neighbors, margin, limit=limit, clusters=self.clusters)
        if found is not None and self.sample_weight is not None:
            keep = self.sample_weight[found[0]] > 0
            if not np.all(keep):
                found = tuple(a[keep] for a in found)
        return found

    def anchor_weights(self, i: ArrayLike) -> np.ndarray | None:
        """The weights ``w_i`` of the anchors ``i`` of triplets (float64), or ``None`` when unweighted.

        Parameters
        ----------
        i : array_like of int
            The anchors.

        Returns
        -------
        ndarray or None
            The weights.
        """
        return None if self.sample_weight is None else self.sample_weight[np.asarray(i, dtype=np.int64)]

    def hinge_sum(self, M: ArrayLike) -> float:
        """``sum over all triplets of [1 + d_ij - d_il]_+`` at ``M``, exactly rounded (``math.fsum``, see
        :func:`metricopt.constraints.hinge_total`): from the kept search when it answers a call at ``M`` exactly
        (see :meth:`find_triplets`: at this very ``M`` the same value as a fresh sum, bit for bit), else by a search.
        With :attr:`sample_weight`: ``sum_t w_{i_t} [h_t]_+`` (the exactly rounded sum of the products).

        This is the push term of LMNN without its weight (Weinberger & Saul, JMLR 2009, Eq. 14, second sum).

        Parameters
        ----------
        M : (d, d) array_like
            The metric.

        Returns
        -------
        float
            The sum.
        """
        M = np.ascontiguousarray(M, dtype=np.float64)
        if self.sample_weight is not None:
            i, _, _, h = self.find_triplets(M, 0.0)  # type: ignore[misc]
            pos = h > 0
            return math.fsum((self.sample_weight[i[pos]] * h[pos]).tolist())
        found = self._from_kept(M, 0.0)
        if found is not None or self._use_tree(self.d):
            h = (found if found is not None else self.find_triplets(M, 0.0))[3]  # type: ignore[index]
            return math.fsum(h[h > 0].tolist())
        return hinge_total(self.transformed(M), self.y, self.target_neighbors, clusters=self.clusters)

    def loss_sum(self, M: ArrayLike, loss: ScalarLoss | None = None) -> float:
        r"""``sum over all triplets of loss(1 + d_ij - d_il)`` at ``M`` (``loss`` default :attr:`loss`), exactly
        rounded (``math.fsum`` of the per-triplet float64 values): :meth:`hinge_sum` for the hinge; else over the
        triplets with :math:`h > 0` (every loss vanishes on :math:`h \le 0`), from the kept search when it was at
        this very ``M`` (or with a tree search or sample weights), else blocked (memory ``O(block * n)``). With
        :attr:`sample_weight`: ``sum_t w_{i_t} loss(h_t)``.

        Parameters
        ----------
        M : (d, d) array_like
            The metric.
        loss : ScalarLoss, optional
            The scalar loss (default :attr:`loss`).

        Returns
        -------
        float
            The sum.
        """
        loss = self.loss if loss is None else loss
        if type(loss) is Hinge:
            return self.hinge_sum(M)
        M = np.ascontiguousarray(M, dtype=np.float64)
        found = None if self.sample_weight is not None else self._from_kept(M, 0.0)
        if found is not None or self.sample_weight is not None or self._use_tree(self.d):
            i, _, _, h = found if found is not None else self.find_triplets(M, 0.0)  # type: ignore[misc]
            pos = h > 0
            vals = loss.value(h[pos])
            if self.sample_weight is not None:
                vals = self.sample_weight[i[pos]] * vals
            return math.fsum(vals.tolist())
        parts = []
        for *_, h in iter_triplets(self.transformed(M), self.y, self.target_neighbors, 0.0, clusters=self.clusters):
            parts.extend(loss.value(h[h > 0]).tolist())
        return math.fsum(parts)

    def triplet_rows(self, i: ArrayLike, j: ArrayLike, l: ArrayLike) -> np.ndarray:
        """Rows ``A_t`` with ``A_t . vec(M) = d_M(x_i, x_l) - d_M(x_i, x_j)`` (from :meth:`triplet_factors`).

        Parameters
        ----------
        i : (m,) array_like of int
            The anchors.
        j : (m,) array_like of int
            The target neighbours.
        l : (m,) array_like of int
            The impostors.

        Returns
        -------
        (m, D*D) ndarray
            One row per triplet (``D`` the lifted dimension).
        """
        U, V = self.triplet_factors(i, j, l)
        return (U[:, :, None] * U[:, None, :] - V[:, :, None] * V[:, None, :]).reshape(U.shape[0], -1)

    def triplet_factors(self, i: ArrayLike, j: ArrayLike, l: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``(U, V)`` with rows ``u_t = x_i - x_l`` and ``v_t = x_i - x_j`` (lifted), so that the row
        ``A_t`` of :meth:`triplet_rows` is ``vec(u_t u_t^T - v_t v_t^T)``: the rank-two form the
        certificate's dedicated restricted-dual solver works with.

        Parameters
        ----------
        i : (m,) array_like of int
            The anchors.
        j : (m,) array_like of int
            The target neighbours.
        l : (m,) array_like of int
            The impostors.

        Returns
        -------
        U : (m, D) ndarray
            Rows ``x_i - x_l``.
        V : (m, D) ndarray
            Rows ``x_i - x_j``.
        """
        Xl = self.X_lifted
        a, b = self.lift(i, l)
        c, e = self.lift(i, j)
        return Xl[a] - Xl[b], Xl[c] - Xl[e]

    def triplet_scatter(self, i: ArrayLike, j: ArrayLike, l: ArrayLike, w: ArrayLike | None = None) -> np.ndarray:
        """``sum_t w_t (C_il - C_ij)`` (``C_ab`` the outer product of a lifted pair difference).

        Parameters
        ----------
        i : (m,) array_like of int
            The anchors.
        j : (m,) array_like of int
            The target neighbours.
        l : (m,) array_like of int
            The impostors.
        w : (m,) array_like or None
            The weights ``w_t`` (``None``: all 1).

        Returns
        -------
        (D, D) ndarray
            The weighted sum.
        """
        Xl = self.X_lifted
        (a, b), (c, e) = self.lift(i, l), self.lift(i, j)
        return pair_scatter(Xl, a, b, w) - pair_scatter(Xl, c, e, w)

    @property
    def hinge(self) -> Term:
        """The push term (:class:`~metricopt.problems.terms.TripletHinge`, or the
        :class:`~metricopt.problems.terms.TripletLoss` of :attr:`loss`)."""
        return self.terms[1]

    @property
    def n_triplets(self) -> int:
        """Number of triplets ``(i, j, l)`` in the full problem."""
        return n_triplets(self.y, self.target_neighbors)

