"""scikit-learn-compatible estimators."""

from .base import MetricLearner
from .learners import LMNN, MMC, POLA

__all__ = ["MetricLearner", "LMNN", "MMC", "POLA"]
