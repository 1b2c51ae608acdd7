"""The one jitted solver loop of the JAX backend.

:func:`run_chunk` runs ``n_steps`` iterations of a solver's ``update`` (after its
``refresh``) on the objective assembled from the problem's terms, each term
contributing its own JAX piece (``Term.jax_value_grad``). It is compiled once per
solver, term classes, data shapes and active-set capacity bucket: the data, the
active set and the solver state are dynamic inputs.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from . import prox as _prox
from .geometry import project_psd  # noqa: F401  (re-exported: the JAX backend's one PSD projection)
from .prox import NONE

#: how many times :func:`run_chunk` has been traced (a Python side effect: it only
#: runs while JAX traces, i.e. compiles, the loop)
TRACES = {"run_chunk": 0}


class Objective:
    """The problem's objective assembled from its terms' JAX pieces, on the solver's matrix ``Z``:
    ``objective(Z, s) -> (value, exact_value, gradient)``, the sum over the terms (``value``
    smoothed with width ``s`` where a term is non-smooth, ``exact_value`` not), each term
    with working set evaluated over its (padded) active set; ``Z`` is mapped to the problem's
    variables and the gradient back by the :class:`~.geometry.Parametrization`, whose projection
    is ``objective.project``.

    With ``composite`` terms (:class:`~.prox.Composite`: non-smooth terms with a prox, a constraint term
    with a projection) the objective is split, :math:`F = f + g`: the gradient is :math:`f`'s only,
    ``value`` is :math:`f + g` with :math:`g` the composite terms' exact values (:meth:`split` gives both),
    ``project`` includes the constraint term's set, and :meth:`prox` is the proximal map of :math:`g` (with the
    feasible set). Without composite terms, ``g = 0`` and ``prox`` is ``project``."""

    def __init__(self, term_classes, data, actives, geometry, gdata, roles=(), composite=NONE):
        self.parts = tuple(zip(term_classes, data, actives))
        self.roles = tuple(roles) or (None,) * len(self.parts)
        self.geometry, self.gdata = geometry, gdata
        self.term_classes, self.data = tuple(term_classes), tuple(data)
        self.composite = composite

    def split(self, Z: Any, s: Any) -> tuple[Any, Any, Any, Any]:
        """``(f, g, exact_value, gradient of f)``: the smooth part (smoothed with width ``s``), the composite
        terms' exact value, the exact objective, and the smooth part's gradient.

        Parameters
        ----------
        Z : jax.Array
            The solver's matrix.
        s : jax.Array or float
            The smoothing width of the non-smooth terms in the smooth part.

        Returns
        -------
        f : jax.Array
            The smooth part's (smoothed) value.
        g : jax.Array or float
            The composite terms' exact value (0 without composite terms).
        exact_value : jax.Array
            The exact objective (no smoothing).
        gradient : jax.Array
            The gradient of ``f`` in ``Z`` (:meth:`~.geometry.Parametrization.pack_grad`).
        """
        V = self.geometry.unpack(Z, self.gdata)
        value = exact = 0.0
        nonsmooth = 0.0
        grads: dict = {}
        skip = self.composite.indices
        for idx, (cls, dat, act) in enumerate(self.parts):
            if idx in skip:
                v = cls.jax_value(dat, V, act, 0.0)
                nonsmooth, exact = nonsmooth + v, exact + v
                continue
            v, e, g = cls.jax_value_grad(dat, V, act, s)
            value, exact = value + v, exact + e
            for name, gv in g.items():
                grads[name] = grads[name] + gv if name in grads else gv
        return value, nonsmooth, exact, self.geometry.pack_grad(grads, Z, self.gdata)

    def __call__(self, Z, s):
        f, g, exact, grad = self.split(Z, s)
        return (f + g if self.composite else f), exact, grad

    def project(self, Z: Any) -> Any:
        """The projection onto the feasible set (the geometry's, or a constraint term's; :func:`.prox.project`).

        Parameters
        ----------
        Z : jax.Array
            The solver's matrix.

        Returns
        -------
        jax.Array
            The projection of ``Z``.
        """
        return _prox.project(self.composite, self.term_classes, self.data, self.geometry, Z)

    def prox(self, A: Any, step: Any, dual: Any = None, max_inner: int = _prox.INNER_MAX,
             inner_tol: float = _prox.INNER_TOL) -> tuple[Any, Any]:
        """``(prox_{step g}(A), dual)`` (:func:`.prox.prox`; ``dual``: the inner loop's warm start and result).

        Parameters
        ----------
        A : jax.Array
            The point whose prox is taken.
        step : jax.Array or float
            The step ``t`` of ``prox_{t g}``.
        dual : jax.Array or None, optional
            The inner loop's warm start (``None``: cold).
        max_inner : int, optional
            Inner iterations at most.
        inner_tol : float, optional
            The inner loop's relative tolerance on the primal iterate's moves.

        Returns
        -------
        Z : jax.Array
            ``prox_{step g}(A)``, feasible.
        dual : jax.Array or None
            The inner loop's multipliers.
        """
        return _prox.prox(self.composite, self.term_classes, self.data, self.geometry, A, step, dual, max_inner, inner_tol)

    def loss_data(self, loss: str) -> Any:
        """The data of the first term whose dual piece declares the loss ``loss`` (e.g. the pairs of
        ``"pair_hinge"`` an online solver visits).

        Parameters
        ----------
        loss : str
            The loss's name as the term's role declares it (e.g. ``"pair_hinge"``).

        Returns
        -------
        dict
            That term's JAX data.

        Raises
        ------
        StopIteration
            When no term declares ``loss``.
        """
        return next(dat for (_, dat, _), role in zip(self.parts, self.roles) if role == loss)


@functools.partial(jax.jit, static_argnames=("solver", "term_classes", "geometry", "roles", "composite"))
def run_chunk(solver: Any, term_classes: tuple, geometry: Any, data: tuple, gdata: dict, actives: tuple, state: dict,
              n_steps: Any, roles: tuple = (), composite: Any = NONE) -> dict:
    """``solver.refresh``, then ``solver.update`` iterations until ``n_steps`` (dynamic) of them ran
    or ``solver.converged(state)`` (e.g. the smoothed problem is solved); all jitted. The state's
    ``iterations`` counts the updates.

    Parameters
    ----------
    solver : Solver
        The solver (static; :mod:`.solvers`).
    term_classes : tuple
        The terms' classes (static: their JAX methods).
    geometry : Parametrization
        The feasible set's parametrization (static).
    data : tuple
        Each term's JAX data (a pytree).
    gdata : dict
        The geometry's arrays (``T``).
    actives : tuple
        Per term, its padded active set (JAX arrays) or ``None``.
    state : dict
        The solver's state.
    n_steps : jax.Array
        Iterations at most (an int32 scalar; dynamic: no recompilation when it changes).
    roles : tuple, optional
        Each term's loss role (static; :meth:`Objective.loss_data`).
    composite : Composite, optional
        The terms that leave the smooth part (static; :func:`.prox.plan`).

    Returns
    -------
    dict
        The solver's state after the chunk, ``iterations`` increased by the updates run.
    """
    TRACES["run_chunk"] += 1
    objective = Objective(term_classes, data, actives, geometry, gdata, roles, composite)
    state = solver.refresh(objective, state)

    def cond(carry):
        i, st = carry
        return (i < n_steps) & ~solver.converged(st)

    def body(carry):
        i, st = carry
        return i + 1, solver.update(objective, st)

    steps, state = lax.while_loop(cond, body, (jnp.zeros((), jnp.int32), state))
    return {**state, "iterations": state["iterations"] + steps}


@functools.partial(jax.jit, static_argnames=("term_classes", "geometry", "roles", "composite"))
def evaluate_objective(term_classes: tuple, geometry: Any, data: tuple, gdata: dict, actives: tuple, Z: Any, s: Any,
                       roles: tuple = (), composite: Any = NONE) -> tuple[Any, Any, Any]:
    """``Objective(...)(Z, s)`` jitted once per term classes, geometry and shapes (a host-side evaluation
    of the loop's objective: run eagerly, each of its primitives would be compiled on its own).

    Parameters
    ----------
    term_classes : tuple
        The terms' classes (static: their JAX methods).
    geometry : Parametrization
        The feasible set's parametrization (static).
    data : tuple
        Each term's JAX data (a pytree).
    gdata : dict
        The geometry's arrays (``T``).
    actives : tuple
        Per term, its padded active set (JAX arrays) or ``None``.
    Z : jax.Array
        The solver's matrix.
    s : jax.Array
        The smoothing width.
    roles : tuple, optional
        Each term's loss role (static; :meth:`Objective.loss_data`).
    composite : Composite, optional
        The terms that leave the smooth part (static; :func:`.prox.plan`).

    Returns
    -------
    tuple
        ``(value, exact_value, gradient)`` (:class:`Objective`).
    """
    return Objective(term_classes, data, actives, geometry, gdata, roles, composite)(Z, s)


@functools.partial(jax.jit, static_argnames=("term_classes", "geometry", "roles", "hvp", "composite"))
def evaluate_hvp(term_classes: tuple, geometry: Any, data: tuple, gdata: dict, actives: tuple, Z: Any, s: Any, V: Any,
                 hvp: Any, roles: tuple = (), composite: Any = NONE) -> Any:
    """``hvp(objective, Z, s, V)`` (e.g. :func:`~.solvers.hessian_vector_product`) on the loop's objective,
    jitted like :func:`evaluate_objective`.

    Parameters
    ----------
    term_classes : tuple
        The terms' classes (static: their JAX methods).
    geometry : Parametrization
        The feasible set's parametrization (static).
    data : tuple
        Each term's JAX data (a pytree).
    gdata : dict
        The geometry's arrays (``T``).
    actives : tuple
        Per term, its padded active set (JAX arrays) or ``None``.
    Z : jax.Array
        The solver's matrix.
    s : jax.Array
        The smoothing width.
    V : jax.Array
        The direction, of ``Z``'s shape.
    hvp : callable
        ``hvp(objective, Z, s, V)`` (static).
    roles : tuple, optional
        Each term's loss role (static; :meth:`Objective.loss_data`).
    composite : Composite, optional
        The terms that leave the smooth part (static; :func:`.prox.plan`).

    Returns
    -------
    jax.Array
        ``H(Z) V``.
    """
    return hvp(Objective(term_classes, data, actives, geometry, gdata, roles, composite), Z, s, V)


@functools.partial(jax.jit, static_argnames=("term_classes", "geometry", "composite"))
def evaluate_project(term_classes: tuple, geometry: Any, data: tuple, Z: Any, composite: Any = NONE) -> Any:
    """The projection onto the loop's feasible set (the geometry's, or a constraint term's), jitted.

    Parameters
    ----------
    term_classes : tuple
        The terms' classes (static: their JAX methods).
    geometry : Parametrization
        The feasible set's parametrization (static).
    data : tuple
        Each term's JAX data (a pytree).
    Z : jax.Array
        The solver's matrix.
    composite : Composite, optional
        The terms that leave the smooth part (static; :func:`.prox.plan`).

    Returns
    -------
    jax.Array
        The projection of ``Z``.
    """
    return _prox.project(composite, term_classes, data, geometry, Z)


@functools.partial(jax.jit, static_argnames=("term_classes", "geometry", "roles", "composite", "max_inner"))
def prox_gradient_step(term_classes: tuple, geometry: Any, data: tuple, gdata: dict, actives: tuple, Z: Any, s: Any,
                       roles: tuple = (), composite: Any = NONE, max_inner: int = _prox.CHECK_INNER_MAX) -> Any:
    r"""The first-order optimality measure of a convex problem at ``Z``: the relative proximal-gradient step
    :math:`\|Z - \operatorname{prox}_{a g}(Z - a \nabla f(Z))\|_F / \|Z\|_F` with :math:`a = \|Z\|_F /
    \|\nabla f(Z)\|_F` (zero exactly at a minimiser of :math:`f + g`, :math:`g` the composite terms and the
    feasible set; without composite terms, the projected-gradient step), the smooth part at width ``s``; the
    prox's inner loop, if any, cold-started with up to ``max_inner`` iterations.

    Parameters
    ----------
    term_classes : tuple
        The terms' classes (static: their JAX methods).
    geometry : Parametrization
        The feasible set's parametrization (static).
    data : tuple
        Each term's JAX data (a pytree).
    gdata : dict
        The geometry's arrays (``T``).
    actives : tuple
        Per term, its padded active set (JAX arrays) or ``None``.
    Z : jax.Array
        The solver's matrix.
    s : jax.Array
        The smoothing width of the smooth part.
    roles : tuple, optional
        Each term's loss role (static; :meth:`Objective.loss_data`).
    composite : Composite, optional
        The terms that leave the smooth part (static; :func:`.prox.plan`).
    max_inner : int, optional
        Inner iterations of the prox at most (static).

    Returns
    -------
    jax.Array
        The relative step (a scalar; 0 when the gradient vanishes).
    """
    import jax.numpy as jnp

    objective = Objective(term_classes, data, actives, geometry, gdata, roles, composite)
    G = objective.split(Z, s)[3]
    zn, gn = jnp.sqrt(jnp.sum(Z * Z)), jnp.sqrt(jnp.sum(G * G))
    a = zn / jnp.maximum(gn, 1e-300)
    P, _ = objective.prox(Z - a * G, a, None, max_inner, _prox.INNER_TOL)
    rel = jnp.sqrt(jnp.sum((Z - P) ** 2)) / jnp.maximum(zn, 1e-300)
    return jnp.where(gn == 0.0, 0.0, rel)
