"""The exact CVXPY backend: working sets vs the textbook SDP, SCS vs Clarabel, statuses,
size limits, option checking, ``to_cvxpy`` and the invariants of a returned Solution."""

from __future__ import annotations

import re

import cvxpy as cp
import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

import metricopt.backends.cvxpy_backend as cvxpy_backend
from metricopt import (
    LMNNProblem,
    MMCProblem,
    POLAProblem,
    InputError,
    ProblemTooLargeError,
    Solution,
    SolverError,
    Status,
    UnknownOptionError,
)
from metricopt.terms import Frobenius, Trace


@pytest.fixture(scope="module")
def iris42():
    """14 points of each iris class, standardized (4 features)."""
    X, y = load_iris(return_X_y=True)
    idx = np.concatenate([np.arange(c * 50, c * 50 + 14) for c in range(3)])
    return StandardScaler().fit_transform(X[idx]), y[idx]


@pytest.fixture(scope="module")
def iris21():
    """7 points of each iris class, 3 standardized features: small enough for the full SDP."""
    X, y = load_iris(return_X_y=True)
    idx = np.concatenate([np.arange(c * 50, c * 50 + 7) for c in range(3)])
    return StandardScaler().fit_transform(X[idx][:, :3]), y[idx]


def _problems(X, y):
    return {
        "lmnn": lambda: LMNNProblem(X, y, k=3),
        "lmnn_frobenius": lambda: LMNNProblem(X, y, k=3, regularizer=Frobenius(0.1)),
        "lmnn_trace": lambda: LMNNProblem(X, y, k=3, regularizer=Trace(0.1)),
        "lmnn_trace_frobenius": lambda: LMNNProblem(X, y, k=3, regularizer=[Trace(0.1), Frobenius(0.05)]),
        "mmc": lambda: MMCProblem(X, y),
        "mmc_diagonal": lambda: MMCProblem(X, y, diagonal=True),
        "pola_soft": lambda: POLAProblem(X, y, C=1.0),
    }


# problems whose optimal M is unique (strongly convex in M)
_UNIQUE_M = {"lmnn_frobenius", "lmnn_trace_frobenius", "pola_soft"}


# ---------------------------------------------------------------------------
# working set vs textbook SDP
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("solver", ["SCS", "CLARABEL"])
def test_working_set_equals_full_sdp(iris21, solver):
    X, y = iris21
    p = LMNNProblem(X, y, k=2, mu=0.5)
    assert p.n_triplets == 21 * 2 * 14
    ws = p.solve(solver=solver)
    full = p.solve(solver=solver, working_set=False)
    assert ws.status is Status.OPTIMAL, ws.message
    assert full.status is Status.OPTIMAL, full.message
    assert ws.objective == pytest.approx(full.objective, rel=1e-6)
    # working-set statistics
    assert ws.stats["rounds"] >= 1
    assert 0 < ws.stats["working_set_size"] <= p.n_triplets
    assert len(ws.stats["history"]) == ws.stats["rounds"]
    assert ws.stats["history"][-1]["added"] == 0  # the loop stopped because nothing was violated
    # the textbook program holds every triplet and needs one round
    assert full.stats["rounds"] == 1
    assert full.stats["working_set_size"] == p.n_triplets


# ---------------------------------------------------------------------------
# SCS vs Clarabel
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["lmnn", "lmnn_frobenius", "lmnn_trace", "lmnn_trace_frobenius", "mmc", "mmc_diagonal", "pola_soft"]
)
def test_scs_and_clarabel_agree(iris42, name):
    X, y = iris42
    p = _problems(X, y)[name]()
    a = p.solve(solver="SCS")
    b = p.solve(solver="CLARABEL")
    for sol, solver in ((a, "SCS"), (b, "CLARABEL")):
        assert sol.status is Status.OPTIMAL, sol.message
        assert sol.solver == solver and sol.backend == "cvxpy"
        assert sol.certificate.rel_gap <= 1e-6
    assert a.objective == pytest.approx(b.objective, rel=1e-6)
    if name in _UNIQUE_M:
        np.testing.assert_allclose(a.M, b.M, atol=1e-4 * max(1.0, np.abs(b.M).max()))
    if name == "pola_soft":
        assert a.variables["b"] == pytest.approx(b.variables["b"], rel=1e-4)


def test_default_solvers(iris42):
    X, y = iris42
    assert LMNNProblem(X, y, k=3).solve().solver == "SCS"
    assert MMCProblem(X[8:20], y[8:20]).solve().solver == "CLARABEL"
    assert POLAProblem(X[8:20], y[8:20], C=1.0).solve().solver == "CLARABEL"


def test_solver_names_are_case_insensitive():
    X = np.array([[0.0], [1.0], [3.0], [4.0]])
    sol = LMNNProblem(X, [0, 0, 1, 1], k=1).solve(solver="clarabel", backend="CVXPY")
    assert sol.solver == "CLARABEL"
    assert sol.objective == pytest.approx(2.0 / 3.0, rel=1e-6)  # see test_problems: hand optimum


# ---------------------------------------------------------------------------
# status handling
# ---------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate")
@pytest.mark.parametrize("name", ["lmnn", "lmnn_frobenius", "mmc", "pola_soft"])
def test_iteration_limited_scs_is_not_optimal_unless_certified(iris42, name):
    X, y = iris42
    p = _problems(X, y)[name]()
    sol = p.solve(solver="SCS", max_iter=2)
    if sol.status is Status.OPTIMAL:
        assert sol.certificate is not None and sol.certificate.rel_gap <= 1e-6
    else:
        assert sol.status in (Status.ITERATION_LIMIT, Status.OPTIMAL_INACCURATE)
        assert sol.M is not None
        with pytest.raises(SolverError, match=re.escape(f"solve ended with status '{sol.status.code}'")):
            sol.raise_for_status()
        # the certificate, when present, agrees that this point is not certified optimal
        if sol.certificate is not None:
            assert sol.certificate.rel_gap > 1e-6


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate")
def test_iteration_limited_scs_on_diagonal_mmc_never_claims_a_point_it_lacks(iris42):
    # SCS stopped after 2 iterations on the diagonal MMC program may leave CVXPY unable to
    # read a status at all; metricopt must then report an error without a metric, never
    # "optimal", and otherwise follow the rule of the test above.
    X, y = iris42
    sol = MMCProblem(X, y, diagonal=True).solve(solver="SCS", max_iter=2)
    assert sol.status is not Status.OPTIMAL or sol.certificate.rel_gap <= 1e-6
    if sol.status is Status.ERROR:
        assert sol.M is None and np.isnan(sol.objective)
        assert "SCS failed" in sol.message
        with pytest.raises(SolverError, match=re.escape("solve ended with status 'error'")):
            sol.raise_for_status()
    elif sol.status is not Status.OPTIMAL:
        assert sol.status in (Status.ITERATION_LIMIT, Status.OPTIMAL_INACCURATE)
        assert sol.M is not None


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate")
def test_two_scs_iterations_on_lmnn_are_not_optimal(iris42):
    X, y = iris42
    sol = LMNNProblem(X, y, k=3).solve(solver="SCS", max_iter=2)
    assert sol.status is not Status.OPTIMAL
    assert sol.status in (Status.ITERATION_LIMIT, Status.OPTIMAL_INACCURATE)
    assert sol.certificate.rel_gap > 1e-6
    assert not sol.is_optimal


def test_certificate_decides_status(iris42):
    X, y = iris42
    p = LMNNProblem(X, y, k=3)
    # an unreachable certificate tolerance demotes the solver's "optimal"
    sol = p.solve(solver="CLARABEL", tol=1e-15)
    assert sol.certificate.rel_gap > 1e-15
    assert sol.status is Status.OPTIMAL_INACCURATE
    assert "exceeds tol" in sol.message
    # no certificate: the solver's own status stands
    sol = p.solve(solver="CLARABEL", certify=None)
    assert sol.status is Status.OPTIMAL
    assert sol.certificate is None
    assert "certificate_rel_gap" not in sol.stats


@pytest.mark.parametrize("solver", ["SCS", "CLARABEL"])
def test_optimal_status_implies_certified_gap(iris42, solver):
    X, y = iris42
    for name, make in _problems(X, y).items():
        if name not in ("lmnn", "mmc", "pola_soft"):
            continue
        sol = make().solve(solver=solver)
        assert sol.status is Status.OPTIMAL, (name, sol.message)
        assert sol.certificate.rel_gap <= 1e-6
        assert sol.stats["certificate_rel_gap"] == sol.certificate.rel_gap
        assert sol.raise_for_status() is sol


@pytest.mark.parametrize("solver", ["SCS", "CLARABEL"])
def test_pola_hard_margin_infeasible(solver):
    # x = 0, 1, 2 with labels 0, 1, 0: the similar pair (0, 2) is farther apart (4) than the
    # dissimilar pairs (1 each), so b - 4m >= 1 and m - b >= 1 cannot hold together.
    p = POLAProblem(np.array([[0.0], [1.0], [2.0]]), [0, 1, 0])
    sol = p.solve(solver=solver)
    assert sol.status is Status.INFEASIBLE
    assert sol.M is None and sol.L is None
    assert np.isnan(sol.objective)
    assert "pass C" in sol.message
    assert "C=1.0" in sol.message
    with pytest.raises(SolverError, match=re.escape("solve ended with status 'infeasible'")):
        sol.raise_for_status()


def test_raise_for_status_on_hand_made_solutions():
    for status in Status:
        sol = Solution(M=None, objective=float("nan"), status=status, backend="cvxpy", solver="SCS")
        if status is Status.OPTIMAL:
            assert sol.raise_for_status() is sol
        else:
            with pytest.raises(SolverError, match=re.escape(f"solve ended with status '{status.code}'")):
                sol.raise_for_status()


# ---------------------------------------------------------------------------
# size limits
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("limit", ["MAX_ENTRIES", "MAX_DIM"])
@pytest.mark.parametrize("name", ["lmnn", "mmc", "pola_soft"])
def test_too_large_names_the_jax_backend(iris42, monkeypatch, limit, name):
    X, y = iris42
    p = _problems(X, y)[name]()
    monkeypatch.setattr(cvxpy_backend, limit, 3)
    with pytest.raises(ProblemTooLargeError, match=re.escape("backend='jax'")) as info:
        p.solve()
    assert isinstance(info.value, ValueError)
    assert "too large for the exact CVXPY backend" in str(info.value)
    assert f"d={p.d} features" in str(info.value)


def test_too_large_for_the_full_sdp_but_not_the_working_set(iris21, monkeypatch):
    X, y = iris21
    p = LMNNProblem(X, y, k=2)
    # the full program has n_triplets * d^2 constraint entries; allow a bit less than that
    monkeypatch.setattr(cvxpy_backend, "MAX_ENTRIES", p.n_triplets * p.d**2 - 1)
    with pytest.raises(ProblemTooLargeError, match=re.escape("backend='jax'")):
        p.solve(working_set=False)
    sol = p.solve()
    assert sol.status is Status.OPTIMAL
    assert sol.stats["working_set_size"] < p.n_triplets


# ---------------------------------------------------------------------------
# unknown options
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_lmnn():
    return LMNNProblem(np.array([[0.0], [1.0], [3.0], [4.0]]), [0, 0, 1, 1], k=1)


def test_unknown_option(tiny_lmnn):
    msg = (
        "unknown option(s) for backend='cvxpy': ['foo', 'max_iters']; accepted: solver, tol, solver_tol, max_iter, "
        "max_rounds, working_set, min_add, certify, init, verbose, time_limit."
    )
    with pytest.raises(UnknownOptionError, match=re.escape(msg)):
        tiny_lmnn.solve(max_iters=10, foo=1)


def test_unknown_solver(tiny_lmnn):
    with pytest.raises(UnknownOptionError, match=re.escape("unknown solver 'MOSEK'; choose one of: 'SCS', 'CLARABEL'.")):
        tiny_lmnn.solve(solver="mosek")


def test_unknown_backend(tiny_lmnn):
    with pytest.raises(UnknownOptionError, match=re.escape("unknown backend 'no_such_backend'; choose one of: ")):
        tiny_lmnn.solve(backend="no_such_backend")
    with pytest.raises(UnknownOptionError, match=r"'cvxpy'"):
        tiny_lmnn.solve(backend="no_such_backend")


def test_unknown_option_errors_are_value_errors(tiny_lmnn):
    with pytest.raises(ValueError):
        tiny_lmnn.solve(bogus=True)


# ---------------------------------------------------------------------------
# to_cvxpy
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["lmnn", "lmnn_frobenius", "mmc", "pola_soft"])
def test_to_cvxpy_value_matches_solution(iris21, name):
    X, y = iris21
    p = _problems(X, y)[name]()
    prog, V = p.to_cvxpy()
    assert isinstance(prog, cp.Problem)
    assert "M" in V
    assert prog.is_dcp()
    prog.solve(solver="CLARABEL")
    assert prog.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
    sol = p.solve(solver="CLARABEL")
    assert sol.status is Status.OPTIMAL
    assert prog.value * p.obj_scale == pytest.approx(sol.objective, rel=1e-6)


def test_to_cvxpy_lmnn_has_one_slack_per_triplet(iris21):
    X, y = iris21
    p = LMNNProblem(X, y, k=2)
    prog, _ = p.to_cvxpy()
    xi = [v for v in prog.variables() if v.name() == "xi"]
    assert len(xi) == 1 and xi[0].size == p.n_triplets


# ---------------------------------------------------------------------------
# invariants of returned solutions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["lmnn", "lmnn_trace_frobenius", "mmc", "mmc_diagonal", "pola_soft"])
def test_solution_invariants(iris42, name):
    X, y = iris42
    p = _problems(X, y)[name]()
    sol = p.solve()
    assert sol.status is Status.OPTIMAL
    M = sol.M
    assert M.shape == (p.d, p.d)
    np.testing.assert_array_equal(M, M.T)
    assert np.linalg.eigvalsh(M).min() >= -1e-10 * max(1.0, np.abs(M).max())
    np.testing.assert_allclose(sol.L.T @ sol.L, M, atol=1e-10 * max(1.0, np.abs(M).max()))
    assert sol.objective == pytest.approx(p.objective(M, **sol.variables), rel=1e-12)
    assert sol.stats["solver_objective"] == pytest.approx(sol.objective, rel=1e-5)
    assert sol.stats["max_violation"] <= 1e-9
    assert sol.certificate.upper == pytest.approx(sol.objective, rel=1e-9)
    if name == "mmc_diagonal":
        np.testing.assert_array_equal(M, np.diag(np.diag(M)))
    if name.startswith("mmc"):
        assert float(np.sum(p.similar_matrix * M)) <= 1.0 + 1e-9
    if name == "pola_soft":
        assert sol.variables["b"] >= 1.0


def test_exact_polish_from_a_first_order_solution_reaches_the_exact_optimum():
    """backend='cvxpy' with init=<jax solution>: working set from the triplets near its margin."""
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    p = LMNNProblem(X, y)
    rough = p.solve(backend="jax", tol=1e-3)
    assert rough.certificate.rel_gap <= 1e-3
    polished = p.solve(init=rough)
    cold = p.solve()
    assert polished.status is Status.OPTIMAL and polished.certificate.rel_gap <= 1e-7
    assert polished.objective == pytest.approx(cold.objective, rel=1e-7)
    assert polished.objective <= rough.objective
    # starting near the optimum needs a much smaller working set than starting from M = I
    assert polished.stats["working_set_size"] < cold.stats["working_set_size"]


def test_exact_backend_starts_a_large_problem_from_a_first_order_point(monkeypatch):
    """init="auto" (the default): above POLISH_ABOVE constraint entries the working set starts from the JAX
    backend's point, and the answer is the same certified optimum as from M = I (init=None)."""
    from metricopt.backends import cvxpy_backend

    X, y = load_iris(return_X_y=True)
    p = LMNNProblem(StandardScaler().fit_transform(X[::2]), y[::2])
    assert p.n_triplets * p.d ** 2 <= cvxpy_backend.POLISH_ABOVE  # small: M = I by default
    cold = p.solve()
    assert cold.stats["init"] == "identity"
    monkeypatch.setattr(cvxpy_backend, "POLISH_ABOVE", 0)
    auto = p.solve()
    assert auto.stats["init"].startswith("first-order point (backend='jax', tol 0.001: optimal")
    assert p.solve(init=None).stats["init"] == "identity"
    assert p.solve(init=np.eye(p.d)).stats["init"] == "given metric"
    assert auto.status is Status.OPTIMAL and auto.certificate.rel_gap <= 1e-7
    assert auto.objective == pytest.approx(cold.objective, rel=1e-7)
    assert auto.stats["working_set_size"] < cold.stats["working_set_size"]


def test_exact_polish_rejects_a_bad_init(iris42):
    X, y = iris42
    p = LMNNProblem(X, y)
    with pytest.raises(InputError, match=re.escape("init must have shape (4, 4)")):
        p.solve(init=np.eye(3))


def test_time_limit_stops_the_working_set_loop_between_rounds(iris42):
    """``time_limit`` (as on the JAX backend): no new working-set round after it; the last round's metric
    comes back ``time_limit`` with the reason, never ``optimal`` while violators are left out."""
    problem = LMNNProblem(*iris42, k=3)
    full = problem.solve(backend="cvxpy")
    assert full.status == Status.OPTIMAL and full.stats["rounds"] > 1
    cut = problem.solve(backend="cvxpy", time_limit=1e-9)
    assert cut.status == Status.TIME_LIMIT and cut.stats["rounds"] == 1
    # the round ends on SCS's own time limit, with the violators it had no time to add, or (no time for the search
    # of all triplets after it) before it starts: the start comes back unsolved
    assert ("time limit of 1e-09 s reached after 1 working-set round(s)" in cut.message
            or "SCS stopped at its time limit" in cut.message
            or "returned the start (identity) unsolved; 1 working-set round(s)" in cut.message)
    assert cut.objective >= full.objective - 1e-9 * abs(full.objective)
    with pytest.raises(InputError, match="time_limit"):
        problem.solve(backend="cvxpy", time_limit=0)


@pytest.mark.parametrize("solver, given, passed", [("CLARABEL", None, 500), ("CLARABEL", 1234, 1234),
                                                   ("SCS", None, 100_000), ("SCS", 777, 777)])
def test_max_iter_reaches_the_conic_solver_as_given(tiny_lmnn, monkeypatch, solver, given, passed):
    """No silent cap: the user's max_iter is the solver's (Clarabel's was clamped to 500); the default is
    the documented DEFAULT_MAX_ITER of each solver."""
    import cvxpy as cp

    seen = []
    real = cp.Problem.solve

    def spy(self, *args, **kwargs):
        seen.append(kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cp.Problem, "solve", spy)
    tiny_lmnn.solve(solver=solver, max_iter=given, certify=None)
    key = "max_iters" if solver == "SCS" else "max_iter"
    assert seen and all(kw.get(key) == passed for kw in seen if kw.get("solver") == solver)


def test_program_size_counts_every_triplet_without_forming_them():
    """``program_size`` (the demo's rule, the size check) counts a triplet problem's triplets by formula; the count
    equals the formed triplets for LMNN, multi-metric LMNN and weighted LMNN."""
    import metricopt as mo
    from metricopt.backends.cvxpy_backend import program_size

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 3)), np.arange(30) % 3
    problems = [mo.LMNNProblem(X, y, k=2), mo.MultiMetricLMNNProblem(X, y, k=2),
                mo.LMNNProblem(X, y, k=2, sample_weight=rng.uniform(0.5, 1.5, 30))]
    for p in problems:
        formed = sum(len(t.all_triplets(p)) for t in p.terms if t.uses_working_set)
        rows, width = program_size(p)
        assert rows == formed and width == p.d ** 2, type(p).__name__
