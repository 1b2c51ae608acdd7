"""The two forms of the pair terms' JAX data: time per value-and-gradient evaluation (MMC's ``SqrtDistances``, POLA's
``PairHinge``), jitted, warm, on scikit-learn's digits (the demo's 70/30 split, standardised).

    OPENBLAS_NUM_THREADS=2 python benchmarks/pair_forms.py [--repeat 5] [--out benchmarks/results/pair_forms.md]

Forms (``metricopt.problems.terms._pair_jax_data``): ``differences`` (``T x d`` pair differences: ``~4 T d^2``
flops) and ``gram`` (the points and pair indices: ``K = X M X^T`` and the weighted Laplacian, ``~6 n^2 d + 4 n d^2``
flops); ``auto`` picks the smaller count. The two agree to rounding (reported: the largest relative difference of
the gradients).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "pair_forms.md"))
    args = ap.parse_args()

    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    import metricopt as mo
    from metricopt.problems import terms

    X, y = load_digits(return_X_y=True)
    Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    Xtr = StandardScaler().fit(Xtr).transform(Xtr)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((Xtr.shape[1],) * 2) / Xtr.shape[1] ** 0.5
    M = A @ A.T
    rows = []
    for name, problem, cls in [("MMC", mo.MMCProblem(Xtr, ytr), terms.SqrtDistances),
                               ("POLA", mo.POLAProblem(Xtr, ytr, C=1.0), terms.PairHinge)]:
        term = next(t for t in problem.terms if isinstance(t, cls))
        V = {"M": jnp.asarray(M), "b": jnp.asarray(2.0)}
        grads, times = {}, {}
        for form in ("differences", "gram"):
            terms.PAIR_FORM = form
            data = {k: jnp.asarray(v) for k, v in term.jax_data(problem).items()}
            f = jax.jit(lambda d, W: cls.jax_value_grad(d, W, None, 0.1))
            jax.block_until_ready(f(data, V))
            t0 = time.perf_counter()
            for _ in range(args.repeat):
                out = jax.block_until_ready(f(data, V))
            times[form] = (time.perf_counter() - t0) / args.repeat
            grads[form] = np.asarray(out[2]["M"])
        terms.PAIR_FORM = "auto"
        chosen = "gram" if "X" in term.jax_data(problem) else "differences"
        diff = float(np.max(np.abs(grads["gram"] - grads["differences"])) / np.max(np.abs(grads["differences"])))
        rows.append((name, problem.X.shape, len(term.pairs), times, chosen, diff))
        print(name, times, chosen, diff, flush=True)
    lines = ["# Pair terms on JAX: differences against the Gram form", "",
             f"Command: `OPENBLAS_NUM_THREADS=2 python benchmarks/pair_forms.py`; {platform.machine()}, "
             f"{os.cpu_count()} cores, JAX {jax.__version__}, {datetime.date.today()}. One jitted value-and-gradient "
             f"evaluation (smoothing 0.1), warm, mean of {args.repeat}; digits, the demo's 70/30 split, standardised.",
             "", "| problem | n x d | pairs | differences (ms) | gram (ms) | speed-up | auto picks | max rel. difference "
             "of the gradients |", "|---|---|---|---|---|---|---|---|"]
    for name, shape, T, times, chosen, diff in rows:
        lines.append(f"| {name} | {shape[0]} x {shape[1]} | {T:,} | {1e3 * times['differences']:.1f} | "
                     f"{1e3 * times['gram']:.1f} | {times['differences'] / times['gram']:.0f}x | {chosen} | {diff:.1e} |")
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
