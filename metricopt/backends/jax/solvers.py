"""Solvers of the JAX backend, each a small ``(init, refresh, update)`` triple.

A solver is a frozen (hashable) dataclass: it is a static argument of the one
jitted loop (:func:`~metricopt.backends.jax.loop.run_chunk`). Its state is a dict
of JAX arrays that always holds

* ``M``: the current iterate (PSD: every iterate is projected),
* ``f``, ``fx``: the minimised (possibly smoothed) and the exact objective at ``M``
  over the current active set, ``f_start``: ``f`` when the chunk started,
* ``s``: the hinge smoothing width (0 for the reference solver),
* ``evals``: objective evaluations so far.

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
            "evals": jnp.zeros((), jnp.int32)}


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

    def update(self, objective, st):
        Mn = project_psd(st["M"] - st["alpha"] * st["G"])
        f, fx, G = objective(Mn, st["s"])
        dec = f < st["f"]
        pick = lambda new, old: jnp.where(dec, new, old)
        return {**st, "M": pick(Mn, st["M"]), "f": pick(f, st["f"]), "fx": pick(fx, st["fx"]),
                "G": pick(G, st["G"]), "alpha": st["alpha"] * jnp.where(dec, self.grow, self.shrink),
                "evals": st["evals"] + 1}

    def step_size(self, st):
        return float(st["alpha"])


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
    s0: float = 0.5
    step0: float = 0.1
    l_decrease: float = 0.7
    max_backtrack: int = 40

    def init(self, M0):
        st = _common_state(M0, self.s0)
        one = jnp.ones((), M0.dtype)
        st.update(Mprev=M0, t=one, L=0.0 * one, restarts=jnp.zeros((), jnp.int32))
        return st

    def refresh(self, objective, st):
        f, fx, G = objective(st["M"], st["s"])
        L0 = _norm(G) / jnp.maximum(self.step0 * _norm(st["M"]), 1e-300)
        L = jnp.where(st["L"] > 0, st["L"], L0)
        return {**st, "f": f, "fx": fx, "f_start": f, "L": L, "evals": st["evals"] + 1}

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
                "evals": st["evals"] + 1 + nb}

    def step_size(self, st):
        return 1.0 / float(st["L"])


@dataclass(frozen=True)
class PDHG:
    """Restarted reflected Halpern PDHG (Lu & Yang 2024, the method of cuPDLPx) on the
    saddle-point form of the problem, with no smoothing::

        min_{M psd} max_{0 <= alpha <= mu}  g(M) + sum_t alpha_t (1 - <A_t, M>)

    (``g``: the smooth terms, ``<A_t, M> = d_il - d_ij``). One iteration is one PDHG step
    ``M+ = P_psd(Z - tau (grad g(Z) - A^T alpha))``, ``alpha+ = clip(alpha + sigma h(2 M+ - Z), 0, mu)``
    followed by the reflected Halpern average with the anchor (the last restart point); a
    restart happens when the fixed-point residual fell to ``beta_sufficient`` of its value at
    the anchor (or to ``beta_necessary`` and stopped decreasing, or after ``artificial`` of all
    iterations), and then the primal weight ``omega`` is rebalanced. ``tau = eta / omega``,
    ``sigma = eta * omega`` with ``eta ||A|| = 0.9`` (``||A||`` by power iteration at every refresh).
    The dual ``alpha`` lives on the active set; the driver carries it over re-checks (:meth:`remap`).
    """

    name = "pdhg"
    smoothing = False
    beta_sufficient: float = 0.2
    beta_necessary: float = 0.8
    artificial: float = 0.36
    theta: float = 0.5
    power_iters: int = 20
    eta: float = 0.9

    def init(self, M0):
        st = _common_state(M0, 0.0)
        z = jnp.zeros((), M0.dtype)
        st.update(Z=M0, Z0=M0, alpha=jnp.zeros((0,), M0.dtype), alpha0=jnp.zeros((0,), M0.dtype),
                  k=jnp.zeros((), jnp.int32), total=jnp.zeros((), jnp.int32), R0=z + jnp.inf, Rprev=z + jnp.inf,
                  omega=z, normA=z + 1.0, Lg=z, v=M0 / _norm(M0), restarts=jnp.zeros((), jnp.int32))
        return st

    def remap(self, st, old, new):
        """Carry the duals (iterate and anchor) from the old active set to the new one (numpy)."""
        import numpy as np

        cap = new["mask"].shape[0]
        size = int(new["mask"].sum())
        keys_new = new["p"][:size].astype(np.int64) * (1 << 31) + new["l"][:size]
        out = {}
        for name in ("alpha", "alpha0"):
            a = np.zeros(cap)
            if old is not None:
                osize = int(old["mask"].sum())
                keys_old = old["p"][:osize].astype(np.int64) * (1 << 31) + old["l"][:osize]
                order = np.argsort(keys_old)
                pos = np.searchsorted(keys_old[order], keys_new)
                pos = np.minimum(pos, max(osize - 1, 0))
                hit = (osize > 0) & (keys_old[order][pos] == keys_new) if osize else np.zeros(size, bool)
                a[:size][hit] = np.asarray(st[name])[order[pos[hit]]]
            out[name] = jnp.asarray(a, st["M"].dtype)
        return {**st, **out}

    def _steps(self, st):
        tau = self.eta / (st["omega"] * st["normA"])
        sigma = self.eta * st["omega"] / st["normA"]
        # Condat-Vu: 1/tau - sigma ||A||^2 >= Lg / 2 for the smooth part's curvature Lg
        tau = jnp.minimum(tau, 1.0 / (sigma * st["normA"] ** 2 + 0.5 * st["Lg"] + 1e-300))
        return tau, sigma

    def refresh(self, objective, st):
        cls, data, act = objective.hinge
        mask, mu = act["mask"], data["weight"]
        A = lambda M: cls.jax_margins(data, M, act) * mask
        At = lambda w: cls.jax_adjoint(data, act, w * mask)
        # ||A|| by power iteration on A^T A (warm-started)
        def power(_, v):
            w = At(A(v))
            return w / jnp.maximum(_norm(w), 1e-300)
        v = lax.fori_loop(0, self.power_iters, power, st["v"])
        normA = 1.01 * jnp.sqrt(_norm(At(A(v))))
        # curvature of the smooth terms along v (exact for linear and Frobenius terms)
        _, g1 = objective.smooth(st["M"] + v)
        _, g0 = objective.smooth(st["M"])
        Lg = _norm(g1 - g0)
        f, fx, _ = objective(st["M"], 0.0)
        # primal weight: ||c|| / ||b|| (PDLP) at the first refresh
        size = jnp.maximum(jnp.sum(mask), 1.0)
        omega = jnp.where(st["omega"] > 0, st["omega"], jnp.maximum(_norm(g0), 1e-12) / jnp.sqrt(size) / mu)
        return {**st, "v": v, "normA": normA, "Lg": Lg, "omega": omega, "f": f, "fx": fx, "f_start": f,
                "evals": st["evals"] + 1}

    def update(self, objective, st):
        cls, data, act = objective.hinge
        mask, mu = act["mask"], data["weight"]
        A = lambda M: cls.jax_margins(data, M, act) * mask
        At = lambda w: cls.jax_adjoint(data, act, w * mask)
        tau, sigma = self._steps(st)
        Z, alpha, k, omega = st["Z"], st["alpha"], st["k"], st["omega"]
        _, g = objective.smooth(Z)
        Mp = project_psd(Z - tau * (g - At(alpha)))
        Zbar = 2.0 * Mp - Z
        alphap = jnp.clip(alpha + sigma * (1.0 - A(Zbar)), 0.0, mu) * mask
        dM, da = Mp - Z, alphap - alpha
        R = jnp.sqrt(omega * jnp.sum(dM * dM) + jnp.sum(da * da) / omega)
        R0 = jnp.where(k == 0, R, st["R0"])
        # reflected Halpern step towards the anchor
        c = (k + 1.0) / (k + 2.0)
        Zn = c * (2.0 * Mp - Z) + st["Z0"] / (k + 2.0)
        alphan = (c * (2.0 * alphap - alpha) + st["alpha0"] / (k + 2.0)) * mask
        total = st["total"] + 1
        restart = (k > 0) & ((R <= self.beta_sufficient * R0)
                             | ((R <= self.beta_necessary * R0) & (R > st["Rprev"]))
                             | (k >= self.artificial * total.astype(R.dtype)))
        # restart at T(z) = (M+, alpha+); rebalance the primal weight
        dx = _norm(Mp - st["Z0"])
        dy = _norm(alphap - st["alpha0"])
        ok = (dx > 1e-14) & (dy > 1e-14)
        omega_new = jnp.where(ok, jnp.exp(self.theta * jnp.log(jnp.where(ok, dy / dx, 1.0))
                                          + (1 - self.theta) * jnp.log(omega)), omega)
        pick = lambda a, b: jnp.where(restart, a, b)
        # the candidate metric is M+ (PSD); its exact objective over the active set
        gv, _ = objective.smooth(Mp)
        hp = 1.0 - A(Mp)
        fx = gv + mu * jnp.sum(jnp.maximum(hp, 0.0) * mask)
        return {**st, "M": Mp, "f": fx, "fx": fx,
                "Z": pick(Mp, Zn), "alpha": pick(alphap, alphan), "Z0": pick(Mp, st["Z0"]),
                "alpha0": pick(alphap, st["alpha0"]), "k": jnp.where(restart, 0, k + 1), "total": total,
                "R0": R0, "Rprev": R, "omega": pick(omega_new, omega),
                "restarts": st["restarts"] + restart.astype(jnp.int32), "evals": st["evals"] + 1}


SOLVERS = {"fista": FISTA(), "pdhg": PDHG(), "subgradient": Subgradient()}
#: the default solver (measured faster to certified gaps; see the backend's docstring)
DEFAULT_SOLVER = "fista"
