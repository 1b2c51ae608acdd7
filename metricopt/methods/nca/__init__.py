"""NCA (Goldberger, Roweis, Hinton & Salakhutdinov, NIPS 2004) and MLCC (Globerson & Roweis, NIPS 2006): the
softmax-neighbour problems, their shared blocked softmax, NCA's NumPy L-BFGS path and the estimators."""

from __future__ import annotations

from ..._lazy import lazy_exports

#: public name -> the module of this family defining it, imported on first use (PEP 562)
_EXPORTS = {
    "MLCC": "mlcc_estimator",
    "MLCCProblem": "mlcc_problem",
    "NCA": "estimator",
    "NCAProblem": "problem",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
