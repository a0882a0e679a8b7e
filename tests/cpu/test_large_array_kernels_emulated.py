"""``kernels/select.cu``'s gather of matrix rows and search for the first infinite entry
(which stand in for CuPy's ``values[rows]`` and ``isinf(...).any()`` on large device
matrices) against NumPy, run on the host by the emulator."""

from __future__ import annotations

import numpy as np
import pytest

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")


@pytest.mark.parametrize("m", [0, 1, 33, 700])
def test_the_device_gather_of_matrix_rows_is_numpys_take_bit_for_bit(m):
    rng = np.random.default_rng(m)
    values = rng.standard_normal((500, 13)).astype(np.float32)
    values[rng.random(values.shape) < 0.2] = np.nan
    values[3, 4] = -0.0
    rows = np.sort(rng.integers(0, 500, size=m)).astype(np.int64)
    got = _cuda_emulator.EmulatedCUDABackend().take_matrix_rows(values, rows)
    assert got.dtype == np.float32 and got.shape == (m, 13) and got.flags.c_contiguous
    assert np.array_equal(got.view(np.uint32), values[rows].view(np.uint32))  # NaNs and -0.0 too


def test_the_device_gather_reads_a_strided_matrix_by_its_strides():
    values = np.arange(60, dtype=np.float32).reshape(10, 6)[:, ::2]  # column stride of 2 entries
    rows = np.array([9, 0, 4, 4], np.int64)
    got = _cuda_emulator.EmulatedCUDABackend().take_matrix_rows(values, rows)
    assert np.array_equal(got, values[rows])


@pytest.mark.parametrize(
    "where", [[], [0], [4999], [1234, 77, 4000], [2048, 2047]], ids=["none", "first", "last", "several", "edges"]
)
def test_the_first_infinite_entry_is_found_at_its_lowest_index(where):
    values = np.random.default_rng(1).standard_normal(5000).astype(np.float32)
    values[::7] = np.nan  # missing values are not infinite
    for k, i in enumerate(where):
        values[i] = np.inf if k % 2 else -np.inf
    got = _cuda_emulator.EmulatedCUDABackend().first_infinite(values)
    assert got == (min(where) if where else values.size)


def test_the_first_infinite_entry_of_an_empty_array_is_its_size():
    assert _cuda_emulator.EmulatedCUDABackend().first_infinite(np.empty(0, np.float32)) == 0


def test_the_device_gather_refuses_a_matrix_that_is_not_float32():
    from dgboost.errors import DGBoostValueError

    with pytest.raises(DGBoostValueError, match="float32 matrix, got float64"):
        _cuda_emulator.EmulatedCUDABackend().take_matrix_rows(np.zeros((3, 2)), np.zeros(1, np.int64))
