"""Backends: one implementation of every numerical stage per device (DESIGN.md §1.1)."""
from __future__ import annotations

from .base import Backend, SplitResult

__all__ = ["Backend", "SplitResult", "get_backend"]


def get_backend(device: str = "cpu", nthread: int = 0) -> Backend:
    """The backend for ``device`` ('cpu', 'cuda' or 'cuda:N')."""
    if device == "cpu":
        from .cpu import CPUBackend

        return CPUBackend(nthread)
    if str(device).startswith("cuda"):
        from ..errors import DGBoostValueError

        raise DGBoostValueError("the CUDA backend is not available in this version yet; use device='cpu'")
    from ..errors import ParameterError

    raise ParameterError(f"unknown device {device!r}: expected 'cpu' or 'cuda'")
