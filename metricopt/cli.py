r"""The ``metricopt`` command line.

Subcommands
-----------
``metricopt fit``
    Learn a metric (LMNN, MMC or POLA) on a built-in data set, a data set of the data
    folder (:mod:`metricopt.datasets`) or a CSV file (last column = label): stratified
    train/test split, scaling and PCA fitted on the training part, a solve with the
    chosen backend with live progress, the duality-gap certificate, the kNN test error
    before and after, a model file (:mod:`metricopt.io`) and optionally a plot.
``metricopt predict``
    Load a model file and classify a data set or CSV file (the error is printed when the
    data has labels).
``metricopt info``
    Print a model file's metadata.
``metricopt demo``
    LMNN, MMC or POLA on a scikit-learn data set (``--backend auto``: the exact program when
    its size check accepts it, else JAX), bounded by ``--time-limit``, with a line per phase:
    certificate and 3-NN test errors.

Nothing heavy (NumPy, CVXPY, JAX, scikit-learn) is imported before the arguments are parsed:
the command functions import what they use, so ``--help`` and ``--version`` are fast.

The problems solved are those of :class:`metricopt.LMNNProblem` (Weinberger & Saul,
JMLR 10:207-244, 2009, Eq. 14),

.. math::

    \min_{M \succeq 0}\ (1-\mu) \sum_{i, j \rightsquigarrow i} d_M(x_i, x_j)
    + \mu \sum_{i, j \rightsquigarrow i,\, l:\, y_l \ne y_i} [1 + d_M(x_i, x_j) - d_M(x_i, x_l)]_+,

:class:`metricopt.MMCProblem` (Xing, Ng, Jordan & Russell, NIPS 2002, Eq. 1-3) and
:class:`metricopt.POLAProblem` (Shalev-Shwartz, Singer & Ng, ICML 2004, batch form).

Errors of the user's making (unknown data set, unreadable file, data with the wrong number
of features for a model, a bad option value) print one line ``metricopt: error: ...`` on
stderr and exit with status 2; a solve that returns no metric exits with status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io as _io
import logging
import os
import sys
import time
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for the annotations only: nothing heavy is imported before the arguments are parsed
    import numpy as np

    from .solution import Solution

DATASETS = ("wine", "iris", "breast_cancer", "digits")
METHODS = ("lmnn", "mmc", "pola")
#: methods of ``metricopt fit`` (NCA is non-convex: the JAX backend, reported stationary)
FIT_METHODS = METHODS + ("nca", "mlcc", "gerrymander", "local")
#: closed-form baselines of ``metricopt fit`` (no solver, no certificate)
BASELINES = ("pca", "whitening", "lda", "rca")
FIT_METHODS += BASELINES
BACKENDS = ("cvxpy", "jax")
DATA_DIR_HELP = ("data folder of the file sets (holding uci/, faces/, digits/); default: $METRICOPT_DATA when set, "
                 "else ../shared/data relative to the current directory, then relative to the metricopt repository")


def _load(name):
    from sklearn import datasets

    loader = {"wine": datasets.load_wine, "iris": datasets.load_iris,
              "breast_cancer": datasets.load_breast_cancer, "digits": datasets.load_digits}[name]
    return loader(return_X_y=True)


def _check_seed(seed):
    """``--seed`` as the splitters accept it (NumPy seeds: 0 to 2**32 - 1)."""
    from ._validation import check_int
    from .errors import InputError

    seed = check_int(seed, "seed", low=0)
    if seed > 2**32 - 1:
        raise InputError(f"seed must be <= 2**32 - 1 = {2**32 - 1}; got {seed}.")
    return seed


def _check_plot_path(path):
    """Refuse a ``--plot`` file that cannot be written (unknown image format, missing folder, a folder) before
    the fit, not after it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from .errors import InputError

    ext = os.path.splitext(str(path))[1].lstrip(".").lower() or "png"
    formats = FigureCanvasAgg(Figure()).get_supported_filetypes()
    if ext not in formats:
        raise InputError(f"cannot write the plot {path!r}: unknown image format {ext!r}; use a file name ending in "
                         f".png, .pdf or .svg (supported: {', '.join(sorted(formats))}).")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"cannot write {path!r}: the folder {folder!r} does not exist; create it first.")
    if os.path.isdir(path):
        raise InputError(f"cannot write {path!r}: it is a folder; give a file name.")


DEMO_TIME_LIMIT = 30.0
#: ``demo --backend auto`` solves the exact program (cvxpy) only when its constraint matrix, with every triplet or
#: pair, has at most this many entries (``metricopt.backends.cvxpy_backend.program_size``), else the JAX solver.
#: Measured with the default 30 s limit on 2 cores (the demo's split): every wine problem (0.85-5.1 million
#: entries) is solved and certified optimal by cvxpy in 3-9 s; on breast_cancer (33-200 million) cvxpy ended at
#: the time limit (LMNN: relative gap 4.4e-4; MMC: still setting up Clarabel, 4 GB) where JAX reached 2.4e-6 and
#: an optimal MMC (1.6e-7, 4 s)
DEMO_EXACT_ENTRIES = 10_000_000


def _demo_estimator(args, backend):
    from . import LMNN, MMC, POLA

    common = {"backend": backend, "verbose": args.verbose or not args.quiet}
    if args.solver is not None:
        common["solver"] = args.solver
    if args.method == "lmnn":
        return LMNN(k=args.k, mu=args.mu, **common)
    return {"mmc": MMC, "pola": POLA}[args.method](**common)


def _exact_entries(est, X, y):
    """The number of constraint-matrix entries of the exact program the estimator ``est`` would build on ``(X, y)``
    (every triplet or pair, ``metricopt.backends.cvxpy_backend.program_size``)."""
    from .backends.cvxpy_backend import program_size

    rows, width = program_size(est._make_problem(X, y))
    return rows * width


def demo(args: argparse.Namespace) -> int:
    """Run the demo: split, standardise, fit (exact or JAX backend, under a time limit), certify, report kNN
    errors; a line when each phase starts and ends unless ``--quiet``.

    The problem is LMNN (Weinberger & Saul, JMLR 2009, Sec. 3.4, Eq. 14), MMC or POLA (module docstring).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of the subcommand (:func:`build_parser`).

    Returns
    -------
    int
        The exit status: 0 when the solve returned a metric, else 1.

    Raises
    ------
    metricopt.errors.InputError
        For a bad option value (seed, time limit, a solver of the other backend) or a time limit used up before
        the solve starts.
    metricopt.errors.SolverError
        When the solve returns no metric at all.
    """
    from ._deadline import Budget
    from ._validation import check_real
    from .errors import InputError, NotCertifiableError, ProblemTooLargeError

    t_start = time.perf_counter()

    def say(msg):
        if not args.quiet:
            print(f"[demo {time.perf_counter() - t_start:6.1f} s] {msg}", flush=True)

    _check_seed(args.seed)
    limit = check_real(args.time_limit, "time-limit", low=0.0, low_open=True)
    if args.solver is not None and args.backend == "jax" and args.solver.upper() in ("SCS", "CLARABEL"):
        raise InputError(f"--solver {args.solver} is a solver of the exact backend (cvxpy); with --backend jax "
                         "use --solver fista or subgradient, or leave --solver out.")
    say(f"data: loading {args.dataset} (scikit-learn), 70/30 stratified split, standardising ...")
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from . import certify, knn_error
    from .estimators.base import fit_estimator

    X, y = _load(args.dataset)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=args.seed, stratify=y)
    scaler = StandardScaler().fit(Xtr)
    Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
    say("data: done")
    print(f"metricopt demo: {args.method.upper()} on {args.dataset} ({Xtr.shape[0]} train / {Xte.shape[0]} test "
          f"points, {X.shape[1]} features, standardised), backend {args.backend}, time limit {limit:g} s", flush=True)

    def solve(backend, why):
        left = limit - (time.perf_counter() - t0)
        if left <= 0:
            raise InputError(f"--time-limit {limit:g} s was used up before the {backend} solve could start; "
                             "give a larger --time-limit.")
        say(f"solve: backend {backend} ({why}), time limit {left:.0f} s ...")
        est = _demo_estimator(args, backend).set_params(time_limit=left)
        with _progress(not args.quiet and not args.verbose), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # solver inaccuracy warnings: the status says it
            fit_estimator(est, Xtr, ytr)  # no metric at all: SolverError (exit status 1)
        return est, backend

    t0 = time.perf_counter()
    if args.backend == "auto":
        entries = _exact_entries(_demo_estimator(args, "cvxpy"), Xtr, ytr)
        if entries > DEMO_EXACT_ENTRIES:
            est, backend = solve("jax", f"auto: the exact program would have {entries:,} constraint entries, more "
                                        f"than {DEMO_EXACT_ENTRIES:,}; first-order solver with a certified gap")
        else:
            try:
                est, backend = solve("cvxpy", f"auto: the exact conic program, {entries:,} constraint entries")
            except ProblemTooLargeError as exc:
                say(f"solve: the exact backend refused the problem: {' '.join(str(exc).split())}")
                est, backend = solve("jax", "auto: the exact program is too large, first-order solver with a "
                                            "certified gap instead")
    else:
        est, backend = solve(args.backend, "--backend")
    elapsed = time.perf_counter() - t0
    sol = est.solution_
    say(f"solve: done, status {sol.status.code}")
    rounds = (f", working-set rounds {sol.stats.get('rounds')}, working set {sol.stats.get('working_set_size')} "
              "triplets") if backend == "cvxpy" else ""
    print(f"solve: status {sol.status.code}, objective {sol.objective:.10g}, {elapsed:.2f} s, backend {backend}, "
          f"solver {sol.solver}, iterations {sol.stats.get('iterations')}{rounds}")
    if not sol.status.is_optimal:
        print(f"note: {sol.message}")
    cert = sol.certificate
    if cert is None:
        say("certificate: computing the duality-gap certificate ...")
        try:
            with Budget.start(limit, t0).closing():  # its conic programs stay within the time limit
                cert = certify(est.problem_, sol)
            est.certificate_ = sol.certificate = cert
        except NotCertifiableError as exc:
            print(f"no certificate: {exc}")
        say("certificate: done")
    if cert is not None:
        print(cert.report())
    k = 3
    say(f"kNN: {k}-NN test errors, Euclidean and learned metric ...")
    e0 = knn_error(Xtr, ytr, Xte, yte, k)
    e1 = knn_error(Xtr, ytr, Xte, yte, k, L=est.components_)
    say("kNN: done")
    print(f"{k}-NN test error: Euclidean {100 * e0:.2f}%  ->  learned metric {100 * e1:.2f}%")
    return 0 if sol.status.has_point else 1


# --------------------------------------------------------------------------- data


def _number(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def read_csv(path: str | os.PathLike[str]) -> tuple[list[str] | None, list[list[str]]]:
    """Read a numeric CSV file into rows of strings (header row dropped).

    The first row is taken as a header when any of its cells (the last, the label, aside) is not a number.
    Blank lines are skipped. Every remaining row must have the same number of cells.

    Parameters
    ----------
    path : str or path-like
        A UTF-8 CSV file.

    Returns
    -------
    header : list of str or None
    rows : list of list of str
        The data rows, cells stripped of surrounding blanks.

    Raises
    ------
    metricopt.errors.InputError
        For a file that cannot be read, is not UTF-8 CSV, has no data rows or rows of different widths.
    """
    from .errors import InputError

    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = [[c.strip() for c in r] for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    except UnicodeDecodeError:
        raise InputError(f"cannot read {path!r}: it is not a UTF-8 text (CSV) file.") from None
    except csv.Error as exc:
        raise InputError(f"cannot read {path!r} as CSV: {exc}.") from None
    except OSError as exc:
        raise InputError(f"cannot read {path!r}: {exc.strerror or exc}.") from None
    header = None
    if rows and not all(_number(c) for c in rows[0][:-1]):
        header, rows = rows[0], rows[1:]
    if not rows:
        raise InputError(f"{path!r} has no data rows.")
    width = len(rows[0])
    for i, r in enumerate(rows):
        if len(r) != width:
            raise InputError(f"{path!r}: data row {i + 1} has {len(r)} columns, the first row has {width}; "
                             "every row needs the same number of columns.")
    return header, rows


def _labels(cells):
    """Parse a label column: integers, else floats, else strings."""
    import numpy as np

    try:
        return np.array([int(c) for c in cells], dtype=np.int64)
    except ValueError:
        pass
    try:
        return np.array([float(c) for c in cells], dtype=np.float64)
    except ValueError:
        return np.array(cells, dtype=str)


def _features(rows, path):
    import numpy as np

    from .errors import InputError

    try:
        return np.array(rows, dtype=np.float64).reshape(len(rows), -1)
    except ValueError:
        for i, r in enumerate(rows):
            for j, c in enumerate(r):
                if not _number(c):
                    raise InputError(f"{path!r}: data row {i + 1}, column {j + 1} is not a number: {c!r}.") from None
        raise


def load_csv(path: str | os.PathLike[str], n_features: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """``(X, y)`` from a CSV file whose last column is the label.

    Parameters
    ----------
    path : str or path-like
        The CSV file (:func:`read_csv`).
    n_features : int, optional
        A model's input width: a file of exactly ``n_features`` columns is then read as unlabelled
        (``y = None``) and any other width than ``n_features + 1`` is an error naming both counts.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,) or None
        The labels, parsed as integers, else floats, else strings; ``None`` for an unlabelled file.

    Raises
    ------
    metricopt.errors.InputError
        For an unreadable file, a cell of ``X`` that is not a number, invalid labels or the wrong number of
        columns.
    """
    from .errors import InputError

    _, rows = read_csv(path)
    width = len(rows[0])
    if n_features is not None:
        if width == n_features:
            return _features(rows, path), None
        if width != n_features + 1:
            raise InputError(
                f"{path!r} has {width} columns, but the model expects {n_features} features "
                f"({n_features} columns, or {n_features + 1} with the label last)."
            )
    if width < 2:
        raise InputError(f"{path!r} has {width} column; it needs at least one feature column and the label last.")
    X = _features([r[:-1] for r in rows], path)
    from ._validation import check_label_cells

    return X, _labels(check_label_cells([r[-1] for r in rows], path))


def _is_file_arg(data):
    return data.lower().endswith(".csv") or os.sep in data or os.path.isfile(data)


_FILE_SETS = ("balance-scale", "letter-recognition", "orl", "olivetti", "yale-b", "usps", "mnist-5k")


def load_data(data: str, data_dir: str | os.PathLike[str] | None = None,
              n_features: int | None = None) -> tuple[np.ndarray, np.ndarray | None, str]:
    """``(X, y, name)`` for a data set name (:func:`metricopt.datasets.load`) or a CSV path.

    Parameters
    ----------
    data : str
        A data set name of :mod:`metricopt.datasets`, or a CSV path (a name ending in ``.csv``, holding a path
        separator, or an existing file).
    data_dir : str or path-like, optional
        The data folder of the file sets; default :func:`metricopt.datasets.find_data_home` for those.
    n_features : int, optional
        A model's input width (CSV files: see :func:`load_csv`).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,) or None
        ``None`` for an unlabelled CSV file.
    name : str
        The data set's canonical name, or the path as given.

    Raises
    ------
    metricopt.errors.UnknownOptionError
        For an unknown data set name.
    metricopt.datasets.DatasetError
        For a file set missing from the data folder.
    metricopt.errors.InputError
        For an unreadable or malformed CSV file.
    """
    from . import datasets
    from .errors import UnknownOptionError

    if _is_file_arg(data):
        X, y = load_csv(data, n_features=n_features)
        return X, y, data
    try:
        name = datasets._dataset_name(data)
    except UnknownOptionError as exc:
        raise UnknownOptionError(f"{exc} Or give the path of a .csv file (last column = label).") from None
    if data_dir is None and name in _FILE_SETS:
        data_dir = datasets.find_data_home()  # $METRICOPT_DATA, else ../shared/data (cwd, then repository)
    try:
        X, y = datasets.load(data, data_home=data_dir)
    except UnknownOptionError as exc:
        raise UnknownOptionError(f"{exc} Or give the path of a .csv file (last column = label).") from None
    except datasets.DatasetError as exc:
        raise datasets.DatasetError(f"{exc} On the command line: --data-dir DIR.") from None
    return X, y, name


def _split(y, test_size, seed):
    from .datasets import random_splits

    return next(random_splits(y, n_splits=1, test_size=test_size, seed=seed))


# --------------------------------------------------------------------------- progress


class _Progress(_io.TextIOBase):
    """A stdout stand-in that shows only the backends' ``[metricopt ...]`` progress lines.

    Solver logs (SCS, Clarabel, CVXPY banners) are dropped. On a terminal the progress is
    one live line rewritten in place; otherwise lines are printed, at most one every
    ``every`` seconds (working-set rounds of the exact backend always), and the last one
    is printed when the solve ends.
    """

    def __init__(self, out, every=0.5):
        self.out = out
        self.every = every
        self.live = bool(getattr(out, "isatty", lambda: False)())
        self.buffer_ = ""
        self.pending = None
        self.last = float("-inf")
        self.width = 0

    def writable(self):
        return True

    def write(self, text):
        self.buffer_ += text
        while "\n" in self.buffer_:
            line, self.buffer_ = self.buffer_.split("\n", 1)
            if line.startswith("[metricopt"):
                self._show(line)
        return len(text)

    def _show(self, line):
        now = time.perf_counter()
        if self.live:
            pad = " " * max(0, self.width - len(line))
            self.out.write("\r" + line + pad)
            self.out.flush()
            self.width = len(line)
        elif line.startswith("[metricopt cvxpy]") or now - self.last >= self.every:
            self.out.write(line + "\n")
            self.out.flush()
            self.last, self.pending = now, None
        else:
            self.pending = line

    def close_progress(self):
        if self.live and self.width:
            self.out.write("\n")
        elif self.pending is not None:
            self.out.write(self.pending + "\n")
        self.out.flush()


@contextlib.contextmanager
def _progress(enabled):
    """Route the solve's printed output through :class:`_Progress` (and silence CVXPY's logger)."""
    if not enabled:
        yield
        return
    out = sys.stdout
    filt = _Progress(out)
    logger = logging.getLogger("__cvxpy__")
    drop = logging.Filter("no record passes this name")
    logger.addFilter(drop)
    try:
        with contextlib.redirect_stdout(filt):
            yield
    finally:
        logger.removeFilter(drop)
        filt.close_progress()


# --------------------------------------------------------------------------- plot


def _top2(Z):
    """Coordinates of ``Z`` on its two leading principal directions (zero-padded)."""
    import numpy as np

    Zc = Z - Z.mean(axis=0)
    _, _, Vt = np.linalg.svd(Zc, full_matrices=False)
    P = Zc @ Vt[:2].T
    if P.shape[1] < 2:
        P = np.hstack([P, np.zeros((P.shape[0], 2 - P.shape[1]))])
    return P


def save_plot(path: str | os.PathLike[str], X_test: np.ndarray, y_test: np.ndarray, L: np.ndarray, solution: Solution,
              title: str) -> None:
    """Write a figure: the test data projected on its two leading principal directions
    before and after the learned map ``L``, plus the objective/gap history of a JAX solve.

    Parameters
    ----------
    path : str or path-like
        The image file (its extension picks the format: ``.png`` by default, ``.pdf``, ``.svg``, ...), written
        atomically.
    X_test : ndarray of shape (n_samples, n_features)
        The (preprocessed) test inputs.
    y_test : ndarray of shape (n_samples,)
        Their labels (the colours).
    L : ndarray of shape (r, n_features)
        The learned map.
    solution : Solution
        The fit's solution; a third panel shows ``stats["history"]`` (objective and certified relative gap)
        when it has one.
    title : str
        The figure's title.
    """
    import numpy as np

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from .io import atomic_write

    history = [h for h in solution.stats.get("history", []) if "iteration" in h]
    panels = 3 if history else 2
    fig = Figure(figsize=(4.2 * panels, 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    _, codes = np.unique(y_test, return_inverse=True)
    for i, (Z, name) in enumerate(((X_test, "Euclidean (input space)"), (X_test @ L.T, "learned metric"))):
        ax = fig.add_subplot(1, panels, i + 1)
        P = _top2(Z)
        ax.scatter(P[:, 0], P[:, 1], c=codes, cmap="tab10", s=14, vmin=0, vmax=9)
        ax.set_title(f"test data, {name}")
        ax.set_xlabel("PC 1")
        ax.set_ylabel("PC 2")
    if history:
        ax = fig.add_subplot(1, panels, 3)
        it = np.array([h["iteration"] for h in history])
        obj = np.array([h["objective"] for h in history])
        ax.plot(it, obj, label="objective")
        ax.set_xlabel("iteration")
        ax.set_ylabel("objective")
        gaps = [(h["iteration"], h["rel_gap"]) for h in history if h.get("rel_gap") is not None and h["rel_gap"] > 0]
        if gaps:
            ax2 = ax.twinx()
            g = np.array(gaps)
            ax2.semilogy(g[:, 0], g[:, 1], "o-", color="C3", ms=3, label="certified gap")
            ax2.set_ylabel("certified relative gap")
        ax.set_title("JAX solve")
    fig.suptitle(title)
    ext = os.path.splitext(str(path))[1].lstrip(".").lower() or "png"
    atomic_write(path, lambda fh: fig.savefig(fh, format=ext, dpi=100))


# --------------------------------------------------------------------------- fit


def _pca_value(text):
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of dimensions or a variance fraction, got {text!r}")


#: ``--method`` -> the estimator (a name in :mod:`metricopt`) and its own options: estimator parameter -> the
#: command line's attribute. The shared solve options (:data:`metricopt.options.CLI_OPTIONS`), ``backend``,
#: ``solver`` and ``verbose`` are passed to every estimator that takes them; what is not given keeps the estimator's
#: own default (stated once, in the estimator)
ESTIMATORS: dict[str, tuple[str, dict[str, str]]] = {
    "lmnn": ("LMNN", {"k": "k", "mu": "mu"}),
    "mmc": ("MMC", {"diagonal": "diagonal"}),
    "pola": ("POLA", {"C": "C"}),
    "mlcc": ("MLCC", {}),
    "nca": ("NCA", {"n_components": "n_components"}),
    "gerrymander": ("GerrymanderingKNN", {"k": "k", "C": "C"}),
    "local": ("LocalMetricKNN", {"how": "how", "where": "where", "when": "when", "k": "k"}),
    "pca": ("PCA", {"n_components": "n_components"}),
    "whitening": ("Whitening", {}),
    "lda": ("LDA", {"n_components": "n_components"}),
    "rca": ("RCA", {}),
}


def _make_estimator(args):
    """The estimator of ``--method`` from :data:`ESTIMATORS`, with the options given; a shared option the estimator
    does not take is refused (never dropped silently)."""
    import metricopt
    from .errors import InputError
    from .options import CLI_OPTIONS

    name, own = ESTIMATORS[args.method]
    cls = getattr(metricopt, name)
    takes = set(cls().get_params())
    params = {p: getattr(args, attr) for p, attr in own.items()}
    shared = {opt: getattr(args, opt) for opt in CLI_OPTIONS}
    shared["solver"] = args.solver
    if args.backend in metricopt.backends.BACKENDS or args.method == "nca":
        shared["backend"] = args.backend
    for opt, value in shared.items():
        if value is None:
            continue
        if opt not in takes:
            flag = "--" + opt.replace("_", "-")
            raise InputError(f"{flag} does not apply to --method {args.method} ({name} takes no {opt}); drop {flag}.")
        params[opt] = value
    if "verbose" in takes:
        params["verbose"] = not args.quiet
    return cls(**params)


def fit(args: argparse.Namespace) -> int:
    """``metricopt fit``: split, preprocess, fit with progress, certify, report, save.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of the subcommand (:func:`build_parser`).

    Returns
    -------
    int
        The exit status.

    Raises
    ------
    metricopt.errors.InputError
        For an option that does not go with ``--method``, a bad option value, unreadable data or an unwritable
        output file.
    metricopt.errors.SolverError
        When the solve returns no metric.
    """
    from . import certify, knn_error
    from ._deadline import Budget
    from ._validation import check_int, check_real
    from .errors import InputError, NotCertifiableError, NotConvexError
    from .estimators.base import fit_estimator
    from .io import Preprocessing, check_destination, save_model

    if args.method in BASELINES:
        if args.backend is not None:
            raise InputError(f"--method {args.method} is computed in closed form (an eigendecomposition); it takes no "
                             "--backend.")
        args.backend = "closed form"
    if args.method == "local":
        if args.backend is not None:
            raise InputError("--method local solves its global LMNN and its batched local problems with the JAX "
                             "backend and its LDA metrics in closed form; it takes no --backend.")
        args.backend = "own solvers"
        args.how, args.where = args.how or "lmnn", args.where or "exemplar"
        args.when = args.when or ("online" if args.where == "test" else "offline")
    elif any(v is not None for v in (args.how, args.where, args.when)):
        raise InputError("--how, --where and --when choose a cell of the local-metric taxonomy; they go with "
                         "--method local.")
    if args.method == "gerrymander":
        if args.backend is not None:
            raise InputError("--method gerrymander has its own solvers (--solver sgd, cccp or paper; cccp solves "
                             "certified convex steps with the exact backend); it takes no --backend.")
        args.backend = "own solvers"
    if args.backend is None:
        args.backend = "auto" if args.method == "nca" else "cvxpy"
    if args.method == "nca" and args.backend not in ("auto", "numpy", "jax"):
        raise InputError("NCA is not convex: it has no exact conic program. Use --backend numpy or jax, or leave "
                         "--backend out (nca then picks the NumPy path for L-BFGS on a CPU, else JAX).")
    if args.method != "nca" and args.backend == "numpy":
        raise InputError(f"--backend numpy is NCA's NumPy path; --method {args.method} runs on cvxpy (exact) or jax.")
    if args.solver_tol is not None and args.backend != "cvxpy":
        raise InputError(f"--solver-tol is the exact backend's conic solver accuracy (--backend cvxpy); --method "
                         f"{args.method} with backend {args.backend} has no conic solver to pass it to.")
    if args.time_limit is not None:
        check_real(args.time_limit, "time-limit", low=0.0, low_open=True)
        if args.backend == "closed form":
            raise InputError(f"--time-limit bounds an iterative solve (lmnn, mmc, pola, mlcc, nca, gerrymander, "
                             f"local); --method {args.method} is computed in closed form; drop --time-limit.")
    k = check_int(args.k, "k", low=1)
    check_real(args.test_size, "test-size", low=0.0, high=1.0, low_open=True)
    check_real(args.C, "C", low=0.0, low_open=True)
    if args.n_components is not None:
        check_int(args.n_components, "n-components", low=1)
    _check_seed(args.seed)
    if args.plot:
        _check_plot_path(args.plot)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        raise InputError(f"cannot write {args.out!r}: the folder {out_dir!r} does not exist; create it first.")
    if os.path.isdir(args.out):
        raise InputError(f"cannot write {args.out!r}: it is a folder; give a file name.")
    check_destination(args.out)  # a device, FIFO or symlink is refused before the fit, not after it
    X, y, name = load_data(args.data, args.data_dir)
    train, test = _split(y, args.test_size, args.seed)
    pre = Preprocessing(scale="standard" if args.scale else None, pca=args.pca).fit(X[train])
    Xtr, Xte = pre.transform(X[train]), pre.transform(X[test])
    ytr, yte = y[train], y[test]
    est = _make_estimator(args)
    print(f"metricopt fit: {args.method.upper()} on {name} ({Xtr.shape[0]} train / {Xte.shape[0]} test points, "
          f"{X.shape[1]} features, preprocessing: {pre.describe()}), backend {args.backend}")

    t0 = time.perf_counter()
    with _progress(not args.quiet), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # solver inaccuracy warnings: the status says it
        fit_estimator(est, Xtr, ytr)  # a solve without a metric raises SolverError (exit status 1)
    elapsed = time.perf_counter() - t0
    problem, sol = est.problem_, est.solution_
    ran = f", backend {sol.backend}" if args.backend == "auto" else ""  # what NCA's auto chose
    print(f"solve: status {sol.status.code}, objective {sol.objective:.10g}, {elapsed:.2f} s{ran}, "
          f"solver {sol.solver}, iterations {sol.stats.get('iterations')}")
    if not sol.status.is_optimal:
        print(f"note: {sol.message}")
    cert = sol.certificate
    if cert is None and args.method not in BASELINES and args.method != "local":
        try:
            with Budget.start(args.time_limit, t0).closing():  # under --time-limit, its conic programs stay within it
                cert = certify(problem, sol)
            est.certificate_ = sol.certificate = cert
        except (NotConvexError, NotCertifiableError) as exc:
            print(f"no certificate: {exc}")
    if cert is not None:
        print(cert.report())
    kk = min(k, Xtr.shape[0])
    e0 = knn_error(Xtr, ytr, Xte, yte, kk)
    e1 = knn_error(Xtr, ytr, Xte, yte, kk, L=est.components_)
    print(f"{kk}-NN test error: Euclidean {100 * e0:.2f}%  ->  learned metric {100 * e1:.2f}%")
    if args.method == "local":
        e1 = 1.0 - est.score(Xte, yte)
        print(f"local distance ({est.how}, where={est.where}, when={est.when}: the paper's {est.column_!r} column), "
              f"two-stage {kk}-NN test error {100 * e1:.2f}%; local solves: {est.local_.statuses}")
    info = {"data": name, "test_size": args.test_size, "seed": args.seed, "n_features_raw": int(X.shape[1]),
            "knn_k": kk, "knn_test_error_euclidean": e0, "knn_test_error_learned": e1,
            "time_limit": args.time_limit, "fit_seconds": elapsed}
    path = save_model(args.out, est, preprocessing=pre, info=info)
    print(f"model saved to {path}")
    if args.plot:
        save_plot(args.plot, Xte, yte, est.components_, sol,
                  f"{problem.method} on {name}: {kk}-NN test error {100 * e0:.1f}% -> {100 * e1:.1f}%")
        print(f"plot saved to {args.plot}")
    return 0


# --------------------------------------------------------------------------- predict


def _predict_with(est, X, k, rule):
    from .knn import knn_predict

    if hasattr(est, "predict"):
        return est.predict(X, rule=rule)
    if rule != "knn":
        from .errors import InputError

        raise InputError(f"--rule {rule} is LMNN's energy rule; a {type(est).__name__} model predicts with --rule knn.")
    return knn_predict(est.problem_.X, est.problem_.y, X, k=k, L=est.components_)


def _as_label_dtype(y, pred, name):
    """The given labels in the model's label type (CSV labels are parsed as int, float or str)."""
    import numpy as np

    from .errors import InputError

    if (y.dtype.kind in "US") == (pred.dtype.kind in "US"):
        return y
    try:
        return y.astype(pred.dtype) if pred.dtype.kind in "US" else y.astype(np.float64)
    except ValueError:
        raise InputError(f"the labels of {name!r} ({y[:3].tolist()}...) are not of the model's label type "
                         f"(classes {np.unique(pred)[:5].tolist()}...); check the label column.") from None


def predict(args: argparse.Namespace) -> int:
    """``metricopt predict``: classify data with a saved model; report the error if labelled.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of the subcommand (:func:`build_parser`).

    Returns
    -------
    int
        The exit status (0).

    Raises
    ------
    metricopt.io.ModelFileError
        For a file that is not a valid model file (:func:`metricopt.io.load_model`).
    metricopt.errors.InputError
        For a model file that holds no estimator, data of another width than the model's, a ``--split`` of
        another data set, or labels of another type than the model's.
    """
    import numpy as np

    from .errors import InputError
    from .io import atomic_write, load_model

    est = load_model(args.model)
    meta = est.model_metadata_
    if meta.get("kind") != "estimator":
        raise InputError(f"{args.model!r} holds a bare metric (a Solution), not a classifier; save an estimator "
                         "(metricopt fit, or save_model with a fitted LMNN/MMC/POLA) to predict with it.")
    info = meta.get("info") or {}
    pre = est.preprocessing_
    d_raw = pre.n_features_in if pre is not None else est.n_features_in_
    X, y, name = load_data(args.data, args.data_dir, n_features=d_raw)
    if X.shape[1] != d_raw:
        raise InputError(f"{name!r} has {X.shape[1]} features, but the model {args.model!r} expects {d_raw}.")
    if args.split != "all":
        if info.get("data") != name:
            raise InputError(f"--split {args.split} recovers the split of the model's own data set "
                             f"({info.get('data')!r}); the data given is {name!r}. Use --split all.")
        if y is None:  # the stratified split is recovered from the labels
            raise InputError(f"--split {args.split} recovers the model's stratified split from the labels; {name!r} "
                             "has no label column. Use --split all.")
        train, test = _split(y, info["test_size"], info["seed"])
        idx = test if args.split == "test" else train
        X, y = X[idx], y[idx]
    Xp = pre.transform(X) if pre is not None else X
    k = int(info.get("knn_k", getattr(est, "k", 3)))
    pred = _predict_with(est, Xp, k, args.rule)
    if args.out:
        def write(fh):
            text = _io.TextIOWrapper(fh, encoding="utf-8", newline="")
            w = csv.writer(text)
            w.writerow(["prediction"] + (["label"] if y is not None else []))
            for i, p in enumerate(pred):
                w.writerow([p] + ([y[i]] if y is not None else []))
            text.flush()
            text.detach()

        atomic_write(args.out, write)
        print(f"{len(pred)} predictions written to {args.out}")
    else:
        for p in pred:
            print(p)
    what = f"{args.rule} rule" + (f", k={k}" if args.rule == "knn" else "")
    if y is not None:
        y = _as_label_dtype(y, pred, name)
        wrong = int(np.sum(pred != y))
        print(f"{meta['method']} model on {name} ({args.split}, {len(pred)} points, {what}): "
              f"error {100 * wrong / len(pred):.2f}% ({wrong} of {len(pred)} misclassified)")
    else:
        print(f"{meta['method']} model on {name} ({len(pred)} points, {what}): no labels, no error computed")
    return 0


# --------------------------------------------------------------------------- info


def _fmt(v):
    return f"{v:.10g}" if isinstance(v, float) else str(v)


def info(args: argparse.Namespace) -> int:
    """``metricopt info``: print a model file's metadata (``--json``: the raw JSON).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of the subcommand (:func:`build_parser`).

    Returns
    -------
    int
        The exit status (0).

    Raises
    ------
    metricopt.io.ModelFileError
        For a file that is not a valid model file (:func:`metricopt.io.read_model_file`).
    """
    import json

    from .io import read_model_file

    mf = read_model_file(args.model)
    m = mf.metadata
    if args.json:
        print(json.dumps(m, indent=2, sort_keys=True))
        return 0
    lines = [f"metricopt model file: {args.model}",
             f"  format        : {m['format']} version {m['format_version']}, written by metricopt "
             f"{m.get('metricopt_version')} on {m.get('created')}",
             f"  kind          : {m.get('kind')}" + (f" ({m['estimator']})" if m.get("estimator") else "")]
    p = m.get("problem")
    if p:
        hyper = ", ".join(f"{k}={_fmt(p[k])}" for k in ("k", "mu", "C", "diagonal") if k in p)
        lines.append(f"  problem       : {p['method']} ({p.get('reference')}), {hyper}")
        lines.append(f"  training data : {p['n']} points, {p['d']} features"
                     + (f", {p['n_triplets']} triplets" if "n_triplets" in p else ""))
    if m.get("params"):
        lines.append("  parameters    : " + ", ".join(f"{k}={v!r}" for k, v in sorted(m["params"].items())))
    s = m["solution"]
    st = s.get("stats") or {}
    lines.append(f"  solve         : status {s['status']}, objective {_fmt(s['objective'])}, backend {s['backend']}, "
                 f"solver {s['solver']}, {_fmt(st.get('time', float('nan')))} s, iterations {st.get('iterations')}")
    lines.append(f"  message       : {s.get('message')}")
    c = m.get("certificate")
    if c:
        lines.append(f"  certificate   : {c['verdict']} (tol {c['tol']:.1e}); upper {c['upper']:.12g}, "
                     f"lower {c['lower']:.12g}, gap {c['gap']:.3e} (relative {c['rel_gap']:.3e})")
    else:
        lines.append("  certificate   : none")
    pre = m.get("preprocessing")
    if pre:
        parts = [f"{pre['scale']} scaling"] if pre.get("scale") else []
        if "pre_pca_components" in m["arrays"]:
            parts.append(f"PCA to {m['arrays']['pre_pca_components']['shape'][0]} dimensions")
        lines.append(f"  preprocessing : {', '.join(parts) or 'none'} (inputs: {pre.get('n_features_in')} features)")
    inf = m.get("info") or {}
    if "data" in inf:
        lines.append(f"  data / split  : {inf['data']}, test size {inf.get('test_size')}, seed {inf.get('seed')}")
    if "knn_test_error_learned" in inf:
        lines.append(f"  kNN test error: {100 * inf['knn_test_error_euclidean']:.2f}% (Euclidean) -> "
                     f"{100 * inf['knn_test_error_learned']:.2f}% (learned), k={inf.get('knn_k')}")
    lines.append("  arrays        : " + ", ".join(f"{k} {tuple(v['shape'])} {v['dtype']}"
                                                 for k, v in sorted(m["arrays"].items())))
    lines.append(f"  sha256        : {m['sha256']} (verified)")
    print("\n".join(lines))
    return 0


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    """The ``metricopt`` argument parser: the subcommands ``demo``, ``fit``, ``predict`` and ``info``, each
    with its options and its command function as ``func``.

    Returns
    -------
    argparse.ArgumentParser
    """
    from ._version import __version__
    from .options import CLI_OPTIONS
    from .options import option as solve_option

    p = argparse.ArgumentParser(prog="metricopt", description="Mahalanobis metric learning with certificates.",
                                epilog="`metricopt COMMAND --help` lists the options of a command.")
    p.add_argument("--version", action="version", version=f"metricopt {__version__}",
                   help="print the version of metricopt and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    d = sub.add_parser("demo", help="learn a metric on a built-in data set, certify it, report kNN errors",
                       description="Learn a metric on a scikit-learn data set (70/30 stratified split, standardised "
                                   "with the training statistics), certify it with the duality-gap certificate and "
                                   "print the 3-NN test error before and after. A line is printed when each phase "
                                   "starts and ends (data, solve, certificate, kNN); every solve is bounded by "
                                   "--time-limit, so the demo always finishes.")
    d.add_argument("--dataset", choices=DATASETS, default="wine",
                   help="scikit-learn data set: wine (178 x 13, default), iris (150 x 4), breast_cancer (569 x 30) "
                        "or digits (1797 x 64)")
    d.add_argument("--method", choices=METHODS, default="lmnn",
                   help="lmnn (Weinberger & Saul 2009, default), mmc (Xing et al. 2002) or pola (Shalev-Shwartz et "
                        "al. 2004, batch form)")
    d.add_argument("--backend", choices=("auto",) + BACKENDS, default="auto",
                   help="auto (default): the exact conic program (cvxpy) when its constraint matrix has at most "
                        f"{DEMO_EXACT_ENTRIES:,} entries (every wine problem), else the first-order JAX solver "
                        "stopped at a certified gap; cvxpy or jax: that backend")
    d.add_argument("--solver", default=None,
                   help="solver of the backend: SCS or CLARABEL (cvxpy), fista or subgradient (jax); default: the "
                        "problem's own choice")
    d.add_argument("--time-limit", type=float, default=DEMO_TIME_LIMIT,
                   help=f"seconds for the solve and its certificate (default {DEMO_TIME_LIMIT:g}); a solve cut "
                        "short reports status time_limit and the point it reached")
    d.add_argument("--k", type=int, default=3, help="LMNN target neighbours (default 3)")
    d.add_argument("--mu", type=float, default=0.5, help="LMNN push weight (default 0.5)")
    d.add_argument("--seed", type=int, default=0, help="seed of the 70/30 split (default 0)")
    d.add_argument("--quiet", action="store_true", help="no progress lines, only the results")
    d.add_argument("--verbose", action="store_true",
                   help="show the solvers' own logs (SCS, Clarabel, CVXPY) instead of the progress lines")
    d.set_defaults(func=demo)

    data_help = ("a data set name (iris, wine, breast_cancer, digits, or a file set of the data folder: "
                 "balance-scale, letter-recognition, orl, olivetti, yale-b, usps, mnist-5k) or a CSV file "
                 "(numbers, last column = label, optional header row)")
    f = sub.add_parser("fit", help="learn a metric, certify it, save the model (and a plot)",
                       description="Split the data (stratified), fit scaling/PCA on the training part, learn the "
                                   "metric with live progress, certify it, print the kNN test error before and "
                                   "after, and save the model.")
    f.add_argument("--method", choices=FIT_METHODS, default="lmnn",
                   help="lmnn, mmc, pola (convex, certified), mlcc (convex, uncertified), nca (non-convex, JAX "
                        "loop, reported stationary), gerrymander (non-convex; sgd, or cccp with certified convex "
                        "steps), local (local distance functions, Ramanan & Baker 2011: --how/--where/--when) "
                        "or a closed-form baseline: pca, whitening, lda, rca")
    f.add_argument("--data", required=True, help=data_help)
    f.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    f.add_argument("--how", choices=("lmnn", "lda", "hybrid"), default=None,
                   help="local: how the metrics are learned (default lmnn)")
    f.add_argument("--where", choices=("global", "class", "exemplar", "test"), default=None,
                   help="local: where they live (default exemplar)")
    f.add_argument("--when", choices=("offline", "online", "interpolated", "line"), default=None,
                   help="local: when they are learned (default offline; test takes online or interpolated)")
    f.add_argument("--backend", choices=BACKENDS + ("numpy",), default=None,
                   help="cvxpy: exact conic program (default for lmnn, mmc, pola); jax: first-order solver stopped "
                        "at a certified gap, or at a stationary point for nca; numpy: nca's NumPy L-BFGS (nca's "
                        "default on a CPU, no compilation)")
    f.add_argument("--solver", default=None,
                   help="SCS or CLARABEL (cvxpy); fista or subgradient (jax); lbfgs, newton or cg (nca); sgd, cccp "
                        "or paper (gerrymander)")
    f.add_argument("--k", type=int, default=3, help="LMNN target neighbours and the k of the kNN rule (default 3)")
    f.add_argument("--mu", type=float, default=0.5, help="LMNN push weight (default 0.5)")
    f.add_argument("--C", type=float, default=1.0, help="POLA soft-margin weight, gerrymander's surrogate weight "
                   "(default 1.0)")
    f.add_argument("--diagonal", action="store_true", help="MMC: learn a diagonal metric")
    f.add_argument("--n-components", type=int, default=None,
                   help="NCA, PCA, LDA: output dimension (default: all features; LDA: classes - 1)")
    for name in CLI_OPTIONS:  # --tol, --solver-tol, --max-iter, --time-limit: the shared table's options
        entry = solve_option(name)
        f.add_argument(entry.flag, type=entry.kind, default=None, help=entry.meaning)
    f.add_argument("--test-size", type=float, default=0.3, help="test fraction of the stratified split (default 0.3)")
    f.add_argument("--seed", type=int, default=0, help="seed of the split (default 0)")
    f.add_argument("--pca", type=_pca_value, default=None,
                   help="PCA after scaling: number of dimensions, or a variance fraction in (0, 1)")
    f.add_argument("--scale", action=argparse.BooleanOptionalAction, default=True,
                   help="standardise the features with the training statistics (default: yes)")
    f.add_argument("--out", required=True, help="model file to write (.npz)")
    f.add_argument("--plot", default=None, help="figure to write (.png; .pdf and .svg work too)")
    f.add_argument("--quiet", action="store_true", help="no progress lines")
    f.set_defaults(func=fit)

    r = sub.add_parser("predict", help="classify data with a saved model")
    r.add_argument("--model", required=True, help="model file written by `metricopt fit`")
    r.add_argument("--data", required=True, help=data_help + "; a CSV may also omit the label column")
    r.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    r.add_argument("--split", choices=("all", "test", "train"), default="all",
                   help="test/train: the held-out/training part of the split made by `fit` (same data set only)")
    r.add_argument("--rule", choices=("knn", "energy"), default="knn", help="kNN rule, or LMNN's energy rule")
    r.add_argument("--out", default=None, help="CSV file for the predictions (default: print them)")
    r.set_defaults(func=predict)

    i = sub.add_parser("info", help="print a model file's metadata")
    i.add_argument("--model", required=True, help="model file written by `metricopt fit`")
    i.add_argument("--json", action="store_true", help="print the raw JSON metadata")
    i.set_defaults(func=info)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``metricopt`` command; returns the exit status.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success (or when the output pipe was closed), 1 when a solve returned no metric, 2 for an error of
        the user's making (a one-line message on stderr), 130 when interrupted.
    """
    from .errors import MetricoptError, SolverError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except SolverError as exc:
        print(f"metricopt: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except MetricoptError as exc:
        print(f"metricopt: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading: not an error
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")
        return 0
    except OSError as exc:
        where = f" {exc.filename!r}" if getattr(exc, "filename", None) else ""
        print(f"metricopt: error: cannot access{where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("metricopt: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
