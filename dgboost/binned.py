"""BinnedMatrix: every feature value replaced by its local bin index.

Rows are stored row-major (``bins[row, feature]``) because histogram building walks a
node's rows and touches all their features. Missing values carry the sentinel
``missing_bin`` (the dtype's maximum) and are never accumulated into a histogram: a node's
missing sums are its totals minus the feature's bin sums. The CUDA backend bit-packs the
same indices (ELLPACK); the CPU keeps whole bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

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
    bins : ndarray of uint8 or uint16, shape (n, F)
        Local bin of each value; ``missing_bin`` where the value is missing.
    cuts : Cuts
    """

    bins: np.ndarray
    cuts: Cuts
    _columns: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def bins_by_feature(self) -> np.ndarray:
        """Column-major (F, n) copy of ``bins`` (made once), for reading one feature of many rows."""
        if self._columns is None:
            self._columns = np.empty(self.bins.shape[::-1], dtype=self.bins.dtype)
            # column by column: each pass reads the rows once, sequentially
            for f in range(self.bins.shape[1]):
                self._columns[f] = self.bins[:, f]
        return self._columns

    @property
    def missing_bin(self) -> int:
        return int(np.iinfo(self.bins.dtype).max)

    @property
    def n_rows(self) -> int:
        return int(self.bins.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.bins.shape[1])

    @classmethod
    def from_values(cls, values: np.ndarray, cuts: Cuts, backend) -> "BinnedMatrix":
        """Bin ``values`` (float32 (n, F), NaN = missing) with ``cuts`` on ``backend``."""
        dtype = bin_dtype_for(cuts)
        return cls(bins=backend.bin_values(values, cuts.values, cuts.ptrs, dtype), cuts=cuts)
