"""The scalable JAX backend for LMNN, MMC and POLA: ``problem.solve(backend="jax", ...)``.

* float64 on CPU or GPU: the solve runs inside ``jax.enable_x64(True)`` (a context
  manager); importing this package never changes JAX's global configuration;
* one jitted solver loop (:func:`loop.run_chunk`), shared by every solver; a solver
  is a small ``(init, refresh, update)`` triple (:mod:`.solvers`); a solver moves one
  matrix ``Z`` on the problem's feasible set, described by a :class:`~.geometry.Parametrization`
  (LMNN: ``M`` PSD; MMC: the budget turned into ``trace Z <= 1``; POLA: ``blockdiag(M, b-1)``
  PSD) that holds the one JAX PSD projection (:func:`geometry.project_psd`);
* :func:`solve_batch` solves many small problems of one shape in one jitted, vmapped call (local metrics);
* ``devices=`` shards LMNN's active triplets over several devices (``jax.sharding``);
* the objective is assembled from each term's JAX piece (``Term.jax_value_grad`` in
  :mod:`metricopt.problems.terms`); the hinge's (sub)gradient is the matrix form
  ``mu (S_target(w) - S_impostor(w))`` of weighted pair scatters over a padded active set (capacity
  bucketed to powers of two, so that a growing set does not recompile at every change), each distinct
  impostor pair once: two GEMMs ``D^T diag(w) D`` over the pairs' differences, or the Laplacian
  ``X^T (D_w - W - W^T) X``, whichever the device measures faster (:mod:`metricopt.costmodel`);
* every few iterations all triplets are re-checked (:func:`metricopt.constraints.active_triplets`,
  blocked, memory ``O(block * n)``) and the iterate is certified by :func:`metricopt.certify`;
  the solve stops at the requested certified relative gap, and only a certificate makes
  a solution ``optimal``.

Solvers
-------
``"fista"`` (default)
    Accelerated projected gradient with backtracking and adaptive restarts on the hinge
    smoothed to a centred Huber, the width driven from 0.5 down to 1e-6 (continuation).
    Non-smooth terms that declare a prox (``jax_prox``; a constraint term its projection,
    ``jax_indicator``; :mod:`metricopt.problems.regularizers`) leave the smoothed part: FISTA then
    takes proximal-gradient steps, their prox composed exactly with the PSD cone (a closed form
    where the term declares one, else an inner fast dual proximal gradient loop; :mod:`.prox`).
    Non-smooth terms without a prox are smoothed with the hinge (their Moreau envelope).
``"subgradient"``
    The reference, Weinberger & Saul (JMLR 2009, Appendix A): projected subgradient steps
    from ``M = I``, the step grown by 1.01 after a decrease and halved (step rolled back)
    after an increase, all triplets re-checked every 10 iterations.
``"newton"`` (factor geometry only: LMNN-R, ``problem.factored(r)``)
    Trust-region Newton with truncated conjugate gradients on the same smoothed objective and
    continuation; Hessian-vector products by differentiating the terms' gradient.
``"lbfgs"``, ``"cg"`` (factor geometry only: NCA, LMNN-R)
    Limited-memory BFGS and nonlinear conjugate gradients (Polak-Ribiere+) with Armijo backtracking.
``"online"`` (POLA only)
    Shalev-Shwartz, Singer & Ng's online algorithm: per pair, projection onto its margin
    half-space, then onto ``{M PSD, b >= 1}``; one iteration is one pass over the pairs.

Measured times to certified gaps (reference against FISTA) are in
``benchmarks/results/jax_solvers.md`` (``python benchmarks/jax_solvers.py``): the reference's
step rule stops making progress at a kink of the hinge well before a gap of 1e-3.
"""

from .backend import NAME, OPTIONS, Options, accepts, best_scale, evaluate, solve
from .batch import BatchSolution, solve_batch
from .loop import TRACES, Objective, project_psd, run_chunk
from .geometry import Parametrization
from .solvers import (DEFAULT_SOLVER, FISTA, LBFGS, SOLVERS, ConjugateGradient, OnlinePOLA, Solver, Subgradient,
                      TrustNewton, hessian_vector_product)

__all__ = ["solve", "solve_batch", "BatchSolution", "accepts", "Options", "NAME", "OPTIONS", "SOLVERS", "DEFAULT_SOLVER", "FISTA", "Subgradient", "Solver", "OnlinePOLA", "Objective",
           "TrustNewton", "LBFGS", "ConjugateGradient", "hessian_vector_product", "best_scale", "evaluate",
           "Parametrization", "project_psd", "run_chunk", "TRACES"]
