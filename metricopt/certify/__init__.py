"""Duality-gap certificates for any candidate metric of a convex problem.

``certify(problem, M)`` evaluates the objective at ``M`` (after checking that ``M``
is feasible: PSD within a tolerance, the problem's constraints) and builds a
dual-feasible point from ``M`` whose dual objective is a lower bound on the
optimum. Nothing about the solver that produced ``M`` is trusted.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the submodule defining it, imported on first use (PEP 562): importing the policy (which every
#: solver path does) then loads neither CVXPY nor the certifiers, whose modules import it
_LAZY = {
    "AgreementReport": "agreement", "check_agreement": "agreement",
    "Certificate": "certificate", "Verdict": "certificate",
    "CERTIFIERS": "core", "Certifier": "core", "certify": "core", "register_certifier": "core",
    "DualSummary": "dual", "dual_summary": "dual",
    "NoCertificate": "policy", "Outcome": "policy", "SolverReport": "policy", "decide": "policy",
    "decide_status": "policy", "settle": "policy",
}

__all__ = ["certify", "Certificate", "Verdict", "check_agreement", "AgreementReport", "DualSummary",
           "dual_summary", "register_certifier", "CERTIFIERS", "Certifier", "decide", "decide_status", "settle",
           "SolverReport", "Outcome", "NoCertificate"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
