"""Neighbourhood gerrymandering (Trivedi, McAllester & Shakhnarovich, NIPS 2014): exact and greedy latent
inference, the problem (Eq. 6) and its convex CCCP step, the CCCP and SGD solvers, the estimator (the step's
certificate is the core's latent bound, :mod:`metricopt.certify.latent`)."""

from __future__ import annotations

from ..._lazy import lazy_exports

#: public name -> the module of this family defining it, imported on first use (PEP 562)
_EXPORTS = {
    "GerrymanderStepProblem": "problem",
    "GerrymanderingKNN": "estimator",
    "GerrymanderingProblem": "problem",
    "cccp": "cccp",
    "infer_all": "inference",
    "infer_rows": "inference",
    "latent_knn_predict": "inference",
    "loss_augmented_inference": "inference",
    "sgd": "cccp",
    "targeted_inference": "inference",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
