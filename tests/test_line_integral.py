"""Line-integral distances through an own-metric NN field and grid geodesics
(Ramanan & Baker, "Local distance functions", PAMI 2011, Eq. 21): ``metricopt.methods.local.line_integral``.

The lower-envelope walk is checked against the brute force over all pairwise crossings
(``_line_integral_bruteforce``), both against hand-computed values and against a fine midpoint rule
whose error is bounded rigorously (see ``test_walk_and_bruteforce_match_fine_quadrature``).
"""

import numpy as np
import pytest

from metricopt.methods.local import line_integral as li
from metricopt.methods.local.line_integral import (
    _line_integral_bruteforce, _quad_roots, cell_of, grid_geodesic, line_coefficients, line_integral_distance,
    line_integral_distances)

# ----------------------------------------------------------------------------- fields


def _random_field(rng, R, d, rank_deficient=True, near_equal=True):
    """Random PSD metrics ``L L^T``: some rank-deficient, some pairs differing by ~1e-9 (one pair
    also sharing its reference point), one exact duplicate (reference and metric)."""
    refs = rng.normal(size=(R, d))
    L = rng.normal(size=(R, d, d))
    if rank_deficient:
        for s in range(0, R, 2):
            L[s, :, rng.integers(1, d):] = 0.0  # rank 1 .. d-1
    M = L @ L.transpose(0, 2, 1)
    if near_equal and R >= 4:
        P = rng.normal(size=(d, d))
        M[1] = M[0] + 1e-9 * (P @ P.T)
        M[3] = M[2] + 1e-9 * np.eye(d)
        refs[3] = refs[2]
    if R >= 6:
        refs[5], M[5] = refs[4], M[4]  # exact duplicate: the lower index wins everywhere
    return refs, M


def _random_cases(seed, n):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        d = int(rng.choice([2, 3, 5]))
        R = int(rng.integers(3, 31))
        refs, M = _random_field(rng, R, d)
        a, b = 2.0 * rng.normal(size=d), 2.0 * rng.normal(size=d)
        yield a, b, refs, M


def _two_cells():
    """r_1 = (-1, 0) with I, r_2 = (1, 0) with 4 I. On the x axis cell 2 wins where
    (x + 1)^2 > 4 (x - 1)^2, i.e. on (1/3, 3)."""
    return np.array([[-1.0, 0.0], [1.0, 0.0]]), np.stack([np.eye(2), 4.0 * np.eye(2)])


# ----------------------------------------------------------------------------- cells


def test_cell_of_matches_direct_argmin():
    rng = np.random.default_rng(0)
    refs, M = _random_field(rng, 17, 4)
    X = rng.normal(size=(500, 4)) * 2
    q = np.array([[(x - r) @ m @ (x - r) for r, m in zip(refs, M)] for x in X])
    np.testing.assert_array_equal(cell_of(X, refs, M), np.argmin(q, axis=1))
    assert cell_of(X[0], refs, M) == np.argmin(q[0])
    # blocked path: a block size that splits the points gives the same answer
    old = li._BLOCK
    try:
        li._BLOCK = 17 * 4 * 7
        np.testing.assert_array_equal(cell_of(X, refs, M), np.argmin(q, axis=1))
    finally:
        li._BLOCK = old


def test_cell_of_ties_go_to_the_lowest_index():
    refs = np.zeros((3, 2))
    M = np.stack([np.eye(2)] * 3)
    np.testing.assert_array_equal(cell_of(np.array([[1.0, 2.0], [0.0, 0.0]]), refs, M), [0, 0])


# ----------------------------------------------------------------------------- exact values


def test_one_reference_point_is_the_constant_metric_norm():
    rng = np.random.default_rng(1)
    for d in (1, 2, 7):
        L = rng.normal(size=(d, d))
        M = (L @ L.T)[None]
        refs = rng.normal(size=(1, d))
        a, b = rng.normal(size=d), rng.normal(size=d)
        D = b - a
        want = np.sqrt(D @ M[0] @ D)
        assert abs(line_integral_distance(a, b, refs, M) - want) <= 1e-12 * max(1.0, want)
        assert abs(line_integral_distance(a, b, refs, M, squared=True) - want**2) <= 1e-12 * max(1.0, want**2)


def test_two_cells_known_crossings():
    refs, M = _two_cells()
    # [-2, 2]: cell 1 (norm 1) on [-2, 1/3], cell 2 (norm 2) on [1/3, 2]: 7/3 + 2 * 5/3
    val, (breaks, cells) = line_integral_distance([-2, 0], [2, 0], refs, M, return_pieces=True)
    assert abs(val - 17 / 3) <= 1e-12
    np.testing.assert_allclose(breaks, [0, (1 / 3 + 2) / 4, 1], atol=1e-14)
    np.testing.assert_array_equal(cells, [0, 1])
    # [-2, 5]: the segment leaves cell 2 again at x = 3: 7/3 + 2 * 8/3 + 2
    val, (breaks, cells) = line_integral_distance([-2, 0], [5, 0], refs, M, return_pieces=True)
    assert abs(val - 29 / 3) <= 1e-12
    np.testing.assert_allclose(breaks, [0, (1 / 3 + 2) / 7, 5 / 7, 1], atol=1e-14)
    np.testing.assert_array_equal(cells, [0, 1, 0])
    assert abs(line_integral_distance([-2, 0], [5, 0], refs, M, squared=True) - (29 / 3) ** 2) <= 1e-10
    # off the axis, y = 1: cell 2 where (x+1)^2 + 1 > 4 ((x-1)^2 + 1), i.e. 3x^2 - 10x + 6 < 0
    lo, hi = (10 - np.sqrt(28)) / 6, (10 + np.sqrt(28)) / 6
    want = (lo + 2) + 2 * (hi - lo) + (5 - hi)
    assert abs(line_integral_distance([-2, 1], [5, 1], refs, M) - want) <= 1e-12
    assert abs(_line_integral_bruteforce([-2, 1], [5, 1], refs, M) - want) <= 1e-12


def test_start_on_a_boundary_takes_the_cell_entered():
    refs, M = _two_cells()
    x = 1 / 3  # on the boundary (up to rounding): the piece after it decides
    val, (_, cells) = line_integral_distance([x, 0], [2, 0], refs, M, return_pieces=True)
    assert abs(val - 2 * (2 - x)) <= 1e-12 and list(cells) == [1]
    val, (_, cells) = line_integral_distance([x, 0], [-2, 0], refs, M, return_pieces=True)
    assert abs(val - (x + 2)) <= 1e-12 and list(cells) == [0]
    # an exact tie at lambda = 0 (duplicate cells): lowest index; equal values, then derivative
    refs2 = np.array([[0.0, 0.0], [0.0, 0.0], [2.0, 0.0]])
    M2 = np.stack([np.eye(2), np.eye(2), 9.0 * np.eye(2)])
    val, (_, cells) = line_integral_distance([1.0, 0], [1.0, 3.0], refs2, M2, return_pieces=True)
    assert cells[0] == 0


def test_zero_length_and_symmetry():
    for a, b, refs, M in _random_cases(2, 40):
        assert line_integral_distance(a, a, refs, M) == 0.0
        ab = line_integral_distance(a, b, refs, M)
        ba = line_integral_distance(b, a, refs, M)
        assert abs(ab - ba) <= 1e-10 * max(1.0, ab)


# ----------------------------------------------------------------------------- walk vs reference


def test_quad_roots_match_numpy_roots_and_degenerate_cases():
    rng = np.random.default_rng(3)
    qa, qb, qc = rng.normal(size=(3, 400))
    qa[:50] *= 1e-14  # nearly linear
    r1, r2 = _quad_roots(qa, qb, qc)
    for i in range(400):
        want = sorted(r.real for r in np.roots([qa[i], qb[i], qc[i]]) if abs(r.imag) < 1e-12)
        got = sorted(r for r in (r1[i], r2[i]) if np.isfinite(r))
        if not want:
            assert not got
            continue
        close = [w for w in want if abs(w) < 1e6]  # np.roots' huge root of a nearly linear one
        got_close = [g for g in got if abs(g) < 1e6]
        np.testing.assert_allclose(got_close, close, rtol=1e-9)
    # linear, constant, double root at 0
    r1, r2 = _quad_roots(np.array([0.0, 0.0, 2.0]), np.array([2.0, 0.0, 0.0]), np.array([-1.0, 3.0, 0.0]))
    assert r2[0] == 0.5 and not np.isfinite(r1[0])
    assert not np.isfinite(r1[1]) and not np.isfinite(r2[1])
    assert r1[2] == 0.0


WALK_VS_BRUTE = []


def test_walk_matches_bruteforce_on_random_fields():
    worst = 0.0
    for a, b, refs, M in _random_cases(4, 300):
        w = line_integral_distance(a, b, refs, M)
        v = _line_integral_bruteforce(a, b, refs, M)
        err = abs(w - v) / max(1.0, v)
        worst = max(worst, err)
        assert err <= 1e-10, (w, v)
        w2 = line_integral_distance(a, b, refs, M, squared=True)
        assert abs(w2 - v * v) <= 1e-10 * max(1.0, v * v)
    WALK_VS_BRUTE.append(worst)
    print(f"max |walk - brute| / max(1, brute) over 300 fields: {worst:.2e}")


def test_walk_matches_bruteforce_where_segments_pass_through_reference_points():
    """Segments through a reference point of a rank-deficient or duplicated cell: exact ties."""
    rng = np.random.default_rng(5)
    for _ in range(60):
        d = int(rng.choice([2, 3]))
        refs, M = _random_field(rng, int(rng.integers(4, 12)), d)
        a = refs[int(rng.integers(len(refs)))] + (0.0 if rng.random() < 0.5 else 0.1 * rng.normal(size=d))
        b = refs[int(rng.integers(len(refs)))]
        v = _line_integral_bruteforce(a, b, refs, M)
        assert abs(line_integral_distance(a, b, refs, M) - v) <= 1e-10 * max(1.0, v)


QUADRATURE = []


def test_walk_and_bruteforce_match_fine_quadrature():
    """Midpoint rule with N samples, the cell of each sample by direct argmin. The integrand is
    piecewise constant, so every sample interval that lies inside one piece is integrated exactly; a
    sample interval containing a breakpoint errs by at most h (max - min) of the piece norms
    sqrt(D^T M_c D), h = 1/N. Hence |quad - exact| <= K h (max - min), K the number of interior
    breakpoints (taken from the brute force, which over-counts). With N = 200,000 that is ~1e-5
    relative; the measured error is recorded."""
    N = 200_000
    lam = (np.arange(N) + 0.5) / N
    worst_rel, worst_ratio = 0.0, 0.0
    for a, b, refs, M in list(_random_cases(6, 4)):
        D = b - a
        exact, (breaks, cells) = _line_integral_bruteforce(a, b, refs, M, return_pieces=True)
        norms = np.sqrt(np.maximum(np.einsum("d,sde,e->s", D, M, D), 0.0))
        c = cell_of(a + lam[:, None] * D, refs, M)
        quad = norms[c].mean()
        on = norms[np.unique(cells)]
        bound = (len(breaks) - 2) * (on.max() - on.min()) / N + 1e-12 * max(1.0, exact)
        err = abs(quad - exact)
        assert err <= bound, (err, bound)
        walk = line_integral_distance(a, b, refs, M)
        assert abs(walk - quad) <= bound + 1e-10 * max(1.0, exact)
        worst_rel = max(worst_rel, err / exact)
        worst_ratio = max(worst_ratio, err / bound)
    QUADRATURE.append((worst_rel, worst_ratio))
    print(f"max |quad - exact| / exact: {worst_rel:.2e} (at most {worst_ratio:.2f} of the bound)")


def test_step_guard_falls_back_to_bruteforce(monkeypatch):
    a, b, refs, M = next(_random_cases(7, 1))
    want = _line_integral_bruteforce(a, b, refs, M)
    monkeypatch.setattr(li, "_max_steps", lambda R: 0)
    assert line_integral_distance(a, b, refs, M) == want


# ----------------------------------------------------------------------------- many pairs


def test_many_pairs_and_one_query_many_ends():
    rng = np.random.default_rng(8)
    refs, M = _random_field(rng, 25, 6)
    A = rng.normal(size=(12, 6)) * 2
    B = rng.normal(size=(12, 6)) * 2
    one = np.array([line_integral_distance(x, y, refs, M) for x, y in zip(A, B)])
    np.testing.assert_allclose(line_integral_distances(A, B, refs, M), one, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(line_integral_distances(A, B, refs, M, squared=True), one**2, rtol=1e-11)
    from_a = np.array([line_integral_distance(A[0], y, refs, M) for y in B])
    np.testing.assert_allclose(line_integral_distances(A[0], B, refs, M), from_a, rtol=1e-12, atol=1e-12)
    cA, cB, cC = line_coefficients(A[0], B, refs, M)
    D = B[3] - A[0]
    np.testing.assert_allclose(cA[3], np.einsum("d,sde,e->s", D, M, D), rtol=1e-12)
    np.testing.assert_allclose(cB[3], 2 * np.einsum("d,sde,se->s", D, M, A[0] - refs), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(cC, np.einsum("sd,sde,se->s", A[0] - refs, M, A[0] - refs), rtol=1e-12)


def test_bad_shapes_raise():
    refs, M = _two_cells()
    with pytest.raises(ValueError):
        line_integral_distance([0, 0, 0], [1, 0], refs, M)
    with pytest.raises(ValueError):
        line_integral_distance([0, 0], [1, 0], refs, M[:1])
    with pytest.raises(ValueError):
        grid_geodesic([0, 0], [1, 0], np.zeros((1, 3)), np.eye(3)[None], ((-1, 1), (-1, 1)))
    with pytest.raises(ValueError):
        grid_geodesic([0, 0], [1, 0], refs, M, ((-1, 1), (-1, 1)), connectivity=4)


# ----------------------------------------------------------------------------- grid geodesics


def _metrication_factor(M, stencil):
    """max over directions v of (cheapest conic combination of stencil steps reaching v) / |v|_M:
    for v between consecutive stencil directions u1, u2 (v = alpha u1 + beta u2, alpha, beta >= 0)
    the grid cost is alpha |u1|_M + beta |u2|_M."""
    steps = [np.array(s, float) for s in stencil] + [-np.array(s, float) for s in stencil]
    steps.sort(key=lambda u: np.arctan2(u[1], u[0]))
    t = np.linspace(0, 1, 2001)
    worst = 1.0
    for k in range(len(steps)):
        u1, u2 = steps[k], steps[(k + 1) % len(steps)]
        v = (1 - t)[:, None] * u1 + t[:, None] * u2
        cost = (1 - t) * np.sqrt(u1 @ M @ u1) + t * np.sqrt(u2 @ M @ u2)
        worst = max(worst, float((cost / np.sqrt(np.einsum("nd,de,ne->n", v, M, v))).max()))
    return worst


def test_grid_edge_weights_are_exact_line_integrals():
    """The vectorised edge weights (one cell, one crossing, else the walk) equal
    line_integral_distance edge by edge, on fields with rank-deficient metrics."""
    for seed in range(2):
        rng = np.random.default_rng(10 + seed)
        R = 12
        refs = rng.uniform(-2, 2, size=(R, 2))
        L = rng.normal(size=(R, 2, 2))
        L[::3, :, 1] = 0.0
        M = L @ L.transpose(0, 2, 1)
        xs = np.linspace(-3, 3, 31)
        X = np.array([[x, y] for x in xs for y in xs])
        S = li._scores(X, refs, M)
        for D in (np.array([0.2, 0.0]), np.array([0.4, -0.2]), np.array([0.2, 0.2])):
            w = li._edge_weights(X, D, refs, M, S, np.arange(len(X)))
            want = np.array([line_integral_distance(x, x + D, refs, M) for x in X])
            np.testing.assert_allclose(w, want, rtol=1e-12, atol=1e-12)


def test_grid_geodesic_is_at_most_the_line_integral_up_to_metrication():
    """Grid paths cannot follow a straight segment exactly: in one cell the cheapest grid path is at
    most rho(M_c) times the M_c-length (rho: the 16-stencil's metrication factor, computed below,
    ~1.03 for these metrics), and at each of the K cell boundaries the snapped path may detour by
    about two grid steps of the most expensive metric. So geo <= rho_max line + 2 (K + 1) h
    sqrt(lambda_max)."""
    rng = np.random.default_rng(9)
    R = 8
    refs = rng.uniform(-2, 2, size=(R, 2))
    Q = np.linalg.qr(rng.normal(size=(R, 2, 2)))[0]
    ev = rng.uniform(0.5, 2.0, size=(R, 2))
    M = Q @ (ev[:, :, None] * Q.transpose(0, 2, 1))
    bounds, n = ((-3, 3), (-3, 3)), 101  # h = 0.06: a and b below are grid nodes
    rho = max(_metrication_factor(m, li._STENCIL16) for m in M)
    h = 0.06
    for a, b in [([-2.04, -0.96], [1.98, 1.62]), ([-2.7, 2.1], [2.4, -1.5])]:
        g = grid_geodesic(a, b, refs, M, bounds, n=n)
        np.testing.assert_allclose(g.a_node, a, atol=1e-12)
        np.testing.assert_allclose(g.b_node, b, atol=1e-12)
        line, (breaks, _) = line_integral_distance(a, b, refs, M, return_pieces=True)
        K = len(breaks) - 2
        allowance = 2 * (K + 1) * h * np.sqrt(ev.max())
        assert g.length <= rho * line + allowance, (g.length, line, rho, allowance)
        # and the returned path's length is what it claims (it is an actual path)
        seg = sum(line_integral_distance(p, q, refs, M) for p, q in zip(g.path[:-1], g.path[1:]))
        assert abs(seg - g.length) <= 1e-9 * g.length


def test_grid_geodesic_goes_around_an_expensive_cell():
    """Cell 0 (metric 100 I at the origin) against four far cells (I at distance 10): cell 0 is
    {100 |x|^2 < min_s |x - r_s|^2}, radius 10/11 along the axes. The straight line from (-2, 0)
    to (2, 0) crosses it: 2 (2 - 10/11) + 10 (20/11) = 224/11 ~ 20.4. Going around it costs at most
    ~ 4 + pi 10/11 ~ 6.9: the geodesic must be far below the line."""
    refs = np.array([[0.0, 0.0], [10, 0], [-10, 0], [0, 10], [0, -10]])
    M = np.stack([100 * np.eye(2)] + [np.eye(2)] * 4)
    line = line_integral_distance([-2, 0], [2, 0], refs, M)
    assert abs(line - 224 / 11) <= 1e-10
    g = grid_geodesic([-2, 0], [2, 0], refs, M, ((-3, 3), (-3, 3)), n=121, connectivity=16)
    assert g.length < 0.5 * line
    assert 4.0 <= g.length <= 4 + np.pi * 10 / 11  # at least the Euclidean distance
    # the path avoids the expensive cell (the grid path may touch its boundary only)
    mids = 0.5 * (g.path[1:] + g.path[:-1])
    assert (cell_of(mids, refs, M) != 0).all()
    g8 = grid_geodesic([-2, 0], [2, 0], refs, M, ((-3, 3), (-3, 3)), n=61, connectivity=8)
    assert g8.length < 0.5 * line and g8.length >= 4.0


def test_grid_geodesic_snaps_and_adds_the_connectors():
    refs, M = _two_cells()
    a, b = np.array([-1.93, 0.011]), np.array([1.52, -0.3])
    g = grid_geodesic(a, b, refs, M, ((-2, 2), (-2, 2)), n=41)
    np.testing.assert_allclose(g.a_node, [-1.9, 0.0])
    np.testing.assert_allclose(g.b_node, [1.5, -0.3])
    want = g.grid_length + line_integral_distance(a, g.a_node, refs, M) + line_integral_distance(g.b_node, b, refs, M)
    assert abs(g.length - want) <= 1e-12
    np.testing.assert_array_equal(g.path[0], a)
    np.testing.assert_array_equal(g.path[-1], b)
