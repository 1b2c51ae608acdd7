r"""Solvers for neighbourhood gerrymandering (Trivedi, McAllester & Shakhnarovich, NIPS 2014).

The problem (:class:`metricopt.GerrymanderingProblem`) is a difference of convex functions
of ``M``; two ways to a stationary point:

* :func:`cccp`: the concave-convex procedure. At ``M_t`` the correct sets ``h*_i`` are inferred
  exactly; the convex majoriser with those sets fixed (:class:`~metricopt.GerrymanderStepProblem`)
  is solved by the exact backend (cutting planes over latent sets) and **certified** by a duality gap;
  its minimiser is ``M_{t+1}``. The objective never rises (``f(M_{t+1}) <= step(M_{t+1}) <= step(M_t)
  = f(M_t)``); the loop stops at a fixed point of the correct sets (then ``M_{t+1}`` minimises the
  majoriser at itself: a stationary point within the step's certified gap) or when the relative decrease
  falls below ``tol``. Reported ``stationary``, never ``optimal``.
* :func:`sgd`: stochastic projected subgradient steps on mini-batches, inference for the batch only.
  ``"pegasos"`` (default): ``eta_t = 1 / (lam t)`` for the strongly convex regularisers (Shalev-Shwartz
  et al., ICML 2007), ``eta_0 / sqrt(t)`` for the trace, the batch's subgradient scaled by ``n / b``
  so that it estimates the full sum. ``"paper"``: the paper's Algorithm 1 as printed, kept for
  comparison with its defects: ``eta_t = 1/t`` is undefined at ``t = 0`` (we start at ``t = 1``), the
  first step ``W - (lam W + C dW)`` with ``lam = 1`` erases the start, and ``C dW`` of one example is not
  scaled by ``n``. SGD has no stationarity test: it reports ``iteration_limit`` after its epochs, with the
  best iterate of the epoch ends (the full objective is evaluated there).

Starts (``init``): ``"identity"``; ``"zeros"`` (every distance 0: the sets come from the index
tie-break); ``"relieff"``, the ReliefF feature weights (Kononenko 1994) on the diagonal; or a PSD matrix.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._deadline import Budget
from ..._validation import check_choice, check_int, check_real
from ...certify import policy
from ...certify.policy import NoCertificate, Outcome, SolverReport
from ...errors import InputError
from ...linalg import project_psd, symmetrize
from ...solution import Solution, Status
from ...solving import solve

INITS = ("identity", "zeros", "relieff")


def relieff_weights(X: ArrayLike, y: ArrayLike, n_neighbors: int = 10) -> np.ndarray:
    r"""ReliefF feature weights (Kononenko, ECML 1994), clipped at 0:

    .. math:: w_f = \frac1{n m}\sum_i \Big[-\sum_{j \in H_i} \delta_f(i, j)
              + \sum_{c \ne y_i} \frac{p_c}{1 - p_{y_i}} \sum_{j \in M_{ic}} \delta_f(i, j)\Big],

    ``H_i`` / ``M_ic`` the ``m`` nearest hits / misses of class ``c`` (Euclidean, ranges scaled to 1),
    ``delta_f(i, j) = |x_if - x_jf| / range_f``.

    Parameters
    ----------
    X : (n, d) array_like
        The points.
    y : (n,) array_like
        Their labels.
    n_neighbors : int, default 10
        The number ``m`` of hits and misses per class.

    Returns
    -------
    (d,) ndarray
        The weights (non-negative).
    """
    from sklearn.neighbors import NearestNeighbors

    X = np.asarray(X, dtype=np.float64)
    rng = np.ptp(X, axis=0)
    Xs = X / np.where(rng > 0, rng, 1.0)
    classes, codes = np.unique(y, return_inverse=True)
    prior = np.bincount(codes) / len(codes)
    w = np.zeros(X.shape[1])
    for c in range(classes.size):
        idx = np.flatnonzero(codes == c)
        m = min(n_neighbors, idx.size)
        nn = NearestNeighbors(n_neighbors=min(m + 1, idx.size)).fit(Xs[idx])
        for ci in range(classes.size):
            src = np.flatnonzero(codes == ci)
            _, nb = nn.kneighbors(Xs[src], n_neighbors=min(m + (ci == c), idx.size))
            if ci == c:
                nb = nb[:, 1:]  # the point itself
            if nb.shape[1] == 0:
                continue
            diff = np.abs(Xs[src][:, None, :] - Xs[idx][nb]).mean(axis=1)
            if ci == c:
                w -= diff.sum(axis=0)
            else:  # class c's points are misses for class ci's points
                w += (prior[c] / (1.0 - prior[ci])) * diff.sum(axis=0)
    return np.clip(w / X.shape[0], 0.0, None)


def initial_metric(problem: Any, init: Any) -> np.ndarray:
    """The start ``M_0`` of :func:`cccp` and :func:`sgd` (see the module docstring).

    Parameters
    ----------
    problem : GerrymanderingProblem
        The problem (its ``d``, ``X`` and ``y``).
    init : {"identity", "zeros", "relieff"} or (d, d) array_like
        The start: a name, or a PSD metric (checked).

    Returns
    -------
    (d, d) ndarray
        :math:`M_0`.

    Raises
    ------
    InputError
        For an unknown name, an invalid metric, or ReliefF weights that are all 0.
    """
    d = problem.d
    if isinstance(init, str):
        init = check_choice(init, "init", INITS)
        if init == "identity":
            return np.eye(d)
        if init == "zeros":
            return np.zeros((d, d))
        w = relieff_weights(problem.X, problem.y)
        if not np.any(w > 0):
            raise InputError("ReliefF gave every feature weight 0 on these data; use init='identity'.")
        return np.diag(w)
    return problem.check_metric(init, name="init")


def _finish(problem, M, report, t0, history, solver, extra=None):
    """The Solution at ``M``; its status the policy's, from ``report`` (the problem is not convex: never optimal)."""
    message = report.reason
    status, note = policy.decide(report, NoCertificate.NOT_TAKEN, convex=False)
    if note:
        message += f"; {note}"
    stats = {"time": time.perf_counter() - t0, "iterations": len(history) - 1, "history": history, **(extra or {})}
    return Solution(M=M, objective=problem.objective(M), status=status, backend="cvxpy" if solver == "cccp" else "numpy",
                    solver=solver, stats=stats, message=f"{status.message} ({message})")


def cccp(problem: Any, init: Any = "identity", max_iter: int = 50, tol: float = 1e-6, step_tol: float = 1e-7,
         solver: str | None = None, time_limit: float | None = None, verbose: bool = False) -> Solution:
    """The concave-convex procedure with certified convex steps (module docstring).

    Parameters
    ----------
    problem : GerrymanderingProblem
    init : {"identity", "zeros", "relieff"} or (d, d) PSD array
    max_iter : int
        Largest number of convex steps.
    tol : float
        The stationarity threshold of this non-convex problem (:mod:`metricopt.options`): stop when a step
        lowers the objective by at most ``tol`` relative to it. The last step's relative decrease is reported as
        ``stats["stationarity"]`` (with ``stats["stationarity_measure"]`` naming it).
    step_tol : float
        Certified relative gap each convex step must reach.
    solver : {"SCS", "CLARABEL"}, optional
        The exact backend's conic solver (default Clarabel).
    time_limit : float, optional
        Wall-clock seconds for the whole call: no step starts after them, each step's solve gets the
        seconds left as its own ``time_limit``, and the call returns within ``max(1.1 time_limit,
        time_limit + 5 s)`` (:mod:`metricopt._deadline`) with status ``time_limit`` when the time ran out
        (a step cut by it is not taken: the previous ``M`` is kept).
    verbose : bool, default False
        Print each step's objective, certified gap, working-set size and time.

    Returns
    -------
    Solution
        Status ``stationary`` (a fixed point of the correct sets, or a relative decrease below ``tol``),
        ``iteration_limit``, ``time_limit``, or the status of a step that could not be certified (its message
        says which);
        ``stats["history"]`` lists each step's objective, certified gap, working-set size and time.
    """
    max_iter = check_int(max_iter, "max_iter", low=1)
    tol = check_real(tol, "tol", low=0.0)
    if time_limit is not None:
        time_limit = check_real(time_limit, "time_limit", low=0.0, low_open=True)
    budget = Budget.start(time_limit)
    with budget.running():
        return _cccp(problem, init, max_iter, tol, step_tol, solver, time_limit, verbose, budget)


def _cccp(problem, init, max_iter, tol, step_tol, solver, time_limit, verbose, budget):
    """The loop of :func:`cccp` within ``budget`` (its deadlines in force)."""
    t0 = budget.t0
    limit_text = "the enclosing deadline" if time_limit is None else f"time limit {time_limit:g}s"
    M = initial_metric(problem, init)
    f = problem.objective(M)
    history = [{"step": 0, "objective": f, "time": 0.0}]
    report = SolverReport(Outcome.ITERATION_LIMIT, f"stopped after {max_iter} convex steps")
    rel_decrease = None
    for it in range(1, max_iter + 1):
        if budget.expired():
            report = SolverReport(Outcome.TIME_LIMIT, f"{limit_text} reached after {it - 1} steps")
            break
        step = problem.step(M)
        opts = {"init": M, "tol": step_tol, "solver_tol": 1e-9}
        if solver is not None:
            opts["solver"] = solver
        if budget.limited:
            opts["time_limit"] = max(budget.left(), 1e-3)  # the step's own deadlines stay within this one's
        sol = solve(step, backend="cvxpy", **opts)
        cert = sol.certificate
        entry = {"step": it, "step_status": str(sol.status), "step_objective": sol.objective,
                 "step_rel_gap": None if cert is None else cert.rel_gap,
                 "working_set": sol.stats.get("working_set_size"), "time": time.perf_counter() - t0}
        if sol.M is None or sol.status is not Status.OPTIMAL or cert is None:
            history.append({**entry, "objective": f})
            if sol.status is Status.TIME_LIMIT:
                report = SolverReport(Outcome.TIME_LIMIT, f"{limit_text} reached in convex step {it} ({sol.message}); "
                                                          "kept the previous M")
            else:  # the step's own status, passed on
                report = SolverReport.inherit(sol.status, f"convex step {it} was not certified ({sol.message}); kept "
                                                          "the previous M")
            break
        f_step_at_M = step.objective(M)
        if sol.objective > f_step_at_M:  # within the certified gap of the optimum, but no descent: keep M
            history.append({**entry, "objective": f})
            report = SolverReport(Outcome.STATIONARY, f"step {it} did not lower its majoriser (certified gap "
                                                      f"{cert.rel_gap:.1e}): M is its minimiser within that gap")
            break
        M_new = sol.M
        f_new = problem.objective(M_new)
        entry["objective"] = f_new
        history.append(entry)
        if verbose:
            print(f"[metricopt cccp] step {it:3d}  objective {f_new:.10g}  step gap {cert.rel_gap:.2e}  "
                  f"working set {entry['working_set']}  {entry['time']:.2f}s", flush=True)
        same_sets = np.array_equal(problem.latent(M_new).h_star, step.h_star)
        decrease = f - f_new
        M, f = M_new, f_new
        rel_decrease = decrease / max(abs(f), 1e-300)
        if same_sets:
            report = SolverReport(Outcome.STATIONARY, f"the correct sets are a fixed point after {it} steps: M "
                                                      f"minimises its own majoriser within the certified gap "
                                                      f"{cert.rel_gap:.1e}")
            break
        if decrease <= tol * max(abs(f), 1e-300):
            report = SolverReport(Outcome.STATIONARY, f"relative decrease {rel_decrease:.2e} <= "
                                                      f"tol {tol:.1e} after {it} steps")
            break
    return _finish(problem, M, report, t0, history, "cccp",
                   {"step_gaps": [h.get("step_rel_gap") for h in history[1:]], "stationarity": rel_decrease,
                    "stationarity_measure": "relative decrease of the objective in the last CCCP step (tol's "
                                            "measure)"})


def _batch_gradient(problem, M, rows):
    r"""``sum_{i in rows} (K_{i h*_i} - K_{i h^_i})``: the surrogate's subgradient over the batch."""
    res = problem.latent_rows(M, rows)
    w = np.concatenate([np.ones(len(rows)), -np.ones(len(rows))])
    anchors = np.concatenate([rows, rows])
    members = np.concatenate([res.h_star, res.h_hat])
    return problem.set_scatter(anchors, members, w)


def _regularizer_gradient(problem, M):
    reg, lam = problem.regularizer, problem.lam
    if reg == "frobenius":
        return lam * M
    if reg == "identity":
        return lam * (M - np.eye(problem.d))
    return lam * np.eye(problem.d)


def sgd_step(problem: Any, M: np.ndarray, rows: ArrayLike, t: int, method: str = "pegasos",
             eta0: float = 1.0) -> np.ndarray:
    """One projected subgradient step ``t >= 1`` on the points ``rows`` (module docstring):
    ``M <- P_psd(M - eta_t (grad R(M) + C s G))``, ``G`` the batch's surrogate subgradient, ``s = n / |rows|``
    (Pegasos) or 1 (the paper).

    Parameters
    ----------
    problem : GerrymanderingProblem
        The problem.
    M : (d, d) ndarray
        The current metric.
    rows : array_like of int
        The batch's points.
    t : int
        The step number, ``t >= 1``.
    method : {"pegasos", "paper"}, default "pegasos"
        The step-size rule and scaling (module docstring).
    eta0 : float, default 1.0
        Pegasos with the trace regulariser: ``eta_t = eta0 / sqrt(t)``.

    Returns
    -------
    (d, d) ndarray
        The new (PSD) metric.
    """
    G = _batch_gradient(problem, M, np.asarray(rows))
    if method == "paper":
        eta = 1.0 / t
        step = _regularizer_gradient(problem, M) + problem.C * G  # one example's C dW, unscaled (as printed)
    else:
        strong = problem.regularizer in ("frobenius", "identity")
        eta = 1.0 / (problem.lam * t) if strong else eta0 / np.sqrt(t)
        step = _regularizer_gradient(problem, M) + problem.C * (problem.n / len(rows)) * G
    return project_psd(symmetrize(M - eta * step))


def sgd(problem: Any, init: Any = "identity", method: str = "pegasos", n_epochs: int = 10, batch_size: int = 64,
        eta0: float | None = None, random_state: Any = 0, verbose: bool = False,
        time_limit: float | None = None) -> Solution:
    """Stochastic projected subgradient descent (module docstring).

    Parameters
    ----------
    problem : GerrymanderingProblem
    init : {"identity", "zeros", "relieff"} or (d, d) PSD array
    method : {"pegasos", "paper"}
    n_epochs : int
        Passes over the data (``n / batch_size`` steps each; ``"paper"``: ``n`` single-example steps).
    batch_size : int
    eta0 : float, optional
        Pegasos with the trace regulariser: ``eta_t = eta0 / sqrt(t)`` (default ``1 / (C n)``).
    random_state : int
    verbose : bool, default False
        Print each epoch's objective and time.
    time_limit : float, optional
        Wall-clock seconds: no batch starts after them; the epoch in progress is then closed (its
        objective evaluated) and the status is ``time_limit``.

    Returns
    -------
    Solution
        The best iterate among the epoch ends (full objective), status ``iteration_limit`` (``time_limit``
        when the time ran out).
    """
    method = check_choice(method, "method", ("pegasos", "paper"))
    n_epochs = check_int(n_epochs, "n_epochs", low=1)
    batch_size = min(check_int(batch_size, "batch_size", low=1), problem.n)
    if time_limit is not None:
        time_limit = check_real(time_limit, "time_limit", low=0.0, low_open=True)
    rng = np.random.default_rng(random_state)
    budget = Budget.start(time_limit)
    t0 = budget.t0
    n = problem.n
    M = initial_metric(problem, init)
    f = problem.objective(M)
    best = (f, M)
    history = [{"epoch": 0, "objective": f, "time": 0.0}]
    eta0 = 1.0 / (problem.C * n) if eta0 is None else check_real(eta0, "eta0", low=0.0, low_open=True)
    t, out_of_time = 0, False
    for epoch in range(1, n_epochs + 1):
        if method == "paper":
            batches = rng.permutation(n)[:, None]
        else:
            perm = rng.permutation(n)
            batches = [perm[s:s + batch_size] for s in range(0, n, batch_size)]
        for rows in batches:
            if budget.expired():
                out_of_time = True
                break
            t += 1
            M = sgd_step(problem, M, rows, t, method, eta0)
        f = problem.objective(M)
        history.append({"epoch": epoch, "objective": f, "steps": t, "time": time.perf_counter() - t0})
        if verbose:
            print(f"[metricopt sgd/{method}] epoch {epoch:3d}  objective {f:.10g}  {history[-1]['time']:.2f}s",
                  flush=True)
        if f < best[0]:
            best = (f, M)
        if out_of_time:
            break
    limit_text = "the enclosing deadline" if time_limit is None else f"time limit {time_limit:g}s"
    ran = f"{limit_text} reached in epoch {epoch}" if out_of_time else f"ran {n_epochs} epochs"
    message = (f"{ran} ({t} steps); stochastic subgradient steps have no stationarity test, "
               "the best epoch end is returned (solver='cccp' certifies each convex step)")
    report = SolverReport(Outcome.TIME_LIMIT if out_of_time else Outcome.ITERATION_LIMIT, message)
    return _finish(problem, best[1], report, t0, history, f"sgd-{method}", {"steps": t})
