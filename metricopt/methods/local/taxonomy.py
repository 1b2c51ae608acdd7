r"""Local distance functions: *how* x *where* x *when* (Ramanan & Baker, IEEE PAMI 33(4):794-806, 2011).

A local distance function measures :math:`D(q, x_i) = (q - x_i)^\top M(\cdot) (q - x_i)` with a
metric tensor that depends on where one stands. The taxonomy has three axes, each a piece here:

**how** a metric is learned on a (weighted) set of points:

* ``"lda"``: regularised weighted LDA (:mod:`metricopt.methods.local.lda`, :math:`\lambda = 1`, bagged
  :math:`\Sigma_B`, rank = the classes present);
* ``"lmnn"``: (weighted) LMNN (Weinberger & Saul, JMLR 2009; :class:`metricopt.LMNNProblem` with
  ``sample_weight``), the many small local problems solved as one batch
  (:mod:`metricopt.methods.local.batch`);
* ``"hybrid"``: the global metric by LMNN (shortlists and neighbourhoods), the local ones by LDA.

The **global** metric :math:`G` (LDA on all the training set, or LMNN) defines every neighbourhood
and the shortlist of the two-stage classifier.

**where** metrics live:

* ``"global"``: one metric, :math:`D(q, x_i) = d_G(q, x_i)`;
* ``"class"``: one per class, :math:`D(q, x_i) = d_{M_{y_i}}(q, x_i)`. LMNN learns them jointly as
  multi-metric LMNN (JMLR 2009, Eq. 16: the metric of the neighbour's class; ``class_form="joint"``)
  or, with ``class_form="anchor"``, in the paper's Eq. 8 form where a triplet uses its anchor's class
  metric: that objective separates into one weighted LMNN per class (weights :math:`1[y_i = c]`).
  LDA fits class :math:`c` plus its nearest other-class points under :math:`G`, one fixed set size
  for every class (``class_set_size``, default twice the largest class, at most ``n``);
* ``"exemplar"``: one metric per training point, :math:`D(q, x_i) = d_{M_i}(q, x_i)`, learned on
  the ``S`` nearest training points of :math:`x_i` under :math:`G` (``neighborhood_size=50``);
* ``"test"``: one metric at the query, :math:`D(q, x_i) = d_{M_q}(q, x_i)`, learned on the ``S``
  nearest training points of :math:`q` (lazy learning).

**when** they are learned:

* ``"offline"`` (at fit: global, class, exemplar);
* ``"online"`` (at prediction: the test-point metric; per-exemplar metrics computed only for the
  exemplars a shortlist reaches, and cached; the same metrics as offline);
* ``"interpolated"``: metrics at ``R`` random reference points (``n_references=500``), each learned
  on its ``S`` neighbours with soft weights :math:`w_j = \exp(-D_j / \mathrm{median}_j D_j)`
  (:math:`D_j` the squared :math:`G`-distance to the reference) and, with ``reference_cv=True``,
  replaced by :math:`G` where :math:`G` does better in leave-one-out kNN on the reference's own
  neighbourhood (the cross-validated :math:`M_{CV}`); the metric anywhere is interpolated from them,
  by the nearest reference (the own-metric cell of Eq. 21, ``interpolation="nn"``) or by RBF weights
  (``"rbf"``), :math:`M(x) = \sum_r \kappa_r(x) M_r / \sum_r \kappa_r(x)`,
  :math:`\kappa_r(x) = \exp(-d_G(x, r) / (\sigma \bar D))` with :math:`\bar D` the mean squared
  :math:`G`-distance between training points and :math:`\sigma` chosen in ``sigma_grid``
  (0.001-0.01) by leave-one-out error on the training set. ``where="exemplar"`` evaluates the field at
  the exemplars ("Interp Train"), ``where="test"`` at the query ("Interp Test");
* ``"line"``: the line-integral distance through the NN-interpolated field
  (:mod:`metricopt.methods.local.line_integral`), :math:`D(q, x_i) = \int_0^1 \sqrt{\Delta^\top M(q + t\Delta)
  \Delta}\,dt`, :math:`\Delta = x_i - q`.

**Two-stage classification** (the paper's Sec. 5): the ``shortlist=20`` nearest training points under
:math:`G` (a ball tree on :math:`x \mapsto L_G x`), re-ranked by the local distance; the ``k = 3``
nearest of them vote (ties as :func:`metricopt.knn_predict`).

Neighbourhoods of LMNN have a fixed size ``S`` (one compiled shape for the batch): the nearest
points of the classes that have at least ``lmnn_k + 1`` members among the first ``S``, filled up to
``S`` with further points of those classes. A neighbourhood with a single such class gets the
global metric (its status says so).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._deadline import Budget
from ..._validation import check_real, check_X, check_y
from ...errors import InputError
from ...linalg import factor
from .batch import LocalSet, solve_lmnn_batch
from .lda import regularized_lda

__all__ = ["HOW", "WHERE", "WHEN", "VALID", "LocalMetrics", "fit_local_metrics", "column_of", "with_cell"]


def _policy_code(outcome: str, reason: str = "") -> str:
    """The status code the one status policy gives a local metric without a certificate: ``"CLOSED_FORM"`` (fitted
    by regularised LDA) or ``"TIME_LIMIT"`` (its solve did not start before the fit's deadline; it keeps the global
    metric)."""
    from ...certify import policy
    from ...certify.policy import NoCertificate, Outcome, SolverReport

    return policy.decide(SolverReport(Outcome[outcome], reason), NoCertificate.NOT_TAKEN)[0].code


#: under a ``time_limit``, the share of it the global LMNN solve may use when local LMNN solves follow it
GLOBAL_SHARE = 0.5
#: under a ``time_limit``, the first batch of local LMNN solves starts only with this many seconds left (its JAX
#: compilation and first chunk, which no limit interrupts: 7.7 s on 2 cores for 256 sets of 50 digits points in 20
#: dimensions, 2.1 s for 64 sets; later batches are judged by the last one's time)
FIRST_BATCH_SECONDS = 8.0

HOW = ("lda", "lmnn", "hybrid")
WHERE = ("global", "class", "exemplar", "test")
WHEN = ("offline", "online", "interpolated", "line")
#: the cells of the taxonomy: where -> the whens it takes
VALID = {"global": ("offline",), "class": ("offline",), "exemplar": ("offline", "online", "interpolated", "line"),
         "test": ("online", "interpolated")}
#: the paper's table columns, by (where, when)
COLUMNS = {("global", "offline"): "Global", ("class", "offline"): "Class", ("exemplar", "offline"): "Train",
           ("exemplar", "online"): "Train", ("test", "online"): "Test", ("exemplar", "interpolated"): "Interp Train",
           ("test", "interpolated"): "Interp Test", ("exemplar", "line"): "Line"}


def column_of(where: str, when: str) -> str:
    """The paper's table column of a cell (``"Global"``, ``"Class"``, ``"Train"``, ...).

    Parameters
    ----------
    where : {"global", "class", "exemplar", "test"}
        Where metrics live.
    when : str
        When they are learned (``"offline"``, ``"online"``, ``"interpolated"``, ``"line"``; the valid
        combinations are the module docstring's cells).

    Returns
    -------
    str
        The column's name.
    """
    return COLUMNS[(where, when)]


def check_cell(how: str, where: str, when: str) -> tuple[str, str, str]:
    """Check a cell of the taxonomy (the three axes and their combination).

    Parameters
    ----------
    how : {"lda", "lmnn", "hybrid"}
        How a metric is learned.
    where : {"global", "class", "exemplar", "test"}
        Where metrics live.
    when : str
        When they are learned (``"offline"``, ``"online"``, ``"interpolated"``, ``"line"``; the valid
        combinations are the module docstring's cells).

    Returns
    -------
    (how, where, when) : tuple of str
        The checked axes.

    Raises
    ------
    InputError
        For an unknown value or a combination that is not a cell.
    """
    from ..._validation import check_choice

    how = check_choice(how, "how", HOW)
    where = check_choice(where, "where", WHERE)
    when = check_choice(when, "when", WHEN)
    if when not in VALID[where]:
        cells = "; ".join(f"where={w!r}: when in {v}" for w, v in VALID.items())
        raise InputError(f"where={where!r} with when={when!r} is not a cell of the taxonomy; the cells are {cells}.")
    return how, where, when


class _Space:
    """The training set under the global metric: ``Z = X L_G^T`` and a ball tree on it."""

    def __init__(self, X, y, L):
        from sklearn.neighbors import BallTree

        self.X, self.y, self.L = X, y, L
        self.Z = X @ L.T
        self.tree = BallTree(self.Z)

    def nearest(self, Q, m, exclude=None):
        """``(dist^2, idx)`` of the ``m`` nearest training points of each row of ``Q`` (input space)."""
        m = min(m + (1 if exclude is not None else 0), self.Z.shape[0])
        dist, idx = self.tree.query(np.atleast_2d(Q) @ self.L.T, k=m)
        if exclude is not None:
            keep = idx != np.asarray(exclude)[:, None]
            # drop the excluded index where present, else the farthest
            drop_last = keep.all(axis=1)
            keep[drop_last, -1] = False
            idx = idx[keep].reshape(idx.shape[0], -1)
            dist = dist[keep].reshape(dist.shape[0], -1)
        return dist ** 2, idx


class LocalMetrics:
    """A fitted cell of the taxonomy (see the module docstring); built by :func:`fit_local_metrics`.

    Attributes
    ----------
    how, where, when : str
    global_L : (r, d) array
        The global metric's factor, :math:`G = L^\\top L`.
    metrics : (m, d, d) array or None
        Class (``m = C``), exemplar (``m = n``) or reference (``m = R``) metrics.
    references : (R,) int array or None
        Training indices of the reference points.
    sigma : float or None
        The RBF width chosen.
    statuses : dict
        Counts of the local solves' statuses (``uncertified``, ``optimal``, ``single_class``, ...).
    """

    def __init__(self, X, y, how, where, when, params):
        self.X, self.y = X, y
        self.how, self.where, self.when = how, where, when
        self.p = params
        self.classes = np.unique(y)
        self.metrics = None
        self.references = None
        self.sigma = None
        self.statuses = {}
        self.cache = {}
        self.mean_sq = None

    # ------------------------------------------------------------------ local fits
    def _count(self, status, n=1):
        self.statuses[status] = self.statuses.get(status, 0) + n

    def _neighborhood(self, centre, exclude=None):
        """Indices (``S``) of the neighbourhood of ``centre`` (input space), and whether LMNN can use it."""
        S = min(self.p["neighborhood_size"], self.X.shape[0])
        if self.how != "lmnn":
            return self.space.nearest(centre[None], S)[1][0], True
        kmin = self.p["lmnn_k"] + 1
        _, idx = self.space.nearest(centre[None], min(4 * S, self.X.shape[0]))
        idx = idx[0]
        first = self.y[idx[:S]]
        labels, counts = np.unique(first, return_counts=True)
        ok = labels[counts >= kmin]
        if ok.size < 2:
            return idx[:S], False
        pick = idx[np.isin(self.y[idx], ok)][:S]
        return pick, pick.size == S

    def _soft_weights(self, centre, idx):
        D = np.sum(((self.X[idx] - centre) @ self.space.L.T) ** 2, axis=1)
        med = np.median(D)
        return np.exp(-D / med) if med > 0 else np.ones(idx.size)

    def local_metrics(self, centres: np.ndarray, weighted: bool = False) -> np.ndarray:
        """The local metric of each row of ``centres`` (input space), learned on its neighbourhood.

        Parameters
        ----------
        centres : (m, d) ndarray
            The centres.
        weighted : bool, default False
            Weight the neighbourhood's points by an RBF of their global distance to the centre.

        Returns
        -------
        (m, d, d) ndarray
            One metric per centre (the global one where the neighbourhood has a single class or too few points).
        """
        G = self.space.L.T @ self.space.L
        out = np.empty((centres.shape[0], self.X.shape[1], self.X.shape[1]))
        lmnn_sets, lmnn_rows = [], []
        for r, c in enumerate(centres):
            idx, usable = self._neighborhood(c)
            w = self._soft_weights(c, idx) if weighted else None
            if np.unique(self.y[idx]).size < 2 or not usable:
                # one class only (nothing to discriminate), or too few points of classes LMNN can use
                out[r] = G
                self._count("single_class" if np.unique(self.y[idx]).size < 2 else "too_few_points")
                continue
            if self.how == "lmnn":
                lmnn_sets.append(LocalSet(self.X[idx], self.y[idx], w))
                lmnn_rows.append(r)
            else:
                L = regularized_lda(self.X[idx], self.y[idx], weights=w, lam=self.p["lda_reg"],
                                    n_bags=self.p["n_bags"], random_state=self.p["random_state"])
                out[r] = L.T @ L
                self._count(_policy_code("CLOSED_FORM"))
        if lmnn_sets:
            size = self.p["batch_size"]
            budget, last = Budget.start(None), FIRST_BATCH_SECONDS  # the fit's deadline (its time_limit), if any
            for s in range(0, len(lmnn_sets), size):
                if not budget.fits(last):  # no batch that would end past the deadline starts: the rest keep G
                    for r in lmnn_rows[s:]:
                        out[r] = G
                        self._count(_policy_code("TIME_LIMIT", "no time left to start its batch"))
                    break
                started = time.perf_counter()
                res = solve_lmnn_batch(lmnn_sets[s:s + size], k=self.p["lmnn_k"], mu=self.p["lmnn_mu"],
                                       reg=self.p["local_reg"], base=G, max_iter=self.p["local_max_iter"],
                                       certify=self.p["certify_local"], tol=self.p["local_tol"])
                for r, M, st in zip(lmnn_rows[s:s + size], res.metrics, res.statuses):
                    out[r] = M
                    self._count(st.code)
                last = time.perf_counter() - started
        return out

    def _class_metrics(self):
        from ..lmnn.problem import LMNNProblem
        from ..lmnn.multimetric_problem import MultiMetricLMNNProblem
        from ...solving import solve

        X, y = self.X, self.y
        if self.how == "lmnn":
            opts = {"tol": self.p["tol"], "max_iter": self.p["class_max_iter"] or self.p["max_iter"]}
            if self.p["class_form"] == "joint":
                prob = MultiMetricLMNNProblem(X, y, k=self.p["lmnn_k"], mu=self.p["lmnn_mu"])
                sol = solve(prob, backend="jax", **opts)
                self._count(sol.status.code)
                return np.stack(prob.metrics(sol.M))
            out = []
            for c in self.classes:
                prob = LMNNProblem(X, y, k=self.p["lmnn_k"], mu=self.p["lmnn_mu"],
                                      sample_weight=(y == c).astype(np.float64))
                sol = solve(prob, backend="jax", **opts)
                self._count(sol.status.code)
                out.append(sol.M)
            return np.stack(out)
        n = X.shape[0]
        counts = np.array([np.sum(y == c) for c in self.classes])
        size = self.p["class_set_size"] or int(min(n, 2 * counts.max()))
        size = min(size, n)
        Z = self.space.Z
        out = []
        from scipy.spatial.distance import cdist

        for c in self.classes:
            inside = np.flatnonzero(y == c)
            others = np.flatnonzero(y != c)
            need = max(size - inside.size, 0)
            if need:
                dmin = cdist(Z[others], Z[inside], "sqeuclidean").min(axis=1)
                others = others[np.argsort(dmin, kind="stable")[:need]]
                idx = np.concatenate([inside, others])
            else:
                idx = inside
            if np.unique(y[idx]).size < 2:
                idx = np.concatenate([inside, np.flatnonzero(y != c)[:1]])
            L = regularized_lda(X[idx], y[idx], lam=self.p["lda_reg"], n_bags=self.p["n_bags"],
                                random_state=self.p["random_state"])
            out.append(L.T @ L)
            self._count(_policy_code("CLOSED_FORM"))
        return np.stack(out)

    # ------------------------------------------------------------------ interpolation
    def _kernel(self, P):
        """RBF weights ``(len(P), R)`` of the reference points at the rows of ``P``."""
        from scipy.spatial.distance import cdist

        # squared global distances, (len(P), R): no (len(P), R, d) array of differences
        D = cdist(P @ self.space.L.T, self.space.Z[self.references], "sqeuclidean")
        D = D - D.min(axis=1, keepdims=True)
        return np.exp(-D / (self.sigma * self.mean_sq))

    def field_at(self, P: np.ndarray) -> np.ndarray:
        """The interpolated metric at each row of ``P`` (``(len(P), d, d)``).

        (Ramanan & Baker, IEEE PAMI 2011; the interpolation of the module docstring.)

        Parameters
        ----------
        P : (m, d) ndarray
            The points.

        Returns
        -------
        (m, d, d) ndarray
            The metrics (RBF-weighted average of the reference metrics, or the nearest cell's).
        """
        from .line_integral import cell_of

        refs = self.X[self.references]
        if self.p["interpolation"] == "nn" or self.when == "line":
            return self.metrics[cell_of(P, refs, self.metrics)]
        K = self._kernel(P)
        K /= K.sum(axis=1, keepdims=True)
        d = self.X.shape[1]
        return (K @ self.metrics.reshape(len(self.references), -1)).reshape(-1, d, d)

    def _reference_cv(self):
        """``M_CV``: per reference, the global metric where it does better than the local one in
        leave-one-out kNN on the reference's neighbourhood (ties keep the global one)."""
        from ...knn import loo_knn_error

        G = self.space.L.T @ self.space.L
        swapped = 0
        for r, i in enumerate(self.references):
            idx, _ = self._neighborhood(self.X[i])
            Xs, ys = self.X[idx], self.y[idx]
            if np.unique(ys).size < 2:
                continue
            k = min(self.p["k"], idx.size - 1)
            e_loc = loo_knn_error(Xs, ys, k=k, M=self.metrics[r])
            e_glob = loo_knn_error(Xs, ys, k=k, M=G)
            if e_glob <= e_loc:
                self.metrics[r] = G
                swapped += 1
        self.statuses["reference_cv_global"] = swapped

    # ------------------------------------------------------------------ distances
    def distances(self, Q: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """The local distances ``(len(Q), m)`` from each query to its candidate training points ``cand``.

        Parameters
        ----------
        Q : (q, d) ndarray
            The queries.
        cand : (q, m) ndarray of int
            The candidate training points of each query.

        Returns
        -------
        (q, m) ndarray
            The squared local distances.
        """
        X = self.X
        Delta = X[cand] - Q[:, None, :]  # (q, m, d)
        if self.where == "global":
            Zd = Delta @ self.space.L.T
            return np.sum(Zd * Zd, axis=-1)
        if self.where == "class":
            Ms = self.metrics[np.searchsorted(self.classes, self.y[cand])]
            return np.einsum("qmd,qmde,qme->qm", Delta, Ms, Delta)
        if self.where == "exemplar":
            if self.when == "line":
                from .line_integral import line_integral_distances

                refs = X[self.references]
                return np.stack([line_integral_distances(q, X[c], refs, self.metrics) for q, c in zip(Q, cand)])
            Ms = self.exemplar_metrics(np.unique(cand))
            return np.einsum("qmd,qmde,qme->qm", Delta, Ms[cand], Delta)
        # where == "test": one metric per query
        Mq = self.field_at(Q) if self.when == "interpolated" else self.local_metrics(Q)
        return np.einsum("qmd,qde,qme->qm", Delta, Mq, Delta)

    def exemplar_metrics(self, needed: ArrayLike) -> np.ndarray:
        """A lookup ``(n, d, d)``-indexable by training index holding at least the ``needed`` ones.

        Parameters
        ----------
        needed : array_like of int
            The training indices needed.

        Returns
        -------
        (n, d, d) ndarray
            The lookup (zeros where not needed, except offline: every exemplar metric).
        """
        if self.when == "offline":
            return self.metrics
        d = self.X.shape[1]
        needed = np.asarray(needed, dtype=np.intp)
        if self.when == "interpolated":  # the field at the exemplars ("Interp Train")
            out = np.zeros((self.X.shape[0], d, d))
            out[needed] = self.field_at(self.X[needed])
            return out
        missing = [int(i) for i in needed if int(i) not in self.cache]
        if missing:
            Ms = self.local_metrics(self.X[missing])
            self.cache.update(zip(missing, Ms))
        out = np.zeros((self.X.shape[0], d, d))
        for i in needed:
            out[int(i)] = self.cache[int(i)]
        return out

    def predict(self, Q: ArrayLike, exclude: ArrayLike | None = None) -> np.ndarray:
        """Two-stage kNN labels of the rows of ``Q`` (``exclude``: the training index of each query to
        leave out, for leave-one-out).

        Parameters
        ----------
        Q : (q, d) array_like
            The queries.
        exclude : (q,) array_like of int, optional
            The training index of each query to leave out.

        Returns
        -------
        (q,) ndarray
            The predicted labels.
        """
        from ...knn import _k_smallest_stable, _vote

        Q = np.ascontiguousarray(Q, dtype=np.float64)
        m = min(self.p["shortlist"], self.X.shape[0] - (1 if exclude is not None else 0))
        _, cand = self.space.nearest(Q, m, exclude=exclude)
        D = self.distances(Q, cand)
        k = min(self.p["k"], m)
        classes, codes = np.unique(self.y, return_inverse=True)
        near = np.take_along_axis(cand, _k_smallest_stable(D, k), axis=1)
        return classes[_vote(codes.reshape(-1)[near], classes.size)]


def fit_local_metrics(X: ArrayLike, y: ArrayLike, how: str = "lmnn", where: str = "exemplar", when: str = "offline",
                      global_L: ArrayLike | None = None, **params: Any) -> LocalMetrics:
    """Fit one cell of the taxonomy (see the module docstring); returns :class:`LocalMetrics`.

    ``params``: ``k``, ``shortlist``, ``neighborhood_size``, ``n_references``, ``interpolation``,
    ``sigma`` (``None``: cross-validated over ``sigma_grid``), ``sigma_grid``, ``reference_cv``,
    ``class_form``, ``class_set_size``, ``lda_reg``, ``n_bags``, ``lmnn_k``, ``lmnn_mu``, ``local_reg``,
    ``local_max_iter``, ``local_tol``, ``certify_local``, ``batch_size``, ``tol``, ``max_iter``, ``class_max_iter``
    (per-class LMNN solves; default ``max_iter``), ``time_limit`` (seconds for the whole fit: the global and
    per-class solves keep its deadline, the global one :data:`GLOBAL_SHARE` of it when local LMNN solves follow,
    and no batch of local solves starts that would end past it, judged by the last batch's time or, for the first,
    :data:`FIRST_BATCH_SECONDS`; the sets left keep the global metric and count as ``time_limit`` in
    ``statuses``),
    ``random_state`` (:class:`metricopt.LocalMetricKNN` documents them). ``global_L``: a global
    factor to use instead of learning one (e.g. shared by several cells).

    Parameters
    ----------
    X : (n, d) array_like
        The training points.
    y : (n,) array_like
        Their labels.
    how : {"lda", "lmnn", "hybrid"}, default "lmnn"
        How a metric is learned.
    where : str, default "exemplar"
        Where metrics live.
    when : str, default "offline"
        When they are learned.
    global_L : (r, d) array_like, optional
        A global factor to use instead of learning one.
    **params
        The options listed above.

    Returns
    -------
    LocalMetrics
        The fitted cell.

    Raises
    ------
    InputError
        For invalid data, a combination that is not a cell, or an unknown option.
    """
    X = check_X(X)
    y = check_y(y, X.shape[0])
    how, where, when = check_cell(how, where, when)
    p = dict(DEFAULTS)
    unknown = sorted(set(params) - set(p))
    if unknown:
        raise InputError(f"unknown option(s) {unknown}; the options are {sorted(p)}.")
    p.update(params)
    if p["time_limit"] is not None:
        check_real(p["time_limit"], "time_limit", low=0.0, low_open=True)
        if how == "lmnn" and where != "global":  # local LMNN solves follow the global one: leave them their share
            p["global_time_limit"] = GLOBAL_SHARE * p["time_limit"]
    with Budget.start(p["time_limit"]).running():  # every solve inside keeps the fit's deadline
        return _fit_cell(X, y, how, where, when, global_L, p)


def _fit_cell(X, y, how, where, when, global_L, p):
    model = LocalMetrics(X, y, how, where, when, p)
    model.global_solution = None
    if global_L is None:
        global_L, model.global_solution = fit_global(X, y, how, p)
    model.space = _Space(X, y, np.asarray(global_L, dtype=np.float64))
    if where == "class":
        model.metrics = model._class_metrics()
    elif where == "exemplar" and when == "offline":
        model.metrics = model.local_metrics(X)
    elif when in ("interpolated", "line"):
        rng = np.random.default_rng(p["random_state"])
        R = min(p["n_references"], X.shape[0])
        model.references = np.sort(rng.choice(X.shape[0], R, replace=False))
        model.metrics = model.local_metrics(X[model.references], weighted=True)
        if p["reference_cv"]:
            model._reference_cv()
        if when == "interpolated" and p["interpolation"] == "rbf":
            model.mean_sq = _mean_sq(model, rng)
            model.sigma = p["sigma"] if p["sigma"] is not None else _choose_sigma(model, rng)
    return model


def with_cell(model: LocalMetrics, where: str, when: str) -> LocalMetrics:
    """The fitted ``model`` moved to another interpolated cell (``exemplar`` / ``test`` x ``interpolated``, or
    ``exemplar`` x ``line``), reusing its reference points and their metrics (the expensive part); the RBF
    width is chosen again for the new cell.

    Parameters
    ----------
    model : LocalMetrics
        A fitted interpolated or line-integral cell.
    where : {"global", "class", "exemplar", "test"}
        Where metrics live.
    when : str
        When they are learned (``"offline"``, ``"online"``, ``"interpolated"``, ``"line"``; the valid
        combinations are the module docstring's cells).

    Returns
    -------
    LocalMetrics
        The new cell.

    Raises
    ------
    InputError
        When ``model`` or the target is not an interpolated or line-integral cell.
    """
    how, where, when = check_cell(model.how, where, when)
    if model.references is None or when not in ("interpolated", "line"):
        raise InputError("with_cell moves a fitted interpolated or line-integral cell to another such cell; got "
                         f"a {model.where}/{model.when} model and the target {where}/{when}.")
    out = LocalMetrics(model.X, model.y, how, where, when, model.p)
    out.space, out.global_solution = model.space, model.global_solution
    out.references, out.metrics = model.references, model.metrics
    out.statuses = dict(model.statuses)
    out.mean_sq = model.mean_sq
    if when == "interpolated" and model.p["interpolation"] == "rbf":
        if out.mean_sq is None:
            out.mean_sq = _mean_sq(out, np.random.default_rng(model.p["random_state"]))
        out.sigma = model.p["sigma"] if model.p["sigma"] is not None else _choose_sigma(
            out, np.random.default_rng(model.p["random_state"] + 1))
    return out


def _mean_sq(model, rng):
    """The mean squared global distance between (up to 500 sampled) training points."""
    n = model.X.shape[0]
    Zs = model.space.Z[rng.choice(n, min(500, n), replace=False)]
    return float(np.mean(np.sum((Zs[:, None] - Zs[None]) ** 2, axis=-1))) or 1.0


def _choose_sigma(model, rng):
    """The RBF width in ``sigma_grid`` of lowest leave-one-out two-stage error on (up to 300) training points."""
    n = model.X.shape[0]
    idx = np.sort(rng.choice(n, min(300, n), replace=False))
    best, errs = None, {}
    for s in model.p["sigma_grid"]:
        model.sigma = float(s)
        err = float(np.mean(model.predict(model.X[idx], exclude=idx) != model.y[idx]))
        errs[float(s)] = err
        if best is None or err < errs[best]:
            best = float(s)
    model.sigma_errors = errs
    return best


def fit_global(X: np.ndarray, y: np.ndarray, how: str, p: dict) -> tuple[np.ndarray, Any]:
    """``(L_G, solution)``: the global factor, by regularised LDA on all the training set (``how="lda"``,
    solution ``None``) or by LMNN (the JAX backend's certified solution).

    Parameters
    ----------
    X : (n, d) ndarray
        The training points.
    y : (n,) ndarray
        Their labels.
    how : {"lda", "lmnn", "hybrid"}
        How a metric is learned.
    p : dict
        The options (:data:`DEFAULTS` updated).

    Returns
    -------
    L_G : (r, d) ndarray
        The global factor.
    solution : Solution or None
        The LMNN solution (``None`` for LDA).
    """
    if how == "lda":
        return regularized_lda(X, y, lam=p["lda_reg"], n_bags=p["n_bags"], random_state=p["random_state"]), None
    from ..lmnn.problem import LMNNProblem
    from ...solving import solve

    prob = LMNNProblem(X, y, k=p["lmnn_k"], mu=p["lmnn_mu"])
    sol = solve(prob, backend="jax", tol=p["tol"], max_iter=p["max_iter"], time_limit=p.get("global_time_limit"))
    return factor(sol.M), sol


DEFAULTS = {"k": 3, "shortlist": 20, "neighborhood_size": 50, "n_references": 500, "interpolation": "rbf",
            "sigma": None, "sigma_grid": (0.001, 0.003, 0.01), "reference_cv": False, "class_form": "joint",
            "class_set_size": None, "lda_reg": 1.0, "n_bags": 10, "lmnn_k": 3, "lmnn_mu": 0.5, "local_reg": 1e-2,
            "local_max_iter": 300, "local_tol": 1e-3, "certify_local": False, "batch_size": 256, "tol": 1e-3,
            "max_iter": 2000, "class_max_iter": None, "random_state": 0, "time_limit": None}
