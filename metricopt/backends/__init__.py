"""Backends: compile a declarative problem and solve it."""

from __future__ import annotations

from .._validation import check_choice

BACKENDS = ("cvxpy", "jax")


def get_backend(name):
    """Return the solve function of backend ``name``."""
    name = check_choice(name, "backend", BACKENDS)
    if name == "cvxpy":
        from .cvxpy_backend import solve

        return solve
    if name == "jax":
        from .jax import solve

        return solve
    raise AssertionError(name)  # pragma: no cover
