r"""Paper check: multi-pass and multi-metric LMNN on UCI letter recognition (JMLR 2009, Sections 5.1 and 5.2;
Table 1, letters column, rows "LMNN (multiple passes)" and "LMNN (multiple metrics)" against "LMNN PCA" and
"kNN Euclidean").

Protocol (JMLR 2009 Sec. 4 and Table 1, letters: 14,000 training and 6,000 test examples, 16 features, no
reduction, so the paper's "LMNN PCA" row is LMNN on the raw features; no validation part; ``k = 3``,
``mu = 0.5``; the paper's number of random splits, Table 1): the random stratified 14,000/6,000 splits of
``test_paper_letter.py`` (``datasets.random_splits(y, test_size=0.3, seed=0)``, raw integer features, nothing
scaled), and on each

* **single-pass LMNN**: the convex LMNN program (Eq. 14) on the JAX first-order backend, stopped at a
  certified relative duality gap ``<= 1e-3`` (the solve of ``test_paper_letter.py``). It is pass 1 of the
  multi-pass run below (same program, same data), so the 1-pass / 2-pass comparison is exactly paired;
* **multi-pass LMNN** (Sec. 5.1; :func:`metricopt.multipass_lmnn`, ``passes=2``, ``backend="jax"``): LMNN
  re-solved with the target neighbours re-picked under pass 1's map, the maps composed; each pass's convex
  program certified to ``<= 1e-3`` on its own (the composition minimises no single objective). The paper does
  not give its number of passes for Table 1 (Fig. 6 shows several); 2 here, as in ``test_paper_extensions.py``;
* **multi-metric LMNN** (Sec. 5.2; :class:`metricopt.MultiMetricLMNNProblem`, ``clusters="labels"``: one
  metric per class, 26 metrics of 16 x 16, learned jointly in one convex program, the paper's choice "for the
  remaining experiments in this section") on the JAX backend to a certified gap ``<= 1e-3``, classified by
  the 3-NN rule under the cluster-dependent distance of Eq. 16. The paper started it from the single-metric
  solution; the convex program's optimum does not depend on the start (our solve starts from the identity).

kNN test errors (k = 3) with the tie-inclusive rule of every paper check (``_common.TIES``), the multi-metric
rule included. The energy rule and the training leave-one-out errors are not evaluated (time; the energy rule
of single-pass LMNN is ``test_paper_letter.py``'s).

**Size of the multi-metric program, and the reduction it forces.** The lifted program has 26 x 14,000 =
364,000 lifted points of 416 coordinates (the JAX backend keeps the 416 x 416 lifted metric block diagonal) and
the same 5.7e8 candidate triplets as single-pass LMNN, each evaluated in the lifted coordinates. Timed on split 1
before this check was fixed (one core, 2026-11-27): the 2-pass run took 29 s (pass 1 18.5 s, certified gap
7.5e-5; pass 2 10.0 s, 8.3e-5), while the multi-metric solve with a 600 s time limit ended at the limit with a
certified relative gap of 0.30 (67 iterations; the first active-set round alone took 305 s; 11 GB resident).
So multi-metric LMNN cannot be solved to the certificate within a few minutes a split on one core. The largest
reduction the run's budget (about 40 minutes on one core) allows is kept: multi-pass LMNN on the paper's
10 splits, multi-metric LMNN on the first split only, with a time limit of 1,800 s (if it stops at the limit,
its metric is the time-limited iterate, its gap is reported, and the certificate assertion fails). Its two
paired directions are then over one split, i.e. "strictly below". (Run of 2026-11-27, one core: the 2-pass run
took about 20 s a split, every pass certified <= 8.5e-5; the multi-metric solve stopped at its 1,800 s limit with a
certified gap of 3.7e-3, listed in ``_common.KNOWN_MISMATCHES``; the whole check took 34 minutes.)

Tolerances (fixed before the runs):

* every convex solve (each pass of the 2-pass run; the joint multi-metric program) ``optimal`` with certified
  relative gap ``<= 1e-3``;
* the paper's directions (Table 1, letters: the rows "LMNN (multiple passes)" and "LMNN (multiple metrics)" both
  below "LMNN PCA" and "kNN Euclidean"; the numbers are read from ``paper_numbers.csv``), each as a paired test
  on the same splits: the variant's kNN error significantly below single-pass LMNN's and below Euclidean kNN's
  (paired mean difference ``< -2`` s.e. of the paired difference, and ``< 0``; with one split: strictly below).
  These all fail when every metric is the identity (``METRICOPT_PAPER_IDENTITY=1``: the variants then equal
  single-pass LMNN and Euclidean kNN).

The errors are not compared with the paper's numbers by a band (``test_paper_letter.py`` does that for the
single-pass rows, and its bands, from the split-to-split variation alone, are narrower than the differences of
the paper's unknown splits and kNN implementation; see its known mismatches); they are shown next to them.

Number of splits: ``SPLITS`` (default below; ``METRICOPT_PAPER_SPLITS_LETTER_EXTENSIONS``, or
``--paper-splits`` / ``METRICOPT_PAPER_SPLITS`` for every check), of which the first ``MM_SPLITS``
(``METRICOPT_PAPER_SPLITS_LETTER_EXTENSIONS_MM``, at most the number of splits) also run multi-metric LMNN.
"""

import time

import numpy as np
import pytest

import _common as C
import metricopt
from metricopt import datasets

pytestmark = pytest.mark.slow

GAP_TOL = 1e-3  # as in test_paper_letter.py
COLUMN = "letters"
PAPER_SPLITS = int(C.jmlr("# of train/test splits", COLUMN))
PASSES = 2
#: seconds for the whole 2-pass run of one split (29 s on split 1, one core)
MP_TIME_LIMIT = 600.0
#: seconds for one multi-metric solve (gap 0.30 at 600 s on split 1, one core)
MM_TIME_LIMIT = 1800.0
#: default number of splits: the paper's 10 (about 30 s each for the 2-pass run on one core)
SPLITS = PAPER_SPLITS
#: default number of those splits that also run multi-metric LMNN (up to 30 minutes each on one core)
MM_SPLITS = 1

ROW_MP, ROW_MM, ROW_ONE, ROW_EUC = "LMNN (multiple passes)", "LMNN (multiple metrics)", "LMNN PCA", "kNN Euclidean"

V_ONE = "LMNN (1 pass), same splits"
V_TWO = f"LMNN ({PASSES} passes)"
V_MM = "multi-metric LMNN (one metric per class)"
SHORT = {V_ONE: "1-pass", V_TWO: "2-pass", V_MM: "multi-metric"}
PAPER_ROW = {V_ONE: ROW_ONE, V_TWO: ROW_MP, V_MM: ROW_MM}


def _multipass(Xtr, ytr, Xte, yte, euclid):
    """1-pass and 2-pass LMNN of one split (pass 1 is single-pass LMNN)."""
    return C.multipass_split(Xtr, ytr, Xte, yte, euclid, variants=(V_ONE, V_TWO), passes=PASSES,
                             time_limit=MP_TIME_LIMIT, backend="jax", tol=GAP_TOL)


def _multimetric(Xtr, ytr, Xte, yte, euclid):
    """Multi-metric LMNN (one metric per class) of one split."""
    ntr, nte, d = len(ytr), len(yte), Xtr.shape[1]
    if C.IDENTITY:
        return C.SplitResult({"euclidean": euclid, "lmnn": euclid, "energy": float("nan")}, "identity",
                             float("inf"), "none", 0.0, ntr, nte, d)
    t0 = time.perf_counter()
    prob = metricopt.MultiMetricLMNNProblem(Xtr, ytr, clusters="labels", k=C.K, mu=C.MU)
    sol = prob.solve(backend="jax", tol=GAP_TOL, time_limit=MM_TIME_LIMIT)
    t = time.perf_counter() - t0
    if sol.M is None:
        return C.nan_split(str(sol.status), t, ntr, nte, d, euclid, sol.message)
    cert = sol.certificate
    err = float(np.mean(prob.knn_predict(Xte, sol.M, ties=C.TIES) != np.asarray(yte)))
    return C.SplitResult({"euclidean": euclid, "lmnn": err, "energy": float("nan")}, str(sol.status),
                         float(cert.rel_gap) if cert is not None else float("inf"),
                         cert.verdict if cert is not None else "none", t, ntr, nte, d,
                         {"n_metrics": int(prob.n_clusters), "iterations": sol.stats.get("iterations"),
                          "message": sol.message})


def test_letter_extensions():
    t0 = time.perf_counter()
    X, y = datasets.load("letter-recognition")
    n = C.n_splits("letter-extensions", SPLITS)
    n_mm = min(n, C.n_splits("letter-extensions-mm", MM_SPLITS))
    res = {V_ONE: [], V_TWO: [], V_MM: []}
    for s, (train, test) in enumerate(datasets.random_splits(y, n_splits=n, test_size=0.3, seed=0)):  # 14,000/6,000
        Xtr, ytr, Xte, yte = X[train], y[train], X[test], y[test]
        euclid = float(metricopt.knn_error(Xtr, ytr, Xte, yte, k=C.K, ties=C.TIES))
        r = _multipass(Xtr, ytr, Xte, yte, euclid)
        if s < n_mm:
            r[V_MM] = _multimetric(Xtr, ytr, Xte, yte, euclid)
        for v in res:
            if v in r:
                res[v].append(r[v])
        mm = (f"multi-metric {100 * r[V_MM].errors['lmnn']:.2f}% {r[V_MM].status} gap {r[V_MM].rel_gap:.1e} "
              f"({r[V_MM].solve_time:.1f}s)" if V_MM in r else "multi-metric not run")
        print(f"  [letter] split {s + 1}: euclid {100 * euclid:.2f}%  1-pass {100 * r[V_ONE].errors['lmnn']:.2f}%  "
              f"2-pass {100 * r[V_TWO].errors['lmnn']:.2f}%  passes {r[V_TWO].extra.get('pass_statuses')} gaps "
              f"{[f'{g:.1e}' for g in r[V_TWO].extra.get('pass_rel_gaps', [])]} ({r[V_TWO].solve_time:.1f}s)  {mm}",
              flush=True)

    protocol = ("random stratified 14,000/6,000 splits of the 20,000 letters, seed 0 (the splits of "
                "test_paper_letter.py)")
    prep = "none (16 integer features)"
    row_by = C.table1_variant_rows("letter-recognition", "letter-recognition", protocol, prep, (
        (V_ONE, "jax/fista, certified gap <= 1e-3 (pass 1 of the 2-pass run)", res[V_ONE]),
        (V_TWO, f"jax/fista, {PASSES} passes, each certified gap <= 1e-3", res[V_TWO]),
        (V_MM, f"jax/fista, joint program of 26 metrics, tol 1e-3, time limit {MM_TIME_LIMIT:.0f} s", res[V_MM])),
        COLUMN, PAPER_ROW, ROW_EUC, multipass=V_TWO)
    rows = list(row_by.values())

    one, euc = C.jmlr(ROW_ONE, COLUMN), C.jmlr(ROW_EUC, COLUMN)
    checks = []
    if V_TWO in row_by:
        checks.append(C.assert_certified(row_by[V_TWO]["summary"], res[V_TWO], GAP_TOL,
                                         name=f"letter: {V_TWO}, every pass"))
    if V_MM in row_by:
        checks.append(C.assert_certified(row_by[V_MM]["summary"], res[V_MM], GAP_TOL,
                                         name=f"letter: {V_MM}, joint program"))
    comparisons = {}
    for v in (V_TWO, V_MM):
        if not res[v]:
            continue
        paper = C.jmlr(PAPER_ROW[v], COLUMN)
        row = row_by[v]
        row["comparisons"] = []
        for ref, ref_paper, ref_label, method_b, key in (
                (res[V_ONE], one, "single-pass LMNN kNN", "lmnn", "variant-one_pass"),
                (res[v], euc, "Euclidean kNN", "euclidean", "variant-euclidean")):
            assert C.direction(paper, ref_paper) == "below"  # Table 1, letters: both variants below both rows
            d = C.paired_results(res[v], ref, method_b)
            comparisons[(v, ref_label)] = d
            row["comparisons"].append({"label": f"{SHORT[v]} LMNN - {ref_label}", **d})
            a, b = key.split("-")
            checks.append(C.assert_gain({key: d}, a, b, f"letter: {SHORT[v]} LMNN kNN below {ref_label} "
                                                        f"(paper: {paper - ref_paper:+.2f} pp)"))

    s1 = row_by[V_ONE]["summary"]
    notes = [
        f"Paper (JMLR 2009 Table 1, letters; {PAPER_SPLITS} random splits, 14,000/6,000, 16 features, no validation): "
        f"kNN Euclidean {euc:.2f} %, LMNN PCA (no reduction on letters) {one:.2f} %, multiple passes "
        f"{C.jmlr(ROW_MP, COLUMN):.2f} %, multiple metrics {C.jmlr(ROW_MM, COLUMN):.2f} %. Here {n} splits "
        f"(multi-metric on the first {len(res[V_MM])}): Euclidean {s1['euclidean']['mean']:.2f} +- "
        f"{s1['euclidean']['se']:.2f} %, 1 pass {s1['lmnn']['mean']:.2f} +- {s1['lmnn']['se']:.2f} %"
        + "".join(f", {SHORT[v]} {row_by[v]['summary']['lmnn']['mean']:.2f} +- "
                  f"{row_by[v]['summary']['lmnn']['se']:.2f} %" for v in (V_TWO, V_MM) if v in row_by) + ".",
        "Paired differences (pp, s.e.): " + "; ".join(
            f"{SHORT[v]} - {ref}: {d['mean']:+.2f} ({d['se']:.2f}, {d['n']} splits)"
            for (v, ref), d in comparisons.items())
        + ".",
        f"Differences from the paper's protocol: {n} splits (the paper: {PAPER_SPLITS}); multi-metric LMNN on "
        f"{len(res[V_MM])} of them only, each with a {MM_TIME_LIMIT:.0f} s time limit (its lifted program of 26 x 16 "
        "coordinates over 364,000 lifted points does not reach the certificate in minutes on one core; see the "
        f"check's docstring); {PASSES} passes "
        "(the paper does not give its number for Table 1); every program solved to a certified relative gap of 1e-3 "
        "by the JAX backend, not by the paper's sub-gradient solver with its own stopping point; multi-metric LMNN "
        "started from the identity, not from the single-metric solution (the optimum of the convex program is the "
        "same); our splits are not the paper's; the kNN ties are counted by the tie-inclusive rule.",
        "The 2-pass row's statuses count every pass's solve (2 per split); the certificate of pass p is that of "
        "pass p's own convex program. Mean seconds per split: 2-pass run (both passes) "
        + (f"{row_by[V_TWO]['summary']['solve_time']['mean']:.1f}" if V_TWO in row_by else "-")
        + ", multi-metric " + (f"{row_by[V_MM]['summary']['solve_time']['mean']:.1f}" if V_MM in row_by else "-")
        + ". Energy rule and training LOO errors not evaluated ('-').",
    ]
    C.finish("letter-extensions", "Multi-pass and multi-metric LMNN on letters (JMLR 2009 Secs. 5.1, 5.2, Table 1)",
             rows, checks, notes, t0)
