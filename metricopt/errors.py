"""One exception family for metricopt.

Every error the package raises on purpose derives from :class:`MetricoptError`.
Errors about the caller's input also derive from :class:`ValueError`, so code
written against scikit-learn conventions (``except ValueError``) keeps working.
Each message says what was received and what to do about it.
"""

from __future__ import annotations


class MetricoptError(Exception):
    """Base class of every error raised by metricopt."""


class InputError(MetricoptError, ValueError):
    """The data or a parameter is invalid (NaN/inf, wrong shape, bad value)."""


class InputTypeError(InputError, TypeError):
    """Input of the wrong type (e.g. non-numeric objects in ``X``); also a ``TypeError``, as in scikit-learn."""


class UnknownOptionError(InputError):
    """An unknown backend, solver or option name was given."""


class ProblemTooLargeError(MetricoptError, ValueError):
    """The problem is too large for the requested (exact) backend."""


class NotConvexError(MetricoptError, ValueError):
    """A certificate of global optimality was asked for a non-convex problem."""


class NotCertifiableError(MetricoptError, NotImplementedError):
    """The certificate has no dual piece for a term of the problem (a convex term written
    with only a value and a CVXPY expression); metricopt refuses to certify rather than
    report a wrong bound."""


class SolverError(MetricoptError, RuntimeError):
    """A solve did not reach an optimal status and the caller asked to raise."""
