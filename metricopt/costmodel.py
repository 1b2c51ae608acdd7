"""Measured choices between equivalent JAX computations: the cheapest form of a term's gradient on this device, for
these shapes, timed once per process on the problem's own arrays.

The triplet losses' gradient over an active set, :math:`\\sum_t w_t (C_{il} - C_{ij})` with
:math:`C_{ab} = (x_a - x_b)(x_a - x_b)^T`, has two forms once every distinct pair's difference is at hand
(:meth:`metricopt.problems.terms.TripletLoss.jax_active_set`):

* **pair form**: :math:`D^T \\operatorname{diag}(w) D` over the ``P`` distinct pairs' difference rows ``D``
  (two GEMMs: ``2 P d^2`` flops, no gathers of ``d``-vectors);
* **Laplacian form**: :math:`X^T (\\operatorname{Deg} - W - W^T) X` with the pair weights ``W`` a sparse
  ``n x n`` graph (segment sums of ``P`` gathered ``d``-vectors, then two ``n x d`` by ``d x n`` products:
  ``16 P d`` bytes gathered and scattered, ``4 n d^2`` flops).

The pair form has fewer flops when ``P < 2 n`` (never with ``k >= 2`` target neighbours: ``P >= n k``), and no
gathers. Which is faster depends on the device's GEMM rate against its gather rate, and the latter on whether the
points fit its caches: a fixed-size calibration misjudged it by an order of magnitude (64 MB table: 0.34 GB/s on 2 CPU cores;
MNIST-5k's 6.5 MB of points: 4.6 GB/s), so :func:`cheapest` times the candidates themselves, on the problem's
arrays, and remembers the winner per key (device, shapes) for the rest of the process. A gradient of less than
:data:`metricopt.problems.terms.TripletLoss.MEASURE_ABOVE` flops is not worth the measurement (two compilations):
it keeps the pair form. A measurement won by :data:`CLEAR_WIN` or more also decides for nearby keys
(:func:`decided`), so a solve whose capacity buckets move does not time both forms again at every new one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

#: key -> (name of the fastest candidate, {name: best seconds}); one measurement per process and key
_CHOICES: dict = {}
#: timed runs per candidate after its first (compiling) run; the best one counts
REPEATS = 2
#: a measurement whose winner was at least this many times faster than the other candidates also decides for keys
#: close to its own (:func:`decided`)
CLEAR_WIN = 1.5


def cheapest(key: Hashable, candidates: dict[str, Callable[[], Any]]) -> str:
    """The name of the fastest of ``candidates`` (callables without arguments whose results are JAX arrays), each
    timed :data:`REPEATS` times after a first run that compiles it; measured once per ``key`` and process.

    Parameters
    ----------
    key : hashable
        What the choice holds for (e.g. the computation, the device's platform and the shapes).
    candidates : dict
        Name -> callable; ties go to the first.

    Returns
    -------
    str
        The fastest candidate's name.
    """
    import jax

    if key not in _CHOICES:
        seconds = {}
        for name, run in candidates.items():
            jax.block_until_ready(run())
            best = float("inf")
            for _ in range(REPEATS):
                t = time.perf_counter()
                jax.block_until_ready(run())
                best = min(best, time.perf_counter() - t)
            seconds[name] = best
        _CHOICES[key] = (min(seconds, key=lambda name: seconds[name]), seconds)
    return _CHOICES[key][0]


def decided(close: Callable[[Hashable], bool]) -> str | None:
    """The winner of a measured key that ``close`` accepts (e.g. the same computation, device and points, with
    capacities within a factor 2), where that winner was at least :data:`CLEAR_WIN` times faster than every other
    candidate, else ``None``: a nearby bucket need not be timed again (at 60,000 x 164 on an H100 the pair form won
    each of four buckets by 1.5-4.2x; the four measurements, each compiling both forms, took 12.6 s of a 121 s solve).

    Parameters
    ----------
    close : callable
        ``close(key)``: whether a measured key decides for the one at hand.

    Returns
    -------
    str or None
        The clear winner of the nearest such measurement (the first found), or ``None``.
    """
    for key, (winner, seconds) in _CHOICES.items():
        if not close(key):
            continue
        others = [t for name, t in seconds.items() if name != winner]
        if others and min(others) >= CLEAR_WIN * seconds[winner]:
            return winner
    return None


def choices() -> dict[Hashable, tuple[str, dict[str, float]]]:
    """The choices measured so far: key -> (the winner, seconds per candidate) (for benchmarks and tests).

    Returns
    -------
    dict
        A copy of the process's measurements.
    """
    return dict(_CHOICES)
