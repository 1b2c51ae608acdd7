"""MMC (Xing et al., NIPS 2002) as a declarative problem, and where it is bounded (:func:`budget_range`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._validation import _py, check_pairs, check_y
from ...constraints import labels_to_pairs
from ...errors import InputError
from ...linalg import exact_structure, expansion, pair_scatter
from ...protocols import Geometry, GeometryKind
from ...problems.base import Constraint, Problem
from ...problems.terms import SqrtDistances

from typing import TYPE_CHECKING

from ..._lazy import lazy_module

if TYPE_CHECKING:
    import cvxpy as cp
else:
    cp = lazy_module("cvxpy")  # imported on first use: building a term's CVXPY expression

#: a direction is in the data's range when the pair differences spread along it by more than this fraction of
#: their largest spread (every feature first scaled to unit spread by a power of two), and the similar pairs are
#: counted as spanning it when they spread along it by more than this fraction of the same largest spread
#: (see :func:`budget_range`)
RANGE_RTOL = 1e-12

#: full MMC is solved in whitened coordinates (``M = T Z T^T``, ``T^T S T = I`` on the data's range) when the
#: similar scatter restricted to that range is singular (a constant or duplicated column, more features than
#: the data spans) or has a condition number above this (correlated or badly scaled features)
WHITEN_ABOVE = 1e3

_CHUNK = 200_000


def _tsqr(parts, f):
    """``R`` (``f x f``, ``R^T R = A^T A``) of the row blocks ``parts`` of ``A``, by a QR of each block and of the
    stacked factors (a tall-skinny QR: backward stable, and no ``A^T A`` that squares the condition number)."""
    R = np.zeros((0, f))
    for block in parts:
        if block.shape[0]:
            R = np.linalg.qr(np.vstack([R, block]), mode="r")
    return R if R.shape[0] else np.zeros((1, f))


def _differences(X, pairs, weights=None):
    """Row blocks ``sqrt(w_t) (x_a - x_b)`` (at most :data:`_CHUNK` rows each)."""
    for s in range(0, len(pairs), _CHUNK):
        p = pairs[s:s + _CHUNK]
        D = X[p[:, 0]] - X[p[:, 1]]
        yield D if weights is None else D * np.sqrt(weights[s:s + _CHUNK])[:, None]


def _class_factor(X, y):
    """Rows ``sqrt(n_c) (x_i - mean_c)``: the factor of ``sum_{a<b, y_a=y_b} (x_a - x_b)(x_a - x_b)^T``."""
    out = np.empty_like(X)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        out[idx] = np.sqrt(idx.size) * (X[idx] - X[idx].mean(axis=0))
    return out


@dataclass(frozen=True)
class BudgetRange:
    r"""Where MMC lives: the data's range, the similar scatter on it, and whether the problem is bounded.

    Attributes
    ----------
    bounded : bool
    reason : str
        Why not, when unbounded.
    rank : int
        Dimension of the data's range (the span of every pair difference, numerically: :data:`RANGE_RTOL`).
    rank_similar : int
        Directions of that range the similar pairs span (numerically).
    condition : float
        Condition number of the similar scatter restricted to the range (``inf`` when unbounded).
    rep : (d,) int array
        :func:`exact_structure` of the data (constant features ``-1``, a repeated feature its first copy).
    similar_matrix : (d, d) array
        ``S``, built so that the exact structure holds exactly in floating point: ``S = B S_F B^T`` with ``S_F``
        the scatter of the first copies (zero rows and columns for constant features, equal ones for copies).
    whitener : (d, r) array or None
        Full MMC: ``T`` with ``T^T S T = I_r`` (to rounding) whose columns span the data's range, so that
        ``M = T Z T^T`` maps ``{Z PSD, trace Z <= 1}`` onto the feasible metrics restricted to the range.
    left_inverse : (r, d) array or None
        ``T^+`` with ``T^+ T = I_r``: ``Z = T^+ M T^{+T}`` for ``M = T Z T^T``.
    """

    bounded: bool
    reason: str
    rank: int
    rank_similar: int
    condition: float
    rep: np.ndarray
    similar_matrix: np.ndarray
    whitener: np.ndarray | None = None
    left_inverse: np.ndarray | None = None


def budget_range(X: ArrayLike, similar: np.ndarray, dissimilar: np.ndarray, diagonal: bool = False,
                 y: np.ndarray | None = None) -> BudgetRange:
    r"""Decide whether MMC is bounded on this data, from the similar scatter on the data's range.

    :math:`\max \sum_{\mathcal D}\sqrt{d_M}` s.t. :math:`\langle S, M\rangle \le 1`, :math:`M \succeq 0` is
    unbounded exactly when some direction :math:`v` with :math:`v^\top S v = 0` carries a dissimilar difference
    (:math:`M = t\, v v^\top` then costs no budget while the objective grows like :math:`\sqrt t`); directions no
    pair difference touches do not matter (a constant or duplicated column makes :math:`S` singular, yet the
    problem is bounded). Equivalently, with :math:`R` the span of all (similar and dissimilar) differences, MMC is
    bounded iff :math:`S` restricted to :math:`R` is positive definite: a null vector of :math:`S|_R` is orthogonal
    to every similar difference, and being in :math:`R` it is not orthogonal to every dissimilar one.

    Numerically (full ``M``): constant and exactly repeated features are removed exactly
    (:func:`exact_structure`); every remaining feature is scaled by a power of two to unit spread; ``R`` is spanned
    by the right singular vectors of the differences' QR factor whose singular values exceed
    :data:`RANGE_RTOL` times the largest, and the problem is bounded when the similar differences' factor,
    restricted to ``R``, has every singular value above :data:`RANGE_RTOL` times that same largest spread.
    Factors (a tall-skinny QR of the differences, or class-centred rows for labels) are used, never the scatter
    matrices, so the test resolves spreads down to about 1e-16 of the largest rather than 1e-8. The tolerance is
    scale-aware (invariant under rescaling every feature by a power of two, and the data as a whole); it decides
    only which directions the solvers work in. Certificates never use it (:mod:`metricopt.certify.pairs` bounds
    the problem as written, treating as null only the exactly null directions of :func:`exact_structure`), so a
    direction it drops can only leave a solution uncertified, never certify a wrong one.

    Diagonal ``M``: feature ``j`` with dissimilar spread must have similar spread above :data:`RANGE_RTOL` times
    its own total spread (features are not mixed, so no feature is compared with another).

    Parameters
    ----------
    X : (n, d) array
    similar, dissimilar : (m, 2) int arrays
    diagonal : bool
    y : (n,) labels, optional
        When given, the pairs are all same-label (similar) and all differently labelled (dissimilar) pairs, whose
        scatters have the smaller factors of class-centred and centred rows.

    Returns
    -------
    BudgetRange

    References
    ----------
    Xing, Ng, Jordan & Russell, *Distance metric learning, with application to clustering with side-information*,
    NIPS 2002; Golub & Van Loan, *Matrix Computations*, 4th ed., Sec. 5.4 (numerical rank).
    """
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    rows = np.unique(np.concatenate([similar.ravel(), dissimilar.ravel()]))
    rep = exact_structure(X, rows)
    free, B = expansion(rep)
    pos = np.full(d, -1)
    pos[free] = np.arange(free.size)
    Xf = X[:, free]
    S_F = pair_scatter(Xf, similar[:, 0], similar[:, 1])
    S = np.zeros((d, d))
    live = np.flatnonzero(rep >= 0)
    S[np.ix_(live, live)] = S_F[np.ix_(pos[rep[live]], pos[rep[live]])]  # exact copies: S = B S_F B^T
    if diagonal:
        S = np.diag(np.diag(S))
        return _diagonal_range(X, S, dissimilar, rep, free)
    if free.size == 0:
        return BudgetRange(True, "", 0, 0, 1.0, rep, S, np.zeros((d, 0)), np.zeros((0, d)))
    sd = np.std(X[np.ix_(rows, free)], axis=0)
    c = np.exp2(-np.round(np.log2(sd)))  # powers of two: exact scaling
    Xe = Xf * c
    if y is not None:
        R_S = _tsqr([_class_factor(Xe, y)], free.size)
        R_all = _tsqr([np.sqrt(len(y)) * (Xe - Xe.mean(axis=0))], free.size)
    else:
        R_S = _tsqr(_differences(Xe, similar), free.size)
        R_all = _tsqr([*_differences(Xe, similar), *_differences(Xe, dissimilar)], free.size)
    _, sig, Vt = np.linalg.svd(R_all)
    top = float(sig[0]) if sig.size else 0.0
    if top == 0.0:
        return BudgetRange(True, "", 0, 0, 1.0, rep, S, np.zeros((d, 0)), np.zeros((0, d)))
    r = int(np.sum(sig > RANGE_RTOL * top))
    Q = Vt[:r].T  # (f, r) orthonormal basis of the range, in the scaled coordinates
    _, sk, Vk = np.linalg.svd(R_S @ Q)
    sk = np.concatenate([sk, np.zeros(r - sk.size)])
    rank_s = int(np.sum(sk > RANGE_RTOL * top))
    if rank_s < r:
        return BudgetRange(False, _unbounded_message(d, free.size, r, rank_s, len(similar)), r, rank_s, np.inf,
                           rep, S)
    # whitener: K = R_S Q = U diag(sk) Vk, S|_R = Vk^T diag(sk^2) Vk, (S|_R)^{-1/2} = Vk^T diag(1/sk) Vk;
    # M = L^T diag(c) Q (S|_R)^{-1/2} Z (...)^T with L = (B^T B)^{-1} B^T (copies of a feature share its weight)
    L = B.T / np.maximum(B.sum(axis=0), 1.0)[:, None]
    W = (Vk.T / sk) @ Vk
    T = L.T @ (c[:, None] * (Q @ W))
    Tinv = ((Vk.T * sk) @ Vk) @ (Q.T / c) @ B.T
    return BudgetRange(True, "", r, rank_s, float((sk[0] / sk[-1]) ** 2), rep, S, T, Tinv)


def _diagonal_range(X, S, dissimilar, rep, free):
    d = X.shape[1]
    s = np.diag(S).copy()
    g = np.zeros(d)
    for D in _differences(X, dissimilar):
        g += np.einsum("md,md->d", D, D)
    spread = s + g
    bad = (g > 0) & (s <= RANGE_RTOL**2 * spread)
    if np.any(bad):
        j = np.flatnonzero(bad)
        return BudgetRange(False, (
            f"MMC is unbounded on this data: the similar-pair scatter S is singular on the data's range (diagonal "
            f"M: feature(s) {j.tolist()} differ within dissimilar pairs but within no similar pair, so sum sqrt(d_M) "
            "over dissimilar pairs grows without bound with their weight). Drop those features or add similar pairs."),
            int(np.sum(g > 0)), int(np.sum(s > 0)), np.inf, rep, S)
    live = s > 0
    cond = float(s[live].max() / s[live].min()) if live.any() else 1.0
    return BudgetRange(True, "", int(np.sum(live)), int(np.sum(live)), cond, rep, S)


def _unbounded_message(d, f, r, rank_s, n_similar):
    return (
        f"MMC is unbounded on this data: the similar-pair scatter S is singular on the data's range (the pair "
        f"differences span {r} of d = {d} directions, the {n_similar} similar pairs {rank_s} of them) and dissimilar "
        "pairs differ along directions no similar pair spans, so sum sqrt(d_M) over dissimilar pairs grows without "
        f"bound (e.g. more features than samples). Reduce the dimension (e.g. PCA to at most {max(rank_s, 1)} "
        "components) or add similar pairs."
    )


class PairBudget(Constraint):
    """``sum_{(a,b) in S} d_M(x_a, x_b) = <S, M> <= bound``."""

    def __init__(self, S, bound=1.0):
        self.S = S
        self.bound = float(bound)

    def cvxpy(self, problem: Any, V: Mapping[str, Any]) -> list:
        T = V.get("_T")
        if T is not None:  # the exact backend's M = T Z T^T: <S, T Z T^T> = <T^T S T, Z>, formed in float64 first
            return [cp.sum(cp.multiply(T.T @ self.S @ T, V["_M"])) <= self.bound]
        return [cp.sum(cp.multiply(self.S, V["M"])) <= self.bound]

    def violation(self, problem: Any, V: Mapping[str, Any]) -> float:
        return max(0.0, float(np.sum(self.S * V["M"])) - self.bound)


class MMCProblem(Problem):
    r"""MMC: Xing, Ng, Jordan & Russell, *Distance metric learning, with application
    to clustering with side-information*, NIPS 2002.

    .. math::

        \max_{M \succeq 0}\ \sum_{(a,b) \in \mathcal D} \sqrt{d_M(x_a, x_b)}
        \quad\text{s.t.}\quad \sum_{(a,b) \in \mathcal S} d_M(x_a, x_b) \le 1,

    written (as every metricopt problem) as a minimisation of
    :math:`-\sum_{\mathcal D} \sqrt{d_M}`; ``objective`` returns that negated value.
    With ``diagonal=True``, ``M`` is restricted to non-negative diagonal matrices.

    The problem is refused as unbounded exactly when the similar scatter is singular on the data's range
    (:func:`budget_range`); a constant or duplicated feature is not such a case. Full MMC whose similar scatter
    is singular (but bounded) or ill-conditioned on that range is solved, on both backends, in whitened
    coordinates ``M = T Z T^T`` (:attr:`BudgetRange.whitener`).

    Parameters
    ----------
    X : (n, d) array_like
    y : (n,) labels, optional
        Similar pairs = all same-label pairs, dissimilar = all differently labelled pairs.
    similar, dissimilar : (m, 2) int arrays, optional
        Explicit pairs (override those derived from ``y``).
    diagonal : bool, default False
    """

    method = "MMC"
    reference = "Xing, Ng, Jordan & Russell, NIPS 2002"
    default_solver = "CLARABEL"

    def __init__(self, X: ArrayLike, y: ArrayLike | None = None, similar: ArrayLike | None = None,
                 dissimilar: ArrayLike | None = None, diagonal: bool = False) -> None:
        super().__init__(X)
        self.diagonal = bool(diagonal)
        derived = False
        if y is not None:
            self.y = check_y(y, self.n)
            if np.unique(self.y).size < 2:
                raise InputError(
                    f"MMC needs at least two classes to form dissimilar pairs; y has a single class "
                    f"({_py(self.y[0])!r}). "
                    "With only one class there are no dissimilar pairs."
                )
            s, dd = labels_to_pairs(self.y)
            derived = similar is None and dissimilar is None
            similar = s if similar is None else similar
            dissimilar = dd if dissimilar is None else dissimilar
        else:
            self.y = None
        if similar is None or dissimilar is None:
            raise InputError("MMC needs pairs: pass labels y, or both similar=... and dissimilar=... index pairs.")
        self.similar = check_pairs(similar, self.n, "similar")
        self.dissimilar = check_pairs(dissimilar, self.n, "dissimilar")
        if len(self.similar) == 0 or len(self.dissimilar) == 0:
            raise InputError(
                f"MMC needs at least one similar and one dissimilar pair; got {len(self.similar)} similar and "
                f"{len(self.dissimilar)} dissimilar."
            )
        self.budget_range = budget_range(self.X, self.similar, self.dissimilar, self.diagonal,
                                         y=self.y if derived else None)
        if not self.budget_range.bounded:
            raise InputError(self.budget_range.reason)
        S = self.budget_range.similar_matrix
        self.similar_matrix = S
        self.terms = [SqrtDistances(self.dissimilar, weight=-1.0)]
        # keep the solver's numbers O(1): square roots of cone_scale * d_M (the similar-pair budget makes
        # d_M ~ 1/#similar), and, for the full matrix, M scaled likewise and the objective a mean
        # (measured on iris and wine: Clarabel then certifies both variants to < 1e-6)
        self.cone_scale = float(len(self.similar))
        if not self.diagonal:
            self.var_scale = float(len(self.similar))
            self.obj_scale = len(self.dissimilar) / np.sqrt(self.var_scale)
        self.constraints = [PairBudget(S, 1.0)]

    def budget_whitening(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(T, T^+)`` of :attr:`BudgetRange.whitener` when full MMC is solved in whitened coordinates
        (the similar scatter singular or with a condition number above :data:`WHITEN_ABOVE` on the data's
        range), else ``None`` (diagonal MMC, or a well-conditioned ``S``: solved as written).

        Returns
        -------
        tuple or None
            ``(T, T^+)``, or ``None`` when solved as written.
        """
        br = self.budget_range
        if self.diagonal or br.whitener is None or br.left_inverse is None or br.rank == 0:
            return None
        if br.rank == self.d and br.condition <= WHITEN_ABOVE:
            return None
        return br.whitener, br.left_inverse

    def variable_basis(self) -> np.ndarray | None:
        """The whitener ``T`` of :meth:`budget_whitening` (the exact backend then solves for ``Z`` with
        ``M = T Z T^T``, whose budget is about ``trace Z``), or ``None``.

        Returns
        -------
        (d, r) ndarray or None
            The whitener ``T``, or ``None``.
        """
        pair = self.budget_whitening()
        return None if pair is None else pair[0]

    def _geometry(self):
        return Geometry(GeometryKind.BUDGET, diagonal=self.diagonal, budget=self.similar_matrix)

    def repair(self, V: Mapping[str, Any]) -> dict:
        """Rescale ``M`` onto the budget ``<S, M> <= 1`` (MMC is homogeneous in ``M``).

        Parameters
        ----------
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        dict
            The point, ``M`` divided by ``<S, M>`` when that exceeds 1.
        """
        budget = float(np.sum(self.similar_matrix * V["M"]))
        if budget > 1.0:
            V = {**V, "M": V["M"] / budget}
        return V  # type: ignore[return-value]
