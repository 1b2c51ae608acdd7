"""Public access to the objective terms (see :mod:`metricopt.problems.terms`)."""

from .problems.mlcc import LogPartition
from .problems.nca import NeighbourhoodComponents
from .problems.terms import TERMS, Frobenius, HalfSquare, Linear, PairHinge, SqrtDistances, Term, Trace, TripletHinge

__all__ = ["TERMS", "Term", "Linear", "Trace", "Frobenius", "HalfSquare", "TripletHinge", "SqrtDistances", "PairHinge",
           "NeighbourhoodComponents", "LogPartition"]
