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

Interaction tables (:class:`InteractionTables`, :func:`build_interaction_tables`)
--------------------------------------------------------------------------------
The interaction value of elements ``i != j`` of a path (shap / XGBoost definition: half the
change of ``j``'s SHAP value when ``i`` is conditioned on rather than off) is::

    Phi_ij = v / 2 * (o_i - z_i) * (o_j - z_j) * W_ij(P)
    W_ij(P) = sum over S subset of P of  |S|! (k - 2 - |S|)! / (k - 1)!
                                          *  prod_{l != i, j, l not in S} z_l

where ``P`` is the on/off pattern of the other ``k - 2`` elements: ``W_ij`` is the weight of
``i`` on the path without ``j`` (symmetric in ``i``, ``j``). The diagonal is
``phi_i - sum_{j != i} Phi_ij``. Per path the table holds the ``k * 2**(k-1)`` SHAP weights
``W_i`` (same layout as above, so an InteractionTables is also a valid WeightTables) followed
by ``k (k-1) / 2 * 2**(k-2)`` pair weights; a row then costs O(k^2) lookups per path
instead of O(k^3) re-EXTENDs::

    values[table_offsets[p] + k * 2**(k-1) + pair(i, j) * 2**(k-2) + P]   (i < j)

``pair(i, j)`` counts the pairs in the order (0,1), (0,2), .., (0,k-1), (1,2), ..; ``P`` is the
on-bit word with bits ``i`` and ``j`` removed. Both weights are Beta integrals,
``t! (m - t)! / (m + 1)! = int_0^1 u^t (1 - u)^(m - t) du``, so
``W(P) = int_0^1 prod_{others l} ((1 - u) z_l + u o_l) du``, a polynomial of degree <= k - 1
in ``u``: Gauss-Legendre quadrature with ``ceil(k / 2)`` nodes integrates it exactly (up to
rounding; every term is positive, so there is no cancellation). Per node, each element's
and each pair's table is the Kronecker product of the other elements' ``(off, on)`` factors,
built by doubling (contiguous, vectorised loops).

The same identity evaluated per row (``shap_interactions(method="quadrature")``, the
default) costs O(k^2 * k/2) flops per row and path in contiguous loops and needs no table;
on CPUs with wide FMA units it is as fast as the lookups for short paths and faster for
longer ones (the lookups are gathers from ``2**k``-sized tables), so interaction tables
default to ``k <= DEFAULT_MAX_K_INTERACTIONS``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .._kernel_switch import KernelTable
from ..errors import DGBoostValueError
from .paths import PathTable

__all__ = [
    "WeightTables",
    "build_tables",
    "table_layout",
    "DEFAULT_MAX_TABLE_BYTES",
    "DEFAULT_MAX_K",
    "table_entries",
    "InteractionTables",
    "build_interaction_tables",
    "interaction_table_entries",
    "DEFAULT_MAX_K_INTERACTIONS",
    "gauss_legendre_01",
]

DEFAULT_MAX_TABLE_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_K = 16
_HARD_MAX_K = 30  # on-bit words are int64 and tables 2**(k-1) long
# Interaction tables pay only for short paths: on a 100-tree depth-8 model (2-core Xeon,
# AVX-512) lookups were on par with the row-time quadrature of ``shap_interactions`` for
# k <= 4 and slower beyond (gathers from 2**k-sized tables vs contiguous FMAs), so
# ``method="table"`` tables the short paths only unless asked for more.
DEFAULT_MAX_K_INTERACTIONS = 4


def table_entries(k):
    """Entries of the weight table of a path with ``k`` non-bias elements (0 for k = 0)."""
    k = np.asarray(k, dtype=np.int64)
    return np.where(k > 0, k * (np.int64(1) << np.maximum(k - 1, 0)), 0)


def interaction_table_entries(k):
    """Entries of the interaction table of a path with ``k`` non-bias elements: the
    ``k * 2**(k-1)`` SHAP weights plus ``k (k-1) / 2 * 2**(k-2)`` pair weights."""
    k = np.asarray(k, dtype=np.int64)
    pairs = np.where(k >= 2, (k * (k - 1) // 2) * (np.int64(1) << np.maximum(k - 2, 0)), 0)
    return table_entries(k) + pairs


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


@dataclass(eq=False)
class InteractionTables(WeightTables):
    """SHAP and pair weight tables for some paths (layout: module docstring). The SHAP part
    has the :class:`WeightTables` layout, so these also serve ``shap_values_table``."""


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
                    b = m - 1 - lvl  # bit of P handled at this level
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


@njit(cache=True, nogil=True, inline="always")
def _kron_add(zero_fraction, s, k, skip_i, skip_j, u, a, tmp, vals, base):
    """vals[base + P] += a * prod over the elements l != skip_i, skip_j of
    ((1 - u) z_l + u P_l), for every pattern P of those elements (bit b = b-th of them):
    the Kronecker product built by doubling, one new highest bit per element."""
    tmp[0] = a
    n = 1
    for l in range(k):
        if l == skip_i or l == skip_j:
            continue
        off_f = (1.0 - u) * zero_fraction[s + l]
        on_f = off_f + u
        for B in range(n):
            x = tmp[B]
            tmp[B + n] = x * on_f
            tmp[B] = x * off_f
        n *= 2
    for B in range(n):
        vals[base + B] += tmp[B]


@njit(cache=True, nogil=True)
def _fill_interaction_path(zero_fraction, s, k, gl_nodes, gl_weights, vals, tmp):
    """One path's interaction table (``vals``, zeroed here) by quadrature: for every
    Gauss-Legendre node u (weight a), add a * prod_{others l} ((1 - u) z_l + u o_l) to each
    element's and each pair's table."""
    n_nodes = (k + 1) // 2  # exact for degree <= 2 n_nodes - 1 >= k - 1
    half = np.int64(1) << (k - 1)
    quarter = half >> 1
    for e in range(vals.shape[0]):
        vals[e] = 0.0
    for t in range(n_nodes):
        u = gl_nodes[n_nodes, t]
        a = gl_weights[n_nodes, t]
        for i in range(k):
            _kron_add(zero_fraction, s, k, i, -1, u, a, tmp, vals, i * half)
        base = k * half
        for i in range(k):
            for j in range(i + 1, k):
                _kron_add(zero_fraction, s, k, i, j, u, a, tmp, vals, base)
                base += quarter


@njit(cache=True, nogil=True)
def _fill_interaction_range(path_offsets, zero_fraction, sel, offsets, gl_nodes, gl_weights, values, lo, hi):
    """Interaction tables of paths sel[lo:hi] (serial)."""
    for q in range(lo, hi):
        p = sel[q]
        s = path_offsets[p] + 1
        k = path_offsets[p + 1] - s
        half = np.int64(1) << (k - 1)
        n_ent = k * half + (k * (k - 1) // 2) * (half >> 1)
        tmp = np.empty(half, dtype=np.float64)
        _fill_interaction_path(zero_fraction, s, k, gl_nodes, gl_weights, values[offsets[q] : offsets[q] + n_ent], tmp)


_FILL_CHUNK = 64  # paths per parallel task


@njit(cache=True, nogil=True, parallel=True)
def _fill_interaction_tables(path_offsets, zero_fraction, sel, offsets, gl_nodes, gl_weights, values):
    """Interaction tables of paths ``sel``, parallel over chunks of paths. The work is in
    serial functions: arrays sliced inside a prange body lose their contiguous type, and
    the fill then runs several times slower."""
    n = sel.shape[0]
    n_chunks = (n + _FILL_CHUNK - 1) // _FILL_CHUNK
    for c in prange(n_chunks):
        _fill_interaction_range(
            path_offsets,
            zero_fraction,
            sel,
            offsets,
            gl_nodes,
            gl_weights,
            values,
            c * _FILL_CHUNK,
            min(n, (c + 1) * _FILL_CHUNK),
        )


_GL_CACHE = {}


def gauss_legendre_01(max_nodes: int):
    """Gauss-Legendre nodes / weights on [0, 1]: row n holds the n-node rule in [:n]."""
    if max_nodes not in _GL_CACHE:
        nodes = np.zeros((max_nodes + 1, max(max_nodes, 1)), dtype=np.float64)
        weights = np.zeros_like(nodes)
        for n in range(1, max_nodes + 1):
            x, w = np.polynomial.legendre.leggauss(n)
            nodes[n, :n] = 0.5 * (x + 1.0)
            weights[n, :n] = 0.5 * w
        _GL_CACHE[max_nodes] = (nodes, weights)
    return _GL_CACHE[max_nodes]


def _select_paths(k, max_k, max_table_bytes, entries_fn):
    """Offsets (-1: no table; 0 for k = 0) and the selected paths in path order: paths with
    1 <= k <= max_k, smallest k first (paths of equal k in path order) until the budget is
    spent."""
    offsets = np.full(k.shape[0], -1, dtype=np.int64)
    offsets[k == 0] = 0
    is_cand = (k >= 1) & (k <= max_k)
    if isinstance(max_table_bytes, (int, np.integer)):
        # the candidates sorted by k, cut where their bytes pass the budget, are every path of
        # the k values that fit whole and the first paths of the next k value: counted per k
        # value, without sorting the paths (O(paths); the budget's integer arithmetic as below)
        counts = np.bincount(k[is_cand], minlength=max_k + 1).astype(np.int64)
        per_path = entries_fn(np.arange(max_k + 1, dtype=np.int64))
        cum = np.cumsum(counts * per_path)  # entries of all paths of k values <= each k
        limit = int(max_table_bytes) // 8  # sum(entries) * 8 <= budget  <=>  sum(entries) <= budget // 8
        over = np.flatnonzero((cum > limit) & (counts > 0))
        if over.size:
            cut = int(over[0])
            below = int(cum[cut - 1]) if cut else 0
            fit = min(int(counts[cut]), max(0, (limit - below) // int(per_path[cut])))
            is_cand &= k < cut
            is_cand[np.flatnonzero(k == cut)[:fit]] = True
        order = np.flatnonzero(is_cand)
        ent = per_path[k[order]]  # entries_fn(k[order]) by lookup: every k here is in 0..max_k
    else:
        cand = np.flatnonzero(is_cand)
        cand = cand[np.argsort(k[cand], kind="stable")]
        cum_bytes = np.cumsum(entries_fn(k[cand])) * 8
        sel = cand[cum_bytes <= max_table_bytes]
        # tables are stored in path order (rows walk the paths in order)
        order = np.sort(sel)
        ent = entries_fn(k[order])
    off = np.zeros(order.shape[0], dtype=np.int64)
    if order.shape[0]:
        np.cumsum(ent[:-1], out=off[1:])
    offsets[order] = off
    return offsets, order.astype(np.int64), off, int(ent.sum())


def _check_limits(max_table_bytes, max_k):
    max_k = int(max_k)
    if not 0 <= max_k <= _HARD_MAX_K:
        raise DGBoostValueError(f"max_k must be in [0, {_HARD_MAX_K}], got {max_k}")
    if max_table_bytes < 0:
        raise DGBoostValueError(f"max_table_bytes must be >= 0, got {max_table_bytes}")
    return max_k


def table_layout(table: PathTable, max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES, max_k: int = DEFAULT_MAX_K):
    """Which paths get a weight table, and where it starts (the CPU and GPU builders share it).

    Returns
    -------
    table_offsets : ndarray of int64, shape (n_paths,)
        Start of each path's table in the values; -1: no table (0 for k = 0).
    selected : ndarray of int64, shape (n_sel,)
        The tabled paths, in path order.
    selected_offsets : ndarray of int64, shape (n_sel,)
        ``table_offsets[selected]``.
    total : int
        Entries of all tables together.
    """
    max_k = _check_limits(max_table_bytes, max_k)
    k = (table.path_lengths - 1).astype(np.int64)
    return _select_paths(k, max_k, max_table_bytes, table_entries)


def build_tables(
    table: PathTable, max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES, max_k: int = DEFAULT_MAX_K
) -> WeightTables:
    """Weight tables for the paths of ``table`` that fit ``max_k`` and the memory budget.

    Paths with ``1 <= k <= max_k`` are candidates; they get tables smallest-k first (the
    best saving per byte) until ``max_table_bytes`` is spent. The others keep offset -1
    and are computed with the per-row (GPUTreeShap) method.
    """
    max_k = _check_limits(max_table_bytes, max_k)
    offsets, order, off, total = table_layout(table, max_table_bytes, max_k)
    values = np.empty(total, dtype=np.float64)
    if order.shape[0]:
        _K._fill_tables(table.path_offsets, table.zero_fraction, order, off, values)
    return WeightTables(table_offsets=offsets, values=values, max_k=max_k, max_table_bytes=int(max_table_bytes))


def build_interaction_tables(
    table: PathTable, max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES, max_k: int = DEFAULT_MAX_K_INTERACTIONS
) -> InteractionTables:
    """SHAP + pair weight tables (module docstring) for the paths that fit the budget.

    Paths with ``1 <= k <= max_k`` are candidates; they get tables smallest-k first until
    ``max_table_bytes`` is spent (one budget for both parts). The others keep offset -1
    and are computed with the per-row O(k^3) method.
    """
    max_k = _check_limits(max_table_bytes, max_k)
    k = (table.path_lengths - 1).astype(np.int64)
    offsets, order, off, total = _select_paths(k, max_k, max_table_bytes, interaction_table_entries)
    values = np.empty(total, dtype=np.float64)
    if order.shape[0]:
        nodes, weights = gauss_legendre_01((int(k[order].max()) + 1) // 2)
        _K._fill_interaction_tables(table.path_offsets, table.zero_fraction, order, off, nodes, weights, values)
    return InteractionTables(table_offsets=offsets, values=values, max_k=max_k, max_table_bytes=int(max_table_bytes))


# the parallel kernels above, run as serial twins while a cold Numba cache fills in the background
# (dgboost/_kernel_switch.py)
_K = KernelTable(sys.modules[__name__])
