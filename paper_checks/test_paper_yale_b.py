r"""Paper check: LMNN on Extended Yale B under the paper's own protocol (JMLR 2009 Sec. 4.2, Table 1 yFaces).

Weinberger & Saul, JMLR 10:207-244, 2009, Section 4.2 describes its Yale B runs: the images down-sampled and
projected on their leading 200 principal components after the leading 5 are discarded (they carry mostly the
illumination), 45 random images of each subject for training and 19 for testing, 30 % of the training data held
out for validation and the training stopped early at the lowest validation error, 10 runs. Table 1 (column
yFaces) gives the errors of its rows kNN PCA, LMNN PCA and LMNN (energy) (every number is read from
``paper_numbers.csv``, none is typed here).

This check follows that protocol as far as the data here allows:

* images: ``faces/YaleB_32x32.mat`` (2414 images of 38 subjects, 32x32 pixels, 59-64 per subject), pixels / 255;
* splits: the paper's 45 random training images per subject (:func:`metricopt.datasets.per_class_splits`), the
  rest (14-19 per subject) for testing; the paper's 10 splits;
* PCA fitted on each split's training images, the paper's leading 5 components dropped and its 200 kept;
* LMNN (JMLR 2009 Eq. 14, ``k = 3``, ``mu = 0.5``)

  .. math::

      \min_{M \succeq 0}\ (1-\mu) \sum_{i,\, j \rightsquigarrow i} d_M(x_i, x_j)
      + \mu \sum_{i,\, j \rightsquigarrow i} \sum_{l:\, y_l \ne y_i}
        \big[1 + d_M(x_i, x_j) - d_M(x_i, x_l)\big]_+

  solved by the JAX backend on a stratified 70 % of the training images and stopped at the lowest 3-NN error on
  the other 30 % (:func:`_common.early_stopped_fit`, patience 10 re-checks: the paper states the stop, not its
  patience); the kNN and energy rules then use all training images as references.

The reduced Yale B check (``test_paper_faces.py::test_yale_b``: 50 components, all training images, certified to
1e-3) stays beside this one: it shows the certified optimum, this one the paper's protocol. At d = 200 the
early-stopped iterate's certificate is reported only (the kept iterate minimises a validation error, not the
objective; its status is ``early_stopped`` unless the certificate proves it optimal).

Asserted (tolerances fixed before the runs):

* every solve returns the iterate of lowest validation error (status ``early_stopped``, or ``optimal`` where its
  certificate proves it);
* the paper's directions against its PCA row (Table 1, yFaces: LMNN and energy both below kNN PCA): LMNN's kNN error
  and the energy rule's error significantly below the Euclidean error after PCA (paired mean difference ``< -2``
  s.e. over the splits);
* the Euclidean error after PCA, LMNN's and the energy rule's consistent with the paper's numbers
  (:func:`_common.assert_paper_band`: 2 s.e. of the difference of the means, the paper's s.e. estimated from our
  split-to-split s.d. and its 10 splits).

The Euclidean error on the pixels is reported, not compared: the paper's kNN Euclidean row ran on its own
images (Table 1: 8,064 features), ours are 32x32.

Runs: 10 splits, about 2 minutes each on one core (``METRICOPT_PAPER_SPLITS_YALE_B_SEC42`` sets the count). Under
``METRICOPT_PAPER_IDENTITY=1`` the metric is the identity and both gain assertions must fail.
"""

import time

import pytest

import _common as C
from metricopt import datasets
from test_paper_faces import YALE_DISCARD, YALE_TRAIN_PER_SUBJECT, yale_prepare

pytestmark = pytest.mark.slow

CHECK = "yale-b-sec42"
#: the paper's protocol (JMLR 2009 Sec. 4.2; Table 1 yFaces): principal components kept, validation part, splits
YALE_DIMS = int(C.jmlr_text("Sec. 4.2", "Yale B", "principal components"))
YALE_VALIDATION = int(C.jmlr_text("Sec. 4.2", "Yale B", "validation % of the training data"))
YALE_SPLITS = int(C.jmlr_text("Sec. 4.2", "Yale B", "runs of 70/30 splits"))
YALE_TEST_PER_SUBJECT = int(C.jmlr_text("Sec. 4.2", "Yale B", "test images per subject"))
#: re-checks without a lower validation error before the solve stops (the faces check's)
PATIENCE = 10


def _mismatches():
    """The known mismatch of this check, written from a trial of its first 3 splits (2026-11-28, one shared core):
    Euclidean after PCA 11.70 % (s.e. 1.14), LMNN 5.21 % (0.95), energy 5.40 % (1.08)."""
    p = C.PAPER["yale-b"]
    return {
        C.band_what(CHECK, "energy", p["energy"]): (
            f"not reproduced: our energy rule is far below the paper's {C._f(p['energy'])} % (ours in the table; 5.40 "
            "% in a 3-split trial) and level with our LMNN kNN error (5.21 % in the trial), where the paper's energy "
            f"error is {p['energy'] - p['lmnn']:.2f} pp above its LMNN kNN error ({C._f(p['lmnn'])} %). Our LMNN kNN "
            "error agrees with the paper's (its band passes), so the difference is in the energy rule itself: ours is "
            "Eq. 15 with the early-stopped metric and the target neighbours of all training images; the paper does "
            "not describe its rule in more detail. Not explained."),
    }


C.KNOWN_MISMATCHES.update(_mismatches())


def test_yale_b_paper_protocol():
    t0 = time.perf_counter()
    X, y = datasets.load("yale-b")
    X = X / 255.0
    n = C.n_splits(CHECK, YALE_SPLITS)
    splits = datasets.per_class_splits(y, n_train=YALE_TRAIN_PER_SUBJECT, n_splits=n, seed=0)
    res = C.run_protocol(X, y, splits, {}, label=f"yale-b/sec42/pca{YALE_DIMS}", prepare=yale_prepare(YALE_DIMS),
                         raw_euclidean=True, fit=C.early_stopped_fit(YALE_VALIDATION / 100.0, PATIENCE))
    row = C.make_row(
        "Extended Yale B", f"PCA {YALE_DIMS} after the leading {YALE_DISCARD}, early stopping on "
        f"{YALE_VALIDATION} % validation", "yale-b",
        f"{YALE_TRAIN_PER_SUBJECT} random images per subject for training, the rest (14-{YALE_TEST_PER_SUBJECT}) "
        "for testing",
        f"pixels / 255, PCA fitted on the training part, leading {YALE_DISCARD} components dropped, {YALE_DIMS} kept "
        "(32x32 pixels)",
        f"jax/fista on a stratified {100 - YALE_VALIDATION} % of the training images, stopped at the lowest "
        f"validation 3-NN error (patience {PATIENCE} re-checks)", res)
    s = row["summary"]
    paper = C.PAPER["yale-b"]
    bad = [i + 1 for i, r in enumerate(res) if r.status not in ("early_stopped", "optimal")]
    checks = [C.Assertion(
        f"{CHECK}: every early-stopped LMNN solve returned the iterate of lowest validation error",
        "status early_stopped (or optimal)",
        f"statuses {s['certificates']['statuses']}" + (f"; failing splits {bad}" if bad else ""), not bad)]
    for m in ("lmnn", "energy"):  # Table 1, yFaces: both below the PCA row
        assert C.direction(paper[m], paper["euclidean"]) == "below"
        checks.append(C.assert_gain(s, m, "euclidean", C.gain_what(CHECK, "yale-b", m)))
    for m in C.METHODS:
        checks.append(C.assert_paper_band(s, m, paper[m], YALE_SPLITS, C.band_what(CHECK, m, paper[m])))
    notes = [
        f"Paper (JMLR 2009 Sec. 4.2, Table 1 yFaces): {YALE_TRAIN_PER_SUBJECT} training and {YALE_TEST_PER_SUBJECT} "
        f"test images per subject, {YALE_DIMS} principal components after the leading {YALE_DISCARD}, "
        f"{YALE_VALIDATION} % of the training data for validation with early stopping, {YALE_SPLITS} runs. Here: the "
        f"same on the 32x32 images (2414 images, 38 subjects, 59-64 per subject, so 14-19 test images), {n} splits, "
        f"PCA fitted on each split's training images; LMNN fitted on a stratified {100 - YALE_VALIDATION} % of the "
        f"training images and stopped at the lowest 3-NN error on the other {YALE_VALIDATION} % (patience {PATIENCE} "
        "re-checks); the kNN and energy rules then use all training images.",
        f"Table 1 lists {C.jmlr('# training examples', 'yale-b'):.0f} training and "
        f"{C.jmlr('# testing examples', 'yale-b'):.0f} test examples and {C.jmlr('# reduced dimensions', 'yale-b'):.0f}"
        f" reduced dimensions; the text (Sec. 4.2, followed here) says {YALE_TRAIN_PER_SUBJECT} per subject "
        f"({YALE_TRAIN_PER_SUBJECT * 38} of 2414) and {YALE_DIMS} components.",
        f"Errors ({n} splits): Euclidean 3-NN after PCA {s['euclidean']['mean']:.2f} +- {s['euclidean']['se']:.2f} % "
        f"(paper, kNN PCA: {paper['euclidean']:.2f} %), on the 32x32 pixels {s['euclidean_raw']['mean']:.2f} +- "
        f"{s['euclidean_raw']['se']:.2f} % (paper, kNN Euclidean on its {C.jmlr('# features', 'yale-b'):.0f} "
        f"features: {C.jmlr('kNN Euclidean', 'yale-b'):.2f} %; not compared); LMNN {s['lmnn']['mean']:.2f} +- "
        f"{s['lmnn']['se']:.2f} % (paper {paper['lmnn']:.2f} %); energy {s['energy']['mean']:.2f} +- "
        f"{s['energy']['se']:.2f} % (paper {paper['energy']:.2f} %); index tie rule: Euclidean "
        f"{s['euclidean_index_ties']['mean']:.2f} %, LMNN {s['lmnn_index_ties']['mean']:.2f} %; "
        f"{s['solve_time']['mean']:.0f} s a split.",
        f"Solves: statuses {s['certificates']['statuses']}; the kept iterates' certified relative gaps (reported "
        f"only: an early-stopped metric is not the optimum) at most {s['certificates']['max_rel_gap']:.2g}.",
    ]
    C.finish(CHECK, "Extended Yale B, the paper's protocol (JMLR 2009 Sec. 4.2, Table 1)", [row], checks, notes, t0)
