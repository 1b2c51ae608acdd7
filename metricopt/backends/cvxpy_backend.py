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

from .._deadline import Budget, deadline
from .._validation import check_choice, check_int, check_real
from ..certify.policy import NoCertificate, Outcome, SolverReport, settle
from ..errors import InputError, MetricoptError, ProblemTooLargeError, UnknownOptionError
from ..linalg import project_psd, symmetrize
from ..options import CVXPY_MAX_ITER, default
from ..protocols import GeometryKind, HasPairs, RepairingTerm, TripletProblem
from ..solution import Solution

NAME = "cvxpy"

SOLVERS = ("SCS", "CLARABEL")
#: each conic solver's iteration limit when ``max_iter`` is not given (a given one is passed as it is; the
#: table of :mod:`metricopt.options`)
DEFAULT_MAX_ITER = CVXPY_MAX_ITER

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
#: under a ``time_limit``, ``init="auto"`` takes the first-order start only while at least this many seconds are
#: left: its one-off costs (importing JAX, compiling its loop: seconds on a loaded machine) would otherwise take
#: the budget; it then gets FIRST_ORDER_SHARE of the seconds left and must end by FIRST_ORDER_CAP of them
FIRST_ORDER_MIN_SECONDS = 20.0
FIRST_ORDER_SHARE = 0.5
FIRST_ORDER_CAP = 0.6
#: under a ``time_limit``, a new working-set round starts only while the seconds left exceed ROUND_OVERHEAD times
#: the last round's time outside the solver's iterations (compilation and the solver's set-up, which no time
#: limit interrupts, and which grow with the working set); and the solver always gets at least MIN_SOLVER_SECONDS
ROUND_OVERHEAD = 1.5
MIN_SOLVER_SECONDS = 0.05
#: the option that bounds each conic solver's own time
TIME_OPTION = {"SCS": "time_limit_secs", "CLARABEL": "time_limit"}
#: under a ``time_limit``, SCS (3.3 and later) factors with QDLDL, not the "auto" choice (MKL Pardiso where SCS was
#: built with it): SCS's time limit does not cover its set-up, and Pardiso's took 50 s on MMC over 200 digits
#: points (PCA-20) where QDLDL's took 3.2 s, at about the same cost per iteration (measured with SCS 3.3.1)
SCS_TIMED_LINEAR_SOLVER = "qdldl"
#: the solver's set-up (its first factorisation, which neither SCS's nor Clarabel's time limit interrupts) is taken
#: off the time it is given, estimated as this multiple of the program's compilation time (measured on MMC / POLA /
#: LMNN over 100-200 digits points: set-up 0.75 to 1.5 times the compilation, LMNN's far less; Clarabel on MMC over
#: 200 points: 4.4 s compiling, then 3.3 s before its first iteration)
SETUP_PER_COMPILE = 1.5
#: under a ``time_limit``, SCS keeps its scale updates (each a new factorisation, about as long as its set-up) while
#: the time left is at least this many set-ups; below that it runs without them (``adaptive_scale=False``)
SCS_REFACTOR_ROOM = 4.0
#: a working-set round is not started (round 1: the start is returned) when compiling its program would not end
#: before the promised time, estimated at this many seconds per scalar of the program's data (cvxpy's
#: ``size_metrics.num_scalar_data``; measured 0.14-0.75 us on 2 cores, the most with the other core busy: POLA over
#: 100 digits points, 2e6 scalars, 1.5 s), nor its solver run when its set-up (SETUP_PER_COMPILE times the
#: compilation just measured) would not end before it
COMPILE_SECONDS_PER_SCALAR = 1e-6
#: under a ``time_limit``, a search of all triplets (which no limit interrupts) is estimated as this many times the
#: last one (a loaded machine's speed changes between two; the JAX backend's ``driver.ESTIMATE_MARGIN``)
SEARCH_MARGIN = 1.5

#: what each CVXPY status says the conic solver saw (the status is the policy's, metricopt.certify.policy)
_OUTCOME = {
    cp.OPTIMAL: Outcome.CONVERGED,
    cp.OPTIMAL_INACCURATE: Outcome.INACCURATE,
    cp.INFEASIBLE: Outcome.INFEASIBLE,
    cp.INFEASIBLE_INACCURATE: Outcome.INFEASIBLE,
    cp.UNBOUNDED: Outcome.UNBOUNDED,
    cp.UNBOUNDED_INACCURATE: Outcome.UNBOUNDED,
    cp.USER_LIMIT: Outcome.ITERATION_LIMIT,
    cp.SOLVER_ERROR: Outcome.FAILED,
}


def _unscale(problem, Mvar):
    """``M`` from the solver's variable: ``M = (c c^T * M_var) / var_scale`` on a full ``M`` and
    ``c**2 * m_var / var_scale`` on a diagonal one (a CVXPY expression or an array), ``c`` the problem's
    :meth:`~metricopt.problems.base.Problem.coordinate_scale` (powers of two: the products are exact) and
    ``var_scale`` its scalar or per-coordinate variable scale."""
    c = np.asarray(problem.coordinate_scale(), dtype=np.float64)
    vs = np.asarray(problem.var_scale, dtype=np.float64)
    if problem.geometry.diagonal:
        vs = np.broadcast_to(vs, (problem.d,))
        scaled = Mvar if np.all(c == 1) else (cp.multiply(Mvar, c * c) if isinstance(Mvar, cp.Expression)
                                               else Mvar * (c * c))
    else:
        vs = float(vs)
        C = np.outer(c, c)
        scaled = Mvar if np.all(c == 1) else (cp.multiply(Mvar, C) if isinstance(Mvar, cp.Expression) else Mvar * C)
    return cp.multiply(scaled, 1.0 / vs) if isinstance(scaled, cp.Expression) and np.ndim(vs) else scaled / vs


def _variables(problem):
    """CVXPY variables. ``M`` is the solver's variable rescaled (:func:`_unscale`), which keeps its numbers O(1),
    or ``T Z T^T`` over the problem's :meth:`~metricopt.problems.base.Problem.variable_basis` ``T`` (then
    ``V["_T"] = T`` and ``V["_M"] = Z``, so that terms can form their data in ``Z``'s coordinates)."""
    d = problem.d
    T = None if problem.geometry.diagonal else problem.variable_basis()
    blocks = problem.geometry.blocks
    if problem.geometry.diagonal:  # var_scale may be a vector here: one scale per coordinate
        m = cp.Variable(d, nonneg=True, name="m")
        mv = _unscale(problem, m)
        V = {"M": cp.diag(mv), "Mvec": mv, "_M": m}
    elif T is not None:  # M = T Z T^T, Z PSD: the problem's own well-conditioned coordinates
        T = np.asarray(T, dtype=np.float64)
        Z = cp.Variable((T.shape[1], T.shape[1]), PSD=True, name="Z")
        Mw = T @ Z @ T.T
        V = {"M": Mw, "Mvec": cp.vec(Mw, order="C"), "_M": Z, "_T": T}
    else:
        if blocks is not None and blocks[0] > 1:
            # multi-metric LMNN: only the diagonal blocks enter the objective, so a block-diagonal
            # variable loses nothing and gives the solver C small PSD cones and no off-diagonal unknowns
            C, b = blocks
            parts = [cp.Variable((b, b), PSD=True, name=f"M{c}") for c in range(C)]
            zero = np.zeros((b, b))
            M = cp.bmat([[parts[c] if c == e else zero for e in range(C)] for c in range(C)])
        else:
            M = cp.Variable((d, d), PSD=True, name="M")
        Mw = _unscale(problem, M)
        V = {"M": Mw, "Mvec": cp.vec(Mw, order="C"), "_M": M}
    for name in problem.extra_variables:
        V[name] = cp.Variable(name=name)
    return V


def program_size(problem: Any, ws_sizes: Any = None) -> tuple[int, int]:
    """``(rows, width)`` of the exact program's constraint matrix: one row per triplet or pair constraint (with
    ``ws_sizes``, the working sets' sizes; without, every triplet of each working-set term) and ``width`` entries
    of ``vec(M)`` per row (``d^2``; ``d`` for a diagonal metric). ``rows * width`` is what :data:`MAX_ENTRIES`
    limits.

    Parameters
    ----------
    problem : Problem
        The problem.
    ws_sizes : sequence of int, optional
        The working sets' sizes, one per working-set term (default: every triplet of each).

    Returns
    -------
    rows : int
        Triplet and pair constraints (of the terms and of ``problem.constraints``).
    width : int
        Entries of ``vec(M)`` per row.
    """
    if ws_sizes is None:
        # a triplet problem counts its triplets without forming them (4.3 million on digits: 0.5 s to form)
        ws_sizes = [int(problem.n_triplets) if isinstance(problem, TripletProblem) else len(t.all_triplets(problem))
                    for t in problem.terms if t.uses_working_set]
    width = problem.d if problem.geometry.diagonal else problem.d**2
    rows = sum(ws_sizes) + sum(len(t.pairs) for t in problem.terms if isinstance(t, HasPairs))
    rows += sum(len(c.pairs) for c in problem.constraints if isinstance(c, HasPairs))
    return rows, width


def _check_size(problem, ws_sizes):
    rows, width = program_size(problem, ws_sizes)
    entries = rows * width
    if problem.d > MAX_DIM or entries > MAX_ENTRIES:
        raise ProblemTooLargeError(
            f"{problem.method} problem is too large for the exact CVXPY backend: d={problem.d} features "
            f"(limit {MAX_DIM}) and {rows:,} triplet/pair constraints x {width:,} matrix entries = {entries:,} "
            f"(limit {MAX_ENTRIES:,}). Use the scalable first-order solver, backend='jax', or reduce the data "
            "(PCA to fewer dimensions, fewer points or pairs)."
        )


def build_program(problem: Any, working_sets: dict | None = None, solver: str | None = None) -> tuple[cp.Problem, dict]:
    """Compile ``problem`` to ``(cvxpy.Problem, variables)``.

    ``working_sets`` maps each working-set term's index to its triplet array; if
    ``None``, working-set terms use *every* triplet (the textbook program).
    ``problem.cone_scale`` is applied for Clarabel only (measured on MMC: the interior-point
    solver needs O(1) entries in its cones, while SCS, which rescales the data itself,
    stalls on the rescaled diagonal program).

    For LMNN with every triplet this is Weinberger & Saul's semidefinite program (JMLR 2009, Sec. 3.4: Eq. (14)
    with a slack variable per hinge), each term and constraint contributing its own CVXPY piece (``term.cvxpy``).

    Parameters
    ----------
    problem : Problem
        The problem to compile.
    working_sets : dict, optional
        Working-set term index -> its ``(m, 3)`` triplet array (``None``: every triplet).
    solver : str, optional
        The conic solver the program is for (``"CLARABEL"`` applies ``problem.cone_scale``).

    Returns
    -------
    program : cvxpy.Problem
        ``minimize(objective / problem.obj_scale)`` subject to the terms' and constraints' constraints.
    variables : dict
        The CVXPY variables and constants the terms read (``"M"``, ``"_M"``, extra variables, ``"cone_scale"``).
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


def _solver_kwargs(solver, solver_tol, max_iter, timed=False):
    """The conic solver's keyword arguments: its accuracy ``solver_tol`` and iteration limit ``max_iter``."""
    if solver == "SCS":
        kw = {"eps_abs": solver_tol, "eps_rel": solver_tol, "max_iters": max_iter}
        if timed and _scs_has_linear_solver():
            kw["linear_solver"] = SCS_TIMED_LINEAR_SOLVER
    else:
        kw = {"tol_gap_abs": solver_tol, "tol_gap_rel": solver_tol, "tol_feas": solver_tol, "max_iter": max_iter}
    return kw


def _scs_has_linear_solver():
    """Whether the installed SCS takes ``linear_solver`` (3.3 and later)."""
    try:
        import scs
    except ImportError:  # pragma: no cover - SCS is a dependency
        return False
    return hasattr(scs, "LinearSolver")


class _OutOfTime(Exception):
    """A time-limited round that cannot compile or set up its program before the promised time (its message
    says which)."""


def _run(prog, solver, kw, verbose, budget=None):
    """Solve ``prog``; returns the :class:`~metricopt.certify.policy.SolverReport` of the run. Under a time-limited ``budget`` the program is compiled
    first and the solver then gets the seconds left to the budget's soft deadline, less its estimated set-up (at
    least :data:`MIN_SOLVER_SECONDS`), as its own time limit (:data:`TIME_OPTION`); a stop on it is ``time_limit``.
    Raises :class:`_OutOfTime`, the solver not run, when that set-up would end past the budget's hard deadline."""
    limit = None
    try:
        with warnings.catch_warnings():
            # cvxpy's "Solution may be inaccurate" warning: the returned status says so instead
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            if budget is None or not budget.limited:
                prog.solve(solver=solver, verbose=verbose, **kw)
            else:
                # compile, then give the solver what is left (cvxpy's documented three steps of Problem.solve),
                # less its set-up, which its limit does not cover (SETUP_PER_COMPILE)
                tc = time.perf_counter()
                data, chain, inverse = prog.get_problem_data(solver, verbose=verbose, solver_opts=dict(kw))
                setup = SETUP_PER_COMPILE * (time.perf_counter() - tc)
                if time.perf_counter() + setup > budget.hard:
                    raise _OutOfTime(f"setting up {solver} on the compiled program would take about {setup:.2g} s")
                left, extra = budget.left(), {}
                if solver == "SCS":
                    # SCS factors its matrix again at each update of its scale, between two checks of its time
                    # limit (POLA over 200 digits points, a 2.2 s limit: 5.1 s of iterations; without the updates
                    # 2.2 s): leave room for one, or go without them where one would take much of the time
                    if SCS_REFACTOR_ROOM * setup <= left:
                        setup *= 2.0
                    else:
                        extra["adaptive_scale"] = False
                limit = max(left - setup, MIN_SOLVER_SECONDS)
                raw = chain.solve_via_data(prog, data, warm_start=False, verbose=verbose,
                                           solver_opts={**kw, **extra, TIME_OPTION[solver]: limit})
                prog.unpack_results(raw, chain, inverse)
    except cp.error.SolverError as exc:
        return SolverReport(Outcome.FAILED, f"{solver} failed: {exc}")
    outcome = _OUTCOME.get(prog.status, Outcome.FAILED)
    stats = prog.solver_stats
    iters = None if stats is None else stats.num_iters
    if _stopped_on_time(prog, solver, kw, limit):
        return SolverReport(Outcome.TIME_LIMIT, f"{solver} stopped at its time limit ({limit:.3g} s of time_limit "
                                                f"left for it) after {iters} iterations, '{prog.status}'")
    if outcome is Outcome.INACCURATE and iters is not None:
        if iters >= kw.get("max_iters", kw.get("max_iter", np.inf)):
            outcome = Outcome.ITERATION_LIMIT
    if (outcome is Outcome.ITERATION_LIMIT and solver == "SCS" and kw.get("acceleration_lookback", None) != 0
            and not (budget is not None and budget.expired())):
        # SCS's Anderson acceleration can cycle short of the requested accuracy (measured with SCS 3.3.1
        # on diagonal MMC, 42 iris points: 100,000 iterations at 'optimal_inaccurate'; without it,
        # 'optimal' in 10,650): retry once without it before reporting the limit (within the time left)
        retried = _run(prog, solver, {**kw, "acceleration_lookback": 0}, verbose, budget)
        return retried.because(f"{retried.reason} (retried without Anderson acceleration after the iteration limit)")
    return SolverReport(outcome, f"{solver} returned '{prog.status}'")


def _stopped_on_time(prog, solver, kw, limit):
    """Whether the solver stopped on the time limit ``limit`` it was given (``None``: none was). SCS says so
    in its status text ("solved (inaccurate - reached time_limit_secs)", cvxpy's 'optimal_inaccurate');
    Clarabel's MaxTime and MaxIterations both become cvxpy's 'user_limit': below its iteration cap, the clock
    stopped it."""
    if limit is None or prog.status not in (cp.USER_LIMIT, cp.OPTIMAL_INACCURATE):
        return False
    stats = prog.solver_stats
    extra = None if stats is None else stats.extra_stats
    info = extra.get("info") if isinstance(extra, dict) else None
    if solver == "SCS" and isinstance(info, dict) and "status" in info:
        return "time_limit" in str(info["status"])
    iters = None if stats is None else stats.num_iters
    cap = kw.get("max_iters", kw.get("max_iter"))
    if prog.status == cp.USER_LIMIT:
        return iters is not None and cap is not None and iters < cap
    solve_time = None if stats is None else stats.solve_time
    return solver == "SCS" and solve_time is not None and solve_time >= limit


def accepts(problem: Any) -> tuple[bool, str]:
    """The exact backend solves convex programs: every geometry but a factor ``L`` (non-convex).

    Parameters
    ----------
    problem : Problem
        The declarative problem (its geometry and terms are read).

    Returns
    -------
    accepted : bool
        Whether the problem has objective terms and a geometry other than a factor.
    reason : str
        Why not (empty when accepted).
    """
    if problem.geometry.kind is GeometryKind.FACTOR:
        return False, (f"backend='cvxpy' solves convex programs; {problem.method} over a rectangular factor L "
                       "(M = L^T L) is not convex: use backend='jax'.")
    if not problem.terms:
        return False, f"backend='cvxpy' cannot solve {type(problem).__name__}: it has no objective terms."
    return True, ""


@dataclass(frozen=True)
class Options:
    """The exact backend's options (see :func:`solve`); the shared ones (``tol``, ``solver_tol``, ``max_iter``,
    ``time_limit``, ``verbose``, ``solver``) have their defaults and meanings in :mod:`metricopt.options`."""

    solver: str | None = default("solver", NAME)
    tol: float = default("tol", NAME)
    solver_tol: float = default("solver_tol", NAME)
    max_iter: int | None = default("max_iter", NAME)  # the solver's own default, DEFAULT_MAX_ITER
    max_rounds: int = 100
    working_set: bool = True
    min_add: int = 500
    certify: bool = True
    init: Any = "auto"
    verbose: bool = default("verbose", NAME)
    time_limit: float | None = default("time_limit", NAME)

    @classmethod
    def resolve(cls, problem: Any, options: dict) -> "Options":
        """Checked options from keyword arguments (``None`` for a number: the default; ``certify=None``: no
        certificate).

        Parameters
        ----------
        problem : Problem
            The problem (its ``default_solver`` when ``solver`` is not given).
        options : dict
            The keyword arguments of :func:`solve` (field name -> value).

        Returns
        -------
        Options
            The options, checked, with the solver's name and iteration limit resolved.

        Raises
        ------
        UnknownOptionError
            For an option name the exact backend does not take, or an unknown solver.
        InputError
            For a value out of range, or a number given as ``certify``.
        """
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise UnknownOptionError(
                f"unknown option(s) for backend='cvxpy': {unknown}; accepted: {', '.join(names)}."
            )
        given = {k: v for k, v in options.items() if v is not None or k == "init"}
        if "certify" in options:
            given["certify"] = _check_certify(options["certify"])
        opts = cls(**given)
        solver = check_choice(str(opts.solver or problem.default_solver).upper(), "solver", SOLVERS)
        return cls(solver=solver, tol=check_real(opts.tol, "tol", low=0.0, low_open=True),
                   solver_tol=check_real(opts.solver_tol, "solver_tol", low=0.0, low_open=True),
                   max_iter=DEFAULT_MAX_ITER[solver] if opts.max_iter is None
                   else check_int(opts.max_iter, "max_iter", low=1),
                   max_rounds=check_int(opts.max_rounds, "max_rounds", low=1), working_set=bool(opts.working_set),
                   min_add=check_int(opts.min_add, "min_add", low=1), certify=opts.certify, init=opts.init,
                   verbose=bool(opts.verbose),
                   time_limit=None if opts.time_limit is None else check_real(opts.time_limit, "time_limit", low=0.0,
                                                                              low_open=True))


def _check_certify(value):
    """``certify``: ``True`` (default) certifies at ``tol``; ``False`` or ``None`` skip the certificate. A number
    is refused: the certificate's tolerance is ``tol`` (it was ``certify`` before issue 31)."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise InputError(f"certify switches the certificate on (True) or off (False or None); got {value!r}. The "
                     f"certificate's relative-gap tolerance is tol (e.g. tol={value!r}); the conic solver's "
                     "accuracy is solver_tol.")


def solve(problem: Any, **options: Any) -> Solution:
    """Solve ``problem`` exactly through CVXPY.

    Parameters
    ----------
    problem : Problem
        A convex problem (:func:`accepts`).
    **options
        The options below (checked by :meth:`Options.resolve`).
    solver : {"SCS", "CLARABEL"}, optional
        SCS (first-order conic) or Clarabel (interior point). Default: the problem's
        ``default_solver`` (SCS for LMNN; Clarabel for MMC and POLA, whose many small
        cones SCS converges on slowly).
    tol : float, default 1e-6
        The certified relative duality gap at which the result is ``optimal`` (:mod:`metricopt.options`): the
        result is certified (:func:`metricopt.certify`) at this tolerance and the certificate decides the
        status (see :func:`finalize`); ``solution.certificate.tol`` is it.
    solver_tol : float, default 1e-8
        The conic solver's accuracy (SCS ``eps_abs = eps_rel``; Clarabel gap and feasibility tolerances),
        whatever ``tol`` is; ``stats["solver_tol"]`` records it.
    max_iter : int, optional
        The conic solver's iteration limit, passed to it as given. Default :data:`DEFAULT_MAX_ITER`: 100,000
        for SCS (a first-order method) and 500 for Clarabel (an interior-point method, which normally needs
        20-60 iterations). A solve that stops at the limit is reported ``iteration_limit`` unless its
        certificate proves optimality; an inaccurate one is ``optimal_inaccurate`` likewise.
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
    certify : bool, default True
        ``False`` (or ``None``) skips the certificate: the solver's own status stands.
    verbose : bool
        Print the working-set progress (and the solver's own log).
    time_limit : float, optional
        Wall-clock seconds for the whole call, certificate included: it returns within
        ``max(1.1 time_limit, time_limit + 5 s)`` (:mod:`metricopt._deadline`). The conic solver gets
        the seconds left, less its estimated set-up, as its own limit (SCS ``time_limit_secs``, with
        QDLDL; Clarabel ``time_limit``); no working-set round starts once they are spent, or when the
        last round's compilation and set-up (which no limit interrupts) would not fit, and none is
        compiled or set up when that alone would end past the promised time (in round 1 the start is
        then returned, unsolved); a search for violated triplets (which no limit interrupts either) is not
        started when, estimated as the last search of all triplets, it would end past the limit, and each
        round's solver stops that much before the promised time; ``init="auto"`` takes its first-order start only with
        :data:`FIRST_ORDER_MIN_SECONDS` left. The result is then the last round's metric with
        status ``time_limit``, or ``optimal`` where its certificate proves it (the certificate's own
        conic programs are bounded by the limit too, so it may be looser than without one; it is
        skipped, with a note, when the last search of all triplets says it cannot finish in time).

    Returns
    -------
    Solution
        The metric, its certificate and the status decided from both (:func:`finalize`).

    Raises
    ------
    UnknownOptionError
        For an unknown option or solver name.
    InputError
        For invalid option values.
    ProblemTooLargeError
        When the program would exceed :data:`MAX_DIM` or :data:`MAX_ENTRIES`.
    """
    opts = Options.resolve(problem, options)
    budget = Budget.start(opts.time_limit)
    with budget.running():
        report, point, search_time = _solve(problem, opts, budget)
    certify, missing = (opts.tol if opts.certify else None), None
    if (budget.limited and certify is not None and point["M"] is not None
            and search_time > 0):
        # the certificate searches every triplet again: skip it, saying so, when the last search would not fit
        # (the initial working set's when no search for violators was made)
        # (its conic programs, if any, are bounded by the deadline in force, and skipped once it has passed); the
        # solver's word alone is then never 'optimal' (the policy says 'time_limit')
        if time.perf_counter() + SEARCH_MARGIN * search_time > budget.hard:
            certify, missing = None, NoCertificate.OUT_OF_TIME
            report = report.because(f"{report.reason}; certificate skipped: the time limit leaves less than the last "
                                    f"search of all triplets took ({search_time:.2g} s)")
    with budget.closing():
        return finalize(problem, report, point, certify, budget.t0, missing)


def _solve(problem, opts, budget):
    """The working-set loop of :func:`solve` (within ``budget``): the solver's report, its point (the Solution's
    fields, uncertified, without a status) and the duration of its last search of all triplets (0 when none was
    made)."""
    solver, max_rounds, working_set, min_add = opts.solver, opts.max_rounds, opts.working_set, opts.min_add
    init, verbose = opts.init, opts.verbose
    kw = _solver_kwargs(solver, opts.solver_tol, opts.max_iter, timed=budget.limited)
    t0 = budget.t0
    limit_text = "the enclosing deadline" if opts.time_limit is None else f"time limit of {opts.time_limit:g} s"

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
    search_time = 0.0  # the last search of all triplets (the initial working set's, then the violators')
    if working_set:
        ts = time.perf_counter()
        sets = {i: problem.terms[i].initial_working_set(problem, V0) for i in ws_idx}
        search_time = time.perf_counter() - ts if ws_idx else 0.0
        width = problem.d if problem.geometry.diagonal else problem.d ** 2
        if auto and isinstance(problem, TripletProblem) and int(problem.n_triplets) * width > POLISH_ABOVE:
            rough = _first_order_point(problem, budget)
            if rough is not None:
                V0["M"] = rough.M
                ts = time.perf_counter()
                sets = {i: problem.terms[i].initial_working_set(problem, V0) for i in ws_idx}
                search_time = time.perf_counter() - ts
                start = (f"first-order point (backend='jax', tol {POLISH_TOL:g}: {rough.status}, "
                         f"{rough.stats.get('time', 0.0):.1f} s)")
    else:
        sets = {i: t.all_triplets(problem) for i, t in enumerate(problem.terms) if t.uses_working_set}
    _check_size(problem, [len(s) for s in sets.values()])

    history, iters, rounds = [], 0, 0
    report, Vval, solver_obj = SolverReport(Outcome.FAILED), None, None
    while True:
        rounds += 1
        tr = time.perf_counter()
        try:
            # the round's solver stops a search of all triplets before the hard deadline (the search that certifies
            # its point, or evaluates its objective), and by the soft one
            round_budget = _reserve(budget, SEARCH_MARGIN * search_time) if ws_idx else budget
            if round_budget.expired():
                # no time for both: the point at hand is kept, its search done (round 1: the start's, the initial
                # working set's)
                raise _OutOfTime(f"the search of all triplets after it would take about {search_time:.2g} s")
            prog, V = build_program(problem, sets, solver)
            if budget.limited:
                compile_time = COMPILE_SECONDS_PER_SCALAR * float(prog.size_metrics.num_scalar_data)
                if time.perf_counter() + compile_time > budget.hard:
                    raise _OutOfTime(f"compiling the program would take about {compile_time:.2g} s")
            report = _run(prog, solver, kw, verbose and rounds == 1, round_budget)
        except _OutOfTime as exc:
            # this round alone would break the promise: keep the point at hand (round 1: the start, unsolved)
            message = f"{limit_text}: in working-set round {rounds}, {exc}, more than is left"
            if Vval is None:
                Vval = _start_point(problem, V0)
                message += (f"; returned the start ({start}) unsolved" if Vval is not None
                            else "; the start is infeasible, no metric")
            report = SolverReport(Outcome.TIME_LIMIT, message)
            break
        st = prog.solver_stats
        iters += int(st.num_iters or 0) if st is not None else 0
        # the round's time outside the solver's iterations: building, compiling, the solver's set-up
        overhead = time.perf_counter() - tr - (float(st.solve_time or 0.0) if st is not None else 0.0)
        if not report.has_point or V["_M"].value is None:
            break
        Vval = _values(problem, V)
        solver_obj = float(prog.value) * float(problem.obj_scale)
        if report.kind is Outcome.TIME_LIMIT:  # the last point: no search for violators it has no time to add
            if ws_idx:
                report = report.because(f"{report.reason} in working-set round {rounds}")
            break
        if ws_idx and not budget.fits(SEARCH_MARGIN * search_time):  # the search, which no limit interrupts, would overrun
            report = SolverReport(Outcome.TIME_LIMIT, (
                f"{limit_text} reached after {rounds} working-set round(s): no time left for the search of violated "
                f"triplets (about {search_time:.2g} s)"))
            break
        added, worst = 0, -np.inf
        ts = time.perf_counter()
        for i in ws_idx:
            new, w = problem.terms[i].violators(problem, Vval, sets[i], max_add=max(min_add, len(sets[i])))
            worst = max(worst, w)
            if len(new):
                sets[i] = np.concatenate([sets[i], new])
                added += len(new)
        search_time = time.perf_counter() - ts if ws_idx else search_time
        history.append({"round": rounds, "working_set": int(sum(len(s) for s in sets.values()) - added),
                        "added": int(added), "max_violation": float(worst), "solver_objective": solver_obj})
        if verbose:
            print(f"[metricopt cvxpy] round {rounds}: working set {history[-1]['working_set']}, "
                  f"added {added}, solver objective {solver_obj:.8g}, {time.perf_counter() - t0:.2f}s")
        if added == 0:
            break
        _check_size(problem, [len(s) for s in sets.values()])
        if rounds >= max_rounds:
            report = SolverReport(Outcome.ITERATION_LIMIT, f"working-set loop stopped after {rounds} rounds with "
                                                           f"{added} violated triplets still outside")
            break
        left = budget.left()
        if left is not None and left <= ROUND_OVERHEAD * overhead:
            report = SolverReport(Outcome.TIME_LIMIT,
                                  f"{limit_text} reached after {rounds} working-set round(s) with {added} "
                                  "violated triplets still outside" + ("" if left <= 0 else
                                                                        f" (the {left:.2g} s left would not cover the "
                                                                        f"next round's compilation and set-up, "
                                                                        f"{overhead:.2g} s in the last one)"))
            break

    stats = {
        "time": time.perf_counter() - t0,
        "init": start,
        "iterations": iters,
        "rounds": rounds,
        "working_set_size": int(sum(len(s) for s in sets.values())),
        "history": history,
        "solver_objective": solver_obj,
        "solver_tol": opts.solver_tol,
    }
    if Vval is None:
        msg = report.reason
        if report.kind is Outcome.INFEASIBLE and problem.method == "POLA":
            msg += "; the hard-margin POLA program has no solution on these pairs: pass C (soft margin), e.g. C=1.0"
        return (report.because(msg), {"M": None, "objective": float("nan"), "backend": "cvxpy", "solver": solver,
                                      "stats": stats}, search_time)
    objective = problem._objective(Vval)
    viol = problem.max_violation(Vval)
    stats["max_violation"] = viol
    extra = {k: Vval[k] for k in problem.extra_variables}
    msg = f"{report.reason}; {rounds} working-set round(s), max constraint violation {viol:.2e}"
    point = {"M": Vval["M"], "objective": objective, "backend": "cvxpy", "solver": solver, "stats": stats,
             "variables": extra}
    return report.because(msg), point, search_time


def _reserve(budget, seconds):
    """``budget`` with its soft deadline at most ``seconds`` before the hard one (never before its start): what a
    round's conic solver is given, so that the search of all triplets after it (``seconds``, estimated) ends by the
    hard deadline."""
    if not budget.limited or seconds <= 0.0:
        return budget
    return Budget(budget.t0, max(min(budget.soft, budget.hard - seconds), budget.t0), budget.hard)


def _start_point(problem, V0):
    """The start ``V0`` as a point of ``problem`` (repaired: e.g. MMC's scaled onto its budget), ``None`` when it
    violates the constraints (hard-margin POLA)."""
    V = problem.repair({k: (np.array(v, dtype=np.float64) if k == "M" else float(v)) for k, v in V0.items()})
    return V if problem.max_violation(V) <= 1e-9 else None


def _first_order_point(problem, budget):
    """``init="auto"``'s start: the JAX backend's solution to :data:`POLISH_TOL`, or ``None`` when that
    backend cannot solve the problem or returns no metric. Under a time-limited ``budget``: ``None`` with
    less than :data:`FIRST_ORDER_MIN_SECONDS` left, else a solve with :data:`FIRST_ORDER_SHARE` of the
    seconds left as its ``time_limit``, all of it over by :data:`FIRST_ORDER_CAP` of them."""
    from . import backend_module

    jax_backend = backend_module("jax")
    if not jax_backend.accepts(problem)[0]:
        return None
    kw = {"tol": POLISH_TOL}
    at = None
    if budget.limited:
        left = budget.left()
        if left < FIRST_ORDER_MIN_SECONDS:
            return None
        kw["time_limit"] = FIRST_ORDER_SHARE * left
        at = time.perf_counter() + FIRST_ORDER_CAP * left
    try:
        with deadline(at):
            rough = jax_backend.solve(problem, **kw)
    except MetricoptError:
        return None
    return rough if rough.M is not None else None


def finalize(problem: Any, report: SolverReport, point: dict, certify_tol: float | bool | None, t0: float | None,
             missing: NoCertificate | None = None) -> Solution:
    """The Solution of ``point``: a duality-gap certificate attached, and the status decided from the solver's
    ``report`` and that certificate, not from the solver's word alone (:func:`metricopt.certify.policy.settle`,
    the one status policy).

    Parameters
    ----------
    problem : Problem
        The problem solved.
    report : SolverReport
        What the solver saw.
    point : dict
        The Solution's fields but ``status`` and ``message`` (copied, not modified).
    certify_tol : float, bool or None
        The certificate's relative-gap tolerance (``None``/``False``: no certificate).
    t0 : float or None
        The solve's start (:func:`time.perf_counter`).
    missing : NoCertificate, optional
        Why there is no certificate when none is taken.

    Returns
    -------
    Solution
        With its status, certificate and message.
    """
    return settle(problem, report, point, certify_tol, t0, missing)


def _values(problem, V):
    """Numpy point from solved CVXPY variables (M symmetrised and projected onto the PSD cone)."""
    if problem.geometry.diagonal:
        M = np.diag(_unscale(problem, np.clip(np.asarray(V["_M"].value, dtype=np.float64), 0.0, None)))
    elif "_T" in V:  # M = T Z T^T: a congruence of the projected Z, PSD
        T = V["_T"]
        M = symmetrize(T @ project_psd(symmetrize(V["_M"].value)) @ T.T)
    else:  # a congruence by a positive diagonal keeps the projected point PSD (and symmetric: c_j c_k = c_k c_j)
        M = _unscale(problem, project_psd(symmetrize(V["_M"].value)))
    out = {"M": M}
    for name in problem.extra_variables:
        out[name] = float(V[name].value)
    out = problem.repair(out)
    for term in problem.terms:  # a term's own repair (e.g. TraceBall scales M back into its ball)
        if isinstance(term, RepairingTerm):
            out = term.repair(problem, out)
    return out
