"""The solve options shared by both backends, the estimators and the command line: one table, every default
stated once.

=============  ===================================================================================================
``tol``        The certified relative duality gap at which a solution is ``optimal``, on both backends: the exact
               backend certifies its result at it (:func:`metricopt.certify`), the JAX backend stops once a
               certificate reaches it; ``solution.certificate.tol`` is this value. For a problem that is not
               convex (a factor geometry ``M = L^T L``: LMNN-R, NCA) no certificate exists and ``tol`` is the
               relative stationarity threshold instead, reported as ``stats["stationarity"]`` with status
               ``stationary``. Default 1e-6.
``solver_tol`` The exact backend's conic solver accuracy (SCS ``eps_abs = eps_rel``; Clarabel's gap and
               feasibility tolerances). Default 1e-8, whatever ``tol`` is (a ``tol`` below about 1e-8 may need a
               smaller ``solver_tol`` for its certificate to close). The JAX backend has no inner conic solver and
               refuses it.
``max_iter``   The iteration limit: the exact backend's conic solver's (SCS 100,000, a first-order method;
               Clarabel 500, an interior-point method, normally 20-60), the JAX loop's (20,000).
``time_limit`` Wall-clock seconds for the whole call, certificate included (:mod:`metricopt._deadline`); default
               none.
``verbose``    Print progress (and the solver's own log).
``solver``     The backend's solver: SCS or CLARABEL (exact; default the problem's), fista, subgradient, online or
               newton (JAX; default fista).
=============  ===================================================================================================

:class:`metricopt.backends.cvxpy_backend.Options`, :class:`metricopt.backends.jax.backend.Options`, the
estimators' ``_parameter_constraints`` and ``metricopt fit``'s options are all read from :data:`SOLVE_OPTIONS`
(``tests/test_options.py`` checks it). Nothing is clamped: a value outside an option's range is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import UnknownOptionError

__all__ = ["SOLVE_OPTIONS", "SolveOption", "ESTIMATOR_OPTIONS", "CLI_OPTIONS", "default", "option",
           "refuse_unused"]

#: each conic solver's iteration limit when ``max_iter`` is not given (the exact backend)
CVXPY_MAX_ITER = {"SCS": 100_000, "CLARABEL": 500}


@dataclass(frozen=True)
class SolveOption:
    """One shared solve option.

    Attributes
    ----------
    name : str
        Its keyword (backends, estimators); the command line's flag is ``--`` and the name with ``-`` for ``_``.
    kind : type
        ``float``, ``int``, ``bool`` or ``str``.
    meaning : str
        What it means, the same on every path (the command line's help text).
    defaults : dict
        Per backend that uses it, its default (``None``: none, or the backend's per-solver default stated in
        ``meaning``). A backend not named here refuses the option.
    low : float or None
        Numbers: the open lower bound of the accepted values.
    """

    name: str
    kind: type
    meaning: str
    defaults: dict[str, Any] = field(default_factory=dict)
    low: float | None = None

    @property
    def flag(self) -> str:
        """The command line's flag: ``--`` and the name with ``-`` for ``_`` (``--solver-tol``)."""
        return "--" + self.name.replace("_", "-")


SOLVE_OPTIONS: tuple[SolveOption, ...] = (
    SolveOption("tol", float,
                "certified relative duality gap at which a solution is optimal, on both backends (the JAX backend "
                "stops there); for a non-convex problem (NCA, LMNN-R) the relative stationarity threshold, "
                "reported as stationarity (default 1e-6)",
                {"cvxpy": 1e-6, "jax": 1e-6}, low=0.0),
    SolveOption("solver_tol", float,
                "exact backend only: accuracy of the conic solver (SCS eps_abs = eps_rel, Clarabel gap and "
                "feasibility tolerances; default 1e-8)",
                {"cvxpy": 1e-8}, low=0.0),
    SolveOption("max_iter", int,
                "iteration limit (default: SCS 100000, Clarabel 500 on the exact backend; 20000 on jax)",
                {"cvxpy": None, "jax": 20_000}, low=0.0),
    SolveOption("time_limit", float,
                "seconds for the whole solve, certificate included: it returns within max(1.1 x, x + 5 s) with "
                "status time_limit and the best certified point if cut short (default none)",
                {"cvxpy": None, "jax": None}, low=0.0),
    SolveOption("verbose", bool, "print progress and the solver's own log", {"cvxpy": False, "jax": False}),
    SolveOption("solver", str,
                "SCS or CLARABEL (exact backend; default the problem's); fista, subgradient, online or newton "
                "(jax; default fista)",
                {"cvxpy": None, "jax": None}),
)

_BY_NAME = {o.name: o for o in SOLVE_OPTIONS}

#: the options every solving estimator takes as parameters, with the same names and meanings (``None``: default)
ESTIMATOR_OPTIONS = ("solver", "tol", "solver_tol", "max_iter", "time_limit", "verbose")
#: the options ``metricopt fit`` takes from the table (``--solver`` and ``--quiet`` have their own help)
CLI_OPTIONS = ("tol", "solver_tol", "max_iter", "time_limit")


def option(name: str) -> SolveOption:
    """The table's entry ``name``.

    Parameters
    ----------
    name : str
        An option of :data:`SOLVE_OPTIONS` (``"tol"``, ``"solver_tol"``, ``"max_iter"``, ``"time_limit"``,
        ``"verbose"``, ``"solver"``).

    Returns
    -------
    SolveOption

    Raises
    ------
    KeyError
        For a name not in the table.
    """
    return _BY_NAME[name]


def default(name: str, backend: str) -> Any:
    """The default of option ``name`` on ``backend``.

    Parameters
    ----------
    name : str
        An option of :data:`SOLVE_OPTIONS`.
    backend : {"cvxpy", "jax"}
        A backend that uses the option.

    Returns
    -------
    object
        The default (``None``: none, or the backend's per-solver default).

    Raises
    ------
    KeyError
        For a name not in the table, or a backend that does not use the option.
    """
    return _BY_NAME[name].defaults[backend]


def refuse_unused(options: dict, backend: str) -> None:
    """Raise :class:`~metricopt.errors.UnknownOptionError` for a shared option ``backend`` does not use (e.g.
    ``solver_tol`` on the JAX backend), saying which backend uses it.

    Parameters
    ----------
    options : dict
        The options given, by name (names outside the table are left to the backend's own check).
    backend : str
        The backend they are given to.

    Raises
    ------
    metricopt.errors.UnknownOptionError
        For the first shared option in ``options`` that ``backend`` does not use.
    """
    for name in options:
        entry = _BY_NAME.get(name)
        if entry is not None and backend not in entry.defaults:
            users = ", ".join(f"backend={b!r}" for b in entry.defaults)
            raise UnknownOptionError(f"option {name!r} is used by {users} only ({entry.meaning}); "
                                     f"backend={backend!r} does not take it.")
