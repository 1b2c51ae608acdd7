r"""Exact latent-set inference for metric learning by neighbourhood gerrymandering.

Trivedi, McAllester & Shakhnarovich, "Discriminative Metric Learning by
Neighborhood Gerrymandering", NIPS 2014.

The model
---------
A query ``x`` with label ``y`` has candidate neighbours ``x_j`` at given
distances ``d_j = d_W(x, x_j) >= 0`` (in training: leave-one-out, the query is
not its own candidate). A *latent set* ``h`` is a set of exactly ``k`` candidate
indices, scored by

.. math:: S(x, h) = -\sum_{j \in h} d_j .

The vote of ``h`` counts :math:`n_c(h)`, the members of ``h`` in class ``c``.
For a margin :math:`\tau \in \{0, 1\}`, *class t wins h by* :math:`\tau` when

.. math:: n_t(h) \ge n_c(h) + \tau \quad \text{for every class } c \ne t ,

so :math:`\tau = 1` means ``t`` is the strict (unique) majority and
:math:`\tau = 0` that ``t`` is among the tied winners. Training needs two
inferences per point (the paper's latent structural SVM):

* the *correct* set :math:`h^* = \arg\max \{S(x, h) : y \text{ wins } h \text{ by } 1\}`
  (:func:`correct_inference`);
* the *loss-augmented* set :math:`\hat h = \arg\max_h S(x, h) + \Lambda(y, h)`
  (:func:`loss_augmented_inference`), with :math:`\Lambda(y, h)` the largest loss
  ``loss[y, c]`` over the classes ``c`` tied for the top count of ``h`` (a tie
  counts as the worst of its winners),

and the per-point surrogate :math:`L = [S(\hat h) + \Lambda(y, \hat h)] - S(h^*) \ge 0`
(:func:`infer_all`). Both inferences reduce to :func:`targeted_inference`, which
is exact (proof in its docstring); :func:`paper_targeted_inference` is a greedy
reading of the paper's Algorithm 2, kept for comparison, which can miss the
optimum. :func:`latent_knn_predict` is the prediction rule (majority of the
``k`` nearest, ties broken by the nearest of the tied classes). For training,
:func:`infer_all` runs both inferences for every point on a distance matrix,
vectorised over blocks of rows, and :func:`infer_rows` for some rows (a
minibatch) from the data and the metric (:func:`metric_distances`).

Conventions
-----------
Distances are float64, finite and non-negative. Candidates at equal distance
are ordered by lower index, so every result is deterministic; returned sets are
index arrays sorted ascending. Classes are positions in ``classes`` (default:
the sorted distinct labels), which also index the rows and columns of a loss
matrix. NumPy only.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._validation import check_choice, check_int, check_X
from ...errors import InputError
from ...knn import _k_smallest_stable

__all__ = [
    "InferenceResult",
    "zero_one_loss",
    "vote",
    "targeted_inference",
    "paper_targeted_inference",
    "correct_inference",
    "loss_augmented_inference",
    "latent_knn_predict",
    "infer_all",
    "infer_rows",
    "metric_distances",
]

#: inference procedures accepted by :func:`infer_all`
INFERENCE = ("exact", "paper")


# ---------------------------------------------------------------------------
# input handling
# ---------------------------------------------------------------------------


def _py(value):
    """A numpy scalar as the plain Python value (so messages read 3, not np.int64(3))."""
    return value.item() if isinstance(value, np.generic) else value


def _check_distances(dist, name, ndim):
    """``dist`` as a float64 array with ``ndim`` dimensions, finite and non-negative."""
    try:
        arr = np.asarray(dist, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be a numeric array of distances; could not convert it to float64 ({exc}).") from None
    if arr.ndim != ndim:
        shape = "(n_candidates,)" if ndim == 1 else "(n_queries, n_candidates)"
        raise InputError(f"{name} must be a {ndim}-D array of shape {shape}; got shape {arr.shape}.")
    lo, hi = (arr.min(), arr.max()) if arr.size else (0.0, 0.0)  # NaN propagates: no n x n temporary
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise InputError(f"{name} contains NaN or infinite distances; every candidate needs a finite distance.")
    if lo < 0:
        raise InputError(
            f"{name} contains negative distances (smallest {arr.min():.3g}); distances must be >= 0. "
            f"If they come from rounding (e.g. |a|^2 + |b|^2 - 2 a.b), pass np.maximum({name}, 0)."
        )
    return arr


def _check_tau(tau):
    if isinstance(tau, bool) or not isinstance(tau, numbers.Integral) or tau not in (0, 1):
        raise InputError(
            f"tau must be 0 (the target is among the tied winners) or 1 (the target is the strict majority); "
            f"got {tau!r}."
        )
    return int(tau)


def _check_labels(labels, n, name="labels"):
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise InputError(f"{name} must be a 1-D array with one label per candidate ({n}); got shape {arr.shape}.")
    return arr


def _kind(arr):
    return "number" if arr.dtype.kind in "biuf" else arr.dtype.kind


def _resolve_classes(classes, labels, extra=()):
    """``classes`` as a 1-D array of distinct labels.

    Default: the sorted distinct ``labels`` plus the ``(name, value)`` pairs of ``extra``
    (a target need not have candidates), which must be labels of the same kind.
    """
    if classes is None:
        try:
            classes = np.unique(labels)
        except TypeError as exc:
            raise InputError(f"labels must be mutually comparable (sortable); {exc}") from None
        for name, value in extra:
            value = np.asarray([value])
            if labels.size and _kind(value) != _kind(labels):
                raise InputError(
                    f"{name} {_py(value[0])!r} is not of the kind of the labels (dtype {labels.dtype}); "
                    f"pass a {name} of the same type as the labels, or pass classes."
                )
            if not np.any(classes == value[0]):
                classes = np.unique(np.concatenate([classes, value]))
        return classes
    arr = np.asarray(classes)
    if arr.ndim != 1 or arr.size == 0:
        raise InputError(f"classes must be a non-empty 1-D array of distinct labels; got shape {arr.shape}.")
    try:
        distinct = np.unique(arr).size
    except TypeError as exc:
        raise InputError(f"classes must be mutually comparable (sortable); {exc}") from None
    if distinct != arr.size:
        raise InputError(f"classes must be distinct; got {arr.size} entries with {distinct} distinct values.")
    return arr


def _encode(values, classes, name):
    """Positions in ``classes`` (which need not be sorted) of every entry of ``values``."""
    values = np.asarray(values)
    sorter = np.argsort(classes, kind="stable")
    try:
        pos = np.searchsorted(classes, values, sorter=sorter)
    except TypeError:
        pos = np.zeros(values.shape, dtype=np.intp)
    codes = sorter[np.minimum(pos, classes.size - 1)]
    ok = classes[codes] == values
    if not np.all(ok):
        bad = _py(values.reshape(-1)[np.flatnonzero(~np.reshape(ok, -1))[0]])
        raise InputError(
            f"{name} contains {bad!r}, which is not one of the classes {[_py(c) for c in classes]}; "
            "pass classes that list every label."
        )
    return codes.astype(np.intp)


def _check_loss(loss, n_classes):
    """The ``(R, R)`` loss matrix: finite, non-negative, zero diagonal (default 0/1)."""
    if loss is None:
        return zero_one_loss(n_classes)
    try:
        arr = np.asarray(loss, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"loss must be a numeric (R, R) matrix; could not convert it to float64 ({exc}).") from None
    if arr.shape != (n_classes, n_classes):
        raise InputError(
            f"loss must have shape (R, R) = ({n_classes}, {n_classes}), one row and column per class in the order "
            f"of classes; got shape {arr.shape}."
        )
    if not np.all(np.isfinite(arr)):
        raise InputError("loss contains NaN or infinite entries; every loss must be a finite number.")
    if np.any(np.diag(arr) != 0):
        raise InputError(f"loss must have a zero diagonal (no loss for the true class); got diagonal {np.diag(arr).tolist()}.")
    if np.any(arr < 0):
        raise InputError("loss contains negative entries; losses must be >= 0 (then the surrogate is >= 0).")
    return arr


# ---------------------------------------------------------------------------
# core: candidates sorted by (distance, index), at most k per class
# ---------------------------------------------------------------------------


def _min_own_count(k, tau, n_classes):
    r"""Smallest own count :math:`n^* = \lceil (k + \tau (R - 1)) / R \rceil` that can win by ``tau``.

    If the target has ``c`` members, each of the other ``R - 1`` classes has at most
    ``c - tau``, so ``k <= c + (R - 1)(c - tau)``. Always ``1 <= n* <= k``.
    """
    return -(-(k + tau * (n_classes - 1)) // n_classes)


def _sorted_block(D, codes, k, n_classes, n_keep):
    """Each row's candidates by (distance, index), with their rank within their class.

    Returns ``order`` (column indices, ``(b, n_keep)``), their class codes, their
    within-class ranks, and ``keep = rank < k``. A set of ``k`` holds at most ``k``
    points of a class, and both inferences take each class's points nearest first,
    so the kept candidates (the ``k`` nearest of each class) are all they look at.
    """
    order = np.argsort(D, axis=1, kind="stable")[:, :n_keep]
    sc = codes[order]
    rank = np.empty_like(sc)
    for c in range(n_classes):
        member = sc == c
        rank[member] = (np.cumsum(member, axis=1) - 1)[member]
    return order, sc, rank, rank < k


def _shortlist(dist, codes, k, n_classes):
    """``(idx, d, code, rank)`` of one row's kept candidates, nearest first (ties: lower index)."""
    order, sc, rank, keep = _sorted_block(dist[None, :], codes, k, n_classes, dist.size)
    idx = order[0, keep[0]]
    return idx, dist[idx], sc[0, keep[0]], rank[0, keep[0]]


def _exact_core(d, code, rank, t, k, tau):
    """Positions (into the shortlist) of the best set that class ``t`` wins by ``tau``, or ``None``.

    For each own count ``c``: the ``c`` nearest of class ``t`` plus the ``k - c``
    nearest others among those of within-class rank ``< c - tau``; best total over ``c``.
    """
    own = np.flatnonzero(code == t)
    other = np.flatnonzero(code != t)
    n_present = np.unique(np.append(code, t)).size
    cs = np.arange(_min_own_count(k, tau, n_present), min(k, own.size) + 1)
    if cs.size == 0:
        return None
    need = k - cs
    eligible = rank[other][None, :] < (cs - tau)[:, None]  # per-class caps c - tau
    taken = np.cumsum(eligible, axis=1)
    take = eligible & (taken <= need[:, None])  # the k - c nearest eligible others
    available = taken[:, -1] if other.size else np.zeros(cs.size, dtype=np.intp)
    feasible = available >= need
    if not np.any(feasible):
        return None
    own_cost = np.concatenate(([0.0], np.cumsum(d[own])))[cs]
    # sequential sums (cumsum), nearest first: the block path (_exact_block) adds the same numbers in the same
    # order, so both compare bit-identical totals and break equal totals alike
    fill = np.cumsum(np.where(take, d[other][None, :], 0.0), axis=1)[:, -1] if other.size else np.zeros(cs.size)
    cost = own_cost + fill
    cost[~feasible] = np.inf
    best = int(np.argmin(cost))  # the smallest own count among equal costs
    return np.concatenate((own[: cs[best]], other[take[best]]))


def _greedy_core(d, code, t, k, tau, n_classes):
    """Positions (into the shortlist) of the paper-style greedy set for class ``t``, or ``None``.

    The shortlist suffices: the greedy only ever adds a class's nearest unused point
    (a nearer point of the same class is at least as admissible), so every class
    enters ``h`` as a prefix of at most ``k`` of its points.
    """
    own = np.flatnonzero(code == t)
    n_star = _min_own_count(k, tau, np.unique(np.append(code, t)).size)
    if own.size < n_star:
        return None
    in_h = np.zeros(code.size, dtype=bool)
    in_h[own[:n_star]] = True
    counts = np.zeros(n_classes, dtype=np.intp)
    counts[t] = n_star
    for _ in range(k - n_star):
        for p in np.flatnonzero(~in_h):  # remaining candidates, nearest first
            c = code[p]
            if c == t or counts[c] + 1 <= counts[t] - tau:
                break
        else:
            return None
        in_h[p] = True
        counts[c] += 1
    return np.flatnonzero(in_h)


def _targeted(dist, codes, t, k, tau, n_classes, greedy):
    """``(h, score)`` for one query (original indices, sorted), or ``(None, -inf)``."""
    if k > dist.size:
        return None, -np.inf
    idx, d, code, rank = _shortlist(dist, codes, k, n_classes)
    pos = _greedy_core(d, code, t, k, tau, n_classes) if greedy else _exact_core(d, code, rank, t, k, tau)
    if pos is None:
        return None, -np.inf
    h = np.sort(idx[pos])
    return h, -float(np.sum(dist[h]))


def _prepare(dist, labels, k, classes, extra):
    dist = _check_distances(dist, "dist", 1)
    labels = _check_labels(labels, dist.size)
    k = check_int(k, "k", low=1)
    classes = _resolve_classes(classes, labels, extra)
    codes = _encode(labels, classes, "labels")
    return dist, codes, k, classes


def _worst_winner(counts, loss_row):
    """Position of the tied winner with the largest ``loss_row`` entry (first such in class order)."""
    winners = np.flatnonzero(counts == counts.max())
    return int(winners[np.argmax(loss_row[winners])])


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------


def zero_one_loss(n_classes: int) -> np.ndarray:
    r"""The 0/1 loss matrix :math:`\Delta(y, c) = [y \ne c]` of shape ``(R, R)`` (float64).

    Parameters
    ----------
    n_classes : int
        The number of classes ``R >= 1``.

    Returns
    -------
    (R, R) ndarray
        ``1 - I``.

    Raises
    ------
    InputError
        When ``n_classes`` is not a positive integer.
    """
    n_classes = check_int(n_classes, "n_classes", low=1)
    return 1.0 - np.eye(n_classes)


def vote(labels_of_h: ArrayLike, classes: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    r"""The vote of a latent set: class counts and the tied-maximal classes.

    .. math:: n_c(h) = |\{j \in h : y_j = c\}|, \qquad
              W(h) = \{c : n_c(h) = \max_{c'} n_{c'}(h)\} .

    Parameters
    ----------
    labels_of_h : array-like of shape (k,)
        Labels of the members of ``h``; each must be one of ``classes``.
    classes : array-like of shape (R,)
        The classes, in the order of the returned counts.

    Returns
    -------
    counts : ndarray of shape (R,), int64
        ``counts[r]`` is :math:`n_c(h)` for ``c = classes[r]``.
    winners : ndarray
        The classes tied for the largest count, in the order of ``classes``
        (all of them when ``h`` is empty).
    """
    labels_of_h = np.asarray(labels_of_h).reshape(-1)
    classes = _resolve_classes(classes, labels_of_h)
    counts = np.bincount(_encode(labels_of_h, classes, "labels_of_h"), minlength=classes.size).astype(np.int64)
    return counts, classes[counts == counts.max()]


def targeted_inference(dist: ArrayLike, labels: ArrayLike, target: Any, k: int, tau: int = 1,
                       classes: ArrayLike | None = None) -> tuple[np.ndarray | None, float]:
    r"""Exact best latent set that a given class wins: :math:`\arg\max S(x, h)` s.t. ``target`` wins ``h`` by ``tau``.

    Solves exactly

    .. math:: \max_{h \subseteq [N],\ |h| = k} \; -\sum_{j \in h} d_j
              \quad \text{s.t.} \quad n_t(h) \ge n_c(h) + \tau \ \ \forall c \ne t ,

    the targeted inference of Trivedi, McAllester & Shakhnarovich, NIPS 2014
    (:math:`\tau = 1` gives the correct set :math:`h^*`, :math:`\tau = 0` the
    per-class sets of loss-augmented inference).

    Algorithm. Let ``R`` be the number of classes present among the candidates,
    plus ``target`` if absent, and :math:`n^* = \lceil (k + \tau (R-1)) / R \rceil`.
    For each own count ``c = n*, ..., min(k, N_t)`` (``N_t`` candidates of class
    ``t``): take the ``c`` nearest candidates of class ``t`` and the ``k - c``
    nearest other candidates, each other class capped at ``c - tau`` of them;
    ``c`` is infeasible if fewer than ``k - c`` fit under the caps. Return the best
    total over ``c``. After one stable sort of the distances, ``O(k * R k)``.

    Proof of exactness. Fix the own count ``c`` of a feasible ``h``. The
    constraints split ``h`` into its ``c`` members of class ``t`` (any ``c``) and
    a set ``T`` of ``k - c`` others with :math:`|T \cap c'| \le c - \tau` for each
    class ``c'`` (a partition matroid), and ``S`` is a sum over members, so the two
    parts are optimised separately. The own part is the ``c`` nearest of class
    ``t``. In ``T``, a member of class ``c'`` that is not among the ``c - tau``
    nearest of ``c'`` can be swapped for an unused one that is (one exists, as
    ``T`` holds at most ``c - tau`` of ``c'``) without raising the total or
    breaking a cap; so some optimal ``T`` lies in ``E``, the union over ``c'`` of
    the ``c - tau`` nearest of ``c'``, and every ``(k - c)``-subset of ``E`` meets
    the caps: the best ``T`` is the ``k - c`` nearest of ``E`` (the greedy of the
    matroid). Own counts below ``n*`` are infeasible, since
    :math:`k \le c + (R - 1)(c - \tau)`; with ``R`` counted over the classes
    actually present this is the tightest such bound. Classes listed in
    ``classes`` but without candidates cannot constrain anything, and counting
    them would only lower ``n*`` to own counts that the caps then reject: the
    result does not depend on this choice. The maximum over all ``c`` is
    therefore the exact optimum.

    Parameters
    ----------
    dist : array-like of shape (N,)
        Distances :math:`d_j \ge 0` from the query to the candidates (finite).
    labels : array-like of shape (N,)
        Class label of each candidate.
    target : label
        The class that must win.
    k : int
        Size of the latent set, ``k >= 1``.
    tau : {0, 1}, default=1
        Margin: 1 for a strict majority, 0 for being among the tied winners.
    classes : array-like, optional
        All classes of the problem; ``labels`` and ``target`` must be among them.
        Default: the distinct values of ``labels`` and ``target``.

    Returns
    -------
    h : ndarray of int or None
        The ``k`` candidate indices of an optimal set, sorted ascending; ties in
        distance are broken by lower index (and among own counts of equal total,
        the smallest), so the result is deterministic. ``None`` if no set of
        ``k`` candidates is won by ``target`` (including ``k > N``).
    score : float
        :math:`S(x, h) = -\sum_{j \in h} d_j`, or ``-inf`` if ``h`` is ``None``.

    Raises
    ------
    ValueError
        (:class:`metricopt.errors.InputError`) if ``dist`` is not 1-D, finite and
        non-negative, ``labels`` does not match it, ``k`` is not a positive
        integer, ``tau`` is not 0 or 1, or a label is not in ``classes``.
    """
    tau = _check_tau(tau)
    dist, codes, k, classes = _prepare(dist, labels, k, classes, (("target", target),))
    t = int(_encode(np.asarray([target]), classes, "target")[0])
    return _targeted(dist, codes, t, k, tau, classes.size, greedy=False)


def paper_targeted_inference(dist: ArrayLike, labels: ArrayLike, target: Any, k: int, tau: int = 1,
                             classes: ArrayLike | None = None) -> tuple[np.ndarray | None, float]:
    r"""Greedy targeted inference, the paper's Algorithm 2 as described in its text (reconstructed).

    Trivedi, McAllester & Shakhnarovich, NIPS 2014, Algorithm 2 -- as described in
    the paper's text, reconstructed (the pseudo-code is not reproduced here):

    1. start with the :math:`n^* = \lceil (k + \tau (R-1)) / R \rceil` nearest
       candidates of class ``target`` (``R`` counted as in
       :func:`targeted_inference`; here the choice matters, as it sets the seed);
    2. while :math:`|h| < k`: scan the remaining candidates nearest first and add
       the first :math:`x_j` that is of class ``target`` (always allowed) or whose
       class ``c`` has :math:`n_c(h) + 1 \le n_t(h) - \tau`.

    Every addition keeps ``target`` winning by ``tau`` (its count only grows), so
    the result is feasible, and it is found exactly when :func:`targeted_inference`
    finds one (the greedy stops only when every own candidate is used and every
    other class is at its cap). It is not always optimal: it commits early to a
    point of another class that a later own point would have made room to
    replace by nearer points, e.g. ``k = 8``, four classes, ``tau = 1``, seed of
    three own points at 0, others ``a`` at 1, 2, 3, ``b`` at 3.5, 5, ``c`` at 4
    and a fourth own point at 5.5: the greedy takes ``a1 a2 b1 c1 b2`` (total
    15.5), the optimum takes the fourth own point and ``a1 a2 a3 b1`` (15).

    Parameters and returns are those of :func:`targeted_inference` (ties by lower
    index, ``h`` sorted ascending, ``(None, -inf)`` if no set is found).

    Parameters
    ----------
    dist : array-like of shape (N,)
        Distances :math:`d_j \ge 0` from the query to the candidates (finite).
    labels : array-like of shape (N,)
        Class label of each candidate.
    target : label
        The class that must win.
    k : int
        Size of the latent set, ``k >= 1``.
    tau : {0, 1}, default=1
        Margin: 1 for a strict majority, 0 for being among the tied winners.
    classes : array-like, optional
        All classes of the problem (default: the distinct values of ``labels`` and the target).

    Returns
    -------
    h : ndarray of int or None
        The candidate indices of the set, sorted ascending; ``None`` if none is found.
    score : float
        :math:`S(x, h) = -\sum_{j \in h} d_j`, or ``-inf`` if ``h`` is ``None``.

    Raises
    ------
    ValueError
        (:class:`metricopt.errors.InputError`) for invalid inputs, as :func:`targeted_inference`.
    """
    tau = _check_tau(tau)
    dist, codes, k, classes = _prepare(dist, labels, k, classes, (("target", target),))
    t = int(_encode(np.asarray([target]), classes, "target")[0])
    return _targeted(dist, codes, t, k, tau, classes.size, greedy=True)


def correct_inference(dist: ArrayLike, labels: ArrayLike, y: Any, k: int,
                      classes: ArrayLike | None = None) -> tuple[np.ndarray | None, float]:
    r"""The correct latent set :math:`h^* = \arg\max \{S(x, h) : y \text{ is the strict majority of } h\}`.

    :func:`targeted_inference` with ``tau = 1`` (Trivedi, McAllester &
    Shakhnarovich, NIPS 2014): ``y`` must have more members in ``h`` than any other
    class. Returns ``(h, score)``, or ``(None, -inf)`` if no such set exists.

    Parameters
    ----------
    dist : array-like of shape (N,)
        Distances :math:`d_j \ge 0` from the query to the candidates (finite).
    labels : array-like of shape (N,)
        Class label of each candidate.
    y : label
        The query's class, which must be the strict majority of ``h``.
    k : int
        Size of the latent set, ``k >= 1``.
    classes : array-like, optional
        All classes of the problem (default: the distinct values of ``labels`` and the target).

    Returns
    -------
    h : ndarray of int or None
        The candidate indices of the set, sorted ascending; ``None`` if none is found.
    score : float
        :math:`S(x, h) = -\sum_{j \in h} d_j`, or ``-inf`` if ``h`` is ``None``.

    Raises
    ------
    ValueError
        (:class:`metricopt.errors.InputError`) for invalid inputs, as :func:`targeted_inference`.
    """
    return targeted_inference(dist, labels, y, k, tau=1, classes=classes)


def loss_augmented_inference(dist: ArrayLike, labels: ArrayLike, y: Any, k: int, loss: ArrayLike | None = None,
                             classes: ArrayLike | None = None) -> tuple[np.ndarray | None, float, Any]:
    r"""Exact loss-augmented inference :math:`\hat h = \arg\max_h S(x, h) + \Lambda(y, h)`.

    Over all ``k``-subsets ``h`` of the candidates, with
    :math:`\Lambda(y, h) = \max_{c \in W(h)} \mathrm{loss}[y, c]` the worst loss
    over the classes tied for the top count of ``h`` (see :func:`vote`);
    Trivedi, McAllester & Shakhnarovich, NIPS 2014.

    Exactness. Writing "c wins h by 0" as :math:`c \in W(h)`,

    .. math::
        \max_h \big[S(h) + \max_{c \in W(h)} \mathrm{loss}[y, c]\big]
        = \max_h \max_{c \in W(h)} \big[S(h) + \mathrm{loss}[y, c]\big]
        = \max_c \Big[\mathrm{loss}[y, c] + \max_{h:\ c \in W(h)} S(h)\Big],

    exchanging the two maxima over the pairs ``(h, c)`` with ``c`` in ``W(h)``.
    The inner maximum is :func:`targeted_inference` with ``tau = 0``, exact; so
    one targeted inference per class gives the exact optimum. At the maximiser,
    ``Lambda(y, h)`` equals ``loss[y, c]`` for the maximising ``c`` (a tied winner
    of larger loss would give a larger value).

    Parameters
    ----------
    dist, labels, k
        As in :func:`targeted_inference`.
    y : label
        The true class of the query.
    loss : array-like of shape (R, R), optional
        ``loss[r, s]`` is the loss of predicting ``classes[s]`` for ``classes[r]``;
        finite, non-negative, zero diagonal. Default: :func:`zero_one_loss`.
    classes : array-like of shape (R,), optional
        All classes, in the order of ``loss``. Default: the sorted distinct values
        of ``labels`` and ``y`` (pass it whenever you pass ``loss``).

    Returns
    -------
    h : ndarray of int or None
        An optimal set, sorted ascending (ties by lower index, then by the first
        class in ``classes``); ``None`` only if ``k > N``.
    value : float
        :math:`S(x, h) + \Lambda(y, h)`, or ``-inf``.
    y_hat : label or None
        The tied winner of ``h`` with the largest loss (the first in ``classes``
        among equal losses), so ``value = S(h) + loss[y, y_hat]``.
    """
    dist, codes, k, classes = _prepare(dist, labels, k, classes, (("y", y),))
    yi = int(_encode(np.asarray([y]), classes, "y")[0])
    loss = _check_loss(loss, classes.size)
    if k > dist.size:
        return None, -np.inf, None
    idx, d, code, rank = _shortlist(dist, codes, k, classes.size)
    h, score, y_hat = _loss_augmented_row(dist, idx, d, code, rank, yi, k, loss, greedy=False)
    return h, float(score + loss[yi, y_hat]), classes[y_hat]


def _loss_augmented_row(dist, idx, d, code, rank, yi, k, loss, greedy):
    """``(h, S(h), position of y_hat)`` maximising ``S(h) + Lambda(y, h)``: one targeted inference (tau = 0) per class.

    Classes are tried in order and a later one replaces the best only if strictly better.
    """
    best, best_value = (None, -np.inf, -1), -np.inf
    for c in range(loss.shape[0]):
        pos = _greedy_core(d, code, c, k, 0, loss.shape[0]) if greedy else _exact_core(d, code, rank, c, k, 0)
        if pos is None:
            continue
        h = np.sort(idx[pos])
        counts = np.bincount(code[pos], minlength=loss.shape[0])
        worst = _worst_winner(counts, loss[yi])
        score = -float(np.sum(dist[h]))
        if score + loss[yi, worst] > best_value:
            best, best_value = (h, score, worst), score + loss[yi, worst]
    return best


def latent_knn_predict(D: ArrayLike, y_train: ArrayLike, k: int, classes: ArrayLike | None = None) -> np.ndarray:
    """kNN prediction rule of the gerrymandering model: majority vote, ties to the nearest tied class.

    For each query the ``k`` nearest training points are taken (equal distances
    ordered by lower training index, by :func:`metricopt.knn._k_smallest_stable`,
    the neighbour selection of :mod:`metricopt.knn`), and the class with the most
    votes is predicted; if several classes tie for the most votes, the one of the
    nearest neighbour among the tied classes wins (Trivedi, McAllester &
    Shakhnarovich, NIPS 2014). This is not the vote of :mod:`metricopt.knn`, which
    on a tie drops the farthest neighbour and votes again (Weinberger & Saul): with
    neighbours ordered ``A B B A`` this rule predicts ``A``, that one ``B``; so the
    vote is written here and only the neighbour selection is reused.

    Parameters
    ----------
    D : array-like of shape (n_test, n_train)
        Distances (finite, non-negative) from each query to each training point.
    y_train : array-like of shape (n_train,)
        Training labels.
    k : int
        Number of neighbours, ``1 <= k <= n_train``.
    classes : array-like, optional
        All classes (default: the sorted distinct values of ``y_train``).

    Returns
    -------
    y_pred : ndarray of shape (n_test,)
        Predicted labels.

    Raises
    ------
    InputError
        For invalid distances or labels, or ``k`` outside ``[1, n_train]``.
    """
    D = _check_distances(D, "D", 2)
    y_train = _check_labels(y_train, D.shape[1], "y_train")
    k = check_int(k, "k", low=1)
    if k > D.shape[1]:
        raise InputError(f"k={k} is larger than the number of training points ({D.shape[1]}); use k <= {D.shape[1]}.")
    classes = _resolve_classes(classes, y_train)
    codes = _encode(y_train, classes, "y_train")
    if D.shape[0] == 0:
        return classes[:0]
    nbr = codes[_k_smallest_stable(D, k)]  # (n_test, k), nearest first
    rows = np.arange(D.shape[0])
    counts = np.zeros((D.shape[0], classes.size), dtype=np.intp)
    np.add.at(counts, (rows[:, None], nbr), 1)
    tied = counts == counts.max(axis=1, keepdims=True)
    first = np.argmax(tied[rows[:, None], nbr], axis=1)  # nearest neighbour whose class is a top class
    return classes[nbr[rows, first]]


@dataclasses.dataclass(frozen=True)
class InferenceResult:
    r"""Both inferences for every training point, or for some query rows (:func:`infer_all`, :func:`infer_rows`).

    The shapes below are for :func:`infer_all`; :func:`infer_rows` gives one row per query row.

    Attributes
    ----------
    h_star : ndarray of shape (n, k), int
        :math:`h^*_i`, the best set that ``y_i`` wins strictly, indices sorted.
    score_star : ndarray of shape (n,)
        :math:`S(x_i, h^*_i)`.
    h_hat : ndarray of shape (n, k), int
        :math:`\hat h_i`, the loss-augmented set, indices sorted.
    score_hat : ndarray of shape (n,)
        :math:`S(x_i, \hat h_i)`.
    y_hat : ndarray of shape (n,)
        The worst tied winner of :math:`\hat h_i` (largest loss, first in ``classes``).
    loss : ndarray of shape (n,)
        :math:`\Lambda(y_i, \hat h_i) = \mathrm{loss}[y_i, \hat y_i]`.
    surrogate : ndarray of shape (n,)
        :math:`L_i = S(\hat h_i) + \Lambda(y_i, \hat h_i) - S(h^*_i)`.
    classes : ndarray of shape (R,)
        The classes, in the order of the loss matrix.
    """

    h_star: np.ndarray
    score_star: np.ndarray
    h_hat: np.ndarray
    score_hat: np.ndarray
    y_hat: np.ndarray
    loss: np.ndarray
    surrogate: np.ndarray
    classes: np.ndarray


def _own_count_needed(k, others):
    """Smallest own count ``c`` with ``c + sum_a min(m_a, c - 1) >= k`` (strict majority possible)."""
    return next(c for c in range(1, k + 1) if c + np.minimum(others, c - 1).sum() >= k)


def _check_class_sizes(codes, classes, k):
    """Raise if some class is too small for its points to have a correct set ``h*``."""
    sizes = np.bincount(codes, minlength=classes.size)
    short = []
    for c in np.flatnonzero(sizes):
        others = np.delete(sizes, c)
        need = _own_count_needed(k, others)
        if sizes[c] - 1 < need:
            short.append(f"{_py(classes[c])!r} has {sizes[c]} point(s), so {sizes[c] - 1} other(s) of its class "
                         f"per point, but needs at least {need}")
    if short:
        raise InputError(
            f"the correct latent set h* does not exist for k={k}: a point wins a strict majority of its k "
            f"neighbours only with enough other points of its own class, and these classes are too small: "
            f"{'; '.join(short)}. Use a smaller k or drop those classes; training cannot proceed without h*."
        )


# ---------------------------------------------------------------------------
# blocks of queries: the per-row loop (reference, and the paper's greedy) and the vectorised exact path
# ---------------------------------------------------------------------------


def _rowwise_block(D, rows, codes, k, loss, greedy):
    """Both inferences, one query at a time, for the rows ``rows`` whose distances are ``D`` (``(b, n)``).

    ``D[r]`` holds the distances of training point ``rows[r]`` to all ``n`` points (its own entry
    ignored). Returns ``(h_star, score_star, h_hat, score_hat, y_hat)``; the reference for
    :func:`_exact_block` and the path of ``inference="paper"``.
    """
    b, n = D.shape
    n_classes = loss.shape[0]
    out = (np.empty((b, k), dtype=np.intp), np.empty(b), np.empty((b, k), dtype=np.intp), np.empty(b),
           np.empty(b, dtype=np.intp))
    h_star, score_star, h_hat, score_hat, y_hat = out
    Dc = D.copy()
    Dc[np.arange(b), rows] = np.inf  # sorted last, then cut off
    order, sc, rank, keep = _sorted_block(Dc, codes, k, n_classes, n - 1)
    for r, i in enumerate(rows):
        row = D[r]
        idx, code, rk = order[r, keep[r]], sc[r, keep[r]], rank[r, keep[r]]
        d = row[idx]
        t = codes[i]
        pos = _greedy_core(d, code, t, k, 1, n_classes) if greedy else _exact_core(d, code, rk, t, k, 1)
        if pos is None:  # excluded by _check_class_sizes; kept as a guard
            raise InputError(f"no correct latent set for training point {i}; use a smaller k.")
        h_star[r] = np.sort(idx[pos])
        score_star[r] = -float(np.sum(row[h_star[r]]))
        h_hat[r], score_hat[r], y_hat[r] = _loss_augmented_row(row, idx, d, code, rk, t, k, loss, greedy)
    return out


def _class_layout(codes, n_classes):
    """``(perm, start, inv)``: the points grouped by class (ascending index within a class); class ``a`` is
    ``perm[start[a]:start[a + 1]]``, and point ``j`` sits at ``inv[j]`` in ``perm``."""
    perm = np.argsort(codes, kind="stable")
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size)
    return perm, np.searchsorted(codes[perm], np.arange(n_classes + 1)), inv


def _class_nearest(D, rows, codes, layout, k):
    """Each query's ``k`` nearest candidates of every class, by (distance, index), itself excluded.

    ``D`` holds the distances of the queries ``rows`` to all points, its columns in the order ``perm``
    (classes in turn); the queries' own entries are overwritten with ``+inf``. Per class: the ``k``-th
    smallest distance by a partition, the candidates up to it, and among those at exactly that distance
    the lowest indices. Returns ``dist`` and ``idx`` of shape ``(b, R, k)``; a class with fewer than
    ``k`` candidates is padded with distance ``+inf`` and index ``n``.
    """
    perm, start, inv = layout
    b = rows.size
    n = perm.size
    n_classes = start.size - 1
    D[np.arange(b), inv[rows]] = np.inf  # the query itself: never kept unless its class has <= k points
    group, col, thr = [], [], []
    for a in range(n_classes):
        lo, hi = start[a], start[a + 1]
        if hi == lo:
            continue
        S = D[:, lo:hi]
        v = np.partition(S, k - 1, axis=1)[:, k - 1] if hi - lo > k else np.full(b, np.inf)
        r, p = np.divmod(np.flatnonzero(S <= v[:, None]), hi - lo)  # by query, then index
        group.append(r + a * b)
        col.append(p + lo)
        thr.append(v[r])
    group, col, thr = np.concatenate(group), np.concatenate(col), np.concatenate(thr)
    r = group % b
    d = D[r, col]
    first = np.searchsorted(group, np.arange(n_classes * b + 1))
    if np.any(np.diff(first) > k):  # ties at the k-th distance: keep the lowest indices among them
        lt = d < thr
        eq = np.cumsum(~lt)
        eq_rank = eq - np.concatenate(([0], eq))[first[:-1]][group]
        keep = lt | (eq_rank <= k - np.bincount(group[lt], minlength=n_classes * b)[group])
        group, col, d = group[keep], col[keep], d[keep]
        first = np.searchsorted(group, np.arange(n_classes * b + 1))
    slot = np.arange(group.size) - first[group]
    dist = np.full((n_classes * b, k), np.inf)
    idx = np.full((n_classes * b, k), n, dtype=np.intp)
    dist[group, slot] = d
    idx[group, slot] = perm[col]
    order = np.argsort(dist, axis=-1, kind="stable")  # slots are in index order: (distance, index)
    dist = np.take_along_axis(dist, order, axis=-1).reshape(n_classes, b, k).transpose(1, 0, 2)
    idx = np.take_along_axis(idx, order, axis=-1).reshape(n_classes, b, k).transpose(1, 0, 2)
    dist, idx = np.ascontiguousarray(dist), np.ascontiguousarray(idx)
    idx[np.isinf(dist)] = n  # the query itself, kept only from a class of at most k candidates
    return dist, idx


def _merged_prefixes(dist, idx, k):
    """For each query and each cap ``m = 0..k``: the first ``k`` candidates, nearest first, among the
    ``m`` nearest of every class.

    Returns ``((d, cls, ix, ok), (md, mc))``: the first four ``(b, k + 1, k)``, distance, class, index
    and whether the slot holds a candidate (fewer than ``k`` when few are eligible); ``md`` and ``mc``
    ``(b, L)``, the nearest ``L >= k`` kept candidates by (distance, index).
    """
    b, n_classes, _ = dist.shape
    rb = np.arange(b)[:, None]
    # Only the first k (k - 1) + 1 candidates in the merged order matter, and only from the k classes with
    # the nearest first candidates: with k classes present, every cap m >= 1 has k candidates up to the
    # k-th of the classes' nearest, and before it come only the candidates of the k - 1 classes met
    # earlier (k each at most); with fewer classes, all kept candidates are among them.
    # (distance, index) order through complex keys, which sort by real part, then imaginary part.
    near = min(n_classes, k)
    cls = np.argsort(dist[:, :, 0] + 1j * idx[:, :, 0], axis=1)[:, :near]  # (b, near)
    sd = dist[rb, cls].reshape(b, -1)
    si = idx[rb, cls].reshape(b, -1)
    order = np.argsort(sd + 1j * si, axis=1)[:, :k * (k - 1) + 1]
    md = np.take_along_axis(sd, order, axis=1)
    mi = np.take_along_axis(si, order, axis=1)
    mc = np.take_along_axis(cls, order // k, axis=1)
    mr = np.where(np.isinf(md), k, order % k)  # rank within the class; padding: never eligible
    eligible = mr[:, None, :] < np.arange(k + 1)[None, :, None]  # (b, k + 1, L)
    first = np.argsort(~eligible, axis=-1, kind="stable")[:, :, :k]  # eligible first, in merged order
    ok = np.take_along_axis(eligible, first, axis=-1)
    prefixes = (np.take_along_axis(md[:, None, :], first, axis=-1), np.take_along_axis(mc[:, None, :], first, axis=-1),
                np.take_along_axis(mi[:, None, :], first, axis=-1), ok)
    return prefixes, (md, mc)


def _targeted_pairs(D, colmap, r, t, tau, dist, idx, prefixes, k):
    """Exact targeted inference for the pairs (query ``r[p]``, target class ``t[p]``) at once.

    The same as :func:`_exact_core` on each query's shortlist: for each own count ``c = 1..k``, the
    ``c`` nearest of the target plus the ``k - c`` nearest others of within-class rank ``< c - tau``.
    Those others lie among the first ``k`` candidates of the cap ``m = c - tau`` (at most ``m`` of them
    are of the target), so the ``(b, k + 1, k)`` prefixes suffice; own counts that cannot win fail the
    count of available others. Sums run nearest first, as there, so totals and their ties are the same.

    Returns ``(ok, h, score, member_cls)``: ``ok`` ``(P,)`` whether a set exists, ``h`` ``(P, k)``
    (sorted; zeros where not ok), ``score`` ``(P,)`` its :math:`S` (summed as the one-query functions
    do), and ``member_cls`` ``(P, 2 k)`` the classes of its members (``-1`` in the unused slots).
    """
    pd, pc, pi, pok = prefixes
    n_pairs = r.size
    n = colmap.size
    rp = np.arange(n_pairs)
    c = np.arange(1, k + 1)
    need = k - c
    at = (r[:, None], c - tau)  # the prefix of cap c - tau, for each own count c: (P, c, slot)
    fd, fc, fi, fok = pd[at], pc[at], pi[at], pok[at]
    other = fok & (fc != t[:, None, None])
    n_other = np.cumsum(other, axis=-1)
    take = other & (n_other <= need[:, None])
    own_d = dist[r, t]  # (P, k), +inf past the class's candidates
    feasible = (n_other[..., -1] >= need) & np.isfinite(own_d)
    fill = np.cumsum(np.where(take, fd, 0.0), axis=-1)[..., -1]
    cost = np.where(feasible, np.cumsum(own_d, axis=-1) + fill, np.inf)
    best = np.argmin(cost, axis=-1)  # the smallest own count among equal totals
    ok = np.any(feasible, axis=-1)
    take_best = take[rp, best]  # (P, slot)
    own_in = np.arange(k) <= best[:, None]
    members = np.concatenate((np.where(own_in, idx[r, t], n), np.where(take_best, fi[rp, best], n)), axis=-1)
    h = np.where(ok[:, None], np.sort(members, axis=-1)[:, :k], 0)
    score = -D[r[:, None], colmap[h]].sum(axis=-1)
    member_cls = np.concatenate((np.where(own_in, t[:, None], -1), np.where(take_best, fc[rp, best], -1)), axis=-1)
    return ok, h, score, member_cls


def _worst_winners(member_cls, loss_of):
    """For each set (row of class labels, ``-1`` unused): the tied winner with the largest loss, the first
    class among equal losses (as :func:`_worst_winner`); ``loss_of`` gives each member's loss."""
    used = member_cls >= 0
    count = np.sum((member_cls[:, :, None] == member_cls[:, None, :]) & used[:, None, :], axis=-1)
    count[~used] = -1
    winner = count == count.max(axis=1, keepdims=True)
    lw = np.where(winner, loss_of, -np.inf)
    top = winner & (lw == lw.max(axis=1, keepdims=True))
    return np.min(np.where(top, member_cls, np.iinfo(np.intp).max), axis=1)


def _exact_block(D, rows, codes, layout, k, loss):
    """Both exact inferences for the queries ``rows`` at once (``D`` as in :func:`_class_nearest`).

    Identical to :func:`_rowwise_block` with ``greedy=False`` on the same distances: the same sets, the
    same scores bit for bit. The loss-augmented inference skips the classes whose bound
    ``min_c [own c nearest + overall k - c nearest] - max loss`` proves them worse than a set already
    known (``h*``, the ``k`` nearest). Work per query: one selection pass over its ``n`` distances,
    then ``O(R k^2)`` plus ``O(k^2)`` per class not skipped.
    """
    b = rows.size
    n_classes = loss.shape[0]
    y = codes[rows]
    rb = np.arange(b)
    colmap = layout[2]
    dist, idx = _class_nearest(D, rows, codes, layout, k)
    prefixes, (md, mc) = _merged_prefixes(dist, idx, k)
    ok, h_star, score_star, _ = _targeted_pairs(D, colmap, rb, y, 1, dist, idx, prefixes, k)
    if not np.all(ok):  # excluded by _check_class_sizes; kept as a guard
        raise InputError(f"no correct latent set for training point {rows[np.flatnonzero(~ok)[0]]}; "
                         "use a smaller k.")
    # bound: a set won by t with c own members costs at least its c nearest plus the k - c nearest of all
    lrow = loss[y]
    near = np.concatenate((np.zeros((b, 1)), np.cumsum(md[:, :k], axis=1)), axis=1)  # (b, k + 1)
    lower = np.min(np.cumsum(dist, axis=-1) + near[:, None, k - 1::-1], axis=-1)  # (b, R)
    knn = np.zeros((b, n_classes), dtype=np.intp)
    np.add.at(knn, (np.repeat(rb, k), mc[:, :k].ravel()), 1)
    known = np.maximum(score_star, -near[:, k] + np.max(np.where(knn == knn.max(axis=1, keepdims=True), lrow, -np.inf),
                                                           axis=1))
    top = lrow.max(axis=1)
    keep = -lower + top[:, None] >= (known - 1e-9 * (np.abs(known) + top))[:, None]
    keep[rb, y] = True
    r, t = np.nonzero(keep)  # by query, then class
    chunk = max(1, _BLOCK_ELEMENTS // (k * k))  # (pairs, k, k) temporaries of at most 16 MB
    parts = [_targeted_pairs(D, colmap, r[lo:lo + chunk], t[lo:lo + chunk], 0, dist, idx, prefixes, k)
             for lo in range(0, r.size, chunk)]
    ok, h, score, member_cls = (np.concatenate(part) for part in zip(*parts))
    worst = _worst_winners(member_cls, lrow[r[:, None], np.maximum(member_cls, 0)])
    value = np.where(ok, score + lrow[r, worst], -np.inf)
    start = np.searchsorted(r, rb)
    top_value = np.maximum.reduceat(value, start)
    best = np.minimum.reduceat(np.where(value == top_value[r], np.arange(r.size), r.size), start)  # first class
    return h_star, score_star, h[best], score[best], worst[best]


def infer_all(Dmat: ArrayLike, y: ArrayLike, k: int, loss: ArrayLike | None = None, classes: ArrayLike | None = None,
              inference: str = "exact", block_size: int | None = None) -> InferenceResult:
    r"""Correct and loss-augmented inference for every training point (leave-one-out).

    For each training point ``i`` the candidates are all the other points
    (``i`` is never in its own sets), with distances ``Dmat[i, j]``, and

    .. math::
        h^*_i = \arg\max_{h:\ y_i \text{ wins } h \text{ by } 1} S(x_i, h), \qquad
        \hat h_i = \arg\max_h S(x_i, h) + \Lambda(y_i, h),

    .. math:: L_i = S(x_i, \hat h_i) + \Lambda(y_i, \hat h_i) - S(x_i, h^*_i) ,

    the per-point latent structural SVM surrogate of Trivedi, McAllester &
    Shakhnarovich, NIPS 2014. With ``inference="exact"`` (:func:`correct_inference`
    and :func:`loss_augmented_inference`) both are exact maxima and
    :math:`L_i \ge 0` (``h*_i`` is a candidate of the loss-augmented maximum with
    zero loss). With ``inference="paper"`` both use the greedy
    :func:`paper_targeted_inference`; its sets can be suboptimal, so its ``L_i``
    is not guaranteed to be non-negative.

    Rows are processed in blocks of ``block_size``, memory ``O(block_size * n)``.
    ``inference="exact"`` is vectorised over a block: per row, the ``k`` nearest
    candidates of each class by one partition per class (``O(n)``), then the
    targeted inferences for all rows at once, ``O(R k^2)`` per row plus
    ``O(k^2)`` per class that a bound does not rule out of the loss-augmented
    maximum; in all ``O(n^2)``. Its sets, tie-breaking and scores are those of
    the one-query functions (:func:`correct_inference`,
    :func:`loss_augmented_inference`) on each row. ``inference="paper"`` runs
    one row at a time after a full sort of each row, ``O(n^2 log n)``. For a
    subset of rows (a minibatch), from the data and the metric, see
    :func:`infer_rows`.

    Parameters
    ----------
    Dmat : array-like of shape (n, n)
        Distances between training points (finite, non-negative); the diagonal
        is ignored. Need not be symmetric: row ``i`` holds ``d(x_i, x_j)``.
    y : array-like of shape (n,)
        Training labels.
    k : int
        Size of the latent sets, ``1 <= k <= n - 1``.
    loss : array-like of shape (R, R), optional
        Loss matrix in the order of ``classes`` (default 0/1, :func:`zero_one_loss`).
    classes : array-like of shape (R,), optional
        All classes (default: the sorted distinct values of ``y``).
    inference : {"exact", "paper"}, default="exact"
        Exact targeted inference or the paper's greedy.
    block_size : int, optional
        Rows per block (default: about ``2**21 / n``, 16 MB of distances); the
        result does not depend on it.

    Returns
    -------
    InferenceResult

    Raises
    ------
    ValueError
        (:class:`metricopt.errors.InputError`) on invalid input, and if some
        class is too small for its points to have a correct set ``h*`` (the
        message names the classes and what to do: a smaller ``k`` or dropping
        them).
    """
    Dmat = _check_distances(Dmat, "Dmat", 2)
    n = Dmat.shape[0]
    if Dmat.shape != (n, n):
        raise InputError(f"Dmat must be a square (n, n) matrix of distances between training points; got shape {Dmat.shape}.")
    y, k, classes, codes, loss, inference, block_size = _check_training(n, y, k, loss, classes, inference, block_size)

    def distances_of(rows, perm):
        block = Dmat[rows[0]:rows[-1] + 1]
        return block if perm is None else np.take(block, perm, axis=1)  # one gather: faster than per class

    return _infer(distances_of, np.arange(n), codes, classes, k, loss, inference, block_size)


def _check_training(n, y, k, loss, classes, inference, block_size):
    """The checks shared by :func:`infer_all` and :func:`infer_rows` (``n`` training points)."""
    y = _check_labels(y, n, "y")
    k = check_int(k, "k", low=1)
    if k > n - 1:
        raise InputError(
            f"k={k} is larger than the number of candidates of each point ({n - 1}: the other training points); "
            f"use k <= {n - 1}."
        )
    inference = check_choice(inference, "inference", INFERENCE)
    if block_size is not None:
        block_size = check_int(block_size, "block_size", low=1)
    classes = _resolve_classes(classes, y)
    codes = _encode(y, classes, "y")
    loss = _check_loss(loss, classes.size)
    _check_class_sizes(codes, classes, k)
    return y, k, classes, codes, loss, inference, block_size


#: rows per block by default: about ``2**21`` distances (16 MB) per block, so that the temporaries of a block
#: are reused from the heap rather than mapped afresh (page faults cost as much as the work); also the size of
#: the ``(pairs, k, k)`` temporaries of the vectorised inference
_BLOCK_ELEMENTS = 1 << 21


def _infer(distances_of, rows, codes, classes, k, loss, inference, block_size):
    """Both inferences for the training points ``rows``; ``distances_of(sub, perm)`` gives the
    ``(len(sub), n)`` distances of the chunk ``sub`` of ``rows`` to all points, columns in index order if
    ``perm`` is None, else in the order ``perm`` (as a new array, which the exact path overwrites)."""
    m = rows.size
    h_star = np.empty((m, k), dtype=np.intp)
    h_hat = np.empty((m, k), dtype=np.intp)
    score_star = np.empty(m)
    score_hat = np.empty(m)
    y_hat = np.empty(m, dtype=np.intp)
    outputs = (h_star, score_star, h_hat, score_hat, y_hat)
    layout = _class_layout(codes, classes.size)
    if block_size is None:
        block_size = min(1024, max(16, _BLOCK_ELEMENTS // codes.size))
    for start in range(0, m, block_size):
        sub = rows[start:start + block_size]
        if inference == "exact":
            part = _exact_block(distances_of(sub, layout[0]), sub, codes, layout, k, loss)
        else:
            part = _rowwise_block(distances_of(sub, None), sub, codes, k, loss, greedy=True)
        for out, value in zip(outputs, part):
            out[start:start + sub.size] = value
    lam = loss[codes[rows], y_hat]
    return InferenceResult(h_star=h_star, score_star=score_star, h_hat=h_hat, score_hat=score_hat,
                           y_hat=classes[y_hat], loss=lam, surrogate=score_hat + lam - score_star,
                           classes=classes)


def _check_metric(W, d):
    try:
        W = np.asarray(W, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"W must be a numeric (d, d) matrix; could not convert it to float64 ({exc}).") from None
    if W.shape != (d, d):
        raise InputError(f"W must have shape (d, d) = ({d}, {d}), one row and column per feature of X; "
                         f"got shape {W.shape}.")
    if not np.all(np.isfinite(W)):
        raise InputError("W contains NaN or infinite entries; the metric must be a finite matrix.")
    return W


def _check_rows(rows, n):
    arr = np.asarray(rows)
    if arr.ndim != 1 or not (arr.dtype.kind in "iu" or arr.size == 0):
        raise InputError(f"rows must be a 1-D array of integer indices of training points; got dtype {arr.dtype} "
                         f"and shape {arr.shape}.")
    arr = arr.astype(np.intp)
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        bad = _py(arr[(arr < 0) | (arr >= n)][0])
        raise InputError(f"rows contains {bad}, which is not the index of a training point (0 <= row < {n}).")
    return arr


class _MetricGram:
    """What the distances of every query need once: ``X`` centred, ``X Ws`` and ``q_j = x_j^T Ws x_j``.

    Called with query rows, gives their distances to all points (one matrix product with the inner
    dimension ``d + 2``: ``[-2 x_i^T Ws, q_i, 1] . [x_j, 1, q_j]``), the columns in index order, or in the
    order ``perm`` if given (the same formula, evaluated for the columns in that order).
    """

    def __init__(self, X, W):
        X = check_X(X)
        W = _check_metric(W, X.shape[1])
        self.n = X.shape[0]
        Xc = X - (X.min(axis=0) + X.max(axis=0)) / 2.0  # midrange: smaller norms, integers stay exact halves
        XW = Xc @ ((W + W.T) / 2.0)
        q = np.einsum("ij,ij->i", XW, Xc)[:, None]
        one = np.ones_like(q)
        self.left = np.hstack((-2.0 * XW, q, one))
        self.right = np.hstack((Xc, one, q))
        self._grouped = None

    def __call__(self, rows, perm=None):
        right = self.right
        if perm is not None:
            if self._grouped is None or self._grouped[0] is not perm:
                self._grouped = (perm, np.ascontiguousarray(self.right[perm]))
            right = self._grouped[1]
        D = self.left[rows] @ right.T
        return np.maximum(D, 0.0, out=D)


def metric_distances(X: ArrayLike, W: ArrayLike, rows: ArrayLike | None = None) -> np.ndarray:
    r"""Squared distances :math:`d_W(x_i, x_j) = (x_i - x_j)^T W (x_i - x_j)` from ``rows`` to all points.

    Computed as :math:`q_i + q_j - 2 x_i^T W_s x_j` with :math:`W_s = (W + W^T)/2` and
    :math:`q_i = x_i^T W_s x_i`, after centring ``X`` on the midpoint of each feature's range (the distances
    do not change; the norms, and so the rounding, shrink), in float64, clipped at 0: one matrix product
    with the three terms summed inside it (in the BLAS's order), ``O(|rows| n d)``. The price is
    cancellation: the absolute error is a few ``eps * max(q_i, q_j)``, so the distances of points much
    closer to each other than to the centre lose relative accuracy (the direct form
    :math:`\|L (x_i - x_j)\|^2` would not, at ``d`` times the cost), and near-ties among candidates can
    be ordered by rounding. Integer-valued ``X`` and ``W`` of moderate size give exact distances (every
    intermediate is a multiple of 1/8 below 2^53), whatever the order of the sums.

    Parameters
    ----------
    X : array-like of shape (n, d)
        The points.
    W : array-like of shape (d, d)
        The metric; only its symmetric part counts. Should be positive semi-definite: negative values
        (rounding, or a ``W`` that is not PSD) are clipped to 0.
    rows : array-like of int, optional
        Indices of the query points (default: all).

    Returns
    -------
    ndarray of shape (len(rows), n)
        The distances. :func:`infer_rows` evaluates the same formula (its columns grouped by class).
    """
    gram = _MetricGram(X, W)
    return gram(np.arange(gram.n) if rows is None else _check_rows(rows, gram.n))


def infer_rows(X: ArrayLike, W: ArrayLike, rows: ArrayLike, y: ArrayLike, k: int, loss: ArrayLike | None = None,
               classes: ArrayLike | None = None, inference: str = "exact",
               block_size: int | None = None) -> InferenceResult:
    """Both inferences of :func:`infer_all` for the training points ``rows`` only, from the data and the metric.

    For stochastic solvers: the distances from each query row to all ``n`` training points are computed
    here, a block of rows at a time (:func:`metric_distances`, with its note on cancellation), and never
    stored whole; memory ``O(block_size * n)``, time ``O(|rows| n d)`` for the distances plus the
    selection and inference of :func:`infer_all`. The candidates of row ``i`` are all the other training
    points (leave-one-out), as in :func:`infer_all`, and the result is the same as
    ``infer_all(metric_distances(X, W), y, k, ...)`` restricted to ``rows`` (up to the rounding of the
    matrix product, which can differ between row subsets in the last bit).

    Parameters
    ----------
    X : array-like of shape (n, d)
        Training points.
    W : array-like of shape (d, d)
        The metric (see :func:`metric_distances`).
    rows : array-like of int, shape (m,)
        Indices of the query points, e.g. a minibatch; repeats allowed.
    y, k, loss, classes, inference, block_size
        As in :func:`infer_all` (``y`` holds the labels of all ``n`` points; the class-size check runs on
        all of them, as the candidates are all of them).

    Returns
    -------
    InferenceResult
        One entry per element of ``rows``, in that order; the sets index all ``n`` points.
    """
    X = check_X(X)
    n = X.shape[0]
    rows = _check_rows(rows, n)
    y, k, classes, codes, loss, inference, block_size = _check_training(n, y, k, loss, classes, inference, block_size)
    return _infer(_MetricGram(X, W), rows, codes, classes, k, loss, inference, block_size)
