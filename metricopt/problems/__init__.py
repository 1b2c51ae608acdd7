"""Declarative metric-learning problems (what is minimised; no solver loops)."""

from .base import Constraint, Problem
from .lmnn import LMNNProblem
from .mmc import MMCProblem
from .multimetric import MultiMetricLMNNProblem
from .pola import POLAProblem
from . import terms

__all__ = ["Problem", "Constraint", "LMNNProblem", "MultiMetricLMNNProblem", "MMCProblem", "POLAProblem", "terms"]
