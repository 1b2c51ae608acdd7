r"""Neighbourhood components analysis (NCA) as a declarative problem.

Goldberger, Roweis, Hinton & Salakhutdinov, *Neighbourhood Components Analysis*, NIPS 17 (2004).
A linear map :math:`A` (``r x d``; ``M = A^T A``) defines stochastic neighbours

.. math::

    p_{ij} = \frac{\exp(-\lVert A x_i - A x_j\rVert^2)}{\sum_{k \ne i} \exp(-\lVert A x_i - A x_k\rVert^2)},
    \qquad p_{ii} = 0,

(Eq. 1), and NCA maximises the expected number of points classified correctly by them (Eq. 3),
:math:`f(A) = \sum_i \sum_{j \in C_i} p_{ij} = \sum_i p_i` with :math:`p_i` of Eq. 2, or the log-likelihood
variant (Eq. 6),
:math:`g(A) = \sum_i \log \sum_{j \in C_i} p_{ij}`, with :math:`C_i = \{j \ne i: y_j = y_i\}`. Both are
smooth and not convex in :math:`A` (nor in :math:`M`): metricopt minimises :math:`-f` or :math:`-g` over a
factor geometry (``A`` square, rectangular for dimensionality reduction, or diagonal) and reports a
stationary point, never an optimum; :func:`metricopt.certify` raises
:class:`~metricopt.errors.NotConvexError`.

The softmax is computed in blocks of rows (memory ``O(block * n)``, never ``n x n`` for large ``n``),
in NumPy for the exact value and in JAX (rematerialised per block, so that its gradient needs no
``n x n`` array either) for the solvers; the gradient comes from differentiating the value and is
checked against the paper's closed forms (Eq. 5 for ``f``, Eq. 7 for ``g``) in the tests.

:meth:`NCAProblem.value_and_gradient` is the same value with its gradient written out in NumPy
(:func:`numpy_value_and_gradient`; the solver of :mod:`metricopt.methods.nca.numpy_path`, no compilation): with the
logits :math:`l_{ik} = -\lVert z_i - z_k\rVert^2` of the mapped points :math:`z_i = A x_i` and the
weights :math:`W_{ik} = \partial F / \partial l_{ik}` of the objective :math:`F` (``f`` or ``g``),

.. math::

    W^{(f)}_{ik} = p_{ik}\,([k \in C_i] - p_i), \qquad
    W^{(g)}_{ik} = p_{ik}\,([k \in C_i] / p_i - 1), \qquad
    \frac{\partial F}{\partial A} = -2 \Big(\sum_{i,k} (W_{ik} + W_{ki})\,(z_i - z_k)\, x_i^\top\Big)
    = -2\, \big(\operatorname{diag}(W^\top 1) Z - W Z - W^\top Z\big)^\top X

(each row of ``W`` sums to zero: ``sum_k p_ik = 1``), Eq. 5 and Eq. 7 of the paper in matrix form.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._validation import check_choice, check_classes, check_int, check_y
from ...errors import InputError, NotConvexError
from ...protocols import DualPiece, Geometry, GeometryKind
from ...problems.base import Problem
from .softmax import jax_blocked_sum, jax_rows, numpy_blocks
from ...problems.terms import Term, register

#: the two objectives of the paper
OBJECTIVES = ("f", "g")
#: rows of the NumPy value-and-gradient computed at once: ``block * n`` at most this many entries (1 MiB of
#: float64, which stays in cache through the block's passes). Measured, ms per evaluation on one BLAS thread, blocks
#: of 2^14 / 2^16 / 2^17 / 2^18 / 2^20 entries: digits PCA-30 (1257 points) r=2: 6.3 / 5.1 / 5.0 / 7.3 / 7.4; r=30:
#: 13.8 / 9.8 / 9.4 / 9.1 / 9.2; 6000 random points, d=16, r=2: 169 / 103 / 95 / 95 / 141 (3000 points, r=16:
#: 66 / 64 / 57 / 54 / 42, the one case that favours large blocks)
GRADIENT_BLOCK_ENTRIES = 1 << 17

#: the NumPy value-and-gradient raises the logits (after the row maximum is subtracted) to this floor: an
#: exponential below ``exp(-708)`` is subnormal, and NumPy's ``exp`` producing subnormals runs about 13 times
#: slower (4e6 entries: 116 ms at -720 against 9 ms at -600); the change, at most ``n exp(-500)`` relative
#: to the row's sum, is far below rounding
LOGIT_FLOOR = -500.0


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


class GradientLayout:
    """What :func:`numpy_value_and_gradient` reuses at every evaluation: the centred points sorted by class
    (so that the same-class neighbours of a point are one slice of columns) and the row blocks.

    Attributes
    ----------
    X : (n, d) ndarray
        The centred data, rows sorted by class (a stable sort).
    blocks : list of (int, int, list of (int, int, int, int))
        ``(a, b, segments)``: the rows ``a:b`` of a block (at most ``block_entries / n`` of them, or one class's
        rows where a class has more: whole small classes share a block) and, per class in it, ``(i, j, s, e)``:
        its rows ``a + i : a + j`` and its columns ``s:e``.
    """

    def __init__(self, X: np.ndarray, codes: np.ndarray, block_entries: int | None = None) -> None:
        order = np.argsort(codes, kind="stable")
        self.X = np.ascontiguousarray(X[order] - X.mean(axis=0))
        sorted_codes = codes[order]
        n = len(sorted_codes)
        cuts = np.flatnonzero(np.diff(sorted_codes)) + 1
        step = max(1, (GRADIENT_BLOCK_ENTRIES if block_entries is None else block_entries) // max(n, 1))
        self.blocks: list[tuple[int, int, list[tuple[int, int, int, int]]]] = []
        pending: list[tuple[int, int]] = []  # whole classes waiting for a shared block

        def flush() -> None:
            if pending:
                a = pending[0][0]
                self.blocks.append((a, pending[-1][1], [(s - a, e - a, s, e) for s, e in pending]))
                pending.clear()

        for s, e in zip(np.r_[0, cuts].tolist(), np.r_[cuts, n].tolist()):
            if e - s > step:  # a large class: blocks of its own, of equal sizes
                flush()
                rows = -(-(e - s) // -(-(e - s) // step))
                self.blocks += [(a, min(e, a + rows), [(0, min(e, a + rows) - a, s, e)]) for a in range(s, e, rows)]
                continue
            if pending and e - pending[0][0] > step:
                flush()
            pending.append((s, e))
        flush()


def numpy_value_and_gradient(layout: GradientLayout, A: np.ndarray, objective: str,
                             gradient: bool = True) -> tuple[float, np.ndarray | None]:
    r"""``(F, dF/dA)`` for ``F`` = NCA's ``f`` (Eq. 3) or ``g`` (Eq. 6) at the ``(r, d)`` map ``A``, in float64
    NumPy, blocked (memory ``O(block * n)``); the matrix form of Eq. 5 / Eq. 7 in the module docstring
    (``gradient=False``: ``(F, None)``, the value alone, a little faster).

    Per row block: one product ``[2 z_i, -|z_i|^2, -1] [z_k, 1, |z_k|^2]^T`` gives the logits, the row maximum
    is subtracted before the exponential (no overflow, no all-zero row; logits floored at :data:`LOGIT_FLOOR`),
    ``E_ik = exp(l_ik - max_k l_ik)`` (0 for ``k = i``), and one product ``E [Z, 1]`` gives ``E Z`` and the row
    sums ``S_i``. The weights are never formed: ``W = diag(c) E + B`` with ``c_i = -p_i / S_i`` (``f``) or
    ``-1 / S_i`` (``g``) and ``B`` nonzero on the class's own columns only (``E / S_i``; ``g``: the class's own
    softmax), so that ``W Z`` and ``W^T [Z, 1]`` cost one product with ``E`` each plus small ones with ``B``.
    ``g``'s ``log p_i`` is taken from the same-class slice's own maximum (no ``log 0`` where every class mate
    is far). A point alone in its class has ``p_i = 0`` (``f``).

    Parameters
    ----------
    layout : GradientLayout
        The problem's centred, class-sorted points and row blocks (the points' order does not change ``F``).
    A : (r, d) ndarray
        The map (a diagonal problem's ``diag(a)``).
    objective : {"f", "g"}
        The objective ``F`` (maximised by NCA; the caller negates it).
    gradient : bool, default True
        Compute the gradient too.

    Returns
    -------
    value : float
        ``F(A)`` (not divided by ``n``, not negated).
    gradient : (r, d) ndarray or None
        :math:`\partial F / \partial A`; ``None`` with ``gradient=False``.
    """
    X = layout.X
    Z = X @ A.T
    n, r = Z.shape
    sq = np.einsum("nr,nr->n", Z, Z)
    ones = np.ones((n, 1))
    left = np.hstack([2.0 * Z, -sq[:, None], -ones])
    right_t = np.ascontiguousarray(np.hstack([Z, ones, sq[:, None]]).T)
    z1 = np.hstack([Z, ones])  # [z_k, 1]
    part = np.zeros((n, r + 1))  # sum_k W_ik z_k (rows) + sum_i W_ik [z_i, 1] (columns; last: column sums of W)
    total = 0.0
    buffer = np.empty((max((b - a for a, b, _ in layout.blocks), default=0), n))  # one block's logits, reused
    for a, b, segments in layout.blocks:
        L = np.matmul(left[a:b], right_t, out=buffer[: b - a])  # logits -||z_i - z_k||^2
        diagonal = L.ravel()[a :: n + 1][: b - a]  # L[i, a + i]: the point itself (a view)
        diagonal[:] = -np.inf
        top = L.max(axis=1)
        same = []
        if objective == "g":
            for i, j, s, e in segments:  # exp(l_ik - max_{k in C_i} l_ik) over the class, and its sum
                slice_top = L[i:j, s:e].max(axis=1)
                E = np.exp(np.fmax(L[i:j, s:e] - slice_top[:, None], LOGIT_FLOOR))
                if s <= a + i < e:  # the points themselves
                    E.ravel()[a + i - s :: e - s + 1][: j - i] = 0.0
                same.append((E, slice_top, E.sum(axis=1)))
        L -= top[:, None]
        np.fmax(L, LOGIT_FLOOR, out=L)
        np.exp(L, out=L)  # E_ik = exp(l_ik - max_k l_ik)
        diagonal[:] = 0.0
        if not gradient:
            S = L.sum(axis=1)
            for k, (i, j, s, e) in enumerate(segments):
                if objective == "f":
                    total += float(np.sum(L[i:j, s:e].sum(axis=1) / S[i:j]))
                else:
                    E, slice_top, S_same = same[k]
                    total += float(np.sum(slice_top + np.log(S_same) - top[i:j] - np.log(S[i:j])))
            continue
        EZ = L @ z1  # [E Z, E 1]: the row sums S_i in the last column
        S = EZ[:, r]
        # W = E c_i (as a row scaling) + E / S_i (f) or E_same / S_same (g) on the class's columns
        if objective == "f":
            pc = np.empty(b - a)
            for i, j, s, e in segments:
                pc[i:j] = L[i:j, s:e].sum(axis=1) / S[i:j]
            total += float(pc.sum())
            c = -pc / S  # W = p_ik ([k in C_i] - p_i)
            blocks = [L[i:j, s:e] / S[i:j, None] for i, j, s, e in segments]
        else:
            c = -1.0 / S  # W = p_ik ([k in C_i] / p_i - 1)
            blocks = []
            for (i, j, s, e), (E, slice_top, S_same) in zip(segments, same):
                total += float(np.sum(slice_top + np.log(S_same) - top[i:j] - np.log(S[i:j])))
                blocks.append(E / S_same[:, None])
        part[a:b, :r] += c[:, None] * EZ[:, :r]
        part += L.T @ (c[:, None] * z1[a:b])
        for (i, j, s, e), Wc in zip(segments, blocks):
            part[a + i : a + j, :r] += Wc @ Z[s:e]
            part[s:e] += Wc.T @ z1[a + i : a + j]
    if not gradient:
        return total, None
    GZ = -2.0 * (part[:, r:] * Z - part[:, :r])
    return total, GZ.T @ X


def _layout(problem: Any) -> GradientLayout:
    """The problem's :class:`GradientLayout`, made at the first call and kept on it."""
    layout = problem.__dict__.get("_gradient_layout")
    if layout is None:
        layout = problem.__dict__["_gradient_layout"] = GradientLayout(problem.X, problem.codes)
    return layout


@register
class NeighbourhoodComponents(Term):
    r"""NCA's loss: ``-f(A)`` (``objective="f"``, the expected number of correctly classified points,
    Goldberger et al. 2004 Eq. 3) or ``-g(A)`` (``"g"``, Eq. 6), at ``M = A^T A``; divided by ``n`` when
    ``normalize`` (the mean, so that tolerances do not depend on the data size). Not convex: it has
    no CVXPY form and no dual piece."""

    convex = False

    def __init__(self, objective: str = "f", normalize: bool = False) -> None:
        self.objective = check_choice(objective, "objective", OBJECTIVES)
        self.normalize = bool(normalize)

    def _scale(self, n):
        return 1.0 / n if self.normalize else 1.0

    def value(self, problem: Any, V: Mapping[str, Any]) -> float:
        """The exact float64 loss ``-f`` or ``-g`` (over all pairs, divided by ``n`` when ``normalize``).

        Parameters
        ----------
        problem : NCAProblem
        V : dict
            The point: ``V["L"]`` the map ``A`` where given, else a factor of ``V["M"]`` (``L^T L = M``; ``f`` and
            ``g`` depend on ``A`` through ``M`` only).

        Returns
        -------
        float
            The loss.
        """
        total, _ = numpy_value_and_gradient(_layout(problem), _factor_of(V), self.objective, gradient=False)
        return -self._scale(problem.n) * total

    def cvxpy(self, problem: Any, V: Mapping[str, Any], ws: Any = None) -> tuple[Any, list]:
        """No CVXPY form: NCA's objective is not convex.

        Parameters
        ----------
        problem : NCAProblem
        V : dict
            The CVXPY variables (unused).
        ws : None
            Unused.

        Returns
        -------
        tuple
            Never: it always raises.

        Raises
        ------
        metricopt.errors.NotConvexError
            Always.
        """
        raise NotConvexError("NCA's softmax objective is not convex: it has no exact conic program. Use "
                             "backend='jax' (it is reported stationary, never optimal).")

    def dual_piece(self, problem: Any) -> DualPiece | None:
        """``None``: a non-convex term has no place in a duality-gap certificate.

        Parameters
        ----------
        problem : NCAProblem

        Returns
        -------
        None
        """
        return None

    def jax_data(self, problem: Any) -> dict:
        return {"X": problem.X - problem.X.mean(axis=0), "codes": problem.codes.astype(np.int32),
                **jax_rows(problem.n), "sign": np.float64(-self._scale(problem.n)),
                "log": np.float64(self.objective == "g")}

    @staticmethod
    def jax_value(data: Any, V: Any, active: Any = None, smoothing: Any = 0.0) -> Any:
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

    def describe(self) -> str:
        return f"NeighbourhoodComponents(objective={self.objective!r})"

    def config(self) -> dict | None:
        return {"term": "NeighbourhoodComponents", "objective": self.objective, "normalize": self.normalize}


def _factor_of(V):
    """``L`` of a point (the factor when the point carries it, else one with ``L^T L = M``)."""
    if "L" in V and V["L"] is not None:
        return np.asarray(V["L"], dtype=np.float64)
    from ...linalg import factor

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
        ``"f"``: expected number of correct classifications (Eq. 3; scikit-learn maximises this one);
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
                 diagonal: bool = False, normalize: bool = False) -> None:
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
        """The objective (``-f`` or ``-g``, divided by ``n`` when ``normalize``) at the map ``L``.

        Parameters
        ----------
        L : (r, d) array_like, or (d,) for a diagonal problem
            The map ``A`` (a length-``d`` vector: the diagonal of ``A = diag(a)``).

        Returns
        -------
        float
            The value minimised (the negated NCA objective).
        """
        L = np.asarray(L, dtype=np.float64)
        L = np.diag(L) if L.ndim == 1 else L
        return float(self.terms[0].value(self, {"L": L}))

    def value_and_gradient(self, L: ArrayLike) -> tuple[float, np.ndarray]:
        r"""The objective (``-f`` or ``-g``, divided by ``n`` when ``normalize``) at the map ``L`` and its gradient,
        in NumPy (:func:`numpy_value_and_gradient`: no JAX, no compilation).

        Parameters
        ----------
        L : (r, d) array_like, or (d,) / (1, d) for a diagonal problem
            The map ``A`` (a diagonal problem: the diagonal ``a`` of ``A = diag(a)``).

        Returns
        -------
        value : float
        gradient : ndarray of L's shape
            :math:`\partial(-F)/\partial A`; for a diagonal ``A = diag(a)``,
            :math:`\partial(-F)/\partial a_j = (\partial(-F)/\partial A)_{jj}`.
        """
        L = np.asarray(L, dtype=np.float64)
        layout = _layout(self)
        term = self.terms[0]
        scale = -term._scale(self.n)
        if self.diagonal:
            a = L.ravel()
            total, G = numpy_value_and_gradient(layout, np.diag(a), self.objective_name)
            assert G is not None
            return scale * total, (scale * np.diag(G)).reshape(L.shape)
        total, G = numpy_value_and_gradient(layout, L, self.objective_name)
        assert G is not None
        return scale * total, scale * G

    def probabilities(self, L: ArrayLike) -> np.ndarray:
        """``p_i = sum_{j in C_i} p_ij``, the probability that point ``i`` is classified correctly (Eq. 2, with
        ``p_ij`` of Eq. 1).

        Parameters
        ----------
        L : (r, d) array_like, or (d,) for a diagonal problem
            The map ``A`` (a length-``d`` vector: the diagonal of ``A = diag(a)``).

        Returns
        -------
        ndarray of shape (n,)
            ``p_i`` per training point, in [0, 1] (0 for a point alone in its class).
        """
        L = np.asarray(L, dtype=np.float64)
        L = np.diag(L) if L.ndim == 1 else L
        return _numpy_blocks(self.X @ L.T, self.codes, "f")[1]

    def effective_neighbours(self, L: ArrayLike) -> float:
        """Mean perplexity ``exp(H(p_i.))`` of the stochastic neighbour distributions: how many neighbours
        each point effectively votes with under ``L`` (1: nearest neighbour; ``n - 1``: all points alike).

        Goldberger et al. (2004) note that learning the scale of ``A`` amounts to learning this number of
        neighbours (the perplexity of the ``p_ij``).

        Parameters
        ----------
        L : (r, d) array_like, or (d,) for a diagonal problem
            The map ``A`` (a length-``d`` vector: the diagonal of ``A = diag(a)``).

        Returns
        -------
        float
            The mean over points of ``exp(-sum_k p_ik log p_ik)``, between 1 and ``n - 1``.
        """
        L = np.asarray(L, dtype=np.float64)
        L = np.diag(L) if L.ndim == 1 else L
        out = np.empty(self.n)
        for idx, logits in numpy_blocks(self.X @ L.T):
            logits -= logits.max(axis=1, keepdims=True)
            np.fmax(logits, LOGIT_FLOOR, out=logits)  # p log p of the floored entries (and of p_ii): below 1e-210
            E = np.exp(logits)
            S = E.sum(axis=1)
            # H_i = -sum_k p_ik log p_ik with p_ik = E_ik / S_i and log p_ik = logit_ik - log S_i
            out[idx] = np.exp(np.log(S) - np.einsum("ik,ik->i", E, logits) / S)
        return float(np.mean(out))

    def describe(self) -> dict[str, Any]:
        """The problem's parameters for reports and model files.

        Returns
        -------
        dict
            ``objective`` (``"f"`` or ``"g"``), ``n_components`` and ``diagonal``.
        """
        return {"objective": self.objective_name, "n_components": self.n_components, "diagonal": self.diagonal}
