"""The Backend protocol: every numerical stage of training and prediction.

The driver code (grower, boosting loop, booster) never branches on the device; it calls
these methods. ``cpu`` implements them with NumPy + Numba, ``cuda`` with CuPy and the
kernels in ``kernels/``. Integer histograms make both backends produce identical trees.

Array conventions (``xp`` is numpy or cupy):
- ``bins``: uint8/uint16 (n, F), missing = dtype max.
- ``gpair``: int32 (n, 2), quantised gradient and hessian of each row (|value| <= 2**30).
- ``rows``: int32 (n,), a permutation of the local rows in which every node's rows are the
  contiguous segment ``rows[begin:end]``.
- ``hist``: int64 (n_nodes, total_bins, 2).
"""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np

__all__ = ["Backend", "SplitParams", "SplitResult"]


class SplitParams(Protocol):
    reg_lambda: float
    alpha: float
    gamma: float
    min_child_weight: float
    max_delta_step: float


class SplitResult:
    """Best split of each of ``n`` nodes (host NumPy arrays).

    Attributes
    ----------
    feature : int32 (n,)        -1 when the node has no valid split
    bin : int32 (n,)            local bin; rows with bin <= this go left
    default_left : bool (n,)
    gain : float64 (n,)         loss change
    left_sum : int64 (n, 2)     quantised (G, H) of the left child
    """

    __slots__ = ("feature", "bin", "default_left", "gain", "left_sum")

    def __init__(self, feature, bin, default_left, gain, left_sum):
        self.feature = feature
        self.bin = bin
        self.default_left = default_left
        self.gain = gain
        self.left_sum = left_sum


class Backend(Protocol):
    """Numerical stages, one implementation per device."""

    name: str
    xp: Any

    def asarray(self, array): ...

    def to_host(self, array) -> np.ndarray: ...

    def bin_values(self, values, cut_values, cut_ptrs, dtype): ...

    def quantise(self, grad, hess, scale_g: float, scale_h: float, keep=None):
        """int32 (n, 2) fixed-point gradient pairs; rows where ``keep`` is False get (0, 0).

        Histograms sum them in int64.
        """

    def build_histograms(self, bins, cut_ptrs, gpair, rows, begins, ends):
        """int64 (len(begins), total_bins, 2): sums of ``gpair`` per node and bin."""

    def evaluate_splits(self, hist, totals, cut_ptrs, feature_mask, scale_g, scale_h,
                        params: SplitParams) -> SplitResult: ...

    def partition(self, bins_by_feature, rows, begins, ends, feature, split_bin, default_left):
        """Stable in-place partition of each node's segment; returns left counts int64 (n,).

        ``bins_by_feature`` is the column-major (F, n) copy of the bins.
        """

    def add_leaf_values(self, margin, rows, begins, ends, values, group: int) -> None: ...

    def predict_margin(self, ensemble_arrays, values, tree_begin: int, tree_end: int, out): ...

    def predict_leaf(self, ensemble_arrays, values, tree_begin: int, tree_end: int): ...
