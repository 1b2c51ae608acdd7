"""POLA (Shalev-Shwartz, Singer & Ng, ICML 2004), batch form, as a declarative problem."""

from __future__ import annotations

from typing import Any
from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike

from ..._validation import _py, as_real_array, check_pairs, check_real, check_y
from ...constraints import labels_to_pairs
from ...errors import InputError
from ...protocols import Geometry, GeometryKind
from ...problems.base import Constraint, Problem
from ...problems.terms import Frobenius, HalfSquare, PairHinge

from typing import TYPE_CHECKING

from ..._lazy import lazy_module

if TYPE_CHECKING:
    import cvxpy as cp
else:
    cp = lazy_module("cvxpy")  # imported on first use: building a term's CVXPY expression


class PairMargins(Constraint):
    """Hard margins ``y_t (b - d_M(x_t, x'_t)) >= 1`` for every labelled pair."""

    def __init__(self, pairs, labels):
        self.pairs = pairs
        self.labels = labels

    def margins(self, problem: Any, V: Mapping[str, Any]) -> np.ndarray:
        """The margins ``y_t (b - d_M(x_t, x'_t))`` of every pair at ``V``.

        Parameters
        ----------
        problem : Problem
            The problem the constraint belongs to.
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        (m,) ndarray
            One margin per pair.
        """
        d = problem.pair_distances(self.pairs[:, 0], self.pairs[:, 1], V["M"])
        return self.labels * (float(V["b"]) - d)

    def cvxpy(self, problem: Any, V: Mapping[str, Any]) -> list:
        A = problem.pair_rows(self.pairs[:, 0], self.pairs[:, 1])
        return [cp.multiply(self.labels, V["b"] - A @ V["Mvec"]) >= 1]

    def violation(self, problem: Any, V: Mapping[str, Any]) -> float:
        return max(0.0, float(np.max(1.0 - self.margins(problem, V))))


class LowerBound(Constraint):
    """``V[var] >= bound`` for a scalar variable."""

    def __init__(self, var, bound):
        self.var = var
        self.bound = float(bound)

    def cvxpy(self, problem: Any, V: Mapping[str, Any]) -> list:
        return [V[self.var] >= self.bound]

    def violation(self, problem: Any, V: Mapping[str, Any]) -> float:
        return max(0.0, self.bound - float(V[self.var]))


class POLAProblem(Problem):
    r"""POLA, batch form: Shalev-Shwartz, Singer & Ng, *Online and batch learning of
    pseudo-metrics*, ICML 2004.

    Hard margin (``C=None``):

    .. math::

        \min_{M \succeq 0,\ b \ge 1}\ \tfrac12 (\|M\|_F^2 + b^2)
        \quad\text{s.t.}\quad y_t\,(b - d_M(x_t, x'_t)) \ge 1 \ \ \forall t,

    with :math:`y_t = +1` for similar and :math:`-1` for dissimilar pairs. Soft
    margin (``C`` given) adds :math:`C \sum_t \xi_t` with
    :math:`y_t (b - d_M) \ge 1 - \xi_t,\ \xi \ge 0`. The hard-margin program can be
    infeasible; the solution's status then says so and suggests ``C``.

    Parameters
    ----------
    X : (n, d) array_like
    y : (n,) labels, optional
        Pairs: all pairs of points, labelled +1 when the labels agree, -1 otherwise.
    pairs : (m, 2) int array, optional
    pair_labels : (m,) array of +1 / -1, optional
    C : float > 0, optional
    """

    method = "POLA"
    reference = "Shalev-Shwartz, Singer & Ng, ICML 2004"
    extra_variables = ("b",)
    default_solver = "CLARABEL"

    def __init__(self, X: ArrayLike, y: ArrayLike | None = None, pairs: ArrayLike | None = None,
                 pair_labels: ArrayLike | None = None, C: float | None = None) -> None:
        super().__init__(X)
        if pairs is None:
            if y is None:
                raise InputError("POLA needs labelled pairs: pass labels y, or pairs=... with pair_labels=... (+1/-1).")
            self.y = check_y(y, self.n)
            if np.unique(self.y).size < 2:
                raise InputError(
                    f"POLA needs at least two classes to form dissimilar pairs; y has a single class ({_py(self.y[0])!r}). "
                    "With only one class there are no dissimilar pairs."
                )
            s, dd = labels_to_pairs(self.y)
            pairs = np.concatenate([s, dd])
            pair_labels = np.concatenate([np.ones(len(s)), -np.ones(len(dd))])
        else:
            self.y = None if y is None else check_y(y, self.n)
            if pair_labels is None:
                raise InputError("pairs were given without pair_labels; pass pair_labels with +1 (similar) or -1 (dissimilar).")
        self.pairs = check_pairs(pairs, self.n, "pairs")
        if np.iscomplexobj(pair_labels):
            as_real_array(pair_labels, "pair_labels", "+1 (similar) or -1 (dissimilar) for each pair")  # raises
        try:
            lab = np.asarray(pair_labels, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise InputError(f"pair_labels must be +1 (similar) or -1 (dissimilar). Got non-numeric labels "
                             f"({np.asarray(pair_labels, dtype=object).ravel()[:3].tolist()}...); map them to +1/-1.") from None
        if lab.shape[0] != self.pairs.shape[0]:
            raise InputError(f"pair_labels has {lab.shape[0]} entries but there are {self.pairs.shape[0]} pairs.")
        if not np.all(np.isin(lab, (-1.0, 1.0))):
            t = int(np.flatnonzero(~np.isin(lab, (-1.0, 1.0)))[0])
            raise InputError(f"pair_labels must be +1 (similar) or -1 (dissimilar). Got {lab[t]:g} for pair {t}; "
                             "map the labels to +1/-1.")
        if self.pairs.shape[0] == 0:
            raise InputError("POLA needs at least one labelled pair.")
        self.pair_labels = lab
        self.C = None if C is None else check_real(C, "C", low=0.0, low_open=True)
        self.terms = [Frobenius(1.0), HalfSquare("b")]
        self.constraints = [LowerBound("b", 1.0)]
        if self.C is None:
            self.constraints.append(PairMargins(self.pairs, self.pair_labels))
        else:
            self.terms.append(PairHinge(self.pairs, self.pair_labels, self.C))

    def _geometry(self):
        return Geometry(GeometryKind.THRESHOLD, threshold="b")

    def jax_terms(self, online: bool = False) -> list:
        """Hard-margin POLA (``C=None``) is solved on the JAX backend by the online algorithm only,
        which visits the pairs carried by a :class:`PairHinge` term that no batch solver minimises.

        Parameters
        ----------
        online : bool, default False
            For the online solver (hard margins: a unit-weight :class:`PairHinge` is added for it to visit).

        Returns
        -------
        list of Term
            The terms.

        Raises
        ------
        InputError
            For hard-margin POLA (``C=None``) without ``online``.
        """
        if self.C is not None:
            return list(self.terms)
        if not online:
            raise InputError(
                "backend='jax' solves hard-margin POLA (C=None) only with solver='online' (the paper's online "
                "algorithm): a first-order batch method cannot project onto every pair's margin at once. Pass a "
                "soft margin C, or use backend='cvxpy'."
            )
        return list(self.terms) + [PairHinge(self.pairs, self.pair_labels, 1.0)]

    #: the JAX backend's online solver (Shalev-Shwartz et al.'s algorithm) applies to this problem
    online_solvable = True

    def repair(self, V: Mapping[str, Any]) -> dict:
        """Scale ``(M, b)`` up until every hard margin holds (margins scale linearly).

        Parameters
        ----------
        V : dict
            The point: ``V["M"]`` the (d, d) metric (a numpy array), ``V["b"]`` the threshold where the problem
            has one.

        Returns
        -------
        dict
            The repaired point (``b >= 1``).
        """
        if self.C is None:
            d = self.pair_distances(self.pairs[:, 0], self.pairs[:, 1], V["M"])
            worst = float(np.min(self.pair_labels * (float(V["b"]) - d)))
            if 0.0 < worst < 1.0:
                V = {**V, "M": V["M"] / worst, "b": float(V["b"]) / worst}
        return {**V, "b": max(float(V["b"]), 1.0)}

    def best_extra(self, M: np.ndarray, name: str) -> float:
        """The best threshold ``b >= 1`` for a fixed ``M`` (exact).

        Hard margin: the smallest ``b`` meeting every similar pair's margin. Soft margin:
        ``f(b) = b^2/2 + C sum_t [1 - y_t (b - d_t)]_+`` is convex and piecewise quadratic
        with kinks at ``1 + d_t`` (similar) and ``d_t - 1`` (dissimilar); its minimiser is
        found from the right derivative ``b - C #{sim: 1 + d > b} + C #{dis: d - 1 <= b}``.

        Parameters
        ----------
        M : (d, d) ndarray
            The metric.
        name : str
            The variable (``"b"``).

        Returns
        -------
        float
            The best ``b``.
        """
        d = self.pair_distances(self.pairs[:, 0], self.pairs[:, 1], M)
        sim = np.sort(1.0 + d[self.pair_labels > 0])
        dis = np.sort(d[self.pair_labels < 0] - 1.0)
        if self.C is None:
            return max(1.0, float(sim[-1])) if sim.size else 1.0
        C = self.C

        def slope(b):
            n_sim = sim.size - np.searchsorted(sim, b, side="right")
            n_dis = np.searchsorted(dis, b, side="right")
            return b - C * n_sim + C * n_dis, n_sim, n_dis

        if slope(1.0)[0] >= 0:
            return 1.0
        kinks = np.unique(np.concatenate([sim, dis]))
        kinks = kinks[kinks > 1.0]
        g = slope(kinks)[0]
        k = int(np.argmax(g >= 0))  # exists: past every kink the slope is b + C * n_dis > 0
        prev = kinks[k - 1] if k > 0 else 1.0
        _, n_sim, n_dis = slope(prev)
        b_star = C * (n_sim - n_dis)  # stationary point of the quadratic piece on (prev, kinks[k])
        return float(b_star) if b_star < kinks[k] else float(kinks[k])
