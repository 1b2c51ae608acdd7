r"""Saving and loading learned metrics: one ``.npz`` file that loads without executing code.

A model file is a NumPy ``.npz`` archive (an uncompressed zip of ``.npy`` arrays) holding

* the arrays of the model: ``M`` (the learned PSD matrix), ``L`` (``components_``,
  ``M = L^T L``), POLA's threshold ``b`` (a 0-d array), and what prediction needs: the
  training inputs ``X_train`` and labels ``y_train``, the ``classes``, the
  ``target_neighbors`` of the LMNN family (for the energy rule and to rebuild the
  problem), multi-metric LMNN's cluster codes ``clusters`` (and its single-metric start
  ``single_M``, ``single_L``), kernel LMNN's ``embedding`` and kernel-PCA map
  (``kernel_Z``, ``kernel_W``, ``kernel_kbar``, ... : restored, never recomputed, so a
  loaded model does not depend on the eigensolver), array-valued hyperparameters
  (``param_<name>``), the fitted preprocessing (``pre_shift``,
  ``pre_width``, ``pre_pca_mean``, ``pre_pca_components``) where one was saved;
* one more array, ``__metricopt__``: the UTF-8 bytes (``uint8``) of a JSON document with
  the format name and version, the metricopt version that wrote the file, the creation
  time, the method, its hyperparameters and problem (with its reference; kernel LMNN's
  kernel with its resolved parameters, e.g. the ``gamma`` chosen from the data), the backend,
  solver, status, objective and solve statistics, the duality-gap certificate (lower
  bound, gap, verdict), the shapes and dtypes of the arrays and the SHA-256 checksum of
  the array payload.

Safety
------
* Files are read with ``np.load(..., allow_pickle=False)``: loading never unpickles, so a
  model file cannot execute code. Only numeric, boolean and (fixed-width) string arrays
  are written; labels of ``object`` dtype are refused at save time.
* Every read checks the format name, the format version (a file from a newer format is
  refused with a message to upgrade) and the SHA-256 checksum of the arrays (a mismatch
  means the file is corrupt). Every failure raises :class:`ModelFileError`, which says
  which file and what was wrong.
* Writes are atomic: the archive is written to a temporary file in the destination
  folder, flushed and ``fsync``-ed, then renamed over the destination with
  :func:`os.replace`. An interrupted or failed save leaves the previous file (if any)
  untouched and removes its temporary file.

Who writes what
---------------
This module is the container: the format, its checks, atomic writes, the preprocessing and
the Solution form (``M``, ``L``, ``b``, status, statistics, certificate). Each estimator
saves and restores its own state (``_model_state()`` and ``_restore_model_state(state)``,
with a :class:`metricopt.estimators.base.ModelState`): its hyperparameters (regularizers by
``term.config()``, rebuilt by :func:`metricopt.problems.terms.term_from_config`), training
data and the arrays above; so a new estimator needs no change here beyond its entry in
:data:`metricopt.estimators.MODEL_FILE_ESTIMATORS`.

The learned metrics themselves solve the problems documented in
:class:`metricopt.LMNNProblem` (Weinberger & Saul, JMLR 10:207-244, 2009, Eq. 14),
:class:`metricopt.MMCProblem` (Xing et al., NIPS 2002, Section 2) and
:class:`metricopt.POLAProblem` (Shalev-Shwartz, Singer & Ng, ICML 2004), and their multi-metric
and kernel variants (JMLR 2009, Sections 5.2 and 5.3); this module only
stores them: a loaded estimator predicts exactly (bit for bit) as the saved one.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import pathlib
import tempfile
import zipfile
from collections.abc import Callable
from typing import IO, Any, Union

import numpy as np
from numpy.typing import ArrayLike

from .errors import InputError
from .estimators import MODEL_FILE_ESTIMATORS
from .estimators.base import ModelState, ModelStateError
from .estimators.learners import SavedPasses

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "METADATA_KEY",
    "ModelFile",
    "ModelFileError",
    "Preprocessing",
    "SavedPasses",
    "atomic_write",
    "load_model",
    "read_model_file",
    "save_model",
]

#: Name of the format, stored in every file's metadata.
FORMAT = "metricopt-model"
#: Version of the format written by this module; files of a higher version are refused.
FORMAT_VERSION = 1
#: Name of the array holding the JSON metadata (UTF-8 bytes as ``uint8``).
METADATA_KEY = "__metricopt__"

#: a file path
FilePath = Union[str, "os.PathLike[str]"]


def _estimator_classes() -> dict[str, type]:
    """``{name: class}`` of the estimators model files store: each saves and restores its own state
    (``_model_state()``, ``_restore_model_state(state)``, :class:`metricopt.estimators.base.ModelState`)."""
    return {cls.__name__: cls for cls in MODEL_FILE_ESTIMATORS}


def _estimator_names() -> str:
    """``"LMNN, MMC, POLA, MultiMetricLMNN or KernelLMNN"``."""
    names = list(_estimator_classes())
    return f"{', '.join(names[:-1])} or {names[-1]}"


class ModelFileError(InputError):
    """A model file is missing, not a metricopt model file, from a newer format, or corrupt.

    Also an :class:`~metricopt.errors.InputError` (and so a ``ValueError``).
    """


# --------------------------------------------------------------------------- atomic writes


def atomic_write(path: FilePath, write: Callable[[IO[bytes]], Any]) -> pathlib.Path:
    """Write a file atomically: ``write(fh)`` into a temporary file, then rename it to ``path``.

    The temporary file lives in the destination folder (so that the rename is atomic on
    POSIX and Windows), is flushed and ``fsync``-ed before :func:`os.replace` moves it over
    ``path``. If ``write`` raises (or the process is interrupted by an exception such as
    ``KeyboardInterrupt``), the temporary file is removed and ``path`` keeps its previous
    content.

    Parameters
    ----------
    path : str or os.PathLike
        Destination file; its folder must exist.
    write : callable
        Called with a binary file object opened for writing.

    Returns
    -------
    pathlib.Path
        The destination.

    Raises
    ------
    InputError
        If the destination folder does not exist or ``path`` is a folder.
    """
    path = pathlib.Path(os.fspath(path))
    folder = path.parent if str(path.parent) else pathlib.Path(".")
    if not folder.is_dir():
        raise InputError(f"cannot write {str(path)!r}: the folder {str(folder)!r} does not exist; create it first.")
    if path.is_dir():
        raise InputError(f"cannot write {str(path)!r}: it is a folder; give a file name.")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file ordinary permissions
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable (POSIX; not possible everywhere)
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return path
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
    return path


# --------------------------------------------------------------------------- preprocessing


class Preprocessing:
    r"""Scaling and PCA fitted on training data, stored in model files.

    ``transform(X) = ((X - shift) / width - pca_mean) @ pca_components.T`` (each step only
    where fitted). With ``scale="standard"``, ``shift`` and ``width`` are the training
    column means and standard deviations; with ``"minmax"`` the column minima and ranges
    (constant columns get width 1, as in :func:`metricopt.datasets.preprocess`). PCA keeps
    the leading principal directions of the scaled training data (scikit-learn's PCA; an
    int keeps that many, a float in (0, 1) the fewest explaining that fraction of the
    variance).

    The same (NumPy) arithmetic is applied at fit and at predict time, so a saved model
    sees exactly the features it was trained on.

    Parameters
    ----------
    scale : {None, "standard", "minmax"}, default "standard"
    pca : None, int or float, default None
    """

    def __init__(self, scale: str | None = "standard", pca: int | float | None = None) -> None:
        from .datasets import _check_scale

        self.scale = _check_scale(scale)
        self.pca = pca
        self.shift = self.width = self.pca_mean = self.pca_components = None
        self.n_features_in = None

    def fit(self, X: ArrayLike) -> Preprocessing:
        """Fit on training inputs ``X`` (n, d); returns ``self``."""
        from ._validation import check_X
        from .datasets import fit_scaling_pca

        X = check_X(X)
        self.n_features_in = X.shape[1]
        shift, width, model = fit_scaling_pca(X, self.scale, self.pca, svd_solver="full")
        if shift is not None:
            self.shift = np.ascontiguousarray(shift)
            self.width = np.ascontiguousarray(width)
        if model is not None:
            self.pca_mean = np.ascontiguousarray(model.mean_, dtype=np.float64)
            self.pca_components = np.ascontiguousarray(model.components_, dtype=np.float64)
        return self

    @property
    def n_features_out(self) -> int | None:
        if self.pca_components is not None:
            return self.pca_components.shape[0]
        return self.n_features_in

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Apply the fitted scaling and PCA to ``X`` (n, d)."""
        from ._validation import check_X

        X = check_X(X)
        if self.n_features_in is not None and X.shape[1] != self.n_features_in:
            raise InputError(
                f"the data has {X.shape[1]} features but the model was trained on {self.n_features_in}; "
                "pass data with the same columns as the training data."
            )
        if self.shift is not None:
            X = (X - self.shift) / self.width
        if self.pca_components is not None:
            X = (X - self.pca_mean) @ self.pca_components.T
        return np.ascontiguousarray(X, dtype=np.float64)

    def describe(self) -> str:
        """In words, e.g. ``"standard scaling, PCA to 2 dimensions"``."""
        parts = []
        if self.scale is not None:
            parts.append(f"{self.scale} scaling")
        if self.pca_components is not None:
            r = self.pca_components.shape[0]
            parts.append(f"PCA to {r} dimension{'s' if r != 1 else ''}")
        return ", ".join(parts) or "none"

    # ---------------------------------------------------------------- file form
    def _to_file(self):
        arrays = {}
        for name in ("shift", "width", "pca_mean", "pca_components"):
            value = getattr(self, name)
            if value is not None:
                arrays["pre_" + name] = value
        meta = {"scale": self.scale, "pca": self.pca, "n_features_in": self.n_features_in}
        return meta, arrays

    @classmethod
    def _from_file(cls, meta, arrays):
        pre = cls.__new__(cls)
        pre.scale = meta.get("scale")
        pre.pca = meta.get("pca")
        pre.n_features_in = meta.get("n_features_in")
        if pre.scale not in (None, "standard", "minmax") or not (
                pre.n_features_in is None or (isinstance(pre.n_features_in, int) and pre.n_features_in >= 1)):
            raise ValueError(f"preprocessing scale {pre.scale!r}, n_features_in {pre.n_features_in!r} are not valid")
        for name in ("shift", "width", "pca_mean", "pca_components"):
            setattr(pre, name, arrays.get("pre_" + name))
        return pre

    def __repr__(self):
        return f"Preprocessing({self.describe()})"


# --------------------------------------------------------------------------- JSON helpers


def _jsonable(value):
    """A JSON-serialisable copy of ``value`` (numpy scalars and arrays become Python values;
    anything else unknown becomes its ``repr``)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= 10_000 else f"<array {value.shape} {value.dtype}>"
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _payload_sha256(arrays):
    """SHA-256 of the arrays: for each name in sorted order, the name, dtype, shape and bytes."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode("utf-8") + b"\0")
        h.update(a.dtype.str.encode("ascii") + b"\0")
        h.update(repr(tuple(a.shape)).encode("ascii") + b"\0")
        h.update(a.tobytes())
    return h.hexdigest()


def _storable(arr, name):
    """``arr`` as an array ``np.load(allow_pickle=False)`` can read back, or raise."""
    arr = np.asarray(arr)
    if arr.dtype.kind == "O":
        if all(isinstance(v, str) for v in arr.ravel()):
            return arr.astype(str)
        raise InputError(
            f"{name} has dtype object, which cannot be stored without pickle; convert it to numbers "
            "or strings (e.g. y.astype(str)) before fitting and saving."
        )
    if arr.dtype.kind not in "biufcUS":
        raise InputError(f"{name} has dtype {arr.dtype}, which a metricopt model file cannot hold.")
    return np.ascontiguousarray(arr)


# --------------------------------------------------------------------------- collecting a model


def _certificate_meta(cert):
    if cert is None:
        return None
    return {
        "upper": float(cert.upper), "lower": float(cert.lower), "gap": cert.gap, "rel_gap": cert.rel_gap,
        "verdict": cert.verdict, "tol": float(cert.tol), "problem": cert.problem,
        "details": _jsonable(cert.details),
    }


def _solution_file_form(sol, prefix=""):
    """``(metadata, arrays)`` of a solution; its arrays are named ``prefix + "M"``, ... ."""
    arrays = {prefix + "M": np.asarray(sol.M, dtype=np.float64), prefix + "L": np.asarray(sol.L, dtype=np.float64)}
    if "b" in sol.variables:
        arrays[prefix + "b"] = np.asarray(sol.variables["b"], dtype=np.float64)
    return {
        "status": sol.status.code,
        "objective": float(sol.objective) if sol.objective is not None else None,
        "backend": sol.backend,
        "solver": sol.solver,
        "message": sol.message,
        "variables": _jsonable(sol.variables),
        "stats": _jsonable(sol.stats),
        "certificate": _certificate_meta(sol.certificate),
    }, arrays


def _problem_meta(problem):
    meta = {"class": type(problem).__name__, "method": problem.method, "reference": problem.reference,
            "n": problem.n, "d": problem.d, "convex": bool(problem.is_convex),
            "diagonal": bool(problem.diagonal)}
    for name in ("k", "mu", "C", "n_clusters", "kernel", "kernel_params", "n_components"):
        if hasattr(problem, name):
            meta[name] = _jsonable(getattr(problem, name))
    if hasattr(problem, "n_triplets"):
        try:
            meta["n_triplets"] = int(problem.n_triplets)
        except Exception:  # noqa: BLE001 - informative only
            pass
    for name in ("similar", "dissimilar", "pairs"):
        value = getattr(problem, name, None)
        if value is not None:
            meta[f"n_{name}"] = int(len(value))
    return meta


def _estimator_file_form(model, problem):
    """``(metadata, arrays, solutions, certificate, problem)`` of a fitted estimator, from its own state."""
    classes = _estimator_classes()
    if classes.get(type(model).__name__) is not type(model):
        names = list(classes)
        raise InputError(f"save_model stores {', '.join(names[:-1])} and {names[-1]} estimators; "
                         f"got {type(model).__name__}.")
    if not hasattr(model, "solution_"):
        raise InputError(f"this {type(model).__name__} is not fitted yet; call fit(X, y) before save_model.")
    if problem is not None:
        raise InputError("problem= is for saving a Solution; an estimator carries its own problem_.")
    state = model._model_state()
    meta = {"kind": "estimator", **_jsonable(state.meta)}
    arrays = {name: _storable(value, name) for name, value in state.arrays.items()}
    return meta, arrays, state.solutions, state.certificate, state.problem


def _collect(model, problem):
    """``(metadata, arrays)`` of an estimator or a Solution."""
    from .solution import Solution

    if hasattr(model, "_model_state"):
        meta, arrays, solutions, cert, problem = _estimator_file_form(model, problem)
    elif isinstance(model, Solution):
        meta, arrays = {"kind": "solution", "estimator": None, "params": None}, {}
        solutions, cert = {"solution": model}, model.certificate
    else:
        raise InputError(f"save_model needs a fitted metricopt estimator ({_estimator_names()}) or a "
                         f"metricopt.Solution; got {type(model).__name__}.")
    sol = solutions["solution"]
    if sol.M is None:
        raise InputError(f"the solution has no metric (status '{sol.status}'); there is nothing to save.")
    for key, extra in solutions.items():
        if extra is not None:
            meta[key], extra_arrays = _solution_file_form(extra, _solution_prefix(key))
            arrays.update(extra_arrays)
    meta["method"] = problem.method if problem is not None else None
    meta["problem"] = _problem_meta(problem) if problem is not None else None
    meta["certificate"] = _certificate_meta(cert)
    return meta, arrays


def _solution_prefix(key):
    """Prefix of the arrays of the solution stored under metadata ``key``: ``"solution"`` -> ``""``,
    ``"single_solution"`` -> ``"single_"``."""
    return key[: -len("solution")]


# --------------------------------------------------------------------------- save


def save_model(path: FilePath, model: Any, *, problem: Any = None, preprocessing: Preprocessing | None = None,
               info: dict[str, Any] | None = None) -> pathlib.Path:
    """Save a fitted estimator (or a Solution) to one ``.npz`` model file, atomically.

    The file format and its safety properties are described in :mod:`metricopt.io`. The
    learned metric is the solution of the estimator's problem, e.g. for LMNN

    .. math::

        \\min_{M \\succeq 0} (1-\\mu) \\sum_{i, j \\rightsquigarrow i} d_M(x_i, x_j)
        + \\mu \\sum_{i, j \\rightsquigarrow i, l: y_l \\ne y_i} [1 + d_M(x_i, x_j) - d_M(x_i, x_l)]_+

    (Weinberger & Saul, JMLR 10:207-244, 2009, Eq. 14); MMC and POLA are stated in
    :class:`metricopt.MMC` and :class:`metricopt.POLA`, multi-metric and kernel LMNN in
    :class:`metricopt.MultiMetricLMNN` and :class:`metricopt.KernelLMNN`.

    Parameters
    ----------
    path : str or os.PathLike
        Destination, written exactly as given (``.npz`` is recommended but not appended).
    model : fitted LMNN, MMC, POLA, MultiMetricLMNN or KernelLMNN, or a metricopt.Solution
        An estimator is stored with everything prediction needs (training data, labels,
        target neighbours, classes, cluster codes, kernel map) and loads back as a fitted
        estimator; a Solution
        loads back as a Solution.
    problem : metricopt.Problem, optional
        For a Solution only: its problem, whose method and hyperparameters are recorded.
    preprocessing : Preprocessing, optional
        Fitted scaling/PCA to apply to raw inputs before the model (used by the command
        line); stored and restored as the loaded estimator's ``preprocessing_``.
    info : dict, optional
        Extra JSON-serialisable information (e.g. the data set and split), stored under
        ``metadata["info"]``.

    Returns
    -------
    pathlib.Path
        The written file.

    Raises
    ------
    metricopt.errors.InputError
        For an unfitted estimator, an unsupported object, a solution without a metric,
        labels of object dtype, a regularizer term whose ``config()`` is None, or a
        destination folder that does not exist.
    """
    from ._version import __version__

    meta, arrays = _collect(model, problem)
    if preprocessing is not None:
        if not isinstance(preprocessing, Preprocessing):
            raise InputError(f"preprocessing must be a metricopt.io.Preprocessing; got {type(preprocessing).__name__}.")
        pre_meta, pre_arrays = preprocessing._to_file()
        meta["preprocessing"] = pre_meta
        arrays.update(pre_arrays)
    else:
        meta["preprocessing"] = None
    meta["info"] = _jsonable(info) if info is not None else {}
    head = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "metricopt_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    meta = {**head, **meta}
    meta["arrays"] = {k: {"shape": list(v.shape), "dtype": v.dtype.str} for k, v in sorted(arrays.items())}
    meta["sha256"] = _payload_sha256(arrays)
    blob = json.dumps(meta, sort_keys=True, allow_nan=True).encode("utf-8")
    payload = {**arrays, METADATA_KEY: np.frombuffer(blob, dtype=np.uint8)}
    return atomic_write(path, lambda fh: np.savez(fh, **payload))


# --------------------------------------------------------------------------- read


class ModelFile:
    """A verified model file: ``metadata`` (dict from the JSON) and ``arrays`` (name -> ndarray)."""

    def __init__(self, path: pathlib.Path, metadata: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.path = path
        self.metadata = metadata
        self.arrays = arrays

    def __repr__(self):
        m = self.metadata
        return f"ModelFile({str(self.path)!r}, method={m.get('method')!r}, kind={m.get('kind')!r})"


def read_model_file(path: FilePath) -> ModelFile:
    """Read and verify a model file without building the model.

    Checks, in order: the file exists; it is a zip (``.npz``) archive; it holds the
    metricopt metadata; the metadata is valid JSON naming this format; its format version
    is not newer than :data:`FORMAT_VERSION`; every array loads without pickle; the
    SHA-256 of the arrays matches the one recorded.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    ModelFile

    Raises
    ------
    ModelFileError
        With a message naming the file and the failed check.
    """
    path = pathlib.Path(os.fspath(path))
    name = str(path)
    if not path.exists():
        raise ModelFileError(f"model file {name!r} does not exist; check the path (models are written by "
                             "metricopt.io.save_model or `metricopt fit --out`).")
    if not path.is_file():
        raise ModelFileError(f"model file {name!r} is not a file; give the path of a .npz model file.")
    if not zipfile.is_zipfile(path):
        raise ModelFileError(f"{name!r} is not a metricopt model file: it is not an .npz (zip) archive, "
                             "or it is truncated.")
    corrupt = f"model file {name!r} is corrupt"
    try:
        _check_members(path, name, corrupt)
        with np.load(path, allow_pickle=False) as npz:
            keys = list(npz.files)
            if METADATA_KEY not in keys:
                raise ModelFileError(f"{name!r} is not a metricopt model file: the .npz archive has no metricopt "
                                     f"metadata (arrays: {', '.join(keys[:10]) or 'none'}).")
            arrays = {}
            for key in keys:
                try:
                    arrays[key] = npz[key]
                except ValueError as exc:
                    if "allow_pickle" in str(exc):
                        raise ModelFileError(f"{name!r} is not a metricopt model file: array {key!r} holds Python "
                                             "objects, which metricopt never writes and will not unpickle.") from None
                    raise
    except ModelFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile and numpy raise many types (BadZipFile, RuntimeError for an
        # "encrypted" flag, NotImplementedError for a compression method, MemoryError, ...): all mean a damaged file
        raise ModelFileError(f"{corrupt}: its archive cannot be read ({type(exc).__name__}: {exc}).") from None
    raw = arrays.pop(METADATA_KEY)
    try:
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise ValueError("metadata array is not 1-D uint8")
        meta = json.loads(raw.tobytes().decode("utf-8"))
        if not isinstance(meta, dict):
            raise ValueError("metadata is not a JSON object")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{corrupt}: its metadata cannot be decoded ({exc}).") from None
    if meta.get("format") != FORMAT:
        raise ModelFileError(f"{name!r} is not a metricopt model file: its metadata names the format "
                             f"{meta.get('format')!r}, not {FORMAT!r}.")
    version = meta.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ModelFileError(f"{corrupt}: its format version {version!r} is not a positive integer.")
    if version > FORMAT_VERSION:
        from ._version import __version__

        raise ModelFileError(
            f"model file {name!r} has format version {version} (written by metricopt "
            f"{meta.get('metricopt_version', '?')}), newer than this metricopt {__version__} reads "
            f"(format version {FORMAT_VERSION}); upgrade metricopt to load it."
        )
    expected = meta.get("sha256")
    got = _payload_sha256(arrays)
    if got != expected:
        raise ModelFileError(f"{corrupt}: the SHA-256 of its arrays is {got}, but the file records {expected}; "
                             "the file was damaged or edited. Fit and save the model again.")
    return ModelFile(path, meta, arrays)


#: largest ratio of uncompressed to compressed size a zip member may claim (DEFLATE gives at most ~1032)
_MAX_INFLATION = 1100


def _check_members(path, name, corrupt):
    """Before any array is read: every member of the archive must be a ``.npy`` array whose header
    declares no more bytes than the member holds, and no Python objects (which would need pickle). So a
    forged or damaged file is refused at once, without allocating what its headers claim."""
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            if info.compress_type != zipfile.ZIP_STORED and info.file_size > _MAX_INFLATION * info.compress_size + 65536:
                raise ModelFileError(f"{corrupt}: member {info.filename!r} claims {info.file_size} bytes from "
                                     f"{info.compress_size} compressed ones, more than zip compression gives; the file "
                                     "was forged or damaged. Fit and save the model again.")
            with zf.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                               (2, 0): np.lib.format.read_array_header_2_0}.get(version)
                if read_header is None:
                    raise ModelFileError(f"{corrupt}: member {info.filename!r} is a .npy array of format version "
                                         f"{version}, which metricopt never writes. Fit and save the model again.")
                shape, _, dtype = read_header(fh)
                available = info.file_size - fh.tell()
            if dtype.hasobject:
                raise ModelFileError(f"{name!r} is not a metricopt model file: array {key!r} holds Python objects, "
                                     "which metricopt never writes and will not unpickle.")
            declared = math.prod(shape) * dtype.itemsize
            if declared > available:
                raise ModelFileError(f"{corrupt}: array {key!r} declares shape {tuple(shape)} of {dtype} ({declared} "
                                     f"bytes), but the archive holds {max(available, 0)} bytes for it; the file is "
                                     "truncated, forged or damaged. Fit and save the model again.")


def _need(mf, *keys):
    missing = [k for k in keys if k not in mf.arrays]
    if missing:
        raise ModelFileError(f"model file {str(mf.path)!r} is corrupt: array(s) {', '.join(missing)} missing; "
                             "the file was not written by metricopt.io.save_model or was edited. Fit and save "
                             "the model again.")


def _certificate_from_meta(meta):
    if meta is None:
        return None
    from .certify.certificate import Certificate

    return Certificate(upper=meta["upper"], lower=meta["lower"], verdict=meta["verdict"], tol=meta["tol"],
                       problem=meta["problem"], details=dict(meta.get("details") or {}))


def _solution_from_file(mf, key="solution", prefix=""):
    from .solution import Solution, Status

    _need(mf, prefix + "M", prefix + "L")
    for name in (prefix + "M", prefix + "L", prefix + "b"):
        a = mf.arrays.get(name)
        if a is None:
            continue
        ok = a.dtype.kind == "f" and np.all(np.isfinite(a))
        if name.endswith("b"):
            ok = ok and a.size == 1
        else:  # M square, L with as many columns as M (M = L^T L)
            ok = ok and a.ndim == 2 and a.shape[1 if name.endswith("L") else 0] == mf.arrays[prefix + "M"].shape[-1]
        if not ok:
            raise ModelFileError(f"model file {str(mf.path)!r} is corrupt: array {name} must be a finite real "
                                 f"{'number' if name.endswith('b') else 'matrix'}; got dtype {a.dtype}, shape {a.shape}"
                                 f"{'' if a.dtype.kind != 'f' or np.all(np.isfinite(a)) else ' with NaN or inf'}. The "
                                 "file was edited or damaged; fit and save the model again.")
    sm = mf.metadata[key]
    codes = {s.code: s for s in Status}
    if sm.get("status") not in codes:
        raise ModelFileError(f"model file {str(mf.path)!r} is corrupt: unknown status {sm.get('status')!r}.")
    variables = dict(sm.get("variables") or {})
    if prefix + "b" in mf.arrays:
        variables["b"] = float(mf.arrays[prefix + "b"])
    obj = sm.get("objective")
    return Solution(M=mf.arrays[prefix + "M"], L=mf.arrays[prefix + "L"],
                    objective=float("nan") if obj is None else float(obj), status=codes[sm["status"]],
                    backend=sm.get("backend"), solver=sm.get("solver"),
                    stats=dict(sm.get("stats") or {}), variables=variables, message=sm.get("message") or "",
                    certificate=_certificate_from_meta(sm.get("certificate")))


def _estimator_from_file(mf):
    """The fitted estimator of an estimator file: the class named in the file restores its own state."""
    meta = mf.metadata
    classes = _estimator_classes()
    name = meta.get("estimator")
    if name not in classes:
        raise ModelFileError(f"model file {str(mf.path)!r} is corrupt: unknown estimator {name!r}.")
    est = classes[name]()
    unknown = sorted(set(meta.get("params") or {}) - set(est.get_params(deep=False)))
    if unknown:
        raise ModelFileError(
            f"model file {str(mf.path)!r} was written by metricopt {meta.get('metricopt_version')} with {name} "
            f"parameter(s) {', '.join(unknown)} that this metricopt does not know; load it with that version."
        )
    solutions = {key: _solution_from_file(mf, key, _solution_prefix(key))
                 for key in est._model_solutions if meta.get(key) is not None}
    if "solution" not in solutions:
        raise ModelFileError(f"model file {str(mf.path)!r} is corrupt: it holds no solution.")
    state = ModelState(meta, dict(mf.arrays), solutions=solutions, certificate=_estimator_certificate(meta, solutions))
    try:
        est._restore_model_state(state)
    except ModelStateError as exc:
        raise ModelFileError(f"model file {str(mf.path)!r} is corrupt: {exc}") from None
    except (InputError, TypeError, KeyError) as exc:
        raise ModelFileError(f"model file {str(mf.path)!r} is corrupt: its {name} cannot be rebuilt ({exc}).") from None
    return est


def _estimator_certificate(meta, solutions):
    """The estimator's certificate: the solution's own object when the file records the same one."""
    if meta.get("certificate") == meta["solution"].get("certificate"):
        return solutions["solution"].certificate
    return _certificate_from_meta(meta.get("certificate"))


def load_model(path: FilePath) -> Any:
    """Load a model file written by :func:`save_model`.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    metricopt.LMNN, MMC, POLA, MultiMetricLMNN, KernelLMNN or metricopt.Solution
        An estimator for files saved from an estimator: fitted, with ``components_``
        (not MultiMetricLMNN), ``solution_`` (metric, status, objective, statistics),
        ``certificate_``, ``problem_`` (rebuilt from the stored training data and
        hyperparameters; the LMNN family with its stored target neighbours),
        ``n_features_in_``, POLA's ``threshold_``, LMNN's ``passes_`` (a
        :class:`SavedPasses` for a multi-pass model, else ``None``; ``validation_curve_`` is
        not stored and loads as ``None``), MultiMetricLMNN's ``metrics_``, ``clusters_``,
        ``classes_`` and ``single_solution_`` (its problem is rebuilt from the stored
        cluster codes: k-means is not run again), KernelLMNN's ``embedding_`` (its problem
        gets the stored kernel-PCA map); plus ``model_metadata_`` (the file's metadata) and
        ``preprocessing_`` (a :class:`Preprocessing` or ``None``). Its ``transform`` and
        ``predict`` give exactly the saved estimator's results. A Solution for files
        saved from a Solution (with ``model_metadata_`` as an attribute).

    Raises
    ------
    ModelFileError
        For a missing file, a file that is not a metricopt model, a newer format
        version, or a corrupt file (checksum mismatch, undecodable content).
    """
    mf = read_model_file(path)
    kind = mf.metadata.get("kind")
    try:
        if kind == "estimator":
            obj = _estimator_from_file(mf)
        elif kind == "solution":
            obj = _solution_from_file(mf)
        else:
            raise ModelFileError(f"model file {str(mf.path)!r} is corrupt: unknown kind {kind!r}.")
        pre_meta = mf.metadata.get("preprocessing")
        obj.preprocessing_ = Preprocessing._from_file(pre_meta, mf.arrays) if pre_meta is not None else None
    except ModelFileError:
        raise
    except (InputError, KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # metadata of the wrong structure (a list for a dict, a string for a number, a missing key): edited
        raise ModelFileError(f"model file {str(mf.path)!r} is corrupt: its metadata does not describe a model "
                             f"({type(exc).__name__}: {exc}); the file was edited or damaged. Fit and save the model "
                             "again.") from None
    obj.model_metadata_ = mf.metadata
    return obj
