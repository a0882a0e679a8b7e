"""The fixed-point scale of quantised gradients, shared by the training loop and the backends."""

from __future__ import annotations

import math

import numpy as np

from .errors import DGBoostValueError

__all__ = ["FIXED_POINT_BITS", "check_row_count", "fixed_point_scale", "scales_from_bits"]

FIXED_POINT_BITS = 30  # |quantised value| <= 2**30: fits int32 per row


def check_row_count(n_global: int) -> None:
    """Raise for 2**32 rows or more: int64 sums of 2**30-bounded values could overflow."""
    if n_global >= 1 << 32:
        raise DGBoostValueError("more than 2**32 rows: int64 histogram sums could overflow")


def fixed_point_scale(max_abs: float, n_global: int) -> float:
    """A power of two ``s`` with ``|round(x * s)| <= 2**30`` for every ``|x| <= max_abs``.

    Each row's quantised pair then fits int32 (half the memory traffic of int64 while
    histograms are built), keeps a resolution of ``max_abs * 2**-30`` and, summed into int64
    histograms, cannot overflow for fewer than 2**32 rows. Being a function of a maximum
    (exact under any reduction order), the scale is identical on every rank for any
    partitioning of the rows. A maximum that is not positive and finite gives 1.0 (the
    training loop raises on non-finite gradients when it reads their maxima).
    """
    check_row_count(n_global)
    if not max_abs > 0.0 or not math.isfinite(max_abs):
        return 1.0
    exponent = FIXED_POINT_BITS - math.ceil(math.log2(max_abs))
    if math.ldexp(max_abs, exponent) > 2.0**FIXED_POINT_BITS:  # log2 rounding at a power of two
        exponent -= 1
    return math.ldexp(1.0, min(exponent, 1000))


def scales_from_bits(bits: np.ndarray, n_global: int) -> np.ndarray:
    """float64 (2,): the scales of gradients and hessians from the float32 bits of their
    maxima (uint32 (2,), as ``Backend.abs_max_bits`` gives them)."""
    maxima = np.asarray(bits, np.uint32).view(np.float32).astype(np.float64)
    return np.array([fixed_point_scale(float(m), n_global) for m in maxima], np.float64)
