"""The ``metricopt`` command line.

``metricopt demo``: learn an LMNN metric (exact backend) on scikit-learn's wine data,
print the duality-gap certificate and the 3-NN test error before and after.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np

DATASETS = ("wine", "iris", "breast_cancer", "digits")
METHODS = ("lmnn", "mmc", "pola")


def _load(name):
    from sklearn import datasets

    loader = {"wine": datasets.load_wine, "iris": datasets.load_iris,
              "breast_cancer": datasets.load_breast_cancer, "digits": datasets.load_digits}[name]
    return loader(return_X_y=True)


def demo(args):
    """Run the demo: split, standardise, fit, certify, report kNN errors."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from . import LMNN, MMC, POLA, knn_error

    X, y = _load(args.dataset)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=args.seed, stratify=y)
    scaler = StandardScaler().fit(Xtr)
    Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
    print(f"metricopt demo: {args.method.upper()} on {args.dataset} ({Xtr.shape[0]} train / {Xte.shape[0]} test "
          f"points, {X.shape[1]} features, standardised), exact CVXPY backend")
    est = {"lmnn": lambda: LMNN(k=args.k, mu=args.mu, solver=args.solver, verbose=args.verbose),
           "mmc": lambda: MMC(solver=args.solver, verbose=args.verbose),
           "pola": lambda: POLA(solver=args.solver, verbose=args.verbose)}[args.method]()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # cvxpy's inaccuracy warnings: the status says it
        est.fit(Xtr, ytr)
    elapsed = time.perf_counter() - t0
    sol = est.solution_
    print(f"solve: status {sol.status.code}, objective {sol.objective:.10g}, {elapsed:.2f} s, "
          f"solver {sol.solver}, working-set rounds {sol.stats.get('rounds')}, "
          f"working set {sol.stats.get('working_set_size')} triplets")
    print(est.certificate_.report())
    k = 3
    e0 = knn_error(Xtr, ytr, Xte, yte, k)
    e1 = knn_error(Xtr, ytr, Xte, yte, k, L=est.components_)
    print(f"{k}-NN test error: Euclidean {100 * e0:.2f}%  ->  learned metric {100 * e1:.2f}%")
    return 0 if sol.status.has_point else 1


def build_parser():
    p = argparse.ArgumentParser(prog="metricopt", description="Mahalanobis metric learning with certificates.")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="learn a metric on a built-in data set, certify it, report kNN errors")
    d.add_argument("--dataset", choices=DATASETS, default="wine")
    d.add_argument("--method", choices=METHODS, default="lmnn")
    d.add_argument("--solver", choices=("SCS", "CLARABEL"), default=None)
    d.add_argument("--k", type=int, default=3, help="LMNN target neighbours (default 3)")
    d.add_argument("--mu", type=float, default=0.5, help="LMNN push weight (default 0.5)")
    d.add_argument("--seed", type=int, default=0, help="seed of the 70/30 split (default 0)")
    d.add_argument("--verbose", action="store_true")
    d.set_defaults(func=demo)
    return p


def main(argv=None):
    """Entry point of the ``metricopt`` command."""
    from .errors import MetricoptError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except MetricoptError as exc:
        print(f"metricopt: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
