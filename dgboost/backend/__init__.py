"""Backends: one implementation of every numerical stage per device (DESIGN.md §1.1)."""
from __future__ import annotations

import functools
import threading

from .base import Backend

__all__ = ["Backend", "get_backend", "cuda_status"]

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


@functools.lru_cache(maxsize=1)
def cuda_status() -> tuple[bool, str]:
    """(whether a CUDA device is usable from this process, why not). Asked once per process."""
    try:
        import cupy

        count = int(cupy.cuda.runtime.getDeviceCount())
    except ImportError:
        return False, "CuPy is not installed"
    except Exception as exc:  # noqa: BLE001 - no driver, or a driver too old: no GPU for us
        return False, f"{type(exc).__name__}: {exc}"
    if count < 1:
        return False, "no CUDA device found"
    return True, ""
