"""LMNN-R (JMLR 2009 Sec. 5.4) before and after it moved onto the JAX backend's one loop.

Runs ``metricopt.LMNN(n_components=r)`` (LMNN-R, 3 restarts, tol 1e-6) on the splits of
``benchmarks/lmnn_variants.py`` (wine and balance-scale standardized, 70/30; ORL faces 7 images per
subject, PCA 30) and records, per split: the objective (Eq. 14 at ``L^T L``), the status, the
relative stationarity, the fit time and the 3-NN test error. Each run is labelled (``--label``) and
merged into ``benchmarks/results/lmnn_r.json``; the table ``lmnn_r.md`` puts the labels side by side,
so the same script run against an older checkout (``PYTHONPATH=/path/to/old/checkout``) gives the
"before" column.

Usage::

    OPENBLAS_NUM_THREADS=2 python benchmarks/lmnn_r.py --label "JAX loop (TrustNewton)"
    OPENBLAS_NUM_THREADS=2 PYTHONPATH=/tmp/old python benchmarks/lmnn_r.py --label "scipy L-BFGS + Newton polish"
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
ap.add_argument("--label", required=True)
ap.add_argument("--cases", nargs="*", default=["wine:2", "wine:4", "balance-scale:2", "balance-scale:4", "orl:4"],
                help="data:rank pairs")
ap.add_argument("--splits", type=int, default=3)
ap.add_argument("--orl-splits", type=int, default=2)
ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "lmnn_r.md"))
ARGS = ap.parse_args()

import metricopt  # noqa: E402
from metricopt import datasets  # noqa: E402

store = ARGS.out.replace(".md", ".json")
results = json.load(open(store)) if os.path.exists(store) else []
results = [r for r in results if r["label"] != ARGS.label]
for case in ARGS.cases:
    name, r = case.split(":")
    r = int(r)
    X, y = datasets.load(name, data_home=ARGS.data)
    if name == "orl":
        splits = list(datasets.per_class_splits(y, n_train=7, n_splits=ARGS.orl_splits, seed=0))
    else:
        splits = list(datasets.random_splits(y, n_splits=ARGS.splits, test_size=0.3, seed=0))
    for s, (tr, te) in enumerate(splits):
        Xtr, Xte = datasets.preprocess(X[tr], X[te], scale="standard" if name != "orl" else None,
                                       pca=30 if name == "orl" else None)
        t = time.perf_counter()
        est = metricopt.LMNN(n_components=r).fit(Xtr, y[tr])
        sol = est.solution_
        row = {"label": ARGS.label, "data": name, "rank": r, "split": s, "time": time.perf_counter() - t,
               "objective": float(sol.objective), "status": str(sol.status),
               "stationarity": float(sol.stats.get("stationarity", float("nan"))),
               "error": float(1 - est.score(Xte, y[te])), "version": metricopt.__file__}
        print(row, flush=True)
        results.append(row)
os.makedirs(os.path.dirname(store), exist_ok=True)
json.dump(results, open(store, "w"), indent=1)

labels = list(dict.fromkeys(r["label"] for r in results))
cases = list(dict.fromkeys((r["data"], r["rank"]) for r in results))
lines = ["# LMNN-R: objective, status, time and 3-NN test error per run", "",
         f"Command: `python benchmarks/lmnn_r.py --label LABEL` per column (see the script); {platform.machine()}, "
         f"{os.cpu_count()} cores (shared). `LMNN(n_components=r)`: 3 restarts, tol 1e-6. Objective: mean over "
         "splits of Eq. 14 at L^T L; 'rel. to first' compares each split's objective with the first column's on "
         "the same split (negative: lower, better); time includes JAX compilation in a fresh process.", "",
         "| data | rank | splits | " + " | ".join(f"{lb}: objective / rel. to first / status / time (s) / error (%)"
                                               for lb in labels) + " |",
         "|---|---|---|" + "---|" * len(labels)]
for name, r in cases:
    rows = {lb: sorted([x for x in results if x["label"] == lb and x["data"] == name and x["rank"] == r],
                       key=lambda x: x["split"]) for lb in labels}
    first = rows[labels[0]]
    cells = []
    for lb in labels:
        rs = rows[lb]
        if not rs:
            cells.append("-")
            continue
        rel = [(a["objective"] - b["objective"]) / abs(b["objective"]) for a, b in zip(rs, first)]
        sts = "/".join(sorted({x["status"] for x in rs}))
        cells.append(f"{np.mean([x['objective'] for x in rs]):.6g} / {max(rel, key=abs):+.1e} / {sts} / "
                     f"{np.mean([x['time'] for x in rs]):.1f} / {100 * np.mean([x['error'] for x in rs]):.2f}")
    lines.append(f"| {name} | {r} | {len(first)} | " + " | ".join(cells) + " |")
open(ARGS.out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
