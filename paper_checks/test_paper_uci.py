r"""Paper check: LMNN on the small UCI sets (iris, wine, balance scale).

Reproduces the iris, wine and bal columns of Weinberger & Saul, JMLR 10:207-244, 2009, Table 1
(Section 4.1): 3-NN test error with the Euclidean metric (row "kNN Euclidean"), with the LMNN metric
("LMNN PCA"; on these sets the paper's PCA keeps every dimension) and of LMNN's energy-based rule
("LMNN (energy)"), averaged over random splits. Every paper number comes from ``paper_numbers.csv``.
NIPS 2005 ran the same sets with other sizes (its Table 1) and with ``k`` and ``mu`` set by cross
validation; its error rates are the bars of its Fig. 2, which the text copy does not assign to data
sets, so nothing is compared with it.

The metric of every split is the exact solution of the LMNN program (JMLR 2009, Eq. 14,
Section 3.4)

.. math::

    \min_{M \succeq 0}\ \tfrac12 \sum_{i,\, j \rightsquigarrow i} d_M(x_i, x_j)
    + \tfrac12 \sum_{i,\, j \rightsquigarrow i} \sum_{l:\, y_l \ne y_i}
      \big[1 + d_M(x_i, x_j) - d_M(x_i, x_l)\big]_+

(``k = 3``, ``mu = 0.5``, JMLR 2009 Section 4) by the CVXPY backend, each certified by its duality gap.

Protocol: the paper's sizes (JMLR 2009 Table 1, :data:`_common.PAPER_PROTOCOL`: inputs, training and
test examples). Our files hold 150, 178 and 625 points, so each split draws a stratified random
subsample of the paper's size first (the paper's subsets are not known), then a stratified train/test
split. Table 1 lists a validation part for iris (none for wine and bal) without saying how it was
used (for Yale B, Section 4.2, training stopped at the lowest validation error); the exact solver needs
no stopping rule, so the first row's metric is trained on all training points and a second row stops
the JAX solve early on the validation part. kNN errors use the tie-inclusive rule
(:mod:`metricopt.knn`, ``ties="inclusive"``): balance's integer features make most 3rd/4th-neighbour
distances exactly equal, and the index tie rule (the paper's rule of Section 4: on a tied vote drop
the farthest neighbour) made its errors depend on rounding (the index-rule errors are reported beside
them). The remaining differences from the paper's protocol are listed in RESULTS.md.

Tolerances (fixed before the runs; RESULTS.md restates them):

* every solve: status ``optimal`` with certified relative gap ``<= 1e-6``;
* every gain the paper reports (LMNN and energy below Euclidean: Table 1 has both on all three sets):
  significant here, paired mean difference ``< -2`` s.e. over the splits;
* every paper number: our mean within 2 s.e. of the difference of the two means, the paper's
  s.e. estimated from our split-to-split s.d. and its number of splits (:func:`_common.assert_paper_band`).
"""

import time

import pytest

import _common as C
from metricopt import datasets

pytestmark = pytest.mark.slow

EXACT = {"backend": "cvxpy"}
GAP_TOL = 1e-6  # the exact backend certifies at 1e-6 (its default ``tol=1e-6``, metricopt.options)
#: balance's early-stopped row holds out this fraction (iris's; Table 1 lists none for bal, so this row is not the
#: paper's protocol: it shows what stopping early does)
BALANCE_VALIDATION = C.PAPER_PROTOCOL["iris"]["validation"]


def _run(name, scale, default_splits, check, solve_options, fit=None):
    X, y = datasets.load(name)
    n = C.n_splits(check, default_splits)
    splits = C.paper_size_splits(y, name, n, seed=0)
    return C.run_protocol(X, y, splits, solve_options, scale=scale, label=f"{name}/{scale or 'raw'}", fit=fit)


def _paper_assertions(s, res, key, name):
    """Certified solves, the paper's two gains, and the three paper bands."""
    paper, n_paper = C.PAPER[key], C.PAPER_PROTOCOL[key]["splits"]
    out = [C.assert_certified(s, res, GAP_TOL, name=name)]
    for m in ("lmnn", "energy"):  # Table 1 has both gains on iris, wine and bal
        assert C.direction(paper[m], paper["euclidean"]) == "below"
        out.append(C.assert_gain(s, m, "euclidean", C.gain_what(name, key, m)))
    for m in C.METHODS:
        out.append(C.assert_paper_band(s, m, paper[m], n_paper, C.band_what(name, m, paper[m])))
    return out


def _protocol(key):
    p = C.PAPER_PROTOCOL[key]
    return f"random stratified subsample of {p['n']}, split {p['train']}/{p['test']} (the paper's sizes)"


def _paper_note(key, here):
    p = C.PAPER_PROTOCOL[key]
    return (f"Paper (JMLR 2009 Table 1): {p['inputs']} inputs, {p['train']}/{p['test']}, {p['validation']:.0%} "
            f"validation, {p['splits']} splits. Here: {here}")


def test_iris():
    t0 = time.perf_counter()
    res = _run("iris", None, 100, "iris", EXACT)
    res_es = _run("iris", None, 40, "iris-early-stopped", None,
                  fit=C.early_stopped_fit(C.PAPER_PROTOCOL["iris"]["validation"]))
    val = C.PAPER_PROTOCOL["iris"]["validation"]
    rows = [C.make_row("iris", "raw features", "iris", _protocol("iris"), "none", "cvxpy/SCS, exact, certified", res),
            C.make_row("iris", "LMNN stopped early (paper's validation part)", "iris", _protocol("iris"), "none",
                       f"jax, early stopping on {val:.0%} of the training part (patience 10)", res_es)]
    s_es = rows[1]["summary"]
    name = "iris, LMNN stopped early"
    checks = _paper_assertions(rows[0]["summary"], res, "iris", "iris") + [
        C.assert_gain(s_es, "lmnn", "euclidean", C.gain_what(name, "iris", "lmnn")),
        C.assert_paper_band(s_es, "lmnn", C.PAPER["iris"]["lmnn"], C.PAPER_PROTOCOL["iris"]["splits"],
                            C.band_what(name, "lmnn", C.PAPER["iris"]["lmnn"])),
    ]
    notes = [_paper_note("iris", "random stratified 128-point subsamples of the 150 (the paper's subset is not "
                         "known). First row: the certified optimum of Eq. 14 trained on all training points; second "
                         "row: the JAX solve stopped at its lowest validation 3-NN error on the validation part (40 "
                         "splits; the paper does not say how it used that part).")]
    C.finish("iris", "iris (JMLR 2009 Table 1)", rows, checks, notes, t0)


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
        _paper_note("wine", f"random stratified 152-point subsamples of the 178; {len(res_raw)} splits unscaled "
                    f"(Clarabel, about 20 s a solve), {len(res_std)} standardized."),
        "Unscaled wine (the paper's setting) is solved with Clarabel: with SCS, one split took 140 s "
        "and ended optimal_inaccurate at relative gap 1.3e-4 (raw feature scales 0.1 .. 1680).",
        "The standardized row has no paper counterpart (the paper does not say it scaled wine); its gains are "
        "asserted all the same.",
    ]
    C.finish("wine", "wine (JMLR 2009 Table 1)", rows, checks, notes, t0)


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
    name, paper_lmnn = "balance, LMNN stopped early", C.PAPER["balance-scale"]["lmnn"]
    checks = _paper_assertions(s, res, "balance-scale", "balance") + [
        C.assert_gain(s_es, "lmnn", "euclidean", C.gain_what(name, "balance-scale", "lmnn")),
        C.assert_paper_band(s_es, "lmnn", paper_lmnn, n_paper, C.band_what(name, "lmnn", paper_lmnn)),
    ]
    notes = [
        _paper_note("balance-scale", "UCI's set is the full 5^4 grid of 625; which points the paper kept is not "
                    "known (Table 1's 375 + 161 = 536 training and test examples against its 535 inputs), so each "
                    "split draws a stratified random 536-point subsample."),
        f"Exact ties: with the index tie rule (lower training index first) the errors are Euclidean "
        f"{s['euclidean_index_ties']['mean']:.2f} % and LMNN {s['lmnn_index_ties']['mean']:.2f} % on the same "
        f"splits, against {s['euclidean']['mean']:.2f} % and {s['lmnn']['mean']:.2f} % with the tie-inclusive rule.",
        f"The exact optimum of Eq. 14 (certified) gives LMNN {s['lmnn']['mean']:.2f} %; the same program solved by the "
        f"JAX backend and stopped early on a 30 % validation part gives {s_es['lmnn']['mean']:.2f} % "
        f"({len(res_es)} splits; statuses {s_es['certificates']['statuses']}): "
        + (f"the paper's {paper_lmnn:.2f} % is reproduced by the early-stopped solve, not by the optimum"
           if checks[-1].passed else f"the paper's {paper_lmnn:.2f} % is reproduced by neither")
        + f"; Table 1 lists {C.PAPER_PROTOCOL['balance-scale']['validation']:.0%} validation for bal, so the "
        "early-stopped row is not the paper's protocol.",
    ]
    C.finish("balance-scale", "balance scale (JMLR 2009 Table 1)", rows, checks, notes, t0)
