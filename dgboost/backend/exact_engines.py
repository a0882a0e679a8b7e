"""The exact greedy split search engine of a backend (``tree_method="exact"``).

The driver (:mod:`dgboost.exact_greedy`) asks for an engine by backend, as it asks the
backend for every other stage, so it never imports a CUDA module itself.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import DeviceMemoryError
from ._cpu_exact import exact_memory_estimate

__all__ = ["exact_engine", "exact_memory_estimate", "host_available_bytes"]


def host_available_bytes() -> int:
    """Physical memory the host has available now (``sysconf``; a large number where it
    cannot tell)."""
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def exact_engine(backend, values):
    """The exact-greedy engine of ``backend`` over the training rows ``values``
    (float32 (n, F), NaN missing, on the backend's device), presorted once.

    Raises
    ------
    DeviceMemoryError
        Before presorting, when the estimate does not fit the device's free memory.
    """
    if backend.name == "cuda":
        from ._cuda_exact import CUDAExactEngine

        return CUDAExactEngine(backend, values)
    from ._cpu_exact import CPUExactEngine

    values = np.asarray(values)
    n_present = int(values.size - np.count_nonzero(np.isnan(values)))
    need = exact_memory_estimate(values.shape[0], n_present)
    available = host_available_bytes()
    if need > available:
        raise DeviceMemoryError(
            f"tree_method='exact' needs about {need / 2**30:.2f} GiB of host memory for {values.shape[0]} rows "
            f"with {n_present} present values (8 bytes a present value, presorted, plus the node map) but "
            f"{available / 2**30:.2f} GiB are available; use tree_method='hist' or fewer rows"
        )
    return CPUExactEngine(values)
