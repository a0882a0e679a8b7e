"""``kernels/hash.cu`` (the device's row hash) against the NumPy formula it replaces."""

from __future__ import annotations

import numpy as np
import pytest

from dgboost.quantile import _hash_key, hashed_below, hashed_uniform

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")


@pytest.mark.parametrize("seed, stream", [(0, 0x5EED), (7, 3), (2**40 + 5, 2**63 + 11)])
@pytest.mark.parametrize("threshold", [0.0, 1e-3, 0.37, 0.5, 1.0])
def test_the_device_row_hash_keeps_the_rows_the_numpy_formula_keeps(seed, stream, threshold):
    backend = _cuda_emulator.EmulatedCUDABackend()
    rng = np.random.default_rng(seed % 1000)
    index = np.concatenate([rng.integers(0, 2**62, 3000), np.arange(5000), [0, 2**63 - 1]]).astype(np.int64)
    key = int(_hash_key(seed, stream))
    want = hashed_uniform(seed, stream, index) < threshold
    assert np.array_equal(backend.hashed_below(index, 0, index.size, key, threshold), want)
    # a run of indices from an offset, without the index array
    run = backend.hashed_below(None, 123_456_789, 4000, key, threshold)
    assert np.array_equal(run, hashed_uniform(seed, stream, np.arange(123_456_789, 123_456_789 + 4000)) < threshold)


def test_the_host_row_hash_is_the_formula():
    index = np.arange(10_000, dtype=np.int64)
    assert np.array_equal(hashed_below(3, 9, index, 0.25), hashed_uniform(3, 9, index) < 0.25)
    assert 0.2 < hashed_below(3, 9, index, 0.25).mean() < 0.3
