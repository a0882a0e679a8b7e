"""The quantile sketch's sample sorted and cut on the device (``kernels/sketch.cu``).

:func:`dgboost.quantile.compute_cuts` calls :func:`cut_values` for a device matrix: a block of
features at a time, so that the temporaries stay bounded whatever the sample's width, and only
the cut values cross to the host.
"""

from __future__ import annotations

import numpy as np

from ._nvrtc import get_module

__all__: list[str] = []

_THREADS = 256
_ROWS_PER_CHUNK = 2048  # sampled rows a counting thread walks: ~1 atomic per 2048 entries
_KEYS_PER_CHUNK = 1 << 16  # sorted keys a block of sketch_distinct counts runs in


def _kernel(name: str):
    return get_module("sketch.cu").get_function(name)


def _float32_matrix(values):
    import cupy

    return values if values.dtype == cupy.float32 else values.astype(cupy.float32)


def present_counts(values, rows, features: range) -> np.ndarray:
    """Non-missing sampled values of each feature of ``features``.

    Parameters
    ----------
    values : cupy.ndarray of float32, shape (n, F)
    rows : cupy.ndarray of int64, shape (m,), or None
        The sampled rows; None: every row.
    features : range

    Returns
    -------
    ndarray of int64, shape (len(features),), on the host (one read)
    """
    import cupy

    values = _float32_matrix(values)
    n_rows = int(values.shape[0] if rows is None else rows.size)
    counts = cupy.zeros(len(features), dtype=cupy.uint64)
    if n_rows and len(features):
        grid = ((len(features) + _THREADS - 1) // _THREADS, (n_rows + _ROWS_PER_CHUNK - 1) // _ROWS_PER_CHUNK)
        _kernel("sketch_count_present")(
            grid,
            (_THREADS,),
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
        )
    return counts.get().astype(np.int64)


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


def cut_values(values, rows, features: range, max_bin: int, block_values: int) -> list[np.ndarray]:
    """Every feature's cut values from the sampled rows, computed on the device.

    The same values as :func:`dgboost.quantile.weighted_cut_values` of unit weights on each
    feature's non-missing sample. A block of features at a time: their values become
    (feature, ordered bits) keys, one radix sort sorts them all, and the cuts are chosen on
    the sorted keys (``kernels/sketch.cu``); only the cut values cross to the host.

    Parameters
    ----------
    values : cupy.ndarray of float32, shape (n, F)
        Any strides.
    rows : cupy.ndarray of int64, shape (m,), or None
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
    import cupy

    values = _float32_matrix(values)
    n_rows = int(values.shape[0] if rows is None else rows.size)
    counts = present_counts(values, rows, features)
    strides = (np.int64(values.strides[0] // 4), np.int64(values.strides[1] // 4))
    cursor = cupy.zeros(1, dtype=cupy.uint64)
    out: list[np.ndarray] = []
    for block in feature_blocks(counts, features, block_values):
        block_counts = counts[block.start - features.start : block.stop - features.start]
        n, n_block = int(block_counts.sum()), len(block)
        offsets = cupy.asarray(np.concatenate([[0], np.cumsum(block_counts)]).astype(np.int64))
        keys = cupy.empty(max(n, 1), dtype=cupy.uint64)
        if n:
            cursor.fill(0)
            grid = min((n_rows * n_block + _THREADS - 1) // _THREADS, 65535 * 4)
            _kernel("sketch_keys")(
                (grid,),
                (_THREADS,),
                (values, rows, np.int64(n_rows), *strides, np.int32(block.start), np.int32(n_block), keys, cursor),
            )
            keys.sort()  # 1-D unsigned: a radix sort
        distinct = cupy.zeros(n_block, dtype=cupy.uint64)
        longest = int(block_counts.max()) if n_block else 0
        if longest:
            _kernel("sketch_distinct")(
                (n_block, (longest + _KEYS_PER_CHUNK - 1) // _KEYS_PER_CHUNK),
                (_THREADS,),
                (keys, offsets, np.int32(n_block), np.int64(_KEYS_PER_CHUNK), distinct),
            )
        picks = cupy.empty((n_block, max_bin), dtype=cupy.int64)
        _kernel("sketch_cut_picks")(
            (n_block, (max_bin - 1 + _THREADS - 1) // _THREADS),
            (_THREADS,),
            (keys, offsets, np.int32(n_block), distinct, np.int32(max_bin), picks),
        )
        cuts = cupy.empty((n_block, max_bin), dtype=cupy.float32)
        sizes = cupy.empty(n_block, dtype=cupy.int32)
        _kernel("sketch_cut_values")(
            ((n_block + _THREADS - 1) // _THREADS,),
            (_THREADS,),
            (keys, offsets, np.int32(n_block), distinct, np.int32(max_bin), picks, cuts, sizes),
        )
        del keys, picks
        host_cuts, host_sizes = cuts.get(), sizes.get()
        out.extend(host_cuts[i, : host_sizes[i]].copy() for i in range(n_block))
    return out
