"""The GPU's bin matrix: ELLPACK rows of bit-packed local bin indices (the multi-GPU XGBoost
paper's compression).

Entry (r, f) is symbol number ``r * F + f`` of a little-endian bit stream of ``bits`` bits
per symbol, ``bits = ceil(log2(max_bins + 1))``: the local bin of the value, or
``missing = max_bins`` when it is missing. With 256 bins that is 9 bits per entry (0.28 of
the float32 input). Features are also cut into groups whose bins fit in a block's shared
memory, for the histogram kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["EllpackMatrix", "symbol_bits", "feature_groups"]


def symbol_bits(max_bins: int) -> int:
    """Bits per symbol for local bins ``0..max_bins-1`` plus the missing symbol ``max_bins``."""
    return max(1, math.ceil(math.log2(max_bins + 1)))


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
    packed : cupy.ndarray of uint32, shape (ceil(n * F * bits / 32) + 1,)
        The bit stream, with one padding word so kernels may always read two words.
    bits : int
    missing : int
        The missing symbol (= the largest number of bins of any feature).
    shape : tuple (n, F)
    cut_ptrs : cupy.ndarray of int32, shape (F + 1,)
    group_begin, group_end : cupy.ndarray of int32, shape (n_groups,)
    group_bins : int
        Largest number of bins in one group (sizes the shared-memory histogram).
    use_shared : bool
    """

    packed: object
    bits: int
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
