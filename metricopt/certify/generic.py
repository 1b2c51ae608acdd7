r"""A rigorous lower bound for any convex term, from the CVXPY expression the term already writes.

The certificates of :mod:`.lmnn` fold every term into :math:`\langle P, M\rangle + \tfrac{\lambda}{2}\|M\|_F^2`
through a hand-derived :class:`~metricopt.protocols.DualPiece`. A term that declares only ``value``,
``cvxpy`` (and its JAX pieces) is certified here instead. For multipliers :math:`\alpha` of the triplet loss
(any scalar loss :math:`l` with conjugate :math:`l^*`, weight :math:`w`), weak duality gives, with
:math:`B = \sum_t \alpha_t A_t` and :math:`R` the sum of the other terms,

.. math::

    f^\star \;\ge\; \sum_t \big(\alpha_t - w\,l^*(\alpha_t / w)\big)
    \;+\; h(P - B),\qquad h(G) = \min_{M \succeq 0,\ \operatorname{tr} M \le \tau}\ \langle G, M\rangle + R(M),

where :math:`\tau` bounds the trace of an optimum of the whole problem (:func:`trace_bound`; the restriction only
lowers nothing: the optimum lies in the restricted set). :math:`h` is a ``d x d`` convex program that CVXPY builds
from the terms' own expressions; :func:`inner_lower_bound` bounds it without trusting the solver:

1. CVXPY compiles it to the conic form :math:`\min c^\top x + c_0` s.t. :math:`A x + s = b`, :math:`s \in K`
   (SOC instead of quadratic objectives), with :math:`x = (v, z)`: ``v`` the upper triangle of ``M`` and ``z``
   CVXPY's auxiliary variables (epigraphs of the atoms). Clarabel returns an approximate dual :math:`y`.
2. :math:`y` is projected onto the dual cone :math:`K^*` block by block, each block pushed a little inside.
3. The dual residual :math:`r = c + A^\top y` is made **exactly zero on every auxiliary column**: a pivot row is
   chosen for each auxiliary column (a triangular order, so that later pivots never touch an earlier column) and
   its multiplier is recomputed in exact rational arithmetic (:class:`fractions.Fraction`). The auxiliary variables
   can be unbounded; their residual must vanish, and now does exactly.
4. Membership of the repaired :math:`y` in :math:`K^*` is checked exactly (zero, non-negative and second-order
   blocks, in rationals) or with eigenvalue bounds that rounding can only lower (PSD blocks, :mod:`.verified`).
5. For every feasible :math:`x`: :math:`c^\top x = r^\top x - b^\top y + y^\top s \ge \langle R_v, M\rangle - b^\top y`,
   :math:`R_v` the symmetric matrix of the residual on ``v`` (plus the rounding bounds of ``G`` and of the
   residual's evaluation). Hence :math:`h(G) \ge c_0 - b^\top y + \tau \min(0, \lambda_{\min}(R_v))`, with
   :math:`b^\top y` summed exactly and the eigenvalue bounded from below. With no finite :math:`\tau` the bound
   needs :math:`\lambda_{\min}(R_v) \ge 0`; the program is then solved with :math:`G - \epsilon I`, which leaves
   :math:`\epsilon I` in :math:`R_v` (and :math:`h(G) \ge h(G - \epsilon I)` on the PSD cone).
6. The rounding in forming :math:`G = P - B` (an elementwise bound :math:`E_G` from the caller) is absorbed the same
   way: the exact :math:`G^\star` satisfies :math:`G^\star \succeq G - e I` with :math:`e = \|E_G\|_F`, so the
   program is solved for :math:`G - e I`; this costs :math:`e \operatorname{tr} M` at the inner optimum instead of
   :math:`e\,\tau` (on digits, 61 features: a relative gap of 9.5e-9 instead of 2.5e-6).

This is weak duality with the solver's residuals accounted for, in the spirit of Neumaier & Shcherbina, *Safe
bounds in linear and mixed-integer programming*, Math. Program. 99 (2004) and Jansson, Chaykin & Keil, *Rigorous
error bounds for the optimal value in semidefinite programming*, SIAM J. Numer. Anal. 46 (2007): no tolerance of
the solver enters the bound; a poor dual only makes it lower. What is taken as exact: the conic program CVXPY
compiles from the term's expression (its coefficients are the term's definition), and the cones it uses (zero,
non-negative, second-order, PSD; a term needing exponential or power cones is refused with a message).
"""

from __future__ import annotations

import math
import time
import warnings
from fractions import Fraction

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from typing import TYPE_CHECKING, Any

from ..errors import NotCertifiableError
from .verified import EPS, gamma, min_eig_lower

if TYPE_CHECKING:
    from .certificate import Certificate
    from .dual import DualSummary

__all__ = ["inner_lower_bound", "trace_bound", "symmetric_matrix_variable", "GenericBoundError"]

#: relative size of the shift ``G - eps I`` used when no finite trace bound is known
SHIFT = 1e-9
#: each projected dual block is pushed this far (relative to the block's size) inside its cone, trying the
#: next size when the exact repair of the auxiliary residuals leaves a block outside it
INSETS = (0.0, 64 * EPS, 1e-12, 1e-10, 1e-8, 1e-6)


class GenericBoundError(NotCertifiableError):
    """The generic bound cannot be formed for this term (an unsupported cone, an auxiliary column without a
    pivot row): the message says which."""


def symmetric_matrix_variable(d: int) -> tuple[cp.Variable, cp.Expression, tuple[np.ndarray, np.ndarray]]:
    """A symmetric CVXPY matrix expression whose conic-data columns are exactly its upper triangle.

    Parameters
    ----------
    d : int
        The matrix size.

    Returns
    -------
    v : cvxpy.Variable
        The ``d(d+1)/2`` upper-triangle entries (row-major).
    M : cvxpy.Expression
        The symmetric ``d x d`` expression built from ``v`` (so that ``M``'s columns in the conic data are exactly
        ``v``'s).
    (iu, ju) : tuple of ndarray
        The row and column indices of ``v``'s entries (:func:`numpy.triu_indices`).
    """
    iu, ju = np.triu_indices(d)
    k = np.arange(iu.size)
    off = iu != ju
    rows = np.concatenate([iu * d + ju, (ju * d + iu)[off]])
    cols = np.concatenate([k, k[off]])
    S = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(d * d, iu.size))
    v = cp.Variable(iu.size, name="M_upper")
    return v, cp.reshape(S @ v, (d, d), order="C"), (iu, ju)


def trace_bound(P: np.ndarray, EP: np.ndarray | float, budget: float) -> float:
    r"""A bound :math:`\tau \ge \operatorname{tr} M^\star` for every :math:`M^\star \succeq 0` with
    :math:`\langle P, M^\star\rangle \le` ``budget``.

    .. math:: \tau = \text{budget} / \ell, \qquad \ell \le \lambda_{\min}(P)

    with :math:`\ell` certified (:func:`.verified.min_eig_lower`), since :math:`\langle P, M\rangle \ge
    \lambda_{\min}(P)\operatorname{tr} M` on the PSD cone. (Used with ``budget`` = the objective at the
    candidate, rounded up, less the constant: every other term is non-negative, which the caller checks.)

    Parameters
    ----------
    P : (d, d) ndarray
        The linear part (symmetric).
    EP : (d, d) ndarray or float
        An elementwise bound on the rounding in ``P``.
    budget : float
        The bound on :math:`\langle P, M^\star\rangle`.

    Returns
    -------
    float
        :math:`\tau`, rounded up; ``inf`` when :math:`P` is not certifiably positive definite or the budget is
        not finite.
    """
    if not np.isfinite(budget):
        return np.inf
    lo = min_eig_lower(P, EP)
    if lo <= 0:
        return np.inf
    return max(budget, 0.0) / lo * (1.0 + 8 * EPS) + 1e-300


# ------------------------------------------------------------------ cones
def _blocks(dims, terms=()):
    """``[(kind, start, size)]`` of the conic data's rows (Clarabel's order: zero, non-negative, SOC..., PSD...);
    ``terms``: the terms named when a cone is refused."""
    out, o = [], 0
    if dims.zero:
        out.append(("zero", o, dims.zero))
        o += dims.zero
    if dims.nonneg:
        out.append(("nonneg", o, dims.nonneg))
        o += dims.nonneg
    for q in dims.soc:
        out.append(("soc", o, q))
        o += q
    for s in dims.psd:
        n = s * (s + 1) // 2
        out.append(("psd", o, s))
        o += n
    if dims.exp or len(dims.p3d) or getattr(dims, "pnd", None):
        names = ", ".join(str(t) for t in terms) or "?"
        raise GenericBoundError(
            f"no dual piece for the term {names}, and the generic certificate cannot bound it: its CVXPY expression "
            "compiles to exponential or power cones, which the generic certificate does not handle (it checks zero, "
            "non-negative, second-order and PSD cones). Give the term a dual_piece, or write it with those cones.")
    return out


def _clarabel_cones(blocks):
    import clarabel

    cones = []
    for kind, _, size in blocks:
        cones.append({"zero": clarabel.ZeroConeT, "nonneg": clarabel.NonnegativeConeT,
                      "soc": clarabel.SecondOrderConeT, "psd": clarabel.PSDTriangleConeT}[kind](size))
    return cones


def _tri(s):
    """Row/column indices of Clarabel's packed PSD triangle (upper triangle, column by column) and the scale of each
    entry (``sqrt 2`` off the diagonal)."""
    r, c = [], []
    for j in range(s):
        for i in range(j + 1):
            r.append(i)
            c.append(j)
    r, c = np.array(r), np.array(c)
    return r, c, np.where(r == c, 1.0, math.sqrt(2.0))


def _smat(y, s):
    r, c, sc = _tri(s)
    Y = np.zeros((s, s))
    Y[r, c] = y / sc
    Y[c, r] = y / sc
    return Y


def _project_dual(y, blocks, inset):
    """``y`` projected onto the dual cone (self-dual blocks; zero cone: free), each block pushed inside by
    ``inset`` of its size (along the cone's central direction) so that the exact repair of step 3 keeps it there."""
    y = y.copy()
    for kind, o, size in blocks:
        if kind == "nonneg":
            blk = y[o:o + size]
            y[o:o + size] = np.maximum(blk, 0.0) + inset * max(float(np.abs(blk).max(initial=0.0)), 1e-300)
        elif kind == "soc":
            t, u = float(y[o]), y[o + 1:o + size].copy()
            nu = float(np.linalg.norm(u))
            if nu > t:
                if nu <= -t:
                    t, u, nu = 0.0, u * 0.0, 0.0
                else:
                    a = 0.5 * (t + nu)
                    t, u, nu = a, u * (a / nu), a
            y[o] = max(t, nu * (1 + inset)) + inset * max(abs(t), nu, 1e-300)
            y[o + 1:o + size] = u
        elif kind == "psd":
            n = size * (size + 1) // 2
            Y = _smat(y[o:o + n], size)
            w, V = np.linalg.eigh(Y)
            top = max(float(np.abs(w).max(initial=0.0)), 1e-300)
            w = np.maximum(w, 0.0) + inset * top
            Y = (V * w) @ V.T
            r, c, sc = _tri(size)
            y[o:o + n] = Y[r, c] * sc
    return y


# ------------------------------------------------------------------ exact repair of the auxiliary columns
def _pivot_repair(A, c, y, aux, blocks):
    """Make ``c_j + (A^T y)_j`` exactly zero for every auxiliary column ``j``: returns ``{row: Fraction}``, the new
    multipliers of the pivot rows (every other entry of ``y`` is kept as its float). Raises
    :class:`GenericBoundError` when some auxiliary column has no usable pivot row."""
    A = sp.csc_matrix(A)
    blocked = np.zeros(A.shape[0], dtype=np.int64)  # number of processed auxiliary columns in each row
    used = np.zeros(A.shape[0], dtype=bool)
    exact: dict[int, Fraction] = {}

    def yv(k):
        return exact[k] if k in exact else Fraction(float(y[k]))

    block_of = np.empty(A.shape[0], dtype=np.int64)
    for b_i, (kind, o, size) in enumerate(blocks):
        block_of[o:o + (size if kind != "psd" else size * (size + 1) // 2)] = b_i

    def margin(k, new):
        """How far inside its cone row ``k``'s block stays when its multiplier becomes ``new`` (float estimate;
        the choice only: membership is checked exactly afterwards)."""
        kind, o, size = blocks[block_of[k]]
        if kind == "zero":
            return np.inf
        if kind == "nonneg":
            return new
        n = size if kind == "soc" else size * (size + 1) // 2
        blk = np.array([float(yv(i)) for i in range(o, o + n)])
        blk[k - o] = new
        if kind == "soc":
            return float(blk[0] - np.linalg.norm(blk[1:]))
        return float(np.linalg.eigvalsh(_smat(blk, size))[0])

    # most constrained first: columns with the fewest candidate rows
    order = sorted(aux, key=lambda j: A.indptr[j + 1] - A.indptr[j])
    for j in order:
        rows = A.indices[A.indptr[j]:A.indptr[j + 1]]
        vals = A.data[A.indptr[j]:A.indptr[j + 1]]
        if rows.size == 0:
            if c[j] != 0:
                raise GenericBoundError(f"an auxiliary variable of the compiled program (column {j}) appears in no "
                                        "constraint but has a cost: the program is unbounded.")
            continue
        total = Fraction(float(c[j])) + sum((Fraction(float(a)) * yv(int(k)) for k, a in zip(rows, vals)), Fraction(0))
        best, best_score = None, -np.inf
        for k, a in zip(rows, vals):
            k = int(k)
            if used[k] or blocked[k] or a == 0:
                continue
            new = yv(k) - total / Fraction(float(a))  # the multiplier of row k that zeroes column j
            score = margin(k, float(new))
            if score > best_score:
                best, best_score = (k, new), score
        if best is None:
            raise GenericBoundError(
                "an auxiliary variable of the compiled program has no row usable as a pivot (every row holding it "
                "also holds an auxiliary variable already fixed): the generic certificate cannot zero its dual "
                "residual. Give the term a dual_piece, or write its CVXPY expression with fewer shared auxiliaries.")
        k, new = best
        exact[k] = new
        used[k] = True
        blocked[A.indices[A.indptr[j]:A.indptr[j + 1]]] += 1  # rows holding column j may no longer pivot
    return exact


def _tighten(y, exact, blocks, free):
    """Push back inside its cone every block that the exact repair left outside, through its *free* entries
    (rows that hold no auxiliary column: changing them moves only the residual on ``M``, which the bound accounts
    for): a free SOC head is raised, free SOC tail entries are scaled down, free PSD diagonal entries are raised.
    Returns the adjusted float multipliers (the pivots in ``exact`` are left as they are)."""
    y = y.copy()
    val = lambda k: float(exact[k]) if k in exact else float(y[k])
    for kind, o, size in blocks:
        if kind == "soc":
            idx = np.arange(o, o + size)
            vals = np.array([val(k) for k in idx])
            head, tail = vals[0], vals[1:]
            nt = float(np.linalg.norm(tail))
            if head > nt * (1 + 64 * EPS * size):
                continue
            if free[o] and o not in exact:
                y[o] = nt * (1 + 64 * EPS * size) + 1e-300
                continue
            fr = np.array([free[k] and k not in exact for k in idx[1:]])
            fixed = float(np.linalg.norm(tail[~fr]))
            nf = float(np.linalg.norm(tail[fr]))
            room = head * (1 - 64 * EPS * size)
            if nf > 0 and room > fixed:
                theta = math.sqrt(room * room - fixed * fixed) / nf * (1 - 64 * EPS * size)
                if theta < 1:
                    y[idx[1:][fr]] *= theta
        elif kind == "psd":
            n = size * (size + 1) // 2
            r, c, _ = _tri(size)
            dg = o + np.flatnonzero(r == c)
            if not all(free[k] and k not in exact for k in dg):
                continue
            Y = _smat(np.array([val(k) for k in range(o, o + n)]), size)
            lo = min_eig_lower(Y, EPS * np.abs(Y) + 1e-300)
            if lo < 0:
                y[dg] += -lo * (1 + 1e-6) + EPS * float(np.abs(Y).max(initial=0.0))
    return y


def _dual_in_cone(y, exact, blocks) -> bool:
    """Whether the repaired multipliers lie in the dual cone: exactly for zero, non-negative and SOC blocks
    (rationals), with a verified eigenvalue bound for PSD blocks."""
    for kind, o, size in blocks:
        if kind == "zero":
            continue
        if kind == "nonneg":
            for k in range(o, o + size):
                if (exact[k] if k in exact else y[k]) < 0:
                    return False
        elif kind == "soc":
            idx = range(o, o + size)
            if not any(k in exact for k in idx):
                t, u = float(y[o]), y[o + 1:o + size]
                # float test with a margin that covers the rounding of the norm
                if t < 0 or t * t * (1 - 8 * EPS * size) < float(u @ u) * (1 + 8 * EPS * size):
                    if not _soc_exact([Fraction(float(y[k])) for k in idx]):
                        return False
                continue
            if not _soc_exact([exact[k] if k in exact else Fraction(float(y[k])) for k in idx]):
                return False
        else:
            n = size * (size + 1) // 2
            blk = np.array([float(exact[k]) if k in exact else y[k] for k in range(o, o + n)])
            err = np.array([abs(float(exact[k] - Fraction(float(exact[k])))) if k in exact else 0.0
                            for k in range(o, o + n)])
            Y = _smat(blk, size)
            E = _smat(err, size) + EPS * np.abs(Y)  # the division by sqrt 2
            if min_eig_lower(Y, np.abs(E)) < 0:
                return False
    return True


def _soc_exact(vals):
    t = vals[0]
    return t >= 0 and t * t >= sum((u * u for u in vals[1:]), Fraction(0))


# ------------------------------------------------------------------ the bound
def _solve_conic(A, b, c, blocks, accuracy):
    import clarabel

    n = A.shape[1]
    st = clarabel.DefaultSettings()
    st.verbose = False
    st.tol_gap_abs = st.tol_gap_rel = st.tol_feas = max(min(accuracy, 1e-8), 1e-12)
    st.max_iter = 400
    from .._deadline import seconds_left

    left = seconds_left()
    if left is not None:
        if left <= 0:
            return None
        st.time_limit = float(left)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = clarabel.DefaultSolver(sp.csc_matrix((n, n)), np.asarray(c, float), sp.csc_matrix(A),
                                     np.asarray(b, float), _clarabel_cones(blocks), st).solve()
    z = np.asarray(sol.z, dtype=np.float64)
    if z.size != A.shape[0] or not np.all(np.isfinite(z)):
        return None
    return z, str(sol.status)


def inner_lower_bound(problem: Any, G: np.ndarray, EG: np.ndarray | float, terms: list, tau: float,
                      accuracy: float = 1e-9) -> tuple[float, dict]:
    r"""A rigorous lower bound on :math:`h(G) = \min_{M \succeq 0,\ \operatorname{tr} M \le \tau} \langle G, M\rangle
    + \sum_k R_k(M)`, :math:`R_k` the terms' CVXPY expressions (module docstring): ``(bound, details)``.

    Parameters
    ----------
    problem : Problem
        Passed to each term's ``cvxpy(problem, V)``.
    G : (d, d) ndarray
        The linear part (symmetric).
    EG : (d, d) ndarray or float
        An elementwise bound on the rounding in ``G``.
    terms : list of Term
        Convex terms written over ``V["M"]`` / ``V["Mvec"]``.
    tau : float
        A bound on the trace of the optimum the caller bounds (``inf``: none known).
    accuracy : float
        Clarabel's tolerances (the bound does not depend on them, only its tightness).

    Returns
    -------
    bound : float
        The lower bound on :math:`h(G)`; ``-inf`` when no bound could be formed.
    details : dict
        How it was formed (or why not).

    Raises
    ------
    GenericBoundError
        When the terms' expressions are not DCP-convex, the compiled program has variable bounds or uses a cone
        the bound does not support (exponential or power cones), or an auxiliary column has no pivot row.
    """
    t0 = time.perf_counter()
    d = G.shape[0]
    G = 0.5 * (G + G.T)
    # the exact G* lies within EG of G, so G* - (G - e I) is PSD for e >= ||EG||_F >= ||G* - G||_2 and, on the PSD
    # cone, h(G*) >= h(G - e I): the rounding of G costs e tr(M) at the inner optimum, not e times the trace bound
    # (e = e_G below)
    e_G = float(np.linalg.norm(np.broadcast_to(np.asarray(EG, dtype=np.float64), (d, d)))) * (1 + 4 * d * EPS)
    G = G - e_G * np.eye(d)
    EG = EPS * np.abs(np.diag(np.diag(G)))  # the rounding of that subtraction
    scale = max(float(np.abs(G).max(initial=0.0)), 1e-300)
    shift = 0.0 if np.isfinite(tau) else SHIFT * scale
    v, M, (iu, ju) = symmetric_matrix_variable(d)
    V = {"M": M, "Mvec": cp.reshape(M, (d * d,), order="C")}
    expr, cons = cp.sum(cp.multiply(G - shift * np.eye(d), M)), [M >> 0]
    for term in terms:
        e, cc = term.cvxpy(problem, V)
        expr = expr + e
        cons += list(cc)
    if np.isfinite(tau):
        cons.append(cp.trace(M) <= tau)
    prob = cp.Problem(cp.Minimize(expr), cons)
    if not prob.is_dcp():
        raise GenericBoundError("the terms' CVXPY expressions do not form a DCP-convex program: the generic "
                                "certificate needs each term convex as CVXPY sees it.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data, _, _ = prob.get_problem_data(cp.CLARABEL, solver_opts={"use_quad_obj": False})
    pp = data["param_prob"]
    offset = float(pp.apply_parameters()[1])
    A, b, c = sp.csc_matrix(data["A"]), np.asarray(data["b"], float), np.asarray(data["c"], float)
    for key in ("lower_bounds", "upper_bounds"):
        if data.get(key) is not None and np.any(np.isfinite(data[key])):
            raise GenericBoundError("the compiled program has variable bounds, which the generic certificate does "
                                    "not account for.")
    blocks = _blocks(data["dims"], [t for t in terms if problem is None or t.dual_piece(problem) is None])
    col = pp.var_id_to_col[v.id]
    nv = iu.size
    vcols = np.arange(col, col + nv)
    aux = np.setdiff1d(np.arange(A.shape[1]), vcols)
    free = np.asarray(abs(A[:, aux]).sum(axis=1)).ravel() == 0  # rows touching M's columns only
    solved = _solve_conic(A, b, c, blocks, accuracy)
    if solved is None:
        return -np.inf, {"generic bound": "the inner program's solver returned no dual point"}
    z, status = solved
    for inset in INSETS:
        y = _project_dual(z, blocks, inset)
        exact = _pivot_repair(A, c, y, aux, blocks)
        y = _tighten(y, exact, blocks, free)
        if _dual_in_cone(y, exact, blocks):
            break
    else:
        return -np.inf, {"generic bound": "the repaired dual point left its cone", "inner status": status}
    # the float multipliers and their rounding
    yf = y.copy()
    ye = np.zeros_like(y)
    for k, f in exact.items():
        yf[k] = float(f)
        ye[k] = abs(float(f - Fraction(yf[k])))
    # -b^T y exactly (b is sparse), rounded down
    bnz = np.flatnonzero(b)
    by = sum((Fraction(float(b[k])) * (exact[k] if k in exact else Fraction(float(y[k]))) for k in bnz), Fraction(0))
    dual_value = -by + Fraction(offset)
    lower_const = float(dual_value)
    lower_const = np.nextafter(lower_const, -np.inf) if Fraction(lower_const) > dual_value else lower_const
    # the residual on M's columns, for the unshifted objective (the shift comes back as + shift I)
    Av = A[:, vcols]
    cv = c[vcols].copy()
    diag = iu == ju
    cv[diag] += shift
    r = cv + Av.T @ yf
    Aabs = abs(Av)
    nnz = np.diff(Av.indptr)
    er = gamma(int(nnz.max(initial=0)) + 2) * (np.abs(cv) + Aabs.T @ np.abs(yf)) + Aabs.T @ ye + EPS * shift * diag
    R = np.zeros((d, d))
    E = np.zeros((d, d))
    w = np.where(diag, 1.0, 0.5)  # <R, M> = sum_k r_k v_k with v_k = M_ij = M_ji
    R[iu, ju] = r * w
    R[ju, iu] = r * w
    E[iu, ju] = er * w
    E[ju, iu] = er * w
    # CVXPY formed c_v from G (G_ij + G_ji off the diagonal) and the terms' coefficients: its rounding, and G's own
    E = E + np.asarray(EG, dtype=np.float64) * np.ones((d, d)) + 2 * EPS * (np.abs(R) + np.abs(G))
    lam = min_eig_lower(R, E)
    if lam >= 0:
        slack = 0.0
    elif np.isfinite(tau):
        slack = tau * lam
    else:
        return -np.inf, {"generic bound": "no trace bound and the dual residual is not PSD", "inner status": status}
    bound = lower_const + slack
    bound = bound - abs(bound) * 2 * EPS
    return bound, {"generic bound": "conic dual with exact auxiliary residuals", "inner status": status,
                   "inner residual eigenvalue": lam, "trace bound": tau, "rounding shift of G": e_G, "auxiliary pivots": len(exact), "dual inset": inset,
                   "generic seconds": time.perf_counter() - t0}


# ------------------------------------------------------------------ the certifier
#: hinge arguments within this band of the margin get free multipliers in the restricted program
GENERIC_BAND = 1e-3
#: largest number of free multipliers in the restricted program
GENERIC_MAX_FREE = 2000


class _HingeLoss:
    """The hinge ``[h]_+`` as the generic certifier reads a loss: conjugate 0 on ``[0, 1]``."""

    name, smooth, dual_upper = "hinge", False, 1.0

    @staticmethod
    def derivative(h):
        return (np.asarray(h) > 0).astype(np.float64)

    @staticmethod
    def conjugate(a):
        a = np.asarray(a, dtype=np.float64)
        return np.where((a >= 0) & (a <= 1), 0.0, np.inf)


_HINGE = _HingeLoss()


def _loss_of(summary):
    """``(term, weight, loss)`` of the problem's triplet loss (``loss`` a :class:`metricopt.losses.ScalarLoss`, the
    hinge for ``"triplet_hinge"``), or ``(None, 0.0, None)``."""
    for name in ("triplet_hinge", "triplet_loss"):
        found = summary.losses.get(name, [])
        if found:
            term, piece = found[0]
            if name == "triplet_hinge":
                return term, float(piece.weight), _HINGE
            from ..losses import ScalarLoss

            loss = getattr(term, "loss", None)
            if not isinstance(loss, ScalarLoss):  # never read an unknown loss as the hinge (its conjugate is smaller)
                raise GenericBoundError(f"the term {term!r} declares the dual piece 'triplet_loss' but has no scalar "
                                        "loss (term.loss, a metricopt.losses.ScalarLoss) the certificate could read.")
            return term, float(piece.weight), loss
    return None, 0.0, None


def _inner_terms(problem):
    """``(P, constant, terms)``: the sum of the pure linear pieces and of their constants (folded into ``G`` and
    the bound) and the terms the inner program takes from their CVXPY expressions (a dual piece with a Frobenius
    part, whose linear part and constant the expression already holds, or no piece)."""
    d = problem.d
    P = np.zeros((d, d))
    const = 0.0
    inner = []
    for term in problem.terms:
        piece = term.dual_piece(problem)
        if piece is None:
            inner.append(term)
        elif piece.is_loss:
            continue
        elif piece.strong_convexity == 0.0:
            if piece.linear is not None:
                P = P + np.asarray(piece.linear, dtype=np.float64)
            const += float(piece.constant)
        else:
            inner.append(term)
    return 0.5 * (P + P.T), const, inner


def trace_bound_of(summary: DualSummary, EP: np.ndarray | float, budget: float, d: int) -> float:
    r"""A bound on the trace of every :math:`M \succeq 0` with :math:`\langle P, M\rangle + \tfrac{\lambda}{2}
    \|M\|_F^2 \le` ``budget`` (``P``, ``lambda`` of the summary: all linear parts and Frobenius constants): the
    smaller of :func:`trace_bound` and, for :math:`\lambda > 0`, :math:`\sqrt{d}\, r` with :math:`r` the largest
    root of :math:`\tfrac{\lambda}{2} r^2 + \min(\ell, 0)\sqrt{d}\, r = \text{budget}` (:math:`\ell \le
    \lambda_{\min}(P)`; :math:`\operatorname{tr} M \le \sqrt{d}\|M\|_F` and :math:`\langle P, M\rangle \ge \ell
    \operatorname{tr} M`).

    Parameters
    ----------
    summary : DualSummary
        The problem's folded terms (its ``P`` and ``lam``).
    EP : (d, d) ndarray or float
        An elementwise bound on the rounding in ``P``.
    budget : float
        The bound on the objective's linear and Frobenius parts.
    d : int
        The number of features.

    Returns
    -------
    float
        The trace bound (``inf`` when none is known).
    """
    P = summary.P
    tau = trace_bound(P, EP, budget)
    lam = float(summary.lam)
    if lam > 0 and np.isfinite(budget):
        lo = min(min_eig_lower(P, EP), 0.0)
        a = -lo * math.sqrt(d)
        r = (a + math.sqrt(a * a + 2 * lam * max(budget, 0.0))) / lam
        tau = min(tau, math.sqrt(d) * r * (1 + 16 * EPS) + 1e-300)
    return tau


def _nonneg_terms(problem, terms) -> bool:
    """Whether CVXPY's sign analysis proves every term non-negative (its expression; constraints only: 0)."""
    d = problem.d
    Mv = cp.Variable((d, d), symmetric=True)
    V = {"M": Mv, "Mvec": cp.reshape(Mv, (d * d,), order="C")}
    for term in terms:
        expr, _ = term.cvxpy(problem, V)
        if not (cp.Constant(0.0) + expr).is_nonneg():
            return False
    return True


def _multipliers(problem, M, P, weight, loss, inner, upper):
    """Multipliers ``(T, alpha)`` of the triplet loss chosen from the candidate ``M``: ``weight w_t l'(h_t)`` for a
    smooth loss; for the hinge, ``weight w_t`` on the triplets violated beyond the band and the duals of a
    restricted program (the candidate's near-margin triplets free, with the other terms' CVXPY expressions) on
    those near the margin. Any choice in the conjugate's domain gives a valid bound; this one is exact at the
    optimum."""
    band = 0.0 if loss.smooth else GENERIC_BAND
    i, j, l, h = problem.find_triplets(M, margin=band)
    T = np.stack([i, j, l], 1)
    w = problem.anchor_weights(i)
    caps = weight * (np.ones(len(T)) if w is None else w)
    if loss.smooth:
        return T, np.clip(caps * loss.derivative(h), 0.0, caps * loss.dual_upper)
    viol = h > band
    near = np.flatnonzero(~viol)
    if near.size > GENERIC_MAX_FREE:
        near = near[np.argsort(np.abs(h[near]))[:GENERIC_MAX_FREE]]
        viol = h > 0
        viol[near] = False
    alpha = np.where(viol, caps, 0.0)
    if near.size == 0:
        return T, alpha
    d = problem.d
    v, Mx, _ = symmetric_matrix_variable(d)
    V = {"M": Mx, "Mvec": cp.reshape(Mx, (d * d,), order="C")}
    Bv = problem.triplet_scatter(T[viol, 0], T[viol, 1], T[viol, 2], caps[viol]) if viol.any() else 0.0
    expr = cp.sum(cp.multiply(P - Bv, Mx)) + float(np.sum(caps[viol]))
    cons = [Mx >> 0]
    for term in inner:
        e, c = term.cvxpy(problem, V)
        expr, cons = expr + e, cons + list(c)
    rows = problem.triplet_rows(T[near, 0], T[near, 1], T[near, 2])
    xi = cp.Variable(near.size, nonneg=True)
    margin = rows @ V["Mvec"] >= 1 - xi
    prog = cp.Problem(cp.Minimize(expr + caps[near] @ xi), cons + [margin])
    from ._dual import solve_small

    if solve_small(prog) and margin.dual_value is not None:
        alpha[near] = np.clip(np.asarray(margin.dual_value, dtype=np.float64).ravel(), 0.0, caps[near])
    return T, alpha


def generic_triplet_bound(problem: Any, M: np.ndarray, variables: dict, summary: DualSummary, feas_tol: float,
                          tol: float) -> tuple[float, float, dict] | Certificate:
    r"""The certifier for problems over a PSD ``M`` with at most one triplet loss and any convex terms, including
    terms without a dual piece (module docstring).

    Every number of the bound is recomputed from the chosen multipliers, each rounding on the side that lowers it.

    Parameters
    ----------
    problem : Problem
        The problem (accepted by this certifier; see :func:`metricopt.certify.register_certifier`).
    M : (d, d) ndarray
        The candidate metric (symmetric, PSD up to rounding: :func:`metricopt.certify` checked it).
    variables : dict
        The candidate's extra variables by name (e.g. POLA's ``b``); missing ones are chosen for ``M``.
    summary : DualSummary
        The problem's terms folded by :func:`~metricopt.certify.dual.dual_summary`.
    feas_tol : float
        Relative tolerance on the problem's own constraints.
    tol : float
        The relative gap the caller asks for.

    Returns
    -------
    tuple or Certificate
        ``(upper, lower, details)``: the objective at the candidate, the weak-duality lower bound and how it was
        built; or an infeasible :class:`~metricopt.certify.Certificate` (the objective at ``M`` is not finite).

    Raises
    ------
    GenericBoundError
        When a term without a dual piece declares ``generic_certificate = False``, or its compiled program needs
        an unsupported cone.
    """
    from .triplets import _formation_errors, _safe_upper, scatter_error

    t0 = time.perf_counter()
    refused = [t for t in summary.generic if t.generic_certificate is False]
    if refused:
        raise GenericBoundError(f"no dual piece for the term {refused[0]}, and it declares that the generic certificate "
                                "cannot bound it (generic_certificate = False: its CVXPY form needs exponential or "
                                "power cones). Give the term a dual_piece to certify it.")
    V = problem.point(M)
    upper = problem._objective(V)
    if not np.isfinite(upper):
        from .certificate import Certificate

        return Certificate.infeasible(tol, problem.method, f"the objective at M is {upper} (a term's constraint is "
                                      "violated or its value is not finite there)")
    P, const, inner = _inner_terms(problem)
    _, weight, loss = _loss_of(summary)
    if weight > 0 and loss is not None:
        T, alpha = _multipliers(problem, V["M"], P, weight, loss, inner, upper)
    else:
        T, alpha = np.zeros((0, 3), np.int64), np.zeros(0)
    pos = alpha > 0
    T, alpha = T[pos], alpha[pos]
    EP = _formation_errors(problem, summary, len(T))
    if len(T):
        w = problem.anchor_weights(T[:, 0])
        caps = weight * (np.ones(len(T)) if w is None else w)
        B = problem.triplet_scatter(T[:, 0], T[:, 1], T[:, 2], alpha)
        B = 0.5 * (B + B.T)
        conj = caps * loss.conjugate(alpha / caps)
        conj_sum = float(np.sum(conj)) * (1 + gamma(len(conj) + 1))
        alpha_sum = float(np.sum(alpha)) * (1 - gamma(len(alpha) + 1))
        dual_part = alpha_sum - conj_sum
        EB = scatter_error(problem, T, alpha)
    else:
        B, dual_part, EB = np.zeros_like(P), 0.0, 0.0
    G = P - B
    EG = np.asarray(EP) + np.asarray(EB) + 2 * EPS * (np.abs(P) + np.abs(B))
    tau = np.inf
    if _nonneg_terms(problem, summary.generic):
        # f = <P, M> + lam/2 ||M||^2 + c + loss + (terms without a piece), the last two non-negative: every optimum
        # has <P, M*> + lam/2 ||M*||^2 <= U - c
        c = float(summary.constant)
        budget = (_safe_upper(upper) - c) + 4 * EPS * (abs(c) + abs(upper))  # rounded up: tau may only grow
        tau = trace_bound_of(summary, np.asarray(EP) + 2 * EPS * np.abs(summary.P), budget, problem.d)
    inner_lb, info = inner_lower_bound(problem, G, EG, inner, tau)
    # the sum and the constants' own rounding, taken downwards
    lower = dual_part + inner_lb + const - 4 * EPS * (abs(dual_part) + abs(inner_lb) + abs(const))
    info.update({"dual form": "generic (conic dual of the terms' CVXPY expressions)",
                 "multipliers": int(len(T)), "certificate seconds": time.perf_counter() - t0})
    return upper, lower, info
