r"""Paper checks: the figures that synthetic or bundled data allows (issue 33, item 3).

Three checks, each with its own result file (``results/<check>.json``) and section in ``RESULTS.md``. Every
number attributed to a paper is read from ``paper_numbers.csv``; every direction asserted is one that the
paper's text (caption or running text) states. The figures themselves are images, so their axes, point
clouds and arrows are not in the text copy and nothing is read from them.

``jmlr-fig2-zebra``: Weinberger & Saul, JMLR 2009, Fig. 2 and Sec. 3.3 (the zebra-stripes toy)
    The text: n = 2000 points from a bimodal distribution; within each mode, two classes in alternating
    vertical stripes; the two sets of stripes displaced by a large horizontal offset, so that the
    within-class variance is much larger horizontally than vertically while the class is predicted by the
    vertical neighbours. The caption: "Only NCA and LMNN reduce the 1-NN classification error on this data
    set; the other algorithms actually increase the error"; Sec. 3.3 names the others: LDA, RCA and MCC
    (Xing et al.'s method, our MMC; see the table1-baselines check). PCA is not named in the text: it is
    reported (its dominant axis, 1-D), not asserted; a full-rank PCA is a rotation and leaves every 1-NN
    error unchanged.

    Choices the paper leaves open (ours): each point picks a mode with probability 1/2; within a mode,
    x and y are uniform on [0, 1); the class is ``floor(10 x) mod 2`` (10 stripes of width 0.1 per mode, the
    same pattern in both modes); the second mode is shifted by 4 to the right (horizontal within-class
    s.d. about 2 against 0.29 vertically). Each seed draws n = 2000 points and splits them at random into
    1,000 training and 1,000 test points; errors are 1-NN *test* errors (training leave-one-out errors are
    reported beside them). Methods, each fitted on the training half: LDA (C - 1 = 1 direction), RCA
    (chunklets = classes, its default 99.9 % PCA, which keeps both dimensions here), MMC (JAX backend:
    1,000 points give 250,000 dissimilar pairs), NCA (square ``A``, PCA start) and LMNN (k = 3, mu = 0.5 as
    in Sec. 4, JAX backend, certified). Asserted, as paired differences over the seeds (2 s.e.): LMNN's and
    NCA's test errors below Euclidean's; LDA's, RCA's and MMC's above it. 5 seeds by default
    (``METRICOPT_PAPER_SPLITS_JMLR_FIG2_ZEBRA``); about 1 minute on 2 shared cores.

``jmlr-fig7-circles``: JMLR 2009, Fig. 7 and Sec. 5.2 (two concentric circles, multi-metric LMNN)
    The text: LMNN trained one global metric and 2 and 3 local metrics (clusters by k-means); the
    leave-one-out training error with k = 1 "was 100%" with one metric, "dropped to 21%" with two and
    "vanished altogether" with three (the caption: "reduces the LOO-error on the training set to zero");
    "Global linear transformations cannot improve the accuracy of kNN classification of this data set".
    The number of points, the radii and the sampling are not given. Ours: 40 points on each circle (radii
    1 and 1 + 0.8 h, h = 2 pi / 40 the angular spacing), at the same 40 nominal angles on both circles,
    each jittered by up to 10 % of h, the whole set rotated at random: every point's Euclidean nearest
    neighbour is its radial neighbour on the other circle (Euclidean LOO error 100 %: the paper's one-metric
    error, for a metric that cannot improve on Euclid). :class:`metricopt.MultiMetricLMNN` (``clusters="kmeans"``, ``n_clusters`` = 1, 2, 3;
    k = 3 target neighbours and mu = 0.5 as in Sec. 4; exact CVXPY solve, certified) and its
    cluster-dependent leave-one-out 1-NN rule (Eq. 16: the metric of each training point's cluster).
    Asserted, paired over the seeds: the global metric's LOO error not significantly below Euclidean's
    (the text's "cannot improve"); two metrics below one, three below two (the paper's 100 > 21 > 0);
    the drop from one to two metrics at least half the paper's (its caption: "drops drastically"); three
    metrics' LOO error at most one point a seed (the paper's "vanished altogether"). 12 seeds by default;
    about 20 s. The last two fail here for the reason below and are known mismatches
    (:data:`FIGURE_MISMATCHES`).

    Why two of these do not reproduce here (an argument, checked only by the measurements): k-means cuts
    two concentric circles into angular sectors. Where a point's radial neighbour (other class) is nearer
    than its tangential one (same class), by a radial gap ``delta`` below the spacing ``h``, a metric with
    eigenvalues ``a >= b`` makes the tangential neighbour nearer only if ``h^2 (a sin^2 p + b cos^2 p) <
    delta^2 (a cos^2 p + b sin^2 p)``, ``p`` the angle between the radial direction and the major axis, which
    fails for every ``p >= 45`` degrees. A half circle holds radial directions over all 180 degrees, so two
    metrics leave about half of the points wrong at best (no better than one global metric could do); three
    120-degree sectors leave about a quarter at best (idealised: exactly aligned points, ``delta < h``
    everywhere). The paper's circles must differ (their sampling is not stated).

``nca-fig2``: Goldberger et al., NIPS 2004, Fig. 2 and Sec. 4 (2-D projections by PCA, LDA and NCA)
    The text: a synthetic 3-D set of 5 classes, concentric circles in two dimensions and Gaussian noise in
    the third ("If the noise variance is large enough, the projection found by PCA is forced to include
    the noise"; "(A full rank Euclidean metric would also be misled by this dimension.)"); UCI wine (178
    points, 3 classes, D = 13); faces (18 people, 1,800 images, D = 560); the USPS digits one to five,
    downsampled to 8 x 8 (64 dimensions; the caption says D = 256). "when a two-dimensional projection is
    used, the classes are consistently much better separated by the NCA transformation than by either
    PCA ... or LDA". The figure shows the projected points; the text gives no numbers for it. Separation
    is measured here as the leave-one-out 1-NN error of the projected training points (the projection the
    figure would show, fitted on those points; K = 1 as in the paper's Sec. 4 quantification); the 1-NN
    test error of the projected test points is reported beside it (Fig. 1's measure, which the nca-fig1
    check asserts on its own wine and USPS protocol; here it is asserted only for the rings against the
    full-rank Euclidean metric, the text's parenthesis). Asserted, paired over the splits: rank-2 NCA's LOO error below rank-2 PCA's and
    rank-2 LDA's on every set run; on the rings also rank-2 NCA's test error below the 3-D Euclidean one.

    Choices (ours): rings: 100 points a class, radii 1 to 5, angles uniform, radial noise s.d. 0.1, third
    coordinate N(0, 3^2) (variance 9 against 5.5 for either ring coordinate, so PCA's plane includes the
    noise); wine: features z-scored on each training part (not stated in the paper); USPS: digits 1-5, 2 x 2
    block means of the 16 x 16 images (8 x 8, the text; not the caption's D = 256), pixels / 255, 100 images
    a digit drawn per split. 70/30 stratified splits of each (the paper's Fig. 1 protocol); NCA from its PCA
    start, best of 5 starts (the paper: "some care must be taken to avoid local maxima"); the rings are divided
    by the training part's overall s.d. (one scalar, which changes no PCA or LDA projection and no 1-NN error,
    only the scale NCA's softmax starts from: from the raw scale the PCA start stalled at about 50 % on most
    seeds in a trial run). The faces are not in ``../shared/data`` (not run). 40 / 40 / 10 splits (rings /
    wine / USPS; 40 is the paper's number of realizations in Fig. 1) by default; under a minute.

``METRICOPT_PAPER_IDENTITY=1`` (the check of the checks): every learned metric is replaced by the identity
(zebra: all of LDA, RCA, MMC, NCA, LMNN, and PCA; circles: every local and global metric); a rank-2 NCA map
is replaced by its starting point, the rank-2 PCA map (a rank-2 "identity": NCA without a step). Every
check then fails its gain assertions.
"""

import time

import numpy as np
import pytest
from sklearn.preprocessing import FunctionTransformer

import _common as C
import metricopt as mo
import paper_numbers as PN
from metricopt import datasets

pytestmark = pytest.mark.slow



def _pct(x):
    return f"{x:.2f}"


def _identity():
    return FunctionTransformer()


def _dominant_axis_degrees(est):
    """Angle in degrees (0-90) between the horizontal and the top eigenvector of ``M = L^T L`` of a fitted
    2-D map (``None`` for the identity, whose metric has no dominant axis)."""
    L = getattr(est, "components_", None)
    if L is None:
        return None
    M = np.asarray(L).T @ np.asarray(L)
    w, V = np.linalg.eigh(M)
    if w[-1] <= 0 or (len(w) > 1 and np.isclose(w[-1], w[-2], rtol=1e-9)):
        return None
    v = V[:, -1]
    return float(np.degrees(np.arctan2(abs(v[1]), abs(v[0]))))


def _add_column(table, name, values):
    """Append a column to a :func:`_common.method_table` (``values``: method name -> cell text)."""
    table["columns"].insert(len(table["columns"]) - 2, name)
    for r in table["rows"]:
        r.insert(len(r) - 2, values.get(r[0], "-"))
    return table


# ============================================================================ JMLR 2009, Fig. 2 (zebra stripes)

ZEBRA_N = int(C.value("jmlr2009", "Fig. 2", "zebra stripes", "data points n"))
ZEBRA_K = int(C.value("jmlr2009", "Fig. 2", "zebra stripes", "k of the kNN rule"))
ZEBRA_STRIPES = 10  # stripes per mode (width 0.1), ours
ZEBRA_OFFSET = 4.0  # horizontal displacement of the second mode (the mode is [0, 1) x [0, 1)), ours
ZEBRA_TRAIN = ZEBRA_N // 2


def zebra(n=ZEBRA_N, seed=0, stripes=ZEBRA_STRIPES, offset=ZEBRA_OFFSET):
    """The zebra-stripes toy of JMLR 2009 Sec. 3.3 with our choices (module docstring): ``(X, y)``."""
    rng = np.random.default_rng(seed)
    mode = rng.integers(0, 2, n)
    x, v = rng.uniform(0.0, 1.0, n), rng.uniform(0.0, 1.0, n)
    y = np.floor(x * stripes).astype(np.int64) % 2
    return np.column_stack([x + offset * mode, v]), y


def _zebra_methods():
    k, mu = C.K, C.MU
    rows = {
        "Euclidean": lambda X, y: _identity().fit(X, y),
        "PCA (dominant axis, 1-D)": lambda X, y: mo.PCA(n_components=1).fit(X, y),
        "LDA": lambda X, y: mo.LDA().fit(X, y),
        "RCA": lambda X, y: mo.RCA().fit(X, y),
        "MMC (the paper's MCC)": lambda X, y: mo.MMC(backend="jax").fit(X, y),
        "NCA": lambda X, y: mo.NCA().fit(X, y),
        "LMNN": lambda X, y: mo.LMNN(k=k, mu=mu, backend="jax").fit(X, y),
    }
    if C.IDENTITY:
        rows = {m: rows["Euclidean"] for m in rows}
    return rows


#: the text's direction of each method against Euclidean (caption of Fig. 2, Sec. 3.3); PCA is not named
ZEBRA_PAPER = {"Euclidean": "-", "PCA (dominant axis, 1-D)": "not named in the text",
               "LDA": "above Euclidean (caption; Sec. 3.3)", "RCA": "above Euclidean (caption; Sec. 3.3)",
               "MMC (the paper's MCC)": "above Euclidean (caption; Sec. 3.3: MCC)",
               "NCA": "below Euclidean (caption; Sec. 3.3)", "LMNN": "below Euclidean (caption; Sec. 3.3)"}


def test_jmlr_fig2_zebra():
    """JMLR 2009 Fig. 2: only NCA and LMNN reduce the 1-NN error of the zebra stripes; LDA, RCA, MCC increase
    it. About 1 minute (5 seeds) on 2 shared cores."""
    t0 = time.perf_counter()
    n = C.n_splits("jmlr-fig2-zebra", 5)
    methods = _zebra_methods()
    per, angles = [], {m: [] for m in methods}
    for s in range(n):
        X, y = zebra(seed=s)
        perm = np.random.default_rng(10_000 + s).permutation(len(y))
        tr, te = perm[:ZEBRA_TRAIN], perm[ZEBRA_TRAIN:]
        out = {}
        for m, fit in methods.items():
            est_t0 = time.perf_counter()
            est = fit(X[tr], y[tr])
            seconds = time.perf_counter() - est_t0
            Ztr, Zte = est.transform(X[tr]), est.transform(X[te])
            out[m] = {"test": float(mo.knn_error(Ztr, y[tr], Zte, y[te], k=ZEBRA_K, ties=C.TIES)),
                      "train_loo": float(mo.loo_knn_error(Ztr, y[tr], k=ZEBRA_K, ties=C.TIES)),
                      "seconds": float(seconds), "status": C.fitted_status(est)}
            a = _dominant_axis_degrees(est)
            if a is not None:
                angles[m].append(a)
        per.append(out)
        print(f"  [zebra] seed {s + 1}: test % " + "  ".join(f"{m} {100 * v['test']:.1f}" for m, v in out.items()),
              flush=True)
    names = list(methods)
    summary = C.method_summary(per, names)
    protocol = (f"{n} seeds; each draws n = {ZEBRA_N} points ({ZEBRA_STRIPES} stripes a mode, modes {ZEBRA_OFFSET:g} "
                f"apart) and splits them {ZEBRA_TRAIN}/{ZEBRA_N - ZEBRA_TRAIN} at random; {ZEBRA_K}-NN")
    table = C.method_table("zebra stripes (JMLR 2009 Fig. 2)", "zebra", protocol, summary, names,
                           paper=ZEBRA_PAPER, loo=True)
    _add_column(table, "dominant axis, degrees from horizontal (mean)",
                {m: f"{np.mean(v):.1f}" for m, v in angles.items() if v})
    checks = []
    for m in ("LMNN", "NCA"):
        checks.append(C.assert_paired_gain(per, m, "Euclidean",
                                           f"zebra: {m} test error below Euclidean's (Fig. 2: reduces the 1-NN error)"))
    for m in ("LDA", "RCA", "MMC (the paper's MCC)"):
        checks.append(C.assert_paired_gain(per, "Euclidean", m,
                                           f"zebra: {m} test error above Euclidean's (Fig. 2: increases the 1-NN "
                                           "error)"))
    notes = [
        f"Data (JMLR 2009 Sec. 3.3 and Fig. 2): n = {ZEBRA_N}, bimodal, two classes in alternating vertical stripes, "
        "the two sets of stripes displaced horizontally. Ours: modes [0, 1) x [0, 1) and [4, 5) x [0, 1), "
        f"{ZEBRA_STRIPES} stripes of width 0.1 a mode, class floor(10 x) mod 2; the paper's stripe count, widths "
        "and offset are not stated.",
        "The paper's figure shows the dominant axis of each method and its caption the direction of the 1-NN error; "
        "it gives no error rates, so the paper column holds the text's direction only.",
        "PCA is not named in the text (Sec. 3.3 names LDA, RCA and MCC): its row is reported, not asserted. Its "
        "dominant axis is horizontal here (the offset), which is the direction that predicts the class.",
        f"Errors: {ZEBRA_K}-NN on the test half (tie-inclusive rule); training leave-one-out beside them. LMNN and "
        "MMC on the JAX backend (1,000 training points), NCA from its PCA start.",
    ]
    C.finish("jmlr-fig2-zebra", "JMLR 2009 Fig. 2: zebra stripes (PCA, LDA, RCA, MMC, NCA, LMNN)", [], checks,
             notes, t0, tables=[table], identity_of="PCA, LDA, RCA, MMC, NCA and LMNN")


# ============================================================================ JMLR 2009, Fig. 7 (two circles)

CIRCLES_K = int(C.value("jmlr2009", "Sec. 5.2", "concentric circles (Fig. 7)", "k of the leave-one-out kNN rule"))
CIRCLES_PAPER = {
    "Euclidean": "-",
    "1 metric (global)": PN.printed("jmlr2009", "Sec. 5.2", "concentric circles (Fig. 7)", "LOO error % with one metric"),
    "2 metrics (k-means)": PN.printed("jmlr2009", "Sec. 5.2", "concentric circles (Fig. 7)",
                                     "LOO error % with two metrics"),
    "3 metrics (k-means)": "'vanished altogether' (Sec. 5.2; caption: 'to zero')",
}
CIRCLES_N = 40  # points per circle, ours
CIRCLES_GAP = 0.8  # radial gap in units of the angular spacing, ours
CIRCLES_JITTER = 0.1  # angular jitter in units of the spacing, ours


_P1 = C.value("jmlr2009", "Sec. 5.2", "concentric circles (Fig. 7)", "LOO error % with one metric")
_P2 = C.value("jmlr2009", "Sec. 5.2", "concentric circles (Fig. 7)", "LOO error % with two metrics")
CIRCLES_DRASTIC = (f"circles: two local metrics' LOO error drops drastically below the global metric's (Fig. 7 caption; "
                   f"Sec. 5.2: {_P1:g} % -> {_P2:g} %)")
CIRCLES_VANISH = "circles: three local metrics' LOO error vanishes (Sec. 5.2: 'vanished altogether')"

#: Assertions of these checks that fail for a written-down reason (the mechanism of ``_common.KNOWN_MISMATCHES``,
#: which :func:`_common.finish` reads; registered there when this module is imported, so that they are strict too:
#: one that passes again fails its check). Measured by the run of 12 seeds (commit of the result file).
FIGURE_MISMATCHES = {
    CIRCLES_DRASTIC: (
        "not reproduced: two k-means metrics lower the LOO error from 99.69 % (s.e. 0.22) to 98.65 % (s.e. 0.36), a "
        f"drop of 1.04 pp (s.e. 0.34, 12 seeds; significant, and the direction assertion passes) against the "
        f"paper's {_P1 - _P2:g} pp. On two uniformly sampled concentric circles k-means cuts halves, and a 2 x 2 "
        "metric can put a point's same-class (tangential) neighbour before its nearer other-class (radial) one "
        "only where the radial direction is within 45 degrees of the metric's major axis (docstring): a half "
        "circle holds every direction, so two metrics can correct at most about half the points. The paper's circles "
        "(points, radii, sampling) are not given; they must differ from ours."
    ),
    CIRCLES_VANISH: (
        "not reproduced: three k-means metrics leave 54.48 % (s.e. 1.47, 12 seeds) of the points wrong (down from "
        "98.65 % with two; all 12 solves certified optimal). By the same 45-degree bound three 120-degree sectors "
        "leave about a quarter wrong at least; the error keeps falling with narrower sectors (trial run, 6 seeds: 4 "
        "metrics 31.67 %, 6 metrics 12.50 %), so the limit is the sectors' width on our circles, whose sampling the "
        "paper does not give."
    ),
}
C.KNOWN_MISMATCHES.update(FIGURE_MISMATCHES)


def circles(seed=0, n=CIRCLES_N, gap=CIRCLES_GAP, jitter=CIRCLES_JITTER):
    """Two concentric circles (JMLR 2009 Fig. 7) with our choices (module docstring): ``(X, y)``."""
    rng = np.random.default_rng(seed)
    h = 2 * np.pi / n
    a0 = (np.arange(n) + rng.uniform(-jitter, jitter, n)) * h
    a1 = (np.arange(n) + rng.uniform(-jitter, jitter, n)) * h
    r1 = 1.0 + gap * h
    X = np.vstack([np.column_stack([np.cos(a0), np.sin(a0)]), r1 * np.column_stack([np.cos(a1), np.sin(a1)])])
    t = rng.uniform(0, 2 * np.pi)
    R = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
    return X @ R.T, np.repeat(np.array([0, 1], dtype=np.int64), n)


def _multi_metric_loo(X, y, c, seed):
    """Leave-one-out 1-NN error, status and certified gap of multi-metric LMNN with ``c`` k-means clusters."""
    if C.IDENTITY:
        return float(mo.loo_knn_error(X, y, k=CIRCLES_K, ties=C.TIES)), "identity", float("inf")
    est = mo.MultiMetricLMNN(clusters="kmeans", n_clusters=c, k=C.K, mu=C.MU, random_state=seed).fit(X, y)
    pred = est.problem_.knn_loo_predict(est.solution_.M, k=CIRCLES_K, ties=C.TIES)
    cert = est.solution_.certificate
    return float(np.mean(pred != y)), str(est.solution_.status), float(cert.rel_gap) if cert is not None else float("inf")


def test_jmlr_fig7_circles():
    """JMLR 2009 Fig. 7 / Sec. 5.2: LOO 1-NN error of one, two and three LMNN metrics on two concentric
    circles (k-means clusters). About 20 s (12 seeds) on 2 shared cores."""
    t0 = time.perf_counter()
    n = C.n_splits("jmlr-fig7-circles", 12)
    names = list(CIRCLES_PAPER)
    per, gaps = [], []
    for s in range(n):
        X, y = circles(seed=s)
        out = {"Euclidean": {"train_loo": float(mo.loo_knn_error(X, y, k=CIRCLES_K, ties=C.TIES)), "test": float("nan"),
                             "seconds": 0.0, "status": "-"}}
        for c, m in zip((1, 2, 3), names[1:]):
            t1 = time.perf_counter()
            err, status, gap = _multi_metric_loo(X, y, c, s)
            out[m] = {"train_loo": err, "test": float("nan"), "seconds": time.perf_counter() - t1, "status": status}
            gaps.append(gap)
        per.append(out)
        print(f"  [circles] seed {s + 1}: LOO % " + "  ".join(f"{m} {100 * v['train_loo']:.1f}" for m, v in out.items()),
              flush=True)
    summary = C.method_summary(per, names)
    protocol = (f"{n} seeds of {CIRCLES_N} + {CIRCLES_N} points; leave-one-out {CIRCLES_K}-NN error on the whole set "
                "(the paper's LOO training error); k-means clusters")
    table = C.method_table("two concentric circles (JMLR 2009 Fig. 7, Sec. 5.2)", "circles", protocol, summary, names,
                           paper=CIRCLES_PAPER, loo=True)
    drop_col = table["columns"].index("test error % (ours)")  # no test set: the paper's error is leave-one-out
    del table["columns"][drop_col]
    for r in table["rows"]:
        del r[drop_col]
    table["columns"][table["columns"].index("train LOO error % (ours)")] = "LOO error % (ours, whole set)"
    max_gap = max(gaps) if gaps else float("nan")
    one_point = 100.0 / (2 * CIRCLES_N)
    d3 = summary["3 metrics (k-means)"]["train_loo"]
    p1, p2 = _P1, _P2
    drop = C.paired(per, "1 metric (global)", "2 metrics (k-means)", what="train_loo")
    checks = [
        C.assert_paired_not_below(per, "1 metric (global)", "Euclidean",
                                  "circles: the global LMNN metric's LOO error not significantly below Euclidean's "
                                  "(Sec. 5.2: global linear transformations cannot improve kNN here)", what="train_loo"),
        C.assert_paired_gain(per, "2 metrics (k-means)", "1 metric (global)",
                             "circles: two local metrics' LOO error below the global metric's (Sec. 5.2)",
                             what="train_loo"),
        C.Assertion(CIRCLES_DRASTIC,
                    f"mean(1 metric - 2 metrics) >= half the paper's drop ({(p1 - p2) / 2:.1f} pp)",
                    f"{drop['mean']:+.2f} pp (s.e. {drop['se']:.2f}, {drop['n']} seeds)",
                    drop["mean"] >= (p1 - p2) / 2),
        C.assert_paired_gain(per, "3 metrics (k-means)", "2 metrics (k-means)",
                             "circles: three local metrics' LOO error below two metrics' (Sec. 5.2)",
                             what="train_loo"),
        C.Assertion(CIRCLES_VANISH,
                    f"mean <= {one_point:.2f} % (one point of {2 * CIRCLES_N} a seed) or <= 2 s.e.",
                    f"{d3['mean']:.2f} % (s.e. {d3['se']:.2f}, {n} seeds)",
                    d3["mean"] <= max(one_point, 2 * d3["se"]) + 1e-9),
    ]
    notes = [
        "Paper (JMLR 2009 Sec. 5.2): LOO training error with k = "
        f"{CIRCLES_K}: one metric {CIRCLES_PAPER['1 metric (global)']} %, two metrics "
        f"{CIRCLES_PAPER['2 metrics (k-means)']} %, three metrics 'vanished altogether' (no number printed; the "
        "caption says 'to zero'). Its circles (points, radii, sampling) are not given.",
        f"Ours: {CIRCLES_N} points a circle at the same nominal angles, radial gap {CIRCLES_GAP:g} of the angular "
        f"spacing, angular jitter up to {CIRCLES_JITTER:g} of the spacing, random rotation: Euclidean 1-NN LOO error "
        "100 % by construction (the paper's one-metric number, for a metric that cannot improve on Euclid).",
        f"Multi-metric LMNN (k = {C.K} target neighbours, mu = {C.MU:g}; n_clusters = 1 is single-metric LMNN) solved "
        f"exactly (CVXPY/Clarabel); largest certified relative gap {max_gap:.1e}. LOO rule: Eq. 16 (each training "
        "point under its cluster's metric), tie-inclusive.",
        "Why two and three k-means metrics cannot reach the paper's numbers on such circles: see the check's "
        "docstring (a metric helps a point only where its radial direction is within 45 degrees of the metric's "
        "major axis; a half circle spans all directions, a third of a circle 120 degrees).",
    ]
    C.finish("jmlr-fig7-circles", "JMLR 2009 Fig. 7: two concentric circles, one, two and three LMNN metrics", [],
             checks, notes, t0, tables=[table], identity_of="LMNN (every local and global metric)")


# ============================================================================ NCA 2004, Fig. 2 (2-D projections)

NCA_K = int(C.value("nca2004", "Sec. 4", "rank-2 projections", "K of the KNN rule"))
NCA_D = int(C.value("nca2004", "Fig. 2", "all panels", "projection dimension d"))
NCA_TRAIN = C.value("nca2004", "Fig. 1", "all panels", "training %") / 100.0
#: the realizations (random splits) of the paper's Fig. 1, where its Sec. 4 quantifies the 2-D projections
NCA_PAPER_SPLITS = int(C.value("nca2004", "Fig. 1", "all panels", "realizations (random splits)"))
RINGS_CLASSES = int(C.value("nca2004", "Sec. 4", "concentric rings (Fig. 2)", "classes"))
RINGS_D = int(C.value("nca2004", "Fig. 2", "concentric rings", "input dimension D"))
RINGS_PER_CLASS = 100  # ours
RINGS_RADIAL_SD = 0.1  # ours
RINGS_NOISE_SD = 3.0  # ours: variance 9 against 5.5 for either ring coordinate
USPS_DIM = int(C.value("nca2004", "Sec. 4", "USPS digits (Fig. 2)", "input dimension after downsampling"))
USPS_DIGITS = (1, 2, 3, 4, 5)  # the text: the first five digit classes (one through five)
USPS_PER_DIGIT = 100  # ours
#: the paper's face set (Sec. 4; not in the data folder)
FACES = {"classes": C.value("nca2004", "Sec. 4", "faces (Fig. 2)", "classes"),
         "images": C.value("nca2004", "Sec. 4", "faces (Fig. 2)", "images"),
         "D": C.value("nca2004", "Fig. 2", "faces", "input dimension D")}
#: NCA starts: the PCA start and random ones, the best objective kept (the paper, Sec. 3: "since the cost function
#: above is not convex, some care must be taken to avoid local maxima during training"; its way is not stated)
NCA_RESTARTS = 5


def rings(seed=0, per_class=RINGS_PER_CLASS):
    """NCA Fig. 2's synthetic set: ``RINGS_CLASSES`` concentric circles in two dimensions, Gaussian noise
    (uncorrelated with the class) in the third, with our radii and noise (module docstring)."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(RINGS_CLASSES, dtype=np.int64), per_class)
    r = (y + 1.0) + RINGS_RADIAL_SD * rng.standard_normal(y.size)
    a = rng.uniform(0, 2 * np.pi, y.size)
    X = np.column_stack([r * np.cos(a), r * np.sin(a), RINGS_NOISE_SD * rng.standard_normal(y.size)])
    assert X.shape[1] == RINGS_D
    return X, y


def usps_8x8(X):
    """2 x 2 block means of 16 x 16 images (row-major): 64 features, as the NCA paper's text describes."""
    img = X.reshape(-1, 16, 16)
    out = img.reshape(-1, 8, 2, 8, 2).mean(axis=(2, 4)).reshape(len(X), -1)
    assert out.shape[1] == USPS_DIM
    return out


def _nca2(X, y):
    """Rank-2 NCA from its PCA start; under the identity run, the start itself (the rank-2 PCA map)."""
    if C.IDENTITY:
        return mo.PCA(n_components=NCA_D).fit(X, y)
    return mo.NCA(n_components=NCA_D, n_restarts=NCA_RESTARTS).fit(X, y)


NCA_METHODS = {
    "Euclidean (full rank)": lambda X, y: _identity().fit(X, y),
    "PCA 2-D": lambda X, y: mo.PCA(n_components=NCA_D).fit(X, y),
    "LDA 2-D": lambda X, y: mo.LDA(n_components=NCA_D).fit(X, y),
    "NCA 2-D": _nca2,
}


def _nca_set(name, X, y, splits, scale):
    per = []
    for s, (tr, te) in enumerate(splits):
        Xtr, Xte = datasets.preprocess(X[tr], X[te], scale=scale)
        per.append(C.run_methods(NCA_METHODS, Xtr, y[tr], Xte, y[te], NCA_K, loo=True, ties=C.TIES))
        print(f"  [nca-fig2/{name}] split {s + 1}: LOO / test % " + "  ".join(
            f"{m} {100 * v['train_loo']:.1f}/{100 * v['test']:.1f}" for m, v in per[-1].items()), flush=True)
    return per


def _usps_splits(y, n, seed=0):
    """Per split: ``USPS_PER_DIGIT`` random images of each of the digits 1-5, then a stratified 70/30 split."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        sub = np.concatenate([rng.permutation(np.flatnonzero(y == d))[:USPS_PER_DIGIT] for d in USPS_DIGITS])
        inner = next(datasets.random_splits(y[sub], n_splits=1, test_size=round(1 - NCA_TRAIN, 6),
                                            seed=int(rng.integers(2**31))))
        out.append((sub[inner[0]], sub[inner[1]]))
    return out


def test_nca_fig2():
    """NCA 2004 Fig. 2: rank-2 NCA separates the classes better than rank-2 PCA and LDA (rings, wine, USPS
    digits 1-5; the faces are not in the data folder). About 1 minute on 2 shared cores."""
    t0 = time.perf_counter()
    names = list(NCA_METHODS)
    checks, tables = [], []
    test_size = round(1 - NCA_TRAIN, 6)

    def run(label, X, y, n, splits, scale, protocol):
        per = _nca_set(label, X, y, splits, scale)
        summary = C.method_summary(per, names)
        tables.append(C.method_table(f"{label} (NCA 2004 Fig. 2)", label, protocol, summary, names,
                                     paper={m: "no number (figure)" for m in names}, loo=True))
        for other in ("PCA 2-D", "LDA 2-D"):
            checks.append(C.assert_paired_gain(
                per, "NCA 2-D", other, f"{label}: rank-2 NCA separates the classes better than {other[:3]} "
                "(training LOO 1-NN error in the projection lower)", what="train_loo"))
        return per

    # the concentric rings (synthetic; a new sample every split)
    n = C.n_splits("nca-fig2-rings", NCA_PAPER_SPLITS)
    per = []
    for s in range(n):
        X, y = rings(seed=s)
        tr, te = next(datasets.random_splits(y, n_splits=1, test_size=test_size, seed=s))
        scale = X[tr].std()  # one scalar: PCA's and LDA's projections and every 1-NN error are unchanged by it
        Xtr, Xte = X[tr] / scale, X[te] / scale
        per.append(C.run_methods(NCA_METHODS, Xtr, y[tr], Xte, y[te], NCA_K, loo=True, ties=C.TIES))
        print(f"  [nca-fig2/rings] seed {s + 1}: LOO / test % " + "  ".join(
            f"{m} {100 * v['train_loo']:.1f}/{100 * v['test']:.1f}" for m, v in per[-1].items()), flush=True)
    summary = C.method_summary(per, names)
    tables.append(C.method_table("concentric rings (NCA 2004 Fig. 2)", "rings",
                                 f"{n} seeds of {RINGS_CLASSES} x {RINGS_PER_CLASS} points in {RINGS_D}-D, one 70/30 "
                                 f"split each, {NCA_K}-NN", summary, names,
                                 paper={m: "no number (figure)" for m in names}, loo=True))
    for other in ("PCA 2-D", "LDA 2-D"):
        checks.append(C.assert_paired_gain(
            per, "NCA 2-D", other, f"rings: rank-2 NCA separates the classes better than {other[:3]} (training LOO "
            "1-NN error in the projection lower)", what="train_loo"))
    checks.append(C.assert_paired_gain(per, "NCA 2-D", "Euclidean (full rank)",
                                       "rings: rank-2 NCA test error below the full-rank Euclidean metric's (Sec. 4: "
                                       "'A full rank Euclidean metric would also be misled')"))

    # wine (scikit-learn's copy of UCI wine)
    X, y = datasets.load("wine")
    n = C.n_splits("nca-fig2-wine", NCA_PAPER_SPLITS)
    run("wine", X, y, n, list(datasets.random_splits(y, n_splits=n, test_size=test_size, seed=0)), "standard",
        f"{n} random stratified 70/30 splits of the {len(y)} wines, z-scored, {NCA_K}-NN")

    # USPS digits one to five at 8 x 8
    X, y = datasets.load("usps")
    X = usps_8x8(X / 255.0)
    n = C.n_splits("nca-fig2-usps", 10)
    run("USPS 1-5", X, y, n, _usps_splits(y, n), None,
        f"{n} splits; each draws {USPS_PER_DIGIT} images of each digit 1-5 (2 x 2 block means: 8 x 8 = {USPS_DIM} "
        f"features, pixels / 255) and splits them 70/30; {NCA_K}-NN")

    notes = [
        "The paper's Fig. 2 shows the projected points (PCA, LDA, NCA; rings, wine, faces, digits) and gives no "
        "numbers; its text: the classes are 'consistently much better separated by the NCA transformation than by "
        "either PCA ... or LDA'. Separation is measured here as the training leave-one-out 1-NN error in the "
        "projection fitted on those training points; test errors are reported beside (not asserted, except "
        "rank-2 NCA against the full-rank Euclidean metric on the rings).",
        f"Faces (the paper: {FACES['classes']:.0f} people, {FACES['images']:,.0f} images of "
        f"{FACES['D']:.0f} pixels) are not in ../shared/data: not run (the data folder's ORL, Olivetti and Yale B "
        "faces are other sets).",
        f"USPS: the text says 8 x 8 ({USPS_DIM} dimensions), the caption "
        f"D = {C.value('nca2004', 'Fig. 2', 'digits', 'input dimension D'):.0f} (16 x 16); ours follows the text.",
        f"Rings (ours): {RINGS_PER_CLASS} points a class, radii 1-{RINGS_CLASSES}, radial s.d. {RINGS_RADIAL_SD:g}, "
        f"noise s.d. {RINGS_NOISE_SD:g} in the third coordinate. Wine z-scored (not stated in the paper). NCA from "
        "its PCA start (the paper's start is not stated).",
    ]
    notes.append("Test errors of the projections (Fig. 1's measure; not asserted here): " + "; ".join(
        f"{t['dataset']}: NCA 2-D {t['summary']['NCA 2-D']['test']['mean']:.2f} %, LDA 2-D "
        f"{t['summary']['LDA 2-D']['test']['mean']:.2f} %, PCA 2-D {t['summary']['PCA 2-D']['test']['mean']:.2f} %"
        for t in tables) + ". Rank-2 NCA's training LOO error is far below its test error on wine and USPS (its "
        "objective is the training LOO rule's).")
    if C.IDENTITY:
        notes.append("Identity run: the rank-2 NCA map is replaced by its starting point, the rank-2 PCA map.")
    C.finish("nca-fig2", "NCA (Goldberger et al., NIPS 2004) Fig. 2: 2-D projections by PCA, LDA and NCA", [],
             checks, notes, t0, tables=tables, identity_of="NCA (rank 2: by its PCA start)")
