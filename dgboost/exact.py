"""Exact reductions across ranks: sums and weighted quantiles that do not depend on how
rows are partitioned or ordered (docs/design.md §1.3 "Integers make it exact").

Sums are taken in 64-bit fixed point with a power-of-two step agreed by all ranks; quantiles
are found by bisection over the ordered bit patterns of float32 values with integer counts.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ._array import array_module, as_rows, float32_from_order_keys, float32_order_keys
from .errors import DGBoostValueError

__all__ = ["compile_sum_kernels", "exact_sum", "weighted_quantile"]


# ----------------------------------------------------------------------------- exact sums
# host blocks of more values than this go to the Numba kernels; NumPy's few passes over
# fewer cost milliseconds, the kernels' first compilation seconds
_KERNEL_MIN_VALUES = 1 << 20


def exact_sum(columns: np.ndarray, comm) -> np.ndarray:
    """Sum each column over all rows of all ranks, identically for any row partitioning.

    Parameters
    ----------
    columns : ndarray or cupy.ndarray, shape (n,) or (n, m)
        Finite values (any float dtype; converted to float64). A CuPy array is reduced on
        its device: only the (m,) column maxima and the (m,) int64 partial sums come to the
        host, and the result is bit-identical to that of the same values in NumPy (max,
        ``ldexp``, ``rint`` and int64 sums are exact in any order).
    comm : Communicator

    Returns
    -------
    ndarray of float64, shape (m,)
        Column sums. Every term is rounded to a fixed-point grid whose power-of-two step is
        agreed by all ranks (from the global max |value| and row count), so the int64 sums
        are associative and exact; the absolute error is at most
        ``n_total**2 * max|value| * 2**-62`` (a mean is off by ``n_total * 2**-62`` of the
        largest term at most).
    """
    if array_module(columns) is not np:
        return _device_exact_sum(columns, comm)
    v = np.asarray(columns)
    # float32 host columns stay float32: the kernels widen each value (exactly) as they read
    # it, rather than reading a float64 copy made for them
    if v.dtype != np.float32:
        v = v.astype(np.float64, copy=False)
    v = as_rows(v, len(v))
    m = v.shape[1]
    # large host blocks: one fused pass per step over the rows (threads, no temporaries),
    # same numbers; small ones (labels of a first run, a Dask rank's slice) in NumPy rather
    # than waiting seconds for the two parallel kernels to compile in a fresh environment
    kernels = v.size > _KERNEL_MIN_VALUES
    if kernels:
        local_max, finite = _host_abs_max(np.ascontiguousarray(v))
    else:
        finite = bool(np.isfinite(v).all())
        # an empty block contributes 0, as initial=0.0 would; float64 like the kernel's, so
        # every rank reduces the same dtype
        local_max = np.asarray(np.abs(v).max(axis=0), np.float64) if v.shape[0] else np.zeros(m)
    if not finite:
        raise DGBoostValueError("cannot sum non-finite values (NaN or inf in labels, weights or predictions)")
    n_total = int(comm.allreduce_sum(np.array([v.shape[0]], np.int64))[0])
    amax = np.asarray(comm.allreduce_max(local_max), np.float64)
    # amax * n_total < 2**e, so |sum of quantised terms| <= 2**62 fits int64 with room to spare
    _, e = np.frexp(amax * max(n_total, 1))
    shift = np.where(amax > 0, 62 - e, 0).astype(np.int64)
    if kernels:
        local_total = _host_fixed_point_sum(np.ascontiguousarray(v), shift)
    else:
        # float32 widened first: ldexp of a float32 would round to float32
        q = np.rint(np.ldexp(v.astype(np.float64, copy=False), shift[None, :])).astype(np.int64)
        local_total = q.sum(axis=0, dtype=np.int64)
    total = np.asarray(comm.allreduce_sum(local_total), np.int64).reshape(m)
    return np.ldexp(total.astype(np.float64), -shift)


def _device_exact_sum(columns, comm) -> np.ndarray:
    """:func:`exact_sum` of CuPy columns (n,) or (n, m), on their device, with the host's
    steps and bits. Each column is reduced whole: CuPy reduces a whole contiguous array across
    the device, but an axis with one block per output (115M labels on an H200: 191 ms a job
    reduced along an axis, 4.0 ms whole; benchmarks/exact_sum_gpu.py). Its maximum |value| is
    its largest or smallest value, and its fixed-point terms are made a chunk at a time: whole,
    the float64 copy and the terms of 115M labels took 2.8 GB of temporaries."""
    import cupy

    v = as_rows(columns, len(columns))
    if v.dtype not in (cupy.float32, cupy.float64):
        v = v.astype(cupy.float64)
    m = v.shape[1]
    cols = [cupy.ascontiguousarray(v[:, j]) for j in range(m)]
    if not all(bool(cupy.isfinite(c).all()) for c in cols):
        raise DGBoostValueError("cannot sum non-finite values (NaN or inf in labels, weights or predictions)")
    # max |x| is max(|max x|, |min x|), exactly; an empty column contributes 0; float64 on
    # every rank
    local_max = np.array([max(abs(float(c.max())), abs(float(c.min()))) if c.size else 0.0 for c in cols])
    n_total = int(comm.allreduce_sum(np.array([v.shape[0]], np.int64))[0])
    amax = np.asarray(comm.allreduce_max(local_max), np.float64)
    _, e = np.frexp(amax * max(n_total, 1))  # as on the host
    shift = np.where(amax > 0, 62 - e, 0).astype(np.int64)
    local_total = np.array([_device_fixed_point_sum(c, int(s)) for c, s in zip(cols, shift)], np.int64)
    total = np.asarray(comm.allreduce_sum(local_total), np.int64).reshape(m)
    return np.ldexp(total.astype(np.float64), -shift)


# elements whose fixed-point terms are made at a time (32 MiB of float64 and of int64 terms)
_DEVICE_CHUNK = 1 << 22


def _device_fixed_point_sum(column, shift: int) -> int:
    """The int64 sum of ``rint(ldexp(float64(x), shift))`` over a contiguous CuPy column: the
    same CuPy operations on every chunk as on the whole column (a float32 widened exactly
    first), so the terms are NumPy's and their integer sum does not depend on the order."""
    import cupy

    total = cupy.zeros((), cupy.int64)
    for start in range(0, column.size, _DEVICE_CHUNK):
        wide = column[start : start + _DEVICE_CHUNK].astype(cupy.float64)
        total += cupy.rint(cupy.ldexp(wide, shift)).astype(cupy.int64).sum(dtype=cupy.int64)
    return int(total)


def compile_sum_kernels() -> None:
    """Compile the parallel host kernels that :func:`exact_sum` runs on blocks of more than
    2**20 values, for float32 and float64 columns (into Numba's on-disk cache: ``dgboost
    warmup`` calls this, as its small trainings never reach that size)."""
    for dtype in (np.float32, np.float64):
        block = np.ones((1, 1), dtype)
        _host_abs_max(block)
        _host_fixed_point_sum(block, np.zeros(1, np.int64))


@numba.njit(parallel=True, cache=True, nogil=True)
def _host_abs_max(v):
    """Column maxima of |v| (0 for no rows) and whether every value is finite; v float32 or
    float64 (n, m), the maxima float64."""
    n, m = v.shape
    out = np.zeros(m)
    finite = True
    for j in range(m):
        best = 0.0
        bad = 0
        for i in numba.prange(n):
            x = np.float64(v[i, j])
            if not np.isfinite(x):
                bad += 1
            best = max(best, abs(x))
        out[j] = best
        finite = finite and bad == 0
    return out, finite


@numba.njit(parallel=True, cache=True, nogil=True)
def _host_fixed_point_sum(v, shift):
    """int64 column sums of rint(ldexp(v, shift)): ldexp and rint are exact or correctly
    rounded, so the terms equal NumPy's, and integer sums do not depend on the order."""
    n, m = v.shape
    out = np.zeros(m, np.int64)
    for j in range(m):
        s = shift[j]
        total = 0
        if -1022 <= s <= 1023:
            # times a normal power of two: the same correctly rounded value as ldexp, and a
            # loop the compiler vectorises (many times faster than ldexp per value:
            # docs/performance-notes.md)
            scale = math.ldexp(1.0, s)
            for i in numba.prange(n):
                total += np.int64(np.rint(np.float64(v[i, j]) * scale))
        else:
            for i in numba.prange(n):
                total += np.int64(np.rint(math.ldexp(np.float64(v[i, j]), s)))
        out[j] = total
    return out


# ----------------------------------------------------------------------- exact quantiles
def _select(keys, seg, counts_or_weights, target_seg, threshold, comm) -> np.ndarray:
    """Smallest key K per target with sum over rows of its segment with key <= K >= threshold.

    A fixed 32-step bisection over the uint32 key space; every step is one int64 allreduce of
    one partial sum per target, so all ranks agree and the answer does not depend on how rows
    are spread. ``counts_or_weights`` are non-negative int64 per row.
    """
    combined = (seg.astype(np.uint64) << np.uint64(32)) | keys.astype(np.uint64)
    order = np.argsort(combined, kind="stable")
    ckeys = combined[order]
    cum = np.concatenate([[0], np.cumsum(counts_or_weights[order], dtype=np.int64)])
    tseg = np.asarray(target_seg, np.uint64) << np.uint64(32)
    start = np.searchsorted(ckeys, tseg, side="left")
    lo = np.zeros(len(tseg), np.uint64)
    hi = np.full(len(tseg), 0xFFFFFFFF, np.uint64)
    for _ in range(32):  # fixed count: every rank runs the same number of collectives
        mid = (lo + hi) >> np.uint64(1)
        pos = np.searchsorted(ckeys, tseg | mid, side="right")
        total = np.asarray(comm.allreduce_sum(cum[pos] - cum[start]), np.int64)
        ok = total >= threshold
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid + np.uint64(1))
    return lo.astype(np.uint32)


def weighted_quantile(values, weight, segment, n_segments: int, comm, alpha: float = 0.5) -> np.ndarray:
    """XGBoost's quantile of ``values`` within each segment, exact over all ranks.

    Parameters
    ----------
    values : ndarray of float32, shape (n,)
    weight : ndarray of float32, shape (n,), or None
        None reproduces XGBoost's unweighted ``common::Quantile`` (linear interpolation
        between order statistics: the mean of the two middle values for an even count).
        Weights reproduce ``common::WeightedQuantile``: the smallest value whose cumulative
        weight reaches ``alpha`` times the segment's total, that product rounded to float32
        as in XGBoost (weights are quantised to int64 with a global scale, so ties at the
        threshold are decided exactly).
    segment : ndarray of int, shape (n,)
        Segment (leaf) of each row in ``0..n_segments-1``; rows with a negative segment are ignored.
    n_segments : int
    comm : Communicator
    alpha : float

    Returns
    -------
    ndarray of float64, shape (n_segments,)
        NaN for segments with no rows (or no positive weight) on any rank.
    """
    values = np.asarray(values, dtype=np.float32).ravel()
    segment = np.asarray(segment).ravel().astype(np.int64)
    if values.shape != segment.shape:
        raise DGBoostValueError(f"values {values.shape} and segments {segment.shape} differ in length")
    if np.isnan(values).any():
        raise DGBoostValueError("cannot take a quantile of NaN residuals")
    keep = (segment >= 0) & (segment < n_segments)
    if weight is not None:
        weight = np.asarray(weight, dtype=np.float64).ravel()
        if weight.shape != values.shape or not np.isfinite(weight).all() or (weight < 0).any():
            raise DGBoostValueError("weights must be finite, non-negative and one per row")
        weight = weight[keep]
    values, segment = values[keep], segment[keep]
    keys = float32_order_keys(values)
    ones = np.ones(len(values), np.int64)
    counts = np.asarray(comm.allreduce_sum(np.bincount(segment, minlength=n_segments).astype(np.int64)))
    if weight is None:
        # XGBoost's Quantile: x = alpha (n + 1); interpolate between order stats k and k + 1,
        # clamped to the extremes when alpha <= 1 / (n + 1) or alpha >= n / (n + 1)
        n = counts.astype(np.float64)
        x = alpha * (n + 1)
        inner = (alpha > 1.0 / (n + 1)) & (alpha < n / (n + 1))
        rank0 = np.where(inner, np.floor(x) - 1, np.where(alpha <= 1.0 / (n + 1), 0, n - 1))
        rank0 = np.maximum(rank0, 0).astype(np.int64)
        frac = np.where(inner, x - 1 - rank0, 0.0)
        rank1 = np.minimum(rank0 + (frac > 0), np.maximum(counts - 1, 0))
        segs = np.arange(n_segments)
        found = float32_from_order_keys(
            _select(keys, segment, ones, np.concatenate([segs, segs]), np.concatenate([rank0, rank1]) + 1, comm)
        )
        v0, v1 = found[:n_segments], found[n_segments:]
        # XGBoost's v0 + d * (v1 - v0): the difference of the two floats rounded to float32,
        # the rest in double, the result returned as float
        res = np.float32(v0.astype(np.float64) + frac * (v1 - v0).astype(np.float64)).astype(np.float64)
        return np.where(counts > 0, res, np.nan)
    n_total = int(comm.allreduce_sum(np.array([len(values)], np.int64))[0])
    wmax = float(np.asarray(comm.allreduce_max(np.array([weight.max(initial=0.0)])))[0])
    if wmax == 0.0:
        return np.full(n_segments, np.nan)
    _, e = math.frexp(wmax * max(n_total, 1))
    q = np.rint(np.ldexp(weight, 61 - e)).astype(np.int64)
    local = np.zeros(n_segments, np.int64)
    np.add.at(local, segment, q)
    totals = np.asarray(comm.allreduce_sum(local), np.int64)
    # XGBoost compares the cumulative weights with float(total * alpha): the threshold is
    # rounded to float32 as there (and then compared exactly), so that alpha = 0.1 of ten
    # equal weights reaches the first value, as in XGBoost (exactly, 0.1 as a double times
    # ten is just above one, which would take the second)
    thresholds = np.array(
        [min(int(t), max(1, math.ceil(float(np.float32(float(t) * alpha))))) for t in totals.tolist()], np.int64
    )
    found = float32_from_order_keys(_select(keys, segment, q, np.arange(n_segments), thresholds, comm))
    return np.where(totals > 0, found.astype(np.float64), np.nan)
