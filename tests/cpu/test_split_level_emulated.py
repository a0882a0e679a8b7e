"""``CUDABackend.split_level`` (partition_flags making the children in its last block and zeroing
the level's histograms, kernels/partition.cu and split_nodes.cuh), run on the host by the CUDA
emulator, gives the CPU engine's ``partition`` then ``split_nodes``: the same rows, children,
built segments and sides, by row counts (one rank) or by hessian sums (several ranks), in
place or into a second array; ``built`` comes back zeroed from the poison the emulator's work
arrays start from. ``tests/gpu/test_cuda_training.py`` and ``test_multi_gpu.py`` train through
it on GPUs.
"""

from __future__ import annotations

import numpy as np
import pytest

from dgboost._layout import BEGIN, DEFAULT_LEFT, END, FEATURE, LEFT_G, LEFT_H, NO_NODE, SPLIT_BIN
from dgboost.backend.cpu import CPUBackend
from dgboost.testing.kernel_inputs import mixed_width_data, node_records

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")

CPU = CPUBackend()
N_BINS = [256, 3, 40, 1, 17]


def _level(seed: int):
    """A matrix, its CPU bins, permuted rows and parents on every feature (one not split, one
    empty), with sums that make the hessian pick differ from the row count's."""
    rng, x, cuts = mixed_width_data(seed, N_BINS, n=2500)
    segments = np.array([[0, 400], [400, 1100], [1100, 1100], [1200, 1900], [1900, 2300], [2300, 2480]])
    feature = np.array([0, 1, 2, 4, -1, 3])
    n_bins = np.diff(cuts.ptrs)
    split_bin = [int(rng.integers(0, n_bins[f])) if f >= 0 else -1 for f in feature]
    sums = np.stack([rng.integers(-(2**20), 2**20, 6), rng.integers(2**20, 2**22, 6)], axis=1)
    records = node_records(segments[:, 0], segments[:, 1], feature, split_bin, rng.integers(0, 2, 6), sums=sums)
    records[:, LEFT_G] = sums[:, 0] // 3
    records[:, LEFT_H] = (sums[:, 1] * rng.uniform(0.1, 0.9, 6)).astype(np.int64)
    rows = rng.permutation(2500).astype(np.int32)
    bins = CPU.bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint16))
    return x, cuts, bins, records, rows


@pytest.mark.parametrize("by_hessian", [False, True], ids=["by row counts", "by hessian sums"])
@pytest.mark.parametrize("into", [False, True], ids=["in place", "into a second array"])
def test_a_split_level_gives_the_cpus_partition_and_children(by_hessian, into):
    x, cuts, bins, records, rows = _level(7)
    want_rows = rows.copy()
    counts = CPU.partition(CPU.column_layout(bins), want_rows, records)
    want = CPU.split_nodes(records, counts, None if by_hessian else counts)

    backend = _cuda_emulator.EmulatedCUDABackend()
    ell = backend.bin_values(x, cuts.values, cuts.ptrs)
    got_rows = rows.copy()
    out_rows = np.full_like(rows, -7) if into else None
    children_out = np.full((20, want[0].shape[1]), -3, np.int64)
    total_bins = int(cuts.ptrs[-1])
    backend.launches.clear()
    children, build_segments, build_left, built = backend.split_level(
        ell, got_rows, records, by_hessian, hist_bins=total_bins, out_rows=out_rows, out=children_out[4:16]
    )
    assert (
        np.shares_memory(children, children_out) and (children_out[:4] == -3).all() and (children_out[16:] == -3).all()
    )
    for got, expected in zip((children, build_segments, build_left), want):
        np.testing.assert_array_equal(got, expected)
    moved = out_rows if into else got_rows
    for begin, end in records[:, [BEGIN, END]]:
        np.testing.assert_array_equal(moved[begin:end], want_rows[begin:end])
    assert built.shape == (6, total_bins, 2) and not built.any()
    names = [name for name, *_ in backend.launches]
    assert names.count("partition_flags") == 1 and "split_nodes" not in names
    # the next level reads the children's tiles this launch scanned: no scan of its own
    assert backend._scanned_offsets(children) is not None
    assert backend._scanned_offsets(build_segments) is not None
    # the hessian pick and the count pick differ on these sums: the flag was read
    other = CPU.split_nodes(records, counts, counts if by_hessian else None)[2]
    assert (other != build_left).any()


def test_levels_split_one_after_another_read_each_others_tiles_from_alternate_arrays():
    x, cuts, bins, records, rows = _level(11)
    want_rows = rows.copy()
    cpu_columns = CPU.column_layout(bins)
    backend = _cuda_emulator.EmulatedCUDABackend()
    ell = backend.bin_values(x, cuts.values, cuts.ptrs)
    got_rows = rows.copy()
    # two wide levels first (of parents not split: no row moves), so that both arrays of child
    # tiles are long enough for every later level and are reused, as in a tree's later levels
    wide = node_records(np.arange(0, 2500, 50), np.arange(50, 2550, 50), feature=np.full(50, -1))
    for _ in range(2):
        backend.split_level(ell, got_rows, wide, False)
    np.testing.assert_array_equal(got_rows, rows)
    parents_cpu, parents_gpu = records, records
    rng = np.random.default_rng(3)
    for _ in range(3):
        counts = CPU.partition(cpu_columns, want_rows, parents_cpu)
        want_children = CPU.split_nodes(parents_cpu, counts, counts)[0]
        children = backend.split_level(ell, got_rows, parents_gpu, False)[0]
        np.testing.assert_array_equal(children, want_children)
        np.testing.assert_array_equal(got_rows, want_rows)
        # split every child again on a random feature (the next level's parents)
        m = children.shape[0]
        feature = rng.integers(0, len(N_BINS), m)
        split_bin = [int(rng.integers(0, N_BINS[f])) for f in feature]
        nxt = children.copy()
        nxt[:, FEATURE], nxt[:, SPLIT_BIN], nxt[:, DEFAULT_LEFT] = feature, split_bin, rng.integers(0, 2, m)
        no_node = want_children[:, FEATURE] == NO_NODE
        nxt[no_node, FEATURE] = NO_NODE
        parents_cpu = nxt
        children[...] = nxt  # the same array object: the tiles split_level scanned for it are read
        parents_gpu = children


def test_work_arrays_are_the_same_view_per_shape_until_their_array_grows():
    backend = _cuda_emulator.EmulatedCUDABackend()
    first = backend._work("counts", (3, 2), np.int64)
    assert backend._work("counts", (3, 2), np.int64) is first  # no new view: no host time
    other = backend._work("counts", (5,), np.int64)
    assert np.shares_memory(first, other)  # one array under every shape of a name
    grown = backend._work("counts", (40, 2), np.int64)
    assert not np.shares_memory(grown, first)
    again = backend._work("counts", (3, 2), np.int64)
    assert again is not first and np.shares_memory(again, grown)  # views of the old array dropped
    reserved = backend._work("built", (1, 4, 2), np.int64, reserve=1000)
    assert backend._scratch_arrays["built"].size >= 1000
    assert np.shares_memory(reserved, backend._work("built", (10, 50, 2), np.int64))  # within the reserve: no growth


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 1027, 4 * 32 * 256 + 4 * 100 + 3])
def test_the_root_rows_are_every_row_in_order_whatever_the_count(n):
    # one SM: a grid of at most 32 blocks, so the largest count takes the grid-stride loop
    backend = _cuda_emulator.EmulatedCUDABackend(sm_count=1)
    rows = backend.root_rows(n)
    assert rows.dtype == np.int32
    np.testing.assert_array_equal(rows, CPU.root_rows(n))
    np.testing.assert_array_equal(rows, np.arange(n))
