"""The one status policy: a solver's word never makes a solution optimal, its certificate does.

Every path that ends a solve (the exact backend, the JAX backend, early stopping, multi-pass LMNN, low-rank
LMNN, the latent-variable solvers, the batched local solves, the closed-form baselines, a model file's status
checked at load) says what its solver saw as a :class:`SolverReport` -- an :class:`Outcome` and a reason in
words -- and :func:`decide` alone turns it into a :class:`~metricopt.solution.Status` (:func:`settle` certifies a
point first, then calls it). No other module writes a status.

:func:`decide`'s table. The outcome first names the solver's own claim (``CONVERGED``: ``optimal``,
``INACCURATE``: ``optimal_inaccurate``, ``STATIONARY``: ``stationary``, ``ITERATION_LIMIT`` / ``TIME_LIMIT``:
themselves, ``STOPPED``: ``early_stopped``, ``COMPOSED``: ``heuristic``, ``CLOSED_FORM``: ``closed_form``,
``INFEASIBLE`` / ``UNBOUNDED``: themselves, ``FAILED``: ``error``, ``INHERITED``: the status of a sub-solve this
policy decided before); then

* a non-convex problem (factor geometry, non-convex terms) is never ``optimal``: a claim of ``optimal`` becomes
  ``stationary``, any other claim stands (certificates do not apply);
* a convex problem's point with a certificate is ``optimal`` exactly when the certificate is within its ``tol``
  (whatever the solver said, if it returned a point: an inaccurate or iteration-limited solve whose certificate
  proves optimality is optimal); a claim of ``optimal`` whose certificate does not close becomes
  ``optimal_inaccurate``; any other claim stands;
* a convex problem's point without a certificate (:class:`NoCertificate`) is never ``optimal`` -- a claim of
  ``optimal`` becomes ``uncertified`` (no certificate exists for its terms, or none was taken) or ``time_limit``
  (the time limit left no room for one) -- except where the caller declined one (``certify=None`` on the exact
  backend: ``NoCertificate.DECLINED``), where the solver's word stands and the message says so; any other claim
  stands.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from typing import Any

from ..errors import NotCertifiableError
from ..solution import Solution, Status
from .certificate import Certificate

__all__ = ["Outcome", "SolverReport", "NoCertificate", "decide", "decide_status", "settle"]


class Outcome(enum.Enum):
    """What a solver saw when it stopped: its own word, before any certificate (the status is :func:`decide`'s)."""

    #: its own optimality test was met: a conic solver's 'optimal', a certificate within tol, a first-order test
    CONVERGED = "converged"
    #: it stopped short of its accuracy: a conic solver's 'optimal_inaccurate', stalled iterates, a given point
    INACCURATE = "inaccurate"
    #: a stationarity test of a non-convex problem was met
    STATIONARY = "stationary"
    ITERATION_LIMIT = "iteration_limit"
    TIME_LIMIT = "time_limit"
    #: the caller stopped it (a callback, early stopping on a validation error)
    STOPPED = "stopped"
    #: a heuristic step over certified solves (multi-pass LMNN's composition, LMNN-S's truncation)
    COMPOSED = "composed"
    #: an eigendecomposition (PCA, whitening, LDA, RCA): exact for its own criterion
    CLOSED_FORM = "closed_form"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    #: the solver failed (an exception, non-finite values)
    FAILED = "failed"
    #: a sub-solve's status, decided by this policy before, passed on (``SolverReport.inherited``)
    INHERITED = "inherited"


class NoCertificate(enum.Enum):
    """Why a convex problem's point comes without a certificate (:func:`decide`'s ``certificate``)."""

    #: the caller declined one (``certify=None``): the solver's word stands
    DECLINED = "declined"
    #: none exists for the problem's terms, or none was taken: a claim of 'optimal' is 'uncertified'
    NOT_TAKEN = "not taken"
    #: the time limit left no room for one: a claim of 'optimal' is 'time_limit'
    OUT_OF_TIME = "out of time"


@dataclasses.dataclass(frozen=True)
class SolverReport:
    """What a solver saw: its :class:`Outcome` and the reason in words (the details of the status message).

    ``Outcome.INHERITED`` carries the sub-solve's status (already decided by :func:`decide`) in ``inherited``.
    """

    kind: Outcome
    reason: str = ""
    inherited: Status | None = None

    def __post_init__(self):
        if not isinstance(self.kind, Outcome):
            raise TypeError(f"SolverReport.kind must be an Outcome; got {self.kind!r}.")
        if (self.kind is Outcome.INHERITED) != (self.inherited is not None):
            raise ValueError("SolverReport: a status is inherited exactly when kind is Outcome.INHERITED.")

    @classmethod
    def inherit(cls, status: Status, reason: str = "") -> "SolverReport":
        """The report that passes on ``status``, a status this policy decided for a sub-solve.

        Parameters
        ----------
        status : Status
            The sub-solve's status (already decided by :func:`decide`).
        reason : str, default ""
            The reason in words.

        Returns
        -------
        SolverReport
            Kind ``Outcome.INHERITED``, carrying ``status``.
        """
        return cls(Outcome.INHERITED, reason, status)

    @property
    def has_point(self) -> bool:
        """Whether the solver returned a usable (if possibly inaccurate) point, by its own word."""
        return _claim(self).has_point

    def because(self, reason: str) -> "SolverReport":
        """The same report with another reason.

        Parameters
        ----------
        reason : str
            The new reason in words.

        Returns
        -------
        SolverReport
            A copy of this report with ``reason`` replaced.
        """
        return dataclasses.replace(self, reason=reason)


#: each outcome's own claim, in the words of Status (before the certificate and convexity rules of decide)
_CLAIM = {
    Outcome.CONVERGED: Status.OPTIMAL,
    Outcome.INACCURATE: Status.OPTIMAL_INACCURATE,
    Outcome.STATIONARY: Status.STATIONARY,
    Outcome.ITERATION_LIMIT: Status.ITERATION_LIMIT,
    Outcome.TIME_LIMIT: Status.TIME_LIMIT,
    Outcome.STOPPED: Status.EARLY_STOPPED,
    Outcome.COMPOSED: Status.HEURISTIC,
    Outcome.CLOSED_FORM: Status.CLOSED_FORM,
    Outcome.INFEASIBLE: Status.INFEASIBLE,
    Outcome.UNBOUNDED: Status.UNBOUNDED,
    Outcome.FAILED: Status.ERROR,
}


def _claim(report: SolverReport) -> Status:
    """The solver's own claim in the words of Status, before :func:`decide`'s certificate and convexity rules
    (``Outcome.INHERITED``: the inherited status). Private: only :func:`decide` turns it into a status."""
    if report.inherited is not None:
        return report.inherited
    return _CLAIM[report.kind]


def decide(report: SolverReport, certificate: Certificate | NoCertificate | None = None,
           convex: bool = True) -> tuple[Status, str]:
    """The status of a point, from what its solver saw and its certificate (the module docstring's table).

    Parameters
    ----------
    report : SolverReport
        What the solver saw.
    certificate : Certificate, NoCertificate or None
        The point's duality-gap certificate, or why there is none (``None``: ``NoCertificate.NOT_TAKEN``).
    convex : bool
        Whether the problem is convex (a non-convex problem is never ``optimal``).

    Returns
    -------
    (Status, str)
        The status and a note for the message (empty when the solver's claim stands, or where the caller's own
        message says why).
    """
    claim = _claim(report)
    if not convex:
        if claim is Status.OPTIMAL:
            return Status.STATIONARY, "a non-convex problem: its solutions are stationary at best, never certified optimal"
        return claim, ""
    if certificate is None:
        certificate = NoCertificate.NOT_TAKEN
    if isinstance(certificate, NoCertificate):
        if claim is not Status.OPTIMAL or certificate is NoCertificate.DECLINED:
            return claim, ""
        if certificate is NoCertificate.OUT_OF_TIME:
            return Status.TIME_LIMIT, ""
        return Status.UNCERTIFIED, ""
    if certificate.is_optimal and claim.has_point:
        if claim is not Status.OPTIMAL:
            return Status.OPTIMAL, f"solver status was '{claim}', but the certificate proves optimality"
        return Status.OPTIMAL, ""
    if claim is Status.OPTIMAL:
        return (Status.OPTIMAL_INACCURATE,
                f"the certificate's relative gap {certificate.rel_gap:.2e} exceeds tol {certificate.tol:.1e}")
    return claim, ""


def decide_status(status: Status, certificate: Certificate | None, convex: bool = True) -> tuple[Status, str]:
    """:func:`decide` for a status already in hand (e.g. a sub-solve's).

    Parameters
    ----------
    status : Status
        The status, passed on as ``SolverReport.inherit(status)``.
    certificate : Certificate or None
        The point's certificate; ``None`` means the caller took no certificate on purpose
        (``NoCertificate.DECLINED``: a status without one stands).
    convex : bool, default True
        Whether the problem is convex.

    Returns
    -------
    (Status, str)
        The status and a note for the message (see :func:`decide`).
    """
    return decide(SolverReport.inherit(status), NoCertificate.DECLINED if certificate is None else certificate, convex)


def settle(problem: Any, report: SolverReport, point: dict, tol: float | bool | None, t0: float | None = None,
           missing: NoCertificate | None = None) -> Solution:
    """The Solution of a solver's ``point``: certify it, attach the certificate and let :func:`decide` set the
    status from ``report``.

    A term without a dual piece leaves the point NOT CERTIFIED (``NoCertificate.NOT_TAKEN``).

    Parameters
    ----------
    problem : Problem
        The problem solved (its ``is_convex`` decides whether a certificate is taken).
    report : SolverReport
        What the solver saw.
    point : dict
        The :class:`~metricopt.solution.Solution` fields but ``status`` and ``message``: ``M``, ``objective``,
        ``backend``, ``solver``, ``stats``, ... (copied, not modified).
    tol : float, bool or None
        The certificate's relative-gap tolerance (``None``/``False``: no certificate, ``missing`` says why;
        ``True``: 1e-6).
    t0 : float, optional
        The solve's start (:func:`time.perf_counter`): sets ``stats["time"]``.
    missing : NoCertificate, optional
        Why there is no certificate when none is taken (by default: the caller declined one).

    Returns
    -------
    Solution
        With ``status``, ``certificate`` and the message ``"<status message> (<report.reason>; <details>)"``.
    """
    point = dict(point)
    stats = point.setdefault("stats", {})
    message = report.reason
    cert = None
    if missing is None:
        missing = NoCertificate.DECLINED if tol is None or tol is False else NoCertificate.NOT_TAKEN
    if tol is not None and tol is not False and problem.is_convex and point.get("M") is not None:
        tol = 1e-6 if tol is True else float(tol)
        try:
            from .core import certify  # the certifiers (and CVXPY) load on the first certificate

            cert = certify(problem, point["M"], tol=tol, **point.get("variables", {}))
        except NotCertifiableError as exc:
            stats["certificate_rel_gap"] = None
            message += f"; NOT CERTIFIED (the status is the solver's own claim): {exc}"
            missing = NoCertificate.NOT_TAKEN
    if cert is not None:
        stats["certificate_rel_gap"] = cert.rel_gap
    status, note = decide(report, missing if cert is None else cert, problem.is_convex)
    if note:
        message += f"; {note}"
    if cert is not None:
        message += f"; certified relative gap {cert.rel_gap:.2e}"
    if t0 is not None:
        stats["time"] = time.perf_counter() - t0
    return Solution(**point, status=status, message=f"{status.message} ({message})", certificate=cert)
