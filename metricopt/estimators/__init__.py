"""The core of the scikit-learn estimators: :class:`MetricLearner` (the fit / transform / certificate machinery
every convex method's estimator shares) and the parameter checks. The estimators themselves live in their
families (:mod:`metricopt.methods`) and in :mod:`metricopt`'s namespace (``metricopt.LMNN``)."""

from .base import MetricLearner

__all__ = ["MetricLearner"]
