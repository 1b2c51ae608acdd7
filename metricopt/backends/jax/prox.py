r"""Proximal steps of the JAX backend: non-smooth terms composed with the feasible set.

The loop minimises :math:`F(M) = f(M) + \sum_i R_i(M) + \iota_C(M)` with :math:`f` the smooth (or smoothed)
terms and :math:`C` the geometry's feasible set (LMNN: the PSD cone), by proximal-gradient (FISTA) steps
(Beck & Teboulle, *A fast iterative shrinkage-thresholding algorithm for linear inverse problems*, SIAM J.
Imaging Sci. 2(1), 2009):

.. math::

    M^+ = \operatorname{prox}_{t g}\big(Y - t \nabla f(Y)\big), \qquad g = \sum_i R_i + \iota_C,\quad t = 1/L .

Which terms are *composite* (leave :math:`f` for :math:`g`) is read from their declarations
(:mod:`metricopt.problems.regularizers`): ``jax_prox(data, M, step)`` (the prox of ``step * R`` over
symmetric matrices), ``jax_prox_psd(data, M, step)`` (optional: the exact prox of ``step * R`` plus the PSD
cone's indicator) and ``jax_indicator`` (the term is a set's indicator: ``jax_prox_psd`` projects onto the
set intersected with the PSD cone). Composite terms need the plain PSD geometry (``Z = M``; no
preconditioner, whose congruence ``M = T Z T`` would change the proxes); an indicator term is composite for
every solver (its projection replaces the geometry's), a prox term only for a solver that takes proximal steps
(:attr:`~.solvers.Solver.proximal`, FISTA), otherwise it is minimised through its smoothed JAX value.

How :math:`\operatorname{prox}_{tg}` is computed (:func:`prox`), since the prox of a sum is not the
composition of the proxes:

* no prox term: the projection onto :math:`C` (the geometry's, or an indicator term's exact projection onto
  its set :math:`\cap` PSD, e.g. the trace ball);
* one prox term that declares ``jax_prox_psd`` and no indicator term: that closed form;
* otherwise the **fast dual proximal gradient** method (FDPG; Beck & Teboulle, *A fast dual proximal gradient
  algorithm for convex minimization and applications*, Oper. Res. Lett. 42(1), 2014). The problem
  :math:`\min_Z \sum_{i=1}^m t R_i(Z) + \tfrac12\|Z - A\|_F^2 + \iota_C(Z)` has a 1-strongly convex part
  :math:`h = \tfrac12\|\cdot - A\|^2 + \iota_C`, whose conjugate has the gradient
  :math:`Z(U) = P_C(A - \sum_i U_i)`, :math:`m`-Lipschitz in :math:`U = (U_1, \dots, U_m)`; the dual
  :math:`\max_U -h^*(-\sum_i U_i) - \sum_i (tR_i)^*(U_i)` is solved by accelerated proximal gradient ascent
  with step :math:`1/m`, each :math:`\operatorname{prox}` of a conjugate by Moreau's identity
  :math:`\operatorname{prox}_{(tR)^*/m}(V) = V - \operatorname{prox}_{m t R}(m V)/m` (Bauschke & Combettes,
  *Convex Analysis and Monotone Operator Theory in Hilbert Spaces*, 2011, Thm 14.3; for :math:`m = 1` and
  without momentum this is Dykstra's algorithm for the prox of a sum, ibid. Thm 29.2). It needs only the
  terms' own ``jax_prox`` and the projection onto :math:`C`. Every primal point :math:`Z(U)` lies in
  :math:`C` (feasible, exactly: it is a projection), whatever the accuracy. The dual iterate is kept in the
  solver's state between steps (warm start, rescaled by the ratio of the steps, as :math:`U_i \in t\,\partial
  R_i`), so that near convergence of the outer loop a few inner iterations suffice; the inner loop stops when
  :math:`\|Z_k - Z_{k-1}\|_F \le` ``inner_tol`` :math:`\|Z_k\|_F` or after ``max_inner`` iterations (FDPG's primal
  iterates converge at the rate :math:`O(1/k)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ...errors import InputError
from ...protocols import IndicatorTerm, ProxTerm, PsdProxTerm

#: inner FDPG iterations per proximal step of the loop, at most (warm-started: usually far fewer)
INNER_MAX = 50
#: the inner loop stops once its primal iterate moves by less than this, relative to its norm
INNER_TOL = 1e-12
#: inner iterations for the first-order optimality measure (a cold start at a long step, once per re-check)
CHECK_INNER_MAX = 5000


@dataclass(frozen=True)
class Composite:
    """Which terms of the loop leave the smooth objective (static: an argument of the jitted loop).

    ``constraint``: the index of the indicator term whose ``jax_prox_psd`` projects onto the feasible set
    (``None``: the geometry's projection); ``prox``: the indices of the prox terms; ``exact``: whether their prox
    with the feasible set is the one term's closed form ``jax_prox_psd`` (else :attr:`n_dual` multipliers of the
    inner dual loop)."""

    constraint: int | None = None
    prox: tuple = ()
    exact: bool = False

    @property
    def indices(self) -> frozenset:
        """The composite terms (evaluated exactly, outside the smooth part)."""
        return frozenset(self.prox) | (frozenset() if self.constraint is None else frozenset({self.constraint}))

    @property
    def n_dual(self) -> int:
        """Multipliers of the inner dual loop (0 when the prox is exact or there is none)."""
        return 0 if self.exact else len(self.prox)

    def __bool__(self) -> bool:
        return bool(self.indices)


#: no composite term: the loop is the projected-gradient one
NONE = Composite()


def declares_prox(term: Any) -> bool:
    """Whether a term declares a proximal map (``jax_prox``, :class:`~metricopt.protocols.ProxTerm`) for the loop's
    proximal steps.

    Parameters
    ----------
    term : Term
        A term of the problem.

    Returns
    -------
    bool
        Whether ``term`` is a :class:`~metricopt.protocols.ProxTerm`.
    """
    return isinstance(term, ProxTerm)


def declares_indicator(term: Any) -> bool:
    """Whether a term is a set's indicator with a projection onto the set intersected with the PSD cone
    (:class:`~metricopt.protocols.IndicatorTerm` with ``jax_indicator`` true).

    Parameters
    ----------
    term : Term
        A term of the problem.

    Returns
    -------
    bool
        Whether ``term`` is an :class:`~metricopt.protocols.IndicatorTerm` whose ``jax_indicator`` is true.
    """
    return isinstance(term, IndicatorTerm) and bool(term.jax_indicator)


def plan(terms: Sequence[Any], geometry: Any, proximal: bool) -> Composite:
    """The :class:`Composite` split of ``terms`` on ``geometry`` (a :class:`~.geometry.Parametrization`) for a solver that
    takes proximal steps (``proximal``) or not. Prox terms on another geometry, or with a solver that takes no
    proximal steps, stay in the smooth part (their smoothed JAX value).

    Parameters
    ----------
    terms : sequence of Term
        The problem's terms, in the loop's order.
    geometry : Parametrization
        The feasible set's parametrization; composite terms need the plain PSD one (``Z = M``).
    proximal : bool
        Whether the solver takes proximal steps (:attr:`~.solvers.Solver.proximal`).

    Returns
    -------
    Composite
        The indicator term (if any), the prox terms and whether their prox with the PSD cone is exact.

    Raises
    ------
    InputError
        When an indicator term is on a geometry other than the plain PSD one, declares no ``jax_prox_psd``, or
        when there is more than one indicator term.
    """
    plain = geometry.kind == "psd" and not geometry.scaled and not geometry.diagonal
    indicators = [i for i, t in enumerate(terms) if declares_indicator(t)]
    if indicators and not plain:
        names = ", ".join(terms[i].describe() for i in indicators)
        raise InputError(f"backend='jax' enforces the constraint term(s) {names} by projecting onto their set within "
                         f"the PSD cone of a full metric M = Z, not on the geometry '{geometry.kind}'"
                         f"{' (preconditioned)' if geometry.scaled else ''}. Use backend='cvxpy'.")
    lacking = [terms[i].describe() for i in indicators if not isinstance(terms[i], PsdProxTerm)]
    if lacking:
        raise InputError(f"the constraint term(s) {', '.join(lacking)} declare jax_indicator but no jax_prox_psd (the "
                         "projection onto their set within the PSD cone, metricopt.protocols.PsdProxTerm) the JAX "
                         "loop needs. Give them one, or use backend='cvxpy'.")
    if len(indicators) > 1:
        names = ", ".join(terms[i].describe() for i in indicators)
        raise InputError(f"backend='jax' takes at most one constraint term (its projection with the PSD cone is the "
                         f"feasible set's); got {names}. Keep the tightest one, or use backend='cvxpy'.")
    prox = tuple(i for i, t in enumerate(terms) if declares_prox(t) and not declares_indicator(t)) \
        if (proximal and plain) else ()
    exact = len(prox) == 1 and not indicators and isinstance(terms[prox[0]], PsdProxTerm)
    return Composite(constraint=indicators[0] if indicators else None, prox=prox, exact=exact)


def project(composite: Composite, term_classes: tuple, data: tuple, geometry: Any, Z: Any) -> Any:
    """The projection onto the feasible set (the geometry's, or the indicator term's within the PSD cone).

    Parameters
    ----------
    composite : Composite
        The split of the terms (:func:`plan`).
    term_classes : tuple
        The terms' classes, in the loop's order (their static JAX methods).
    data : tuple
        Each term's JAX data (a pytree), in the same order.
    geometry : Parametrization
        The feasible set's parametrization.
    Z : jax.Array
        The point to project.

    Returns
    -------
    jax.Array
        :math:`P_C(Z)`.
    """
    c = composite.constraint
    if c is None:
        return geometry.project(Z)
    return term_classes[c].jax_prox_psd(data[c], Z, None)


def prox(composite: Composite, term_classes: tuple, data: tuple, geometry: Any, A: Any, step: Any, dual: Any = None,
         max_inner: int = INNER_MAX, inner_tol: float = INNER_TOL) -> tuple[Any, Any]:
    r"""``(Z, dual)``: :math:`Z = \operatorname{prox}_{t g}(A)` (``t = step``; see the module docstring) and the inner
    loop's multipliers ``dual`` (shape ``(m, n, n)``, warm start and result; ``None`` when there is no inner
    loop). ``dual`` is expected at the scale of ``step``: the caller rescales a warm start taken at another step.

    The inner loop is the fast dual proximal gradient method (Beck & Teboulle, Oper. Res. Lett. 42(1), 2014)
    described in the module docstring.

    Parameters
    ----------
    composite : Composite
        The split of the terms (:func:`plan`).
    term_classes : tuple
        The terms' classes, in the loop's order (their static JAX methods).
    data : tuple
        Each term's JAX data (a pytree), in the same order.
    geometry : Parametrization
        The feasible set's parametrization.
    A : jax.Array
        The point whose prox is taken (the gradient step's result).
    step : jax.Array or float
        The step ``t``.
    dual : jax.Array or None, optional
        The inner loop's warm start, shape ``(m, n, n)`` (``None``: zeros).
    max_inner : int, optional
        Inner iterations at most.
    inner_tol : float, optional
        The inner loop stops when :math:`\|Z_k - Z_{k-1}\|_F \le` ``inner_tol`` :math:`\|Z_k\|_F`.

    Returns
    -------
    Z : jax.Array
        :math:`\operatorname{prox}_{t g}(A)`, in the feasible set.
    dual : jax.Array or None
        The inner loop's multipliers (``dual`` unchanged when there is no inner loop).
    """
    import jax.numpy as jnp
    from jax import lax

    if not composite.prox:
        return project(composite, term_classes, data, geometry, A), dual
    if composite.exact:
        i = composite.prox[0]
        return term_classes[i].jax_prox_psd(data[i], A, step), dual
    P = lambda B: project(composite, term_classes, data, geometry, B)
    m = len(composite.prox)
    proxes = [(term_classes[i].jax_prox, data[i]) for i in composite.prox]
    U0 = jnp.zeros((m,) + A.shape, A.dtype) if dual is None else dual

    def ascent(W):
        """One proximal-gradient ascent step of the dual from ``W``: ``(U, Z(W))``."""
        Z = P(A - jnp.sum(W, axis=0))
        V = W + Z[None] / m
        return jnp.stack([V[k] - f(dat, m * V[k], m * step) / m for k, (f, dat) in enumerate(proxes)]), Z

    def cond(c):
        k, _, _, _, _, moved = c
        return (k < max_inner) & moved

    def body(c):
        k, U, U_prev, t, Z_prev, _ = c
        t_next = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * t * t))
        W = U + ((t - 1.0) / t_next) * (U - U_prev)
        U_new, Z = ascent(W)
        change = jnp.sqrt(jnp.sum((Z - Z_prev) ** 2))
        moved = (k == 0) | (change > inner_tol * jnp.sqrt(jnp.sum(Z * Z)))
        return k + 1, U_new, U, t_next, Z, moved

    one = jnp.ones((), A.dtype)
    init = (jnp.zeros((), jnp.int32), U0, U0, one, A, jnp.ones((), bool))
    _, U, _, _, _, _ = lax.while_loop(cond, body, init)
    return P(A - jnp.sum(U, axis=0)), U
