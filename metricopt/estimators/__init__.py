"""scikit-learn-compatible estimators."""

from .base import MetricLearner
from .baselines import LDA, PCA, RCA, Whitening
from .gerrymander import GerrymanderingKNN
from .kernel import KernelLMNN
from .learners import LMNN, MLCC, MMC, POLA
from .local import LocalMetricKNN
from .multimetric import MultiMetricLMNN
from .nca import NCA

__all__ = ["MetricLearner", "LMNN", "MMC", "POLA", "MultiMetricLMNN", "KernelLMNN", "NCA", "MLCC", "PCA", "Whitening", "LDA", "RCA", "GerrymanderingKNN",
           "LocalMetricKNN", "MODEL_FILE_ESTIMATORS"]

#: the estimators :mod:`metricopt.io` saves and loads (each restores its own state; see
#: :class:`metricopt.estimators.base.ModelState`)
MODEL_FILE_ESTIMATORS = (LMNN, MMC, POLA, MultiMetricLMNN, KernelLMNN, NCA, MLCC, PCA, Whitening, LDA, RCA,
                         GerrymanderingKNN, LocalMetricKNN)
