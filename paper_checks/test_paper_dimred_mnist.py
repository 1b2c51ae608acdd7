r"""Paper check: low-rank LMNN against PCA on MNIST-5k (JMLR 2009 Sections 5.4 and 6.3, Fig. 13; reduced).

JMLR 2009 Section 5.4 describes two low-rank LMNN maps: the full-rank solution truncated to its leading
eigenvectors ("LMNN-S") and a rectangular ``L`` (``r x d``) learned on the non-convex loss ("LMNN-R").
Section 6.3 (Fig. 13) compares them with PCA on MNIST (k = 3; raw 28x28 images projected on their 350 leading
principal components before training, ranks r from 15 to 50; the text gives LMNN-R's error at ranks 15 and 25
and the baseline kNN error in the original space, all in ``paper_numbers.csv``). Its text ranks LMNN-R first of
the three methods of Fig. 13, and ahead of LMNN-S, the two coming together as the rank of LMNN-R's rectangular
map grows towards the full dimension. ``test_paper_dimred.py`` runs
the same comparison on ORL faces; this is its MNIST row, with its helpers and with the MNIST-5k check's
(``test_paper_mnist.py``) data, splits, preprocessing and solver options.

REDUCED: the shared 5,000-image subset of MNIST (``digits/mnist_5k.csv.gz``, 500 per digit), not the
60,000/10,000 standard partition; ``N_SPLITS`` random stratified 70/30 splits (3,500 / 1,500; seed 0, those of
the MNIST-5k check); ranks ``RANKS`` only (15 and 25, the two ranks the text gives LMNN-R's errors for), out of
the paper's 15-50 sweep. On each split, with pixels / 255 and PCA to ``DIMS`` = 50 dimensions fitted on the
training part:

* PCA: the leading ``r`` principal directions of the 50-dimensional inputs;
* LMNN-S: the full LMNN metric (JAX backend, certified relative gap 1e-3, time limit 600 s: the MNIST-5k check's
  options) truncated to its ``r`` leading eigenvectors; the convex solve's status and certified gap are
  reported (row ``lmnn_full``, which is also the full-rank LMNN error on the same inputs);
* LMNN-R: :class:`metricopt.LMNN` with ``n_components=r`` (rectangular; non-convex, so reported
  ``stationary`` at best, never optimal; time-limited to ``R_TIME_LIMIT`` s per fit, after which it reports
  ``time_limit`` or ``iteration_limit`` when not shown stationary);
* baselines (not asserted): Euclidean 3-NN on the raw pixels (the paper's "original input space") and on the
  50 PCA dimensions.

Protocol differences from the paper (listed in ``paper_review.py`` too):

* data: 5,000 of MNIST's 70,000 images, 3,500 for training against 60,000, 1,500 test images against 10,000;
* dimension before training: PCA 50 against 350 (the certified convex solve at 350 dimensions is out of reach
  on 2 cores), so LMNN-S truncates a 50 x 50 metric (the paper's: 350 x 350) and LMNN-R learns r x 50 (r x 350);
* ranks: 15 and 25 only (the paper: 15 to 50; at PCA 50, rank 50 would be full rank);
* splits: ``N_SPLITS`` random 70/30 splits against the one standard partition;
* solvers: LMNN-R by trust-region Newton on a smoothed hinge with 3 restarts (the first from the PCA
  directions), time-limited, against the paper's sub-gradient method; LMNN-S from a certified convex solve;
* kNN votes: tie-inclusive (:data:`_common.TIES`); ball-tree speed-ups (the top axis of Fig. 13) not measured.

The paper's numbers are on the full MNIST at 350 principal components, so none is compared: they are shown
beside ours (LMNN-R at ranks 15 and 25, the baseline in the original space). Asserted (fixed before the runs),
paired over the splits, the directions of Section 6.3: at every rank run LMNN-R's 3-NN test error is
significantly below PCA's, and at the lowest rank LMNN-R's paired mean error is below LMNN-S's (the paper:
LMNN-R outperforms LMNN-S). The latter is the strict point estimate, not the ORL check's "not above within
2 s.e.": that weaker form passes when the two maps coincide, as they do in the identity run (both the
identity's rank-r truncation, i.e. PCA), where every assertion here must fail. With one split the paired
standard error is 0 and "significantly below" reads "below".
"""

import time

import numpy as np
import pytest

import _common as C
import metricopt as mo
from metricopt import datasets
from test_paper_dimred import K, _Fixed, _truncate
from test_paper_mnist import DIMS, JAX

pytestmark = pytest.mark.slow

RANKS = (15, 25)
N_SPLITS = 2
R_TIME_LIMIT = 300.0


def test_dimensionality_reduction_mnist_5k():
    t0 = time.perf_counter()
    X, y = datasets.load("mnist-5k")
    X = X / 255.0
    n = C.n_splits("dimred-mnist", N_SPLITS)
    per_rank = {r: [] for r in RANKS}
    base, solves, r_stats = [], [], {r: [] for r in RANKS}
    for s, (tr, te) in enumerate(datasets.random_splits(y, n_splits=n, test_size=0.3, seed=0)):
        Xtr, Xte = datasets.preprocess(X[tr], X[te], pca=DIMS)
        # the check of the check (METRICOPT_PAPER_IDENTITY=1): the full metric is the identity and every rank-r
        # map the first r coordinates of the PCA inputs (the identity's rank-r truncation), which is PCA at rank r
        fitted = {}

        def fit_full(A, b):
            fitted["full"] = _Fixed(np.eye(DIMS)) if C.IDENTITY else mo.LMNN(k=K, **JAX).fit(A, b)
            return fitted["full"]

        entry = C.run_methods({"euclidean_raw": lambda A, b: _Fixed(np.eye(A.shape[1]))},
                              X[tr], y[tr], X[te], y[te], k=K, ties=C.TIES)
        entry.update(C.run_methods({"euclidean_pca": lambda A, b: _Fixed(np.eye(DIMS)), "lmnn_full": fit_full},
                                   Xtr, y[tr], Xte, y[te], k=K, ties=C.TIES))
        base.append(entry)
        full = fitted["full"]
        cert = getattr(getattr(full, "solution_", None), "certificate", None)
        solves.append((entry["lmnn_full"]["status"], float(cert.rel_gap) if cert is not None else float("inf")))
        for r in RANKS:
            methods = {
                "pca": lambda A, b, r=r: mo.PCA(r).fit(A),
                "lmnn_s": lambda A, b, r=r: _Fixed(np.eye(r, DIMS) if C.IDENTITY else _truncate(full, r)),
                "lmnn_r": (lambda A, b, r=r: _Fixed(np.eye(r, DIMS))) if C.IDENTITY else
                          (lambda A, b, r=r: mo.LMNN(k=K, n_components=r, low_rank="R",
                                                     time_limit=R_TIME_LIMIT).fit(A, b)),
            }
            fits = {}
            entry = C.run_methods({m: (lambda A, b, m=m, f=f: fits.setdefault(m, f(A, b))) for m, f in methods.items()},
                                  Xtr, y[tr], Xte, y[te], k=K, ties=C.TIES)
            per_rank[r].append(entry)
            stats = getattr(getattr(fits["lmnn_r"], "solution_", None), "stats", {})
            r_stats[r].append((entry["lmnn_r"]["status"], stats.get("stationarity"), stats.get("rel_gap_to_convex_bound")))
            print(f"[dimred-mnist] split {s + 1} r={r}: " + ", ".join(
                f"{m} {100 * e['test']:.2f}% ({e['seconds']:.0f}s, {e['status']})" for m, e in entry.items()),
                flush=True)
        print(f"[dimred-mnist] split {s + 1} baselines: " + ", ".join(
            f"{m} {100 * e['test']:.2f}% ({e['seconds']:.0f}s, {e['status']})" for m, e in base[-1].items()) +
            f"; certified gap {solves[-1][1]:.1e}", flush=True)
    fig = {what: C.jmlr_text("Sec. 6.3", "MNIST (Fig. 13)", what) for what in (
        "principal components before training", "smallest rank r of LMNN-R", "largest rank r of LMNN-R",
        "LMNN-R test error % at 15 dimensions", "baseline kNN test error % (original space)",
        "LMNN-R test error % at 25 dimensions")}
    paper_r = {15: fig["LMNN-R test error % at 15 dimensions"], 25: fig["LMNN-R test error % at 25 dimensions"]}
    protocol = (f"{n} random 70/30 splits (3,500 / 1,500), pixels / 255, PCA {DIMS} fitted on the training part; "
                "paper: full MNIST, PCA 350 (shown, not compared)")
    names = ("pca", "lmnn_s", "lmnn_r")
    tables = [C.method_table("MNIST-5k, baselines and the full-rank solve LMNN-S truncates", "mnist-5k", protocol,
                             C.method_summary(base, ("euclidean_raw", "euclidean_pca", "lmnn_full")),
                             ("euclidean_raw", "euclidean_pca", "lmnn_full"),
                             paper={"euclidean_raw": fig["baseline kNN test error % (original space)"]},
                             missing="no number in the text")]
    checks = []
    for r in RANKS:
        tables.append(C.method_table(f"MNIST-5k, rank {r}", "mnist-5k", protocol, C.method_summary(per_rank[r], names),
                                     names, paper={"lmnn_r": paper_r[r]} if r in paper_r else None,
                                     missing="Fig. 13 curve only"))
        checks.append(C.assert_paired_gain(per_rank[r], "lmnn_r", "pca", f"MNIST-5k rank {r}: LMNN-R below PCA"))
    r0 = RANKS[0]
    checks.append(C.assert_paired_below(per_rank[r0], "lmnn_r", "lmnn_s",
                                        f"MNIST-5k rank {r0}: LMNN-R not above LMNN-S (below in the paired mean)",
                                        "the paper: LMNN-R outperforms LMNN-S"))
    notes = [
        f"Reduced: MNIST-5k (5,000 of MNIST's 70,000 images), {n} random 70/30 splits (3,500 / 1,500), pixels / 255, "
        f"PCA {DIMS} fitted on the training part, ranks {', '.join(map(str, RANKS))}; k = {K}, tie-inclusive votes.",
        f"LMNN-S truncates the full LMNN metric (JAX, tol 1e-3, time limit {JAX['time_limit']:.0f} s): statuses "
        f"{[st for st, _ in solves]}, certified relative gaps {[f'{g:.1e}' for _, g in solves]}.",
        "LMNN-R (rectangular, non-convex; stationary at best, never optimal; time limit "
        f"{R_TIME_LIMIT:.0f} s per fit): " + "; ".join(
            f"rank {r}: " + ", ".join(f"{st} (stationarity {_g(sn)}, gap to the convex bound {_g(gb)})"
                                      for st, sn, gb in r_stats[r]) for r in RANKS) + ".",
        f"Paper (JMLR 2009 Sec. 6.3, Fig. 13): full MNIST projected on {fig['principal components before training']:.0f} "
        f"principal components, LMNN-R at ranks {fig['smallest rank r of LMNN-R']:.0f} to "
        f"{fig['largest rank r of LMNN-R']:.0f}: {paper_r[15]:.2f} % at 15 dimensions and {paper_r[25]:.2f} % at 25, "
        f"against the baseline {fig['baseline kNN test error % (original space)']:.2f} % in the original space; "
        "LMNN-R beats LMNN-S and PCA. Other data and dimension than ours: shown beside ours, directions asserted only.",
    ]
    C.finish("dimred-mnist", "dimensionality reduction on MNIST-5k (JMLR 2009 Sections 5.4, 6.3, Fig. 13; reduced)",
             [], checks, notes, t0, tables=tables)


def _g(x):
    return "-" if x is None else f"{float(x):.1e}"
