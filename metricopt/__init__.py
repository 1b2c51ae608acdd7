"""metricopt: Mahalanobis metric learning by convex optimization, with certificates.

Importing metricopt has no side effects (JAX's global configuration is never changed).
"""

from . import errors, gerrymander, io, latent, linalg, local, protocols, terms
from .certify import AgreementReport, Certificate, certify, check_agreement
from .errors import (
    InputError,
    MetricoptError,
    NotCertifiableError,
    NotConvexError,
    ProblemTooLargeError,
    SolverError,
    UnknownOptionError,
)
from .estimators import (LDA, LMNN, MLCC, MMC, NCA, PCA, POLA, RCA, GerrymanderingKNN, KernelLMNN, LocalMetricKNN,
                         MultiMetricLMNN, Whitening)
from .knn import knn_error, knn_loo_predict, knn_predict, loo_knn_error
from .multipass import MultiPassResult, multipass_lmnn
from .problems import (GerrymanderingProblem, GerrymanderStepProblem, KernelLMNNProblem, LMNNProblem, MLCCProblem, MMCProblem, MultiMetricLMNNProblem, NCAProblem,
                       POLAProblem, Problem)
from .solution import Solution, Status
from .solving import solve

from ._version import __version__  # noqa: F401  (public)

__all__ = [
    "LMNN", "MMC", "POLA", "NCA", "GerrymanderingKNN", "LocalMetricKNN", "local", "GerrymanderingProblem", "GerrymanderStepProblem", "gerrymander",
    "latent", "NCAProblem", "MLCC", "MLCCProblem", "PCA", "Whitening", "LDA", "RCA", "MultiMetricLMNN", "KernelLMNN", "KernelLMNNProblem", "multipass_lmnn", "MultiPassResult", "MultiMetricLMNNProblem", "knn_predict", "knn_error", "knn_loo_predict", "loo_knn_error",
    "certify", "Certificate", "check_agreement", "AgreementReport", "LMNNProblem", "MMCProblem", "POLAProblem", "Problem", "Solution", "Status",
    "InputError", "MetricoptError", "NotCertifiableError", "NotConvexError", "ProblemTooLargeError", "SolverError",
    "UnknownOptionError", "errors", "io", "linalg", "terms", "protocols", "solve",
]
