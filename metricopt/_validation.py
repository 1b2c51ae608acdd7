"""Input checks shared by problems, certificates and estimators."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp

from .errors import InputError, InputTypeError, UnknownOptionError


def check_X(X: Any, name: str = "X") -> np.ndarray:
    """Return ``X`` as a C-contiguous float64 2-D array, or raise :class:`InputError`."""
    if sp.issparse(X):
        raise InputError(f"{name} is a sparse matrix; metricopt needs dense input: pass {name}.toarray().")
    try:
        raw = np.asarray(X)  # first: array-likes are only ever converted, never passed to other numpy functions
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be a numeric array; could not convert it to float64 ({exc}).") from None
    if np.iscomplexobj(raw):
        raise InputError(f"Complex data not supported: {name} has complex entries; pass real-valued features.")
    if raw.dtype.kind in "mM":  # astype(float64) would silently turn dates into counts of the dtype's unit
        what = "dates (datetime64)" if raw.dtype.kind == "M" else "durations (timedelta64)"
        raise InputError(
            f"{name} holds {what} of dtype {raw.dtype}; metricopt needs numeric features. Convert them to numbers "
            f"first, e.g. ({name} - {name}.min()) / np.timedelta64(1, 'D') for days."
        )
    try:
        arr = raw.astype(np.float64, copy=False)
    except TypeError as exc:  # e.g. a dict or None in an object array: a TypeError, as scikit-learn raises
        raise InputTypeError(f"{name} must be a numeric array; could not convert it to float64 ({exc}).") from None
    except ValueError as exc:  # e.g. strings: stays a plain InputError
        raise InputError(f"{name} must be a numeric array; could not convert it to float64 ({exc}).") from None
    if arr.ndim != 2:
        raise InputError(
            f"{name} must be a 2-D array of shape (n_samples, n_features); got an array with "
            f"{arr.ndim} dimension(s) and shape {arr.shape}. Reshape it, e.g. X.reshape(-1, 1) for one feature."
            + (" Reshape your data as X.reshape(1, -1) instead if it holds a single sample." if arr.ndim == 1 else "")
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        what = f"{arr.shape[0]} sample(s)" if arr.shape[0] == 0 else f"{arr.shape[1]} feature(s)"
        raise InputError(
            f"{name} is empty (shape {arr.shape}); it needs at least one sample and one feature. "
            f"Found array with {what} (shape={arr.shape}) while a minimum of 1 is required."
        )
    if not np.all(np.isfinite(arr)):
        n_bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise InputError(
            f"{name} contains {n_bad} NaN or infinite value(s); remove or impute them "
            f"(e.g. sklearn.impute.SimpleImputer) before learning a metric."
        )
    return np.ascontiguousarray(arr)


def as_real_array(value: Any, name: str, what: str = "an array of real numbers") -> np.ndarray:
    """``value`` as a float64 array (any shape), or :class:`InputError`: for values that do not convert,
    and for complex input -- even with all imaginary parts zero, as for ``X`` (see :func:`check_X`): a
    complex dtype is refused rather than silently cast (numpy's cast would drop the imaginary parts).

    Parameters
    ----------
    value : array_like
    name : str
        The argument's name in messages.
    what : str
        What the argument must be, for messages (e.g. ``"a finite (3, 3) array of numbers"``).
    """
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be {what}; got {type(value).__name__} that does not convert to float64 "
                         f"({exc}).") from None
    if np.iscomplexobj(raw):
        try:
            imag = float(np.max(np.abs(np.imag(raw)))) if raw.size else 0.0
        except (TypeError, ValueError):
            imag = float("nan")
        part = "all imaginary parts are 0" if imag == 0.0 else f"largest imaginary part {imag:.3g}"
        raise InputError(f"{name} has complex entries ({part}); {name} must be {what}, and metricopt refuses complex "
                         f"input rather than drop imaginary parts. Pass {name}.real if they are rounding.")
    if raw.dtype.kind in "mM":
        raise InputError(f"{name} must be {what}; got dtype {raw.dtype}.")
    try:
        return raw.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be {what}; got {type(value).__name__} that does not convert to float64 "
                         f"({exc}).") from None


#: widest feature range (largest ``max - min`` over the columns of ``X``) metricopt accepts: squared
#: distances between samples, about its square, must stay well inside float64's range (about 1e-308 to
#: 1e308), with room for sums over pairs and triplets and for the metric's own entries
SCALE_LIMITS = (1e-100, 1e100)


def check_scale(X: np.ndarray, name: str = "X") -> np.ndarray:
    """Raise :class:`InputError` when the features of ``X`` (finite, 2-D) span so much or so little that
    squared distances between samples overflow or underflow float64 (see :data:`SCALE_LIMITS`)."""
    with np.errstate(over="ignore"):
        spread = float(np.max(np.ptp(X, axis=0)))
    lo, hi = SCALE_LIMITS
    if spread == 0.0 or lo <= spread <= hi:  # all points equal: nothing to scale (other checks apply)
        return X
    finite = np.isfinite(spread)
    order = f"about 1e{2 * int(np.floor(np.log10(spread)))}" if finite else "beyond 1e308"
    raise InputError(
        f"{name}'s features span up to {f'{spread:.3g}' if finite else 'more than 1.8e308'} (largest max - min over "
        "its columns): squared distances between "
        f"samples ({order}) are too {'large' if spread > hi else 'small'} for float64 arithmetic; metricopt needs "
        f"the widest feature range between {lo:g} and {hi:g}. Rescale the features first, e.g. with "
        "sklearn.preprocessing.StandardScaler."
    )


def _indices(mask, limit=5):
    """The first ``limit`` positions where ``mask`` holds, as text (``"3, 7 and 2 more"``)."""
    idx = np.flatnonzero(mask)
    text = ", ".join(str(int(i)) for i in idx[:limit])
    return text + (f" and {idx.size - limit} more" if idx.size > limit else "")


def _label_kind(value):
    """The kind of one label of an object array: ``"missing"`` (None, pandas' NA or NaT), ``"nan"``,
    ``"complex"``, ``"number"``, ``"string"``, ``"empty"`` (a blank string), ``"bytes"`` or the type's name."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):  # None, pandas.NA, pandas.NaT
        return "missing"
    if isinstance(value, (str, np.str_)):
        return "string" if value.strip() else "empty"
    if isinstance(value, (bytes, np.bytes_)):
        return "bytes"
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        return "complex"
    if isinstance(value, numbers.Number):
        try:
            return "number" if bool(np.isfinite(float(value))) else "nan"
        except (TypeError, ValueError, OverflowError):
            return "number"
    return type(value).__name__


_KIND_PLURAL = {"number": "numbers", "string": "strings", "bytes": "bytes"}


def check_labels(labels, name="y"):
    """Raise :class:`InputError` unless every entry of the 1-D array ``labels`` is a valid class label.

    Refused: complex labels, NaN or infinite ones, ``None``, blank strings (an empty CSV cell), and object
    arrays that mix numbers with strings (or other types): ``np.unique`` cannot order them, and a
    conversion would silently make ``0`` and ``"0"`` one class. Positions in the messages count from 0.

    Parameters
    ----------
    labels : ndarray, 1-D
    name : str
        The argument's name in messages.

    Returns
    -------
    ndarray
        ``labels``, unchanged.
    """
    arr = labels
    kind = arr.dtype.kind
    if kind == "c":
        raise InputError(f"{name} has complex labels (dtype {arr.dtype}); class labels must be integers, strings or "
                         "real numbers. Pass e.g. y.real.astype(int) if the imaginary parts are all zero.")
    if kind == "f" and not np.all(np.isfinite(arr)):
        raise InputError(f"{name} contains NaN or infinite labels; every sample needs a valid class label. Found at "
                         f"sample(s) {_indices(~np.isfinite(arr))}: drop those samples or fill in their labels.")
    if kind in "US":
        blank = np.char.str_len(np.char.strip(arr)) == 0
        if np.any(blank):
            raise InputError(f"{name} contains empty labels (blank strings); every sample needs a valid class label. "
                             f"Found at sample(s) {_indices(blank)}: drop those samples or fill in their labels.")
    if kind != "O":
        return arr
    kinds = np.array([_label_kind(v) for v in arr.tolist()], dtype=object)
    for bad, what in (("missing", "missing labels (None)"), ("nan", "NaN or infinite labels"),
                      ("complex", "complex labels"), ("empty", "empty labels (blank strings)")):
        if np.any(kinds == bad):
            raise InputError(f"{name} contains {what}; every sample needs a valid class label. Found at sample(s) "
                             f"{_indices(kinds == bad)}: drop those samples or fill in their labels.")
    found = list(dict.fromkeys(kinds.tolist()))  # in order of first appearance
    if len(found) > 1:
        first = {k: int(np.argmax(kinds == k)) for k in found[:3]}
        examples = " and ".join(f"{_KIND_PLURAL.get(k, k + ' objects')} (e.g. sample {i}: {_py(arr[i])!r})"
                                for k, i in first.items())
        raise InputError(f"{name} mixes label types: {examples}. Labels must all be numbers or all strings, else "
                         f"0 and '0' would be two classes (or one, after a conversion): convert them first, e.g. "
                         f"{name} = np.asarray({name}, dtype=str).")
    return arr


def check_y(y: Any, n_samples: int, name: str = "y") -> np.ndarray:
    """Return labels as a 1-D array of length ``n_samples``, or raise :class:`InputError`.

    The labels themselves are checked by :func:`check_labels` (a list that mixes numbers and strings
    included, which ``np.asarray`` would silently turn into strings)."""
    if isinstance(y, (list, tuple)):  # the types before numpy's conversion (it makes [0, "a"] strings)
        try:
            raw = np.asarray(y, dtype=object)
        except (TypeError, ValueError):
            raw = None
        if raw is not None and (raw.ndim == 1 or (raw.ndim == 2 and raw.shape[1] == 1)):
            check_labels(raw.ravel(), name)
    try:
        arr = np.asarray(y)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be a 1-D array of labels; could not convert it to an array ({exc}).") from None
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise InputError(f"{name} must be a 1-D array of labels; got shape {arr.shape}.")
    if arr.shape[0] != n_samples:
        raise InputError(
            f"{name} has {arr.shape[0]} labels but X has {n_samples} samples; pass one label per row of X."
        )
    return check_labels(arr, name)


def check_label_cells(cells, source):
    """Raise :class:`InputError` naming the data rows (counted from 1, after any header) whose label cell
    (a string from a CSV file) is empty; return ``cells`` otherwise.

    Parameters
    ----------
    cells : sequence of str
        The label column, one cell per data row.
    source : str
        The file, for the message.
    """
    blank = np.array([not str(c).strip() for c in cells], dtype=bool)
    if np.any(blank):
        rows = np.flatnonzero(blank) + 1
        listed = ", ".join(str(int(r)) for r in rows[:10]) + (f" and {rows.size - 10} more" if rows.size > 10 else "")
        raise InputError(f"{source!r}: data row(s) {listed} have an empty label (the last column); give every row "
                         "a class label or remove those rows.")
    return cells


def check_sample_weight(sample_weight, n_samples, name="sample_weight"):
    """Return per-sample weights as a float64 array of shape ``(n_samples,)`` (finite, ``>= 0``, not all
    zero), or ``None`` for ``None``; otherwise raise :class:`InputError`."""
    if sample_weight is None:
        return None
    fail = f"{name} must be a numeric array of one weight per sample; could not convert it to float64."
    try:
        raw = np.asarray(sample_weight)
    except (TypeError, ValueError):  # e.g. ragged nested lists
        raise InputError(fail) from None
    if np.iscomplexobj(raw):
        raise InputError(f"{name} has complex entries; pass real, non-negative weights.")
    try:
        arr = raw.astype(np.float64)
    except (TypeError, ValueError):  # e.g. strings, None
        raise InputError(fail) from None
    if arr.shape != (n_samples,):
        raise InputError(f"{name} must have shape (n,) = ({n_samples},), one weight per sample of X; "
                         f"got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        n_bad = int(arr.size - np.count_nonzero(np.isfinite(arr)))
        raise InputError(f"{name} contains {n_bad} NaN or infinite value(s); every weight must be a finite "
                         "number >= 0.")
    if np.any(arr < 0):
        i = int(np.flatnonzero(arr < 0)[0])
        raise InputError(f"{name} must be >= 0; sample {i} has weight {float(arr[i])}. Give a sample weight 0 to "
                         "leave it out.")
    if not np.any(arr > 0):
        raise InputError(f"{name} is zero for every sample; at least one sample needs a positive weight.")
    return np.ascontiguousarray(arr)


def _py(value):
    """A numpy scalar as the plain Python value (so messages read 3, not np.int64(3))."""
    return value.item() if isinstance(value, np.generic) else value


def check_classes(y, k=None, method="LMNN"):
    """Check that ``y`` holds class labels, has at least two classes and, if ``k`` is given, k+1 points per class.

    Float labels are class labels (``-0.25, 0.25, 0.75``: three classes); a float ``y`` with non-integer values
    of which most are distinct (more distinct values than half the points) is a regression target and is refused
    with scikit-learn's wording ("Unknown label type: 'continuous'")."""
    arr = np.asarray(y)
    if (arr.dtype.kind == "f" and np.any(np.isfinite(arr) & (arr != np.round(arr)))
            and np.unique(arr).size > arr.size // 2):
        example = _py(arr[np.isfinite(arr) & (arr != np.round(arr))][0])
        raise InputError(
            f"Unknown label type: 'continuous'. {method} needs class labels (integers or strings); y holds "
            f"non-integer values such as {example!r}. For a regression target, bin it into classes first."
        )
    classes, counts = np.unique(y, return_counts=True)
    if classes.size < 2:
        raise InputError(
            f"{method} needs at least two classes; y has only one class ({_py(classes[0])!r}). "
            "A metric learned from one class cannot separate anything."
        )
    if k is not None:
        small = counts < k + 1
        if np.any(small):
            detail = ", ".join(f"{_py(c)!r}: {n}" for c, n in zip(classes[small], counts[small]))
            raise InputError(
                f"{method} with k={k} needs at least k+1={k + 1} points in every class (each point needs k "
                f"target neighbours of its own class); these classes have fewer: {detail}. "
                f"Lower k or drop those classes."
            )
    return classes, counts


def check_problem(problem, caller):
    """Raise :class:`InputError` unless ``problem`` is a metricopt problem (it declares ``terms``, a
    ``geometry`` and ``is_convex``: :class:`metricopt.protocols.ProblemLike`); the message names ``caller``."""
    if problem is not None and all(hasattr(problem, a) for a in ("terms", "geometry", "is_convex")):
        return problem
    hint = ""
    if hasattr(problem, "problem_") or hasattr(problem, "get_params"):
        hint = " For an estimator, pass its fitted problem, estimator.problem_."
    elif hasattr(problem, "status") and hasattr(problem, "M"):
        hint = " A Solution is already solved: its problem is the one you passed to solve."
    raise InputError(f"{caller} needs a metricopt problem (e.g. metricopt.LMNNProblem(X, y)) as its first argument; "
                     f"got {type(problem).__name__}.{hint}")


def check_int(value: Any, name: str, low: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{name} must be an integer; got {value!r}.")
    if low is not None and value < low:
        raise InputError(f"{name} must be >= {low}; got {value}.")
    return int(value)


#: largest magnitude of a real hyperparameter (a weight such as POLA's ``C``, a regulariser's ``lam``, a
#: term's weight, a tolerance): objectives multiply weights by sums of squared distances (up to about 1e200
#: for data within :data:`SCALE_LIMITS`, times the number of pairs or triplets), which must stay inside
#: float64's range (about 1.8e308)
REAL_LIMIT = 1e50


def check_real(value: Any, name: str, low: float | None = None, high: float | None = None,
               low_open: bool = False) -> float:
    """Return ``value`` as a float after checking that it is a finite real number in the given range and at
    most :data:`REAL_LIMIT` in magnitude; otherwise raise :class:`InputError` naming the valid range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise InputError(f"{name} must be a finite real number; got {value!r}.")
    value = float(value)
    if low is not None and (value < low or (low_open and value == low)):
        bound = f"> {low}" if low_open else f">= {low}"
        raise InputError(f"{name} must be {bound}" + (f" and <= {high}" if high is not None else "") + f"; got {value}.")
    if high is not None and value > high:
        raise InputError(f"{name} must be <= {high}" + (f" and >= {low}" if low is not None else "") + f"; got {value}.")
    if abs(value) > REAL_LIMIT:
        lower = (f"> {low}" if low_open else f">= {low}") if low is not None else f">= {-REAL_LIMIT:g}"
        upper = REAL_LIMIT if high is None else min(high, REAL_LIMIT)
        raise InputError(f"{name} must be {lower} and <= {upper:g}; got {value:g}. Larger magnitudes overflow "
                         "float64 arithmetic (objectives multiply weights by sums of squared distances): choose a "
                         "value in that range.")
    return value


def check_choice(value: Any, name: str, choices: Any) -> Any:
    """Return ``value`` (case-insensitive match) if it is one of ``choices``, else raise."""
    lookup = {str(c).lower(): c for c in choices}
    key = str(value).lower()
    if key not in lookup:
        raise UnknownOptionError(
            f"unknown {name} {value!r}; choose one of: {', '.join(repr(c) for c in choices)}."
        )
    return lookup[key]


def check_pairs(pairs, n_samples, name="pairs"):
    """Return an (m, 2) int64 array of index pairs, all in range(n_samples)."""
    arr = np.asarray(pairs)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise InputError(f"{name} must be an array of shape (m, 2) of sample indices; got shape {arr.shape}.")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise InputError(f"{name} must hold integer sample indices; got dtype {arr.dtype}.")
    arr = arr.astype(np.int64)
    bad = (arr < 0) | (arr >= n_samples)
    if np.any(bad):
        row = int(np.argwhere(bad)[0, 0])
        raise InputError(
            f"{name} row {row} is {arr[row].tolist()}, but indices must lie in [0, {n_samples - 1}] "
            f"(X has {n_samples} samples)."
        )
    if np.any(arr[:, 0] == arr[:, 1]):
        row = int(np.flatnonzero(arr[:, 0] == arr[:, 1])[0])
        raise InputError(f"{name} row {row} pairs sample {arr[row, 0]} with itself; remove such pairs.")
    return arr


def check_n_features(X, n_features, owner):
    """Raise :class:`InputError` unless the checked 2-D ``X`` has the ``n_features`` columns ``owner`` (an
    estimator's name) was fitted with; the message begins as scikit-learn's does."""
    if X.shape[1] != n_features:
        raise InputError(f"X has {X.shape[1]} features, but {owner} is expecting {n_features} features as input; "
                         f"pass X with the same {n_features} columns, in the same order, as at fit.")
    return X


def check_train_test(X_train, y_train, X_test):
    """``(X_train, y_train, X_test)`` checked (finite 2-D arrays, matching lengths) with the same
    number of features in ``X_train`` and ``X_test``."""
    X_train = check_X(X_train, "X_train")
    y_train = check_y(y_train, X_train.shape[0], "y_train")
    X_test = check_X(X_test, "X_test")
    if X_test.shape[1] != X_train.shape[1]:
        raise InputError(
            f"X_test has {X_test.shape[1]} features but X_train has {X_train.shape[1]}; "
            "they must have the same number of columns."
        )
    return X_train, y_train, X_test
