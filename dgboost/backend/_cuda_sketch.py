"""The quantile sketch's sample sorted and cut on the device (``kernels/sketch.cu``).

:func:`dgboost.quantile.compute_cuts` calls :func:`cut_values` (through
``CUDABackend.sketch_cuts``) for a device matrix: a block of features at a time, so that the
temporaries stay bounded whatever the sample's width. The host reads the sample's counts
once, to plan the blocks, and every block's cut values once, at the end.
"""

from __future__ import annotations

import numpy as np

from .._array import to_host

__all__: list[str] = []

_THREADS = 256
_ROWS_PER_CHUNK = 2048  # sampled rows a counting thread walks: ~1 atomic per 2048 entries
_KEYS_PER_THREAD = 8  # sketch.cu's kKeysPerThread: a block's tile is _THREADS * 8 entries
_KEYS_PER_CHUNK = 1 << 16  # sorted keys a block of sketch_distinct counts runs in
_MAX_GRID = 65535 * 4  # tiles a sketch_keys launch walks at once (each block loops over the rest)
_TILE = _THREADS * _KEYS_PER_THREAD
_BIG_RUN = 4096  # sketch.cu's kBigRun: longer runs of equal values are summed by a block
_PREFIX_THREADS = 256  # sketch.cu's kPrefixThreads: a block of the rank bounds' scan
_PREFIX_CHUNK = _PREFIX_THREADS * 8  # sketch.cu's kPrefixChunk: the runs a block of it scans


def _float32_matrix(values, xp):
    return values if values.dtype == np.float32 else values.astype(xp.float32)


def present_counts(backend, values, rows, features: range, weights=None) -> np.ndarray:
    """Sampled values of each feature of ``features`` that take part in its cuts: the
    non-missing ones, of rows whose weight is above 0 when there are weights.

    Parameters
    ----------
    backend : CUDABackend
        Where ``values`` live; its launches run the kernels.
    values : device ndarray of float32, shape (n, F)
    rows : device ndarray of int64, shape (m,), or None
        The sampled rows; None: every row.
    features : range
    weights : device ndarray of float32, shape (n,), or None

    Returns
    -------
    ndarray of int64, shape (len(features),), on the host (one read)
    """
    values = _float32_matrix(values, backend.xp)
    n_rows = int(values.shape[0] if rows is None else rows.size)
    counts = backend.zeros(len(features), np.uint64)
    if n_rows and len(features):
        grid = ((len(features) + _THREADS - 1) // _THREADS, (n_rows + _ROWS_PER_CHUNK - 1) // _ROWS_PER_CHUNK)
        backend._launch(
            "sketch.cu",
            "sketch_count_present",
            0,
            (
                values,
                rows,
                weights,
                np.int64(n_rows),
                np.int64(values.strides[0] // 4),
                np.int64(values.strides[1] // 4),
                np.int32(features.start),
                np.int32(len(features)),
                np.int64(_ROWS_PER_CHUNK),
                counts,
            ),
            threads=_THREADS,
            grid=grid,
        )
    return to_host(counts).astype(np.int64)


def feature_blocks(counts: np.ndarray, features: range, block_values: int) -> list[range]:
    """Consecutive features whose non-missing values add up to at most ``block_values``
    (a feature with more is a block of its own); empty features join any block."""
    blocks, start, held = [], features.start, 0
    for f, c in zip(features, counts):
        if f > start and held + int(c) > block_values:
            blocks.append(range(start, f))
            start, held = f, 0
        held += int(c)
    if start < features.stop:
        blocks.append(range(start, features.stop))
    return blocks


def cut_values(
    backend, values, rows, features: range, max_bin: int, block_values: int, weights=None
) -> list[np.ndarray]:
    """Every feature's cut values from the sampled rows, computed on the device.

    The same values as :func:`dgboost.quantile.weighted_cut_values` on each feature's sample
    (its non-missing values, of rows of weight above 0). A block of features at a time: their
    values become (feature, ordered bits) keys, one radix sort sorts them all, and the cuts are
    chosen on the sorted keys (``kernels/sketch.cu``); only the cut values cross to the host.
    With weights, the entries are also ordered by weight within each value, to sum the weights
    as the host does (:func:`_weighted_block`).

    Parameters
    ----------
    backend : CUDABackend
        Where ``values`` live; its launches run the kernels.
    values : device ndarray of float32, shape (n, F)
        Any strides.
    rows : device ndarray of int64, shape (m,), or None
        The sampled rows of ``values``; None: every row.
    features : range
    max_bin : int
        At least 2.
    block_values : int
        Most values sorted at once (about 16 bytes each while sorted; with weights half as
        many, about 44 bytes each: the argsort's).
    weights : device ndarray of float32, shape (n,), or None
        The rows' weights (of every row of ``values``, not only the sampled ones); None: unit
        weights.

    Returns
    -------
    list of ndarray of float32
        Each feature's cut values, strictly increasing, at most ``max_bin``.
    """
    if not len(features):
        return []
    values = _float32_matrix(values, backend.xp)
    if weights is not None:
        weights = backend.xp.ascontiguousarray(weights, dtype=np.float32)
        block_values = max(1, block_values // 2)
    counts = present_counts(backend, values, rows, features, weights)
    # every block's cuts land in one array, read once at the end (the host waits once, not
    # once a block; no concatenation, whose CuPy kernel would compile in a process's first
    # job of many blocks)
    all_cuts = backend.empty((len(features), max_bin), np.float32)
    all_sizes = backend.empty(len(features), np.int32)
    sample = _Sample(values, rows, weights)
    for block in feature_blocks(counts, features, block_values):
        block_counts = counts[block.start - features.start : block.stop - features.start]
        first = block.start - features.start
        cuts, sizes = all_cuts[first : first + len(block)], all_sizes[first : first + len(block)]  # contiguous rows
        if weights is None:
            _unit_block(backend, sample, block, block_counts, max_bin, cuts, sizes)
        else:
            _weighted_block(backend, sample, block, block_counts, max_bin, cuts, sizes)
    host_cuts, host_sizes = to_host(all_cuts), to_host(all_sizes)
    return [host_cuts[i, : host_sizes[i]].copy() for i in range(len(features))]


class _Sample:
    """The sampled rows of a float32 matrix (``rows`` None: every row) and the matrix rows'
    weights (None: unit weights), as the key kernels take them."""

    def __init__(self, values, rows, weights):
        self.values, self.rows, self.weights = values, rows, weights
        self.n_rows = int(values.shape[0] if rows is None else rows.size)
        self.strides = (np.int64(values.strides[0] // 4), np.int64(values.strides[1] // 4))


def _block_keys(backend, sample: _Sample, block: range, n: int, weight_bits=None):
    """The block's ``n`` kept entries as (feature in the block, ordered value bits) keys, in
    no particular order; with weights, each key's weight bits in ``weight_bits`` at its slot."""
    keys = backend.empty(max(n, 1), np.uint64)
    if n:
        cursor = backend.zeros(1, np.uint64)
        tiles = (sample.n_rows * len(block) + _TILE - 1) // _TILE
        backend._launch(
            "sketch.cu",
            "sketch_keys",
            0,
            (
                sample.values,
                sample.rows,
                sample.weights,
                np.int64(sample.n_rows),
                *sample.strides,
                np.int32(block.start),
                np.int32(len(block)),
                keys,
                weight_bits,
                cursor,
            ),
            threads=_THREADS,
            grid=min(tiles, _MAX_GRID),
        )
    return keys


def _block_offsets(backend, block_counts: np.ndarray):
    return backend.asarray(np.concatenate([[0], np.cumsum(block_counts)]).astype(np.int64))


def _unit_block(backend, sample: _Sample, block: range, block_counts: np.ndarray, max_bin: int, cuts, sizes) -> None:
    """A block's cut values (into ``cuts`` (len(block), max_bin) and ``sizes``) of unit weights:
    positions in the sorted keys are the ranks."""
    n, n_block = int(block_counts.sum()), len(block)
    offsets = _block_offsets(backend, block_counts)
    keys = _block_keys(backend, sample, block, n)
    if n:
        keys.sort()  # 1-D unsigned: a radix sort
    distinct = backend.zeros(n_block, np.uint64)
    longest = int(block_counts.max()) if n_block else 0
    if longest:
        backend._launch(
            "sketch.cu",
            "sketch_distinct",
            0,
            (keys, offsets, np.int32(n_block), np.int64(_KEYS_PER_CHUNK), distinct),
            threads=_THREADS,
            grid=(n_block, (longest + _KEYS_PER_CHUNK - 1) // _KEYS_PER_CHUNK),
        )
    picks = backend.empty((n_block, max_bin), np.int64)
    backend._launch(
        "sketch.cu",
        "sketch_cut_picks",
        0,
        (keys, offsets, np.int32(n_block), distinct, np.int32(max_bin), picks),
        threads=_THREADS,
        grid=(n_block, (max_bin - 1 + _THREADS - 1) // _THREADS),
    )
    backend._launch(
        "sketch.cu",
        "sketch_cut_values",
        0,
        (keys, offsets, np.int32(n_block), distinct, np.int32(max_bin), picks, cuts, sizes),
        threads=_THREADS,
        grid=(n_block * 32 + _THREADS - 1) // _THREADS,  # a warp a feature
    )


class _WeightedRuns:
    """A block's runs of equal (feature, value) keys, weighted (device arrays).

    Attributes
    ----------
    keys : uint64 (n,)
        The block's keys, sorted.
    starts : int64 (runs,)
        Each run's first position in ``keys``.
    run_ptr : int64 (len(block) + 1,)
        Each feature's first run; ``run_ptr[-1]`` is the number of runs.
    sums, rmax : float64 (runs,)
        Each run's summed weight and its upper rank bound (the prefix sum of ``sums`` in its
        feature), the host's bits; written for features of more than max_bin runs only.
    """

    def __init__(self, keys, starts, run_ptr, sums, rmax):
        self.keys, self.starts, self.run_ptr, self.sums, self.rmax = keys, starts, run_ptr, sums, rmax


def _weighted_runs(backend, sample: _Sample, block: range, block_counts: np.ndarray, max_bin: int) -> _WeightedRuns:
    """A weighted block's runs with their weights summed as the host sums them (``_weighted_runs``
    of :mod:`dgboost.quantile`: a value's weights in ascending order, the first plus NumPy's
    pairwise sum of the rest; the count times the weight where a feature's weights are all
    equal) and scanned into rank bounds (``np.cumsum``): the keys argsorted with their
    weights, the runs of equal keys found, each run's weights sorted by a second radix sort of
    (run, weight bits) keys (``kernels/sketch.cu``, weighted samples). One read of the run
    count. ``block_counts`` (len(block),) must add up to at least 1."""
    n, n_block = int(block_counts.sum()), len(block)
    offsets = _block_offsets(backend, block_counts)
    weight_bits = backend.empty(n, np.uint32)
    unsorted = _block_keys(backend, sample, block, n, weight_bits)
    order = backend.xp.argsort(unsorted)
    keys, bits = backend.empty(n, np.uint64), backend.empty(n, np.uint32)
    backend._launch("sketch.cu", "sketch_gather_sorted", n, (unsorted, weight_bits, order, np.int64(n), keys, bits))
    del unsorted, weight_bits, order
    flags = backend.empty(n, np.bool_)
    backend._launch("sketch.cu", "sketch_run_flags", n, (keys, np.int64(n), flags))
    starts = backend.true_indices(flags)
    del flags
    n_runs = int(starts.size)
    run_ptr = backend.empty(n_block + 1, np.int64)
    backend._launch(
        "sketch.cu",
        "sketch_run_ptr",
        0,
        (starts, np.int64(n_runs), offsets, np.int32(n_block), run_ptr),
        threads=_THREADS,
        grid=(n_block + 1 + _THREADS - 1) // _THREADS,
    )
    low_flipped, high, low_bit_flipped = (backend.zeros(n_block, np.uint32) for _ in range(3))
    backend._launch(
        "sketch.cu",
        "sketch_weight_range",
        0,
        (bits, offsets, np.int64(_KEYS_PER_CHUNK), low_flipped, high, low_bit_flipped),
        threads=_THREADS,
        grid=(n_block, (int(block_counts.max()) + _KEYS_PER_CHUNK - 1) // _KEYS_PER_CHUNK),
    )
    run_keys = backend.empty(n, np.uint64)
    backend._launch("sketch.cu", "sketch_run_keys", n, (starts, np.int64(n_runs), bits, np.int64(n), run_keys))
    del bits
    run_keys.sort()  # each run's weights ascending, in the run's positions
    sums = backend.empty(n_runs, np.float64)
    big_runs = backend.empty(n // (_BIG_RUN + 1) + 1, np.int64)
    n_big = backend.zeros(1, np.uint64)
    backend._launch(
        "sketch.cu",
        "sketch_run_sums",
        n_runs,
        (
            keys,
            run_keys,
            starts,
            np.int64(n_runs),
            np.int64(n),
            run_ptr,
            np.int32(max_bin),
            low_flipped,
            high,
            sums,
            big_runs,
            n_big,
        ),
    )
    backend._launch(
        "sketch.cu",
        "sketch_big_run_sums",
        0,
        (run_keys, starts, np.int64(n_runs), np.int64(n), big_runs, n_big, sums),
        threads=_THREADS,
        grid=big_runs.size,
    )
    del run_keys, big_runs
    # the runs of a feature are at most its entries; a block a (feature, chunk), looping past
    # CUDA's 65,535 blocks of a grid's second dimension
    max_chunks = (int(block_counts.max()) + _PREFIX_CHUNK - 1) // _PREFIX_CHUNK
    ranges = (offsets, high, low_bit_flipped, np.int32(max_bin), np.int32(max_chunks))
    chunk_totals = backend.empty(n_block * max_chunks, np.float64)
    backend._launch(
        "sketch.cu",
        "sketch_chunk_totals",
        0,
        (sums, run_ptr, *ranges, chunk_totals),
        threads=_PREFIX_THREADS,
        grid=(n_block, min(max_chunks, 65535)),
    )
    rmax = backend.empty(n_runs, np.float64)
    backend._launch(
        "sketch.cu",
        "sketch_rank_prefix",
        0,
        (sums, run_ptr, *ranges, chunk_totals, rmax),
        threads=_PREFIX_THREADS,
        grid=(n_block, min(max_chunks, 65535)),
    )
    return _WeightedRuns(keys, starts, run_ptr, sums, rmax)


def _weighted_block(
    backend, sample: _Sample, block: range, block_counts: np.ndarray, max_bin: int, cuts, sizes
) -> None:
    """A block's cut values (into ``cuts`` (len(block), max_bin) and ``sizes``) of weighted
    rows, the host's ``weighted_cut_values`` bit for bit: the runs and their rank bounds
    (:func:`_weighted_runs`), then ``_prune_summary``'s picks and their values."""
    n_block = len(block)
    picks = backend.empty((n_block, max_bin), np.int64)
    if int(block_counts.sum()):
        runs = _weighted_runs(backend, sample, block, block_counts, max_bin)
        backend._launch(
            "sketch.cu",
            "sketch_weighted_picks",
            0,
            (runs.sums, runs.rmax, runs.run_ptr, np.int32(n_block), np.int32(max_bin), picks),
            threads=_THREADS,
            grid=(n_block, (max_bin - 1 + _THREADS - 1) // _THREADS),
        )
        keys, starts, run_ptr = runs.keys, runs.starts, runs.run_ptr
        del runs
    else:  # no value: every feature gets the one cut of an empty sample
        keys, starts, run_ptr = (
            backend.empty(1, np.uint64),
            backend.zeros(1, np.int64),
            backend.zeros(n_block + 1, np.int64),
        )
    backend._launch(
        "sketch.cu",
        "sketch_weighted_cut_values",
        0,
        (keys, starts, run_ptr, np.int32(n_block), np.int32(max_bin), picks, cuts, sizes),
        threads=_THREADS,
        grid=(n_block * 32 + _THREADS - 1) // _THREADS,  # a warp a feature
    )
