"""The CPU engine of exact greedy split search (``tree_method="exact"``, driven by
:mod:`dgboost.exact_greedy`; docs/design.md §12).

Each feature's present (non-missing) values are sorted once per training with their rows
(CSC-like: ``ptr`` int64 (F + 1,), ``rows`` int32 (nnz,), ``values`` float32 (nnz,), 8 bytes
an entry). A level's nodes are found through a node-id map (int32 per row). For each feature
the sorted column is scanned with per-node running sums of the int64 fixed-point pairs
(exact, so the scan order cannot change a sum), forward (missing values right) where the
column has missing values and not one value only, then backward (missing values left), as
XGBoost's ``exact`` scans. Every boundary between two distinct values of a node's rows is a
candidate; so are "every present value on one side, the missing ones on the other".

Candidates are ordered by an ordinal (the canonical order both devices share): with ``j``
the position in the column of the last entry below the boundary and ``c`` the column's
length, the forward boundary is ``j``, the forward end ``c``, the backward boundary
``2c - j`` and the backward end ``2c + 1``: the order in which the scans meet them. A node's
best split is the largest gain above ``KERNEL_EPS``, ties to the lowest feature, then the
lowest ordinal. Gains are the CPU engine's float64 expressions (``_cpu_kernels``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from . import _cpu_kernels as K

__all__ = ["CPUExactEngine", "presort_columns", "candidate_gain", "split_value_between", "exact_memory_estimate"]

_KW = dict(cache=True, nogil=True)
_EPS32 = np.float32(1e-6)  # XGBoost's kRtEps as float32: the gap of an end split
_HALF = np.float32(0.5)


# bytes a training row and a present entry take beyond the input itself: the presorted
# (row int32, value float32) entries, and a row's int32 node-id map and int32 pairs
_ENTRY_BYTES = 8
_ROW_BYTES = 4 + 8


def exact_memory_estimate(n_rows: int, n_present: int) -> int:
    """Bytes the CPU engine holds for ``n_rows`` rows with ``n_present`` present values:
    8 bytes per present entry (presorted rows and values) plus the node-id map and pairs."""
    return _ENTRY_BYTES * int(n_present) + _ROW_BYTES * int(n_rows)


# -------------------------------------------------------------------------- presorting
@njit(parallel=True, **_KW)
def _count_present(values, counts):
    n, n_features = values.shape
    for f in prange(n_features):
        c = 0
        for r in range(n):
            if not np.isnan(values[r, f]):
                c += 1
        counts[f] = c


@njit(parallel=True, **_KW)
def _fill_columns(values, ptr, out_rows, out_values):
    n, n_features = values.shape
    for f in prange(n_features):
        lo = ptr[f]
        c = ptr[f + 1] - lo
        rows = np.empty(c, np.int32)
        vals = np.empty(c, np.float32)
        k = 0
        for r in range(n):
            x = values[r, f]
            if not np.isnan(x):
                rows[k] = r
                vals[k] = x
                k += 1
        order = np.argsort(vals, kind="mergesort")  # stable: equal values keep row order
        for i in range(c):
            out_rows[lo + i] = rows[order[i]]
            out_values[lo + i] = vals[order[i]]


def presort_columns(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each feature's present values sorted ascending, with their rows.

    Parameters
    ----------
    values : ndarray of float32, shape (n, F)
        NaN marks a missing value.

    Returns
    -------
    ptr : ndarray of int64, shape (F + 1,)
        Feature f's entries are ``[ptr[f], ptr[f + 1])``.
    rows : ndarray of int32, shape (nnz,)
    sorted_values : ndarray of float32, shape (nnz,)
        Ascending within each feature; equal values in row order.
    """
    values = np.ascontiguousarray(values, np.float32)
    counts = np.zeros(values.shape[1], np.int64)
    _count_present(values, counts)
    ptr = np.zeros(values.shape[1] + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    rows = np.empty(int(ptr[-1]), np.int32)
    sorted_values = np.empty(int(ptr[-1]), np.float32)
    _fill_columns(values, ptr, rows, sorted_values)
    return ptr, rows, sorted_values


def forward_columns(ptr: np.ndarray, sorted_values: np.ndarray, n_rows: int) -> np.ndarray:
    """bool (F,): the features scanned forward too (missing values right), as XGBoost's
    ``exact`` chooses: a column with a missing value that holds more than one value."""
    lo, hi = ptr[:-1], ptr[1:]
    count = hi - lo
    present = count > 0
    distinct = np.zeros(count.shape[0], bool)
    distinct[present] = sorted_values[lo[present]] != sorted_values[hi[present] - 1]
    return (count < n_rows) & distinct


# -------------------------------------------------------------------------- candidates
@njit(**_KW)
def split_value_between(a, b):
    """float32 split value between two present values ``a < b`` (float32): their midpoint
    in float32 (XGBoost's ``(a + b) * 0.5f``, computed as ``a/2 + b/2``, which rounds the
    same and cannot overflow), or ``b`` where the midpoint rounds down to ``a`` (adjacent
    floats), so that ``a`` goes left and ``b`` right."""
    mid = a * _HALF + b * _HALF
    if mid <= a:
        return b
    return mid


@njit(**_KW)
def _end_value(last, forward):
    """The split value that puts every present value on one side: above the largest
    (forward) or below the smallest (backward), by ``|x| + 1e-6`` in float32 (XGBoost)."""
    gap = np.abs(last) + _EPS32
    if forward:
        return last + gap
    return last - gap


# Gain (float64) of the split with left sums (lg, lh) of a node with totals (tg, th): -inf
# where a side has no hessian or less than min_child_weight, or where the clipped weights
# break a monotone constraint. The hist engine's own function: one validity rule and one
# arithmetic for both tree methods.
candidate_gain = K._candidate_gain


@njit(**_KW)
def _scan_feature(
    f, lo_p, hi_p, forward, col_rows, col_values, node_of_row, gpair, first, m, totals, parent_gain,
    feature_mask, use_mask, inv_g, inv_h, lam, alpha, mcw, mds, bounds, monotone, constrained,
    best_gain, best_ord, best_value, best_dl, best_left,
):  # fmt: skip
    """Scan feature f's column one way for every node of the level; keep each node's best."""
    cum = np.zeros((m, 2), np.int64)
    last = np.zeros(m, np.float32)
    last_p = np.full(m, -1, np.int64)
    c = hi_p - lo_p
    sign = monotone[f] if constrained else 0
    step = 1 if forward else -1
    start = lo_p if forward else hi_p - 1
    for i in range(c):
        p = start + step * i
        r = col_rows[p]
        k = node_of_row[r] - first
        if k < 0 or k >= m:
            continue
        g = gpair[r, 0]
        h = gpair[r, 1]
        if g == 0 and h == 0:
            continue  # rows left out (subsampling) take no part
        if use_mask and not feature_mask[k, f]:
            continue
        v = col_values[p]
        if last_p[k] >= 0 and v != last[k]:
            lo_b = bounds[k, 0] if constrained else -np.inf
            hi_b = bounds[k, 1] if constrained else np.inf
            if forward:
                lg, lh, j = cum[k, 0], cum[k, 1], last_p[k] - lo_p
                ordinal = j
                value = split_value_between(last[k], v)
            else:
                lg, lh, j = totals[k, 0] - cum[k, 0], totals[k, 1] - cum[k, 1], p - lo_p
                ordinal = 2 * c - j
                value = split_value_between(v, last[k])
            gain = candidate_gain(
                lg, lh, totals[k, 0], totals[k, 1], inv_g, inv_h, lam, alpha, mcw, mds,
                lo_b, hi_b, sign, constrained, parent_gain[k],
            )  # fmt: skip
            if gain > best_gain[k]:
                best_gain[k], best_ord[k], best_value[k], best_dl[k] = gain, ordinal, value, not forward
                best_left[k, 0], best_left[k, 1] = lg, lh
        cum[k, 0] += g
        cum[k, 1] += h
        last[k] = v
        last_p[k] = p
    for k in range(m):  # the end candidate: every present value on one side
        if last_p[k] < 0:
            continue
        if forward:
            lg, lh, ordinal = cum[k, 0], cum[k, 1], c
        else:
            lg, lh, ordinal = totals[k, 0] - cum[k, 0], totals[k, 1] - cum[k, 1], 2 * c + 1
        lo_b = bounds[k, 0] if constrained else -np.inf
        hi_b = bounds[k, 1] if constrained else np.inf
        gain = candidate_gain(
            lg, lh, totals[k, 0], totals[k, 1], inv_g, inv_h, lam, alpha, mcw, mds,
            lo_b, hi_b, sign, constrained, parent_gain[k],
        )  # fmt: skip
        if gain > best_gain[k]:
            best_gain[k], best_ord[k], best_dl[k] = gain, ordinal, not forward
            best_value[k] = _end_value(last[k], forward)
            best_left[k, 0], best_left[k, 1] = lg, lh


@njit(parallel=True, **_KW)
def best_splits(
    col_ptr, col_rows, col_values, forward_ok, node_of_row, gpair, first, m, totals, parent_gain,
    feature_mask, use_mask, inv_g, inv_h, lam, alpha, mcw, mds, bounds, monotone, constrained,
    out_feature, out_gain, out_value, out_dl, out_left,
):  # fmt: skip
    """Best split of each of the level's ``m`` nodes (ids ``first .. first + m - 1``).

    Features are scanned in parallel (each keeps its own per-node bests), then every node
    takes the first strictly larger gain over the features in order: the largest gain, ties
    to the lowest feature, then to the lowest ordinal (the module docstring).
    """
    n_features = col_ptr.shape[0] - 1
    f_gain = np.full((n_features, m), K.KERNEL_EPS)
    f_ord = np.zeros((n_features, m), np.int64)
    f_value = np.zeros((n_features, m), np.float32)
    f_dl = np.zeros((n_features, m), np.bool_)
    f_left = np.zeros((n_features, m, 2), np.int64)
    for f in prange(n_features):
        for forward in (True, False):
            if forward and not forward_ok[f]:
                continue
            _scan_feature(
                f, col_ptr[f], col_ptr[f + 1], forward, col_rows, col_values, node_of_row, gpair, first, m, totals,
                parent_gain, feature_mask, use_mask, inv_g, inv_h, lam, alpha, mcw, mds, bounds, monotone,
                constrained, f_gain[f], f_ord[f], f_value[f], f_dl[f], f_left[f],
            )  # fmt: skip
    for k in prange(m):
        best = K.KERNEL_EPS
        out_feature[k] = -1
        out_gain[k] = 0.0
        out_value[k] = 0.0
        out_dl[k] = False
        out_left[k, 0] = 0
        out_left[k, 1] = 0
        for f in range(n_features):
            if f_gain[f, k] > best:
                best = f_gain[f, k]
                out_feature[k] = f
                out_gain[k] = best
                out_value[k] = f_value[f, k]
                out_dl[k] = f_dl[f, k]
                out_left[k, 0] = f_left[f, k, 0]
                out_left[k, 1] = f_left[f, k, 1]


@njit(parallel=True, **_KW)
def parent_gains(totals, bounds, constrained, inv_g, inv_h, lam, alpha, mcw, mds, out):
    """out[k] (float64): node k's own gain, with its bounds under monotone constraints."""
    for k in prange(totals.shape[0]):
        lo = bounds[k, 0] if constrained else -np.inf
        hi = bounds[k, 1] if constrained else np.inf
        out[k] = K._node_gain(totals[k, 0] * inv_g, totals[k, 1] * inv_h, lo, hi, constrained, lam, alpha, mcw, mds)


@njit(parallel=True, **_KW)
def apply_splits(values, node_of_row, first, m, feature, split_value, default_left, left_child):
    """Move the rows of the level's split nodes to their children (``x < value`` left,
    missing by ``default_left``: prediction's rule); rows of leaves stay."""
    for r in prange(node_of_row.shape[0]):
        k = node_of_row[r] - first
        if k < 0 or k >= m:
            continue
        lc = left_child[k]
        if lc < 0:
            continue
        x = values[r, feature[k]]
        go_left = default_left[k] if np.isnan(x) else x < split_value[k]
        node_of_row[r] = lc if go_left else lc + 1


@njit(**_KW)
def rows_by_leaf(leaf_of_row, n_leaves, rows, counts):
    """Counting sort: ``rows`` (int32 (n,)) the rows in leaf order, ``counts`` (int64
    (n_leaves,)) each leaf's rows."""
    for r in range(leaf_of_row.shape[0]):
        counts[leaf_of_row[r]] += 1
    offsets = np.zeros(n_leaves, np.int64)
    for i in range(1, n_leaves):
        offsets[i] = offsets[i - 1] + counts[i - 1]
    for r in range(leaf_of_row.shape[0]):
        leaf = leaf_of_row[r]
        rows[offsets[leaf]] = r
        offsets[leaf] += 1


# -------------------------------------------------------------------------- the engine
_NO_BOUNDS = np.zeros((1, 2), np.float64)
_NO_SIGNS = np.zeros(1, np.int8)
_NO_MASK = np.ones((1, 1), np.bool_)


def level_inputs(totals, bounds, scales, params) -> tuple:
    """What both engines' ``best_splits`` derive on the host from a level's inputs.

    Parameters
    ----------
    totals : int64 (m, 2)
        The nodes' gradient sums.
    bounds : float64 (m, 2) or None
        The nodes' weight bounds; None when nothing is constrained.
    scales : (2,)
        The gradient and hessian fixed-point scales.
    params : SplitParams

    Returns
    -------
    totals : int64 (m, 2), contiguous
    bounds : float64 (m, 2), or a (1, 2) placeholder when unconstrained
    inv_g, inv_h : float
        The inverse scales.
    reg : tuple of float
        (lambda, alpha, min_child_weight, max_delta_step).
    parent : float64 (m,)
        The nodes' own gains (:func:`parent_gains`).
    """
    totals = np.ascontiguousarray(totals, np.int64)
    constrained = bounds is not None
    inv_g, inv_h = 1.0 / float(scales[0]), 1.0 / float(scales[1])
    reg = (
        float(params.reg_lambda),
        float(params.alpha),
        float(params.min_child_weight),
        float(params.max_delta_step),
    )
    b = np.ascontiguousarray(bounds, np.float64) if constrained else _NO_BOUNDS
    parent = np.empty(totals.shape[0], np.float64)
    parent_gains(totals, b, constrained, inv_g, inv_h, *reg, parent)
    return totals, b, inv_g, inv_h, reg, parent


class CPUExactEngine:
    """Exact greedy split search on the host (the reference engine).

    Parameters
    ----------
    values : ndarray of float32, shape (n, F)
        The training rows (NaN missing); presorted here, once.
    """

    name = "cpu"

    def __init__(self, values):
        self.values = np.ascontiguousarray(values, np.float32)
        self.n_rows = self.values.shape[0]
        self.ptr, self.rows, self.sorted_values = presort_columns(self.values)
        self.forward = forward_columns(self.ptr, self.sorted_values, self.n_rows)
        self.node_of_row = None
        self.gpair = None

    def begin_tree(self, gpair) -> None:
        """Every row at the root; ``gpair`` int32 (n, 2), (0, 0) for rows left out."""
        self.gpair = np.ascontiguousarray(gpair, np.int32)
        self.node_of_row = np.zeros(self.n_rows, np.int32)

    def best_splits(self, first: int, totals, masks, bounds, monotone, scales, params) -> dict:
        """The best split of each node ``first .. first + m - 1`` (host int64 (m, 2) totals;
        masks bool (m, F) or None; bounds float64 (m, 2) and monotone int8 (F,), or None).

        Returns
        -------
        dict of host arrays, each (m,): feature int32 (-1: no split), gain float64,
        value float32, default_left bool, and left int64 (m, 2)
        """
        m = int(totals.shape[0])
        constrained = bounds is not None
        totals, b, inv_g, inv_h, reg, parent = level_inputs(totals, bounds, scales, params)
        signs = np.ascontiguousarray(monotone, np.int8) if constrained else _NO_SIGNS
        out = {
            "feature": np.empty(m, np.int32),
            "gain": np.empty(m, np.float64),
            "value": np.empty(m, np.float32),
            "default_left": np.empty(m, np.bool_),
            "left": np.empty((m, 2), np.int64),
        }
        use_mask = masks is not None
        best_splits(
            self.ptr, self.rows, self.sorted_values, self.forward, self.node_of_row, self.gpair, first, m, totals,
            parent, np.ascontiguousarray(masks, np.bool_) if use_mask else _NO_MASK, use_mask, inv_g, inv_h, *reg,
            b, signs, constrained, out["feature"], out["gain"], out["value"], out["default_left"], out["left"],
        )  # fmt: skip
        return out

    def apply_splits(self, first: int, feature, value, default_left, left_child) -> None:
        """Rows of node ``first + k`` go to ``left_child[k]`` or ``left_child[k] + 1``
        (``left_child[k] < 0``: a leaf; host arrays (m,))."""
        apply_splits(
            self.values,
            self.node_of_row,
            first,
            int(len(feature)),
            np.ascontiguousarray(feature, np.int32),
            np.ascontiguousarray(value, np.float32),
            np.ascontiguousarray(default_left, np.bool_),
            np.ascontiguousarray(left_child, np.int32),
        )

    def leaf_rows(self, leaf_of_node: np.ndarray, n_leaves: int):
        """(rows int32 (n,) in leaf order, counts int64 (n_leaves,) on the host), with
        ``leaf_of_node`` int32 mapping every node id to its leaf's index."""
        leaf_of_row = np.ascontiguousarray(leaf_of_node, np.int32)[self.node_of_row]
        rows = np.empty(self.n_rows, np.int32)
        counts = np.zeros(n_leaves, np.int64)
        rows_by_leaf(leaf_of_row, n_leaves, rows, counts)
        return rows, counts

    def end_tree(self) -> None:
        self.gpair = None
        self.node_of_row = None
