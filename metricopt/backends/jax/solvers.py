"""Solvers of the JAX backend, each a small ``(init, refresh, update)`` triple.

A solver is a frozen (hashable) dataclass: it is a static argument of the one
jitted loop (:func:`~metricopt.backends.jax.loop.run_chunk`). Its state is a dict
of JAX arrays that always holds

* ``M``: the current iterate (PSD: every iterate is projected),
* ``f``, ``fx``: the minimised (possibly smoothed) and the exact objective at ``M``
  over the current active set, ``f_start``: ``f`` when the chunk started,
* ``s``: the hinge smoothing width (0 for the reference solver),
* ``evals``, ``iterations``: objective evaluations and iterations so far.

``converged(state)`` ends a chunk early (the driver then re-checks, certifies, and may
change the smoothing).

``refresh`` recomputes the cached values after the driver changed the active set
(or ``s``); ``update`` is one iteration. The objective is ``objective(M, s) ->
(value, exact_value, gradient)`` (:class:`~metricopt.backends.jax.loop.Objective`).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
from jax import lax

from .loop import project_psd


def _norm(A):
    return jnp.sqrt(jnp.sum(A * A))


def _common_state(M0, s):
    z = jnp.zeros((), M0.dtype)
    return {"M": M0, "f": z + jnp.inf, "fx": z + jnp.inf, "f_start": z + jnp.inf, "s": z + s,
            "evals": jnp.zeros((), jnp.int32), "iterations": jnp.zeros((), jnp.int32)}


@dataclass(frozen=True)
class Subgradient:
    """The reference: Weinberger & Saul (JMLR 2009, Appendix A / Algorithm 1).

    Projected subgradient steps ``M <- P_psd(M - alpha G)`` on the exact hinge objective
    from ``M = I``; after a step that decreases the objective ``alpha *= grow`` (1.01),
    after one that increases it the step is rolled back and ``alpha *= shrink`` (1/2).
    The first ``alpha`` moves ``M`` by ``step0 * ||M||_F``.
    """

    name = "subgradient"
    smoothing = False
    adaptive_checks = False  # the paper re-checks all triplets every ~10 iterations
    grow: float = 1.01
    shrink: float = 0.5
    step0: float = 0.1

    def init(self, M0):
        st = _common_state(M0, 0.0)
        st.update(G=jnp.zeros_like(M0), alpha=jnp.zeros((), M0.dtype))
        return st

    def refresh(self, objective, st):
        f, fx, G = objective(st["M"], st["s"])
        alpha0 = self.step0 * _norm(st["M"]) / jnp.maximum(_norm(G), 1e-300)
        alpha = jnp.where(st["alpha"] > 0, st["alpha"], alpha0)
        return {**st, "f": f, "fx": fx, "f_start": f, "G": G, "alpha": alpha, "evals": st["evals"] + 1}

    def diagnostics(self, st):
        return {"step": float(st["alpha"])}

    def converged(self, st):
        return jnp.zeros((), bool)

    def update(self, objective, st):
        Mn = project_psd(st["M"] - st["alpha"] * st["G"])
        f, fx, G = objective(Mn, st["s"])
        dec = f < st["f"]
        pick = lambda new, old: jnp.where(dec, new, old)
        return {**st, "M": pick(Mn, st["M"]), "f": pick(f, st["f"]), "fx": pick(fx, st["fx"]),
                "G": pick(G, st["G"]), "alpha": st["alpha"] * jnp.where(dec, self.grow, self.shrink),
                "evals": st["evals"] + 1}


@dataclass(frozen=True)
class FISTA:
    """Accelerated projected gradient (FISTA, Beck & Teboulle 2009) on the hinge smoothed
    to a centred Huber of width ``s`` (driven down by the driver: continuation).

    Backtracking on the Lipschitz estimate ``L`` (tried ``L * l_decrease`` first, doubled
    until the quadratic upper bound holds), and an adaptive restart (O'Donoghue & Candes
    2015): a step that would increase the smoothed objective is rejected and the momentum
    reset, so the iterates decrease monotonically.
    """

    name = "fista"
    smoothing = True
    adaptive_checks = True
    s0: float = 0.5
    step0: float = 0.1
    l_decrease: float = 0.7
    max_backtrack: int = 40

    def init(self, M0):
        st = _common_state(M0, self.s0)
        one = jnp.ones((), M0.dtype)
        st.update(Mprev=M0, t=one, L=0.0 * one, restarts=jnp.zeros((), jnp.int32), rejected=jnp.zeros((), jnp.int32))
        return st

    def refresh(self, objective, st):
        f, fx, G = objective(st["M"], st["s"])
        L0 = _norm(G) / jnp.maximum(self.step0 * _norm(st["M"]), 1e-300)
        L = jnp.where(st["L"] > 0, st["L"], L0)
        return {**st, "f": f, "fx": fx, "f_start": f, "L": L, "evals": st["evals"] + 1,
                "rejected": jnp.zeros((), jnp.int32)}

    def diagnostics(self, st):
        return {"L": float(st["L"]), "restarts": int(st["restarts"]), "s": float(st["s"])}

    def converged(self, st):
        """Two rejected steps in a row: a fixed point of the projected gradient map at this smoothing."""
        return st["rejected"] >= 2

    def update(self, objective, st):
        M, s, t = st["M"], st["s"], st["t"]
        t_next = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * t * t))
        Y = M + ((t - 1.0) / t_next) * (M - st["Mprev"])
        fY, _, gY = objective(Y, s)
        tiny = 1e-13 * jnp.abs(fY)

        def trial(L):
            Mn = project_psd(Y - gY / L)
            fn, fxn, _ = objective(Mn, s)
            D = Mn - Y
            ok = fn <= fY + jnp.sum(gY * D) + 0.5 * L * jnp.sum(D * D) + tiny
            return Mn, fn, fxn, ok

        # backtracking: try L * l_decrease, double until the quadratic upper bound holds
        def cond(c):
            return (~c[4]) & (c[5] < self.max_backtrack)

        def body(c):
            L = 2.0 * c[0]
            return (L, *trial(L), c[5] + 1)

        init = (0.5 * self.l_decrease * st["L"], M, fY, fY, jnp.zeros((), bool), 0)
        L, Mn, fn, fxn, ok, nb = lax.while_loop(cond, body, init)
        acc = fn <= st["f"]
        pick = lambda new, old: jnp.where(acc, new, old)
        return {**st, "M": pick(Mn, M), "Mprev": M, "f": pick(fn, st["f"]), "fx": pick(fxn, st["fx"]),
                "t": jnp.where(acc, t_next, 1.0), "L": L, "restarts": st["restarts"] + (~acc).astype(jnp.int32),
                "rejected": jnp.where(acc, 0, st["rejected"] + 1),
                "evals": st["evals"] + 1 + nb}


SOLVERS = {"fista": FISTA(), "subgradient": Subgradient()}
#: the default solver (measured faster to certified gaps; see the backend's docstring)
DEFAULT_SOLVER = "fista"
