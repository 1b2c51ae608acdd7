"""Brute force vs ball/kd trees for LMNN's three neighbour searches.

Times, on real data, the brute-force reference and the tree version
(:mod:`metricopt.balltree`, sklearn ``BallTree`` and ``KDTree``) of

* target neighbours (k = 3): ``constraints.target_neighbors`` vs ``balltree.tree_target_neighbors``;
* the impostor search, margin 0, at ``M = I`` and at scaled identities ``M = c I``
  (``Z = sqrt(c) X``): ``constraints.active_triplets`` vs ``balltree.tree_active_triplets``;
* 3-NN prediction of the test set at ``M = I``: ``knn.knn_predict`` vs ``balltree.knn_tree_predict``;

and checks that every tree result is identical to the brute-force one (triplets compared as sets,
sorted by (i, j, l), hinge values bit for bit).

Data (70/30 stratified split, seed 0, as ``benchmarks/lmnn_anchors.py``; scaling and PCA fitted on
the training part with ``metricopt.datasets.preprocess``):

* letter-recognition, standardized: 14,000 training / 6,000 test points, d = 16, 26 classes;
* USPS, standardized then PCA to 10, 25 and 50 dimensions: 7,700 / 3,300 points, 10 classes.

BLAS is pinned to ``--threads`` threads (default 1) through ``OPENBLAS_NUM_THREADS``,
``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` set before numpy is imported: scikit-learn's tree
queries are single-threaded, so one BLAS thread compares one core with one core (and the benchmark
machine is shared). Each timing is the minimum over ``--repeats`` runs (fewer when one run takes
longer than ``--budget`` seconds), the minimum being the least disturbed by other load.

Usage::

    python benchmarks/ball_trees.py [--data /work/shared/data] [--threads 1] [--repeats 3]
        [--scales 0.25 4] [--out benchmarks/results/ball_trees.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time


def _parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("METRICOPT_DATA", "/work/shared/data"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=8.0, help="stop repeating once one run took this long (s)")
    ap.add_argument("--scales", type=float, nargs="*", default=[0.25, 4.0], help="c of the scaled identities M = c I")
    ap.add_argument("--datasets", nargs="*", default=["letter", "usps-pca10", "usps-pca25", "usps-pca50"])
    ap.add_argument("--sweep", nargs="*", default=["letter", "usps-pca25", "usps-pca50"],
                    help="data sets whose first 1000/2000/4000 training points time the impostor search")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "ball_trees.md"))
    return ap.parse_args()


ARGS = _parse()
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = str(ARGS.threads)

import numpy as np  # noqa: E402
import scipy  # noqa: E402
import sklearn  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.neighbors import BallTree  # noqa: E402

import metricopt  # noqa: E402
from metricopt import balltree, datasets  # noqa: E402
from metricopt.constraints import active_triplets, target_neighbors  # noqa: E402
from metricopt.knn import knn_predict  # noqa: E402

K = 3
TREES = ("ball", "kd")


def load(name):
    if name == "letter":
        X, y = datasets.load_letter_recognition(ARGS.data)
        pca = None
    else:
        X, y = datasets.load_usps(ARGS.data)
        pca = int(name.split("pca")[1])
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    Xtr, Xte = datasets.preprocess(Xtr, Xte, scale="standard", pca=pca)
    return Xtr, ytr, Xte, yte


def timed(f):
    """(result of the first run, min wall time over the runs)."""
    best, out = np.inf, None
    for r in range(ARGS.repeats):
        t = time.perf_counter()
        res = f()
        dt = time.perf_counter() - t
        best = min(best, dt)
        if r == 0:
            out = res
        del res
        if dt > ARGS.budget:
            break
    return out, best


def canonical(res):
    i, j, l, h = res
    o = np.lexsort((l, j, i))
    return i[o], j[o], l[o], h[o]


def same_triplets(a, b):
    return all(np.array_equal(u, v) for u, v in zip(canonical(a), b))


def bench_dataset(name):
    Xtr, ytr, Xte, yte = load(name)
    rows = []
    base = dict(data=name, n=Xtr.shape[0], n_test=Xte.shape[0], d=Xtr.shape[1])

    T, tb = timed(lambda: target_neighbors(Xtr, ytr, K))
    row = dict(base, task=f"target neighbours (k={K})", brute=tb)
    same, notes = True, []
    for tr in TREES:
        (Tt, st), tt = timed(lambda: balltree.tree_target_neighbors(Xtr, ytr, K, tree=tr, return_stats=True))
        row[tr] = tt
        same &= np.array_equal(T, Tt)
        notes.append(str(st["recomputed"]))
    row.update(identical=same, size=f"{' / '.join(notes)} rows recomputed")
    rows.append(row)
    print(row, flush=True)

    for c in [1.0] + list(ARGS.scales):
        Z = np.sqrt(c) * Xtr
        ref, tb = timed(lambda: active_triplets(Z, ytr, T, 0.0))
        row = dict(base, task="impostors, M = I" if c == 1.0 else f"impostors, M = {c:g} I", brute=tb)
        same = True
        for tr in TREES:
            got, tt = timed(lambda: balltree.tree_active_triplets(Z, ytr, T, 0.0, tree=tr))
            row[tr] = tt
            same &= same_triplets(ref, got)
        row.update(identical=same, size=f"{ref[0].size:,} triplets")
        rows.append(row)
        print(row, flush=True)
        del ref, got

    pred, tb = timed(lambda: knn_predict(Xtr, ytr, Xte, K))
    row = dict(base, task=f"{K}-NN test prediction", brute=tb)
    same, notes = True, []
    for tr in TREES:
        (pt, st), tt = timed(lambda: balltree.knn_tree_predict(Xtr, ytr, Xte, K, tree=tr, return_stats=True))
        row[tr] = tt
        same &= np.array_equal(pred, pt)
        notes.append(str(st["recomputed"]))
    row.update(identical=same, size=f"{' / '.join(notes)} rows recomputed; test error {np.mean(pred != yte):.3f}")
    rows.append(row)
    print(row, flush=True)
    return rows, (Xtr, ytr, T)


def member_vs_complement(Xtr, ytr, T):
    """Candidate generation only (build + radius queries, ball trees, M = I): one tree per class
    over its members, queried by the other classes' anchors (what balltree does), against one tree
    per class over its complement, queried by the class's own anchors."""
    dt = np.einsum("bkd,bkd->bk", Xtr[T] - Xtr[:, None], Xtr[T] - Xtr[:, None])
    rad = np.sqrt((dt.max(1) + 1.0) * (1 + 1e-9))
    classes = np.unique(ytr)

    def members():
        for c in classes:
            tree = BallTree(Xtr[ytr == c])
            q = ytr != c
            tree.query_radius(Xtr[q], rad[q])

    def complement():
        for c in classes:
            tree = BallTree(Xtr[ytr != c])
            q = ytr == c
            tree.query_radius(Xtr[q], rad[q])

    return timed(members)[1], timed(complement)[1]


def sweep(name, sizes=(1000, 2000, 4000)):
    """Impostor search (M = I, margin 0) on the first n training points: where the ball tree starts to pay."""
    Xtr, ytr, _, _ = load(name)
    out = []
    for n in sizes:
        Xs, ys = Xtr[:n], ytr[:n]
        T = target_neighbors(Xs, ys, K)
        tb = timed(lambda: active_triplets(Xs, ys, T, 0.0))[1]
        tt = timed(lambda: balltree.tree_active_triplets(Xs, ys, T, 0.0))[1]
        out.append((name, n, Xs.shape[1], tb, tt))
        print("sweep", out[-1], flush=True)
    return out


def fmt(t):
    return f"{t:.3f}" if t < 10 else f"{t:.1f}"


def main():
    t0 = time.time()
    load0 = os.getloadavg()
    all_rows, extra = [], None
    for name in ARGS.datasets:
        rows, data = bench_dataset(name)
        all_rows += rows
        if name == "letter":
            extra = member_vs_complement(*data)
            print("member vs complement", extra, flush=True)
    sweeps = []
    for name in ARGS.sweep:
        sweeps += sweep(name)
    load1 = os.getloadavg()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    lines = [
        "# Brute force vs ball/kd trees for LMNN's neighbour searches",
        "",
        f"Command: `python benchmarks/ball_trees.py {' '.join(sys.argv[1:])}`".rstrip() + "; "
        f"BLAS pinned to {ARGS.threads} thread(s) (`OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = MKL_NUM_THREADS = "
        f"{ARGS.threads}`, set before numpy is imported; scikit-learn's tree queries are single-threaded). "
        f"{cpu}, {os.cpu_count()} cores, shared with another running benchmark (load average "
        f"{load0[0]:.1f} at the start, {load1[0]:.1f} at the end), so timings carry noise of tens of percent; "
        f"each is the minimum over up to {ARGS.repeats} runs (one run when it took more than {ARGS.budget:g} s). "
        f"Python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"scikit-learn {sklearn.__version__}, metricopt {metricopt.__version__}. Total {time.time() - t0:.0f} s.",
        "",
        "Data: 70/30 stratified split (seed 0); standardization (and PCA) fitted on the training part with "
        "`datasets.preprocess`. letter-recognition: 14,000 training points, d = 16, 26 classes; USPS: 7,700 "
        "training points, 10 classes, PCA to 10, 25, 50 dimensions. k = 3 target neighbours in the input "
        "space; impostor search at margin 0 with `Z = sqrt(c) X` for `M = c I`; 3-NN prediction of the test "
        "set at `M = I`. Trees use `leaf_size = 40`. Speed-up = brute time / tree time (> 1: tree faster). "
        "\"identical\": every tree result equals the brute-force result (target neighbours element for "
        "element; triplets as sets, hinge values bit for bit; kNN predictions). \"rows recomputed\": rows "
        "whose order the tree could not certify against rounding (ties, duplicated points) and that were "
        "recomputed with the reference arithmetic (ball / kd).",
        "",
        "| data | n train | d | task | brute (s) | ball tree (s) | kd tree (s) | speed-up ball | speed-up kd "
        "| identical | size | `choose_search` |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in all_rows:
        lines.append(
            f"| {r['data']} | {r['n']:,} | {r['d']} | {r['task']} | {fmt(r['brute'])} | {fmt(r['ball'])} | "
            f"{fmt(r['kd'])} | {r['brute'] / r['ball']:.2f} | {r['brute'] / r['kd']:.2f} | "
            f"{'yes' if r['identical'] else '**NO**'} | {r['size']} | {balltree.choose_search(r['n'], r['d'])} |"
        )
    if extra is not None:
        lines += [
            "",
            f"Impostor candidates on letter (M = I, ball trees, build + radius queries only): one tree per class "
            f"over its members, queried by the other classes' anchors (the layout `tree_active_triplets` uses): "
            f"{fmt(extra[0])} s; one tree per class over the differently labelled points, queried by the class's "
            f"own anchors: {fmt(extra[1])} s.",
        ]
    if sweeps:
        lines += [
            "",
            "Impostor search (M = I, margin 0, ball tree) on the first n training points:",
            "",
            "| data | n | d | brute (s) | ball tree (s) | speed-up | `choose_search` |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, n, d, tb, tt in sweeps:
            lines.append(f"| {name} | {n:,} | {d} | {fmt(tb)} | {fmt(tt)} | {tb / tt:.2f} | "
                         f"{balltree.choose_search(n, d)} |")
    lines += [
        "",
        f"Rule (`metricopt.balltree.choose_search`): \"tree\" when n >= {balltree.TREE_MIN_N:,} and "
        f"d <= {balltree.TREE_MAX_DIM}, else \"brute\"; d is the dimension of the data the search runs on "
        "(after PCA / of `Z = X L^T`). See the function's docstring for the reasoning.",
    ]
    with open(ARGS.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
