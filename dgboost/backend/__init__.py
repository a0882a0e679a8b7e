"""Backends: one implementation of every numerical stage per device (DESIGN.md §1.1)."""
from __future__ import annotations

import threading

from .base import Backend, SplitResult

__all__ = ["Backend", "SplitResult", "get_backend"]

# one CUDA backend per device: it holds the device's properties, and its kernels are cached
_cuda_backends: dict = {}
_lock = threading.Lock()


def get_backend(device: str = "cpu", nthread: int = 0) -> Backend:
    """The backend for ``device`` ('cpu', 'cuda' or 'cuda:N')."""
    if device == "cpu":
        from .cpu import CPUBackend

        return CPUBackend(nthread)
    device = str(device)
    if device in ("cuda", "gpu") or device.startswith(("cuda:", "gpu:")):
        _, _, index = device.partition(":")
        if index and not index.isdigit():
            from ..errors import ParameterError

            raise ParameterError(f"unknown device {device!r}: expected 'cpu', 'cuda' or 'cuda:N'")
        with _lock:
            key = int(index or 0)
            if key not in _cuda_backends:
                from .cuda import CUDABackend

                _cuda_backends[key] = CUDABackend(key)
            backend = _cuda_backends[key]
        backend.device.use()
        return backend
    from ..errors import ParameterError

    raise ParameterError(f"unknown device {device!r}: expected 'cpu', 'cuda' or 'cuda:N'")
