"""Issue 13's targets for LMNN, against metric-learn and PyLMNN, side by side in one run.

For each data set (k = 3, mu = 0.5, the same target neighbours for every library):

* ``digits-pca30``, ``usps-pca50``, ``letter``: 70/30 stratified split (seed 0), StandardScaler and PCA
  fitted on the training part; ``digits-300``, ``usps-300``, ``mnist-300``, ``breast_cancer-300``: 300
  points (stratified, seed 0), standardised, PCA to 30 (breast cancer has 30 features);
* metric-learn 0.7.0 ``LMNN`` (settings as in ``lmnn_anchors.py``): its fit time ``T_ml`` and the
  objective of JMLR 2009 Eq. 14 at its metric, ``f_ml`` (evaluated by metricopt over all triplets);
* PyLMNN 1.6.4 (``--pylmnn``; settings as in ``lmnn_anchors.py``; it minimises a *squared* hinge, so
  its Eq. 14 objective is shown for reference, not as a target);
* metricopt's default JAX solve with ``tol=1e-3``: the time at which its re-checked exact objective
  first reaches ``f_ml`` (a callback records every re-check; callback time excluded), the time to its
  certified relative gap of 1e-3 (the solve's own time when it ends ``optimal``), the share of that
  time spent in certificates, and the process's peak resident memory during the solve (``VmHWM``
  after resetting it through ``/proc/self/clear_refs``; Linux);
* metricopt's default solve ``tol=1e-6`` (n_train <= --small-n only);
* metricopt's exact backend with its defaults (n_train <= --exact-n only; ``init="auto"``).

Times are wall seconds on this machine, ratios are against ``T_ml``. The targets of issue 13:
digits PCA-30: ``f_ml`` in <= 0.1x, certified 1e-3 in <= 0.5x, the 1e-6 solve in <= 1x; the 300-point
sets: the 1e-6 solve in < 20 s and the exact backend in < 60 s; letter certified 1e-3 in < 60 s; USPS
PCA-50 in < 120 s; certificates < 20 % of every solve.

    pip install --no-deps metric-learn==0.7.0 PyLMNN==1.6.4 six
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/lmnn_fast.py --pylmnn \
        --datasets digits-pca30 digits-300 usps-300 mnist-300 breast_cancer-300 letter usps-pca50

writes ``benchmarks/results/lmnn_fast.md``; ``--label L --append`` adds rows measured with another
metricopt (e.g. ``PYTHONPATH=<checkout of an older commit>``) to the same table.
"""

import argparse
import os
import pathlib
import platform
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import metricopt as mo  # noqa: E402
from lmnn_anchors import _rss_mb, import_metric_learn, import_pylmnn  # noqa: E402
from start_scale import load  # noqa: E402

K, MU = 3, 0.5


def metric_learn_fit(X, y, T):
    ml = import_metric_learn()

    class LMNN(ml.LMNN):
        def _select_targets(self, X, label_inds):
            return T.astype(int)

    est = LMNN(n_neighbors=K, regularization=1.0 - MU, init="identity", max_iter=100_000, min_iter=50,
               learn_rate=1e-7, convergence_tol=1e-3)
    t = time.perf_counter()
    est.fit(X, y)
    return time.perf_counter() - t, est.get_mahalanobis_matrix()


def pylmnn_fit(X, y, T):
    pm = import_pylmnn()

    class LargeMarginNearestNeighbor(pm.LargeMarginNearestNeighbor):
        def _select_target_neighbors_wrapper(self, X, y, classes=None):
            return T.astype(np.intp)

    est = LargeMarginNearestNeighbor(n_neighbors=K, weight_push_loss=float(MU), init="identity", max_iter=100_000,
                                     tol=1e-5, max_impostors=500_000, random_state=0)
    t = time.perf_counter()
    est.fit(X, y)
    L = est.components_
    return time.perf_counter() - t, L.T @ L


def reset_peak():
    """Reset the process's peak resident memory (Linux: ``/proc/self/clear_refs``); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def jax_solve(P, tol, target=None):
    """The default JAX solve; returns (seconds, solution, seconds until the exact objective <= target, peak MB)."""
    seen = {"reach": None, "cb": 0.0}
    can_peak = reset_peak()
    t0 = time.perf_counter()

    def callback(info):
        tc = time.perf_counter()
        if target is not None and seen["reach"] is None and info["objective"] <= target:
            seen["reach"] = tc - t0 - seen["cb"]
        seen["cb"] += time.perf_counter() - tc

    sol = P.solve(backend="jax", tol=tol, callback=callback if target is not None else None)
    return time.perf_counter() - t0 - seen["cb"], sol, seen["reach"], _rss_mb("VmHWM") if can_peak else None


def describe(t, sol, t_ml):
    gap = sol.stats.get("certificate_rel_gap")
    share = sol.stats.get("certify_time", 0.0) / max(t, 1e-12)
    return (f"{t:.1f} ({t / t_ml:.2f}x), {sol.status}, gap {float('nan') if gap is None else gap:.1e}, "
            f"certificates {100 * share:.0f} %")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["digits-pca30"])
    ap.add_argument("--small-n", type=int, default=2000)
    ap.add_argument("--exact-n", type=int, default=500, help="run the exact backend up to this many points")
    ap.add_argument("--pylmnn", action="store_true", help="also fit PyLMNN 1.6.4")
    ap.add_argument("--data-home", default=os.environ.get("METRICOPT_DATA", str(HERE.parent.parent / "shared" / "data")))
    ap.add_argument("--out", default=str(HERE / "results" / "lmnn_fast.md"))
    ap.add_argument("--label", default="this checkout", help="what metricopt is (first column), e.g. a commit")
    ap.add_argument("--append", action="store_true", help="add the rows to an existing --out file")
    args = ap.parse_args()
    rows = []
    X0, y0 = load("digits-300", args.data_home)
    jax_solve(mo.LMNNProblem(X0[:200], y0[:200], k=K, mu=MU), 1e-2)  # warm JAX's own start-up, not the problem's
    for name in args.datasets:
        X, y = load(name, args.data_home)
        P = mo.LMNNProblem(X, y, k=K, mu=MU)
        t_ml, M_ml = metric_learn_fit(X, y, P.target_neighbors)
        f_ml = P.objective(M_ml)
        cells = [f"{name} ({X.shape[0]} x {X.shape[1]})", args.label, f"{t_ml:.1f}", f"{f_ml:.2f}"]
        if args.pylmnn:
            t_pl, M_pl = pylmnn_fit(X, y, P.target_neighbors)
            cells.append(f"{t_pl:.1f} ({t_pl / t_ml:.2f}x), f {P.objective(M_pl):.2f}")
        else:
            cells.append("not run")
        t3, s3, reach, peak = jax_solve(P, 1e-3, target=f_ml)
        cells += ["not reached" if reach is None else f"{reach:.1f} ({reach / t_ml:.2f}x)",
                  describe(t3, s3, t_ml) + f", f {P.objective(s3.M):.2f}"]
        if X.shape[0] <= args.small_n:
            t6, s6, _, _ = jax_solve(P, 1e-6)
            cells.append(describe(t6, s6, t_ml))
        else:
            cells.append("not run (n_train > --small-n)")
        if X.shape[0] <= args.exact_n:
            te = time.perf_counter()
            se = P.solve(backend="cvxpy")
            te = time.perf_counter() - te
            cells.append(f"{te:.1f} ({te / t_ml:.2f}x), {se.status}, gap {se.certificate.rel_gap:.1e}, "
                         f"start: {se.stats['init'].split(' (')[0]}")
        else:
            cells.append("not run (n_train > --exact-n)")
        cells.append("n/a" if peak is None else f"{peak:.0f}")
        row = "| " + " | ".join(cells) + " |"
        print(row, flush=True)
        rows.append(row)
    head = [
        "# LMNN: metricopt against metric-learn and PyLMNN (issue 13's targets)",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M')} by `OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python "
        f"benchmarks/lmnn_fast.py{' --pylmnn' if args.pylmnn else ''} --datasets {' '.join(args.datasets)} "
        f"--label \"{args.label}\"` on {platform.machine()}, {os.cpu_count()} CPUs (shared), Python "
        f"{platform.python_version()}; see the script's docstring. Ratios are to metric-learn's time. Targets: "
        "digits PCA-30: metric-learn's objective in <= 0.1x, certified 1e-3 in <= 0.5x, the 1e-6 solve in <= 1x; "
        "300-point sets: the 1e-6 solve < 20 s, the exact backend < 60 s; letter certified 1e-3 < 60 s, USPS PCA-50 "
        "< 120 s; certificates < 20 % of every solve.",
        "",
        "| data (n_train x d) | metricopt | metric-learn s | its objective f_ml | PyLMNN s, its Eq. 14 objective | "
        "metricopt: f <= f_ml after s | metricopt tol 1e-3 | metricopt tol 1e-6 | metricopt exact backend | "
        "peak RSS of the 1e-3 solve (MB) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    out = pathlib.Path(args.out)
    if args.append and out.exists():
        out.write_text(out.read_text(encoding="utf-8") + "\n".join(rows) + "\n", encoding="utf-8")
    else:
        out.write_text("\n".join(head + rows) + "\n", encoding="utf-8")
    print(args.out)


if __name__ == "__main__":
    main()
