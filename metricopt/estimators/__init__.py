"""scikit-learn-compatible estimators."""

from .base import MetricLearner
from .kernel import KernelLMNN
from .learners import LMNN, MMC, POLA
from .multimetric import MultiMetricLMNN

__all__ = ["MetricLearner", "LMNN", "MMC", "POLA", "MultiMetricLMNN", "KernelLMNN"]
