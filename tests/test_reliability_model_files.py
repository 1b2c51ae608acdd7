"""Adversarial model files (issue 28, items 2 and 3): every byte covered, forged values refused or re-verified,
writes only to regular files, paths only.

* Bit flips: a deterministic sample of single-bit flips of a saved model's metadata, (a) as damage (the file
  checksum kept): every one refused; (b) as a forger would (the checksums recomputed): each refused, or loaded
  with the same metric, problem, hyperparameters, predictions and certificate bounds (and never an unconfirmed
  "optimal").
* Forged files with recomputed checksums: a negative-definite or asymmetric metric, a factor that does not fit,
  a NaN objective, inconsistent certificates, edited hyperparameters, another problem's metric, edited training
  data, a made-up optimality certificate.
* Destinations: a FIFO, a folder, a (faked) character device, symbolic links (refused unless
  ``follow_symlinks=True``), the command line's ``--out``. Real device nodes are never written.
* Paths: bytes paths work; file objects, numbers and None are refused with a message saying what to pass.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat

import warnings

import numpy as np
import pytest

import metricopt
import metricopt.datasets
from metricopt import LMNN, LMNNProblem
from metricopt.errors import InputError
from metricopt.io import (
    CHECKSUM_KEY,
    METADATA_KEY,
    REVERIFIED_KEY,
    ModelFileError,
    ModelFileWarning,
    _payload_sha256,
    check_destination,
    load_model,
    read_model_file,
    save_model,
)

# --------------------------------------------------------------------------- a small fitted model


@pytest.fixture(scope="module")
def data():
    X, y = metricopt.datasets.load("iris", scale="standard")
    return X[::5], y[::5], X[2::5]  # 30 training points (10 per class) and 30 query points


@pytest.fixture(scope="module")
def est(data):
    X, y, _ = data
    return LMNN(k=2).fit(X, y)


@pytest.fixture(scope="module")
def saved(est, tmp_path_factory):
    """The arrays (checksum removed) and the metadata bytes of a saved model."""
    path = save_model(tmp_path_factory.mktemp("m") / "model.npz", est)
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    assert arrays.pop(CHECKSUM_KEY).shape == (64,)
    return arrays, arrays.pop(METADATA_KEY).tobytes()


def _write(path, arrays, blob, checksum=True):
    """A model file of ``arrays`` and metadata bytes ``blob``: with its checksum recomputed (``True``), the one
    given (``str``), or none (``False``)."""
    payload = {**arrays, METADATA_KEY: np.frombuffer(blob, dtype=np.uint8)}
    if checksum is not False:
        digest = _payload_sha256(payload) if checksum is True else checksum
        payload[CHECKSUM_KEY] = np.frombuffer(digest.encode("ascii"), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, **payload)
    return path


def _forge(path, arrays, meta, resum_arrays=True):
    """A forged file: ``meta`` with the arrays' checksum and the file checksum recomputed."""
    meta = json.loads(json.dumps(meta))
    if resum_arrays:
        meta["sha256"] = _payload_sha256(arrays)
    return _write(path, arrays, json.dumps(meta, sort_keys=True).encode("utf-8"))


def _corrupt_msg(path, what):
    return re.escape(f"model file {str(path)!r} is corrupt: {what}")


def _bits(n_bytes, count, seed):
    """``count`` distinct bit positions in ``n_bytes`` bytes, deterministic."""
    return np.random.default_rng(seed).choice(8 * n_bytes, size=min(count, 8 * n_bytes), replace=False)


# --------------------------------------------------------------------------- bit flips


def test_every_sampled_metadata_bit_flip_is_refused(saved, tmp_path):
    """Damage: 400 single-bit flips of the metadata with the file's checksum kept: all refused."""
    arrays, blob = saved
    digest = _payload_sha256({**arrays, METADATA_KEY: np.frombuffer(blob, dtype=np.uint8)})
    path = tmp_path / "flip.npz"
    refused = 0
    for bit in _bits(len(blob), 400, seed=28):
        flipped = bytearray(blob)
        flipped[bit // 8] ^= 1 << (bit % 8)
        _write(path, arrays, bytes(flipped), checksum=digest)
        with pytest.raises(ModelFileError, match=_corrupt_msg(path, "the SHA-256 of its metadata and arrays is ")
                           + r"[0-9a-f]{64}, but the file records " + digest):
            load_model(path)
        refused += 1
    assert refused == 400


def test_flips_of_the_stored_checksum_and_of_the_raw_file_are_refused(est, saved, tmp_path):
    arrays, blob = saved
    digest = _payload_sha256({**arrays, METADATA_KEY: np.frombuffer(blob, dtype=np.uint8)})
    path = tmp_path / "flip.npz"
    for i in range(0, 64, 7):  # the checksum itself
        bad = digest[:i] + ("0" if digest[i] != "0" else "1") + digest[i + 1:]
        _write(path, arrays, blob, checksum=bad)
        with pytest.raises(ModelFileError, match=re.escape(f"but the file records {bad}")):
            load_model(path)
    good = save_model(tmp_path / "good.npz", est).read_bytes()
    start = good.find(blob[:40])
    assert start > 0
    for bit in _bits(len(blob), 60, seed=2028):  # the metadata's bytes inside the archive (its CRC-32 kept)
        raw = bytearray(good)
        raw[start + bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(raw))
        with pytest.raises(ModelFileError, match=re.escape(f"model file {str(path)!r} is corrupt: ")):
            load_model(path)


def _loaded_values(model, Xq):
    """What a loaded LMNN is: its metric, map, problem, used hyperparameters, predictions, status, certificate."""
    p = model.problem_
    cert = model.certificate_
    return {
        "M": model.solution_.M, "L": model.solution_.L, "components": model.components_, "X": p.X, "y": p.y,
        "targets": p.target_neighbors, "k": (p.k, model.get_params()["k"]), "mu": (p.mu, model.get_params()["mu"]),
        "knn": model.predict(Xq), "energy": model.predict(Xq, rule="energy"), "objective": model.solution_.objective,
        "status": model.solution_.status.code, "bounds": (cert.upper, cert.lower, cert.verdict.value),
    }


def _same(a, b):
    return a.keys() == b.keys() and all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def test_forged_single_bit_flips_are_refused_or_change_nothing_that_matters(est, data, saved, tmp_path):
    """A forger: 200 single-bit flips of the metadata, both checksums recomputed. Each is refused, or loads the same
    metric, problem, hyperparameters in use, predictions, status and certificate bounds; "optimal" only re-verified.
    """
    _, _, Xq = data
    arrays, blob = saved
    path = _write(tmp_path / "orig.npz", arrays, blob)
    reference = _loaded_values(load_model(path), Xq)
    outcomes = {"refused": 0, "same values": 0, "same values, not optimal": 0}
    for bit in _bits(len(blob), 200, seed=280):
        flipped = bytearray(blob)
        flipped[bit // 8] ^= 1 << (bit % 8)
        _write(path, arrays, bytes(flipped))
        try:
            with _quiet():
                got = load_model(path)
        except ModelFileError as exc:
            assert f"model file {str(path)!r}" in str(exc) or f"{str(path)!r} is not a metricopt model file" in str(exc)
            outcomes["refused"] += 1
            continue
        values = _loaded_values(got, Xq)
        context = (bit, bytes(flipped[max(0, bit // 8 - 30): bit // 8 + 30]))
        if values["status"] == reference["status"]:
            assert _same(values, reference), context
            assert got.solution_.certificate.details[REVERIFIED_KEY].startswith("yes: ")
            outcomes["same values"] += 1
        else:  # e.g. a key of the solution's certificate renamed: no certificate, so "optimal" is not confirmed
            assert values.pop("status") == "uncertified" and reference["status"] == "optimal", context
            assert _same(values, {k: v for k, v in reference.items() if k != "status"}), context
            outcomes["same values, not optimal"] += 1
    assert sum(outcomes.values()) == 200
    assert outcomes["refused"] >= 50, outcomes  # most flips break the JSON, the format, a value check
    print(f"forged single-bit flips of the metadata: {outcomes}")


class _quiet:
    """Record (and so silence) warnings inside a block."""

    def __enter__(self):
        import warnings

        self._ctx = warnings.catch_warnings(record=True)
        self._ctx.__enter__()
        warnings.simplefilter("always")

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


# --------------------------------------------------------------------------- forged files (checksums recomputed)


@pytest.fixture
def forged(saved, tmp_path):
    """``(arrays, meta, path)``: copies to edit, and where to write the forgery."""
    arrays, blob = saved
    return {k: v.copy() for k, v in arrays.items()}, json.loads(blob), tmp_path / "forged.npz"


def test_negative_definite_metric_with_status_optimal_is_refused(forged):
    arrays, meta, path = forged
    arrays["M"] = -arrays["M"]  # L and components kept: the metric alone is negative definite, status still optimal
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, "its metric M is not positive semidefinite: its "
                                                                "smallest eigenvalue -")):
        load_model(path)


def test_asymmetric_metric_is_refused(forged):
    arrays, meta, path = forged
    arrays["M"][0, 1] += 1e-3 * np.abs(arrays["M"]).max()
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, "its metric M is not symmetric: max|M - M^T| = ")):
        load_model(path)


def test_factor_that_does_not_fit_the_metric_is_refused(forged):
    arrays, meta, path = forged
    arrays["L"] = 2.0 * arrays["L"]
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, "its L does not factor its metric M: max|M - L^T L| = ")):
        load_model(path)


def test_components_that_do_not_fit_the_metric_are_refused(forged):
    arrays, meta, path = forged
    arrays["components"] = arrays["components"][::-1].copy() * 1.5
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, "its components do not factor its metric M")):
        load_model(path)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "12.5", 10**400])
def test_objective_that_is_not_a_finite_number_is_refused(value, forged):
    arrays, meta, path = forged
    meta["solution"]["objective"] = value
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, f"its solution's objective {value!r} is not a finite "
                                                                "number")):
        load_model(path)


def test_objective_that_is_not_the_certificates_upper_bound_is_refused(forged):
    arrays, meta, path = forged
    meta["solution"]["objective"] *= 0.5
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, "its solution's certificate has the upper bound ")):
        load_model(path)


def test_objective_is_its_problems_at_the_metric(est, forged):
    """Within the certificate's tolerance of its upper bound, but not the rebuilt problem's objective: refused; a
    last-digits difference loads the problem's objective."""
    arrays, meta, path = forged
    true = est.solution_.objective
    meta["solution"]["objective"] = true * (1 + 1e-7)
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, f"the objective it records, {true * (1 + 1e-7)!r}, is "
                                                                f"not its problem's objective {true!r} at its metric")):
        load_model(path)
    meta["solution"]["objective"] = true * (1 + 1e-12)
    _forge(path, arrays, meta)
    assert load_model(path).solution_.objective == true


def _edit_certificates(meta, **values):
    for cert in (meta["certificate"], meta["solution"]["certificate"]):
        cert.update(values)


def test_certificates_that_differ_are_refused(forged):
    arrays, meta, path = forged
    meta["certificate"] = None  # the estimator's; the solution's kept
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, "its certificate and its solution's certificate differ "
                                                                "(save_model records the same one)")):
        load_model(path)


def test_certificate_lower_bound_above_upper_bound_is_refused(forged):
    arrays, meta, path = forged
    upper = meta["certificate"]["upper"]
    _edit_certificates(meta, lower=upper + 1.0, gap=-1.0, rel_gap=-1.0 / upper)
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, f"its solution's certificate's lower bound {upper + 1.0!r} "
                                                                f"exceeds its upper bound {upper!r}")):
        load_model(path)


def test_certificate_gap_that_is_not_its_bounds_is_refused(forged):
    arrays, meta, path = forged
    _edit_certificates(meta, gap=0.0)
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, "its solution's certificate records gap 0.0, but its "
                                                                "bounds give ")):
        load_model(path)


def test_optimal_verdict_with_a_gap_above_tol_is_refused(forged):
    arrays, meta, path = forged
    upper = meta["certificate"]["upper"]
    lower = upper - 0.25 * abs(upper)
    _edit_certificates(meta, lower=lower, gap=upper - lower, rel_gap=(upper - lower) / abs(upper))
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, "its solution's certificate says 'optimal within tol', "
                                                                "but its relative gap 2.500e-01 is > its tol 1.0e-06")):
        load_model(path)


def test_status_optimal_with_a_suboptimal_certificate_is_refused(forged):
    arrays, meta, path = forged
    upper = meta["certificate"]["upper"]
    lower = upper - 0.25 * abs(upper)
    _edit_certificates(meta, lower=lower, gap=upper - lower, rel_gap=(upper - lower) / abs(upper), verdict="suboptimal")
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, "its solution has status 'optimal', but its certificate "
                                                                "says 'suboptimal' (relative gap 2.500e-01, tol 1.0e-06)")):
        load_model(path)


def test_hyperparameter_edit_k_2_to_5_is_refused(forged):
    """The issue's case: after k 2 -> 5 in params, get_params() said 5 while predict used the stored 2."""
    arrays, meta, path = forged
    meta["params"]["k"] = 5
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, "its hyperparameter k=5 differs from the k=2 of the "
                                                                "fitted LMNNProblem (its stored state), which predictions "
                                                                "use")):
        load_model(path)


@pytest.mark.parametrize("edit, what", [
    ({"mu": 0.25}, "its problem description records mu=0.5, but the problem rebuilt from its stored data has mu=0.25"),
    ({"backend": "cvxpx"}, "its LMNN cannot be rebuilt (unknown backend 'cvxpx'; choose one of: 'cvxpy', 'jax'.)"),
    ({"k": -2}, "its LMNN cannot be rebuilt (k must be"),
])
def test_other_hyperparameter_edits_are_refused(edit, what, forged):
    arrays, meta, path = forged
    meta["params"].update(edit)
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, what)):
        load_model(path)


def test_problem_description_edit_is_refused(forged):
    arrays, meta, path = forged
    meta["problem"]["n_triplets"] += 1
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, "its problem description records n_triplets=")):
        load_model(path)


def test_mu_edited_everywhere_loads_but_not_as_optimal(forged):
    """params and problem agree on the edited mu: the file's certificate is then not the rebuilt problem's, and the
    certificate and objective of the rebuilt problem at the stored metric replace it."""
    arrays, meta, path = forged
    meta["params"]["mu"] = meta["problem"]["mu"] = 0.25
    _forge(path, arrays, meta)
    got = _load_discarding(path)
    assert got.problem_.mu == got.get_params()["mu"] == 0.25
    assert got.solution_.objective == got.problem_.objective(got.solution_.M)


def _load_discarding(path):
    """Load a file whose certificate certifies another problem: the recomputed one (true for the rebuilt problem)
    replaces it and decides the status; never the file's 'optimal' unless the recomputed certificate says so."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = load_model(path)
    cert = got.certificate_
    assert cert.details[REVERIFIED_KEY].startswith("yes: recomputed by metricopt.certify")
    assert "the file's certificate was discarded (its upper bound " in cert.details[REVERIFIED_KEY]
    assert cert.upper == pytest.approx(got.problem_.objective(got.solution_.M), rel=1e-12)
    assert cert.lower <= cert.upper
    assert got.solution_.objective == cert.upper
    if cert.is_optimal:
        assert got.solution_.status.code == "optimal"
    else:
        assert got.solution_.status.code == "optimal_inaccurate"
        assert any("the certificate recomputed at load says" in str(w.message) for w in caught)
    return got


def _install_solution(arrays, meta, other):
    """Put ``other``'s (a fitted LMNN's) metric, map, objective and certificate into the forged file."""
    sol = other.solution_
    arrays["M"], arrays["L"], arrays["components"] = sol.M.copy(), sol.L.copy(), other.components_.copy()
    c = sol.certificate
    cert = {"upper": c.upper, "lower": c.lower, "gap": c.gap, "rel_gap": c.rel_gap, "verdict": c.verdict.value,
            "tol": c.tol, "problem": c.problem, "details": {}}
    meta["solution"]["objective"] = sol.objective
    meta["solution"]["certificate"] = meta["certificate"] = cert


def test_another_problems_metric_does_not_load_as_optimal(data, forged):
    X, y, _ = data
    arrays, meta, path = forged
    other = LMNN(k=2).fit(X * np.array([3.0, 1.0, 0.2, 1.0]), y)  # another problem, optimal there
    assert other.solution_.status.code == "optimal"
    _install_solution(arrays, meta, other)
    _forge(path, arrays, meta)
    got = _load_discarding(path)
    assert got.solution_.status.code == "optimal_inaccurate"  # another problem's optimum is not this one's
    assert got.solution_.objective != other.solution_.objective


def test_edited_training_data_does_not_load_as_optimal(forged):
    arrays, meta, path = forged
    arrays["X_train"] = arrays["X_train"] * np.array([3.0, 1.0, 1.0, 1.0])
    _forge(path, arrays, meta)
    assert _load_discarding(path).solution_.status.code == "optimal_inaccurate"


def _claim_optimal(arrays, meta, problem, M):
    """A forger's consistent claim that ``M`` is optimal for ``problem``: objective and upper bound at ``M`` (as
    certify computes it), lower bound = upper bound."""
    w, U = np.linalg.eigh(M)
    L = (U * np.sqrt(np.clip(w, 0, None))).T
    arrays["M"], arrays["L"], arrays["components"] = M, L, L.copy()
    upper = metricopt.certify(problem, M).upper
    cert = {"upper": upper, "lower": upper, "gap": 0.0, "rel_gap": 0.0, "verdict": "optimal within tol", "tol": 1e-6,
            "problem": "LMNN", "details": {}}
    meta["solution"]["objective"] = upper
    meta["solution"]["certificate"] = meta["certificate"] = cert


def test_made_up_optimality_certificate_is_recomputed(data, forged):
    X, y, _ = data
    arrays, meta, path = forged
    problem = LMNNProblem(X, y, k=2, target_neighbors=arrays["target_neighbors"])
    _claim_optimal(arrays, meta, problem, 0.3 * np.eye(4))
    _forge(path, arrays, meta)
    with pytest.warns(ModelFileWarning, match=re.escape(f"model file {str(path)!r} records status 'optimal', but the "
                                                        "certificate recomputed at load says 'suboptimal' (relative "
                                                        "gap ")):
        got = load_model(path)
    assert got.solution_.status.code == "optimal_inaccurate" and not got.certificate_.is_optimal
    assert got.certificate_.lower < 0.99 * got.certificate_.upper
    assert got.certificate_.details[REVERIFIED_KEY].startswith("yes: recomputed by metricopt.certify")


def test_edited_training_data_with_recomputed_numbers_is_recomputed(forged):
    """The forger edits X_train and makes the objective and bounds those of the edited problem at the stored M."""
    arrays, meta, path = forged
    arrays["X_train"] = arrays["X_train"] * np.array([3.0, 1.0, 1.0, 1.0])
    problem = LMNNProblem(arrays["X_train"], arrays["y_train"], k=2, target_neighbors=arrays["target_neighbors"])
    _claim_optimal(arrays, meta, problem, arrays["M"])
    _forge(path, arrays, meta)
    with pytest.warns(ModelFileWarning, match="the certificate recomputed at load says 'suboptimal'"):
        got = load_model(path)
    assert got.solution_.status.code == "optimal_inaccurate"


def test_optimal_without_a_certificate_and_recertify_false_are_not_optimal(est, forged, tmp_path):
    arrays, meta, path = forged
    meta["certificate"] = meta["solution"]["certificate"] = None
    _forge(path, arrays, meta)
    with pytest.warns(ModelFileWarning, match=r"could not be re-verified at load \(the file holds no certificate\)"):
        assert load_model(path).solution_.status.code == "uncertified"
    good = save_model(tmp_path / "good.npz", est)
    with pytest.warns(ModelFileWarning, match=re.escape("(load_model(..., recertify=False))")):
        got = load_model(good, recertify=False)
    assert got.solution_.status.code == "uncertified"
    assert got.certificate_.details[REVERIFIED_KEY].startswith("NO: load_model(..., recertify=False)")
    assert "re-verified at load          : NO: " in got.certificate_.report()
    assert load_model(good).solution_.status.code == "optimal"


def test_a_version_1_forgery_is_checked_all_the_same(forged):
    """Dropping the file checksum and claiming format version 1 gets a warning, and the same value checks."""
    arrays, meta, path = forged
    meta["format_version"] = 1
    meta["params"]["k"] = 5
    meta["sha256"] = _payload_sha256(arrays)
    _write(path, arrays, json.dumps(meta).encode("utf-8"), checksum=False)
    with pytest.warns(ModelFileWarning, match="has format version 1: a checksum covers its arrays but not its metadata"):
        with pytest.raises(ModelFileError, match=_corrupt_msg(path, "its hyperparameter k=5 differs")):
            load_model(path)


def test_version_2_without_its_checksum_is_refused(saved, tmp_path):
    arrays, blob = saved
    path = _write(tmp_path / "m.npz", arrays, blob, checksum=False)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, f"it has format version 2 but no checksum array "
                                                                f"{CHECKSUM_KEY!r}")):
        read_model_file(path)


def test_solution_file_is_checked_and_marked_not_reverified(data, tmp_path):
    X, y, _ = data
    problem = LMNNProblem(X, y, k=2)
    sol = problem.solve()
    path = save_model(tmp_path / "s.npz", sol, problem=problem)
    got = load_model(path)
    assert got.status.code == "optimal" and got.certificate.details[REVERIFIED_KEY].startswith("NO: the bounds are")
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files if k not in (CHECKSUM_KEY, METADATA_KEY)}
        meta = json.loads(npz[METADATA_KEY].tobytes())
    arrays["M"] = -arrays["M"]
    _forge(path, arrays, meta)
    with pytest.raises(ModelFileError, match=_corrupt_msg(path, "its metric M is not positive semidefinite")):
        load_model(path)


# --------------------------------------------------------------------------- destinations


def test_saving_over_a_fifo_is_refused(est, tmp_path):
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    msg = (f"cannot write {str(fifo)!r}: it is a FIFO (named pipe), not a regular file; metricopt writes only regular "
           "files (saving would replace it). Give the path of a regular file.")
    with pytest.raises(InputError, match=f"^{re.escape(msg)}$"):
        save_model(fifo, est)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["pipe.npz"]
    with pytest.raises(ModelFileError, match=re.escape(f"model file {str(fifo)!r} is not a regular file (a FIFO (named "
                                                       "pipe)); give the path of a .npz model file.")):
        load_model(fifo)  # never opened: no blocking read


def test_saving_over_a_folder_is_refused(est, tmp_path):
    with pytest.raises(InputError, match=f"^{re.escape(f'cannot write {str(tmp_path)!r}: it is a folder; give a file name.')}$"):
        save_model(tmp_path, est)


def test_saving_over_a_character_device_is_refused(est, tmp_path, monkeypatch):
    """/dev/full as root was replaced by a zip file; here a path whose lstat says 'character device' (faked: no real
    device node is touched)."""
    fake = tmp_path / "full"
    real_lstat = os.lstat

    def lstat(path, *args, **kwargs):
        if os.fspath(path) == str(fake):
            return os.stat_result((stat.S_IFCHR | 0o666, 0, 0, 1, 0, 0, 0, 0, 0, 0))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    msg = (f"cannot write {str(fake)!r}: it is a character device, not a regular file; metricopt writes only regular "
           "files (saving would replace it). Give the path of a regular file.")
    with pytest.raises(InputError, match=f"^{re.escape(msg)}$"):
        check_destination(fake)
    with pytest.raises(InputError, match=re.escape("it is a character device, not a regular file")):
        save_model(fake, est)
    assert os.listdir(tmp_path) == []  # nothing written, no temporary file left


def test_saving_over_a_symlink_needs_follow_symlinks(est, tmp_path):
    target = tmp_path / "target.npz"
    target.write_bytes(b"precious")
    link = tmp_path / "link.npz"
    link.symlink_to(target)
    msg = (f"cannot write {str(link)!r}: it is a symbolic link (to {str(target)!r}); metricopt writes through a link "
           "only on request: pass follow_symlinks=True to replace the link's target, or give the target's path (or "
           "another file name).")
    with pytest.raises(InputError, match=f"^{re.escape(msg)}$"):
        save_model(link, est)
    assert link.is_symlink() and target.read_bytes() == b"precious"
    assert save_model(link, est, follow_symlinks=True) == link
    assert link.is_symlink() and os.readlink(link) == str(target)  # the link kept, its target replaced
    assert np.array_equal(load_model(link).solution_.M, est.solution_.M)
    assert sorted(os.listdir(tmp_path)) == ["link.npz", "target.npz"]


def test_symlink_to_a_fifo_and_dangling_symlinks(est, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "to-pipe.npz"
    link.symlink_to(fifo)
    with pytest.raises(InputError, match=re.escape(f"cannot write {str(link)!r}: it is a symbolic link to {str(fifo)!r}, "
                                                   "which is a FIFO (named pipe), not a regular file")):
        save_model(link, est, follow_symlinks=True)
    dangling = tmp_path / "new.npz"
    dangling.symlink_to(tmp_path / "created.npz")
    with pytest.raises(InputError, match="it is a symbolic link"):
        save_model(dangling, est)
    save_model(dangling, est, follow_symlinks=True)
    assert (tmp_path / "created.npz").is_file() and dangling.is_symlink()


def test_cli_out_refuses_a_symlink_and_a_fifo(tmp_path, monkeypatch, capsys):
    from metricopt.cli import main

    monkeypatch.chdir(tmp_path)
    os.symlink("real.npz", "link.npz")
    os.mkfifo("pipe.npz")
    for out, what in [("link.npz", "it is a symbolic link (to 'real.npz'); metricopt writes through a link only on "
                                   "request"),
                      ("pipe.npz", "it is a FIFO (named pipe), not a regular file")]:
        code = main(["fit", "--method", "mmc", "--data", "iris", "--out", out])
        err = capsys.readouterr().err
        assert code == 2 and f"cannot write {out!r}: {what}" in err
    assert os.path.islink("link.npz") and not os.path.exists("real.npz")
    assert stat.S_ISFIFO(os.lstat("pipe.npz").st_mode)


# --------------------------------------------------------------------------- paths


def test_bytes_paths_are_paths(est, tmp_path):
    path = os.fsencode(tmp_path / "bytes.npz")
    assert save_model(path, est) == tmp_path / "bytes.npz"
    assert np.array_equal(load_model(path).solution_.M, est.solution_.M)
    assert read_model_file(path).metadata["estimator"] == "LMNN"


def test_file_objects_and_non_paths_are_refused(est, tmp_path):
    path = save_model(tmp_path / "m.npz", est)
    tail = ("Pass the path of the file instead: model files are checked as files on disk and written atomically (a "
            "temporary file renamed over the destination), which an open file object does not allow.")
    with open(path, "rb") as fh:
        for call, name in [(load_model, "load_model"), (read_model_file, "read_model_file")]:
            msg = f"{name} needs a file path (str, bytes or os.PathLike); got a file object (BufferedReader of {str(path)!r}). "
            with pytest.raises(ModelFileError, match=f"^{re.escape(msg + tail)}$"):
                call(fh)
    with pytest.raises(ModelFileError, match=re.escape("load_model needs a file path (str, bytes or os.PathLike); got a "
                                                       "file object (BytesIO).")):
        load_model(io.BytesIO(path.read_bytes()))
    with open(tmp_path / "out.npz", "wb") as fh:
        with pytest.raises(InputError, match=re.escape("save_model needs a file path (str, bytes or os.PathLike); got a "
                                                       "file object (BufferedWriter of ")):
            save_model(fh, est)
    assert (tmp_path / "out.npz").read_bytes() == b""
    for bad, kind in [(3, "int"), (None, "NoneType"), (1.5, "float")]:
        with pytest.raises(ModelFileError, match=re.escape(f"load_model needs a file path (str, bytes or os.PathLike); "
                                                           f"got {kind}.")):
            load_model(bad)
        with pytest.raises(InputError, match=re.escape(f"save_model needs a file path (str, bytes or os.PathLike); "
                                                       f"got {kind}.")):
            save_model(bad, est)
    with pytest.raises(ModelFileError, match=re.escape("load_model needs a file path; got an empty path ('').")):
        load_model("")
