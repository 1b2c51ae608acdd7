"""NCA anchors: metricopt's NCA against scikit-learn's and metric-learn's on the same data, start and objective.

Every method is scored on NCA's objective f (Goldberger et al. 2004, Eq. 3: the expected number of
correctly classified training points, which all of them maximise) at the map it returns, computed by
``metricopt.NCAProblem(...).objective_at(L)``, and by the 3-NN test error of that map. All start from
the same initialisation, the top principal directions (scikit-learn's ``init="pca"``; metricopt's
``init="pca"``; metric-learn 0.7.0's ``init="pca"``).

Methods:

* ``metricopt``: ``metricopt.NCA(n_components=r, init="pca")``, its defaults (``backend="auto"``: on a CPU the
  NumPy L-BFGS of ``metricopt.methods.nca.numpy_path``; tol 1e-6 relative gradient, at most 2000 iterations, steps capped
  at 3 % of ``||A||``);
* ``metricopt-jax``: the same iteration on the JAX backend's jitted loop (``backend="jax"``);
* ``metricopt-cg``: nonlinear conjugate gradients, the paper's optimiser (``solver="cg"``: the JAX loop);
* ``sklearn``: ``NeighborhoodComponentsAnalysis(n_components=r, init="pca", max_iter=1000, tol=1e-8)``
  (L-BFGS-B on f, run to convergence), and ``sklearn-default``: its default ``max_iter=50, tol=1e-5``;
* ``metric-learn``: ``metric_learn.NCA(n_components=r, init="pca", max_iter=1000, tol=1e-8)`` (with the
  ``force_all_finite`` shim of ``benchmarks/lmnn_anchors.py`` for scikit-learn >= 1.8).

Times: each case runs in a fresh Python process (imports and data loading before the clock). A metricopt
method is timed **cold** (its first fit in the process: JAX's tracing and compilation included for the JAX
loop; the NumPy path has none) and **warm** (a second fit of the same shapes); scikit-learn and metric-learn
(nothing to compile) in the same process after the metricopt fits, twice: with the BLAS threads as they are and
on one thread (threadpoolctl), the faster time kept (on a shared machine a multi-threaded OpenBLAS slowed their
dense ``n x n`` products up to 20 times; the NumPy path of metricopt limits itself to one thread likewise).
Ratios are cold times over the ``sklearn`` row's time, from the same process.

Data (``metricopt.datasets``, preprocessing fitted on the training part, 70/30 stratified split unless
said): wine (standardised), digits (standardised, PCA 30), letter-recognition (standardised; a
stratified subset of ``--letter-n`` training points, n >= 2000). A case is ``name:r`` (``r`` the output
dimension, ``all`` for the default ``n_components=None``, all the features).

Usage::

    pip install --no-deps metric-learn==0.7.0
    OPENBLAS_NUM_THREADS=2 python benchmarks/nca_anchors.py [--cases wine:2 digits:2 digits:all letter:2]

Writes ``benchmarks/results/nca_anchors.md`` (and ``.json``; rows of other cases already there are kept).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--data", default=os.environ.get("METRICOPT_DATA", "/work/shared/data"))
ap.add_argument("--cases", nargs="*", default=["wine:2", "digits:2", "digits:all"])
ap.add_argument("--letter-n", type=int, default=3000)
ap.add_argument("--methods", nargs="*",
                default=["metricopt", "metricopt-jax", "metricopt-cg", "sklearn", "sklearn-default", "metric-learn"])
ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "nca_anchors.md"))
ap.add_argument("--worker", help=argparse.SUPPRESS)  # one case, in a fresh process: JSON rows on stdout
ARGS = ap.parse_args()

METRICOPT = {"metricopt": {}, "metricopt-jax": {"backend": "jax"}, "metricopt-cg": {"solver": "cg"}}


def load(name):
    from metricopt import datasets

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
    """``(L, cold seconds, warm seconds or None, path, notes, trace)``; ``trace``: the cold metricopt fit's
    ``(seconds into the solve, f, iteration)`` per recorded iterate (``None`` for the others)."""
    import metricopt

    if method in METRICOPT:
        make = lambda: metricopt.NCA(n_components=r, init="pca", **METRICOPT[method])  # noqa: E731
        t = time.perf_counter()
        est = make().fit(Xtr, ytr)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        make().fit(Xtr, ytr)
        warm = time.perf_counter() - t
        sol = est.solution_
        trace = [(round(h["time"], 4), round(-h["objective"], 9), h["iteration"]) for h in sol.stats["history"]]
        return (est.components_, cold, warm, f"{sol.backend} {sol.solver}",
                f"{sol.status}; {sol.stats['iterations']} iterations; effective neighbours "
                f"{est.effective_neighbours_:.2f}", trace)
    if method.startswith("sklearn"):
        from sklearn.neighbors import NeighborhoodComponentsAnalysis

        kw = {} if method == "sklearn-default" else {"max_iter": 1000, "tol": 1e-8}
        make = lambda: NeighborhoodComponentsAnalysis(n_components=r, init="pca", random_state=0, **kw)  # noqa: E731
    else:
        NCA = metric_learn_nca()
        make = lambda: NCA(n_components=r, init="pca", max_iter=1000, tol=1e-8, random_state=0)  # noqa: E731
    est, secs, note = best_of_threads(make, Xtr, ytr)
    n_iter = getattr(est, "n_iter_", None)
    stop = "; stopped at max_iter" if n_iter is not None and n_iter >= est.max_iter else ""
    return (est.components_, secs, None, "scipy L-BFGS-B",
            f"max_iter {est.max_iter}, tol {est.tol:g}: {n_iter} iterations{stop}; {note}", None)


def best_of_threads(make, X, y):
    """``(estimator, seconds, note)``: the fit timed with the BLAS threads as they are and on one thread
    (threadpoolctl), the faster time kept (the estimator of the first fit). Their dense ``n x n`` products met
    a multi-threaded OpenBLAS on this shared machine badly (wine: 90 ms on 2 threads, 4 ms on one)."""
    from threadpoolctl import threadpool_limits

    t = time.perf_counter()
    est = make().fit(X, y)
    as_is = time.perf_counter() - t
    with threadpool_limits(limits=1, user_api="blas"):
        t = time.perf_counter()
        make().fit(X, y)
        one = time.perf_counter() - t
    return est, min(as_is, one), f"{as_is:.2f} s as the BLAS threads are, {one:.2f} s on one (the faster shown)"


def worker(case):
    """Every method on one case, in this (fresh) process; prints one JSON row per method."""
    import metricopt

    name, rs = case.split(":")
    r = None if rs == "all" else int(rs)
    Xtr, ytr, Xte, yte = load(name)
    p = metricopt.NCAProblem(Xtr, ytr, n_components=r)
    order = [m for m in ARGS.methods if m in METRICOPT] + [m for m in ARGS.methods if m not in METRICOPT]
    for method in order:  # the metricopt fits first: their cold fits are the process's first of their kind
        try:
            L, cold, warm, path, notes, trace = fit(method, r, Xtr, ytr)
            row = {"case": case, "n": int(len(Xtr)), "d": int(Xtr.shape[1]), "r": p.n_components, "method": method,
                   "path": path, "cold": cold, "warm": warm, "f": -p.objective_at(L),
                   "error": float(metricopt.knn_error(Xtr, ytr, Xte, yte, 3, L=L)), "notes": notes, "trace": trace}
        except Exception as exc:  # recorded, not hidden
            row = {"case": case, "n": int(len(Xtr)), "d": int(Xtr.shape[1]), "r": p.n_components, "method": method,
                   "path": None, "cold": None, "warm": None, "f": None, "error": None,
                   "notes": f"failed: {type(exc).__name__}: {exc}"}
        print(json.dumps(row), flush=True)


if ARGS.worker:
    worker(ARGS.worker)
    sys.exit(0)

store = ARGS.out.replace(".md", ".json")
rows = json.load(open(store)) if os.path.exists(store) else []
rows = [x for x in rows if "cold" in x and x["case"] not in ARGS.cases]  # earlier runs' rows of other cases
for case in ARGS.cases:
    cmd = [sys.executable, __file__, "--worker", case, "--data", ARGS.data, "--letter-n", str(ARGS.letter_n),
           "--methods", *ARGS.methods]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    got = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not got:
        got.append({"case": case, "method": "(worker)", "path": None, "cold": None, "warm": None, "f": None,
                    "error": None, "notes": f"worker failed (exit {proc.returncode}): {proc.stderr[-500:]}"})
    for row in got:
        print({k: v for k, v in row.items() if k != "trace"}, flush=True)
    rows += got
with open(store, "w") as out:  # one row a line (a metricopt row's trace is long)
    out.write("[\n" + ",\n".join(json.dumps(x) for x in rows) + "\n]\n")

import metricopt  # noqa: E402


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def reached(row, others):
    """Where a metricopt fit's cold run first reached the f of the scikit-learn rows (from its trace)."""
    out = []
    for other in others:
        hit = next((t for t in row.get("trace") or [] if t[1] >= other["f"] - 1e-9 * abs(other["f"])), None)
        where = "not reached" if hit is None else f"{hit[0]:.2f} s (iteration {hit[2]})"
        out.append(f"f({other['method']}) = {other['f']:.6g} reached at {where}")
    return "; ".join(out)


lines = ["# NCA: metricopt against scikit-learn and metric-learn", "",
         f"Command: `OPENBLAS_NUM_THREADS=2 python benchmarks/nca_anchors.py` (see its docstring); "
         f"{platform.machine()}, {os.cpu_count()} cores (shared with other work: times vary by tens of per cent "
         f"from run to run), metricopt {metricopt.__version__}. f: NCA's objective (Eq. 3, expected correct "
         "classifications, higher is better) at each method's map, from the same PCA start. Each case runs in a "
         "fresh process; cold: a metricopt method's first fit in it (with the JAX loop: tracing and compilation "
         "included; the NumPy path compiles nothing), warm: a second fit; scikit-learn and metric-learn (nothing to "
         "compile): the faster of a fit with the BLAS threads as they are and one on a single thread. "
         "cold / sklearn: over the `sklearn` row (L-BFGS-B to convergence, tol 1e-8) of the "
         "same process; `sklearn-default` is scikit-learn with its defaults (max_iter 50, tol 1e-5). path: what "
         "ran (`numpy lbfgs`: `metricopt.methods.nca.numpy_path`; `jax ...`: the JAX backend's loop).", "",
         "| data (n_train x d) -> r | method | path | cold (s) | warm (s) | cold / sklearn | f | f - f(sklearn) "
         "| 3-NN test error (%) | notes |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for case in dict.fromkeys(x["case"] for x in rows):
    rs = [x for x in rows if x["case"] == case]
    sk = next((x for x in rs if x["method"] == "sklearn" and x["cold"]), None)
    sks = [x for x in rs if x["method"].startswith("sklearn") and x["cold"]]
    for x in rs:
        label = f"{case.split(':')[0]} ({x.get('n', '?')} x {x.get('d', '?')}) -> {x.get('r', case.split(':')[1])}"
        if x["cold"] is None:
            lines.append(f"| {label} | {x['method']} | - | - | - | - | - | - | - | {x['notes']} |")
            continue
        ratio = f"{x['cold'] / sk['cold']:.2f}" if sk else "-"
        df = f"{x['f'] - sk['f']:+.4g}" if sk else "-"
        notes = x["notes"] + (f"; {reached(x, sks)} into the cold solve" if x.get("trace") and sks else "")
        lines.append(f"| {label} | {x['method']} | {x['path']} | {x['cold']:.2f} | {fmt(x['warm'], '.2f')} | {ratio} "
                     f"| {x['f']:.6g} | {df} | {100 * x['error']:.2f} | {notes} |")
lines += ["", "Notes:", "",
          "* `sklearn-default` (scikit-learn's own defaults) stops after 50 iterations or at tol 1e-5, below the f it "
          "converges to; a metricopt row's notes say when its cold solve passed each scikit-learn f (seconds into the "
          "solve: the fit's set-up, the start and the closing statistics come on top).",
          *(["* letter-recognition (3,000 x 16 -> 2 and -> 16) is not in this run (minutes per case): "
             "`--cases letter:2 letter:16` adds it. Its earlier rows, measured on the JAX loop before the NumPy path "
             "existed, are in this file's git history, not beside these."]
            if not any(x["case"].startswith("letter") for x in rows) else []),
          "* `metricopt` and `metricopt-jax` run the same L-BFGS iteration (steps capped at 3 % of `||A||`, tol tested "
          "every 10 iterations) from the same start; they differ only in floating-point rounding, which can steer a "
          "long run on this non-convex objective to a neighbouring stationary point."]
open(ARGS.out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
