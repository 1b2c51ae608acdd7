"""Model files (metricopt.io): exact round trips, metadata, clear errors, no code execution, atomic writes."""

import datetime
import json
import os
import pathlib
import re
import zipfile

import numpy as np
import pytest

import metricopt
import metricopt.datasets
from metricopt import LMNN, MMC, POLA, KernelLMNN, LMNNProblem, MultiMetricLMNN, Solution, knn_predict
from metricopt.errors import InputError
from metricopt.io import (
    CHECKSUM_KEY,
    FORMAT,
    FORMAT_VERSION,
    METADATA_KEY,
    ModelFileError,
    Preprocessing,
    _payload_sha256,
    load_model,
    read_model_file,
    save_model,
)


@pytest.fixture(scope="module")
def iris():
    X, y = metricopt.datasets.load("iris", scale="standard")
    return X[::3], y[::3]  # 50 points, 3 classes


@pytest.fixture(scope="module")
def fitted(iris):
    X, y = iris
    return {"LMNN": LMNN(k=2, mu=0.5).fit(X, y), "MMC": MMC().fit(X, y), "POLA": POLA(C=1.0).fit(X, y)}


def _raw(path):
    """Every array of an npz file (pickle off; without the file checksum) plus the decoded metadata."""
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files if k != CHECKSUM_KEY}
    meta = json.loads(arrays.pop(METADATA_KEY).tobytes().decode("utf-8"))
    return arrays, meta


def _rewrite(path, arrays, meta):
    """Write ``arrays`` and ``meta`` as a model file with a recomputed file checksum (as an editor who knows the
    format would): the checks after the checksum are what is tested."""
    payload = {**arrays, METADATA_KEY: np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)}
    payload[CHECKSUM_KEY] = np.frombuffer(_payload_sha256(payload).encode("ascii"), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, **payload)


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("method", ["LMNN", "MMC", "POLA"])
def test_round_trip_is_exact(method, fitted, iris, tmp_path):
    X, y = iris
    est = fitted[method]
    path = save_model(tmp_path / "model.npz", est)
    assert path == tmp_path / "model.npz"
    got = load_model(path)
    assert type(got) is type(est)
    for a, b in [(got.components_, est.components_), (got.solution_.M, est.solution_.M),
                 (got.solution_.L, est.solution_.L), (got.problem_.X, est.problem_.X),
                 (got.problem_.y, est.problem_.y)]:
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert got.get_params() == est.get_params()
    assert got.solution_.status is est.solution_.status
    assert got.solution_.objective == est.solution_.objective
    assert got.solution_.backend == est.solution_.backend and got.solution_.solver == est.solution_.solver
    assert got.certificate_.lower == est.certificate_.lower
    assert got.certificate_.upper == est.certificate_.upper
    assert got.certificate_.verdict == est.certificate_.verdict
    assert got.n_features_in_ == est.n_features_in_ and got.n_iter_ == est.n_iter_
    Xq = X + 0.37  # points that are not training points
    assert np.array_equal(got.transform(Xq), est.transform(Xq))
    if method == "LMNN":
        assert np.array_equal(got.problem_.target_neighbors, est.problem_.target_neighbors)
        assert got.problem_.k == est.problem_.k and got.problem_.mu == est.problem_.mu
        for rule in ("knn", "energy"):
            assert np.array_equal(got.predict(Xq, rule=rule), est.predict(Xq, rule=rule))
        assert got.passes_ is None
    else:
        assert np.array_equal(knn_predict(got.problem_.X, got.problem_.y, Xq, 3, L=got.components_),
                              knn_predict(est.problem_.X, est.problem_.y, Xq, 3, L=est.components_))
    if method == "POLA":
        assert got.threshold_ == est.threshold_
    # the rebuilt problem is the same problem: same objective at the stored metric
    assert got.problem_.objective(got.solution_.M, **got.solution_.variables) == est.solution_.objective


@pytest.mark.parametrize("method", ["LMNN", "MMC", "POLA"])
def test_metadata_content(method, fitted, tmp_path):
    est = fitted[method]
    save_model(tmp_path / "m.npz", est, info={"note": "test"})
    arrays, meta = _raw(tmp_path / "m.npz")
    assert all(a.dtype.kind != "O" for a in arrays.values())
    assert meta["format"] == FORMAT == "metricopt-model" and meta["format_version"] == FORMAT_VERSION == 2
    with np.load(tmp_path / "m.npz", allow_pickle=False) as npz:  # the file checksum covers the metadata too
        everything = {k: npz[k] for k in npz.files}
    recorded = everything.pop(CHECKSUM_KEY).tobytes().decode("ascii")
    assert recorded == _payload_sha256(everything) and METADATA_KEY in everything
    assert meta["metricopt_version"] == metricopt.__version__
    created = datetime.datetime.fromisoformat(meta["created"])
    assert abs((datetime.datetime.now(datetime.timezone.utc) - created).total_seconds()) < 600
    assert meta["kind"] == "estimator" and meta["estimator"] == method == meta["method"]
    assert meta["problem"]["reference"] == est.problem_.reference
    assert meta["problem"]["n"] == 50 and meta["problem"]["d"] == 4
    assert meta["solution"]["status"] == "optimal"
    assert meta["solution"]["objective"] == est.solution_.objective
    assert meta["solution"]["backend"] == "cvxpy"
    cert = meta["certificate"]
    assert cert["verdict"] == "optimal within tol" and cert["rel_gap"] <= 1e-6
    assert cert["lower"] == est.certificate_.lower and cert["gap"] == est.certificate_.gap
    assert meta["arrays"]["M"] == {"shape": [4, 4], "dtype": "<f8"}
    assert meta["arrays"]["X_train"]["shape"] == [50, 4]
    assert re.fullmatch(r"[0-9a-f]{64}", meta["sha256"])
    assert meta["info"] == {"note": "test"}
    assert np.array_equal(arrays["classes"], [0, 1, 2])
    if method == "LMNN":
        assert meta["params"]["k"] == 2 and meta["params"]["mu"] == 0.5
        assert meta["problem"]["n_triplets"] == est.problem_.n_triplets
        assert arrays["target_neighbors"].shape == (50, 2)
    if method == "POLA":
        assert meta["params"]["C"] == 1.0 and float(arrays["b"]) == est.threshold_
    if method == "MMC":
        assert meta["params"]["diagonal"] is False


def test_solution_round_trip(iris, tmp_path):
    X, y = iris
    problem = LMNNProblem(X, y, k=2)
    sol = problem.solve()
    save_model(tmp_path / "s.npz", sol, problem=problem)
    got = load_model(tmp_path / "s.npz")
    assert isinstance(got, Solution)
    assert np.array_equal(got.M, sol.M) and np.array_equal(got.L, sol.L)
    assert got.status is sol.status and got.objective == sol.objective
    assert got.stats["history"] == sol.stats["history"]
    assert got.certificate.lower == sol.certificate.lower
    assert got.model_metadata_["problem"]["k"] == 2 and got.model_metadata_["kind"] == "solution"


def test_preprocessing_round_trip(iris, fitted, tmp_path):
    X, _ = iris
    raw = X * 3.0 + 1.0
    pre = Preprocessing(scale="minmax", pca=3).fit(raw)
    save_model(tmp_path / "p.npz", fitted["MMC"], preprocessing=pre)
    got = load_model(tmp_path / "p.npz").preprocessing_
    assert got.n_features_in == 4 and got.n_features_out == 3
    assert np.array_equal(got.transform(raw), pre.transform(raw))
    with pytest.raises(InputError, match=r"^the data has 3 features but the model was trained on 4; "):
        got.transform(raw[:, :3])


def test_string_labels_round_trip(iris, tmp_path):
    X, y = iris
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    est = MMC().fit(X, names)
    save_model(tmp_path / "m.npz", est)
    got = load_model(tmp_path / "m.npz")
    assert got.problem_.y.dtype.kind == "U" and np.array_equal(got.problem_.y, names)


# --------------------------------------------------------------------------- bad saves


def test_save_rejects_unfitted_and_foreign_objects(tmp_path):
    with pytest.raises(InputError, match=r"^this LMNN is not fitted yet; call fit\(X, y\) before save_model\.$"):
        save_model(tmp_path / "m.npz", LMNN())
    with pytest.raises(InputError, match=r"^save_model needs a fitted metricopt estimator \(LMNN, MMC, POLA, "
                                         r"MultiMetricLMNN, KernelLMNN, NCA, MLCC, PCA, Whitening, LDA, RCA, GerrymanderingKNN or "
                                         r"LocalMetricKNN\) or a "
                                         r"metricopt.Solution; got dict\.$"):
        save_model(tmp_path / "m.npz", {})
    assert not (tmp_path / "m.npz").exists()


def test_save_into_missing_folder(fitted, tmp_path):
    with pytest.raises(InputError, match=r"cannot write '.*m\.npz': the folder '.*nowhere' does not exist"):
        save_model(tmp_path / "nowhere" / "m.npz", fitted["MMC"])


# --------------------------------------------------------------------------- bad files


@pytest.fixture
def model_path(fitted, tmp_path):
    return save_model(tmp_path / "model.npz", fitted["LMNN"])


def test_missing_file(tmp_path):
    p = tmp_path / "absent.npz"
    with pytest.raises(ModelFileError, match=re.escape(f"model file {str(p)!r} does not exist; check the path")):
        load_model(p)


def test_not_an_npz(tmp_path):
    p = tmp_path / "notes.npz"
    p.write_text("just some text\n")
    msg = f"{str(p)!r} is not a metricopt model file: it is not an .npz (zip) archive, or it is truncated."
    with pytest.raises(ModelFileError, match=f"^{re.escape(msg)}$"):
        load_model(p)


def test_truncated_file(model_path):
    data = model_path.read_bytes()
    model_path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError, match="is not a metricopt model file: it is not an .npz .zip. archive, or it is "
                                             "truncated"):
        load_model(model_path)


def test_foreign_npz(tmp_path):
    p = tmp_path / "other.npz"
    np.savez(p, weights=np.ones(3), bias=np.zeros(1))
    with pytest.raises(ModelFileError, match=re.escape(f"{str(p)!r} is not a metricopt model file: the .npz archive "
                                                       "has no metricopt metadata (arrays: ")):
        load_model(p)


def test_foreign_format_name(model_path):
    arrays, meta = _raw(model_path)
    meta["format"] = "someone-else"
    _rewrite(model_path, arrays, meta)
    with pytest.raises(ModelFileError, match="is not a metricopt model file: its metadata names the format "
                                             "'someone-else', not 'metricopt-model'"):
        load_model(model_path)


def test_newer_format_version(model_path):
    arrays, meta = _raw(model_path)
    meta["format_version"] = FORMAT_VERSION + 1
    meta["metricopt_version"] = "9.9.9"
    _rewrite(model_path, arrays, meta)
    msg = (f"model file {str(model_path)!r} has format version 3 (written by metricopt 9.9.9), newer than this "
           f"metricopt {metricopt.__version__} reads (format version 2); upgrade metricopt to load it.")
    with pytest.raises(ModelFileError, match=f"^{re.escape(msg)}$"):
        load_model(model_path)


def test_checksum_mismatch_is_corrupt(model_path):
    arrays, meta = _raw(model_path)
    arrays["M"] = arrays["M"].copy()
    arrays["M"][0, 0] += 1e-12  # a tiny, otherwise plausible change
    _rewrite(model_path, arrays, meta)
    with pytest.raises(ModelFileError, match=re.escape(f"model file {str(model_path)!r} is corrupt: the SHA-256 of "
                                                       "its arrays is ") + r"[0-9a-f]{64}, but the file records "
                                             + meta["sha256"]):
        load_model(model_path)


def test_flipped_byte_is_corrupt(model_path, fitted):
    data = bytearray(model_path.read_bytes())
    where = bytes(data).find(fitted["LMNN"].problem_.X.tobytes())  # X_train is stored uncompressed
    assert where > 0
    data[where + 17] ^= 0x01
    model_path.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match=re.escape(f"model file {str(model_path)!r} is corrupt")):
        load_model(model_path)


def test_undecodable_metadata_is_corrupt(model_path):
    arrays, _ = _raw(model_path)
    with open(model_path, "wb") as fh:
        np.savez(fh, **arrays, **{METADATA_KEY: np.frombuffer(b"{not json", dtype=np.uint8)})
    with pytest.raises(ModelFileError, match="is corrupt: its metadata cannot be decoded"):
        load_model(model_path)


class _Payload:
    """Unpickling this object would create a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_pickled_objects_are_never_loaded(model_path, tmp_path):
    marker = tmp_path / "code-ran"
    arrays, meta = _raw(model_path)
    evil = np.empty(1, dtype=object)
    evil[0] = _Payload(str(marker))
    blob = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    with open(model_path, "wb") as fh:
        np.savez(fh, **arrays, evil=evil, **{METADATA_KEY: blob})
    with pytest.raises(ModelFileError, match="array 'evil' holds Python objects, which metricopt never writes and "
                                             "will not unpickle"):
        load_model(model_path)
    assert not marker.exists()


def test_unknown_parameter_from_another_version(model_path):
    arrays, meta = _raw(model_path)
    meta["params"]["warp_drive"] = True
    meta["metricopt_version"] = "7.0"
    _rewrite(model_path, arrays, meta)
    with pytest.raises(ModelFileError, match="was written by metricopt 7.0 with LMNN parameter.s. warp_drive that "
                                             "this metricopt does not know"):
        load_model(model_path)


def test_read_model_file_verifies_and_exposes(model_path):
    mf = read_model_file(model_path)
    assert mf.metadata["method"] == "LMNN"
    assert set(mf.arrays) >= {"M", "L", "components", "X_train", "y_train", "classes", "target_neighbors"}
    assert METADATA_KEY not in mf.arrays


# --------------------------------------------------------------------------- atomic writes


@pytest.mark.parametrize("exc", [OSError("No space left on device"), KeyboardInterrupt()])
def test_failed_save_keeps_previous_model(exc, fitted, tmp_path, monkeypatch):
    path = save_model(tmp_path / "model.npz", fitted["LMNN"])
    before = path.read_bytes()
    real_savez = np.savez

    def broken_savez(file, *args, **kwds):
        file.write(b"PK\x03\x04 half a model")  # something is written, then the disk fills up
        raise exc

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(type(exc)):
        save_model(path, fitted["MMC"])
    monkeypatch.setattr(np, "savez", real_savez)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["model.npz"]  # no temporary file left behind
    assert type(load_model(path)) is LMNN


def test_save_replaces_and_leaves_no_temporary(fitted, tmp_path):
    path = tmp_path / "model.npz"
    save_model(path, fitted["LMNN"])
    save_model(path, fitted["POLA"])
    assert sorted(os.listdir(tmp_path)) == ["model.npz"]
    assert type(load_model(path)) is POLA
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask
    assert zipfile.is_zipfile(path)


@pytest.mark.parametrize("params", [{"passes": 2}, {"n_components": 2, "low_rank": "S"}, {"n_components": 2}],
                         ids=["multi-pass", "low-rank-S", "low-rank-R"])
def test_lmnn_variants_round_trip(params, iris, tmp_path):
    X, y = iris
    est = LMNN(k=2, **params).fit(X, y)
    got = load_model(save_model(tmp_path / "v.npz", est))
    assert got.get_params() == est.get_params()
    assert np.array_equal(got.components_, est.components_) and got.components_.shape == est.components_.shape
    assert np.array_equal(got.get_mahalanobis_matrix(), est.get_mahalanobis_matrix())
    assert got.solution_.status is est.solution_.status
    assert np.array_equal(got.problem_.target_neighbors, est.problem_.target_neighbors)
    Xq = X + 0.37
    assert np.array_equal(got.transform(Xq), est.transform(Xq))
    for rule in ("knn", "energy"):
        assert np.array_equal(got.predict(Xq, rule=rule), est.predict(Xq, rule=rule))
    assert (got.passes_ is None) == (est.passes_ is None)
    assert (got.certificate_ is None) == (est.certificate_ is None)


# --------------------------------------------------------------------------- multi-metric and kernel LMNN


def _rings(n_per_ring=20, seed=0):
    """Two concentric rings (radii 1 and 2) plus a nuisance coordinate: no linear map separates them."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * np.pi, size=2 * n_per_ring)
    r = np.repeat([1.0, 2.0], n_per_ring) + rng.normal(scale=0.08, size=2 * n_per_ring)
    X = np.c_[r * np.cos(t), r * np.sin(t), rng.normal(scale=2.0, size=2 * n_per_ring)]
    return X, np.repeat([0, 1], n_per_ring)


def _same_solution(a, b):
    assert np.array_equal(a.M, b.M) and np.array_equal(a.L, b.L)
    assert a.status is b.status and a.objective == b.objective
    assert a.backend == b.backend and a.solver == b.solver and a.stats == b.stats
    ca, cb = a.certificate, b.certificate
    assert (ca.lower, ca.upper, ca.verdict, ca.tol, ca.problem) == (cb.lower, cb.upper, cb.verdict, cb.tol, cb.problem)


def _same_fit(got, est):
    assert type(got) is type(est)
    assert set(vars(got)) - {"model_metadata_", "preprocessing_"} == set(vars(est))
    params, expected = got.get_params(), est.get_params()
    assert params.keys() == expected.keys()
    for name, value in expected.items():
        if isinstance(value, np.ndarray):
            assert np.array_equal(params[name], value) and params[name].dtype == value.dtype
        else:
            assert params[name] == value
    _same_solution(got.solution_, est.solution_)
    assert got.certificate_.lower == est.certificate_.lower and got.certificate_.verdict == est.certificate_.verdict
    for name in ("X", "y", "target_neighbors"):
        a, b = getattr(got.problem_, name), getattr(est.problem_, name)
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert (got.problem_.k, got.problem_.mu, got.problem_.d) == (est.problem_.k, est.problem_.mu, est.problem_.d)
    assert np.array_equal(got.problem_.pull_matrix, est.problem_.pull_matrix)
    assert got.problem_.objective(got.solution_.M) == est.solution_.objective
    assert got.n_features_in_ == est.n_features_in_ and got.n_iter_ == est.n_iter_


@pytest.mark.parametrize("params", [{}, {"clusters": "kmeans", "n_clusters": 2, "init": "single", "random_state": 3},
                                    {"clusters": np.array(["a", "b"])[np.arange(50) % 2]}],
                         ids=["labels", "kmeans-single", "array"])
def test_multimetric_round_trip_is_exact(params, iris, tmp_path):
    X, y = iris
    est = MultiMetricLMNN(k=2, **params).fit(X, y)
    got = load_model(save_model(tmp_path / "mm.npz", est))
    _same_fit(got, est)
    assert np.array_equal(got.clusters_, est.clusters_) and got.problem_.n_clusters == est.problem_.n_clusters
    assert np.array_equal(got.classes_, est.classes_)
    assert len(got.metrics_) == len(est.metrics_)
    assert all(np.array_equal(a, b) for a, b in zip(got.metrics_, est.metrics_))
    if est.single_solution_ is None:
        assert got.single_solution_ is None
    else:
        _same_solution(got.single_solution_, est.single_solution_)
    Xq = X + 0.37
    assert np.array_equal(got.predict(Xq), est.predict(Xq))
    meta = got.model_metadata_
    assert meta["method"] == "MultiMetricLMNN" and meta["problem"]["n_clusters"] == est.problem_.n_clusters


def test_multimetric_kmeans_is_not_run_again(iris, tmp_path, monkeypatch):
    import sklearn.cluster

    X, y = iris
    est = MultiMetricLMNN(k=2, clusters="kmeans", n_clusters=2).fit(X, y)
    path = save_model(tmp_path / "mm.npz", est)
    monkeypatch.setattr(sklearn.cluster, "KMeans", None)  # loading must use the stored cluster codes
    got = load_model(path)
    assert got.get_params()["clusters"] == "kmeans" and np.array_equal(got.clusters_, est.clusters_)


@pytest.fixture(scope="module")
def kernel_fits():
    X, y = _rings()
    return X, {"rbf": KernelLMNN(k=2).fit(X, y),
               "poly": KernelLMNN(k=2, kernel="poly", kernel_params={"degree": 2}, n_components=4).fit(X, y)}


@pytest.mark.parametrize("kernel", ["rbf", "poly"])
def test_kernel_lmnn_round_trip_is_exact(kernel, kernel_fits, tmp_path):
    X, fits = kernel_fits
    est = fits[kernel]
    got = load_model(save_model(tmp_path / "k.npz", est))
    _same_fit(got, est)
    assert np.array_equal(got.components_, est.components_) and np.array_equal(got.embedding_, est.embedding_)
    assert np.array_equal(got.problem_.X_input, est.problem_.X_input)
    assert got.problem_.kernel_params == est.problem_.kernel_params and "gamma" in got.problem_.kernel_params
    assert got.problem_.n_components == est.problem_.n_components
    Xq = X * 0.9 + 0.05
    assert np.array_equal(got.transform(Xq), est.transform(Xq))
    assert np.array_equal(got.predict(Xq), est.predict(Xq))
    assert np.array_equal(got.get_kernel_matrix_A(), est.get_kernel_matrix_A())
    meta = got.model_metadata_
    assert meta["problem"]["kernel"] == kernel and meta["problem"]["kernel_params"] == est.problem_.kernel_params


def test_kernel_lmnn_load_does_not_depend_on_the_eigensolver(kernel_fits, tmp_path, monkeypatch):
    X, fits = kernel_fits
    est = fits["rbf"]
    path = save_model(tmp_path / "k.npz", est)
    eigh = np.linalg.eigh
    monkeypatch.setattr(np.linalg, "eigh", lambda a: (lambda w, U: (w, -U))(*eigh(a)))  # other eigenvector signs
    got = load_model(path)
    Xq = X * 0.9 + 0.05
    assert np.array_equal(got.transform(Xq), est.transform(Xq))
    assert np.array_equal(got.predict(Xq), est.predict(Xq))
    assert np.array_equal(got.problem_.X, est.problem_.X)


@pytest.mark.parametrize("which, array", [("mm", "clusters"), ("kernel", "kernel_W"), ("kernel", "embedding"),
                                          ("mm", "single_M")])
def test_new_estimators_missing_array_is_corrupt(which, array, iris, kernel_fits, tmp_path):
    if which == "mm":
        est = MultiMetricLMNN(k=2, init="single").fit(*iris)
    else:
        est = kernel_fits[1]["rbf"]
    path = save_model(tmp_path / "m.npz", est)
    arrays, meta = _raw(path)
    del arrays[array]
    meta["sha256"] = _payload_sha256(arrays)  # a consistent file that lacks an array
    _rewrite(path, arrays, meta)
    msg = (f"model file {str(path)!r} is corrupt: array(s) {array} missing; the file was not written by "
           "metricopt.io.save_model or was edited. Fit and save the model again.")
    with pytest.raises(ModelFileError, match=f"^{re.escape(msg)}$"):
        load_model(path)


def test_kernel_lmnn_bad_kernel_params_are_corrupt(kernel_fits, tmp_path):
    path = save_model(tmp_path / "k.npz", kernel_fits[1]["rbf"])
    arrays, meta = _raw(path)
    meta["problem"]["kernel_params"] = {"gamma": -1.0}
    _rewrite(path, arrays, meta)
    with pytest.raises(ModelFileError, match=re.escape(f"model file {str(path)!r} is corrupt: its KernelLMNN cannot "
                                                       "be rebuilt (kernel_params['gamma'] must be > 0")):
        load_model(path)


# --------------------------------------------------------------------------- regularizers and shapes


def test_regularizer_is_stored_by_its_config(iris, tmp_path):
    from metricopt.terms import Trace

    X, y = iris
    est = LMNN(k=2, regularizer=Trace(1e-3)).fit(X, y)
    path = save_model(tmp_path / "r.npz", est)
    assert read_model_file(path).metadata["params"]["regularizer"] == [{"term": "Trace", "lam": 1e-3}]
    got = load_model(path)
    (term,) = got.regularizer
    assert type(term) is Trace and term.lam == 1e-3
    assert got.problem_.objective(got.solution_.M) == est.solution_.objective


def test_regularizer_without_config_cannot_be_saved(iris, tmp_path):
    from metricopt.terms import Linear

    X, y = iris
    est = LMNN(k=2, regularizer=Linear(1e-3 * np.eye(4))).fit(X, y)
    with pytest.raises(InputError, match=r"^cannot save a model with the regularizer .*: model files store only terms "
                                         r"that describe themselves by term\.config\(\)"):
        save_model(tmp_path / "r.npz", est)
    assert not (tmp_path / "r.npz").exists()


def test_components_of_the_wrong_shape_are_corrupt(model_path):
    arrays, meta = _raw(model_path)
    arrays["components"] = arrays["components"][:, :3].copy()
    meta["sha256"] = _payload_sha256(arrays)
    _rewrite(model_path, arrays, meta)
    msg = (f"model file {str(model_path)!r} is corrupt: M (4, 4) and components (4, 3) do not fit its problem with "
           "a 4 x 4 metric.")
    with pytest.raises(ModelFileError, match=f"^{re.escape(msg)}$"):
        load_model(model_path)


def test_unknown_regularizer_term_is_corrupt(model_path):
    arrays, meta = _raw(model_path)
    meta["params"]["regularizer"] = [{"term": "Warp", "lam": 1.0}]
    _rewrite(model_path, arrays, meta)
    with pytest.raises(ModelFileError, match=re.escape(f"model file {str(model_path)!r} is corrupt: its LMNN cannot be "
                                                       "rebuilt (unknown term 'Warp'")):
        load_model(model_path)
