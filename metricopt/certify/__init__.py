"""Duality-gap certificates for any candidate metric of a convex problem.

``certify(problem, M)`` evaluates the objective at ``M`` (after checking that ``M``
is feasible: PSD within a tolerance, the problem's constraints) and builds a
dual-feasible point from ``M`` whose dual objective is a lower bound on the
optimum. Nothing about the solver that produced ``M`` is trusted.
"""

from __future__ import annotations

from .agreement import AgreementReport, check_agreement
from .certificate import Certificate, Verdict
from .core import CERTIFIERS, Certifier, certify, register_certifier
from .dual import DualSummary, dual_summary
from .policy import NoCertificate, Outcome, SolverReport, decide, decide_status, settle

__all__ = ["certify", "Certificate", "Verdict", "check_agreement", "AgreementReport", "DualSummary",
           "dual_summary", "register_certifier", "CERTIFIERS", "Certifier", "decide", "decide_status", "settle",
           "SolverReport", "Outcome", "NoCertificate"]
