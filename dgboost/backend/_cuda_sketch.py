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


def _float32_matrix(values, xp):
    return values if values.dtype == np.float32 else values.astype(xp.float32)


def present_counts(backend, values, rows, features: range) -> np.ndarray:
    """Non-missing sampled values of each feature of ``features``.

    Parameters
    ----------
    backend : CUDABackend
        Where ``values`` live; its launches run the kernels.
    values : device ndarray of float32, shape (n, F)
    rows : device ndarray of int64, shape (m,), or None
        The sampled rows; None: every row.
    features : range

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


def cut_values(backend, values, rows, features: range, max_bin: int, block_values: int) -> list[np.ndarray]:
    """Every feature's cut values from the sampled rows, computed on the device.

    The same values as :func:`dgboost.quantile.weighted_cut_values` of unit weights on each
    feature's non-missing sample. A block of features at a time: their values become
    (feature, ordered bits) keys, one radix sort sorts them all, and the cuts are chosen on
    the sorted keys (``kernels/sketch.cu``); only the cut values cross to the host.

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
        Most non-missing values sorted at once (about 16 bytes each while sorted).

    Returns
    -------
    list of ndarray of float32
        Each feature's cut values, strictly increasing, at most ``max_bin``.
    """
    if not len(features):
        return []
    values = _float32_matrix(values, backend.xp)
    n_rows = int(values.shape[0] if rows is None else rows.size)
    counts = present_counts(backend, values, rows, features)
    strides = (np.int64(values.strides[0] // 4), np.int64(values.strides[1] // 4))
    cursor = backend.zeros(1, np.uint64)
    tile = _THREADS * _KEYS_PER_THREAD
    # every block's cuts land in one array, read once at the end (the host waits once, not
    # once a block; no concatenation, whose CuPy kernel would compile in a process's first
    # job of many blocks)
    all_cuts = backend.empty((len(features), max_bin), np.float32)
    all_sizes = backend.empty(len(features), np.int32)
    for block in feature_blocks(counts, features, block_values):
        block_counts = counts[block.start - features.start : block.stop - features.start]
        n, n_block = int(block_counts.sum()), len(block)
        offsets = backend.asarray(np.concatenate([[0], np.cumsum(block_counts)]).astype(np.int64))
        keys = backend.empty(max(n, 1), np.uint64)
        if n:
            cursor.fill(0)
            tiles = (n_rows * n_block + tile - 1) // tile
            backend._launch(
                "sketch.cu",
                "sketch_keys",
                0,
                (values, rows, np.int64(n_rows), *strides, np.int32(block.start), np.int32(n_block), keys, cursor),
                threads=_THREADS,
                grid=min(tiles, _MAX_GRID),
            )
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
        first = block.start - features.start
        cuts, sizes = all_cuts[first : first + n_block], all_sizes[first : first + n_block]  # contiguous rows
        backend._launch(
            "sketch.cu",
            "sketch_cut_values",
            0,
            (keys, offsets, np.int32(n_block), distinct, np.int32(max_bin), picks, cuts, sizes),
            threads=_THREADS,
            grid=(n_block * 32 + _THREADS - 1) // _THREADS,  # a warp a feature
        )
        del keys, picks
    host_cuts, host_sizes = to_host(all_cuts), to_host(all_sizes)
    return [host_cuts[i, : host_sizes[i]].copy() for i in range(len(features))]
