"""LMNN's passes over all points: NumPy blocked search vs ball tree vs the JAX device search.

For each case, two passes (k = 3 target neighbours; the impostor search at margin 0):

* ``targets``: ``constraints.target_neighbors(device=False)`` vs ``balltree.tree_target_neighbors`` vs
  ``search.device_target_neighbors``;
* ``triplets``: ``constraints.active_triplets(device=False)`` vs ``balltree.tree_active_triplets`` vs
  ``search.device_active_triplets``.

Cases (``--cases``):

* ``digits``: digits PCA-30 (1,257 training points of ``jax_device.py``'s split), at ``M = I``;
* ``digits-learned``: the same at a learned-like metric, ``L = S_w^{-1/2}`` (the within-class covariance
  whitened: few impostors, as near LMNN's optimum);
* ``letter``: UCI letter, 14,000 training points (70/30 stratified split, seed 0, standardised) from
  ``--data`` (``$METRICOPT_DATA``); without the file a synthetic stand-in of the same shape (14,000 x 16,
  26 classes, ``jax_device.py``'s generator), marked ``letter-like``;
* ``synthetic20000``: ``jax_device.py``'s synthetic 20,000 x 50 (10 classes, seed 0), at ``M = I``;
* ``synthetic60000``: the same generator at 60,000 x 164 (MNIST's size after PCA), for an accelerator.

Times are wall seconds, the minimum over ``--repeats`` runs; the device column is a warm run (the kernel
compiled), the first call (with its compilations) in the "device first s" column. Agreement: the NumPy and
device triplets as sets (sorted by ``(i, j, l)``) and the largest ``|h_device - h_numpy|``; targets as the
share of equal rows. ``--skip numpy tree`` leaves those columns out (large cases on a GPU machine).

Runs without cvxpy (numpy, jax, scikit-learn and metricopt's constraints/balltree/search/datasets only)::

    OPENBLAS_NUM_THREADS=2 python benchmarks/device_search.py --out benchmarks/results/device_search.md
    python benchmarks/device_search.py --cases digits synthetic20000 synthetic60000 --skip-numpy-above 20000
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import shlex
import sys
import time

import jax
import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from jax_device import digits_pca30, synthetic  # noqa: E402

from metricopt import balltree, constraints, search  # noqa: E402

K = 3
CASES = ["digits", "digits-learned", "letter", "synthetic20000"]


def load_case(name, data):
    if name == "digits":
        X, y = digits_pca30()
        return "digits PCA-30, M = I", X, y
    if name == "digits-learned":
        X, y = digits_pca30()
        Xc = X - np.stack([X[y == c].mean(0) for c in np.unique(y)])[np.searchsorted(np.unique(y), y)]
        w, V = np.linalg.eigh(Xc.T @ Xc / X.shape[0])
        L = (V / np.sqrt(np.maximum(w, 1e-12))) @ V.T
        return "digits PCA-30, L = S_w^-1/2", X @ L.T, y
    if name == "letter":
        try:
            from sklearn.model_selection import train_test_split

            from metricopt import datasets

            X, y = datasets.load_letter_recognition(data)
            Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
            Xtr, _ = datasets.preprocess(Xtr, None, scale="standard")
            return "letter, M = I", np.asarray(Xtr, dtype=np.float64), np.asarray(ytr)
        except Exception as exc:  # no data file: a synthetic stand-in of the same shape
            print(f"letter not available ({type(exc).__name__}): synthetic 14,000 x 16, 26 classes", flush=True)
            X, y = synthetic(14000, 16, classes=26)
            return "letter-like synthetic, M = I", X, y
    if name.startswith("synthetic"):
        n = int(name[len("synthetic"):])
        d = 164 if n >= 60000 else 50
        X, y = synthetic(n, d)
        return f"synthetic {n:,} x {d}, M = I", X, y
    raise SystemExit(f"unknown case {name!r}")


def timed(f, repeats):
    best, out = np.inf, None
    for r in range(repeats):
        t = time.perf_counter()
        res = f()
        best = min(best, time.perf_counter() - t)
        if r == 0:
            out = res
    return out, best


def canonical(found):
    i, j, l, h = found
    o = np.lexsort((l, j, i))
    return i[o], j[o], l[o], h[o]


def agreement(a, b):
    """'max|dh| = ...' when the sets are equal, else how many triplets differ (and their h)."""
    a, b = canonical(a), canonical(b)
    if a[0].size == b[0].size and all(np.array_equal(p, q) for p, q in zip(a[:3], b[:3])):
        if np.array_equal(a[3], b[3]):
            return "same set, h bit for bit (max abs dh 0)"
        return f"same set, max abs dh {np.abs(a[3] - b[3]).max(initial=0.0):.1e}"
    ka = set(zip(*(x.tolist() for x in a[:3])))
    kb = set(zip(*(x.tolist() for x in b[:3])))
    return f"{len(ka ^ kb)} triplets differ"


def run_case(name, args, rows):
    label, X, y = load_case(name, args.data)
    n, d = X.shape
    skip_host = args.skip_numpy_above is not None and n > args.skip_numpy_above
    kind = f"{search.default_platform()} ({jax.devices()[0].device_kind})"
    print(f"== {label}: n={n}, d={d}, device {kind}", flush=True)
    # target neighbours
    t0 = time.perf_counter()
    T_dev = search.device_target_neighbors(X, y, K)
    first = time.perf_counter() - t0
    T_dev, t_dev = timed(lambda: search.device_target_neighbors(X, y, K), args.repeats)
    if skip_host:
        t_np = t_tree = None
        agree = "-"
    else:
        T_np, t_np = timed(lambda: constraints.target_neighbors(X, y, K, device=False), args.repeats)
        _, t_tree = timed(lambda: balltree.tree_target_neighbors(X, y, K), args.repeats)
        agree = f"{np.mean(np.all(T_np == T_dev, axis=1)):.4%} rows equal"
    rows.append(dict(case=label, pass_="targets", n=n, d=d, found=n * K, numpy=t_np, tree=t_tree, device=t_dev,
                     first=first, kind=kind, agree=agree))
    print(rows[-1], flush=True)
    T = T_dev
    # the impostor search at margin 0
    t0 = time.perf_counter()
    found = search.device_active_triplets(X, y, T)
    first = time.perf_counter() - t0
    found, t_dev = timed(lambda: search.device_active_triplets(X, y, T), args.repeats)
    if skip_host:
        t_np = t_tree = None
        agree = "-"
    else:
        ref, t_np = timed(lambda: constraints.active_triplets(X, y, T, device=False), args.repeats)
        _, t_tree = timed(lambda: balltree.tree_active_triplets(X, y, T), args.repeats)
        agree = agreement(found, ref)
    rows.append(dict(case=label, pass_="triplets", n=n, d=d, found=int(found[0].size), numpy=t_np, tree=t_tree,
                     device=t_dev, first=first, kind=kind, agree=agree))
    print(rows[-1], flush=True)


def fmt(x):
    return "-" if x is None else f"{x:.3f}"


def write(rows, args, out):
    cmd = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, HERE.parent)] + sys.argv[1:])
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "unset")
    lines = [
        "# LMNN's whole-set passes: NumPy blocked vs ball tree vs JAX device search",
        "",
        f"Command: `OPENBLAS_NUM_THREADS={threads} {cmd}`",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"numpy {np.__version__}, jax {jax.__version__}; k = {K}, margin 0; wall seconds, the minimum "
        f"of {args.repeats} runs; device s: warm, device first s: the first call with its compilations.",
        "",
        "| case | pass | n | d | triplets found | numpy s | tree s | device s | device first s | device kind |"
        " agreement |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['case']} | {r['pass_']} | {r['n']:,} | {r['d']} | {r['found']:,} | {fmt(r['numpy'])} | "
                     f"{fmt(r['tree'])} | {fmt(r['device'])} | {fmt(r['first'])} | {r['kind']} | {r['agree']} |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="*", default=CASES)
    ap.add_argument("--data", default=os.environ.get("METRICOPT_DATA", str(HERE.parent.parent / "shared" / "data")))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--skip-numpy-above", type=int, default=None,
                    help="leave out the NumPy and tree timings for cases with more points than this")
    ap.add_argument("--out", default=str(HERE / "results" / "device_search.md"))
    args = ap.parse_args(argv)
    rows: list[dict] = []
    for name in args.cases:
        run_case(name, args, rows)
        write(rows, args, pathlib.Path(args.out))
    print(pathlib.Path(args.out).read_text())


if __name__ == "__main__":
    main()
