"""The quantile sketch's sample sorted per feature on the device (``kernels/sketch.cu``).

:func:`dgboost.quantile.compute_cuts` cuts the sorted values (``sorted_features_cut_values``);
this module only produces them, a block of features at a time so that the temporaries stay
bounded whatever the sample's width.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ._nvrtc import get_module

__all__: list[str] = []

_THREADS = 256
_ROWS_PER_CHUNK = 2048  # sampled rows a counting thread walks: ~1 atomic per 2048 entries


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
            grid, (_THREADS,),
            (values, rows, np.int64(n_rows), np.int64(values.strides[0] // 4), np.int64(values.strides[1] // 4),
             np.int32(features.start), np.int32(len(features)), np.int64(_ROWS_PER_CHUNK), counts))
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


def sorted_blocks(values, rows, features: range, block_values: int) -> Iterator[tuple[object, np.ndarray]]:
    """Each feature block's non-missing sampled values, sorted per feature.

    Parameters
    ----------
    values : cupy.ndarray of float32, shape (n, F)
    rows : cupy.ndarray of int64, shape (m,), or None
        The sampled rows of ``values``; None: every row.
    features : range
    block_values : int
        Most non-missing values sorted at once (about 20 bytes each while sorting).

    Yields
    ------
    flat : cupy.ndarray of float32, shape (N,)
        The block's features one after another, each ascending; -0.0 as +0.0.
    counts : ndarray of int64, shape (block features,)
        Values of each feature in ``flat``.
    """
    import cupy

    values = _float32_matrix(values)
    n_rows = int(values.shape[0] if rows is None else rows.size)
    counts = present_counts(values, rows, features)
    strides = (np.int64(values.strides[0] // 4), np.int64(values.strides[1] // 4))
    cursor = cupy.zeros(1, dtype=cupy.uint64)
    for block in feature_blocks(counts, features, block_values):
        block_counts = counts[block.start - features.start:block.stop - features.start]
        n = int(block_counts.sum())
        flat = cupy.empty(n, dtype=cupy.float32)
        if n:
            keys = cupy.empty(n, dtype=cupy.uint64)
            cursor.fill(0)
            entries = n_rows * len(block)
            grid = min((entries + _THREADS - 1) // _THREADS, 65535 * 4)
            _kernel("sketch_keys")((grid,), (_THREADS,),
                                   (values, rows, np.int64(n_rows), *strides, np.int32(block.start),
                                    np.int32(len(block)), keys, cursor))
            keys.sort()  # 1-D unsigned: a radix sort
            _kernel("sketch_values")(((n + _THREADS - 1) // _THREADS,), (_THREADS,), (keys, np.int64(n), flat))
            del keys
        yield flat, block_counts
