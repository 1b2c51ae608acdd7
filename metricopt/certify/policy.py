"""The one status policy: a solver's word never makes a solution optimal, its certificate does.

Every path that ends a solve (the exact backend, the JAX backend, early stopping, multi-pass
LMNN, low-rank LMNN) reports its status through :func:`decide_status` (and, where the solution
still needs its certificate, :func:`settle`):

* a convex problem's point is ``optimal`` exactly when its duality-gap certificate is within
  ``tol`` (whatever the solver said: an inaccurate or iteration-limited solve whose certificate
  proves optimality is optimal; a solver's "optimal" whose certificate does not close becomes
  ``optimal_inaccurate``);
* a point without a certificate keeps the solver's status, and its message says it is not
  certified;
* a non-convex problem (factor geometry, non-convex terms) is never ``optimal``: its best is
  ``stationary``.
"""

from __future__ import annotations

import time

from ..errors import NotCertifiableError
from ..solution import Solution, Status
from .certificate import Certificate
from .core import certify

__all__ = ["decide_status", "settle"]


def decide_status(status: Status, certificate: Certificate | None, convex: bool = True) -> tuple[Status, str]:
    """The status to report for a point, from the solver's ``status`` and the point's certificate.

    Returns
    -------
    (Status, str)
        The status and a note for the message (empty when the status is unchanged).
    """
    if not convex:
        if status is Status.OPTIMAL:
            return Status.STATIONARY, "a non-convex problem: its solutions are stationary at best, never certified optimal"
        return status, ""
    if certificate is None:
        return status, ""
    if certificate.is_optimal and status.has_point:
        if status is not Status.OPTIMAL:
            return Status.OPTIMAL, f"solver status was '{status}', but the certificate proves optimality"
        return Status.OPTIMAL, ""
    if status is Status.OPTIMAL:
        return (Status.OPTIMAL_INACCURATE,
                f"the certificate's relative gap {certificate.rel_gap:.2e} exceeds tol {certificate.tol:.1e}")
    return status, ""


def settle(problem, solution: Solution, tol: float | bool | None, t0: float | None = None) -> Solution:
    """Certify ``solution`` at relative-gap tolerance ``tol`` (``None``/``False``: no certificate;
    ``True``: 1e-6), attach the certificate and let :func:`decide_status` set the status. A term
    without a dual piece leaves the solution NOT CERTIFIED (its status is then the solver's claim).
    The message becomes ``"<status message> (<details>)"``; ``t0`` sets ``stats["time"]``."""
    cert = None
    if tol is not None and tol is not False and problem.is_convex and solution.M is not None:
        tol = 1e-6 if tol is True else float(tol)
        try:
            cert = certify(problem, solution, tol=tol)
        except NotCertifiableError as exc:
            solution.stats["certificate_rel_gap"] = None
            solution.message += f"; NOT CERTIFIED (the status is the solver's own claim): {exc}"
            if solution.status is Status.OPTIMAL:  # never a silent 'optimal' without a certificate
                solution.status = Status.UNCERTIFIED
    if cert is not None:
        solution.certificate = cert
        solution.stats["certificate_rel_gap"] = cert.rel_gap
    status, note = decide_status(solution.status, cert, problem.is_convex)
    solution.status = status
    if note:
        solution.message += f"; {note}"
    if cert is not None:
        solution.message += f"; certified relative gap {cert.rel_gap:.2e}"
    solution.message = f"{solution.status.message} ({solution.message})"
    if t0 is not None:
        solution.stats["time"] = time.perf_counter() - t0
    return solution
