"""Local distance functions (Ramanan & Baker, IEEE PAMI 33(4), 2011): the taxonomy's pieces.

* :mod:`.taxonomy`: how x where x when, the two-stage classifier (:func:`fit_local_metrics`);
* :mod:`.lda`: regularised weighted LDA with a bagged between-class scatter;
* :mod:`.batch`: many small LMNN problems solved as one ``vmap`` batch of the JAX loop;
* :mod:`.line_integral`: the exact line-integral distance through a piecewise-constant metric field.
"""

from .batch import LocalSet, solve_lmnn_batch
from .lda import regularized_lda
from .line_integral import cell_of, line_integral_distance, line_integral_distances
from .taxonomy import HOW, VALID, WHEN, WHERE, LocalMetrics, column_of, fit_local_metrics

__all__ = ["HOW", "WHERE", "WHEN", "VALID", "LocalMetrics", "LocalSet", "cell_of", "column_of", "fit_local_metrics",
           "line_integral_distance", "line_integral_distances", "regularized_lda", "solve_lmnn_batch"]
