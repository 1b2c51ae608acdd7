"""A module imported on its first attribute access (for CVXPY in the problem layer).

The problem layer writes each term's CVXPY expression beside its value, so its modules name ``cvxpy`` throughout;
importing CVXPY (which imports JAX) costs about 0.4 s, which a fit that never builds a conic program (NCA's NumPy
path, the JAX backend) should not pay. ``cp = lazy_module("cvxpy")`` gives an object whose first attribute access
imports the module; type checkers see the real module (import it under ``typing.TYPE_CHECKING``).
"""

from __future__ import annotations

import importlib
import types
from typing import Any, Callable


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


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """PEP 562 ``__getattr__`` and ``__dir__`` for a package whose public names live in its submodules: the
    submodule defining a name is imported the first time the name is read (a method family's folder, where the
    problem must not import the estimator's scikit-learn or the low-rank solver's JAX).

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    exports : dict of str to str
        Public name -> the submodule (relative to ``package``) that defines it.

    Returns
    -------
    (callable, callable)
        ``(__getattr__, __dir__)`` to bind in the package's namespace.
    """
    module = importlib.import_module(package)

    def __getattr__(name: str) -> Any:
        if name in exports:
            value = getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
            setattr(module, name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(module)) | set(exports))

    return __getattr__, __dir__
