"""The GPU's bin matrix: ELLPACK rows of bit-packed local bin indices (the multi-GPU XGBoost
paper's compression), each feature at its own width.

Feature f has ``n_f = cut_ptrs[f + 1] - cut_ptrs[f]`` bins; its entries are symbols of
``b_f = symbol_bits(n_f)`` bits: the local bin ``0..n_f - 1`` of the value, or ``n_f`` (the
feature's own missing symbol) when it is missing. A row is ``row_bits = b_0 + ... + b_{F-1}``
bits of a little-endian bit stream, and entry (r, f) starts at bit ``r * row_bits +
offset_f``, ``offset_f = b_0 + ... + b_{f-1}``. So one wide feature (a 4,000-category column:
12 bits) widens only its own entries, while a warp reading one feature of consecutive rows
still reads a stream of about ``row_bits`` bits a row. With 256 bins a numeric feature takes
9 bits an entry (0.28 of the float32 input); a feature of few distinct values takes fewer.
The kernels get ``(offset_f, b_f)`` as an int2 array (:func:`entry_layout`); no width is past
16 bits (at most 65,535 bins), so an entry lies in two consecutive 32-bit words, and one
padding word at the end makes that 8-byte read always safe. Features are also cut into
groups whose bins fit in a block's shared memory, for the histogram kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["EllpackMatrix", "symbol_bits", "entry_layout", "packed_words", "feature_groups"]


def symbol_bits(n_bins: int) -> int:
    """Bits per symbol for local bins ``0..n_bins-1`` plus the missing symbol ``n_bins``."""
    return max(1, int(n_bins).bit_length())


def entry_layout(cut_ptrs) -> tuple[np.ndarray, int]:
    """Where each feature's entry lies in a row of the ELLPACK bit stream.

    Parameters
    ----------
    cut_ptrs : array_like of int, shape (F + 1,)
        Feature f's bins are ``[cut_ptrs[f], cut_ptrs[f + 1])``.

    Returns
    -------
    layout : ndarray of int32, shape (F, 2)
        ``(offset_f, b_f)``: the first bit of feature f's entry inside a row and its width,
        ``symbol_bits(n_f)``.
    row_bits : int
        Bits of one row, the sum of the widths (the kernels take it as an int32).
    """
    n_bins = np.diff(np.asarray(cut_ptrs, np.int64))
    widths = np.array([symbol_bits(nb) for nb in n_bins.tolist()], np.int64)
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    layout = np.stack([offsets[:-1], widths], axis=1).astype(np.int32).reshape(-1, 2)
    return layout, int(offsets[-1])


def packed_words(n_rows: int, row_bits: int) -> int:
    """uint32 words of the bit stream of ``n_rows`` rows, with the padding word."""
    return (int(n_rows) * int(row_bits) + 31) // 32 + 1


def feature_groups(cut_ptrs: np.ndarray, max_group_bins: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """Runs of consecutive features whose bins together fit in ``max_group_bins``, balanced.

    The fewest groups that fit are found first; the features are then spread so that the
    groups hold about the same number of bins (each block of the histogram kernel then has
    about the same work).

    Returns
    -------
    begin, end : ndarray of int32, shape (n_groups,)
        Feature ranges ``[begin[g], end[g])``.
    fits : bool
        False when some feature alone has more bins than ``max_group_bins``: the histogram
        kernel then adds into global memory directly, one feature per group.
    """
    n_bins = np.diff(np.asarray(cut_ptrs, np.int64))
    if n_bins.size and int(n_bins.max()) > max_group_bins:
        idx = np.arange(n_bins.size, dtype=np.int32)
        return idx, idx + 1, False

    def greedy(cap: int, close_at: int) -> tuple[list, list]:
        begin, end, start, size = [], [], 0, 0
        for f, nb in enumerate(n_bins):
            if f > start and (size + nb > cap or size >= close_at):
                begin.append(start)
                end.append(f)
                start, size = f, 0
            size += int(nb)
        begin.append(start)
        end.append(int(n_bins.size))
        return begin, end

    fewest = len(greedy(max_group_bins, max_group_bins + 1)[0])
    target = -(-int(n_bins.sum()) // fewest)
    begin, end = greedy(max_group_bins, target)
    return np.asarray(begin, np.int32), np.asarray(end, np.int32), True


@dataclass
class EllpackMatrix:
    """Bit-packed bin indices on the device.

    Attributes
    ----------
    packed : cupy.ndarray of uint32, shape (packed_words(n, row_bits),)
        The bit stream, with one padding word so kernels may always read two words.
    row_bits : int
        Bits of one row (the sum of the features' widths).
    layout : cupy.ndarray of int32, shape (F, 2)
        Each feature's ``(offset, width)`` inside a row (:func:`entry_layout`).
    missing : int
        What :meth:`CUDABackend.unpack` reports for a missing entry: the largest number of
        bins of any feature (in the stream each feature has its own missing symbol, its
        number of bins).
    shape : tuple (n, F)
    cut_ptrs : cupy.ndarray of int32, shape (F + 1,)
    group_begin, group_end : cupy.ndarray of int32, shape (n_groups,)
    group_bins : int
        Largest number of bins in one group (sizes the shared-memory histogram).
    use_shared : bool
    """

    packed: object
    row_bits: int
    layout: object
    missing: int
    shape: tuple
    cut_ptrs: object
    group_begin: object
    group_end: object
    group_bins: int
    use_shared: bool

    @property
    def n_rows(self) -> int:
        return int(self.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.shape[1])

    @property
    def n_groups(self) -> int:
        return int(self.group_begin.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.packed.nbytes)

    @property
    def bits_per_entry(self) -> float:
        """Device bytes per matrix entry, in bits (packing plus padding)."""
        return 8.0 * self.nbytes / max(1, self.shape[0] * self.shape[1])
