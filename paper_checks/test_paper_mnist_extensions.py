r"""Paper check: multi-pass LMNN on the MNIST 5,000-image subset (JMLR 2009, Section 5.1; Table 1, mnist column,
row "LMNN (multiple passes)" against "LMNN PCA" and "kNN PCA"; reduced).

JMLR 2009 runs multi-pass LMNN on the full MNIST (Table 1: 60,000 training and 10,000 test images of the standard
partition, deskewed, projected on their leading principal components, one split). The shared data hold a
5,000-image subset, so this is a reduced version of that cell: its errors are not the paper's, only the paper's
directions are asserted, and the paper's numbers are shown beside ours for orientation.

Protocol: the MNIST-5k protocol of ``test_paper_mnist.py::test_mnist_5k`` (its PCA dimension ``DIMS``, its gap
tolerance ``GAP_TOL`` and its JAX solve options ``JAX`` are imported from there): ``datasets.load("mnist-5k")``
(500 images per digit), pixels / 255 (not deskewed), random stratified 70/30 splits (3,500 / 1,500;
``datasets.random_splits(y, test_size=0.3, seed=0)``, the same call, so that check's 2 splits are splits 1 and 2
here), PCA to 50 dimensions fitted on each training part (``datasets.preprocess(..., pca=DIMS)``), no validation
part (Table 1 lists none for mnist); ``k = 3``, ``mu = 0.5`` (Sec. 4). On each split

* **kNN PCA**: the Euclidean 3-NN error on the 50 PCA coordinates (Table 1's row "kNN PCA", the row the MNIST-5k
  check's Euclidean error stands for);
* **single-pass LMNN**: the convex LMNN program (Eq. 14) on the JAX first-order backend, ``tol = 1e-3`` (the
  MNIST-5k check's solve, ``JAX``). It is pass 1 of the multi-pass run below (same program, same data, same
  options), so the 1-pass / 2-pass comparison is exactly paired;
* **multi-pass LMNN** (Sec. 5.1; :func:`metricopt.multipass_lmnn`, ``passes=2``, ``backend="jax"``): LMNN
  re-solved with the target neighbours re-picked under pass 1's map, the maps composed; each pass's convex
  program certified on its own (the composition minimises no single objective). The paper does not give its
  number of passes for Table 1; 2 here, as in the other multi-pass checks (``test_paper_yale_extensions.py``,
  ``test_paper_letter_extensions.py``).

The MNIST-5k check's solve is time-limited (600 s); ``multipass_lmnn``'s ``time_limit`` bounds the whole run, so
the 2-pass run gets twice that (1,200 s), and pass 1 may use up to all of it. Pass 1 is therefore the MNIST-5k
check's solve whenever it ends within 600 s; the pass times are stored and reported, and a pass that stops at its
time limit keeps the status ``time_limit`` (never counted as optimal; its certified gap is what is asserted).

kNN test errors (k = 3) with the tie-inclusive rule of every paper check (``_common.TIES``). The energy rule and
the training leave-one-out errors are not evaluated (as in the other multi-pass checks; single-pass LMNN's energy
rule is the MNIST-5k check's).

**Multi-metric LMNN (Sec. 5.2, Table 1's row "LMNN (multiple metrics)") is not run, and was not attempted.**
Its program (:class:`metricopt.MultiMetricLMNNProblem`, ``clusters="labels"``) would lift the data to one block per
digit: a dense array of 10 x 3,500 = 35,000 lifted points of 10 x 50 = 500 coordinates, in which every triplet of
the single-metric program is evaluated. The same program did not reach its certificate on the other sets within a
time limit on one core (Yale B, 64,980 x 1,900: no iteration within 300 s, ``test_paper_yale_extensions.py``;
letters, 364,000 x 416: gap 3.7e-3 after 1,800 s, ``test_paper_letter_extensions.py``), and the 2-pass run alone
fills this check's budget (about 40 minutes on one core). Its size here was not timed. It is left as a protocol
difference.

Tolerances (fixed before the runs):

* every pass of the 2-pass run (pass 1 included, i.e. every single-pass solve) returns a metric with a certified
  relative gap ``<= 0.1``, the MNIST-5k check's loose bound for its time-limited solve (``GAP_TOL``); the gaps and
  statuses are reported;
* the paper's directions (Table 1, mnist: "LMNN (multiple passes)" below "kNN PCA" and below "LMNN PCA"; the
  numbers are read from ``paper_numbers.csv`` and their direction from ``paper_numbers.direction``), each paired
  on the same splits:

  - 2-pass LMNN significantly below kNN PCA (paired mean difference ``< -2`` s.e. of the paired difference, and
    ``< 0``; with one split: strictly below), the form of the other multi-pass checks;
  - 2-pass LMNN below single-pass LMNN in the paired mean (strictly, the point estimate; not required to be
    significant: :func:`_common.assert_paired_below`). The paper's difference is 0.03 pp on its one split of
    10,000 test images, i.e. three test images; a test that asks for significance would ask more of our 1,500
    test images a split than the paper's own numbers show, and the weak "not significantly above" form passes
    when both metrics are the same (the identity run), so it is not used.

  Every assertion fails when every metric is the identity (``METRICOPT_PAPER_IDENTITY=1``: no certificate, and
  both LMNN rows then equal kNN PCA, so both paired differences are exactly 0).

The errors are not compared with the paper's numbers by a band (other data: a 5,000-image subset, raw pixels,
PCA 50 against Table 1's 164 reduced dimensions, 3,500 training images against 60,000).

Number of splits: ``SPLITS`` (default below; ``METRICOPT_PAPER_SPLITS_MNIST_EXTENSIONS``, or ``--paper-splits`` /
``METRICOPT_PAPER_SPLITS`` for every check); the paper has one split (the standard partition).

Run of 2026-11-27 (one core, commit a7a0de4 with this file uncommitted, 60 splits, 1,328 s = 22 minutes, while
another check ran on the second core; the identity run takes seconds): kNN PCA 5.13 +- 0.07 %, single-pass LMNN
4.63 +- 0.07 %, 2-pass LMNN 4.70 +- 0.07 % (mean +- s.e. over the splits); every one of the 120 passes ``optimal``
with a certified relative gap <= 9.5e-4 (pass 1 at most 8.3e-4; pass 1 10 s a split on average, at most 15 s, far
within the MNIST-5k check's 600 s, so single-pass LMNN here is exactly that check's solve at this commit; both
passes 22 s, at most 50 s). Splits 1 and 2 are the MNIST-5k check's: pass 1 gives 4.67 and 4.13 % there, where the
stored ``mnist-5k`` result (commit e4a2af6, older solver code) has 4.73 and 4.13 % (one test image on split 1).
Paired: 2-pass - kNN PCA -0.43 pp (s.e. 0.06), the paper's direction (passes); 2-pass - single-pass +0.07 pp (s.e.
0.04; 2-pass lower on 22 splits, higher on 35, equal on 3), so the paper's direction against single-pass LMNN is
not reproduced (fails; as on Yale B, ``test_paper_yale_extensions.py``). Pass 2 is not the same program: measured
after the run on splits 1-6 (a separate script repeating the check's solves, same errors on every split), it
re-picks 24.4-25.6 % of the target neighbours, and the map has rank 36-39 of 50 after pass 1 and 30-32 composed.
Under ``METRICOPT_PAPER_IDENTITY=1`` all three assertions fail.
"""

import time

import pytest

import _common as C
import metricopt
from metricopt import datasets
from test_paper_mnist import DIMS, GAP_TOL, JAX

pytestmark = pytest.mark.slow

COLUMN = "mnist"
PAPER_SPLITS = int(C.jmlr("# of train/test splits", COLUMN))
PASSES = 2
#: seconds for the whole 2-pass run of one split: the MNIST-5k check's per-solve limit for each pass
MP_TIME_LIMIT = PASSES * JAX["time_limit"]
#: default number of splits: 60 (the 2-pass run took 31 s on split 1, one core, in the timing run before this check's
#: run; the budget of this check's run was about 40 minutes on one core)
SPLITS = 60

ROW_MP, ROW_ONE, ROW_PCA = "LMNN (multiple passes)", "LMNN PCA", "kNN PCA"

V_ONE = "LMNN (1 pass), same splits"
V_TWO = f"LMNN ({PASSES} passes)"
PAPER_ROW = {V_ONE: ROW_ONE, V_TWO: ROW_MP}


def _multipass(Xtr, ytr, Xte, yte, euclid):
    """1-pass and 2-pass LMNN of one split (pass 1 is single-pass LMNN, the MNIST-5k check's solve)."""
    options = {key: value for key, value in JAX.items() if key != "time_limit"}
    return C.multipass_split(Xtr, ytr, Xte, yte, euclid, variants=(V_ONE, V_TWO), passes=PASSES,
                             time_limit=MP_TIME_LIMIT, **options)


def test_mnist_extensions():
    t0 = time.perf_counter()
    X, y = datasets.load("mnist-5k")
    X = X / 255.0
    n = C.n_splits("mnist-extensions", SPLITS)
    res = {V_ONE: [], V_TWO: []}
    for s, (train, test) in enumerate(datasets.random_splits(y, n_splits=n, test_size=0.3, seed=0)):
        Xtr, Xte = datasets.preprocess(X[train], X[test], pca=DIMS)
        ytr, yte = y[train], y[test]
        euclid = float(metricopt.knn_error(Xtr, ytr, Xte, yte, k=C.K, ties=C.TIES))
        r = _multipass(Xtr, ytr, Xte, yte, euclid)
        for v in res:
            res[v].append(r[v])
        print(f"  [mnist-5k] split {s + 1}: kNN PCA {100 * euclid:.2f}%  1-pass {100 * r[V_ONE].errors['lmnn']:.2f}%  "
              f"2-pass {100 * r[V_TWO].errors['lmnn']:.2f}%  passes {r[V_TWO].extra.get('pass_statuses')} gaps "
              f"{[f'{g:.1e}' for g in r[V_TWO].extra.get('pass_rel_gaps', [])]} times "
              f"{[f'{t:.0f}' for t in r[V_TWO].extra.get('pass_times', [])]} iterations "
              f"{r[V_TWO].extra.get('pass_iterations')} ({r[V_TWO].solve_time:.1f}s)", flush=True)

    protocol = "random stratified 70/30 splits (3,500 / 1,500), seed 0 (the splits of test_paper_mnist.py)"
    prep = f"pixels / 255, PCA to {DIMS} dims fitted on the training part"
    limit = f"{JAX['time_limit']:.0f} s"
    row_by = C.table1_variant_rows("mnist-5k", "mnist-5k", protocol, prep, (
        (V_ONE, f"jax/fista, tol 1e-3, time limit {limit} (pass 1 of the 2-pass run)", res[V_ONE]),
        (V_TWO, f"jax/fista, {PASSES} passes, each tol 1e-3, time limit {MP_TIME_LIMIT:.0f} s for both", res[V_TWO])),
        COLUMN, PAPER_ROW, ROW_PCA, multipass=V_TWO)
    rows = list(row_by.values())

    one, pca, mp = C.jmlr(ROW_ONE, COLUMN), C.jmlr(ROW_PCA, COLUMN), C.jmlr(ROW_MP, COLUMN)
    checks = [C.assert_gap(row_by[V_TWO]["summary"], res[V_TWO], GAP_TOL,
                           f"MNIST-5k: {V_TWO}, every time-limited pass has a certified relative gap within the "
                           "MNIST-5k check's stated loose tolerance")]
    row = row_by[V_TWO]
    row["comparisons"] = []
    # 2-pass below kNN PCA: significant (paired < -2 s.e.), as in the other multi-pass checks
    assert C.direction(mp, pca) == "below"  # Table 1, mnist: multiple passes below kNN PCA
    d_pca = C.paired_results(res[V_TWO], res[V_ONE], "euclidean")
    row["comparisons"].append({"label": "2-pass LMNN - Euclidean kNN after PCA", **d_pca})
    checks.append(C.assert_gain({"variant-euclidean": d_pca}, "variant", "euclidean",
                                f"MNIST-5k: 2-pass LMNN kNN below Euclidean kNN after PCA (paper: {mp - pca:+.2f} pp)"))
    # 2-pass below single-pass: the point estimate (the paper's own evidence: one number below another on one split)
    assert C.direction(mp, one) == "below"  # Table 1, mnist: multiple passes below LMNN PCA
    d_one = C.paired_results(res[V_TWO], res[V_ONE], "lmnn")
    row["comparisons"].append({"label": "2-pass LMNN - single-pass LMNN kNN", **d_one})
    per_split = [{"two_pass": {"test": r2.errors["lmnn"]}, "one_pass": {"test": r1.errors["lmnn"]}}
                 for r2, r1 in zip(res[V_TWO], res[V_ONE])]
    checks.append(C.assert_paired_below(
        per_split, "two_pass", "one_pass",
        f"MNIST-5k: 2-pass LMNN kNN below single-pass LMNN kNN in the paired mean (paper: {mp - one:+.2f} pp)",
        f"Table 1, mnist: multiple passes below LMNN PCA by {one - mp:.2f} pp on one split"))

    s1, s2 = row_by[V_ONE]["summary"], row_by[V_TWO]["summary"]
    pass1 = [r.extra["pass_times"][0] for r in res[V_TWO] if r.extra.get("pass_times")]
    pass2 = [r.extra["pass_times"][1] for r in res[V_TWO] if len(r.extra.get("pass_times", [])) > 1]
    lower = sum(r2.errors["lmnn"] < r1.errors["lmnn"] for r2, r1 in zip(res[V_TWO], res[V_ONE]))
    higher = sum(r2.errors["lmnn"] > r1.errors["lmnn"] for r2, r1 in zip(res[V_TWO], res[V_ONE]))
    notes = [
        f"Reduced cell: 5,000 of MNIST's {C.jmlr('# inputs', COLUMN):.0f} images (the shared subset), 3,500 for "
        f"training where the paper used {C.jmlr('# training examples', COLUMN):.0f} ({PAPER_SPLITS} split, the "
        f"standard partition), raw pixels where it deskewed them, PCA {DIMS} where it used "
        f"{C.jmlr('# reduced dimensions', COLUMN):.0f}. The paper's full-MNIST errors (JMLR 2009 Table 1, mnist: kNN "
        f"PCA {pca:.2f} %, LMNN PCA {one:.2f} %, multiple passes {mp:.2f} %, multiple metrics "
        f"{C.jmlr('LMNN (multiple metrics)', COLUMN):.2f} %) are shown beside ours; only their directions are "
        f"asserted. Here {n} splits: kNN PCA {s1['euclidean']['mean']:.2f} +- {s1['euclidean']['se']:.2f} %, 1 pass "
        f"{s1['lmnn']['mean']:.2f} +- {s1['lmnn']['se']:.2f} %, {PASSES} passes {s2['lmnn']['mean']:.2f} +- "
        f"{s2['lmnn']['se']:.2f} %.",
        "Paired differences (pp, s.e.): " + "; ".join(
            f"{c['label']}: {c['mean']:+.2f} ({c['se']:.2f}, {c['n']} splits)" for c in row["comparisons"])
        + f"; 2-pass lower than 1-pass on {lower} splits, higher on {higher}, equal on {n - lower - higher}.",
        f"Differences from the paper's protocol: the MNIST-5k check's (5,000-image subset, not deskewed, PCA {DIMS}, "
        f"our random 70/30 splits); {n} splits; {PASSES} passes (the paper does not give its number for Table 1); "
        "every pass solved by the JAX backend (tol 1e-3, time-limited), not by the paper's sub-gradient solver; "
        "multi-metric LMNN not run (not attempted: its lifted program holds a dense 35,000 x 500 array; see the "
        "check's docstring); the kNN ties are counted by the tie-inclusive rule.",
        "The 2-pass row's statuses count every pass's solve (2 per split); the certificate of pass p is that of pass "
        f"p's own convex program. Certified relative gaps: pass 1 at most {s1['certificates']['max_rel_gap']:.1e}, "
        f"every pass at most {s2['certificates']['max_rel_gap']:.1e}; statuses {s2['certificates']['statuses']}. Seconds per split: pass 1 "
        + (f"{sum(pass1) / len(pass1):.0f} (max {max(pass1):.0f}, the MNIST-5k check's limit {limit})" if pass1
           else "-")
        + (f", pass 2 {sum(pass2) / len(pass2):.0f} (max {max(pass2):.0f})" if pass2 else "")
        + f", both passes {s2['solve_time']['mean']:.0f}. Energy rule and training LOO errors not evaluated ('-').",
    ]
    C.finish("mnist-extensions", "Multi-pass LMNN on MNIST-5k (JMLR 2009 Sec. 5.1, Table 1 mnist, reduced)",
             rows, checks, notes, t0)
