r"""Paper check: NCA (Goldberger, Roweis, Hinton & Salakhutdinov, NIPS 17, 2004), Fig. 1.

Neighbourhood components analysis learns a linear map ``A`` by maximising the expected
number of points the stochastic leave-one-out nearest-neighbour rule classifies correctly,

.. math::

    \max_A\ f(A) = \sum_i \sum_{j \in C_i} p_{ij}, \qquad
    p_{ij} = \frac{\exp(-\lVert A x_i - A x_j \rVert^2)}{\sum_{k \ne i} \exp(-\lVert A x_i - A x_k \rVert^2)},
    \quad p_{ii} = 0,

(paper Eqs. 1-5; :class:`metricopt.NCA`, L-BFGS on the shared JAX loop, status
``stationary``: the problem is not convex and no certificate exists).

The paper's Fig. 1 is a bar chart: kNN training (leave-one-out) and test accuracy of the Euclidean
metric, the whitening transform, RCA, diagonal NCA and NCA (square ``A``; top panels), and of rank-2
projections by PCA, LDA, LDA followed by RCA and NCA (bottom panels), averaged over random 70/30
splits of balance-scale, ionosphere, iris, wine and housing, and on USPS digits with fixed numbers of
training and test images per class (its caption; the numbers are in ``paper_numbers.csv``). The text
copy of the paper holds no bar values, so nothing is compared with numbers. Ionosphere and housing are
not in ``../shared/data`` (not run). The directions the paper states in its text (Section 4) are:
NCA's training and test performance the same as or better than that of the other square metrics, and
rank-2 NCA consistently superior to the other rank-2 projections. This check asserts, with paired
standard errors over the splits:

* NCA's training leave-one-out error not significantly above the whitened metric's or RCA's (the
  paper's "same as or better"), and significantly below the Euclidean metric's on every data set:
  stronger than the paper's text, and what NCA's objective (a smooth leave-one-out accuracy on the
  training set) is built for;
* NCA's test error not significantly above the Euclidean metric's on every set (the paper's
  direction), and significantly below it on balance-scale (again stronger than the text: the four
  features enter the class rule as products, so their weights matter);
* rank 2: NCA's training leave-one-out error significantly below PCA's on every set; its test error
  significantly below PCA's on balance-scale and USPS and not significantly above PCA's and LDA's on
  the others (the paper: rank-2 NCA superior to both).

Every gain assertion fails when NCA is replaced by the identity map (the paired
difference is then exactly 0); ``METRICOPT_NCA_CHECK_IDENTITY=1`` runs the check that way to
show it.

Protocol choices (stated, fixed before the runs): the kNN rule is 1-NN (``K = 1``: the paper's rule
for the rank-2 panels, Section 4; it does not state K for the square panels) with metricopt's tie rule;
UCI features are z-scored on each training part (the paper does not say how it scaled them; NCA's
softmax saturates on the raw wine features, whose scales range from 0.1 to 1,680); USPS pixels are
scaled by 1/255 (the paper's USPS images and their size are not stated for Fig. 1); NCA starts from
the PCA rotation (the estimator's default); RCA uses the classes as chunklets (its default) and in the
rank-2 panel is RCA of the 2-D LDA projection ("LDA + RCA"). USPS uses 3 splits by default (a
full-rank NCA fit on 2,000 x 256 takes about a minute on 2 cores).
"""

import os
import time

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

import _common as C
import metricopt as mo
from metricopt import datasets

pytestmark = pytest.mark.slow

K = 1
#: the check of the check: every NCA fit replaced by the identity (``METRICOPT_NCA_CHECK_IDENTITY=1``, or
#: ``METRICOPT_PAPER_IDENTITY=1`` as for every paper check, when :func:`_common.finish` names the result)
IDENTITY = os.environ.get("METRICOPT_NCA_CHECK_IDENTITY", "") == "1" or C.IDENTITY


def _identity():
    return FunctionTransformer()


def _nca(**kw):
    """NCA, or the identity map when the check is run to show that it can fail."""
    return _identity() if IDENTITY else mo.NCA(**kw)


FULL = {
    "Euclidean": lambda X, y: _identity().fit(X, y),
    "whitened": lambda X, y: mo.Whitening().fit(X, y),
    "RCA": lambda X, y: mo.RCA().fit(X, y),
    "diagonal NCA": lambda X, y: _nca(diagonal=True).fit(X, y),
    "NCA": lambda X, y: _nca().fit(X, y),
}
RANK2 = {
    "PCA 2-D": lambda X, y: mo.PCA(n_components=2).fit(X, y),
    "LDA 2-D": lambda X, y: mo.LDA(n_components=2).fit(X, y),
    "LDA+RCA 2-D": lambda X, y: make_pipeline(mo.LDA(n_components=2), mo.RCA(pca=None)).fit(X, y),
    "NCA 2-D": lambda X, y: _nca(n_components=2).fit(X, y),
}


#: the NCA paper's Fig. 1 protocol (its caption): random splits, training %, USPS images per digit class
PAPER_SPLITS = int(C.value("nca2004", "Fig. 1", "all panels", "realizations (random splits)"))
PAPER_TRAIN = C.value("nca2004", "Fig. 1", "all panels", "training %") / 100.0
USPS_TRAIN = int(C.value("nca2004", "Fig. 1", "USPS", "training images per digit class"))
USPS_TEST = int(C.value("nca2004", "Fig. 1", "USPS", "test images per digit class"))


def usps_splits(y, n_splits, n_train=USPS_TRAIN, n_test=USPS_TEST, seed=0):
    """The NCA paper's USPS protocol: per class, ``n_train`` random training and ``n_test`` test images."""
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    for _ in range(n_splits):
        tr, te = [], []
        for c in classes:
            idx = rng.permutation(np.flatnonzero(y == c))
            tr.append(idx[:n_train])
            te.append(idx[n_train:n_train + n_test])
        yield np.concatenate(tr), np.concatenate(te)


def _run_set(name, X, y, splits, scale, label):
    per_full, per_rank2 = [], []
    for s, (tr, te) in enumerate(splits):
        Xtr, Xte = datasets.preprocess(X[tr], X[te], scale=scale)
        per_full.append(C.run_methods(FULL, Xtr, y[tr], Xte, y[te], K, loo=True, ties=C.TIES))
        per_rank2.append(C.run_methods(RANK2, Xtr, y[tr], Xte, y[te], K, loo=True, ties=C.TIES))
        f, r = per_full[-1], per_rank2[-1]
        print(f"  [{label}] split {s + 1}: test % " + "  ".join(
            f"{m} {100 * v['test']:.1f}" for m, v in {**f, **r}.items()), flush=True)
    return per_full, per_rank2


def _checks(name, per_full, per_rank2, test_gain_full, test_gain_rank2):
    out = [
        C.assert_paired_gain(per_full, "NCA", "Euclidean",
                             f"{name}: NCA training leave-one-out error below Euclidean's", what="train_loo"),
        C.assert_paired_not_worse(per_full, "NCA", "whitened",
                                  f"{name}: NCA training leave-one-out error not above the whitened metric's",
                                  what="train_loo"),
        C.assert_paired_not_worse(per_full, "NCA", "RCA",
                                  f"{name}: NCA training leave-one-out error not above RCA's", what="train_loo"),
        C.assert_paired_gain(per_rank2, "NCA 2-D", "PCA 2-D",
                             f"{name}: rank-2 NCA training leave-one-out error below rank-2 PCA's",
                             what="train_loo"),
    ]
    if test_gain_full:
        out.append(C.assert_paired_gain(per_full, "NCA", "Euclidean", f"{name}: NCA test error below Euclidean's"))
    else:
        out.append(C.assert_paired_not_worse(per_full, "NCA", "Euclidean",
                                             f"{name}: NCA test error not above Euclidean's"))
    if test_gain_rank2:
        out.append(C.assert_paired_gain(per_rank2, "NCA 2-D", "PCA 2-D",
                                        f"{name}: rank-2 NCA test error below rank-2 PCA's"))
    else:
        out.append(C.assert_paired_not_worse(per_rank2, "NCA 2-D", "PCA 2-D",
                                             f"{name}: rank-2 NCA test error not above rank-2 PCA's"))
        out.append(C.assert_paired_not_worse(per_rank2, "NCA 2-D", "LDA 2-D",
                                             f"{name}: rank-2 NCA test error not above rank-2 LDA's"))
    return out


def _tables(name, protocol, per_full, per_rank2):
    sf = C.method_summary(per_full, list(FULL))
    sr = C.method_summary(per_rank2, list(RANK2))
    return [C.method_table(f"{name}: square A (Fig. 1, top)", name, protocol, sf, list(FULL), loo=True),
            C.method_table(f"{name}: rank 2 (Fig. 1, bottom)", name, protocol, sr, list(RANK2), loo=True)]


def test_nca_figure_1():
    t0 = time.perf_counter()
    sets = [  # name, loader name, scale, default splits, test gain (square), test gain (rank 2)
        ("balance-scale", "balance-scale", "standard", PAPER_SPLITS, True, True),
        ("iris", "iris", "standard", PAPER_SPLITS, False, False),
        ("wine", "wine", "standard", PAPER_SPLITS, False, False),
    ]
    checks, tables, notes = [], [], []
    for name, loader, scale, default, gain_full, gain_rank2 in sets:
        X, y = datasets.load(loader)
        n = C.n_splits(f"nca-{name}", default)
        splits = datasets.random_splits(y, n_splits=n, test_size=round(1.0 - PAPER_TRAIN, 6), seed=0)
        pf, pr = _run_set(name, X, y, splits, scale, f"nca/{name}")
        protocol = f"{n} random stratified 70/30 splits, z-scored features, 1-NN"
        tables += _tables(name, protocol, pf, pr)
        checks += _checks(name, pf, pr, gain_full, gain_rank2)
    X, y = datasets.load("usps")
    X = X / 255.0
    n = C.n_splits("nca-usps", 3)
    pf, pr = _run_set("USPS", X, y, usps_splits(y, n), None, "nca/usps")
    tables += _tables("USPS", f"{n} splits of {USPS_TRAIN} training / {USPS_TEST} test images per digit, pixels / 255, "
                      "1-NN", pf, pr)
    checks += _checks("USPS", pf, pr, False, True)
    notes += [
        "The paper's Fig. 1 gives bars, and its text copy no bar values: the assertions are the directions its "
        "text states (NCA the same as or better than the other square metrics; rank-2 NCA superior), two of them "
        "in a stronger form (see the check's docstring); the tables are ours only.",
        "Ionosphere and housing (the paper's other two sets) are not in ../shared/data and were not run.",
        f"Protocol choices the paper does not state: K = 1 for the square panels (the paper's K for the rank-2 "
        "panels), z-scored UCI features, USPS pixels / 255, NCA started from the PCA rotation; USPS with fewer "
        f"splits than the paper's {PAPER_SPLITS} (fit time).",
    ]
    if IDENTITY:
        notes.append("RUN WITH METRICOPT_NCA_CHECK_IDENTITY=1: every NCA fit replaced by the identity map.")
    own = IDENTITY and not C.IDENTITY  # C.finish marks the result itself under METRICOPT_PAPER_IDENTITY
    C.finish("nca-fig1" + ("-identity" if own else ""),
             "NCA (Goldberger et al., NIPS 2004, Fig. 1)" + (" [NCA replaced by the identity]" if own else ""),
             [], checks, notes, t0, tables=tables, identity_of="NCA")
