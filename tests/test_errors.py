"""Bad input: every error metricopt raises on purpose, with its exact message.

Each case is ``(callable, expected exception type, exact message)``; every input error
must also be a ``ValueError`` (scikit-learn convention) and a ``MetricoptError``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp

import metricopt
from metricopt import (
    InputError,
    LMNNProblem,
    MetricoptError,
    MMCProblem,
    NotConvexError,
    POLAProblem,
    Status,
    UnknownOptionError,
)
from metricopt.terms import Frobenius, SqrtDistances, Trace

# a small valid data set: 3 classes of 4 points in 2-D
X0 = np.array(
    [[0.0, 0.0], [0.5, 0.1], [0.1, 0.6], [0.4, 0.4],
     [3.0, 0.0], [3.5, 0.2], [3.1, 0.7], [3.3, 0.3],
     [0.0, 3.0], [0.6, 3.1], [0.2, 3.5], [0.3, 3.3]]
)
Y0 = np.repeat([0, 1, 2], 4)
N0 = X0.shape[0]

DIM1 = (
    "X must be a 2-D array of shape (n_samples, n_features); got an array with 1 dimension(s) and shape (12,). "
    "Reshape it, e.g. X.reshape(-1, 1) for one feature."
)
DIM3 = (
    "X must be a 2-D array of shape (n_samples, n_features); got an array with 3 dimension(s) and shape (12, 2, 1). "
    "Reshape it, e.g. X.reshape(-1, 1) for one feature."
)
COMPLEX = "Complex data not supported: X has complex entries; pass real-valued features."
SPARSE = "X is a sparse matrix; metricopt needs dense input: pass X.toarray()."
EMPTY = "X is empty (shape (0, 2)); it needs at least one sample and one feature."


def _with(value, where=(3, 1)):
    X = X0.copy()
    X[where] = value
    return X


def _nan_msg(n_bad):
    return (
        f"X contains {n_bad} NaN or infinite value(s); remove or impute them "
        "(e.g. sklearn.impute.SimpleImputer) before learning a metric."
    )


X_NAN2 = _with(np.nan)
X_NAN2[7, 0] = np.inf

# each problem constructor, applied to (X, y) with its other arguments valid
MAKERS = {
    "LMNN": lambda X, y: LMNNProblem(X, y, k=2),
    "MMC": lambda X, y: MMCProblem(X, y),
    "POLA": lambda X, y: POLAProblem(X, y),
}

ONE_CLASS_Y = np.zeros(N0, dtype=int)
# what the messages show for a label (the repr of numpy's unique value)
_L0 = repr(np.unique(ONE_CLASS_Y)[0].item())
_Y_SMALL = np.array([0] * 10 + [1] * 2)  # class 1 has 2 < k + 1 = 3 points
_L1 = repr(np.unique(_Y_SMALL)[1].item())

M_NOT_PSD = np.array([[1.0, 0.0], [0.0, -1.0]])
NOT_PSD = (
    "M is not positive semidefinite (smallest eigenvalue -1); project it first with "
    "metricopt.linalg.project_psd."
)


def _lmnn():
    return LMNNProblem(X0, Y0, k=2)


def _infeasible_pola_solution():
    sol = POLAProblem(np.array([[0.0], [1.0], [2.0]]), [0, 1, 0]).solve()
    assert sol.status is Status.INFEASIBLE
    return sol


CASES = []


def case(id_, fn, msg, exc=InputError):
    CASES.append(pytest.param(fn, exc, msg, id=id_))


# --- X -----------------------------------------------------------------------
for name, make in MAKERS.items():
    case(f"{name}-nan", lambda make=make: make(_with(np.nan), Y0), _nan_msg(1))
    case(f"{name}-inf", lambda make=make: make(_with(-np.inf), Y0), _nan_msg(1))
    case(f"{name}-nan-and-inf", lambda make=make: make(X_NAN2, Y0), _nan_msg(2))
    case(f"{name}-X-1d", lambda make=make: make(X0[:, 0], Y0), DIM1)
    case(f"{name}-X-3d", lambda make=make: make(X0[:, :, None], Y0), DIM3)
    case(f"{name}-complex", lambda make=make: make(X0 + 1j, Y0), COMPLEX)
    case(f"{name}-complex-zero-imag", lambda make=make: make(X0.astype(complex), Y0), COMPLEX)
    case(f"{name}-sparse", lambda make=make: make(sp.csr_matrix(X0), Y0), SPARSE)
    case(f"{name}-empty", lambda make=make: make(np.zeros((0, 2)), []), EMPTY)
    case(
        f"{name}-len-y",
        lambda make=make: make(X0, Y0[:-1]),
        f"y has {N0 - 1} labels but X has {N0} samples; pass one label per row of X.",
    )
    case(f"{name}-y-2d", lambda make=make: make(X0, np.ones((N0, 2))), f"y must be a 1-D array of labels; got shape ({N0}, 2).")
    case(
        f"{name}-y-nan",
        lambda make=make: make(X0, np.where(Y0 == 2, np.nan, Y0.astype(float))),
        "y contains NaN or infinite labels; every sample needs a valid class label.",
    )

case(
    "X-not-numeric",
    lambda: LMNNProblem([["a", "b"], ["c", "d"]], [0, 1]),
    "X must be a numeric array; could not convert it to float64 (",
)

# --- classes -------------------------------------------------------------------
case(
    "LMNN-one-class",
    lambda: LMNNProblem(X0, ONE_CLASS_Y, k=2),
    f"LMNN needs at least two classes; y has only one class ({_L0}). A metric learned from one class cannot "
    "separate anything.",
)
case(
    "MMC-one-class",
    lambda: MMCProblem(X0, ONE_CLASS_Y),
    f"MMC needs at least two classes to form dissimilar pairs; y has a single class ({_L0}).",
)
case(
    "POLA-one-class",
    lambda: POLAProblem(X0, ONE_CLASS_Y),
    f"POLA needs at least two classes to form dissimilar pairs; y has a single class ({_L0}).",
)
case(
    "LMNN-small-class",
    lambda: LMNNProblem(X0, _Y_SMALL, k=2),
    "LMNN with k=2 needs at least k+1=3 points in every class (each point needs k target neighbours of its own "
    f"class); these classes have fewer: {_L1}: 2. Lower k or drop those classes.",
)
case(
    "MMC-every-pair-too-many",
    lambda: MMCProblem(np.zeros((10_001, 2)), np.arange(10_001) % 2),
    "every pair of the 10,001 points is 50,005,000 pairs (0.8 GB of indices alone, more than the 50,000,000-pair "
    "limit): pass a sample of pairs instead (MMC: similar= and dissimilar=; POLA: pairs= and pair_labels=), or fewer "
    "points (every pair suits up to about 10,000).",
)
case(
    "LMNN-continuous-target",
    lambda: LMNNProblem(X0, np.linspace(0.25, 3.0, X0.shape[0])),
    "Unknown label type: 'continuous'. LMNN needs class labels (integers or strings); y holds non-integer values "
    "such as 0.25. For a regression target, bin it into classes first.",
)
case(
    "gerrymander-one-sample",
    lambda: metricopt.GerrymanderingKNN(k=3).fit(X0[:1], Y0[:1]),
    "k=3 needs at least k+1=4 points; X has 1 sample (n_samples=1). Give more points or lower k.",
)

# --- LMNN hyperparameters --------------------------------------------------------
case("mu-above-1", lambda: LMNNProblem(X0, Y0, mu=1.5), "mu must be <= 1.0 and >= 0.0; got 1.5.")
case("mu-below-0", lambda: LMNNProblem(X0, Y0, mu=-0.1), "mu must be >= 0.0 and <= 1.0; got -0.1.")
case("mu-nan", lambda: LMNNProblem(X0, Y0, mu=float("nan")), "mu must be a finite real number; got nan.")
case("mu-string", lambda: LMNNProblem(X0, Y0, mu="0.5"), "mu must be a finite real number; got '0.5'.")
case("k-zero", lambda: LMNNProblem(X0, Y0, k=0), "k must be >= 1; got 0.")
case("k-negative", lambda: LMNNProblem(X0, Y0, k=-2), "k must be >= 1; got -2.")
case("k-float", lambda: LMNNProblem(X0, Y0, k=2.5), "k must be an integer; got 2.5.")
case("k-float-integral", lambda: LMNNProblem(X0, Y0, k=2.0), "k must be an integer; got 2.0.")
case("k-bool", lambda: LMNNProblem(X0, Y0, k=True), "k must be an integer; got True.")
case(
    "regularizer-not-a-term",
    lambda: LMNNProblem(X0, Y0, regularizer=0.1),
    "regularizer must be a metricopt term (e.g. metricopt.terms.Frobenius(1e-3) or metricopt.terms.Trace(1e-3)) "
    "or a list of them; got 0.1.",
)
case("frobenius-negative-lam", lambda: Frobenius(-1.0), "lam must be >= 0.0; got -1.0.")
case("trace-negative-lam", lambda: Trace(-0.5), "lam must be >= 0.0; got -0.5.")

# --- target neighbours -------------------------------------------------------------
_T_OK = LMNNProblem(X0, Y0, k=2).target_neighbors
_T_WRONG_CLASS = _T_OK.copy()
_T_WRONG_CLASS[0, 0] = 4  # point 4 is in class 1, point 0 in class 0
_T_SELF = _T_OK.copy()
_T_SELF[5, 1] = 5
_T_RANGE = _T_OK.copy()
_T_RANGE[2, 0] = N0
case(
    "tn-wrong-rows",
    lambda: LMNNProblem(X0, Y0, target_neighbors=_T_OK[:-1]),
    f"target_neighbors must have shape (n, k) = ({N0}, k); got ({N0 - 1}, 2).",
)
case(
    "tn-1d",
    lambda: LMNNProblem(X0, Y0, target_neighbors=_T_OK[:, 0]),
    f"target_neighbors must have shape (n, k) = ({N0}, k); got ({N0},).",
)
case(
    "tn-wrong-class",
    lambda: LMNNProblem(X0, Y0, target_neighbors=_T_WRONG_CLASS),
    "every target neighbour must have the same label as its anchor point.",
)
case("tn-self", lambda: LMNNProblem(X0, Y0, target_neighbors=_T_SELF), "a point cannot be its own target neighbour.")
case(
    "tn-out-of-range",
    lambda: LMNNProblem(X0, Y0, target_neighbors=_T_RANGE),
    f"target_neighbors must hold integer indices in [0, {N0 - 1}].",
)
case(
    "tn-float",
    lambda: LMNNProblem(X0, Y0, target_neighbors=_T_OK.astype(float)),
    f"target_neighbors must hold integer indices in [0, {N0 - 1}].",
)

# --- pairs (MMC, POLA) ---------------------------------------------------------------
_SIM = [[0, 1], [4, 5]]
_DIS = [[0, 4], [1, 8]]
case(
    "MMC-similar-out-of-range",
    lambda: MMCProblem(X0, similar=[[0, 1], [2, N0]], dissimilar=_DIS),
    f"similar row 1 is [2, {N0}], but indices must lie in [0, {N0 - 1}] (X has {N0} samples).",
)
case(
    "MMC-dissimilar-negative",
    lambda: MMCProblem(X0, similar=_SIM, dissimilar=[[-1, 3]]),
    f"dissimilar row 0 is [-1, 3], but indices must lie in [0, {N0 - 1}] (X has {N0} samples).",
)
case(
    "MMC-self-pair",
    lambda: MMCProblem(X0, similar=_SIM, dissimilar=[[0, 4], [7, 7]]),
    "dissimilar row 1 pairs sample 7 with itself; remove such pairs.",
)
case(
    "MMC-similar-self-pair",
    lambda: MMCProblem(X0, similar=[[2, 2]], dissimilar=_DIS),
    "similar row 0 pairs sample 2 with itself; remove such pairs.",
)
case(
    "MMC-pairs-shape",
    lambda: MMCProblem(X0, similar=[0, 1, 2], dissimilar=_DIS),
    "similar must be an array of shape (m, 2) of sample indices; got shape (3,).",
)
case(
    "MMC-pairs-fractional",
    lambda: MMCProblem(X0, similar=[[0.5, 1.0]], dissimilar=_DIS),
    "similar must hold integer sample indices; got dtype float64.",
)
case(
    "MMC-no-pairs",
    lambda: MMCProblem(X0, similar=_SIM),
    "MMC needs pairs: pass labels y, or both similar=... and dissimilar=... index pairs.",
)
case(
    "MMC-empty-pairs",
    lambda: MMCProblem(X0, similar=np.zeros((0, 2), int), dissimilar=_DIS),
    "MMC needs at least one similar and one dissimilar pair; got 0 similar and 2 dissimilar.",
)
_PAIRS = [[0, 1], [0, 4], [5, 9]]
case(
    "POLA-pairs-out-of-range",
    lambda: POLAProblem(X0, pairs=[[0, 1], [3, 40]], pair_labels=[1, -1]),
    f"pairs row 1 is [3, 40], but indices must lie in [0, {N0 - 1}] (X has {N0} samples).",
)
case(
    "POLA-self-pair",
    lambda: POLAProblem(X0, pairs=[[0, 1], [6, 6]], pair_labels=[1, -1]),
    "pairs row 1 pairs sample 6 with itself; remove such pairs.",
)
case(
    "POLA-labels-zero",
    lambda: POLAProblem(X0, pairs=_PAIRS, pair_labels=[1, 0, -1]),
    "pair_labels must be +1 (similar) or -1 (dissimilar).",
)
case(
    "POLA-labels-01",
    lambda: POLAProblem(X0, pairs=_PAIRS, pair_labels=[1, 2, 1]),
    "pair_labels must be +1 (similar) or -1 (dissimilar).",
)
case(
    "POLA-labels-length",
    lambda: POLAProblem(X0, pairs=_PAIRS, pair_labels=[1, -1]),
    "pair_labels has 2 entries but there are 3 pairs.",
)
case(
    "POLA-pairs-without-labels",
    lambda: POLAProblem(X0, pairs=_PAIRS),
    "pairs were given without pair_labels; pass pair_labels with +1 (similar) or -1 (dissimilar).",
)
case(
    "POLA-no-pairs-no-y",
    lambda: POLAProblem(X0),
    "POLA needs labelled pairs: pass labels y, or pairs=... with pair_labels=... (+1/-1).",
)
case("POLA-C-zero", lambda: POLAProblem(X0, Y0, C=0.0), "C must be > 0.0; got 0.0.")
case("POLA-C-negative", lambda: POLAProblem(X0, Y0, C=-1), "C must be > 0.0; got -1.0.")

# --- metrics given to objective / point ------------------------------------------------
case("objective-not-psd-LMNN", lambda: _lmnn().objective(M_NOT_PSD), NOT_PSD)
case("objective-not-psd-MMC", lambda: MMCProblem(X0, Y0).objective(M_NOT_PSD), NOT_PSD)
case("objective-not-psd-POLA", lambda: POLAProblem(X0, Y0).objective(M_NOT_PSD, b=2.0), NOT_PSD)
case(
    "objective-wrong-shape",
    lambda: _lmnn().objective(np.eye(3)),
    "M must have shape (2, 2) for data with 2 features; got (3, 3).",
)
case("objective-nan", lambda: _lmnn().objective(np.array([[1.0, np.nan], [np.nan, 1.0]])), "M contains NaN or infinite entries.")
case(
    "objective-diagonal-MMC",
    lambda: MMCProblem(X0, Y0, diagonal=True).objective(np.array([[1.0, 0.5], [0.5, 1.0]])),
    "M must be diagonal for the diagonal variant of MMC.",
)
case(
    "objective-unknown-variable",
    lambda: _lmnn().objective(np.eye(2), b=1.0),
    "LMNN has no variable(s) ['b']; its variables are M.",
)
case(
    "objective-unknown-variable-POLA",
    lambda: POLAProblem(X0, Y0).objective(np.eye(2), c=1.0),
    "POLA has no variable(s) ['c']; its variables are M, b.",
)
case(
    "certify-wrong-shape",
    lambda: metricopt.certify(_lmnn(), np.eye(3)),
    "M must be a finite (2, 2) array; got shape (3, 3).",
)
case(
    "certify-solution-without-M",
    lambda: metricopt.certify(POLAProblem(np.array([[0.0], [1.0], [2.0]]), [0, 1, 0]), _infeasible_pola_solution()),
    "the solution has no metric to certify (status 'infeasible': ",
)

# --- solve options ------------------------------------------------------------------------
case("solve-tol-zero", lambda: _lmnn().solve(tol=0.0), "tol must be > 0.0; got 0.0.")
case("solve-max-iter-zero", lambda: _lmnn().solve(max_iter=0), "max_iter must be >= 1; got 0.")
case("solve-max-rounds-float", lambda: _lmnn().solve(max_rounds=1.5), "max_rounds must be an integer; got 1.5.")
case(
    "solve-unknown-option",
    lambda: _lmnn().solve(maxiter=5),
    "unknown option(s) for backend='cvxpy': ['maxiter']; accepted: solver, tol, solver_tol, max_iter, max_rounds, "
    "working_set, min_add, certify, init, verbose, time_limit.",
    UnknownOptionError,
)
case(
    "solve-unknown-solver",
    lambda: _lmnn().solve(solver="ECOS"),
    "unknown solver 'ECOS'; choose one of: 'SCS', 'CLARABEL'.",
    UnknownOptionError,
)
case(
    "solve-unknown-backend",
    lambda: _lmnn().solve(backend="no_such_backend"),
    "unknown backend 'no_such_backend'; choose one of: ",
    UnknownOptionError,
)


@pytest.mark.parametrize("fn, exc, msg", CASES)
def test_bad_input_message(fn, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)) as info:
        fn()
    err = info.value
    assert type(err) is exc
    assert isinstance(err, ValueError)
    assert isinstance(err, MetricoptError)
    assert isinstance(err, InputError)
    # the message starts with the expected text (the match above could be anywhere)
    assert str(err).startswith(msg)


def test_error_hierarchy():
    assert issubclass(metricopt.InputError, ValueError)
    assert issubclass(metricopt.UnknownOptionError, metricopt.InputError)
    assert issubclass(metricopt.ProblemTooLargeError, ValueError)
    assert issubclass(metricopt.NotConvexError, MetricoptError)
    assert issubclass(metricopt.SolverError, RuntimeError)
    for e in (metricopt.InputError, metricopt.UnknownOptionError, metricopt.ProblemTooLargeError,
              metricopt.NotConvexError, metricopt.SolverError):
        assert issubclass(e, MetricoptError)


@pytest.mark.parametrize(
    "problem",
    [_lmnn(), MMCProblem(X0, Y0), POLAProblem(X0, Y0), POLAProblem(X0, Y0, C=1.0)],
    ids=["LMNN", "MMC", "POLA-hard", "POLA-soft"],
)
def test_certify_non_psd_returns_infeasible_verdict(problem):
    # certify does not raise on a non-PSD candidate: it returns an "infeasible" certificate
    cert = metricopt.certify(problem, M_NOT_PSD)
    assert cert.verdict == "infeasible"
    assert not cert.is_optimal
    assert cert.upper == float("inf") and cert.lower == -float("inf")
    assert cert.rel_gap == float("inf")
    assert cert.details["reason"] == ("M is not PSD: smallest eigenvalue -1; if it is a linear map L (e.g. an "
                                      "estimator's components_), pass L=... to certify M = L^T L, or project it with "
                                      "metricopt.linalg.project_psd")
    # the same through the problem's shorthand
    assert problem.certify(M_NOT_PSD).verdict == "infeasible"


def test_certify_mildly_negative_eigenvalue_is_projected_not_rejected():
    # eigenvalue -1e-9 is within psd_tol = 1e-7: projected, not declared infeasible
    p = _lmnn()
    cert = metricopt.certify(p, np.diag([1.0, -1e-9]))
    assert cert.verdict != "infeasible"
    assert "psd projection change" in cert.details
    assert cert.upper == pytest.approx(p.objective(np.diag([1.0, 0.0])), rel=1e-12)


def test_certify_non_convex_problem_raises():
    p = MMCProblem(X0, Y0)
    p.terms = [SqrtDistances(p.dissimilar, weight=+1.0)]  # maximising-as-minimising: concave
    assert p.is_convex is False
    with pytest.raises(NotConvexError, match=re.escape("MMC with terms")) as info:
        metricopt.certify(p, np.eye(2))
    assert "is not convex: a duality gap cannot certify global optimality" in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, MetricoptError)
