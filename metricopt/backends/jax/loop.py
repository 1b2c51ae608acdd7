"""The one jitted solver loop of the JAX backend and its one PSD projection.

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

#: how many times :func:`run_chunk` has been traced (a Python side effect: it only
#: runs while JAX traces, i.e. compiles, the loop)
TRACES = {"run_chunk": 0}


def project_psd(S):
    """Frobenius projection onto the PSD cone: ``eigh`` of the symmetric part, negative
    eigenvalues clipped to 0. The JAX backend's only PSD projection (the numpy one is
    :func:`metricopt.linalg.project_psd`)."""
    S = 0.5 * (S + S.T)
    w, V = jnp.linalg.eigh(S)
    Z = (V * jnp.maximum(w, 0.0)) @ V.T
    return 0.5 * (Z + Z.T)


class Objective:
    """The problem's objective assembled from its terms' JAX pieces, as the solvers see it.

    ``objective(M, s) -> (value, exact_value, gradient)`` sums every term (``value``
    smoothed with width ``s`` where a term is non-smooth, ``exact_value`` not);
    ``smooth(M) -> (value, gradient)`` sums the terms without a working set; ``hinge``
    is ``(term class, data, active set)`` of the (one) working-set term, for solvers
    that use its linear map and adjoint directly (primal-dual methods).
    """

    def __init__(self, term_classes, data, actives):
        self.parts = tuple(zip(term_classes, data, actives))
        hinges = [pt for pt in self.parts if pt[2] is not None]
        self.hinge = hinges[0] if hinges else None

    def __call__(self, M, s):
        value = exact = 0.0
        grad = jnp.zeros_like(M)
        for cls, dat, act in self.parts:
            v, e, g = cls.jax_value_grad(dat, M, act, s)
            value, exact, grad = value + v, exact + e, grad + g
        return value, exact, grad

    def smooth(self, M):
        value = 0.0
        grad = jnp.zeros_like(M)
        for cls, dat, act in self.parts:
            if act is None:
                v, _, g = cls.jax_value_grad(dat, M)
                value, grad = value + v, grad + g
        return value, grad


@functools.partial(jax.jit, static_argnames=("solver", "term_classes"))
def run_chunk(solver, term_classes, data, actives, state, n_steps):
    """``solver.refresh`` then ``n_steps`` (dynamic) ``solver.update`` iterations, all jitted."""
    TRACES["run_chunk"] += 1
    objective = Objective(term_classes, data, actives)
    state = solver.refresh(objective, state)
    return lax.fori_loop(0, n_steps, lambda _, st: solver.update(objective, st), state)
