"""Backends: compile a declarative problem and solve it.

Each backend module declares ``NAME``, ``accepts(problem) -> (bool, reason)`` (read from the
problem's declarations: its geometry, convexity and terms, never its class), its typed options
(``Options``, every default resolved there once) and ``solve(problem, **options)``.
:func:`get_backend` finds one by name; :func:`metricopt.solve` is the entry point.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .._validation import check_choice

#: backend name -> module (imported on first use: importing metricopt never imports JAX)
_MODULES = {"cvxpy": "metricopt.backends.cvxpy_backend", "jax": "metricopt.backends.jax"}
BACKENDS = tuple(_MODULES)


def backend_module(name: str) -> ModuleType:
    """The module of backend ``name`` (``accepts``, ``Options``, ``solve``)."""
    name = check_choice(name, "backend", BACKENDS)
    return importlib.import_module(_MODULES[name])


def get_backend(name: str):
    """Return the solve function of backend ``name``."""
    return backend_module(name).solve


def accepting_backends(problem) -> dict:
    """``{name: (accepted, reason)}`` for every backend."""
    return {name: backend_module(name).accepts(problem) for name in BACKENDS}
