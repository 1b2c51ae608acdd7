"""The scalable JAX backend for LMNN, MMC and POLA: ``problem.solve(backend="jax", ...)``.

* float64 on CPU or GPU: the solve runs inside ``jax.enable_x64(True)`` (a context
  manager); importing this package never changes JAX's global configuration;
* one jitted solver loop (:func:`loop.run_chunk`), shared by every solver; a solver
  is a small ``(init, refresh, update)`` triple (:mod:`.solvers`); a solver moves one
  matrix ``Z`` on the problem's feasible set, described by a :class:`~.geometry.Geometry`
  (LMNN: ``M`` PSD; MMC: the budget turned into ``trace Z <= 1``; POLA: ``blockdiag(M, b-1)``
  PSD) that holds the one JAX PSD projection (:func:`geometry.project_psd`);
* ``devices=`` shards LMNN's active triplets over several devices (``jax.sharding``);
* the objective is assembled from each term's JAX piece (``Term.jax_value_grad`` in
  :mod:`metricopt.problems.terms`); the hinge's (sub)gradient is the matrix form
  ``mu (S_target(w) - S_impostor(w))`` of weighted pair scatters ``X^T (D_w - W - W^T) X``
  built with segment sums over a padded active set (capacity bucketed to powers of two,
  so that a growing set does not recompile at every change);
* every few iterations all triplets are re-checked (:func:`metricopt.constraints.active_triplets`,
  blocked, memory ``O(block * n)``) and the iterate is certified by :func:`metricopt.certify`;
  the solve stops at the requested certified relative gap, and only a certificate makes
  a solution ``optimal``.

Solvers
-------
``"fista"`` (default)
    Accelerated projected gradient with backtracking and adaptive restarts on the hinge
    smoothed to a centred Huber, the width driven from 0.5 down to 1e-6 (continuation).
``"subgradient"``
    The reference, Weinberger & Saul (JMLR 2009, Appendix A): projected subgradient steps
    from ``M = I``, the step grown by 1.01 after a decrease and halved (step rolled back)
    after an increase, all triplets re-checked every 10 iterations.
``"online"`` (POLA only)
    Shalev-Shwartz, Singer & Ng's online algorithm: per pair, projection onto its margin
    half-space, then onto ``{M PSD, b >= 1}``; one iteration is one pass over the pairs.

Measured (``python -m metricopt.backends.jax.benchmark``; 2 shared CPU cores, compiled
beforehand, seconds without the benchmark's extra certificates; LMNN k=3, mu=0.5, standardized
data, digits PCA to 25 dimensions): time to a certified relative gap of

==================  =====================  ======================
data (n, d)         subgradient 1e-3/1e-6  fista 1e-3 / 1e-6
==================  =====================  ======================
iris (150, 4)       never (stalls 6.8e-3)  0.15 s / 0.20 s
wine (178, 13)      never (stalls 1.7e-2)  1.9 s / 2.2 s
digits (1797, 25)   never (1.1e-1 @ 120 s) 18 s / 28 s
==================  =====================  ======================

The reference's step rule stops making progress at a kink of the hinge (every step
increases the objective, the step underflows) well before any of these gaps.
"""

from .backend import OPTIONS, solve
from .loop import TRACES, Objective, project_psd, run_chunk
from .geometry import Geometry
from .solvers import DEFAULT_SOLVER, FISTA, SOLVERS, OnlinePOLA, Subgradient

__all__ = ["solve", "OPTIONS", "SOLVERS", "DEFAULT_SOLVER", "FISTA", "Subgradient", "OnlinePOLA", "Objective",
           "Geometry", "project_psd", "run_chunk", "TRACES"]
