"""``kernels/select.cu`` (the sketch sample's row indices on the device) against ``numpy.flatnonzero``."""

from __future__ import annotations

import numpy as np
import pytest

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")


@pytest.mark.parametrize("n", [0, 1, 7, 2047, 2048, 2049, 6000])
@pytest.mark.parametrize("density", [0.0, 0.01, 0.5, 1.0])
def test_the_device_true_indices_are_numpys_flatnonzero(n, density):
    # blocks of 2,048 entries (256 threads of 8): sizes on, below and past a block's end
    backend = _cuda_emulator.EmulatedCUDABackend()
    mask = np.random.default_rng(n).random(n) < density
    got = backend.true_indices(mask)
    assert got.dtype == np.int64 and np.array_equal(got, np.flatnonzero(mask))


def test_the_device_true_indices_keep_order_across_threads_and_blocks():
    backend = _cuda_emulator.EmulatedCUDABackend()
    mask = np.zeros(5000, np.bool_)
    mask[[0, 7, 8, 2047, 2048, 2055, 4095, 4096, 4999]] = True  # thread and block edges
    assert np.array_equal(backend.true_indices(mask), np.flatnonzero(mask))
    launched = [name for name, *_ in backend.launches]
    assert launched == ["true_counts", "true_indices"]
