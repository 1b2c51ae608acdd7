"""Known optima of the declarative problems (LMNN, MMC, POLA) and brute-force checks
of the quantities a problem computes (objective, target neighbours, triplet counts).

Every hand-derived optimum below is derived in a comment next to its test and is
checked with both conic solvers (SCS and Clarabel).
"""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

import metricopt
from metricopt import LMNNProblem, MMCProblem, POLAProblem, Status
from metricopt.terms import TERMS, Frobenius, Term, Trace

SOLVERS = ["SCS", "CLARABEL"]


def _solve_optimal(problem, solver, **kw):
    sol = problem.solve(solver=solver, **kw)
    assert sol.status is Status.OPTIMAL, sol.message
    assert sol.solver == solver
    return sol


# ---------------------------------------------------------------------------
# LMNN in one dimension: M = [[m]], m >= 0, the objective is piecewise linear
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("solver", SOLVERS)
def test_lmnn_1d_hand_optimum(solver):
    # X = 0, 1 | 3, 4 (classes 0 | 1), k = 1, mu = 1/2.
    # Target neighbours: 0<->1 and 2<->3, each at squared distance 1, so the pull
    # term is sum_{ij} d_ij = 4 m.  Triplets (i, j, l) with a_il = (x_i - x_l)^2 and
    # c = a_il - a_ij:   i=0: l=2,3 -> c = 8, 15;   i=1: l=2,3 -> c = 3, 8;
    #                    i=2: l=0,1 -> c = 8, 3;    i=3: l=0,1 -> c = 15, 8.
    # f(m) = (1/2) 4m + (1/2) sum_t [1 - c_t m]_+ .
    # Right slopes: on (0, 1/15): 2 - (8+15+3+8+8+3+15+8)/2 = -32; on (1/15, 1/8): -17;
    # on (1/8, 1/3): 2 - (3+3)/2 = -1; beyond 1/3: +2.  Unique minimiser m* = 1/3,
    # where every hinge is exactly 0: f* = 2 * (1/3) = 2/3.
    X = np.array([[0.0], [1.0], [3.0], [4.0]])
    y = np.array([0, 0, 1, 1])
    p = LMNNProblem(X, y, k=1, mu=0.5)
    assert p.target_neighbors.tolist() == [[1], [0], [3], [2]]
    assert p.n_triplets == 8
    assert p.objective([[1.0 / 3.0]]) == pytest.approx(2.0 / 3.0, rel=1e-14)
    assert p.objective([[0.0]]) == pytest.approx(4.0, rel=1e-14)  # 8 hinges of 1, times mu
    sol = _solve_optimal(p, solver)
    assert sol.objective == pytest.approx(2.0 / 3.0, rel=1e-6)
    np.testing.assert_allclose(sol.M, [[1.0 / 3.0]], rtol=1e-6)


def _lmnn_1d_pieces(x, y, k, mu):
    """Brute force: pull coefficient A and triplet coefficients c_t with
    f(m) = (1 - mu) A m + mu sum_t [1 - c_t m]_+  (explicit loops, own neighbour search)."""
    n = len(x)
    T = []
    for i in range(n):
        same = [j for j in range(n) if j != i and y[j] == y[i]]
        T.append(sorted(same, key=lambda j: ((x[i] - x[j]) ** 2, j))[:k])
    A = sum((x[i] - x[j]) ** 2 for i in range(n) for j in T[i])
    c = [
        (x[i] - x[l]) ** 2 - (x[i] - x[j]) ** 2
        for i in range(n)
        for j in T[i]
        for l in range(n)
        if y[l] != y[i]
    ]
    return A, np.array(c)


@pytest.mark.parametrize("solver", SOLVERS)
def test_lmnn_1d_breakpoint_optimum(solver):
    # f(m) is convex piecewise linear on m >= 0 with breakpoints m = 1/c_t (c_t > 0),
    # so its minimum is attained at m = 0 or at one of these breakpoints: evaluate f
    # at every candidate and keep the best.  Uniqueness: the slope just left of the
    # minimiser is < 0 and the slope just right of it is > 0.
    rng = np.random.default_rng(7)
    x = np.round(rng.normal(size=14) * 2.0, 3)
    y = np.array([0] * 5 + [1] * 5 + [2] * 4)
    x[y == 1] += 1.0
    k, mu = 2, 0.4
    A, c = _lmnn_1d_pieces(x, y, k, mu)

    def f(m):
        return (1 - mu) * A * m + mu * float(np.sum(np.maximum(1.0 - c * m, 0.0)))

    def slope(m):  # right derivative: hinges still positive just right of m contribute -mu c_t
        return (1 - mu) * A - mu * float(np.sum(c[1.0 - c * m > 1e-12]))

    cands = np.concatenate([[0.0], 1.0 / c[c > 0]])
    vals = np.array([f(m) for m in cands])
    m_star, f_star = cands[np.argmin(vals)], vals.min()
    assert m_star > 0
    assert slope(m_star) > 0 and slope(m_star * (1 - 1e-9)) < 0  # unique minimiser

    p = LMNNProblem(x[:, None], y, k=k, mu=mu)
    assert p.objective([[m_star]]) == pytest.approx(f_star, rel=1e-12)
    sol = _solve_optimal(p, solver)
    assert sol.objective == pytest.approx(f_star, rel=1e-6)
    np.testing.assert_allclose(sol.M, [[m_star]], rtol=1e-5)


# ---------------------------------------------------------------------------
# MMC: one dissimilar direction -> Cauchy-Schwarz / generalised eigenvalue
# ---------------------------------------------------------------------------

# x0, x1, x2 are linked by similar pairs; x3 is dissimilar to x0.
_MMC_X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 1.0]])
_MMC_SIM = [[0, 1], [0, 2], [1, 2]]


def _scatter(X, pairs):
    D = np.array([X[a] - X[b] for a, b in pairs])
    return D.T @ D


@pytest.mark.parametrize("solver", SOLVERS)
def test_mmc_one_dissimilar_pair_full(solver):
    # max sqrt(<v v^T, M>) s.t. <S, M> <= 1, M PSD, v = x0 - x3 = (-3, -1).
    # S = e1 e1^T + 4 e2 e2^T + (1,-2)(1,-2)^T = [[2, -2], [-2, 8]] (positive definite).
    # Writing M = sum_r u_r u_r^T: <vv^T, M> = sum (u_r^T v)^2 <= sum (u_r^T S u_r)(v^T S^-1 v)
    # <= v^T S^-1 v (Cauchy-Schwarz in the S inner product), with equality only for
    # M = w w^T, w = S^-1 v / sqrt(v^T S^-1 v).  So the optimum is sqrt(v^T S^-1 v) =
    # sqrt(lambda_max(v v^T, S)) = sqrt(86/12), unique M, and metricopt returns its negative.
    X = _MMC_X
    S = _scatter(X, _MMC_SIM)
    np.testing.assert_allclose(S, [[2.0, -2.0], [-2.0, 8.0]])
    v = X[0] - X[3]
    q = float(v @ np.linalg.solve(S, v))
    assert q == pytest.approx(86.0 / 12.0, rel=1e-14)
    import scipy.linalg

    assert scipy.linalg.eigh(np.outer(v, v), S, eigvals_only=True)[-1] == pytest.approx(q, rel=1e-12)
    w = np.linalg.solve(S, v)
    M_star = np.outer(w, w) / q

    p = MMCProblem(X, similar=_MMC_SIM, dissimilar=[[0, 3]])
    assert p.objective(M_star) == pytest.approx(-np.sqrt(q), rel=1e-14)
    sol = _solve_optimal(p, solver)
    assert sol.objective == pytest.approx(-np.sqrt(q), rel=1e-6)
    np.testing.assert_allclose(sol.M, M_star, atol=2e-5)
    assert float(np.sum(S * sol.M)) <= 1.0 + 1e-9  # budget respected


@pytest.mark.parametrize("solver", SOLVERS)
def test_mmc_one_dissimilar_pair_diagonal(solver):
    # Diagonal M = diag(m), m >= 0: maximise sum_i m_i v_i^2 s.t. sum_i m_i S_ii <= 1, an LP
    # whose optimum puts the whole budget on argmax_i v_i^2 / S_ii.  v^2 = (9, 1),
    # diag(S) = (2, 8): ratios (4.5, 0.125), so m* = (1/2, 0) and the optimum is sqrt(4.5).
    p = MMCProblem(_MMC_X, similar=_MMC_SIM, dissimilar=[[0, 3]], diagonal=True)
    sol = _solve_optimal(p, solver)
    assert sol.objective == pytest.approx(-np.sqrt(4.5), rel=1e-6)
    np.testing.assert_allclose(sol.M, np.diag([0.5, 0.0]), atol=1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
def test_mmc_parallel_dissimilar_pairs(solver):
    # Dissimilar differences all parallel to v = (3, 1): x3 - x0 = v, x4 - x0 = 2 v,
    # x5 - x1 = -v/2.  Then sum_t sqrt(d_M(t)) = (1 + 2 + 1/2) sqrt(v^T M v), and the
    # one-pair argument above gives the optimum 3.5 sqrt(v^T S^-1 v), at the same M*.
    v = np.array([3.0, 1.0])
    X = np.vstack([_MMC_X[:3], _MMC_X[0] + v, _MMC_X[0] + 2 * v, _MMC_X[1] - 0.5 * v])
    S = _scatter(X, _MMC_SIM)
    q = float(v @ np.linalg.solve(S, v))
    w = np.linalg.solve(S, v)
    p = MMCProblem(X, similar=_MMC_SIM, dissimilar=[[0, 3], [0, 4], [1, 5]])
    sol = _solve_optimal(p, solver)
    assert sol.objective == pytest.approx(-3.5 * np.sqrt(q), rel=1e-6)
    np.testing.assert_allclose(sol.M, np.outer(w, w) / q, atol=2e-5)


# ---------------------------------------------------------------------------
# POLA in one dimension: variables (m, b), hard and soft margins
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(
    "x, y, f_hand",
    [([0.0, 1.0, 3.0], [0, 0, 1], 29 / 18), ([0.0, 0.5, 2.0, 2.2], [0, 0, 1, 1], 41 / 32)],
)
def test_pola_hard_margin_1d(solver, x, y, f_hand):
    # min (m^2 + b^2)/2 s.t. b - m s_t >= 1 (similar), m d_t - b >= 1 (dissimilar), b >= 1.
    # Only s = max similar and D = min dissimilar squared distances bind: the feasible set
    # is {b >= 1 + m s, m >= (1 + b)/D}.  The projections of the origin onto either line
    # violate the other constraint, so the optimum is their intersection:
    #     m* = 2 / (D - s),  b* = (D + s) / (D - s),
    # with multipliers lambda_2 = (m* + b* s)/(D - s) > 0, lambda_1 = b* + lambda_2 > 0 (KKT).
    # Case 1: s = 1, D = 4 -> m* = 2/3, b* = 5/3, f* = 29/18.
    # Case 2: s = 0.25, D = 2.25 -> m* = 1, b* = 5/4, f* = 41/32.
    x = np.asarray(x)
    yy = np.asarray(y)
    s = max((x[a] - x[b]) ** 2 for a, b in itertools.combinations(range(len(x)), 2) if yy[a] == yy[b])
    D = min((x[a] - x[b]) ** 2 for a, b in itertools.combinations(range(len(x)), 2) if yy[a] != yy[b])
    m_star, b_star = 2.0 / (D - s), (D + s) / (D - s)
    f_star = 0.5 * (m_star**2 + b_star**2)
    assert f_star == pytest.approx(f_hand, rel=1e-14)
    p = POLAProblem(x[:, None], yy)
    # the default b for a hard-margin objective is the smallest feasible one, 1 + m s
    assert p.objective([[m_star]]) == pytest.approx(f_star, rel=1e-14)
    assert p.objective([[m_star]], b=b_star) == pytest.approx(f_star, rel=1e-14)
    sol = _solve_optimal(p, solver)
    assert sol.objective == pytest.approx(f_star, rel=1e-6)
    np.testing.assert_allclose(sol.M, [[m_star]], rtol=1e-6)
    assert sol.variables["b"] == pytest.approx(b_star, rel=1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
def test_pola_soft_margin_1d_small_C(solver):
    # x = 0, 1 | 3, C = 0.1: f(m, b) = (m^2 + b^2)/2 + C([1 - b + m]_+ + [1 + b - 9m]_+ + [1 + b - 4m]_+).
    # With b = 1 the m-slope is m + C(1 - 9 - 4) < 0 on (0, 2/9), m + C(1 - 4) = m - 0.3 on
    # (2/9, 1/2) and m + C > 0 beyond 1/2: the m-minimiser is m* = 0.3.  At m* the b-slope is
    # b + C(-1 + 1) = b > 0 for every b >= 1, so b* = 1 (the bound).  (m, b) -> f is strongly
    # convex, so (0.3, 1) is the unique optimum: f* = (0.09 + 1)/2 + 0.1 (0.3 + 0.8) = 0.655.
    p = POLAProblem(np.array([[0.0], [1.0], [3.0]]), [0, 0, 1], C=0.1)
    assert p.objective([[0.3]], b=1.0) == pytest.approx(0.655, rel=1e-14)
    sol = _solve_optimal(p, solver)
    assert sol.objective == pytest.approx(0.655, rel=1e-6)
    np.testing.assert_allclose(sol.M, [[0.3]], rtol=1e-6)
    assert sol.variables["b"] == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
def test_pola_soft_margin_large_C_equals_hard_margin(solver):
    # The hard-margin optimum of case 1 above has KKT multipliers lambda_1 = 22/9 (the
    # similar pair) and lambda_2 = 7/9 (the nearest dissimilar pair), the others 0.  For
    # C >= 22/9 the soft-margin dual box 0 <= alpha <= C contains them, so the soft-margin
    # optimum equals the hard-margin one: m* = 2/3, b* = 5/3, f* = 29/18 (all slacks 0).
    p = POLAProblem(np.array([[0.0], [1.0], [3.0]]), [0, 0, 1], C=10.0)
    sol = _solve_optimal(p, solver)
    assert sol.objective == pytest.approx(29 / 18, rel=1e-6)
    np.testing.assert_allclose(sol.M, [[2 / 3]], rtol=1e-6)


def test_pola_soft_margin_objective_uses_the_exact_best_b():
    # For fixed M the soft-margin objective is piecewise quadratic in b.  At m = 2/3, C = 10
    # (pair distances d = 2/3 similar, 6 and 8/3 dissimilar):
    #     g(b) = (m^2 + b^2)/2 + 10 ([5/3 - b]_+ + [b - 5]_+ + [b - 5/3]_+),
    # whose slope is 5/3 - 10 < 0 left of b = 5/3 and 5/3 + 10 > 0 right of it: the best b is
    # exactly 5/3, where every hinge is 0, and min_b g = (4/9 + 25/9)/2 = 29/18.  The docs say
    # objective(M) uses "the best b for M" (objective: "float64 exact"), so it should
    # reproduce this to float64 accuracy, not to the tolerance of a bounded scalar search.
    p = POLAProblem(np.array([[0.0], [1.0], [3.0]]), [0, 0, 1], C=10.0)
    assert p.objective([[2 / 3]], b=5 / 3) == pytest.approx(29 / 18, rel=1e-14)
    assert p.objective([[2 / 3]]) == pytest.approx(29 / 18, rel=1e-10)


# ---------------------------------------------------------------------------
# pinned optimum on a real data set
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def iris_std():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.mark.parametrize("solver", SOLVERS)
def test_iris_lmnn_pinned_optimum(iris_std, solver):
    X, y = iris_std
    p = LMNNProblem(X, y, k=3, mu=0.5)
    sol = _solve_optimal(p, solver)
    assert sol.objective == pytest.approx(234.3345137, rel=1e-6)
    assert p.objective(sol.M) == pytest.approx(sol.objective, rel=1e-12)


# ---------------------------------------------------------------------------
# brute-force checks of what a problem computes
# ---------------------------------------------------------------------------


def _random_psd(rng, d, scale=1.0):
    A = rng.normal(size=(d, d))
    return scale * (A @ A.T) / d


def _brute_lmnn_objective(X, y, T, mu, M, regs=()):
    n = X.shape[0]
    pull = hinge = 0.0
    n_active = 0

    def dist(a, b):
        diff = X[a] - X[b]
        return float(diff @ M @ diff)

    for i in range(n):
        for j in T[i]:
            dij = dist(i, j)
            pull += dij
            for l in range(n):
                if y[l] != y[i]:
                    h = 1.0 + dij - dist(i, l)
                    if h > 0:
                        hinge += h
                        n_active += 1
    reg = 0.0
    for r in regs:
        if isinstance(r, Frobenius):
            reg += 0.5 * r.lam * float(np.sum(M * M))
        elif isinstance(r, Trace):
            reg += r.lam * float(np.trace(M))
        else:  # pragma: no cover
            raise AssertionError(r)
    return (1 - mu) * pull + mu * hinge + reg, n_active


@pytest.mark.parametrize("regs", [(), (Frobenius(0.3),), (Trace(0.2), Frobenius(0.1))])
def test_lmnn_objective_equals_brute_force_over_all_triplets(regs):
    rng = np.random.default_rng(0)
    n, d, k, mu = 18, 3, 2, 0.3
    X = rng.normal(size=(n, d))
    y = np.repeat([0, 1, 2], 6)
    X[y == 1] += 0.7
    M = _random_psd(rng, d, scale=0.5)
    p = LMNNProblem(X, y, k=k, mu=mu, regularizer=list(regs) or None)
    expected, n_active = _brute_lmnn_objective(X, y, p.target_neighbors, mu, M, regs)
    assert 0 < n_active < p.n_triplets  # the hinge is genuinely piecewise here
    assert p.objective(M) == pytest.approx(expected, rel=1e-12)


def _brute_target_neighbors(X, y, k):
    n = X.shape[0]
    T = []
    for i in range(n):
        same = [j for j in range(n) if j != i and y[j] == y[i]]
        d = {j: float(np.sum((X[i] - X[j]) ** 2)) for j in same}
        T.append(sorted(same, key=lambda j: (d[j], j))[:k])
    return np.array(T)


def test_target_neighbors_default_equals_brute_force_random():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(25, 4))
    y = rng.integers(0, 3, size=25)
    p = LMNNProblem(X, y, k=3)
    np.testing.assert_array_equal(p.target_neighbors, _brute_target_neighbors(X, y, 3))
    assert p.target_neighbors.shape == (25, 3)


def test_target_neighbors_ties_broken_by_lower_index():
    # class 0 on a line: x = 0, 1, -1, 2, 2 (x3 and x4 duplicated), class 1 elsewhere.
    # i=0: d = (1, 1, 4, 4) to (1, 2, 3, 4)                 -> [1, 2]
    # i=1: d = (1, 4, 1, 1) to (0, 2, 3, 4)                 -> [0, 3]
    # i=2: d = (1, 4, 9, 9) to (0, 1, 3, 4)                 -> [0, 1]
    # i=3: d = (4, 1, 9, 0) to (0, 1, 2, 4)                 -> [4, 1]
    # i=4: d = (4, 1, 9, 0) to (0, 1, 2, 3)                 -> [3, 1]
    X = np.array([[0, 0], [1, 0], [-1, 0], [2, 0], [2, 0], [10, 10], [10, 11], [11, 10]])
    y = np.array([0, 0, 0, 0, 0, 1, 1, 1])
    p = LMNNProblem(X, y, k=2)
    expected = [[1, 2], [0, 3], [0, 1], [4, 1], [3, 1], [6, 7], [5, 7], [5, 6]]
    np.testing.assert_array_equal(p.target_neighbors, expected)
    np.testing.assert_array_equal(p.target_neighbors, _brute_target_neighbors(X.astype(float), y, 2))


def test_target_neighbors_ties_integer_grid():
    # many exact ties: integer points, duplicated rows, labels interleaved
    rng = np.random.default_rng(11)
    X = rng.integers(0, 3, size=(30, 2))
    X[5] = X[0]
    X[17] = X[0]
    y = np.arange(30) % 3
    p = LMNNProblem(X, y, k=4)
    np.testing.assert_array_equal(p.target_neighbors, _brute_target_neighbors(X.astype(float), y, 4))


def test_n_triplets_equals_brute_force_count():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(17, 2))
    y = np.array([0] * 4 + [1] * 6 + [2] * 7)
    for k in (1, 3):
        p = LMNNProblem(X, y, k=k)
        count = sum(1 for i in range(17) for _j in p.target_neighbors[i] for l in range(17) if y[l] != y[i])
        assert p.n_triplets == count
    # and the textbook program's triplet list has exactly that many distinct triplets
    trip = p.hinge.all_triplets(p)
    assert trip.shape == (p.n_triplets, 3)
    assert len({tuple(t) for t in trip.tolist()}) == p.n_triplets


# ---------------------------------------------------------------------------
# convexity and the term registry
# ---------------------------------------------------------------------------


def _small_problems():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(9, 2))
    y = np.repeat([0, 1, 2], 3)
    return {
        "lmnn": LMNNProblem(X, y, k=2, regularizer=[Frobenius(0.5), Trace(0.25)]),
        "mmc": MMCProblem(X, y),
        "mmc_diagonal": MMCProblem(X, y, diagonal=True),
        "pola_hard": POLAProblem(X, y),
        "pola_soft": POLAProblem(X, y, C=0.7),
    }


@pytest.mark.parametrize("name", ["lmnn", "mmc", "mmc_diagonal", "pola_hard", "pola_soft"])
def test_problems_are_convex(name):
    p = _small_problems()[name]
    assert p.is_convex is True
    assert all(t.convex for t in p.terms)


def test_term_registry_overrides_value_and_cvxpy():
    assert TERMS, "the term registry is empty"
    assert {"Linear", "Trace", "Frobenius", "HalfSquare", "TripletHinge", "SqrtDistances", "PairHinge"} <= set(TERMS)
    for name, cls in TERMS.items():
        assert cls.__name__ == name
        assert issubclass(cls, Term)
        assert cls.value is not Term.value, f"{name} does not override Term.value"
        assert cls.cvxpy is not Term.cvxpy, f"{name} does not override Term.cvxpy"
    assert metricopt.terms.TERMS is TERMS


def _term_cases():
    cases = []
    for pname, p in _small_problems().items():
        for idx, t in enumerate(p.terms):
            cases.append(pytest.param(pname, idx, id=f"{pname}-{type(t).__name__}"))
    return cases


@pytest.mark.parametrize("pname, idx", _term_cases())
def test_term_cvxpy_form_matches_float64_value(pname, idx):
    # At a fixed point (M, b), minimising a term's CVXPY expression over its own auxiliary
    # variables (slacks, sqrt epigraphs) under its constraints gives the term's value.
    p = _small_problems()[pname]
    term = p.terms[idx]
    rng = np.random.default_rng(4)
    M = np.diag(rng.uniform(0.2, 1.5, size=p.d)) if p.diagonal else _random_psd(rng, p.d)
    b = 1.3
    Mvec = np.diag(M) if p.diagonal else M.ravel()
    V = {"M": cp.Constant(M), "Mvec": cp.Constant(Mvec), "b": cp.Constant(b)}
    Vnp = {"M": M, "b": b}
    if term.uses_working_set:
        expr, cons = term.cvxpy(p, V, term.all_triplets(p))
    else:
        expr, cons = term.cvxpy(p, V)
    expected = term.value(p, Vnp)
    if not expr.variables():
        got = float(expr.value)
    else:
        prob = cp.Problem(cp.Minimize(expr), cons)
        prob.solve(solver="CLARABEL")
        assert prob.status == cp.OPTIMAL
        got = float(prob.value)
    assert got == pytest.approx(expected, rel=1e-6, abs=1e-7)
    assert expected != 0.0 or type(term).__name__ == "TripletHinge"


@pytest.mark.parametrize("search", ["brute", "tree"])
def test_kept_search_serves_a_narrower_margin_exactly(iris_std, search):
    """LMNNProblem keeps its last search: at the same M and a narrower margin the filtered result is the
    fresh search's, array for array; ``limit`` still applies; at an M that differs the kept search answers with
    its h recomputed where its bound allows (``metricopt.methods.lmnn.kept_search``), else a new search is made;
    the exact objective is unchanged by it."""
    X, y = iris_std
    P = LMNNProblem(X, y, k=3, search=search)
    rng = np.random.default_rng(0)
    A = rng.normal(size=(4, 4))
    M = A @ A.T / 4
    wide = P.find_triplets(M, 0.5)
    narrow = P.find_triplets(M, 0.05)
    fresh = P._search(M, 0.05, None)
    assert wide[0].size > narrow[0].size > 0
    for got, want in zip(narrow, fresh):
        np.testing.assert_array_equal(got, want)
    assert P.find_triplets(M, 0.05, limit=narrow[0].size - 1) is None
    M2 = M * (1 + 1e-14)
    P.find_triplets(M2, 0.05, reuse_within=1e-10)
    assert np.array_equal(P._last_search.M, M)  # reused, no new search
    got = P.find_triplets(M2, 0.05)  # another M: answered from the kept (wider) search, h recomputed at M2
    assert np.array_equal(P._last_search.M, M)
    fresh = P._search(M2, 0.05, None)
    for a, b in zip(got[:3], fresh[:3]):
        np.testing.assert_array_equal(np.sort(a), np.sort(b))
    np.testing.assert_array_equal(np.sort(got[3]), np.sort(fresh[3]))
    M3 = M / 3.0
    P.find_triplets(M3, 0.05)
    assert np.array_equal(P._last_search.M, M3)  # too far for the kept search's bound: searched again at M3
    objective = P.objective(M)
    P.find_triplets(M, 1.0)
    assert P.objective(M) == objective
