"""The exact backend: compile a problem to a ``cvxpy.Problem`` and solve it (SCS or Clarabel).

Problems whose terms keep a working set (LMNN's triplet hinge) are solved by the
cutting-plane loop of Weinberger & Saul (JMLR 2009, Appendix A), made exact:

1. start from the triplets active (within a margin) at ``M = I``;
2. solve the program restricted to the working set exactly;
3. search *all* triplets at the new ``M`` (blocked, never ``n x n x k`` in memory)
   and add every one whose hinge is positive outside the working set;
4. stop when none is left: the restricted optimum is then feasible for the full
   problem with the same objective, hence the full problem's optimum.

The returned objective is always re-evaluated by metricopt over every triplet in
float64; the solver's own value is kept in ``stats["solver_objective"]``.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, fields
from typing import Any

import cvxpy as cp
import numpy as np

from .._validation import check_choice, check_int, check_real
from ..certify.policy import settle
from ..errors import MetricoptError, ProblemTooLargeError, UnknownOptionError
from ..linalg import project_psd, symmetrize
from ..protocols import GeometryKind
from ..solution import Solution, Status

NAME = "cvxpy"

SOLVERS = ("SCS", "CLARABEL")

#: largest metric dimension the exact backend accepts
MAX_DIM = 150
#: largest number of constraint-matrix entries (rows x vec(M) length) it accepts
MAX_ENTRIES = 60_000_000
#: ``init="auto"``: a problem with more than this many constraint-matrix entries in all (every triplet x d^2)
#: starts its working set from a first-order point (backend="jax" to POLISH_TOL), not from ``M = I``: 300
#: points of digits PCA-30 (243,000 triplets, 2.2e8 entries) took 81 s in 5 rounds from ``M = I`` and 3 s + 6 s
#: in one round from the first-order point; iris (7e5) and wine (1.1e7) stay at ``M = I``
POLISH_ABOVE = 20_000_000
POLISH_TOL = 1e-3

_STATUS = {
    cp.OPTIMAL: Status.OPTIMAL,
    cp.OPTIMAL_INACCURATE: Status.OPTIMAL_INACCURATE,
    cp.INFEASIBLE: Status.INFEASIBLE,
    cp.INFEASIBLE_INACCURATE: Status.INFEASIBLE,
    cp.UNBOUNDED: Status.UNBOUNDED,
    cp.UNBOUNDED_INACCURATE: Status.UNBOUNDED,
    cp.USER_LIMIT: Status.ITERATION_LIMIT,
    cp.SOLVER_ERROR: Status.ERROR,
}


def _variables(problem):
    """CVXPY variables; ``M = M_var / problem.var_scale`` keeps the solver's numbers O(1)."""
    d = problem.d
    if problem.geometry.diagonal:  # var_scale may be a vector here: one scale per coordinate
        m = cp.Variable(d, nonneg=True, name="m")
        mv = cp.multiply(m, 1.0 / np.broadcast_to(np.asarray(problem.var_scale, dtype=np.float64), (d,)))
        V = {"M": cp.diag(mv), "Mvec": mv, "_M": m}
    else:
        sc = float(problem.var_scale)
        blocks = problem.geometry.blocks
        if blocks is not None and blocks[0] > 1:
            # multi-metric LMNN: only the diagonal blocks enter the objective, so a block-diagonal
            # variable loses nothing and gives the solver C small PSD cones and no off-diagonal unknowns
            C, b = blocks
            parts = [cp.Variable((b, b), PSD=True, name=f"M{c}") for c in range(C)]
            zero = np.zeros((b, b))
            M = cp.bmat([[parts[c] if c == e else zero for e in range(C)] for c in range(C)])
        else:
            M = cp.Variable((d, d), PSD=True, name="M")
        V = {"M": M / sc, "Mvec": cp.vec(M, order="C") / sc, "_M": M}
    for name in problem.extra_variables:
        V[name] = cp.Variable(name=name)
    return V


def _check_size(problem, ws_sizes):
    width = problem.d if problem.geometry.diagonal else problem.d**2
    rows = sum(ws_sizes) + sum(len(getattr(t, "pairs", ())) for t in problem.terms)
    rows += sum(len(getattr(c, "pairs", ())) for c in problem.constraints)
    entries = rows * width
    if problem.d > MAX_DIM or entries > MAX_ENTRIES:
        raise ProblemTooLargeError(
            f"{problem.method} problem is too large for the exact CVXPY backend: d={problem.d} features "
            f"(limit {MAX_DIM}) and {rows:,} triplet/pair constraints x {width:,} matrix entries = {entries:,} "
            f"(limit {MAX_ENTRIES:,}). Use the scalable first-order solver, backend='jax', or reduce the data "
            "(PCA to fewer dimensions, fewer points or pairs)."
        )


def build_program(problem, working_sets=None, solver=None):
    """Compile ``problem`` to ``(cvxpy.Problem, variables)``.

    ``working_sets`` maps each working-set term's index to its triplet array; if
    ``None``, working-set terms use *every* triplet (the textbook program).
    ``problem.cone_scale`` is applied for Clarabel only (measured on MMC: the interior-point
    solver needs O(1) entries in its cones, while SCS, which rescales the data itself,
    stalls on the rescaled diagonal program).
    """
    V = _variables(problem)
    V["cone_scale"] = float(problem.cone_scale) if solver == "CLARABEL" else 1.0
    expr, cons = 0, []
    for idx, term in enumerate(problem.terms):
        if term.uses_working_set:
            ws = term.all_triplets(problem) if working_sets is None else working_sets[idx]
            e, c = term.cvxpy(problem, V, ws)
        else:
            e, c = term.cvxpy(problem, V)
        expr = expr + e
        cons += c
    for c in problem.constraints:
        cons += c.cvxpy(problem, V)
    return cp.Problem(cp.Minimize(expr / float(problem.obj_scale)), cons), V


def _solver_kwargs(solver, tol, max_iter):
    if solver == "SCS":
        kw = {"eps_abs": tol, "eps_rel": tol, "max_iters": max_iter}
    else:
        kw = {"tol_gap_abs": tol, "tol_gap_rel": tol, "tol_feas": tol, "max_iter": min(max_iter, 500)}
    return kw


def _run(prog, solver, kw, verbose):
    try:
        with warnings.catch_warnings():
            # cvxpy's "Solution may be inaccurate" warning: the returned status says so instead
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            prog.solve(solver=solver, verbose=verbose, **kw)
    except cp.error.SolverError as exc:
        return Status.ERROR, f"{solver} failed: {exc}"
    status = _STATUS.get(prog.status, Status.ERROR)
    stats = prog.solver_stats
    if status is Status.OPTIMAL_INACCURATE and stats is not None and stats.num_iters is not None:
        if stats.num_iters >= kw.get("max_iters", kw.get("max_iter", np.inf)):
            status = Status.ITERATION_LIMIT
    if status is Status.ITERATION_LIMIT and solver == "SCS" and kw.get("acceleration_lookback", None) != 0:
        # SCS's Anderson acceleration can cycle short of the requested accuracy (measured with SCS 3.3.1
        # on diagonal MMC, 42 iris points: 100,000 iterations at 'optimal_inaccurate'; without it,
        # 'optimal' in 10,650): retry once without it before reporting the limit
        retried, note = _run(prog, solver, {**kw, "acceleration_lookback": 0}, verbose)
        return retried, f"{note} (retried without Anderson acceleration after the iteration limit)"
    return status, f"{solver} returned '{prog.status}'"


def accepts(problem) -> tuple[bool, str]:
    """The exact backend solves convex programs: every geometry but a factor ``L`` (non-convex)."""
    if problem.geometry.kind is GeometryKind.FACTOR:
        return False, (f"backend='cvxpy' solves convex programs; {problem.method} over a rectangular factor L "
                       "(M = L^T L) is not convex: use backend='jax'.")
    if not problem.terms:
        return False, f"backend='cvxpy' cannot solve {type(problem).__name__}: it has no objective terms."
    return True, ""


@dataclass(frozen=True)
class Options:
    """The exact backend's options, every default stated once (see :func:`solve`)."""

    solver: str | None = None
    tol: float = 1e-8
    max_iter: int = 100_000
    max_rounds: int = 100
    working_set: bool = True
    min_add: int = 500
    certify: Any = 1e-6
    init: Any = "auto"
    verbose: bool = False
    time_limit: float | None = None

    @classmethod
    def resolve(cls, problem, options: dict) -> "Options":
        """Checked options from keyword arguments (``None`` for ``tol`` / ``max_iter``: the default)."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise UnknownOptionError(
                f"unknown option(s) for backend='cvxpy': {unknown}; accepted: {', '.join(names)}."
            )
        given = {k: v for k, v in options.items() if v is not None or k in ("init", "certify")}
        opts = cls(**given)
        solver = check_choice(str(opts.solver or problem.default_solver).upper(), "solver", SOLVERS)
        return cls(solver=solver, tol=check_real(opts.tol, "tol", low=0.0, low_open=True),
                   max_iter=check_int(opts.max_iter, "max_iter", low=1),
                   max_rounds=check_int(opts.max_rounds, "max_rounds", low=1), working_set=bool(opts.working_set),
                   min_add=check_int(opts.min_add, "min_add", low=1), certify=opts.certify, init=opts.init,
                   verbose=bool(opts.verbose),
                   time_limit=None if opts.time_limit is None else check_real(opts.time_limit, "time_limit", low=0.0,
                                                                              low_open=True))


def solve(problem, **options):
    """Solve ``problem`` exactly through CVXPY.

    Parameters
    ----------
    solver : {"SCS", "CLARABEL"}, optional
        SCS (first-order conic) or Clarabel (interior point). Default: the problem's
        ``default_solver`` (SCS for LMNN; Clarabel for MMC and POLA, whose many small
        cones SCS converges on slowly).
    tol : float
        Solver accuracy (SCS ``eps_abs = eps_rel``; Clarabel gap and feasibility tolerances).
    max_iter : int
        Solver iteration limit (Clarabel is capped at 500).
    max_rounds : int
        Working-set rounds (LMNN) before giving up with status ``iteration_limit``.
    working_set : bool
        ``False`` puts every triplet into one program (the textbook SDP; small data only).
    min_add : int
        Each round adds at most ``max(min_add, current working-set size)`` violators,
        the most violated first (adding all of them after a round whose restricted
        optimum shrank ``M`` floods the working set with triplets inactive at the optimum).
    init : "auto", None, (d, d) array or Solution, default "auto"
        Where the working set starts. A metric (or a Solution, e.g. from ``backend="jax"``):
        exact polish, the working set starts from the triplets active (within the term's
        margin) at it; the loop then adds violators until none is left, so the answer is
        still the exact optimum of the full problem. ``None``: at ``M = I``. ``"auto"``: at
        ``M = I`` unless the full problem has more than :data:`POLISH_ABOVE` constraint
        entries (all triplets x d^2); then from a first-order point (``backend="jax"``,
        ``tol=POLISH_TOL``, within ``time_limit``), whose working set is far smaller near the
        optimum (``stats["init"]`` says which start was taken).
    certify : float or None
        Certify the result (:func:`metricopt.certify`) at this relative-gap tolerance and
        let the certificate decide the status (see :func:`finalize`); ``None`` skips it.
    verbose : bool
        Print the working-set progress (and the solver's own log).
    time_limit : float, optional
        Seconds after which no new working-set round starts (checked between rounds: a
        round in progress finishes); the result is then the last round's metric with
        status ``iteration_limit`` (certified as usual), like the JAX backend's
        ``time_limit``.

    Returns
    -------
    Solution
    """
    opts = Options.resolve(problem, options)
    solver, tol, max_rounds, working_set, min_add = opts.solver, opts.tol, opts.max_rounds, opts.working_set, opts.min_add
    init, verbose, certify = opts.init, opts.verbose, opts.certify
    kw = _solver_kwargs(solver, tol, opts.max_iter)
    t0 = time.perf_counter()

    ws_idx = [i for i, t in enumerate(problem.terms) if t.uses_working_set and working_set]
    V0 = problem.initial_point()
    start = "identity"
    if isinstance(init, str) and init == "auto":
        init = None
        auto = working_set and bool(ws_idx)
    else:
        auto = False
        if init is not None:
            V0["M"] = problem.check_metric(init.M if isinstance(init, Solution) else init, name="init")
            start = "given metric"
    if working_set:
        sets = {i: problem.terms[i].initial_working_set(problem, V0) for i in ws_idx}
        width = problem.d if problem.geometry.diagonal else problem.d ** 2
        if auto and int(getattr(problem, "n_triplets", 0)) * width > POLISH_ABOVE:
            rough = _first_order_point(problem, opts.time_limit)
            if rough is not None:
                V0["M"] = rough.M
                sets = {i: problem.terms[i].initial_working_set(problem, V0) for i in ws_idx}
                start = (f"first-order point (backend='jax', tol {POLISH_TOL:g}: {rough.status}, "
                         f"{rough.stats.get('time', 0.0):.1f} s)")
    else:
        sets = {i: t.all_triplets(problem) for i, t in enumerate(problem.terms) if t.uses_working_set}
    _check_size(problem, [len(s) for s in sets.values()])

    history, iters, rounds = [], 0, 0
    status, message, Vval, solver_obj = Status.ERROR, "", None, None
    while True:
        rounds += 1
        prog, V = build_program(problem, sets, solver)
        status, message = _run(prog, solver, kw, verbose and rounds == 1)
        st = prog.solver_stats
        iters += int(st.num_iters or 0) if st is not None else 0
        if not status.has_point or V["_M"].value is None:
            break
        Vval = _values(problem, V)
        solver_obj = float(prog.value) * float(problem.obj_scale)
        added, worst = 0, -np.inf
        for i in ws_idx:
            new, w = problem.terms[i].violators(problem, Vval, sets[i], max_add=max(min_add, len(sets[i])))
            worst = max(worst, w)
            if len(new):
                sets[i] = np.concatenate([sets[i], new])
                added += len(new)
        history.append({"round": rounds, "working_set": int(sum(len(s) for s in sets.values()) - added),
                        "added": int(added), "max_violation": float(worst), "solver_objective": solver_obj})
        if verbose:
            print(f"[metricopt cvxpy] round {rounds}: working set {history[-1]['working_set']}, "
                  f"added {added}, solver objective {solver_obj:.8g}, {time.perf_counter() - t0:.2f}s")
        if added == 0:
            break
        _check_size(problem, [len(s) for s in sets.values()])
        if rounds >= max_rounds:
            status = Status.ITERATION_LIMIT
            message = f"working-set loop stopped after {rounds} rounds with {added} violated triplets still outside"
            break
        if opts.time_limit is not None and time.perf_counter() - t0 >= opts.time_limit:
            status = Status.ITERATION_LIMIT
            message = (f"time limit of {opts.time_limit:g} s reached after {rounds} working-set round(s) with {added} "
                       "violated triplets still outside")
            break

    stats = {
        "time": time.perf_counter() - t0,
        "init": start,
        "iterations": iters,
        "rounds": rounds,
        "working_set_size": int(sum(len(s) for s in sets.values())),
        "history": history,
        "solver_objective": solver_obj,
        "solver_tol": tol,
    }
    if Vval is None:
        msg = message
        if status is Status.INFEASIBLE and problem.method == "POLA":
            msg += "; the hard-margin POLA program has no solution on these pairs: pass C (soft margin), e.g. C=1.0"
        return finalize(problem, Solution(M=None, objective=float("nan"), status=status, backend="cvxpy",
                                          solver=solver, stats=stats, message=msg), None, t0)
    objective = problem._objective(Vval)
    viol = problem.max_violation(Vval)
    stats["max_violation"] = viol
    extra = {k: Vval[k] for k in problem.extra_variables}
    msg = f"{message}; {rounds} working-set round(s), max constraint violation {viol:.2e}"
    sol = Solution(M=Vval["M"], objective=objective, status=status, backend="cvxpy", solver=solver,
                   stats=stats, variables=extra, message=msg)
    return finalize(problem, sol, certify, t0)


def _first_order_point(problem, time_limit):
    """``init="auto"``'s start: the JAX backend's solution to :data:`POLISH_TOL` (half of ``time_limit``
    at most), or ``None`` when that backend cannot solve the problem or returns no metric."""
    from . import backend_module

    jax_backend = backend_module("jax")
    if not jax_backend.accepts(problem)[0]:
        return None
    kw = {"tol": POLISH_TOL}
    if time_limit is not None:
        kw["time_limit"] = 0.5 * time_limit
    try:
        rough = jax_backend.solve(problem, **kw)
    except MetricoptError:
        return None
    return rough if rough.M is not None else None


def finalize(problem, sol, certify_tol, t0):
    """Attach a duality-gap certificate and let it, not the solver's word, decide optimality
    (:func:`metricopt.certify.policy.settle`, the one status policy)."""
    return settle(problem, sol, certify_tol, t0)


def _values(problem, V):
    """Numpy point from solved CVXPY variables (M symmetrised and projected onto the PSD cone)."""
    diagonal = problem.geometry.diagonal
    if diagonal:
        M = np.diag(np.clip(np.asarray(V["_M"].value, dtype=np.float64), 0.0, None))
    else:
        M = project_psd(symmetrize(V["_M"].value))
    if diagonal:
        M = M / np.asarray(problem.var_scale, dtype=np.float64)[..., None]
    else:
        M = M / float(problem.var_scale)
    out = {"M": M}
    for name in problem.extra_variables:
        out[name] = float(V[name].value)
    return problem.repair(out)
