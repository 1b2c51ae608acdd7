r"""Paper check: LMNN on face recognition (ORL and Extended Yale B).

Reproduces the faces rows of Weinberger & Saul, JMLR 10:207-244, 2009 (Table 1 and the
test-error table of Section 6; NIPS 2005 Table 1, "AT&T faces"): 3-NN test error with the
Euclidean metric, the LMNN metric and LMNN's energy rule after a PCA projection fitted on
the training images, and the Extended Yale B row quoted in issue 5 (Euclidean after PCA
10.79 %, LMNN 5.90 %).

The metric of every split solves the LMNN program (JMLR 2009, Eq. 14)

.. math::

    \min_{M \succeq 0}\ \tfrac12 \sum_{i,\, j \rightsquigarrow i} d_M(x_i, x_j)
    + \tfrac12 \sum_{i,\, j \rightsquigarrow i} \sum_{l:\, y_l \ne y_i}
      \big[1 + d_M(x_i, x_j) - d_M(x_i, x_l)\big]_+

(``k = 3``, ``mu = 0.5``) by the JAX first-order backend, stopped at a certified relative
duality gap ``<= 1e-3`` (``time_limit`` caps a solve; a solve that hits it fails the
certificate assertion instead of passing silently).

Protocols:

* ORL (``faces/ORL_32x32.mat``: the AT&T images the paper used, at 32x32): 7 random training
  images per subject, the other 3 for testing (280/120, as in the paper), pixels scaled by 1/255
  and PCA fitted on the 280 training images, to 30 and to 50 dimensions (the paper: 200; at
  d = 200 the certificate's restricted dual took more than 20 GB on the 64x64 Olivetti file).
  The paper's Euclidean number is its raw-pixel row, so it is compared with our Euclidean error on
  the raw pixels of the same splits.
* Extended Yale B (``faces/YaleB_32x32.mat``, 2414 images of 38 subjects at 32x32): the paper's
  protocol as far as the data allows: 45 random training images per subject, the rest for testing,
  the 5 leading principal components (illumination) dropped and 50 kept, PCA fitted on the
  training part.

Scaling the pixels by 1/255 changes no error: the LMNN objective satisfies
``f(M; cX) = f(c^2 M; X)``, so the optimal metric scales by ``1/c^2`` and every distance
ranking (kNN and energy rule) is unchanged.

Tolerances (fixed before the runs):

* every ORL solve ``optimal`` with certified relative gap ``<= 1e-3`` (the JAX stopping tol);
  Yale B: the solve is time-limited (600 s), its certified gap is asserted ``<= 0.1``;
* every gain the paper reports (LMNN and energy below Euclidean) significant here: paired
  difference ``< -2`` s.e. over the splits (one Yale split: strictly below);
* ORL: LMNN, energy and raw-pixel Euclidean errors consistent with the paper's (2 s.e. of the
  difference of the means, the paper's s.e. estimated from our split-to-split s.d. and its 100
  splits); Yale B: LMNN within 2 pp of the paper's 5.90 %.
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
#: the paper's Yale B protocol (JMLR 2009 Sec. 6, as issue 16 quotes it)
YALE_DISCARD = 5
YALE_TRAIN_PER_SUBJECT = 45
#: the paper averaged its faces row over 100 random splits (issue 16)
PAPER_FACE_SPLITS = 100


def test_olivetti_faces():
    t0 = time.perf_counter()
    X, y = datasets.load("orl")
    X = X / 255.0
    n = C.n_splits("faces", 10)
    rows, checks = [], []
    for dims in (30, 50):
        splits = datasets.per_class_splits(y, n_train=7, n_splits=n, seed=0)
        res = C.run_protocol(X, y, splits, JAX, pca=dims, label=f"orl/pca{dims}", raw_euclidean=True)
        row = C.make_row("ORL faces", f"PCA {dims}", "faces",
                         "7 random images per subject for training, 3 for testing",
                         f"pixels / 255, PCA to {dims} dims fitted on the training images (32x32 pixels)",
                         "jax/fista, certified gap <= 1e-3", res)
        rows.append(row)
        s = row["summary"]
        checks += [
            C.assert_certified(s, res, GAP_TOL, name=f"faces PCA {dims}"),
            C.assert_gain(s, "lmnn", "euclidean", f"faces PCA {dims}: LMNN kNN below Euclidean kNN (paper: -2.75 pp)"),
            C.assert_gain(s, "energy", "euclidean",
                          f"faces PCA {dims}: energy rule below Euclidean kNN (paper: -2.87 pp)"),
            C.assert_paper_band(s, "lmnn", C.PAPER["faces"]["lmnn"], PAPER_FACE_SPLITS,
                                f"faces PCA {dims}: LMNN 3-NN error consistent with the paper's 3.28 %"),
            C.assert_paper_band(s, "energy", C.PAPER["faces"]["energy"], PAPER_FACE_SPLITS,
                                f"faces PCA {dims}: energy-rule error consistent with the paper's 3.16 %"),
        ]
    raw = {"mean": rows[0]["summary"]["euclidean_raw"]["mean"], "se": rows[0]["summary"]["euclidean_raw"]["se"]}
    checks.append(C.assert_paper_band({"euclidean_raw": raw, "n_splits": n}, "euclidean_raw",
                                      C.PAPER["faces"]["euclidean"], PAPER_FACE_SPLITS,
                                      "faces: Euclidean 3-NN on the raw pixels consistent with the paper's 6.03 %"))
    notes = [
        f"Paper: AT&T faces (ORL), 280/120 split with 7 training images per subject, {PAPER_FACE_SPLITS} random "
        f"splits, 200 PCA dims. Here: faces/ORL_32x32.mat (the AT&T images at 32x32), the same split rule, {n} "
        "splits.",
        f"The paper's Euclidean number ({C.PAPER['faces']['euclidean']:.2f} %) is its row '{C.PAPER_ROWS['faces']}'; "
        "the rows' Euclidean columns are after PCA.",
        "The issue quotes 200 PCA dims for the paper's faces row; d = 200 was not run: the "
        "certificate's restricted dual (up to 4,000 free triplets x 40,000 entries of M, dense) "
        "exceeded 20 GB of memory on one split (measured on the 64x64 Olivetti file). Rows at 30 and 50 dims.",
    ]
    for row in rows:
        s = row["summary"]
        notes.append(
            f"{row['variant']}: Euclidean 3-NN {s['euclidean']['mean']:.2f} % after PCA, "
            f"{s['euclidean_raw']['mean']:.2f} % on raw pixels (paper {C.PAPER['faces']['euclidean']:.2f} %); LMNN "
            f"{s['lmnn']['mean']:.2f} % against {C.PAPER['faces']['lmnn']:.2f} %; energy {s['energy']['mean']:.2f} % "
            f"against {C.PAPER['faces']['energy']:.2f} %.")
    C.finish("faces", "ORL faces (JMLR 2009 Table 1; NIPS 2005 Table 1)", rows, checks, notes, t0)


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
    checks = C.time_limited_checks(s, res, YALE_GAP_TOL, "Yale B", {"lmnn": -4.89, "energy": -0.68}) + [
        C.assert_band(s, "lmnn", C.PAPER["yale-b"]["lmnn"], 2.0,
                      "Yale B: LMNN 3-NN error within 2 pp of the paper's 5.90 %"),
    ]
    notes = [
        "Paper: Extended Yale B, 45 training and 19 test images per subject, the 5 leading eigenvectors "
        "discarded, 30 % of the training part for validation, 10 splits. Here: the 32x32 copy (2414 images, "
        "38 subjects, 59-64 per subject, so 14-19 test images), 45 per subject for training, the leading 5 PCA "
        f"components dropped and {dims} kept (the certificate is out of reach at d = 100); the exact metric is "
        "trained on all 45 (no validation-based stopping). One split by default (a solve takes about 10 "
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
