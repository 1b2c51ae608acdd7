"""Driver of the JAX backend: active sets, smoothing continuation, certificates, the Solution."""

from __future__ import annotations

import time

import numpy as np

from ..._validation import check_choice, check_int, check_real
from ...errors import InputError, UnknownOptionError
from ...solution import Solution, Status
from .solvers import DEFAULT_SOLVER, SOLVERS

OPTIONS = ("solver", "max_iter", "tol", "verbose", "check_every", "certify_every", "margin", "time_limit")

#: the smoothing width is divided by this factor at each continuation step ...
SMOOTHING_DECREASE = 0.2
#: ... taken when a chunk's decrease of the smoothed objective falls below this fraction of
#: the smoothing bias ``f_s(M) - f(M)`` (the smoothed problem is then solved well enough)
SMOOTHING_PROGRESS = 1.0
#: smallest smoothing width
SMOOTHING_MIN = 1e-12
#: consecutive chunks without any change of M after which the solve is declared stalled
STALL_CHUNKS = 5


def _check_problem(problem):
    from ...problems.lmnn import LMNNProblem

    if not isinstance(problem, LMNNProblem):
        raise InputError(f"backend='jax' solves LMNN problems only; got {problem.method}. Use backend='cvxpy'.")
    bad = [t for t in problem.terms if not getattr(t, "has_jax", False)]
    if bad:
        raise InputError(f"backend='jax' has no JAX piece for the term(s) {bad}; use backend='cvxpy'.")
    if problem.diagonal or problem.constraints or problem.extra_variables:
        raise InputError("backend='jax' handles unconstrained LMNN-type problems over a full PSD M only.")


def solve(problem, solver=None, max_iter=20_000, tol=1e-6, verbose=False, check_every=10, certify_every=50,
          margin=0.2, time_limit=None, **unknown):
    """Solve an LMNN problem by a first-order method in JAX (float64, CPU or GPU).

    Every ``check_every`` iterations all triplets are searched (blocked, memory
    ``O(block * n)``) and the active set (hinge argument ``> -margin``) rebuilt; every
    ``certify_every`` iterations (at such a re-check) the iterate is certified with
    :func:`metricopt.certify` over all triplets and the solve stops with status
    ``optimal`` once the certified relative gap is ``<= tol``. Otherwise it ends at
    ``max_iter`` (or ``time_limit`` seconds) with ``iteration_limit``, or with
    ``optimal_inaccurate`` when the iterates stall; the final iterate is certified
    either way, and only a certificate makes a solution ``optimal``.

    Parameters
    ----------
    solver : {"fista", "subgradient"}
        ``"fista"`` (default): accelerated projected gradient with restarts on the hinge
        smoothed to a Huber whose width is driven down. ``"subgradient"``: the reference,
        Weinberger & Saul's projected subgradient method (JMLR 2009, Appendix A).
    max_iter : int
    tol : float
        Certified relative duality gap to stop at.
    verbose : bool
        Print iteration, objective, certified gap, active-set size and time at each re-check.
    check_every : int
        Iterations between full re-checks of all triplets.
    certify_every : int
        Iterations between certificates (rounded up to a multiple of ``check_every``).
    margin : float
        Triplets with hinge argument ``1 + d_ij - d_il > -margin`` at a re-check form the active set.
    time_limit : float, optional
        Seconds after which the solve stops with ``iteration_limit``.
    """
    if unknown:
        raise UnknownOptionError(
            f"unknown option(s) for backend='jax': {sorted(unknown)}; accepted: {', '.join(OPTIONS)}."
        )
    _check_problem(problem)
    name = check_choice(str(solver or DEFAULT_SOLVER).lower(), "solver", tuple(SOLVERS))
    max_iter = check_int(max_iter, "max_iter", low=1)
    tol = check_real(tol, "tol", low=0.0, low_open=True)
    check_every = check_int(check_every, "check_every", low=1)
    certify_every = check_int(certify_every, "certify_every", low=1)
    margin = check_real(margin, "margin", low=0.0)
    if time_limit is not None:
        time_limit = check_real(time_limit, "time_limit", low=0.0, low_open=True)

    import jax

    with jax.enable_x64(True):
        return _solve(problem, name, SOLVERS[name], max_iter, tol, bool(verbose), check_every,
                      certify_every, margin, time_limit)


def _solve(problem, name, solver, max_iter, tol, verbose, check_every, certify_every, margin, time_limit):
    import jax.numpy as jnp

    from ...certify import certify
    from .loop import run_chunk

    t0 = time.perf_counter()
    terms = problem.terms
    term_classes = tuple(type(t) for t in terms)
    data = tuple({k: jnp.asarray(v) for k, v in t.jax_data(problem).items()} for t in terms)
    ws_terms = [i for i, t in enumerate(terms) if t.uses_working_set]

    M = np.eye(problem.d)
    state = solver.init(jnp.asarray(M))
    dtype = str(state["M"].dtype)

    it, last_cert_it, unchanged = 0, None, 0
    capacity = {}  # active-set capacity bucket per working-set term
    np_actives = {}  # the current active sets (numpy)
    history, cert, best = [], None, None  # best: (objective, M, iteration)
    cert_time, cert_calls = 0.0, 0
    status, message = None, ""
    while True:
        # ---- full re-check of every triplet at M: active sets and the exact objective
        actives, sizes, obj = [], 0, 0.0
        V = {"M": M}
        for idx, t in enumerate(terms):
            if idx in ws_terms:
                act, size, val = t.jax_active_set(problem, M, max(margin, float(state["s"])),
                                                  min_capacity=capacity.get(idx, 256))
                cap = act["mask"].shape[0]
                # keep the capacity bucket (no recompilation) unless the set became mostly padding
                capacity[idx] = cap if size >= cap // 16 else 256
                if hasattr(solver, "remap"):  # solvers with per-triplet state (duals) carry it over
                    state = solver.remap(state, np_actives.get(idx), act)
                np_actives[idx] = act
                actives.append({k: jnp.asarray(v) for k, v in act.items()})
                sizes += size
                obj += val
            else:
                actives.append(None)
                obj += float(t.value(problem, V))
        if not np.isfinite(obj) or not np.all(np.isfinite(M)):
            status, message = Status.ERROR, f"non-finite objective or metric at iteration {it}"
            break
        if best is None or obj < best[0]:
            best = (obj, M, it)
        done = it >= max_iter or (time_limit is not None and time.perf_counter() - t0 >= time_limit)
        entry = {"iteration": it, "time": time.perf_counter() - t0, "objective": obj, "active_set": sizes,
                 "smoothing": float(state["s"]), "rel_gap": None}
        # ---- certificate (also right before giving up)
        if last_cert_it is None or it - last_cert_it >= certify_every or done:
            tc = time.perf_counter()
            cert = certify(problem, M, tol=tol)
            cert_time += time.perf_counter() - tc
            cert_calls += 1
            last_cert_it = it
            entry["rel_gap"] = cert.rel_gap
        entry["certify_time"] = cert_time
        history.append(entry)
        if verbose:
            gap = "" if entry["rel_gap"] is None else f"{entry['rel_gap']:.3e}"
            print(f"[metricopt jax/{name}] iter {it:6d}  objective {obj:.10g}  certified gap {gap:>10s}  "
                  f"active {sizes:7d}  {entry['time']:.2f}s", flush=True)
        if entry["rel_gap"] is not None and cert.rel_gap <= tol:
            status, message = Status.OPTIMAL, f"certified relative gap {cert.rel_gap:.2e} <= tol {tol:.1e}"
            break
        if done:
            status = Status.ITERATION_LIMIT
            message = (f"stopped after {it} iterations" if it >= max_iter
                       else f"time limit {time_limit:g}s reached after {it} iterations")
            break
        # ---- smoothing continuation (driven by the chunk's progress)
        if solver.smoothing and it > 0:
            progress = float(state["f_start"] - state["f"])
            bias = float(state["f"] - state["fx"])
            s = float(state["s"])
            if progress <= SMOOTHING_PROGRESS * bias and s > SMOOTHING_MIN:
                s_new = max(s * SMOOTHING_DECREASE, SMOOTHING_MIN)
                state = {**state, "s": jnp.asarray(s_new, state["s"].dtype), "t": jnp.ones_like(state["t"]), "Mprev": state["M"],
                         "L": state["L"] * (s / s_new) ** 0.5}
        # ---- one jitted chunk of iterations
        steps = min(check_every, max_iter - it)
        M_prev = M
        state = run_chunk(solver, term_classes, data, tuple(actives), state, jnp.asarray(steps, jnp.int32))
        M = np.array(state["M"], dtype=np.float64)
        it += steps
        unchanged = unchanged + 1 if np.array_equal(M, M_prev) else 0
        if unchanged >= STALL_CHUNKS:
            status, message = Status.OPTIMAL_INACCURATE, f"the iterates stalled at iteration {it}"
            break

    # ---- result: the best iterate seen at a re-check, certified
    obj, M_best, it_best = best
    if cert is None or it_best != last_cert_it or not np.array_equal(M_best, M):
        tc = time.perf_counter()
        cert = certify(problem, M_best, tol=tol)
        cert_time += time.perf_counter() - tc
        cert_calls += 1
    if cert.rel_gap <= tol and status in (Status.ITERATION_LIMIT, Status.OPTIMAL_INACCURATE):
        message += f"; but the final certificate proves optimality"
        status = Status.OPTIMAL
    message += f"; certified relative gap {cert.rel_gap:.2e}"
    stats = {
        "time": time.perf_counter() - t0,
        "iterations": it,
        "best_iteration": it_best,
        "evaluations": int(state["evals"]),
        "certificate_rel_gap": cert.rel_gap,
        "certify_time": cert_time,
        "certify_calls": cert_calls,
        "active_set_size": history[-1]["active_set"] if history else 0,
        "history": history,
        "dtype": dtype,
        "device": str(state["M"].devices().pop()) if hasattr(state["M"], "devices") else "",
        "solver_objective": float(state["fx"]),
    }
    if solver.smoothing:
        stats["smoothing"] = float(state["s"])
    if "restarts" in state:
        stats["restarts"] = int(state["restarts"])
    sol = Solution(M=M_best, objective=float(problem.objective(M_best)), status=status, backend="jax",
                   solver=name, stats=stats, message=f"{status.message} ({message})", certificate=cert)
    return sol
