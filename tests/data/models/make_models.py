"""Write the format-version-1 model files that ``tests/test_model_files_compat.py`` loads.

Run once, with the metricopt that defines the format, from the repository root::

    OMP_NUM_THREADS=1 python tests/data/models/make_models.py

It fits every estimator kind on small data, saves each with :func:`metricopt.io.save_model`
into this folder and records, in ``expected.npz``, the query sets and what the fitted
estimators returned on them (``transform``, ``predict``, ``get_mahalanobis_matrix``, ...).
The files are committed: they are the backward-compatibility guarantee, so do not rewrite
them with a newer metricopt (add new files next to them instead).
"""

from __future__ import annotations

import pathlib

import numpy as np

import metricopt
import metricopt.datasets
from metricopt import LMNN, MMC, POLA, KernelLMNN, LMNNProblem, MultiMetricLMNN
from metricopt.io import Preprocessing, save_model
from metricopt.terms import Frobenius

HERE = pathlib.Path(__file__).resolve().parent


def iris_small():
    """60 points of standardized iris (20 per class) and 30 query points that are not training points."""
    X, y = metricopt.datasets.load("iris", scale="standard")
    idx = np.sort(np.r_[0:150:5, 2:150:5])
    return X[idx], y[idx], X[1:150:5] + 0.05


def rings(n_per_ring=20, seed=0):
    """Two concentric rings plus a nuisance coordinate (kernel LMNN's data) and 20 query points."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * np.pi, size=2 * n_per_ring)
    r = np.repeat([1.0, 2.0], n_per_ring) + rng.normal(scale=0.08, size=2 * n_per_ring)
    X = np.c_[r * np.cos(t), r * np.sin(t), rng.normal(scale=2.0, size=2 * n_per_ring)]
    return X, np.repeat([0, 1], n_per_ring), X[::2] * 0.9 + 0.05


def main():
    X, y, Xq = iris_small()
    Xr, yr, Xrq = rings()
    raw = X * 3.0 + 1.0  # "raw" inputs for the file saved with a Preprocessing
    pre = Preprocessing(scale="minmax", pca=3).fit(raw)
    expected = {"iris_query": Xq, "rings_query": Xrq, "raw_query": Xq * 3.0 + 1.0}
    fits = {
        "lmnn": (LMNN(k=2), X, y),
        "lmnn_frobenius": (LMNN(k=2, regularizer=Frobenius(1e-3)), X, y),
        "lmnn_passes": (LMNN(k=2, passes=2), X, y),
        "lmnn_lowrank_s": (LMNN(k=2, n_components=2, low_rank="S"), X, y),
        "lmnn_lowrank_r": (LMNN(k=2, n_components=2), X, y),
        "mmc": (MMC(), X, y),
        "pola": (POLA(C=1.0), X, y),
        "pola_strings": (POLA(C=1.0), X, np.array(["setosa", "versicolor", "virginica"])[y]),
        "multimetric": (MultiMetricLMNN(k=2, clusters="kmeans", n_clusters=2, init="single", random_state=3), X, y),
        "multimetric_array": (MultiMetricLMNN(k=2, clusters=np.array(["a", "b"])[np.arange(60) % 2]), X, y),
        "kernel": (KernelLMNN(k=2), Xr, yr),
        "kernel_poly": (KernelLMNN(k=2, kernel="poly", kernel_params={"degree": 2}, n_components=4), Xr, yr),
        "preprocessed": (LMNN(k=2), pre.transform(raw), y),
    }
    for name, (est, Xf, yf) in fits.items():
        est.fit(Xf, yf)
        query = Xrq if name.startswith("kernel") else pre.transform(Xq * 3.0 + 1.0) if name == "preprocessed" else Xq
        save_model(HERE / f"{name}.npz", est, preprocessing=pre if name == "preprocessed" else None,
                   info={"written_by": "tests/data/models/make_models.py"})
        if hasattr(est, "transform"):
            expected[f"{name}__transform"] = est.transform(query)
        if isinstance(est, LMNN):
            expected[f"{name}__M"] = est.get_mahalanobis_matrix()
            for rule in ("knn", "energy"):
                expected[f"{name}__predict_{rule}"] = est.predict(query, rule=rule)
        elif isinstance(est, MultiMetricLMNN):
            expected[f"{name}__metrics"] = np.stack(est.metrics_)
            expected[f"{name}__predict_knn"] = est.predict(query)
        elif isinstance(est, KernelLMNN):
            expected[f"{name}__predict_knn"] = est.predict(query)
            expected[f"{name}__A"] = est.get_kernel_matrix_A()
        else:
            expected[f"{name}__M"] = est.get_mahalanobis_matrix()
            expected[f"{name}__predict_knn"] = metricopt.knn_predict(est.problem_.X, est.problem_.y, query, 3,
                                                                      L=est.components_)
        if hasattr(est, "components_"):
            expected[f"{name}__components"] = est.components_
        if isinstance(est, POLA):
            expected[f"{name}__threshold"] = np.float64(est.threshold_)
    problem = LMNNProblem(X, y, k=2)
    sol = problem.solve()
    save_model(HERE / "solution.npz", sol, problem=problem)
    expected["solution__M"], expected["solution__L"] = sol.M, sol.L
    expected["solution__objective"] = np.float64(sol.objective)
    np.savez(HERE / "expected.npz", **expected)
    for path in sorted(HERE.glob("*.npz")):
        print(f"{path.name:28s} {path.stat().st_size / 1024:7.1f} KB")


if __name__ == "__main__":
    main()
