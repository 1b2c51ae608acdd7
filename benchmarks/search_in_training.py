"""Ball trees inside LMNN training: the JAX backend with ``search="brute"`` vs ``search="tree"``.

The same problem (LMNN, k = 3, mu = 0.5) is solved twice with the JAX backend's FISTA for a fixed
number of iterations; the only difference is how target neighbours and the active set are searched
at every re-check (:meth:`metricopt.LMNNProblem.find_triplets`: blocked brute force or per-class ball
trees, identical results). Reported: total fit time, the time spent in searches (summed over
re-checks and exact-objective evaluations, measured by wrapping ``find_triplets`` and ``hinge_sum``), the number of searches, and the final objective of
both runs (equal up to summation order). Each fit runs in its own process (JAX compiles afresh). ``search="auto"`` picks the tree for ``n >= 2000`` points in
``d <= 25`` dimensions (:func:`metricopt.balltree.choose_search`).

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/search_in_training.py [--data /work/shared/data] \
        [--datasets letter usps-pca10 usps-pca25] [--iters 400] [--out benchmarks/results/search_in_training.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--data", default=os.environ.get("METRICOPT_DATA", "/work/shared/data"))
ap.add_argument("--datasets", nargs="*", default=["letter", "usps-pca10", "usps-pca25"])
ap.add_argument("--iters", type=int, default=400)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "search_in_training.md"))
ap.add_argument("--child", nargs=2, metavar=("DATASET", "SEARCH"), help=argparse.SUPPRESS)
ARGS = ap.parse_args()
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = str(ARGS.threads)

import numpy as np  # noqa: E402

import metricopt  # noqa: E402
from metricopt import datasets  # noqa: E402


def _data(name):
    if name == "letter":
        X, y = datasets.load("letter-recognition", data_home=ARGS.data)
        pca = None
    else:
        X, y = datasets.load("usps", data_home=ARGS.data)
        pca = int(name.split("pca")[1])
    tr, te = next(datasets.random_splits(y, n_splits=1, test_size=0.3, seed=0))
    Xtr, _ = datasets.preprocess(X[tr], X[te], scale="standard", pca=pca)
    return Xtr, y[tr]


def _run(X, y, search):
    p = metricopt.LMNNProblem(X, y, search=search)
    spent = {"time": 0.0, "calls": 0}
    inner = p.find_triplets

    def timed(*a, **kw):
        t = time.perf_counter()
        out = inner(*a, **kw)
        spent["time"] += time.perf_counter() - t
        spent["calls"] += 1
        return out

    p.find_triplets = timed
    inner_sum = p.hinge_sum  # the exact objective's hinge (brute: its own blocked sum; tree: through find_triplets)

    def timed_sum(*a, **kw):
        t = time.perf_counter()
        calls = spent["calls"]
        out = inner_sum(*a, **kw)
        if spent["calls"] == calls:  # not already timed inside find_triplets
            spent["time"] += time.perf_counter() - t
            spent["calls"] += 1
        return out

    p.hinge_sum = timed_sum
    t = time.perf_counter()
    sol = p.solve(backend="jax", max_iter=ARGS.iters, tol=1e-12, certify_every=10 * ARGS.iters)
    return time.perf_counter() - t, spent, sol


if ARGS.child:
    import json

    name, search = ARGS.child
    X, y = _data(name)
    t, spent, sol = _run(X, y, search)
    print("RESULT " + json.dumps({"time": t, "spent": spent, "objective": sol.objective, "shape": list(X.shape)}))
    raise SystemExit(0)


def _child(name, search):
    """One fit in a fresh process (JAX compiles afresh for each, so neither run inherits the other's cache)."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, __file__, "--child", name, search, "--iters", str(ARGS.iters),
                          "--threads", str(ARGS.threads), "--data", ARGS.data],
                         capture_output=True, text=True, check=True).stdout
    r = json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:])
    return r["time"], r["spent"], r["objective"], tuple(r["shape"])


rows = []
for name in ARGS.datasets:
    tb, sb, ob, shape = _child(name, "brute")
    tt, st, ot, _ = _child(name, "tree")
    rows.append((name, shape, tb, sb, tt, st, ob, ot))
    print(name, shape, f"brute {tb:.1f}s (search {sb['time']:.1f}s/{sb['calls']})",
          f"tree {tt:.1f}s (search {st['time']:.1f}s/{st['calls']})", ob, ot, flush=True)

lines = [
    "# Ball trees inside LMNN training (JAX FISTA, fixed iterations)",
    "",
    f"Command: `OPENBLAS_NUM_THREADS={ARGS.threads} python benchmarks/search_in_training.py --datasets "
    f"{' '.join(ARGS.datasets)} --iters {ARGS.iters}`; {platform.processor() or platform.machine()}, "
    f"{os.cpu_count()} cores (shared), numpy {np.__version__}.",
    "",
    "| data | n x d | fit, brute (s) | searches, brute (s / calls) | fit, tree (s) | searches, tree (s / calls) "
    "| search speed-up | fit speed-up | objective brute | objective tree |",
    "|---|---|---|---|---|---|---|---|---|---|",
]
for name, shape, tb, sb, tt, st, ob, ot in rows:
    lines.append(f"| {name} | {shape[0]} x {shape[1]} | {tb:.1f} | {sb['time']:.1f} / {sb['calls']} | {tt:.1f} | "
                 f"{st['time']:.1f} / {st['calls']} | {sb['time'] / max(st['time'], 1e-9):.2f} | {tb / tt:.2f} | "
                 f"{ob:.8g} | {ot:.8g} |")
lines += ["", "Speed-up = brute / tree. Both runs do the same iterations on the same active sets (the searches "
          "return identical triplets), so the objectives agree up to summation order."]
os.makedirs(os.path.dirname(ARGS.out), exist_ok=True)
with open(ARGS.out, "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
