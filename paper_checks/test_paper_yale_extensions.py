r"""Paper check: multi-pass LMNN on Extended Yale B (JMLR 2009, Section 5.1; Table 1, yFaces column, row
"LMNN (multiple passes)" against "LMNN PCA" and "kNN PCA").

Protocol: the Yale B protocol of ``test_paper_faces.py::test_yale_b`` (its helpers and constants are imported
from there, so the data, splits, PCA and solve are that check's): the 32x32 copy of Extended Yale B (2414 images
of 38 subjects), pixels / 255, the paper's number of random training images per subject (JMLR 2009 Sec. 4.2; the
rest for testing), ``datasets.per_class_splits(y, n_train=..., seed=0)`` (the Yale B check's first split is split
1 here), PCA fitted on each training part with the paper's 5 leading principal components discarded (Sec. 4.2)
and 50 kept (Sec. 4.2 projects on 200, Table 1 lists 300 reduced dimensions; the certificate is out of reach at
d = 100, see the Yale B check), no validation part (Sec. 4.2 and Table 1 hold out 30 % of the training part for
early stopping); ``k = 3``, ``mu = 0.5`` (Sec. 4). On each split

* **kNN PCA**: the Euclidean 3-NN error on the 50 PCA coordinates (Table 1's row "kNN PCA", the row the Yale B
  check's Euclidean error compares with);
* **single-pass LMNN**: the convex LMNN program (Eq. 14) on the JAX first-order backend, ``tol = 1e-3`` (the Yale B
  check's solve, ``YALE_JAX``). It is pass 1 of the multi-pass run below (same program, same data, same options),
  so the 1-pass / 2-pass comparison is exactly paired;
* **multi-pass LMNN** (Sec. 5.1; :func:`metricopt.multipass_lmnn`, ``passes=2``, ``backend="jax"``): LMNN
  re-solved with the target neighbours re-picked under pass 1's map, the maps composed; each pass's convex
  program certified on its own (the composition minimises no single objective). The paper does not give its
  number of passes for Table 1 (Fig. 6 shows several); 2 here, as in ``test_paper_letter_extensions.py``.

The Yale B check's solve is time-limited (600 s); ``multipass_lmnn``'s ``time_limit`` bounds the whole run, so the
2-pass run gets twice that (1,200 s): pass 1 is the Yale B check's solve whenever it ends within 600 s (the pass
times are stored; every pass 1 of the run below did, in at most 61 s, so single-pass LMNN here is exactly that check's
solve). Verified on split 1 before the run: ``_common.run_split`` with ``YALE_JAX`` (the Yale B check's call) gave the
same 3-NN error (11.22 %) and certified gap (9.8e-4) as pass 1. The stored ``yale-b`` result (11.08 %, gap 4e-4,
276 s) is older: it was computed at commit e4a2af6, with that commit's solver code.

kNN test errors (k = 3) with the tie-inclusive rule of every paper check (``_common.TIES``). The energy rule and the
training leave-one-out errors are not evaluated (as in ``test_paper_letter_extensions.py``; single-pass LMNN's energy
rule is the Yale B check's).

**Multi-metric LMNN (Sec. 5.2, Table 1's row "LMNN (multiple metrics)") is not run.** Timed on split 1 before this
check was fixed (one core, 2026-11-27, :class:`metricopt.MultiMetricLMNNProblem`, ``clusters="labels"``: 38
metrics of 50 x 50, 64,980 lifted points of 1,900 coordinates, on the JAX backend, ``tol = 1e-3``, time limit
300 s): the problem was built in 13 s, but the solve made no iteration at all: it stopped after 185 s at
iteration 0 (the identity; 17.19 % test error, the kNN PCA error) because its estimate of 570 s per iteration plus
170 s for a re-check did not fit in the limit, and the certificate of that iterate was skipped (estimated at about
3,500 s); the process held 11.4 GB. So the joint program is not certifiable within about 10 minutes on one core;
it is left as a protocol difference.

Tolerances (fixed before the runs):

* every pass of the 2-pass run (pass 1 included, i.e. every single-pass solve) returns a metric with a certified
  relative gap ``<= 0.1``, the Yale B check's stated loose bound for its time-limited solve (``YALE_GAP_TOL``);
  the gaps are reported;
* the paper's directions (Table 1, yFaces: "LMNN (multiple passes)" below "LMNN PCA" and below "kNN PCA"; the
  numbers are read from ``paper_numbers.csv``), each as a paired test on the same splits: the 2-pass kNN error
  significantly below single-pass LMNN's and below the Euclidean kNN error after PCA (paired mean difference
  ``< -2`` s.e. of the paired difference, and ``< 0``; with one split: strictly below). Both fail when every metric
  is the identity (``METRICOPT_PAPER_IDENTITY=1``: both LMNN rows then equal kNN PCA).

The errors are not compared with the paper's numbers by a band (the Yale B check does that for single-pass LMNN,
at its known mismatch of dimension and validation); they are shown next to them.

Number of splits: ``SPLITS`` (default below; ``METRICOPT_PAPER_SPLITS_YALE_EXTENSIONS``, or ``--paper-splits`` /
``METRICOPT_PAPER_SPLITS`` for every check).

Run of 2026-11-27 (one core, 80 splits, 2,260 s = 38 minutes; the identity run 14 s): kNN PCA 14.66 +- 0.13 %,
single-pass LMNN 8.31 +- 0.10 %, 2-pass LMNN 8.33 +- 0.12 % (mean +- s.e. over the splits); every one of the 160
passes ``optimal`` with a certified relative gap <= 9.9e-4 (pass 1: 22 s a split on average, at most 61 s; both
passes 28 s). Paired: 2-pass - single-pass +0.02 pp (s.e. 0.06), so the paper's direction against single-pass LMNN
is not reproduced (listed in ``_common.KNOWN_MISMATCHES`` with what was measured: on splits 1-10 pass 2 re-picks
18.6 % of the target neighbours, so it is not the same program); 2-pass - kNN PCA -6.33 pp (s.e. 0.10), the paper's
direction. Under ``METRICOPT_PAPER_IDENTITY=1`` all three assertions fail.
"""

import time

import pytest

import _common as C
import metricopt
from metricopt import datasets
from test_paper_faces import YALE_DISCARD, YALE_GAP_TOL, YALE_JAX, YALE_TRAIN_PER_SUBJECT, yale_prepare

pytestmark = pytest.mark.slow

COLUMN = "yFaces"
PAPER_SPLITS = int(C.jmlr("# of train/test splits", COLUMN))
#: the Yale B check's PCA dimension (``test_yale_b``: 50 kept after the leading ``YALE_DISCARD``)
DIMS = 50
PASSES = 2
#: seconds for the whole 2-pass run of one split: the Yale B check's per-solve limit for each pass
MP_TIME_LIMIT = PASSES * YALE_JAX["time_limit"]
#: default number of splits: 80, 8 times the paper's 10 (about 35 s a split for the 2-pass run on one core, measured on
#: the first 8; the budget of this check's run was about an hour on one core)
SPLITS = 80

ROW_MP, ROW_ONE, ROW_PCA = "LMNN (multiple passes)", "LMNN PCA", "kNN PCA"

V_ONE = "LMNN (1 pass), same splits"
V_TWO = f"LMNN ({PASSES} passes)"
SHORT = {V_ONE: "1-pass", V_TWO: "2-pass"}
PAPER_ROW = {V_ONE: ROW_ONE, V_TWO: ROW_MP}


def _multipass(Xtr, ytr, Xte, yte, euclid):
    """1-pass and 2-pass LMNN of one split (pass 1 is single-pass LMNN, the Yale B check's solve)."""
    options = {key: value for key, value in YALE_JAX.items() if key != "time_limit"}
    return C.multipass_split(Xtr, ytr, Xte, yte, euclid, variants=(V_ONE, V_TWO), passes=PASSES,
                             time_limit=MP_TIME_LIMIT, **options)


def test_yale_extensions():
    t0 = time.perf_counter()
    X, y = datasets.load("yale-b")
    X = X / 255.0
    n = C.n_splits("yale-extensions", SPLITS)
    prepare = yale_prepare(DIMS)
    res = {V_ONE: [], V_TWO: []}
    for s, (train, test) in enumerate(datasets.per_class_splits(y, n_train=YALE_TRAIN_PER_SUBJECT, n_splits=n,
                                                                  seed=0)):
        Xtr, Xte = prepare(X[train], X[test])
        ytr, yte = y[train], y[test]
        euclid = float(metricopt.knn_error(Xtr, ytr, Xte, yte, k=C.K, ties=C.TIES))
        r = _multipass(Xtr, ytr, Xte, yte, euclid)
        for v in res:
            res[v].append(r[v])
        print(f"  [yale-b] split {s + 1}: kNN PCA {100 * euclid:.2f}%  1-pass {100 * r[V_ONE].errors['lmnn']:.2f}%  "
              f"2-pass {100 * r[V_TWO].errors['lmnn']:.2f}%  passes {r[V_TWO].extra.get('pass_statuses')} gaps "
              f"{[f'{g:.1e}' for g in r[V_TWO].extra.get('pass_rel_gaps', [])]} times "
              f"{[f'{t:.0f}' for t in r[V_TWO].extra.get('pass_times', [])]} ({r[V_TWO].solve_time:.1f}s)", flush=True)

    protocol = (f"{YALE_TRAIN_PER_SUBJECT} random images per subject for training, the rest (14-19) for testing, "
                "seed 0 (the splits of test_paper_faces.py::test_yale_b)")
    prep = (f"pixels / 255, PCA fitted on the training part, leading {YALE_DISCARD} components dropped, {DIMS} kept "
            "(32x32 pixels)")
    limit = f"{YALE_JAX['time_limit']:.0f} s"
    row_by = C.table1_variant_rows("Extended Yale B", "yale-b", protocol, prep, (
        (V_ONE, f"jax/fista, tol 1e-3, time limit {limit} (pass 1 of the 2-pass run)", res[V_ONE]),
        (V_TWO, f"jax/fista, {PASSES} passes, each tol 1e-3, time limit {MP_TIME_LIMIT:.0f} s for both", res[V_TWO])),
        COLUMN, PAPER_ROW, ROW_PCA, multipass=V_TWO)
    rows = list(row_by.values())

    one, pca, mp = C.jmlr(ROW_ONE, COLUMN), C.jmlr(ROW_PCA, COLUMN), C.jmlr(ROW_MP, COLUMN)
    checks = [C.assert_gap(row_by[V_TWO]["summary"], res[V_TWO], YALE_GAP_TOL,
                           f"Yale B: {V_TWO}, every time-limited pass has a certified relative gap within the Yale B "
                           "check's stated loose tolerance")]
    comparisons = {}
    row = row_by[V_TWO]
    row["comparisons"] = []
    for ref, ref_paper, ref_label, method_b, key in (
            (res[V_ONE], one, "single-pass LMNN kNN", "lmnn", "variant-one_pass"),
            (res[V_TWO], pca, "Euclidean kNN after PCA", "euclidean", "variant-euclidean")):
        assert C.direction(mp, ref_paper) == "below"  # Table 1, yFaces: multiple passes below both rows
        d = C.paired_results(res[V_TWO], ref, method_b)
        comparisons[ref_label] = d
        row["comparisons"].append({"label": f"2-pass LMNN - {ref_label}", **d})
        a, b = key.split("-")
        checks.append(C.assert_gain({key: d}, a, b, f"Yale B: 2-pass LMNN kNN below {ref_label} "
                                                    f"(paper: {mp - ref_paper:+.2f} pp)"))

    s1, s2 = row_by[V_ONE]["summary"], row_by[V_TWO]["summary"]
    pass1 = [r.extra["pass_times"][0] for r in res[V_TWO] if r.extra.get("pass_times")]
    sec = {what: int(C.jmlr_text("Sec. 4.2", "Yale B", what)) for what in (
        "test images per subject", "principal components", "validation % of the training data")}
    notes = [
        f"Paper (JMLR 2009 Table 1, yFaces; Sec. 4.2: {YALE_TRAIN_PER_SUBJECT} training and "
        f"{sec['test images per subject']} test images per subject, {sec['principal components']} principal "
        f"components after discarding the leading {YALE_DISCARD}, {sec['validation % of the training data']} % "
        f"validation with early stopping; Table 1: {PAPER_SPLITS} splits): kNN PCA {pca:.2f} %, LMNN PCA {one:.2f} %, "
        f"multiple passes {mp:.2f} %, multiple metrics {C.jmlr('LMNN (multiple metrics)', COLUMN):.2f} %. Here {n} "
        f"splits: kNN PCA {s1['euclidean']['mean']:.2f} +- {s1['euclidean']['se']:.2f} %, 1 pass "
        f"{s1['lmnn']['mean']:.2f} +- {s1['lmnn']['se']:.2f} %, {PASSES} passes {s2['lmnn']['mean']:.2f} +- "
        f"{s2['lmnn']['se']:.2f} %.",
        "Paired differences (pp, s.e.): " + "; ".join(
            f"2-pass - {ref}: {d['mean']:+.2f} ({d['se']:.2f}, {d['n']} splits)" for ref, d in comparisons.items())
        + ".",
        f"Differences from the paper's protocol: the Yale B check's (32x32 images, {DIMS} PCA dimensions, no validation "
        f"part, our splits); {n} splits (the paper: {PAPER_SPLITS}); {PASSES} passes (the paper does not give its "
        "number for Table 1); every pass solved by the JAX backend (tol 1e-3, time-limited), not by the paper's "
        "sub-gradient solver with its own stopping point; multi-metric LMNN not run (one split's joint program of 38 "
        "metrics did not reach its certificate within its time limit, see the check's docstring); the kNN ties are "
        "counted by the tie-inclusive rule.",
        "The 2-pass row's statuses count every pass's solve (2 per split); the certificate of pass p is that of pass "
        f"p's own convex program. Certified relative gaps: pass 1 at most {s1['certificates']['max_rel_gap']:.1e}, "
        f"every pass at most {s2['certificates']['max_rel_gap']:.1e}. Seconds per split: pass 1 "
        + (f"{sum(pass1) / len(pass1):.0f} (max {max(pass1):.0f}, the Yale B check's limit {limit})" if pass1 else "-")
        + f", both passes {s2['solve_time']['mean']:.0f}. Energy rule and training LOO errors not evaluated ('-').",
    ]
    C.finish("yale-extensions", "Multi-pass LMNN on Extended Yale B (JMLR 2009 Sec. 5.1, Table 1 yFaces)",
             rows, checks, notes, t0)
