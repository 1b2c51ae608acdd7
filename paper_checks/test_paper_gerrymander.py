r"""Paper check: neighbourhood gerrymandering on letters (Trivedi, McAllester & Shakhnarovich, NIPS 2014, Table 1).

The paper's protocol (Section 6) on UCI letter recognition (20,000 x 16): 5-fold cross-validation, features
z-scored on each training fold, ``C`` tuned on a 75/25 split of the training portion, kNN test error at
k = 3, 7, 11 for Euclidean kNN, LMNN, 1-NCA and their method ("ours" in its tables), each metric learned for
its k. The paper's numbers are those of its Table 1 (``paper_numbers.csv``: rows "k / method", columns
"letters" and "USPS"); its Table 3 (appendix) repeats the runs without feature scaling.

Here (differences stated in RESULTS.md): the folds are the first ``n`` of a stratified 5-fold partition
(default 2, ``METRICOPT_PAPER_SPLITS_GERRYMANDER=5`` for all five; each fold costs several minutes on 2 cores);
``C`` is tuned once per ``k`` on a 75/25 split of the first training fold over ``C_GRID``; the gerrymandering
metric is fitted by Pegasos-style SGD (``EPOCHS`` epochs, exact inference, identity start: the paper started
from a ReliefF diagonal or from zeros); LMNN by this package's JAX backend (``k`` target neighbours,
``mu = 0.5``, certified gap ``1e-3`` or the time limit; the paper tuned every method's parameters); "1-NCA" is
this package's full-rank NCA (objective f) fitted on a 3,000-point subsample of the training fold (its softmax
is ``O(n^2)`` per iteration). Every method is evaluated with the same rule: the ``k``-NN majority vote under
its metric, ties broken by the nearest point of the tied classes
(:func:`metricopt.methods.gerrymander.inference.latent_knn_predict`; the paper breaks vote ties by a heuristic, a 1-NN vote
being its example).

Assertions (fixed before the runs), at every k, the paper's directions in its Table 1 only: gerrymandering
significantly below Euclidean and below LMNN (paired over the folds, 2 s.e.) where the paper has it below;
where the paper has it above, not significantly below; where the paper prints a tie, nothing. On letters the
paper has it below both at every k. Also: at k = 3 the gerrymandering error within 1 pp of the paper's;
Euclidean within 1 pp of the paper's (protocol sanity). With ``METRICOPT_PAPER_IDENTITY=1`` (or
``METRICOPT_GERRY_CHECK_IDENTITY=1``) the gerrymandering metric is replaced by the identity (and LMNN and NCA
are not fitted, so that this run takes a minute): its gerrymandering gains must then fail.

USPS (``test_gerrymandering_usps_directions``): the paper's second set, directions only. The shared file
holds 11,000 images, not the standard partition the paper used (Table 1: N = 9298), so no paper number is
compared: the same methods on the first folds of a stratified 5-fold partition (8,800/2,200), pixels / 255
projected on each training fold's ``USPS_PCA`` leading principal components (not z-scored, which the paper's
Table 1 did); asserted, against Table 1's USPS column: gerrymandering below Euclidean at every k; below LMNN
at k = 3; not significantly below LMNN at k = 11 (the paper has LMNN lower); nothing at k = 7 (a tie).
"""

import os
import time

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.model_selection import StratifiedKFold, train_test_split

import _common as C
import metricopt as mo
from metricopt import datasets
from metricopt.estimators.base import fit_estimator
from metricopt.methods.gerrymander.inference import latent_knn_predict
from metricopt.linalg import factor, sq_dists

pytestmark = pytest.mark.slow

KS = (3, 7, 11)
#: our method names -> the paper's (Table 1 rows "k / method")
PAPER_METHOD = {"euclidean": "Euclidean", "lmnn": "LMNN", "nca": "1-NCA", "gerrymander": "ours"}


def paper_table(column, table="Table 1"):
    """The paper's kNN errors on ``column`` ("letters", "USPS"): ``{k: {method: %}}`` (Table 3 names 1-NCA "NCA")."""
    names = {**PAPER_METHOD, "nca": "NCA"} if table == "Table 3" else PAPER_METHOD
    return {k: {m: C.trivedi(k, p, column, table) for m, p in names.items()} for k in KS}


#: the paper's numbers (Table 1, features z-scored)
PAPER = paper_table("letters")
PAPER_USPS = paper_table("USPS")
#: the paper's folds (Sec. 6)
PAPER_FOLDS = int(C.value("trivedi2014", "Sec. 6", "five of the seven sets", "cross-validation folds"))
C_GRID = (1e-3, 1e-2, 1e-1)
EPOCHS = 4
NCA_SUBSAMPLE = 3000
LMNN_TIME_LIMIT = 300.0
METHODS = ("euclidean", "lmnn", "nca", "gerrymander")
USPS_PCA = 50
#: the check of the check (``METRICOPT_PAPER_IDENTITY=1`` as for every paper check, or the older
#: ``METRICOPT_GERRY_CHECK_IDENTITY=1``): the gerrymandering metric is the identity, LMNN and NCA are not fitted
IDENTITY = os.environ.get("METRICOPT_GERRY_CHECK_IDENTITY") == "1" or C.IDENTITY


def knn_test_error(M, Xtr, ytr, Xte, yte, k):
    L = factor(M)
    pred = latent_knn_predict(sq_dists(Xte @ L.T, Xtr @ L.T), ytr, k)
    return float(np.mean(pred != yte))


def fit_gerrymander(Xtr, ytr, k, C_value):
    if IDENTITY:
        return np.eye(Xtr.shape[1]), "identity (check of the check)", 0.0
    t0 = time.perf_counter()
    est = mo.GerrymanderingKNN(k=k, C=C_value, solver="sgd", max_iter=EPOCHS).fit(Xtr, ytr)
    return est.get_mahalanobis_matrix(), str(est.solution_.status), time.perf_counter() - t0


def tune_C(X, y, k):
    """C with the lowest validation error on a stratified 75/25 split of (X, y)."""
    Xa, Xv, ya, yv = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    errors = {}
    for c in C_GRID:
        M, _, _ = fit_gerrymander(Xa, ya, k, c)
        errors[c] = knn_test_error(M, Xa, ya, Xv, yv, k)
    return min(errors, key=errors.get), errors


def run_check(name, X, y, prepare, n_folds, paper, notes, compare=True):
    """Fit and score every method on the first ``n_folds`` of a stratified 5-fold partition of ``(X, y)``.

    ``prepare(X_train, X_test)`` returns the features of both parts, fitted on the training part only.
    ``paper`` maps k to the paper's errors (the directions asserted are its own); ``compare``: also compare our
    errors with the paper's (``False``: shown, directions only). Returns the per-k results, the tuned C values
    and the method tables.
    """
    folds = list(StratifiedKFold(n_splits=PAPER_FOLDS, shuffle=True, random_state=0).split(X, y))[:n_folds]
    per_k = {k: [] for k in KS}
    tuned = {}
    for f, (tr, te) in enumerate(folds):
        Xtr, Xte = prepare(X[tr], X[te])
        ytr, yte = y[tr], y[te]
        rng = np.random.default_rng(f)
        sub = rng.choice(len(tr), min(NCA_SUBSAMPLE, len(tr)), replace=False)
        ts = time.perf_counter()
        if IDENTITY:  # the check of the check tests the gerrymandering claims only: no LMNN or NCA fits
            nca_entry = (np.eye(Xtr.shape[1]), "not fitted (identity run)", 0.0)
        else:
            nca = mo.NCA(n_components=None).fit(Xtr[sub], ytr[sub])
            nca_entry = (nca.get_mahalanobis_matrix(), str(nca.solution_.status), time.perf_counter() - ts)
        for k in KS:
            if k not in tuned:
                tuned[k] = tune_C(Xtr, ytr, k)
                print(f"[gerrymander check] {name} k={k}: C validation errors {tuned[k][1]} -> C={tuned[k][0]:g}",
                      flush=True)
            ts = time.perf_counter()
            if IDENTITY:
                lmnn_entry = (np.eye(Xtr.shape[1]), "not fitted (identity run)", 0.0)
            else:
                lmnn = fit_estimator(mo.LMNN(k=k, backend="jax", tol=1e-3), Xtr, ytr, time_limit=LMNN_TIME_LIMIT)
                lmnn_entry = (lmnn.get_mahalanobis_matrix(), str(lmnn.solution_.status), time.perf_counter() - ts)
            fits = {"euclidean": (np.eye(Xtr.shape[1]), "-", 0.0),
                    "lmnn": lmnn_entry,
                    "nca": nca_entry,
                    "gerrymander": fit_gerrymander(Xtr, ytr, k, tuned[k][0])}
            entry = {m: {"test": knn_test_error(M, Xtr, ytr, Xte, yte, k), "train_loo": float("nan"),
                         "seconds": float(s), "status": st} for m, (M, st, s) in fits.items()}
            per_k[k].append(entry)
            print(f"[gerrymander check] {name} fold {f + 1} k={k}: " + ", ".join(
                f"{m} {100 * e['test']:.2f}% ({e['seconds']:.0f}s, {e['status']})" for m, e in entry.items()),
                flush=True)
    tables, checks = [], []
    for k in KS:
        summary = C.method_summary(per_k[k], METHODS)
        tables.append(C.method_table(f"{name}, k = {k}", name, f"{n_folds} of {PAPER_FOLDS} stratified folds, "
                                     f"{notes['prepared']}, C = {tuned[k][0]:g}",
                                     summary, METHODS, paper=paper[k]))
        checks += paper_directions(per_k[k], name, k, paper[k])
        if compare:
            checks.append(C.assert_band(summary_as_band(summary), "euclidean", paper[k]["euclidean"], 1.0,
                                        f"{name} k={k}: Euclidean error within 1 pp of the paper"))
            if k == 3:
                checks.append(C.assert_band(summary_as_band(summary), "gerrymander", paper[3]["gerrymander"], 1.0,
                                            f"{name} k=3: gerrymandering error within 1 pp of the paper's "
                                            f"{paper[3]['gerrymander']:.2f} %"))
    return tables, checks, tuned


def paper_directions(per, name, k, paper):
    """Gerrymandering against Euclidean and LMNN at one k, as the paper's numbers ``paper`` have it: below -> a
    significant gain; above -> not significantly below; a tie -> nothing."""
    out = []
    for other, label in (("euclidean", "Euclidean"), ("lmnn", "LMNN")):
        d = C.direction(paper["gerrymander"], paper[other])
        if d == "below":
            out.append(C.assert_paired_gain(per, "gerrymander", other, f"{name} k={k}: gerrymandering below {label}"
                                            + (" (the paper's direction)" if other == "lmnn" else "")))
        elif d == "above":
            out.append(C.assert_paired_not_below(per, "gerrymander", other, C.not_below_what(
                f"{name} k={k}", "gerrymandering", label, paper["gerrymander"] - paper[other])))
    return out


def common_notes(n_folds, tuned):
    return [
        f"Folds: {n_folds} of the paper's {PAPER_FOLDS} (time); C tuned once per k on fold 1 over {list(C_GRID)}: "
        + ", ".join(f"k={k}: C={tuned[k][0]:g}" for k in KS) + ".",
        f"Gerrymandering: Pegasos-style SGD, {EPOCHS} epochs, batch 64, lam = 1, Frobenius regulariser, exact "
        "inference, identity start (the paper: its SGD, Algorithm 1, with the exact inference of Algorithms 2 and 3, "
        "started from a ReliefF diagonal or zeros).",
        f"LMNN: k target neighbours, mu = 0.5, JAX backend, certified gap 1e-3 or {LMNN_TIME_LIMIT:g} s.",
        f"1-NCA: this package's full-rank NCA fitted on {NCA_SUBSAMPLE} training points per fold.",
    ]


def finish(check, title, tables, checks, notes, t0):
    own = IDENTITY and not C.IDENTITY  # C.finish marks the result itself under METRICOPT_PAPER_IDENTITY
    if own:
        notes.append("METRICOPT_GERRY_CHECK_IDENTITY=1: the gerrymandering metric is the identity (check of the check).")
    C.finish(check + ("-identity" if own else ""),
             title + (" [gerrymandering replaced by the identity]" if own else ""), [], checks, notes, t0,
             tables=tables, identity_of="gerrymandering")


def zscore(Xtr, Xte):
    mean, std = Xtr.mean(0), Xtr.std(0)
    return (Xtr - mean) / std, (Xte - mean) / std


def test_gerrymandering_letters_table1():
    t0 = time.perf_counter()
    X, y = datasets.load("letter-recognition")
    n_folds = C.n_splits("gerrymander", 2)
    tables, checks, tuned = run_check("letter-recognition", X, y, zscore, n_folds, PAPER,
                                      {"prepared": "z-scored per fold"})
    notes = common_notes(n_folds, tuned) + [
        "Isolet and Office-Caltech (the paper's other sets) are not in ../shared/data; USPS is its own check "
        "(test_gerrymandering_usps_directions)."]
    finish("gerrymander", "neighbourhood gerrymandering (NIPS 2014 Table 1)", tables, checks, notes, t0)


def pca_on_train(Xtr, Xte):
    """Pixels scaled to [0, 1], centred and projected on the training part's leading USPS_PCA components."""
    pca = PCA(n_components=USPS_PCA, random_state=0).fit(Xtr / 255.0)
    return pca.transform(Xtr / 255.0), pca.transform(Xte / 255.0)


def test_gerrymandering_usps_directions():
    """USPS (NIPS 2014 Table 1's second set), directions only.

    The shared file holds 11,000 images (1,100 per digit), not the standard partition the paper used, so the
    paper's numbers are not comparable and none is asserted: the folds are stratified 5-fold folds of the 11,000
    (8,800 training / 2,200 test images, close to the paper's sizes), the pixels are projected on the training
    fold's leading USPS_PCA principal components (LMNN and NCA at 256 dimensions cost more than this check's
    budget; the paper does not say it reduced USPS) and not z-scored. Asserted, paired over the folds: the
    directions of the paper's Table 1 USPS column (:func:`paper_directions`).
    """
    t0 = time.perf_counter()
    X, y = datasets.load("usps")
    n_folds = C.n_splits("gerrymander_usps", 2)
    tables, checks, tuned = run_check("usps", X, y, pca_on_train, n_folds, PAPER_USPS,
                                      {"prepared": f"pixels / 255, PCA to {USPS_PCA} on each training fold"},
                                      compare=False)
    n_paper = int(C.value("trivedi2014", "Table 1 (data rows)", "USPS", "N (images; the standard train/test partition)"))
    unscaled = paper_table("USPS", "Table 3")
    notes = common_notes(n_folds, tuned) + [
        f"USPS: the shared file has 11,000 images, not the standard partition of {n_paper} the paper used (Table 1): "
        "the paper column shows Table 1's numbers, which are not compared; the directions asserted are Table 1's "
        "(see the check's docstring).",
        f"Features: pixels / 255 projected on the training fold's {USPS_PCA} leading principal components, not "
        "z-scored (the paper's Table 1 z-scored them). The paper's Table 3 has the runs without feature scaling: "
        "gerrymandering " + ", ".join(f"{unscaled[k]['gerrymander']:.2f}" for k in KS) + " %, LMNN "
        + ", ".join(f"{unscaled[k]['lmnn']:.2f}" for k in KS) + " %, Euclidean "
        + ", ".join(f"{unscaled[k]['euclidean']:.2f}" for k in KS) + " % at k = 3, 7, 11.",
        "Isolet and Office-Caltech (the paper's other sets) are not in ../shared/data."]
    finish("gerrymander-usps", "neighbourhood gerrymandering on USPS (NIPS 2014 Table 1, directions only)",
           tables, checks, notes, t0)


def summary_as_band(summary):
    """The method summary in the shape :func:`_common.assert_band` reads (``{method: {"mean", "se"}}``)."""
    return {m: s["test"] for m, s in summary.items()}
