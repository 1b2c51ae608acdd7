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
certificate assertion instead of passing silently).

Protocols (the differences from the paper's are listed in RESULTS.md):

* ORL (``faces/ORL_32x32.mat``: the AT&T images at 32x32; the paper downsampled them to a smaller
  size and projected them on more eigenfaces, Section 4.2): the paper's split rule (Section 4.2: a
  fixed number of random training images per subject, the others for testing), pixels scaled by
  1/255 and PCA fitted on the training images, to 30 and to 50 dimensions (at d = 200 the
  certificate's restricted dual took more than 20 GB on the 64x64 Olivetti file). No validation part (Table 1 lists one for oFaces): the exact
  metric is trained on all training images. The paper's Euclidean row, on its eigenface inputs, is
  compared with our Euclidean error on the raw pixels of the same splits.
* Extended Yale B (``faces/YaleB_32x32.mat``, 2414 images of 38 subjects at 32x32): the paper's
  protocol as far as the data allows (Section 4.2): the paper's number of random training images
  per subject, the rest for testing, the leading principal components it discards dropped and 50
  kept (the paper: 200), PCA fitted on the training part; no validation-based early stopping.

Scaling the pixels by 1/255 changes no error: the LMNN objective satisfies
``f(M; cX) = f(c^2 M; X)``, so the optimal metric scales by ``1/c^2`` and every distance
ranking (kNN and energy rule) is unchanged.

Tolerances (fixed before the runs):

* every ORL solve ``optimal`` with certified relative gap ``<= 1e-3`` (the JAX stopping tol);
  Yale B: the solve is time-limited (600 s), its certified gap is asserted ``<= 0.1``;
* the paper's directions against Euclidean after PCA: ORL, LMNN and energy not significantly below
  (paired difference ``>= -2`` s.e.; the paper has both above); Yale B, LMNN and energy below
  (paired difference ``< -2`` s.e.; one split: strictly below);
* ORL: the Euclidean error after PCA, LMNN, energy and raw-pixel Euclidean errors consistent with
  the paper's (2 s.e. of the difference of the means, the paper's s.e. estimated from our
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
#: the paper's Olivetti protocol (Sec. 4.2): training images per subject; its number of splits (Table 1)
ORL_TRAIN_PER_SUBJECT = int(C.jmlr_text("Sec. 4.2", "Olivetti faces", "training images per subject"))
PAPER_FACE_SPLITS = int(C.jmlr("# of train/test splits", "oFaces"))


def test_olivetti_faces():
    t0 = time.perf_counter()
    X, y = datasets.load("orl")
    X = X / 255.0
    n = C.n_splits("faces", 10)
    rows, checks = [], []
    for dims in (30, 50):
        splits = datasets.per_class_splits(y, n_train=ORL_TRAIN_PER_SUBJECT, n_splits=n, seed=0)
        res = C.run_protocol(X, y, splits, JAX, pca=dims, label=f"orl/pca{dims}", raw_euclidean=True)
        row = C.make_row("ORL faces", f"PCA {dims}", "faces",
                         f"{ORL_TRAIN_PER_SUBJECT} random images per subject for training, the rest for testing",
                         f"pixels / 255, PCA to {dims} dims fitted on the training images (32x32 pixels)",
                         "jax/fista, certified gap <= 1e-3", res)
        rows.append(row)
        s, paper, name = row["summary"], C.PAPER["faces"], f"faces PCA {dims}"
        checks.append(C.assert_certified(s, res, GAP_TOL, name=name))
        for m in ("lmnn", "energy"):  # Table 1, oFaces: LMNN and energy above the PCA row
            assert C.direction(paper[m], paper["euclidean"]) == "above"
            checks.append(C.assert_not_below(s, m, "euclidean", C.not_below_what(
                name, C.GAIN_LABEL[m], "Euclidean kNN", C.paper_gain("faces", m))))
        for m in C.METHODS:
            checks.append(C.assert_paper_band(s, m, paper[m], PAPER_FACE_SPLITS, C.band_what(name, m, paper[m])))
    raw = {"mean": rows[0]["summary"]["euclidean_raw"]["mean"], "se": rows[0]["summary"]["euclidean_raw"]["se"]}
    paper_raw = C.jmlr("kNN Euclidean", "faces")
    checks.append(C.assert_paper_band({"euclidean_raw": raw, "n_splits": n}, "euclidean_raw", paper_raw,
                                      PAPER_FACE_SPLITS, "faces: Euclidean 3-NN on the raw pixels consistent with the "
                                      f"paper's {paper_raw:.2f} %"))
    height, width = (int(C.jmlr_text("Sec. 4.2", "Olivetti faces", f"image {w} (pixels)")) for w in ("height", "width"))
    eigenfaces = int(C.jmlr_text("Sec. 4.2", "Olivetti faces", "eigenfaces"))
    notes = [
        f"Paper (JMLR 2009 Sec. 4.2, Table 1): the AT&T faces downsampled to {height}x{width} pixels and projected on "
        f"their first {eigenfaces} eigenfaces, {ORL_TRAIN_PER_SUBJECT} training images per subject, "
        f"{C.jmlr('% validation', 'faces'):.0f} % validation, {PAPER_FACE_SPLITS} random splits. Here: "
        f"faces/ORL_32x32.mat (the AT&T images at 32x32), the same split rule, no validation part, {n} splits.",
        f"The rows' paper Euclidean number ({C.PAPER['faces']['euclidean']:.2f} %) is {C.PAPER_ROWS['faces']}, as the "
        f"rows' Euclidean errors are after PCA; the paper's Euclidean row ({paper_raw:.2f} %, on its {eigenfaces} "
        "eigenfaces) is compared with our raw-pixel Euclidean error.",
        f"Against its PCA row the paper shows no gain: LMNN {C.paper_gain('faces', 'lmnn'):+.2f} pp, energy "
        f"{C.paper_gain('faces', 'energy'):+.2f} pp; the rows assert that (LMNN and energy not significantly below).",
        f"The paper's {eigenfaces} eigenfaces were not run: the certificate's restricted dual (up to 4,000 free "
        "triplets x 40,000 entries of M, dense) exceeded 20 GB of memory on one split at d = 200 (measured on the "
        "64x64 Olivetti file). Rows at 30 and 50 dims.",
    ]
    for row in rows:
        s = row["summary"]
        notes.append(
            f"{row['variant']}: Euclidean 3-NN {s['euclidean']['mean']:.2f} % after PCA (paper "
            f"{C.PAPER['faces']['euclidean']:.2f} %), {s['euclidean_raw']['mean']:.2f} % on raw pixels (paper "
            f"{paper_raw:.2f} %); LMNN {s['lmnn']['mean']:.2f} % against {C.PAPER['faces']['lmnn']:.2f} %; energy "
            f"{s['energy']['mean']:.2f} % against {C.PAPER['faces']['energy']:.2f} %.")
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
