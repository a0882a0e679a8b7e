"""``CUDABackend.take_rows`` (kernels/nodes.cu ``gather_rows``), run on the host by the CUDA
emulator: lossguide's parents gathered from the batches they were evaluated in must be the
rows NumPy takes, for every array a parent carries (records, histograms, bounds, category sets).
tests/gpu/test_cuda_training.py trains lossguide trees through it on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

from dgboost.backend.cpu import CPUBackend

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")


def _batches(rng, sizes, row_shape, dtype):
    return [rng.integers(-(1 << 40), 1 << 40, (m,) + row_shape).astype(dtype) for m in sizes]


def test_rows_of_several_batches_are_gathered_in_order_for_every_array_of_a_parent():
    rng = np.random.default_rng(3)
    sizes = [6, 2, 9]
    rows = [[1, 4, 5], [0, 1], [0, 2, 3, 8]]
    arrays = [
        _batches(rng, sizes, (16,), np.int64),  # node records
        _batches(rng, sizes, (37, 2), np.int64),  # histograms
        [rng.normal(size=(m, 2)) for m in sizes],  # bounds
        _batches(rng, sizes, (3,), np.uint32),  # category sets: an odd number of 4-byte words
    ]
    sources = [[(batch, r) for batch, r in zip(per_batch, rows)] for per_batch in arrays]
    backend = _cuda_emulator.EmulatedCUDABackend()
    got = backend.take_rows(sources)
    want = CPUBackend().take_rows(sources)
    assert any(name == "gather_rows" for name, *_ in backend.launches)
    for g, w, per_batch in zip(got, want, arrays):
        assert g.dtype == per_batch[0].dtype and g.shape == (9,) + per_batch[0].shape[1:]
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(want[0][:3], arrays[0][0][[1, 4, 5]])  # the oracle itself: rows in order


def test_rows_of_a_view_are_taken_at_the_views_own_offset():
    rng = np.random.default_rng(4)
    whole = rng.integers(0, 1 << 30, (20, 16)).astype(np.int64)
    view = whole[5:12]  # a level's records are rows of one array of every level
    backend = _cuda_emulator.EmulatedCUDABackend()
    (got,) = backend.take_rows([[(view, [0, 6]), (whole, [19])]])
    np.testing.assert_array_equal(got, whole[[5, 11, 19]])


def test_rows_not_a_whole_number_of_4_byte_words_are_taken_piece_by_piece():
    flags = np.arange(30, dtype=np.uint8).reshape(10, 3)
    backend = _cuda_emulator.EmulatedCUDABackend()
    (got,) = backend.take_rows([[(flags, [2, 7]), (flags[:4], [1])]])
    np.testing.assert_array_equal(got, flags[[2, 7, 1]])
    assert not any(name == "gather_rows" for name, *_ in backend.launches)
