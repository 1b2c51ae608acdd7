"""The JAX backend's LMNN solve on a CPU and on a GPU, in the same process, side by side.

For each problem (LMNN, k = 3, mu = 0.5, ``solve(backend="jax", tol=1e-3, time_limit=...)``, default FISTA):

* ``digits``: digits PCA-30, the training part of ``lmnn_fast.py``'s split (1,257 x 30: 70/30 stratified,
  seed 0, standardised, PCA fitted on the training part);
* an integer ``n``: a synthetic problem of ``n`` points in ``--dim`` dimensions, 10 balanced classes
  (seed 0): class means drawn with standard deviation 3 in a 10-dimensional subspace, unit within-class
  noise in every dimension, the informative and nuisance directions mixed by a random rotation, then
  standardised, so that the Euclidean metric is poor and the solve has work to do.

Each problem is solved once per JAX device (``--devices``, default ``gpu cpu``: the first GPU and
JAX's CPU device), the device chosen with ``jax.default_device`` (the backend has no single-device
option; ``devices=`` shards over several). Before the timed solve, a warm-up solve of the same problem
with ``max_iter=--warmup-iter`` compiles the jitted loop for that device and the first active-set
capacity; a later capacity bucket compiles inside the timed solve, and that compilation is measured
(``jax.monitoring``'s compile events) and shown. A fresh problem object is built for every solve, so no
triplet search is reused between solves.

Per solve: wall time, iterations, status, certified relative gap, objective, the device the iterate
ended on (``stats["device"]``), and where the time went: jitted solver chunks (on the device),
re-checks (the full triplet search, NumPy on the host), certificates (host NumPy + a small Clarabel
program), compilation. Per problem: CPU time / GPU time (wall, and per iteration) and the relative
difference of the two objectives (both solves stop at a certified gap of ``tol``, so up to about
``tol`` apart; they may stop at different iterates).

    python benchmarks/jax_device.py --sizes digits 5000 20000 --time-limit 60 --out benchmarks/results
    python benchmarks/jax_device.py --sizes 300 --cpu-only --out /tmp/x     # quick check without a GPU

writes ``jax_device.md`` and ``jax_device.json`` in ``--out`` after every solve (a run cut short keeps
what it measured). A failing solve is recorded with its error and the run goes on.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import platform
import shlex
import sys
import time
import traceback

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
K, MU = 3, 0.5


# ---------------------------------------------------------------------------- data
def digits_pca30():
    from metricopt import datasets

    X, y = datasets.load_digits()
    train, _ = next(iter(datasets.random_splits(y, n_splits=1, test_size=0.3, seed=0)))
    Xtr, _ = datasets.preprocess(X[train], None, scale="standard", pca=30)
    return np.asarray(Xtr, dtype=np.float64), np.asarray(y[train])


def synthetic(n, d, classes=10, informative=10, separation=3.0, seed=0):
    """``n`` points, ``d`` dimensions, balanced classes; see the module docstring."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    rng.shuffle(y)
    means = np.zeros((classes, d))
    means[:, :min(informative, d)] = separation * rng.standard_normal((classes, min(informative, d)))
    X = means[y] + rng.standard_normal((n, d))
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    X = X @ Q
    X = (X - X.mean(0)) / X.std(0)
    return X, y


def problem_data(spec, dim):
    if spec == "digits":
        X, y = digits_pca30()
        return "digits PCA-30", X, y
    n = int(spec)
    X, y = synthetic(n, dim)
    return "synthetic", X, y


# ---------------------------------------------------------------------------- timing hooks
class Hooks:
    """Time spent in the driver's jitted chunks (``Run.step``) and re-checks (``Run.recheck``), and JAX's
    compile events, while installed. Benchmark-side wrappers only: nothing in metricopt changes."""

    def __init__(self):
        self.step = self.recheck = self.compile = 0.0
        self.chunks = self.compiles = 0
        self.active = False

    def install(self):
        import jax.monitoring

        from metricopt.backends.jax import driver

        hooks, step, recheck = self, driver.Run.step, driver.Run.recheck

        def timed(method, field, counter=None):
            def wrapper(run, *a, **kw):
                t = time.perf_counter()
                try:
                    return method(run, *a, **kw)
                finally:
                    setattr(hooks, field, getattr(hooks, field) + time.perf_counter() - t)
                    if counter:
                        setattr(hooks, counter, getattr(hooks, counter) + 1)
            return wrapper

        driver.Run.step, driver.Run.recheck = timed(step, "step", "chunks"), timed(recheck, "recheck")

        def on_event(event, duration, **kw):
            if hooks.active and event.startswith("/jax/core/compile/"):
                hooks.compile += duration
                if event.endswith("backend_compile_duration"):
                    hooks.compiles += 1

        jax.monitoring.register_event_duration_secs_listener(on_event)

    def reset(self):
        self.step = self.recheck = self.compile = 0.0
        self.chunks = self.compiles = 0


@contextlib.contextmanager
def on_device(dev):
    """Make ``dev`` JAX's default device for the enclosed code."""
    import jax

    if hasattr(jax, "default_device"):
        with jax.default_device(dev):
            yield
        return
    old = jax.config.jax_default_device
    jax.config.update("jax_default_device", dev)
    try:
        yield
    finally:
        jax.config.update("jax_default_device", old)


def pick_devices(names):
    import jax

    out = []
    for name in names:
        try:
            out.append((name, jax.devices(name)[0], None))
        except Exception as exc:  # no such backend
            out.append((name, None, f"{type(exc).__name__}: {exc}"))
    return out


# ---------------------------------------------------------------------------- one solve
def solve_on(dev, X, y, hooks, tol, time_limit, warmup_iter, max_iter):
    import metricopt as mo

    row = {}
    with on_device(dev):
        P = mo.LMNNProblem(X, y, k=K, mu=MU)
        P.target_neighbors  # noqa: B018  (computed outside the timings)
        hooks.reset()
        hooks.active = True
        t = time.perf_counter()
        P.solve(backend="jax", tol=tol, max_iter=warmup_iter)
        row["warmup_s"] = time.perf_counter() - t
        row["warmup_compile_s"] = hooks.compile
        P = mo.LMNNProblem(X, y, k=K, mu=MU)  # fresh: no search kept from the warm-up
        P.target_neighbors  # noqa: B018
        hooks.reset()
        if dev.platform != "cpu":
            with contextlib.suppress(Exception):
                dev.memory_stats()  # touch
        t = time.perf_counter()
        sol = P.solve(backend="jax", tol=tol, time_limit=time_limit, max_iter=max_iter)
        wall = time.perf_counter() - t
        hooks.active = False
    st = sol.stats
    row.update({
        "wall_s": wall, "solve_time_s": st.get("time"), "iterations": st.get("iterations"),
        "status": str(sol.status), "rel_gap": st.get("certificate_rel_gap"), "objective": float(sol.objective),
        "ran_on": st.get("device"), "dtype": st.get("dtype"), "active_set": st.get("active_set_size"),
        "certify_s": st.get("certify_time"), "certify_calls": st.get("certify_calls"),
        "chunks_s": hooks.step, "chunks": hooks.chunks, "recheck_s": hooks.recheck,
        "compile_s": hooks.compile, "compiles": hooks.compiles, "M": np.asarray(sol.M).tolist(),
    })
    if dev.platform != "cpu":
        with contextlib.suppress(Exception):
            row["peak_device_mb"] = dev.memory_stats()["peak_bytes_in_use"] / 2**20
    return row


# ---------------------------------------------------------------------------- output
def fmt(x, spec):
    return "" if x is None else format(x, spec)


def write(rows, meta, out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    slim = [{k: v for k, v in r.items() if k != "M"} for r in rows]
    (out / "jax_device.json").write_text(json.dumps({"meta": meta, "rows": slim}, indent=1) + "\n")
    L = ["# JAX backend: LMNN on a CPU and a GPU", "",
         f"Generated {meta['date']} by `{meta['command']}`.", "",
         f"Machine: {meta['machine']}. JAX {meta['jax']} (jaxlib {meta['jaxlib']}), metricopt {meta['metricopt']}, "
         f"NumPy {meta['numpy']}, Python {meta['python']}. Devices: {meta['devices']}. "
         f"Host BLAS threads: {meta.get('blas_threads', 'default')}.", "",
         f"LMNN k = {K}, mu = {MU}, `solve(backend=\"jax\", tol={meta['tol']:g}, time_limit={meta['time_limit']:g})` "
         "(FISTA, float64), after a warm-up solve of the same problem on the same device "
         f"(`max_iter={meta['warmup_iter']}`). Times in seconds: *wall* is the timed solve; *chunks* the jitted solver "
         "iterations (on the device), *re-checks* the full triplet searches (NumPy on the host), *certificates* "
         "(host), *compile* the JAX compilation inside the timed solve (new active-set capacity buckets). "
         "The ratio is CPU / GPU: wall time, and time per iteration; objective difference relative to the CPU's.", "",
         "| problem (n x d) | device | status | it | wall s | per it ms | chunks s | re-checks s | certificates s "
         "| compile s (n) | warm-up s | certified gap | objective | final active set | peak GPU MB |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in slim:
        head = f"| {r['problem']} ({r['n']} x {r['d']}) | {r['device']} "
        if "error" in r:
            what = "not run" if r["error"].startswith("skipped") else "**failed**"
            L.append(head + f"| {what}: {r['error'].splitlines()[-1][:300]} |" + " |" * 12)
            continue
        it = r["iterations"] or 0
        per = 1e3 * r["wall_s"] / it if it else None
        L.append(head + f"| {r['status']} | {it} | {r['wall_s']:.2f} | {fmt(per, '.2f')} | {r['chunks_s']:.2f} | "
                 f"{r['recheck_s']:.2f} | {fmt(r['certify_s'], '.2f')} | {r['compile_s']:.2f} ({r['compiles']}) | "
                 f"{r['warmup_s']:.2f} | {fmt(r['rel_gap'], '.1e')} | {r['objective']:.8g} | {r['active_set']} | "
                 f"{fmt(r.get('peak_device_mb'), '.0f')} |")
    comps = meta.get("comparisons", [])
    if comps:
        L += ["", "| problem (n x d) | CPU / GPU wall | CPU / GPU per iteration | CPU / GPU chunks per iteration "
              "| objectives: relative difference | max abs difference of M / max abs M |", "|---|---|---|---|---|---|"]
        for c in comps:
            L.append(f"| {c['problem']} ({c['n']} x {c['d']}) | {fmt(c['wall_ratio'], '.2f')} | "
                     f"{fmt(c['per_iter_ratio'], '.2f')} | {fmt(c['chunk_per_iter_ratio'], '.2f')} | "
                     f"{fmt(c['objective_rel_diff'], '.1e')} | {fmt(c['M_rel_diff'], '.1e')} |")
    if meta.get("notes"):
        L += [""] + meta["notes"]
    (out / "jax_device.md").write_text("\n".join(L) + "\n")


def compare(rows):
    out = []
    by = {}
    for r in rows:
        by.setdefault((r["problem"], r["n"], r["d"]), {})[r["platform"]] = r
    for (prob, n, d), pair in by.items():
        cpu, gpu = pair.get("cpu"), pair.get("gpu")
        if not cpu or not gpu or "error" in cpu or "error" in gpu:
            continue
        per = lambda r, key: r[key] / r["iterations"] if r["iterations"] else None
        ratio = lambda a, b: a / b if a is not None and b else None
        Mc, Mg = np.asarray(cpu["M"]), np.asarray(gpu["M"])
        out.append({
            "problem": prob, "n": n, "d": d, "wall_ratio": ratio(cpu["wall_s"], gpu["wall_s"]),
            "per_iter_ratio": ratio(per(cpu, "wall_s"), per(gpu, "wall_s")),
            "chunk_per_iter_ratio": ratio(per(cpu, "chunks_s"), per(gpu, "chunks_s")),
            "objective_rel_diff": abs(gpu["objective"] - cpu["objective"]) / max(abs(cpu["objective"]), 1e-300),
            "M_rel_diff": float(np.abs(Mc - Mg).max() / max(np.abs(Mc).max(), 1e-300)),
        })
    return out


# ---------------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["digits", "5000", "20000"],
                    help="'digits' (digits PCA-30, 1,257 points) or a number of synthetic points")
    ap.add_argument("--dim", type=int, default=50, help="dimension of the synthetic problems")
    ap.add_argument("--devices", nargs="+", default=["gpu", "cpu"], help="JAX platforms, in the order run")
    ap.add_argument("--cpu-only", action="store_true", help="same as --devices cpu")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--time-limit", type=float, default=60.0, help="time_limit of each timed solve (s)")
    ap.add_argument("--max-iter", type=int, default=20_000)
    ap.add_argument("--warmup-iter", type=int, default=10)
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds: start no further solve once the run has taken this long")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="limit the host BLAS (NumPy/SciPy) to this many threads (threadpoolctl); default: as is. "
                         "The certificates' many small dense operations are much slower with a threaded BLAS "
                         "(see results/jax_device.md); JAX's own CPU thread pool is not affected")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--command", default=None, help="the command line to record (default: this script's argv)")
    args = ap.parse_args(argv)
    if args.cpu_only:
        args.devices = ["cpu"]

    import jax
    import jaxlib

    import metricopt

    if args.blas_threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=args.blas_threads, user_api="blas")
    t_run = time.perf_counter()
    devices = pick_devices(args.devices)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "command": args.command or "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *sys.argv[1:]]),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "jax": jax.__version__, "jaxlib": jaxlib.__version__, "numpy": np.__version__,
        "python": platform.python_version(), "metricopt": getattr(metricopt, "__version__", "?"),
        "devices": ", ".join(f"{n}: {getattr(d, 'device_kind', '?')} ({d})" if d is not None else f"{n}: none ({e})"
                             for n, d, e in devices),
        "blas_threads": args.blas_threads if args.blas_threads is not None else "default (" + ", ".join(
            f"{k}={os.environ[k]}" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
            if k in os.environ) + ")",
        "tol": args.tol, "time_limit": args.time_limit, "warmup_iter": args.warmup_iter, "max_iter": args.max_iter,
        "notes": [],
    }
    print(f"jax {jax.__version__}, devices {jax.devices()}; {meta['devices']}", flush=True)
    hooks = Hooks()
    hooks.install()
    rows = []
    for spec in args.sizes:
        name, X, y = problem_data(spec, args.dim)
        for plat, dev, err in devices:
            row = {"problem": name, "n": int(X.shape[0]), "d": int(X.shape[1]), "device": plat, "platform": plat}
            if dev is None:
                row["error"] = err
            elif args.budget is not None and time.perf_counter() - t_run > args.budget:
                row["error"] = f"skipped: the run's budget of {args.budget:g} s was spent"
            else:
                row["device"] = f"{plat} ({dev.device_kind})"
                try:
                    row.update(solve_on(dev, X, y, hooks, args.tol, args.time_limit, args.warmup_iter,
                                        args.max_iter))
                except Exception as exc:  # report, go on
                    hooks.active = False
                    row["error"] = "".join(traceback.format_exception(exc))[-3000:]
            rows.append(row)
            shown = {k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in row.items() if k != "M"}
            print(json.dumps(shown), flush=True)
            meta["comparisons"] = compare(rows)
            meta["total_s"] = time.perf_counter() - t_run
            write(rows, meta, args.out)
    for c in meta.get("comparisons", []):
        print(json.dumps(c), flush=True)
    print(f"total {time.perf_counter() - t_run:.1f} s", flush=True)


if __name__ == "__main__":
    main()
