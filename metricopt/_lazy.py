"""A module imported on its first attribute access (for CVXPY in the problem layer).

The problem layer writes each term's CVXPY expression beside its value, so its modules name ``cvxpy`` throughout;
importing CVXPY (which imports JAX) costs about 0.4 s, which a fit that never builds a conic program (NCA's NumPy
path, the JAX backend) should not pay. ``cp = lazy_module("cvxpy")`` gives an object whose first attribute access
imports the module; type checkers see the real module (import it under ``typing.TYPE_CHECKING``).
"""

from __future__ import annotations

import importlib
import types
from typing import Any


class _LazyModule:
    """Stands for the module ``name`` until an attribute is read, then forwards every read to it."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: types.ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r} ({'loaded' if self._module is not None else 'not loaded yet'})>"


def lazy_module(name: str) -> Any:
    """The module ``name``, imported on the first attribute access.

    Parameters
    ----------
    name : str
        An importable module name, e.g. ``"cvxpy"``.

    Returns
    -------
    object
        A stand-in whose attribute reads are those of the module.
    """
    return _LazyModule(name)
