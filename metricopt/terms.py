"""Public access to the objective terms (see :mod:`metricopt.problems.terms`)."""

from .methods.nca.mlcc_problem import LogPartition
from .methods.nca.problem import NeighbourhoodComponents
from .problems.regularizers import FrobeniusNorm, OffDiagonalL1, RowL21, TraceBall
from .problems.terms import (TERMS, Frobenius, HalfSquare, Linear, PairHinge, SqrtDistances, Term, Trace, TripletHinge,
                             TripletLoss)

__all__ = ["TERMS", "Term", "Linear", "Trace", "Frobenius", "HalfSquare", "TripletHinge", "SqrtDistances", "PairHinge",
           "NeighbourhoodComponents", "LogPartition", "OffDiagonalL1", "TraceBall", "FrobeniusNorm", "RowL21",
           "TripletLoss"]
