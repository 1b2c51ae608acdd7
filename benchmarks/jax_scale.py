"""Issue 32's table: LMNN's JAX solve at scale, each case in a fresh process.

Cases (LMNN, k = 3, mu = 0.5, default FISTA, float64):

* ``digits``: digits PCA-30 (``lmnn_fast.py``'s training part, 1,257 x 30). metric-learn 0.7.0 on the same target
  neighbours (its fit time ``T_ml`` and the JMLR 2009 Eq. 14 objective at its metric, ``f_ml``), then metricopt's
  default solve (``tol`` 1e-6) and, separately, the time at which a ``tol=1e-3`` solve's re-checked exact objective
  first reaches ``f_ml`` (a callback on every re-check). Ratios to ``T_ml``, in the same process.
* ``synthetic20k``, ``synthetic60k``: ``jax_device.py``'s generator (10 classes, a 10-dimensional informative
  subspace rotated into the rest), 20,000 x 50 and 60,000 x 164 (MNIST's size after the paper's PCA).
* ``letter``: letter recognition, 70/30 split (seed 0), standardised, 14,000 x 16.
* ``mnist5k``: MNIST-5k from ``../shared/data`` (all 5,000 points), pixels / 255, PCA to 164 dimensions.

For the last four: ``solve(backend="jax", tol=1e-3, time_limit=--time-limit)`` after a warm-up solve of
``--warmup-iter`` iterations (default 10: JAX's compilation of the first capacity bucket; 0: none); the wall time, status, certified gap, iterations, and
where the time went: the jitted chunks (``Run.step``), the re-checks (``Run.recheck``: every triplet searched), the
certificates, JAX compilation inside the timed solve; the share outside the jitted chunks; the process's peak
resident memory (``VmHWM``, Linux) and, on a GPU, the device's peak. After each large solve, the hinge's forms
are timed at its final metric (``form_timings``: margins, and value with gradient, per-triplet gathers against the
pair and the Laplacian forms) beside the choice the solve measured (``metricopt.costmodel``).

    OPENBLAS_NUM_THREADS=2 python benchmarks/jax_scale.py --cases digits letter mnist5k synthetic20k \\
        --out benchmarks/results/jax_scale.md
    python benchmarks/jax_scale.py --cases synthetic20k synthetic60k --device gpu --append \\
        --out benchmarks/results/jax_scale.md         # on a GPU machine (cvxpy carried as wheels)

``--append`` adds rows to an existing table (the GPU rows to the CPU run's). A case past ``--case-timeout`` is
killed and reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import shlex
import subprocess
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
K, MU = 3, 0.5
DATA = os.environ.get("METRICOPT_DATA", str(HERE.parent.parent / "shared" / "data"))
#: issue 32's targets, per case
TARGETS = {
    "digits": "default solve <= 1.0x metric-learn; f_ml reached in <= 0.15x",
    "synthetic20k": "2 cores: certified 1e-3 < 120 s; one H100: < 10 s",
    "synthetic60k": "one H100: certified 1e-3 < 60 s; peak host memory < 8 GB",
    "letter": "2 cores: certified 1e-3 < 30 s",
    "mnist5k": "2 cores: certified 1e-3 < 120 s",
}


def peak_rss_mb():
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def case_data(name):
    from jax_device import synthetic

    if name == "digits":
        from start_scale import load

        return load("digits-pca30", DATA)
    if name == "letter":
        from start_scale import load

        return load("letter", DATA)
    if name == "synthetic20k":
        return synthetic(20_000, 50)
    if name == "synthetic60k":
        return synthetic(60_000, 164)
    if name == "mnist5k":
        from sklearn.decomposition import PCA

        from metricopt import datasets

        X, y = datasets.load_mnist_5k(DATA)
        return PCA(164, random_state=0).fit_transform(np.asarray(X, dtype=np.float64) / 255.0), np.asarray(y)
    raise ValueError(name)


def run_digits(X, y):
    import metricopt as mo
    from lmnn_fast import jax_solve, metric_learn_fit

    P = mo.LMNNProblem(X, y, k=K, mu=MU)
    jax_solve(mo.LMNNProblem(X[:200], y[:200], k=K, mu=MU), 1e-2)  # JAX's own start-up, not the problem's
    t_ml, M_ml = metric_learn_fit(X, y, P.target_neighbors)
    f_ml = P.objective(M_ml)
    t_def, s_def, _, _ = jax_solve(mo.LMNNProblem(X, y, k=K, mu=MU), 1e-6)
    t3, s3, reach, _ = jax_solve(mo.LMNNProblem(X, y, k=K, mu=MU), 1e-3, target=f_ml)
    return {"t_ml": t_ml, "f_ml": f_ml, "t_default": t_def, "status_default": str(s_def.status),
            "gap_default": s_def.stats.get("certificate_rel_gap"), "t_reach": reach, "t_1e3": t3,
            "status_1e3": str(s3.status), "ratio_default": t_def / t_ml,
            "ratio_reach": None if reach is None else reach / t_ml}


def phase(msg):
    """A progress line on stderr (kept in the case's log: a killed case shows how far it got)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def form_timings(P, M, reps=5):
    """Milliseconds of the hinge's margins and of its value-and-gradient at ``M`` (the solve's last active set,
    width 0.1) in each form of the JAX piece (``jax_active_set(form=...)``), best of ``reps`` after a compiling run."""
    import jax
    import jax.numpy as jnp

    from metricopt.problems.terms import TripletLoss

    term = next(t for t in P.jax_terms() if isinstance(t, TripletLoss))
    out = {}
    with jax.enable_x64(True):
        data = {k: jnp.asarray(v) for k, v in term.jax_data(P).items()}
        Mj = jnp.asarray(M)
        for form in ("gather", "pairs", "laplacian"):
            act, size, _, _ = term.jax_active_set(P, M, 0.1, form=form)
            A = {k: jnp.asarray(v) for k, v in act.items()}
            vg = jax.jit(lambda M, A: type(term).jax_value_grad(data, {"M": M}, A, 0.01))
            mg = jax.jit(lambda M, A: type(term).jax_margins(data, M, A))
            ms = []
            for f in (mg, vg):
                jax.block_until_ready(f(Mj, A))
                best = float("inf")
                for _ in range(reps):
                    t = time.perf_counter()
                    jax.block_until_ready(f(Mj, A))
                    best = min(best, time.perf_counter() - t)
                ms.append(1e3 * best)
            out[form] = {"margins_ms": ms[0], "value_grad_ms": ms[1], "active": size, "capacity": int(act["p"].shape[0]),
                         "pair_capacity": int(act["DU"].shape[0]) if "DU" in act else None}
    return out


def _profiler():
    """A running ``cProfile.Profile`` when ``$METRICOPT_PROFILE_DIR`` is set (where the timed solve's host time goes,
    on a machine where only the log comes back), else ``None``."""
    if not os.environ.get("METRICOPT_PROFILE_DIR"):
        return None
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    return prof


def _write_profile(prof, name):
    """The 45 functions with the most cumulative and the 30 with the most own time, as text, in
    ``$METRICOPT_PROFILE_DIR/profile.<name>.txt``."""
    if prof is None:
        return
    import io
    import pstats

    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).strip_dirs()
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(30)
    pathlib.Path(os.environ["METRICOPT_PROFILE_DIR"], f"profile.{name}.txt").write_text(buf.getvalue())


def run_large(X, y, device, time_limit, warmup=10, forms=True):
    import jax

    import metricopt as mo
    from jax_device import Hooks, on_device

    dev = jax.devices(device)[0]
    hooks = Hooks()
    hooks.install()
    with on_device(dev):
        t = time.perf_counter()
        P = mo.LMNNProblem(X, y, k=K, mu=MU)
        P.target_neighbors  # noqa: B018
        t_targets = time.perf_counter() - t
        phase(f"target neighbours: {t_targets:.1f} s; warm-up solve ({warmup} iterations) ...")
        t = time.perf_counter()
        if warmup:
            prof = _profiler()
            P.solve(backend="jax", tol=1e-3, max_iter=warmup)  # warm-up: compile the loop
            _write_profile(prof, f"{len(X)}x{X.shape[1]}-warmup")
        phase(f"warm-up: {time.perf_counter() - t:.1f} s; timed solve ...")
        P = mo.LMNNProblem(X, y, k=K, mu=MU, target_neighbors=P.target_neighbors)
        hooks.reset()
        hooks.active = True
        prof = _profiler()
        t = time.perf_counter()
        sol = P.solve(backend="jax", tol=1e-3, time_limit=time_limit, verbose=True)
        wall = time.perf_counter() - t
        _write_profile(prof, f"{len(X)}x{X.shape[1]}")
        hooks.active = False
        phase(f"timed solve: {wall:.1f} s, {sol.status}")
    st = sol.stats
    from metricopt import costmodel

    with on_device(dev):
        forms = form_timings(P, sol.M) if forms else {}
    chosen = [{"pair_capacity": k[5], "winner": w, "seconds": secs} for k, (w, secs) in costmodel.choices().items()
              if k[0] == "triplet_adjoint"]
    row = {"forms": forms, "chosen": chosen, "wall": wall, "status": str(sol.status), "gap": st.get("certificate_rel_gap"),
           "iterations": st.get("iterations"), "chunks_s": hooks.step, "recheck_s": hooks.recheck,
           "certify_s": st.get("certify_time"), "compile_s": hooks.compile, "targets_s": t_targets,
           "outside_share": (wall - hooks.step) / wall if wall > 0 else None,
           "active": st.get("active_set_size"), "objective": float(sol.objective),
           "device": f"{dev.platform} ({getattr(dev, 'device_kind', '?')})"}
    if dev.platform != "cpu":
        try:
            row["peak_device_mb"] = dev.memory_stats()["peak_bytes_in_use"] / 2**20
        except Exception:  # noqa: BLE001  (not every platform reports it)
            pass
    return row


def one(name, device, time_limit, out_json, warmup=10, forms=True):
    if os.environ.get("METRICOPT_PROFILE_DIR"):  # every thread's stack in the log every 20 s: a killed case shows where
        import faulthandler

        faulthandler.dump_traceback_later(20, repeat=True)
    t = time.perf_counter()
    X, y = case_data(name)
    phase(f"{name}: data {X.shape} in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    row = run_digits(X, y) if name == "digits" else run_large(X, y, device, time_limit, warmup, forms)
    row.update({"case": name, "n": int(X.shape[0]), "d": int(X.shape[1]), "peak_rss_mb": peak_rss_mb(),
                "case_s": time.perf_counter() - t})
    pathlib.Path(out_json).write_text(json.dumps(row))


def fmt(x, spec=".2f"):
    return "" if x is None else format(x, spec)


def table_rows(rows):
    out = []
    for r in rows:
        head = f"| {r['case']} ({r.get('n', '?')} x {r.get('d', '?')}) | {r.get('where', '')} "
        if "error" in r:
            out.append(head + f"| **{r['error']}** |" + " |" * 10 + f" {TARGETS.get(r['case'], '')} |")
        elif r["case"] == "digits":
            out.append(head + f"| default (tol 1e-6): {r['status_default']}, gap {fmt(r['gap_default'], '.1e')} "
                       f"| {r['t_default']:.1f} s = **{r['ratio_default']:.2f}x** metric-learn ({r['t_ml']:.1f} s) "
                       f"| f_ml {r['f_ml']:.2f} reached after "
                       + ("not reached" if r["t_reach"] is None else f"{r['t_reach']:.1f} s = **{r['ratio_reach']:.2f}x**")
                       + f" | tol 1e-3: {r['t_1e3']:.1f} s, {r['status_1e3']} | | | | | {fmt(r['peak_rss_mb'], '.0f')} | "
                       f"| {TARGETS['digits']} |")
        else:
            out.append(head + f"| {r['status']}, gap {fmt(r['gap'], '.1e')}, {r['iterations']} it | **{r['wall']:.1f}** "
                       f"| chunks {r['chunks_s']:.1f} | re-checks {r['recheck_s']:.1f} | certificates "
                       f"{fmt(r['certify_s'], '.1f')} | compile {r['compile_s']:.1f} | **{100 * r['outside_share']:.0f} %** "
                       f"| {r['active']} | {fmt(r['peak_rss_mb'], '.0f')} | {fmt(r.get('peak_device_mb'), '.0f')} "
                       f"| {TARGETS.get(r['case'], '')} |")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["digits", "letter", "mnist5k", "synthetic20k"])
    ap.add_argument("--device", default="cpu", help="JAX platform of the large cases: cpu or gpu")
    ap.add_argument("--time-limit", type=float, default=300.0, help="time_limit of each large solve (s)")
    ap.add_argument("--case-timeout", type=float, default=900.0, help="kill a case's process after this (s)")
    ap.add_argument("--out", default=str(HERE / "results" / "jax_scale.md"))
    ap.add_argument("--append", action="store_true")
    ap.add_argument("--warmup-iter", type=int, default=10,
                    help="iterations of the warm-up solve before each large case's timed one (0: none, the "
                         "compilation then inside the timed solve)")
    ap.add_argument("--skip-forms", action="store_true", help="no form_timings after the large solves")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        return one(args.one, args.device, args.time_limit, args.json, args.warmup_iter, not args.skip_forms)
    import jax

    import metricopt

    where = f"{args.device}: {platform.machine()}, {os.cpu_count()} CPUs" if args.device == "cpu" else args.device
    if args.device != "cpu":
        where = f"{args.device} ({jax.devices(args.device)[0].device_kind})"
    rows = []
    for name in args.cases:
        out_json = pathlib.Path(args.out).with_suffix(f".{name}.{args.device}.json")
        cmd = [sys.executable, __file__, "--one", name, "--device", args.device, "--time-limit", str(args.time_limit),
               "--warmup-iter", str(args.warmup_iter), *(["--skip-forms"] if args.skip_forms else []),
               "--json", str(out_json)]
        t = time.perf_counter()
        log = pathlib.Path(args.out).with_suffix(f".{name}.{args.device}.log")
        with open(log, "w") as fh:  # the case's progress lines and its solver's verbose output
            try:
                done = subprocess.run(cmd, timeout=args.case_timeout, stdout=fh, stderr=subprocess.STDOUT, text=True)
                row = (json.loads(out_json.read_text()) if done.returncode == 0 else
                       {"case": name, "error": "failed: " + (log.read_text().strip().splitlines() or ["?"])[-1][:200]})
            except subprocess.TimeoutExpired:
                lines = [ln for ln in log.read_text().splitlines() if ln.startswith("[")]
                row = {"case": name, "error": f"killed after {args.case_timeout:g} s; last progress: "
                                              + (lines[-1][:200] if lines else "none")}
        row["where"] = where
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items()}), f"({time.perf_counter() - t:.0f} s)", flush=True)
        out_json.unlink(missing_ok=True)
    head = [
        "# LMNN's JAX solve at scale (issue 32)", "",
        "Each case in a fresh process; see `benchmarks/jax_scale.py`'s docstring for the cases and the columns. "
        "Large cases: `solve(backend=\"jax\", tol=1e-3)` after a warm-up of `--warmup-iter` iterations (10 unless the "
        "command says otherwise; with none, the compilation is inside the timed solve); *outside* is the share of the "
        "wall time not spent in the jitted chunks (re-checks, certificates, host work, compilation).", "",
        "| case (n x d) | machine | result | wall s | jitted chunks s | re-checks s | certificates s | compile s "
        "| outside the jitted loop | final active set | peak host MB | peak device MB | target |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    forms = ["", "The hinge's forms at each large case's final metric (its active set at width 0.1): milliseconds of the "
             "margins and of the value and gradient, best of 5 (`form_timings`); *chosen* lists the measured choices "
             "between the pair and the Laplacian gradient the solve made (`metricopt.costmodel`, seconds per "
             "gradient, per pair-capacity bucket).", "",
             "| case | machine | active (capacity) | gather: margins / value+grad ms | pairs: margins / value+grad ms "
             "| laplacian: margins / value+grad ms | chosen in the solve |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r.get("forms"):
            continue
        f = r["forms"]
        cells = " | ".join(f"{f[k]['margins_ms']:.1f} / {f[k]['value_grad_ms']:.1f}" for k in ("gather", "pairs", "laplacian"))
        chosen = "; ".join(f"{c['winner']} at {c['pair_capacity']} pairs ("
                           + ", ".join(f"{k} {v:.3f} s" for k, v in c["seconds"].items()) + ")" for c in r["chosen"])
        forms.append(f"| {r['case']} | {r['where']} | {f['gather']['active']} ({f['gather']['capacity']}) | {cells} "
                     f"| {chosen or 'pairs (below MEASURE_ABOVE: not timed)'} |")
    cmd = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__), *(argv or sys.argv[1:])])
    stamp = (f"Rows below: {time.strftime('%Y-%m-%d %H:%M')}, `{cmd}`; JAX {jax.__version__}, metricopt "
             f"{metricopt.__version__}, NumPy {np.__version__}, "
             f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}.")
    out = pathlib.Path(args.out)
    body = table_rows(rows) + (forms if len(forms) > 5 else [])
    if args.append and out.exists():
        out.write_text(out.read_text() + "\n" + stamp + "\n\n" + "\n".join(head[-2:] + body) + "\n")
    else:
        out.write_text("\n".join(head[:-2] + [stamp, ""] + head[-2:] + body) + "\n")
    print(out)


if __name__ == "__main__":
    main()
