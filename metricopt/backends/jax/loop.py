"""The one jitted solver loop of the JAX backend.

:func:`run_chunk` runs ``n_steps`` iterations of a solver's ``update`` (after its
``refresh``) on the objective assembled from the problem's terms, each term
contributing its own JAX piece (``Term.jax_value_grad``). It is compiled once per
solver, term classes, data shapes and active-set capacity bucket: the data, the
active set and the solver state are dynamic inputs.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from .geometry import project_psd  # noqa: F401  (re-exported: the JAX backend's one PSD projection)

#: how many times :func:`run_chunk` has been traced (a Python side effect: it only
#: runs while JAX traces, i.e. compiles, the loop)
TRACES = {"run_chunk": 0}


class Objective:
    """The problem's objective assembled from its terms' JAX pieces, on the solver's matrix ``Z``:
    ``objective(Z, s) -> (value, exact_value, gradient)``, the sum over the terms (``value``
    smoothed with width ``s`` where a term is non-smooth, ``exact_value`` not), each term
    with working set evaluated over its (padded) active set; ``Z`` is mapped to the problem's
    variables and the gradient back by the :class:`~.geometry.Geometry`, whose projection
    is ``objective.project``."""

    def __init__(self, term_classes, data, actives, geometry, gdata, roles=()):
        self.parts = tuple(zip(term_classes, data, actives))
        self.roles = tuple(roles) or (None,) * len(self.parts)
        self.geometry, self.gdata = geometry, gdata

    def __call__(self, Z, s):
        V = self.geometry.unpack(Z, self.gdata)
        value = exact = 0.0
        grads = {}
        for cls, dat, act in self.parts:
            v, e, g = cls.jax_value_grad(dat, V, act, s)
            value, exact = value + v, exact + e
            for name, gv in g.items():
                grads[name] = grads[name] + gv if name in grads else gv
        return value, exact, self.geometry.pack_grad(grads, Z, self.gdata)

    def project(self, Z):
        return self.geometry.project(Z)

    def loss_data(self, loss):
        """The data of the first term whose dual piece declares the loss ``loss`` (e.g. the pairs of
        ``"pair_hinge"`` an online solver visits)."""
        return next(dat for (_, dat, _), role in zip(self.parts, self.roles) if role == loss)


@functools.partial(jax.jit, static_argnames=("solver", "term_classes", "geometry", "roles"))
def run_chunk(solver, term_classes, geometry, data, gdata, actives, state, n_steps, roles=()):
    """``solver.refresh``, then ``solver.update`` iterations until ``n_steps`` (dynamic) of them ran
    or ``solver.converged(state)`` (e.g. the smoothed problem is solved); all jitted. The state's
    ``iterations`` counts the updates."""
    TRACES["run_chunk"] += 1
    objective = Objective(term_classes, data, actives, geometry, gdata, roles)
    state = solver.refresh(objective, state)

    def cond(carry):
        i, st = carry
        return (i < n_steps) & ~solver.converged(st)

    def body(carry):
        i, st = carry
        return i + 1, solver.update(objective, st)

    steps, state = lax.while_loop(cond, body, (jnp.zeros((), jnp.int32), state))
    return {**state, "iterations": state["iterations"] + steps}


@functools.partial(jax.jit, static_argnames=("term_classes", "geometry", "roles"))
def evaluate_objective(term_classes, geometry, data, gdata, actives, Z, s, roles=()):
    """``Objective(...)(Z, s)`` jitted once per term classes, geometry and shapes (a host-side evaluation
    of the loop's objective: run eagerly, each of its primitives would be compiled on its own)."""
    return Objective(term_classes, data, actives, geometry, gdata, roles)(Z, s)


@functools.partial(jax.jit, static_argnames=("term_classes", "geometry", "roles", "hvp"))
def evaluate_hvp(term_classes, geometry, data, gdata, actives, Z, s, V, hvp, roles=()):
    """``hvp(objective, Z, s, V)`` (e.g. :func:`~.solvers.hessian_vector_product`) on the loop's objective,
    jitted like :func:`evaluate_objective`."""
    return hvp(Objective(term_classes, data, actives, geometry, gdata, roles), Z, s, V)
