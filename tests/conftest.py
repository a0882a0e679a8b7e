"""Shared fixtures and markers: ``gpu``/``mgpu`` tests skip cleanly where CUDA is absent.

A test needs a GPU when it carries the ``gpu`` or ``mgpu`` *marker* (not when "gpu" is merely one
of its keywords, which include the folder ``tests/gpu``). With ``DGBOOST_REQUIRE_GPU=1`` (set by
the GPU run scripts in ``benchmarks/``) a machine without a usable GPU -- CuPy missing or broken,
no driver, no device -- fails those tests instead of skipping them, so a broken GPU node cannot
report a green run of skipped tests. A machine with one working GPU still skips the ``mgpu`` tests.
"""

from __future__ import annotations

import os

import pytest


def _cuda_devices() -> tuple[int, str]:
    """The number of CUDA devices CuPy sees, and why it is 0 when it is."""
    try:
        import cupy

        n = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - no cupy, no driver or no device: all mean "no GPU"
        return 0, f"{type(exc).__name__}: {exc}"
    return n, "" if n else "CuPy sees no CUDA device"


def _gpu_required() -> bool:
    return os.environ.get("DGBOOST_REQUIRE_GPU", "").strip() not in ("", "0")


def pytest_configure(config):
    config._dgboost_cuda = None  # probed once, on the first GPU test


def _cuda(config) -> tuple[int, str]:
    if config._dgboost_cuda is None:
        config._dgboost_cuda = _cuda_devices()
    return config._dgboost_cuda


@pytest.hookimpl(tryfirst=True)  # before the test's fixtures start a GPU cluster
def pytest_runtest_setup(item):
    needs = 2 if item.get_closest_marker("mgpu") else 1 if item.get_closest_marker("gpu") else 0
    if not needs:
        return
    n, why = _cuda(item.config)
    if n < 1 and _gpu_required():
        pytest.fail(f"DGBOOST_REQUIRE_GPU is set but no CUDA GPU is usable ({why})", pytrace=False)
    if n < needs:
        pytest.skip("needs a CUDA GPU" if needs == 1 else "needs at least 2 CUDA GPUs")
