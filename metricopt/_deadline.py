"""Wall-clock budgets for ``time_limit``: the promise and the deadlines that keep it.

A solve given ``time_limit=L`` seconds returns within :func:`hard_limit` ``(L) = max(1.1 L, L + 5 s)`` of its
start, whatever the problem and backend, with status ``time_limit`` (or ``optimal`` where the returned iterate's
certificate proves it) and the best certified iterate reached. It works to two deadlines (a :class:`Budget`):

* the **soft** deadline ``t0 + L``: no new round, chunk, re-check or convex step starts after it (nor before it
  when its estimated cost would end past it), and the conic solvers (SCS's ``time_limit_secs``, Clarabel's
  ``time_limit``) are told to stop by it;
* the **hard** deadline ``t0 + hard_limit(L)``: the promise. Between the two lies the slack for what ends a
  solve: the closing certificate (its conic programs, the "restricted dual", may run until
  :meth:`Budget.certify_by`, a :data:`CERTIFY_SHARE` of the slack after the soft deadline), the exact
  objective, a conic solver's overrun of its own limit (SCS checks it between iterations and not during its
  set-up, Clarabel between interior-point iterations), and the error of the estimates below.

Deadlines nest through a context variable (:func:`deadline`): a time-limited solve run inside another
(a CCCP step, a pass of multi-pass LMNN, the exact backend's first-order start) never gets past the
enclosing one, and the certificate's conic programs read it (:func:`conic_seconds`,
:func:`metricopt.certify._dual.solve_small`). Without a ``time_limit`` nothing is set and nothing changes.

What no limit interrupts is **estimated before it starts and not started when it would end past its deadline**
(:meth:`Budget.fits`): each piece's cost is its last measured run in this solve, or before any, an a-priori
model from the problem's size. On the exact backend: CVXPY's compilation and a conic solver's set-up
(:data:`CONIC_SECONDS_PER_SCALAR`, the backend's ``COMPILE_SECONDS_PER_SCALAR``; in round 1 the start comes back
unsolved) and the search of all triplets (for violators after a round, and the one that certifies or evaluates the
round's point: each round's solver stops that long before the hard deadline, and no round starts without that
time). On the JAX backend
(:mod:`metricopt.backends.jax.driver`): the search of all triplets (the start's scale search, every re-check, the
certificate of an iterate other than the last re-checked one; a priori ``SEARCH_SECONDS_PER_UNIT`` x n^2 d), a
jitted chunk (shortened to the time left at the last chunk's rate, a priori ``ITERATION_SECONDS_PER_UNIT`` x
active capacity x d^2) and the compilation of the loop for a new active-set capacity bucket (the most measured in
the process, a priori ``COMPILE_SECONDS``), and a certificate's dual (its last measured run, a priori from the
active set). Estimates carry a margin (``ESTIMATE_MARGIN``, the exact backend's ``SEARCH_MARGIN``: 1.5) for a
loaded machine's changing speed; the start's scale search is also stopped between the blocks of a search. A
certificate that would overrun is skipped: the solve returns the best certified iterate so far, and says so; when
not even the first search of all triplets fits, the start comes back unevaluated. JAX's import and the compilation
of its first loop in a process are estimated, not bounded: measured on 2 loaded cores
(``tests/test_reliability_time_limit.py``, ``tests/test_time_wall.py``), they fit the 5 s of slack. What is not
bounded either: a search that explodes (far more active triplets than the last one found, which the rollback
safeguard's limit stops only on the NumPy search), and work outside the solve (building the problem: its target
neighbours).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Iterator

#: the promised wall time of a solve with ``time_limit=L``: ``max(SLACK_FACTOR * L, L + SLACK_SECONDS)``
SLACK_FACTOR = 1.1
SLACK_SECONDS = 5.0
#: the closing certificate's conic programs may run until this share of the slack after the soft deadline;
#: the rest is kept for the parts that cannot be interrupted (compiling those programs, searching all triplets,
#: evaluating the objective)
CERTIFY_SHARE = 0.5

#: a conic program run under a deadline (a certificate's restricted dual) starts only with at least this many seconds
#: left per scalar of its data (cvxpy's ``size_metrics.num_scalar_data``): compiling it, which no time limit
#: interrupts, took 0.7 us per scalar (MMC's dual program on 100 digits points, 1.8e6 scalars: 1.24 s on 2 loaded
#: cores); three times that leaves room for the solver's set-up and first iteration. Its solver's own limit is the
#: time left less half of this estimate (the compilation comes first and its limit does not cover it)
CONIC_SECONDS_PER_SCALAR = 2e-6

_AT: ContextVar[float | None] = ContextVar("metricopt_deadline", default=None)


def hard_limit(limit: float) -> float:
    """The promised wall time (seconds) of a solve with ``time_limit=limit``: ``max(1.1 limit, limit + 5)``.

    Parameters
    ----------
    limit : float
        The ``time_limit`` (seconds).

    Returns
    -------
    float
        The seconds within which the solve returns.
    """
    # limit + 0.1 limit, not 1.1 limit: 1.1 x 100 rounds to 110.00000000000001
    return limit + max(round(SLACK_FACTOR - 1.0, 12) * limit, SLACK_SECONDS)


def ambient() -> float | None:
    """The deadline in force (a :func:`time.perf_counter` value), ``None`` when none is."""
    return _AT.get()


def seconds_left(now: float | None = None) -> float | None:
    """Seconds until the deadline in force (negative once passed), ``None`` when none is."""
    at = _AT.get()
    if at is None:
        return None
    return at - (time.perf_counter() if now is None else now)


def conic_seconds(prog: Any) -> float | None:
    """The time limit to give a conic solver on the CVXPY program ``prog`` under the deadline in force: ``None``
    without one, ``0.0`` when too little is left to compile and start it (:data:`CONIC_SECONDS_PER_SCALAR`; the
    caller then skips it), else the seconds left less the estimated compilation."""
    left = seconds_left()
    if left is None:
        return None
    need = CONIC_SECONDS_PER_SCALAR * float(prog.size_metrics.num_scalar_data)
    if left <= 0.0 or left < need:
        return 0.0
    return max(left - 0.5 * need, 1e-3)


@contextmanager
def deadline(at: float | None) -> Iterator[float | None]:
    """Put the deadline ``at`` (a :func:`time.perf_counter` value; ``None``: none) in force for the block,
    or the enclosing one where that comes first. Yields the deadline in force."""
    outer = _AT.get()
    effective = outer if at is None else (at if outer is None else min(at, outer))
    token = _AT.set(effective)
    try:
        yield effective
    finally:
        _AT.reset(token)


@dataclass(frozen=True)
class Budget:
    """The deadlines of one time-limited solve (module docstring); ``soft`` and ``hard`` are ``None`` when
    neither a ``time_limit`` nor an enclosing deadline applies."""

    t0: float
    soft: float | None
    hard: float | None

    @classmethod
    def start(cls, time_limit: float | None, t0: float | None = None) -> "Budget":
        """The budget of a solve started at ``t0`` (default now) with ``time_limit`` seconds (or ``None``),
        both deadlines capped by the one in force (:func:`ambient`)."""
        t0 = time.perf_counter() if t0 is None else t0
        soft = hard = None
        if time_limit is not None:
            soft, hard = t0 + float(time_limit), t0 + hard_limit(float(time_limit))
        outer = _AT.get()
        if outer is not None:
            soft = outer if soft is None else min(soft, outer)
            hard = outer if hard is None else min(hard, outer)
        return cls(t0, soft, hard)

    @property
    def limited(self) -> bool:
        """Whether any deadline applies."""
        return self.soft is not None

    def left(self, now: float | None = None) -> float | None:
        """Seconds to the soft deadline (``None`` without one)."""
        if self.soft is None:
            return None
        return self.soft - (time.perf_counter() if now is None else now)

    def expired(self, now: float | None = None) -> bool:
        """Whether the soft deadline has passed."""
        left = self.left(now)
        return left is not None and left <= 0.0

    @property
    def certify_by(self) -> float | None:
        """Until when the closing certificate's conic programs may run (:data:`CERTIFY_SHARE`)."""
        if self.soft is None or self.hard is None:
            return None
        return self.soft + CERTIFY_SHARE * (self.hard - self.soft)

    def running(self) -> AbstractContextManager[float | None]:
        """The context of the solve itself: the hard deadline in force (nested solves stay within it)."""
        return deadline(self.hard)

    def fits(self, seconds: float, by: float | None = None, now: float | None = None) -> bool:
        """Whether a piece of work that no limit interrupts, estimated at ``seconds``, started ``now`` ends by the
        deadline ``by`` (default the soft one); always ``True`` without a deadline.

        Parameters
        ----------
        seconds : float
            The piece's estimated duration.
        by : float, optional
            The deadline it must end by (a :func:`time.perf_counter` value, e.g. :attr:`hard` or
            :attr:`certify_by`); default :attr:`soft`.
        now : float, optional
            The time it would start (default now).

        Returns
        -------
        bool
            Whether ``now + seconds <= by``.
        """
        at = self.soft if by is None else by
        if at is None:
            return True
        return (time.perf_counter() if now is None else now) + max(float(seconds), 0.0) <= at

    def closing(self) -> AbstractContextManager[float | None]:
        """The context of the closing certificate: :attr:`certify_by` in force."""
        return deadline(self.certify_by)
