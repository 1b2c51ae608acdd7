"""MMC's boundedness, decided once (:func:`metricopt.methods.pairs.mmc_problem.budget_range`) from the similar scatter on the
data's range, with the same answer on both backends; and ill-conditioned similar scatters (issue 28, items 4 and 6).

Data: three classes of 8 points in 3 dimensions (``x + 3 i e_i`` for class ``i``), plus a fourth column that is
constant, a copy of the first, the first plus ``eps`` times independent noise (near-collinear), or the label
(truly unbounded).

Independent optima: MMC's optimum is invariant under an invertible linear map of the features (``M`` becomes
``A^{-T} M A^{-1}``) and unchanged by a feature no pair difference touches, so

* with a constant or duplicated column, the optimum is the one of the 3-column data (solved by the exact backend);
* with the near-collinear column ``x_1 + eps * z``, it is the one of the data ``[x_1, x_2, x_3, (x_4 - x_1) / eps]``
  (``x_4 - x_1`` is computed exactly or to one rounding, so the map is exact to about 1e-16), whose similar scatter
  is well conditioned.

Every independent solve returns a feasible metric (repaired onto the budget), so its objective is at least the true
optimum: a certificate's lower bound must never exceed it (no tolerance in that comparison).
"""

from __future__ import annotations

import numpy as np
import pytest

import metricopt as mo
from metricopt import InputError, Status
from metricopt.linalg import exact_structure
from metricopt.methods.pairs.mmc_problem import budget_range

#: relative agreement of the two backends' objectives (each certified to 1e-6; the JAX backend's default tol)
AGREE = 1e-5

_R = np.random.default_rng(0)
X0 = np.vstack([_R.normal(0, 1, (8, 3)) + 3 * i * np.eye(3)[i] for i in range(3)])
Y = np.repeat(np.arange(3), 8)
NOISE = _R.normal(size=24)


def _data(kind, eps=1e-2):
    if kind == "constant":
        return np.c_[X0, np.full(24, 2.5)]
    if kind == "duplicated":
        return np.c_[X0, X0[:, 0]]
    if kind == "near-collinear":
        return np.c_[X0, X0[:, 0] + eps * NOISE]
    if kind == "label":
        return np.c_[X0, Y.astype(float)]
    raise ValueError(kind)


def _independent(kind, diagonal, eps=1e-2):
    """An independently solved problem with the same optimum (see the module docstring)."""
    if kind == "near-collinear":
        X = _data(kind, eps)
        Xw = np.c_[X0, (X[:, 3] - X[:, 0]) / eps]
        if diagonal:  # the map mixes features: no longer a diagonal problem; the 3-column problem bounds it below
            return None
        return mo.MMCProblem(Xw, Y).solve()
    return mo.MMCProblem(X0, Y, diagonal=diagonal).solve()


_SOLVED = {}


def _solve(kind, diagonal, backend):
    key = (kind, diagonal, backend)
    if key not in _SOLVED:
        p = mo.MMCProblem(_data(kind), Y, diagonal=diagonal)
        _SOLVED[key] = (p, p.solve(backend=backend))
    return _SOLVED[key]


# ----------------------------------------------------------------------------------------- boundedness
@pytest.mark.parametrize("diagonal", [False, True])
@pytest.mark.parametrize("kind", ["constant", "duplicated", "near-collinear"])
def test_bounded_cases_are_solved_alike_by_both_backends_and_certified(kind, diagonal):
    p, exact = _solve(kind, diagonal, "cvxpy")
    assert p.budget_range.bounded
    _, fast = _solve(kind, diagonal, "jax")
    # the one status policy: optimal only with a certified gap within tol
    for sol in (exact, fast):
        assert sol.status is Status.OPTIMAL, (kind, diagonal, sol.backend, sol.status, sol.message)
        assert sol.certificate.gap <= 1e-6 * max(abs(sol.certificate.upper), 1.0) + 1e-12
    assert abs(exact.objective - fast.objective) <= AGREE * abs(exact.objective)
    ind = _independent(kind, diagonal)
    if ind is not None:
        assert ind.status is Status.OPTIMAL
        assert abs(exact.objective - ind.objective) <= AGREE * abs(ind.objective)
        for sol in (exact, fast):
            assert sol.certificate.lower <= ind.objective  # never above a feasible objective
    else:  # diagonal near-collinear: the 3-column diagonal problem is a restriction (m_4 = 0), hence above
        base = mo.MMCProblem(X0, Y, diagonal=True).solve()
        assert exact.objective <= base.objective + 1e-9 * abs(base.objective)


@pytest.mark.parametrize("diagonal", [False, True])
def test_a_label_column_is_unbounded_for_both_backends(diagonal):
    X = _data("label")
    with pytest.raises(InputError, match="MMC is unbounded on this data"):
        mo.MMCProblem(X, Y, diagonal=diagonal)
    br = budget_range(X, *mo.constraints.labels_to_pairs(Y), diagonal=diagonal)
    assert not br.bounded
    with pytest.raises(InputError, match="MMC is unbounded on this data"):
        mo.MMC(diagonal=diagonal, backend="jax").fit(X, Y)


def test_more_features_than_the_similar_pairs_span_is_unbounded():
    X = np.random.default_rng(1).normal(size=(9, 15))
    with pytest.raises(InputError, match=r"the pair differences span 8 of d = 15 directions, the 9 similar pairs 6"):
        mo.MMCProblem(X, np.repeat([0, 1, 2], 3))


def test_the_decision_reads_the_data_range_not_the_raw_scatter():
    """Constant and copied columns are exact structure (``rep``); ``S`` is built with it exactly (copied rows and
    columns, zero ones), the similar scatter is singular, yet the range's test says bounded; the near-collinear
    column's scatter is positive definite, with a condition number far above the old 1e-10 eigenvalue cut on
    ``S`` itself, and bounded too."""
    X = np.c_[X0, X0[:, 0], np.full(24, -1.0), X0[:, 1] + 1e-6 * NOISE]
    p = mo.MMCProblem(X, Y)
    br = p.budget_range
    assert exact_structure(X, np.arange(24)).tolist() == [0, 1, 2, 0, -1, 5]
    assert np.array_equal(p.similar_matrix[3], p.similar_matrix[0]) and not p.similar_matrix[4].any()
    assert br.bounded and br.rank == 4 and br.rank_similar == 4
    assert np.linalg.cond(p.similar_matrix[np.ix_([0, 1, 2, 5], [0, 1, 2, 5])]) > 1e12
    # the whitener maps {Z PSD, trace Z <= 1} onto the budget: T^T S T = I, checked on the whitened similar
    # differences (forming T^T S T itself cancels entries of 1e9 in float64)
    T, Tinv = p.budget_whitening()
    E = (X[p.similar[:, 0]] - X[p.similar[:, 1]]) @ T
    assert np.allclose(E.T @ E, np.eye(4), atol=1e-6)
    assert np.allclose(Tinv @ T, np.eye(4), atol=1e-9)


def test_scaling_a_feature_by_a_power_of_two_keeps_the_decision():
    for kind in ("duplicated", "near-collinear", "label"):
        X = _data(kind)
        for s in (2.0**-40, 2.0**30):
            Xs = X.copy()
            Xs[:, 3] *= s
            assert budget_range(Xs, *mo.constraints.labels_to_pairs(Y)).bounded == (kind != "label")


# ----------------------------------------------------------------------------------------- certificates
def test_the_certificate_treats_only_exact_structure_as_null():
    """A column that is a copy of another except for one rounding-level difference is not exact structure: the
    certificate then has no finite bound (the true problem may use that direction), never a bound that drops it."""
    X = _data("duplicated")
    X[5, 3] = np.nextafter(X[5, 3], np.inf)
    p = mo.MMCProblem(X, Y)
    M = _solve("duplicated", False, "cvxpy")[1].M
    cert = mo.certify(p, M)
    assert not np.isfinite(cert.lower) or cert.lower <= p.objective(M)
    assert cert.verdict.value != "optimal"


def test_the_diagonal_bound_is_exact_for_a_constant_column():
    p, sol = _solve("constant", True, "cvxpy")
    cert = mo.certify(p, sol.M)
    assert np.isfinite(cert.lower) and cert.lower <= sol.objective


# ----------------------------------------------------------------------------------------- ill-conditioned
def test_ill_conditioned_similar_scatter_reaches_the_whitened_optimum_on_the_exact_backend():
    """``x_4 = x_1 + 1e-3 z``: cond S = 6e6. Before issue 28 the exact backend returned optimal_inaccurate at
    -90.1642 (Clarabel on M, whose optimum has entries ~1e6 that cancel in every distance); the optimum, from the
    whitened data ``[x_1, x_2, x_3, z]`` (independent, well conditioned), is -90.16938. Solved in whitened
    coordinates ``M = T Z T^T`` it is reached and certified."""
    eps = 1e-3
    X = _data("near-collinear", eps)
    p = mo.MMCProblem(X, Y)
    assert np.linalg.cond(p.similar_matrix) > 1e6 and p.budget_whitening() is not None
    sol = p.solve()
    ref = _independent("near-collinear", False, eps)
    assert ref.status is Status.OPTIMAL
    assert sol.status is Status.OPTIMAL, sol.message
    assert abs(sol.objective - ref.objective) <= 1e-7 * abs(ref.objective)
    assert sol.certificate.lower <= ref.objective


def test_beyond_float64_the_status_is_honest():
    """cond S = 1e15 (``eps = 1e-7``): a float64 metric cannot represent the optimum (its entries of 1e14 cancel in
    every distance): whatever is returned, it is not called optimal unless certified, and no bound exceeds the
    whitened optimum."""
    eps = 1e-7
    X = _data("near-collinear", eps)
    p = mo.MMCProblem(X, Y)
    sol = p.solve()
    ref = _independent("near-collinear", False, eps)
    if sol.status is Status.OPTIMAL:
        assert sol.certificate.gap <= 1e-6 * abs(sol.certificate.upper)
    assert sol.certificate is None or sol.certificate.lower <= ref.objective


def test_near_collinear_data_refused_before_is_bounded_and_solved_on_both_backends():
    """``x_4 = x_1 + 1e-5 (10 y + z)``: S is positive definite (cond 6e10), yet the construction check of before
    issue 28 (eigenvalues of S below 1e-10 of the largest counted as null) refused it as unbounded. Both backends now
    solve it; at this conditioning a float64 metric evaluates distances to about 1e-16 * cond = 6e-6 and the sound
    bound certifies about 5e-5, so the status may be optimal_inaccurate (honest), the objectives are within 1e-4 of
    the whitened optimum, and no lower bound exceeds it."""
    eps = 1e-5
    X = np.c_[X0, X0[:, 0] + eps * (10 * Y + NOISE)]
    p = mo.MMCProblem(X, Y)
    assert p.budget_range.bounded and np.linalg.cond(p.similar_matrix) > 1e10
    ref = mo.MMCProblem(np.c_[X0, (X[:, 3] - X[:, 0]) / eps], Y).solve()
    assert ref.status is Status.OPTIMAL
    for sol in (p.solve(), p.solve(backend="jax", max_iter=3000)):
        assert sol.M is not None
        assert abs(sol.objective - ref.objective) <= 1e-4 * abs(ref.objective), (sol.backend, sol.objective)
        assert sol.certificate.lower <= ref.objective


@pytest.mark.parametrize("kind", ["plain", "duplicated"])
def test_the_floored_bounds_from_running_sums_match_the_direct_ones(kind):
    """``_BudgetMax.floored`` forms the scatter at each floor from two running sums over the pairs sorted by their
    distance; its bounds equal the direct ones (one scatter per floor) to rounding, and stay upper bounds of the
    exact generalised eigenvalue (checked in float64 against a solve of the same pencil by scipy)."""
    import scipy.linalg

    from metricopt.certify.pairs import _BudgetMax

    X = X0 if kind == "plain" else _data("duplicated")
    p = mo.MMCProblem(X, Y)
    pairs = next(t for t in p.terms if type(t).__name__ == "SqrtDistances").pairs
    S = p.geometry.budget
    bmax = _BudgetMax(p.X, pairs, S, None, 1.0, False, {})
    rng = np.random.default_rng(3)
    c0 = rng.uniform(0.0, 2.0, len(pairs)) ** 3  # some pairs far below the lowest floors
    floors = 8.0 * np.r_[1e-8, np.logspace(-6, 0, 25)]
    got = list(bmax.floored(c0, floors))
    assert len(got) == floors.size
    D = p.X[pairs[:, 0]] - p.X[pairs[:, 1]]
    free = bmax.free
    for (c, lam), floor in zip(got, floors):
        np.testing.assert_array_equal(c, np.maximum(c0, floor))
        direct = bmax(0.5 / c)
        assert lam == pytest.approx(direct, rel=1e-12)
        G = ((D * (0.5 / c)[:, None]).T @ D)[np.ix_(free, free)]
        exact = max(0.0, float(scipy.linalg.eigh(G, S[np.ix_(free, free)], eigvals_only=True)[-1]))
        assert lam >= exact


def test_a_second_certificate_reuses_the_bound_only_for_identical_inputs():
    """The bound's set-up is cached per problem: the same certificate twice; a problem whose data changed in place
    gets a new set-up (its bound then differs), never the stale one."""
    from metricopt.certify import pairs as cp_pairs

    p = mo.MMCProblem(_data("constant"), Y)  # its own problem: the data is changed below
    sol = p.solve(backend="cvxpy")
    first = mo.certify(p, sol.M)
    key, bmax, _ = cp_pairs._BUDGET_CACHE[p]
    again = mo.certify(p, sol.M)
    assert cp_pairs._BUDGET_CACHE[p][1] is bmax
    assert (again.lower, again.upper) == (first.lower, first.upper)
    assert again.details == first.details
    p.X[0, 0] += 0.5  # the data changed under the same problem object
    cp_pairs._budget_max(p, next(t for t in p.terms if type(t).__name__ == "SqrtDistances").pairs,
                         p.geometry.budget, None, 1.0, False, {})
    assert cp_pairs._BUDGET_CACHE[p][0] != key and cp_pairs._BUDGET_CACHE[p][1] is not bmax
