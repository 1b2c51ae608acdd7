r"""Paper check: LMNN on the small UCI sets (iris, wine, balance scale).

Reproduces the iris, wine and balance rows of Weinberger & Saul, JMLR 10:207-244, 2009
(Table 1 and the test-error table of Section 6; also NIPS 2005, Table 1): 3-NN test
error with the Euclidean metric, with the LMNN metric, and of LMNN's energy-based rule,
averaged over random stratified 70/30 splits (the paper used 100 splits).

The metric of every split is the exact solution of the LMNN program (JMLR 2009, Eq. 14,
Section 3.4)

.. math::

    \min_{M \succeq 0}\ \tfrac12 \sum_{i,\, j \rightsquigarrow i} d_M(x_i, x_j)
    + \tfrac12 \sum_{i,\, j \rightsquigarrow i} \sum_{l:\, y_l \ne y_i}
      \big[1 + d_M(x_i, x_j) - d_M(x_i, x_l)\big]_+

(``k = 3``, ``mu = 0.5``) by the CVXPY backend, each certified by its duality gap.

Tolerances (fixed before the runs; RESULTS.md restates them):

* every solve: status ``optimal`` with certified relative gap ``<= 1e-6``;
* every set: LMNN's mean error not significantly above Euclidean's (paired mean difference
  ``<= 2`` standard errors) and the same for the energy rule;
* wine unscaled (the paper's setting, gain 16.3 pp in the paper): LMNN and energy errors
  significantly below Euclidean (paired difference ``< -2`` s.e.);
* Euclidean, LMNN and energy errors each within a band of the paper's where the protocol
  matches (random 70/30 splits of the same UCI data): iris ``+-3`` pp (4.87 / 4.37 / 3.68),
  wine unscaled ``+-5`` pp (25.00 / 8.72 / 7.67). Balance has 625 samples here against
  the paper's 535, so its errors and gains are reported, not compared.
"""

import time

import pytest

import _common as C
from metricopt import datasets

pytestmark = pytest.mark.slow

EXACT = {"backend": "cvxpy"}
GAP_TOL = 1e-6  # the exact backend certifies at 1e-6 (its default ``certify=1e-6``)


def _run(name, scale, default_splits, check, solve_options):
    X, y = datasets.load(name)
    n = C.n_splits(check, default_splits)
    splits = datasets.random_splits(y, n_splits=n, test_size=0.3, seed=0)
    return C.run_protocol(X, y, splits, solve_options, scale=scale, label=f"{name}/{scale or 'raw'}")


def test_iris():
    t0 = time.perf_counter()
    res = _run("iris", None, 100, "iris", EXACT)
    row = C.make_row("iris", "raw features", "iris", "random stratified 70/30 splits (105/45)",
                     "none", "cvxpy/SCS, exact, certified", res)
    s = row["summary"]
    checks = [
        C.assert_certified(s, res, GAP_TOL),
        C.assert_not_worse(s, "lmnn", "euclidean", "iris: LMNN kNN not worse than Euclidean kNN"),
        C.assert_not_worse(s, "energy", "euclidean", "iris: energy rule not worse than Euclidean kNN"),
        *C.assert_bands(s, "iris", 3.0, "iris"),
    ]
    notes = ["Paper: 100 random 70/30 splits (106/44 in JMLR Table 1); here 105/45 stratified splits."]
    if not checks[1].passed:
        notes.append(
            f"Not matched: LMNN is {s['lmnn-euclidean']['mean']:+.2f} pp (s.e. {s['lmnn-euclidean']['se']:.2f}) "
            f"against Euclidean here, where the paper reports a 0.50 pp gain. Our LMNN error "
            f"({s['lmnn']['mean']:.2f} %) is the paper's ({C.PAPER['iris']['lmnn']:.2f} %) within "
            f"{abs(s['lmnn']['mean'] - C.PAPER['iris']['lmnn']):.2f} pp with every solve certified optimal; it is "
            f"the Euclidean baseline that is lower ({s['euclidean']['mean']:.2f} % vs {C.PAPER['iris']['euclidean']:.2f} %), "
            "i.e. other random splits (stratified here) and kNN tie handling; 45 test points make one error 2.2 pp.")
    C.finish("iris", "iris (JMLR 2009 Table 1; NIPS 2005 Table 1)", [row], checks, notes, t0)


def test_wine():
    t0 = time.perf_counter()
    # unscaled, as in the paper. SCS reaches only ~1e-4 relative gap on the raw features
    # (feature ranges 0.1 .. 1680) in minutes, so this row uses the interior-point solver.
    raw_opts = {"backend": "cvxpy", "solver": "CLARABEL"}
    res_raw = _run("wine", None, 25, "wine", raw_opts)
    res_std = _run("wine", "standard", 100, "wine-standardized", EXACT)
    rows = [
        C.make_row("wine", "unscaled (paper)", "wine", "random stratified 70/30 splits (124/54)",
                   "none", "cvxpy/Clarabel, exact, certified", res_raw),
        C.make_row("wine", "standardized", None, "random stratified 70/30 splits (124/54)",
                   "z-score fitted on the training part", "cvxpy/SCS, exact, certified", res_std),
    ]
    s_raw, s_std = rows[0]["summary"], rows[1]["summary"]
    checks = [
        C.assert_certified(s_raw, res_raw, GAP_TOL, name="wine unscaled"),
        C.assert_certified(s_std, res_std, GAP_TOL, name="wine standardized"),
        C.assert_gain(s_raw, "lmnn", "euclidean", "wine unscaled: LMNN kNN beats Euclidean kNN"),
        C.assert_gain(s_raw, "energy", "euclidean", "wine unscaled: energy rule beats Euclidean kNN"),
        *C.assert_bands(s_raw, "wine", 5.0, "wine unscaled"),
        C.assert_not_worse(s_std, "lmnn", "euclidean", "wine standardized: LMNN kNN not worse than Euclidean"),
        C.assert_not_worse(s_std, "energy", "euclidean", "wine standardized: energy rule not worse than Euclidean"),
    ]
    notes = [
        "Unscaled wine (the paper's setting) is solved with Clarabel: with SCS, one split took 140 s "
        "and ended optimal_inaccurate at relative gap 1.3e-4 (raw feature scales 0.1 .. 1680); "
        "Clarabel solves it in ~10 s to a certified gap below 1e-6.",
        "The standardized row has no paper counterpart (the paper did not scale wine).",
    ]
    if not checks[0].passed:
        st = s_raw["certificates"]["statuses"]
        notes.append(
            f"Numerics, unscaled wine: {st.get('optimal_inaccurate', 0)} of {len(res_raw)} Clarabel solves end "
            f"optimal_inaccurate with certified relative gaps up to {s_raw['certificates']['max_rel_gap']:.1e} "
            "(tolerance 1e-6; the library reports them as inaccurate, not as optimal). Their metrics are used "
            "as they are; a gap of a few 1e-6 does not move the test errors of the row visibly.")
    lm_band = [a for a in checks if a.what.startswith("wine unscaled: LMNN 3-NN error matches")]
    if lm_band and not lm_band[0].passed:
        notes.append(
            f"Not matched: LMNN on unscaled wine reaches {s_raw['lmnn']['mean']:.2f} % against the paper's "
            f"{C.PAPER['wine']['lmnn']:.2f} % -- better than the paper by more than the stated band. The exact, "
            "certified optimum of Eq. 14 is used here; the paper's own solver and stopping rule and its "
            "random splits may explain the difference (not investigated further). The gain over Euclidean "
            f"({s_raw['lmnn-euclidean']['mean']:+.2f} pp) has the paper's direction and exceeds its size (-16.28 pp).")
    C.finish("wine", "wine (JMLR 2009 Table 1; NIPS 2005 Table 1)", rows, checks, notes, t0)


def test_balance_scale():
    t0 = time.perf_counter()
    res = _run("balance-scale", None, 100, "balance-scale", EXACT)
    row = C.make_row("balance-scale", "625 samples (UCI)", "balance-scale",
                     "random stratified 70/30 splits (437/188)", "none", "cvxpy/SCS, exact, certified", res)
    s = row["summary"]
    checks = [
        C.assert_certified(s, res, GAP_TOL),
        C.assert_not_worse(s, "lmnn", "euclidean", "balance: LMNN kNN not worse than Euclidean kNN"),
        C.assert_not_worse(s, "energy", "euclidean", "balance: energy rule not worse than Euclidean kNN"),
    ]
    notes = [
        "The paper's balance set had 535 examples (445/90 in JMLR Table 1); ours is the full UCI "
        "set of 625 (all 5^4 weight/distance combinations), so the numbers are compared by the "
        "direction and size of the gains only, and no band is asserted on the baseline.",
    ]
    for m in ("lmnn", "energy"):
        gain, paper_gain = s[f"{m}-euclidean"]["mean"], C.PAPER["balance-scale"][m] - C.PAPER["balance-scale"]["euclidean"]
        if not gain <= 0.5 * paper_gain:  # less than half the paper's gain: say so
            notes.append(
                f"Not matched: the {'LMNN 3-NN' if m == 'lmnn' else 'energy-rule'} gain over Euclidean is "
                f"{gain:+.2f} pp (s.e. {s[f'{m}-euclidean']['se']:.2f}) here against {paper_gain:+.2f} pp in the paper "
                f"({s[m]['mean']:.2f} % vs the paper's {C.PAPER['balance-scale'][m]:.2f} %, with every solve certified "
                "optimal). The data differ (625 points, the full 5^4 grid, against the paper's 535-point set); we did "
                "not find which 535 points the paper used.")
        else:
            notes.append(
                f"The {'LMNN 3-NN' if m == 'lmnn' else 'energy-rule'} gain over Euclidean, {gain:+.2f} pp "
                f"(s.e. {s[f'{m}-euclidean']['se']:.2f}), is at least half the paper's {paper_gain:+.2f} pp.")
    C.finish("balance-scale", "balance scale (JMLR 2009 Table 1; NIPS 2005 Table 1)", [row], checks, notes, t0)
