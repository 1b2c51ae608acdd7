r"""Paper check: LMNN on face recognition (Olivetti/ORL and Extended Yale B).

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

* Olivetti (``faces/olivettifaces.mat``, 64x64 pixels; the paper used the same AT&T images
  downsampled to 38x31): 7 random training images per subject, the other 3 for testing
  (280/120, as in the paper), pixels scaled by 1/255 and PCA fitted on the 280 training
  images. The issue quotes 200 PCA dimensions; at d = 200 the certificate's restricted
  dual (a dense conic program with d^2 = 40,000 columns) took more than 20 GB of memory,
  and at d = 100 one final certificate ran for more than 3 minutes (and FISTA had not
  reached the tolerance in 20,000 iterations on unscaled pixels), so the rows are run at
  30 and 50 dimensions.
* Extended Yale B (``faces/YaleB_32x32.mat``, 2414 images of 38 subjects at 32x32; the
  paper used larger images): random stratified 70/30 splits, pixels scaled by 1/255, PCA to
  50 dimensions fitted on the training part (d = 100 is out of reach for the same reason).

Scaling the pixels by 1/255 changes no error: the LMNN objective satisfies
``f(M; cX) = f(c^2 M; X)``, so the optimal metric scales by ``1/c^2`` and every distance
ranking (kNN and energy rule) is unchanged; it only keeps the first-order solver's step
sizes and smoothing in a sensible range.

Tolerances (fixed before the runs):

* every Olivetti solve ``optimal`` with certified relative gap ``<= 1e-3`` (the JAX stopping
  tol); Yale B: the solve is time-limited (600 s, about what it needs on 2 shared cores),
  its certified gap is reported and asserted ``<= 0.1``;
* Olivetti (paper gain 2.75 pp) and Yale B (paper gain 4.89 pp): LMNN significantly below
  Euclidean (paired difference ``< -2`` s.e.); energy rule not significantly above
  Euclidean (``<= 2`` s.e.). No band on the Euclidean baselines: the image sizes and PCA
  differ from the paper's.
"""

import time

import pytest

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


def test_olivetti_faces():
    t0 = time.perf_counter()
    X, y = datasets.load("olivetti")
    X = X / 255.0
    n = C.n_splits("faces", 10)
    rows, checks = [], []
    for dims in (30, 50):
        splits = datasets.per_class_splits(y, n_train=7, n_splits=n, seed=0)
        res = C.run_protocol(X, y, splits, JAX, pca=dims, label=f"olivetti/pca{dims}")
        row = C.make_row("olivetti faces", f"PCA {dims}", "faces",
                         "7 random images per subject for training, 3 for testing",
                         f"pixels / 255, PCA to {dims} dims fitted on the training images (64x64 pixels)",
                         "jax/fista, certified gap <= 1e-3", res)
        rows.append(row)
        s = row["summary"]
        checks += [
            C.assert_certified(s, res, GAP_TOL),
            C.assert_gain(s, "lmnn", "euclidean", f"faces PCA {dims}: LMNN kNN beats Euclidean kNN"),
            C.assert_not_worse(s, "energy", "euclidean", f"faces PCA {dims}: energy rule not worse than Euclidean"),
        ]
    notes = [
        f"Paper: AT&T/Olivetti faces (downsampled images), 280/120 split with 7 training images per "
        f"subject, averaged over many random splits. Here: the 64x64 Olivetti file, the same split rule, {n} splits.",
        "The issue quotes 200 PCA dims for the paper's faces row; d = 200 was not run: the "
        "certificate's restricted dual (up to 4,000 free triplets x 40,000 entries of M, dense) "
        "exceeded 20 GB of memory on one split. At d = 100 (raw pixels) FISTA had not reached the "
        "1e-3 gap after 20,000 iterations and the final certificate ran for more than 3 minutes; "
        "rows at 30 and 50 dims instead, so the Euclidean baseline is not compared with the paper's.",
    ]
    for row in rows:
        s = row["summary"]
        notes.append(
            f"{row['variant']}: Euclidean 3-NN {s['euclidean']['mean']:.2f} % against the paper's "
            f"{C.PAPER['faces']['euclidean']:.2f} % (not matched: other image size and PCA dims); LMNN "
            f"{s['lmnn']['mean']:.2f} % against {C.PAPER['faces']['lmnn']:.2f} %; gain "
            f"{s['lmnn-euclidean']['mean']:+.2f} pp (s.e. {s['lmnn-euclidean']['se']:.2f}) against the paper's "
            f"{C.PAPER['faces']['lmnn'] - C.PAPER['faces']['euclidean']:+.2f} pp.")
    C.finish("faces", "Olivetti / ORL faces (JMLR 2009 Table 1; NIPS 2005 Table 1)", rows, checks, notes, t0)


def test_yale_b():
    t0 = time.perf_counter()
    X, y = datasets.load("yale-b")
    X = X / 255.0
    n = C.n_splits("yale-b", 1)
    dims = 50
    splits = datasets.random_splits(y, n_splits=n, test_size=0.3, seed=0)
    res = C.run_protocol(X, y, splits, YALE_JAX, pca=dims, label=f"yale-b/pca{dims}")
    row = C.make_row("Extended Yale B", f"PCA {dims}", "yale-b", "random stratified 70/30 splits",
                     f"pixels / 255, PCA to {dims} dims fitted on the training part (32x32 pixels)",
                     f"jax/fista, tol 1e-3, time limit {YALE_JAX['time_limit']:.0f} s", res)
    s = row["summary"]
    checks = [
        C.assert_gap(s, res, YALE_GAP_TOL, "Yale B: every time-limited LMNN solve has a certified relative gap "
                     "within the stated loose tolerance"),
        C.assert_gain(s, "lmnn", "euclidean", "Yale B: LMNN kNN beats Euclidean kNN"),
        C.assert_not_worse(s, "energy", "euclidean", "Yale B: energy rule not worse than Euclidean"),
    ]
    notes = [
        "Our copy is the 32x32 version of Extended Yale B (2414 images, 38 subjects). The paper's "
        "images were larger; PCA 50 here keeps the certificate affordable (d = 100 is not, see the "
        "faces check). One split by default (one solve takes about 10 minutes on 2 shared cores); "
        "with one split the gain assertion reduces to 'strictly below'.",
        f"Solves: statuses {s['certificates']['statuses']}, certified relative gap at most "
        f"{s['certificates']['max_rel_gap']:.1e}, {s['solve_time']['mean']:.0f} s per solve (time limit "
        f"{YALE_JAX['time_limit']:.0f} s; a solve stopped by it ends iteration_limit and its errors belong to a "
        "metric within the certified gap of the optimum).",
        f"Not matched: Euclidean 3-NN after PCA {s['euclidean']['mean']:.2f} % against the quoted "
        f"{C.PAPER['yale-b']['euclidean']:.2f} %: our 32x32 raw-pixel images (strong illumination changes, no "
        "normalisation) and PCA 50 are far from the paper's preprocessing. LMNN "
        f"{s['lmnn']['mean']:.2f} % against {C.PAPER['yale-b']['lmnn']:.2f} %; gain "
        f"{s['lmnn-euclidean']['mean']:+.2f} pp against the paper's "
        f"{C.PAPER['yale-b']['lmnn'] - C.PAPER['yale-b']['euclidean']:+.2f} pp (same direction, much larger here).",
    ]
    C.finish("yale-b", "Extended Yale B (issue 5 quote: Euclidean after PCA 10.79, LMNN 5.90)", [row], checks,
             notes, t0)
