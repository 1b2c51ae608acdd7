r"""Neighbourhood components analysis (NCA) as a declarative problem.

Goldberger, Roweis, Hinton & Salakhutdinov, *Neighbourhood Components Analysis*, NIPS 17 (2004).
A linear map :math:`A` (``r x d``; ``M = A^T A``) defines stochastic neighbours

.. math::

    p_{ij} = \frac{\exp(-\lVert A x_i - A x_j\rVert^2)}{\sum_{k \ne i} \exp(-\lVert A x_i - A x_k\rVert^2)},
    \qquad p_{ii} = 0,

and NCA maximises the expected number of points classified correctly by them (Eq. 1-2),
:math:`f(A) = \sum_i \sum_{j \in C_i} p_{ij}`, or the log-likelihood variant (Eq. 6),
:math:`g(A) = \sum_i \log \sum_{j \in C_i} p_{ij}`, with :math:`C_i = \{j \ne i: y_j = y_i\}`. Both are
smooth and not convex in :math:`A` (nor in :math:`M`): metricopt minimises :math:`-f` or :math:`-g` over a
factor geometry (``A`` square, rectangular for dimensionality reduction, or diagonal) and reports a
stationary point, never an optimum; :func:`metricopt.certify` raises
:class:`~metricopt.errors.NotConvexError`.

The softmax is computed in blocks of rows (memory ``O(block * n)``, never ``n x n`` for large ``n``),
in NumPy for the exact value and in JAX (rematerialised per block, so that its gradient needs no
``n x n`` array either) for the solvers; the gradient comes from differentiating the value and is
checked against the paper's closed forms (Eq. 5 for ``f``, Eq. 7 for ``g``) in the tests.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._validation import check_choice, check_classes, check_int, check_y
from ..errors import InputError, NotConvexError
from ..protocols import Geometry, GeometryKind
from .base import Problem
from .softmax import jax_blocked_sum, jax_rows, numpy_blocks
from .terms import Term, register

#: the two objectives of the paper
OBJECTIVES = ("f", "g")
def _numpy_blocks(Z, codes, objective):
    """``(sum of per-point objectives, list of p_i)`` in float64 NumPy, blocked; ``Z`` the mapped points."""
    from scipy.special import logsumexp

    total, p_correct = 0.0, np.empty(Z.shape[0])
    for idx, logits in numpy_blocks(Z):
        logp = logits - logsumexp(logits, axis=1, keepdims=True)
        same = codes[idx, None] == codes[None, :]
        same[np.arange(idx.size), idx] = False
        # a point alone in its class has no same-class neighbour: p_i = 0 (log p_i = -inf)
        logpc = np.full(idx.size, -np.inf)
        has = same.any(axis=1)
        logpc[has] = logsumexp(np.where(same[has], logp[has], -np.inf), axis=1)
        p_correct[idx] = np.exp(logpc)
        total += float(np.sum(logpc)) if objective == "g" else float(np.sum(p_correct[idx]))
    return total, p_correct


@register
class NeighbourhoodComponents(Term):
    r"""NCA's loss: ``-f(A)`` (``objective="f"``, the expected number of correctly classified points,
    Goldberger et al. 2004 Eq. 2) or ``-g(A)`` (``"g"``, Eq. 6), at ``M = A^T A``; divided by ``n`` when
    ``normalize`` (the mean, so that tolerances do not depend on the data size). Not convex: it has
    no CVXPY form and no dual piece."""

    convex = False

    def __init__(self, objective: str = "f", normalize: bool = False):
        self.objective = check_choice(objective, "objective", OBJECTIVES)
        self.normalize = bool(normalize)

    def _scale(self, n):
        return 1.0 / n if self.normalize else 1.0

    def value(self, problem, V):
        Z = problem.X @ _factor_of(V).T
        total, _ = _numpy_blocks(Z, problem.codes, self.objective)
        return -self._scale(problem.n) * total

    def cvxpy(self, problem, V, ws=None):
        raise NotConvexError("NCA's softmax objective is not convex: it has no exact conic program. Use "
                             "backend='jax' (it is reported stationary, never optimal).")

    def dual_piece(self, problem):
        return None

    def jax_data(self, problem):
        return {"X": problem.X - problem.X.mean(axis=0), "codes": problem.codes.astype(np.int32),
                **jax_rows(problem.n), "sign": np.float64(-self._scale(problem.n)),
                "log": np.float64(self.objective == "g")}

    @staticmethod
    def jax_value(data, V, active=None, smoothing=0.0):
        import jax.numpy as jnp
        from jax.scipy.special import logsumexp

        codes, take_log = data["codes"], data["log"] > 0

        def per_row(idx, logits):
            logp = logits - logsumexp(logits, axis=1, keepdims=True)
            same = (codes[idx, None] == codes[None, :]) & jnp.isfinite(logits)
            # rows without a same-class neighbour (a class of one point) contribute p_i = 0; the inner
            # ``where`` keeps their logsumexp (and so the gradient) finite
            has = jnp.any(same, axis=1)
            logpc = logsumexp(jnp.where(same | ~has[:, None], logp, -jnp.inf), axis=1)
            return jnp.where(has, jnp.where(take_log, logpc, jnp.exp(logpc)), 0.0)

        return data["sign"] * jax_blocked_sum(data, V, per_row)

    def describe(self):
        return f"NeighbourhoodComponents(objective={self.objective!r})"

    def config(self):
        return {"term": "NeighbourhoodComponents", "objective": self.objective, "normalize": self.normalize}


def _factor_of(V):
    """``L`` of a point (the factor when the point carries it, else one with ``L^T L = M``)."""
    if "L" in V and V["L"] is not None:
        return np.asarray(V["L"], dtype=np.float64)
    from ..linalg import factor

    return factor(V["M"])


class NCAProblem(Problem):
    r"""NCA (Goldberger, Roweis, Hinton & Salakhutdinov, NIPS 2004): see the module docstring.

    .. math::

        \min_{A \in \mathbb R^{r \times d}}\ -\sum_i \sum_{j \in C_i} p_{ij}(A) \quad (\text{objective } f)
        \qquad\text{or}\qquad
        \min_{A}\ -\sum_i \log \sum_{j \in C_i} p_{ij}(A) \quad (\text{objective } g),

    over a factor geometry: ``A`` is ``r x d`` (``n_components=r``; ``None``: square), or diagonal
    (``diagonal=True``: ``A = diag(a)``, a feature weighting). Solved on the JAX backend's loop
    (solvers ``"newton"``, ``"lbfgs"``, ``"cg"``), reported ``stationary`` at best.

    Parameters
    ----------
    X : (n, d) array_like
    y : (n,) array_like of class labels (at least two classes). A class of one point is allowed with
        ``objective="f"`` (as scikit-learn's NCA): that point has no same-class neighbour, ``p_i = 0``
        whatever ``A``; ``"g"`` needs two points in every class (``log p_i`` would be ``-inf``).
    n_components : int, optional
        Rows ``r`` of ``A`` (``1 <= r <= d``); default ``d``.
    objective : {"f", "g"}, default "f"
        ``"f"``: expected number of correct classifications (Eq. 2; scikit-learn maximises this one);
        ``"g"``: log-likelihood of correct classification (Eq. 6).
    diagonal : bool, default False
        Learn a diagonal ``A`` (feature weights; ``n_components`` must then be ``None`` or ``d``).
    normalize : bool, default False
        Divide the objective by ``n`` (the same minimisers; scale-free tolerances).
    """

    method = "NCA"
    reference = "Goldberger, Roweis, Hinton & Salakhutdinov, NIPS 2004"
    #: the class labels (required here)
    y: np.ndarray

    def __init__(self, X: ArrayLike, y: ArrayLike, n_components: int | None = None, objective: str = "f",
                 diagonal: bool = False, normalize: bool = False):
        super().__init__(X)
        self.y = check_y(y, self.n)
        classes, counts = check_classes(self.y, method="NCA")
        if check_choice(objective, "objective", OBJECTIVES) == "g" and np.any(counts < 2):
            alone = ", ".join(repr(c.item() if hasattr(c, "item") else c) for c in classes[counts < 2])
            raise InputError(f"NCA with objective='g' needs at least two points in every class (a point alone in "
                             f"its class has no neighbour that could classify it correctly: log p_i = -inf); these "
                             f"classes have one: {alone}. Drop them, add points or use objective='f'.")
        self.classes = classes
        self.codes = np.searchsorted(classes, self.y)
        if not isinstance(diagonal, (bool, np.bool_)):
            raise InputError(f"diagonal must be True or False; got {diagonal!r}.")
        self.diagonal = bool(diagonal)
        if n_components is None:
            r = self.d
        else:
            r = check_int(n_components, "n_components", low=1)
            if r > self.d:
                raise InputError(f"n_components must be between 1 and the number of features d={self.d}; got {r}.")
        if self.diagonal and r != self.d:
            raise InputError(f"a diagonal A is d x d: n_components must be None or d={self.d} with diagonal=True; "
                             f"got {r}.")
        self.n_components = r
        self.objective_name = check_choice(objective, "objective", OBJECTIVES)
        self.terms = [NeighbourhoodComponents(self.objective_name, normalize=normalize)]

    def _geometry(self) -> Geometry:
        return Geometry(GeometryKind.FACTOR, rank=self.n_components, diagonal=self.diagonal)

    def factored(self, rank: int) -> "Problem":
        raise InputError("NCAProblem is already over a factor A; set n_components instead.")

    def objective_at(self, L: ArrayLike) -> float:
        """The objective (``-f`` or ``-g``) at the map ``L`` (``r x d``, or a length-``d`` diagonal)."""
        L = np.asarray(L, dtype=np.float64)
        L = np.diag(L) if L.ndim == 1 else L
        return float(self.terms[0].value(self, {"L": L}))

    def probabilities(self, L: ArrayLike) -> np.ndarray:
        """``p_i = sum_{j in C_i} p_ij``, the probability that point ``i`` is classified correctly (Eq. 1)."""
        L = np.asarray(L, dtype=np.float64)
        L = np.diag(L) if L.ndim == 1 else L
        return _numpy_blocks(self.X @ L.T, self.codes, "f")[1]

    def effective_neighbours(self, L: ArrayLike) -> float:
        """Mean perplexity ``exp(H(p_i.))`` of the stochastic neighbour distributions: how many neighbours
        each point effectively votes with under ``L`` (1: nearest neighbour; ``n - 1``: all points alike)."""
        from scipy.special import logsumexp

        L = np.asarray(L, dtype=np.float64)
        L = np.diag(L) if L.ndim == 1 else L
        out = np.empty(self.n)
        for idx, logits in numpy_blocks(self.X @ L.T):
            logp = logits - logsumexp(logits, axis=1, keepdims=True)
            p = np.exp(logp)
            plogp = np.zeros_like(p)
            pos = p > 0
            plogp[pos] = p[pos] * logp[pos]
            out[idx] = np.exp(-np.sum(plogp, axis=1))
        return float(np.mean(out))

    def describe(self) -> dict[str, Any]:
        return {"objective": self.objective_name, "n_components": self.n_components, "diagonal": self.diagonal}
