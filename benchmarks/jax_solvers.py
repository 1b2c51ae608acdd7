"""Reference (Weinberger & Saul's subgradient method) vs fast solver of the JAX backend.

``python benchmarks/jax_solvers.py [iris wine digits] [--time-limit S]`` solves
LMNN (k=3, mu=0.5) on standardized data (digits: standardized, PCA to 25 dimensions,
standardized again) with every solver and prints the time to reach certified relative
gaps 1e-3 and 1e-6. Each solve is run once beforehand for a few iterations so that the
times exclude compilation; they are given without the certificates' own time (the
benchmark certifies at every re-check, which a normal solve does not) and with it.
"""

from __future__ import annotations

import argparse

import numpy as np

GAPS = (1e-3, 1e-6)


def load(name):
    from sklearn import datasets
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    loader = {"iris": datasets.load_iris, "wine": datasets.load_wine, "digits": datasets.load_digits}[name]
    X, y = loader(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    if name == "digits":
        X = StandardScaler().fit_transform(PCA(25, random_state=0).fit_transform(X))
    return X, y


def first_reached(history, gap):
    """``(iteration, seconds, seconds without certificates)`` when ``gap`` was first certified."""
    for h in history:
        if h["rel_gap"] is not None and h["rel_gap"] <= gap:
            return h["iteration"], h["time"], h["time"] - h["certify_time"]
    return None


def run(names=("iris", "wine", "digits"), solvers=("subgradient", "fista"), time_limit=120.0, max_iter=100_000):
    import metricopt
    from metricopt.backends.jax import driver as backend  # CERTIFY_GROWTH lives in the driver
    from metricopt.backends.jax.backend import solve

    rows = []
    growth = backend.CERTIFY_GROWTH
    backend.CERTIFY_GROWTH = 0.0  # certify at every re-check, to time the gaps precisely
    try:
        for name in names:
            X, y = load(name)
            problem = metricopt.LMNNProblem(X, y)
            for solver in solvers:
                solve(problem, solver=solver, max_iter=20)  # compile
                sol = solve(problem, solver=solver, tol=min(GAPS), max_iter=max_iter, certify_every=10,
                            time_limit=time_limit)
                row = {"data": name, "shape": X.shape, "solver": solver, "status": str(sol.status),
                       "objective": sol.objective, "gap": sol.stats["certificate_rel_gap"],
                       "iterations": sol.stats["iterations"], "time": sol.stats["time"]}
                for g in GAPS:
                    row[g] = first_reached(sol.stats["history"], g)
                rows.append(row)
                print(_format(row), flush=True)
    finally:
        backend.CERTIFY_GROWTH = growth
    return rows


def _format(row):
    parts = [f"{row['data']:7s} {str(row['shape']):11s} {row['solver']:12s}"]
    for g in GAPS:
        r = row[g]
        parts.append(f"gap {g:.0e}: " + ("not reached" if r is None else f"{r[2]:6.2f}s ({r[1]:6.2f}s) it {r[0]}"))
    parts.append(f"end: {row['status']} gap {row['gap']:.1e} obj {row['objective']:.8g} it {row['iterations']} "
                 f"{row['time']:.1f}s")
    return " | ".join(parts)


def write_table(rows, path):
    """The results as a Markdown table (time to each certified gap, without / with certificate time)."""
    import pathlib

    lines = ["# JAX solvers for LMNN: time to a certified relative gap", "",
             "`python benchmarks/jax_solvers.py` (k=3, mu=0.5, standardized data; digits: PCA to 25 dimensions). "
             "Seconds without the certificates' own time (with it in parentheses); compilation excluded.", "",
             "| data (n, d) | solver | " + " | ".join(f"gap {g:.0e}" for g in GAPS) + " | end |",
             "|---|---|" + "---|" * len(GAPS) + "---|"]
    for row in rows:
        cells = ["not reached" if row[g] is None else f"{row[g][2]:.2f} s ({row[g][1]:.2f} s)" for g in GAPS]
        end = f"{row['status']}, gap {row['gap']:.1e}, {row['iterations']} it, {row['time']:.1f} s"
        lines.append(f"| {row['data']} {tuple(row['shape'])} | {row['solver']} | " + " | ".join(cells) + f" | {end} |")
    pathlib.Path(path).write_text("\n".join(lines) + "\n")


def main(argv=None):
    import pathlib

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="*", default=["iris", "wine", "digits"])
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results" / "jax_solvers.md"))
    args = parser.parse_args(argv)
    np.set_printoptions(precision=4)
    rows = run(args.data, time_limit=args.time_limit)
    write_table(rows, args.out)


if __name__ == "__main__":
    main()
