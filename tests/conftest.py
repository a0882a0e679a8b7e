"""Shared fixtures and markers: ``gpu``/``mgpu`` tests skip cleanly where CUDA is absent."""

from __future__ import annotations

import pytest


def _cuda_devices() -> int:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - no cupy, no driver or no device: all mean "no GPU"
        return 0


def pytest_collection_modifyitems(config, items):
    n = _cuda_devices()
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    skip_mgpu = pytest.mark.skip(reason="needs at least 2 CUDA GPUs")
    for item in items:
        if "gpu" in item.keywords and n < 1:
            item.add_marker(skip_gpu)
        if "mgpu" in item.keywords and n < 2:
            item.add_marker(skip_mgpu)
