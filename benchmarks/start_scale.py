"""The JAX backend's starting scale for LMNN: one search against a search per evaluation.

FISTA starts LMNN at ``c* I`` with ``c* = argmin_c f(c I)`` (JMLR 2009 Eq. 14 along the ray
of the identity). This script times, side by side on the same problems,

* ``best_scale`` (today's): one triplet search at ``M = I`` collecting the hinge's breakpoints
  ``delta_t = d_ij - d_il > -D``, then an exact minimisation along the ray (binary searches on
  the sorted breakpoints, no further search);
* ``_scan_scale`` (the former method, kept as the fallback): halving/doubling from ``c = 1``
  and six golden-section steps, every value a full objective evaluation (a blocked search of
  all triplets);

and reports both scales, the objectives there (the lower the better; the new one is exact),
and the seconds. Data as in ``lmnn_anchors.py``: 70/30 stratified split (seed 0),
StandardScaler and PCA fitted on the training part, k = 3, mu = 0.5.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/start_scale.py

writes ``benchmarks/results/start_scale.md``.
"""

import argparse
import os
import pathlib
import platform
import time

import numpy as np

import metricopt as mo
from metricopt import datasets

HERE = pathlib.Path(__file__).resolve().parent


SMALL = {
    "digits-300": lambda home: datasets.load_digits(),
    "usps-300": datasets.load_usps,
    "mnist-300": datasets.load_mnist_5k,
    "breast_cancer-300": lambda home: datasets.load_breast_cancer(),
}


def load(name, data_home):
    if name == "digits-pca30":
        X, y = datasets.load_digits()
        scale, pca = "standard", 30
    elif name == "usps-pca50":
        X, y = datasets.load_usps(data_home)
        scale, pca = "standard", 50
    elif name == "letter":
        X, y = datasets.load_letter_recognition(data_home)
        scale, pca = "standard", None
    elif name in SMALL:
        # issue 13's "n = 300, d = 30" sets: 300 points (stratified, seed 0), standardised, PCA to 30
        X, y = SMALL[name](data_home)
        keep, _ = next(iter(datasets.random_splits(y, n_splits=1, test_size=1.0 - 300 / len(y), seed=0)))
        Xs, _ = datasets.preprocess(X[keep], None, scale="standard", pca=30 if X.shape[1] > 30 else None)
        return Xs, y[keep]
    else:
        raise ValueError(name)
    train, _ = next(iter(datasets.random_splits(y, n_splits=1, test_size=0.3, seed=0)))
    Xtr, _ = datasets.preprocess(X[train], None, scale=scale, pca=pca)
    return Xtr, y[train]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["digits-pca30", "usps-pca50", "letter"])
    ap.add_argument("--data-home", default=os.environ.get("METRICOPT_DATA", str(HERE.parent.parent / "shared" / "data")))
    ap.add_argument("--out", default=str(HERE / "results" / "start_scale.md"))
    args = ap.parse_args()
    from metricopt.backends.jax.backend import _scan_scale, best_scale

    rows = []
    for name in args.datasets:
        X, y = load(name, args.data_home)
        P = mo.LMNNProblem(X, y, k=3, mu=0.5)
        I = np.eye(P.d)
        P.objective(I)  # warm caches (target neighbours etc.) outside the timings
        t = time.perf_counter()
        c_new = best_scale(P)
        t_new = time.perf_counter() - t
        t = time.perf_counter()
        c_old = _scan_scale(P, I)
        t_old = time.perf_counter() - t
        f_new, f_old = P.objective(c_new * I), P.objective(c_old * I)
        row = (f"| {name} ({X.shape[0]} x {X.shape[1]}) | {c_new:.6g} | {f_new:.6f} | {t_new:.2f} | {c_old:.6g} | "
               f"{f_old:.6f} | {t_old:.2f} | {t_old / t_new:.1f}x |")
        print(row, flush=True)
        rows.append(row)
    head = [
        "# Starting scale of the JAX LMNN solve: one search vs a search per evaluation",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M')} by `OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python "
        f"benchmarks/start_scale.py` on {platform.machine()}, {os.cpu_count()} CPUs (shared), Python "
        f"{platform.python_version()}. Objective: LMNN (JMLR 2009 Eq. 14), k = 3, mu = 0.5, over all triplets of "
        "the training part, at c I. See the script's docstring.",
        "",
        "| data (n_train x d) | c, one search (new) | f(c I) | s | c, scan (former) | f(c I) | s | speed-up |",
        "|---|---|---|---|---|---|---|---|",
    ]
    pathlib.Path(args.out).write_text("\n".join(head + rows) + "\n", encoding="utf-8")
    print(args.out)


if __name__ == "__main__":
    main()
