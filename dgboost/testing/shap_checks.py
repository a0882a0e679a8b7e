"""Helpers of the GPU SHAP tests: a small trained model and a bitwise comparison that says
where two outputs differ (``tests/gpu/test_cuda_shap.py``, ``test_cuda_interventional.py``)."""

from __future__ import annotations

import numpy as np

__all__ = ["small_model", "assert_bitwise"]


def small_model(
    objective: str = "binary:logistic",
    depth: int = 6,
    rounds: int = 20,
    missing: float = 0.15,
    n: int = 3000,
    F: int = 12,
    **extra,
):
    """``(booster, X)``: a CPU-trained dgboost model on :func:`~dgboost.datasets.make_synthetic`
    rows (float32 (n, F), ``missing`` NaN rate, seed 3) for ``objective`` (regression, binary
    or multiclass), 64 bins."""
    import dgboost as dg
    from dgboost.datasets import make_synthetic

    task = {"binary:logistic": "binary", "reg:squarederror": "regression"}.get(objective, "multiclass")
    X, y, _ = make_synthetic(n, F, task=task, missing_rate=missing, seed=3)
    params = {"objective": objective, "max_depth": depth, "max_bin": 64, **extra}
    if objective.startswith("multi"):
        params["num_class"] = int(y.max()) + 1
    return dg.train(params, dg.DMatrix(X, y), rounds), X


def assert_bitwise(got, want) -> None:
    """Raise AssertionError unless ``got`` and ``want`` (NumPy or CuPy) have the same shape,
    dtype and bytes, naming how many values differ and the largest difference."""
    got = got.get() if hasattr(got, "get") else np.asarray(got)
    want = want.get() if hasattr(want, "get") else np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if got.tobytes() != want.tobytes():
        diff = np.abs(got - want)
        where = np.unravel_index(int(np.nanargmax(diff)), diff.shape)
        raise AssertionError(
            f"not bitwise equal: {int((got != want).sum())} values differ, the largest "
            f"by {diff[where]:.3g} at {where} ({got[where]!r} vs {want[where]!r})"
        )
