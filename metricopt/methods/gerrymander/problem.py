r"""Metric learning by neighbourhood gerrymandering as declarative problems.

Trivedi, McAllester & Shakhnarovich, *Discriminative Metric Learning by Neighborhood
Gerrymandering*, NIPS 2014. A latent set :math:`h` is ``k`` training points other than
:math:`x_i`, scored :math:`S_M(x_i, h) = -\sum_{j \in h} d_M(x_i, x_j)`; its vote is the
majority class (a tie counts as the worst loss among the tied classes). With a loss matrix
:math:`\Lambda` (default 0/1) the learning problem (their Eq. 6, regularisers in this
package's convention) is

.. math::

    \min_{M \succeq 0}\ R(M) + C \sum_i \Big[\max_h \big(S_M(x_i, h) + \Lambda(y_i, y_h)\big)
    - \max_{h:\ y_i \text{ wins } h \text{ strictly}} S_M(x_i, h)\Big],

:math:`R(M) = \tfrac{\lambda}{2}\|M\|_F^2` (``"frobenius"``; the paper's
:math:`\lambda\|W\|_F^2` is ``lam = 2 lambda``), :math:`\lambda\,\mathrm{tr}\,M` (``"trace"``) or
:math:`\tfrac{\lambda}{2}\|M - I\|_F^2` (``"identity"``). The surrogate is a difference of
two convex functions of :math:`M` (each a maximum of linear functions): **not convex**
(:class:`GerrymanderingProblem`, never certified).

Fixing the correct sets :math:`h^*_i` at an iterate :math:`M_t` (the concave part's
maximisers) gives the convex majoriser of the CCCP step (:class:`GerrymanderStepProblem`),

.. math::

    \min_{M \succeq 0}\ R(M) + \langle P^*, M\rangle + C \sum_i \max_h \big(\Lambda(y_i, y_h)
    - \langle K_{ih}, M\rangle\big), \qquad
    K_{ih} = \sum_{j \in h} C_{ij},\ P^* = C \sum_i K_{ih^*_i},

:math:`C_{ij} = (x_i - x_j)(x_i - x_j)^\top`: a structural hinge whose maximum over the
:math:`\binom{n-1}{k}` latent sets the exact backend handles by cutting planes (a working
set of sets per point, new ones from exact loss-augmented inference,
:func:`metricopt.methods.gerrymander.inference.infer_all`), and that
:func:`metricopt.certify` bounds with multipliers :math:`\alpha_i \in C\,\Delta` on each
point's sets (:mod:`metricopt.certify.latent`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._validation import check_choice, check_int, check_real, check_X, check_y
from ...errors import InputError
from .inference import _check_class_sizes, _check_loss, _encode, _resolve_classes, infer_rows
from ...linalg import pair_rows, pair_scatter
from ...protocols import DualPiece
from ...problems.base import Problem
from ...problems.terms import Frobenius, Linear, Term, Trace, register

from typing import TYPE_CHECKING

from ..._lazy import lazy_module

if TYPE_CHECKING:
    import cvxpy as cp
else:
    cp = lazy_module("cvxpy")  # imported on first use: building a term's CVXPY expression

REGULARIZERS = ("frobenius", "trace", "identity")


@register
class FrobeniusTo(Term):
    """``(lam / 2) ||M - M0||_F^2`` (a Frobenius regulariser towards ``M0``, default the identity)."""

    def __init__(self, lam=1.0, M0=None):
        self.lam = check_real(lam, "lam", low=0.0)
        self.M0 = None if M0 is None else np.asarray(M0, dtype=np.float64)

    def _M0(self, d):
        return np.eye(d) if self.M0 is None else self.M0

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        return 0.5 * self.lam * float(np.sum((V["M"] - self._M0(problem.d)) ** 2))

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        return 0.5 * self.lam * cp.sum_squares(V["M"] - self._M0(problem.d)), []

    def dual_piece(self, problem: Any) -> DualPiece | None:
        M0 = self._M0(problem.d)
        return DualPiece(linear=-self.lam * M0, strong_convexity=self.lam, constant=0.5 * self.lam * float(np.sum(M0 * M0)))

    has_jax = True

    def jax_data(self, problem: Any) -> dict:
        return {"lam": np.float64(self.lam), "M0": self._M0(problem.d)}

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        import jax.numpy as jnp

        R = V["M"] - data["M0"]
        return 0.5 * data["lam"] * jnp.sum(R * R)

    @staticmethod
    def jax_value_grad(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> tuple[Any, Any, dict]:
        v = FrobeniusTo.jax_value(data, V)
        return v, v, {"M": data["lam"] * (V["M"] - data["M0"])}

    def describe(self) -> str:
        return f"FrobeniusTo(lam={self.lam:g})"

    def config(self) -> dict | None:
        """The term as a JSON-serialisable dict, or ``None`` with a target ``M0`` (a data array).

        Returns
        -------
        dict or None
            ``{"term": "FrobeniusTo", "lam": lam}``, or ``None`` when ``M0`` is given.
        """
        return {"term": "FrobeniusTo", "lam": float(self.lam)} if self.M0 is None else None


def regularizer_terms(regularizer: str, lam: float) -> list:
    """The terms of ``R(M)``: ``"frobenius"`` ``lam/2 ||M||_F^2``, ``"trace"`` ``lam tr M``, ``"identity"``
    ``lam/2 ||M - I||_F^2``.

    Parameters
    ----------
    regularizer : {"frobenius", "trace", "identity"}
        The regulariser.
    lam : float > 0
        Its weight.

    Returns
    -------
    list of Term
        One term.

    Raises
    ------
    InputError
        For an unknown regulariser or ``lam <= 0``.
    """
    regularizer = check_choice(regularizer, "regularizer", REGULARIZERS)
    lam = check_real(lam, "lam", low=0.0, low_open=True)
    return [{"frobenius": Frobenius, "trace": Trace, "identity": FrobeniusTo}[regularizer](lam)]


class _LatentData:
    """What both gerrymandering problems share: data, labels coded by class, ``k``, ``C``, the loss."""

    def _init_latent(self, X, y, k, C, loss, classes):
        self.X = check_X(X)
        y = check_y(y, self.X.shape[0])
        self.k = check_int(k, "k", low=1)
        if self.k > self.X.shape[0] - 1:
            n = self.X.shape[0]
            raise InputError(f"k={self.k} needs at least k+1={self.k + 1} points; X has {n} sample"
                             f"{'' if n == 1 else 's'} (n_samples={n}). Give more points or lower k.")
        self.C = check_real(C, "C", low=0.0, low_open=True)
        self.classes = _resolve_classes(classes, y)
        if self.classes.size < 2:
            raise InputError(f"neighbourhood gerrymandering needs at least two classes; y has only one "
                             f"({self.classes[0]!r}).")
        self.y = y
        self.codes = _encode(y, self.classes, "y")
        self.loss_matrix = _check_loss(loss, self.classes.size)
        _check_class_sizes(self.codes, self.classes, self.k)
        self._cache = {}

    def latent(self, M, inference="exact"):
        """Both inferences at ``M`` for every point (:func:`metricopt.methods.gerrymander.inference.infer_rows` over all rows: the
        distances a block of rows at a time, never ``n x n``), cached for the last ``M``."""
        M = np.ascontiguousarray(M, dtype=np.float64)
        key = (hashlib.sha256(M.tobytes()).hexdigest(), inference)
        if key not in self._cache:
            self._cache.clear()
            self._cache[key] = infer_rows(self.X, M, np.arange(self.n), self.y, self.k, loss=self.loss_matrix,
                                          classes=self.classes, inference=inference)
        return self._cache[key]

    def latent_rows(self, M, rows):
        """Both inferences at ``M`` for the points ``rows`` only (a mini-batch; :func:`metricopt.methods.gerrymander.inference.infer_rows`)."""
        return infer_rows(self.X, M, rows, self.y, self.k, loss=self.loss_matrix, classes=self.classes,
                          inference=getattr(self, "inference", "exact"))

    def set_losses(self, anchors, members):
        r"""``Lambda(y_i, y_h)`` for rows ``(i, h)``: the largest loss among the classes tied for the top count."""
        counts = np.zeros((len(anchors), self.classes.size), dtype=np.int64)
        np.add.at(counts, (np.repeat(np.arange(len(anchors)), members.shape[1]), self.codes[members].ravel()), 1)
        tied = counts == counts.max(axis=1, keepdims=True)
        return np.max(np.where(tied, self.loss_matrix[self.codes[anchors]], -np.inf), axis=1)

    def set_sums(self, anchors, members, M):
        r"""``<K_ih, M> = sum_{j in h} d_M(x_i, x_j)`` for rows ``(i, h)``."""
        D = (self.X[anchors][:, None, :] - self.X[members]).reshape(-1, self.d)
        return np.einsum("md,md->m", D @ M, D).reshape(members.shape).sum(axis=1)

    def set_scatter(self, anchors, members, w):
        r"""``sum_r w_r K_{i_r h_r}`` as a ``(d, d)`` matrix."""
        a = np.repeat(anchors, members.shape[1])
        return pair_scatter(self.X, a, members.ravel(), np.repeat(np.asarray(w, dtype=np.float64), members.shape[1]))


class LatentHinge(Term):
    r"""``C sum_i max_h (Lambda(y_i, y_h) - <K_ih, M>)``: the structural hinge of the CCCP step.

    Its working set holds rows ``(i, h_1, ..., h_k)``; the exact program has one free slack per point,
    ``xi_i >= Lambda_r - <K_r, M>`` for each row ``r`` of point ``i`` (the correct set ``h*_i``, with zero
    loss, is always a row, so ``xi_i`` is bounded below). New rows come from exact loss-augmented
    inference (:meth:`violators`). The dual piece declares the loss ``"latent_hinge"``.
    """

    uses_working_set = True
    has_jax = False

    def __init__(self, C):
        self.C = check_real(C, "C", low=0.0, low_open=True)

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        res = problem.latent_at(V["M"])
        return self.C * float(np.sum(res.score_hat + res.loss))

    def _rows(self, problem, M):
        res = problem.latent_at(M)
        n = problem.n
        return np.concatenate([np.arange(n)[:, None], res.h_hat], axis=1)

    def initial_working_set(self, problem: Any, V: Mapping[str, Any]) -> np.ndarray:
        """The rows the exact backend's working-set loop starts from at the point ``V``.

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        ndarray
            The rows (int), one per constraint of the working set.
        """
        star = np.concatenate([np.arange(problem.n)[:, None], problem.h_star], axis=1)
        rows = np.unique(np.concatenate([star, self._rows(problem, V["M"])]), axis=0)
        problem.keep_rows(rows)
        return rows

    def all_triplets(self, problem: Any) -> np.ndarray:
        """Every row of the full (textbook) program.

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).

        Returns
        -------
        ndarray
            The rows (int).
        """
        raise InputError("the latent hinge ranges over every k-subset of the other points (exponentially many): "
                         "solve it with its working set (working_set=True, the default).")

    def violators(self, problem: Any, V: Mapping[str, Any], ws: np.ndarray, slack: float = 1e-9,
                  max_add: int | None = None) -> tuple[np.ndarray, float]:
        """Rows ``(i, h^_i)`` (exact loss-augmented inference at ``V``) whose value exceeds the best row of ``i``
        in ``ws`` by more than ``slack`` (relative to the point's scale). Returns ``(new_rows, max_violation)``.

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.
        ws : ndarray
            The current working set (rows).
        slack : float
            Violations up to this are ignored.
        max_add : int or None
            At most this many new rows (the most violated); ``None``: all.

        Returns
        -------
        new : ndarray
            The violated rows outside ``ws`` (empty when the largest violation is at most ``slack``).
        worst : float
            The largest violation outside ``ws`` (``-inf`` when none).
        """
        M = V["M"]
        cand = self._rows(problem, M)
        v_cand = problem.row_values(cand, M)
        v_ws = problem.row_values(ws, M)
        best = np.full(problem.n, -np.inf)
        np.maximum.at(best, ws[:, 0], v_ws)
        gap = v_cand - best
        scale = 1.0 + np.abs(v_cand)
        new = gap > slack * scale
        worst = float(np.max(gap / scale))
        if max_add is not None and new.sum() > max_add:
            keep = np.argsort(-gap)[:max_add]
            new = np.zeros_like(new)
            new[keep] = True
        rows = cand[new]
        if len(rows):
            problem.keep_rows(np.concatenate([ws, rows]))
        return rows, worst

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        if ws is None or ws.shape[0] == 0:
            raise InputError("the latent hinge needs its working set of rows (i, h).")
        anchors, members = ws[:, 0], ws[:, 1:]
        A = pair_rows(problem.X, np.repeat(anchors, problem.k), members.ravel())
        A = A.reshape(len(anchors), problem.k, -1).sum(axis=1)
        lam = problem.set_losses(anchors, members)
        xi = cp.Variable(problem.n, name="xi")
        return self.C * cp.sum(xi), [xi[anchors] >= lam - A @ V["Mvec"]]

    def dual_piece(self, problem: Any) -> DualPiece | None:
        return DualPiece(loss="latent_hinge", weight=self.C)

    def describe(self) -> str:
        return f"LatentHinge(C={self.C:g})"


class GerrymanderStepProblem(_LatentData, Problem):
    r"""The convex CCCP step of neighbourhood gerrymandering at fixed correct sets ``h_star``
    (module docstring):

    .. math::

        \min_{M \succeq 0}\ R(M) + C \sum_i \Big[\sum_{j \in h^*_i} d_M(x_i, x_j)
        + \max_h \big(\Lambda(y_i, y_h) - \textstyle\sum_{j \in h} d_M(x_i, x_j)\big)\Big].

    At the iterate where ``h_star`` was inferred it equals the non-convex objective, and it majorises it
    everywhere. Solved by the exact backend (cutting planes over latent sets) and certified by a duality gap.
    """

    method = "GerrymanderStep"
    reference = "Trivedi, McAllester & Shakhnarovich, NIPS 2014 (CCCP step of Eq. 6)"
    default_solver = "CLARABEL"

    def __init__(self, X, y, k, h_star, C=1.0, lam=1.0, regularizer="frobenius", loss=None, classes=None):
        Problem.__init__(self, X)
        self._init_latent(X, y, k, C, loss, classes)
        h_star = np.asarray(h_star)
        if h_star.shape != (self.n, self.k) or h_star.dtype.kind not in "iu":
            raise InputError(f"h_star must be an ({self.n}, {self.k}) integer array of latent sets; got "
                             f"{h_star.shape} {h_star.dtype}.")
        self.h_star = h_star.astype(np.intp)
        self.regularizer, self.lam = regularizer, lam
        #: ``P* = C sum_i K_{i h*_i}``, the correct sets' pull (a linear term)
        self.pull = self.C * self.set_scatter(np.arange(self.n), self.h_star, np.ones(self.n))
        self.terms = [*regularizer_terms(regularizer, lam), Linear(self.pull, name="C sum_i K_ih*"),
                      LatentHinge(self.C)]
        self.rows = None

    def latent_at(self, M: ArrayLike) -> Any:
        """Exact loss-augmented and correct-set inference at ``M`` for every point (cached).

        Parameters
        ----------
        M : (d, d) array_like
            The metric.

        Returns
        -------
        object
            The result of :func:`metricopt.methods.gerrymander.inference.infer_rows` over all points.
        """
        return self.latent(M)

    def keep_rows(self, rows: ArrayLike) -> None:
        """Keep the working set's rows (the certificate's candidates for its multipliers).

        Parameters
        ----------
        rows : (m, 1 + k) array_like
            Rows ``(i, h)``: a point and its latent set.
        """
        self.rows = np.asarray(rows)

    def row_values(self, rows: np.ndarray, M: np.ndarray) -> np.ndarray:
        """``Lambda_r - <K_r, M>`` for rows ``(i, h)``.

        Parameters
        ----------
        rows : (m, 1 + k) ndarray
            Rows ``(i, h)``: a point and its latent set.
        M : (d, d) ndarray
            The metric.

        Returns
        -------
        (m,) ndarray
            One value per row.
        """
        return self.set_losses(rows[:, 0], rows[:, 1:]) - self.set_sums(rows[:, 0], rows[:, 1:], M)


class LatentSurrogate(Term):
    r"""``C sum_i [max_h (S_M(x_i, h) + Lambda(y_i, y_h)) - max_{h: y_i wins h} S_M(x_i, h)]``: the
    latent structural SVM surrogate, exact (both maxima by exact inference); a difference of convex
    functions, not convex. No CVXPY form, no dual piece."""

    convex = False
    uses_working_set = False
    has_jax = False

    def __init__(self, C):
        self.C = check_real(C, "C", low=0.0, low_open=True)

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        return self.C * float(np.sum(problem.latent_at(V["M"]).surrogate))

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        """The term as a CVXPY expression and extra constraints.

        Parameters
        ----------
        problem : Problem
            The problem the term belongs to (its points, labels, pairs or triplets).
        V : dict
            The CVXPY variables by name: ``V["M"]`` the metric, ``V["Mvec"]`` its row-major vectorisation,
            ``V["b"]`` where the problem has a threshold (and the exact backend's scaling entries).
        ws : ndarray or None
            The term's working set (rows of triplets or sets) when ``uses_working_set`` is true; ignored
            otherwise.

        Returns
        -------
        expression : cvxpy.Expression
            The term over the variables.
        constraints : list
            Extra constraints (e.g. on slack variables), possibly empty.

        Raises
        ------
        InputError
            Always: the surrogate is not convex.
        """
        raise InputError("the gerrymandering surrogate is not convex: solve its convex CCCP steps "
                         "(GerrymanderingProblem.step) or use metricopt.GerrymanderingKNN.")

    def dual_piece(self, problem: Any) -> DualPiece | None:
        return None

    def describe(self) -> str:
        return f"LatentSurrogate(C={self.C:g})"


class GerrymanderingProblem(_LatentData, Problem):
    r"""Metric learning by neighbourhood gerrymandering (Trivedi, McAllester & Shakhnarovich,
    NIPS 2014, Eq. 6), see the module docstring for the objective. Not convex: solved by
    :func:`metricopt.methods.gerrymander.cccp.cccp` (certified convex steps, monotone, reported ``stationary``)
    or :func:`metricopt.methods.gerrymander.cccp.sgd`.

    Parameters
    ----------
    X : (n, d) array_like
    y : (n,) array_like of class labels
    k : int, default 3
        Size of the latent neighbour sets (the kNN rule's ``k``).
    C : float > 0, default 1.0
        Weight of the surrogate.
    lam : float > 0, default 1.0
        Weight of the regulariser.
    regularizer : {"frobenius", "trace", "identity"}
        ``lam/2 ||M||_F^2``, ``lam tr M`` or ``lam/2 ||M - I||_F^2``.
    loss : (R, R) array_like, optional
        Loss matrix over ``classes`` (zero diagonal; default 0/1).
    inference : {"exact", "paper"}
        Exact inference (default) or the paper's greedy Algorithm 2 (for comparison; its surrogate can be
        negative and its objective is not the problem's).
    """

    method = "Gerrymandering"
    reference = "Trivedi, McAllester & Shakhnarovich, NIPS 2014, Eq. 6"

    def __init__(self, X, y, k=3, C=1.0, lam=1.0, regularizer="frobenius", loss=None, inference="exact",
                 classes=None):
        Problem.__init__(self, X)
        self._init_latent(X, y, k, C, loss, classes)
        self.regularizer, self.lam = regularizer, lam
        self.inference = check_choice(inference, "inference", ("exact", "paper"))
        self.terms = [*regularizer_terms(regularizer, lam), LatentSurrogate(self.C)]

    def latent_at(self, M: ArrayLike) -> Any:
        """Both inferences at ``M`` for every point with the problem's ``inference`` (cached).

        Parameters
        ----------
        M : (d, d) array_like
            The metric.

        Returns
        -------
        object
            The result of :func:`metricopt.methods.gerrymander.inference.infer_rows` over all points.
        """
        return self.latent(M, self.inference)

    def step(self, M: ArrayLike) -> GerrymanderStepProblem:
        """The convex CCCP step (:class:`GerrymanderStepProblem`) at the correct sets inferred at ``M``.

        Parameters
        ----------
        M : (d, d) array_like
            The metric.

        Returns
        -------
        GerrymanderStepProblem
            The convex step, with :math:`h^*_i` the correct sets inferred exactly at ``M``.
        """
        h_star = self.latent(np.asarray(M, dtype=np.float64), "exact").h_star
        return GerrymanderStepProblem(self.X, self.y, self.k, h_star, C=self.C, lam=self.lam,
                                      regularizer=self.regularizer, loss=self.loss_matrix, classes=self.classes)
