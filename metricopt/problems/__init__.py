"""The core problem layer: the :class:`Problem` base, its terms and regularisers (what is minimised; no solver
loops). The methods' problems live in their families (:mod:`metricopt.methods`) and in :mod:`metricopt`'s
namespace (``metricopt.LMNNProblem``)."""

from . import terms
from .base import Constraint, Problem
from .regularizers import FrobeniusNorm, OffDiagonalL1, RowL21, TraceBall

__all__ = ["Problem", "Constraint", "terms", "OffDiagonalL1", "TraceBall", "FrobeniusNorm", "RowL21"]
