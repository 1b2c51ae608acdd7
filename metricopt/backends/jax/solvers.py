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
from typing import ClassVar

import jax.numpy as jnp
from jax import lax

#: the smoothing width is multiplied by this factor at each continuation step ...
SMOOTHING_DECREASE = 0.5
#: ... taken when a chunk's decrease of the smoothed objective falls below this fraction of
#: the smoothing bias ``f_s(M) - f(M)`` (the smoothed problem is then solved well enough)
SMOOTHING_PROGRESS = 0.02
#: smallest smoothing width (hinge arguments are O(1): the unit margin)
SMOOTHING_MIN = 1e-6


@dataclass(frozen=True)
class Solver:
    """The contract every solver of the JAX backend declares (frozen: a static argument of the jitted loop).

    Declarations (class attributes, read by the driver; never probed with ``getattr``):

    * ``name``;
    * ``smoothing``: minimises the smoothed objective; the solver owns the width ``state["s"]``
      and drives it down in :meth:`between_chunks` (continuation);
    * ``adaptive_checks``: the driver may lengthen the re-check interval while nothing changes;
    * ``monotone``: its iterates decrease the objective, so the driver may roll a chunk back and
      call :meth:`shorten`;
    * ``scaled_start``: start from the best multiple of the identity (problems with a working set);
    * ``online``: one iteration is one pass over a loss's pairs (:meth:`update` visits them).

    Methods: :meth:`init` (state from the starting matrix), :meth:`refresh` (recompute cached values
    after the driver changed the active set), :meth:`update` (one iteration), :meth:`converged`
    (ends a chunk early), :meth:`diagnostics`, :meth:`between_chunks`, :meth:`shorten`.
    """

    name: ClassVar[str] = "solver"
    smoothing: ClassVar[bool] = False
    adaptive_checks: ClassVar[bool] = False
    monotone: ClassVar[bool] = False
    scaled_start: ClassVar[bool] = False
    online: ClassVar[bool] = False

    def init(self, M0):  # pragma: no cover - abstract
        raise NotImplementedError

    def refresh(self, objective, st):  # pragma: no cover - abstract
        raise NotImplementedError

    def update(self, objective, st):  # pragma: no cover - abstract
        raise NotImplementedError

    def converged(self, st):
        return jnp.zeros((), bool)

    def diagnostics(self, st):
        return {}

    def between_chunks(self, st, smoothed):
        """The state for the next chunk (e.g. a smaller smoothing width); ``smoothed``: whether any
        term is smoothed. Default: unchanged."""
        return st

    def shorten(self, st, rejected, factor):  # pragma: no cover - only monotone solvers
        raise NotImplementedError(f"solver {self.name!r} does not support rollbacks")



def _norm(A):
    return jnp.sqrt(jnp.sum(A * A))


def _common_state(M0, s):
    z = jnp.zeros((), M0.dtype)
    return {"M": M0, "f": z + jnp.inf, "fx": z + jnp.inf, "f_start": z + jnp.inf, "s": z + s,
            "evals": jnp.zeros((), jnp.int32), "iterations": jnp.zeros((), jnp.int32)}


@dataclass(frozen=True)
class Subgradient(Solver):
    """The reference: Weinberger & Saul (JMLR 2009, Appendix A / Algorithm 1).

    Projected subgradient steps ``M <- P_psd(M - alpha G)`` on the exact hinge objective
    from ``M = I``; after a step that decreases the objective ``alpha *= grow`` (1.01),
    after one that increases it the step is rolled back and ``alpha *= shrink`` (1/2).
    The first ``alpha`` moves ``M`` by ``step0 * ||M||_F``.
    """

    name: ClassVar[str] = "subgradient"
    smoothing: ClassVar[bool] = False
    adaptive_checks: ClassVar[bool] = False  # the paper re-checks all triplets every ~10 iterations
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
        Mn = objective.project(st["M"] - st["alpha"] * st["G"])
        f, fx, G = objective(Mn, st["s"])
        dec = f < st["f"]
        pick = lambda new, old: jnp.where(dec, new, old)
        return {**st, "M": pick(Mn, st["M"]), "f": pick(f, st["f"]), "fx": pick(fx, st["fx"]),
                "G": pick(G, st["G"]), "alpha": st["alpha"] * jnp.where(dec, self.grow, self.shrink),
                "evals": st["evals"] + 1}


@dataclass(frozen=True)
class FISTA(Solver):
    """Accelerated projected gradient (FISTA, Beck & Teboulle 2009) on the hinge smoothed
    to a centred Huber of width ``s`` (driven down by the driver: continuation).

    Backtracking on the Lipschitz estimate ``L`` (tried ``L * l_decrease`` first, doubled
    until the quadratic upper bound holds), and an adaptive restart (O'Donoghue & Candes
    2015): a step that would increase the smoothed objective is rejected and the momentum
    reset, so the iterates decrease monotonically.
    """

    name: ClassVar[str] = "fista"
    smoothing: ClassVar[bool] = True
    adaptive_checks: ClassVar[bool] = True
    monotone: ClassVar[bool] = True  # the driver may roll a chunk back and shorten the steps (``shorten``)
    scaled_start: ClassVar[bool] = True  # LMNN: start from the best multiple of the identity (the paper: I)
    s0: float = 0.5
    step0: float = 0.1
    l_decrease: float = 0.7
    max_backtrack: int = 40

    def init(self, M0):
        st = _common_state(M0, self.s0)
        one = jnp.ones((), M0.dtype)
        st.update(Mprev=M0, t=one, L=0.0 * one, restarts=jnp.zeros((), jnp.int32), rejected=jnp.zeros((), jnp.int32),
                  grad_norm=0.0 * one)
        return st

    def refresh(self, objective, st):
        f, fx, G = objective(st["M"], st["s"])
        L0 = _norm(G) / jnp.maximum(self.step0 * _norm(st["M"]), 1e-300)
        L = jnp.where(st["L"] > 0, st["L"], L0)
        return {**st, "f": f, "fx": fx, "f_start": f, "L": L, "evals": st["evals"] + 1,
                "rejected": jnp.zeros((), jnp.int32), "grad_norm": _norm(G)}

    def diagnostics(self, st):
        return {"L": float(st["L"]), "restarts": int(st["restarts"]), "s": float(st["s"])}

    def between_chunks(self, st, smoothed):
        """Continuation: shrink the smoothing width once the smoothed problem is solved well enough
        (the solver converged at this width, or the last chunk decreased the smoothed objective by less
        than ``SMOOTHING_PROGRESS`` times the smoothing bias ``f_s(M) - f(M)``); the momentum restarts."""
        if not smoothed:
            return st
        progress = float(st["f_start"] - st["f"])
        bias = abs(float(st["f"] - st["fx"]))  # smoothing may bias either way (hinge up, MMC's roots down)
        s = float(st["s"])
        if (not bool(self.converged(st)) and progress > SMOOTHING_PROGRESS * bias) or s <= SMOOTHING_MIN:
            return st
        s_new = max(s * SMOOTHING_DECREASE, SMOOTHING_MIN)
        return {**st, "s": jnp.asarray(s_new, st["s"].dtype), "t": jnp.ones_like(st["t"]),
                "Mprev": st["M"], "L": st["L"] * (s / s_new) ** 0.5}

    def shorten(self, st, rejected, factor):
        """The state ``st`` (a chunk's start) with steps ``factor`` times shorter than the shortest the
        ``rejected`` chunk took, and the momentum reset."""
        L = jnp.maximum(st["L"], rejected["L"]) * factor
        return {**st, "L": L, "t": jnp.ones_like(st["t"]), "Mprev": st["M"]}

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
            Mn = objective.project(Y - gY / L)
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
        # a step the projection undoes (an iterate at a face of the feasible set) says nothing about L
        L = jnp.where(jnp.sum((Mn - Y) ** 2) > 0, L, st["L"])
        acc = fn <= st["f"]
        pick = lambda new, old: jnp.where(acc, new, old)
        return {**st, "M": pick(Mn, M), "Mprev": M, "f": pick(fn, st["f"]), "fx": pick(fxn, st["fx"]),
                "t": jnp.where(acc, t_next, 1.0), "L": L, "restarts": st["restarts"] + (~acc).astype(jnp.int32),
                # rejected or motionless steps: a fixed point of the projected gradient map at this smoothing
                "rejected": jnp.where(acc & jnp.any(Mn != M), 0, st["rejected"] + 1),
                "evals": st["evals"] + 1 + nb}


def _stride(m):
    """A step coprime with ``m`` near ``0.618 m``: ``t -> (stride * t) mod m`` visits every pair once
    per pass in a scrambled order (the pairs derived from labels come sorted: similar, then dissimilar)."""
    import math

    a = max(1, int(0.6180339887 * m))
    while math.gcd(a, m) != 1:
        a += 1
    return a


@dataclass(frozen=True)
class OnlinePOLA(Solver):
    """POLA's online algorithm (Shalev-Shwartz, Singer & Ng, ICML 2004, Fig. 1), run over the pairs
    for several passes; one iteration is one pass.

    For the pair ``t`` (labels ``y_t = +1`` similar, ``-1`` dissimilar, ``v_t = x_t - x'_t``) with loss
    ``l_t = [1 - y_t (b - v_t^T M v_t)]_+ > 0``, project ``(M, b)`` onto the half-space
    ``{y_t (b - <v_t v_t^T, M>) >= 1}``: ``M <- M - tau y_t v_t v_t^T``, ``b <- b + tau y_t`` with
    ``tau = l_t / (||v_t||^4 + 1)``; then onto ``C^b = {M PSD, b >= 1}``. An online learner, not
    a batch solver: its iterate is certified against the batch problem like any other metric.
    """

    name: ClassVar[str] = "online"
    online: ClassVar[bool] = True

    def init(self, Z0):
        return _common_state(Z0, 0.0)

    def refresh(self, objective, st):
        f, fx, _ = objective(st["M"], st["s"])
        return {**st, "f": f, "fx": fx, "f_start": f, "evals": st["evals"] + 1}

    def diagnostics(self, st):
        return {}

    def converged(self, st):
        return jnp.zeros((), bool)

    def update(self, objective, st):
        data = objective.loss_data("pair_hinge")
        D, y = data["D"], data["y"]
        m = D.shape[0]
        a = _stride(m)

        def step(t, Z):
            q = (a * t) % m
            v, yt = D[q], y[q]
            M, b = Z[:-1, :-1], Z[-1, -1] + 1.0
            loss = 1.0 - yt * (b - v @ M @ v)
            tau = jnp.maximum(loss, 0.0) / (jnp.sum(v * v) ** 2 + 1.0)
            Zn = Z.at[:-1, :-1].add(-tau * yt * jnp.outer(v, v)).at[-1, -1].add(tau * yt)
            return lax.cond(loss > 0, objective.project, lambda _: Z, Zn)

        return {**st, "M": lax.fori_loop(0, m, step, st["M"])}


SOLVERS = {"fista": FISTA(), "subgradient": Subgradient(), "online": OnlinePOLA()}
#: the default solver (measured faster to certified gaps; see the backend's docstring)
DEFAULT_SOLVER = "fista"
