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
  the array payload (``"sha256"``);
* and (format version 2 on) ``__metricopt_sha256__`` (:data:`CHECKSUM_KEY`): the SHA-256, as 64
  ASCII hex digits, of every other array *including the metadata's bytes* (for each name in
  sorted order: the name, dtype, shape and bytes). It lives outside the document it covers, so
  every byte of the metadata and of the arrays is covered: a single flipped bit anywhere is refused.

Safety
------
* Files are read with ``np.load(..., allow_pickle=False)``: loading never unpickles, so a
  model file cannot execute code. Only numeric, boolean and (fixed-width) string arrays
  are written; labels of ``object`` dtype are refused at save time.
* Every read checks the format name, the format version (a file from a newer format is
  refused with a message to upgrade), the SHA-256 of the metadata and arrays, then that of
  the arrays (a mismatch means the file is corrupt). Every failure raises
  :class:`ModelFileError`, which says which file and what was wrong. Format version 1 files
  (whose checksum covers the arrays only) still load, with a :class:`ModelFileWarning`; the
  consistency checks below are then what stands between an edited metadata and the model.
* Paths are ``str``, ``bytes`` (decoded by :func:`os.fsdecode`) or ``os.PathLike``; a file
  object is refused with a message to pass its path.
* Writes are atomic: the archive is written to a temporary file in the destination
  folder, flushed and ``fsync``-ed, then renamed over the destination with
  :func:`os.replace`. An interrupted or failed save leaves the previous file (if any)
  untouched and removes its temporary file.
* Writes go to regular files only (:func:`check_destination`): a folder, a device (e.g.
  ``/dev/full``: a rename over it would replace the device node), a FIFO or a socket is
  refused; a symbolic link is written through (its target replaced, the link kept) only with
  ``follow_symlinks=True``.

Consistency
-----------
A checksum says that a file is the one written, not that what was written is true: whoever
edits a file can recompute it. So :func:`load_model` also checks that the stored values fit
together, and refuses (:class:`ModelFileError`) a file where they do not:

* every metric ``M`` is finite, symmetric (``max|M - M^T| <= 1e-9 ||M||_2``,
  :data:`SYMMETRY_RTOL`) and PSD (smallest eigenvalue ``>= -1e-7 ||M||_2``,
  :data:`PSD_RTOL`), and its stored factors (``L``, an estimator's ``components``) satisfy
  ``M = L^T L`` (within ``1e-6 ||M||_2``, :data:`FACTOR_RTOL`);
* every certificate has ``lower <= upper`` (finite, or the infeasible ``+inf``/``-inf``), the
  gap and relative gap of its bounds, a verdict that its relative gap and ``tol`` give, and an
  upper bound equal to the recorded objective (within ``1e-6 max(1, |objective|)``,
  :data:`OBJECTIVE_RTOL`; the upper bound is the objective at the PSD-projected metric);
  status ``"optimal"`` comes only with an optimal certificate (or none, for a Solution);
* an estimator's hyperparameters are valid (the checks of ``fit``) and those its rebuilt
  problem uses (``k``, ``mu``, ``C``, ...: after an edit of ``k`` in ``params``,
  ``get_params()`` would disagree with ``predict``), and the problem description of the file
  (``n``, ``d``, ``k``, ``n_triplets``, ...) is that of the problem rebuilt from its arrays.

The certificate is **recomputed at load** for estimators: their problem is rebuilt anyway
(from ``X_train``, ``y_train``, the stored target neighbours, clusters or kernel map and the
hyperparameters: no neighbour search, no k-means, no solve), and :func:`metricopt.certify` on
it costs one objective and one dual evaluation (milliseconds for the models in the tests, a few
seconds for thousands of points; ``load_model(..., recertify=False)`` skips it) -- much less
than the fit, and the only check a forger cannot get around: a file with another problem's
metric, an edited ``X_train`` or recomputed numbers gets the certificate its metric really has.
The recomputed certificate replaces the file's, and so does the objective (the problem's at the
metric: when the file's certificate has that upper bound, within ``1e-8``, :data:`REVERIFY_RTOL`,
the file's objective must be the same within ``1e-8``, or the file is refused); its
``details["re-verified at load"]`` says ``"yes: ..."`` (shown by ``certificate.report()``), and
adds that the file's certificate was discarded when it certified another problem (another
problem's metric, edited training data). Otherwise -- no certificate, a problem ``certify`` does
not accept, early-stopped LMNN (which certifies its metric on the fit part of the data, so its
certificate is another problem's by design), ``recertify=False`` -- the file's
certificate is kept with ``details["re-verified at load"]`` saying ``"NO: <why>"``, and a status
``"optimal"`` loads as ``"uncertified"`` (``"stationary"`` for a non-convex problem) with a
:class:`ModelFileWarning`: a loaded estimator is ``"optimal"`` only when its certificate was
recomputed at load and is optimal (a recomputed certificate that is not optimal turns
``"optimal"`` into ``"optimal_inaccurate"``, with a warning). A saved Solution carries no
problem data: its certificate is checked for consistency only and always marked not
re-verified. The marker is not saved: saving a loaded model writes the certificate it holds.

Who writes what
---------------
This module is the container: the format, its checks, atomic writes, the preprocessing and
the Solution form (``M``, ``L``, ``b``, status, statistics, certificate). Each estimator
saves and restores its own state (``_model_state()`` and ``_restore_model_state(state)``,
with a :class:`metricopt.estimators.base.ModelState`): its hyperparameters (regularizers by
``term.config()``, rebuilt by :func:`metricopt.problems.terms.term_from_config`), training
data and the arrays above; so a new estimator needs no change here beyond its entry in
:data:`metricopt.io.MODEL_FILE_ESTIMATORS`.

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
import stat
import tempfile
import warnings
import zipfile
from collections.abc import Callable
from typing import IO, Any, Union

import numpy as np
from numpy.typing import ArrayLike

from .errors import InputError
from .estimators.base import ModelState, ModelStateError
from .methods.baselines.estimator import LDA, PCA, RCA, Whitening
from .methods.gerrymander.estimator import GerrymanderingKNN
from .methods.lmnn.estimator import LMNN, SavedPasses
from .methods.lmnn.kernel_estimator import KernelLMNN
from .methods.lmnn.multimetric_estimator import MultiMetricLMNN
from .methods.local.estimator import LocalMetricKNN
from .methods.nca.estimator import NCA
from .methods.nca.mlcc_estimator import MLCC
from .methods.pairs.estimator import MMC, POLA

__all__ = [
    "CHECKSUM_KEY",
    "FORMAT",
    "FORMAT_VERSION",
    "METADATA_KEY",
    "ModelFile",
    "ModelFileError",
    "ModelFileWarning",
    "Preprocessing",
    "SavedPasses",
    "atomic_write",
    "check_destination",
    "load_model",
    "read_model_file",
    "save_model",
]

#: Name of the format, stored in every file's metadata.
FORMAT = "metricopt-model"
#: Version of the format written by this module; files of a higher version are refused. Version 2 adds
#: :data:`CHECKSUM_KEY` (every byte of the metadata and the arrays covered); version 1 files still load.
FORMAT_VERSION = 2
#: Name of the array holding the JSON metadata (UTF-8 bytes as ``uint8``).
METADATA_KEY = "__metricopt__"
#: Name of the array holding the SHA-256 (64 ASCII hex digits as ``uint8``) of every other array of the
#: file, the metadata array included (format version 2 on).
CHECKSUM_KEY = "__metricopt_sha256__"

#: ``M`` is symmetric when ``max|M - M^T| <= SYMMETRY_RTOL * ||M||_2``
SYMMETRY_RTOL = 1e-9
#: ``M`` is PSD when its smallest eigenvalue is ``>= -PSD_RTOL * ||M||_2``
PSD_RTOL = 1e-7
#: a stored ``L`` (or ``components``) fits ``M`` when ``max|M - L^T L| <= FACTOR_RTOL * ||M||_2``
FACTOR_RTOL = 1e-6
#: a certificate's upper bound fits the recorded objective when they differ by at most
#: ``OBJECTIVE_RTOL * max(1, |objective|)`` (the upper bound is the objective at the PSD-projected metric)
OBJECTIVE_RTOL = 1e-6
#: a certificate recomputed at load is the file's when the upper bounds differ by at most
#: ``REVERIFY_RTOL * max(1, |upper|)`` (the same metric on the same problem: rounding only)
REVERIFY_RTOL = 1e-8
#: key of ``certificate.details`` that says whether the certificate was recomputed at load
REVERIFIED_KEY = "re-verified at load"

#: a file path (``bytes`` paths are decoded with :func:`os.fsdecode`)
FilePath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


#: the estimators :mod:`metricopt.io` saves and loads (each restores its own state; see
#: :class:`metricopt.estimators.base.ModelState`)
MODEL_FILE_ESTIMATORS = (LMNN, MMC, POLA, MultiMetricLMNN, KernelLMNN, NCA, MLCC, PCA, Whitening, LDA, RCA,
                         GerrymanderingKNN, LocalMetricKNN)


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


class ModelFileWarning(UserWarning):
    """A model file loads, but with less assurance than a current one: an older format whose metadata no
    checksum covers, or a status ``"optimal"`` that could not be confirmed at load."""


def _as_path(path: Any, action: str, error: type[InputError]) -> pathlib.Path:
    """``path`` (str, bytes or os.PathLike) as a :class:`pathlib.Path`; ``error`` for anything else (a file
    object, a number, None) with a message naming what was given and what to pass."""
    if hasattr(path, "read") or hasattr(path, "write"):
        name = getattr(path, "name", None)
        named = f" of {name!r}" if isinstance(name, (str, bytes)) else ""
        raise error(f"{action} needs a file path (str, bytes or os.PathLike); got a file object "
                    f"({type(path).__name__}{named}). Pass the path of the file instead: model files are checked "
                    "as files on disk and written atomically (a temporary file renamed over the destination), "
                    "which an open file object does not allow.")
    try:
        raw = os.fspath(path)
    except TypeError:
        raise error(f"{action} needs a file path (str, bytes or os.PathLike); got {type(path).__name__}.") from None
    if isinstance(raw, bytes):
        raw = os.fsdecode(raw)
    if raw == "" or "\0" in raw:
        raise error(f"{action} needs a file path; got {'an empty path' if raw == '' else 'a path with a NUL byte'} "
                    f"({path!r}).")
    return pathlib.Path(raw)


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def _file_kind(mode: int) -> str:
    """What a non-regular file is, in words (``"a character device"``, ...)."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def _lstat_mode(path, what):
    """``os.lstat(path).st_mode``, ``None`` when nothing is there, :class:`InputError` naming ``what`` otherwise."""
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"cannot write {what}: {exc.strerror or exc}.") from None


def check_destination(path: FilePath, follow_symlinks: bool = False) -> pathlib.Path:
    """The file a write to ``path`` may replace, or :class:`~metricopt.errors.InputError`.

    Files are written only as regular files: ``path`` must not exist or be a regular file. A folder,
    a device (e.g. ``/dev/full``), a FIFO or a socket is refused (renaming a file over it would replace
    it); a symbolic link is refused unless ``follow_symlinks`` is true, when its final target (which
    must itself be a regular file or not exist) is returned.

    Parameters
    ----------
    path : str, bytes or os.PathLike
    follow_symlinks : bool, default False

    Returns
    -------
    pathlib.Path
        ``path``, or the link's resolved target.

    Raises
    ------
    metricopt.errors.InputError
        Naming the path and what it is.
    """
    path = _as_path(path, "writing a file", InputError)
    name = str(path)
    mode = _lstat_mode(path, repr(name))
    if mode is None:
        return path
    if stat.S_ISLNK(mode):
        target = os.readlink(path)
        if not follow_symlinks:
            raise InputError(f"cannot write {name!r}: it is a symbolic link (to {target!r}); metricopt writes through "
                             "a link only on request: pass follow_symlinks=True to replace the link's target, or give "
                             "the target's path (or another file name).")
        real = pathlib.Path(os.path.realpath(path))
        mode = _lstat_mode(real, f"{name!r} (a link to {str(real)!r})")
        if mode is None or stat.S_ISREG(mode):
            return real
        raise InputError(f"cannot write {name!r}: it is a symbolic link to {str(real)!r}, which is "
                         f"{_file_kind(mode)}, not a regular file; metricopt writes only regular files. Give the path "
                         "of a regular file.")
    if stat.S_ISDIR(mode):
        raise InputError(f"cannot write {name!r}: it is a folder; give a file name.")
    if not stat.S_ISREG(mode):
        raise InputError(f"cannot write {name!r}: it is {_file_kind(mode)}, not a regular file; metricopt writes only "
                         "regular files (saving would replace it). Give the path of a regular file.")
    return path


# --------------------------------------------------------------------------- atomic writes


def atomic_write(path: FilePath, write: Callable[[IO[bytes]], Any], *, follow_symlinks: bool = False) -> pathlib.Path:
    """Write a file atomically: ``write(fh)`` into a temporary file, then rename it to ``path``.

    The temporary file lives in the destination folder (so that the rename is atomic on
    POSIX and Windows), is flushed and ``fsync``-ed before :func:`os.replace` moves it over
    ``path``. If ``write`` raises (or the process is interrupted by an exception such as
    ``KeyboardInterrupt``), the temporary file is removed and ``path`` keeps its previous
    content. Only regular files are written (see :func:`check_destination`, checked before
    writing and again just before the rename): a folder, a device, a FIFO or a socket at
    ``path`` is refused, a symbolic link too unless ``follow_symlinks`` is true (its target is
    then replaced, and the link kept).

    Parameters
    ----------
    path : str, bytes or os.PathLike
        Destination file; its folder must exist.
    write : callable
        Called with a binary file object opened for writing.
    follow_symlinks : bool, default False
        Whether a symbolic link at ``path`` may be written through (its target replaced).

    Returns
    -------
    pathlib.Path
        The destination as given (``path``, even when a link's target was written).

    Raises
    ------
    InputError
        If the destination folder does not exist, or ``path`` is a folder, a device, a FIFO,
        a socket, or a symbolic link without ``follow_symlinks=True``.
    """
    given = _as_path(path, "writing a file", InputError)
    path = check_destination(given, follow_symlinks)
    folder = path.parent if str(path.parent) else pathlib.Path(".")
    if not folder.is_dir():
        raise InputError(f"cannot write {str(path)!r}: the folder {str(folder)!r} does not exist; create it first.")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file ordinary permissions
        check_destination(path, False)  # replaced by a link, a device, ... while the file was written: refused
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
        return given
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
    return given


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
        """Fit on training inputs ``X`` (n, d); returns ``self``.

        Parameters
        ----------
        X : (n, d) array_like
            The training inputs.

        Returns
        -------
        Preprocessing
            ``self``.

        Raises
        ------
        InputError
            For invalid data or an invalid ``pca`` (see :func:`metricopt.datasets.preprocess`).
        """
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
        """The number of output features (``None`` before :meth:`fit`)."""
        if self.pca_components is not None:
            return self.pca_components.shape[0]
        return self.n_features_in

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Apply the fitted scaling and PCA to ``X`` (n, d).

        Parameters
        ----------
        X : (m, d) array_like
            The inputs.

        Returns
        -------
        (m, r) ndarray
            The scaled (and PCA-reduced) inputs, float64.

        Raises
        ------
        InputError
            For invalid data, or a number of features other than the training data's.
        """
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
        """In words, e.g. ``"standard scaling, PCA to 2 dimensions"``.

        Returns
        -------
        str
            The description (``"none"`` without scaling or PCA).
        """
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
        "details": _jsonable({k: v for k, v in cert.details.items() if k != REVERIFIED_KEY}),  # says how it was loaded
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
    loss = getattr(problem, "loss", None)  # LMNN's triplet loss (metricopt.losses), recorded unless the hinge
    if callable(getattr(loss, "config", None)) and loss.config() != {"loss": "hinge"}:
        meta["loss"] = _jsonable(loss.config())
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
               info: dict[str, Any] | None = None, follow_symlinks: bool = False) -> pathlib.Path:
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
    path : str, bytes or os.PathLike
        Destination, written exactly as given (``.npz`` is recommended but not appended): a new
        file or a regular file, which is replaced. A folder, a device, a FIFO or a socket is
        refused, a symbolic link too unless ``follow_symlinks=True``. A file object is refused
        (pass its path).
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
    follow_symlinks : bool, default False
        Whether a symbolic link at ``path`` may be written through: its target is replaced and
        the link kept. By default a link is refused.

    Returns
    -------
    pathlib.Path
        The written file.

    Raises
    ------
    metricopt.errors.InputError
        For an unfitted estimator, an unsupported object, a solution without a metric,
        labels of object dtype, a regularizer term whose ``config()`` is None, a
        destination folder that does not exist, or a destination that is not a regular
        file (see :func:`check_destination`).
    """
    from ._version import __version__

    target = _as_path(path, "save_model", InputError)
    check_destination(target, follow_symlinks)  # before the work of collecting the model
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
    payload[CHECKSUM_KEY] = np.frombuffer(_payload_sha256(payload).encode("ascii"), dtype=np.uint8)
    return atomic_write(target, lambda fh: np.savez(fh, **payload), follow_symlinks=follow_symlinks)


# --------------------------------------------------------------------------- read


class ModelFile:
    """A verified model file: ``metadata`` (dict from the JSON) and ``arrays`` (name -> ndarray).

    ``metadata_checksummed`` says whether a checksum covered the metadata (format version 2 on) or
    only the arrays (version 1).
    """

    def __init__(self, path: pathlib.Path, metadata: dict[str, Any], arrays: dict[str, np.ndarray],
                 metadata_checksummed: bool = True) -> None:
        self.path = path
        self.metadata = metadata
        self.arrays = arrays
        self.metadata_checksummed = metadata_checksummed

    def __repr__(self):
        m = self.metadata
        return f"ModelFile({str(self.path)!r}, method={m.get('method')!r}, kind={m.get('kind')!r})"


def read_model_file(path: FilePath) -> ModelFile:
    """Read and verify a model file without building the model.

    Checks, in order: the path is a path (not a file object); the file exists and is a
    regular file; it is a zip (``.npz``) archive; every member is a plain ``.npy`` array;
    it holds the metricopt metadata; the SHA-256 recorded in :data:`CHECKSUM_KEY` matches
    every other array, the metadata's bytes included; the metadata is valid JSON naming this
    format; its format version is not newer than :data:`FORMAT_VERSION`; the SHA-256 of the
    arrays matches the one the metadata records. A version 1 file (no :data:`CHECKSUM_KEY`:
    its metadata is covered by no checksum) loads with a :class:`ModelFileWarning`; a version
    2 file without it is refused.

    Parameters
    ----------
    path : str, bytes or os.PathLike

    Returns
    -------
    ModelFile

    Raises
    ------
    ModelFileError
        With a message naming the file and the failed check.
    """
    path = _as_path(path, "read_model_file", ModelFileError)
    name = str(path)
    if not path.exists():
        raise ModelFileError(f"model file {name!r} does not exist; check the path (models are written by "
                             "metricopt.io.save_model or `metricopt fit --out`).")
    if not path.is_file():
        kind = _file_kind(os.stat(path).st_mode)
        what = "not a file" if kind == "a folder" else f"not a regular file ({kind})"
        raise ModelFileError(f"model file {name!r} is {what}; give the path of a .npz model file.")
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
    recorded = arrays.pop(CHECKSUM_KEY, None)
    if recorded is not None:  # before anything of the metadata is trusted, even its JSON syntax
        got = _payload_sha256(arrays)
        ok = recorded.dtype == np.uint8 and recorded.shape == (64,)
        expected = recorded.tobytes().decode("ascii", "replace") if ok else f"<{recorded.dtype} {recorded.shape}>"
        if got != expected:
            raise ModelFileError(f"{corrupt}: the SHA-256 of its metadata and arrays is {got}, but the file records "
                                 f"{expected}; the file was damaged or edited. Fit and save the model again.")
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
    if recorded is None and version >= 2:
        raise ModelFileError(f"{corrupt}: it has format version {version} but no checksum array {CHECKSUM_KEY!r}; "
                             "the file was edited or damaged. Fit and save the model again.")
    expected = meta.get("sha256")
    got = _payload_sha256(arrays)
    if got != expected:
        raise ModelFileError(f"{corrupt}: the SHA-256 of its arrays is {got}, but the file records {expected}; "
                             "the file was damaged or edited. Fit and save the model again.")
    if recorded is None:
        warnings.warn(f"model file {name!r} has format version {version}: a checksum covers its arrays but not its "
                      "metadata, so its values were checked for consistency on load (and an estimator's certificate "
                      "recomputed) instead; save it again to upgrade it to format version "
                      f"{FORMAT_VERSION}.", ModelFileWarning, stacklevel=2)
    return ModelFile(path, meta, arrays, metadata_checksummed=recorded is not None)


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


def _corrupt(mf, what):
    """The :class:`ModelFileError` of a file whose stored values do not fit together."""
    return ModelFileError(f"model file {str(mf.path)!r} is corrupt: {what}; the file was edited or damaged. Fit and "
                          "save the model again.")


def _real(value):
    """``value`` as a float when it is a JSON number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer beyond float64 (e.g. 10**400): not a finite number either
        return float("inf") if value > 0 else float("-inf")


def _certificate_from_meta(meta, mf, where="certificate"):
    """The Certificate a file records, after checking that its numbers fit together: ``lower <= upper``
    (both finite, or the infeasible ``+inf``/``-inf``), the recorded gap and relative gap those of the
    bounds, ``tol`` finite and non-negative, the verdict the one the bounds give at ``tol``."""
    if meta is None:
        return None
    from .certify.certificate import Certificate, Verdict

    if not isinstance(meta, dict):
        raise _corrupt(mf, f"its {where} is {type(meta).__name__}, not a JSON object")
    # a missing key (KeyError) or an unknown verdict (ValueError) is reported by load_model as metadata that does
    # not describe a model, naming the exception
    upper, lower, tol = _real(meta["upper"]), _real(meta["lower"]), _real(meta["tol"])
    verdict = Verdict(meta["verdict"])
    if upper is None or lower is None or tol is None:
        raise _corrupt(mf, f"its {where} has a bound or tol that is not a number (upper {meta['upper']!r}, lower "
                           f"{meta['lower']!r}, tol {meta['tol']!r})")
    if not (math.isfinite(tol) and tol >= 0):
        raise _corrupt(mf, f"its {where}'s tol {tol!r} is not a finite number >= 0")
    if verdict is Verdict.INFEASIBLE:
        if not (upper == math.inf and lower == -math.inf):
            raise _corrupt(mf, f"its {where} says 'infeasible' with finite bounds (upper {upper!r}, lower {lower!r})")
    elif not (math.isfinite(upper) and math.isfinite(lower)):
        raise _corrupt(mf, f"its {where} has a bound that is not a finite number (upper {upper!r}, lower {lower!r})")
    elif lower > upper:
        raise _corrupt(mf, f"its {where}'s lower bound {lower!r} exceeds its upper bound {upper!r}")
    details = meta.get("details") or {}
    if not isinstance(details, dict):
        raise _corrupt(mf, f"its {where}'s details are {type(details).__name__}, not a JSON object")
    cert = Certificate(upper=upper, lower=lower, verdict=verdict, tol=tol, problem=meta.get("problem"),
                       details=dict(details))
    for field in ("gap", "rel_gap"):
        value, stored = getattr(cert, field), meta.get(field)
        if field in meta and not (_real(stored) is not None and (stored == value or (math.isnan(value)
                                                                                    and math.isnan(stored)))):
            raise _corrupt(mf, f"its {where} records {field} {stored!r}, but its bounds give {value!r}")
    if verdict is not Verdict.INFEASIBLE and (verdict is Verdict.OPTIMAL) != (cert.rel_gap <= tol):
        raise _corrupt(mf, f"its {where} says {verdict.value!r}, but its relative gap {cert.rel_gap:.3e} is "
                           f"{'<=' if cert.rel_gap <= tol else '>'} its tol {tol:.1e}")
    return cert


def _check_metric(mf, prefix=""):
    """``M`` symmetric and PSD (within :data:`SYMMETRY_RTOL` and :data:`PSD_RTOL` of ``||M||_2``), and
    ``M = L^T L`` (within :data:`FACTOR_RTOL`) for the stored ``L``."""
    M, L = mf.arrays[prefix + "M"], mf.arrays[prefix + "L"]
    if M.shape[0] != M.shape[1]:
        raise _corrupt(mf, f"array {prefix}M has shape {M.shape}, not that of a square matrix")
    w = np.linalg.eigvalsh((M + M.T) / 2) if M.size else np.zeros(1)
    norm = float(np.abs(w).max())
    asym = float(np.abs(M - M.T).max()) if M.size else 0.0
    if asym > SYMMETRY_RTOL * norm:
        raise _corrupt(mf, f"its metric {prefix}M is not symmetric: max|M - M^T| = {asym:.3e} exceeds "
                           f"{SYMMETRY_RTOL:g} x ||M||_2 = {SYMMETRY_RTOL * norm:.3e}")
    if w.min() < -PSD_RTOL * norm:
        raise _corrupt(mf, f"its metric {prefix}M is not positive semidefinite: its smallest eigenvalue {w.min():.6g} "
                           f"is below -{PSD_RTOL:g} x ||M||_2 = {-PSD_RTOL * norm:.3e}")
    off = float(np.abs(M - L.T @ L).max()) if M.size else 0.0
    if off > FACTOR_RTOL * norm:
        raise _corrupt(mf, f"its {prefix}L does not factor its metric {prefix}M: max|M - L^T L| = {off:.3e} exceeds "
                           f"{FACTOR_RTOL:g} x ||M||_2 = {FACTOR_RTOL * norm:.3e}")


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
    _check_metric(mf, prefix)
    sm = mf.metadata[key]
    # the status the file records, parsed by its name (the one place outside metricopt.certify.policy that makes a
    # Status: from a saved model's text; a recorded 'optimal' is checked below and again by _reverify)
    codes = {s.code: s for s in Status}
    if sm.get("status") not in codes:
        raise ModelFileError(f"model file {str(mf.path)!r} is corrupt: unknown status {sm.get('status')!r}.")
    status = codes[sm["status"]]
    variables = dict(sm.get("variables") or {})
    if prefix + "b" in mf.arrays:
        variables["b"] = float(mf.arrays[prefix + "b"])
    obj = sm.get("objective")
    if isinstance(obj, str):
        float(obj)  # not a number at all: ValueError, reported by load_model with the rest of the metadata's errors
    if obj is not None and (_real(obj) is None or not math.isfinite(_real(obj))):
        raise _corrupt(mf, f"its {key}'s objective {obj!r} is not a finite number")
    cert = _certificate_from_meta(sm.get("certificate"), mf, f"{key}'s certificate")
    if cert is not None and obj is not None and math.isfinite(cert.upper):
        if abs(cert.upper - obj) > OBJECTIVE_RTOL * max(1.0, abs(obj)):
            raise _corrupt(mf, f"its {key}'s certificate has the upper bound {cert.upper!r}, but the objective it "
                               f"records is {obj!r} (they may differ by {OBJECTIVE_RTOL:g} x max(1, |objective|))")
    if status is Status.OPTIMAL and cert is not None and not cert.is_optimal:
        raise _corrupt(mf, f"its {key} has status 'optimal', but its certificate says {cert.verdict.value!r} "
                           f"(relative gap {cert.rel_gap:.3e}, tol {cert.tol:.1e})")
    if cert is not None:
        cert.details[REVERIFIED_KEY] = "NO: the bounds are the file's own numbers (checked only for consistency)"
    return Solution(M=mf.arrays[prefix + "M"], L=mf.arrays[prefix + "L"],
                    objective=float("nan") if obj is None else float(obj), status=status,
                    backend=sm.get("backend"), solver=sm.get("solver"),
                    stats=dict(sm.get("stats") or {}), variables=variables, message=sm.get("message") or "",
                    certificate=cert)


def _estimator_from_file(mf, recertify=True):
    """The fitted estimator of an estimator file: the class named in the file restores its own state; then
    its hyperparameters, problem and certificate are checked against what the restored state uses."""
    from .estimators._params import validate_parameters

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
    state = ModelState(meta, dict(mf.arrays), solutions=solutions,
                       certificate=_shared_certificate(mf, meta, solutions))
    try:
        est._restore_model_state(state)
        validate_parameters(est)
        est._check_param_combination()
    except ModelStateError as exc:
        raise ModelFileError(f"model file {str(mf.path)!r} is corrupt: {exc}") from None
    except (InputError, TypeError, KeyError) as exc:
        raise ModelFileError(f"model file {str(mf.path)!r} is corrupt: its {name} cannot be rebuilt ({exc}).") from None
    _check_fitted_state(mf, est)
    _reverify(mf, est, recertify)
    return est


def _shared_certificate(mf, meta, solutions):
    """The file's certificate: the solution's own (every writer records the same one under both keys)."""
    _certificate_from_meta(meta.get("certificate"), mf)  # its own errors first
    if meta.get("certificate") != meta["solution"].get("certificate"):
        raise _corrupt(mf, "its certificate and its solution's certificate differ (save_model records the same one)")
    return solutions["solution"].certificate


#: hyperparameters a fitted problem holds under the same name (compared when both are set)
_PROBLEM_PARAMS = ("k", "mu", "C", "lam", "diagonal", "n_clusters", "kernel")


def _same_value(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable values are different values
        return False


def _check_fitted_state(mf, est):
    """The hyperparameters the file records (``params``, ``problem``, ``method``) must be those the restored
    state uses: ``get_params()`` may not say one thing while ``predict`` uses another."""
    problem = est.problem_
    comp, M = getattr(est, "components_", None), est.solution_.M
    if isinstance(comp, np.ndarray) and comp.ndim == 2 and comp.shape[1] == M.shape[0]:
        norm = float(np.abs(np.linalg.eigvalsh((M + M.T) / 2)).max())
        off = float(np.abs(M - comp.T @ comp).max())
        if off > FACTOR_RTOL * norm:
            raise _corrupt(mf, f"its components do not factor its metric M: max|M - components^T components| = "
                               f"{off:.3e} exceeds {FACTOR_RTOL:g} x ||M||_2 = {FACTOR_RTOL * norm:.3e}")
    params = est.get_params(deep=False)
    for pname in _PROBLEM_PARAMS:
        value = params.get(pname)
        if value is None or not hasattr(problem, pname) or isinstance(getattr(problem, pname), (dict, list)):
            continue
        used = getattr(problem, pname)
        if not _same_value(value, used):
            raise _corrupt(mf, f"its hyperparameter {pname}={value!r} differs from the {pname}={used!r} of the fitted "
                               f"{type(problem).__name__} (its stored state), which predictions use")
    kernel_params = params.get("kernel_params")
    if isinstance(kernel_params, dict) and isinstance(getattr(problem, "kernel_params", None), dict):
        for pname, value in kernel_params.items():
            if not _same_value(problem.kernel_params.get(pname), value):
                raise _corrupt(mf, f"its hyperparameter kernel_params[{pname!r}]={value!r} differs from the fitted "
                                   f"problem's {problem.kernel_params.get(pname)!r}, which predictions use")
    described = mf.metadata.get("problem")
    if isinstance(described, dict) and described.get("class") == type(problem).__name__:
        rebuilt = _problem_meta(problem)
        declarative = bool(getattr(problem, "terms", None))  # not a termless ClosedForm (whose method, in a local
        # metrics model, names what fit computed: its description is informative only)
        for pname in sorted(set(described) | set(rebuilt)):
            if (declarative or pname not in ("method", "reference")) and not _same_value(described.get(pname),
                                                                                         rebuilt.get(pname)):
                raise _corrupt(mf, f"its problem description records {pname}={described.get(pname)!r}, but the "
                                   f"problem rebuilt from its stored data has {pname}={rebuilt.get(pname)!r}")
        if declarative and mf.metadata.get("method") != problem.method:
            raise _corrupt(mf, f"it records the method {mf.metadata.get('method')!r}, but its problem is "
                               f"{problem.method!r}")


def _certification_problem(est):
    """The convex problem the estimator's certificate refers to, as fit built it from the stored data, or
    ``None`` (not a certifiable problem)."""
    def convex(problem):
        return hasattr(problem, "terms") and getattr(problem, "is_convex", False) is True

    problem = est.problem_
    if convex(problem):
        return problem
    try:  # a stand-in (local metrics keep a ClosedForm): the problem fit solves, from the same data
        problem = est._make_problem(problem.X, problem.y)
    except Exception:  # noqa: BLE001 - no problem to re-verify against
        return None
    return problem if convex(problem) else None


def _recompute(problem, sol, stored):
    """``(certificate, why)``: the certificate of ``sol`` recomputed on ``problem`` at the tol of ``stored``, marked
    re-verified, when its upper bound is the stored one; else ``(None, why not)``."""
    from .certify import certify

    try:
        fresh = certify(problem, sol, tol=stored.tol)
    except Exception as exc:  # noqa: BLE001 - whatever the certifier refuses is simply not re-verified
        return None, f"metricopt.certify refused it ({type(exc).__name__}: {exc})"
    fresh.details[REVERIFIED_KEY] = "yes: recomputed by metricopt.certify on the problem rebuilt from the file's data"
    if math.isfinite(fresh.upper) != math.isfinite(stored.upper) or (
            math.isfinite(stored.upper)
            and abs(fresh.upper - stored.upper) > REVERIFY_RTOL * max(1.0, abs(stored.upper))):
        why = (f"its upper bound {stored.upper!r} is not the objective {fresh.upper!r} of the problem rebuilt from "
               "the file's data at its metric: it certifies another problem")
        fresh.details[REVERIFIED_KEY] += f"; the file's certificate was discarded ({why})"
        return fresh, why
    return fresh, None


def _reverify(mf, est, recertify):
    """Recompute the certificate of the estimator's solution on its rebuilt problem (see the module docstring); a
    recorded 'optimal' the recomputed certificate does not confirm gets the status policy's verdict."""
    from .certify import policy
    from .certify.policy import NoCertificate, SolverReport
    from .solution import Status

    sol = est.solution_
    stored = sol.certificate
    problem = _certification_problem(est) if recertify and stored is not None else None
    fresh = None
    if stored is None:
        why = "the file holds no certificate"
    elif not recertify:
        why = "load_model(..., recertify=False)"
    elif problem is None:
        why = f"{type(est.problem_).__name__} is not a convex problem metricopt.certify accepts"
    else:
        fresh, why = _recompute(problem, sol, stored)
        if why is not None and sol.status is Status.EARLY_STOPPED:
            # early stopping certifies its metric against the fit part of the data, not the problem rebuilt from
            # all of it: the file's certificate stands, not re-verified
            fresh = None
    if fresh is not None:
        sol.certificate = fresh
        if est.certificate_ is stored:
            est.certificate_ = fresh
        if why is None:
            _recompute_objective(mf, problem, sol)
        else:  # the file's objective belongs to another problem too: the rebuilt problem's, at the metric
            sol.objective = float(fresh.upper)
    elif stored is not None:
        stored.details[REVERIFIED_KEY] = f"NO: {why}; the bounds are the file's own numbers"
    if sol.status is not Status.OPTIMAL:
        return
    # the file's 'optimal' is the claim; the policy decides from the certificate recomputed here (none: never optimal;
    # a non-convex problem: stationary at best)
    claim = SolverReport.inherit(sol.status)
    if fresh is None:
        convex = getattr(problem or _certification_problem(est) or est.problem_, "is_convex", False)
        _demote(mf, est, policy.decide(claim, NoCertificate.NOT_TAKEN, convex=convex)[0],
                f"status 'optimal' could not be re-verified at load ({why})")
    elif not fresh.is_optimal:
        _demote(mf, est, policy.decide(claim, fresh, convex=True)[0],
                f"the certificate recomputed at load says {fresh.verdict.value!r} (relative gap {fresh.rel_gap:.3e}, "
                f"tol {fresh.tol:.1e})")


def _recompute_objective(mf, problem, sol):
    """The objective of a re-verified solution: its problem's at its metric, which the file's must be (within
    :data:`REVERIFY_RTOL`; the same arithmetic gives the same number, a last digit may differ)."""
    try:
        value = float(problem.objective(sol.M, **sol.variables))
    except Exception:  # noqa: BLE001 - a problem without an objective at M keeps the file's
        return
    stored = sol.objective
    if not math.isfinite(value) or not (abs(value - stored) <= REVERIFY_RTOL * max(1.0, abs(value))):
        raise _corrupt(mf, f"the objective it records, {stored!r}, is not its problem's objective {value!r} at its "
                           "metric")
    sol.objective = value


def _demote(mf, est, status, why):
    sol = est.solution_
    sol.status = status
    sol.message = f"{status.message} (loaded from {str(mf.path)!r}: the file said 'optimal', but {why})"
    warnings.warn(f"model file {str(mf.path)!r} records status 'optimal', but {why}; it loads with status "
                  f"{status.code!r}.", ModelFileWarning, stacklevel=3)


def load_model(path: FilePath, *, recertify: bool = True) -> Any:
    """Load a model file written by :func:`save_model`.

    Besides the checks of :func:`read_model_file`, the stored values must fit together (see
    the module docstring, "Consistency"): the metric symmetric and PSD, ``M = L^T L``, each
    certificate's numbers consistent with each other and with the recorded objective, status
    ``"optimal"`` only with an optimal certificate, an estimator's hyperparameters those of its
    rebuilt problem. An estimator's certificate is recomputed on the rebuilt problem (unless
    ``recertify=False``); its ``details["re-verified at load"]`` says whether it was.

    Parameters
    ----------
    path : str, bytes or os.PathLike
        The file (a file object is refused: pass its path).
    recertify : bool, default True
        Recompute an estimator's certificate with :func:`metricopt.certify` (one objective and
        one dual evaluation over the stored training data: milliseconds for small models,
        seconds for thousands of points). With ``False`` the file's certificate is kept,
        marked not re-verified, and a status ``"optimal"`` loads as ``"uncertified"``.

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
        version, or a corrupt file (checksum mismatch, undecodable content, values that do
        not fit together).

    Warns
    -----
    ModelFileWarning
        For a format version 1 file (its metadata covered by no checksum), and when a status
        ``"optimal"`` is not confirmed by the recomputed certificate (it loads as
        ``"optimal_inaccurate"``, or ``"uncertified"`` when it could not be recomputed).
    """
    mf = read_model_file(_as_path(path, "load_model", ModelFileError))
    kind = mf.metadata.get("kind")
    try:
        if kind == "estimator":
            obj = _estimator_from_file(mf, recertify=recertify)
        elif kind == "solution":
            obj = _solution_from_file(mf)
            _shared_certificate(mf, mf.metadata, {"solution": obj})
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
