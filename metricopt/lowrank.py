r"""Low-rank LMNN: LMNN-R and LMNN-S (Weinberger & Saul, JMLR 10:207-244, 2009, Section 5.4).

A rank-:math:`r` metric :math:`M = L^\top L` with a rectangular :math:`L \in \mathbb R^{r \times d}`
maps the data to :math:`r` dimensions (:math:`z = Lx`), which makes kNN search cheaper and
gives a supervised dimensionality reduction. The rank constraint makes LMNN non-convex;
Section 5.4 of the paper describes two ways around it, both implemented here for an
:class:`~metricopt.LMNNProblem` (any convex regulariser of the problem included):

**LMNN-R** (rectangular :math:`L`, learned directly): minimise over :math:`L \in \mathbb R^{r \times d}`

.. math::

    \varepsilon(L) = (1-\mu) \sum_{i,\, j \rightsquigarrow i} \lVert L(x_i - x_j)\rVert^2
    + \mu \sum_{i,\, j \rightsquigarrow i,\, l:\, y_l \ne y_i}
      \big[1 + \lVert L(x_i - x_j)\rVert^2 - \lVert L(x_i - x_l)\rVert^2\big]_+ + R(L^\top L),

the LMNN objective of Eq. 14 (Section 3.4 writes it in :math:`L` before the convex
reformulation in :math:`M`) evaluated at :math:`M = L^\top L`. Writing
:math:`f(M)` for the convex objective, :math:`\varepsilon(L) = f(L^\top L)` and the chain rule gives the
(sub)gradient

.. math::

    \partial_L \varepsilon = 2 L G, \qquad G = (1-\mu) P + \mu \sum_{(i,j,l):\, h_{ijl} > 0} (C_{ij} - C_{il}) + \nabla R(M),

with :math:`P = \sum_{i, j \rightsquigarrow i} C_{ij}`, :math:`C_{ab} = (x_a - x_b)(x_a - x_b)^\top` and
:math:`h_{ijl}` the hinge argument. :math:`G` is summed with
:func:`metricopt.linalg.pair_scatter` over the active triplets found by
:func:`metricopt.constraints.active_triplets` in :math:`Z = X L^\top` (blocked: all triplets
are never formed).

**LMNN-S** (solve, then truncate): solve the convex problem, then keep the top :math:`r`
eigenpairs of its solution, :math:`L_r = \operatorname{diag}(\sqrt{\lambda_1}, \dots,
\sqrt{\lambda_r})\, U_r^\top`; the objective lost by the truncation is reported.

Both give a feasible point of the rank-constrained problem, so their objective is an
upper bound on its optimum. Since :math:`\{L^\top L: L \in \mathbb R^{r\times d}\}` is a
subset of the PSD cone, the convex optimum :math:`f^\star` is a lower bound:
:math:`\varepsilon(L) \ge \min_{L'} \varepsilon(L') \ge f^\star \ge \text{lower}`, where
``lower`` is the dual bound of :func:`metricopt.certify`. The gap to that bound is reported
for information only: for :math:`r < d` it usually does not close (the relaxation is not
tight), so it is a *bound*, not a certificate of the rank-constrained problem. Solutions
of LMNN-R are reported as ``STATIONARY`` (or ``ITERATION_LIMIT``), never ``OPTIMAL``.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.optimize

from ._validation import check_choice, check_int, check_real
from .errors import InputError, UnknownOptionError
from .linalg import pair_scatter, project_psd, symmetrize
from .solution import Solution, Status

__all__ = ["lmnn_low_rank", "lmnn_r", "lmnn_s", "low_rank_objective", "stationarity", "truncate_metric", "METHODS"]

#: the two methods of Section 5.4
METHODS = ("R", "S")
#: options of LMNN-R (passed through ``**solve_options`` of :func:`lmnn_low_rank`)
R_OPTIONS = ("smoothing", "init", "band")
#: first width of the smoothed hinge (hinge arguments are in units of the unit margin)
SMOOTH_START = 1.0
#: the width is multiplied by this factor between continuation stages ...
SMOOTH_DECREASE = 0.1
#: ... down to ``SMOOTH_END * band`` (``band`` of the stationarity measure)
SMOOTH_END = 0.02
#: default half-width of the band of hinge arguments treated as sitting on the kink by the
#: stationarity measure
BAND = 1e-6
#: above this many triplets in the band, the stationarity measure uses the plain subgradient
MAX_BAND_COLUMNS = 20_000
#: the Newton (trust-region) polish of a smoothing stage stops at this relative gradient
#: (``||g|| ||L|| / f``) or after POLISH_MAX_ITER iterations
POLISH_TOL = 1e-9
POLISH_MAX_ITER = 200
#: the polish runs after every continuation stage of width at most this
POLISH_FROM = 1e-3
#: relative decrease at which one L-BFGS-B stage stops (its ``ftol``)
FTOL = 1e-13


# ----------------------------------------------------------------------------- checks
def _check_problem(problem):
    from .problems import LMNNProblem

    if not isinstance(problem, LMNNProblem):
        raise InputError(
            f"low-rank LMNN needs an LMNNProblem; got {type(problem).__name__}. Build one with "
            "metricopt.LMNNProblem(X, y, k=..., mu=...)."
        )
    if getattr(problem, "clusters", None) is not None:
        raise InputError(
            "low-rank LMNN learns one metric; a multi-metric problem (one metric per cluster) is not supported. "
            "Use metricopt.LMNNProblem."
        )
    if problem.diagonal:
        raise InputError("low-rank LMNN learns a full rectangular L; the diagonal variant is not supported.")


def _check_rank(n_components, d):
    if isinstance(n_components, bool) or not isinstance(n_components, (int, np.integer)):
        raise InputError(f"n_components must be an integer between 1 and d={d}; got {n_components!r}.")
    r = int(n_components)
    if r < 1 or r > d:
        raise InputError(
            f"n_components must be between 1 and the number of features d={d}; got {r}. "
            f"A rank-{r} metric needs an L with {r} rows of length d."
        )
    return r


# --------------------------------------------------------------------- the objective in L
class _Pieces:
    """The objective ``f(M) = <P, M> + lam/2 ||M||_F^2 + mu * hinge(M)`` of an LMNN problem, split
    into its linear part ``P`` (pull term and trace regularisers), Frobenius weight ``lam`` and
    hinge weight ``mu``."""

    def __init__(self, problem):
        from .problems.terms import Frobenius, Linear, Trace, TripletHinge

        d = problem.d
        self.problem = problem
        self.P = np.zeros((d, d))
        self.lam = 0.0
        self.mu = 0.0
        for t in problem.terms:
            if isinstance(t, (Linear, Trace)):
                self.P += t.linear_part(d)
            elif isinstance(t, Frobenius):
                self.lam += t.lam
            elif isinstance(t, TripletHinge):
                self.mu += t.weight
            else:
                raise InputError(
                    f"low-rank LMNN handles the terms Linear, Trace, Frobenius and TripletHinge; the problem has "
                    f"{t!r}. Use one of metricopt.terms.Trace or Frobenius as regularizer."
                )
        self.P = symmetrize(self.P)
        self.X = problem.X
        self.n_triplets = problem.n_triplets

    def triplets(self, Z, margin):
        """``(i, j, l, h)`` of the triplets with ``h > -margin`` in ``Z = X L^T``."""
        from .constraints import active_triplets

        p = self.problem
        if p._use_tree(Z.shape[1]):
            from .balltree import tree_active_triplets

            return tree_active_triplets(Z, p.y, p.target_neighbors, margin)
        return active_triplets(Z, p.y, p.target_neighbors, margin)

    def smooth_part(self, L):
        """Value and ``G`` of the smooth terms (linear and Frobenius) at ``M = L^T L``."""
        LP = L @ self.P
        value = float(np.sum(LP * L))
        G = self.P.copy()
        if self.lam > 0:
            LLt = L @ L.T
            value += 0.5 * self.lam * float(np.sum(LLt * LLt))
            G = G + self.lam * (L.T @ L)
        return value, G

    def hinge_scatter(self, i, j, l, w):
        """``sum_t w_t (C_ij - C_il)``."""
        X = self.X
        return pair_scatter(X, i, j, w) - pair_scatter(X, i, l, w)

    def evaluate(self, L, smoothing=0.0, cache=None):
        """``(value, exact_value, gradient)`` at ``L``; ``value`` uses the smoothed hinge of width
        ``smoothing`` (Huber: ``[h]_+ <= phi_s(h) <= [h]_+ + s/8``), ``exact_value`` the hinge itself;
        the gradient is that of ``value`` (for ``smoothing=0`` the subgradient with weight ``1[h > 0]``)."""
        s = float(smoothing)
        value, G = self.smooth_part(L)
        exact = value
        if self.mu > 0:
            Z = self.X @ L.T
            i, j, l, h = self.triplets(Z, 0.5 * s)
            if cache is not None:
                cache["found"] = (i, j, l, h)
            pos = h > 0
            exact += self.mu * float(np.sum(h[pos]))
            if s > 0:
                u = h + 0.5 * s
                phi = np.where(h >= 0.5 * s, h, u * u / (2.0 * s))
                w = np.clip(u / s, 0.0, 1.0)
                value += self.mu * float(np.sum(phi))
            else:
                value = exact
                i, j, l = i[pos], j[pos], l[pos]
                w = np.ones(i.size)
            if i.size:
                G = G + self.mu * self.hinge_scatter(i, j, l, w)
        return value, exact, 2.0 * (L @ G)

    def hessp(self, L, V, smoothing, found=None):
        r"""The Hessian of the smoothed objective (width ``smoothing > 0``) at ``L`` applied to ``V``.

        With :math:`h_t(L) = 1 + \lVert L a_t\rVert^2 - \lVert L b_t\rVert^2`, :math:`a_t = x_i - x_j`,
        :math:`b_t = x_i - x_l`: :math:`\nabla h_t = 2 L A_t`, :math:`A_t = a_t a_t^\top - b_t b_t^\top`, and

        .. math::

            H[V] = 2 V G + 2\lambda (L V^\top L + L L^\top V)
            + \frac{\mu}{s} \sum_{|h_t| < s/2} \langle \nabla h_t, V\rangle \nabla h_t ,

        :math:`G` as in :meth:`evaluate` (the smoothed weights). ``found``: the triplets with
        ``h > -s/2`` at ``L`` when already known."""
        s = float(smoothing)
        _, G = self.smooth_part(L)
        out = 2.0 * (V @ G)
        if self.lam > 0:
            out += 2.0 * self.lam * (L @ (V.T @ L) + L @ (L.T @ V))
        if self.mu > 0:
            X = self.X
            i, j, l, h = found if found is not None else self.triplets(X @ L.T, 0.5 * s)
            if i.size:
                w = np.clip((h + 0.5 * s) / s, 0.0, 1.0)
                out += 2.0 * self.mu * (V @ self.hinge_scatter(i, j, l, w))
                q = h < 0.5 * s
                if np.any(q):
                    iq, jq, lq = i[q], j[q], l[q]
                    a, b = X[iq] - X[jq], X[iq] - X[lq]
                    dh = 2.0 * (np.einsum("tr,tr->t", a @ L.T, a @ V.T) - np.einsum("tr,tr->t", b @ L.T, b @ V.T))
                    out += (self.mu / s) * 2.0 * (L @ self.hinge_scatter(iq, jq, lq, dh))
        return out


def low_rank_objective(problem, L, smoothing=0.0):
    r"""The LMNN objective :math:`\varepsilon(L) = f(L^\top L)` and its (sub)gradient in ``L``.

    See the module docstring (Weinberger & Saul, JMLR 2009, Eq. 14 at :math:`M = L^\top L`,
    Section 5.4): :math:`\partial_L \varepsilon = 2 L G` with
    :math:`G = (1-\mu)P + \mu\sum_{h_{ijl} > 0}(C_{ij} - C_{il}) + \nabla R(L^\top L)`.

    Parameters
    ----------
    problem : LMNNProblem
    L : (r, d) array_like
    smoothing : float, default 0
        Width ``s`` of the Huber-smoothed hinge :math:`\phi_s` (0: the hinge itself, gradient
        with the subgradient ``1[h > 0]``).

    Returns
    -------
    value : float
        The (smoothed) objective.
    gradient : (r, d) ndarray
    """
    _check_problem(problem)
    L = _check_L(L, None, problem.d)
    smoothing = check_real(smoothing, "smoothing", low=0.0)
    value, _, grad = _Pieces(problem).evaluate(L, smoothing)
    return value, grad


def _check_L(L, r, d, name="L"):
    L = np.asarray(L, dtype=np.float64)
    if L.ndim != 2 or L.shape[1] != d or (r is not None and L.shape[0] != r):
        want = f"({r}, {d})" if r is not None else f"(r, {d})"
        raise InputError(f"{name} must have shape {want}; got {L.shape}.")
    if not np.all(np.isfinite(L)):
        raise InputError(f"{name} contains NaN or infinite entries.")
    return L


# ------------------------------------------------------------------------ stationarity
def _stationarity(pieces, L, band):
    """``(relative, absolute, exact_value, n_band, minimal)``: see :func:`stationarity`."""
    value, G0 = pieces.smooth_part(L)
    n_band, minimal = 0, True
    g = 2.0 * (L @ G0)
    if pieces.mu > 0:
        X = pieces.X
        Z = X @ L.T
        i, j, l, h = pieces.triplets(Z, band)
        value += pieces.mu * float(np.sum(h[h > 0]))
        fixed = h > band
        if np.any(fixed):
            g = g + 2.0 * pieces.mu * (L @ pieces.hinge_scatter(i[fixed], j[fixed], l[fixed], None))
        kink = ~fixed
        n_band = int(np.count_nonzero(kink))
        if n_band:
            ik, jk, lk, hk = i[kink], j[kink], l[kink], h[kink]
            if n_band <= MAX_BAND_COLUMNS:
                # columns 2 mu vec(L (C_ij - C_il)) = 2 mu vec((z_i - z_j)(x_i - x_j)^T - (z_i - z_l)(x_i - x_l)^T)
                A = (np.einsum("tr,td->trd", Z[ik] - Z[jk], X[ik] - X[jk])
                     - np.einsum("tr,td->trd", Z[ik] - Z[lk], X[ik] - X[lk]))
                A = 2.0 * pieces.mu * A.reshape(n_band, -1).T
                res = scipy.optimize.lsq_linear(A, -g.ravel(), bounds=(0.0, 1.0), tol=1e-12, max_iter=1000)
                g = g + (A @ np.clip(res.x, 0.0, 1.0)).reshape(g.shape)
            else:
                minimal = False
                pos = hk > 0
                if np.any(pos):
                    g = g + 2.0 * pieces.mu * (L @ pieces.hinge_scatter(ik[pos], jk[pos], lk[pos], None))
    gn = float(np.linalg.norm(g))
    rel = 0.0 if gn == 0.0 else gn * float(np.linalg.norm(L)) / max(abs(value), 1e-300)
    return rel, gn, value, n_band, minimal


def stationarity(problem, L, band=BAND):
    r"""Relative stationarity of ``L`` for the rank-constrained LMNN objective :math:`\varepsilon(L)`.

    :math:`\varepsilon` is piecewise smooth; at a local minimum some triplets usually sit
    exactly on the kink of their hinge (:math:`h_{ijl} = 0`), where no single gradient vanishes.
    The measure is the norm of the smallest element of the convex hull of the gradients of
    the pieces met within ``band`` of the kink,

    .. math::

        g^\star = \min_{w \in [0, 1]^{B}} \Big\lVert 2L\big(G_0 + \mu \textstyle\sum_{t \in B} w_t (C_{ij} - C_{il})\big)\Big\rVert_F,
        \qquad B = \{t : |h_t| \le \text{band}\},

    with :math:`G_0` the gradient of the smooth terms plus :math:`\mu\sum_{h_t > \text{band}} (C_{ij} - C_{il})`
    (a bounded least-squares problem, :func:`scipy.optimize.lsq_linear`; above
    ``MAX_BAND_COLUMNS`` triplets in the band the subgradient with weights ``1[h > 0]``
    is used, an upper bound). It is made scale-free as
    :math:`g^\star \lVert L\rVert_F / \varepsilon(L)` (invariant to rescaling the data, and to
    scaling the objective), the relative directional slope available at ``L``.

    Returns
    -------
    dict with ``relative``, ``gradient_norm`` (:math:`g^\star`), ``objective``, ``band_triplets``
    and ``minimal`` (whether the minimum-norm element was computed).
    """
    _check_problem(problem)
    L = _check_L(L, None, problem.d)
    band = check_real(band, "band", low=0.0)
    rel, gn, value, nb, minimal = _stationarity(_Pieces(problem), L, band)
    return {"relative": rel, "gradient_norm": gn, "objective": value, "band_triplets": nb, "minimal": minimal}


# ----------------------------------------------------------------------------- starts
def _pca_directions(X, r):
    """The top-``r`` principal directions of ``X`` as the rows of an ``(r, d)`` matrix."""
    Xc = X - X.mean(axis=0)
    w, V = np.linalg.eigh(symmetrize(Xc.T @ Xc))
    return V[:, np.argsort(w)[::-1][:r]].T.copy()


def _best_scale(pieces, U):
    r"""``sqrt(s*) U`` with ``s* = argmin_{s >= 0} f(s U^T U)``: ``f(sM)`` is convex in ``s`` (linear pull,
    quadratic Frobenius, hinges of affine functions), minimised by bounded Brent search on
    ``[0, s_max]``, with ``s_max`` the scale beyond which the pull term alone exceeds ``f(0)``."""
    f0 = pieces.mu * pieces.n_triplets
    lin = float(np.sum((U @ pieces.P) * U))
    if f0 <= 0:
        return 0.0 * U
    if lin > 0:
        s_max = f0 / lin
    else:  # no pull: cap the scale where typical differences have length 1e3 x the unit margin
        spread = float(np.mean(np.sum(((pieces.X - pieces.X.mean(axis=0)) @ U.T) ** 2, axis=1)))
        s_max = 1e6 / max(spread, 1e-300)
    fun = lambda s: pieces.evaluate(np.sqrt(max(s, 0.0)) * U)[1]
    res = scipy.optimize.minimize_scalar(fun, bounds=(0.0, s_max), method="bounded",
                                         options={"xatol": 1e-8 * s_max, "maxiter": 200})
    s = float(res.x) if fun(res.x) < f0 else 0.0
    return np.sqrt(s) * U


def _random_start(pieces, r, rng):
    Q, _ = np.linalg.qr(rng.standard_normal((pieces.X.shape[1], r)))
    return _best_scale(pieces, Q.T)


# ------------------------------------------------------------------------- one descent
def _descend(pieces, L0, max_iter, smoothing, band, polish=True):
    """One descent from ``L0``.

    With ``smoothing``: L-BFGS-B on the smoothed objective, the width driven from ``SMOOTH_START``
    down to ``SMOOTH_END * band`` by factors ``SMOOTH_DECREASE`` (each stage warm-started, the iteration
    budget shared between the remaining stages); every stage of width ``<= POLISH_FROM`` is followed by
    a trust-region Newton polish (scipy's ``trust-krylov`` with the exact Hessian-vector product
    :meth:`_Pieces.hessp`), which converges on these ill-conditioned stages where L-BFGS stalls.
    Without: L-BFGS-B on the exact objective with its subgradient, until it stops (relative decrease
    below ``FTOL``, a failed line search at a kink, or ``max_iter``). The best point by exact
    objective seen at any evaluation is returned (never worse than ``L0``)."""
    r, d = L0.shape
    best = {"value": np.inf, "L": L0}

    cache = {}

    def fun(x, s):
        L = x.reshape(r, d)
        value, exact, grad = pieces.evaluate(L, s, cache)
        cache["x"] = x.copy()
        if exact < best["value"]:
            best["value"], best["L"] = exact, L.copy()
        return value, grad.ravel()

    def hessp(x, v, s):
        found = cache.get("found") if np.array_equal(cache.get("x"), x) else None
        return pieces.hessp(x.reshape(r, d), v.reshape(r, d), s, found).ravel()

    def newton(x, s, budget):
        f0 = pieces.evaluate(x.reshape(r, d), s)[0]
        gtol = 0.1 * POLISH_TOL * max(abs(f0), 1e-300) / max(float(np.linalg.norm(x)), 1e-300)
        # a trust-region trial step can overflow on the steep smoothed hinge; such steps are rejected
        # (non-finite value) and a non-finite end point is discarded below, so the warnings carry no news
        with np.errstate(over="ignore", invalid="ignore"):
            return scipy.optimize.minimize(fun, x, args=(s,), jac=True, hessp=hessp, method="trust-krylov",
                                           options={"maxiter": budget, "gtol": gtol})

    if smoothing:
        widths = [SMOOTH_START]
        while widths[-1] > SMOOTH_END * band * (1 + 1e-12):
            widths.append(max(widths[-1] * SMOOTH_DECREASE, SMOOTH_END * band))
    else:
        widths = [0.0]
    x = L0.ravel().copy()
    iters = nfev = 0
    messages = []
    for k, s in enumerate(widths):
        budget = (max_iter - iters) // (len(widths) - k)
        if k == len(widths) - 1:
            budget = max_iter - iters
        if budget <= 0:
            continue
        res = scipy.optimize.minimize(fun, x, args=(s,), jac=True, method="L-BFGS-B",
                                      options={"maxiter": budget, "ftol": FTOL, "gtol": 1e-300, "maxcor": 20})
        x = res.x
        iters += int(res.nit)
        nfev += int(res.nfev)
        messages.append(f"width {s:g}: {res.message}")
        if smoothing and polish and s <= POLISH_FROM and max_iter - iters > 0:
            # Newton polish of the smoothed problem (ill-conditioned: curvature ~ 1/s): a trust region
            # with exact Hessian-vector products converges where L-BFGS stalls; path-following over
            # the widths keeps each Newton start close to its solution
            res = newton(x, s, min(POLISH_MAX_ITER, max_iter - iters))
            if np.all(np.isfinite(res.x)):
                x = res.x
            iters += int(res.nit)
            nfev += int(res.nfev)
            messages.append(f"polish at width {s:g}: {res.message}")
    fun(x, 0.0)
    return best["L"], best["value"], iters, nfev, messages, iters >= max_iter


# ------------------------------------------------------------------------------ bound
def _convex_bound(problem, M, extra=()):
    """The best dual lower bound on the convex optimum from :func:`metricopt.certify` at ``M`` and at
    the candidates in ``extra`` (metrics, or Solutions of the convex problem, whose own certificate
    is used when they carry one)."""
    from .certify import certify

    lows = []
    for cand in (M, *extra):
        if isinstance(cand, Solution):
            if cand.certificate is not None and np.isfinite(cand.certificate.lower):
                lows.append(float(cand.certificate.lower))
                continue
            cand = cand.M
            if cand is None:
                continue
        try:
            lows.append(float(certify(problem, cand).lower))
        except Exception:  # noqa: BLE001 - the bound is information only
            continue
    return max(lows) if lows else -np.inf


def _bound_candidates(convex_bound, problem):
    """``(wanted, extra candidates)`` from the ``convex_bound`` argument (bool, Solution or metric)."""
    if isinstance(convex_bound, (bool, np.bool_)):
        return bool(convex_bound), ()
    if isinstance(convex_bound, Solution):
        return True, (convex_bound,)
    try:
        return True, (problem.check_metric(convex_bound, name="convex_bound"),)
    except InputError as exc:
        raise InputError(f"convex_bound must be True, False, a Solution of the convex problem or a PSD "
                         f"({problem.d}, {problem.d}) metric: {exc}") from None


def _verdict(stats, tol):
    """``(stationary, reason)``: the relative stationarity is at most ``tol``, or the objective is within
    ``tol`` (relative) of the lower bound of the convex relaxation, which bounds the rank-constrained
    optimum from below too (the point is then tol-optimal for the rank-constrained problem)."""
    if stats["stationarity"] <= tol:
        return True, f"relative stationarity {stats['stationarity']:.2e} <= tol {tol:g}"
    gap = stats.get("rel_gap_to_convex_bound", np.inf)
    if gap <= tol:
        return True, (f"objective within {gap:.2e} <= tol {tol:g} of the convex relaxation's lower bound (relative "
                      f"stationarity {stats['stationarity']:.2e})")
    return False, ""


def _with_bound(stats, objective, lower):
    stats["convex_lower_bound"] = lower
    stats["rel_gap_to_convex_bound"] = (float((objective - lower) / max(abs(objective), 1e-12))
                                        if np.isfinite(lower) else float("inf"))


# ------------------------------------------------------------------------------ LMNN-R
def lmnn_r(problem, n_components, n_restarts=3, random_state=0, tol=1e-6, max_iter=2000, smoothing=True,
           init=None, band=BAND, convex_bound=True):
    r"""LMNN-R: learn a rectangular ``L`` (``r x d``) by L-BFGS on the non-convex LMNN loss
    (Weinberger & Saul, JMLR 2009, Section 5.4; Eq. 14 at :math:`M = L^\top L`).

    .. math::

        \min_{L \in \mathbb R^{r\times d}}\ (1-\mu)\sum_{i, j \rightsquigarrow i} \lVert L(x_i - x_j)\rVert^2
        + \mu \sum_{i, j \rightsquigarrow i, l: y_l \ne y_i} [1 + \lVert L(x_i - x_j)\rVert^2
        - \lVert L(x_i - x_l)\rVert^2]_+ + R(L^\top L).

    The problem is not convex: the result is a stationary point at best, reported as
    ``Status.STATIONARY`` when :func:`stationarity` (relative) is at most ``tol`` -- or when the
    objective is within ``tol`` (relative) of the lower bound of the convex relaxation, which
    makes it tol-optimal even for the rank-constrained problem -- else ``Status.ITERATION_LIMIT``;
    never ``OPTIMAL``.

    Method: ``n_restarts`` descents, keeping the lowest objective. The first starts from the
    top-``r`` principal directions of ``X`` (or ``init``), the others from random orthonormal
    rows; each start is scaled by the best factor along its ray (a convex 1-D problem). A
    descent runs scipy's L-BFGS-B on the value and gradient :math:`2LG` (see
    :func:`low_rank_objective`). With ``smoothing`` (default) the hinge is replaced by its Huber
    smoothing :math:`\phi_s` of width :math:`s` driven from 1 down to ``0.02 * band`` by factors of
    10 (continuation), each stage of width :math:`\le 10^{-3}` followed by a trust-region Newton
    polish with exact Hessian-vector products. Without it, L-BFGS-B runs on the hinge itself with
    the subgradient ``1[h > 0]`` and stops when its line search fails at a kink, its relative
    decrease falls below ``FTOL`` (1e-13) or at ``max_iter``. Measured on iris and wine
    (standardised), smoothing reaches lower objectives at every rank and ends stationary, the
    plain subgradient version never does (its relative stationarity stays at 1e-3 .. 1e-1).

    The stats also give a *lower bound* for information: the dual bound of
    :func:`metricopt.certify` at :math:`L^\top L` bounds the convex (full-rank) optimum, which
    bounds the rank-:math:`r` optimum from below. ``rel_gap_to_convex_bound`` is a bound on the
    suboptimality, not a certificate of the rank-constrained problem: for :math:`r < d` the
    relaxation is rarely tight and the gap does not close.

    Parameters
    ----------
    problem : LMNNProblem
    n_components : int
        The rank ``r``, ``1 <= r <= d``.
    n_restarts : int, default 3
    random_state : int or None, default 0
        Seed of the random starts.
    tol : float, default 1e-6
        Relative stationarity under which a descent is declared stationary.
    max_iter : int, default 2000
        L-BFGS-B and Newton iterations per restart (shared by the continuation stages).
    smoothing : bool, default True
        Huber-smoothed hinge with continuation (True) or the plain hinge (False).
    init : (r, d) array, optional
        First start instead of the PCA directions (used as given, not rescaled).
    band : float, default 1e-6
        Half-width of the kink band of :func:`stationarity` (the last smoothing width is ``0.02 * band``).
    convex_bound : bool, Solution or (d, d) array, default True
        Compute the lower bound of the convex relaxation (a dual certificate computation) at
        :math:`L^\top L`; a Solution (or metric) of the convex problem given here is certified
        too (its own certificate reused), which gives a tighter bound.

    Returns
    -------
    Solution
        ``M = L^T L``, ``L`` the ``(r, d)`` factor (``solution.L``), objective by
        ``problem.objective``. ``stats``: ``restarts`` (per restart: start, objective,
        iterations, function evaluations, stationarity, status), ``best_restart``,
        ``iterations``, ``gradient_norm``, ``stationarity``, ``convex_lower_bound``,
        ``rel_gap_to_convex_bound``, ``time``.
    """
    t0 = time.perf_counter()
    _check_problem(problem)
    r = _check_rank(n_components, problem.d)
    n_restarts = check_int(n_restarts, "n_restarts", low=1)
    tol = check_real(tol, "tol", low=0.0)
    max_iter = check_int(max_iter, "max_iter", low=1)
    band = check_real(band, "band", low=0.0, low_open=True)
    if not isinstance(smoothing, (bool, np.bool_)):
        raise InputError(f"smoothing must be True (smoothed hinge with continuation) or False; got {smoothing!r}.")
    if init is not None:
        init = _check_L(init, r, problem.d, "init")
    want_bound, bound_extra = _bound_candidates(convex_bound, problem)
    pieces = _Pieces(problem)
    rng = np.random.default_rng(random_state)

    runs, best = [], None
    for k in range(n_restarts):
        if k == 0:
            start, L0 = ("init", init) if init is not None else ("pca", _best_scale(pieces, _pca_directions(problem.X, r)))
        else:
            start, L0 = "random", _random_start(pieces, r, rng)
        L, value, iters, nfev, msgs, hit_limit = _descend(pieces, L0, max_iter, bool(smoothing), band)
        rel, gn, _, nb, minimal = _stationarity(pieces, L, band)
        status = Status.STATIONARY if rel <= tol else Status.ITERATION_LIMIT
        run = {"start": start, "objective": value, "iterations": iters, "function_evaluations": nfev,
               "hit_limit": hit_limit,
               "stationarity": rel, "gradient_norm": gn, "band_triplets": nb, "minimal_subgradient": minimal,
               "status": status.code, "lbfgs": msgs, "L": L}
        runs.append(run)
        if best is None or value < best["objective"]:
            best = run
    L = best["L"]
    M = symmetrize(L.T @ L)
    objective = problem.objective(M)
    stats = {
        "method": "LMNN-R", "n_components": r, "smoothing": bool(smoothing), "band": band, "tol": tol,
        "restarts": [{k: v for k, v in run.items() if k != "L"} for run in runs],
        "restart_objectives": [run["objective"] for run in runs],
        "best_restart": runs.index(best), "iterations": best["iterations"],
        "total_iterations": sum(run["iterations"] for run in runs),
        "gradient_norm": best["gradient_norm"], "stationarity": best["stationarity"],
        "objective_in_L": best["objective"],
    }
    if want_bound:
        _with_bound(stats, objective, _convex_bound(problem, M, bound_extra))
    ok, why = _verdict(stats, tol)
    status = Status.STATIONARY if ok else Status.ITERATION_LIMIT
    if ok:
        message = f"{status.message}: LMNN-R rank {r}, {why} (best of {n_restarts} restart(s))"
    elif best["hit_limit"]:
        message = (f"LMNN-R rank {r}: the iteration limit max_iter={max_iter} was reached with relative "
                   f"stationarity {best['stationarity']:.2e} > tol {tol:g}; the point is not shown stationary. "
                   "Raise max_iter")
    else:
        message = (f"LMNN-R rank {r}: the descent stopped (no further decrease in floating point) with relative "
                   f"stationarity {best['stationarity']:.2e} > tol {tol:g}; the point is not shown stationary. "
                   "Try more restarts, a larger band or a looser tol")
    if "rel_gap_to_convex_bound" in stats:
        message += (f"; objective is within {stats['rel_gap_to_convex_bound']:.2e} (relative) of a lower bound on "
                    "the convex relaxation (a bound, not a certificate of the rank-constrained problem)")
    stats["time"] = time.perf_counter() - t0
    return Solution(M=M, objective=objective, status=status, backend="scipy", solver="L-BFGS-B", stats=stats,
                    message=message + ".", L=L)


# ------------------------------------------------------------------------------ LMNN-S
def truncate_metric(M, n_components):
    r"""The rank-``r`` eigen-truncation of a PSD ``M``: ``L_r = diag(sqrt(lambda_1..r)) U_r^T``.

    ``lambda_1 >= ... >= lambda_d`` are the eigenvalues of ``(M + M^T)/2`` (negative ones clipped
    to 0) and ``U_r`` the matching eigenvectors; ``L_r^T L_r`` is the best rank-``r`` PSD
    approximation of ``M`` in Frobenius norm (Eckart-Young). Weinberger & Saul, JMLR 2009,
    Section 5.4 (LMNN-S).

    Returns
    -------
    L_r : (r, d) ndarray
    eigenvalues : (d,) ndarray, decreasing
    """
    M = np.asarray(M, dtype=np.float64)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or not np.all(np.isfinite(M)):
        raise InputError(f"M must be a finite square matrix; got shape {M.shape}.")
    r = _check_rank(n_components, M.shape[0])
    w, V = np.linalg.eigh(symmetrize(M))
    order = np.argsort(w)[::-1]
    w, V = np.clip(w[order], 0.0, None), V[:, order]
    return np.sqrt(w[:r])[:, None] * V[:, :r].T, w


def lmnn_s(problem, n_components, tol=1e-6, backend="cvxpy", convex_solution=None, convex_bound=True,
           band=BAND, **solve_options):
    r"""LMNN-S: solve the convex LMNN problem, then truncate its solution to rank ``r``
    (Weinberger & Saul, JMLR 2009, Section 5.4).

    .. math::

        M^\star = \arg\min_{M \succeq 0} f(M)\ \text{(Eq. 14)}, \qquad
        L_r = \operatorname{diag}(\sqrt{\lambda_1}, \dots, \sqrt{\lambda_r})\, U_r^\top,

    with :math:`M^\star = U \operatorname{diag}(\lambda) U^\top`, :math:`\lambda` decreasing. The
    objective lost, :math:`f(L_r^\top L_r) - f(M^\star)`, is reported in the stats.

    The truncated point is feasible for the rank-constrained problem but carries no optimality
    guarantee for it. Status: the convex solve's status when that was not optimal; otherwise
    ``STATIONARY`` when :func:`stationarity` of :math:`L_r` is at most ``tol`` or its objective is
    within ``tol`` of the convex lower bound (e.g. when :math:`M^\star` has rank :math:`\le r` and
    nothing is lost), and ``HEURISTIC`` when neither holds (the truncation left a
    suboptimal point); never ``OPTIMAL``.

    Parameters
    ----------
    problem : LMNNProblem
    n_components : int
    tol : float
        Relative stationarity threshold (see above).
    backend : {"cvxpy", "jax"}
        Backend of the convex solve; ``**solve_options`` go to ``problem.solve``.
    convex_solution : Solution or (d, d) array, optional
        A solution of the convex problem to truncate (no solve then); a bare metric is certified
        with :func:`metricopt.certify` (optimal when its relative gap is at most ``tol``).
    convex_bound : bool, Solution or (d, d) array
        Also report the dual lower bound of the convex problem (see :func:`lmnn_r`); the convex
        solution's own certificate is used too.
    band : float
        Kink band of :func:`stationarity`.

    Returns
    -------
    Solution
        ``L`` the ``(r, d)`` truncation; stats: ``convex_objective``, ``truncation_loss``
        (absolute), ``rel_truncation_loss``, ``eigenvalues``, ``convex_status``,
        ``stationarity``, ``convex_lower_bound``, ``rel_gap_to_convex_bound``, ``time``.
    """
    t0 = time.perf_counter()
    _check_problem(problem)
    r = _check_rank(n_components, problem.d)
    tol = check_real(tol, "tol", low=0.0)
    band = check_real(band, "band", low=0.0, low_open=True)
    if convex_solution is None:
        sol = problem.solve(backend=backend, **solve_options)
    elif isinstance(convex_solution, Solution):
        if solve_options:
            raise InputError(f"solve options {sorted(solve_options)} are unused when convex_solution is given.")
        sol = convex_solution
    else:
        if solve_options:
            raise InputError(f"solve options {sorted(solve_options)} are unused when convex_solution is given.")
        from .certify import certify

        Mc = problem.check_metric(convex_solution, name="convex_solution")
        cert = certify(problem, Mc, tol=max(tol, 1e-12))
        ok = cert.is_optimal
        sol = Solution(M=Mc, objective=problem.objective(Mc), status=Status.OPTIMAL if ok else Status.OPTIMAL_INACCURATE,
                       backend="given", solver="given", certificate=cert,
                       message=f"a metric given by the caller, certified relative gap {cert.rel_gap:.2e}")
    if sol.M is None:
        return Solution(M=None, objective=float("nan"), status=sol.status, backend=sol.backend, solver=sol.solver,
                        stats={"method": "LMNN-S", "n_components": r, "convex_status": sol.status.code},
                        message=f"LMNN-S: the convex solve returned no metric ({sol.status}: {sol.message}).")
    L, eig = truncate_metric(sol.M, r)
    M = symmetrize(L.T @ L)
    objective = problem.objective(M)
    convex_objective = problem.objective(project_psd(sol.M))
    pieces = _Pieces(problem)
    rel, gn, _, nb, minimal = _stationarity(pieces, L, band)
    loss = objective - convex_objective
    stats = {
        "method": "LMNN-S", "n_components": r, "convex_objective": convex_objective, "truncation_loss": loss,
        "rel_truncation_loss": float(loss / max(abs(convex_objective), 1e-12)), "eigenvalues": eig,
        "dropped_eigenvalue_sum": float(eig[r:].sum()), "convex_status": sol.status.code,
        "convex_stats": sol.stats, "stationarity": rel, "gradient_norm": gn, "band_triplets": nb,
        "minimal_subgradient": minimal, "iterations": int(sol.stats.get("iterations", 0)),
    }
    want_bound, bound_extra = _bound_candidates(convex_bound, problem)
    if want_bound:
        _with_bound(stats, objective, _convex_bound(problem, M, (sol, *bound_extra)))
    ok, why = _verdict(stats, tol)
    if sol.status is not Status.OPTIMAL:
        status = sol.status if sol.status.has_point else Status.ERROR
        message = (f"LMNN-S: the convex solve ended with status '{sol.status}' ({sol.message}); its truncation to "
                   f"rank {r} inherits it")
    elif ok:
        status = Status.STATIONARY
        message = (f"{status.message}: LMNN-S rank {r}, truncation of the convex optimum, {why}; objective lost "
                   f"by the truncation {loss:.3g}")
    else:
        status = Status.HEURISTIC
        message = (f"LMNN-S rank {r}: truncation of the convex optimum, a feasible rank-{r} point but not a "
                   f"stationary one (relative stationarity {rel:.2e} > tol {tol:g}); objective lost by the "
                   f"truncation {loss:.3g} ({stats['rel_truncation_loss']:.2e} relative). LMNN-R (method='R') "
                   "descends further")
    if want_bound:
        message += (f"; objective within {stats['rel_gap_to_convex_bound']:.2e} (relative) of a lower bound on the "
                    "convex relaxation (a bound, not a certificate of the rank-constrained problem)")
    stats["time"] = time.perf_counter() - t0
    return Solution(M=M, objective=objective, status=status, backend=sol.backend, solver=sol.solver, stats=stats,
                    message=message + ".", L=L)


# ------------------------------------------------------------------------------- entry
def lmnn_low_rank(problem, n_components, method="R", n_restarts=3, random_state=0, tol=1e-6, max_iter=2000,
                  backend="cvxpy", convex_bound=True, **solve_options):
    r"""Low-rank LMNN (Weinberger & Saul, JMLR 10:207-244, 2009, Section 5.4): a rank-``r`` metric
    ``M = L^T L`` with ``L`` of shape ``(r, d)``.

    .. math::

        \min_{L \in \mathbb R^{r\times d}} f(L^\top L), \qquad f \text{ the LMNN objective of Eq. 14}.

    Parameters
    ----------
    problem : LMNNProblem
    n_components : int
        The rank ``r``, ``1 <= r <= d``.
    method : {"R", "S"}, default "R"
        ``"R"``: learn ``L`` directly by L-BFGS on the non-convex loss (:func:`lmnn_r`).
        ``"S"``: solve the convex problem, then keep its top ``r`` eigenpairs (:func:`lmnn_s`).
    n_restarts, random_state, max_iter : LMNN-R only
        Restarts (the first from the PCA directions, the rest random), their seed, and
        L-BFGS-B iterations per restart.
    tol : float, default 1e-6
        Relative stationarity threshold (both methods; see :func:`stationarity`).
    backend : {"cvxpy", "jax"}, default "cvxpy"
        LMNN-S only: backend of the convex solve.
    convex_bound : bool, Solution or (d, d) array, default True
        Report the dual lower bound of the convex relaxation (``stats["convex_lower_bound"]``,
        ``stats["rel_gap_to_convex_bound"]``): a bound, not a certificate of the rank-constrained
        problem. A Solution (or metric) of the convex problem given here tightens it.
    **solve_options
        LMNN-R: ``smoothing`` (bool), ``init`` (an ``(r, d)`` first start), ``band``.
        LMNN-S: options of ``problem.solve`` (e.g. ``tol``, ``max_iter``, ``solver``) and
        ``convex_solution`` (a convex Solution to truncate instead of solving), ``band``.

    Returns
    -------
    Solution
        ``solution.L`` is the ``(r, d)`` factor, ``solution.M = L^T L``; status ``STATIONARY``,
        ``ITERATION_LIMIT`` or (LMNN-S) ``HEURISTIC`` / the convex solve's, never ``OPTIMAL``.

    Raises
    ------
    InputError
        ``n_components`` outside ``[1, d]``, a problem other than a single-metric LMNNProblem.
    UnknownOptionError
        An unknown ``method`` or LMNN-R option.
    """
    m = check_choice(method, "method", METHODS)
    if m == "R":
        unknown = sorted(set(solve_options) - set(R_OPTIONS))
        if unknown:
            raise UnknownOptionError(
                f"unknown option(s) {unknown} for method='R'; its options are: "
                f"{', '.join(R_OPTIONS)} (plus n_restarts, random_state, tol, max_iter, convex_bound)."
            )
        return lmnn_r(problem, n_components, n_restarts=n_restarts, random_state=random_state, tol=tol,
                      max_iter=max_iter, convex_bound=convex_bound, **solve_options)
    return lmnn_s(problem, n_components, tol=tol, backend=backend, convex_bound=convex_bound, **solve_options)
