"""Quantile cuts from a deterministic hashed sample (docs/design.md §5.1 "Cuts").

A row belongs to the sketch sample when ``hash(seed, global_row_index)`` falls below a
threshold, so the sample is the same set of rows however the data is partitioned across
workers. Ranks allgather their sampled values and weights and every rank computes the
same weighted quantiles, in an order-independent way (values are sorted together with
their weights before any summation). Each rank cuts a contiguous block of the features; where
the communicator has an ``alltoall``, a rank receives only its block's columns of every rank's
sample (the weights are gathered whole), else the whole sample.

Cut semantics follow XGBoost: feature ``f`` has cut values ``c_0 < c_1 < ... < c_{m-1}``;
a value ``x`` falls in bin ``b`` when ``c_{b-1} <= x < c_b``; a split at bin ``b`` sends
``x < c_b`` left.
"""

from __future__ import annotations

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ._array import array_module, float32_from_order_keys, float32_order_keys, is_device_array, to_host
from .backend import array_backend
from .backend._threads import usable_cores
from .comm.base import Communicator, LocalComm

__all__ = [
    "Cuts",
    "splitmix64",
    "hashed_below",
    "hashed_uniform",
    "global_row_index",
    "sketch_sample_mask",
    "compute_cuts",
    "weighted_cut_values",
    "categorical_cuts",
]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(x, xp=np):
    """The splitmix64 finaliser, vectorised over a uint64 array of module ``xp`` (wrapping
    integer arithmetic: NumPy and CuPy give the same bits)."""
    with np.errstate(over="ignore"):
        z = xp.asarray(x, dtype=xp.uint64) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hashed_uniform(seed: int, stream: int, global_index):
    """A float64 in [0, 1) per global row index, a pure function of (seed, stream, index).

    ``stream`` separates independent uses (sketch sampling, subsampling in round r...).
    ``global_index`` may be a NumPy or a CuPy integer array; the result lives in the same
    module and holds the same values (integer hashing, one exact conversion and scaling).
    """
    xp = array_module(global_index)
    with np.errstate(over="ignore"):
        h = splitmix64(xp.asarray(global_index, dtype=xp.uint64) ^ _hash_key(seed, stream), xp)
    return (h >> np.uint64(11)).astype(xp.float64) * (1.0 / (1 << 53))


def _hash_key(seed: int, stream: int) -> np.uint64:
    """The key that :func:`hashed_uniform` mixes into every row index for (seed, stream)."""
    with np.errstate(over="ignore"):
        return splitmix64(
            np.uint64(seed & 0xFFFFFFFFFFFFFFFF) * np.uint64(0x100000001B3)
            ^ splitmix64(np.uint64(stream & 0xFFFFFFFFFFFFFFFF))
        )


def hashed_below(seed: int, stream: int, global_index, threshold: float):
    """bool, the shape and array module of ``global_index``: ``hashed_uniform(seed, stream,
    global_index) < threshold``, bit for bit. A device array is hashed by one kernel of its
    backend, which makes none of the formula's (n,) temporaries."""
    if array_module(global_index) is np:
        return hashed_uniform(seed, stream, global_index) < threshold
    return array_backend(global_index).hashed_below(
        global_index, 0, int(global_index.shape[0]), int(_hash_key(seed, stream)), float(threshold)
    )


_SKETCH_STREAM = 0x5EED


def global_row_index(runs, xp=np):
    """int64 global index of every local row, from (global offset, rows) runs, in ``xp``."""
    if len(runs) == 1:
        return xp.arange(runs[0][0], runs[0][0] + runs[0][1], dtype=np.int64)
    if not runs:
        return xp.empty(0, dtype=np.int64)
    return xp.concatenate([xp.arange(o, o + n, dtype=np.int64) for o, n in runs])


def sketch_sample_mask(
    n_local: int, row_offset: int, n_global: int, seed: int, sample_rows: int, xp=np, global_rows=None
):
    """Boolean mask (n_local,) of the rows that enter the quantile sketch, in module ``xp``.

    ``global_rows`` (int64 (n_local,), in ``xp``): the rows' global indices when they are not
    the run ``row_offset, row_offset + 1, ...``."""
    if xp is not np:  # hashed by one kernel on the device, from the rows' run or their indices
        # whatever the size (a uniform below 1 keeps every row: the same mask as below), so
        # that a small first job loads the kernel that a large one needs
        key = int(_hash_key(seed, _SKETCH_STREAM))
        threshold = min(1.0, sample_rows / n_global) if n_global else 1.0
        return array_backend(xp.empty(0)).hashed_below(global_rows, row_offset, n_local, key, threshold)
    if n_global <= sample_rows:
        return xp.ones(n_local, dtype=bool)
    threshold = sample_rows / n_global
    if global_rows is None:
        global_rows = xp.arange(row_offset, row_offset + n_local, dtype=np.int64)
    return hashed_uniform(seed, _SKETCH_STREAM, global_rows) < threshold


@dataclass
class Cuts:
    """Histogram cut values of all features, concatenated (XGBoost's ``cut_ptrs`` layout).

    Attributes
    ----------
    values : ndarray of float32, shape (total_bins,)
        Cut values of feature ``f`` are ``values[ptrs[f]:ptrs[f+1]]``, strictly increasing;
        the last one lies above the largest sampled value.
    ptrs : ndarray of int64, shape (F + 1,)
    """

    values: np.ndarray
    ptrs: np.ndarray

    @property
    def n_features(self) -> int:
        return int(self.ptrs.shape[0] - 1)

    @property
    def total_bins(self) -> int:
        return int(self.ptrs[-1])

    def n_bins(self) -> np.ndarray:
        """Number of bins of each feature; int64 (F,)."""
        return np.diff(self.ptrs)

    def feature_cuts(self, f: int) -> np.ndarray:
        return self.values[self.ptrs[f] : self.ptrs[f + 1]]


def weighted_cut_values(values: np.ndarray, weights: np.ndarray, max_bin: int) -> np.ndarray:
    """Cut values of one feature from its (non-missing) sample.

    Parameters
    ----------
    values : ndarray of float32, shape (m,)
    weights : ndarray of float64, shape (m,)
    max_bin : int

    Returns
    -------
    ndarray of float32, strictly increasing, at most ``max_bin`` values; at least one.
    """
    if values.size == 0:
        return _cuts_from_unique(values, None, max_bin)
    if weights[0] == 1.0 and np.all(weights == 1.0):
        return _cuts_of_sorted(np.sort(values), max_bin)
    if np.all(weights == weights[0]):
        unique, counts = np.unique(values, return_counts=True)
        uw = counts * float(weights[0])
    else:
        unique, uw = _weighted_runs(values, weights)
    return _cuts_from_unique(unique, uw, max_bin)


def _weighted_runs(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``values`` (float32, ascending; -0.0 and +0.0 one value) and the
    float64 sum of each one's weights, added in ascending weight order: the order (value, then
    weight) makes the sums the same for the same multiset however the rows came.

    Float32 values with weights that are float32 numbers of at least 0 (a sample's weights are
    the DMatrix's float32) sort in one 64-bit key with the value, (value's ordered bits) << 32 | weight's
    bits: NumPy sorts such keys with its vectorised sort, some 50 times faster than
    ``np.lexsort`` of the two (5 against 234 ms for 10**6 values), in the same order. Other
    inputs take ``np.lexsort``.
    """
    w32 = weights.astype(np.float32)
    one_key = values.dtype == np.float32 and np.array_equal(w32, weights) and w32.min() >= 0
    if not (one_key and not np.isnan(values).any()):
        order = np.lexsort((weights, values))
        unique, start = np.unique(values[order], return_index=True)
        return unique, np.add.reduceat(weights[order], start)
    # +0.0 for -0.0: the keys of equal values must be equal
    ordered = float32_order_keys(values + np.float32(0.0))
    key = (ordered.astype(np.uint64) << np.uint64(32)) | (w32 + np.float32(0.0)).view(np.uint32)
    key.sort()
    high = (key >> np.uint64(32)).astype(np.uint32)
    start = np.flatnonzero(np.concatenate([[True], high[1:] != high[:-1]]))
    unique = float32_from_order_keys(high[start])
    w_sorted = (key & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32).astype(np.float64)
    return unique, np.add.reduceat(w_sorted, start)


def _cuts_from_unique(unique: np.ndarray, uw, max_bin: int) -> np.ndarray:
    """Cut values from the distinct values (ascending, float32) and their summed weights.

    -0.0 becomes +0.0 (adding +0.0 does that): a sort may put either zero first, and the
    first of equal values is the one kept, so without this the cut could depend on the sort
    (NumPy's on the host, CuPy's on the device). The bins are the same either way."""
    if unique.size == 0:
        return np.array([np.float32(1e-5)], dtype=np.float32)
    unique = unique + np.float32(0.0)
    top = np.float32(unique[-1])
    last = np.float32(top + (abs(top) + np.float32(1e-5)))
    if unique.size <= max_bin:
        # every distinct value gets its own bin: x < u_{i+1} separates u_i from u_{i+1}
        cuts = unique[1:]
    else:
        chosen = _prune_summary(uw, max_bin + 1)
        cuts = unique[chosen[1 : min(chosen.size, max_bin)]]
    return np.concatenate([cuts.astype(np.float32), [last]]).astype(np.float32)


def _cuts_of_sorted(v: np.ndarray, max_bin: int) -> np.ndarray:
    """:func:`weighted_cut_values` of unit weights, from the values sorted: the same cut values,
    found without the distinct values' array and their weights' prefix sums.

    With unit weights a distinct value's rank bounds in :func:`_prune_summary` are the first and
    one-past-last positions of its run of equal values in ``v`` (exact integers in float64), so
    the pruning reads only the runs around its ~``max_bin`` rank targets (binary searches in
    ``v``), and a run stands for the distinct value by its first position. The sort is the one
    ``np.unique`` makes; which of -0.0 and +0.0 leads a run does not matter (adding +0.0).

    Parameters
    ----------
    v : ndarray of float32, shape (m,)
        The feature's sampled values, ascending, no NaN.
    max_bin : int

    Returns
    -------
    ndarray of float32, as :func:`weighted_cut_values`.
    """
    n = v.size
    if n == 0:
        return _cuts_from_unique(v, None, max_bin)
    new_run = v[1:] != v[:-1]
    n_distinct = 1 + int(np.count_nonzero(new_run))
    if n_distinct <= max_bin:
        return _cuts_from_unique(v[np.concatenate([[0], np.flatnonzero(new_run) + 1])], None, max_bin)
    del new_run
    first_end = int(np.searchsorted(v, v[0], side="right"))
    last_start = int(np.searchsorted(v, v[-1], side="left"))
    # _prune_summary's rank targets (rmax[0] = first_end, rmin[-1] = last_start): the same
    # float64 expression
    begin, span, size = np.float64(first_end), np.float64(last_start) - np.float64(first_end), max_bin + 1
    dx2 = 2.0 * (np.arange(1, size - 1) * span / (size - 1) + begin)
    # _prune_summary's i is the run before J, the first run after the first whose rank sum
    # start + end exceeds dx2. The run R holding position floor(dx2 / 2) decides: runs before
    # it have sums below dx2, runs after it above, so J is R (unless R is the first run or its
    # sum is not above dx2) or the run after R
    q = np.clip(np.floor(dx2 / 2.0), 0, n - 1).astype(np.int64)
    r_start = np.searchsorted(v, v[q], side="left")
    r_end = np.searchsorted(v, v[q], side="right")
    j_start = np.where((r_start > 0) & (r_start + r_end > dx2), r_start, r_end)
    has_j = j_start < n  # i < m - 1: the targets kept are a prefix (dx2 increases)
    dx2, j_start = dx2[has_j], j_start[has_j]
    i_start = np.searchsorted(v, v[j_start - 1], side="left")
    # the nearer neighbour: i when dx2 < end_i + start_{i+1} (both j_start)
    picked = np.where(dx2 < 2.0 * j_start, i_start, j_start)
    chosen = np.unique(np.concatenate([[0], picked, [last_start]]))
    # _cuts_from_unique on the chosen runs' values
    top = np.float32(v[-1] + np.float32(0.0))
    last = np.float32(top + (abs(top) + np.float32(1e-5)))
    cuts = v[chosen[1 : min(chosen.size, max_bin)]] + np.float32(0.0)
    return np.concatenate([cuts.astype(np.float32), [last]]).astype(np.float32)


def _prune_summary(weights: np.ndarray, size: int) -> np.ndarray:
    """Indices of at most ``size`` distinct values kept from an exact weighted summary.

    The selection rule is XGBoost's ``WQSummary::SetPrune`` on an exact summary (entry j
    has rmin = weight before it, rmax = rmin + its weight): evenly spaced rank targets,
    each taking the nearer of the two entries around it, first and last always kept.
    Matching the rule keeps our bins, and so our trees, close to XGBoost's ``hist``.

    Parameters
    ----------
    weights : ndarray of float64, shape (m,)
        Summed weight of each distinct value, in increasing value order.
    size : int
    """
    rmax = np.cumsum(weights)
    rmin = rmax - weights
    m = weights.size
    begin = rmax[0]
    span = rmin[-1] - rmax[0]
    n = size - 1
    dx2 = 2.0 * (np.arange(1, n) * span / n + begin)
    # first i with dx2 < rmax[i+1] + rmin[i+1]; rank sums increase strictly with i
    i = np.searchsorted(rmax[1:] + rmin[1:], dx2, side="right")
    i = i[i < m - 1]
    dx2 = dx2[: i.size]
    # the nearer neighbour: i when dx2 < rmin[i] + w[i] + rmax[i+1] - w[i+1]
    take_left = dx2 < (rmin[i] + weights[i]) + (rmax[i + 1] - weights[i + 1])
    picked = np.where(take_left, i, i + 1)
    picked = np.unique(np.concatenate([[0], picked, [m - 1]]))
    return picked


def compute_cuts(
    values: np.ndarray,
    weight: np.ndarray | None,
    max_bin: int,
    seed: int = 0,
    row_offset: int = 0,
    n_global: int | None = None,
    comm: Communicator | None = None,
    sample_rows: int = 1 << 20,
    global_rows=None,
    threads: int = 0,
) -> Cuts:
    """Weighted quantile cuts of every feature, identical on every rank.

    Parameters
    ----------
    values : numpy.ndarray or cupy.ndarray of float32, shape (n_local, F)
        This rank's rows; NaN is missing. For a CuPy array only the sampled rows are
        copied to the host; without weights or with float32 ones, in one process or across
        NCCL ranks, the sample is sorted and cut on the device and only the cut values reach
        the host. The cuts are the same as for ``values.get()``.
    weight : ndarray of float32, shape (n_local,), or None
        NumPy or CuPy (uploaded for device ``values``).
    max_bin : int
    seed : int
    row_offset : int
        Global index of this rank's first row.
    n_global : int, optional
        Total number of rows on all ranks (computed with an allreduce when omitted).
    comm : Communicator, optional
    sample_rows : int
        Expected number of rows in the sketch sample.
    global_rows : ndarray of int64, shape (n_local,), optional
        The rows' global indices (in the array module of ``values``) when they are not the
        run starting at ``row_offset``.
    threads : int
        At most this many host threads for the per-feature work (the training's ``nthread``);
        0: the cores this process may use. The cuts are the same for any count.
    """
    comm = comm or LocalComm()
    n_local, n_features = values.shape
    if n_global is None:
        n_global = int(comm.allreduce_sum(np.array([n_local], dtype=np.int64))[0])
    # hashed where the rows are: a device matrix is sampled on the device
    mask = sketch_sample_mask(n_local, row_offset, n_global, seed, sample_rows, array_module(values), global_rows)
    # a feature's cuts depend on its column of the sample alone: each rank cuts a contiguous
    # block of the features (from its columns of every rank's sample, or from the whole sample
    # gathered where the communicator has no alltoall) and the blocks are gathered in rank order,
    # which is feature order (on 4 GPUs the rank's share of a 2**20-row sample of 28 features
    # is 7 sorts, not 28)
    world, rank = comm.world_size, comm.rank
    split = 1 < world <= n_features
    mine = range(rank * n_features // world, (rank + 1) * n_features // world) if split else range(n_features)
    per_feature = None
    device_weight = weight is None or np.dtype(weight.dtype) == np.float32
    if device_weight and is_device_array(values) and (world == 1 or getattr(comm, "gathers_on_device", False)):
        # the sample stays on the device (NCCL gathers device arrays) and is sorted there by
        # the device's backend, a block of features at a time (wide data's sample is large);
        # only the cut values cross to the host. Float32 weights (a DMatrix's) are summed
        # there as the host sums them
        backend = array_backend(values)
        rows = backend.true_indices(mask)
        w = None if weight is None else backend.asarray(weight)
        if world == 1:
            per_feature = backend.sketch_cuts(values, rows, mine, max_bin, _DEVICE_SORT_VALUES, w)
        else:
            per_feature = backend.sketch_cuts(
                comm.allgather(_device_rows(values, rows)),
                None,
                mine,
                max_bin,
                _DEVICE_SORT_VALUES,
                None if w is None else comm.allgather(_device_rows(w, rows)),
            )
    if per_feature is None:
        sample = _sampled_rows_on_host(values, mask)
        sample_w = (
            None if weight is None else comm.allgather(np.asarray(_sampled_rows_on_host(weight, mask), np.float64))
        )
        alltoall = getattr(comm, "alltoall", None)
        if split and callable(alltoall):
            # rank k needs only block k of the sample: each rank sends it the block's columns
            # (transposed: a feature's values contiguous), and the columns of the ranks, put
            # end to end, are those of the gathered sample, rows in the same order
            parts = [
                _transposed(sample[:, k * n_features // world : (k + 1) * n_features // world]) for k in range(world)
            ]
            del sample
            columns = np.concatenate(alltoall(parts), axis=1)
            per_feature = _cuts_of_columns(columns, sample_w, max_bin, limit=threads)
        else:
            per_feature = _cuts_sorted_on_host(comm.allgather(sample), sample_w, mine, max_bin, threads)
    sizes = np.array([c.size for c in per_feature], dtype=np.int64)
    values_mine = np.concatenate(per_feature).astype(np.float32) if per_feature else np.empty(0, np.float32)
    if split:
        sizes = np.asarray(comm.allgather(sizes), dtype=np.int64)
        values_mine = np.asarray(comm.allgather(values_mine), dtype=np.float32)
    ptrs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return Cuts(values=values_mine, ptrs=ptrs)


def _threads(n_values: int, n_features: int, limit: int = 0) -> int:
    """Threads for per-feature host work (NumPy releases the GIL): one when it is small; at
    most ``limit`` (0: the cores this process may use, its affinity and CPU quota)."""
    cores = limit if limit > 0 else usable_cores()
    return min(n_features, cores, 32) if n_values * n_features > 1 << 20 else 1


def _cuts_sorted_on_host(
    sample: np.ndarray, sample_w: np.ndarray | None, features: range, max_bin: int, limit: int = 0
) -> list:
    """Cut values of ``features`` from the gathered host sample (float32 (m, F)) and its
    weights (float64 (m,), None for unit weights); a list of float32 arrays; at most ``limit``
    threads (0: the cores this process may use)."""
    if sample_w is not None:
        # one transpose, then each feature reads contiguously
        return _cuts_of_columns(_transposed(sample[:, features.start : features.stop]), sample_w, max_bin, limit=limit)
    # unit weights: each thread copies a few features' columns at a time into a buffer of its
    # own and sorts them there. A transposed copy of the whole sample (112 MB for 10**6 rows of
    # 28 features) is fresh memory whose page faults cost more than the sorts (0.25-0.3 s in a
    # training process, against 0.1 s for the sorts on 2 threads)
    blocks = [
        range(f, min(f + _BLOCK_FEATURES, features.stop)) for f in range(features.start, features.stop, _BLOCK_FEATURES)
    ]
    local = threading.local()

    def block_cuts(block: range) -> list:
        buffer = getattr(local, "buffer", None)
        if buffer is None:
            buffer = local.buffer = np.empty((_BLOCK_FEATURES, sample.shape[0]), np.float32)
        columns = buffer[: len(block)]
        _transpose_into(sample[:, block.start : block.stop], columns)
        return _cuts_of_columns(columns, None, max_bin, threads=1)

    workers = min(_threads(sample.shape[0], len(features), limit), len(blocks))
    if workers <= 1:
        per_block = [block_cuts(b) for b in blocks]
    else:
        with ThreadPoolExecutor(workers) as pool:  # map keeps the feature order
            per_block = list(pool.map(block_cuts, blocks))
    return [cuts for block in per_block for cuts in block]


# features whose columns a thread copies and sorts at a time (unit weights): 4 features of 10**6
# rows take a 16 MB buffer per thread, and the sample is read 7 times for 28 features
_BLOCK_FEATURES = 4


# rows transposed at a time by _transposed: 4096 rows of 28 float32 features (448 KiB) and
# their columns stay in the cache while they are copied
_TRANSPOSE_ROWS = 4096


def _transposed(block: np.ndarray) -> np.ndarray:
    """A C-contiguous (F, m) copy of the (m, F) ``block``, made a few thousand rows at a time.

    ``np.ascontiguousarray(block.T)`` walks the whole of one column before the next: for a
    sample of 10**6 rows every row's cache line is fetched once per feature (five times slower
    on 28 features).
    """
    out = np.empty(block.shape[::-1], dtype=block.dtype)
    _transpose_into(block, out)
    return out


def _transpose_into(block: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = block.T`` (``block`` (m, F), ``out`` (F, m)), a few thousand rows at a time."""
    for start in range(0, block.shape[0], _TRANSPOSE_ROWS):
        out[:, start : start + _TRANSPOSE_ROWS] = block[start : start + _TRANSPOSE_ROWS].T


def _cuts_of_columns(
    columns: np.ndarray, sample_w: np.ndarray | None, max_bin: int, threads: int | None = None, limit: int = 0
) -> list:
    """Cut values of each row of ``columns`` (float32 (F_block, m): a feature's sampled values,
    NaN missing) with the sample's weights (float64 (m,), None for unit weights); a list of
    F_block float32 arrays. Without weights the rows of ``columns`` (the caller's own copy of
    the sample) are sorted in place. ``threads``: this many (default: by the size, at most
    ``limit``, 0 for the cores this process may use)."""

    def feature_cuts(f: int) -> np.ndarray:
        column = columns[f]
        if sample_w is None:
            # unit weights: sorted in place (no copy of 4 MB a feature per 10**6 rows), NaN last
            column.sort()
            return _cuts_of_sorted(column[: column.size - int(np.count_nonzero(np.isnan(column)))], max_bin)
        keep = ~np.isnan(column) & (sample_w > 0)  # a zero-weight row must not place a cut
        return weighted_cut_values(column[keep], sample_w[keep], max_bin)

    features = range(columns.shape[0])
    workers = _threads(columns.shape[1], len(features), limit) if threads is None else threads
    if workers == 1:
        return [feature_cuts(f) for f in features]
    with ThreadPoolExecutor(workers) as pool:  # map keeps the feature order
        return list(pool.map(feature_cuts, features))


# sampled non-missing values sorted and cut on the device at a time: the keys and the radix
# sort's second buffer take 16 bytes a value (128 MiB), under training's own peak on 10M x 28.
# Choosing the cuts with CuPy array operations (a
# dozen temporaries a value: flags, run starts, their features and int64 ranks) had kept
# several times more of CuPy's pool, and cost more time a block (docs/performance-notes.md).
_DEVICE_SORT_VALUES = 8 << 20


def _device_rows(array, rows):
    """``array[rows]`` of a device array (``rows``: int64 indices on its device); a float32
    matrix's by the backend's gather (``take_matrix_rows``), whose kernel serves every size:
    CuPy's compiles one of 64-bit indexing at its first matrix of more than 2 GiB."""
    if array.ndim == 2 and array.dtype == np.float32:
        return array_backend(array).take_matrix_rows(array, rows)
    return array[rows]


def _sampled_rows_on_host(array, mask: np.ndarray) -> np.ndarray:
    """``array[mask]`` as C-contiguous host data (float32 for values, as given for weights).

    The mask is a hash of global row indices, computed where the rows are; for a CuPy array
    the rows are gathered on the device so that only the sample, not the whole matrix,
    crosses to the host.
    """
    if is_device_array(array):
        # row indices, not the boolean mask: CuPy scans a 1-D mask broadcast over every entry
        # of a 2-D array (a 1.3 GB temporary for 10M x 28), the indices are n_local at most
        host = to_host(_device_rows(array, array_backend(array).true_indices(mask)))
    else:
        mask = to_host(mask)
        # every row is in the sample when there are fewer than sample_rows: no copy of them
        host = array if mask.all() else array[mask]
    if host.ndim == 2:
        return np.ascontiguousarray(host, dtype=np.float32)
    return np.asarray(host)


def categorical_cuts(cuts: Cuts, values, mask: np.ndarray | None, comm: Communicator | None = None, names=None) -> Cuts:
    """``cuts`` with each categorical feature's cuts replaced by one bin per category.

    A categorical feature (``mask`` bool (F,)) of codes 0..K-1 gets the cut values
    ``1, 2, ..., K`` (bin == code under the "first cut > x" rule), K the largest code in any
    rank's rows plus one (an allreduced max: the same cuts however the rows are partitioned;
    XGBoost's K), one bin when the feature has no value. docs/design.md §11.1.

    Parameters
    ----------
    cuts : Cuts
        The sketch's cuts (a categorical feature's are replaced).
    values : numpy.ndarray or cupy.ndarray of float32, shape (n_local, F)
        This rank's rows (codes in the categorical columns, NaN missing).
    mask : ndarray of bool, shape (F,), or None (no categorical feature: ``cuts`` as given)
    comm : Communicator, optional
    names : sequence of str, optional
        The features' names, for messages.
    """
    if mask is None or not np.any(mask):
        return cuts
    from ._categorical import check_category_count

    comm = comm or LocalComm()
    features = np.flatnonzero(mask)
    xp = array_module(values)
    local = np.full(features.size, -1.0, np.float64)
    if values.shape[0]:
        # one reduction a column: nanmax makes no per-row temporary (a mask and a filled copy
        # would stay in the device pool and cost categorical columns memory per row that numeric
        # ones do not pay); a column with only missing values has no top (NaN), as -1 before
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # "All-NaN slice encountered"
            tops = xp.stack([xp.nanmax(values[:, f]) for f in features.tolist()])
        local = np.nan_to_num(np.asarray(to_host(tops), np.float64), nan=-1.0)
    top = np.asarray(comm.allreduce_max(local), np.float64)
    per_feature = [cuts.feature_cuts(f) for f in range(cuts.n_features)]
    for f, t in zip(features.tolist(), top.tolist()):
        k = max(1, int(t) + 1)
        check_category_count(repr(names[f]) if names else f"{f}", k)
        per_feature[f] = np.arange(1, k + 1, dtype=np.float32)
    sizes = np.array([c.size for c in per_feature], np.int64)
    return Cuts(
        values=np.concatenate(per_feature).astype(np.float32),
        ptrs=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
    )
