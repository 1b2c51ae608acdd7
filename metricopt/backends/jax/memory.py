"""How many bytes a JAX solve needs on its device and on the host, checked before they are allocated.

A solve refuses (:class:`~metricopt.errors.ProblemTooLargeError`) a problem whose estimate exceeds
:data:`USABLE_SHARE` of the memory available, with the numbers and what to change, instead of failing deep in
XLA or NumPy (or swapping) after minutes. It is checked when the solve starts (the terms' data, the smallest
active-set bucket, the blocks of the search) and again before each larger active-set capacity bucket is put on
the device (:class:`.driver.ActiveSets`).

What is counted (float64, int32 indices, as the backend stores them):

* **device**: the terms' arrays (:meth:`~metricopt.protocols.Term.jax_data`: the points, the target pairs, ...),
  the active sets' padded capacity (indices and masks, 20 bytes per slot) and what the loop computes per active
  triplet (:data:`GATHERS_PER_TRIPLET` gathered ``d``-vectors; the driver counts these even where the term's JAX
  piece uses dense ``n x n`` matrices instead, ``n <= 4096``, which they then bound), and a few ``d x d`` solver
  states;
* **host**: the points and their transformed copy, the search's blocks (``block x n`` distances,
  :data:`metricopt.constraints.BLOCK_BYTES` each, :data:`SEARCH_BLOCK_COPIES` of them alive), and the active triplets
  a search returns (:data:`HOST_BYTES_PER_TRIPLET`) with their padded copies.

The available memory is the device's ``memory_stats()["bytes_limit"]`` less what is in use (GPU), the host's
``MemAvailable`` for the host; a CPU device's part is counted in the host's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ProblemTooLargeError

#: the share of the available memory a solve may plan to use
USABLE_SHARE = 0.9
#: bytes per slot of an active set's padded capacity on the device: ``p``, ``i``, ``l`` (int32) and ``mask`` (float64)
DEVICE_BYTES_PER_SLOT = 20
#: ``d``-vectors (float64) the loop computes per active triplet (the gathered differences of its two pairs)
GATHERS_PER_TRIPLET = 2
#: bytes per active triplet a search returns and the driver pads on the host: ``(i, j, l)`` int64 and ``h`` float64,
#: the padded active set (20) and padded ``h`` (8)
HOST_BYTES_PER_TRIPLET = 60
#: blocks of the search alive at once (distances, masks, the hinge values)
SEARCH_BLOCK_COPIES = 4
#: d x d matrices the solver keeps (iterate, momentum, gradient, preconditioner, ...)
STATE_MATRICES = 12


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a solve needs: ``device`` and ``host`` totals and their ``parts`` (name -> (where, bytes))."""

    device: int
    host: int
    parts: dict = field(default_factory=dict)

    def describe(self) -> str:
        """The parts, largest first, in a line (for messages).

        Returns
        -------
        str
            E.g. ``"active sets (capacity 2^20) 420 MB on the device, points 8 MB on the device, ..."``.
        """
        items = sorted(self.parts.items(), key=lambda kv: -kv[1][1])
        return ", ".join(f"{name} {_size(b)} on the {where}" for name, (where, b) in items if b > 0)


def _size(b: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{int(b)} B"


def _search_block_bytes() -> int:
    try:
        from ...constraints import BLOCK_BYTES
    except ImportError:  # pragma: no cover - the search's block budget moved
        BLOCK_BYTES = 32 * 2**20
    return int(BLOCK_BYTES)


def estimate(problem: Any, data: Any, capacity: int, dense: bool = False) -> MemoryEstimate:
    """The bytes a JAX solve of ``problem`` needs with the terms' arrays ``data`` and active sets of ``capacity``
    slots in all (the module docstring says what is counted).

    Parameters
    ----------
    problem : Problem
        The problem (``n``, ``d`` where it has them).
    data : sequence of dict
        The terms' arrays (numpy or JAX), as put on the device.
    capacity : int
        The active sets' padded capacity, all terms together.
    dense : bool, optional
        Whether the loop works on dense ``n x n`` matrices (the term's JAX piece decides, from ``n`` and the
        capacity).

    Returns
    -------
    MemoryEstimate
        The device and host bytes and their parts.
    """
    n, d = int(problem.n), int(problem.d)
    arrays = sum(int(np.prod(np.shape(v))) * int(np.dtype(getattr(v, "dtype", np.float64)).itemsize)
                 for dat in data for v in dat.values())
    uses_ws = any(t.uses_working_set for t in problem.terms)
    parts = {
        "terms' arrays (points, target pairs, ...)": ("device", arrays),
        "solver state": ("device", STATE_MATRICES * d * d * 8),
    }
    if uses_ws:
        cap = int(capacity)
        per = DEVICE_BYTES_PER_SLOT + (0 if dense else GATHERS_PER_TRIPLET * d * 8)
        parts[f"active sets (capacity {cap:,})"] = ("device", cap * per)
        if dense:
            parts["dense n x n matrices"] = ("device", 3 * n * n * 8)
        parts["points and their transformed copy"] = ("host", 2 * n * d * 8)
        parts["search blocks"] = ("host", SEARCH_BLOCK_COPIES * min(_search_block_bytes(), 8 * n * n))
        parts[f"active triplets found (capacity {cap:,})"] = ("host", cap * HOST_BYTES_PER_TRIPLET)
    device = sum(b for where, b in parts.values() if where == "device")
    host = sum(b for where, b in parts.values() if where == "host")
    return MemoryEstimate(int(device), int(host), parts)


def host_available() -> int | None:
    """The host's available memory in bytes (``MemAvailable`` of ``/proc/meminfo``; else the physical memory),
    ``None`` when unknown.

    Returns
    -------
    int or None
        The bytes.
    """
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def device_available(device: Any = None) -> int | None:
    """The bytes free on ``device`` (default JAX's first): ``bytes_limit - bytes_in_use`` of its memory statistics
    (GPU); ``None`` for a device without statistics (the CPU device, whose memory is the host's).

    Parameters
    ----------
    device : jax.Device, optional
        The device.

    Returns
    -------
    int or None
        The bytes.
    """
    try:
        import jax

        dev = jax.devices()[0] if device is None else device
        stats = dev.memory_stats()
    except Exception:  # noqa: BLE001 - a backend without statistics
        stats = None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return None


def triplet_limit(problem: Any, device: Any = None) -> int | None:
    """The most active triplets a search may return before the solve would pass :data:`USABLE_SHARE` of the memory
    available: each costs :data:`HOST_BYTES_PER_TRIPLET` on the host and, on the device, the slot's indices and
    :data:`GATHERS_PER_TRIPLET` ``d``-vectors (in the host's memory on a CPU device). The search stops there
    (:func:`metricopt.constraints.active_triplets`'s ``limit``) instead of filling the memory (the start-up
    estimate counts only the active set's first capacity).

    Parameters
    ----------
    problem : Problem
        The problem (its dimension).
    device : jax.Device, optional
        The device (default JAX's first).

    Returns
    -------
    int or None
        The limit, ``None`` when the memory available is unknown.
    """
    d = int(problem.d)
    on_device = DEVICE_BYTES_PER_SLOT + GATHERS_PER_TRIPLET * 8 * d
    host, dev = host_available(), device_available(device)
    limits = []
    if dev is None:  # a CPU device: its part is in the host's memory
        if host is not None:
            limits.append(USABLE_SHARE * host / (HOST_BYTES_PER_TRIPLET + on_device))
    else:
        limits.append(USABLE_SHARE * dev / on_device)
        if host is not None:
            limits.append(USABLE_SHARE * host / HOST_BYTES_PER_TRIPLET)
    return int(min(limits)) if limits else None


class TooManyTriplets(ProblemTooLargeError):
    """A triplet search found more active triplets than the memory holds (:func:`too_many_triplets`); the driver
    narrows the start's smoothing width on it before refusing the solve."""


def too_many_triplets(problem: Any, limit: int, width: float) -> TooManyTriplets:
    """The error of a search that found more than ``limit`` (:func:`triplet_limit`) active triplets at ``width``.

    Parameters
    ----------
    problem : Problem
        The problem.
    limit : int
        The limit passed.
    width : float
        The search's width (the margin, or the smoothing width if larger).

    Returns
    -------
    TooManyTriplets
        The error (a :class:`~metricopt.errors.ProblemTooLargeError`), with the numbers and what to change.
    """
    return TooManyTriplets(
        f"backend='jax': the triplet search at width {width:g} found more than {limit:,} active triplets for this "
        f"{problem.method} problem (n={problem.n}, d={problem.d}), more than {USABLE_SHARE:.0%} of the memory "
        "available holds (each needs its indices on the host and two d-vectors on the device). To fit: fewer points "
        "(a subsample, or multi-pass LMNN on parts of the data), a better start (init= from a solve on a subsample), "
        "a smaller margin=, or a machine with more memory.")


def check(problem: Any, need: MemoryEstimate, device: Any = None, host: int | None = None,
          on_device: int | None = None) -> None:
    """Refuse a solve whose estimate ``need`` exceeds :data:`USABLE_SHARE` of the memory available, saying what
    it needs, what is available and what to change.

    Parameters
    ----------
    problem : Problem
        The problem (for the message).
    need : MemoryEstimate
        The estimate (:func:`estimate`).
    device : jax.Device, optional
        The device (default JAX's first).
    host : int, optional
        The host bytes available (default :func:`host_available`).
    on_device : int, optional
        The device bytes available (default :func:`device_available`; ``None`` there: a CPU device, counted with
        the host).

    Raises
    ------
    ProblemTooLargeError
        When the device or the host part does not fit.
    """
    host = host_available() if host is None else host
    on_device = device_available(device) if on_device is None else on_device
    short = []
    if on_device is None:  # a CPU device: the device part is in the host's memory
        if host is not None and need.device + need.host > USABLE_SHARE * host:
            short.append(f"{_size(need.device + need.host)} on the host (its CPU device included), {_size(host)} "
                         "available")
    else:
        if need.device > USABLE_SHARE * on_device:
            short.append(f"{_size(need.device)} on the device, {_size(on_device)} available")
        if host is not None and need.host > USABLE_SHARE * host:
            short.append(f"{_size(need.host)} on the host, {_size(host)} available")
    if not short:
        return
    n, d = problem.n, problem.d
    raise ProblemTooLargeError(
        f"backend='jax' would need {' and '.join(short)} for this {problem.method} problem "
        f"(n={n}, d={d}): {need.describe()}. To fit: fewer points (a subsample, or multi-pass LMNN on parts of the "
        "data), fewer dimensions (PCA), a smaller search block (metricopt.constraints.BLOCK_BYTES), a smaller "
        "active set (a smaller margin=, a better start init=), or a device with more memory; the backend computes "
        "in float64 (float32 would halve the device part, and is not offered).")
