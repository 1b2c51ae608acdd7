"""Wall time against ``time_limit`` for every problem and backend: the promise is max(1.1 x limit, limit + 5 s).

    OMP_NUM_THREADS=1 python benchmarks/time_limits.py [LIMIT ...] [--out benchmarks/results/time_limits.md]
    python benchmarks/time_limits.py 10 --large-only --out /tmp/time_limits.md      # the large JAX rows only

Each row runs in a fresh process, so the JAX import and compilation count against the limit as they would for a
user. Data: scikit-learn's digits, a fixed permutation, the first ``n`` points, PCA to 20 dimensions ("pca20") or
the 64 pixels ("raw64"), standardised; and ``jax_device.py``'s synthetic generator ("synth50": 50 dimensions, 10
classes, seed 0), large enough that one search of all triplets takes seconds on 2 cores (the pieces no limit
interrupts, estimated by :mod:`metricopt._deadline`). A row over its bound says OVER; a crash or a process past
4 x the limit (at least 60 s) says FAILED.
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import platform
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent

CASES = [  # (problem, features, n, backend, solver, init)
    ("LMNN", "pca20", 200, "cvxpy", "SCS", None), ("LMNN", "pca20", 200, "cvxpy", "CLARABEL", None),
    ("LMNN", "raw64", 200, "cvxpy", "SCS", "none"), ("LMNN", "raw64", 200, "cvxpy", "SCS", "auto"),
    ("MMC", "pca20", 100, "cvxpy", "SCS", None), ("MMC", "pca20", 100, "cvxpy", "CLARABEL", None),
    ("MMC", "pca20", 200, "cvxpy", "SCS", None), ("MMC", "pca20", 200, "cvxpy", "CLARABEL", None),
    ("POLA", "pca20", 100, "cvxpy", "SCS", None), ("POLA", "pca20", 100, "cvxpy", "CLARABEL", None),
    ("POLA", "pca20", 200, "cvxpy", "SCS", None),
    ("LMNN", "pca20", 300, "jax", None, None), ("MMC", "pca20", 200, "jax", None, None),
    ("POLA", "pca20", 200, "jax", None, None),
]
LARGE = [("LMNN", "synth50", 8000, "jax", None, None), ("LMNN", "synth50", 20000, "jax", None, None)]

ONE = r'''
import json, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np, metricopt as mo
from metricopt._deadline import hard_limit
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
kind, feats, n, backend, solver, init, limit, here = json.loads(sys.argv[1])
if feats == "synth50":
    sys.path.insert(0, here)
    from jax_device import synthetic
    X, y = synthetic(n, 50)
else:
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(y))
    X, y = X[idx][:n], y[idx][:n]
    if feats == "pca20":
        X = PCA(20, random_state=0).fit_transform(X)
    X = (X - X.mean(0)) / (X.std(0) + 1e-12)
p = {"LMNN": lambda: mo.LMNNProblem(X, y, k=3), "MMC": lambda: mo.MMCProblem(X, y),
     "POLA": lambda: mo.POLAProblem(X, y, C=1.0)}[kind]()
opts = {"time_limit": limit}
if solver:
    opts["solver"] = solver
if init:
    opts["init"] = None if init == "none" else init
t = time.perf_counter()
s = p.solve(backend=backend, **opts)
w = time.perf_counter() - t
print(json.dumps({"wall": w, "status": str(s.status), "bound": hard_limit(limit),
                  "gap": s.stats.get("certificate_rel_gap")}))
'''


def run_row(case, limit):
    kind, feats, n, backend, solver, init = case
    label = f"| {kind} | {n} | {feats} | {backend} | {solver or 'fista'}{' / init=' + init if init else ''} | {limit:g} "
    try:
        r = subprocess.run([sys.executable, "-c", ONE, json.dumps([*case, limit, str(HERE)])], capture_output=True,
                           text=True, timeout=max(60.0, 4 * limit))
        out = json.loads(r.stdout.strip().splitlines()[-1])
    except Exception as exc:  # a crash or a process far past its limit
        return label + f"| - | FAILED ({type(exc).__name__}) | | |", False
    ok = out["wall"] <= out["bound"]
    gap = "-" if out["gap"] is None else f"{out['gap']:.2g}"
    return label + (f"| {out['bound']:g} | {out['wall']:.2f}{'' if ok else ' OVER'} | {out['status']} | {gap} |"), ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("limits", nargs="*", type=float, default=[1.0, 4.0, 8.0])
    ap.add_argument("--out", default="benchmarks/results/time_limits.md")
    ap.add_argument("--large-only", action="store_true", help="only the large synthetic JAX rows")
    args = ap.parse_args()
    rows, held = [], 0
    for limit in args.limits:
        for case in (LARGE if args.large_only else CASES + LARGE):
            row, ok = run_row(case, limit)
            print(row, flush=True)
            rows.append(row)
            held += ok
    import metricopt

    head = [
        "# time_limit held: wall time of one solve against max(1.1 x limit, limit + 5 s)",
        "",
        f"`OMP_NUM_THREADS=1 python benchmarks/time_limits.py {' '.join(f'{x:g}' for x in args.limits)}"
        f"{' --large-only' if args.large_only else ''}` on "
        f"{datetime.date.today()}, metricopt {metricopt.__version__}, Python {platform.python_version()}, "
        "2 shared cores, no GPU. Each row is a fresh process (JAX import and compilation included).",
        "",
        f"Held: {held} of {len(rows)} rows.",
        "",
        "| problem | n | features | backend | solver / init | time_limit (s) | bound (s) | wall (s) | status | "
        "certified gap |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    with open(args.out, "w") as fh:
        fh.write("\n".join(head + rows) + "\n")
    print(f"held {held} of {len(rows)}; written to {args.out}")


if __name__ == "__main__":
    main()
