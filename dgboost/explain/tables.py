"""Per-path Shapley weight tables (the Fast TreeSHAP v2 idea).

For a path with ``k`` non-bias elements (zero fractions ``z_1..z_k``), the contribution of
element ``i`` for a row is ``v * (o_i - z_i) * W_i``, and ``W_i`` depends only on the on/off
pattern ``P`` of the *other* ``k - 1`` elements::

    W_i(P) = sum over S subset of P of  |S|! (k - 1 - |S|)! / k!  *  prod_{j != i, j not in S} z_j

(the bias element's normalisation folded in). ``W_i`` for every ``i`` and every ``P`` is a
table of ``k * 2**(k-1)`` float64 weights, computed once per model; a row then needs its
``k`` on-bits and ``k`` lookups per path, O(k) instead of O(k^2).

Layout (:class:`WeightTables`)::

    table_offsets  int64,   (n_paths,)  start of the path's table in ``values``; -1: no table
    values         float64, (total,)    for path p with k elements, weight W_i(P) at
                                        values[table_offsets[p] + i * 2**(k-1) + P]

``P`` is the path's on-bit word (bit ``j`` = element ``j + 1`` of the path is on, bias
excluded) with bit ``i`` removed: ``P = (B & ((1 << i) - 1)) | ((B >> (i + 1)) << i)``.
Paths with k = 0 (single-leaf trees) need no table and get offset 0 and no entries.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ..errors import DGBoostValueError
from .paths import PathTable

__all__ = ["WeightTables", "build_tables", "DEFAULT_MAX_TABLE_BYTES", "DEFAULT_MAX_K",
           "table_entries"]

DEFAULT_MAX_TABLE_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_K = 16
_HARD_MAX_K = 30  # on-bit words are int64 and tables 2**(k-1) long


def table_entries(k):
    """Entries of the weight table of a path with ``k`` non-bias elements (0 for k = 0)."""
    k = np.asarray(k, dtype=np.int64)
    return np.where(k > 0, k * (np.int64(1) << np.maximum(k - 1, 0)), 0)


@dataclass(eq=False)
class WeightTables:
    """Weight tables for some paths of a :class:`PathTable` (layout: module docstring)."""

    table_offsets: np.ndarray
    values: np.ndarray
    max_k: int
    max_table_bytes: int

    @property
    def n_bytes(self) -> int:
        return int(self.values.nbytes)

    @property
    def has_table(self) -> np.ndarray:
        return self.table_offsets >= 0

    def coverage(self, table: PathTable) -> float:
        """Fraction of paths (with k >= 1) that have a table."""
        k = table.path_lengths - 1
        m = k > 0
        return float(np.mean(self.has_table[m])) if np.any(m) else 1.0


@njit(cache=True, nogil=True, parallel=True)
def _fill_tables(path_offsets, zero_fraction, sel, offsets, values):
    for q in prange(sel.shape[0]):
        p = sel[q]
        s = path_offsets[p] + 1
        k = path_offsets[p + 1] - s
        m = k - 1
        half = np.int64(1) << m
        off = offsets[q]
        # Shapley weights w(t) = t! (k-1-t)! / k!
        wk = np.empty(k, dtype=np.float64)
        wk[0] = 1.0 / k
        for t in range(1, k):
            wk[t] = wk[t - 1] * t / (k - t)
        # poly[l, :l+1]: coefficients of prod over the first l levels of (z + on * t)
        poly = np.zeros((k, k), dtype=np.float64)
        for i in range(k):
            poly[0, 0] = 1.0
            for P in range(half):
                start = 0
                if P > 0:
                    h = 0
                    while ((P >> h) & 1) == 0:
                        h += 1
                    start = m - 1 - h
                for lvl in range(start, m):
                    b = m - 1 - lvl           # bit of P handled at this level
                    e = b if b < i else b + 1  # the other element it stands for
                    z = zero_fraction[s + e]
                    if (P >> b) & 1:
                        poly[lvl + 1, 0] = z * poly[lvl, 0]
                        for t in range(1, lvl + 1):
                            poly[lvl + 1, t] = z * poly[lvl, t] + poly[lvl, t - 1]
                        poly[lvl + 1, lvl + 1] = poly[lvl, lvl]
                    else:
                        for t in range(lvl + 1):
                            poly[lvl + 1, t] = z * poly[lvl, t]
                        poly[lvl + 1, lvl + 1] = 0.0
                w = 0.0
                for t in range(m + 1):
                    w += wk[t] * poly[m, t]
                values[off + i * half + P] = w


def build_tables(table: PathTable, max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES,
                 max_k: int = DEFAULT_MAX_K) -> WeightTables:
    """Weight tables for the paths of ``table`` that fit ``max_k`` and the memory budget.

    Paths with ``1 <= k <= max_k`` are candidates; they get tables smallest-k first (the
    best saving per byte) until ``max_table_bytes`` is spent. The others keep offset -1
    and are computed with the per-row (GPUTreeShap) method.
    """
    max_k = int(max_k)
    if not 0 <= max_k <= _HARD_MAX_K:
        raise DGBoostValueError(f"max_k must be in [0, {_HARD_MAX_K}], got {max_k}")
    if max_table_bytes < 0:
        raise DGBoostValueError(f"max_table_bytes must be >= 0, got {max_table_bytes}")
    k = (table.path_lengths - 1).astype(np.int64)
    offsets = np.full(table.n_paths, -1, dtype=np.int64)
    offsets[k == 0] = 0
    cand = np.flatnonzero((k >= 1) & (k <= max_k))
    cand = cand[np.argsort(k[cand], kind="stable")]
    entries = table_entries(k[cand])
    cum_bytes = np.cumsum(entries) * 8
    sel = cand[cum_bytes <= max_table_bytes]
    # tables are stored in path order (rows walk the paths in order)
    order = np.sort(sel)
    ent = table_entries(k[order])
    off = np.zeros(order.shape[0], dtype=np.int64)
    if order.shape[0]:
        np.cumsum(ent[:-1], out=off[1:])
    offsets[order] = off
    values = np.empty(int(ent.sum()), dtype=np.float64)
    if order.shape[0]:
        _fill_tables(table.path_offsets, table.zero_fraction, order.astype(np.int64), off, values)
    return WeightTables(table_offsets=offsets, values=values, max_k=max_k,
                        max_table_bytes=int(max_table_bytes))
