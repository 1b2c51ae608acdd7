"""The certificate entry point :func:`certify` and the registry of certifiers (chosen by declarations)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .._validation import REAL_LIMIT, as_real_array, check_choice, check_problem, check_real
from ..errors import InputError, NotCertifiableError, NotConvexError, UnknownOptionError
from ..linalg import CERTIFY_BLAS_DIM, project_psd, psd_defect, small_blas, symmetrize
from ..protocols import GeometryKind, LatentProblem
from ..solution import Solution
from .certificate import Certificate
from .dual import DualSummary, dual_summary
from .generic import generic_triplet_bound
from .latent import latent_bound
from .triplets import triplet_bound
from .pairs import budget_bound, threshold_bound
from .verified import power_of_two_scaling

__all__ = ["certify", "certifiable", "register_certifier", "CERTIFIERS", "Certifier"]


@dataclass(frozen=True)
class Certifier:
    """A duality-gap bound for the problems it ``accepts`` (read from their declarations).

    ``bound(problem, M, variables, summary, feas_tol, tol)`` returns ``(upper, lower, details)``
    or a :class:`Certificate` (an infeasible candidate)."""

    name: str
    accepts: Callable[[Any, DualSummary], bool]
    bound: Callable[..., Any]
    reads: frozenset = frozenset()


#: the :class:`~metricopt.protocols.DualPiece` fields every built-in certifier reads
PIECE_FIELDS = frozenset({"linear", "strong_convexity", "constant", "loss", "weight"})

#: the registered certifiers, tried in order (:func:`register_certifier`)
CERTIFIERS: list[Certifier] = []


def register_certifier(name: str, accepts: Callable[[Any, DualSummary], bool], bound: Callable[..., Any],
                       reads: frozenset = PIECE_FIELDS) -> None:
    """Register a certifier (appended to :data:`CERTIFIERS`, tried in order). New methods add their bound this way.

    Parameters
    ----------
    name : str
        The certifier's name (shown in error messages).
    accepts : callable
        ``accepts(problem, summary) -> bool``: whether the bound applies, read from the problem's declarations and
        its :class:`~metricopt.certify.dual.DualSummary`.
    bound : callable
        ``bound(problem, M, variables, summary, feas_tol, tol)``, returning ``(upper, lower, details)`` or a
        :class:`Certificate` (an infeasible candidate; see :class:`Certifier`).
    reads : frozenset of str, default PIECE_FIELDS
        The names of the dual-piece fields its bound accounts for. A problem whose terms set any other field (a
        subclass of :class:`~metricopt.protocols.DualPiece` with a new field) is refused by it, never silently
        certified without that field.
    """
    CERTIFIERS.append(Certifier(name, accepts, bound, frozenset(reads)))


def _find_certifier(problem, summary, dual="auto"):
    """The first registered certifier that accepts the problem and reads every dual-piece field its terms set
    (``dual="generic"``: the generic certifier of :mod:`.generic` only)."""
    refused = []
    for c in CERTIFIERS:
        if dual == "generic" and c.name != GENERIC:
            continue
        if c.accepts(problem, summary):
            unread = sorted(summary.fields - c.reads)
            if not unread:
                return c
            refused.append(f"'{c.name}' accepts {problem.method} but does not read the field(s) {unread} of its terms' "
                           f"dual pieces (it reads {sorted(c.reads)})")
    if refused:
        generic = (f" The term(s) {summary.generic} declare no dual piece; the generic certificate (from their CVXPY "
                   "expressions) covers a PSD metric with at most one triplet loss.") if summary.generic else ""
        raise NotCertifiableError(
            "no certifier reads every part of this problem: " + "; ".join(refused) + ". Certifying without them could "
            "overstate the lower bound." + generic + " Register a certifier that reads them "
            "(metricopt.certify.register_certifier(..., reads=...)).")
    raise NotCertifiableError(
        f"no certificate is implemented for {problem.method} (geometry '{problem.geometry.describe()}', losses "
        f"{sorted(summary.losses) or 'none'}"
        + (f", terms without a dual piece {summary.generic}" if summary.generic else "")
        + "); register one with metricopt.certify.register_certifier."
    )


def certifiable(problem: Any) -> tuple[bool, str]:
    """Whether :func:`certify` can bound ``problem`` (a registered certifier reads every term).

    A term without a dual piece that declares ``generic_certificate = False`` (its CVXPY form needs exponential
    or power cones, e.g. MLCC's log-partition) is not certifiable; any other such term is taken as certifiable
    here, and :func:`certify` raises :class:`~metricopt.errors.NotCertifiableError` if its compiled program
    turns out to need such cones after all. Never raises for an uncertifiable problem: the reason is returned.

    Parameters
    ----------
    problem : Problem
        The problem to check.

    Returns
    -------
    ok : bool
        ``True`` when a certificate can be computed.
    reason : str
        ``""`` when ``ok``, else why not.
    """
    if not problem.is_convex:
        return False, "the problem is not convex"
    try:
        summary = dual_summary(problem)
        certifier = _find_certifier(problem, summary)
    except NotCertifiableError as exc:
        return False, str(exc)
    if certifier.name == GENERIC:
        refused = [t for t in summary.generic if t.generic_certificate is False]
        if refused:
            return False, (f"no dual piece for the term {refused[0]}, and it declares that the generic certificate "
                           "cannot bound it (generic_certificate = False)")
    return True, ""


#: negative eigenvalues above ``-PSD_ROUNDING * max(1, max|M_ij|)`` are rounding (a PSD projection computed in
#: float64 leaves such): ``M`` is then certified as it is, not re-projected (which would only trade one rounding
#: for another, and would make the certified ``M`` differ from the iterate a solver just searched)
PSD_ROUNDING = 1e-13
#: a candidate whose diagonal spans more than this factor is tested for PSD-ness at a unit diagonal
WIDE_DIAGONAL = 1e6


def certify(problem: Any, M: Any = None, tol: float = 1e-6, psd_tol: float = 1e-7, feas_tol: float = 1e-6,
            dual: str = "auto", *, L: Any = None, **variables: float) -> Certificate:
    """Certify a candidate ``M`` (or a :class:`~metricopt.Solution`) of a convex problem.

    The bound is chosen from the problem's declarations (its geometry and its terms' dual
    pieces; see :func:`dual_summary` and :data:`CERTIFIERS`), never from its class.

    Parameters
    ----------
    problem : Problem
        A convex problem (LMNN and its variants, MMC, POLA, or any problem a registered
        certifier accepts).
    M : (d, d) array, Solution or fitted estimator
        The candidate metric. A Solution also supplies its extra variables (POLA's ``b``); an estimator (any
        object with ``get_mahalanobis_matrix()``: metricopt's, scikit-learn's NCA through ``L=est.components_``)
        gives its metric.
    L : (r, d) array, optional
        A linear map instead of ``M`` (e.g. another tool's ``components_``, square or rectangular): certified as
        :math:`M = L^\top L`, the conversion stated in the certificate's details. Give ``M`` or ``L``, not both.
    tol : float
        Relative gap under which the verdict is ``Verdict.OPTIMAL`` ("optimal within tol").
    psd_tol : float
        ``M`` whose smallest eigenvalue is below ``-psd_tol * max(1, max|M_ij|)`` is
        declared infeasible; milder negative eigenvalues are clipped (the upper bound
        is then the objective at the projected, feasible ``M``), except rounding-level
        ones (above ``-PSD_ROUNDING`` times that scale), which are left as they are.
    feas_tol : float
        Relative tolerance on the problem's own constraints (MMC's budget, POLA's
        margins); candidates within it are rescaled onto the feasible set.
    dual : {"auto", "generic"}
        ``"auto"``: the first registered certifier that reads every term (closed-form dual pieces where the
        terms declare them, the generic conic bound of :mod:`metricopt.certify.generic` for terms that declare
        none). ``"generic"``: the generic bound for every term, even those with a closed form (to compare the
        two; slower).
    **variables
        Extra variables (POLA: ``b``; chosen optimally for ``M`` when omitted).

    Returns
    -------
    Certificate
        The bounds ``lower <= optimum <= upper`` and the verdict (``Verdict.INFEASIBLE`` for a candidate that is
        not PSD beyond ``psd_tol``, or not diagonal for a diagonal geometry).

    Raises
    ------
    NotConvexError
        For a non-convex problem (a factor geometry or a non-convex term).
    NotCertifiableError
        When a term has no dual piece, or no certifier accepts the problem.
    UnknownOptionError
        For a keyword that is not one of the problem's extra variables, or an unknown ``dual``.
    InputError
        For something other than a problem, or an invalid ``M``, ``L``, tolerance or extra variable (wrong
        shape, NaN or infinite entries, both ``M`` and ``L``, a solution without a metric).
    """
    check_problem(problem, "certify")
    if not problem.is_convex:
        raise NotConvexError(
            f"{problem.method} with terms {problem.terms} (geometry '{problem.geometry.describe()}') is not convex: "
            "a duality gap cannot certify global optimality; report such solutions as stationary."
        )
    tol = check_real(tol, "tol", low=0.0)
    psd_tol = check_real(psd_tol, "psd_tol", low=0.0)
    feas_tol = check_real(feas_tol, "feas_tol", low=0.0)
    dual = check_choice(dual, "dual", ("auto", "generic"))
    summary = dual_summary(problem)
    certifier = _find_certifier(problem, summary, dual)
    extra = tuple(problem.extra_variables)
    unknown = sorted(set(variables) - set(extra))
    if unknown:
        raise UnknownOptionError(
            f"unknown keyword(s) for certify: {unknown}; accepted: tol, psd_tol, feas_tol, dual"
            + "".join(f", {v}" for v in extra) + f" ({problem.method}'s variables besides M: {', '.join(extra) or 'none'})."
        )
    for name, value in list(variables.items()):  # validated, passed on as floats
        if value is None:
            continue
        what = "a finite real number (or None: chosen optimally for M)"
        try:
            v = None if isinstance(value, (str, bytes)) else as_real_array(value, name, what)
        except InputError:
            if np.iscomplexobj(value):  # refused with as_real_array's message (never cast to its real part)
                raise
            v = None
        if v is None or v.size != 1 or not np.all(np.isfinite(v)):
            raise InputError(f"{name} must be {what}; got {value!r}.")
        if abs(float(v.reshape(()))) > REAL_LIMIT:
            raise InputError(f"{name} must be between {-REAL_LIMIT:g} and {REAL_LIMIT:g}; got {float(v.reshape(())):g} "
                             f"(its square overflows float64 in the objective). Pass {name}=None to have it chosen "
                             "optimally for M.")
        variables[name] = float(v.reshape(()))
    d = problem.d
    if L is not None:
        if M is not None:
            raise InputError("give the candidate as M (a d x d metric) or as L (a linear map, M = L^T L), not both.")
        L = as_real_array(L, "L", f"a finite (r, {d}) array (a linear map x -> L x)")
        if L.ndim != 2 or L.shape[1] != d or not np.all(np.isfinite(L)):
            raise InputError(f"L must be a finite (r, {d}) array (a linear map x -> L x of the {d} features, e.g. "
                             f"an estimator's components_); got shape {L.shape}"
                             + ("" if np.all(np.isfinite(L)) else " with NaN or infinite entries") + ".")
        converted = f"M = L^T L from L of shape {L.shape}"
        M = L.T @ L
    elif M is not None and not isinstance(M, Solution) and hasattr(M, "get_mahalanobis_matrix"):
        converted = f"M = {type(M).__name__}.get_mahalanobis_matrix()"
        M = M.get_mahalanobis_matrix()
    else:
        converted = None
    if isinstance(M, Solution):
        if M.M is None:
            raise InputError(f"the solution has no metric to certify (status '{M.status}': {M.message}).")
        variables = {**M.variables, **variables}
        M = M.M
    shape = f"a finite ({problem.d}, {problem.d}) array"
    if M is None:
        raise InputError(f"M must be {shape} or a metricopt.Solution (or pass L=, a linear map: M = L^T L); got None.")
    M = as_real_array(M, "M", f"{shape} of numbers or a metricopt.Solution")
    if M.shape != (problem.d, problem.d):
        hint = (f" A ({M.shape[0]}, {d}) array looks like a linear map L (e.g. an estimator's components_): pass "
                f"L=... to certify M = L^T L." if M.ndim == 2 and M.shape[1] == d else "")
        raise InputError(f"M must be {shape}; got shape {M.shape}.{hint}")
    if not np.all(np.isfinite(M)):
        n_bad = int(M.size - np.count_nonzero(np.isfinite(M)))
        raise InputError(f"M must be {shape}; got {n_bad} NaN or infinite entries. Pass the metric of a finished "
                         "solve (e.g. solution.M) or project a finite candidate with metricopt.linalg.project_psd.")
    M = symmetrize(M)
    details: dict[str, Any] = {} if converted is None else {"candidate": converted}
    # entries of very different sizes (a metric that stretches one feature by 1e16): test and clip in the exact
    # power-of-two congruence with a unit diagonal, where rounding in the eigensolver does not swamp the small
    # entries; PSD-ness is the same in either basis
    dg = np.clip(np.diag(M), 0.0, None)  # a negative diagonal entry keeps its scale (and its verdict)
    c = power_of_two_scaling(dg) if dg.max() > WIDE_DIAGONAL * max(dg[dg > 0].min(initial=np.inf), 1e-300) \
        else np.ones(problem.d)
    Ms = M * np.outer(c, c)
    lo, failed = psd_defect(Ms, psd_tol)
    scale = max(1.0, float(np.abs(M).max()))
    if failed:
        where = "" if np.all(c == 1) else " (after scaling M to a unit diagonal by powers of two)"
        hint = ("" if converted else "; if it is a linear map L (e.g. an estimator's components_), pass L=... to "
                "certify M = L^T L, or project it with metricopt.linalg.project_psd")
        return Certificate.infeasible(tol, problem.method, f"M is not PSD: smallest eigenvalue {lo:.3g}{where}{hint}")
    if problem.geometry.diagonal:
        off = float(np.abs(M - np.diag(np.diag(M))).max())
        if off > psd_tol * scale:
            return Certificate.infeasible(
                tol, problem.method, f"M must be diagonal for this problem; largest off-diagonal entry {off:.3g}")
        M = np.diag(np.clip(np.diag(M), 0.0, None))
    elif lo < -PSD_ROUNDING * max(1.0, float(np.abs(Ms).max())):
        Mp = project_psd(Ms) / np.outer(c, c)
        details["psd projection change"] = float(np.linalg.norm(Mp - M))
        M = Mp
    with small_blas(problem.d, up_to=CERTIFY_BLAS_DIM):
        res = certifier.bound(problem, M, variables, summary, feas_tol, tol)
    if isinstance(res, Certificate):
        return res
    upper, lower, info = res
    details.update(info)
    return Certificate.from_bounds(upper, lower, tol, problem.method, details)


# ---------------------------------------------------------------- the built-in certifiers
def _accepts_triplets(problem, summary):
    return (problem.geometry.kind is GeometryKind.PSD and not problem.geometry.diagonal
            and set(summary.losses) <= {"triplet_hinge", "triplet_loss"}
            and len(summary.losses.get("triplet_hinge", [])) + len(summary.losses.get("triplet_loss", [])) <= 1)


def _accepts_budget(problem, summary):
    return (problem.geometry.kind is GeometryKind.BUDGET and set(summary.losses) == {"sqrt_distances"}
            and len(summary.losses["sqrt_distances"]) == 1 and summary.lam == 0.0)


def _accepts_threshold(problem, summary):
    return (problem.geometry.kind is GeometryKind.THRESHOLD and summary.lam > 0
            and set(summary.losses) <= {"pair_hinge", "threshold_square"})



def _accepts_latent(problem, summary):
    return (problem.geometry.kind is GeometryKind.PSD and not problem.geometry.diagonal
            and set(summary.losses) == {"latent_hinge"} and len(summary.losses["latent_hinge"]) == 1
            and (summary.lam > 0 or isinstance(problem, LatentProblem)))


register_certifier("triplet hinge (LMNN family)", _accepts_triplets, triplet_bound)
register_certifier("similar-pair budget (MMC)", _accepts_budget, budget_bound)
register_certifier("threshold and pair margins (POLA)", _accepts_threshold, threshold_bound)
register_certifier("latent-set hinge (gerrymandering's CCCP step)", _accepts_latent, latent_bound)


def _accepts_generic(problem, summary):
    g = problem.geometry
    losses = set(summary.losses)
    return (g.kind is GeometryKind.PSD and not g.diagonal and g.blocks is None
            and losses <= {"triplet_hinge", "triplet_loss"}
            and sum(len(v) for v in summary.losses.values()) <= 1
            and all(hasattr(t, "cvxpy") for t in problem.terms))


#: the name of the generic certifier (terms without a dual piece, or ``certify(..., dual="generic")``)
GENERIC = "generic conic bound (any convex term's CVXPY expression)"
register_certifier(GENERIC, _accepts_generic, generic_triplet_bound, reads=PIECE_FIELDS | {"generic"})
