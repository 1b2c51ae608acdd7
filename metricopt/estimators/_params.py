"""Hyperparameter checks of the estimators: ``_parameter_constraints`` in scikit-learn's style.

Each estimator declares, per constructor parameter, a list of constraints; a value is valid when
it satisfies any of them. The declarations use scikit-learn's constraint objects
(:class:`~sklearn.utils._param_validation.Interval`, :class:`Choices`, a type, ``None``,
``"boolean"``, ``"verbose"``, ``"array-like"``, ``"no_validation"``), but a violation raises
metricopt's own errors, with the messages of :mod:`metricopt._validation`:
:class:`~metricopt.errors.UnknownOptionError` for a string outside its options, else
:class:`~metricopt.errors.InputError`. Integer intervals refuse booleans, as the problems do.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions, make_constraint

from .._validation import check_choice
from ..backends import BACKENDS
from ..errors import InputError
from ..options import ESTIMATOR_OPTIONS, option

__all__ = ["Choices", "Interval", "LMNN_CONSTRAINTS", "SOLVE_CONSTRAINTS", "validate_parameters"]


class Choices(StrOptions):
    """A string among ``options``, matched case-insensitively (as :func:`metricopt._validation.check_choice`
    does); the options keep their order for the error message."""

    def __init__(self, *options: str) -> None:
        super().__init__(set(options))
        self.ordered = tuple(options)

    def is_satisfied_by(self, val: Any) -> bool:
        return isinstance(val, str) and val.lower() in {o.lower() for o in self.ordered}


def _option_constraint(name: str) -> list:
    """The constraints of the shared solve option ``name`` (:mod:`metricopt.options`), ``None`` meaning its
    default."""
    entry = option(name)
    if entry.kind is bool:
        return ["verbose"]
    if entry.kind is str:
        return [None, str]
    if entry.kind is int:
        return [None, Interval(Integral, 1, None, closed="left")]
    return [None, Interval(Real, entry.low, None, closed="neither")]


#: constraints of the solve parameters every estimator has: ``backend`` and the shared options of
#: :data:`metricopt.options.ESTIMATOR_OPTIONS`, read from its table
SOLVE_CONSTRAINTS: dict[str, list] = {
    "backend": [Choices(*BACKENDS)],
    **{name: _option_constraint(name) for name in ESTIMATOR_OPTIONS},
}
#: constraints of the LMNN objective's parameters (LMNN, multi-metric and kernel LMNN)
LMNN_CONSTRAINTS: dict[str, list] = {
    "k": [Interval(Integral, 1, None, closed="left")],
    "mu": [Interval(Real, 0, 1, closed="both")],
    "regularizer": ["no_validation"],  # a term, a list of terms or None: the problem checks it
}


def _satisfied(constraint: Any, value: Any) -> bool:
    if isinstance(constraint, Interval) and isinstance(value, bool):
        return False  # True is an Integral to Python, never a count or a weight to metricopt
    return constraint.is_satisfied_by(value)


def _describe(constraint: Any) -> str:
    """A constraint in words, for the message of a value that fits none of its parameter's constraints."""
    if constraint is None:
        return "None"
    if isinstance(constraint, type):
        return f"a {constraint.__name__}"
    if isinstance(constraint, Choices):
        return "one of " + ", ".join(repr(o) for o in constraint.ordered)
    return {"boolean": "a bool", "verbose": "a bool or an int", "array-like": "an array-like",
            "random_state": "an int seed, a numpy RandomState or None"}.get(constraint, str(constraint))


def _interval_error(name: str, value: Any, interval: Interval, or_none: str) -> InputError:
    """The message of :func:`metricopt._validation.check_int` / ``check_real`` for a value of the
    wrong type or outside ``interval``."""
    integer = interval.type is Integral
    if isinstance(value, bool) or not isinstance(value, Integral if integer else Real) or not np.isfinite(value):
        return InputError(f"{name} must be {'an integer' if integer else 'a finite real number'}{or_none}; "
                          f"got {value!r}.")
    low, high = interval.left, interval.right
    if not integer:
        low, high, value = (None if low is None else float(low)), (None if high is None else float(high)), float(value)
    low_sign = ">" if interval.closed in ("right", "neither") else ">="
    high_sign = "<" if interval.closed in ("left", "neither") else "<="
    lower = None if low is None else f"{low_sign} {low}"
    upper = None if high is None else f"{high_sign} {high}"
    below = low is not None and (value < low or (low_sign == ">" and value == low))
    first, second = (lower, upper) if below else (upper, lower)
    return InputError(f"{name} must be {first}" + (f" and {second}" if second else "") + f"; got {value}.")


def _violation(name: str, value: Any, constraints: list) -> InputError:
    """The error for ``value``, which satisfies none of ``constraints``: the message of the first
    interval or string option when the value is of its kind, else one listing what is accepted."""
    or_none = " or None" if None in constraints else ""
    for c in constraints:
        if isinstance(c, Choices) and isinstance(value, str):
            check_choice(value, name, c.ordered)  # raises UnknownOptionError
        if isinstance(c, Interval):
            return _interval_error(name, value, c, or_none)
    accepted = " or ".join(_describe(c) for c in constraints)
    return InputError(f"{name} must be {accepted}; got {value!r}.")


def validate_parameters(estimator: Any) -> None:
    """Check every parameter of ``estimator`` against its class's ``_parameter_constraints``.

    Raises
    ------
    metricopt.errors.UnknownOptionError
        For a string parameter outside its options.
    metricopt.errors.InputError
        For any other value that satisfies none of its parameter's constraints.
    """
    params = estimator.get_params(deep=False)
    for name, constraints in type(estimator)._parameter_constraints.items():
        if "no_validation" in constraints:
            continue
        value = params[name]
        if not any(_satisfied(make_constraint(c), value) for c in constraints):
            raise _violation(name, value, constraints)
