"""scikit-learn-compatible estimators."""

from .base import MetricLearner
from .learners import LMNN, MMC, POLA
from .multimetric import MultiMetricLMNN

__all__ = ["MetricLearner", "LMNN", "MMC", "POLA", "MultiMetricLMNN"]
