"""The scalable JAX backend for LMNN: ``problem.solve(backend="jax", ...)``.

First-order methods on ``M`` in float64 (``jax.enable_x64`` is switched on inside the
solve only, never globally), one jitted solver loop (:func:`loop.run_chunk`) shared
by every solver, matrix-form gradients assembled from each term's JAX piece
(:mod:`metricopt.problems.terms`), blocked full re-checks of all triplets, and
stopping on a certified duality gap (:func:`metricopt.certify`).
"""

from .backend import OPTIONS, solve
from .loop import TRACES, project_psd, run_chunk
from .solvers import DEFAULT_SOLVER, FISTA, SOLVERS, Subgradient

__all__ = ["solve", "OPTIONS", "SOLVERS", "DEFAULT_SOLVER", "FISTA", "Subgradient", "project_psd", "run_chunk",
           "TRACES"]
