"""LMNN anchors: metricopt against metric-learn and PyLMNN on the same data, target neighbours and objective.

Every method is scored on *our* objective, LMNN of Weinberger & Saul (JMLR 10:207-244, 2009, Eq. 14)
with k = 3 target neighbours and mu = 0.5 (pull weight 1 - mu = 0.5, push weight mu = 0.5, no
regulariser), over *all* triplets of the training part, at the metric the method returns:
``p.objective(M)``, the certified relative gap ``metricopt.certify(p, M).rel_gap`` and the 3-NN test
error ``metricopt.knn_error(X_train, y_train, X_test, y_test, k=3, M=M)``.

Run by hand (never imported by the test suite)::

    OPENBLAS_NUM_THREADS=2 python benchmarks/lmnn_anchors.py [--datasets iris wine ...] \
        [--methods ...] [--time-limit 600] [--threads 2] [--out benchmarks/results/lmnn_anchors.md]

Methods (``--methods``)
-----------------------
``exact``            ``LMNNProblem(X, y, k=3, mu=0.5).solve()``: cvxpy/SCS, working set (refuses d > 150: "n/a").
``jax-subgradient``  ``p.solve(backend="jax", solver="subgradient", tol=1e-3, time_limit=--subgradient-time)``,
                     the reference (Weinberger & Saul, Appendix A).
``jax-fista``        ``p.solve(backend="jax", tol=1e-3, time_limit=--time-limit)``, the default solver; the
                     reference for the time ratios.
``jax-fista-1e-6``   the same with ``tol=1e-6`` (small sets only: n_train <= --small-n).
``metric-learn``     ``metric_learn.LMNN`` 0.7.0 (gradient descent on L with M = L^T L, the step grown by 1.01
                     after a decrease and halved after an increase). Its ``regularization`` weights the pull
                     term, i.e. ``1 - mu``: ``regularization=0.5``. Settings: ``n_neighbors=3, init="identity",
                     max_iter=100000, min_iter=50, learn_rate=1e-7`` (its default), ``convergence_tol=1e-3``
                     (its default: absolute change of its objective, which equals ours at L).
``pylmnn``           ``pylmnn.LargeMarginNearestNeighbor`` 1.6.4 (L-BFGS-B on L, *squared* hinge; objective
                     normalised so that the push weight is 1 and the pull weight (1 - mu)/mu = 1). Settings:
                     ``n_neighbors=3, weight_push_loss=0.5, init="identity", max_iter=100000, tol=1e-5``
                     (its default), ``max_impostors=500000`` (its default: impostors are subsampled above it).
``sdp``              the textbook SDP, one slack per triplet: ``cp_prob, V = p.to_cvxpy()`` solved by plain
                     ``cp_prob.solve(solver="SCS", eps_abs=1e-6, eps_rel=1e-6, max_iters=100000)``; iris and wine
                     only (others: "skipped (too large: N triplets)").
``euclidean``        ``M = I`` (no fit): the baseline.

Same target neighbours: both anchors get metricopt's target neighbours (``p.target_neighbors``: the k nearest
same-class points by Euclidean distance in the standardised training data, ties to the lower index, sorted
nearest first as both libraries sort their own) through a subclass that overrides only their target
neighbour selection (``LMNN._select_targets`` / ``LargeMarginNearestNeighbor._select_target_neighbors_wrapper``);
the notes column says in how many rows the library's own choice would have differed.

Compatibility shims (applied in the child process that runs the anchor; none changes an algorithm)
---------------------------------------------------------------------------------------------------
1. metric-learn 0.7.0 passes ``force_all_finite=`` to ``sklearn.utils.check_array`` / ``check_X_y``, a keyword
   scikit-learn 1.8 renamed ``ensure_all_finite``: ``metric_learn._util.check_array`` and ``check_X_y`` (the
   names its ``check_input`` calls) are wrapped to translate the keyword.
2. PyLMNN 1.6.4 imports GPyOpt at import time (``pylmnn/bayesopt.py``, hyperparameter search only): a dummy
   ``GPyOpt`` / ``GPyOpt.methods`` module with a placeholder ``BayesianOptimization`` is put into
   ``sys.modules`` before ``import pylmnn``.
3. PyLMNN 1.6.4 passes its 2-D initial transformation as ``x0`` to ``scipy.optimize.minimize``, which recent
   SciPy rejects: ``pylmnn.lmnn.minimize`` (the name in its module namespace) is replaced by a wrapper that
   ravels ``x0`` (PyLMNN reshapes ``x`` itself in its loss and at the end).
4. PyLMNN needs ``six`` (``pip install six``).
5. PyLMNN's ``_check_scalar(tol, 'tol', float, ...)`` rejects NumPy floats; plain Python floats are passed.

Install the anchors with ``pip install --no-deps metric-learn==0.7.0 PyLMNN==1.6.4 six`` (``--no-deps`` keeps
the installed numpy / scikit-learn / scipy).

Measurement
-----------
Each (dataset, method) runs in a fresh child process (this script with ``--single``), whose environment
pins ``OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = MKL_NUM_THREADS = --threads`` before numpy is imported
(and ``JAX_PLATFORMS=cpu``). In the child, data loading, preprocessing, building the problem (target
neighbours) and importing the libraries (jax included) happen before the clock starts; the wall time is
the fit call only (for metricopt's JAX backend: including jit compilation and the certificates its
stopping rule takes; for the exact backend: including its final certificate). The peak memory is the
child's own ``ru_maxrss`` read right after the fit: the whole process (Python, numpy/scipy/sklearn, metricopt
and cvxpy, jax where used, the data) up to the end of the fit, not the evaluation; the RSS just before the
fit is given beside it. A fit that exceeds ``--time-limit`` seconds is interrupted (SIGALRM in the child,
and a hard kill by the parent after a grace period) and reported as "timeout (> N s)".
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

DATASETS = ("iris", "wine", "balance-scale", "digits-pca30", "digits", "usps-pca50", "letter")  # cheap first
METHODS = ("exact", "jax-subgradient", "jax-fista", "jax-fista-1e-6", "metric-learn", "pylmnn", "sdp", "euclidean")
LABELS = {
    "exact": "metricopt exact (cvxpy/SCS, working set)",
    "jax-subgradient": "metricopt JAX subgradient (reference), tol 1e-3",
    "jax-fista": "metricopt JAX default (FISTA), tol 1e-3",
    "jax-fista-1e-6": "metricopt JAX default (FISTA), tol 1e-6",
    "metric-learn": "metric-learn 0.7.0 LMNN",
    "pylmnn": "PyLMNN 1.6.4",
    "sdp": "textbook SDP (plain CVXPY/SCS)",
    "euclidean": "Euclidean (M = I)",
}
REFERENCE = "jax-fista"
SDP_DATASETS = ("iris", "wine")
K, MU = 3, 0.5


# ----------------------------------------------------------------------------------------- data
def data_home(arg=None):
    if arg:
        return Path(arg)
    if os.environ.get("METRICOPT_DATA"):
        return Path(os.environ["METRICOPT_DATA"])
    for cand in (REPO.parent / "shared" / "data", Path("/work/shared/data")):
        if cand.is_dir():
            return cand
    return REPO.parent / "shared" / "data"


def _fallback_raw(name, home):
    """Loaders used until ``metricopt.datasets`` exists: float64 X, int labels."""
    import numpy as np

    if name == "balance-scale" or name == "letter":
        fname = "balance-scale.data" if name == "balance-scale" else "letter-recognition.data"
        rows = [ln.strip().split(",") for ln in open(home / "uci" / fname) if ln.strip()]
        labels = np.array([r[0] for r in rows])
        X = np.array([[float(v) for v in r[1:]] for r in rows], dtype=np.float64)
        _, y = np.unique(labels, return_inverse=True)
        return X, y.astype(np.int64)
    if name == "usps":
        from scipy.io import loadmat

        d = loadmat(home / "digits" / "USPS.mat")
        return d["fea"].astype(np.float64), d["gnd"].ravel().astype(np.int64) - 1
    raise KeyError(name)


def load(name, home):
    """``(X_train, y_train, X_test, y_test, loader)``: 70/30 stratified split (seed 0); the scaler (and PCA)
    fitted on the training part only."""
    import numpy as np
    from sklearn import datasets as skd
    from sklearn.decomposition import PCA
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    pca = {"digits-pca30": 30, "usps-pca50": 50}.get(name)
    try:
        from metricopt import datasets as mod_ds  # written by another engineer; used once it exists
    except ImportError:
        mod_ds = None
    loader = "sklearn.datasets"
    if name in ("iris", "wine", "digits", "digits-pca30"):
        fn = {"iris": skd.load_iris, "wine": skd.load_wine}.get(name, skd.load_digits)
        X, y = fn(return_X_y=True)
    else:
        raw = {"balance-scale": "balance_scale", "letter": "letter_recognition", "usps-pca50": "usps"}[name]
        fn = getattr(mod_ds, f"load_{raw}", None) if mod_ds is not None else None
        if fn is not None:
            X, y = fn(home)
            loader = f"metricopt.datasets.load_{raw}"
        else:
            X, y = _fallback_raw("usps" if name == "usps-pca50" else name, home)
            loader = "fallback loader in benchmarks/lmnn_anchors.py"
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    prep = getattr(mod_ds, "preprocess", None) if mod_ds is not None else None
    if prep is not None:
        Xtr, Xte = prep(Xtr, Xte, scale="standard", pca=pca)
        loader += " + metricopt.datasets.preprocess"
    else:
        sc = StandardScaler().fit(Xtr)
        Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
        if pca:
            p = PCA(n_components=pca, random_state=0).fit(Xtr)
            Xtr, Xte = p.transform(Xtr), p.transform(Xte)
    return np.ascontiguousarray(Xtr, dtype=np.float64), ytr, np.ascontiguousarray(Xte, dtype=np.float64), yte, loader


# ----------------------------------------------------------------------------------------- shims
def import_metric_learn():
    import metric_learn._util as mlu

    def translate(fn):
        def wrapper(*a, **kw):
            if "force_all_finite" in kw:
                kw["ensure_all_finite"] = kw.pop("force_all_finite")
            return fn(*a, **kw)

        wrapper.__wrapped__ = fn
        return wrapper

    if not hasattr(mlu.check_array, "__wrapped__"):
        mlu.check_array = translate(mlu.check_array)
        mlu.check_X_y = translate(mlu.check_X_y)
    import metric_learn

    return metric_learn


def import_pylmnn():
    import types

    if "GPyOpt" not in sys.modules:
        gp = types.ModuleType("GPyOpt")
        gpm = types.ModuleType("GPyOpt.methods")

        class BayesianOptimization:  # placeholder: only pylmnn.find_hyperparams would use it
            def __init__(self, *a, **kw):
                raise ImportError("GPyOpt is not installed (dummy module inserted by benchmarks/lmnn_anchors.py)")

        gpm.BayesianOptimization = BayesianOptimization
        gp.methods = gpm
        sys.modules["GPyOpt"] = gp
        sys.modules["GPyOpt.methods"] = gpm
    import numpy as np
    import pylmnn
    import pylmnn.lmnn as pl

    if not hasattr(pl.minimize, "__wrapped__"):
        orig = pl.minimize

        def minimize(*a, **kw):
            if "x0" in kw:
                kw["x0"] = np.ravel(kw["x0"])
            return orig(*a, **kw)

        minimize.__wrapped__ = orig
        pl.minimize = minimize
    return pylmnn


# ----------------------------------------------------------------------------------------- child
class _Timeout(Exception):
    pass


def _rss_mb(field="VmRSS", pid="self"):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def metricopt_source():
    """``(sha1 of metricopt/**/*.py, git HEAD, dirty)``: which metricopt code a row was measured with
    (the library changes between runs of a long benchmark)."""
    import hashlib

    import metricopt

    root = Path(metricopt.__file__).resolve().parent
    h = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    head, dirty = "?", None
    try:
        git = ["git", "-C", str(root.parent)]
        head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = bool(subprocess.run(git + ["status", "--porcelain", "--", "metricopt"], capture_output=True,
                                    text=True).stdout.strip())
    except OSError:
        pass
    return h.hexdigest()[:10], head, dirty


def run_single(ds, method, args):
    """Fit one method on one data set; returns a JSON-able dict."""
    import resource

    import numpy as np

    import metricopt as mo

    home = data_home(args.data_home)
    Xtr, ytr, Xte, yte, loader = load(ds, home)
    p = mo.LMNNProblem(Xtr, ytr, k=K, mu=MU)
    T = p.target_neighbors
    res = {"dataset": ds, "method": method, "n_train": int(Xtr.shape[0]), "n_test": int(Xte.shape[0]),
           "d": int(Xtr.shape[1]), "n_triplets": int(p.n_triplets), "loader": loader, "notes": [],
           "source": metricopt_source()}
    notes = res["notes"]

    # skip rules (no fit)
    if method == "exact" and p.d > 150:
        res["skip"] = f"n/a (d = {p.d} > 150)"
        return res
    if method == "sdp" and ds not in SDP_DATASETS:
        res["skip"] = f"skipped (too large: {p.n_triplets:,} triplets)"
        return res
    if method == "jax-fista-1e-6" and p.n > args.small_n:
        res["skip"] = f"skipped (n_train > {args.small_n})"
        return res

    # imports and set-up before the clock starts
    fit = None
    if method.startswith("jax"):
        import jax  # noqa: F401

        if method == "jax-subgradient":
            fit = lambda: p.solve(backend="jax", solver="subgradient", tol=1e-3, time_limit=args.subgradient_time)
        elif method == "jax-fista":
            fit = lambda: p.solve(backend="jax", tol=1e-3, time_limit=float(args.time_limit))
        else:
            fit = lambda: p.solve(backend="jax", tol=1e-6, time_limit=float(args.time_limit))
    elif method == "exact":
        fit = lambda: p.solve()
    elif method == "sdp":
        import cvxpy as cp

        def fit():
            prog, V = p.to_cvxpy()
            prog.solve(solver="SCS", eps_abs=1e-6, eps_rel=1e-6, max_iters=100_000)
            return prog, V

        _ = cp
    elif method == "metric-learn":
        ml = import_metric_learn()

        class LMNN(ml.LMNN):
            def _select_targets(self, X, label_inds):
                return T.astype(int)

        own = ml.LMNN(n_neighbors=K)
        own.labels_ = np.arange(len(np.unique(ytr)))
        own_T = own._select_targets(Xtr, np.unique(ytr, return_inverse=True)[1])
        notes.append(f"own TN differ in {int(np.sum(np.any(np.sort(own_T, 1) != np.sort(T, 1), axis=1)))} rows")
        est = LMNN(n_neighbors=K, regularization=1.0 - MU, init="identity", max_iter=100_000, min_iter=50,
                   learn_rate=1e-7, convergence_tol=1e-3)
        fit = lambda: est.fit(Xtr, ytr)
    elif method == "pylmnn":
        pm = import_pylmnn()
        import pylmnn.lmnn as pl

        class LargeMarginNearestNeighbor(pm.LargeMarginNearestNeighbor):
            def _select_target_neighbors_wrapper(self, X, y, classes=None):
                return T.astype(np.intp)

        yi = np.unique(ytr, return_inverse=True)[1]
        own_T = pl._select_target_neighbors(Xtr, yi, K)
        notes.append(f"own TN differ in {int(np.sum(np.any(np.sort(own_T, 1) != np.sort(T, 1), axis=1)))} rows")
        est = LargeMarginNearestNeighbor(n_neighbors=K, weight_push_loss=float(MU), init="identity",
                                         max_iter=100_000, tol=1e-5, max_impostors=500_000,
                                         store_opt_result=True, random_state=0)
        fit = lambda: est.fit(Xtr, ytr)
    elif method == "euclidean":
        fit = lambda: None
    else:
        raise KeyError(method)

    # ---- the fit, timed, under an alarm
    def on_alarm(signum, frame):
        raise _Timeout()

    signal.signal(signal.SIGALRM, on_alarm)
    limit = int(args.time_limit) + (60 if method.startswith("jax") else 0)  # JAX stops itself at the limit
    res["rss_before_mb"] = _rss_mb()
    res["fit_started"] = time.time()
    with open(args.result + ".partial", "w") as f:  # the parent enforces the limit on C-level fits (SCS)
        json.dump(res, f)
    t0 = time.perf_counter()
    signal.alarm(limit)
    try:
        out = fit()
        res["time"] = time.perf_counter() - t0
    except _Timeout:
        res["time"] = time.perf_counter() - t0
        res["timeout"] = True
    except mo.ProblemTooLargeError as exc:  # the exact backend's refusal: "n/a", not a failure
        res["skip"] = f"n/a (refused: {exc})"[:300]
        return res
    except Exception as exc:  # reported, never hidden
        res["time"] = time.perf_counter() - t0
        res["error"] = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        signal.alarm(0)
    res["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    if res.get("timeout") or res.get("error"):
        return res

    # ---- the metric and the method's own report
    if method.startswith("jax") or method == "exact":
        sol = out
        res["status"] = sol.status.code
        st = sol.stats
        if method == "exact":
            notes.append(f"{st.get('rounds')} rounds, working set {st.get('working_set_size')}, "
                         f"{st.get('iterations')} SCS iters")
        else:
            notes.append(f"{st.get('iterations')} iters")
            if "certify_calls" in st:
                notes.append(f"{st['certify_calls']} certificates ({st.get('certify_time', 0):.1f} s)")
        if sol.certificate is not None:
            res["own_gap"] = sol.certificate.rel_gap
        if method.startswith("jax"):  # (iteration, seconds, exact objective, certified gap or None) at re-checks
            res["history"] = [(h["iteration"], h["time"], h["objective"], h.get("rel_gap"))
                              for h in st.get("history", [])]
        M = sol.M
        if M is None:
            res["error"] = f"no metric: {sol.message}"[:300]
            return res
    elif method == "sdp":
        prog, V = out
        res["status"] = str(prog.status)
        st = prog.solver_stats
        notes.append(f"{st.num_iters} SCS iters, {p.n_triplets:,} slacks")
        if V["_M"].value is None:
            res["error"] = f"no metric: {prog.status}"
            return res
        M = np.asarray(V["M"].value, dtype=np.float64)
        M = mo.linalg.project_psd((M + M.T) / 2)
    elif method == "metric-learn":
        L = est.components_
        M = L.T @ L
        conv = est.n_iter_ < est.max_iter - 1
        res["status"] = "converged" if conv else "max_iter"
        notes.append(f"{est.n_iter_} iters")
    elif method == "pylmnn":
        L = est.components_
        M = L.T @ L
        r = est.opt_result_
        res["status"] = "converged" if r.success else "not converged"
        notes.append(f"{r.nit} iters, {r.nfev} evals; L-BFGS-B: {str(r.message)[:60]}")
    else:
        M = np.eye(p.d)
        res["status"] = "-"

    # ---- evaluation on our objective (not timed)
    M = (M + M.T) / 2
    try:
        res["objective"] = float(p.objective(M))
    except Exception as exc:
        notes.append(f"objective failed: {exc}"[:200])
    te = time.perf_counter()
    cert = mo.certify(p, M)
    res["rel_gap"] = float(cert.rel_gap)
    res["lower_bound"] = float(cert.lower)
    res["certify_time"] = time.perf_counter() - te
    res["test_error"] = float(mo.knn_error(Xtr, ytr, Xte, yte, k=3, M=M))
    return res


# ----------------------------------------------------------------------------------------- parent
def launch(ds, method, args):
    env = dict(os.environ)
    for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[v] = str(args.threads)
    env.setdefault("JAX_PLATFORMS", "cpu")
    env["PYTHONWARNINGS"] = "ignore"
    fd, out = tempfile.mkstemp(suffix=".json", prefix="lmnn_anchors_")
    os.close(fd)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--single", ds, method, "--result", out,
           "--time-limit", str(args.time_limit), "--subgradient-time", str(args.subgradient_time),
           "--small-n", str(args.small_n)]
    if args.data_home:
        cmd += ["--data-home", args.data_home]
    t0 = time.perf_counter()
    logf = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(cmd, env=env, stdout=logf, stderr=subprocess.STDOUT, text=True)
    # hard limit: the fit limit plus a grace for loading, evaluation and the child's own alarm
    # and the fit itself is limited from here too: SIGALRM in the child cannot interrupt a solver running in C
    hard = args.time_limit + args.grace
    fit_limit = args.time_limit + (65 if method.startswith("jax") else 5)
    killed, hwm, partial = None, None, None
    while proc.poll() is None:
        time.sleep(0.5)
        if partial is None and os.path.exists(out + ".partial"):
            try:
                with open(out + ".partial") as f:
                    partial = json.load(f)
            except ValueError:
                partial = None
        over_fit = partial is not None and time.time() - partial["fit_started"] > fit_limit
        if over_fit or time.perf_counter() - t0 > hard:
            hwm = _rss_mb("VmHWM", proc.pid)
            proc.kill()
            killed = "fit" if over_fit else "total"
            break
    proc.wait()
    logf.seek(0)
    log = logf.read()
    logf.close()
    res = None
    try:
        with open(out) as f:
            res = json.load(f)
    except (OSError, ValueError):
        pass
    finally:
        for path in (out, out + ".partial"):
            if os.path.exists(path):
                os.unlink(path)
    if res is None:
        res = dict(partial or {"dataset": ds, "method": method, "notes": []})
        if killed:
            res.update(timeout=True, killed=True, peak_mb=hwm)
            res["time"] = time.time() - res.pop("fit_started") if "fit_started" in res else None
            res["notes"].append("fit killed by the parent at the time limit (peak memory = VmHWM at the kill)"
                                if killed == "fit" else f"child killed after {hard:.0f} s in all (loading + fit + evaluation)")
        else:
            tail = (log or "").strip().splitlines()[-3:]
            res["error"] = f"child exited {proc.returncode}: " + " | ".join(tail)[:300]
    res["child_wall"] = time.perf_counter() - t0
    return res


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def write_table(results, args, commands, started):
    import numpy as np

    order = {(d, m): (i, j) for i, d in enumerate(DATASETS) for j, m in enumerate(METHODS)}
    results = sorted(results, key=lambda r: order.get((r["dataset"], r["method"]), (99, 99)))

    import metricopt as mo

    from importlib.metadata import PackageNotFoundError, version

    versions = {"metricopt": mo.__version__}
    for dist in ("numpy", "scipy", "scikit-learn", "cvxpy", "scs", "jax", "jaxlib", "metric-learn", "PyLMNN"):
        try:
            versions[dist] = version(dist)
        except PackageNotFoundError:
            versions[dist] = "not installed"
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        avail = len(os.sched_getaffinity(0))
    except AttributeError:
        avail = os.cpu_count()

    lines = ["# LMNN anchors: metricopt vs metric-learn and PyLMNN", ""]
    lines.append(f"Generated {started:%Y-%m-%d %H:%M} by `benchmarks/lmnn_anchors.py`.")
    lines.append("")
    lines.append("Command" + ("s (one table, merged with --resume)" if len(commands) > 1 else "") + ": "
                 + "; ".join(f"`{c}`" for c in commands))
    lines.append("")
    lines.append(f"Machine: {cpu}, {os.cpu_count()} CPUs ({avail} available to this process; shared with other "
                 f"work, so times are indicative), {platform.system()} {platform.release()}, Python "
                 f"{platform.python_version()}. BLAS threads pinned to {args.threads} in every child "
                 f"(OPENBLAS/OMP/MKL_NUM_THREADS), JAX on CPU in float64.")
    lines.append("")
    lines.append("Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".")
    lines.append("")
    lines.append(f"Objective: LMNN, JMLR 2009 Eq. 14, k = {K}, mu = {MU}, over all triplets of the training part, "
                 "evaluated by metricopt at each method's metric (`p.objective(M)`); certified gap = "
                 "`metricopt.certify(p, M).rel_gap`; 3-NN test error with `metricopt.knn_error`. Data: 70/30 "
                 "stratified split (seed 0), StandardScaler (and PCA) fitted on the training part. Time limit per fit "
                 f"{args.time_limit} s; JAX subgradient time_limit {args.subgradient_time} s. Method settings, shims and "
                 "what time and memory include: see the script's docstring. Relative excess = (objective - best) / best, "
                 "best = the lowest objective on the data set; time ratio = time / time of the JAX default (tol 1e-3).")
    lines.append("")
    hdr = ["dataset (n_train x d)", "method", "wall time (s)", "time ratio vs JAX default", "objective (Eq. 14)",
           "rel. excess over best", "certified rel. gap", "3-NN test error (%)", "peak memory (MB) [before fit]",
           "status / notes"]
    loaders = {}
    for r in results:
        if r.get("loader"):
            loaders.setdefault(r["dataset"], set()).add(r["loader"])
    lines.append("Data loaders used: " + "; ".join(f"{ds}: {' / '.join(sorted(v))}" for ds, v in loaders.items()) + ".")
    lines.append("")
    sources = []
    for r in results:
        src = tuple(r["source"]) if r.get("source") else None
        if src not in sources:
            sources.append(src)
    tag = {src: chr(ord("A") + n) for n, src in enumerate(sources)}
    lines.append("metricopt source a row was measured with (the library was being edited during the run; the last "
                 "column's 'src X'): " + "; ".join(
                     f"{tag[src]} = " + ("not recorded (rows measured before the script logged it)" if src is None else
                                         f"sha1 {src[0]} of metricopt/**/*.py, git HEAD {src[1]}"
                                         + (" + uncommitted changes" if src[2] else ""))
                     for src in sources) + ".")
    lines.append("")
    lines.append("| " + " | ".join(hdr) + " |")
    lines.append("|" + "---|" * len(hdr))
    by_ds = {}
    for r in results:
        by_ds.setdefault(r["dataset"], []).append(r)
    for ds, rows in by_ds.items():
        objs = [r["objective"] for r in rows if r.get("objective") is not None and np.isfinite(r["objective"])]
        best = min(objs) if objs else None
        ref = next((r for r in rows if r["method"] == REFERENCE and r.get("time") and not r.get("timeout")
                    and r.get("objective") is not None), None)
        size = next((f"{r['n_train']} x {r['d']}" for r in rows if "n_train" in r), "?")
        for r in rows:
            name = LABELS.get(r["method"], r["method"])
            notes = list(r.get("notes", []))
            if r.get("skip"):
                status = r["skip"]
                cells = ["-"] * 7
            elif r.get("timeout"):
                status = f"timeout (> {args.time_limit} s)"
                cells = [f"> {args.time_limit}", "-", "-", "-", "-", "-", fmt(r.get("peak_mb"), ".0f")]
            elif r.get("error"):
                status = "error: " + r["error"]
                cells = [fmt(r.get("time"), ".2f"), "-", "-", "-", "-", "-", fmt(r.get("peak_mb"), ".0f")]
            else:
                status = r.get("status", "")
                t = r.get("time")
                ratio = (t / ref["time"]) if (ref and t is not None and r["method"] != "euclidean") else None
                obj = r.get("objective")
                exc = (obj - best) / abs(best) if (obj is not None and best) else None
                mem = fmt(r.get("peak_mb"), ".0f") + (f" [{r['rss_before_mb']:.0f}]" if r.get("rss_before_mb") else "")
                cells = ["-" if r["method"] == "euclidean" else fmt(t, ".2f"), fmt(ratio, ".2f"),
                         fmt(obj, ".6g"), fmt(exc, ".2e"), fmt(r.get("rel_gap"), ".1e"),
                         fmt(100 * r["test_error"] if r.get("test_error") is not None else None, ".2f"), mem]
            notes.append(f"src {tag[tuple(r['source']) if r.get('source') else None]}")
            lines.append("| " + " | ".join([f"{ds} ({size})", name] + cells
                                           + ["; ".join([status] + notes).replace("|", "/")]) + " |")
    lines.append("")
    lines += targets(by_ds, args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return out


def targets(by_ds, args):
    def get(ds, m):
        return next((r for r in by_ds.get(ds, []) if r["method"] == m), None)

    lines = ["## Targets", ""]
    f, ml = get("digits-pca30", "jax-fista"), get("digits-pca30", "metric-learn")
    if f is None or ml is None:
        lines.append("(a) digits PCA-30: not run (needs methods jax-fista and metric-learn on digits-pca30).")
    elif f.get("objective") is None:
        lines.append("(a) digits PCA-30: the JAX default gave no result: "
                     + ("timeout" if f.get("timeout") else f.get("error", "?")) + ".")
    elif ml.get("timeout") or ml.get("objective") is None:
        lines.append(f"(a) digits PCA-30: metric-learn did not finish ({'timeout > %s s' % args.time_limit if ml.get('timeout') else ml.get('error', '?')}); "
                     f"the JAX default took {f['time']:.2f} s to objective {f['objective']:.6g}, so the time "
                     f"target (<= 1/10 of metric-learn's time) holds with ratio < {f['time'] / args.time_limit:.3f}"
                     " (against the time limit).")
    else:
        ratio = f["time"] / ml["time"]
        ok_obj = f["objective"] <= ml["objective"]
        ok_t = ratio <= 0.1
        lines.append(f"(a) digits PCA-30: JAX default (stopped at its certified gap, tol 1e-3) objective "
                     f"{f['objective']:.6g} vs metric-learn {ml['objective']:.6g} ({'<=' if ok_obj else '>'}); time "
                     f"{f['time']:.2f} s vs {ml['time']:.2f} s, ratio {ratio:.3f} ({'<=' if ok_t else '>'} 0.1). Target "
                     f"{'MET' if ok_obj and ok_t else 'NOT met'}.")
        hit = next((h for h in f.get("history", []) if h[2] <= ml["objective"]), None)
        if f.get("history"):
            if hit is None:
                lines.append("    Along its run (objective over all triplets at each re-check), the JAX default never went "
                             "below metric-learn's objective.")
            else:
                r2 = hit[1] / ml["time"]
                lines.append(f"    Along its run, the JAX default's iterate first had an objective <= metric-learn's "
                             f"({hit[2]:.6g}) at iteration {hit[0]}, {hit[1]:.2f} s into the solve (jit compilation "
                             f"included): ratio {r2:.3f} to metric-learn's time ({'<=' if r2 <= 0.1 else '>'} 0.1); it "
                             "could not stop there, since its certified gap was then still above 1e-3"
                             + (f" ({hit[3]:.1e} at that re-check)." if hit[3] is not None else "."))
    lines.append("")
    f = get("letter", "jax-fista")
    if f is None:
        lines.append("(b) letter-recognition: not run.")
    elif f.get("timeout") or f.get("error") or f.get("time") is None:
        lines.append("(b) letter-recognition: the JAX default gave no result ("
                     + ("timeout > %s s" % args.time_limit if f.get("timeout") else f.get("error", "?")) + "); target NOT met.")
    else:
        reached = f.get("status") == "optimal" and (f.get("rel_gap") or 1) <= 1e-3
        ok = reached and f["time"] < 300
        lines.append(f"(b) letter-recognition: the JAX default (tol 1e-3) stopped after {f['time']:.1f} s with status "
                     f"{f.get('status')} and certified relative gap {f.get('rel_gap', float('nan')):.2e} "
                     f"({'reached' if reached else 'not reached'} 1e-3). Target (< 300 s): "
                     f"{'MET' if ok else 'NOT met'}.")
    lines.append("")
    return lines


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--time-limit", type=int, default=600, help="seconds per fit (default 600)")
    ap.add_argument("--subgradient-time", type=float, default=120.0,
                    help="time_limit passed to the JAX subgradient reference (default 120 s)")
    ap.add_argument("--small-n", type=int, default=2000, help="run the tol 1e-6 row only for n_train <= this")
    ap.add_argument("--grace", type=int, default=300, help="extra seconds before the parent kills a child")
    ap.add_argument("--threads", type=int, default=2, help="BLAS threads in each child (default 2)")
    ap.add_argument("--data-home", default=None, help="default: $METRICOPT_DATA, else ../shared/data")
    ap.add_argument("--out", default=str(HERE / "results" / "lmnn_anchors.md"))
    ap.add_argument("--table-only", action="store_true",
                    help="rewrite the table from the raw results JSON beside --out; run nothing")
    ap.add_argument("--rerun", action="store_true",
                    help="with --resume: run the named pairs again and replace their earlier results")
    ap.add_argument("--resume", action="store_true",
                    help="keep the results in the JSON beside --out and run only the missing (dataset, method) pairs")
    ap.add_argument("--single", nargs=2, metavar=("DATASET", "METHOD"), help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.single:
        import warnings

        warnings.simplefilter("ignore")
        ds, method = args.single
        res = run_single(ds, method, args)
        with open(args.result, "w") as f:
            json.dump(res, f)
        return 0

    started = datetime.datetime.now()
    raw = Path(args.out).with_suffix(".json")  # every child's raw result, for --resume
    env = " ".join(f"{k}={os.environ[k]}" for k in ("OPENBLAS_NUM_THREADS",) if k in os.environ)
    command = (env + " " if env else "") + "python " + " ".join(shlex.quote(a) for a in ["benchmarks/lmnn_anchors.py"] + argv)
    results, commands = [], []
    if (args.resume or args.table_only) and raw.exists():
        saved = json.loads(raw.read_text())
        results, commands = saved["results"], saved["commands"]
        started = datetime.datetime.fromisoformat(saved["started"])
    if args.table_only:
        out = write_table(results, args, commands, started)
        print(f"wrote {out} from {raw}", flush=True)
        return 0
    commands.append(command)
    done = {(r["dataset"], r["method"]) for r in results}

    def save():
        raw.parent.mkdir(parents=True, exist_ok=True)
        raw.write_text(json.dumps({"started": started.isoformat(), "commands": commands, "results": results}, indent=1))
        return write_table(results, args, commands, started)  # partial table as it goes

    for ds in args.datasets:
        for m in args.methods:
            if (ds, m) in done and args.rerun:
                results = [r for r in results if (r["dataset"], r["method"]) != (ds, m)]
            elif (ds, m) in done:
                print(f"[{time.strftime('%H:%M:%S')}] {ds:14s} {m:16s} done in an earlier run (--resume)", flush=True)
                continue
            print(f"[{time.strftime('%H:%M:%S')}] {ds:14s} {m:16s} ...", flush=True)
            r = launch(ds, m, args)
            results.append(r)
            if r.get("skip"):
                msg = r["skip"]
            elif r.get("timeout"):
                msg = f"timeout (> {args.time_limit} s)"
            elif r.get("error"):
                msg = "ERROR " + r["error"]
            else:
                msg = (f"time {fmt(r.get('time'), '.2f')} s  objective {fmt(r.get('objective'), '.8g')}  "
                       f"gap {fmt(r.get('rel_gap'), '.1e')}  err {fmt(100 * r['test_error'], '.2f')}%  "
                       f"peak {fmt(r.get('peak_mb'), '.0f')} MB  {r.get('status', '')}  " + "; ".join(r.get("notes", [])))
            print(f"[{time.strftime('%H:%M:%S')}] {ds:14s} {m:16s} {msg}  (child {r['child_wall']:.1f} s)", flush=True)
            save()
    out = save()
    print(f"wrote {out} (raw results: {raw})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
