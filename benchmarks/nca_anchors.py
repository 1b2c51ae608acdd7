"""NCA anchors: metricopt's NCA against scikit-learn's and metric-learn's on the same data, start and objective.

Every method is scored on NCA's objective f (Goldberger et al. 2004, Eq. 2: the expected number of
correctly classified training points, which all three maximise) at the map it returns, computed by
``metricopt.NCAProblem(...).objective_at(L)``, and by the 3-NN test error of that map. All start from
the same initialisation, the top principal directions (scikit-learn's ``init="pca"``; metricopt's
``init="pca"``; metric-learn 0.7.0's ``init="pca"``).

Methods: ``metricopt`` (``metricopt.NCA(n_components=r)``: L-BFGS on the JAX loop, tol 1e-6 relative
gradient, at most 2000 iterations; timed cold, i.e. with JAX compilation, and warm, a second fit of the
same shapes), ``metricopt-cg`` (the same with ``solver="cg"``, the paper's optimiser), ``sklearn``
(``NeighborhoodComponentsAnalysis(n_components=r, init="pca", max_iter=1000, tol=1e-8)``: L-BFGS-B on
f), ``metric-learn`` (``metric_learn.NCA(n_components=r, init="pca", max_iter=1000, tol=1e-8)``;
with the ``force_all_finite`` shim of ``benchmarks/lmnn_anchors.py`` for scikit-learn >= 1.8).

Data (``metricopt.datasets``, preprocessing fitted on the training part, 70/30 stratified split unless
said): wine (standardised), digits (standardised, PCA 30), letter-recognition (standardised; a
stratified subset of ``--letter-n`` training points, n >= 2000).

Usage::

    pip install --no-deps metric-learn==0.7.0
    OPENBLAS_NUM_THREADS=2 python benchmarks/nca_anchors.py [--cases wine:2 digits:2 letter:2 letter:16]

Writes ``benchmarks/results/nca_anchors.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--data", default=os.environ.get("METRICOPT_DATA", "/work/shared/data"))
ap.add_argument("--cases", nargs="*", default=["wine:2", "digits:2", "letter:2", "letter:16"])
ap.add_argument("--letter-n", type=int, default=3000)
ap.add_argument("--methods", nargs="*", default=["metricopt", "metricopt-cg", "sklearn", "metric-learn"])
ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "nca_anchors.md"))
ARGS = ap.parse_args()

import metricopt  # noqa: E402
from metricopt import datasets  # noqa: E402


def load(name):
    if name in ("wine", "digits"):
        from sklearn.datasets import load_digits, load_wine

        X, y = (load_wine if name == "wine" else load_digits)(return_X_y=True)
    else:
        X, y = datasets.load("letter-recognition", data_home=ARGS.data)
    tr, te = next(iter(datasets.random_splits(y, n_splits=1, test_size=0.3, seed=0)))
    if name == "letter":
        rng = np.random.default_rng(0)
        tr = np.sort(rng.choice(tr, ARGS.letter_n, replace=False))
        te = np.sort(rng.choice(te, ARGS.letter_n // 2, replace=False))
    Xtr, Xte = datasets.preprocess(X[tr], X[te], scale="standard", pca=30 if name == "digits" else None)
    return Xtr, y[tr], Xte, y[te]


def metric_learn_nca():
    import metric_learn
    import metric_learn._util as mlu
    import sklearn.utils as su

    def wrap(f):
        def g(*a, force_all_finite=None, **k):
            if force_all_finite is not None:
                k["ensure_all_finite"] = force_all_finite
            return f(*a, **k)
        return g

    mlu.check_array, mlu.check_X_y = wrap(su.check_array), wrap(su.check_X_y)
    return metric_learn.NCA


def fit(method, r, Xtr, ytr):
    """``(L, seconds, notes)``."""
    if method.startswith("metricopt"):
        solver = method.split("-")[1] if "-" in method else "lbfgs"
        t = time.perf_counter()
        est = metricopt.NCA(n_components=r, init="pca", solver=solver).fit(Xtr, ytr)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        metricopt.NCA(n_components=r, init="pca", solver=solver).fit(Xtr, ytr)
        warm = time.perf_counter() - t
        sol = est.solution_
        return est.components_, warm, (f"{sol.status}; {sol.stats['iterations']} iterations; cold (with JAX "
                                       f"compilation) {cold:.2f} s; effective neighbours "
                                       f"{est.effective_neighbours_:.2f}")
    if method == "sklearn":
        from sklearn.neighbors import NeighborhoodComponentsAnalysis

        t = time.perf_counter()
        est = NeighborhoodComponentsAnalysis(n_components=r, init="pca", max_iter=1000, tol=1e-8,
                                             random_state=0).fit(Xtr, ytr)
        return est.components_, time.perf_counter() - t, f"{est.n_iter_} L-BFGS-B iterations"
    NCA = metric_learn_nca()
    t = time.perf_counter()
    est = NCA(n_components=r, init="pca", max_iter=1000, tol=1e-8, random_state=0).fit(Xtr, ytr)
    return est.components_, time.perf_counter() - t, f"{getattr(est, 'n_iter_', '?')} iterations"


store = ARGS.out.replace(".md", ".json")
rows = json.load(open(store)) if os.path.exists(store) else []
for case in ARGS.cases:
    name, r = case.split(":")
    r = int(r)
    Xtr, ytr, Xte, yte = load(name)
    p = metricopt.NCAProblem(Xtr, ytr, n_components=r)
    for method in ARGS.methods:
        rows = [x for x in rows if not (x["case"] == case and x["method"] == method)]
        try:
            L, secs, notes = fit(method, r, Xtr, ytr)
            row = {"case": case, "n": int(len(Xtr)), "d": int(Xtr.shape[1]), "method": method, "time": secs,
                   "f": -p.objective_at(L), "error": float(metricopt.knn_error(Xtr, ytr, Xte, yte, 3, L=L)),
                   "notes": notes}
        except Exception as exc:  # recorded, not hidden
            row = {"case": case, "n": int(len(Xtr)), "d": int(Xtr.shape[1]), "method": method, "time": None,
                   "f": None, "error": None, "notes": f"failed: {type(exc).__name__}: {exc}"}
        print(row, flush=True)
        rows.append(row)
json.dump(rows, open(store, "w"), indent=1)

lines = ["# NCA: metricopt against scikit-learn and metric-learn", "",
         f"Command: `OPENBLAS_NUM_THREADS=2 python benchmarks/nca_anchors.py` (see its docstring); "
         f"{platform.machine()}, {os.cpu_count()} cores (shared), metricopt {metricopt.__version__}. f: NCA's "
         "objective (Eq. 2, expected correct classifications, higher is better) at each method's map, from the "
         "same PCA start; time: the fit in seconds (metricopt: warm, its cold time in the notes); ratios against "
         "scikit-learn.", "",
         "| data (n_train x d) -> r | method | time (s) | time / sklearn | f | f - f(sklearn) | 3-NN test error (%) | notes |",
         "|---|---|---|---|---|---|---|---|"]
for case in dict.fromkeys(x["case"] for x in rows):
    rs = [x for x in rows if x["case"] == case]
    sk = next((x for x in rs if x["method"] == "sklearn" and x["time"]), None)
    for x in rs:
        if x["time"] is None:
            lines.append(f"| {case} | {x['method']} | - | - | - | - | - | {x['notes']} |")
            continue
        ratio = f"{x['time'] / sk['time']:.2f}" if sk else "-"
        df = f"{x['f'] - sk['f']:+.4g}" if sk else "-"
        lines.append(f"| {x['case'].split(':')[0]} ({x['n']} x {x['d']}) -> {x['case'].split(':')[1]} | {x['method']} | "
                     f"{x['time']:.2f} | {ratio} | {x['f']:.6g} | {df} | {100 * x['error']:.2f} | {x['notes']} |")
open(ARGS.out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
