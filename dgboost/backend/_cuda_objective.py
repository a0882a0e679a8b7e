"""Objective gradients as single CUDA kernels (``kernels/objective.cu``), for CuPy arrays.

The objectives are written once against an array module; where their CuPy expression
chains cost most of a GPU round's memory, a fused kernel computes the same numbers here.
"""

from __future__ import annotations

import numpy as np

from ._nvrtc import get_module

__all__ = ["logistic_gradient"]

_THREADS = 256


def logistic_gradient(margin, label, weight, scale_pos_weight: float):
    """float32 (n, 1) gradient and hessian of the logistic loss, on the device.

    Parameters
    ----------
    margin : cupy.ndarray of float32, shape (n,)
    label : cupy.ndarray of float32, shape (n,)
    weight : cupy.ndarray of float32, shape (n,), or None
    scale_pos_weight : float
        Extra weight of rows labelled 1.
    """
    import cupy

    n = int(label.shape[0])
    grad = cupy.empty((n, 1), cupy.float32)
    hess = cupy.empty((n, 1), cupy.float32)
    if n == 0:
        return grad, hess
    margin = cupy.ascontiguousarray(margin, dtype=cupy.float32)
    label = cupy.ascontiguousarray(label, dtype=cupy.float32)
    w = grad if weight is None else cupy.ascontiguousarray(weight, dtype=cupy.float32)  # unread when absent
    blocks = int(min((n + _THREADS - 1) // _THREADS, 65_535))
    get_module("objective.cu").get_function("logistic_gradient")(
        (blocks,),
        (_THREADS,),
        (margin, label, w, np.int32(weight is not None), np.float64(scale_pos_weight), np.int64(n), grad, hess),
    )
    return grad, hess
