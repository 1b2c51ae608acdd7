"""metricopt: Mahalanobis metric learning by convex optimization, with certificates.

Importing metricopt has no side effects (JAX's global configuration is never changed) and is cheap: it
loads neither JAX, CVXPY, scikit-learn nor SciPy. The public names are resolved lazily (PEP 562): the
submodule that defines a name is imported the first time the name is read (``metricopt.LMNNProblem``,
``from metricopt import solve``), and every submodule is reachable as an attribute (``metricopt.io``,
``metricopt.datasets``). Only the exception classes and ``__version__`` are imported eagerly.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from . import errors
from ._version import __version__  # noqa: F401  (public)
from .errors import (
    InputError,
    MetricoptError,
    NotCertifiableError,
    NotConvexError,
    ProblemTooLargeError,
    SolverError,
    UnknownOptionError,
)

if TYPE_CHECKING:  # what the names below resolve to, for type checkers and IDEs (never run)
    from . import io, linalg, protocols, terms
    from .methods import gerrymander, local
    from .certify import AgreementReport, Certificate, certify, check_agreement
    from .methods.baselines.estimator import LDA, PCA, RCA, Whitening
    from .methods.lmnn.estimator import LMNN
    from .methods.nca.mlcc_estimator import MLCC
    from .methods.pairs.estimator import MMC, POLA
    from .methods.nca.estimator import NCA
    from .methods.gerrymander.estimator import GerrymanderingKNN
    from .methods.lmnn.kernel_estimator import KernelLMNN
    from .methods.local.estimator import LocalMetricKNN
    from .methods.lmnn.multimetric_estimator import MultiMetricLMNN
    from .knn import knn_error, knn_loo_predict, knn_predict, loo_knn_error
    from .methods.lmnn.multipass import MultiPassResult, multipass_lmnn
    from .methods.gerrymander.problem import GerrymanderingProblem, GerrymanderStepProblem
    from .methods.lmnn.kernel_problem import KernelLMNNProblem
    from .methods.lmnn.problem import LMNNProblem
    from .methods.nca.mlcc_problem import MLCCProblem
    from .methods.pairs.mmc_problem import MMCProblem
    from .methods.lmnn.multimetric_problem import MultiMetricLMNNProblem
    from .methods.nca.problem import NCAProblem
    from .methods.pairs.pola_problem import POLAProblem
    from .problems import Problem
    from .solution import Solution, Status
    from .solving import solve

__all__ = [
    "LMNN", "MMC", "POLA", "NCA", "GerrymanderingKNN", "LocalMetricKNN", "local", "GerrymanderingProblem", "GerrymanderStepProblem", "gerrymander",
    "NCAProblem", "MLCC", "MLCCProblem", "PCA", "Whitening", "LDA", "RCA", "MultiMetricLMNN", "KernelLMNN", "KernelLMNNProblem", "multipass_lmnn", "MultiPassResult", "MultiMetricLMNNProblem", "knn_predict", "knn_error", "knn_loo_predict", "loo_knn_error",
    "certify", "Certificate", "check_agreement", "AgreementReport", "LMNNProblem", "MMCProblem", "POLAProblem", "Problem", "Solution", "Status",
    "InputError", "MetricoptError", "NotCertifiableError", "NotConvexError", "ProblemTooLargeError", "SolverError",
    "UnknownOptionError", "errors", "io", "linalg", "terms", "protocols", "solve",
]

#: the method families reachable as ``metricopt.<name>`` (they live in :mod:`metricopt.methods`)
_FAMILIES = {"local": "methods.local", "gerrymander": "methods.gerrymander"}

#: each lazily resolved public object -> the submodule that defines it (public submodules, such as ``io`` or
#: ``terms``, need no entry: any submodule is imported on first access, see :func:`__getattr__`)
_LAZY: dict[str, str] = {
    **dict.fromkeys(["AgreementReport", "Certificate", "certify", "check_agreement"], "certify"),
    **dict.fromkeys(["LDA", "PCA", "RCA", "Whitening"], "methods.baselines.estimator"),
    "GerrymanderingKNN": "methods.gerrymander.estimator", "GerrymanderingProblem": "methods.gerrymander.problem",
    "GerrymanderStepProblem": "methods.gerrymander.problem",
    "LMNN": "methods.lmnn.estimator", "KernelLMNN": "methods.lmnn.kernel_estimator",
    "MultiMetricLMNN": "methods.lmnn.multimetric_estimator", "LMNNProblem": "methods.lmnn.problem",
    "KernelLMNNProblem": "methods.lmnn.kernel_problem", "MultiMetricLMNNProblem": "methods.lmnn.multimetric_problem",
    "LocalMetricKNN": "methods.local.estimator", "NCA": "methods.nca.estimator", "MLCC": "methods.nca.mlcc_estimator",
    "NCAProblem": "methods.nca.problem", "MLCCProblem": "methods.nca.mlcc_problem",
    **dict.fromkeys(["MMC", "POLA"], "methods.pairs.estimator"), "MMCProblem": "methods.pairs.mmc_problem",
    "POLAProblem": "methods.pairs.pola_problem",
    **dict.fromkeys(["knn_error", "knn_loo_predict", "knn_predict", "loo_knn_error"], "knn"),
    **dict.fromkeys(["MultiPassResult", "multipass_lmnn"], "methods.lmnn.multipass"),
    "Problem": "problems",
    **dict.fromkeys(["Solution", "Status"], "solution"),
    "solve": "solving",
}


def __getattr__(name: str) -> Any:
    """Resolve a public name (or a submodule) on first access, then cache it in the module's namespace."""
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    elif name in _FAMILIES:
        value = importlib.import_module(f"{__name__}.{_FAMILIES[name]}")
    elif name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise  # the submodule exists but something it imports is missing
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names for ``dir(metricopt)``: those bound so far and every public name (``__all__``)."""
    return sorted(set(globals()) | set(__all__))


class _Namespace(types.ModuleType):
    """metricopt's module type: importing a submodule that shares its name with a public object defined in it
    (``metricopt.certify``, which defines :func:`certify`) does not bind the submodule under that name: the name
    stays the object (resolved on first access), as eager ``from .certify import certify`` had it, whichever
    import loads the submodule first."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and value.__name__ == f"{__name__}.{_LAZY.get(name)}":
            return  # not bound now: the first access resolves the object (``__getattr__``), so that importing
            # the submodule (e.g. ``metricopt.certify.policy``) does not import what defines the object
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Namespace
