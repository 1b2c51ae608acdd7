"""LMNN and its extensions (Weinberger & Saul, JMLR 2009; NIPS 2005): the problem (Eq. 14), kernel LMNN
(Sec. 5.3), multi-metric LMNN (Sec. 5.2), multiple passes (Sec. 5.1), low rank (LMNN-R/S, Sec. 5.4), early
stopping on a validation set (Sec. 4.2), the energy rule (Sec. 3.5) and their estimators."""

from __future__ import annotations

from ..._lazy import lazy_exports

#: public name -> the module of this family defining it, imported on first use (PEP 562)
_EXPORTS = {
    "KernelLMNN": "kernel_estimator",
    "KernelLMNNProblem": "kernel_problem",
    "LMNN": "estimator",
    "LMNNProblem": "problem",
    "MultiMetricLMNN": "multimetric_estimator",
    "MultiMetricLMNNProblem": "multimetric_problem",
    "MultiPassResult": "multipass",
    "energy_predict": "energy",
    "energy_scores": "energy",
    "fit_with_validation": "early_stopping",
    "lmnn_low_rank": "lowrank",
    "lmnn_r": "lowrank",
    "lmnn_s": "lowrank",
    "multipass_lmnn": "multipass",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
