"""Rows to explain, checked and laid out for the CPU explainers (host and device matrices alike)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DGBoostTypeError, DGBoostValueError

__all__ = ["check_rows", "prepare_rows"]


def check_rows(X: Any, n_features: int) -> None:
    """Refuse a host or device matrix ``X`` that is not numeric, not 2-d, or narrower than
    ``n_features`` columns (DGBoostTypeError / DGBoostValueError)."""
    if not (np.issubdtype(X.dtype, np.integer) or np.issubdtype(X.dtype, np.floating) or X.dtype == np.bool_):
        raise DGBoostTypeError(f"X must be numeric, got dtype {X.dtype}")
    if X.ndim != 2:
        raise DGBoostValueError(f"X must be 2-dimensional (rows, features), got shape {X.shape}")
    if X.shape[1] < n_features:
        raise DGBoostValueError(
            f"X has {X.shape[1]} columns but the model splits on feature "
            f"{n_features - 1}; expected at least {n_features} columns"
        )


def prepare_rows(X: Any, n_features: int) -> np.ndarray:
    """``X`` as a C-contiguous float32 matrix with at least ``n_features`` columns."""
    if hasattr(X, "to_numpy"):  # pandas / polars
        X = X.to_numpy()
    X = np.asarray(X)
    check_rows(X, n_features)
    return np.ascontiguousarray(X, dtype=np.float32)
