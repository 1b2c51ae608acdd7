"""Driver of the JAX backend: active sets, smoothing continuation, certificates, the Solution."""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from typing import Any, Callable

import numpy as np

from ..._validation import check_choice, check_int, check_real
from ...certify.certificate import Verdict
from ...certify.policy import decide_status
from ...protocols import DualPiece
from ...errors import InputError, UnknownOptionError
from ...solution import Solution, Status
from .geometry import Setup
from .geometry import accepts as _accepts
from .solvers import DEFAULT_SOLVER, SOLVERS, SMOOTHING_MIN

NAME = "jax"


@dataclass(frozen=True)
class Options:
    """The JAX backend's options, every default stated once (see :func:`solve`)."""

    solver: str | None = None
    max_iter: int = 20_000
    tol: float = 1e-6
    verbose: bool = False
    check_every: int = 10
    certify_every: int = 50
    margin: float = 0.2
    time_limit: float | None = None
    init: Any = None
    devices: Any = None
    callback: Callable | None = None

    @classmethod
    def resolve(cls, options: dict) -> "Options":
        """Checked options from keyword arguments (``None`` for a number: its default)."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise UnknownOptionError(
                f"unknown option(s) for backend='jax': {unknown}; accepted: {', '.join(names)}."
            )
        opts = cls(**{k: v for k, v in options.items() if v is not None})
        name = check_choice(str(opts.solver or DEFAULT_SOLVER).lower(), "solver", tuple(SOLVERS))
        time_limit = opts.time_limit
        if time_limit is not None:
            time_limit = check_real(time_limit, "time_limit", low=0.0, low_open=True)
        if opts.callback is not None and not callable(opts.callback):
            raise InputError(f"callback must be a callable callback(info) -> bool | None; got {opts.callback!r}.")
        return cls(solver=name, max_iter=check_int(opts.max_iter, "max_iter", low=1),
                   tol=check_real(opts.tol, "tol", low=0.0, low_open=True), verbose=bool(opts.verbose),
                   check_every=check_int(opts.check_every, "check_every", low=1),
                   certify_every=check_int(opts.certify_every, "certify_every", low=1),
                   margin=check_real(opts.margin, "margin", low=0.0), time_limit=time_limit, init=opts.init,
                   devices=opts.devices, callback=opts.callback)


#: the option names (for messages and the command line)
OPTIONS = tuple(f.name for f in fields(Options))


def accepts(problem):
    """``(True, "")`` when the JAX backend solves ``problem``, else ``(False, reason)`` (read from the
    problem's declared geometry and terms)."""
    return _accepts(problem)

#: consecutive chunks without any change of M after which the solve is declared stalled
STALL_CHUNKS = 5
#: after a certificate at iteration ``k`` the next one comes ``max(certify_every, CERTIFY_GROWTH * k)``
#: iterations later: certificates (an exact search of all triplets and a small dual program)
#: stay a bounded share of the work, for at most ``CERTIFY_GROWTH`` extra iterations
CERTIFY_GROWTH = 0.2
#: certificates taking longer than CERTIFY_SLOW seconds are spaced so that the iterations between two
#: of them take at least CERTIFY_SHARE times as long as the last one (the schedule then depends on timing)
CERTIFY_SLOW = 0.5
CERTIFY_SHARE = 3.0
#: rollback safeguard: a chunk is undone when the re-check after it finds more than
#: max(EXPLOSION_FACTOR * previous size, EXPLOSION_MIN) active triplets (the search then stops early)
#: or the true objective rose by more than BLOWUP times its value; after MAX_REJECTIONS in a row the
#: iterate is accepted whatever happens
EXPLOSION_FACTOR = 16
EXPLOSION_MIN = 100_000
BLOWUP = 0.5
MAX_REJECTIONS = 4
#: smallest active-set capacity (padding bucket)
MIN_CAPACITY = 256
#: the re-check interval grows up to this multiple of ``check_every`` (solvers with adaptive checks)
MAX_CHECK_FACTOR = 8


def _jax_terms(problem, solver):
    """The terms the jitted loop sees (``problem.jax_terms``): an online solver needs a problem that
    declares ``online_solvable`` (POLA)."""
    if solver.online and not getattr(problem, "online_solvable", False):
        raise InputError(f"solver='online' is POLA's online algorithm; {problem.method} has no online solver here.")
    return problem.jax_terms(online=solver.online)


def solve(problem, **options):
    """Solve an LMNN, MMC or soft-margin POLA problem by a first-order method in JAX (float64,
    CPU or GPU); hard-margin POLA by its online algorithm only; a problem with a factor geometry
    (``problem.factored(r)``: ``M = L^T L`` with a rectangular ``L``, non-convex) to a stationary point.

    Which problems it accepts is read from their declarations (:func:`accepts`). For a factor
    geometry no certificate is taken (the problem is not convex): the solve stops when the smoothing
    width reached its minimum and the relative gradient norm ``||grad_L|| ||L|| / |f|`` is at most
    ``tol``, with status ``stationary`` (never ``optimal``); ``init`` is then the ``(r, d)`` factor.

    Every ``check_every`` iterations (LMNN) all triplets are searched (blocked, memory
    ``O(block * n)``) and the active set (hinge argument ``> -margin``) rebuilt; every
    ``certify_every`` iterations (at such a re-check) the iterate is certified with
    :func:`metricopt.certify` over all triplets and the solve stops with status
    ``optimal`` once the certified relative gap is ``<= tol``. Otherwise it ends at
    ``max_iter`` (or ``time_limit`` seconds) with ``iteration_limit``, or with
    ``optimal_inaccurate`` when the iterates stall; the final iterate is certified
    either way, and only a certificate makes a solution ``optimal``.

    Parameters
    ----------
    solver : {"fista", "subgradient", "online"}
        ``"fista"`` (default): accelerated projected gradient with restarts on the problem
        smoothed (hinges to a Huber, MMC's roots near 0) with the width driven down.
        ``"subgradient"``: the reference, Weinberger & Saul's projected subgradient method
        (JMLR 2009, Appendix A). ``"online"``: POLA's online algorithm (Shalev-Shwartz et al.
        2004), one iteration per pass over the pairs.
    max_iter : int
    tol : float
        Certified relative duality gap to stop at.
    verbose : bool
        Print iteration, objective, certified gap, active-set size and time at each re-check.
    check_every : int
        Iterations between full re-checks of all triplets.
    certify_every : int
        Iterations between certificates (taken at re-checks; later on every ``CERTIFY_GROWTH``
        (20 %) of the iterations done so far when that is longer).
    margin : float
        Triplets with hinge argument ``1 + d_ij - d_il > -margin`` at a re-check form the active set.
    time_limit : float, optional
        Seconds after which the solve stops with ``iteration_limit``.
    init : (d, d) array or Solution, optional
        Starting point (PSD metric; a Solution also gives POLA's ``b``); default the identity,
        as in the paper (MMC: scaled onto the budget; POLA: ``b = 1``).
    devices : None, int, "all" or a list of jax devices
        Shard the LMNN hinge over several devices: the active triplets (grouped by anchor
        point) are split evenly across the devices, each computes its part of the margins
        and of the weighted scatters, and XLA sums the ``d x d`` gradient across them
        (``jax.sharding``; the metric and the data are replicated). ``None`` (default): one
        device. On several hosts, call ``jax.distributed.initialize()`` first; ``"all"`` then
        means every device of every host.
    callback : callable, optional
        ``callback(info) -> bool | None``, called at every accepted re-check (a re-check undone
        by the rollback safeguard is not reported), *after* the exact objective and, where one is
        due, the certificate of the iterate are computed and *before* the solve decides to stop.
        ``info`` is a dict with ``iteration`` (iterations done), ``time`` (seconds since the
        start), ``M`` (a float64 numpy copy of the iterate), ``objective`` (the problem's exact
        objective at ``M``), ``rel_gap`` (the certified relative gap of ``M``, ``None`` when no
        certificate was taken at this re-check), ``certificate`` (the
        :class:`~metricopt.certify.Certificate` or ``None``), ``active_set`` (number of active
        triplets), ``variables`` (other variables, e.g. POLA's ``b``) and the loop's diagnostics
        (``new_violators``, ``smoothing``, ``certify_time``, ...). Returning ``True`` stops the
        solve *at this iterate*: it is returned (not the best-objective iterate seen), certified,
        with status ``early_stopped`` -- or ``optimal`` when its certificate proves optimality
        within ``tol`` (a certified optimum at this re-check wins over the request). ``False`` or
        ``None`` go on; any other return value is an error. Exceptions raised by the callback
        propagate. Time spent in the callback counts towards ``time_limit`` and the statistics
        (``stats["callback_time"]``). Used by :mod:`metricopt.early_stopping`.
    """
    opts = Options.resolve(options)
    setup = Setup(problem)
    solver = SOLVERS[opts.solver]
    terms = _jax_terms(problem, solver)
    init = opts.init
    if setup.factor:
        Z0 = setup.initial_point() if init is None else _check_factor(init, setup.declared.rank, problem.d)
    elif init is None and solver.scaled_start and any(t.uses_working_set for t in terms):
        Z0 = setup.from_point({"M": _best_scale(problem) * np.eye(problem.d)})
    elif init is None:
        Z0 = setup.initial_point()
    else:
        init_vars = dict(getattr(init, "variables", {}) or {})
        init_M = init.M if isinstance(init, Solution) else init
        V0 = {"M": problem.check_metric(init_M, name="init", psd_tol=1e-7), **init_vars}
        Z0 = setup.from_point(V0)

    import jax

    mesh = _mesh(opts.devices, problem)
    with jax.enable_x64(True):
        return _solve(problem, setup, terms, Z0, solver, opts, mesh)


def _check_factor(L, r, d):
    """An ``(r, d)`` finite starting factor."""
    L = np.asarray(L.L if isinstance(L, Solution) else L, dtype=np.float64)
    if L.shape != (r, d) or not np.all(np.isfinite(L)):
        raise InputError(f"init must be a finite ({r}, {d}) factor L for this rank-{r} problem; got shape {L.shape}.")
    return L


def _best_scale(problem, shrink=2.0, golden_steps=6):
    """``argmin_c f(c I)`` over ``c > 0``, approximately: ``f`` along the ray of the identity is convex
    and piecewise linear in ``c``; halve ``c`` from 1 while ``f`` decreases (doubling instead if it
    increases at once), then narrow the bracket by golden-section steps in ``log c``. Every value is
    the exact objective (a blocked search of all triplets); ``c`` stays within ``[2^-20, 2^20]``."""
    f = lambda c: problem.objective(c * np.eye(problem.d))
    c, fc = 1.0, f(1.0)
    step = 1.0 / shrink if f(1.0 / shrink) < fc else shrink
    lo_hi = None
    for _ in range(20):
        cn = c * step
        fn = f(cn)
        if fn >= fc:
            lo_hi = sorted((c / step, cn))
            break
        c, fc = cn, fn
    if lo_hi is None:
        return c
    a, b = np.log(lo_hi[0]), np.log(lo_hi[1])
    g = (np.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = b - g * (b - a), a + g * (b - a)
    f1, f2 = f(np.exp(x1)), f(np.exp(x2))
    for _ in range(golden_steps):
        if f1 <= f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - g * (b - a)
            f1 = f(np.exp(x1))
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + g * (b - a)
            f2 = f(np.exp(x2))
    best = min((fc, c), (f1, np.exp(x1)), (f2, np.exp(x2)))
    return float(best[1])


def _mesh(devices, problem):
    """A one-axis device mesh ``("data",)`` for sharding, or ``None`` for a single device."""
    import jax

    if devices is None:
        return None
    available = jax.devices()
    if isinstance(devices, str):
        check_choice(devices.lower(), "devices", ("all",))
        devs = available
    elif isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
        count = check_int(devices, "devices", low=1)
        if count > len(available):
            raise InputError(
                f"devices={count} asked for more devices than JAX sees ({len(available)}: {available}). "
                "On CPU, simulate several with XLA_FLAGS=--xla_force_host_platform_device_count=N set before "
                "JAX is imported."
            )
        devs = available[:count]
    else:
        devs = list(devices)
        if not devs:
            raise InputError("devices must be None, a positive count, 'all' or a non-empty list of jax devices.")
    if not any(t.uses_working_set for t in problem.terms):
        raise InputError(f"devices=: sharding splits LMNN's triplets over devices; {problem.method} has none to split.")
    return jax.sharding.Mesh(np.array(devs), ("data",))


def _new_violators(old, new, h):
    """How many triplets of ``new`` with ``h > 0`` are absent from ``old`` (numpy active sets)."""
    if old is None:
        return int(np.sum(h > 0))
    key = lambda a: a["p"][a["mask"] > 0].astype(np.int64) * (1 << 31) + a["l"][a["mask"] > 0]
    viol = (h > 0) & (new["mask"] > 0)
    knew = new["p"][viol].astype(np.int64) * (1 << 31) + new["l"][viol]
    return int(np.sum(~np.isin(knew, key(old))))


def _solve(problem, setup, terms, Z0, solver, opts, mesh=None):
    import jax.numpy as jnp

    from ...certify import certify
    from .loop import run_chunk

    name, max_iter, tol, verbose = solver.name, opts.max_iter, opts.tol, opts.verbose
    check_every, certify_every, margin = opts.check_every, opts.certify_every, opts.margin
    time_limit, callback = opts.time_limit, opts.callback
    factor = setup.factor  # non-convex: stationarity instead of certificates
    t0 = time.perf_counter()
    term_classes = tuple(type(t) for t in terms)
    roles = tuple((t.dual_piece(problem) or _NO_PIECE).loss for t in terms)
    data = tuple({k: jnp.asarray(v) for k, v in t.jax_data(problem).items()} for t in terms)
    geometry = setup.geometry
    gdata = {"T": jnp.asarray(setup.gdata["T"])} if "T" in setup.gdata else {}
    smoothed = solver.smoothing and any(t.jax_smoothed for t in terms)
    extras = problem.extra_variables
    online = solver.online

    Z = np.asarray(geometry.project(jnp.asarray(Z0)), dtype=np.float64)
    state = solver.init(jnp.asarray(Z))
    n_dev = 1
    if mesh is not None:
        # the active triplets are split across the devices, everything else replicated
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        n_dev = mesh.devices.size
        split, replicate = NamedSharding(mesh, PartitionSpec("data")), NamedSharding(mesh, PartitionSpec())
        data, gdata, state = jax.device_put((data, gdata, state), replicate)
    dtype = str(state["M"].dtype)

    def certify_point(V):
        if factor:
            return None
        return certify(problem, V["M"], tol=tol, **{k: V[k] for k in extras})

    it, unchanged, interval = 0, 0, check_every
    capacity = {}  # active-set capacity bucket per working-set term
    np_actives = {}  # the current active sets (numpy)
    history, best = [], None  # best: (objective, V, iteration)
    cert, cert_V, cert_it, cert_time, cert_calls = None, None, None, 0.0, 0
    last_cert, cert_end = 0.0, 0.0
    # rollback safeguard (solvers that promise descent, on problems with working sets)
    guarded = solver.monotone and any(t.uses_working_set for t in terms)
    prev, prev_sizes, prev_prev_sizes, rejections, total_rejections, state_iters = None, {}, {}, 0, 0, 0
    status, message = None, ""
    callback_time, callback_calls, stopped = 0.0, 0, None  # stopped: (point, iteration) a callback stopped at
    while True:
        # ---- full re-check at the iterate: active sets (every triplet searched) and the exact objective
        V = setup.to_point(Z)
        M = V["M"]
        actives, sizes, obj, new_viol, exploded = [], 0, 0.0, 0, False
        guard = guarded and prev is not None and rejections < MAX_REJECTIONS
        for idx, t in enumerate(terms):
            if not t.uses_working_set:
                actives.append(None)
                continue
            limit = max(EXPLOSION_FACTOR * prev_sizes.get(idx, 0), EXPLOSION_MIN) if guard else None
            found = t.jax_active_set(problem, M, max(margin, float(state["s"])),
                                     min_capacity=capacity.get(idx, MIN_CAPACITY), multiple=n_dev, limit=limit)
            if found is None:
                exploded = True
                break
            act, size, val, h = found
            prev_sizes[idx] = size
            cap = act["mask"].shape[0]
            # keep the capacity bucket (no recompilation) unless the set became mostly padding
            capacity[idx] = cap if size >= cap // 16 else MIN_CAPACITY
            new_viol += _new_violators(np_actives.get(idx), act, h)
            np_actives[idx] = act
            act_j = {k: jnp.asarray(v) for k, v in act.items()}
            actives.append(act_j if mesh is None else jax.device_put(act_j, split))
            sizes += size
            obj += val
        # the problem's own objective (terms outside the loop's view, e.g. hard-margin POLA's carrier, excluded)
        if not exploded:
            obj += sum(t.value(problem, V) for t in problem.terms if not t.uses_working_set)
        # ---- safeguard: a chunk steps on the active set's model of the objective; where it left the region
        # where that model holds (the active set exploded, or the true objective rose by half), roll back to
        # the chunk's start with ten times smaller steps and a re-check after every iteration
        if guard and (exploded or obj - prev[2] > BLOWUP * abs(prev[2])):
            rejections += 1
            total_rejections += 1
            Z, st_prev, _ = prev
            state = solver.shorten(st_prev, state, 10.0)
            state = {**state, "iterations": state_iters}
            prev_sizes = dict(prev_prev_sizes)
            interval = 1
            if verbose:
                print(f"[metricopt jax/{name}] iter {it:6d}  step rejected (the active set's model failed); rolled "
                      "back with 10x smaller steps", flush=True)
            continue
        rejections = 0
        if not np.isfinite(obj) or not np.all(np.isfinite(Z)):
            status, message = Status.ERROR, f"non-finite objective or metric at iteration {it}"
            break
        # constrained problems (hard-margin POLA) keep the last iterate; the others the best one seen
        if best is None or obj < best[0] or problem.constraints:
            best = (obj, V, it)
        now = time.perf_counter()
        done = it >= max_iter or (time_limit is not None and now - t0 >= time_limit)
        entry = {"iteration": it, "time": now - t0, "objective": obj, "active_set": sizes,
                 "new_violators": new_viol, "smoothing": float(state["s"]) if smoothed else 0.0, "rel_gap": None}
        if it > 0:
            entry.update(solver.diagnostics(state))
        stationary = False
        if factor:
            # non-convex: no certificate; the relative gradient norm at the iterate (current smoothing)
            probe = run_chunk(solver, term_classes, geometry, data, gdata, tuple(actives), state,
                              jnp.asarray(0, jnp.int32), roles)
            gnorm = float(probe["grad_norm"]) if "grad_norm" in probe else float("inf")
            rel = gnorm * float(np.linalg.norm(Z)) / max(abs(float(probe["f"])), 1e-300)
            entry["stationarity"] = rel
            at_min_width = not smoothed or float(state["s"]) <= SMOOTHING_MIN * (1 + 1e-9)
            stationary = at_min_width and rel <= tol
        # ---- certificate: every certify_every iterations, more sparsely later on (a deterministic
        # schedule, so that a solve is reproducible); always before giving up
        due = it - cert_it >= max(certify_every, int(CERTIFY_GROWTH * cert_it)) if cert is not None else True
        if due and cert is not None and last_cert > CERTIFY_SLOW:
            # an expensive certificate (e.g. POLA's restricted dual program) waits until the iterations
            # since the last one took CERTIFY_SHARE times as long: certificates stay a bounded share of the time
            due = now - cert_end >= CERTIFY_SHARE * last_cert
        if (due or done or online) and not factor:
            tc = time.perf_counter()
            cert = certify_point(V)
            last_cert = time.perf_counter() - tc
            cert_end = time.perf_counter()
            cert_time += last_cert
            cert_calls += 1
            cert_it, cert_V = it, V
            entry["rel_gap"] = cert.rel_gap
        entry["certify_time"] = cert_time
        history.append(entry)
        if verbose:
            gap = "" if entry["rel_gap"] is None else f"{entry['rel_gap']:.3e}"
            unit = "pass" if online else "iter"
            print(f"[metricopt jax/{name}] {unit} {it:6d}  objective {obj:.10g}  certified gap {gap:>10s}  "
                  f"active {sizes:7d}  {entry['time']:.2f}s"
                  + "".join(f"  {k} {v:.3g}" for k, v in solver.diagnostics(state).items() if it > 0), flush=True)
        # ---- the caller's callback: sees the re-checked (and possibly certified) iterate, may stop here
        stop_requested = False
        if callback is not None:
            info = {**entry, "M": np.array(M, dtype=np.float64, copy=True),
                    "certificate": cert if entry["rel_gap"] is not None else None,
                    "variables": {k: V[k] for k in extras}}
            tc = time.perf_counter()
            answer = callback(info)
            callback_time += time.perf_counter() - tc
            callback_calls += 1
            if answer is not None and not isinstance(answer, (bool, np.bool_)):
                raise InputError(
                    f"callback must return True (stop at this iterate), False or None (go on); it returned "
                    f"{type(answer).__name__} at iteration {it}."
                )
            stop_requested = bool(answer)
        if entry["rel_gap"] is not None and cert.rel_gap <= tol:
            status, message = Status.OPTIMAL, f"certificate within tol {tol:.1e} after {it} iterations"
            break
        if stationary:
            status = Status.STATIONARY
            message = f"relative gradient norm {entry['stationarity']:.2e} <= tol {tol:.1e} after {it} iterations"
            break
        if stop_requested:
            status, message = Status.EARLY_STOPPED, f"the callback stopped the solve at iteration {it}"
            stopped = (V, it)
            break
        if done:
            status = Status.ITERATION_LIMIT
            message = (f"stopped after {it} {'passes' if online else 'iterations'}" if it >= max_iter
                       else f"time limit {time_limit:g}s reached after {it} iterations")
            break
        # ---- re-check interval: lengthened while re-checks find no new violated triplet
        if solver.adaptive_checks:
            interval = check_every if new_viol else min(2 * interval, MAX_CHECK_FACTOR * check_every)
        # ---- the solver's own step between chunks (FISTA: the smoothing continuation)
        if it > 0:
            state = solver.between_chunks(state, smoothed)
        # ---- one jitted chunk of iterations (online: one pass over the pairs per iteration)
        steps = 1 if online else min(interval, max_iter - it)
        Z_prev = Z
        prev, prev_prev_sizes = (Z, state, obj), dict(prev_sizes)
        state = run_chunk(solver, term_classes, geometry, data, gdata, tuple(actives), state,
                          jnp.asarray(steps, jnp.int32), roles)
        Z = np.array(state["M"], dtype=np.float64)
        it = state_iters = int(state["iterations"])
        unchanged = unchanged + 1 if np.array_equal(Z, Z_prev) else 0
        if unchanged >= STALL_CHUNKS:
            status, message = Status.OPTIMAL_INACCURATE, f"the iterates stalled at iteration {it}"
            if online:
                message = (f"the online algorithm made no update in pass {it}: every pair meets its margin; an online "
                           "learner stops at a feasible point, not at the batch optimum (use solver='fista' or the "
                           "exact backend for that)")
            if factor:
                status = Status.ITERATION_LIMIT
                message = (f"the iterates stalled at iteration {it} (relative gradient norm "
                           f"{history[-1].get('stationarity', float('nan')):.2e} > tol {tol:.1e}): not shown stationary")
                break
            # certify the last iterate before stopping
            V = setup.to_point(Z)
            tc = time.perf_counter()
            cert, cert_V, cert_it = certify_point(V), V, it
            cert_time += time.perf_counter() - tc
            cert_calls += 1
            break

    if factor:
        return _factor_solution(problem, setup, best, status, message, history, state, name, t0)
    # ---- result: a certified optimum, the iterate a callback stopped at, else the best iterate seen at a
    # re-check (certified)
    if status is Status.OPTIMAL or best is None:
        V_out, it_out = cert_V, cert_it
    else:
        V_out, it_out = stopped if status is Status.EARLY_STOPPED else best[1:]
        if cert_V is None or V_out is not cert_V:
            tc = time.perf_counter()
            cert = certify_point(V_out)
            cert_time += time.perf_counter() - tc
            cert_calls += 1
        status, note = decide_status(status, cert)
        if note:
            message += f"; {note}"
    if V_out is None:
        return Solution(M=None, objective=float("nan"), status=status, backend="jax", solver=name,
                        stats={"time": time.perf_counter() - t0, "iterations": it, "history": history},
                        message=f"{status.message} ({message})")
    message += f"; certified relative gap {cert.rel_gap:.2e}"
    if cert.verdict is Verdict.INFEASIBLE:
        message += f" (the iterate is infeasible: {cert.details.get('reason', '')})"
    stats = {
        "time": time.perf_counter() - t0,
        "iterations": it,
        "best_iteration": it_out,
        "evaluations": int(state["evals"]),
        "certificate_rel_gap": cert.rel_gap,
        "certify_time": cert_time,
        "certify_calls": cert_calls,
        "active_set_size": history[-1]["active_set"] if history else 0,
        "history": history,
        "dtype": dtype,
        "device": str(next(iter(state["M"].devices()))),
        "devices": n_dev,  # devices the triplets were sharded over
        "solver_objective": float(state["fx"]),  # the loop's own value at its last iterate (active set)
    }
    if callback is not None:
        stats["callback_time"] = callback_time
        stats["callback_calls"] = callback_calls
    if smoothed:
        stats["smoothing"] = float(state["s"])
    if guarded:
        stats["rollbacks"] = total_rejections
    if "restarts" in state:
        stats["restarts"] = int(state["restarts"])
    variables = {k: V_out[k] for k in extras}
    return Solution(M=V_out["M"], objective=float(problem.objective(V_out["M"], **variables)), status=status,
                    backend="jax", solver=name, stats=stats, message=f"{status.message} ({message})",
                    certificate=cert, variables=variables)


def _factor_solution(problem, setup, best, status, message, history, state, name, t0):
    """The Solution of a non-convex (factor geometry) solve: the best iterate seen at a re-check,
    ``M = L^T L`` with its ``(r, d)`` factor, no certificate, never ``optimal``."""
    status, note = decide_status(status, None, convex=False)
    if note:
        message += f"; {note}"
    obj, V, it_out = best
    stats = {"time": time.perf_counter() - t0, "iterations": int(state["iterations"]), "best_iteration": it_out,
             "evaluations": int(state["evals"]), "history": history,
             "stationarity": history[-1].get("stationarity") if history else None,
             "active_set_size": history[-1]["active_set"] if history else 0, "smoothing": float(state["s"]),
             "solver_objective": float(state["fx"]), "rank": setup.declared.rank}
    return Solution(M=V["M"], L=V["L"], objective=float(problem.objective(V["M"])), status=status, backend="jax",
                    solver=name, stats=stats, message=f"{status.message} ({message})")


_NO_PIECE = DualPiece()
