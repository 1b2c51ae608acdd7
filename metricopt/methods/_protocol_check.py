"""Static check (``python -m mypy``, run by ``.ci/run``) that the built-in problem and term classes satisfy
the protocols of :mod:`metricopt.protocols` they are read through. Nothing here runs: the body is for the
type checker only (tests/test_architecture.py checks the same at run time)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .. import protocols as P
    from ..problems.base import Problem
    from .gerrymander.problem import GerrymanderingProblem, GerrymanderStepProblem, LatentHinge
    from .lmnn.kernel_problem import KernelLMNNProblem
    from .lmnn.problem import LMNNProblem
    from .nca.mlcc_problem import LogPartition, MLCCProblem
    from .pairs.mmc_problem import MMCProblem, PairBudget
    from .lmnn.multimetric_problem import MultiMetricLMNNProblem
    from .nca.problem import NCAProblem, NeighbourhoodComponents
    from .pairs.pola_problem import LowerBound, PairMargins, POLAProblem
    from ..problems.regularizers import FrobeniusNorm, OffDiagonalL1, RowL21, TraceBall
    from ..problems.terms import (
        Frobenius, HalfSquare, Linear, PairHinge, SqrtDistances, Term, Trace, TripletHinge, TripletLoss)

    def _problems(base: Problem, nca: NCAProblem, mlcc: MLCCProblem, gerry: GerrymanderingProblem
                  ) -> tuple[P.ProblemLike, P.ProblemLike, P.ProblemLike, P.ProblemLike]:
        return base, nca, mlcc, gerry

    def _triplet_problems(lmnn: LMNNProblem, kernel: KernelLMNNProblem, multi: MultiMetricLMNNProblem
                          ) -> tuple[P.TripletProblem, P.TripletProblem, P.TripletProblem, P.NeighbourPredictor]:
        return lmnn, kernel, multi, multi

    def _other_problems(mmc: MMCProblem, pola: POLAProblem, step: GerrymanderStepProblem
                        ) -> tuple[P.BudgetProblem, P.PairProblem, P.LatentProblem]:
        return mmc, pola, step

    def _terms(base: Term, linear: Linear, trace: Trace, frob: Frobenius, half: HalfSquare, sqrt: SqrtDistances,
               pair: PairHinge, nca: NeighbourhoodComponents, log: LogPartition, latent: LatentHinge,
               l1: OffDiagonalL1, ball: TraceBall, norm: FrobeniusNorm, rows: RowL21
               ) -> tuple[P.TermLike, ...]:
        return base, linear, trace, frob, half, sqrt, pair, nca, log, latent, l1, ball, norm, rows

    def _losses(loss: TripletLoss, hinge: TripletHinge, latent: LatentHinge
                ) -> tuple[P.WorkingSetLoss, P.ActiveSetLoss, P.ScalarLossTerm, P.WorkingSetLoss, P.ActiveSetLoss,
                           P.WorkingSetLoss]:
        return loss, loss, loss, hinge, hinge, latent

    def _capabilities(sqrt: SqrtDistances, pair: PairHinge, margins: PairMargins, ball: TraceBall, l1: OffDiagonalL1,
                      norm: FrobeniusNorm, budget: PairBudget, bound: LowerBound
                      ) -> tuple[P.HasPairs, P.HasPairs, P.HasPairs, P.IndicatorTerm, P.PsdProxTerm, P.RepairingTerm,
                                 P.ProxTerm, P.ProxTerm, P.PsdProxTerm, P.ProblemConstraint, P.ProblemConstraint,
                                 P.ProblemConstraint]:
        return sqrt, pair, margins, ball, ball, ball, l1, norm, norm, budget, bound, margins
