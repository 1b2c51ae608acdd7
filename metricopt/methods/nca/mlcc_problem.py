r"""Metric learning by collapsing classes (MLCC) as a declarative problem.

Globerson & Roweis, *Metric Learning by Collapsing Classes*, NIPS 18 (2006); JMLR 2009 Sec. 2.4.
With :math:`p_M(j \mid i) = \exp(-d_M(x_i, x_j)) / \sum_{k \ne i} \exp(-d_M(x_i, x_k))` and the ideal
distribution :math:`p_0(j \mid i)` uniform on the other points of :math:`x_i`'s class :math:`C_i`,

.. math::

    \min_{M \succeq 0} \sum_i \mathrm{KL}\big(p_0(\cdot \mid i) \,\|\, p_M(\cdot \mid i)\big)
    = \sum_i \Big[\frac{1}{|C_i|} \sum_{j \in C_i} d_M(x_i, x_j)
      + \log \sum_{k \ne i} e^{-d_M(x_i, x_k)} - \log |C_i|\Big],

a linear term (:class:`~metricopt.problems.terms.Linear`, the mean within-class distances) plus a sum of
log-sum-exps of linear functions of :math:`M` (:class:`LogPartition`): convex. The exact backend writes
the log-sum-exps with exponential cones (Clarabel by default); the JAX backend minimises it by projected
gradient steps on the PSD cone (softmax in row blocks). There is no dual certificate for the
log-partition term yet: certify raises :class:`~metricopt.errors.NotCertifiableError`, and solutions
carry the solver's word only (the exact backend says NOT CERTIFIED in their message; neither backend
reports ``optimal`` for them: their status is ``uncertified``).

Why no certificate: with the entropy conjugate, :math:`\log \sum_k e^{z_k} = \max_{q \in \Delta}
\langle q, z \rangle + H(q)`, every choice of distributions :math:`q_i` gives the lower bound
:math:`\sum_i H(q_i) - \sum_i \log |C_i|` provided :math:`S(q) = \sum_i \sum_{j \in C_i} B_{ij} / |C_i| -
\sum_i \sum_{k \ne i} q_{ik} B_{ik} \succeq 0` (:math:`B_{ij} = (x_i - x_j)(x_i - x_j)^\top`), and
:math:`S(p_{\hat M})` is the objective's gradient at a candidate :math:`\hat M`. That gradient is PSD
only at the exact optimum; a numerical one has small negative eigenvalues, and a repair needs either a
dual direction that lowers :math:`B(q)` along them (none is known in general) or an a-priori bound
:math:`T \ge \operatorname{tr} M^\star` (then :math:`\sum_i H(q_i) + T \min(0, \lambda_{\min}(S))` is a
bound). MLCC's objective is not coercive (its minimum need not be attained when a direction collapses
every class), so no such :math:`T` exists in general.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ..._validation import check_classes, check_y
from ...errors import InputError
from ...linalg import pair_scatter, symmetrize
from ...problems.base import Problem
from .softmax import jax_blocked_sum, jax_rows, numpy_blocks
from ...problems.terms import Linear, Term, register


from ..._lazy import lazy_module

if TYPE_CHECKING:
    import cvxpy as cp
else:
    cp = lazy_module("cvxpy")  # imported on first use: building a term's CVXPY expression

if TYPE_CHECKING:
    from ...protocols import DualPiece

#: exponential cones the exact backend accepts (one per ordered pair of points)
MAX_EXACT_PAIRS = 200_000


@register
class LogPartition(Term):
    r"""``sum_i log sum_{k != i} exp(-d_M(x_i, x_k)) + offset``: the log-partition functions of the
    points' neighbour distributions (MLCC; convex in ``M``: log-sum-exps of linear functions)."""

    #: its CVXPY form is written with exponential cones, which the generic certificate does not handle: declared, so
    #: that no certificate is attempted (and its program is not compiled just to be refused)
    generic_certificate = False

    def __init__(self, offset: float = 0.0):
        self.offset = float(offset)

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        from scipy.special import logsumexp

        from ...linalg import factor

        total = 0.0
        for _, logits in numpy_blocks(problem.X @ factor(V["M"]).T):
            total += float(np.sum(logsumexp(logits, axis=1)))
        return total + self.offset

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        n = problem.n
        if n * (n - 1) > MAX_EXACT_PAIRS:
            from ...errors import ProblemTooLargeError

            raise ProblemTooLargeError(f"MLCC's exact program has one exponential cone per ordered pair: {n * (n - 1):,} "
                                       f"for n={n}, above {MAX_EXACT_PAIRS:,}. Use backend='jax'.")
        a, b = np.triu_indices(n, 1)
        t = problem.pair_rows(a, b) @ V["Mvec"]  # d_M over the unordered pairs
        pair = np.zeros((n, n), dtype=np.int64)
        pair[a, b] = pair[b, a] = np.arange(a.size)
        rows = np.stack([np.delete(pair[i], i) for i in range(n)])  # (n, n-1): the pairs of point i
        T = cp.reshape(t[rows.ravel()], (n, n - 1), order="C")
        return cp.sum(cp.log_sum_exp(-T, axis=1)) + self.offset, []

    def dual_piece(self, problem: Any) -> DualPiece | None:
        return None  # no certifier for it yet: certify raises NotCertifiableError

    def jax_data(self, problem: Any) -> dict:
        return {"X": problem.X - problem.X.mean(axis=0), **jax_rows(problem.n), "offset": np.float64(self.offset)}

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
        from jax.scipy.special import logsumexp

        return jax_blocked_sum(data, {"M": V["M"]}, lambda idx, logits: logsumexp(logits, axis=1)) + data["offset"]

    def describe(self) -> str:
        return "LogPartition"

    def config(self) -> dict | None:
        return {"term": "LogPartition", "offset": self.offset}


class MLCCProblem(Problem):
    r"""MLCC (Globerson & Roweis, NIPS 2006): see the module docstring.

    .. math::

        \min_{M \succeq 0}\ \sum_i \frac{1}{|C_i|}\sum_{j \in C_i} d_M(x_i, x_j)
        + \sum_i \log \sum_{k \ne i} e^{-d_M(x_i, x_k)} - \sum_i \log |C_i|.

    Parameters
    ----------
    X : (n, d) array_like
    y : (n,) array_like of class labels (at least two classes, two points in every class)
    """

    method = "MLCC"
    reference = "Globerson & Roweis, NIPS 2006"
    default_solver = "CLARABEL"
    #: the class labels (required here)
    y: np.ndarray

    def __init__(self, X: ArrayLike, y: ArrayLike):
        super().__init__(X)
        self.y = check_y(y, self.n)
        classes, counts = check_classes(self.y, method="MLCC")
        if np.any(counts < 2):
            raise InputError("MLCC needs at least two points in every class (p_0 is uniform on a point's other "
                             "class members); drop the classes with one point.")
        codes = np.searchsorted(classes, self.y)
        size = counts[codes] - 1  # |C_i|: the other points of i's class
        i, j = np.nonzero((codes[:, None] == codes[None, :]) & ~np.eye(self.n, dtype=bool))
        P = symmetrize(pair_scatter(self.X, i, j, 1.0 / size[i]))
        self.terms = [Linear(P, name="mean within-class distance"),
                      LogPartition(offset=-float(np.sum(np.log(size))))]

    def kl(self, M: ArrayLike) -> np.ndarray:
        r"""``KL(p_0(.|i) || p_M(.|i))`` per point (their sum is the objective).

        With :math:`p_0(\cdot|i)` uniform on the other members of :math:`x_i`'s class and
        :math:`p_M(k|i) \propto e^{-d_M(x_i, x_k)}` (Globerson & Roweis, NIPS 2006; module docstring).

        Parameters
        ----------
        M : (d, d) array_like
            The metric (checked PSD).

        Returns
        -------
        (n,) ndarray
            One divergence per point.

        Raises
        ------
        InputError
            When ``M`` is not a valid metric (:meth:`~metricopt.problems.base.Problem.check_metric`).
        """
        from scipy.special import logsumexp

        from ...linalg import factor

        M = self.check_metric(M)
        codes = np.searchsorted(np.unique(self.y), self.y)
        out = np.empty(self.n)
        for idx, logits in numpy_blocks(self.X @ factor(M).T):
            logp = logits - logsumexp(logits, axis=1, keepdims=True)
            same = codes[idx, None] == codes[None, :]
            same[np.arange(idx.size), idx] = False
            m = same.sum(axis=1)
            out[idx] = -np.log(m) - np.sum(np.where(same, logp, 0.0), axis=1) / m
        return out
