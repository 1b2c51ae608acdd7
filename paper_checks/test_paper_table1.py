r"""Paper check: the baseline rows of Weinberger & Saul, JMLR 10:207-244, 2009, Table 1.

The table compares the 3-NN test error of LMNN with that of other ways to choose the metric (Section 4):
PCA, LDA, RCA, MCC, NCA, "LMNN on LDA inputs", and a multiclass SVM as the non-kNN reference, on iris,
wine, bal, oFaces, letters, yFaces and mnist (among others; mnist here is the 5,000-image subset, a reduced
stand-in: its rows are shown beside the paper's, not compared). This check computes those rows on the same splits,
with metricopt's estimators, and shows the paper's number of every row beside ours (``paper_numbers.csv``):

* Euclidean: the raw (preprocessed) inputs;
* PCA: :class:`metricopt.PCA` keeping 95 % of the training variance (on iris, wine, bal and letters the
  paper's PCA row equals its Euclidean row: its PCA kept every dimension there);
* LDA: :class:`metricopt.LDA`, the JMLR 2009 definition (``C_b = (1/C) sum_c mu_c mu_c^T``,
  projection onto the leading eigenvectors of ``C_w^{-1} C_b``, ``C - 1`` dimensions);
* RCA: :class:`metricopt.RCA` (within-class whitening, chunklets = classes, PCA denoising
  to 99.9 % of the variance first);
* MMC: Xing et al.'s metric for clustering (NIPS 2002, :class:`metricopt.MMC`). This is the paper's
  "MCC" row: Section 4 cites Xing et al. (2002) for it, run with the authors' code on the small sets
  only (N/A elsewhere);
* MLCC: Globerson & Roweis's maximally collapsing classes (:class:`metricopt.MLCC`; exact
  exponential-cone program on the UCI sets, projected gradient on the JAX backend for the larger ones),
  which the paper names MLCC in Section 2 and does not run: an extra row without a paper number;
* NCA: :class:`metricopt.NCA` (square ``A``, PCA start, L-BFGS; non-convex, ``stationary``);
* LMNN on LDA inputs: LDA followed by :class:`metricopt.LMNN` (``k = 3``, ``mu = 0.5``);
* SVM: scikit-learn's ``SVC`` with an RBF kernel on z-scored inputs, ``C`` and ``gamma``
  chosen by 3-fold cross-validation on the training part. ``SVC`` is one-vs-one, not the
  Crammer-Singer multiclass SVM of the paper (which chose among linear, polynomial and RBF kernels).

The protocols differ from the paper's (full UCI sets and few splits here, other face images and
dimensions; RESULTS.md lists every difference), so our errors are not compared with the paper's
numbers. Asserted (fixed before the runs) are the paper's own directions between rows, each as a
paired test over the splits, and only where the paper's numbers show one: where Table 1 has the
first row below the second, a significant gain (or, for LMNN on LDA inputs against LDA alone, not
significantly above); where it has the first row above, that the first is not significantly below
the second; a tie, nothing:

* every data set: LMNN on LDA inputs against LDA alone (the paper has it below on iris, wine and
  letters, above on bal, yFaces and, far above (Section 4 calls LDA preprocessing drastically worse there), on oFaces;
  equal on mnist, so nothing there);
* wine (unscaled, features from 0.1 to 1,680): LDA, RCA and LMNN on LDA inputs against Euclidean (the
  paper: far below), MMC (the paper's MCC) and NCA against Euclidean (the paper: above);
* bal: NCA against Euclidean (the paper: below).

The gains fail when the learned maps are replaced by the identity (``METRICOPT_PAPER_IDENTITY=1``).
"""

import time

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.svm import SVC

import _common as C
import metricopt as mo
from metricopt import datasets

pytestmark = pytest.mark.slow

K = 3


def _svm(X, y):
    grid = {"svc__C": [0.1, 1.0, 10.0, 100.0], "svc__gamma": ["scale", 0.01, 0.1]}
    search = GridSearchCV(make_pipeline(StandardScaler(), SVC(kernel="rbf")), grid, cv=3)
    return search.fit(X, y).best_estimator_


def _subsampled(fit, n_max, seed=0):
    """Fit on a stratified random subset of at most ``n_max`` training points (the kNN rule
    still uses every training point)."""

    def run(X, y):
        if len(y) <= n_max:
            return fit(X, y)
        rng = np.random.default_rng(seed)
        keep = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:max(K + 1, int(round(n_max * np.mean(y == c))))]
                               for c in np.unique(y)])
        return fit(X[keep], y[keep])

    return run


def methods(exact, n_max=None):
    """The Table 1 rows (and MLCC). ``exact``: MMC/MLCC/LMNN on the exact backend (else JAX)."""
    be = "cvxpy" if exact else "jax"
    lmnn = (lambda: mo.LMNN(k=K, mu=0.5)) if exact else (lambda: mo.LMNN(k=K, mu=0.5, backend="jax", tol=1e-3,
                                                                          max_iter=5000))
    learned = {
        "MMC": lambda X, y: mo.MMC(backend=be).fit(X, y),
        "MLCC": lambda X, y: mo.MLCC(backend=be).fit(X, y),
        "NCA": lambda X, y: mo.NCA().fit(X, y),
        "LMNN on LDA inputs": lambda X, y: make_pipeline(mo.LDA(), lmnn()).fit(X, y),
        "SVM": _svm,
    }
    if n_max is not None:
        learned = {k: _subsampled(f, n_max) for k, f in learned.items()}
    rows = {
        "Euclidean": lambda X, y: FunctionTransformer().fit(X, y),
        "PCA": lambda X, y: mo.PCA(n_components=0.95).fit(X, y),
        "LDA": lambda X, y: mo.LDA().fit(X, y),
        "RCA": lambda X, y: mo.RCA().fit(X, y),
        **learned,
    }
    if C.IDENTITY:  # the check of the check: every learned map is the identity (the SVM is no metric: kept)
        rows = {m: (f if m in ("Euclidean", "SVM") else rows["Euclidean"]) for m, f in rows.items()}
    return rows


#: name, loader, splits kind, default splits, pixels / 255, PCA dims, exact backend, training subsample
SETS = [
    ("iris", "iris", "random", 10, False, None, True, None),
    ("wine", "wine", "random", 5, False, None, True, None),
    ("bal", "balance-scale", "random", 10, False, None, True, None),
    ("oFaces", "olivetti", "per-class", 3, True, 30, False, None),
    ("letters", "letter-recognition", "random", 1, False, None, False, 3000),
    ("yFaces", "yale-b", "random", 1, True, 50, False, None),
    ("mnist", "mnist-5k", "random", 2, True, 50, False, 1000),
]

#: each row's row of JMLR 2009 Table 1 (the set names of SETS are Table 1's columns); MLCC has none
PAPER_ROW = {"Euclidean": "kNN Euclidean", "PCA": "kNN PCA", "LDA": "kNN LDA", "RCA": "kNN RCA", "MMC": "kNN MCC",
             "NCA": "kNN NCA", "LMNN on LDA inputs": "LMNN LDA", "SVM": "multiclass SVM"}
NO_PAPER_ROW = "no row (MLCC is not in Table 1)"


def paper_numbers(column):
    """The paper's number of every row on a Table 1 column (``"N/A"`` where the paper prints that)."""
    out = {}
    for m, row in PAPER_ROW.items():
        v = C.jmlr(row, column)
        out[m] = "N/A" if v is None else v
    return out


def directions(per, column):
    """The paper's directions on one data set (see the module docstring), as paired assertions."""
    paper, out = paper_numbers(column), []

    def versus(a, b, b_label, gain_text, weak_gain=False):
        d = C.direction(paper[a], paper[b])
        if d == "below":
            out.append(C.assert_paired_not_worse(per, a, b, gain_text) if weak_gain
                       else C.assert_paired_gain(per, a, b, gain_text))
        elif d == "above":
            out.append(C.assert_paired_not_below(per, a, b, C.not_below_what(column, a, b_label, paper[a] - paper[b])))

    versus("LMNN on LDA inputs", "LDA", "LDA alone", f"{column}: LMNN on LDA inputs not above LDA alone", weak_gain=True)
    if column == "wine":
        for m in ("LDA", "RCA", "MMC", "NCA", "LMNN on LDA inputs"):
            versus(m, "Euclidean", "Euclidean", f"wine: {m} below Euclidean")
    if column == "bal":
        versus("NCA", "Euclidean", "Euclidean", "bal: NCA below Euclidean")
    return out


def test_table1_baselines():
    t0 = time.perf_counter()
    tables, checks, notes = [], [], []
    for name, loader, kind, default, pixels, pca, exact, n_max in SETS:
        X, y = datasets.load(loader)
        if pixels:
            X = X / 255.0
        n = C.n_splits(f"table1-{name}", default)
        if kind == "random":
            splits = datasets.random_splits(y, n_splits=n, test_size=0.3, seed=0)
            protocol = f"{n} random stratified 70/30 split(s)"
        else:
            per_subject = int(C.jmlr_text("Sec. 4.2", "Olivetti faces", "training images per subject"))
            splits = datasets.per_class_splits(y, n_train=per_subject, n_splits=n, seed=0)
            protocol = f"{n} split(s), {per_subject} training images per subject"
        protocol += ", pixels / 255" if pixels else ""
        protocol += f", PCA to {pca} dims fitted on the training part" if pca else ""
        protocol += f"; learned methods fitted on a stratified {n_max}-point subset" if n_max else ""
        protocol += "; MMC/MLCC/LMNN exact (cvxpy)" if exact else "; MMC/MLCC/LMNN on the JAX backend"
        rows = methods(exact, n_max)
        per = []
        for s, (tr, te) in enumerate(splits):
            Xtr, Xte = datasets.preprocess(X[tr], X[te], pca=pca)
            per.append(C.run_methods(rows, Xtr, y[tr], Xte, y[te], K, ties=C.TIES))
            print(f"  [table1/{name}] split {s + 1}: " + "  ".join(
                f"{m} {100 * v['test']:.2f}% ({v['seconds']:.0f}s)" for m, v in per[-1].items()), flush=True)
        summary = C.method_summary(per, list(rows))
        tables.append(C.method_table(f"{name}", name, protocol, summary, list(rows), paper=paper_numbers(name),
                                     missing=NO_PAPER_ROW))
        checks += directions(per, name)
    notes += [
        "Paper column: JMLR 2009 Table 1, the row of each method (MMC: the paper's 'MCC', Xing et al. 2002) on the "
        "data set's column, read from paper_checks/paper_numbers.csv; N/A where the paper prints N/A (MCC and "
        "NCA on the larger sets). The protocols differ (see RESULTS.md), so only the paper's directions between "
        "rows are asserted.",
        "MLCC (Globerson & Roweis's maximally collapsing classes) has no row in Table 1; the paper's 'MCC' is "
        "Xing et al.'s method, our MMC.",
        "SVM: scikit-learn SVC (RBF kernel, one-vs-one multiclass, not Crammer-Singer), C and gamma by 3-fold "
        "cross-validation on the training part, z-scored inputs.",
        "letters: PCA/LDA/RCA are fitted on all 14,000 training points; MMC, MLCC, NCA, LMNN on LDA inputs and "
        "SVM on a stratified 3,000-point subset (fit time), the kNN rule uses all 14,000.",
        "mnist: the 5,000-image subset (reduced: the paper's column is the full MNIST, deskewed, PCA 164; ours is "
        "shown beside it, not compared), pixels / 255, PCA 50 fitted on the training part as in the MNIST-5k check, "
        "2 random 70/30 splits; MMC, MLCC, NCA, LMNN on LDA inputs and SVM fitted on a stratified 1,000-point subset "
        "of the 3,500 training images (fit time), the kNN rule uses all 3,500. The paper prints N/A for MCC and NCA "
        "there.",
    ]
    C.finish("table1-baselines", "Baselines of JMLR 2009 Table 1 (PCA, LDA, RCA, MCC = MMC, NCA, LMNN on LDA, SVM; "
             "and MLCC)", [], checks, notes, t0, tables=tables, identity_of="PCA, LDA, RCA, MMC, MLCC, NCA and LMNN")
