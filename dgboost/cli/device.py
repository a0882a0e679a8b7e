"""What ``--device auto`` means in this process."""
from __future__ import annotations


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU, CuPy and dgboost's CUDA backend are all usable, else ``cpu``."""
    if device != "auto":
        return device
    from ..backend import cuda_status, get_backend

    if not cuda_status()[0]:
        return "cpu"
    try:
        get_backend("cuda")
    except Exception:  # noqa: BLE001 - any failure means "no usable GPU here"
        return "cpu"
    return "cuda"
