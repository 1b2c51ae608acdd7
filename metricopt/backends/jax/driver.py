"""The driver around the one jitted loop: re-checks, the rollback safeguard, certificates (convex
problems) or stationarity (factor geometry), the caller's callback, and the Solution.

A solve alternates a full **re-check** of the iterate (every triplet searched, active sets rebuilt,
the exact objective) with a jitted **chunk** of solver iterations (:func:`.loop.run_chunk`). Each
concern is one piece: the active sets (:class:`ActiveSets`: re-check, capacity buckets), the certificate
schedule (:class:`CertificateSchedule`), the stop policy (:func:`stop_reason`) and the result (:func:`solution`,
:func:`factor_solution`); :class:`Run` holds the iterate and the solver state and runs the loop:
:meth:`Run.recheck`, :meth:`Run.rolled_back`, :meth:`Run.measure` (certificate or stationarity),
:meth:`Run.notify` (verbose line, callback) and :meth:`Run.step` (one jitted chunk).
Each stop is a :class:`~metricopt.certify.policy.SolverReport` (what the loop saw); the status of the result is
decided from it by :func:`metricopt.certify.policy.decide` only.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import numpy as np

from ..._deadline import Budget, deadline
from ...certify.certificate import Verdict
from ...certify import policy
from ...certify.policy import NoCertificate, Outcome, SolverReport
from ...errors import InputError
from ...problems.terms import TripletLoss
from ...protocols import CertifiableTerm, DualPiece, TripletProblem
from ...solution import Solution
from ...setops import member
from .prox import plan

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
#: for that spacing the last certificate's duration is scaled to the active set now only where the a-priori cost
#: model changed by more than this factor (synthetic 20,000 x 50 on an H100: 1.19 million triplets at the first,
#: about 100,000 after, a factor 8)
SPACING_SCALE_ABOVE = 4.0
#: a certificate due within this share of the previous smoothing width's iterations after a decrease is put off
#: (:meth:`Run.settling`)
SETTLE_SHARE = 0.5
#: at most this many due certificates in a row are put off so (a width that shrinks at every re-check would put off
#: every one: iris, timed spacing, 320 -> 836 iterations unbounded; MNIST-5k's two after its decreases at iterations
#: 330 and 410 certified at 490, one put off certified at 650)
MAX_PUT_OFF = 2
#: with ``deterministic="auto"``, the timed spacing applies only to problems with ``n^2 d`` at least this
#: (below it every solve is bit-reproducible whatever the load of the machine)
TIMED_SPACING_WORK = 5e8
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
#: an active set smaller than 1/SHRINK_BELOW of its capacity moves down to the bucket of twice its size (the
#: jitted loop then runs on less padding; JAX keeps one compiled loop per bucket, so a bucket compiles once)
SHRINK_BELOW = 4
#: buckets up to this capacity move down only once the loop has done SHRINK_WORK (iterations x capacity x d^2,
#: about a second of one CPU core, the order of a compilation of the loop) in them: a short solve (most small
#: problems) would pay a second compilation to save less, a long one pays for the padding at every iteration
#: (ORL rank-5 LMNN-R, d = 50, 600 iterations: 581 s kept in bucket 2^14, 288 s moving down). Counted in
#: iterations, not seconds, so that the buckets (and the rounding of the sums over them) are reproducible
SHRINK_ABOVE = 1 << 14
SHRINK_WORK = 1e9
#: the distinct pairs' bucket (the pair forms) moves down, once settled, to the power of two holding this multiple of
#: the pairs, where that halves it at least: every pair row costs a d x d product per evaluation (the margins'
#: GEMM), so its padding is dearer than the triplets'; with the triplets' rule (twice the pairs, below a quarter)
#: MNIST-5k's 33,700 pairs stayed in a bucket of 131,072
PAIR_HEADROOM = 1.5
#: the re-check interval grows up to this multiple of ``check_every`` (solvers with adaptive checks)
MAX_CHECK_FACTOR = 8
#: under a ``time_limit``: a certificate before the end may run its conic programs for this share of the seconds
#: left (the closing one until the budget's ``certify_by``, :mod:`metricopt._deadline`)
MID_CERTIFY_SHARE = 0.5
#: under a ``time_limit`` (:mod:`metricopt._deadline`), what no limit interrupts is estimated before it starts, from
#: its last measured run in this solve, or before any from these a-priori costs (2 loaded cores, float64; synthetic
#: LMNN, d = 50): a search of all triplets, SEARCH_SECONDS_PER_UNIT x n^2 d (8,000 points: 0.7-2.2 s, 20,000:
#: 4.5 s, i.e. 1.1e-10 to 3.4e-10 per unit); one iteration of the loop, ITERATION_SECONDS_PER_UNIT x the active
#: sets' capacity x d^2 (2^19 triplets: 0.37 s, 2.8e-10); compiling the loop for a capacity bucket not yet compiled
#: in the process, the most measured so far or COMPILE_SECONDS (measured 0.5-2.3 s on 2 loaded cores, d = 20-50)
SEARCH_SECONDS_PER_UNIT = 3e-10
#: the same where the search runs on an accelerator (:func:`metricopt.constraints.use_device_search` on a GPU or TPU):
#: the device's pass is a small part, the host's handling of what it finds the rest (one H100, 16 host cores: 60,000 x
#: 164 from the scaled identity, 11.5 s a search, 2.0e-11 per unit; 20,000 x 50, 0.23 s, 1.2e-11). The CPU's unit
#: refused a 60 s solve at 60,000 x 164 before its first search (an estimated 177 s)
SEARCH_SECONDS_PER_UNIT_ACCELERATOR = 3e-11
ITERATION_SECONDS_PER_UNIT = 4e-10
#: the same on an accelerator (one H100: a gradient over 9.2 million triplets at 60,000 x 164, capacity 2^24, in the
#: pair form took 0.039 s, 8.7e-14 per unit; an iteration is a few evaluations). The CPU's unit gave 180 s an iteration
#: there and refused the first chunk of a 150 s solve
ITERATION_SECONDS_PER_UNIT_ACCELERATOR = 1e-12
COMPILE_SECONDS = 2.0
#: what no limit interrupts is started only when this many times its estimate ends by its deadline: a loaded machine's
#: speed changes between two measurements (a search of 8,000 synthetic points on 2 cores shared with other jobs took
#: 5.8 s extrapolated from the first blocks of one, then 8.1 s)
ESTIMATE_MARGIN = 1.5
#: a certificate's estimate is the median of this many last measured ones (the last alone let one slow certificate,
#: e.g. the first with its compilations, hold back every later one near a time limit)
ESTIMATE_WINDOW = 3
#: out of time, with no time to certify the best iterate: the best certified iterate is returned instead (with its
#: certificate) unless its exact objective is worse than the best iterate's by more than this relative amount; then
#: the best iterate is returned uncertified (a certified start of breast_cancer POLA, objective 1.65e6, against an
#: iterate at 2.01e4: the first certificates there take 30 s and 13 s, set-up included, later ones 0.1 s)
FALLBACK_WORSE = 1e-3
#: a certificate's cost before any was measured (its search is the re-check's, kept): CERTIFY_SECONDS +
#: CERTIFY_SECONDS_PER_UNIT x active triplets x d^2 (synthetic LMNN, d = 50: 382,218 active, 0.6 s; 1,029,753:
#: 1.9 s; 8,470: 0.06 s); the closing one may also try the wide restricted dual (FINAL_CERTIFY_FACTOR)
CERTIFY_SECONDS = 0.2
CERTIFY_SECONDS_PER_UNIT = 1.5e-9
FINAL_CERTIFY_FACTOR = 2.0

_NO_PIECE = DualPiece()
#: the jitted loops compiled in this process (:func:`_loop_key`) and the seconds the compilations took
_COMPILED: set = set()
_COMPILE_SECONDS: list = []


def search_prior(problem: Any) -> float:
    """The a-priori seconds of a search of all triplets of ``problem`` (:data:`SEARCH_SECONDS_PER_UNIT` x n^2 d, or
    :data:`SEARCH_SECONDS_PER_UNIT_ACCELERATOR` where the search runs on a GPU or TPU), 0 for a problem without a
    working set (its re-check evaluates pairs or terms, not a search).

    Parameters
    ----------
    problem : Problem
        The problem.

    Returns
    -------
    float
        The estimated seconds.
    """
    if not any(t.uses_working_set for t in problem.terms):
        return 0.0
    from ...constraints import use_device_search
    from ...search import default_platform

    n, d = float(problem.n), float(problem.d)
    on_accelerator = default_platform() != "cpu" and use_device_search(problem.n, problem.d)
    return (SEARCH_SECONDS_PER_UNIT_ACCELERATOR if on_accelerator else SEARCH_SECONDS_PER_UNIT) * n * n * d


def _loop_key(run, actives):
    """What the jitted loop is compiled for (its static arguments, the active sets' capacities, the data's
    shapes): a key of :data:`_COMPILED`."""
    caps = tuple(None if a is None else tuple(v.shape for v in a.values()) for a in actives)
    return (repr(run.solver), run.term_classes, repr(run.geometry), run.roles, repr(run.composite), caps,
            run.problem.n, run.problem.d, run.dtype, run.n_dev)


def _new_violators(old, new, h):
    """How many triplets of ``new`` with ``h > 0`` are absent from ``old`` (numpy active sets)."""
    if old is None:
        return int(np.sum(h > 0))
    key = lambda a: a["p"][a["mask"] > 0].astype(np.int64) * (1 << 31) + a["l"][a["mask"] > 0]
    viol = (h > 0) & (new["mask"] > 0)
    knew = new["p"][viol].astype(np.int64) * (1 << 31) + new["l"][viol]
    return int(np.sum(~member(knew, key(old))))


def memory_check(problem: Any, terms: Any, data: Any, capacity: int) -> Any:
    """Refuse a solve whose estimated bytes (:func:`.memory.estimate`) with active sets of ``capacity`` slots do not
    fit the device or the host (:func:`.memory.check`); returns the estimate.

    Parameters
    ----------
    problem : Problem
        The problem.
    terms : sequence
        Its JAX terms.
    data : sequence of dict
        The terms' arrays.
    capacity : int
        The active sets' capacity, all terms together.

    Returns
    -------
    MemoryEstimate
        The estimate.

    Raises
    ------
    ProblemTooLargeError
        When it does not fit.
    """
    from . import memory

    need = memory.estimate(problem, data, capacity)  # the gathers' bytes: above a dense n x n piece's (n <= 4096)
    memory.check(problem, need)
    return need


def _certifiable(problem):
    """Whether :func:`metricopt.certify` can bound ``problem`` (:func:`metricopt.certify.core.certifiable`: a
    registered certifier reads every term, by its dual piece or generically from its CVXPY expression)."""
    from ...certify.core import certifiable

    return certifiable(problem)[0]


class ActiveSets:
    """The active-set management of one solve: per working-set term, its current active set (``current``), its
    padded capacity bucket (grown by the search; moved down once mostly padding), and its size at the last
    re-check (``sizes``; ``saved_sizes`` at the re-check before the last chunk, for the rollback safeguard's
    explosion limit). ``n_dev``/``split``: the devices the active triplets are sharded over."""

    def __init__(self, problem, terms, n_dev=1, split=None):
        self.problem, self.terms = problem, terms
        self.n_dev, self.split = n_dev, split
        self.capacity, self.current = {}, {}  # per working-set term: capacity bucket, current active set
        self.pair_capacity = {}  # per working-set term: the bucket of its distinct pairs (the pair forms)
        self.bucket_since = {}  # per working-set term: the iteration its current bucket was entered
        self.sizes, self.saved_sizes = {}, {}
        self.d2 = float(problem.d) ** 2
        self.data = ()  # the terms' arrays (for the memory estimate of a larger bucket; set by the Run)
        self.X_device = None  # the lifted points on the device (the pair forms' differences are formed there)

    def rebuild(self, M: np.ndarray, width: float, it: int, guard: bool) -> tuple[list, int, float, int, bool]:
        """Search every triplet at ``M`` within ``width`` and rebuild the active sets (device arrays); with
        ``guard``, a set that grew past :data:`EXPLOSION_FACTOR` times its last size (and :data:`EXPLOSION_MIN`)
        stops the search. Returns ``(actives, sizes, objective of the working-set terms, new violators,
        exploded)``.

        Parameters
        ----------
        M : numpy.ndarray
            The metric at which every triplet is searched.
        width : float
            Triplets with hinge argument above ``-width`` are active (the margin, or the smoothing width if larger).
        it : int
            The iteration (for the capacity buckets' bookkeeping).
        guard : bool
            Stop the search when a set explodes (the rollback safeguard).

        Returns
        -------
        actives : list
            Per term, its padded active set as JAX arrays (sharded when several devices), ``None`` for a term
            without working set.
        sizes : int
            The active triplets, all terms together.
        objective : float
            The working-set terms' exact value at ``M``.
        new_violators : int
            Violated triplets absent from the previous active sets.
        exploded : bool
            Whether the guard stopped the search (the other items are then partial).
        """
        import jax

        actives: list
        actives, sizes, obj, new_viol = [], 0, 0.0, 0
        for idx, t in enumerate(self.terms):
            if not t.uses_working_set:
                actives.append(None)
                continue
            from . import memory

            guard_limit = max(EXPLOSION_FACTOR * self.sizes.get(idx, 0), EXPLOSION_MIN) if guard else None
            memory_limit = memory.triplet_limit(self.problem)  # the search stops before it fills the memory
            limit = min((x for x in (guard_limit, memory_limit) if x is not None), default=None)
            found = t.jax_active_set(self.problem, M, width, min_capacity=self.capacity.get(idx, MIN_CAPACITY),
                                     multiple=self.n_dev, limit=limit,
                                     min_pair_capacity=self.pair_capacity.get(idx, MIN_CAPACITY), device_pairs=True)
            if found is None:
                if guard_limit is not None:  # the chunk stepped too far (the set exploded, or outgrew the memory):
                    return actives, sizes, obj, new_viol, True  # rolled back to shorter steps
                raise memory.too_many_triplets(self.problem, 0 if limit is None else int(limit), width)
            act, size, val, h = found
            self.sizes[idx] = size
            cap = act["mask"].shape[0]
            if cap > self.capacity.get(idx, MIN_CAPACITY):  # a larger bucket: does it fit the device?
                others = sum(c for i, c in self.capacity.items() if i != idx)
                memory_check(self.problem, self.terms, self.data, cap + others)
            # keep the capacity bucket unless the set became mostly padding of a large bucket, or of one the loop
            # has done SHRINK_WORK in; then move down to a bucket with room for twice the set (a set just above a
            # power of two would otherwise move straight back up, and every bucket costs a compilation of the loop)
            if self.capacity.get(idx) != cap:
                self.bucket_since[idx] = it
            settled = cap > SHRINK_ABOVE or (it - self.bucket_since[idx]) * cap * self.d2 >= SHRINK_WORK
            shrink = settled and size < cap // SHRINK_BELOW
            self.capacity[idx] = max(MIN_CAPACITY, 1 << (2 * size - 1).bit_length()) if shrink else cap
            if shrink:
                self.bucket_since[idx] = it
            pcap = TripletLoss.pair_capacity(act)
            if pcap:  # the distinct pairs' bucket: kept, or moved down once settled (PAIR_HEADROOM)
                pairs = int(act["u"][:size].max()) + 1 if size else 0
                fit = max(MIN_CAPACITY, 1 << (int(PAIR_HEADROOM * pairs) - 1).bit_length()) if pairs else MIN_CAPACITY
                self.pair_capacity[idx] = fit if settled and 2 * fit <= pcap else pcap
            new_viol += _new_violators(self.current.get(idx), act, h)
            self.current[idx] = act
            act_j = self.to_device(act)
            actives.append(act_j if self.split is None else jax.device_put(act_j, self.split))
            sizes += size
            obj += val
        return actives, sizes, obj, new_viol, False

    def save_sizes(self) -> None:
        """Remember the sizes of this re-check (before a chunk that may be rolled back)."""
        self.saved_sizes = dict(self.sizes)

    def restore_sizes(self) -> None:
        """The sizes of the re-check before the rolled-back chunk."""
        self.sizes = dict(self.saved_sizes)

    def device_actives(self) -> tuple:
        """The current active sets as JAX arrays, one entry per term (``None`` for a term without working set).

        Returns
        -------
        tuple
            Per term, a dict of JAX arrays or ``None``.
        """
        actives = [self.current.get(i) for i in range(len(self.terms))]
        return tuple(None if a is None else self.to_device(a) for a in actives)

    def to_device(self, act: dict) -> dict:
        """An active set as JAX arrays, its pair differences formed on the device (:meth:`TripletLoss.to_device`, the
        lifted points moved there once per solve).

        Parameters
        ----------
        act : dict
            An active set (NumPy arrays).

        Returns
        -------
        dict
            JAX arrays.
        """
        import jax.numpy as jnp

        if "DU_rows" in act and self.X_device is None:
            self.X_device = jnp.asarray(self.problem.X_lifted)
        return TripletLoss.to_device(act, self.X_device)


class CertificateSchedule:
    """When a convex solve certifies, and what its certificates cost: the last certificate (``cert``, of the point
    ``V`` at iteration ``it``), the seconds spent (``time``, ``calls``, ``last``: the last one's, ``end``: when it
    ended). A certificate is due every ``certify_every`` iterations, more sparsely later on (a deterministic
    schedule, so that a solve is reproducible), unless ``timed_spacing`` (``deterministic=False``, or "auto" on a
    large problem) also spaces expensive certificates by wall-clock time. ``first``: the iteration from which the
    first one is due (a cold start's first certificate waits ``certify_every`` iterations: the solver's own start,
    the scaled identity, is never where a solve stops, and its certificate cost digits PCA-30 55 ms of the 0.8 s in
    which it reaches metric-learn's objective; a given ``init`` is certified at once, it may be optimal already)."""

    def __init__(self, problem, opts, first: int = 0):
        self.every = opts.certify_every
        self.first = int(first)
        self.cert: Any = None  # the last certificate, of the point V at iteration it
        self.V: dict | None = None
        self.it: int | None = None
        self.best: tuple | None = None  # (objective, V, iteration, certificate): the certified iterate of lowest objective
        self.time, self.calls, self.last, self.end = 0.0, 0, 0.0, 0.0
        self.recent: list = []  # the last ESTIMATE_WINDOW certificates' seconds
        self.recent_active: list = []  # and the active triplets each had (None: not known)
        self.d = int(problem.d)
        self.best_lower: tuple[float, int] | None = None  # (the highest lower bound of the certificates, its iteration)
        det = opts.deterministic
        if det == "auto":
            n, d = problem.n, problem.d
            det = float(n) ** 2 * float(d) < TIMED_SPACING_WORK
        self.timed_spacing = not det

    def due(self, it: int, now: float, active: int | None = None, interval: int = 0) -> bool:
        """Whether a certificate is due at iteration ``it`` (time ``now``) by the schedule.

        Parameters
        ----------
        it : int
            The iteration.
        now : float
            The time (:func:`time.perf_counter`).
        active : int, optional
            The active triplets now: the last certificate's duration is scaled to it (:meth:`expected` with
            ``last=True``); without it, the duration as measured.
        interval : int, default 0
            The iterations between re-checks now: a certificate (taken at re-checks only) is due at the re-check
            nearest to the iteration the spacing names, not the first after it, so that the spacing is kept on
            average instead of stretched by up to an interval (MNIST-5k, PCA 164: spacing 82 after a certificate at
            iteration 410, re-checks every 80; the re-check at 490, which certifies at 6.3e-4, was passed over, and
            the next certificate, put off past a change of the smoothing width, came at 650, 25 s later).

        Returns
        -------
        bool
            From iteration ``first`` on when there is no certificate yet; else ``interval / 2`` iterations before
            ``max(certify_every, CERTIFY_GROWTH * it_last)`` have passed since the last one, and with
            ``timed_spacing`` after an expensive certificate, once ``CERTIFY_SHARE`` times its duration, scaled to
            the active set now, has passed since it ended.
        """
        cert, cert_it = self.cert, self.it
        if cert is None or cert_it is None:
            due = it >= self.first
        else:
            spacing = max(self.every, int(CERTIFY_GROWTH * cert_it))
            due = 2 * (it - cert_it) >= 2 * spacing - interval
        cost = self.last if active is None else self.expected(active, last=True)
        if due and cert is not None and self.timed_spacing and cost > CERTIFY_SLOW:
            # an expensive certificate (e.g. POLA's restricted dual program) waits until the iterations
            # since the last one took CERTIFY_SHARE times as long: certificates stay a bounded share of the time
            due = now - self.end >= CERTIFY_SHARE * cost
        return due

    def took(self, start: float, active: int | None = None) -> None:
        """Account for a certificate that started at ``start`` and ended now.

        Parameters
        ----------
        start : float
            When it started (:func:`time.perf_counter`).
        active : int, optional
            The active triplets at its point (what :meth:`expected` scales by).
        """
        self.last = time.perf_counter() - start
        self.end = time.perf_counter()
        self.time += self.last
        self.calls += 1
        self.recent = (self.recent + [self.last])[-ESTIMATE_WINDOW:]
        self.recent_active = (self.recent_active + [active])[-ESTIMATE_WINDOW:]

    def expected(self, active: int | None, d: int | None = None, last: bool = False) -> float:
        """The seconds a certificate at ``active`` active triplets is expected to take: the median of the last
        :data:`ESTIMATE_WINDOW` measured ones, each scaled by the a-priori cost model :data:`CERTIFY_SECONDS` +
        :data:`CERTIFY_SECONDS_PER_UNIT` x active x d^2 from its own active set to ``active`` (the first
        certificate of a large solve, at the start's million triplets, does not hold back the later ones at a
        tenth of them: synthetic 20,000 x 50 on an H100, 12 s at 1.19 million, none again in the 33 s that
        followed at about 100,000); the model alone before any was measured.

        Parameters
        ----------
        active : int or None
            The active triplets (``None``: the measured durations unscaled).
        d : int, optional
            The dimension (default: the problem's).
        last : bool, default False
            The last certificate alone, scaled only where the model's cost changed by more than
            :data:`SPACING_SCALE_ABOVE` times (the timed spacing: a solve whose active set moves less keeps the spacing
            it had; MNIST-5k, 117,000 to 61,000 triplets, scaled, certified at iteration 650 instead of 490).

        Returns
        -------
        float
            The estimate, without :data:`ESTIMATE_MARGIN`.
        """
        dim = float(self.d if d is None else d)

        def model(a):
            return CERTIFY_SECONDS + CERTIFY_SECONDS_PER_UNIT * float(a) * dim * dim

        if not self.recent:
            return model(0 if active is None else active)
        if last:
            a = self.recent_active[-1]
            ratio = 1.0 if a is None or active is None else model(active) / model(a)
            return self.recent[-1] * (ratio if max(ratio, 1.0 / ratio) > SPACING_SCALE_ABOVE else 1.0)
        scaled = [t if a is None or active is None else t * model(active) / model(a)
                  for t, a in zip(self.recent, self.recent_active)]
        return float(np.median(scaled))

    def record(self, cert: Any, V: dict | None, it: int | None, objective: float | None = None) -> None:
        """The certificate ``cert`` of the point ``V`` at iteration ``it``.

        Parameters
        ----------
        cert : Certificate
            The certificate.
        V : dict
            The point it certifies.
        it : int
            The iteration of the point.
        objective : float, optional
            The point's exact objective where known (a re-checked iterate): the certified iterate of lowest
            objective is kept (:attr:`best`), the one a time-limited solve falls back to.
        """
        self.cert, self.V, self.it = cert, V, it
        if objective is not None and cert is not None and (self.best is None or objective < self.best[0]):
            self.best = (objective, V, it, cert)

    def with_best_lower(self, cert: Any, it: int) -> Any:
        """``cert`` with the highest lower bound of this solve's certificates so far: every certificate's lower bound
        is a bound on the same optimum, so the largest one holds for every later iterate (a certificate's bound
        depends on its iterate's dual estimate and varies from one to the next; MNIST-5k: 7.5e-4 at one iterate,
        4.2e-3 at a better one). Infeasible certificates are left as they are.

        Parameters
        ----------
        cert : Certificate
            The certificate of the current iterate.
        it : int
            Its iteration.

        Returns
        -------
        Certificate
            ``cert`` itself when its lower bound is the best so far, else the certificate of the bounds
            ``(cert.upper, best lower)`` whose details name the iteration the lower bound came from.
        """
        from ...certify import Certificate, Verdict

        if cert is None or cert.verdict is Verdict.INFEASIBLE or not np.isfinite(cert.lower):
            return cert
        if self.best_lower is None or cert.lower >= self.best_lower[0]:
            self.best_lower = (float(cert.lower), it)
            return cert
        lower, at = self.best_lower
        return Certificate.from_bounds(cert.upper, lower, cert.tol, cert.problem,
                                       {**cert.details, "lower bound": f"from the certificate at iteration {at} (the "
                                        f"highest of this solve; this iterate's own: {cert.lower:.10g})"})

    def certified(self, V: dict | None) -> Any:
        """The certificate taken of the point ``V`` (the last one, or the best certified iterate's), else ``None``.

        Parameters
        ----------
        V : dict or None
            The point.

        Returns
        -------
        Certificate or None
            Its certificate.
        """
        if V is None:
            return None
        if V is self.V:
            return self.cert
        if self.best is not None and V is self.best[1]:
            return self.best[3]
        return None

    def estimate(self, search: float, active: int, d: int, kept: bool = True, final: bool = False) -> float:
        """The seconds a certificate is expected to take: :data:`ESTIMATE_MARGIN` times :meth:`expected` (the median
        of the last :data:`ESTIMATE_WINDOW` measured ones, scaled to ``active``: one slow certificate, e.g. the first
        with its compilations, does not block the later ones; before any, :data:`CERTIFY_SECONDS` +
        :data:`CERTIFY_SECONDS_PER_UNIT` x ``active`` x ``d^2``),
        :data:`FINAL_CERTIFY_FACTOR` times that when it closes the solve (the wide restricted dual may be tried
        too), and a search of all triplets unless the re-check's is ``kept`` (the point was the last one
        re-checked).

        Parameters
        ----------
        search : float
            The estimated seconds of a search of all triplets (its margin included).
        active : int
            The active triplets at the last re-check.
        d : int
            The dimension.
        kept : bool, optional
            Whether the point is the last one re-checked (its search is reused).
        final : bool, optional
            Whether it is the closing certificate.

        Returns
        -------
        float
            The estimate.
        """
        dual = self.expected(active, d)
        return ESTIMATE_MARGIN * (FINAL_CERTIFY_FACTOR if final else 1.0) * dual + (0.0 if kept else search)


def stop_reason(entry: dict, cert: Any, stationary: bool, stop_requested: bool, done: bool, *, it: int, opts: Any,
                certifiable: bool, online: bool) -> SolverReport | None:
    """The stop policy: the :class:`~metricopt.certify.policy.SolverReport` when the solve stops at this re-check,
    else ``None``: a certified optimum wins over a callback's request, which wins over the iteration or time limit.

    Parameters
    ----------
    entry : dict
        The re-check's history entry (``rel_gap``, ``first_order``, ``stationarity``).
    cert : Certificate or None
        The last certificate.
    stationary : bool
        Whether the iterate is stationary (factor geometry) or first-order optimal (uncertifiable) within ``tol``.
    stop_requested : bool
        Whether the callback asked to stop.
    done : bool
        Whether ``max_iter`` or the time limit is reached.
    it : int
        The iteration.
    opts : Options
        The backend's options (``tol``, ``max_iter``, ``time_limit``).
    certifiable : bool
        Whether a certificate covers the problem.
    online : bool
        Whether an iteration is a pass of an online solver (for the message).

    Returns
    -------
    SolverReport or None
        Converged, stationary, stopped, iteration or time limit; ``None`` to go on.
    """
    tol = opts.tol
    if entry["rel_gap"] is not None and cert.rel_gap <= tol:
        return SolverReport(Outcome.CONVERGED, f"certificate within tol {tol:.1e} after {it} iterations")
    if stationary and not certifiable:
        return SolverReport(Outcome.CONVERGED, f"first-order optimality: relative projected-gradient step "
                                               f"{entry['first_order']:.2e} <= tol {tol:.1e} after {it} "
                                               "iterations; no certificate exists for this problem's terms")
    if stationary:
        return SolverReport(Outcome.STATIONARY, f"relative gradient norm {entry['stationarity']:.2e} <= tol "
                                                f"{tol:.1e} after {it} iterations")
    if stop_requested:
        return SolverReport(Outcome.STOPPED, f"the callback stopped the solve at iteration {it}")
    if done:
        if it >= opts.max_iter:
            return SolverReport(Outcome.ITERATION_LIMIT,
                                f"stopped after {it} {'passes' if online else 'iterations'}")
        limit = ("the enclosing solve's deadline" if opts.time_limit is None
                 else f"time limit {opts.time_limit:g}s")
        return SolverReport(Outcome.TIME_LIMIT, f"{limit} reached after {it} iterations")
    return None


class Run:
    """One solve of the JAX backend (see the module docstring); ``Run(...).run()`` returns the Solution."""

    def __init__(self, problem, setup, terms, Z0, solver, opts, mesh=None, t0=None, budget=None,
                 search_seconds=None, active_at=None):
        import jax.numpy as jnp

        self.active_at = active_at  # a sampled start's estimate: width -> active triplets at Z0 (narrow_start)
        self.problem, self.setup, self.terms, self.solver, self.opts = problem, setup, terms, solver, opts
        self.factor = setup.factor  # non-convex: stationarity instead of certificates
        self.certifiable = self.factor or _certifiable(problem)  # else: first-order optimality, 'uncertified'
        self.t0 = time.perf_counter() if t0 is None else t0  # the solve's start (its set-up before this Run counts)
        # time_limit: the soft deadline ends the iterations, the hard one (the promise) bounds what ends the solve
        self.budget = Budget.start(opts.time_limit, self.t0) if budget is None else budget
        self.chunk_rate, self.recheck_time = None, 0.0  # seconds per iteration of the last chunk, of the last re-check
        self.first_chunk = None  # (seconds, iterations) of a first chunk that compiled the loop, until a rate is known
        self.active_size = 0  # active triplets at the last complete re-check
        # the estimate of a search of all triplets until a re-check is measured: the start's (scale search), or
        # a-priori (search_prior)
        self.search_seconds = search_prior(problem) if search_seconds is None else float(search_seconds)
        self.term_classes = tuple(type(t) for t in terms)
        # each term's loss role (e.g. the pairs an online solver visits); a term the certificates cannot read has none
        self.roles = tuple(((t.dual_piece(problem) if isinstance(t, CertifiableTerm) else None) or _NO_PIECE).loss
                           for t in terms)
        raw = tuple(t.jax_data(problem) for t in terms)
        # the bytes it needs on the device and the host, before they are allocated (ProblemTooLargeError)
        self.memory_checked = memory_check(problem, terms, raw, MIN_CAPACITY * sum(t.uses_working_set for t in terms))
        self.data = tuple({k: jnp.asarray(v) for k, v in dat.items()} for dat in raw)
        if opts.verbose:
            need = self.memory_checked
            print(f"[metricopt jax/{solver.name}] memory estimate: {need.device / 1e6:.3g} MB on the device, "
                  f"{need.host / 1e6:.3g} MB on the host ({need.describe()})", flush=True)
        self.geometry = setup.geometry
        self.gdata = {"T": jnp.asarray(setup.gdata["T"])} if "T" in setup.gdata else {}
        # non-smooth terms with a prox, a constraint term with a projection: out of the smooth part (see .prox)
        self.composite = plan(terms, self.geometry, solver.proximal)
        self.smoothed = solver.smoothing and any(t.jax_smoothed for i, t in enumerate(terms)
                                                 if i not in self.composite.indices)
        self.extras = problem.extra_variables
        self.online = solver.online
        self.Z = np.asarray(self.project(jnp.asarray(Z0)), dtype=np.float64)
        self.state = solver.init(jnp.asarray(self.Z))
        if self.composite.n_dual:  # the inner dual loop's multipliers (warm start), at the step they were taken at
            Zj = self.state["M"]
            self.state = {**self.state, "dual": jnp.zeros((self.composite.n_dual,) + Zj.shape, Zj.dtype),
                          "dual_step": jnp.ones((), Zj.dtype)}
        self.n_dev, self.split = 1, None
        if mesh is not None:
            # the active triplets are split across the devices, everything else replicated
            import jax
            from jax.sharding import NamedSharding, PartitionSpec

            self.n_dev = mesh.devices.size
            self.split, replicate = NamedSharding(mesh, PartitionSpec("data")), NamedSharding(mesh, PartitionSpec())
            self.data, self.gdata, self.state = jax.device_put((self.data, self.gdata, self.state), replicate)
        self.dtype = str(self.state["M"].dtype)
        from ...search import default_platform

        # where the iterations run (the a-priori rate of a chunk, :meth:`chunk_seconds`)
        self.platform = default_platform() if mesh is None else str(mesh.devices.flat[0].platform)
        # iteration bookkeeping
        self.it, self.unchanged, self.interval = 0, 0, opts.check_every
        self.active_sets = ActiveSets(problem, terms, self.n_dev, self.split)
        self.active_sets.data = self.data
        self.history, self.best = [], None  # best: (objective, V, iteration)
        # certificates
        self.certs = CertificateSchedule(problem, opts, first=0 if opts.init is not None else opts.certify_every)
        self.phase = (None, 0, 0)  # the smoothing width in force, the iteration it began, the previous one's length
        self.put_off = 0  # due certificates put off in a row (settling)
        # rollback safeguard (solvers that promise descent, on problems with working sets)
        self.guarded = solver.monotone and any(t.uses_working_set for t in terms)
        self.prev = None  # (Z, state, objective) at the last chunk's start
        self.rejections, self.total_rejections, self.state_iters = 0, 0, 0
        self.callback_time, self.callback_calls, self.stopped = 0.0, 0, None  # stopped: (V, it) a callback chose
        self.last_probe = None  # factor geometry: the state refreshed at the last re-check (see probe)
        self.current = None  # (objective, V, iteration) at the last re-check

    def objective(self, actives: Any) -> Any:
        """The loop's :class:`~.loop.Objective` over the active sets ``actives`` (outside the jitted loop).

        Parameters
        ----------
        actives : sequence
            Per term, its device active set or ``None``.

        Returns
        -------
        Objective
            ``objective(Z, s) -> (value, exact_value, gradient)``.
        """
        from .loop import Objective

        return Objective(self.term_classes, self.data, tuple(actives), self.geometry, self.gdata, self.roles,
                         self.composite)

    def project(self, Z: Any) -> Any:
        """The projection onto the loop's feasible set (with a constraint term's set, :mod:`.prox`).

        Parameters
        ----------
        Z : jax.Array
            The solver's matrix.

        Returns
        -------
        jax.Array
            Its projection.
        """
        if not self.composite:
            return self.geometry.project(Z)
        from .loop import evaluate_project

        return evaluate_project(self.term_classes, self.geometry, self.data, Z, composite=self.composite)

    # ------------------------------------------------------------------ the loop
    def run(self) -> Solution:
        """Run the solve: re-checks (active sets, certificate or stationarity, callback, stop policy) alternating
        with jitted chunks of iterations, within the time limit.

        Returns
        -------
        Solution
            :func:`solution` for a certified problem, else :func:`factor_solution`.

        Raises
        ------
        InputError
            When the callback returns something other than ``True``, ``False`` or ``None``.
        """
        with self.budget.running():
            return self._run()

    def _run(self):
        report = None
        while True:
            V = self.setup.to_point(self.Z)
            report = self.out_of_time()
            if report is not None:
                break
            tr = time.perf_counter()
            counted = isinstance(self.problem, TripletProblem)
            searches = self.problem.searches if counted else None
            actives, sizes, obj, new_viol, exploded = self.recheck(V)
            self.recheck_time = time.perf_counter() - tr
            # a search stopped early on an exploding set measures less than a search; so does a re-check that a
            # kept search answered (LMNN's find_triplets): the estimate stays the last full search's
            searched = not counted or self.problem.searches != searches
            if not exploded and searched:
                self.search_seconds = self.recheck_time
            if not exploded:
                self.active_size = sizes
            if (self.factor or not self.certifiable) and not exploded:
                self.last_probe = self.probe(actives)
            if self.rolled_back(exploded, obj):
                continue
            self.rejections = 0
            if not np.isfinite(obj) or not np.all(np.isfinite(self.Z)):
                report = SolverReport(Outcome.FAILED, f"non-finite objective or metric at iteration {self.it}")
                break
            # constrained problems (hard-margin POLA) keep the last iterate; the others the best one seen
            if self.best is None or obj < self.best[0] or self.problem.constraints:
                self.best = (obj, V, self.it)
            self.current = (obj, V, self.it)
            now = time.perf_counter()
            done = self.it >= self.opts.max_iter or self.budget.expired(now)
            entry = {"iteration": self.it, "time": now - self.t0, "objective": obj, "active_set": sizes,
                     "new_violators": new_viol, "smoothing": float(self.state["s"]) if self.smoothed else 0.0,
                     "rel_gap": None}
            if self.it > 0:
                entry.update(self.solver.diagnostics(self.state))
            stationary = self.measure(V, entry, actives, now, done)
            self.history.append(entry)
            stop_requested = self.notify(V, entry)
            report = self.stop_reason(entry, stationary, stop_requested, done)
            if report is not None:
                if report.kind is Outcome.STOPPED:
                    self.stopped = (V, self.it)
                break
            report = self.step(actives, new_viol, obj)
            if report is not None:
                break
        if self.factor or not self.certifiable:
            return factor_solution(self, report)
        return solution(self, report)

    # ------------------------------------------------------------------ the time limit
    @property
    def search_estimate(self) -> float:
        """The seconds a search of all triplets is expected to take: :data:`ESTIMATE_MARGIN` times the last
        measured (the start's scale search, or before any the a-priori :func:`search_prior`)."""
        return ESTIMATE_MARGIN * self.search_seconds

    def limit_text(self) -> str:
        """``"time limit Xs"``, or the enclosing solve's deadline (for messages).

        Returns
        -------
        str
            The text.
        """
        return ("the enclosing solve's deadline" if self.opts.time_limit is None
                else f"time limit {self.opts.time_limit:g}s")

    def out_of_time(self) -> SolverReport | None:
        """Under a time limit, before a re-check (a search of all triplets, which no limit interrupts): the
        ``time_limit`` report when it would not end in time, else ``None``. After the first re-check it must end
        by the budget's ``certify_by`` (the iterate it would evaluate is dropped, the best re-checked one
        returned); the first must end by the hard deadline (else the start is returned unevaluated).

        Returns
        -------
        SolverReport or None
            The report when the re-check is not started.
        """
        budget = self.budget
        if not budget.limited:
            return None
        est = self.search_estimate
        if self.best is None:
            if budget.fits(est, by=budget.hard):
                return None
            return SolverReport(Outcome.TIME_LIMIT, (
                f"{self.limit_text()}: a search of all triplets (about {est:.2g} s) would end past the promised "
                f"time; the start is returned unevaluated"))
        if budget.fits(est, by=budget.certify_by):
            return None
        return SolverReport(Outcome.TIME_LIMIT, (
            f"{self.limit_text()} reached after {self.it} iterations (the last chunk's iterate not re-checked: a "
            f"search of all triplets, about {est:.2g} s, would end past the deadline)"))

    def chunk_seconds(self, actives: Any) -> tuple[float, float, bool]:
        """The estimated cost of a chunk on ``actives``: ``(seconds per iteration, compilation, cold)``, from the
        last chunk's rate (a-priori :data:`ITERATION_SECONDS_PER_UNIT`; times :data:`ESTIMATE_MARGIN`) and, where the loop is not compiled for
        these capacities in this process (``cold``), the longest compilation measured (a-priori
        :data:`COMPILE_SECONDS`). On a GPU or TPU the a-priori rate is :data:`ITERATION_SECONDS_PER_UNIT_ACCELERATOR`.

        Parameters
        ----------
        actives : sequence
            The re-checked active sets.

        Returns
        -------
        tuple
            ``(rate, compile, cold)``.
        """
        cold = _loop_key(self, actives) not in _COMPILED
        compile_s = (max(_COMPILE_SECONDS) if _COMPILE_SECONDS else COMPILE_SECONDS) if cold else 0.0
        if self.chunk_rate is not None:
            return ESTIMATE_MARGIN * self.chunk_rate, compile_s, cold
        cap = sum(int(a["mask"].shape[0]) for a in actives if a is not None)
        d = float(self.problem.d)
        unit = ITERATION_SECONDS_PER_UNIT if self.platform == "cpu" else ITERATION_SECONDS_PER_UNIT_ACCELERATOR
        return ESTIMATE_MARGIN * unit * max(cap, 1) * d * d, compile_s, cold

    # ------------------------------------------------------------------ re-check
    def recheck(self, V: dict) -> tuple[list, int, float, int, bool]:
        """Rebuild the active sets at ``V["M"]`` (every triplet searched, :meth:`ActiveSets.rebuild`) and evaluate
        the exact objective. Returns ``(actives, sizes, objective, new violators, exploded)``.

        Parameters
        ----------
        V : dict
            The point (numpy).

        Returns
        -------
        tuple
            ``(actives, sizes, objective, new violators, exploded)`` as :meth:`ActiveSets.rebuild`, the objective
            now the problem's exact one (the other terms added) unless ``exploded``.
        """
        from . import memory

        guard = self.guarded and self.prev is not None and self.rejections < MAX_REJECTIONS
        while True:
            width = max(self.opts.margin, float(self.state["s"]))
            if self.it == 0 and self.active_at is not None:  # the start's estimate: no search that would fail
                limit = memory.triplet_limit(self.problem)
                if limit is not None and self.active_at(width) > limit and self.narrow_start(width, estimated=True):
                    continue
            try:
                actives, sizes, obj, new_viol, exploded = self.active_sets.rebuild(V["M"], width, self.it, guard)
                break
            except memory.TooManyTriplets:
                if not self.narrow_start(width):
                    raise
        if exploded:
            return actives, sizes, obj, new_viol, True
        # the problem's own objective (terms outside the loop's view, e.g. hard-margin POLA's carrier, excluded)
        obj += sum(t.value(self.problem, V) for t in self.problem.terms if not t.uses_working_set)
        return actives, sizes, obj, new_viol, False

    def narrow_start(self, width: float, estimated: bool = False) -> bool:
        """Before the first iteration, a search that found more active triplets than the memory holds is retried at
        a narrower smoothing width: the width shrinks as continuation would shrink it (:data:`.solvers.SMOOTHING_DECREASE`,
        down to the solver's ``s_min``), so the loop starts one or more widths further along instead of refusing
        the solve (60,000 x 164 from the scaled identity: 10.3 million triplets within 0.5, 1.6 million within
        0.125, by a sample's estimate). Where the start's scale came from a sample of the triplets
        (:func:`.backend.best_scale`), its estimate narrows the width before any search. Returns whether the width
        shrank (else the solve is refused).

        Parameters
        ----------
        width : float
            The width of the search that was stopped (or estimated too wide).
        estimated : bool, default False
            Whether the sample's estimate, not a search, found the set too large.

        Returns
        -------
        bool
            Whether a narrower search is worth trying.
        """
        import jax
        import jax.numpy as jnp

        from .solvers import SMOOTHING_DECREASE

        s = float(self.state["s"])
        s_new = max(s * SMOOTHING_DECREASE, self.solver.s_min)
        if self.it > 0 or not self.smoothed or max(self.opts.margin, s_new) >= width:
            return False
        old = self.state["s"]
        self.state = {**self.state, "s": jax.device_put(jnp.asarray(s_new, old.dtype), old.sharding)}
        if self.opts.verbose:
            what = "a sample estimates" if estimated else "the search found"
            print(f"[metricopt jax/{self.solver.name}] at width {width:g} {what} more active triplets than the memory "
                  f"holds: the start's smoothing width narrows to {s_new:g}", flush=True)
        return True

    def rolled_back(self, exploded: bool, obj: float) -> bool:
        """The safeguard: a chunk steps on the active set's model of the objective; where it left the
        region where that model holds (the active set exploded, or the true objective rose by half), roll
        back to the chunk's start with ten times smaller steps and a re-check after every iteration.

        Parameters
        ----------
        exploded : bool
            Whether the re-check's search stopped on an exploding active set.
        obj : float
            The exact objective at the re-check.

        Returns
        -------
        bool
            Whether the chunk was rolled back.
        """
        guard = self.guarded and self.prev is not None and self.rejections < MAX_REJECTIONS
        if not (guard and (exploded or obj - self.prev[2] > BLOWUP * abs(self.prev[2]) or self.rose())):
            return False
        self.rejections += 1
        self.total_rejections += 1
        self.Z, st_prev, _ = self.prev
        import jax.numpy as jnp

        # the counter as the loop returns it (int32): a Python int is a weak int64 for jit, a new compilation of the
        # loop for every capacity bucket a rolled-back solve goes through (synthetic 20,000 x 50: 10 compilations
        # of the loop where 3 buckets were used)
        iterations = jnp.asarray(self.state_iters, dtype=self.state["iterations"].dtype)
        self.state = {**self.solver.shorten(st_prev, self.state, 10.0), "iterations": iterations}
        self.active_sets.restore_sizes()
        self.interval = 1
        if self.opts.verbose:
            print(f"[metricopt jax/{self.solver.name}] iter {self.it:6d}  step rejected (the active set's model "
                  "failed); rolled back with 10x smaller steps", flush=True)
        return True

    def probe(self, actives: Any) -> dict:
        """The solver's state refreshed on the re-checked active sets, no iteration: the smoothed objective
        and gradient over every triplet that counts at the current width (factor geometry).

        Parameters
        ----------
        actives : sequence
            Per term, its device active set or ``None``.

        Returns
        -------
        dict
            The refreshed solver state.
        """
        import jax.numpy as jnp

        from .loop import run_chunk

        return run_chunk(self.solver, self.term_classes, self.geometry, self.data, self.gdata, tuple(actives),
                         self.state, jnp.asarray(0, jnp.int32), self.roles, self.composite)

    def rose(self) -> bool:
        """Factor geometry (non-convex, steps of any length): whether the last chunk raised the smoothed
        objective over *all* triplets (its steps were accepted on the active set's model, which a step can
        leave: a triplet outside the set becomes active), comparing at the same width the value at the
        chunk's start (``f_start``, over the complete set of the re-check before it) with the value now.

        Returns
        -------
        bool
            Whether it rose (always ``False`` off the factor geometry or before the first probe).
        """
        if not self.factor or self.last_probe is None:
            return False
        start, now = float(self.state["f_start"]), float(self.last_probe["f"])
        return now > start + 1e-12 * abs(start)

    # ------------------------------------------------------------------ certificate or stationarity
    def certify_point(self, V: dict, final: bool = False) -> Any:
        """The certificate of ``V``; under a ``time_limit`` its conic programs stop by the budget's ``certify_by``
        (``final``: it ends the solve) or after :data:`MID_CERTIFY_SHARE` of the seconds left.

        Parameters
        ----------
        V : dict
            The point (``"M"`` and the extra variables).
        final : bool, optional
            Whether the certificate ends the solve (then LMNN's wide restricted dual is tried too).

        Returns
        -------
        Certificate
            :func:`metricopt.certify` of ``V`` at ``tol``.

        Raises
        ------
        NotCertifiableError
            When a term's program needs cones the generic bound does not handle.
        """
        from ...certify import certify
        from ...certify.triplets import narrow_only, ramp_hint

        tc = time.perf_counter()
        at = None
        if self.budget.limited:
            at = self.budget.certify_by if final else tc + MID_CERTIFY_SHARE * max(self.budget.left(tc), 0.0)
        # the ramp dual points at the smoothing width the iterate was computed at (s, or 4 s just before a decrease)
        s = float(self.state["s"]) if self.smoothed and "s" in self.state else 0.0
        with deadline(at), (contextlib.nullcontext() if final else narrow_only()), ramp_hint(s, 2 * s, 4 * s):
            # before the last certificate, LMNN's wide restricted dual is skipped: it rarely certifies earlier
            # and its cost spaces the certificates out (digits PCA-30 at tol 1e-6: 26 s without, 33 s with it)
            cert = certify(self.problem, V["M"], tol=self.opts.tol, **{k: V[k] for k in self.extras})
        self.certs.took(tc, active=self.active_size)
        return self.certs.with_best_lower(cert, self.it)

    def measure(self, V: dict, entry: dict, actives: Any, now: float, done: bool) -> bool:
        """Convex problems: the certificate when one is due (every ``certify_every`` iterations, more
        sparsely later on: a deterministic schedule, so that a solve is reproducible, unless
        ``timed_spacing`` (``deterministic=False``, or "auto" on a large problem) also spaces expensive
        certificates by wall-clock time; always before giving up). Factor geometry: the relative gradient
        norm at the current smoothing. Returns whether a non-convex iterate is stationary within ``tol``.

        Parameters
        ----------
        V : dict
            The point.
        entry : dict
            The re-check's history entry (``rel_gap``, ``stationarity``, ``first_order``, ``certify_time`` set).
        actives : sequence
            The re-checked active sets.
        now : float
            The time (:func:`time.perf_counter`).
        done : bool
            Whether the solve ends at this re-check (a certificate is then taken).

        Returns
        -------
        bool
            Whether the iterate is stationary (factor geometry) or first-order optimal (no certificate) within
            ``tol``; ``False`` for a certified problem.
        """
        if not self.certifiable:
            return self.first_order(entry)
        if self.factor:
            probe = self.last_probe
            gnorm = float(probe["grad_norm"]) if "grad_norm" in probe else float("inf")
            rel = gnorm * float(np.linalg.norm(self.Z)) / max(abs(float(probe["f"])), 1e-300)
            entry["stationarity"] = rel
            entry["certify_time"] = 0.0
            at_min_width = not self.smoothed or float(self.state["s"]) <= self.solver.s_min * (1 + 1e-9)
            return at_min_width and rel <= self.opts.tol
        settling = self.settling()  # called at every re-check: it follows the width's changes
        due = self.certs.due(self.it, now, active=entry["active_set"], interval=self.interval)
        slow = self.certs.expected(entry["active_set"], last=True) > CERTIFY_SLOW  # a cheap one is taken, settling or not
        if due and settling and slow and self.certs.timed_spacing and self.put_off < MAX_PUT_OFF:
            due, self.put_off = False, self.put_off + 1  # a few in a row at most: then the due one is computed
        elif due:
            self.put_off = 0
        budget = self.budget
        if done and budget.limited and self.best is not None and self.best[1] is not V:
            due = False  # out of time: only the returned (best) iterate is certified, by solution()
        elif done:
            due = True
        due = due or self.online  # the online solver certifies at every re-check
        if due and budget.limited:
            # a certificate's dual is not interrupted: skipped when it would end past the promised time (one that ends
            # past the soft deadline is the last: no chunk follows it; solution() returns the best certified iterate)
            est = self.certs.estimate(self.search_estimate, entry["active_set"], self.problem.d, kept=True,
                                      final=done)
            due = budget.fits(est, by=budget.hard)
        if due:
            from ...errors import NotCertifiableError

            try:
                cert = self.certify_point(V, final=done)
            except NotCertifiableError:  # a term's compiled program needs cones the generic bound does not handle
                self.certifiable = False
                return self.first_order(entry)
            self.certs.record(cert, V, self.it, objective=entry["objective"])
            entry["rel_gap"] = cert.rel_gap
        entry["certify_time"] = self.certs.time
        return False

    def settling(self) -> bool:
        """Whether the smoothing width changed less than :data:`SETTLE_SHARE` of the previous width's iterations ago:
        a certificate is then put off. Its bound comes from the ramp dual points of the iterate's width, which are
        near dual feasible at an optimum of the smoothed problem. An iterate moved a few iterations towards the next
        width's optimum is near neither. On MNIST-5k, PCA 164, the certificates just after a decrease gave 1.3e-3
        and 1.2e-3, where the middle of a width gave 6.4e-4 and 5.1e-4 (certified at iteration 490 in 109 s instead of
        1,050 in 202 s). Only with the timed certificate spacing of large problems, after a certificate that took
        more than :data:`CERTIFY_SLOW` (a cheap one costs less than the iterations a put-off one adds: letter, 0.2 s
        certificates, certified at iteration 190 instead of 264), and at most :data:`MAX_PUT_OFF` in a row (a problem
        whose width shrinks at every re-check would otherwise put off every one); the final certificate is never put
        off.

        Returns
        -------
        bool
            Whether the iterate is settling into a new width.
        """
        width = float(self.state["s"]) if self.smoothed and "s" in self.state else 0.0
        current, began, previous = self.phase
        if width != current:
            self.phase = (width, self.it, self.it - began if current is not None else 0)
            current, began, previous = self.phase
        return self.it - began < SETTLE_SHARE * previous

    def first_order(self, entry: dict) -> bool:
        """A convex problem no certificate covers (a term without a dual piece): the relative projected-gradient
        step ``||Z - P(Z - a G)|| / ||Z||`` with ``a = ||Z|| / ||G||`` (zero exactly at a minimiser of a convex
        problem), at the last width of the smoothing; with composite terms (:mod:`.prox`) the proximal-gradient
        step ``||Z - prox_{a g}(Z - a G)|| / ||Z||``, ``G`` the smooth part's gradient
        (:func:`.loop.prox_gradient_step`). Returns whether it is at most ``tol``.

        Parameters
        ----------
        entry : dict
            The re-check's history entry (``first_order`` and ``certify_time`` set).

        Returns
        -------
        bool
            Whether the measure is at most ``tol`` at the smallest smoothing width.
        """
        import jax.numpy as jnp

        if self.composite:
            from .loop import prox_gradient_step

            actives = self.active_sets.device_actives()
            rel = float(prox_gradient_step(self.term_classes, self.geometry, self.data, self.gdata, actives,
                                           jnp.asarray(self.Z), self.state["s"], roles=self.roles,
                                           composite=self.composite))
            entry["first_order"] = rel
            entry["certify_time"] = 0.0
            at_min_width = not self.smoothed or float(self.state["s"]) <= self.solver.s_min * (1 + 1e-9)
            return at_min_width and rel <= self.opts.tol
        probe = self.last_probe
        Z, G = jnp.asarray(self.Z), self.gradient(probe)
        zn, gn = float(jnp.linalg.norm(Z)), float(jnp.linalg.norm(G))
        step = zn / max(gn, 1e-300)
        rel = 0.0 if gn == 0.0 else float(jnp.linalg.norm(Z - self.geometry.project(Z - step * G))) / max(zn, 1e-300)
        entry["first_order"] = rel
        entry["certify_time"] = 0.0
        at_min_width = not self.smoothed or float(self.state["s"]) <= self.solver.s_min * (1 + 1e-9)
        return at_min_width and rel <= self.opts.tol

    def gradient(self, probe: dict) -> Any:
        """The objective's gradient at the solver's point (from the refreshed state, or evaluated).

        Parameters
        ----------
        probe : dict
            The refreshed solver state (:meth:`probe`).

        Returns
        -------
        jax.Array
            The gradient in ``Z``.
        """
        if "g" in probe:
            return probe["g"]
        import jax.numpy as jnp

        return self.objective(self.active_sets.device_actives())(jnp.asarray(self.Z), self.state["s"])[2]

    # ------------------------------------------------------------------ reporting
    def notify(self, V: dict, entry: dict) -> bool:
        """The verbose line and the caller's callback (which sees the re-checked and possibly certified
        iterate); returns whether the callback asked to stop.

        Parameters
        ----------
        V : dict
            The point.
        entry : dict
            The re-check's history entry (passed to the callback with ``M``, ``certificate``, ``variables``).

        Returns
        -------
        bool
            Whether the callback returned ``True``.

        Raises
        ------
        InputError
            When the callback returns something other than ``True``, ``False`` or ``None``.
        """
        opts, it = self.opts, self.it
        if opts.verbose:
            gap = "" if entry["rel_gap"] is None else f"{entry['rel_gap']:.3e}"
            unit = "pass" if self.online else "iter"
            print(f"[metricopt jax/{self.solver.name}] {unit} {it:6d}  objective {entry['objective']:.10g}  "
                  f"certified gap {gap:>10s}  active {entry['active_set']:7d}  {entry['time']:.2f}s"
                  + "".join(f"  {k} {v:.3g}" for k, v in self.solver.diagnostics(self.state).items() if it > 0),
                  flush=True)
        if opts.callback is None:
            return False
        info = {**entry, "M": np.array(V["M"], dtype=np.float64, copy=True),
                "certificate": self.certs.cert if entry["rel_gap"] is not None else None,
                "variables": {k: V[k] for k in self.extras}}
        tc = time.perf_counter()
        answer = opts.callback(info)
        self.callback_time += time.perf_counter() - tc
        self.callback_calls += 1
        if answer is not None and not isinstance(answer, (bool, np.bool_)):
            raise InputError(
                f"callback must return True (stop at this iterate), False or None (go on); it returned "
                f"{type(answer).__name__} at iteration {it}."
            )
        return bool(answer)

    def stop_reason(self, entry: dict, stationary: bool, stop_requested: bool, done: bool) -> SolverReport | None:
        """The stop policy (:func:`stop_reason`) at this re-check.

        Parameters
        ----------
        entry : dict
            The re-check's history entry.
        stationary : bool
            Whether the iterate is stationary or first-order optimal within ``tol``.
        stop_requested : bool
            Whether the callback asked to stop.
        done : bool
            Whether ``max_iter`` or the time limit is reached.

        Returns
        -------
        SolverReport or None
            The report when the solve stops here.
        """
        return stop_reason(entry, self.certs.cert, stationary, stop_requested, done, it=self.it, opts=self.opts,
                           certifiable=self.certifiable, online=self.online)

    # ------------------------------------------------------------------ one chunk
    def step(self, actives: Any, new_viol: int, obj: float) -> SolverReport | None:
        """One jitted chunk of iterations (online: one pass over the pairs per iteration), after the
        re-check interval's update and the solver's own step between chunks (FISTA: the smoothing
        continuation). Returns the :class:`~metricopt.certify.policy.SolverReport` when the iterates stalled, else
        ``None``.

        Parameters
        ----------
        actives : sequence
            The re-checked active sets.
        new_viol : int
            New violated triplets at the re-check (none: the re-check interval doubles, adaptive solvers).
        obj : float
            The exact objective at the chunk's start (kept for the rollback safeguard).

        Returns
        -------
        SolverReport or None
            The report when the iterates stalled for :data:`STALL_CHUNKS` chunks.
        """
        import jax.numpy as jnp

        from .loop import run_chunk

        opts, solver = self.opts, self.solver
        # the re-check interval is lengthened while re-checks find no new violated triplet
        if solver.adaptive_checks:
            self.interval = (opts.check_every if new_viol
                             else min(2 * self.interval, MAX_CHECK_FACTOR * opts.check_every))
        if self.it > 0:
            self.state = solver.between_chunks(self.state, self.smoothed)
        steps = 1 if self.online else min(self.interval, opts.max_iter - self.it)
        left = self.budget.left()
        rate, compile_s, cold = self.chunk_seconds(actives)
        if left is not None:
            # a time limit: no longer a chunk than the seconds left (less the next re-check) hold at the last rate,
            # at least one iteration; the compilation of the loop where it is not compiled for these capacities (a
            # one-off), and that one iteration, may take the first half of the slack (until the budget's
            # certify_by), the closing certificate keeps the rest; else no chunk (the solve stops here, at the
            # re-checked iterate)
            fit = max(1, int((left - self.search_estimate) / max(rate, 1e-12)))
            if left <= 0.0 or not self.budget.fits(compile_s + min(steps, fit) * rate + self.search_estimate,
                                                   by=self.budget.certify_by):
                return SolverReport(Outcome.TIME_LIMIT, (
                    f"{self.limit_text()} reached after {self.it} iterations (no further chunk fits: "
                    f"{self.search_estimate:.2g} s for its re-check, {compile_s:.2g} s to compile the loop, "
                    f"{rate:.2g} s per iteration)"))
            steps = max(1, min(steps, fit))
        Z_prev = self.Z
        self.prev = (self.Z, self.state, obj)
        self.active_sets.save_sizes()
        tc = time.perf_counter()
        self.state = run_chunk(solver, self.term_classes, self.geometry, self.data, self.gdata, tuple(actives),
                               self.state, jnp.asarray(steps, jnp.int32), self.roles, self.composite)
        self.Z = np.array(self.state["M"], dtype=np.float64)
        took = time.perf_counter() - tc
        if cold:
            _COMPILED.add(_loop_key(self, actives))
            if self.chunk_rate is not None:  # the compilation: the chunk less its iterations at the last rate
                _COMPILE_SECONDS.append(max(took - steps * self.chunk_rate, 0.0))
            else:  # a first chunk: its rate includes the compilation until a compiled chunk measures it
                self.chunk_rate, self.first_chunk = took / steps, (took, steps)
                if not _COMPILE_SECONDS:
                    _COMPILE_SECONDS.append(took)  # an over-estimate until then
        else:
            self.chunk_rate = took / steps
            if self.first_chunk is not None:  # now the first chunk's compilation is known
                first, n_first = self.first_chunk
                _COMPILE_SECONDS.append(max(first - n_first * self.chunk_rate, 0.0))
                self.first_chunk = None
        self.it = self.state_iters = int(self.state["iterations"])
        self.unchanged = self.unchanged + 1 if np.array_equal(self.Z, Z_prev) else 0
        if self.unchanged < STALL_CHUNKS:
            return None
        if self.factor:
            return SolverReport(Outcome.ITERATION_LIMIT, (
                f"the iterates stalled at iteration {self.it} (relative gradient norm "
                f"{self.history[-1].get('stationarity', float('nan')):.2e} > tol {opts.tol:.1e}): not shown stationary"))
        message = f"the iterates stalled at iteration {self.it}"
        if self.online:
            message = (f"the online algorithm made no update in pass {self.it}: every pair meets its margin; an online "
                       "learner stops at a feasible point, not at the batch optimum (use solver='fista' or the "
                       "exact backend for that)")
        if not self.certifiable:
            return SolverReport(Outcome.ITERATION_LIMIT, (f"{message} (relative projected-gradient step "
                                                          f"{self.history[-1].get('first_order', float('nan')):.2e} "
                                                          f"> tol {opts.tol:.1e}; no certificate exists for this "
                                                          "problem's terms)"))
        # certify the last iterate before stopping (under a time limit: when its search and dual fit)
        V = self.setup.to_point(self.Z)
        if self.budget.fits(self.certs.estimate(self.search_estimate, self.active_size, self.problem.d, kept=False,
                                         final=True), by=self.budget.hard):
            self.certs.record(self.certify_point(V, final=True), V, self.it)
        return SolverReport(Outcome.INACCURATE, message)


# ---------------------------------------------------------------------- results
def solution(run: Run, report: SolverReport) -> Solution:
    """A certified optimum, the iterate a callback stopped at, else the best iterate seen at a re-check
    (certified); the status from :func:`~metricopt.certify.policy.decide`.

    Parameters
    ----------
    run : Run
        The finished solve.
    report : SolverReport
        Why it stopped.

    Returns
    -------
    Solution
        The iterate with its certificate, status and statistics.
    """
    message, missing = report.reason, NoCertificate.NOT_TAKEN
    budget = run.budget
    known = None  # the returned point's exact objective where a re-check measured it
    if report.kind is Outcome.CONVERGED or run.best is None:
        V_out, it_out = run.certs.V, run.certs.it
        if V_out is None and run.best is None and report.kind is Outcome.TIME_LIMIT:
            V_out, it_out = run.setup.to_point(run.Z), run.it  # no search fitted: the start, unevaluated
            known, missing = float("nan"), NoCertificate.OUT_OF_TIME
        elif run.certs.best is not None and V_out is run.certs.best[1]:
            known = run.certs.best[0]
    else:
        V_out, it_out = run.stopped if report.kind is Outcome.STOPPED else run.best[1:]
        known = None if report.kind is Outcome.STOPPED else run.best[0]
        cert = run.certs.certified(V_out)
        if cert is not None:
            run.certs.cert = cert
        else:
            est = run.certs.estimate(run.search_estimate, run.active_size, run.problem.d,
                                     kept=run.current is not None and V_out is run.current[1], final=True)
            if budget.limited and not budget.fits(est, by=budget.hard):
                # its certificate (a search of all triplets unless it was the last re-checked, and the dual) would
                # end past the promised time: skipped; the best certified iterate is returned instead, if any
                skipped = (f"certificate skipped for the best iterate (iteration {it_out}): the time limit leaves "
                           f"less than it takes (about {est:.2g} s)")
                fallback = run.certs.best
                worse = (None if fallback is None or known is None else
                         (fallback[0] - known) / max(abs(known), 1e-300))
                if fallback is not None and worse is not None and worse <= FALLBACK_WORSE:
                    known, V_out, it_out, run.certs.cert = fallback
                    message += f"; {skipped}; returned the best certified iterate (iteration {it_out})"
                else:
                    run.certs.cert, missing = None, NoCertificate.OUT_OF_TIME
                    message += f"; {skipped}"
                    if fallback is not None:
                        message += (f"; returned uncertified: the best certified iterate (iteration {fallback[2]}, "
                                    f"lower bound {fallback[3].lower:.10g}) is worse by {worse:.2g} relative")
            else:
                run.certs.cert = run.certify_point(V_out, final=True)
        run.certs.V, run.certs.it = V_out, it_out
    status, note = policy.decide(report, missing if run.certs.cert is None else run.certs.cert, convex=True)
    if note:
        message += f"; {note}"
    name, state, cert = run.solver.name, run.state, run.certs.cert
    if V_out is None:
        return Solution(M=None, objective=float("nan"), status=status, backend="jax", solver=name,
                        stats={"time": time.perf_counter() - run.t0, "iterations": run.it,
                               "history": run.history},
                        message=f"{status.message} ({message})")
    if cert is not None:
        message += f"; certified relative gap {cert.rel_gap:.2e}"
        if cert.verdict is Verdict.INFEASIBLE:
            message += f" (the iterate is infeasible: {cert.details.get('reason', '')})"
    stats = {
        "time": time.perf_counter() - run.t0,
        "iterations": run.it,
        "best_iteration": it_out,
        "evaluations": int(state["evals"]),
        "certificate_rel_gap": None if cert is None else cert.rel_gap,
        "certify_time": run.certs.time,
        "certify_calls": run.certs.calls,
        "active_set_size": run.history[-1]["active_set"] if run.history else 0,
        "history": run.history,
        "dtype": run.dtype,
        "device": str(next(iter(state["M"].devices()))),
        "devices": run.n_dev,  # devices the triplets were sharded over
        "solver_objective": float(state["fx"]),  # the loop's own value at its last iterate (active set)
    }
    if run.opts.callback is not None:
        stats["callback_time"] = run.callback_time
        stats["callback_calls"] = run.callback_calls
    if run.smoothed:
        stats["smoothing"] = float(state["s"])
    if run.guarded:
        stats["rollbacks"] = run.total_rejections
    if "restarts" in state:
        stats["restarts"] = int(state["restarts"])
    variables = {k: V_out[k] for k in run.extras}
    if known is None or not budget.limited or budget.fits(run.search_estimate, by=budget.hard):
        objective = float(run.problem.objective(V_out["M"], **variables))
    else:  # out of time for another search of all triplets: the value its re-check measured
        objective = known
    return Solution(M=V_out["M"], objective=objective,
                    status=status, backend="jax", solver=name, stats=stats,
                    message=f"{status.message} ({message})", certificate=cert, variables=variables)

def factor_solution(run: Run, report: SolverReport) -> Solution:
    """The Solution of a non-convex (factor geometry) solve, or of a convex one no certificate covers: the
    iterate shown stationary (first-order optimal), else the best iterate seen at a re-check, ``M = L^T L`` with
    its ``(r, d)`` factor, no certificate, never ``optimal``.

    Parameters
    ----------
    run : Run
        The finished solve.
    report : SolverReport
        Why it stopped.

    Returns
    -------
    Solution
        The iterate (``M`` and ``L``), its status and statistics.
    """
    message = report.reason
    if run.best is None:  # no search of all triplets fitted in the time limit: the start, unevaluated
        obj, V, it_out = float("nan"), run.setup.to_point(run.Z), run.it
    else:
        obj, V, it_out = run.current if report.kind in (Outcome.STATIONARY, Outcome.CONVERGED) else run.best
    status, note = policy.decide(report, NoCertificate.NOT_TAKEN, convex=run.problem.is_convex)
    if note:
        message += f"; {note}"
    state, history = run.state, run.history
    stats = {"time": time.perf_counter() - run.t0, "iterations": int(state["iterations"]),
             "best_iteration": it_out, "evaluations": int(state["evals"]), "history": history,
             "stationarity": history[-1].get("stationarity") if history else None,
             "active_set_size": history[-1]["active_set"] if history else 0, "smoothing": float(state["s"]),
             "solver_objective": float(state["fx"]), "rank": run.setup.declared.rank,
             "first_order": history[-1].get("first_order") if history else None}
    budget = run.budget
    if run.best is not None and (not budget.limited or budget.fits(run.search_estimate, by=budget.hard)):
        obj = float(run.problem.objective(V["M"]))
    # else: out of time for another search of all triplets, the value its re-check measured (or NaN: unevaluated)
    return Solution(M=V["M"], L=V.get("L"), objective=obj, status=status,
                    backend="jax", solver=run.solver.name, stats=stats, message=f"{status.message} ({message})")
