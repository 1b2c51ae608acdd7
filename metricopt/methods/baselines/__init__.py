"""The closed-form baselines: PCA, whitening, LDA (Fisher) and RCA (Bar-Hillel et al., JMLR 2005), as maps and
estimators."""

from __future__ import annotations

from ..._lazy import lazy_exports

#: public name -> the module of this family defining it, imported on first use (PEP 562)
_EXPORTS = {
    "LDA": "estimator",
    "PCA": "estimator",
    "RCA": "estimator",
    "Whitening": "estimator",
    "lda_map": "transforms",
    "pca_map": "transforms",
    "rca_map": "transforms",
    "whitening_map": "transforms",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
