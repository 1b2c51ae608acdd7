"""The declarative problem: data, constraint structure, hyperparameters and a sum of terms.

A problem says *what* is minimised; it holds no solver loop. Backends compile it
(``problem.solve(backend=...)``) and :func:`metricopt.certify` bounds its optimum.
Every problem is written as a minimisation over a PSD matrix ``M`` (and possibly
extra scalar variables, e.g. POLA's threshold ``b``)::

    minimise    sum_k term_k(M, ...)
    subject to  M PSD,  constraint_c(M, ...) for every constraint c.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_X
from ..errors import InputError
from ..linalg import factor, min_eig, pair_rows, symmetrize


class Constraint:
    """A constraint of a problem, beyond ``M`` PSD: a CVXPY form and a float64 violation."""

    def cvxpy(self, problem, V):  # pragma: no cover - abstract
        raise NotImplementedError

    def violation(self, problem, V):  # pragma: no cover - abstract
        """Largest violation at a numpy point (0 when satisfied)."""
        raise NotImplementedError


class Problem:
    """Base class of declarative metric-learning problems.

    Subclasses set ``self.terms`` (objective terms), ``self.constraints`` and,
    where the problem has variables beyond ``M``, ``extra_variables``.
    """

    method = "problem"
    reference = ""
    diagonal = False
    extra_variables: tuple = ()
    #: the exact backend solves for ``var_scale * M`` and minimises ``objective / obj_scale``
    #: (pure rescalings that keep the conic solver's numbers of order one)
    var_scale = 1.0
    obj_scale = 1.0
    #: factor bringing distances inside conic constraints (e.g. MMC's square roots) to order one
    #: (applied by the exact backend for Clarabel)
    cone_scale = 1.0
    #: solver the exact backend uses when none is named
    default_solver = "SCS"

    def __init__(self, X):
        self.X = check_X(X)
        self.terms = []
        self.constraints = []

    # ------------------------------------------------------------------ shape
    @property
    def n(self):
        return self.X.shape[0]

    @property
    def d(self):
        return self.X.shape[1]

    @property
    def is_convex(self):
        """True when every term is convex (constraints here are always convex)."""
        return all(t.convex for t in self.terms)

    # ---------------------------------------------------------- evaluation
    def check_metric(self, M, name="M", psd_tol=1e-8):
        """Return ``M`` symmetrised as float64 after checking its shape and PSD-ness."""
        M = np.asarray(M, dtype=np.float64)
        if M.shape != (self.d, self.d):
            raise InputError(f"{name} must have shape ({self.d}, {self.d}) for data with {self.d} features; got {M.shape}.")
        if not np.all(np.isfinite(M)):
            raise InputError(f"{name} contains NaN or infinite entries.")
        M = symmetrize(M)
        lo = min_eig(M)
        scale = max(1.0, float(np.abs(M).max()))
        if lo < -psd_tol * scale:
            raise InputError(
                f"{name} is not positive semidefinite (smallest eigenvalue {lo:.3g}); project it first with "
                "metricopt.linalg.project_psd."
            )
        if self.diagonal and np.any(np.abs(M - np.diag(np.diag(M))) > 0):
            raise InputError(f"{name} must be diagonal for the diagonal variant of {self.method}.")
        return M

    def factor(self, M):
        """``L`` with ``L^T L = M`` (negative eigenvalues clipped)."""
        return factor(M)

    def pair_rows(self, a, b):
        """Rows ``r`` with ``r @ vec = d_M(x_a, x_b)`` for the backend's vectorised variable."""
        if self.diagonal:
            D = self.X[np.asarray(a)] - self.X[np.asarray(b)]
            return D * D
        return pair_rows(self.X, a, b)

    def pair_distances(self, a, b, M, chunk=200_000):
        """``d_M(x_a, x_b) = (x_a - x_b)^T M (x_a - x_b)`` from explicit differences."""
        a = np.asarray(a)
        b = np.asarray(b)
        out = np.empty(a.shape[0])
        for s in range(0, a.shape[0], chunk):
            D = self.X[a[s:s + chunk]] - self.X[b[s:s + chunk]]
            out[s:s + chunk] = np.einsum("md,md->m", D @ M, D)
        return out

    def point(self, M, **variables):
        """A numpy point ``V`` of the problem (checked ``M`` plus extra variables)."""
        V = {"M": self.check_metric(M)}
        for name in self.extra_variables:
            if variables.get(name) is None:
                V[name] = self.best_extra(V["M"], name)
            else:
                V[name] = float(variables[name])
        unknown = set(variables) - set(self.extra_variables)
        if unknown:
            raise InputError(
                f"{self.method} has no variable(s) {sorted(unknown)}; its variables are M"
                + "".join(f", {v}" for v in self.extra_variables) + "."
            )
        return V

    def best_extra(self, M, name):  # pragma: no cover - overridden where needed
        raise InputError(f"pass the value of variable {name!r}.")

    def objective(self, M, **variables):
        """The objective at ``M`` (and the extra variables), in float64, over all data."""
        V = self.point(M, **variables)
        return self._objective(V)

    def _objective(self, V):
        return float(sum(t.value(self, V) for t in self.terms))

    def max_violation(self, V):
        """Largest violation of the problem's constraints (beyond PSD) at ``V``."""
        return max([0.0] + [float(c.violation(self, V)) for c in self.constraints])

    def repair(self, V):
        """Map a point that violates the constraints slightly onto the feasible set.

        The exact backend applies it to the solver's answer so that the returned
        metric is feasible and its objective a true upper bound. Default: no change.
        """
        return V

    def initial_point(self):
        V = {"M": np.eye(self.d)}
        for name in self.extra_variables:
            V[name] = 1.0
        return V

    # ------------------------------------------------------------- actions
    def solve(self, backend="cvxpy", **options):
        """Solve with a backend and return a :class:`~metricopt.solution.Solution`.

        Parameters
        ----------
        backend : {"cvxpy", "jax"}
            ``"cvxpy"``: the exact conic program solved by SCS or Clarabel; see
            :func:`metricopt.backends.cvxpy_backend.solve` for its options.
            ``"jax"``: jitted first-order solvers in float64 (LMNN-type problems), stopped
            at a certified relative gap; see :func:`metricopt.backends.jax.solve`.
        """
        from ..backends import get_backend

        return get_backend(backend)(self, **options)

    def certify(self, M, **kwargs):
        """Shorthand for :func:`metricopt.certify` ``(self, M, ...)``."""
        from ..certify import certify

        return certify(self, M, **kwargs)

    def to_cvxpy(self, working_set=None):
        """The exact program as a ``cvxpy.Problem`` (for teaching and inspection).

        Returns ``(cvxpy_problem, variables)``; for LMNN, ``working_set=None`` gives
        the textbook program with one slack per triplet (every triplet).
        """
        from ..backends.cvxpy_backend import build_program

        return build_program(self, working_set)

    def __repr__(self):
        terms = " + ".join(t.describe() for t in self.terms)
        return f"{type(self).__name__}(n={self.n}, d={self.d}, objective={terms})"
