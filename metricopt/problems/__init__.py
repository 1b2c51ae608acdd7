"""Declarative metric-learning problems (what is minimised; no solver loops)."""

from .base import Constraint, Problem
from .gerrymander import GerrymanderingProblem, GerrymanderStepProblem
from .kernel_lmnn import KernelLMNNProblem
from .lmnn import LMNNProblem
from .mmc import MMCProblem
from .multimetric import MultiMetricLMNNProblem
from .mlcc import MLCCProblem
from .nca import NCAProblem
from .pola import POLAProblem
from . import terms
from .regularizers import FrobeniusNorm, OffDiagonalL1, RowL21, TraceBall

__all__ = ["Problem", "Constraint", "LMNNProblem", "KernelLMNNProblem", "MultiMetricLMNNProblem", "MMCProblem", "POLAProblem", "NCAProblem", "MLCCProblem", "GerrymanderingProblem", "GerrymanderStepProblem", "terms", "OffDiagonalL1", "TraceBall", "FrobeniusNorm", "RowL21"]
