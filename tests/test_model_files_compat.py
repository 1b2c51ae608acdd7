"""Backward compatibility of model files: files written by an earlier metricopt still load.

``tests/data/models/*.npz`` were written by ``tests/data/models/make_models.py`` with format
version 1 (every estimator kind, a bare Solution, a file with a Preprocessing);
``expected.npz`` holds the query sets and what the fitted estimators returned on them. Each
file must load and give the same results, bit for bit: the stored state (metric, map,
threshold, cluster metrics) and the predicted labels exactly; ``transform`` exactly as the
stored map applied to the queries (and, to rounding, what the saving machine computed).
Saving a loaded model again must write the same arrays and metadata keys, so that files
written now stay readable by the version that wrote these.

Format version 1 files have a checksum of their arrays only (not of the metadata): they load with a
:class:`~metricopt.io.ModelFileWarning`, their values checked for consistency like any file's, and an
estimator's certificate recomputed on its rebuilt problem (so its bounds are today's certifier's, its upper
bound, the objective at the stored metric, the file's; its status the file's when the recomputed certificate
confirms it).
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import metricopt
from metricopt import LMNN, MMC, POLA, KernelLMNN, MultiMetricLMNN, Solution
from metricopt.io import (
    FORMAT_VERSION,
    REVERIFIED_KEY,
    REVERIFY_RTOL,
    ModelFileWarning,
    load_model,
    read_model_file,
    save_model,
)

MODELS = pathlib.Path(__file__).parent / "data" / "models"

#: every file here is format version 1: loading one warns (asserted in test_version_1_file_warns_and_is_checked)
pytestmark = pytest.mark.filterwarnings("ignore::metricopt.io.ModelFileWarning")

#: file stem -> (estimator class, query set in expected.npz)
FILES = {
    "lmnn": (LMNN, "iris_query"),
    "lmnn_frobenius": (LMNN, "iris_query"),
    "lmnn_passes": (LMNN, "iris_query"),
    "lmnn_lowrank_s": (LMNN, "iris_query"),
    "lmnn_lowrank_r": (LMNN, "iris_query"),
    "mmc": (MMC, "iris_query"),
    "pola": (POLA, "iris_query"),
    "pola_strings": (POLA, "iris_query"),
    "multimetric": (MultiMetricLMNN, "iris_query"),
    "multimetric_array": (MultiMetricLMNN, "iris_query"),
    "kernel": (KernelLMNN, "rings_query"),
    "kernel_poly": (KernelLMNN, "rings_query"),
    "preprocessed": (LMNN, "raw_query"),
}


@pytest.fixture(scope="module")
def expected():
    with np.load(MODELS / "expected.npz", allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _query(name, expected, est):
    Xq = expected[FILES[name][1]]
    return est.preprocessing_.transform(Xq) if est.preprocessing_ is not None else Xq


def test_every_file_is_format_version_1():
    names = sorted(p.stem for p in MODELS.glob("*.npz"))
    assert names == sorted([*FILES, "solution", "expected"])
    assert FORMAT_VERSION == 2
    for name in [*FILES, "solution"]:
        mf = read_model_file(MODELS / f"{name}.npz")
        assert mf.metadata["format_version"] == 1 and not mf.metadata_checksummed


@pytest.mark.filterwarnings("error::metricopt.io.ModelFileWarning")
def test_version_1_file_warns_and_is_checked():
    path = MODELS / "lmnn.npz"
    msg = (f"model file {str(path)!r} has format version 1: a checksum covers its arrays but not its metadata, so its "
           "values were checked for consistency on load (and an estimator's certificate recomputed) instead; save it "
           "again to upgrade it to format version 2.")
    with pytest.warns(ModelFileWarning, match=f"^{re.escape(msg)}$"):
        est = load_model(path)
    assert est.certificate_.details[REVERIFIED_KEY].startswith("yes: recomputed by metricopt.certify")
    assert est.solution_.status.code == "optimal" and est.certificate_.is_optimal


@pytest.mark.parametrize("name", list(FILES))
def test_estimator_file_loads_with_identical_outputs(name, expected):
    cls, _ = FILES[name]
    est = load_model(MODELS / f"{name}.npz")
    assert type(est) is cls
    Xq = _query(name, expected, est)
    if f"{name}__components" in expected:
        L = expected[f"{name}__components"]
        assert_array_equal(est.components_, L)
        Z = est.transform(Xq)
        if cls is KernelLMNN:
            assert_array_equal(Z, est.problem_.kernel_features(Xq) @ L.T)
        else:
            assert_array_equal(Z, Xq @ L.T)
        assert_allclose(Z, expected[f"{name}__transform"], rtol=1e-12, atol=1e-14)
    if cls is LMNN:
        assert_array_equal(est.get_mahalanobis_matrix(), expected[f"{name}__M"])
        for rule in ("knn", "energy"):
            assert_array_equal(est.predict(Xq, rule=rule), expected[f"{name}__predict_{rule}"])
    elif cls is MultiMetricLMNN:
        assert_array_equal(np.stack(est.metrics_), expected[f"{name}__metrics"])
        assert_array_equal(est.predict(Xq), expected[f"{name}__predict_knn"])
    elif cls is KernelLMNN:
        assert_array_equal(est.predict(Xq), expected[f"{name}__predict_knn"])
        assert_allclose(est.get_kernel_matrix_A(), expected[f"{name}__A"], rtol=1e-12, atol=1e-14)
    else:
        assert_array_equal(est.get_mahalanobis_matrix(), expected[f"{name}__M"])
        pred = metricopt.knn_predict(est.problem_.X, est.problem_.y, Xq, 3, L=est.components_)
        assert_array_equal(pred, expected[f"{name}__predict_knn"])
    if cls is POLA:
        assert est.threshold_ == float(expected[f"{name}__threshold"])


@pytest.mark.parametrize("name", list(FILES))
def test_loaded_estimator_is_fitted_as_saved(name):
    mf = read_model_file(MODELS / f"{name}.npz")
    est = load_model(MODELS / f"{name}.npz")
    meta = mf.metadata
    assert est.model_metadata_ == meta
    assert est.n_iter_ == meta["fitted"]["n_iter"]
    assert est.solution_.status.code == meta["solution"]["status"]
    objective = meta["solution"]["objective"]  # recomputed at load where the certificate is: the same to rounding
    assert est.solution_.objective == (pytest.approx(objective, rel=1e-14) if est.certificate_ else objective)
    assert_array_equal(est.solution_.M, mf.arrays["M"])
    assert (est.certificate_ is None) == (meta["certificate"] is None)
    if est.certificate_ is not None:  # recomputed at load: the same upper bound (objective at M), today's lower bound
        cert, stored = est.certificate_, meta["certificate"]
        assert cert.details[REVERIFIED_KEY].startswith("yes: ")
        assert abs(cert.upper - stored["upper"]) <= REVERIFY_RTOL * max(1.0, abs(stored["upper"]))
        assert cert.lower <= cert.upper and cert.tol == stored["tol"]
        assert cert.verdict.value == stored["verdict"]
    assert_array_equal(est.problem_.y, mf.arrays["y_train"])
    if "target_neighbors" in mf.arrays:
        assert_array_equal(est.problem_.target_neighbors, mf.arrays["target_neighbors"])
    if isinstance(est, LMNN):
        assert (est.passes_ is not None) == meta["fitted"]["passes"]
        assert est.validation_curve_ is None
    if name == "lmnn_frobenius":
        (reg,) = est.regularizer
        assert type(reg).__name__ == "Frobenius" and reg.lam == 1e-3
    if name == "multimetric":
        assert isinstance(est.single_solution_, Solution)
        assert_array_equal(est.single_solution_.M, mf.arrays["single_M"])


def test_solution_file_loads(expected):
    sol = load_model(MODELS / "solution.npz")
    assert isinstance(sol, Solution)
    assert_array_equal(sol.M, expected["solution__M"])
    assert_array_equal(sol.L, expected["solution__L"])
    assert sol.objective == float(expected["solution__objective"])
    assert sol.model_metadata_["problem"]["k"] == 2 and sol.preprocessing_ is None


def test_preprocessing_file_loads(expected):
    est = load_model(MODELS / "preprocessed.npz")
    pre = est.preprocessing_
    assert pre.scale == "minmax" and pre.n_features_in == 4 and pre.n_features_out == 3
    assert est.n_features_in_ == 3


@pytest.mark.parametrize("name", [*FILES, "solution"])
def test_saving_a_loaded_model_writes_the_same_file_form(name, tmp_path):
    old = read_model_file(MODELS / f"{name}.npz")
    obj = load_model(MODELS / f"{name}.npz")
    save_model(tmp_path / "again.npz", obj, problem=_problem_of(name, obj), preprocessing=obj.preprocessing_,
               info=old.metadata["info"])
    new = read_model_file(tmp_path / "again.npz")
    assert sorted(new.arrays) == sorted(old.arrays)
    for key, value in old.arrays.items():
        assert new.arrays[key].dtype == value.dtype and np.array_equal(new.arrays[key], value), key
    assert sorted(new.metadata) == sorted(old.metadata)
    assert new.metadata["format_version"] == FORMAT_VERSION and new.metadata_checksummed
    changing = {"created", "metricopt_version", "format_version"}
    for key in set(old.metadata) - changing:
        expected = _params_in_todays_names(old.metadata[key], name) if key == "params" else old.metadata[key]
        assert _without_recomputed(new.metadata[key]) == _without_recomputed(expected), key
        if isinstance(old.metadata[key], dict) and "upper" in old.metadata[key]:
            assert new.metadata[key]["upper"] == pytest.approx(old.metadata[key]["upper"], rel=REVERIFY_RTOL)
    if obj.__class__ is not Solution and old.metadata["certificate"] is not None:  # the certificate recomputed at load
        assert new.metadata["certificate"]["lower"] == obj.certificate_.lower


def _params_in_todays_names(params, name):
    """A file's parameters as an estimator loaded from it stores them again: a file written before the shared solve
    options (issue 31, ``metricopt.options``) gains ``solver_tol`` and ``time_limit``, and an exact-backend fit's
    ``tol`` (then the conic solver's accuracy) becomes ``solver_tol`` (low-rank LMNN's ``tol`` was the stationarity
    threshold then as now)."""
    if not isinstance(params, dict) or "solver_tol" in params:
        return params
    out = {**params, "solver_tol": None, "time_limit": None}
    if out.get("backend") == "cvxpy" and out.get("tol") is not None and not name.startswith("lmnn_lowrank"):
        out["solver_tol"], out["tol"] = out["tol"], None
    return out


def _without_recomputed(value):
    """``value`` without what the certificate recomputed at load may change: its bounds and details (a certificate
    is the dict with ``lower``; a solution's is under ``certificate``), a solution's objective to rounding."""
    if isinstance(value, dict):
        if "lower" in value and "verdict" in value:
            return {k: v for k, v in value.items() if k not in ("upper", "lower", "gap", "rel_gap", "details")}
        out = {k: _without_recomputed(v) for k, v in value.items()}
        if "objective" in out and "status" in out and isinstance(out["objective"], float):
            out["objective"] = round(out["objective"], 10)
        return out
    return value


def _problem_of(name, obj):
    """The problem to save a loaded Solution with (rebuilt from its stored metadata)."""
    if name != "solution":
        return None
    est = load_model(MODELS / "lmnn.npz")  # the same training data and k
    return est.problem_
