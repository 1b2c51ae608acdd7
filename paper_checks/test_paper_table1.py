r"""Paper check: the baseline rows of Weinberger & Saul, JMLR 10:207-244, 2009, Table 1.

The table compares the 3-NN test error of LMNN with that of other ways to choose the
metric: PCA, LDA, RCA, MCC, NCA, "LMNN on LDA inputs", and a multiclass SVM as the non-kNN
reference, on iris, wine, bal, oFaces, letters and yFaces (among others). This check
computes those rows on the same splits, with metricopt's estimators:

* Euclidean: the raw (preprocessed) inputs;
* PCA: :class:`metricopt.PCA` keeping 95 % of the training variance;
* LDA: :class:`metricopt.LDA`, the JMLR 2009 definition (``C_b = (1/C) sum_c mu_c mu_c^T``,
  projection onto the leading eigenvectors of ``C_w^{-1} C_b``, ``C - 1`` dimensions);
* RCA: :class:`metricopt.RCA` (within-class whitening, chunklets = classes, PCA denoising
  to 99.9 % of the variance first);
* MCC: maximally collapsing classes (Globerson & Roweis, NIPS 2006), the convex program
  ``min_{M >= 0} sum_i KL(p0(.|i) || p_M(.|i))`` of :class:`metricopt.MLCC` (exact
  exponential-cone program on the UCI sets, projected gradient on the JAX backend for the
  larger ones). The JMLR paper's "MCC" is this method (its reference is Globerson & Roweis);
  issue 12 reads it as MMC (Xing et al.), so MMC is reported as an extra row;
* NCA: :class:`metricopt.NCA` (square ``A``, PCA start, L-BFGS; non-convex, ``stationary``);
* LMNN on LDA inputs: LDA followed by :class:`metricopt.LMNN` (``k = 3``, ``mu = 0.5``);
* SVM: scikit-learn's ``SVC`` with an RBF kernel on z-scored inputs, ``C`` and ``gamma``
  chosen by 3-fold cross-validation on the training part. ``SVC`` is one-vs-one, not the
  Crammer-Singer multiclass SVM.

The paper's numbers for these rows are not at hand in this workspace (neither
``../shared`` nor the repository holds the seed's Table 1; only the Euclidean and LMNN
columns were quoted in issue 5): every such cell says "not at hand" and nothing is compared
with them. What is asserted (fixed before the runs) are the effects these methods exist
for, each as a paired test over the splits that fails when the learned map is replaced by
the identity:

* wine (unscaled, features from 0.1 to 1,680): LDA, RCA, MCC, NCA and LMNN on LDA inputs
  each have a 3-NN test error significantly below Euclidean's (paired difference < -2 s.e.);
* balance: NCA significantly below Euclidean;
* every data set: LMNN on LDA inputs not significantly above LDA alone (LMNN starts where LDA
  ends and is trained for the 3-NN rule).
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
    """The Table 1 rows. ``exact``: MCC/MMC/LMNN on the exact backend (else JAX)."""
    be = "cvxpy" if exact else "jax"
    lmnn = (lambda: mo.LMNN(k=K, mu=0.5)) if exact else (lambda: mo.LMNN(k=K, mu=0.5, backend="jax", tol=1e-3,
                                                                          max_iter=5000))
    learned = {
        "MCC": lambda X, y: mo.MLCC(backend=be).fit(X, y),
        "MMC": lambda X, y: mo.MMC(backend=be).fit(X, y),
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
]

PAPER_KEY = {"iris": "iris", "wine": "wine", "bal": "balance-scale", "oFaces": "faces",
             "letters": "letter-recognition", "yFaces": "yale-b"}


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
            splits = datasets.per_class_splits(y, n_train=7, n_splits=n, seed=0)
            protocol = f"{n} split(s), 7 training images per subject"
        protocol += ", pixels / 255" if pixels else ""
        protocol += f", PCA to {pca} dims fitted on the training part" if pca else ""
        protocol += f"; learned methods fitted on a stratified {n_max}-point subset" if n_max else ""
        protocol += "; MCC/MMC/LMNN exact (cvxpy)" if exact else "; MCC/MMC/LMNN on the JAX backend"
        rows = methods(exact, n_max)
        per = []
        for s, (tr, te) in enumerate(splits):
            Xtr, Xte = datasets.preprocess(X[tr], X[te], pca=pca)
            per.append(C.run_methods(rows, Xtr, y[tr], Xte, y[te], K, ties=C.TIES))
            print(f"  [table1/{name}] split {s + 1}: " + "  ".join(
                f"{m} {100 * v['test']:.2f}% ({v['seconds']:.0f}s)" for m, v in per[-1].items()), flush=True)
        summary = C.method_summary(per, list(rows))
        paper = {"Euclidean": C.PAPER[PAPER_KEY[name]]["euclidean"]}
        tables.append(C.method_table(f"{name}", name, protocol, summary, list(rows), paper=paper))
        checks.append(C.assert_paired_not_worse(per, "LMNN on LDA inputs", "LDA",
                                                f"{name}: LMNN on LDA inputs not above LDA alone"))
        if name == "wine":
            for m in ("LDA", "RCA", "MCC", "NCA", "LMNN on LDA inputs"):
                checks.append(C.assert_paired_gain(per, m, "Euclidean", f"wine: {m} below Euclidean"))
        if name == "bal":
            checks.append(C.assert_paired_gain(per, "NCA", "Euclidean", "bal: NCA below Euclidean"))
    notes += [
        "The paper's numbers for the PCA, LDA, RCA, MCC, NCA, LMNN-on-LDA and SVM rows are not at hand in this "
        "workspace (the seed's Table 1 is not in ../shared/data or the repository); the 'paper' column gives "
        "the quoted Euclidean baselines only (as in the LMNN checks, whose protocols differ in places: see "
        "their sections).",
        "MCC is Globerson & Roweis's maximally collapsing classes (JMLR 2009 cites it for 'MCC'); MMC "
        "(Xing et al. 2002) is the extra row the issue asked for under that name.",
        "SVM: scikit-learn SVC (RBF kernel, one-vs-one multiclass, not Crammer-Singer), C and gamma by 3-fold "
        "cross-validation on the training part, z-scored inputs.",
        "letters: PCA/LDA/RCA are fitted on all 14,000 training points; MCC, MMC, NCA, LMNN on LDA inputs and "
        "SVM on a stratified 3,000-point subset (fit time), the kNN rule uses all 14,000.",
    ]
    C.finish("table1-baselines", "Baselines of JMLR 2009 Table 1 (PCA, LDA, RCA, MCC, NCA, LMNN on LDA, SVM)",
             [], checks, notes, t0, tables=tables, identity_of="PCA, LDA, RCA, MCC, NCA and LMNN")
