r"""Many small problems of one shape, solved together in one jitted call: :func:`solve_batch`.

The backend's one loop (:func:`.loop.run_chunk`, FISTA on the smoothed hinge, the default solver) runs
under ``jax.vmap`` over the batch and is compiled once per shape. Between chunks the solver's own
continuation (:meth:`.solvers.FISTA.between_chunks`) shrinks each problem's smoothing width on the host.
Every problem's active set holds all its triplets (one padded capacity for the batch), so no re-checks
are needed, and no certificate is taken: the caller certifies what it needs (e.g. :mod:`metricopt.methods.local.batch`).

A problem in a batch runs exactly the iterations it would run alone in a batch of one, given the same
number of chunks (the batch runs until every problem's width reached ``s_stop``, or ``max_iter``).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

import numpy as np

from ..._deadline import Budget
from ..._validation import check_int, check_real
from ...errors import InputError

__all__ = ["BatchSolution", "solve_batch"]


@dataclass
class BatchSolution:
    """What :func:`solve_batch` returns.

    Attributes
    ----------
    points : list of dict
        Per problem, its variables at the last iterate (``{"M": (d, d) ndarray}``, float64, symmetric).
    iterations : int
        Iterations run (the same for every problem of the batch).
    stats : dict
        ``capacity`` (the padded active-set size), ``batch`` (the number of problems), ``chunks``,
        ``out_of_time`` (whether the loop stopped because no further chunk fitted before the deadline in force,
        :mod:`metricopt._deadline`: a caller's ``time_limit``; the points are then the last iterates).
    """

    points: list
    iterations: int
    stats: dict = field(default_factory=dict)


#: under a deadline, the first chunk's iterations (the compilation comes with it; then the rate is known)
FIRST_STEPS = 2


@functools.lru_cache(maxsize=1)
def _run_batch_fn():
    """The jitted, vmapped chunk (built once: JAX then caches one compilation per shape)."""
    import jax

    from .loop import run_chunk

    @functools.partial(jax.jit, static_argnames=("solver", "term_classes", "geometry", "roles"))
    def run_batch(solver, term_classes, geometry, data, gdata, actives, state, n_steps, roles=()):
        one = lambda d, g, a, s: run_chunk(solver, term_classes, geometry, d, g, a, s, n_steps, roles)
        return jax.vmap(one)(data, gdata, actives, state)

    return run_batch


def _stack(trees):
    import jax

    return jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *trees)


def _unstack(tree, b):
    import jax

    return jax.tree_util.tree_map(lambda x: np.asarray(x)[b], tree)


def _shapes(tree):
    import jax

    return jax.tree_util.tree_map(lambda x: np.shape(x), tree)


def solve_batch(problems: list, *, max_iter: int = 2000, chunk: int = 40, s_stop: float = 1e-4, min_iter: int = 0,
                precondition: bool = True) -> BatchSolution:
    r"""Solve many small triplet problems of one shape (e.g. LMNN on ``S`` points each) in one jitted, vmapped loop.

    Each problem starts from the best multiple of the identity (:func:`~.backend.best_scale`) and is solved by
    FISTA with continuation on the hinge's smoothing width, every triplet in its active set.

    Parameters
    ----------
    problems : list of problems
        Unconstrained problems over a full PSD metric that the JAX backend accepts, all with the same term
        classes and the same data shapes (e.g. :class:`~metricopt.methods.lmnn.problem.LMNNProblem` on ``S`` points in
        ``d`` dimensions with the same ``k``); at least one term with a working set (the triplets).
    max_iter : int, default 2000
        Iterations per problem at most.
    chunk : int, default 40
        Iterations per jitted call (the continuation steps in between).
    s_stop : float, default 1e-4
        Smoothing width at which the loop ends, once every problem's width reached it.
    min_iter : int, default 0
        Iterations run at least before the loop may end at ``s_stop``.
    precondition : bool, default True
        Solve in the backend's preconditioned coordinates (the pull matrix whitened, ``M = T Z T``).

    Under a deadline (a caller's ``time_limit``, :func:`metricopt._deadline.deadline`) the first chunk has
    :data:`FIRST_STEPS` iterations (its compilation, which no limit interrupts, always runs) and each later one as many
    as fit in the time left at the last chunk's rate: none starts that would end past the deadline.

    Returns
    -------
    BatchSolution

    Raises
    ------
    InputError
        For an empty list, problems the batch cannot hold together (different term classes or data shapes,
        no triplet term) or invalid options.
    """
    import jax
    import jax.numpy as jnp

    from .backend import best_scale
    from .geometry import Setup
    from .solvers import FISTA

    if not problems:
        raise InputError("solve_batch needs at least one problem.")
    max_iter = check_int(max_iter, "max_iter", low=1)
    chunk = check_int(chunk, "chunk", low=1)
    min_iter = check_int(min_iter, "min_iter", low=0)
    s_stop = check_real(s_stop, "s_stop", low=0.0)
    solver = FISTA()
    setups = [Setup(p, precondition=precondition) for p in problems]
    terms0 = problems[0].jax_terms(online=False)
    term_classes = tuple(type(t) for t in terms0)
    pieces = [t.dual_piece(problems[0]) for t in terms0]
    roles = tuple(None if piece is None else piece.loss for piece in pieces)
    geometry = setups[0].geometry
    hinge_idx = [i for i, t in enumerate(terms0) if t.uses_working_set]
    if not hinge_idx:
        raise InputError("solve_batch solves problems with a triplet term (a working set); the first has none.")
    if geometry.kind != "psd":
        raise InputError(f"solve_batch solves problems over a full PSD metric; got the geometry '{geometry.kind}'.")
    d = problems[0].d
    counts = [p.n_triplets for p in problems]
    cap = max(256, 1 << max(max(counts) - 1, 0).bit_length())
    data, actives, states = [], [], []
    with jax.enable_x64(True):
        for b, (p, st) in enumerate(zip(problems, setups)):
            terms = p.jax_terms(online=False)
            if tuple(type(t) for t in terms) != term_classes or st.geometry != geometry or p.d != d:
                raise InputError(f"solve_batch: problem {b} differs from problem 0 in its terms, geometry or "
                                 "dimension; a batch holds problems of one kind and shape.")
            data.append(tuple({kk: np.asarray(v) for kk, v in t.jax_data(p).items()} for t in terms))
            if _shapes(data[-1]) != _shapes(data[0]):
                raise InputError(f"solve_batch: the data of problem {b} has other shapes than problem 0's; a batch "
                                 "holds problems of one shape.")
            Z0 = st.from_point({"M": best_scale(p) * np.eye(d)})
            M0 = st.to_point(Z0)["M"]
            acts = []
            for i, t in enumerate(terms):
                acts.append(t.jax_active_set(p, M0, np.inf, min_capacity=cap, form="gather")[0] if i in hinge_idx else None)
            actives.append(tuple(acts))
            states.append({kk: np.asarray(v) for kk, v in solver.init(jnp.asarray(Z0)).items()})
        data_b, act_b, state_b = _stack(data), _stack(actives), _stack(states)
        gdata_b = _stack([{"T": np.asarray(st.gdata["T"])} if "T" in st.gdata else {} for st in setups])
        run_batch = _run_batch_fn()
        it = chunks = 0
        B = len(problems)
        budget, per_step, out_of_time = Budget.start(None), 0.0, False  # the deadline in force (a caller's limit)
        while it < max_iter:
            n = min(chunk, max_iter - it)
            if budget.limited:  # a first chunk of FIRST_STEPS (its compilation included), then what the time allows
                left = budget.left() or 0.0
                n = min(n, FIRST_STEPS) if not chunks else min(n, int(left / per_step) if per_step > 0 else n)
                if n < 1 or left <= 0.0:
                    out_of_time = True
                    break
            started = time.perf_counter()
            state_b = run_batch(solver, term_classes, geometry, data_b, gdata_b, act_b, state_b, n, roles)
            state_b = jax.tree_util.tree_map(np.asarray, state_b)
            # seconds per iteration of the last chunk (the first one's holds the compilation: an overestimate)
            per_step = (time.perf_counter() - started) / n
            it += n
            chunks += 1
            # the solver's own continuation, problem by problem (host side, cheap)
            new = [solver.between_chunks(_unstack(state_b, b), True) for b in range(B)]
            state_b = _stack([{kk: np.asarray(v) for kk, v in st.items()} for st in new])
            if np.all(state_b["s"] <= s_stop) and it >= min_iter:
                break
    points = [setups[b].to_point(state_b["M"][b]) for b in range(B)]
    return BatchSolution(points, it, {"capacity": cap, "batch": B, "chunks": chunks, "out_of_time": out_of_time})
