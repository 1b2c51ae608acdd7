r"""Triplet losses declared as a scalar function (issue 29, item 2): LMNN's push term with the squared
hinge (PyLMNN's loss) or the Huber hinge, solved by both backends and certified.

The push term is :math:`\mu \sum_t w_t \ell(h_t)` with :math:`h_t = 1 + d_M(x_i, x_j) - d_M(x_i, x_l)`
(:mod:`metricopt.losses`, :class:`metricopt.problems.terms.TripletLoss`); its certificate takes the
multipliers :math:`\alpha_t = \mu w_t \ell'(h_t)` and subtracts the conjugates
:math:`\mu w_t \ell^*(\alpha_t / (\mu w_t))` (:func:`metricopt.certify.triplets.loss_lower_bound`).
"""

from __future__ import annotations

import math
import pickle
import warnings
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_wine
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

import metricopt as mo
from metricopt.errors import InputError
from metricopt.io import load_model, save_model
from metricopt.linalg import project_psd
from metricopt.losses import Hinge, ScalarLoss, SmoothHinge, SquaredHinge, as_loss, loss_from_config
from metricopt.problems.terms import TERMS, TripletHinge, TripletLoss, term_from_config
from metricopt.terms import Frobenius

LOSSES = {"squared_hinge": SquaredHinge(), "smooth_hinge": SmoothHinge(0.5)}


@pytest.fixture(scope="module")
def wine_pca():
    """Wine, standardised, PCA to 4 dimensions, 60 points (20 per class), k = 2 later."""
    X, y = load_wine(return_X_y=True)
    X = PCA(n_components=4, random_state=0).fit_transform(StandardScaler().fit_transform(X))
    idx = np.concatenate([np.flatnonzero(y == c)[:20] for c in range(3)])
    return X[idx], y[idx]


def _brute_force(X, y, T, M, loss, w=None):
    """``sum_i w_i sum_{j in T_i} sum_{l: y_l != y_i} loss(1 + d_ij - d_il)`` with explicit differences."""
    n = len(y)
    total = []
    for i in range(n):
        for j in T[i]:
            dij = (X[i] - X[j]) @ M @ (X[i] - X[j])
            for l in np.flatnonzero(y != y[i]):
                dil = (X[i] - X[l]) @ M @ (X[i] - X[l])
                total.append((1.0 if w is None else w[i]) * float(loss.value(1.0 + dij - dil)))
    return math.fsum(total)


def _random_psd(rng, d, scale=1.0):
    A = rng.normal(size=(d, d))
    return scale * A @ A.T / d


def _clarabel(problem, required=True):
    """``(reported optimum, objective at the returned M)`` of the full textbook program (every triplet), solved
    by Clarabel on its own (not through metricopt's backends); ``None`` when Clarabel fails and not ``required``."""
    prog, V = problem.to_cvxpy()  # working_set=None: one slack per triplet
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            prog.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
        except cp.error.SolverError:
            if required:
                raise
            return None
    if not required and prog.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        return None
    assert prog.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
    M = project_psd(0.5 * (V["M"].value + V["M"].value.T))
    return float(prog.value) * float(problem.obj_scale), problem.objective(M)


# ---------------------------------------------------------------------------------------------- the losses
@pytest.mark.parametrize("loss", [Hinge(), SquaredHinge(), SmoothHinge(0.5), SmoothHinge(0.03)], ids=repr)
def test_loss_values_derivatives_and_cvxpy_forms(loss):
    h = np.array([-3.0, -1e-9, 0.0, 1e-9, 0.01, 0.2, 0.5, 0.7, 1.0, 4.0])
    v = loss.value(h)
    assert v.dtype == np.float64 and np.all(v[h <= 0] == 0.0) and np.all(np.diff(v) >= 0)
    d = loss.derivative(h)
    assert np.all((d >= 0) & (d <= loss.dual_upper)) and np.all(d[h <= 0] == 0.0)
    # the derivative is a (sub)gradient: l(g) >= l(h) + l'(h) (g - h) on the grid
    assert np.all(v[None, :] >= v[:, None] + d[:, None] * (h[None, :] - h[:, None]) - 1e-12)
    xi = np.abs(h)
    expr = loss.cvxpy(cp.Constant(xi))
    np.testing.assert_allclose(np.asarray(expr.value, dtype=float), loss.value(xi), rtol=1e-12, atol=1e-15)
    assert expr.is_convex()
    assert loss_from_config(loss.config()) == loss and as_loss(loss.config()) == loss


@pytest.mark.parametrize("loss", [Hinge(), SquaredHinge(), SmoothHinge(0.5), SmoothHinge(0.07)], ids=repr)
@settings(max_examples=60, deadline=None)
@given(a=st.floats(min_value=0.0, max_value=1.0, allow_subnormal=True))
def test_conjugate_is_an_upper_bound_on_the_sup_and_is_rounded_up(loss, a):
    # l*(a) >= sup_h (a h - l(h)): a sup over a grid of h is a lower bound of the true sup
    h = np.concatenate([np.linspace(-2.0, 4.0, 2001), [a / 2, a * getattr(loss, "width", 1.0)]])
    grid_sup = float(np.max(a * h - loss.value(h)))
    conj = float(loss.conjugate(np.array([a]))[0])
    assert conj >= grid_sup - 1e-14  # (the grid's own float64 evaluation errs by a few ulps of |h| <= 4)
    # rounded up against the exact rational value of the closed form
    if isinstance(loss, SquaredHinge):
        exact = Fraction(a) ** 2 / 4
    elif isinstance(loss, SmoothHinge):
        exact = Fraction(loss.width) * Fraction(a) ** 2 / 2
    else:
        exact = Fraction(0)
    assert Fraction(conj) >= exact
    assert conj <= float(exact) * (1 + 1e-14) + 1e-300  # and no looser than a few ulps


@pytest.mark.parametrize("loss", [Hinge(), SquaredHinge(), SmoothHinge(0.5)], ids=repr)
def test_conjugate_domain_and_fenchel_young_equality(loss):
    assert np.isinf(loss.conjugate(np.array([-1e-300]))[0])
    if math.isfinite(loss.dual_upper):
        assert np.isinf(loss.conjugate(np.array([loss.dual_upper * (1 + 1e-15)]))[0])
        assert np.isfinite(loss.conjugate(np.array([loss.dual_upper]))[0])
    else:
        assert np.isfinite(loss.conjugate(np.array([1e150]))[0])
    # Fenchel-Young: l(h) + l*(l'(h)) = h l'(h) at a = l'(h) (for the hinge at h != 0)
    h = np.array([-1.0, 0.05, 0.3, 0.9, 2.5])
    a = loss.derivative(h)
    np.testing.assert_allclose(loss.value(h) + loss.conjugate(a), h * a, rtol=1e-12, atol=1e-15)


def test_loss_names_and_bad_values_are_refused_with_the_accepted_ones(wine_pca):
    X, y = wine_pca
    for name, cls in [("hinge", Hinge), ("squared_hinge", SquaredHinge), ("Smooth_Hinge", SmoothHinge)]:
        assert type(mo.LMNNProblem(X, y, k=2, loss=name).loss) is cls
    p = mo.LMNNProblem(X, y, k=2, loss=SmoothHinge(width=0.2))
    assert p.loss.width == 0.2 and p.hinge.loss is p.loss
    for bad in ["huber", 3, None]:
        with pytest.raises(InputError, match=r"loss must be one of 'hinge', 'squared_hinge', 'smooth_hinge' or a "
                                             r"metricopt.losses.ScalarLoss"):
            mo.LMNNProblem(X, y, k=2, loss=bad)
    for width in [0.0, -1.0, float("nan")]:
        with pytest.raises(InputError, match="width"):
            SmoothHinge(width)
    with pytest.raises(InputError, match="unknown loss 'cubic'; known losses: hinge, smooth_hinge, squared_hinge"):
        loss_from_config({"loss": "cubic"})


def test_the_hinge_is_triplet_hinge_and_other_losses_declare_triplet_loss(wine_pca):
    X, y = wine_pca
    p = mo.LMNNProblem(X, y, k=2)
    assert type(p.hinge) is TripletHinge and p.hinge.dual_piece(p).loss == "triplet_hinge"
    assert type(TripletLoss("hinge", 0.5)) is TripletHinge and type(TripletLoss(Hinge(), 0.5, margin=0.2)) is TripletHinge
    assert "TripletLoss" in TERMS and "TripletHinge" in TERMS
    for name, loss in LOSSES.items():
        q = mo.LMNNProblem(X, y, k=2, mu=0.3, loss=loss)
        term = q.hinge
        assert isinstance(term, TripletLoss) and type(term) is TripletLoss.specialised(type(loss))
        assert term.loss == loss and term.dual_piece(q).loss == "triplet_loss" and term.dual_piece(q).weight == 0.3
        assert term.jax_smoothed is False and term.has_jax
        again = term_from_config(term.config())
        assert type(again) is type(term) and again.loss == loss and again.weight == term.weight
    assert type(term_from_config(p.hinge.config())) is TripletHinge
    restored = pickle.loads(pickle.dumps(q.hinge))  # the loss's term class is importable by name
    assert type(restored) is type(q.hinge) and restored.loss == q.hinge.loss
    with pytest.raises(InputError, match="TripletLoss needs weight"):
        TripletLoss("squared_hinge")


# ---------------------------------------------------------------------------------------------- (a) values
@pytest.mark.parametrize("name", ["squared_hinge", "smooth_hinge"])
@pytest.mark.parametrize("weighted", [False, True])
def test_value_is_the_brute_force_sum_over_every_triplet(wine_pca, name, weighted):
    X, y = wine_pca
    rng = np.random.default_rng(5)
    w = rng.uniform(0.0, 2.0, size=len(y)) if weighted else None
    if weighted:
        w[3] = 0.0  # a weight-0 anchor counts nowhere
    p = mo.LMNNProblem(X, y, k=2, mu=0.4, loss=name, sample_weight=w)
    for M in [np.eye(4), _random_psd(rng, 4), _random_psd(rng, 4, 0.05)]:
        push = _brute_force(X, y, p.target_neighbors, M, p.loss, w)
        pull = float(np.sum(p.pull_matrix * M))
        assert p.loss_sum(M) == pytest.approx(push, rel=1e-12, abs=1e-12)
        assert p.objective(M) == pytest.approx(0.6 * pull + 0.4 * push, rel=1e-12)
        # the JAX piece's exact value over every triplet at M, and the same sum from a kept search
        act, size, exact, _ = p.hinge.jax_active_set(p, M, 0.2)
        assert exact == pytest.approx(0.4 * push, rel=1e-12, abs=1e-12)
        assert p.hinge.value(p, {"M": M}) == exact  # both exactly rounded sums of the same values


@pytest.mark.parametrize("name", ["squared_hinge", "smooth_hinge"])
def test_jax_matrix_gradient_is_the_autodiff_gradient(wine_pca, name):
    jax = pytest.importorskip("jax")
    X, y = wine_pca
    p = mo.LMNNProblem(X, y, k=2, loss=name)
    term, cls = p.hinge, type(p.hinge)
    M = _random_psd(np.random.default_rng(2), 4, 0.3)
    act = term.jax_active_set(p, M, 0.5)[0]
    with jax.enable_x64(True):
        jnp = jax.numpy
        data = {k: jnp.asarray(v) for k, v in term.jax_data(p).items()}
        actj = {k: jnp.asarray(v) for k, v in act.items()}
        value, exact, grads = cls.jax_value_grad(data, {"M": jnp.asarray(M)}, actj, 0.3)
        auto = jax.grad(lambda Mx: cls.jax_value(data, {"M": Mx}, actj, 0.3))(jnp.asarray(M))
        G, A = np.asarray(grads["M"], dtype=np.float64), np.asarray(auto, dtype=np.float64)
    assert float(value) == float(exact)  # smooth: never smoothed
    assert float(exact) == pytest.approx(term.value(p, {"M": M}), rel=1e-12)
    np.testing.assert_allclose(G, 0.5 * (A + A.T), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["squared_hinge", "smooth_hinge"])
@pytest.mark.parametrize("weighted", [False, True])
def test_jax_start_is_the_best_multiple_of_the_identity(wine_pca, name, weighted):
    from metricopt.backends.jax.backend import best_scale

    X, y = wine_pca
    w = np.random.default_rng(0).uniform(0.1, 2.0, size=len(y)) if weighted else None
    p = mo.LMNNProblem(X, y, k=2, loss=name, sample_weight=w)
    c = best_scale(p)
    grid = c * np.exp(np.linspace(-0.2, 0.2, 81))
    assert p.objective(c * np.eye(4)) <= min(p.objective(g * np.eye(4)) for g in grid) * (1 + 1e-12)


# ---------------------------------------------------------------------------------------------- (b), (c) solves
@pytest.fixture(scope="module")
def solved(wine_pca):
    X, y = wine_pca
    out = {}
    for name in LOSSES:
        p = mo.LMNNProblem(X, y, k=2, loss=name)
        out[name] = (p, mo.solve(p, backend="cvxpy", tol=1e-9), mo.solve(p, backend="jax", tol=1e-6))
    return out


@pytest.mark.parametrize("name", ["squared_hinge", "smooth_hinge"])
def test_both_backends_solve_to_a_certified_optimum_and_agree(solved, name):
    p, exact, first_order = solved[name]
    for sol in (exact, first_order):
        assert sol.status is mo.Status.OPTIMAL, sol.message
        assert sol.certificate.rel_gap <= 1e-6
        assert sol.certificate.details["loss"] == name
        assert sol.objective == p.objective(sol.M)
    assert first_order.objective == pytest.approx(exact.objective, rel=1e-5)


@pytest.mark.parametrize("name", ["squared_hinge", "smooth_hinge"])
def test_lower_bound_never_exceeds_an_independent_clarabel_solve(solved, name):
    p, exact, first_order = solved[name]
    reported, at_M = _clarabel(p)
    assert at_M == pytest.approx(reported, rel=1e-7)
    rng = np.random.default_rng(1)
    for M in [exact.M, first_order.M, np.eye(4), 0.05 * np.eye(4), _random_psd(rng, 4)]:
        c = mo.certify(p, M)
        assert c.lower <= at_M  # rigorous: f(M_clarabel) >= f*
        assert c.lower <= reported + 1e-8 * abs(reported)
    # tight at the optimum
    assert mo.certify(p, exact.M).lower == pytest.approx(reported, rel=1e-6)


def test_frobenius_regulariser_and_sample_weights_are_certified(wine_pca):
    X, y = wine_pca
    w = np.random.default_rng(3).uniform(0.2, 2.0, size=len(y))
    p = mo.LMNNProblem(X, y, k=2, loss="squared_hinge", regularizer=Frobenius(0.5), sample_weight=w)
    sol = mo.solve(p, backend="cvxpy", solver_tol=1e-9)
    assert sol.status is mo.Status.OPTIMAL and sol.certificate.rel_gap <= 1e-6
    assert sol.certificate.details["dual form"] == "Frobenius-regularised (closed form)"
    reported, at_M = _clarabel(p)
    for M in [sol.M, np.eye(4)]:
        assert mo.certify(p, M).lower <= min(at_M, reported + 1e-8 * abs(reported))


def test_a_solution_file_records_the_loss(solved, tmp_path):
    p, exact, _ = solved["smooth_hinge"]
    save_model(tmp_path / "s.npz", exact, problem=p)
    got = load_model(tmp_path / "s.npz")
    assert got.model_metadata_["problem"]["loss"] == {"loss": "smooth_hinge", "width": 0.5}
    assert got.objective == exact.objective and got.certificate.lower == exact.certificate.lower


# ---------------------------------------------------------------------------------------------- (e) degenerate data
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(6, 11), d=st.integers(1, 14), seed=st.integers(0, 2**31 - 1), constant=st.booleans(),
       duplicate=st.booleans(), mu=st.sampled_from([0.2, 0.5, 1.0]))
def test_lower_bound_stays_below_the_optimum_on_degenerate_data(n, d, seed, constant, duplicate, mu):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.choice([1e-3, 1.0, 1e3], size=d)
    if constant:
        X[:, 0] = 2.5  # a constant column: P and every A_t vanish on it
    if duplicate:
        X[1] = X[0]  # a duplicate point (same class: its target difference is zero)
    y = np.arange(n) % 3
    p = mo.LMNNProblem(X, y, k=1, mu=mu, loss="squared_hinge")
    exact = mo.solve(p, backend="cvxpy")
    reference = _clarabel(p, required=False)  # Clarabel may fail on the unscaled textbook program (badly scaled X)
    upper = exact.objective if reference is None else min(exact.objective, reference[1])  # >= the optimum
    # Clarabel's reported optimum is compared with only where it agrees with its own M's objective (on badly scaled
    # data it can report a negative optimum of this non-negative objective)
    accurate = reference is not None and abs(reference[0] - reference[1]) <= 1e-7 * max(1.0, abs(reference[1]))
    for M in [np.eye(d), exact.M, project_psd(rng.normal(size=(d, d)))]:
        c = mo.certify(p, M)
        assert c.lower <= upper
        if accurate:
            assert c.lower <= reference[0] + 1e-7 * max(abs(reference[0]), 1.0)


# ---------------------------------------------------------------------------------------------- (f) PyLMNN
# PyLMNN (J. Chiotellis, github.com/johny-c/pylmnn, LargeMarginNearestNeighbor._loss_grad_lbfgs and
# _compute_push_loss) minimises over a linear map L, with M = L^T L and its parameter weight_push_loss = mu,
#
#     f_PyLMNN(L) = (1 - mu) / mu * sum_{i, j ~> i} d_M(x_i, x_j)
#                 + sum_{i, j ~> i, l: y_l != y_i} [1 + d_M(x_i, x_j) - d_M(x_i, x_l)]_+^2
#
# (its pull gradient is scaled by (1 - mu) / mu, its push term is the squared hinge with weight 1). Hence
#
#     LMNNProblem(X, y, k, mu=mu, loss="squared_hinge", target_neighbors=T).objective(L.T @ L) = mu * f_PyLMNN(L)
#
# with T PyLMNN's target neighbours (pass them explicitly: its nearest-neighbour search may break ties
# differently), and any metricopt lower bound divided by mu bounds every value PyLMNN can reach (an L of full
# rank reaches every PSD M). PyLMNN's own evaluation equals this sum when every triplet with a positive hinge is
# among the impostors it finds: it searches within the margin radius of each point's last-listed target neighbour
# (the farthest one at the start) and subsamples beyond max_impostors; metricopt sums every triplet.
def _pylmnn_objective(X, y, T, L, mu):
    """f_PyLMNN(L) as written above (our own numpy form of the formula, not PyLMNN's code)."""
    Z = X @ L.T
    D = np.sum((Z[:, None, :] - Z[None, :, :]) ** 2, axis=-1)
    dT = D[np.arange(len(y))[:, None], T]  # (n, k)
    other = y[None, :] != y[:, None]  # (n, n)
    hinge = np.maximum(1.0 + dT[:, :, None] - D[:, None, :], 0.0) * other[:, None, :]
    return (1.0 - mu) / mu * float(dT.sum()) + float(np.sum(hinge**2))


def test_metricopt_certifies_pylmnns_objective(solved, wine_pca):
    X, y = wine_pca
    mu = 0.5
    p, exact, _ = solved["squared_hinge"]
    assert p.mu == mu
    rng = np.random.default_rng(7)
    Ls = [np.eye(4), rng.normal(size=(4, 4)), p.factor(exact.M)]
    for L in Ls:
        assert p.objective(L.T @ L) == pytest.approx(mu * _pylmnn_objective(X, y, p.target_neighbors, L, mu),
                                                     rel=1e-11)
    lower = exact.certificate.lower / mu  # a lower bound on min_L f_PyLMNN(L)
    for L in Ls:
        c = mo.certify(p, L.T @ L)  # certifying PyLMNN's answer L: its gap in PyLMNN's own objective
        assert c.upper / mu == pytest.approx(_pylmnn_objective(X, y, p.target_neighbors, L, mu), rel=1e-11)
        assert lower <= _pylmnn_objective(X, y, p.target_neighbors, L, mu)
    best = _pylmnn_objective(X, y, p.target_neighbors, Ls[-1], mu)
    assert (best - lower) / best <= 1e-6


def test_custom_losses_subclass_scalar_loss():
    class Cubic(ScalarLoss):
        name = "cubic_test"
        smooth = True

        def value(self, h):
            return np.maximum(np.asarray(h, dtype=float), 0.0) ** 3

        def derivative(self, h):
            return 3 * np.maximum(np.asarray(h, dtype=float), 0.0) ** 2

        def conjugate(self, a):
            a = np.asarray(a, dtype=float)
            return np.where(a < 0, np.inf, 2.0 * (a / 3.0) ** 1.5 * (1 + 1e-12))

        def cvxpy(self, xi):
            return cp.power(xi, 3)

        @staticmethod
        def jax_value(h, smoothing):
            import jax.numpy as jnp

            p = jnp.maximum(h, 0.0)
            return p**3, 3 * p**2

    term = TripletLoss(Cubic(), 0.5)
    assert type(term).loss_type is Cubic and term.dual_piece(None).loss == "triplet_loss"
    assert type(TripletLoss(Cubic(), 0.2)) is type(term)  # one class per loss class (one JAX compilation)


def test_the_triplet_loss_term_is_public():
    from metricopt.problems.terms import TripletLoss as Defined

    assert mo.terms.TripletLoss is Defined and "TripletLoss" in mo.terms.__all__
    term = mo.terms.TripletLoss(SquaredHinge(), 0.5)
    assert term.loss == SquaredHinge() and term.dual_piece(None).loss == "triplet_loss"
