"""Local distance functions (Ramanan & Baker, IEEE PAMI 33(4), 2011): the taxonomy's pieces and the estimator.

* :mod:`.taxonomy`: how x where x when, the two-stage classifier (:func:`fit_local_metrics`);
* :mod:`.lda`: regularised weighted LDA with a bagged between-class scatter;
* :mod:`.batch`: many small LMNN problems solved as one ``vmap`` batch of the JAX backend
  (:func:`metricopt.backends.jax.solve_batch`);
* :mod:`.line_integral`: the exact line-integral distance through a piecewise-constant metric field;
* :mod:`.estimator`: :class:`LocalMetricKNN`, the scikit-learn classifier."""

from __future__ import annotations

from ..._lazy import lazy_exports

#: public name -> the module of this family defining it, imported on first use (PEP 562)
_EXPORTS = {
    "HOW": "taxonomy",
    "LocalMetricKNN": "estimator",
    "LocalMetrics": "taxonomy",
    "LocalSet": "batch",
    "VALID": "taxonomy",
    "WHEN": "taxonomy",
    "WHERE": "taxonomy",
    "cell_of": "line_integral",
    "column_of": "taxonomy",
    "fit_local_metrics": "taxonomy",
    "line_integral_distance": "line_integral",
    "line_integral_distances": "line_integral",
    "regularized_lda": "lda",
    "solve_lmnn_batch": "batch",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
