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


@pytest.mark.parametrize("n_groups", [1, 3, 8])
def test_paths_ordered_by_group_are_a_stable_sort_of_their_groups(n_groups):
    import numpy as np

    rng = np.random.default_rng(n_groups)
    path_group = rng.integers(0, n_groups, 2000).astype(np.int32)
    computed = np.flatnonzero(rng.random(2000) < 0.8)  # some paths are not computed
    by_group, group_ptr = gpu._by_group(computed, path_group, n_groups)
    want = computed[np.argsort(path_group[computed], kind="stable")]
    assert by_group.dtype == np.int64 and by_group.tobytes() == want.tobytes()
    counts = np.bincount(path_group[computed], minlength=n_groups)
    assert group_ptr.tolist() == [0, *np.cumsum(counts).tolist()]
    empty, ptr = gpu._by_group(computed[:0], path_group, n_groups)
    assert empty.shape == (0,) and ptr.tolist() == [0] * (n_groups + 1)
