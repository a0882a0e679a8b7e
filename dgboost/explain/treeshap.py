"""Exact path-dependent TreeSHAP on a path table (CPU reference, Numba).

Two ways to get the Shapley weight ``W_i`` of element ``i`` of a path (see
:mod:`dgboost.explain.tables`), giving the same numbers:

* ``path`` (GPUTreeShap): per row and path, EXTEND the path's elements (bias first) with
  ``(zero_fraction, one_fraction = on-flag)`` and UNWOUND-SUM each element; O(k^2).
* ``table`` (Fast TreeSHAP v2): look ``W_i`` up in a per-path precomputed table; O(k).
  Paths without a table (too long or over the budget) take the quadrature (``W_i`` as a
  Gauss-Legendre sum of its Beta-integral form, O(k^2 / 2)) up to ``QUADRATURE_MAX_K``
  elements, the path method beyond.

Output layout: float64 ``(n_rows, n_groups, n_features + 1)``; the last column is the bias,
``base_margin[g] + sum over paths of group g of v * prod(zero_fraction)`` (XGBoost puts its
base score into the bias column the same way), so every row sums to the model's margin.
Interaction values: float64 ``(n_rows, n_groups, F + 1, F + 1)``, bias at ``[F, F]``.
Methods: ``quadrature`` (default; the Shapley weights of every element and pair as
Gauss-Legendre sums of the Beta-integral form, per row, O(k^2 * k/2) in contiguous loops),
``table`` (per-path SHAP + pair weight tables, O(k^2) lookups; paths without a table use the
quadrature; see :func:`~dgboost.explain.tables.build_interaction_tables`) and ``path``
(re-EXTEND the path without each element, O(k^3); its UNWIND loses ~1e-9 on paths of
~60 features, where the quadrature stays at ~1e-16).

Rows are processed in blocks (parallel over blocks); inside a block the loop runs path by
path, so a path's elements and its weight table stay in cache for all rows of the block.
``X`` (float32 or float64, NaN = missing) is compared as float32, like the thresholds.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict

import numpy as np
from numba import njit, prange

from .._kernel_switch import KernelTable
from ..errors import DGBoostTypeError, DGBoostValueError
from .paths import PathTable, as_path_table, element_is_on, element_is_on_cat
from .rows import check_rows, prepare_rows
from .tables import (
    DEFAULT_MAX_K,
    DEFAULT_MAX_K_INTERACTIONS,
    DEFAULT_MAX_TABLE_BYTES,
    InteractionTables,
    WeightTables,
    build_interaction_tables,
    build_tables,
    gauss_legendre_01,
)

__all__ = [
    "shap_values_path",
    "shap_values_table",
    "shap_values",
    "shap_interactions",
    "check_rows",
    "prepare_rows",
    "cached_tables",
    "cached_interaction_tables",
    "DEFAULT_BLOCK_ROWS",
    "SLICE_PATHS",
    "INTERACTION_SLICE_PATHS",
    "interaction_slice_paths",
    "QUADRATURE_MAX_K",
]

DEFAULT_BLOCK_ROWS = 256
# SHAP values sum a row's path contributions per slice of this many paths (by path index),
# from zero, and add the slice sums in slice order. A fixed property of the model, not of the
# rows or the device: it lets the GPU explain few rows with the slices in parallel (a thread
# per row alone would leave most of it idle) and still give the CPU's bits. Large enough
# that the extra additions cost nothing (F per row and slice, against 16K paths of work).
SLICE_PATHS = 1 << 14
# The same for interaction values (the quadrature and table methods), in smaller slices: a
# row's work there is ~k/2 times larger, and a GPU wave holds fewer rows. Scaled with the
# square of the row width by interaction_slice_paths: each slice's end adds F (F + 1) / 2
# sums per row, which must stay small against the slice's work.
INTERACTION_SLICE_PATHS = 1 << 12
# Paths without a weight table of at most this many elements get their SHAP values by
# quadrature (_block_quadrature); the GPU kernel holds its nodes in registers up to
# kernels/treeshap_rows.cu SHAP_QUAD_MAX_K, the same number.
QUADRATURE_MAX_K = 16


def interaction_slice_paths(n_features: int) -> int:
    """Paths per slice of interaction values for rows of ``n_features`` columns (both engines)."""
    scale = -(-(int(n_features) ** 2) // 64**2)  # ceil((F / 64) ** 2)
    return INTERACTION_SLICE_PATHS * max(1, scale)


_PROCESS_LOCK = threading.Lock()


# ---------------------------------------------------------------------------------------
# blocks of rows
# ---------------------------------------------------------------------------------------
def _block_rows(n: int, block_rows: int | None, acc_width: int = 1, min_rows: int = 16) -> int:
    """Rows per block: given, else DEFAULT_BLOCK_ROWS capped so the block's float64
    accumulator (``acc_width`` values per row) stays around 1 MiB (>= ``min_rows``)."""
    if block_rows is None:
        cap = (1 << 20) // (8 * max(acc_width, 1))
        block_rows = max(min_rows, min(DEFAULT_BLOCK_ROWS, cap))
    block_rows = int(block_rows)
    if block_rows < 1:
        raise DGBoostValueError(f"block_rows must be >= 1, got {block_rows}")
    return block_rows


def _balanced_block_rows(n: int, block_rows: int | None, acc_width: int = 1, min_rows: int = 16) -> int:
    """:func:`_block_rows`, and when not given, evened out so the blocks split over the
    threads: at least one block per thread (blocks of >= ``min_rows`` rows) and a block
    count that is a multiple of the thread count (200 rows on 2 threads: 2 x 100, not
    167 + 33). Results never depend on the block size."""
    given = block_rows is not None
    block_rows = _block_rows(n, block_rows, acc_width, min_rows)
    if given or n <= 0:
        return block_rows
    import numba

    threads = max(int(numba.get_num_threads()), 1)
    n_blocks = -(-n // block_rows)
    n_blocks = -(-n_blocks // threads) * threads
    n_blocks = max(1, min(n_blocks, -(-n // min_rows)))
    return -(-n // n_blocks)


# ---------------------------------------------------------------------------------------
# shared Numba pieces
# ---------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, inline="always")
def _transpose_block(Xf, r0, nb, Xt):
    """Xt[f, r] = Xf[r0 + r, f] with +inf clamped to the largest float32."""
    F = Xf.shape[1]
    fmax = np.float32(3.4028234663852886e38)
    for r in range(nb):
        for f in range(F):
            x = Xf[r0 + r, f]
            Xt[f, r] = fmax if x > fmax else x


@njit(cache=True, nogil=True)
def _block_on(Xt, feature, lower, upper, miss, cat_off, pool, s, k, nb, on):
    """on[j, r] = 1.0 when element s + j is on for row r of the block, else 0.0 (``cat_off``
    empty: no categorical splits; see :meth:`~dgboost.explain.paths.PathTable.category_arrays`)."""
    for j in range(k):
        xr = Xt[feature[s + j]]
        lo = lower[s + j]
        hi = upper[s + j]
        ms = miss[s + j] != 0
        oj = on[j]
        co = _cat_offset(cat_off, s + j)
        if co < 0:
            for r in range(nb):
                x = xr[r]
                oj[r] = 1.0 if element_is_on(x, lo, hi, ms) else 0.0
        else:
            for r in range(nb):
                oj[r] = 1.0 if element_is_on_cat(xr[r], lo, hi, ms, co, pool) else 0.0


@njit(cache=True, nogil=True, inline="always")
def _cat_offset(cat_off, e):
    """Element e's category set offset, -1 without one (or without categorical splits)."""
    return cat_off[e] if cat_off.shape[0] > 0 else -1


@njit(cache=True, nogil=True)
def _block_on_bits(Xt, feature, lower, upper, miss, cat_off, pool, s, j, nb, bits):
    """bits[r] |= (element s + j is on for row r) << j, for every row of the block."""
    xr = Xt[feature[s + j]]
    lo = lower[s + j]
    hi = upper[s + j]
    ms = miss[s + j] != 0
    co = _cat_offset(cat_off, s + j)
    if co < 0:
        for r in range(nb):
            o = element_is_on(xr[r], lo, hi, ms)
            bits[r] |= np.int64(o) << j
    else:
        for r in range(nb):
            o = element_is_on_cat(xr[r], lo, hi, ms, co, pool)
            bits[r] |= np.int64(o) << j


@njit(cache=True, nogil=True)
def _block_extend(zf, on, s, k, skip, nb, pw):
    """EXTEND (GPUTreeShap / TreeSHAP) the bias element then elements s..s+k-1, except local
    index ``skip`` (-1: none), for every row of the block at once: pw[0..d, r] are the
    path weights of row r. Returns the final depth d."""
    for r in range(nb):
        pw[0, r] = 1.0
    d = 0
    for j in range(k):
        if j == skip:
            continue
        d += 1
        z = zf[s + j]
        inv = 1.0 / (d + 1)
        oj = on[j]
        top = pw[d]
        for r in range(nb):
            top[r] = 0.0
        for i in range(d - 1, -1, -1):
            c1 = (i + 1) * inv
            c2 = z * (d - i) * inv
            lo_ = pw[i]
            hi_ = pw[i + 1]
            for r in range(nb):
                a = lo_[r]
                hi_[r] += oj[r] * a * c1
                lo_[r] = a * c2
    return d


@njit(cache=True, nogil=True)
def _block_unwound(pw, d, z, oi, nb, nxt, t1, t0, w):
    """w[r] = UNWOUND-SUM at depth d of the element (z, oi[r]) for every row of the block.

    Both branches of TreeSHAP's UnwoundPathSum (one fraction 1 / 0) run for all rows and
    the right one is selected, so the loops have no branches; z = 0 with oi = 0 gives 0.
    """
    zinv = 1.0 / z if z != 0.0 else 0.0
    top = pw[d]
    for r in range(nb):
        nxt[r] = top[r]
        t1[r] = 0.0
        t0[r] = 0.0
    for j in range(d - 1, -1, -1):
        # reciprocals times, not divisions: the GPU kernel reads the same 1/n from a table
        # (kernels/treeshap_rows.cu), so both engines round alike without a division per row
        c1 = (d + 1.0) * (1.0 / (j + 1))
        c2 = z * (d - j) * (1.0 / (d + 1.0))
        c0 = zinv * (d + 1.0) * (1.0 / (d - j))
        pj = pw[j]
        for r in range(nb):
            tmp = nxt[r] * c1
            t1[r] += tmp
            nxt[r] = pj[r] - tmp * c2
            t0[r] += pj[r] * c0
    for r in range(nb):
        w[r] = t1[r] if oi[r] != 0.0 else t0[r]


# ---------------------------------------------------------------------------------------
# SHAP values: path and table methods in one kernel (per path: table if it has one)
# ---------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, inline="always")
def _flush_slice(acc, out, r0, nb):
    """out[r0 + r, g, f] += acc[g, f, r], then acc = 0: the end of a slice of paths."""
    n_groups, F = acc.shape[0], acc.shape[1]
    for r in range(nb):
        for g in range(n_groups):
            for f in range(F):
                out[r0 + r, g, f] += acc[g, f, r]
                acc[g, f, r] = 0.0


@njit(cache=True, nogil=True)
def _block_quadrature(zf, feature, on, s, k, nb, gl_nodes, gl_weights, A, w, acc, g, v):
    """acc[g, feature_l, r] += v (o_l - z_l) W_l for every element l of the path at ``s``
    (k elements) and row r of the block, by Gauss-Legendre quadrature:
    ``W_l = int_0^1 prod_{m != l} f_m(u) du`` with ``f_m = (1 - u) z_m + u o_m`` is a
    polynomial of degree k - 1, exact with
    ``nq = ceil(k / 2)`` nodes. A[t, r] = a_t prod_m f_m(u_t); then per element
    ``v sum_t A[t] g_l(u_t)``, ``g_l = (o_l - z_l) / f_l``: (1 - z) / ((1 - u) z + u) when
    on, -1 / (1 - u) when off (a zero z divides nothing). ``A``: (>= nq, nb) scratch, ``w``:
    (nb,) scratch. The GPU (kernels/treeshap_rows.cu, shap_rows) runs the same operations
    per row."""
    nq = (k + 1) // 2
    for t in range(nq):
        u = gl_nodes[nq, t]
        At = A[t]
        a0 = gl_weights[nq, t]
        for r in range(nb):
            At[r] = a0
        for m in range(k):
            f0 = (1.0 - u) * zf[s + m]
            om = on[m]
            for r in range(nb):
                At[r] *= f0 + u * om[r]
    for m in range(k):
        z = zf[s + m]
        om = on[m]
        for r in range(nb):
            w[r] = 0.0
        for t in range(nq):
            u = gl_nodes[nq, t]
            g_on = (1.0 - z) / ((1.0 - u) * z + u)
            g_off = -1.0 / (1.0 - u)
            At = A[t]
            for r in range(nb):
                w[r] += At[r] * (g_on if om[r] != 0.0 else g_off)
        am = acc[g, feature[s + m]]
        for r in range(nb):
            am[r] += v * w[r]


@njit(cache=True, nogil=True, parallel=True)
def _shap_kernel(
    Xf,
    path_offsets,
    feature,
    lower,
    upper,
    miss,
    cat_off,
    pool,
    zf,
    path_v,
    path_group,
    tab_off,
    tab_vals,
    n_groups,
    max_len,
    block_rows,
    slice_paths,
    quad_max_k,
    gl_nodes,
    gl_weights,
    out,
):
    """Accumulate SHAP values into out[:, :, :F] (bias column untouched).

    Per block of rows: Xt (F, nb) float32 transposed rows; acc (G, F, nb) float64; per path
    the innermost loops run over the rows of the block (contiguous, SIMD-friendly). A path
    takes its weight table if it has one, else the quadrature (``_block_quadrature``) if it
    has at most ``quad_max_k`` elements, else EXTEND / UNWOUND-SUM. The
    paths are summed per slice of ``slice_paths`` paths (by path index), each slice's sums
    added to ``out`` in slice order: the GPU computes the slices of few rows in parallel and
    adds them in that order, so both devices give the same bits (see SLICE_PATHS).
    """
    n, F = Xf.shape
    n_paths = path_offsets.shape[0] - 1
    n_blocks = (n + block_rows - 1) // block_rows
    for b in prange(n_blocks):
        r0 = b * block_rows
        nb = min(n, r0 + block_rows) - r0
        Xt = np.empty((F, nb), dtype=np.float32)
        _transpose_block(Xf, r0, nb, Xt)
        acc = np.zeros((n_groups, F, nb), dtype=np.float64)
        bits = np.empty(nb, dtype=np.int64)
        on = np.empty((max_len, nb), dtype=np.float64)
        pw = np.empty((max_len + 1, nb), dtype=np.float64)
        nxt = np.empty(nb, dtype=np.float64)
        t1 = np.empty(nb, dtype=np.float64)
        t0 = np.empty(nb, dtype=np.float64)
        w = np.empty(nb, dtype=np.float64)
        A = np.empty((gl_nodes.shape[1], nb), dtype=np.float64)
        for p in range(n_paths):
            if p > 0 and p % slice_paths == 0:
                _flush_slice(acc, out, r0, nb)
            s = path_offsets[p] + 1
            k = path_offsets[p + 1] - s
            if k == 0:
                continue
            g = path_group[p]
            v = path_v[p]
            toff = tab_off[p]
            if toff >= 0:
                # table method: on-bit word per row, then one lookup per element
                for r in range(nb):
                    bits[r] = 0
                for j in range(k):
                    _block_on_bits(Xt, feature, lower, upper, miss, cat_off, pool, s, j, nb, bits)
                half = np.int64(1) << (k - 1)
                for i in range(k):
                    a = acc[g, feature[s + i]]
                    z = zf[s + i]
                    base = toff + i * half
                    low = (np.int64(1) << i) - 1
                    von = v * (1.0 - z)
                    voff = -v * z
                    for r in range(nb):
                        B = bits[r]
                        P = (B & low) | ((B >> (i + 1)) << i)
                        c = von if (B >> i) & 1 else voff
                        a[r] += c * tab_vals[base + P]
            elif k <= quad_max_k:
                _block_on(Xt, feature, lower, upper, miss, cat_off, pool, s, k, nb, on)
                _block_quadrature(zf, feature, on, s, k, nb, gl_nodes, gl_weights, A, w, acc, g, v)
            else:
                # path method (GPUTreeShap): EXTEND all elements, UNWOUND-SUM each one
                _block_on(Xt, feature, lower, upper, miss, cat_off, pool, s, k, nb, on)
                d = _block_extend(zf, on, s, k, -1, nb, pw)
                for i in range(k):
                    z = zf[s + i]
                    oi = on[i]
                    _block_unwound(pw, d, z, oi, nb, nxt, t1, t0, w)
                    a = acc[g, feature[s + i]]
                    for r in range(nb):
                        a[r] += v * (oi[r] - z) * w[r]
        _flush_slice(acc, out, r0, nb)


_PROCESS_TABLES: "OrderedDict[tuple, WeightTables]" = OrderedDict()  # fingerprint -> tables, LRU
_PROCESS_TABLES_MAX = 4


def cached_tables(
    table: PathTable, max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES, max_k: int = DEFAULT_MAX_K
) -> WeightTables:
    """:func:`build_tables` once per (table, budget, max_k) in a process.

    Kept on the table (not pickled) and in a small per-process cache keyed by the table's
    fingerprint: a Dask worker that receives copies of one explainer (one per task, e.g. in
    ``ddf.map_partitions(explainer.shap_frame)``) builds the tables once.
    """
    cache = table.__dict__.setdefault("_weight_tables", {})
    key = (int(max_table_bytes), int(max_k))
    if key not in cache:
        process_key = (table.fingerprint,) + key
        with _PROCESS_LOCK:
            tables = _PROCESS_TABLES.get(process_key)
            if tables is not None:
                _PROCESS_TABLES.move_to_end(process_key)
        if tables is None:
            tables = build_tables(table, max_table_bytes=max_table_bytes, max_k=max_k)
            with _PROCESS_LOCK:
                _PROCESS_TABLES[process_key] = tables
                while len(_PROCESS_TABLES) > _PROCESS_TABLES_MAX:
                    _PROCESS_TABLES.popitem(last=False)
        cache[key] = tables
    return cache[key]


def _bias(table: PathTable) -> np.ndarray:
    return table.base_margin + table.expected_value()


def _run_shap(table: PathTable, X, tab_off, tab_vals, block_rows, quad_max_k: int):
    Xf = prepare_rows(X, table.n_features)
    n, F = Xf.shape
    out = np.zeros((n, table.n_groups, F + 1), dtype=np.float64)
    if n == 0:
        return out
    gl_nodes, gl_weights = gauss_legendre_01(max(1, (quad_max_k + 1) // 2))
    _K._shap_kernel(
        Xf,
        table.path_offsets,
        table.feature,
        table.lower,
        table.upper,
        table.is_missing_branch,
        *table.category_arrays(),
        table.zero_fraction,
        table.path_v,
        table.path_group,
        tab_off,
        tab_vals,
        table.n_groups,
        max(table.max_length, 1),
        _block_rows(n, block_rows, table.n_groups * F),
        SLICE_PATHS,
        quad_max_k,
        gl_nodes,
        gl_weights,
        out,
    )
    out[:, :, F] = _bias(table)
    return out


def shap_values_path(model, X, *, block_rows: int | None = None) -> np.ndarray:
    """SHAP values with per-row EXTEND / UNWOUND-SUM (GPUTreeShap); ``(n, n_groups, F + 1)``.

    ``model``: an Ensemble, a :class:`PathTable` or a PackedTable. ``X``: (n, F) float32 or
    float64 (NaN = missing), F >= the model's feature count. Bias (base margin included) last.
    """
    table = as_path_table(model)
    no_tab = np.full(table.n_paths, -1, dtype=np.int64)
    return _run_shap(table, X, no_tab, np.empty(0, np.float64), block_rows, 0)


def shap_values_table(
    model,
    X,
    *,
    tables: WeightTables | None = None,
    max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES,
    max_k: int = DEFAULT_MAX_K,
    block_rows: int | None = None,
) -> np.ndarray:
    """SHAP values with precomputed weight tables (Fast TreeSHAP v2); ``(n, n_groups, F + 1)``.

    ``tables`` from :func:`~dgboost.explain.tables.build_tables`; when not given they are
    built from ``max_table_bytes`` / ``max_k`` and cached on the PathTable (pass the same
    PathTable, not an Ensemble, to reuse them across calls). Paths without a table (too
    long, or over the budget) take the Gauss-Legendre quadrature (at most
    ``QUADRATURE_MAX_K`` elements: O(k^2 / 2) per row, about a third of EXTEND / UNWOUND's
    work) or the per-row path method; the results equal :func:`shap_values_path` up to
    rounding (1e-9 is tested).
    """
    table = as_path_table(model)
    if tables is None:
        tables = cached_tables(table, max_table_bytes, max_k)
    if tables.table_offsets.shape[0] != table.n_paths:
        raise DGBoostValueError(
            "weight tables were built for a different path table "
            f"({tables.table_offsets.shape[0]} paths, table has "
            f"{table.n_paths})"
        )
    return _run_shap(table, X, tables.table_offsets, tables.values, block_rows, QUADRATURE_MAX_K)


def shap_values(model, X, *, method: str = "table", **kwargs) -> np.ndarray:
    """Dispatch to :func:`shap_values_table` (``"table"``) or :func:`shap_values_path`."""
    if method == "table":
        return shap_values_table(model, X, **kwargs)
    if method == "path":
        return shap_values_path(model, X, **kwargs)
    raise DGBoostValueError(f"unknown SHAP method {method!r}; expected 'table' or 'path'")


# ---------------------------------------------------------------------------------------
# interaction values, O(T L D^3): condition on each feature present on the path
# ---------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, parallel=True)
def _interaction_kernel(
    Xf,
    path_offsets,
    feature,
    lower,
    upper,
    miss,
    cat_off,
    pool,
    zf,
    path_v,
    path_group,
    n_groups,
    max_len,
    block_rows,
    out,
):
    """Accumulate interaction values into out[:, :, :F, :F] (bias untouched).

    Per path and block: SHAP values on the diagonal, then for every element j the path
    without j is re-EXTENDed and each other element i gets
    ``v/2 * (o_j - z_j) * (o_i - z_i) * W_i(path without j)`` at [f_j, f_i], subtracted
    from [f_j, f_j]. Block accumulator acc (G, F, F, nb).
    """
    n, F = Xf.shape
    n_paths = path_offsets.shape[0] - 1
    n_blocks = (n + block_rows - 1) // block_rows
    for b in prange(n_blocks):
        r0 = b * block_rows
        nb = min(n, r0 + block_rows) - r0
        Xt = np.empty((F, nb), dtype=np.float32)
        _transpose_block(Xf, r0, nb, Xt)
        acc = np.zeros((n_groups, F, F, nb), dtype=np.float64)
        on = np.empty((max_len, nb), dtype=np.float64)
        pw = np.empty((max_len + 1, nb), dtype=np.float64)
        nxt = np.empty(nb, dtype=np.float64)
        t1 = np.empty(nb, dtype=np.float64)
        t0 = np.empty(nb, dtype=np.float64)
        w = np.empty(nb, dtype=np.float64)
        cj = np.empty(nb, dtype=np.float64)
        for p in range(n_paths):
            s = path_offsets[p] + 1
            k = path_offsets[p + 1] - s
            if k == 0:
                continue
            g = path_group[p]
            v = path_v[p]
            _block_on(Xt, feature, lower, upper, miss, cat_off, pool, s, k, nb, on)
            # main effects: plain SHAP values on the diagonal
            d = _block_extend(zf, on, s, k, -1, nb, pw)
            for i in range(k):
                z = zf[s + i]
                oi = on[i]
                _block_unwound(pw, d, z, oi, nb, nxt, t1, t0, w)
                fi = feature[s + i]
                a = acc[g, fi, fi]
                for r in range(nb):
                    a[r] += v * (oi[r] - z) * w[r]
            if k < 2:
                continue
            # element j conditioned on (weight o_j) minus off (weight z_j), halved
            for j in range(k):
                d = _block_extend(zf, on, s, k, j, nb, pw)
                fj = feature[s + j]
                zj = zf[s + j]
                oj = on[j]
                for r in range(nb):
                    cj[r] = 0.5 * v * (oj[r] - zj)
                diag = acc[g, fj, fj]
                for i in range(k):
                    if i == j:
                        continue
                    z = zf[s + i]
                    oi = on[i]
                    _block_unwound(pw, d, z, oi, nb, nxt, t1, t0, w)
                    a = acc[g, fj, feature[s + i]]
                    for r in range(nb):
                        val = cj[r] * (oi[r] - z) * w[r]
                        a[r] += val
                        diag[r] -= val
        for r in range(nb):
            for g in range(n_groups):
                for f1 in range(F):
                    for f2 in range(F):
                        out[r0 + r, g, f1, f2] += acc[g, f1, f2, r]


@njit(cache=True, nogil=True, inline="always")
def _add_node_dot(H, G, hl, gm, stride, nq, nb, acc, ai):
    """acc[ai, r] += sum_t H[hl + t * stride, r] * G[gm + t * stride, r] (the nodes four
    at a time, one pass over the accumulator row)."""
    t = 0
    while t < nq:
        h = hl + t * stride
        g = gm + t * stride
        rem = nq - t
        if rem >= 4:
            h1, h2, h3 = h + stride, h + 2 * stride, h + 3 * stride
            g1, g2, g3 = g + stride, g + 2 * stride, g + 3 * stride
            for r in range(nb):
                acc[ai, r] += (H[h, r] * G[g, r] + H[h1, r] * G[g1, r]) + (H[h2, r] * G[g2, r] + H[h3, r] * G[g3, r])
            t += 4
        elif rem == 3:
            h1, h2 = h + stride, h + 2 * stride
            g1, g2 = g + stride, g + 2 * stride
            for r in range(nb):
                acc[ai, r] += H[h, r] * G[g, r] + H[h1, r] * G[g1, r] + H[h2, r] * G[g2, r]
            t += 3
        elif rem == 2:
            h1 = h + stride
            g1 = g + stride
            for r in range(nb):
                acc[ai, r] += H[h, r] * G[g, r] + H[h1, r] * G[g1, r]
            t += 2
        else:
            for r in range(nb):
                acc[ai, r] += H[h, r] * G[g, r]
            t += 1


@njit(cache=True, nogil=True)
def _flush_interaction_slice(acc, total):
    """total += acc, then acc = 0, over the diagonal and upper triangle (the entries used)."""
    n_groups, F, nb = acc.shape[0], acc.shape[1], acc.shape[3]
    for g in range(n_groups):
        for f1 in range(F):
            for f2 in range(f1, F):
                a = acc[g, f1, f2]
                t = total[g, f1, f2]
                for r in range(nb):
                    t[r] += a[r]
                    a[r] = 0.0


@njit(cache=True, nogil=True)
def _interaction_block(
    Xf,
    r0,
    nb,
    path_offsets,
    feature,
    lower,
    upper,
    miss,
    cat_off,
    pool,
    zf,
    path_v,
    path_group,
    tab_off,
    tab_vals,
    gl_nodes,
    gl_weights,
    n_groups,
    max_len,
    slice_paths,
    out,
):
    """Write interaction values of rows r0 .. r0 + nb - 1 into out[:, :, :F, :F] (bias
    untouched).

    Block accumulator acc (G, F, F, nb): the diagonal holds the SHAP values, the upper
    triangle [a, b] (a < b) the off-diagonal value [a, b] = [b, a]; it is added to ``total``
    at the end of every slice of ``slice_paths`` paths (interaction_slice_paths, as the GPU
    sums them), and at the end of the block ``total`` is mirrored and the diagonal becomes
    phi_a - sum_{b != a} [a, b]. For elements
    i != j of a path the off-diagonal term is ``v/2 (o_i - z_i)(o_j - z_j) W_ij`` with
    ``W_ij = int_0^1 prod_{l != i, j} ((1 - u) z_l + u o_l) du`` (module docstring of
    :mod:`dgboost.explain.tables`); the SHAP value ``v (o_i - z_i) W_i`` likewise with one
    factor left out. Per path:

    * with a table (``tab_off[p] >= 0``): the row's on-bit word B, then one lookup of
      W_i(B without bit i) per element and of W_ij(B without bits i, j) per pair;
    * without: Gauss-Legendre quadrature at row time with ``nq = ceil(k/2)`` nodes (exact
      for the degree k - 1 polynomials): per node u (weight a) and row,
      ``A = v/2 a prod_l f_l`` with ``f_l = (1 - u) z_l + u o_l`` and
      ``g_l = (o_l - z_l) / f_l`` (= (1 - z_l) / ((1 - u) z_l + u) when on, -1 / (1 - u)
      when off, so nothing is divided by zero), ``H_l = A g_l``; then
      SHAP value ``2 sum_q H_l`` and pair term ``sum_q H_i g_j``: O(k^2 nq) per row, all
      loops contiguous over the rows of the block.
    """
    F = Xf.shape[1]
    n_paths = path_offsets.shape[0] - 1
    Xt = np.empty((F, nb), dtype=np.float32)
    _transpose_block(Xf, r0, nb, Xt)
    acc = np.zeros((n_groups, F, F, nb), dtype=np.float64)
    total = np.zeros((n_groups, F, F, nb), dtype=np.float64)
    max_nq = (max_len + 1) // 2
    bits = np.empty(nb, dtype=np.int64)
    pi = np.empty((max_len, nb), dtype=np.int64)
    cz = np.empty((max_len, nb), dtype=np.float64)
    hc = np.empty(nb, dtype=np.float64)
    on = np.empty((max_len, nb), dtype=np.float64)
    acc2 = acc.reshape((n_groups * F * F, nb))  # the same memory, one row per (g, f1, f2)
    A = np.empty(nb, dtype=np.float64)
    Gq = np.empty((max_nq * max_len, nb), dtype=np.float64)  # row t * max_len + l
    Hq = np.empty((max_nq * max_len, nb), dtype=np.float64)
    for p in range(n_paths):
        if p > 0 and p % slice_paths == 0:
            _flush_interaction_slice(acc, total)
        s = path_offsets[p] + 1
        k = path_offsets[p + 1] - s
        if k == 0:
            continue
        g = path_group[p]
        v = path_v[p]
        toff = tab_off[p]
        if toff >= 0:
            # on-bit word and (o_j - z_j) per row
            for r in range(nb):
                bits[r] = 0
            for j in range(k):
                _block_on_bits(Xt, feature, lower, upper, miss, cat_off, pool, s, j, nb, bits)
                z = zf[s + j]
                c = cz[j]
                for r in range(nb):
                    c[r] = np.float64((bits[r] >> j) & 1) - z
            # main effects: SHAP values on the diagonal; keep B without bit i
            gF = g * F
            half = np.int64(1) << (k - 1)
            for i in range(k):
                fi = feature[s + i]
                ai = (gF + fi) * F + fi
                base = toff + i * half
                low = (np.int64(1) << i) - 1
                for r in range(nb):
                    B = bits[r]
                    P = (B & low) | ((B >> (i + 1)) << i)
                    pi[i, r] = P
                    acc2[ai, r] += v * cz[i, r] * tab_vals[base + P]
            # pairs i < j: (B without bit i) without bit j - 1
            quarter = half >> 1
            base = toff + k * half
            hv = 0.5 * v
            for i in range(k - 1):
                fi = feature[s + i]
                for r in range(nb):
                    hc[r] = hv * cz[i, r]
                for j in range(i + 1, k):
                    fj = feature[s + j]
                    ai = (gF + fi) * F + fj if fi < fj else (gF + fj) * F + fi
                    jm = j - 1
                    low = (np.int64(1) << jm) - 1
                    for r in range(nb):
                        Q = pi[i, r]
                        P = (Q & low) | ((Q >> j) << jm)
                        acc2[ai, r] += hc[r] * cz[j, r] * tab_vals[base + P]
                    base += quarter
        else:
            _block_on(Xt, feature, lower, upper, miss, cat_off, pool, s, k, nb, on)
            nq = (k + 1) // 2
            hv = 0.5 * v
            for t in range(nq):
                u = gl_nodes[nq, t]
                a0 = gl_weights[nq, t] * hv
                g_off = -1.0 / (1.0 - u)
                for r in range(nb):
                    A[r] = a0
                for l in range(k):
                    z = zf[s + l]
                    f0 = (1.0 - u) * z
                    g_on = (1.0 - z) / (f0 + u)
                    row = t * max_len + l
                    for r in range(nb):
                        ol = on[l, r]  # exactly 0.0 or 1.0: both products select exactly
                        A[r] *= f0 + u * ol
                        Gq[row, r] = g_on * ol + g_off * (1.0 - ol)
                for l in range(k):
                    row = t * max_len + l
                    for r in range(nb):
                        Hq[row, r] = A[r] * Gq[row, r]
            gF = g * F
            for l in range(k):
                fl = feature[s + l]
                ai = (gF + fl) * F + fl
                for t in range(nq):
                    row = t * max_len + l
                    for r in range(nb):
                        acc2[ai, r] += 2.0 * Hq[row, r]
            for l in range(k - 1):
                fl = feature[s + l]
                for m in range(l + 1, k):
                    fm = feature[s + m]
                    ai = (gF + fl) * F + fm if fl < fm else (gF + fm) * F + fl
                    _add_node_dot(Hq, Gq, l, m, max_len, nq, nb, acc2, ai)
    _flush_interaction_slice(acc, total)
    rs = np.empty(F, dtype=np.float64)
    for r in range(nb):
        for g in range(n_groups):
            o = out[r0 + r, g]
            for f in range(F):
                rs[f] = 0.0
            for f1 in range(F):
                for f2 in range(f1 + 1, F):
                    val = total[g, f1, f2, r]
                    o[f1, f2] = val
                    o[f2, f1] = val
                    rs[f1] += val
                    rs[f2] += val
            for f in range(F):
                o[f, f] = total[g, f, f, r] - rs[f]


@njit(cache=True, nogil=True, parallel=True)
def _interaction_table_kernel(
    Xf,
    path_offsets,
    feature,
    lower,
    upper,
    miss,
    cat_off,
    pool,
    zf,
    path_v,
    path_group,
    tab_off,
    tab_vals,
    gl_nodes,
    gl_weights,
    n_groups,
    max_len,
    block_rows,
    slice_paths,
    out,
):
    """:func:`_interaction_block` for every block of rows, in parallel (the block is a
    separate serial function: code inside a prange body compiles to slower loops)."""
    n = Xf.shape[0]
    n_blocks = (n + block_rows - 1) // block_rows
    for b in prange(n_blocks):
        r0 = b * block_rows
        _interaction_block(
            Xf,
            r0,
            min(n, r0 + block_rows) - r0,
            path_offsets,
            feature,
            lower,
            upper,
            miss,
            cat_off,
            pool,
            zf,
            path_v,
            path_group,
            tab_off,
            tab_vals,
            gl_nodes,
            gl_weights,
            n_groups,
            max_len,
            slice_paths,
            out,
        )


def cached_interaction_tables(
    table: PathTable, max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES, max_k: int = DEFAULT_MAX_K_INTERACTIONS
) -> InteractionTables:
    """:func:`build_interaction_tables` once per (table, budget, max_k); kept on the table
    next to the SHAP weight tables (not pickled)."""
    cache = table.__dict__.setdefault("_weight_tables", {})
    key = ("interactions", int(max_table_bytes), int(max_k))
    if key not in cache:
        cache[key] = build_interaction_tables(table, max_table_bytes=max_table_bytes, max_k=max_k)
    return cache[key]


def shap_interactions(
    model,
    X,
    *,
    block_rows: int | None = None,
    method: str = "quadrature",
    tables: InteractionTables | None = None,
    max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES,
    max_k: int = DEFAULT_MAX_K_INTERACTIONS,
) -> np.ndarray:
    """SHAP interaction values (shap / XGBoost definition); ``(n, n_groups, F + 1, F + 1)``.

    Off-diagonal ``[i, j]``: half the difference of feature ``j``'s SHAP value with feature
    ``i`` conditioned on and off; diagonal ``[i, i]``: the SHAP value of ``i`` minus the
    off-diagonals of row ``i``. Bias (base margin included) at ``[F, F]``; every matrix sums to
    the margin, and row sums give the SHAP values.

    Methods (all exact; they agree up to rounding, 1e-9 is tested):

    * ``"quadrature"`` (default): per row and path, the Shapley weights of every element and
      pair as Gauss-Legendre sums (``ceil(k/2)`` nodes), O(k^2 * k/2) flops in contiguous
      loops; no precomputation, no memory.
    * ``"table"``: per-path weight tables (``tables`` from
      :func:`~dgboost.explain.tables.build_interaction_tables`; when not given they are built
      from ``max_table_bytes`` / ``max_k`` and cached on the PathTable, so pass the same
      PathTable to reuse them), O(k^2) lookups per row and path; paths without a table
      (``k > max_k`` or over the budget) use the quadrature.
    * ``"path"``: re-EXTEND the path without each element (GPUTreeShap), O(k^3).
    """
    table = as_path_table(model)
    if method not in ("quadrature", "table", "path"):
        raise DGBoostValueError(f"unknown interaction method {method!r}; expected 'quadrature', 'table' or 'path'")
    Xf = prepare_rows(X, table.n_features)
    n, F = Xf.shape
    G = table.n_groups
    out = np.zeros((n, G, F + 1, F + 1), dtype=np.float64)
    if method == "path":
        if n:
            _K._interaction_kernel(
                Xf,
                table.path_offsets,
                table.feature,
                table.lower,
                table.upper,
                table.is_missing_branch,
                *table.category_arrays(),
                table.zero_fraction,
                table.path_v,
                table.path_group,
                G,
                max(table.max_length, 1),
                _block_rows(n, block_rows, G * F * F, min_rows=4),
                out,
            )
        out[:, :, F, F] = _bias(table)
        return out
    if method == "quadrature":
        tab_off = np.full(table.n_paths, -1, dtype=np.int64)
        tab_vals = np.empty(0, dtype=np.float64)
    else:
        if tables is None:
            tables = cached_interaction_tables(table, max_table_bytes, max_k)
        if not isinstance(tables, InteractionTables):
            raise DGBoostTypeError(
                f"tables must be InteractionTables (build_interaction_tables), got {type(tables).__name__}"
            )
        if tables.table_offsets.shape[0] != table.n_paths:
            raise DGBoostValueError(
                "interaction tables were built for a different path table "
                f"({tables.table_offsets.shape[0]} paths, table has "
                f"{table.n_paths})"
            )
        tab_off, tab_vals = tables.table_offsets, tables.values
    if n:
        max_len = max(table.max_length, 1)
        gl_nodes, gl_weights = gauss_legendre_01((max_len + 1) // 2)
        _K._interaction_table_kernel(
            Xf,
            table.path_offsets,
            table.feature,
            table.lower,
            table.upper,
            table.is_missing_branch,
            *table.category_arrays(),
            table.zero_fraction,
            table.path_v,
            table.path_group,
            tab_off,
            tab_vals,
            gl_nodes,
            gl_weights,
            G,
            max_len,
            _balanced_block_rows(n, block_rows, 2 * G * F * F, min_rows=4),  # acc + total
            interaction_slice_paths(F),
            out,
        )
    out[:, :, F, F] = _bias(table)
    return out


# the parallel kernels above, run as serial twins while a cold Numba cache fills in the background
# (dgboost/_kernel_switch.py)
_K = KernelTable(sys.modules[__name__])
