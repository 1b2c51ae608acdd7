r"""Paper check: LMNN on face recognition (ORL and Extended Yale B).

Reproduces the oFaces and yFaces columns of Weinberger & Saul, JMLR 10:207-244, 2009, Table 1
(protocols in Section 4.2): 3-NN test error with the Euclidean metric after a PCA projection fitted
on the training images (the paper's row "kNN PCA"), with the LMNN metric ("LMNN PCA") and of LMNN's
energy rule ("LMNN (energy)"). Every paper number is read from ``paper_numbers.csv``. NIPS 2005
ran the AT&T faces with fewer eigenfaces and cross-validated ``k`` and ``mu``; its errors are bars of
its Fig. 2 that the text copy does not assign, so nothing is compared with it.

On oFaces the paper's Euclidean row (kNN on its eigenface inputs) is far above its PCA row, and
its LMNN and energy errors are *above* the PCA row: against the baseline our rows compare with (the
Euclidean error after PCA) the paper shows no gain. So the oFaces rows assert the paper's direction
there (LMNN and energy not significantly below Euclidean after PCA), not a gain; Yale B's rows assert
the gains Table 1 shows against its PCA row.

The metric of every split solves the LMNN program (JMLR 2009, Eq. 14)

.. math::

    \min_{M \succeq 0}\ \tfrac12 \sum_{i,\, j \rightsquigarrow i} d_M(x_i, x_j)
    + \tfrac12 \sum_{i,\, j \rightsquigarrow i} \sum_{l:\, y_l \ne y_i}
      \big[1 + d_M(x_i, x_j) - d_M(x_i, x_l)\big]_+

(``k = 3``, ``mu = 0.5``) by the JAX first-order backend, stopped at a certified relative
duality gap ``<= 1e-3`` (``time_limit`` caps a solve; a solve that hits it fails the
certificate assertion instead of passing silently), except the ORL row of the paper's protocol,
which stops early on a validation part (below).

Protocols (the differences from the paper's are listed in RESULTS.md):

* ORL / Olivetti (``faces/olivettifaces.mat``, the AT&T images at 64x64): the paper's protocol (Sec. 4.2 and
  Table 1): images area-averaged to 38x31 pixels (:func:`_common.area_downsample`), pixels / 255, projected
  on the first 200 eigenfaces (PCA fitted on each split's training images; the paper does not say on which
  images), 7 random training and 3 test images per subject, 30 % of the training images held out for
  validation (Table 1) and LMNN stopped at the lowest validation 3-NN error (:func:`_common.early_stopped_fit`:
  the JAX solve on the other 70 %, patience 10 re-checks; Sec. 4.2 states early stopping for Yale B, Table 1
  lists the same 30 % for oFaces), the kNN and energy rules then using all training images; 100 splits as
  in Table 1 (about 4 minutes). A second row solves the same program on all training images to a certified
  gap of 1e-3 (8 splits, about 8 minutes), to show what early stopping changes. At d = 200 the
  certificate's restricted dual over the PSD cone (CVXPY/Clarabel) does not fit in the machine's 23 GB:
  it is skipped (:data:`metricopt.certify.triplets.CONIC_MAX_D`; valid, looser bounds), which leaves the
  certified row certified (rank-two dual solver) and the early-stopped gaps uninformative (reported
  only). The paper's Euclidean row is compared with our Euclidean error on the 38x31 pixels.
* Extended Yale B (``faces/YaleB_32x32.mat``, 2414 images of 38 subjects at 32x32): the paper's
  protocol as far as the data allows (Section 4.2): the paper's number of random training images
  per subject, the rest for testing, the leading principal components it discards dropped and 50
  kept (the paper: 200), PCA fitted on the training part; no validation-based early stopping.

Scaling the pixels by 1/255 changes no error: the LMNN objective satisfies
``f(M; cX) = f(c^2 M; X)``, so the optimal metric scales by ``1/c^2`` and every distance
ranking (kNN and energy rule) is unchanged.

Tolerances (fixed before the runs):

* ORL: every early-stopped solve returns the kept iterate (status ``early_stopped``, or ``optimal``
  where its certificate proves it); every solve of the certified row ``optimal`` with certified
  relative gap ``<= 1e-3`` (the JAX stopping tol); Yale B: the solve is time-limited (600 s), its
  certified gap is asserted ``<= 0.1``;
* the paper's directions against Euclidean after PCA: ORL, LMNN and energy not significantly below
  (paired difference ``>= -2`` s.e.; the paper has both above); Yale B, LMNN and energy below
  (paired difference ``< -2`` s.e.; one split: strictly below);
* ORL (both rows): the Euclidean error after PCA, LMNN, energy (and, once, the pixel Euclidean)
  errors consistent with the paper's (2 s.e. of the difference of the means, the paper's s.e. estimated from our
  split-to-split s.d. and its number of splits); Yale B: LMNN within 2 pp of the paper's.
"""

import time

import pytest
from sklearn.decomposition import PCA

import _common as C
from metricopt import datasets

pytestmark = pytest.mark.slow

GAP_TOL = 1e-3
JAX = {"backend": "jax", "tol": GAP_TOL, "time_limit": 600.0}
#: Yale B (1690 training points, 38 classes): a solve takes most of 10 minutes on 2 shared
#: cores (a trial had a certified gap of 9.9e-2 after 230 s; the first full run reached 2e-4
#: in 558 s), so the solve is time-limited and its certified gap is asserted against this
#: loose, stated bound and reported.
YALE_JAX = {"backend": "jax", "tol": GAP_TOL, "time_limit": 600.0}
YALE_GAP_TOL = 0.1
#: the paper's Yale B protocol (JMLR 2009 Sec. 4.2): leading principal components discarded, training images per
#: subject
YALE_DISCARD = int(C.jmlr_text("Sec. 4.2", "Yale B", "leading eigenvectors discarded"))
YALE_TRAIN_PER_SUBJECT = int(C.jmlr_text("Sec. 4.2", "Yale B", "training images per subject"))
#: the paper's Olivetti protocol (Sec. 4.2): image size, eigenfaces, training and test images per subject; its
#: validation part and number of splits (Table 1)
ORL_TRAIN_PER_SUBJECT = int(C.jmlr_text("Sec. 4.2", "Olivetti faces", "training images per subject"))
ORL_TEST_PER_SUBJECT = int(C.jmlr_text("Sec. 4.2", "Olivetti faces", "test images per subject"))
ORL_HEIGHT, ORL_WIDTH = (int(C.jmlr_text("Sec. 4.2", "Olivetti faces", f"image {w} (pixels)")) for w in ("height", "width"))
ORL_EIGENFACES = int(C.jmlr_text("Sec. 4.2", "Olivetti faces", "eigenfaces"))
ORL_VALIDATION = C.jmlr("% validation", "oFaces")
PAPER_FACE_SPLITS = int(C.jmlr("# of train/test splits", "oFaces"))
#: our splits (a budget of about a quarter of an hour on one core; ``METRICOPT_PAPER_SPLITS_FACES``,
#: ``METRICOPT_PAPER_SPLITS_FACES_CERTIFIED``) and the early stop's patience (re-checks without a lower
#: validation error; the paper's stopping rule is not stated beyond "the lowest validation error")
ORL_SPLITS = 100
ORL_CERTIFIED_SPLITS = 8
ORL_PATIENCE = 10


def orl_prepare(dims):
    """PCA to ``dims`` eigenfaces fitted on the training images (Sec. 4.2 does not say on which images)."""
    def prepare(X_train, X_test):
        pca = PCA(n_components=dims, random_state=0).fit(X_train)
        return pca.transform(X_train), pca.transform(X_test)
    return prepare


def test_olivetti_faces():
    t0 = time.perf_counter()
    X64, y = datasets.load("olivetti")
    X = C.area_downsample(X64, (64, 64), (ORL_HEIGHT, ORL_WIDTH)) / 255.0
    n_es = C.n_splits("faces", ORL_SPLITS)
    n_cert = C.n_splits("faces-certified", ORL_CERTIFIED_SPLITS)
    paper, paper_raw = C.PAPER["faces"], C.jmlr("kNN Euclidean", "faces")
    size = f"Olivetti 64x64 area-averaged to {ORL_HEIGHT}x{ORL_WIDTH} pixels"
    split_rule = f"{ORL_TRAIN_PER_SUBJECT} random images per subject for training, the rest for testing"
    prep = f"{size}, pixels / 255, PCA to {ORL_EIGENFACES} eigenfaces fitted on the training images"
    rows, checks = [], []
    for variant, name, n, kw, backend in (
            (f"{ORL_EIGENFACES} eigenfaces, early stopping on {ORL_VALIDATION:.0f} % validation", "faces", n_es,
             {"fit": C.early_stopped_fit(ORL_VALIDATION / 100.0, ORL_PATIENCE)},
             f"jax/fista stopped at the lowest validation 3-NN error (patience {ORL_PATIENCE} re-checks), "
             "fitted on the other 70 % of the training images"),
            (f"{ORL_EIGENFACES} eigenfaces, certified optimum", "faces certified", n_cert, {},
             f"jax/fista on all training images, certified gap <= {GAP_TOL:g}")):
        splits = datasets.per_class_splits(y, n_train=ORL_TRAIN_PER_SUBJECT, n_splits=n, seed=0)
        res = C.run_protocol(X, y, splits, JAX, label=f"olivetti/{name}", prepare=orl_prepare(ORL_EIGENFACES),
                             raw_euclidean=True, **kw)
        row = C.make_row("ORL faces", variant, "faces", split_rule, prep, backend, res)
        rows.append(row)
        s = row["summary"]
        if kw:  # early stopped: the kept iterate is not the optimum, its certified gap is reported only
            bad = [i + 1 for i, r in enumerate(res) if r.status not in ("early_stopped", "optimal")]
            checks.append(C.Assertion(
                f"{name}: every early-stopped LMNN solve returned the iterate of lowest validation error",
                "status early_stopped (or optimal)", f"statuses {s['certificates']['statuses']}"
                + (f"; failing splits {bad}" if bad else ""), not bad))
        else:
            checks.append(C.assert_certified(s, res, GAP_TOL, name=name))
        for m in ("lmnn", "energy"):  # Table 1, oFaces: LMNN and energy above the PCA row
            assert C.direction(paper[m], paper["euclidean"]) == "above"
            checks.append(C.assert_not_below(s, m, "euclidean", C.not_below_what(
                name, C.GAIN_LABEL[m], "Euclidean kNN", C.paper_gain("faces", m))))
        for m in C.METHODS:
            checks.append(C.assert_paper_band(s, m, paper[m], PAPER_FACE_SPLITS, C.band_what(name, m, paper[m])))
        if kw:  # the raw-pixel Euclidean error, once (row 2's splits are the first of row 1's)
            checks.append(C.assert_paper_band(
                {"euclidean_raw": s["euclidean_raw"], "n_splits": n}, "euclidean_raw", paper_raw,
                PAPER_FACE_SPLITS, f"faces: Euclidean 3-NN on the {ORL_HEIGHT}x{ORL_WIDTH} pixels consistent "
                f"with the paper's {paper_raw:.2f} %"))
    es, cert = (r["summary"] for r in rows)
    notes = [
        f"Paper (JMLR 2009 Sec. 4.2, Table 1): the Olivetti (AT&T) faces downsampled to {ORL_HEIGHT}x{ORL_WIDTH} "
        f"pixels and projected on their first {ORL_EIGENFACES} eigenfaces, {ORL_TRAIN_PER_SUBJECT} training and "
        f"{ORL_TEST_PER_SUBJECT} test images per subject, {ORL_VALIDATION:.0f} % of the training data for validation "
        f"(Table 1), {PAPER_FACE_SPLITS} random splits (Table 1). Here: the same, from the 64x64 Olivetti file "
        f"(faces/olivettifaces.mat) area-averaged to {ORL_HEIGHT}x{ORL_WIDTH}, PCA fitted on each split's "
        f"training images, {n_es} splits; LMNN fitted on a stratified 70 % of the training images and stopped at "
        f"the lowest 3-NN error on the other {ORL_VALIDATION:.0f} % (patience {ORL_PATIENCE} re-checks; the paper "
        "says how it used the validation part for Yale B only, Sec. 4.2: early stopping); the kNN and energy rules "
        "then use all training images.",
        f"Row 2 solves the same LMNN program on all training images to a certified gap of {GAP_TOL:g} (no "
        f"validation; {n_cert} splits, the first {n_cert} of row 1's), to show what early stopping changes.",
        f"The Euclidean number the rows compare with is {C.PAPER_ROWS['faces']} ({paper['euclidean']:.2f} %), as the "
        f"rows' Euclidean errors are after PCA; the paper's kNN Euclidean row ({paper_raw:.2f} %) is compared with "
        f"our Euclidean error on the {ORL_HEIGHT}x{ORL_WIDTH} pixels. Against its PCA row the paper shows no gain "
        f"(LMNN {C.paper_gain('faces', 'lmnn'):+.2f} pp, energy {C.paper_gain('faces', 'energy'):+.2f} pp): the "
        "rows assert that (LMNN and energy not significantly below Euclidean after PCA).",
        f"Certificates at d = {ORL_EIGENFACES}: the restricted dual's CVXPY program over the {ORL_EIGENFACES}x"
        f"{ORL_EIGENFACES} PSD cone does not fit in the machine's memory (killed at 23 GB), so it is skipped "
        "(metricopt.certify.triplets.CONIC_MAX_D: valid, looser bounds). Row 2 is certified all the same (the rank-two "
        "dual solver applies on all training images); the early-stopped solves' gaps are reported only: max "
        f"{es['certificates']['max_rel_gap']:.2g}.",
        f"Early-stopped statuses {es['certificates']['statuses']}: the fit part (70 % of 280 images, 4-5 per "
        f"subject) has within-subject differences spanning fewer than {ORL_EIGENFACES} dimensions, so a metric can "
        "null every target distance and push every impostor past the margin: the program's optimum is 0 there. A "
        "solve whose kept iterate reached it (objective about 1e-13) is certified 'optimal' with a relative gap of two "
        "numbers at rounding level (negative in the table); on all 280 training images (row 2) the optimum is "
        "positive.",
    ]
    for row in rows:
        s = row["summary"]
        notes.append(
            f"{row['variant']} ({s['n_splits']} splits): Euclidean 3-NN {s['euclidean']['mean']:.2f} +- "
            f"{s['euclidean']['se']:.2f} % after PCA (paper {paper['euclidean']:.2f} %), "
            f"{s['euclidean_raw']['mean']:.2f} +- {s['euclidean_raw']['se']:.2f} % on the pixels (paper "
            f"{paper_raw:.2f} %); LMNN {s['lmnn']['mean']:.2f} +- {s['lmnn']['se']:.2f} % (paper "
            f"{paper['lmnn']:.2f} %); energy {s['energy']['mean']:.2f} +- {s['energy']['se']:.2f} % (paper "
            f"{paper['energy']:.2f} %); index tie rule: Euclidean {s['euclidean_index_ties']['mean']:.2f} %, LMNN "
            f"{s['lmnn_index_ties']['mean']:.2f} %; {s['solve_time']['mean']:.1f} s a split.")
    C.finish("faces", "ORL faces (JMLR 2009 Table 1)", rows, checks, notes, t0)


def yale_prepare(dims, discard=YALE_DISCARD):
    """Pixels / 255, PCA fitted on the training part, the ``discard`` leading components dropped (the
    paper's protocol: they carry mostly illumination), ``dims`` components kept after them."""
    def prepare(X_train, X_test):
        pca = PCA(n_components=dims + discard, random_state=0).fit(X_train)
        return pca.transform(X_train)[:, discard:], pca.transform(X_test)[:, discard:]
    return prepare


def test_yale_b():
    t0 = time.perf_counter()
    X, y = datasets.load("yale-b")
    X = X / 255.0
    n = C.n_splits("yale-b", 1)
    dims = 50
    splits = list(datasets.per_class_splits(y, n_train=YALE_TRAIN_PER_SUBJECT, n_splits=n, seed=0))
    res = C.run_protocol(X, y, splits, YALE_JAX, label=f"yale-b/pca{dims}", prepare=yale_prepare(dims))
    row = C.make_row("Extended Yale B", f"PCA {dims} after the leading {YALE_DISCARD}", "yale-b",
                     f"{YALE_TRAIN_PER_SUBJECT} random images per subject for training, the rest (14-19) for testing",
                     f"pixels / 255, PCA fitted on the training part, leading {YALE_DISCARD} components dropped, "
                     f"{dims} kept (32x32 pixels)",
                     f"jax/fista, tol 1e-3, time limit {YALE_JAX['time_limit']:.0f} s", res)
    s = row["summary"]
    gains = {m: C.paper_gain("yale-b", m) for m in ("lmnn", "energy")}
    assert all(g < 0 for g in gains.values())  # Table 1, yFaces: both below the PCA row
    paper_lmnn = C.PAPER["yale-b"]["lmnn"]
    checks = C.time_limited_checks(s, res, YALE_GAP_TOL, "Yale B", gains) + [
        C.assert_band(s, "lmnn", paper_lmnn, 2.0, f"Yale B: LMNN 3-NN error within 2 pp of the paper's {paper_lmnn:.2f} %"),
    ]
    sec = {what: int(C.jmlr_text("Sec. 4.2", "Yale B", what)) for what in (
        "training images per subject", "test images per subject", "principal components",
        "validation % of the training data", "runs of 70/30 splits")}
    notes = [
        f"Paper (JMLR 2009 Sec. 4.2): Extended Yale B, {YALE_TRAIN_PER_SUBJECT} training and "
        f"{sec['test images per subject']} test images per subject, projected on {sec['principal components']} "
        f"principal components (Table 1: {C.jmlr('# reduced dimensions', 'yale-b'):.0f} reduced dimensions) after "
        f"discarding the leading {YALE_DISCARD}, {sec['validation % of the training data']} % of the training part "
        f"for validation with early stopping, {sec['runs of 70/30 splits']} splits. Here: the 32x32 copy (2414 images, "
        f"38 subjects, 59-64 per subject, so 14-19 test images), {YALE_TRAIN_PER_SUBJECT} per subject for training, "
        f"the leading {YALE_DISCARD} PCA "
        f"components dropped and {dims} kept (the certificate is out of reach at d = 100); the exact metric is "
        "trained on all training images (no validation-based stopping). One split by default (a solve takes about 10 "
        "minutes on 2 shared cores): with one split a gain assertion reduces to 'strictly below', and the "
        "band is a fixed 2 pp (no split-to-split variation to derive one from).",
        f"Solves: statuses {s['certificates']['statuses']}, certified relative gap at most "
        f"{s['certificates']['max_rel_gap']:.1e}, {s['solve_time']['mean']:.0f} s per solve (time limit "
        f"{YALE_JAX['time_limit']:.0f} s; a solve stopped by it ends iteration_limit).",
        f"The paper's Euclidean number ({C.PAPER['yale-b']['euclidean']:.2f} %) is its row '{C.PAPER_ROWS['yale-b']}'; "
        f"ours after PCA: "
        f"{s['euclidean']['mean']:.2f} %. LMNN {s['lmnn']['mean']:.2f} % against {C.PAPER['yale-b']['lmnn']:.2f} %; "
        f"energy {s['energy']['mean']:.2f} % against {C.PAPER['yale-b']['energy']:.2f} %.",
    ]
    C.finish("yale-b", "Extended Yale B (JMLR 2009 Table 1)", [row], checks, notes, t0)
