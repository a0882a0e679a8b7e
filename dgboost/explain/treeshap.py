"""Exact path-dependent TreeSHAP on a path table (CPU reference, Numba).

Two ways to get the Shapley weight ``W_i`` of element ``i`` of a path (see
:mod:`dgboost.explain.tables`), giving the same numbers:

* ``path`` (GPUTreeShap): per row and path, EXTEND the path's elements (bias first) with
  ``(zero_fraction, one_fraction = on-flag)`` and UNWOUND-SUM each element; O(k^2).
* ``table`` (Fast TreeSHAP v2): look ``W_i`` up in a per-path precomputed table; O(k).

Output layout: float64 ``(n_rows, n_groups, n_features + 1)``; the last column is the bias,
``base_margin[g] + sum over paths of group g of v * prod(zero_fraction)`` (XGBoost puts its
base score into the bias column the same way), so every row sums to the model's margin.
Interaction values: float64 ``(n_rows, n_groups, F + 1, F + 1)``, bias at ``[F, F]``.

Rows are processed in blocks (parallel over blocks); inside a block the loop runs path by
path, so a path's elements and its weight table stay in cache for all rows of the block.
``X`` (float32 or float64, NaN = missing) is compared as float32, like the thresholds.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..errors import DGBoostTypeError, DGBoostValueError
from .paths import PathTable, as_path_table
from .tables import DEFAULT_MAX_K, DEFAULT_MAX_TABLE_BYTES, WeightTables, build_tables

__all__ = ["shap_values_path", "shap_values_table", "shap_values", "shap_interactions",
           "shap_values_interventional", "prepare_rows", "cached_tables", "DEFAULT_BLOCK_ROWS"]

DEFAULT_BLOCK_ROWS = 256


# ---------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------
def prepare_rows(X, n_features: int) -> np.ndarray:
    """``X`` as a C-contiguous float32 matrix with at least ``n_features`` columns."""
    if hasattr(X, "to_numpy"):  # pandas / polars
        X = X.to_numpy()
    X = np.asarray(X)
    if not (np.issubdtype(X.dtype, np.integer) or np.issubdtype(X.dtype, np.floating)
            or X.dtype == np.bool_):
        raise DGBoostTypeError(f"X must be numeric, got dtype {X.dtype}")
    if X.ndim != 2:
        raise DGBoostValueError(f"X must be 2-dimensional (rows, features), got shape {X.shape}")
    if X.shape[1] < n_features:
        raise DGBoostValueError(f"X has {X.shape[1]} columns but the model splits on feature "
                                f"{n_features - 1}; expected at least {n_features} columns")
    return np.ascontiguousarray(X, dtype=np.float32)


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
def _block_on(Xt, feature, lower, upper, miss, s, k, nb, on):
    """on[j, r] = 1.0 when element s + j is on for row r of the block, else 0.0."""
    for j in range(k):
        xr = Xt[feature[s + j]]
        lo = lower[s + j]
        hi = upper[s + j]
        ms = miss[s + j] != 0
        oj = on[j]
        for r in range(nb):
            x = xr[r]
            oj[r] = 1.0 if ((x >= lo) & (x < hi)) | ((x != x) & ms) else 0.0


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
        c1 = (d + 1.0) / (j + 1)
        c2 = z * (d - j) / (d + 1.0)
        c0 = zinv * (d + 1.0) / (d - j)
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
@njit(cache=True, nogil=True, parallel=True)
def _shap_kernel(Xf, path_offsets, feature, lower, upper, miss, zf, path_v, path_group,
                 tab_off, tab_vals, n_groups, max_len, block_rows, out):
    """Accumulate SHAP values into out[:, :, :F] (bias column untouched).

    Per block of rows: Xt (F, nb) float32 transposed rows; acc (G, F, nb) float64; per path
    the innermost loops run over the rows of the block (contiguous, SIMD-friendly).
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
        for p in range(n_paths):
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
                    xr = Xt[feature[s + j]]
                    lo = lower[s + j]
                    hi = upper[s + j]
                    ms = miss[s + j] != 0
                    for r in range(nb):
                        x = xr[r]
                        o = ((x >= lo) & (x < hi)) | ((x != x) & ms)
                        bits[r] |= np.int64(o) << j
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
            else:
                # path method (GPUTreeShap): EXTEND all elements, UNWOUND-SUM each one
                _block_on(Xt, feature, lower, upper, miss, s, k, nb, on)
                d = _block_extend(zf, on, s, k, -1, nb, pw)
                for i in range(k):
                    z = zf[s + i]
                    oi = on[i]
                    _block_unwound(pw, d, z, oi, nb, nxt, t1, t0, w)
                    a = acc[g, feature[s + i]]
                    for r in range(nb):
                        a[r] += v * (oi[r] - z) * w[r]
        for r in range(nb):
            for g in range(n_groups):
                for f in range(F):
                    out[r0 + r, g, f] += acc[g, f, r]


def cached_tables(table: PathTable, max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES,
                  max_k: int = DEFAULT_MAX_K) -> WeightTables:
    """:func:`build_tables` once per (table, budget, max_k); kept on the table (not pickled)."""
    cache = table.__dict__.setdefault("_weight_tables", {})
    key = (int(max_table_bytes), int(max_k))
    if key not in cache:
        cache[key] = build_tables(table, max_table_bytes=max_table_bytes, max_k=max_k)
    return cache[key]


def _bias(table: PathTable) -> np.ndarray:
    return table.base_margin + table.expected_value()


def _run_shap(table: PathTable, X, tab_off, tab_vals, block_rows):
    Xf = prepare_rows(X, table.n_features)
    n, F = Xf.shape
    out = np.zeros((n, table.n_groups, F + 1), dtype=np.float64)
    if n == 0:
        return out
    _shap_kernel(Xf, table.path_offsets, table.feature, table.lower, table.upper,
                 table.is_missing_branch, table.zero_fraction, table.path_v, table.path_group,
                 tab_off, tab_vals, table.n_groups, max(table.max_length, 1),
                 _block_rows(n, block_rows, table.n_groups * F), out)
    out[:, :, F] = _bias(table)
    return out


def shap_values_path(model, X, *, block_rows: int | None = None) -> np.ndarray:
    """SHAP values with per-row EXTEND / UNWOUND-SUM (GPUTreeShap); ``(n, n_groups, F + 1)``.

    ``model``: an Ensemble, a :class:`PathTable` or a PackedTable. ``X``: (n, F) float32 or
    float64 (NaN = missing), F >= the model's feature count. Bias (base margin included) last.
    """
    table = as_path_table(model)
    no_tab = np.full(table.n_paths, -1, dtype=np.int64)
    return _run_shap(table, X, no_tab, np.empty(0, np.float64), block_rows)


def shap_values_table(model, X, *, tables: WeightTables | None = None,
                      max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES, max_k: int = DEFAULT_MAX_K,
                      block_rows: int | None = None) -> np.ndarray:
    """SHAP values with precomputed weight tables (Fast TreeSHAP v2); ``(n, n_groups, F + 1)``.

    ``tables`` from :func:`~dgboost.explain.tables.build_tables`; when not given they are
    built from ``max_table_bytes`` / ``max_k`` and cached on the PathTable (pass the same
    PathTable, not an Ensemble, to reuse them across calls). Paths without a table (too
    long, or over the budget) fall back to the per-row method; the results equal
    :func:`shap_values_path` up to rounding (1e-9 is tested).
    """
    table = as_path_table(model)
    if tables is None:
        tables = cached_tables(table, max_table_bytes, max_k)
    if tables.table_offsets.shape[0] != table.n_paths:
        raise DGBoostValueError("weight tables were built for a different path table "
                                f"({tables.table_offsets.shape[0]} paths, table has "
                                f"{table.n_paths})")
    return _run_shap(table, X, tables.table_offsets, tables.values, block_rows)


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
def _interaction_kernel(Xf, path_offsets, feature, lower, upper, miss, zf, path_v, path_group,
                        n_groups, max_len, block_rows, out):
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
            _block_on(Xt, feature, lower, upper, miss, s, k, nb, on)
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


def shap_interactions(model, X, *, block_rows: int | None = None) -> np.ndarray:
    """SHAP interaction values (shap / XGBoost definition); ``(n, n_groups, F + 1, F + 1)``.

    Off-diagonal ``[i, j]``: half the difference of feature ``j``'s SHAP value with feature
    ``i`` conditioned on and off; diagonal ``[i, i]``: the SHAP value of ``i`` minus the
    off-diagonals of row ``i``. Bias (base margin included) at ``[F, F]``; every matrix sums to
    the margin, and row sums give the SHAP values.
    """
    table = as_path_table(model)
    Xf = prepare_rows(X, table.n_features)
    n, F = Xf.shape
    out = np.zeros((n, table.n_groups, F + 1, F + 1), dtype=np.float64)
    if n == 0:
        return out
    _interaction_kernel(Xf, table.path_offsets, table.feature, table.lower, table.upper,
                        table.is_missing_branch, table.zero_fraction, table.path_v,
                        table.path_group, table.n_groups, max(table.max_length, 1),
                        _block_rows(n, block_rows, table.n_groups * F * F, min_rows=4), out)
    out[:, :, F, F] = _bias(table)
    return out


from .interventional import shap_values_interventional  # noqa: E402  (re-export)
