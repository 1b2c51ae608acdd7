"""The JAX backend's starting scale: ``best_scale`` minimises the objective along the ray
``c M0`` exactly, from one triplet search (the hinge as sorted breakpoints), with the old
search-per-evaluation scan as fallback."""

import numpy as np
import pytest
from sklearn.datasets import load_iris, load_wine
from sklearn.preprocessing import StandardScaler

import metricopt as mo
from metricopt.backends.jax.backend import _scan_scale, best_scale


def _problems():
    Xw, yw = load_wine(return_X_y=True)
    Xi, yi = load_iris(return_X_y=True)
    return {
        "wine raw": mo.LMNNProblem(Xw, yw, k=3, mu=0.5),
        "wine standardized": mo.LMNNProblem(StandardScaler().fit_transform(Xw), yw, k=3, mu=0.5),
        "iris + Frobenius": mo.LMNNProblem(Xi, yi, k=3, mu=0.5, regularizer=mo.terms.Frobenius(0.1)),
        "iris mu=0.9": mo.LMNNProblem(Xi, yi, k=2, mu=0.9),
    }


@pytest.mark.parametrize("name", list(_problems()))
def test_best_scale_is_the_minimum_along_the_ray(name):
    P = _problems()[name]
    I = np.eye(P.d)
    c = best_scale(P)
    fc = P.objective(c * I)
    grid = c * np.exp(np.linspace(-4, 4, 81))
    assert fc <= min(P.objective(g * I) for g in grid) + 1e-9 * abs(fc)
    # a local minimum to relative 1e-6 in c (the objective is convex along the ray)
    assert fc <= P.objective(c * (1 + 1e-6) * I) + 1e-9 * abs(fc)
    assert fc <= P.objective(c * (1 - 1e-6) * I) + 1e-9 * abs(fc)
    # never worse than the scan it replaces
    assert fc <= P.objective(_scan_scale(P, I) * I) + 1e-9 * abs(fc)


def test_best_scale_along_a_given_direction_and_when_the_first_band_is_too_narrow():
    Xw, yw = load_wine(return_X_y=True)
    P = mo.LMNNProblem(StandardScaler().fit_transform(Xw), yw, k=3, mu=0.5)
    rng = np.random.default_rng(0)
    B = rng.normal(size=(P.d, P.d))
    M0 = B @ B.T / P.d
    # scaled up 1e4: the first band D (the mean target distance at M0) is far too wide and
    # scaled down 1e-4 far too narrow, so the band grows by factors of 4 until it holds the minimum
    for s in (1e4, 1e-4):
        c = best_scale(P, s * M0)
        fc = P.objective(c * s * M0)
        grid = c * np.exp(np.linspace(-3, 3, 61))
        assert fc <= min(P.objective(g * s * M0) for g in grid) + 1e-9 * abs(fc)


def test_best_scale_falls_back_to_the_scan_above_the_triplet_budget():
    P = _problems()["wine standardized"]
    assert best_scale(P, max_triplets=10) == _scan_scale(P, np.eye(P.d))


def test_tiny_feature_ranges_get_a_valid_search_interval():
    # mean target distance below 2^-20: the upper end of the search moves with 1/D (it was fixed at 2^20, and
    # scipy refused the inverted interval with a ValueError)
    X, y = load_iris(return_X_y=True)
    p = mo.LMNNProblem(X * 1e-7, y, k=3)
    sol = mo.solve(p, backend="jax", tol=1e-4)
    assert sol.status is mo.Status.OPTIMAL and sol.certificate.rel_gap <= 1e-4
