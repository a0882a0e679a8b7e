"""Backends: one implementation of every numerical stage per device (docs/design.md §1.1).

:func:`get_backend` is the one lookup from a device to its backend; it applies the
missing-GPU rule of :func:`dgboost.device.resolve_device` (a GPU asked for where none is
usable gives a warning and the CPU backend), so every entry point that asks for a backend
follows it.
"""

from __future__ import annotations

import threading

from .._array import is_device_array
from ..device import Device, cuda_device_count, resolve_device
from .base import Backend

__all__ = ["Backend", "get_backend", "array_backend", "cuda_status"]

# one CUDA backend per device: it holds the device's properties, and its kernels are cached
_cuda_backends: dict = {}
_lock = threading.Lock()


def get_backend(device: str | Device = "cpu", nthread: int = 0) -> Backend:
    """The backend for ``device``.

    Parameters
    ----------
    device : str or Device
        Any spelling :func:`dgboost.device.parse_device` accepts.
    nthread : int
        CPU threads (0: Numba's default); ignored by the CUDA backend.

    Returns
    -------
    Backend
        The CPU backend, or the CUDA backend of the resolved GPU (made once per GPU and
        made current). A GPU that is not usable here gives the CPU backend, with a warning.

    Raises
    ------
    ParameterError
        For a string that is not a device.
    """
    resolved = resolve_device(device)
    if not resolved.is_cuda:
        from .cpu import CPUBackend

        return CPUBackend(nthread)
    with _lock:
        key = resolved.index
        if key not in _cuda_backends:
            from .cuda import CUDABackend

            _cuda_backends[key] = CUDABackend(key)
        backend = _cuda_backends[key]
    backend.device.use()
    return backend


def array_backend(array, nthread: int = 0) -> Backend:
    """The backend of the device ``array`` lives on: CUDA for a CuPy array (its GPU), else the CPU.

    Parameters
    ----------
    array : numpy.ndarray or cupy.ndarray
    nthread : int
        CPU threads (0: Numba's default).

    Returns
    -------
    Backend
    """
    if is_device_array(array):
        return get_backend(Device("cuda", int(array.device.id)), nthread)
    return get_backend("cpu", nthread)


def cuda_status() -> tuple[bool, str]:
    """(whether a CUDA device is usable from this process, why not); see
    :func:`dgboost.device.cuda_device_count`."""
    count, reason = cuda_device_count()
    return count > 0, reason
