"""The ELLPACK kernels, run on the host by the CUDA emulator, with features of different widths.

``_cuda_emulator`` compiles kernels/binning.cu, histogram.cu and partition.cu with a host C++
compiler and runs each CUDA thread as a host thread, while the CUDA backend's own host code
makes the launches. Each feature's entries take the bits of its own bins
(dgboost/backend/_ellpack.py): here a 4,000-bin feature sits among 256-bin, few-bin and
one-bin features, with missing values, and the packed stream, its unpacked bins, the
histograms (shared-memory, global and flat-loop kernel paths) and the partition of rows must
be the CPU engine's. Inputs are small; tests/gpu/test_cuda_kernels.py checks the same on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

from dgboost.backend._ellpack import entry_layout, packed_words
from dgboost.backend.cpu import CPUBackend
from dgboost.testing.kernel_inputs import mixed_width_data, node_records

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")

CPU = CPUBackend()
# widths 9, 2, 12, 1, 9, 2, 8, 5: 48 bits a row, where one width for all would take 8 x 12
MIXED = [256, 3, 4000, 1, 256, 2, 255, 17]
_MISSING = np.iinfo(np.uint16).max  # the CPU bins' missing marker


def _cpu_bins(x, cuts):
    return CPU.bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint16))


def _decode(packed, cut_ptrs, n_rows):
    """The stream's symbols, read bit by bit in NumPy: int64 (n, F)."""
    layout, row_bits = entry_layout(cut_ptrs)
    stream = np.unpackbits(np.asarray(packed, np.uint32).view(np.uint8), bitorder="little")
    out = np.zeros((n_rows, layout.shape[0]), np.int64)
    for f, (offset, width) in enumerate(layout.tolist()):
        for b in range(width):
            out[:, f] |= stream[np.arange(n_rows) * row_bits + offset + b].astype(np.int64) << b
    return out


def test_emulated_entries_of_a_mixed_width_matrix_are_at_their_own_offsets_and_widths():
    _, x, cuts = mixed_width_data(0, MIXED, n=300)
    backend = _cuda_emulator.EmulatedCUDABackend()
    ell = backend.bin_values(x, cuts.values, cuts.ptrs)
    layout, row_bits = entry_layout(cuts.ptrs)
    assert ell.row_bits == row_bits == 48
    np.testing.assert_array_equal(ell.layout, layout)
    assert ell.nbytes == 4 * packed_words(300, 48)
    assert ell.bits_per_entry < 48 / 8 + 0.02  # 6 bits an entry and the padding, not 12
    # each feature's missing symbol is its own number of bins
    want = _cpu_bins(x, cuts).astype(np.int64)
    own_missing = np.broadcast_to(np.diff(cuts.ptrs), want.shape)
    want[want == _MISSING] = own_missing[want == _MISSING]
    np.testing.assert_array_equal(_decode(ell.packed, cuts.ptrs, 300), want)
    assert not ell.packed[-1]  # the padding word stays empty


def test_emulated_mixed_width_matrix_unpacks_to_the_cpu_bins():
    _, x, cuts = mixed_width_data(1, MIXED, n=300)
    backend = _cuda_emulator.EmulatedCUDABackend()
    ell = backend.bin_values(x, cuts.values, cuts.ptrs)
    assert ell.missing == 4000
    want = _cpu_bins(x, cuts).astype(np.int64)
    want[want == _MISSING] = ell.missing
    np.testing.assert_array_equal(backend.unpack(ell).astype(np.int64), want)


@pytest.mark.parametrize(
    "n_bins,use_shared,flat",
    [
        (MIXED, False, False),  # the 4,000-bin feature is past shared memory: global adds
        ([256, 3, 3000, 1, 256, 2, 255, 17], True, False),
        # one group of 1,601 features in 534 runs of 3 (the 9-bit feature sets the run's
        # length), more runs than the block has threads: the flat loop
        ([256] + [1] * 1600, True, True),
        ([1, 2, 3, 5] * 150, True, False),  # one group of 600 features in 60 runs of 10
    ],
)
def test_emulated_histograms_of_a_mixed_width_matrix_equal_the_cpu_ones(n_bins, use_shared, flat):
    rng, x, cuts = mixed_width_data(2, n_bins, n=120 if flat else 600)
    backend = _cuda_emulator.EmulatedCUDABackend()
    ell = backend.bin_values(x, cuts.values, cuts.ptrs)
    assert ell.use_shared == use_shared
    if flat:
        assert ell.n_groups == 1
    n = x.shape[0]
    gpair = rng.integers(-(2**30), 2**30, size=(n, 2)).astype(np.int32)
    gpair[rng.random(n) < 0.1] = 0
    rows = rng.permutation(n).astype(np.int32)
    edges = np.sort(rng.integers(0, n, size=6)).reshape(3, 2)
    got = backend.build_histograms(ell, cuts.ptrs, gpair, rows, edges)
    want = CPU.build_histograms(_cpu_bins(x, cuts), cuts.ptrs, gpair, rows, edges)
    np.testing.assert_array_equal(got, want)


def test_emulated_partition_of_a_mixed_width_matrix_moves_the_cpu_rows():
    rng, x, cuts = mixed_width_data(3, MIXED, n=3000)
    backend = _cuda_emulator.EmulatedCUDABackend()
    ell = backend.bin_values(x, cuts.values, cuts.ptrs)
    # a parent on every feature (the wide one twice, the one-bin one: all rows left or missing)
    segments = np.array([[0, 300], [300, 700], [700, 1500], [1500, 1700], [1700, 2000], [2000, 2300]])
    segments = np.concatenate([segments, [[2300, 2500], [2500, 2700], [2700, 2990], [2990, 2990]]])
    feature = np.array([0, 1, 2, 3, 4, 5, 6, 7, 2, -1])
    n_bins = np.diff(cuts.ptrs)
    split_bin = [int(rng.integers(0, n_bins[f])) if f >= 0 else -1 for f in feature]
    records = node_records(
        segments[:, 0], segments[:, 1], feature=feature, split_bin=split_bin, default_left=rng.integers(0, 2, 10)
    )
    rows = rng.permutation(3000).astype(np.int32)
    want_rows, got_rows = rows.copy(), rows.copy()
    want = CPU.partition(CPU.column_layout(_cpu_bins(x, cuts)), want_rows, records)
    got = backend.partition(ell, got_rows, records)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_rows, want_rows)


def test_emulated_partition_into_a_second_array_writes_every_segment_there_and_copies_nothing_back():
    rng, x, cuts = mixed_width_data(4, MIXED, n=3000)
    backend = _cuda_emulator.EmulatedCUDABackend()
    ell = backend.bin_values(x, cuts.values, cuts.ptrs)
    # segments with gaps between them (rows of earlier leaves), a parent not split, one empty
    segments = np.array([[0, 700], [900, 2100], [2100, 2100], [2200, 2950]])
    feature = np.array([1, 4, 0, -1])
    n_bins = np.diff(cuts.ptrs)
    split_bin = [int(rng.integers(0, n_bins[f])) if f >= 0 else -1 for f in feature]
    records = node_records(
        segments[:, 0], segments[:, 1], feature=feature, split_bin=split_bin, default_left=rng.integers(0, 2, 4)
    )
    rows = rng.permutation(3000).astype(np.int32)
    want_rows = rows.copy()
    want = CPU.partition(CPU.column_layout(_cpu_bins(x, cuts)), want_rows, records)
    out = np.full_like(rows, -7)
    got = backend.partition(ell, rows.copy(), records, out=out)
    np.testing.assert_array_equal(got, want)
    for begin, end in segments:
        np.testing.assert_array_equal(out[begin:end], want_rows[begin:end])
    outside = np.ones(3000, bool)
    for begin, end in segments:
        outside[begin:end] = False
    assert (out[outside] == -7).all()  # nothing outside the segments is written
    names = [name for name, *_ in backend.launches]
    assert names.count("partition_scatter") == 1 and "partition_copy_back" not in names


def test_emulated_gpu_training_with_a_4000_category_feature_saves_the_cpu_model(monkeypatch):
    import json

    import dgboost as dg
    from dgboost import _training_job

    rng = np.random.default_rng(3)
    n = 400
    X = np.column_stack(
        [rng.integers(0, 4000, n), rng.integers(0, 3, n), rng.normal(size=n), rng.integers(0, 20, n)]
    ).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = ((np.nan_to_num(X[:, 0]) % 2 > 0) + 0.3 * np.nan_to_num(X[:, 2]) + (X[:, 1] == 1) > 0.6).astype(np.float32)
    params = {"objective": "binary:logistic", "max_depth": 3, "max_bin": 64, "device": "cpu"}

    def model():
        dtrain = dg.DMatrix(X, label=y, feature_types=["c", "c", "q", "c"], enable_categorical=True)
        return dg.train(params, dtrain, 1).save_raw("json")

    want = model()
    backend = _cuda_emulator.EmulatedCUDABackend()
    monkeypatch.setattr(_training_job, "get_backend", lambda *args, **kwargs: backend)
    got = model()
    assert got == want
    # the wide feature (12 bits among 2-, 7- and 5-bit ones) was split on, its histograms added
    # in global memory (more bins than a block's shared memory holds)
    trees = json.loads(got)["learner"]["gradient_booster"]["model"]["trees"]
    assert any(i == 0 and t == 1 for tree in trees for i, t in zip(tree["split_indices"], tree["split_type"]))
    assert {shared for name, _, _, shared in backend.launches if name == "build_histograms"} == {0}
