"""The pair methods: MMC (Xing, Ng, Jordan & Russell, NIPS 2002) and POLA (Shalev-Shwartz, Singer & Ng,
ICML 2004), their problems and estimators (their certificates are the core's pair bounds,
:mod:`metricopt.certify.pairs`)."""

from __future__ import annotations

from ..._lazy import lazy_exports

#: public name -> the module of this family defining it, imported on first use (PEP 562)
_EXPORTS = {
    "MMC": "estimator",
    "MMCProblem": "mmc_problem",
    "POLA": "estimator",
    "POLAProblem": "pola_problem",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
