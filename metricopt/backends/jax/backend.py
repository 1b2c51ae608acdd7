"""The JAX backend's entry point: what it accepts, its typed options, the start; the loop's driver is
:mod:`.driver`."""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from typing import Any, Callable, cast

import numpy as np
from scipy.optimize import minimize_scalar

from ..._deadline import Budget
from ..._validation import check_choice, check_int, check_real
from ...constraints import iter_triplets
from ...errors import InputError, UnknownOptionError
from ...options import default, refuse_unused
from ...protocols import CertifiableTerm, ScalarLossTerm, TripletProblem
from ...solution import Solution
from .geometry import Setup
from .prox import declares_indicator, declares_prox
from .geometry import accepts as _accepts
from .solvers import DEFAULT_SOLVER, SOLVERS, Solver

NAME = "jax"


@dataclass(frozen=True)
class Options:
    """The JAX backend's options (see :func:`solve`); the shared ones (``tol``, ``max_iter``, ``time_limit``,
    ``verbose``, ``solver``) have their defaults and meanings in :mod:`metricopt.options`."""

    solver: str | Solver | None = default("solver", NAME)
    max_iter: int = default("max_iter", NAME)
    tol: float = default("tol", NAME)
    verbose: bool = default("verbose", NAME)
    check_every: int = 10
    certify_every: int = 50
    margin: float = 0.2
    time_limit: float | None = default("time_limit", NAME)
    init: Any = None
    devices: Any = None
    callback: Callable | None = None
    precondition: Any = "auto"
    deterministic: Any = "auto"

    @classmethod
    def resolve(cls, options: dict) -> "Options":
        """Checked options from keyword arguments (``None`` for a number: its default).

        Parameters
        ----------
        options : dict
            The keyword arguments of :func:`solve` (field name -> value).

        Returns
        -------
        Options
            The options, checked, with the solver's name resolved (or the given :class:`~.solvers.Solver`).

        Raises
        ------
        UnknownOptionError
            For an option name the JAX backend does not take (including the other backend's shared options) or an
            unknown solver name.
        InputError
            For a value out of range, a ``callback`` that is not callable, or ``precondition`` /
            ``deterministic`` not ``"auto"``, ``True`` or ``False``.
        """
        refuse_unused(options, NAME)  # a shared option of the other backend only (solver_tol): saying so
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise UnknownOptionError(
                f"unknown option(s) for backend='jax': {unknown}; accepted: {', '.join(names)}."
            )
        opts = cls(**{k: v for k, v in options.items() if v is not None})
        if isinstance(opts.solver, Solver):  # a configured solver instance, e.g. TrustNewton(s_min=2e-6)
            name = opts.solver
        else:
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
                   devices=opts.devices, callback=opts.callback,
                   precondition=_check_auto_or_bool(opts.precondition, "precondition"),
                   deterministic=_check_auto_or_bool(opts.deterministic, "deterministic"))


def _check_auto_or_bool(value, name):
    """An option that is ``"auto"``, ``True`` or ``False``."""
    if isinstance(value, str) and value == "auto":
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise InputError(f"{name} must be 'auto', True or False; got {value!r}.")


#: the option names (for messages and the command line)
OPTIONS = tuple(f.name for f in fields(Options))


def accepts(problem: Any) -> tuple[bool, str]:
    """``(True, "")`` when the JAX backend solves ``problem``, else ``(False, reason)`` (read from the
    problem's declared geometry and terms).

    Parameters
    ----------
    problem : Problem
        The declarative problem.

    Returns
    -------
    accepted : bool
        Whether the JAX backend solves it (:func:`.geometry.accepts`).
    reason : str
        Why not (empty when accepted).
    """
    return _accepts(problem)

def _jax_terms(problem, solver):
    """The terms the jitted loop sees (``problem.jax_terms``): an online solver needs a problem that
    declares ``online_solvable`` (POLA)."""
    if solver.online and not problem.online_solvable:
        raise InputError(f"solver='online' is POLA's online algorithm; {problem.method} has no online solver here.")
    return problem.jax_terms(online=solver.online)


def solve(problem: Any, **options: Any) -> Solution:
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
    ``max_iter`` with ``iteration_limit`` (``time_limit`` seconds: ``time_limit``), or with
    ``optimal_inaccurate`` when the iterates stall; the final iterate is certified
    either way, and only a certificate makes a solution ``optimal``.

    Parameters
    ----------
    problem : Problem
        An LMNN-type, MMC or POLA problem, or one with a factor geometry; accepted by :func:`accepts`.
    **options
        The options below (checked by :meth:`Options.resolve`; ``None`` for a number: its default).
    solver : {"fista", "subgradient", "online", "newton"} or a Solver instance
        ``"fista"`` (default): accelerated projected gradient with restarts on the problem
        smoothed (hinges to a Huber, MMC's roots near 0) with the width driven down.
        ``"subgradient"``: the reference, Weinberger & Saul's projected subgradient method
        (JMLR 2009, Appendix A). ``"online"``: POLA's online algorithm (Shalev-Shwartz et al.
        2004), one iteration per pass over the pairs. ``"newton"``: trust-region Newton-CG with
        the same continuation, factor geometry only (LMNN-R). A configured instance (e.g.
        ``TrustNewton(s_min=2e-6)``) is used as given.
    max_iter : int, default 20000
    tol : float, default 1e-6
        Certified relative duality gap to stop at (:mod:`metricopt.options`); for a factor geometry (not
        convex) the relative stationarity threshold, reported as ``stats["stationarity"]``.
    verbose : bool
        Print iteration, objective, certified gap, active-set size and time at each re-check.
    check_every : int
        Iterations between full re-checks of all triplets.
    certify_every : int
        Iterations between certificates (taken at re-checks; later on every ``CERTIFY_GROWTH``
        (20 %) of the iterations done so far when that is longer).
    margin : float
        Triplets with hinge argument ``1 + d_ij - d_il > -margin`` at a re-check form the active set.
    deterministic : {"auto", True, False}, default "auto"
        ``True``: certificates follow an iteration schedule only, so the same solve gives bit-identical
        results on every run, however loaded the machine. ``False``: an expensive certificate (more than
        ``driver.CERTIFY_SLOW`` seconds) also waits until the iterations since the last one took
        ``driver.CERTIFY_SHARE`` times as long, which bounds the certificates' share of the time but makes
        the stopping iterate depend on timing. ``"auto"``: ``False`` for problems with
        ``n^2 d >= driver.TIMED_SPACING_WORK`` (5e8, e.g. letters' 14,000 x 16), ``True`` below.
    time_limit : float, optional
        Wall-clock seconds for the whole call, set-up and certificate included: it returns within
        ``max(1.1 time_limit, time_limit + 5 s)`` (:mod:`metricopt._deadline`) with status
        ``time_limit`` (or ``optimal`` where the returned iterate's certificate proves it) and the best certified
        iterate reached. The iterations stop at the limit; what no limit interrupts (the start's scale search, a
        search of all triplets, a jitted chunk, the compilation of the loop for a new active-set bucket, a
        certificate's dual) is estimated before it starts, from its last measured run or a-priori
        (:mod:`.driver`: ``SEARCH_SECONDS_PER_UNIT``, ``ITERATION_SECONDS_PER_UNIT``, ``COMPILE_SECONDS``,
        ``CERTIFY_SECONDS_PER_UNIT``, each times ``ESTIMATE_MARGIN``), and not started when it would end past its
        deadline: chunks are shortened to end by the limit, a certificate that would overrun is skipped (the best
        certified iterate so far is returned instead, and the message says so), and when not even the first
        search fits, the start is returned unevaluated. JAX's import and its first compilation in a process are
        estimated, not bounded.
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
    precondition : "auto", True or False, default "auto"
        LMNN-type problems (full PSD ``M``): iterate on ``Z`` with ``M = T Z T``, ``T`` the inverse
        square root of the normalised pull matrix (see :mod:`.geometry`, the "psd" geometry): the
        same problem in coordinates where its linear part is isotropic. ``"auto"``: for the
        smoothing solvers (FISTA) when the pull matrix's condition number exceeds
        ``geometry.PRECONDITION_ABOVE`` (1e3); never for the reference subgradient method or the
        online one.
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
        (``stats["callback_time"]``). Used by :mod:`metricopt.methods.lmnn.early_stopping`.

    Returns
    -------
    Solution
        The final (or, when stopped early by the callback, the requested) iterate with its status, certificate
        (convex problems) and statistics.

    Raises
    ------
    UnknownOptionError
        For an unknown option or solver name.
    InputError
        For invalid option values, a problem the backend does not accept, a solver that needs another geometry
        (``unconstrained_only`` on a constrained one; ``"online"`` on a problem without an online solver), an
        invalid ``init``, or ``devices=`` on a problem without triplets to shard.
    """
    t0 = time.perf_counter()  # time_limit counts from here: the start's search and JAX's set-up are in it
    opts = Options.resolve(options)
    solver = opts.solver if isinstance(opts.solver, Solver) else SOLVERS[cast(str, opts.solver)]
    precondition = ("auto" if solver.smoothing else False) if opts.precondition == "auto" else opts.precondition
    precondition = _without_composite(problem, solver, precondition)
    setup = Setup(problem, precondition=precondition)
    if solver.unconstrained_only and not setup.factor:
        raise InputError(f"solver={solver.name!r} takes unconstrained steps and runs on a factor geometry only "
                         f"(problem.factored(r): M = L^T L); {problem.method} has the constrained geometry "
                         f"'{problem.geometry.describe()}'. Use solver='fista'.")
    terms = _jax_terms(problem, solver)
    init = opts.init
    budget = Budget.start(opts.time_limit, t0)  # capped by an enclosing solve's deadline
    timing: dict = {}
    if setup.factor:
        Z0 = setup.initial_point() if init is None else setup.from_point(
            {"L": _check_factor(init, setup.declared.rank, problem.d, setup.declared.diagonal)})
    elif init is None and solver.scaled_start and any(t.uses_working_set for t in terms):
        # under a time limit the scale search stops (at the best scale found) where its next search of all triplets
        # would end past its share of the time (SCALE_SHARE): the iterations have the rest
        until = None if budget.soft is None else budget.t0 + SCALE_SHARE * (budget.soft - budget.t0)
        most = 4_000_000 if until is None else SCALE_TIMED_MAX_TRIPLETS
        Z0 = setup.from_point({"M": best_scale(problem, None, most, until=until, timing=timing) * np.eye(problem.d)})
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
        return _solve(problem, setup, terms, Z0, solver, opts, mesh, t0, budget, timing.get("search"),
                      timing.get("active_at"))


def _without_composite(problem, solver, precondition):
    """``precondition``, turned off (``"auto"``) or refused (``True``) when a term leaves the smooth part for the
    loop's proximal steps (:mod:`.prox`): its prox or projection holds in the coordinates of ``M``, not in those of
    a preconditioned ``Z`` (``M = T Z T``)."""
    composite = [t for t in problem.terms
                 if declares_indicator(t) or (solver.proximal and declares_prox(t))]
    if not composite or precondition is False:
        return precondition
    if precondition is True:
        names = ", ".join(t.describe() for t in composite)
        raise InputError(f"precondition=True cannot be combined with the term(s) {names}: their prox or projection "
                         "acts on M itself, which the preconditioner's congruence M = T Z T would change. Use "
                         "precondition='auto' or False.")
    return False


def _check_factor(L, r, d, diagonal=False):
    """An ``(r, d)`` finite starting factor (diagonal: a length-``d`` vector, ``(1, d)`` or a diagonal
    ``(d, d)`` matrix)."""
    L = np.asarray(L.L if isinstance(L, Solution) else L, dtype=np.float64)
    if diagonal:
        if L.ndim == 2 and L.shape == (d, d) and np.all(L == np.diag(np.diag(L))):
            L = np.diag(L)
        L = L.reshape(1, -1) if L.ndim == 1 else L
        if L.shape != (1, d) or not np.all(np.isfinite(L)):
            raise InputError(f"init must be a finite diagonal of length {d} (a vector, or a diagonal ({d}, {d}) "
                             f"matrix) for this diagonal factor; got shape {L.shape}.")
        return L
    if L.shape != (r, d) or not np.all(np.isfinite(L)):
        raise InputError(f"init must be a finite ({r}, {d}) factor L for this rank-{r} problem; got shape {L.shape}.")
    return L


class _ScaleOutOfTime(Exception):
    """The scale search's next search of all triplets would end past its deadline."""


#: under a deadline, the scale search (:func:`best_scale`) starts a search of all triplets only when it would end,
#: with this many more searches after it (the solve's first re-check and its certificate), by the deadline
SCALE_RESERVE_SEARCHES = 2.0
#: under a ``time_limit``, the start's scale search has this share of it (its deadline, :func:`best_scale`'s
#: ``until``); where it falls back to evaluating the objective at a dozen scales (too many triplets to collect),
#: each a search of all triplets, it would otherwise take most of a short limit (8,000 synthetic points, d = 50,
#: 30 s on one loaded core: 20 s, leaving no time for an iteration)
SCALE_SHARE = 0.5
#: under a ``time_limit``, the scale search collects at most this many triplet values in its one search before it
#: falls back to evaluating the objective (4 million without a limit: collecting them took 8 s of a 30 s limit
#: on 8,000 synthetic points, d = 50, one loaded core)
SCALE_TIMED_MAX_TRIPLETS = 1_000_000


class _Clock:
    """The deadline of a scale search (:func:`best_scale`): each search of all triplets is timed, and the next one
    is not started when, estimated as the longest so far (before any: :func:`.driver.search_prior`), it would end
    past ``until`` less :data:`SCALE_RESERVE_SEARCHES` more."""

    def __init__(self, problem, until, timing):
        from .driver import search_prior

        self.until, self.timing = until, timing
        self.longest = search_prior(problem)
        self.measured = False
        self.n = max(int(problem.n), 1)
        self.started, self.reached = None, 0  # the search under way: its start, the highest anchor it reached

    def check(self) -> None:
        """Raise :class:`_ScaleOutOfTime` when the next search would end past the deadline."""
        if self.until is not None and time.perf_counter() + (1.0 + SCALE_RESERVE_SEARCHES) * self.longest > self.until:
            raise _ScaleOutOfTime

    def between_blocks(self, anchors: np.ndarray) -> None:
        """Inside a search, after a block of ``anchors``: raise :class:`_ScaleOutOfTime` once the deadline, less the
        reserve, has passed (the whole search's duration is then extrapolated from the share of anchors done)."""
        now = time.perf_counter()
        if self.started is None:
            self.started = now
        if anchors.size:
            self.reached = max(self.reached, int(anchors.max()) + 1)
        if self.until is not None and now + SCALE_RESERVE_SEARCHES * self.longest > self.until:
            if self.reached and self.timing is not None:
                self.timing["search"] = max((now - self.started) * self.n / self.reached, self.longest)
            raise _ScaleOutOfTime

    def took(self, seconds: float) -> None:
        """Account for a search of all triplets that took ``seconds``."""
        self.started, self.reached = None, 0
        self.longest = seconds if not self.measured else max(self.longest, seconds)
        self.measured = True
        if self.timing is not None:
            self.timing["search"] = seconds  # the last one: the driver's estimate of a re-check


def best_scale(problem: Any, M0: Any = None, max_triplets: int = 4_000_000, *, until: float | None = None,
               timing: dict | None = None) -> float:
    r"""``argmin_{c > 0} f(c M0)`` (``M0`` PSD, default the identity) from one triplet search.

    Along the ray the hinge term is :math:`w \sum_t [1 + c\,\delta_t]_+` with
    :math:`\delta_t = d_{M_0}(x_i, x_j) - d_{M_0}(x_i, x_l)`: a triplet with
    :math:`\delta_t \le -D` is inactive for every :math:`c \ge 1/D`. One search at ``M0``
    collects the :math:`\delta_t > -D` (only their values), so that on :math:`[1/D, 2^{20}]` the
    hinge is known exactly (sorted breakpoints and suffix sums: each evaluation costs a binary
    search), the other terms are evaluated as they are (no search), and the convex ``f`` is
    minimised to machine precision in ``log c`` (scipy's bounded Brent search). ``D`` starts at the mean
    target-neighbour distance (the optimal scale makes those distances of the order of the unit
    margin, so few triplets are collected) and grows fourfold, with a new search, while the
    minimiser sits at ``1/D``. (Another scalar triplet loss ``l`` of :mod:`metricopt.losses`, zero for ``h <= 0``
    as well: :math:`w \sum_t l(1 + c\,\delta_t)` over the same collected values.) Problems without a single triplet
    hinge or loss, or whose search would hold more than
    ``max_triplets`` values, fall back to :func:`_scan_scale` (a search per evaluation); but where a uniform sample
    of the triplets (:data:`SCALE_SAMPLE` anchors and impostor candidates, seeded) estimates that the first search
    would collect more than ``max_triplets``, the same ray search runs on the sample, each sampled triplet weighted
    by the inverse of its probability of being drawn (an unbiased estimate of the hinge sum: a start, not an exact
    minimiser), so that a dense start (60,000 x 164: billions of triplets within ``D``) neither fills the memory nor
    costs a search of all triplets per evaluation. The start
    of FISTA for LMNN and of LMNN-R's restarts. With per-anchor weights (weighted LMNN) the hinge
    is :math:`w \sum_t w_{i_t} [1 + c\,\delta_t]_+`: the suffix sums carry the weights.

    Parameters
    ----------
    problem : Problem
        The problem (a :class:`~metricopt.protocols.TripletProblem` with one triplet hinge or loss for the exact
        ray search; any other through :func:`_scan_scale`).
    M0 : (d, d) array_like, optional
        The PSD direction of the ray (default the identity).
    max_triplets : int, optional
        The most collected triplet values before falling back to :func:`_scan_scale` (and the estimated count
        above which the sample is searched instead).
    until : float, optional
        A deadline (:func:`time.perf_counter`): no search of all triplets is started that would end past it with
        :data:`SCALE_RESERVE_SEARCHES` more (estimated as the longest so far, before any a-priori,
        :func:`.driver.search_prior`); the best scale found by then is returned (1 before any search).
    timing : dict, optional
        Filled with ``"search"``: the seconds of the last complete search of all triplets; after a sampled search,
        ``"active_at"``: the sample's estimate of the active triplets within a width at the scale returned.

    Returns
    -------
    float
        The minimising scale ``c`` (within ``[2^-20, 2^20]``, the upper end extended for tiny distances, and
        below where a constraint term makes the objective infinite).
    """
    clock = _Clock(problem, until, timing)
    best: list = [1.0, np.inf]  # the scale of lowest objective evaluated so far
    try:
        return _best_scale(problem, M0, max_triplets, clock, best)
    except _ScaleOutOfTime:
        return float(best[0])


def _best_scale(problem, M0, max_triplets, clock, best):
    """:func:`best_scale` under ``clock`` (raising :class:`_ScaleOutOfTime`), ``best`` kept up to date
    (``[scale, objective]``) where the objective is evaluated."""
    M0 = np.eye(problem.d) if M0 is None else np.asarray(M0, dtype=np.float64)
    hinges = [t for t in problem.terms if t.uses_working_set]
    single = hinges[0] if len(hinges) == 1 and isinstance(hinges[0], CertifiableTerm) else None
    piece = None if single is None else single.dual_piece(problem)
    # another scalar triplet loss (metricopt.losses, dual piece "triplet_loss"): its values on the same deltas
    loss = (single.loss if piece is not None and piece.loss == "triplet_loss" and isinstance(single, ScalarLossTerm)
            else None)
    if (piece is None or (piece.loss != "triplet_hinge" and loss is None)
            or not isinstance(problem, TripletProblem)):
        return _scan_scale(problem, M0, clock=clock, best=best)
    weight = piece.weight
    others = [t for t in problem.terms if not t.uses_working_set]
    rest = lambda c: float(sum(t.value(problem, problem.point(c * M0)) for t in others))
    Z = problem.transformed(M0)
    T = problem.target_neighbors
    # multi-metric problems transform into a stack of spaces: no single target distance, start at D = 1
    mean_target = float(np.mean(np.sum((Z[:, None, :] - Z[T]) ** 2, axis=-1))) if Z.ndim == 2 else 1.0
    D = max(mean_target, 1e-12)
    lo_c, hi_c = 2.0 ** -20, 2.0 ** 20
    sw = problem.sample_weight
    # a dense start (many impostors within D of their targets) is searched on a uniform sample of the triplets,
    # never collected whole: the collected values would fill the memory (60,000 x 164: billions)
    # (a small sample first: where it estimates far fewer than max_triplets the larger one is not drawn; digits
    # PCA-30, 1,257 points, one thread: 2 ms against the 1,024 x 1,024 sample's 35 ms, of a 47 ms scale search)
    small = _sampled_deltas(problem, Z, T, D, size=SCALE_PRESAMPLE)
    sampled = _sampled_deltas(problem, Z, T, D) if small[2] > PRESAMPLE_SHARE * max_triplets else small
    if sampled[2] > max_triplets:
        delta, wt, _ = sampled
        bounds = (np.log(lo_c), np.log(max(hi_c, 1024.0 / D)))
        c = _ray_minimum(_ray_value(delta, wt, loss, weight, rest), rest, bounds)
        if clock.timing is not None:  # the driver's estimate of its first active set, before searching it
            clock.timing["active_at"] = lambda width: float(np.sum(wt[c * delta > -1.0 - width]))
        return c
    while True:
        parts, wparts, count = [], [], 0
        clock.check()
        ts = time.perf_counter()
        for i, _, _, h in iter_triplets(Z, cast(np.ndarray, problem.y), T, margin=D - 1.0, clusters=problem.clusters):
            clock.between_blocks(i)
            parts.append(h - 1.0)
            if sw is not None:
                wparts.append(sw[i])
            count += h.size
            if count > max_triplets:
                return _scan_scale(problem, M0, clock=clock, best=best)
        clock.took(time.perf_counter() - ts)
        delta = np.concatenate(parts) if parts else np.zeros(0)
        f = _ray_value(delta, None if sw is None else np.concatenate(wparts), loss, weight, rest)
        # convex in c, hence unimodal in log c: Brent's bounded search (scipy) to machine precision
        # (tiny features: the mean target distance D below 2^-20 moves the upper end up with 1/D)
        c = _ray_minimum(f, rest, (np.log(max(1.0 / D, lo_c)), np.log(max(hi_c, 1024.0 / D))))
        if c > 1.01 / D or 1.0 / D <= lo_c:
            return c
        best[0] = c  # a wider search would move it below 1 / D: the best so far, should time run out
        D *= 4.0


#: anchors and impostor candidates of the sampled ray search (:func:`_sampled_deltas`), each
SCALE_SAMPLE = 1024
#: ... of the small sample drawn first: the larger one only where it estimates more than PRESAMPLE_SHARE times the
#: budget of collected triplets (the estimate is unbiased; the share leaves room for its spread)
SCALE_PRESAMPLE = 256
PRESAMPLE_SHARE = 0.25


def _sampled_deltas(problem, Z, T, D, size=None, seed=0):
    r"""A uniform sample of the triplets' :math:`\delta_t = d(x_i, x_j) - d(x_i, x_l)` at ``Z`` for the sampled ray
    search of :func:`_best_scale`: ``a = min(n, size)`` anchors and ``m = min(n, size)`` impostor candidates drawn
    without replacement (seeded), every triplet among them kept with weight :math:`n^2 / (a m)` (times the anchor's
    sample weight), so that a weighted sum over the sample is an unbiased estimate of the sum over all triplets
    (each triplet is in the sample with probability :math:`a m / n^2`).

    Returns
    -------
    (delta, weights, count) : ndarray, ndarray, float
        The sampled values, their weights, and the estimated number of triplets with :math:`\delta_t > -D`
        (what the exact search at ``D`` would collect).
    """
    from ...linalg import sq_dists

    size = SCALE_SAMPLE if size is None else int(size)
    y = np.asarray(problem.y)
    Zs = Z[None] if Z.ndim == 2 else Z
    n = Zs.shape[1]
    cl = np.zeros(n, dtype=np.int64) if Z.ndim == 2 else np.asarray(problem.clusters, dtype=np.int64)
    rng = np.random.default_rng(seed)
    A = np.sort(rng.choice(n, min(n, size), replace=False))
    L = np.sort(rng.choice(n, min(n, size), replace=False))
    TA = T[A]
    dz = Zs[cl[TA], A[:, None]] - Zs[cl[TA], TA]
    dt = np.einsum("akr,akr->ak", dz, dz)  # (a, k): the metric of each target's cluster
    dl = np.empty((A.size, L.size))
    for q in np.unique(cl[L]):
        cols = cl[L] == q
        dl[:, cols] = sq_dists(Zs[q][A], Zs[q][L[cols]])  # the metric of each impostor's cluster
    other = y[A][:, None] != y[L][None, :]
    a_idx, l_idx = np.nonzero(other)
    delta = (dt[a_idx] - dl[a_idx, l_idx][:, None]).ravel()  # (pairs, k), row-major
    scale = n * n / (A.size * L.size)
    sw = problem.sample_weight
    w = np.full(a_idx.size, scale) if sw is None else scale * np.asarray(sw, dtype=np.float64)[A[a_idx]]
    wt = np.repeat(w, T.shape[1])
    return delta, wt, float(np.sum(wt[delta > -D]))


def _ray_value(delta, wt, loss, weight, rest):
    r"""``c -> rest(c) + weight * sum_t w_t l(1 + c delta_t)`` over the collected (or sampled) values, ``l`` the
    hinge (sorted breakpoints and suffix sums: a binary search per evaluation) or another scalar ``loss``
    (zero for ``h <= 0``); ``wt`` the weights (``None``: all 1)."""
    if loss is not None:  # a scalar loss other than the hinge: its sum over the triplets active at c
        order = np.argsort(delta, kind="stable")
        delta, wt = delta[order], None if wt is None else wt[order]

        def f(c):
            first = np.searchsorted(delta, -1.0 / c, side="right")  # active: delta > -1/c
            vals = loss.value(1.0 + c * delta[first:])
            return rest(c) + weight * float(np.sum(vals if wt is None else wt[first:] * vals))
    elif wt is None:
        delta = np.sort(delta)
        suffix = np.concatenate([np.cumsum(delta[::-1])[::-1], [0.0]])

        def f(c):
            first = np.searchsorted(delta, -1.0 / c, side="right")  # active: delta > -1/c
            return rest(c) + weight * ((delta.size - first) + c * suffix[first])
    else:
        order = np.argsort(delta, kind="stable")
        delta, wt = delta[order], wt[order]
        wsuffix = np.concatenate([np.cumsum(wt[::-1])[::-1], [0.0]])
        suffix = np.concatenate([np.cumsum((wt * delta)[::-1])[::-1], [0.0]])

        def f(c):
            first = np.searchsorted(delta, -1.0 / c, side="right")  # active: delta > -1/c
            return rest(c) + weight * (wsuffix[first] + c * suffix[first])
    return f


def _ray_minimum(f, rest, bounds):
    """The minimiser ``c`` of the convex ``f`` on ``exp(bounds)`` (Brent's bounded search in ``log c``, scipy), the
    upper end moved down to where ``rest`` (a constraint term, e.g. a trace ball) stays finite."""
    if not np.isfinite(rest(np.exp(bounds[1]))):  # a constraint term ends the ray
        top = _largest_finite(rest, *bounds)
        if top <= bounds[0]:
            return float(np.exp(top))
        bounds = (bounds[0], top)
    found = minimize_scalar(lambda x: f(np.exp(x)), bounds=bounds, method="bounded",
                            options={"xatol": 1e-12, "maxiter": 500})
    return float(np.exp(found.x))


def _largest_finite(value, lo, hi, steps=60):
    """The largest ``x`` in ``[lo, hi]`` (bisection in ``x = log c``, to ``2^-steps`` of the interval) with
    ``value(exp(x))`` finite, for a convex ``value`` infinite beyond a point of the ray (the indicator of a
    constraint term holding 0); ``lo`` when it is infinite there too."""
    if not np.isfinite(value(np.exp(lo))):
        return lo
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.isfinite(value(np.exp(mid))) else (lo, mid)
    return lo


def _scan_scale(problem, M0, shrink=2.0, golden_steps=6, clock=None, best=None):
    """``argmin_c f(c M0)`` approximately, each value the exact objective (a search of all
    triplets): halve ``c`` from 1 while ``f`` decreases (doubling instead if it increases at
    once), then narrow the bracket by golden-section steps in ``log c``; ``c`` within
    ``[2^-20, 2^20]``. The fallback of :func:`best_scale`; under its ``clock`` each evaluation is timed and
    ``best`` (``[scale, objective]``) kept up to date."""
    best = [1.0, np.inf] if best is None else best

    def f(c):
        if clock is not None:
            clock.check()
        ts = time.perf_counter()
        value = problem.objective(c * M0)
        if clock is not None:
            clock.took(time.perf_counter() - ts)
        if value < best[1]:
            best[0], best[1] = c, value
        return value

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


def evaluate(problem: Any, Z: Any, smoothing: float = 0.0, direction: Any = None) -> tuple:
    """The objective the jitted loop minimises, at the solver's point ``Z`` of ``problem``'s geometry
    (for ``problem.factored(r)``: the ``(r, d)`` factor ``L``), over every triplet within the
    re-check margin: ``(value, exact_value, gradient)`` with the hinge smoothed to width
    ``smoothing`` in ``value`` and its gradient, and, given a ``direction`` ``V``, the
    Hessian-vector product ``H(Z) V`` of the smoothed objective as a fourth item (what
    :class:`~.solvers.TrustNewton` computes). With terms that leave the smooth part for FISTA's proximal
    steps (:mod:`.prox`), ``value`` includes their exact value and the gradient is the smooth part's.
    For tests, stationarity measures and teaching; float64.

    Parameters
    ----------
    problem : Problem
        A problem the JAX backend accepts.
    Z : array_like
        The solver's point of ``problem``'s geometry (unpreconditioned: ``Z = M`` for LMNN).
    smoothing : float, optional
        The smoothing width of ``value`` and the gradient (0: exact).
    direction : array_like, optional
        ``V``, of ``Z``'s shape: also return ``H(Z) V``.

    Returns
    -------
    tuple
        ``(value, exact_value, gradient)`` (two floats and a float64 array of ``Z``'s shape), and ``H(Z) V`` as a
        fourth item when ``direction`` is given.

    Raises
    ------
    InputError
        When the backend does not accept ``problem`` or ``smoothing`` is negative.
    """
    import jax
    import jax.numpy as jnp

    from .driver import Run
    from .loop import evaluate_hvp, evaluate_objective
    from .solvers import hessian_vector_product

    setup = Setup(problem)
    solver = SOLVERS[DEFAULT_SOLVER]
    smoothing = check_real(smoothing, "smoothing", low=0.0)
    opts = Options.resolve({"margin": max(Options.margin, smoothing)})
    with jax.enable_x64(True):
        run = Run(problem, setup, _jax_terms(problem, solver), np.asarray(Z, dtype=np.float64), solver, opts)
        actives = run.recheck(setup.to_point(run.Z))[0]
        Zj = jnp.asarray(run.Z)
        # jitted once per term classes and shapes: run eagerly, each of the objective's ~100 primitives is
        # compiled on its own (seconds on a small problem); a closure jitted per call would recompile each time
        args = (tuple(run.term_classes), run.geometry, run.data, run.gdata, tuple(actives), Zj,
                jnp.asarray(smoothing, dtype=Zj.dtype))
        value, exact, grad = evaluate_objective(*args, roles=run.roles, composite=run.composite)
        out: tuple = (float(value), float(exact), np.asarray(grad, dtype=np.float64))
        if direction is not None:
            V = jnp.asarray(np.asarray(direction, dtype=np.float64))
            out += (np.asarray(evaluate_hvp(*args, V, hessian_vector_product, roles=run.roles,
                                            composite=run.composite), dtype=np.float64),)
    return out


def _solve(problem, setup, terms, Z0, solver, opts, mesh=None, t0=None, budget=None, search_seconds=None,
           active_at=None):
    """Run the driver (:class:`.driver.Run`) around the jitted loop."""
    from .driver import Run

    return Run(problem, setup, terms, Z0, solver, opts, mesh, t0, budget, search_seconds, active_at).run()
