r"""Non-smooth regularizers and the JAX backend's proximal steps (issue 29, item 3).

* the terms of :mod:`metricopt.problems.regularizers`: registered, exported, stored by ``config``, their float64
  value equal to their CVXPY expression and to their JAX value (smoothed: within the envelope's bias);
* their proxes: the optimality condition :math:`(A - Z)/t \in \partial R(Z)` holds and no random point does better
  on the prox objective (hypothesis); the projection onto :math:`\{M \succeq 0, \operatorname{tr} M \le r\}` and
  the Frobenius norm's prox with the PSD cone are feasible and optimal against CVXPY (Clarabel); the backend's
  inner dual loop for a prox with the cone and no closed form (:mod:`metricopt.backends.jax.prox`) too;
* LMNN (wine, standardized, PCA to 5 dimensions, 60 points, ``k = 2``) with each regularizer: the JAX backend's
  objective equals the exact backend's within 1e-5 (relative), the trace ball holds at every JAX iterate, and the
  off-diagonal L1 penalty with its prox takes far fewer iterations than the same penalty differentiated as it is.
"""

from __future__ import annotations

import math
import warnings

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_wine
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

import metricopt as mo
import metricopt.problems
import metricopt.terms
from metricopt.problems.terms import TERMS, term_from_config
from metricopt.terms import FrobeniusNorm, OffDiagonalL1, RowL21, TraceBall

jax = pytest.importorskip("jax")
jnp = jax.numpy

CLASSES = (OffDiagonalL1, TraceBall, FrobeniusNorm, RowL21)
EXAMPLES = (OffDiagonalL1(0.05), TraceBall(0.4), FrobeniusNorm(1.0), RowL21(0.5))


class _Shape:
    """The little of a problem that ``jax_data`` reads (``d``, ``X``)."""

    def __init__(self, d, seed=0):
        self.d = d
        self.X = np.random.default_rng(seed).normal(size=(12, d))


def _data(term, d):
    return {k: jnp.asarray(v) for k, v in term.jax_data(_Shape(d)).items()}


def _symmetric(rng, d, scale=1.0):
    G = rng.normal(size=(d, d)) * scale
    return 0.5 * (G + G.T)


def _psd(rng, d):
    G = rng.normal(size=(d, d))
    return G @ G.T / d


def _solve_cvxpy(objective, constraints):
    """The optimal value by Clarabel at tight tolerances (its "may be inaccurate" warning at them is silenced: the
    tests compare with a tolerance)."""
    problem = cp.Problem(cp.Minimize(objective), constraints)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        problem.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return problem.value


# ----------------------------------------------------------------------------- the terms themselves
@pytest.mark.parametrize("term", EXAMPLES, ids=lambda t: type(t).__name__)
def test_registered_exported_and_rebuilt_from_their_config(term):
    cls = type(term)
    assert TERMS[cls.__name__] is cls
    assert getattr(metricopt.terms, cls.__name__) is cls and getattr(metricopt.problems, cls.__name__) is cls
    assert cls.__name__ in metricopt.terms.__all__ and cls.__name__ in metricopt.problems.__all__
    rebuilt = term_from_config(term.config())
    assert type(rebuilt) is cls and rebuilt.config() == term.config() and repr(rebuilt) == repr(term)
    assert term.convex and term.has_jax and term.dual_piece(None) is None  # certified by a generic certificate only


@pytest.mark.parametrize("cls, bad", [(OffDiagonalL1, -1.0), (FrobeniusNorm, float("nan")), (RowL21, "a"),
                                      (TraceBall, 0.0), (TraceBall, -2.0)])
def test_bad_weights_are_refused_with_the_valid_range(cls, bad):
    with pytest.raises(mo.InputError, match="must be"):
        cls(bad)


@pytest.mark.parametrize("term", EXAMPLES, ids=lambda t: type(t).__name__)
def test_value_equals_the_cvxpy_expression_and_the_jax_value(term):
    rng = np.random.default_rng(1)
    d = 5
    shape = _Shape(d)
    for M in (_psd(rng, d), 0.01 * _psd(rng, d), np.zeros((d, d))):
        expr, cons = term.cvxpy(shape, {"M": cp.Constant(M)})
        value = term.value(shape, {"M": M})
        if isinstance(term, TraceBall):
            inside = float(np.trace(M)) <= term.radius
            assert value == (0.0 if inside else math.inf) and float(expr.value) == 0.0
            assert all(c.value() for c in cons) == inside
        else:
            assert cons == [] and float(expr.value) == pytest.approx(value, rel=1e-12, abs=1e-15)
        with jax.enable_x64(True):
            jv = float(type(term).jax_value(_data(term, d), {"M": jnp.asarray(M)}, None, 0.0))
        assert jv == pytest.approx(value, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("term, groups", [(OffDiagonalL1(0.7), lambda d: d * (d - 1)), (FrobeniusNorm(0.7), lambda d: 1),
                                          (RowL21(0.7), lambda d: d)], ids=["OffDiagonalL1", "FrobeniusNorm", "RowL21"])
def test_smoothed_jax_values_lie_within_the_envelope_bias_below_the_value(term, groups):
    """The Moreau envelope of width mu of a norm lies in [R - lam mu / 2 per group, R]."""
    rng = np.random.default_rng(2)
    d = 4
    with jax.enable_x64(True):
        data = _data(term, d)
        for s in (1e-3, 0.1, 10.0):
            mu = s * float(data["scale"])
            for M in (_psd(rng, d), 1e-3 * _psd(rng, d)):
                exact = term.value(_Shape(d), {"M": M})
                smooth = float(type(term).jax_value(data, {"M": jnp.asarray(M)}, None, s))
                assert exact - term.lam * mu / 2 * groups(d) - 1e-12 <= smooth <= exact + 1e-12
                grad = jax.grad(lambda V: type(term).jax_value(data, V, None, s))({"M": jnp.asarray(M)})["M"]
                assert np.all(np.isfinite(np.asarray(grad)))


# ----------------------------------------------------------------------------- proxes and projections
_sizes = st.integers(min_value=2, max_value=5)
_seeds = st.integers(min_value=0, max_value=2**31 - 1)
_positive = st.floats(min_value=1e-3, max_value=3.0)


def _prox_objective(term, d, A, step, Z):
    return step * term.value(_Shape(d), {"M": Z}) + 0.5 * float(np.sum((Z - A) ** 2))


@settings(max_examples=25, deadline=None)
@given(d=_sizes, seed=_seeds, lam=_positive, step=_positive)
def test_offdiagonal_l1_prox_meets_its_optimality_condition(d, seed, lam, step):
    """Soft thresholding: ``A - Z = t lam sign(Z)`` where ``Z_ij != 0`` (i != j), ``|A_ij| <= t lam`` where it is 0,
    and the diagonal is untouched; no random symmetric point does better on the prox objective."""
    rng = np.random.default_rng(seed)
    term, A = OffDiagonalL1(lam), _symmetric(rng, d)
    with jax.enable_x64(True):
        Z = np.asarray(OffDiagonalL1.jax_prox(_data(term, d), jnp.asarray(A), step))
    off = ~np.eye(d, dtype=bool)
    np.testing.assert_array_equal(np.diag(Z), np.diag(A))
    np.testing.assert_array_equal(Z, Z.T)
    nz = off & (Z != 0)
    np.testing.assert_allclose((A - Z)[nz], step * lam * np.sign(Z[nz]), rtol=1e-12, atol=1e-12)
    assert np.all(np.abs(A[off & (Z == 0)]) <= step * lam * (1 + 1e-12))
    best = _prox_objective(term, d, A, step, Z)
    for _ in range(20):
        other = Z + _symmetric(rng, d, scale=10.0 ** rng.uniform(-4, 0))
        assert _prox_objective(term, d, A, step, other) >= best - 1e-12 * max(1.0, best)


@settings(max_examples=25, deadline=None)
@given(d=_sizes, seed=_seeds, lam=_positive, step=_positive)
def test_frobenius_norm_proxes_are_optimal(d, seed, lam, step):
    """Block soft thresholding: ``A - Z = t lam Z / ||Z||`` or ``Z = 0`` with ``||A|| <= t lam``; with the PSD cone,
    the closed form beats random PSD points (and the prox without the cone beats random symmetric ones)."""
    rng = np.random.default_rng(seed)
    term, A = FrobeniusNorm(lam), _symmetric(rng, d)
    with jax.enable_x64(True):
        data = _data(term, d)
        Z = np.asarray(FrobeniusNorm.jax_prox(data, jnp.asarray(A), step))
        Zp = np.asarray(FrobeniusNorm.jax_prox_psd(data, jnp.asarray(A), step))
    norm = np.linalg.norm(Z)
    if norm > 0:
        np.testing.assert_allclose(A - Z, step * lam * Z / norm, rtol=1e-10, atol=1e-12)
    else:
        assert np.linalg.norm(A) <= step * lam * (1 + 1e-12)
    assert np.linalg.eigvalsh(Zp).min() >= -1e-12 * max(1.0, np.abs(Zp).max())
    best, best_psd = _prox_objective(term, d, A, step, Z), _prox_objective(term, d, A, step, Zp)
    for _ in range(20):
        scale = 10.0 ** rng.uniform(-4, 0)
        assert _prox_objective(term, d, A, step, Z + _symmetric(rng, d, scale)) >= best - 1e-12 * max(1.0, best)
        other = Zp + scale * _psd(rng, d) if rng.random() < 0.5 else scale * _psd(rng, d)
        assert _prox_objective(term, d, A, step, other) >= best_psd - 1e-12 * max(1.0, best_psd)


@pytest.mark.parametrize("seed", range(6))
def test_projection_onto_the_trace_ball_within_the_psd_cone_is_feasible_and_optimal(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 7))
    A = _symmetric(rng, d, scale=2.0)
    # active and inactive balls: the PSD part's trace is below, near or above the radius
    plus = float(np.sum(np.maximum(np.linalg.eigvalsh(A), 0.0)))
    radius = plus * (0.3, 0.9, 1.0, 2.0, 0.05, 0.999)[seed] + 1e-3
    term = TraceBall(radius)
    with jax.enable_x64(True):
        P = np.asarray(TraceBall.jax_prox_psd(_data(term, d), jnp.asarray(A)))
    assert term.value(None, {"M": P}) == 0.0  # tr P <= radius exactly in float64
    assert np.linalg.eigvalsh(P).min() >= -1e-12 * max(1.0, np.abs(P).max())
    X = cp.Variable((d, d), PSD=True)
    best = _solve_cvxpy(0.5 * cp.sum_squares(X - A), [cp.trace(X) <= radius])
    assert 0.5 * np.sum((P - A) ** 2) <= best + 1e-8 * max(1.0, best)
    np.testing.assert_allclose(P, X.value, atol=1e-5)
    # the variational inequality of a projection: <A - P, Q - P> <= 0 for every feasible Q
    for _ in range(20):
        Q = _psd(rng, d)
        Q *= min(1.0, radius / np.trace(Q)) * rng.uniform(0, 1)
        assert np.sum((A - P) * (Q - P)) <= 1e-9 * max(1.0, np.abs(A).max() ** 2)


@pytest.mark.parametrize("seed", range(3))
def test_frobenius_norm_prox_with_the_cone_equals_cvxpy(seed):
    rng = np.random.default_rng(10 + seed)
    d, step = 4, 0.5
    A = _symmetric(rng, d)
    lam = (0.2, 1.0, 50.0)[seed]  # the last: Z = 0
    term = FrobeniusNorm(lam)
    with jax.enable_x64(True):
        Z = np.asarray(FrobeniusNorm.jax_prox_psd(_data(term, d), jnp.asarray(A), step))
    X = cp.Variable((d, d), PSD=True)
    best = _solve_cvxpy(step * lam * cp.norm(X, "fro") + 0.5 * cp.sum_squares(X - A), [])
    assert _prox_objective(term, d, A, step, Z) <= best + 1e-8 * max(1.0, abs(best))
    np.testing.assert_allclose(Z, X.value, atol=1e-5)


def test_trace_ball_prox_without_the_cone_is_the_half_space_projection():
    rng = np.random.default_rng(3)
    d, term = 4, TraceBall(1.0)
    for A in (_symmetric(rng, d) + 2 * np.eye(d), _symmetric(rng, d) - 2 * np.eye(d)):
        with jax.enable_x64(True):
            Z = np.asarray(TraceBall.jax_prox(_data(term, d), jnp.asarray(A)))
        assert math.fsum(np.diag(Z)) <= 1.0
        expected = A - max(np.trace(A) - 1.0, 0.0) / d * np.eye(d)
        np.testing.assert_allclose(Z, expected, atol=1e-12)


@pytest.mark.parametrize("terms", [(OffDiagonalL1(0.4),), (OffDiagonalL1(0.4), TraceBall(1.2)),
                                   (OffDiagonalL1(0.2), FrobeniusNorm(0.3))],
                         ids=["l1", "l1+ball", "l1+frobenius"])
def test_the_backends_prox_of_a_sum_with_the_cone_equals_cvxpy(terms):
    """No closed form: the inner fast dual proximal gradient loop (cold start, enough iterations) reaches the prox
    of the sum with the PSD cone (and the ball), and its point is feasible whatever the iteration count."""
    from metricopt.backends.jax.geometry import Parametrization
    from metricopt.backends.jax.prox import plan, prox
    from metricopt.backends.jax.solvers import FISTA

    rng = np.random.default_rng(5)
    d, step = 5, 0.8
    geometry = Parametrization("psd")
    composite = plan(terms, geometry, FISTA.proximal)
    assert not composite.exact and composite.n_dual == sum(not isinstance(t, TraceBall) for t in terms)
    X = cp.Variable((d, d), PSD=True)
    shape = _Shape(d)
    for A in (_symmetric(rng, d, 1.5), _psd(rng, d) + _symmetric(rng, d, 0.3)):
        objective, constraints = 0.5 * cp.sum_squares(X - A), []
        for t in terms:
            e, c = t.cvxpy(shape, {"M": X})
            objective, constraints = objective + step * e, constraints + c
        best = _solve_cvxpy(objective, constraints)
        value = lambda Z: 0.5 * np.sum((Z - A) ** 2) + step * sum(t.value(shape, {"M": Z}) for t in terms)
        with jax.enable_x64(True):
            data = tuple(_data(t, d) for t in terms)
            for inner in (3, 4000):
                Z, dual = prox(composite, tuple(type(t) for t in terms), data, geometry, jnp.asarray(A), step,
                               None, inner, 1e-14)
                Z = np.asarray(Z)
                assert np.isfinite(value(Z))  # in the ball (exactly), whatever the accuracy
                assert np.linalg.eigvalsh(Z).min() >= -1e-12
        assert dual.shape == (composite.n_dual, d, d)
        assert value(Z) == pytest.approx(best, rel=1e-8, abs=1e-10)


def test_the_plan_keeps_prox_terms_smooth_where_no_proximal_step_is_taken():
    from metricopt.backends.jax.geometry import Parametrization
    from metricopt.backends.jax.prox import plan
    from metricopt.backends.jax.solvers import FISTA, Subgradient

    terms = (OffDiagonalL1(1.0), FrobeniusNorm(1.0), RowL21(1.0), TraceBall(1.0))
    fista = plan(terms, Parametrization("psd"), FISTA.proximal)
    assert fista.prox == (0, 1) and fista.constraint == 3 and fista.indices == {0, 1, 3}
    assert plan(terms[1:2], Parametrization("psd"), True).exact  # a closed form with the cone, no inner loop
    reference = plan(terms, Parametrization("psd"), Subgradient.proximal)
    assert reference.prox == () and reference.constraint == 3
    assert plan(terms[:3], Parametrization("psd", scaled=True), True).prox == ()  # preconditioned: smoothed instead
    with pytest.raises(mo.InputError, match="at most one constraint term"):
        plan((TraceBall(1.0), TraceBall(2.0)), Parametrization("psd"), True)


# ----------------------------------------------------------------------------- LMNN on both backends
@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    X = PCA(5, random_state=0).fit_transform(StandardScaler().fit_transform(X))
    return X[::3], y[::3]


def _lmnn(wine, *regularizer):
    return mo.LMNNProblem(*wine, k=2, regularizer=list(regularizer))


def _check_status(sol):
    """A certificate decides ``optimal``; without one (no certificate covers the terms) the solve still ends with a
    clear status that is not ``optimal``."""
    if sol.status is mo.Status.OPTIMAL:
        assert sol.certificate is not None and sol.certificate.rel_gap <= 1e-6
    else:
        assert sol.status in (mo.Status.UNCERTIFIED, mo.Status.ITERATION_LIMIT, mo.Status.OPTIMAL_INACCURATE)


@pytest.mark.parametrize("regularizer", [OffDiagonalL1(0.05), TraceBall(0.4), FrobeniusNorm(1.0), RowL21(0.5),
                                         (OffDiagonalL1(0.05), TraceBall(0.4))],
                         ids=["OffDiagonalL1", "TraceBall", "FrobeniusNorm", "RowL21", "OffDiagonalL1+TraceBall"])
def test_lmnn_jax_objective_matches_the_exact_backend(wine, regularizer):
    regs = regularizer if isinstance(regularizer, tuple) else (regularizer,)
    problem = _lmnn(wine, *regs)
    exact = mo.solve(problem, backend="cvxpy", solver="CLARABEL")
    fast = mo.solve(problem, backend="jax")
    assert np.isfinite(exact.objective) and np.isfinite(fast.objective)  # the trace ball holds at both (float64)
    assert fast.objective == pytest.approx(exact.objective, rel=1e-5)
    # both certified by the generic certificate (no dual piece), and no bound above the textbook program's optimum
    prog, _ = problem.to_cvxpy()
    reference = prog.solve(solver="CLARABEL")
    for sol in (exact, fast):
        assert sol.status is mo.Status.OPTIMAL, sol.message
        cert = sol.certificate
        assert cert.rel_gap <= 1e-6 and cert.details["dual form"].startswith("generic")
        assert cert.lower <= reference + 1e-7 * abs(reference)
    for t in regs:
        if isinstance(t, TraceBall):
            assert math.fsum(np.diag(fast.M)) <= t.radius and math.fsum(np.diag(exact.M)) <= t.radius
            assert math.fsum(np.diag(fast.M)) == pytest.approx(t.radius, rel=1e-9)  # active here


def test_trace_ball_holds_at_every_jax_iterate(wine):
    problem = _lmnn(wine, TraceBall(0.3), FrobeniusNorm(0.5))
    seen = []
    sol = mo.solve(problem, backend="jax", callback=lambda info: seen.append(problem.objective(info["M"])))
    assert seen and all(np.isfinite(seen)) and np.isfinite(sol.objective)
    reference = mo.solve(problem, backend="jax", solver="subgradient", max_iter=400)  # projected, no prox
    assert np.isfinite(reference.objective) and math.fsum(np.diag(reference.M)) <= 0.3


class _DifferentiatedL1(OffDiagonalL1):
    """The penalty as a plain JAX value: no prox, no smoothing (autodiff's subgradient of ``|x|``), the way a user
    term gets solved without this issue's work."""

    jax_prox = None

    @staticmethod
    def jax_value(data, V, active=None, smoothing=0.0):
        return OffDiagonalL1.jax_value(data, V, active, 0.0)


def test_offdiagonal_l1_prox_takes_far_fewer_iterations_than_the_differentiated_penalty(wine):
    lam = 3.0  # a strong penalty: the differentiated one does not converge in 20,000 iterations
    exact = mo.solve(_lmnn(wine, OffDiagonalL1(lam)), backend="cvxpy", solver="CLARABEL")
    fast = mo.solve(_lmnn(wine, OffDiagonalL1(lam)), backend="jax")
    before = mo.solve(_lmnn(wine, _DifferentiatedL1(lam)), backend="jax")
    assert fast.objective == pytest.approx(exact.objective, rel=1e-5)
    assert 4 * fast.stats["iterations"] <= before.stats["iterations"]
    assert before.status is not mo.Status.OPTIMAL
    _check_status(fast)


def test_without_a_certificate_the_proximal_solve_ends_clearly_not_optimal(wine, monkeypatch):
    """Where no certificate covers the terms, the loop stops on its first-order rule (the proximal-gradient step)
    or its iteration limit, never with ``optimal``, and its objective is still the exact backend's."""
    from metricopt.backends.jax import driver

    monkeypatch.setattr(driver, "_certifiable", lambda problem: False)
    problem = _lmnn(wine, OffDiagonalL1(1.0))
    sol = mo.solve(problem, backend="jax")
    assert sol.status in (mo.Status.UNCERTIFIED, mo.Status.ITERATION_LIMIT) and sol.certificate is None
    assert sol.stats["iterations"] < 5000 and sol.stats["history"][-1]["first_order"] >= 0.0
    exact = mo.solve(problem, backend="cvxpy", solver="CLARABEL")
    assert sol.objective == pytest.approx(exact.objective, rel=1e-5)


def test_refusals_name_the_term_and_the_way_out(wine):
    problem = _lmnn(wine, OffDiagonalL1(0.1))
    with pytest.raises(mo.InputError, match="precondition=True cannot be combined .*OffDiagonalL1"):
        mo.solve(problem, backend="jax", precondition=True)
    factored = _lmnn(wine, TraceBall(1.0)).factored(2)
    with pytest.raises(mo.InputError, match="TraceBall.*backend='cvxpy'"):
        mo.solve(factored, backend="jax")
