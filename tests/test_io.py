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
from metricopt import LMNN, MMC, POLA, LMNNProblem, Solution, knn_predict
from metricopt.errors import InputError
from metricopt.io import (
    FORMAT,
    FORMAT_VERSION,
    METADATA_KEY,
    ModelFileError,
    Preprocessing,
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
    """Every array of an npz file (pickle off) plus the decoded metadata."""
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(arrays.pop(METADATA_KEY).tobytes().decode("utf-8"))
    return arrays, meta


def _rewrite(path, arrays, meta):
    blob = json.dumps(meta).encode("utf-8")
    with open(path, "wb") as fh:
        np.savez(fh, **arrays, **{METADATA_KEY: np.frombuffer(blob, dtype=np.uint8)})


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
    assert meta["format"] == FORMAT == "metricopt-model" and meta["format_version"] == FORMAT_VERSION == 1
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
    with pytest.raises(InputError, match=r"^save_model needs a fitted metricopt.LMNN, MMC or POLA estimator or a "
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
    msg = (f"model file {str(model_path)!r} has format version 2 (written by metricopt 9.9.9), newer than this "
           f"metricopt {metricopt.__version__} reads (format version 1); upgrade metricopt to load it.")
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
