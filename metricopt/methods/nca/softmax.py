"""Row-blocked softmax over pairwise distances, shared by NCA and MLCC: memory ``O(block * n)``, never
``n x n`` for large ``n``.

For points ``z_i`` (the mapped data ``X L^T``, or the data with distances through ``M``), the logits of
row ``i`` are ``-d(z_i, z_k)`` for ``k != i`` and ``-inf`` on the diagonal. :func:`numpy_blocks` yields
them block by block in float64 NumPy; :func:`jax_blocked_sum` sums a per-row function of them in JAX,
each block rematerialised (``jax.checkpoint``) so that reverse-mode differentiation stores no
``n x n`` array either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

#: rows of the softmax computed at once: ``block * n`` at most this many entries
BLOCK_ENTRIES = 1 << 21


def block_rows(n: int) -> int:
    """Rows per block for ``n`` points (``block * n <= BLOCK_ENTRIES``, at least one).

    Parameters
    ----------
    n : int
        The number of points.

    Returns
    -------
    int
        Rows per block.
    """
    return int(max(1, min(n, BLOCK_ENTRIES // max(n, 1))))


def numpy_blocks(Z: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(idx, logits)`` for row blocks of the points ``Z`` (n, r): ``logits[a, k] = -||z_idx[a] - z_k||^2``,
    ``-inf`` for ``k = idx[a]``.

    Parameters
    ----------
    Z : (n, r) ndarray
        The points.

    Yields
    ------
    idx : (b,) ndarray of int
        The rows of the block.
    logits : (b, n) ndarray
        Their logits.
    """
    n = Z.shape[0]
    sq = np.einsum("nr,nr->n", Z, Z)
    step = block_rows(n)
    for a in range(0, n, step):
        idx = np.arange(a, min(n, a + step))
        D = np.maximum(sq[idx, None] + sq[None, :] - 2.0 * Z[idx] @ Z.T, 0.0)
        D[np.arange(idx.size), idx] = np.inf
        yield idx, -D


def jax_rows(n: int) -> dict:
    """The block layout for :func:`jax_blocked_sum`: ``rows`` (blocks x block, padded with the last row)
    and ``valid`` (0 on padding).

    Parameters
    ----------
    n : int
        The number of points.

    Returns
    -------
    dict
        ``{"rows": (blocks, block) int32, "valid": (blocks, block) float64}``.
    """
    step = block_rows(n)
    n_blocks = -(-n // step)
    rows = np.arange(n_blocks * step)
    return {"rows": np.minimum(rows, n - 1).reshape(n_blocks, step).astype(np.int32),
            "valid": (rows < n).reshape(n_blocks, step).astype(np.float64)}


def jax_blocked_sum(data: Any, V: Any, per_row: Callable[[Any, Any], Any]) -> Any:
    """``sum_i per_row(idx, logits)`` over the rows (JAX), the points ``data["X"] @ V["L"].T`` when the point
    carries its factor ``L``, else distances through ``V["M"]``; ``per_row(idx, logits)`` returns one value
    per row of the block.

    Parameters
    ----------
    data : dict
        ``X`` (n, d) and the layout of :func:`jax_rows` (``rows``, ``valid``).
    V : dict
        The point: ``V["L"]`` (a factor) or ``V["M"]``, JAX arrays.
    per_row : callable
        ``per_row(idx, logits)``: one value per row of a block.

    Returns
    -------
    jax.Array
        The scalar sum.
    """
    import jax
    import jax.numpy as jnp

    X = data["X"]
    n = X.shape[0]
    if "L" in V:
        Z = X @ V["L"].T
        sq = jnp.einsum("nr,nr->n", Z, Z)
        gram = lambda idx: Z[idx] @ Z.T
    else:
        XM = X @ V["M"]
        sq = jnp.einsum("nd,nd->n", XM, X)
        gram = lambda idx: XM[idx] @ X.T

    @jax.checkpoint
    def block(args):
        idx, valid = args
        D = jnp.maximum(sq[idx, None] + sq[None, :] - 2.0 * gram(idx), 0.0)
        logits = jnp.where(idx[:, None] == jnp.arange(n)[None, :], -jnp.inf, -D)
        return jnp.sum(per_row(idx, logits) * valid)

    return jnp.sum(jax.lax.map(block, (data["rows"], data["valid"])))
