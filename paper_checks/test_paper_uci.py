r"""Paper check: LMNN on the small UCI sets (iris, wine, balance scale).

Reproduces the iris, wine and balance rows of Weinberger & Saul, JMLR 10:207-244, 2009
(Table 1 and the test-error table of Section 6; also NIPS 2005, Table 1): 3-NN test
error with the Euclidean metric, with the LMNN metric, and of LMNN's energy-based rule,
averaged over random splits (the paper used 100).

The metric of every split is the exact solution of the LMNN program (JMLR 2009, Eq. 14,
Section 3.4)

.. math::

    \min_{M \succeq 0}\ \tfrac12 \sum_{i,\, j \rightsquigarrow i} d_M(x_i, x_j)
    + \tfrac12 \sum_{i,\, j \rightsquigarrow i} \sum_{l:\, y_l \ne y_i}
      \big[1 + d_M(x_i, x_j) - d_M(x_i, x_l)\big]_+

(``k = 3``, ``mu = 0.5``) by the CVXPY backend, each certified by its duality gap.

Protocol: the paper's sizes (JMLR Table 1 as issue 16 quotes it): iris 128 points split 90/38,
wine 152 split 106/46, balance 536 split 375/161. Our files hold 150, 178 and 625 points, so each
split draws a stratified random subsample of the paper's size first (the paper's subsets are not
known), then a stratified train/test split. The paper held out 30 % of iris's training points for
validation (early stopping of its solver); the exact solver needs no stopping rule, so the metric
is trained on all 90. kNN errors use the tie-inclusive rule (:mod:`metricopt.knn`,
``ties="inclusive"``): balance's integer features make most 3rd/4th-neighbour distances exactly
equal, and the index tie rule made its errors depend on rounding (the index-rule errors are
reported beside them).

Tolerances (fixed before the runs; RESULTS.md restates them):

* every solve: status ``optimal`` with certified relative gap ``<= 1e-6``;
* every gain the paper reports (LMNN and energy below Euclidean): significant here, paired mean
  difference ``< -2`` s.e. over the splits;
* every paper number: our mean within 2 s.e. of the difference of the two means, the paper's
  s.e. estimated from our split-to-split s.d. and its 100 splits (:func:`_common.assert_paper_band`).
"""

import time

import pytest

import _common as C
from metricopt import datasets

pytestmark = pytest.mark.slow

EXACT = {"backend": "cvxpy"}
GAP_TOL = 1e-6  # the exact backend certifies at 1e-6 (its default ``certify=1e-6``)
#: balance's early-stopped row holds out this fraction (iris's, the one Table 1 gives; it lists none for balance)
BALANCE_VALIDATION = 0.3
LABEL = {"euclidean": "Euclidean 3-NN", "lmnn": "LMNN 3-NN", "energy": "energy-rule"}


def _run(name, scale, default_splits, check, solve_options, fit=None):
    X, y = datasets.load(name)
    n = C.n_splits(check, default_splits)
    splits = C.paper_size_splits(y, name, n, seed=0)
    return C.run_protocol(X, y, splits, solve_options, scale=scale, label=f"{name}/{scale or 'raw'}", fit=fit)


def _paper_assertions(s, res, key, name):
    """Certified solves, the paper's two gains, and the three paper bands."""
    paper, n_paper = C.PAPER[key], C.PAPER_PROTOCOL[key]["splits"]
    out = [C.assert_certified(s, res, GAP_TOL, name=name),
           C.assert_gain(s, "lmnn", "euclidean", f"{name}: LMNN kNN below Euclidean kNN (paper: "
                         f"{paper['lmnn'] - paper['euclidean']:+.2f} pp)"),
           C.assert_gain(s, "energy", "euclidean", f"{name}: energy rule below Euclidean kNN (paper: "
                         f"{paper['energy'] - paper['euclidean']:+.2f} pp)")]
    for m in C.METHODS:
        out.append(C.assert_paper_band(s, m, paper[m], n_paper, f"{name}: {LABEL[m]} error consistent with "
                                       f"the paper's {paper[m]:.2f} %"))
    return out


def _protocol(key):
    p = C.PAPER_PROTOCOL[key]
    return f"random stratified subsample of {p['n']}, split {p['train']}/{p['test']} (the paper's sizes)"


def test_iris():
    t0 = time.perf_counter()
    res = _run("iris", None, 100, "iris", EXACT)
    res_es = _run("iris", None, 40, "iris-early-stopped", None,
                  fit=C.early_stopped_fit(C.PAPER_PROTOCOL["iris"]["validation"]))
    rows = [C.make_row("iris", "raw features", "iris", _protocol("iris"), "none", "cvxpy/SCS, exact, certified", res),
            C.make_row("iris", "LMNN stopped early (paper)", "iris", _protocol("iris"), "none",
                       "jax, early stopping on 30 % of the training part (patience 10)", res_es)]
    s_es = rows[1]["summary"]
    checks = _paper_assertions(rows[0]["summary"], res, "iris", "iris") + [
        C.assert_gain(s_es, "lmnn", "euclidean", "iris, LMNN stopped early: LMNN kNN below Euclidean kNN "
                      "(paper: -0.50 pp)"),
        C.assert_paper_band(s_es, "lmnn", C.PAPER["iris"]["lmnn"], C.PAPER_PROTOCOL["iris"]["splits"],
                            "iris, LMNN stopped early: LMNN 3-NN error consistent with the paper's 4.37 %"),
    ]
    notes = ["Paper: 128 points, 90/38, 30 % of the training part held out for validation, 100 splits. Here: "
             "random stratified 128-point subsamples of the 150 (the paper's subset is not known). First row: the "
             "certified optimum of Eq. 14 trained on all 90 points; second row: the paper's use of the validation "
             "part, the JAX solve stopped at its lowest validation 3-NN error (40 splits)."]
    C.finish("iris", "iris (JMLR 2009 Table 1; NIPS 2005 Table 1)", rows, checks, notes, t0)


def test_wine():
    t0 = time.perf_counter()
    # unscaled, as in the paper. SCS reaches only ~1e-4 relative gap on the raw features
    # (feature ranges 0.1 .. 1680) in minutes, so this row uses the interior-point solver.
    raw_opts = {"backend": "cvxpy", "solver": "CLARABEL"}
    res_raw = _run("wine", None, 25, "wine", raw_opts)
    res_std = _run("wine", "standard", 100, "wine-standardized", EXACT)
    rows = [
        C.make_row("wine", "unscaled (paper)", "wine", _protocol("wine"), "none", "cvxpy/Clarabel, exact, certified",
                   res_raw),
        C.make_row("wine", "standardized", None, _protocol("wine"), "z-score fitted on the training part",
                   "cvxpy/SCS, exact, certified", res_std),
    ]
    s_raw, s_std = rows[0]["summary"], rows[1]["summary"]
    checks = _paper_assertions(s_raw, res_raw, "wine", "wine unscaled") + [
        C.assert_certified(s_std, res_std, GAP_TOL, name="wine standardized"),
        C.assert_gain(s_std, "lmnn", "euclidean", "wine standardized: LMNN kNN below Euclidean kNN"),
        C.assert_gain(s_std, "energy", "euclidean", "wine standardized: energy rule below Euclidean kNN"),
    ]
    notes = [
        "Paper: 152 points, 106/46, 100 splits. Here: random stratified 152-point subsamples of the 178; "
        f"{len(res_raw)} splits unscaled (Clarabel, about 20 s a solve), {len(res_std)} standardized.",
        "Unscaled wine (the paper's setting) is solved with Clarabel: with SCS, one split took 140 s "
        "and ended optimal_inaccurate at relative gap 1.3e-4 (raw feature scales 0.1 .. 1680).",
        "The standardized row has no paper counterpart (the paper did not scale wine); its gains are "
        "asserted all the same.",
    ]
    C.finish("wine", "wine (JMLR 2009 Table 1; NIPS 2005 Table 1)", rows, checks, notes, t0)


def test_balance_scale():
    t0 = time.perf_counter()
    res = _run("balance-scale", None, 100, "balance-scale", EXACT)
    res_es = _run("balance-scale", None, 40, "balance-scale-early-stopped", None, fit=C.early_stopped_fit(BALANCE_VALIDATION))
    rows = [C.make_row("balance-scale", "536 of 625 points", "balance-scale", _protocol("balance-scale"), "none",
                       "cvxpy/SCS, exact, certified", res),
            C.make_row("balance-scale", "536 of 625, LMNN stopped early", "balance-scale", _protocol("balance-scale"),
                       "none", "jax, early stopping on 30 % of the training part (patience 10)", res_es)]
    s, s_es = rows[0]["summary"], rows[1]["summary"]
    n_paper = C.PAPER_PROTOCOL["balance-scale"]["splits"]
    checks = _paper_assertions(s, res, "balance-scale", "balance") + [
        C.assert_gain(s_es, "lmnn", "euclidean", "balance, LMNN stopped early: LMNN kNN below Euclidean kNN "
                      "(paper: -7.17 pp)"),
        C.assert_paper_band(s_es, "lmnn", C.PAPER["balance-scale"]["lmnn"], n_paper,
                            "balance, LMNN stopped early: LMNN 3-NN error consistent with the paper's 11.16 %"),
    ]
    notes = [
        "Paper: 535 points (375/161, 100 splits). UCI's set is the full 5^4 grid of 625; which 535 points "
        "the paper kept is not known, so each split draws a stratified random 536-point subsample.",
        f"Exact ties: with the index tie rule (lower training index first) the errors are Euclidean "
        f"{s['euclidean_index_ties']['mean']:.2f} % and LMNN {s['lmnn_index_ties']['mean']:.2f} % on the same "
        f"splits, against {s['euclidean']['mean']:.2f} % and {s['lmnn']['mean']:.2f} % with the tie-inclusive rule.",
        f"The exact optimum of Eq. 14 (certified) gives LMNN {s['lmnn']['mean']:.2f} %; the same program solved by the "
        f"JAX backend and stopped early on a 30 % validation part gives {s_es['lmnn']['mean']:.2f} % "
        f"({len(res_es)} splits; statuses {s_es['certificates']['statuses']}): "
        + ("the paper's 11.16 % is reproduced by the early-stopped solve, not by the optimum." if checks[-1].passed
           else "the paper's 11.16 % is reproduced by neither."),
    ]
    C.finish("balance-scale", "balance scale (JMLR 2009 Table 1; NIPS 2005 Table 1)", rows, checks, notes, t0)
