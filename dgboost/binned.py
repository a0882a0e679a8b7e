"""BinnedMatrix: every feature value replaced by its local bin index.

What ``bins`` holds is the backend's own layout, made by ``backend.bin_values``: on the CPU a
row-major uint8/uint16 (n, F) array (histogram building walks a node's rows and touches all
their features), with the sentinel ``missing_bin`` (the dtype's maximum) for missing
values; on the GPU an ELLPACK matrix of bit-packed indices where missing is one more symbol.
Missing values are never accumulated into a histogram: a node's missing sums are its totals
minus the feature's bin sums.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .quantile import Cuts

__all__ = ["BinnedMatrix", "bin_dtype_for"]


def bin_dtype_for(cuts: Cuts) -> np.dtype:
    """uint8 when every feature has at most 255 bins (255 is the missing sentinel), else uint16."""
    return np.dtype(np.uint8) if int(cuts.n_bins().max()) <= 255 else np.dtype(np.uint16)


@dataclass
class BinnedMatrix:
    """Bin indices of a block of rows.

    Attributes
    ----------
    bins : ndarray of uint8 or uint16, shape (n, F), or the backend's bin matrix
        Local bin of each value; ``missing_bin`` where the value is missing (CPU layout).
    cuts : Cuts
    backend : Backend
        The backend that made ``bins`` (it also makes the partition layout): the matrix
        is the backend's, so it never picks one of its own.
    """

    bins: Any
    cuts: Cuts
    backend: Any = field(repr=False, compare=False)
    _columns: Any = field(default=None, repr=False, compare=False)

    @property
    def bins_by_feature(self):
        """The layout the backend partitions from (made once): on the CPU a column-major (F, n)
        copy of ``bins``, for reading one feature of many rows."""
        if self._columns is None:
            self._columns = self.backend.column_layout(self.bins)
        return self._columns

    @property
    def missing_bin(self) -> int:
        return int(getattr(self.bins, "missing", None) or np.iinfo(self.bins.dtype).max)

    @property
    def n_rows(self) -> int:
        return int(self.bins.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.bins.shape[1])

    @classmethod
    def from_values(cls, values, cuts: Cuts, backend) -> "BinnedMatrix":
        """Bin ``values`` (float32 (n, F), NaN = missing; host or device) with ``cuts`` on ``backend``."""
        dtype = bin_dtype_for(cuts)
        return cls(bins=backend.bin_values(values, cuts.values, cuts.ptrs, dtype), cuts=cuts, backend=backend)
