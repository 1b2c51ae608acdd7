"""Backends: compile a declarative problem and solve it.

Each backend module declares ``NAME``, ``accepts(problem) -> (bool, reason)`` (read from the
problem's declarations: its geometry, convexity and terms, never its class), its typed options
(``Options``, every default resolved there once) and ``solve(problem, **options)``.
:func:`get_backend` finds one by name; :func:`metricopt.solve` is the entry point.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable

from .._validation import check_choice

#: backend name -> module (imported on first use: importing metricopt never imports JAX)
_MODULES = {"cvxpy": "metricopt.backends.cvxpy_backend", "jax": "metricopt.backends.jax"}
BACKENDS = tuple(_MODULES)


def backend_module(name: str) -> ModuleType:
    """The module of backend ``name`` (``accepts``, ``Options``, ``solve``).

    Parameters
    ----------
    name : str
        The backend's name, one of :data:`BACKENDS` (``"cvxpy"``, ``"jax"``).

    Returns
    -------
    types.ModuleType
        The backend's module, imported on first use.

    Raises
    ------
    UnknownOptionError
        When ``name`` is not one of :data:`BACKENDS`.
    """
    name = check_choice(name, "backend", BACKENDS)
    return importlib.import_module(_MODULES[name])


def get_backend(name: str) -> Callable[..., Any]:
    """Return the solve function of backend ``name``.

    Parameters
    ----------
    name : str
        The backend's name, one of :data:`BACKENDS`.

    Returns
    -------
    callable
        The backend's ``solve(problem, **options)``.

    Raises
    ------
    UnknownOptionError
        When ``name`` is not one of :data:`BACKENDS`.
    """
    return backend_module(name).solve


def accepting_backends(problem: Any) -> dict:
    """``{name: (accepted, reason)}`` for every backend.

    Parameters
    ----------
    problem : Problem
        The declarative problem (its geometry, convexity and terms are read, never its class).

    Returns
    -------
    dict
        Backend name -> ``(accepted, reason)`` as each backend's ``accepts(problem)`` returns it.
    """
    return {name: backend_module(name).accepts(problem) for name in BACKENDS}
