"""Host-side planning of the GPU SHAP kernels, checked without a GPU."""

from __future__ import annotations

import pytest

from dgboost.backend import _cuda_treeshap as gpu


@pytest.mark.parametrize("n,bytes_per_row,multiple", [(10, 8, 4), (300, 8, 32), (5, 10**6, 8), (0, 8, 4)])
def test_row_chunks_cover_every_row_once_in_whole_blocks_within_the_slice_sum_budget(
    monkeypatch, n, bytes_per_row, multiple
):
    monkeypatch.setattr(gpu, "_PARTIAL_BYTES", 1000)
    chunks = list(gpu._row_chunks(n, bytes_per_row, multiple))
    rows = [r for r0, m in chunks for r in range(r0, r0 + m)]
    assert rows == list(range(n))
    for _, m in chunks[:-1]:  # every chunk but the last is whole blocks
        assert m % multiple == 0
    for _, m in chunks:  # within the budget, or at most one block when one block is over it
        assert m * bytes_per_row <= 1000 or m <= multiple
