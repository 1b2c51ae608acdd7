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
    """The problem's objective assembled from its terms' JAX pieces:
    ``objective(M, s) -> (value, exact_value, gradient)``, the sum over the terms (``value``
    smoothed with width ``s`` where a term is non-smooth, ``exact_value`` not), each term
    with working set evaluated over its (padded) active set."""

    def __init__(self, term_classes, data, actives):
        self.parts = tuple(zip(term_classes, data, actives))

    def __call__(self, M, s):
        value = exact = 0.0
        grad = jnp.zeros_like(M)
        for cls, dat, act in self.parts:
            v, e, g = cls.jax_value_grad(dat, M, act, s)
            value, exact, grad = value + v, exact + e, grad + g
        return value, exact, grad


@functools.partial(jax.jit, static_argnames=("solver", "term_classes"))
def run_chunk(solver, term_classes, data, actives, state, n_steps):
    """``solver.refresh``, then ``solver.update`` iterations until ``n_steps`` (dynamic) of them ran
    or ``solver.converged(state)`` (e.g. the smoothed problem is solved); all jitted. The state's
    ``iterations`` counts the updates."""
    TRACES["run_chunk"] += 1
    objective = Objective(term_classes, data, actives)
    state = solver.refresh(objective, state)

    def cond(carry):
        i, st = carry
        return (i < n_steps) & ~solver.converged(st)

    def body(carry):
        i, st = carry
        return i + 1, solver.update(objective, st)

    steps, state = lax.while_loop(cond, body, (jnp.zeros((), jnp.int32), state))
    return {**state, "iterations": state["iterations"] + steps}
