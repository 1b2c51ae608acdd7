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
from typing import Any, ClassVar

import jax.numpy as jnp
from jax import lax

#: the smoothing width is multiplied by this factor at each continuation step ... (0.25: FISTA to a certified 1e-6
#: in 3,840 iterations on digits PCA-30 (was 5,600 with 0.5), wine 1,200 (2,160), iris 320 (518); 0.1 gave digits the
#: same 3,840)
SMOOTHING_DECREASE = 0.25
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
    * ``online``: one iteration is one pass over a loss's pairs (:meth:`update` visits them);
    * ``unconstrained_only``: its steps ignore the feasible set (no projection), so it runs only on
      an unconstrained geometry (a factor ``L``);
    * ``proximal``: its steps are proximal-gradient steps ``objective.prox(Y - t grad f(Y), t)``, so that
      terms declaring a prox leave the smooth part (:mod:`.prox`); other solvers see them smoothed;
    * ``s_min``: the smallest smoothing width (a field where the solver lets the caller set it).

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
    unconstrained_only: ClassVar[bool] = False
    proximal: ClassVar[bool] = False

    @property
    def s_min(self) -> float:
        """The smallest smoothing width of the continuation (a smoothing solver stops at it); solvers that let
        the caller set it make it a field."""
        return SMOOTHING_MIN

    def init(self, M0: Any) -> dict:  # pragma: no cover - abstract
        """The solver's state at the starting point ``M0``.

        Parameters
        ----------
        M0 : jax.Array
            The starting point: the geometry's variable ``Z`` (a PSD matrix, or a factor ``L``).

        Returns
        -------
        dict
            The state: the keys every solver holds (module docstring), the objective values infinite until
            :meth:`refresh`, and the solver's own keys.

        Raises
        ------
        NotImplementedError
            In the base class (abstract).
        """
        raise NotImplementedError

    def refresh(self, objective: Any, st: dict) -> dict:  # pragma: no cover - abstract
        """Recompute the state's cached values after the driver changed the active set (or the width ``s``).

        Parameters
        ----------
        objective : Objective
            ``objective(Z, s) -> (value, exact_value, gradient)`` over the current active set
            (:class:`~metricopt.backends.jax.loop.Objective`; also ``project``, ``split``, ``prox``).
        st : dict
            The solver's state (module docstring).

        Returns
        -------
        dict
            The state with ``f``, ``fx``, ``f_start`` (and the solver's cached gradient, step or radius) at
            ``st["M"]``.

        Raises
        ------
        NotImplementedError
            In the base class (abstract).
        """
        raise NotImplementedError

    def update(self, objective: Any, st: dict) -> dict:  # pragma: no cover - abstract
        """One iteration of the solver (traced inside the jitted loop, :func:`~.loop.run_chunk`).

        Parameters
        ----------
        objective : Objective
            ``objective(Z, s) -> (value, exact_value, gradient)`` over the current active set
            (:class:`~metricopt.backends.jax.loop.Objective`; also ``project``, ``split``, ``prox``).
        st : dict
            The solver's state (module docstring).

        Returns
        -------
        dict
            The state after the iteration.

        Raises
        ------
        NotImplementedError
            In the base class (abstract).
        """
        raise NotImplementedError

    def converged(self, st: dict) -> Any:
        """Whether the chunk may end early (the driver then re-checks, certifies, may change the smoothing).

        Parameters
        ----------
        st : dict
            The solver's state (module docstring).

        Returns
        -------
        jax.Array
            A boolean scalar; the default is never (``False``).
        """
        return jnp.zeros((), bool)

    def diagnostics(self, st: dict) -> dict:
        """The solver's own values for the iteration log and the report (step, Lipschitz estimate, radius, ...).

        Parameters
        ----------
        st : dict
            The solver's state (module docstring).

        Returns
        -------
        dict
            Name -> Python number (host values: call outside the jitted loop); the default is empty.
        """
        return {}

    def between_chunks(self, st: dict, smoothed: bool) -> dict:
        """The state for the next chunk (e.g. a smaller smoothing width). Default: unchanged.

        Parameters
        ----------
        st : dict
            The solver's state (module docstring).
        smoothed : bool
            Whether any term is smoothed (else the width is left as it is).

        Returns
        -------
        dict
            The state the next chunk starts from.
        """
        return st

    def shorten(self, st: dict, rejected: dict, factor: float) -> dict:  # pragma: no cover - only monotone solvers
        """The chunk's start ``st`` with shorter steps, after the driver rolled the ``rejected`` chunk back
        (monotone solvers only).

        Parameters
        ----------
        st : dict
            The state at the start of the rolled-back chunk.
        rejected : dict
            The state at the end of the rolled-back chunk.
        factor : float
            How much shorter the steps are to be.

        Returns
        -------
        dict
            The state the chunk is retried from.

        Raises
        ------
        NotImplementedError
            For a solver that is not ``monotone``.
        """
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

    def init(self, M0: Any) -> dict:
        st = _common_state(M0, 0.0)
        st.update(G=jnp.zeros_like(M0), alpha=jnp.zeros((), M0.dtype))
        return st

    def refresh(self, objective: Any, st: dict) -> dict:
        f, fx, G = objective(st["M"], st["s"])
        alpha0 = self.step0 * _norm(st["M"]) / jnp.maximum(_norm(G), 1e-300)
        alpha = jnp.where(st["alpha"] > 0, st["alpha"], alpha0)
        return {**st, "f": f, "fx": fx, "f_start": f, "G": G, "alpha": alpha, "evals": st["evals"] + 1}

    def diagnostics(self, st: dict) -> dict:
        return {"step": float(st["alpha"])}

    def converged(self, st: dict) -> Any:
        return jnp.zeros((), bool)

    def update(self, objective: Any, st: dict) -> dict:
        r"""One step of Weinberger & Saul's projected subgradient method (JMLR 2009, Appendix A, Algorithm 1):
        :math:`M' = P_{S_+}(M - \alpha G)` (the projection onto the PSD cone, their Eq. (20)) with :math:`G` a
        subgradient of the exact objective; :math:`M'` is kept and :math:`\alpha` grown by ``grow`` when the
        objective decreases, else :math:`M` is kept and :math:`\alpha` multiplied by ``shrink``.

        Parameters
        ----------
        objective : Objective
            ``objective(Z, s) -> (value, exact_value, gradient)`` over the current active set
            (:class:`~metricopt.backends.jax.loop.Objective`).
        st : dict
            The solver's state (module docstring).

        Returns
        -------
        dict
            The state after the iteration.
        """
        Mn = objective.project(st["M"] - st["alpha"] * st["G"])
        f, fx, G = objective(Mn, st["s"])
        dec = f < st["f"]
        pick = lambda new, old: jnp.where(dec, new, old)
        return {**st, "M": pick(Mn, st["M"]), "f": pick(f, st["f"]), "fx": pick(fx, st["fx"]),
                "G": pick(G, st["G"]), "alpha": st["alpha"] * jnp.where(dec, self.grow, self.shrink),
                "evals": st["evals"] + 1}


@dataclass(frozen=True)
class FISTA(Solver):
    r"""Accelerated proximal gradient (FISTA, Beck & Teboulle, SIAM J. Imaging Sci. 2(1), 2009) on the hinge
    smoothed to a centred Huber of width ``s`` (driven down by the driver: continuation).

    Each step is :math:`M^+ = \operatorname{prox}_{g/L}(Y - \nabla f(Y)/L)` at the extrapolated point
    :math:`Y`: with :math:`g` the feasible set's indicator alone, the projection (accelerated projected
    gradient); with non-smooth terms that declare a prox (:mod:`.prox`), their prox composed exactly with the
    feasible set (closed forms, or an inner dual loop warm-started from the state's ``dual``). Backtracking on
    the Lipschitz estimate ``L`` of the smooth part (tried ``L * l_decrease`` first, doubled until the quadratic
    upper bound :math:`f(M^+) \le f(Y) + \langle \nabla f(Y), M^+ - Y\rangle + \tfrac{L}{2}\|M^+ - Y\|^2`
    holds), and an adaptive restart (O'Donoghue & Candes 2015): a step that would increase the smoothed
    objective :math:`f + g` is rejected and the momentum reset, so the iterates decrease monotonically.
    """

    name: ClassVar[str] = "fista"
    smoothing: ClassVar[bool] = True
    adaptive_checks: ClassVar[bool] = True
    monotone: ClassVar[bool] = True  # the driver may roll a chunk back and shorten the steps (``shorten``)
    scaled_start: ClassVar[bool] = True  # LMNN: start from the best multiple of the identity (the paper: I)
    proximal: ClassVar[bool] = True
    s0: float = 0.5
    step0: float = 0.1
    l_decrease: float = 0.7
    max_backtrack: int = 40

    def init(self, M0: Any) -> dict:
        st = _common_state(M0, self.s0)
        one = jnp.ones((), M0.dtype)
        st.update(Mprev=M0, t=one, L=0.0 * one, restarts=jnp.zeros((), jnp.int32), rejected=jnp.zeros((), jnp.int32),
                  grad_norm=0.0 * one)
        return st

    def refresh(self, objective: Any, st: dict) -> dict:
        f, fx, G = objective(st["M"], st["s"])
        L0 = _norm(G) / jnp.maximum(self.step0 * _norm(st["M"]), 1e-300)
        L = jnp.where(st["L"] > 0, st["L"], L0)
        return {**st, "f": f, "fx": fx, "f_start": f, "L": L, "evals": st["evals"] + 1,
                "rejected": jnp.zeros((), jnp.int32), "grad_norm": _norm(G)}

    def diagnostics(self, st: dict) -> dict:
        return {"L": float(st["L"]), "restarts": int(st["restarts"]), "s": float(st["s"])}

    def between_chunks(self, st: dict, smoothed: bool) -> dict:
        """Continuation: shrink the smoothing width once the smoothed problem is solved well enough
        (the solver converged at this width, or the last chunk decreased the smoothed objective by less
        than ``SMOOTHING_PROGRESS`` times the smoothing bias ``f_s(M) - f(M)``); the momentum restarts.

        Parameters
        ----------
        st : dict
            The solver's state at the end of a chunk.
        smoothed : bool
            Whether any term is smoothed (else the width is left as it is).

        Returns
        -------
        dict
            The state the next chunk starts from (width ``s * SMOOTHING_DECREASE``, at least ``SMOOTHING_MIN``,
            and ``L`` scaled by the square root of the ratio of the widths, when the width changes).
        """
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

    def shorten(self, st: dict, rejected: dict, factor: float) -> dict:
        """The state ``st`` (a chunk's start) with steps ``factor`` times shorter than the shortest the
        ``rejected`` chunk took, and the momentum reset.

        Parameters
        ----------
        st : dict
            The state at the start of the rolled-back chunk.
        rejected : dict
            The state at the end of the rolled-back chunk.
        factor : float
            How much shorter the steps are (the Lipschitz estimate ``L`` is multiplied by it).

        Returns
        -------
        dict
            The state the chunk is retried from.
        """
        L = jnp.maximum(st["L"], rejected["L"]) * factor
        return {**st, "L": L, "t": jnp.ones_like(st["t"]), "Mprev": st["M"]}

    def converged(self, st: dict) -> Any:
        """Two rejected steps in a row: a fixed point of the projected gradient map at this smoothing.

        Parameters
        ----------
        st : dict
            The solver's state (module docstring).

        Returns
        -------
        jax.Array
            A boolean scalar.
        """
        return st["rejected"] >= 2

    def update(self, objective: Any, st: dict) -> dict:
        r"""One FISTA step (Beck & Teboulle, SIAM J. Imaging Sci. 2(1), 2009) with backtracking and adaptive restart:
        :math:`t_{k+1} = (1 + \sqrt{1 + 4 t_k^2})/2`, :math:`Y = M_k + \frac{t_k - 1}{t_{k+1}}(M_k - M_{k-1})`,
        :math:`M^+ = \operatorname{prox}_{g/L}(Y - \nabla f(Y)/L)` with ``L`` doubled from ``l_decrease * L``
        until the quadratic upper bound holds; a step that increases :math:`f + g` is rejected and the momentum
        reset (class docstring).

        Parameters
        ----------
        objective : Objective
            ``objective(Z, s) -> (value, exact_value, gradient)`` over the current active set
            (:class:`~metricopt.backends.jax.loop.Objective`).
        st : dict
            The solver's state (module docstring).

        Returns
        -------
        dict
            The state after the iteration.
        """
        M, s, t = st["M"], st["s"], st["t"]
        t_next = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * t * t))
        Y = M + ((t - 1.0) / t_next) * (M - st["Mprev"])
        fY, _, _, gY = objective.split(Y, s)  # the smooth part f (composite terms: in the prox)
        tiny = 1e-13 * jnp.abs(fY)
        # the inner dual loop's warm start (composite terms without a closed-form prox), kept at the step 1/L of
        # the last prox: its multipliers scale with the step
        dual = st.get("dual")

        def trial(L, dual, dual_step):
            if dual is not None:
                dual = dual * (dual_step * L)
            Mn, dual = objective.prox(Y - gY / L, 1.0 / L, dual)
            fn, gn, fxn, _ = objective.split(Mn, s)
            D = Mn - Y
            ok = fn <= fY + jnp.sum(gY * D) + 0.5 * L * jnp.sum(D * D) + tiny
            return Mn, fn + gn, fxn, ok, dual

        # backtracking: try L * l_decrease, double until the quadratic upper bound holds
        def cond(c):
            return (~c[4]) & (c[5] < self.max_backtrack)

        def body(c):
            L = 2.0 * c[0]
            Mn, fn, fxn, ok, dual_n = trial(L, c[6], c[7])
            return (L, Mn, fn, fxn, ok, c[5] + 1, dual_n, 1.0 / L)

        init = (0.5 * self.l_decrease * st["L"], M, fY, fY, jnp.zeros((), bool), 0, dual,
                st.get("dual_step", jnp.ones_like(fY)))
        L, Mn, fn, fxn, ok, nb, dual_n, dual_step = lax.while_loop(cond, body, init)
        # a step the projection undoes (an iterate at a face of the feasible set) says nothing about L
        L = jnp.where(jnp.sum((Mn - Y) ** 2) > 0, L, st["L"])
        acc = fn <= st["f"]
        pick = lambda new, old: jnp.where(acc, new, old)
        out = {**st, "M": pick(Mn, M), "Mprev": M, "f": pick(fn, st["f"]), "fx": pick(fxn, st["fx"]),
               "t": jnp.where(acc, t_next, 1.0), "L": L, "restarts": st["restarts"] + (~acc).astype(jnp.int32),
               # rejected or motionless steps: a fixed point of the projected gradient map at this smoothing
               "rejected": jnp.where(acc & jnp.any(Mn != M), 0, st["rejected"] + 1),
               "evals": st["evals"] + 1 + nb}
        if dual is not None:  # the last prox's multipliers, and the step they were taken at
            out.update(dual=dual_n, dual_step=dual_step)
        return out


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

    def init(self, Z0: Any) -> dict:
        """The state at the starting point ``Z0`` (no smoothing).

        Parameters
        ----------
        Z0 : jax.Array
            The starting point ``blockdiag(M, b - 1)``.

        Returns
        -------
        dict
            The state: the keys every solver holds (module docstring).
        """
        return _common_state(Z0, 0.0)

    def refresh(self, objective: Any, st: dict) -> dict:
        f, fx, _ = objective(st["M"], st["s"])
        return {**st, "f": f, "fx": fx, "f_start": f, "evals": st["evals"] + 1}

    def diagnostics(self, st: dict) -> dict:
        return {}

    def converged(self, st: dict) -> Any:
        return jnp.zeros((), bool)

    def update(self, objective: Any, st: dict) -> dict:
        """One pass over the pairs (Shalev-Shwartz, Singer & Ng, ICML 2004, Fig. 1): for each pair with a positive
        loss, the projection onto its margin half-space, then onto ``{M PSD, b >= 1}`` (class docstring); the pairs
        are visited in a scrambled order that covers each once.

        Parameters
        ----------
        objective : Objective
            ``objective(Z, s) -> (value, exact_value, gradient)`` over the current active set
            (:class:`~metricopt.backends.jax.loop.Objective`).
        st : dict
            The solver's state (module docstring).

        Returns
        -------
        dict
            The state after the iteration.
        """
        data = objective.loss_data("pair_hinge")
        y = data["y"]
        m = y.shape[0]
        a = _stride(m)

        def step(t, Z):
            q = (a * t) % m
            # the pair's difference, from either form of the pair terms' data (differences, or points and indices)
            v = data["D"][q] if "D" in data else data["X"][data["a"][q]] - data["X"][data["b"][q]]
            yt = y[q]
            M, b = Z[:-1, :-1], Z[-1, -1] + 1.0
            loss = 1.0 - yt * (b - v @ M @ v)
            tau = jnp.maximum(loss, 0.0) / (jnp.sum(v * v) ** 2 + 1.0)
            Zn = Z.at[:-1, :-1].add(-tau * yt * jnp.outer(v, v)).at[-1, -1].add(tau * yt)
            return lax.cond(loss > 0, objective.project, lambda _: Z, Zn)

        return {**st, "M": lax.fori_loop(0, m, step, st["M"])}


def _dot(A, B):
    return jnp.sum(A * B)


def hessian_vector_product(objective: Any, Z: Any, s: Any, V: Any) -> Any:
    r"""``H(Z) V`` for the Hessian of the (smoothed, width ``s``) objective: forward-mode differentiation
    of its gradient (``jax.jvp``), never a Hessian matrix.

    Parameters
    ----------
    objective : Objective
        ``objective(Z, s) -> (value, exact_value, gradient)``.
    Z : jax.Array
        The point at which the Hessian is taken.
    s : jax.Array or float
        The smoothing width.
    V : jax.Array
        The direction, of ``Z``'s shape.

    Returns
    -------
    jax.Array
        :math:`\nabla^2 f(Z)[V]`, of ``Z``'s shape.
    """
    import jax

    return jax.jvp(lambda W: objective(W, s)[2], (Z,), (V,))[1]


def _steihaug(hvp, g, radius, max_cg, rtol):
    """Steihaug-Toint truncated conjugate gradients for ``min_p <g, p> + <p, H p>/2`` in ``||p|| <= radius``:
    CG on ``H p = -g`` until the residual is ``rtol ||g||``, stopping at the boundary when a step
    leaves the region or meets a direction of non-positive curvature (Nocedal & Wright, Alg. 7.2)."""

    def to_boundary(p, d):
        pd, dd, pp = _dot(p, d), _dot(d, d), _dot(p, p)
        tau = (-pd + jnp.sqrt(jnp.maximum(pd * pd + dd * (radius * radius - pp), 0.0))) / jnp.maximum(dd, 1e-300)
        return p + tau * d

    def cond(c):
        return (c[0] < max_cg) & ~c[5]

    def body(c):
        k, p, r, d, rr, _ = c
        Hd = hvp(d)
        dHd = _dot(d, Hd)
        alpha = rr / jnp.where(dHd > 0, dHd, 1.0)
        p_new = p + alpha * d
        leave = (dHd <= 0) | (_dot(p_new, p_new) >= radius * radius)
        r_new = r + alpha * Hd
        rr_new = _dot(r_new, r_new)
        small = jnp.sqrt(rr_new) <= rtol
        p_out = jnp.where(leave, to_boundary(p, d), p_new)
        d_new = -r_new + (rr_new / jnp.maximum(rr, 1e-300)) * d
        return k + 1, p_out, r_new, d_new, rr_new, leave | small

    z = jnp.zeros_like(g)
    init = (0, z, g, -g, _dot(g, g), _dot(g, g) == 0)
    _, p, *_ = lax.while_loop(cond, body, init)
    return p


def _exact_trust_step(H, g, radius):
    """The global minimiser of ``<g, p> + <p, H p>/2`` in ``||p|| <= radius`` for a symmetric ``H`` (flat
    vectors), from its eigendecomposition (Nocedal & Wright, Sec. 4.3): the Newton step when ``H`` is
    positive definite and the step fits, else ``p(lam) = -(H + lam I)^{-1} g`` with ``lam >= max(0,
    -lambda_min)`` found by bisection so that ``||p(lam)|| = radius`` (the hard case completed along the
    eigenvector of ``lambda_min``)."""
    w, Q = jnp.linalg.eigh(0.5 * (H + H.T))
    gt = Q.T @ g
    step_norm = lambda lam: jnp.sqrt(jnp.sum((gt / jnp.maximum(w + lam, 1e-300)) ** 2))
    lo = jnp.maximum(0.0, -w[0])
    hi = lo + jnp.sqrt(jnp.sum(gt * gt)) / radius + jnp.abs(w[-1]) + 1e-300
    interior = (w[0] > 0) & (step_norm(0.0) <= radius)

    def bisect(_, bounds):
        a, b = bounds
        m = 0.5 * (a + b)
        long = step_norm(m) > radius
        return jnp.where(long, m, a), jnp.where(long, b, m)

    a, b = lax.fori_loop(0, 200, bisect, (lo, hi))
    lam = jnp.where(interior, 0.0, b)
    pt = -gt / jnp.maximum(w + lam, 1e-300)
    # hard case: the boundary is not reached for any lam > lo; move along the lowest eigenvector
    short = (~interior) & (jnp.sum(pt * pt) < radius * radius * (1 - 1e-10))
    tau = jnp.sqrt(jnp.maximum(radius * radius - jnp.sum(pt * pt), 0.0))
    pt = pt.at[0].add(jnp.where(short, tau, 0.0))
    return Q @ pt


@dataclass(frozen=True)
class _Continued(Solver):
    """What the solvers of unconstrained geometries share: the smoothing width driven from ``s0`` down to
    ``s_min`` by factors ``s_decrease``, the next width taken once the current one is solved
    (``state["done"]``: the solver's own test), and a state reset at each new width (:meth:`_restart`)."""

    smoothing: ClassVar[bool] = True
    monotone: ClassVar[bool] = True
    unconstrained_only: ClassVar[bool] = True
    s0: float = 1.0
    s_min: float = SMOOTHING_MIN
    s_decrease: float = 0.1
    gtol: float = 1e-11

    def converged(self, st: dict) -> Any:
        return st["done"]

    def _restart(self, st):  # pragma: no cover - abstract
        raise NotImplementedError

    def between_chunks(self, st: dict, smoothed: bool) -> dict:
        """Continuation: the next width once this one is solved (``done``)."""
        s = float(st["s"])
        if not smoothed or not bool(st["done"]) or s <= self.s_min * (1 + 1e-12):
            return st
        return self._restart({**st, "s": jnp.asarray(max(s * self.s_decrease, self.s_min), st["s"].dtype),
                              "done": jnp.zeros((), bool)})


@dataclass(frozen=True)
class TrustNewton(_Continued):
    """Trust-region Newton with truncated conjugate gradients (Steihaug-Toint; Nocedal & Wright,
    *Numerical Optimization*, 2nd ed., Alg. 4.1 and 7.2) on the hinge smoothed to a centred Huber of
    width ``s``, driven from ``s0`` down to ``s_min`` (continuation, as FISTA's), for unconstrained
    geometries (a factor ``L``, ``M = L^T L``: non-convex, LMNN-R).

    Each iteration minimises the quadratic model ``f + <g, p> + <p, H p>/2`` inside ``||p|| <= radius``
    with Hessian-vector products by forward-mode differentiation of the gradient
    (:func:`hessian_vector_product`): for at most ``dense_max`` variables the Hessian is assembled from
    them and the subproblem solved exactly (:func:`_exact_trust_step`; measured more robust at the
    smallest widths, where truncated CG stalled at relative gradients of 1e-6 on wine), above it by
    truncated CG without any Hessian matrix. A step is accepted when the objective decreases by at
    least ``eta`` times the model's prediction (else the radius shrinks and the step is recomputed, at
    most ``max_trials`` times), and the radius adapts to the ratio. The smoothed
    problem is ill-conditioned at small widths (curvature ``~ 1/s`` at the triplets on the kink), where
    Newton steps still converge and first-order methods stall. A width is solved when the relative
    gradient ``||g|| ||Z|| / |f|`` is at most ``gtol`` or the radius has collapsed; the next chunk then
    runs at ``s * s_decrease``.
    """

    name: ClassVar[str] = "newton"
    eta: float = 1e-4
    max_cg: int = 250
    max_trials: int = 30
    dense_max: int = 64

    def init(self, M0: Any) -> dict:
        st = _common_state(M0, self.s0)
        one = jnp.ones((), M0.dtype)
        st.update(g=jnp.zeros_like(M0), radius=0.0 * one, grad_norm=0.0 * one, done=jnp.zeros((), bool),
                  rejected=jnp.zeros((), jnp.int32))
        return st

    def _solved(self, f, g, Z, radius):
        rel = _norm(g) * _norm(Z) / jnp.maximum(jnp.abs(f), 1e-300)
        return (rel <= self.gtol) | (radius <= 1e-14 * jnp.maximum(_norm(Z), 1e-300))

    def refresh(self, objective: Any, st: dict) -> dict:
        f, fx, g = objective(st["M"], st["s"])
        Z = st["M"]
        radius = jnp.where(st["radius"] > 0, st["radius"], 0.5 * jnp.maximum(_norm(Z), 1e-3))
        return {**st, "f": f, "fx": fx, "f_start": f, "g": g, "radius": radius, "grad_norm": _norm(g),
                "done": self._solved(f, g, Z, radius), "evals": st["evals"] + 1}

    def diagnostics(self, st: dict) -> dict:
        return {"radius": float(st["radius"]), "s": float(st["s"])}

    def _restart(self, st):
        # a new width: the radius starts afresh (refresh sets it), a collapsed one would end the chunk at once
        return {**st, "radius": jnp.zeros_like(st["radius"])}

    def shorten(self, st: dict, rejected: dict, factor: float) -> dict:
        """The chunk's start ``st`` with a radius ``factor`` times below the smaller of the start's (0 after
        a width change: unset) and the ``rejected`` chunk's.

        Parameters
        ----------
        st : dict
            The state at the start of the rolled-back chunk.
        rejected : dict
            The state at the end of the rolled-back chunk.
        factor : float
            The radius is divided by it.

        Returns
        -------
        dict
            The state the chunk is retried from (``done`` cleared).
        """
        r0, r1 = st["radius"], rejected["radius"]
        return {**st, "radius": jnp.where(r0 > 0, jnp.minimum(r0, r1), r1) / factor, "done": jnp.zeros((), bool)}

    def update(self, objective: Any, st: dict) -> dict:
        r"""One accepted step: trial steps with the radius shrunk after each rejection until one decreases
        the objective enough (at most ``max_trials``), or the radius collapses (then ``done``).

        Each trial minimises the model :math:`m(p) = f + \langle g, p\rangle + \tfrac12\langle p, Hp\rangle` in
        :math:`\|p\| \le \Delta` (Steihaug-Toint truncated CG, Nocedal & Wright, *Numerical Optimization*, 2nd ed.,
        Alg. 7.2; exactly, from the assembled Hessian, for at most ``dense_max`` variables) and is accepted when
        :math:`\rho = (f(Z) - f(Z + p)) / (m(0) - m(p)) > \eta`; the radius then adapts to :math:`\rho` as in
        Nocedal & Wright's Alg. 4.1 (shrunk to a quarter of the step's length, doubled after a very successful
        step at the boundary).

        Parameters
        ----------
        objective : Objective
            ``objective(Z, s) -> (value, exact_value, gradient)`` over the current active set
            (:class:`~metricopt.backends.jax.loop.Objective`).
        st : dict
            The solver's state (module docstring).

        Returns
        -------
        dict
            The state after the accepted step (the start when no trial was accepted; then ``done``).
        """
        Z, s, f, g = st["M"], st["s"], st["f"], st["g"]
        hvp = lambda V: hessian_vector_product(objective, Z, s, V)
        gn = _norm(g)
        max_cg = min(self.max_cg, Z.size)
        rtol = jnp.minimum(0.5, jnp.sqrt(gn)) * gn
        tiny = 1e-14 * jnp.maximum(_norm(Z), 1e-300)

        dense = Z.size <= self.dense_max
        if dense:  # the Hessian itself (Z.size Hessian-vector products), the subproblem solved exactly
            n = Z.size
            H = lax.map(lambda e: hvp(e.reshape(Z.shape)).ravel(), jnp.eye(n, dtype=Z.dtype))

        def trial(c):
            radius, _, _, _, _, _, tries, _ = c
            if dense:
                p = _exact_trust_step(H, g.ravel(), radius).reshape(Z.shape)
            else:
                p = _steihaug(hvp, g, radius, max_cg, rtol)
            pred = -(_dot(g, p) + 0.5 * _dot(p, hvp(p)))
            fn, fxn, gnew = objective(Z + p, s)
            rho = (f - fn) / jnp.where(pred > 0, pred, 1.0)
            ok = (pred > 0) & jnp.isfinite(fn) & (rho > self.eta)
            pn = _norm(p)
            radius = jnp.where(~ok | (rho < 0.25), 0.25 * pn,
                               jnp.where((rho > 0.75) & (pn >= 0.99 * radius), 2.0 * radius, radius))
            return radius, ok, Z + p, fn, fxn, gnew, tries + 1, pred <= 0

        def cond(c):
            radius, ok, tries, flat = c[0], c[1], c[6], c[7]
            return ~ok & ~flat & (tries < self.max_trials) & (radius > tiny)

        init = (st["radius"], jnp.zeros((), bool), Z, f, st["fx"], g, 0, jnp.zeros((), bool))
        radius, ok, Zn, fn, fxn, gnew, tries, flat = lax.while_loop(cond, trial, init)
        pick = lambda new, old: jnp.where(ok, new, old)
        Zn, fn, fxn, gnew = pick(Zn, Z), pick(fn, f), pick(fxn, st["fx"]), pick(gnew, g)
        return {**st, "M": Zn, "f": fn, "fx": fxn, "g": gnew, "radius": radius, "grad_norm": _norm(gnew),
                "done": self._solved(fn, gnew, Zn, radius) | flat | ~ok,
                "rejected": st["rejected"] + tries - ok.astype(jnp.int32), "evals": st["evals"] + 1 + tries}


def _armijo(objective, Z, s, f, g, d, t0, c1=1e-4, shrink=0.5, max_trials=40):
    """Backtracking from ``t0`` until ``f(Z + t d) <= f + c1 t <g, d>`` (``d`` a descent direction):
    returns ``(t, Z + t d, f, exact f, gradient, accepted, trials)``."""
    slope = _dot(g, d)

    def trial(c):
        t, _, _, _, _, _, k = c
        Zn = Z + t * d
        fn, fxn, gn = objective(Zn, s)
        ok = jnp.isfinite(fn) & (fn <= f + c1 * t * slope)
        return jnp.where(ok, t, shrink * t), Zn, fn, fxn, gn, ok, k + 1

    def cond(c):
        return ~c[5] & (c[6] < max_trials)

    init = (t0, Z, f, f, g, jnp.zeros((), bool), 0)
    return lax.while_loop(cond, trial, init)


def _first_step(Z, g):
    """A first step length that moves ``Z`` by a tenth of its norm (at least 1e-3) along ``-g``."""
    return 0.1 * jnp.maximum(_norm(Z), 1e-3) / jnp.maximum(_norm(g), 1e-300)


@dataclass(frozen=True)
class LBFGS(_Continued):
    """Limited-memory BFGS (Nocedal & Wright, *Numerical Optimization*, 2nd ed., Alg. 7.4 and 7.5) with
    Armijo backtracking, for unconstrained geometries (a factor ``L``; NCA), on the objective smoothed
    with width ``s`` driven from ``s0`` to ``s_min`` like :class:`TrustNewton` (no effect on smooth
    objectives such as NCA's). ``memory`` pairs ``(s_k, y_k)``, stored only when ``<s_k, y_k> > 0``
    (the non-convex case); a direction that is not a descent direction resets the memory. A width is
    solved when the relative gradient is at most ``gtol`` or the line search fails (no decrease left in
    floating point)."""

    name: ClassVar[str] = "lbfgs"
    memory: int = 10
    max_step: float = 1.0

    def init(self, M0: Any) -> dict:
        st = _common_state(M0, self.s0)
        n, m = M0.size, self.memory
        st.update(g=jnp.zeros_like(M0), S=jnp.zeros((m, n), M0.dtype), Y=jnp.zeros((m, n), M0.dtype),
                  rho=jnp.zeros((m,), M0.dtype), k=jnp.zeros((), jnp.int32), grad_norm=jnp.zeros((), M0.dtype),
                  done=jnp.zeros((), bool), step=jnp.zeros((), M0.dtype))
        return st

    def _solved(self, f, g, Z):
        return _norm(g) * _norm(Z) / jnp.maximum(jnp.abs(f), 1e-300) <= self.gtol

    def refresh(self, objective: Any, st: dict) -> dict:
        f, fx, g = objective(st["M"], st["s"])
        return {**st, "f": f, "fx": fx, "f_start": f, "g": g, "grad_norm": _norm(g),
                "done": self._solved(f, g, st["M"]), "evals": st["evals"] + 1}

    def diagnostics(self, st: dict) -> dict:
        return {"step": float(st["step"]), "s": float(st["s"])}

    def _restart(self, st):
        return {**st, "k": jnp.zeros_like(st["k"])}  # the memory (CG: the direction) starts afresh

    def shorten(self, st: dict, rejected: dict, factor: float) -> dict:
        return {**self._restart(st), "done": jnp.zeros((), bool)}

    def _direction(self, st):
        """``-H_k g`` by the two-loop recursion over the stored pairs (newest first)."""
        m, k, S, Y, rho = self.memory, st["k"], st["S"], st["Y"], st["rho"]
        g = st["g"].ravel()
        count = jnp.minimum(k, m)

        def back(i, c):
            q, alpha = c
            j = (k - 1 - i) % m
            a = jnp.where(i < count, rho[j] * _dot(S[j], q), 0.0)
            return q - a * Y[j], alpha.at[i].set(a)

        q, alpha = lax.fori_loop(0, m, back, (g, jnp.zeros((m,), g.dtype)))
        j = (k - 1) % m
        gamma = jnp.where(k > 0, _dot(S[j], Y[j]) / jnp.maximum(_dot(Y[j], Y[j]), 1e-300),
                          _first_step(st["M"], g))

        def forward(i, r):
            ii = m - 1 - i
            j = (k - 1 - ii) % m
            b = rho[j] * _dot(Y[j], r)
            return r + jnp.where(ii < count, alpha[ii] - b, 0.0) * S[j]

        return -lax.fori_loop(0, m, forward, gamma * q).reshape(st["M"].shape)

    def update(self, objective: Any, st: dict) -> dict:
        """One L-BFGS iteration (Nocedal & Wright, *Numerical Optimization*, 2nd ed., Alg. 7.4 and 7.5): the
        direction ``-H_k g`` by the two-loop recursion (steepest descent when it is not a descent direction), an
        Armijo backtracking step from the unit step capped at ``max_step * ||Z||``, and the pair ``(s_k, y_k)``
        stored when ``<s_k, y_k> > 0``.

        Parameters
        ----------
        objective : Objective
            ``objective(Z, s) -> (value, exact_value, gradient)`` over the current active set
            (:class:`~metricopt.backends.jax.loop.Objective`).
        st : dict
            The solver's state (module docstring).

        Returns
        -------
        dict
            The state after the iteration.
        """
        Z, s, f, g = st["M"], st["s"], st["f"], st["g"]
        d = self._direction(st)
        descent = _dot(g, d) < 0
        d = jnp.where(descent, d, -_first_step(Z, g) * g)
        k = jnp.where(descent, st["k"], 0)
        # the unit quasi-Newton step, capped so that one step moves Z by at most max_step * ||Z||: on
        # saturating objectives (NCA's softmax) an uncapped early step scales Z up into a flat region
        t0 = jnp.minimum(1.0, self.max_step * jnp.maximum(_norm(Z), 1e-3) / jnp.maximum(_norm(d), 1e-300))
        t, Zn, fn, fxn, gn, ok, trials = _armijo(objective, Z, s, f, g, d, t0)
        sv, yv = (Zn - Z).ravel(), (gn - g).ravel()
        sy = _dot(sv, yv)
        keep = ok & (sy > 1e-12 * _norm(sv) * _norm(yv))
        j = k % self.memory
        S = jnp.where(keep, st["S"].at[j].set(sv), st["S"])
        Y = jnp.where(keep, st["Y"].at[j].set(yv), st["Y"])
        rho = jnp.where(keep, st["rho"].at[j].set(1.0 / jnp.where(keep, sy, 1.0)), st["rho"])
        pick = lambda new, old: jnp.where(ok, new, old)
        Zn, fn, fxn, gn = pick(Zn, Z), pick(fn, f), pick(fxn, st["fx"]), pick(gn, g)
        return {**st, "M": Zn, "f": fn, "fx": fxn, "g": gn, "S": S, "Y": Y, "rho": rho,
                "k": k + keep.astype(jnp.int32), "grad_norm": _norm(gn), "step": t * _norm(d),
                "done": self._solved(fn, gn, Zn) | ~ok, "evals": st["evals"] + trials}


@dataclass(frozen=True)
class ConjugateGradient(LBFGS):
    """Nonlinear conjugate gradients (Polak-Ribiere+, restarted every ``restart`` iterations and whenever
    the direction is not a descent direction; Nocedal & Wright, Sec. 5.2) with Armijo backtracking from
    the step that repeats the last first-order decrease, for unconstrained geometries. Goldberger et al.
    (NIPS 2004) optimised NCA by conjugate gradients; same state, continuation and stop as
    :class:`LBFGS` (the pair ``S[0], Y[0]`` holds the last direction and gradient)."""

    name: ClassVar[str] = "cg"
    memory: int = 1
    restart: int = 50

    def update(self, objective: Any, st: dict) -> dict:
        """One Polak-Ribiere+ conjugate-gradient iteration (Nocedal & Wright, Sec. 5.2):
        ``beta = max(0, <g, g - g_prev> / <g_prev, g_prev>)``, ``d = -g + beta d_prev`` (``-g`` every ``restart``
        iterations or when ``d`` is not a descent direction), then Armijo backtracking from the step that repeats
        the last first-order decrease (Nocedal & Wright, Eq. 3.60).

        Parameters
        ----------
        objective : Objective
            ``objective(Z, s) -> (value, exact_value, gradient)`` over the current active set
            (:class:`~metricopt.backends.jax.loop.Objective`).
        st : dict
            The solver's state (module docstring).

        Returns
        -------
        dict
            The state after the iteration.
        """
        Z, s, f, g = st["M"], st["s"], st["f"], st["g"]
        d_prev, g_prev, k = st["S"][0].reshape(Z.shape), st["Y"][0].reshape(Z.shape), st["k"]
        fresh = (k == 0) | (k % self.restart == 0)
        beta = jnp.maximum(0.0, _dot(g, g - g_prev) / jnp.maximum(_dot(g_prev, g_prev), 1e-300))
        d = jnp.where(fresh, -g, -g + beta * d_prev)
        d = jnp.where(_dot(g, d) < 0, d, -g)
        # initial step: the last step's first-order decrease repeated (Nocedal & Wright, Eq. 3.60)
        t0 = jnp.where(fresh, _first_step(Z, g), st["rho"][0] * _dot(g_prev, d_prev) / _dot(g, d))
        t0 = jnp.where(jnp.isfinite(t0) & (t0 > 0), t0, _first_step(Z, g))
        t, Zn, fn, fxn, gn, ok, trials = _armijo(objective, Z, s, f, g, d, t0)
        pick = lambda new, old: jnp.where(ok, new, old)
        Zn, fn, fxn, gn = pick(Zn, Z), pick(fn, f), pick(fxn, st["fx"]), pick(gn, g)
        return {**st, "M": Zn, "f": fn, "fx": fxn, "g": gn, "S": st["S"].at[0].set(d.ravel()),
                "Y": st["Y"].at[0].set(g.ravel()), "rho": st["rho"].at[0].set(t), "k": k + 1,
                "grad_norm": _norm(gn), "step": t * _norm(d), "done": self._solved(fn, gn, Zn) | ~ok,
                "evals": st["evals"] + trials}


SOLVERS = {"fista": FISTA(), "subgradient": Subgradient(), "online": OnlinePOLA(), "newton": TrustNewton(),
           "lbfgs": LBFGS(), "cg": ConjugateGradient()}
#: the default solver (measured faster to certified gaps; see the backend's docstring)
DEFAULT_SOLVER = "fista"
