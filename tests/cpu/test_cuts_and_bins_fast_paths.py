"""The set-up's fast paths give what the plain ones give, bit for bit.

- The unit-weight cuts (``quantile._cuts_of_sorted``: runs of equal values in the sorted sample
  instead of ``np.unique`` and the summary's prefix sums) equal the exact weighted summary's
  (``_cuts_from_unique`` of the distinct values and their counts).
- The binning kernel's buckets only say where a value's search starts: any table, even a
  wrong one, gives ``searchsorted``'s bins.
- The blocked transpose of the sample is the transpose.
- The weighted runs (``quantile._weighted_runs``: one sort of (value, weight) 64-bit keys)
  equal those of ``np.lexsort`` by value then weight, sums bit for bit.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgboost import quantile as Q
from dgboost.backend import _cpu_kernels as K
from dgboost.backend.cpu import CPUBackend, _bin_buckets, _DenseBins
from dgboost.testing import kernel_reference as ref


def _sample(seed: int, kind: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == 0:
        v = rng.standard_normal(n)
    elif kind == 1:  # ties: a few hundred distinct values
        v = rng.integers(0, 1 + int(rng.integers(1, 2000)), n).astype(float)
    elif kind == 2:  # one value holds half of the weight
        v = np.where(rng.random(n) < 0.5, 0.0, rng.standard_normal(n))
    elif kind == 3:  # signed zeros and infinities
        v = rng.choice([-0.0, 0.0, np.inf, -np.inf, 1.0, 3.0], n)
    else:  # heavy tail, rounded
        v = np.round(rng.exponential(size=n) ** 3 * 100) / 7
    return v.astype(np.float32)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    kind=st.integers(0, 4),
    n=st.integers(1, 20_000),
    max_bin=st.sampled_from([2, 3, 7, 16, 64, 255, 256, 1000]),
)
def test_unit_weight_cuts_from_the_sorted_sample_equal_the_exact_summarys(seed, kind, n, max_bin):
    v = _sample(seed, kind, n)
    unique, counts = np.unique(v, return_counts=True)
    want = Q._cuts_from_unique(unique, counts * 1.0, max_bin)
    got = Q._cuts_of_sorted(np.sort(v), max_bin)
    assert got.dtype == np.float32 and got.tobytes() == want.tobytes()


def _lexsorted_runs(values: np.ndarray, weights: np.ndarray):
    """The weighted runs by their definition: rows ordered by value, then weight."""
    order = np.lexsort((weights, values))
    unique, start = np.unique(values[order], return_index=True)
    return unique, np.add.reduceat(weights[order], start)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    kind=st.integers(0, 4),
    n=st.integers(1, 5_000),
    weights=st.sampled_from(["uniform", "small integers", "tiny", "float64"]),
)
def test_weighted_runs_of_one_key_sort_equal_the_lexsorted_runs_bit_for_bit(seed, kind, n, weights):
    rng = np.random.default_rng(seed + 1)
    v = _sample(seed, kind, n)
    w = {
        "uniform": lambda: rng.random(n).astype(np.float32),
        "small integers": lambda: rng.integers(0, 4, n).astype(np.float32),  # zeros and ties
        "tiny": lambda: (rng.random(n) * 1e-30).astype(np.float32),  # subnormal float32 weights
        "float64": lambda: rng.random(n),  # not float32 numbers: the lexsort path
    }[weights]().astype(np.float64)
    unique, sums = Q._weighted_runs(v, w)
    want_unique, want_sums = _lexsorted_runs(v, w)
    assert unique.dtype == want_unique.dtype == np.float32
    # -0.0 and +0.0 are one value: either may stand for it (the cuts add +0.0)
    assert (unique + np.float32(0.0)).tobytes() == (want_unique + np.float32(0.0)).tobytes()
    assert sums.tobytes() == want_sums.tobytes()


@pytest.mark.parametrize("kind", range(5))
def test_weighted_cut_values_of_unit_weights_take_the_sorted_path_and_equal_equal_weights_of_two(kind):
    # all weights 2.0 go the np.unique way; the rank targets scale with the weight, the cuts do not
    v = _sample(kind, kind, 30_000)
    ones = Q.weighted_cut_values(v, np.ones(v.size), 256)
    twos = Q.weighted_cut_values(v, np.full(v.size, 2.0), 256)
    assert ones.tobytes() == twos.tobytes()


def test_cuts_of_a_sample_with_missing_values_ignore_them():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((50_000, 3)).astype(np.float32)
    x[rng.random(x.shape) < 0.3] = np.nan
    cuts = Q.compute_cuts(x, None, 256)
    for f in range(3):
        column = x[:, f][~np.isnan(x[:, f])]
        unique, counts = np.unique(column, return_counts=True)
        assert cuts.feature_cuts(f).tobytes() == Q._cuts_from_unique(unique, counts * 1.0, 256).tobytes()


@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (5000, 28), (10_000, 3), (4097, 2)])
def test_the_blocked_transpose_is_the_transpose(shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = Q._transposed(x)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, x.T)


def _bins_with(x, cuts, origin, scale, buckets, dtype=np.uint16):
    out = np.empty(x.shape, dtype)
    K.bin_values(x, cuts.values, cuts.ptrs, origin, scale, buckets, int(np.iinfo(dtype).max), out)
    return out


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), max_bin=st.sampled_from([2, 3, 16, 256, 300]))
def test_binning_gives_searchsorted_bins_whatever_the_bucket_table_says(seed, max_bin):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2000, 4)).astype(np.float32)
    x[:, 1] = np.round(x[:, 1] * 3)
    x[rng.random(x.shape) < 0.1] = np.nan
    x[:7, 2] = [np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 5e-40]
    cuts = Q.compute_cuts(x, None, max_bin)
    want = ref.bin_values(x, cuts.values, cuts.ptrs, np.uint16)
    origin, scale, buckets = _bin_buckets(cuts.values, cuts.ptrs)
    np.testing.assert_array_equal(_bins_with(x, cuts, origin, scale, buckets), want)
    # a table that starts every search too high, or anywhere, or scales that are off
    n_cuts = np.diff(cuts.ptrs)[:, None]
    too_high = np.broadcast_to(n_cuts, buckets.shape).astype(np.int32)
    np.testing.assert_array_equal(_bins_with(x, cuts, origin, scale, too_high), want)
    anywhere = (rng.integers(0, 1 << 20, buckets.shape) % (n_cuts + 1)).astype(np.int32)
    np.testing.assert_array_equal(_bins_with(x, cuts, origin, scale, anywhere), want)
    np.testing.assert_array_equal(_bins_with(x, cuts, origin - 0.5, scale * 3.0, buckets), want)


def test_dense_bins_are_made_in_one_byte_directly_and_equal_the_wide_ones():
    x = np.random.default_rng(5).standard_normal((30_000, 5)).astype(np.float32)
    cuts = Q.compute_cuts(x, None, 256)
    dense = CPUBackend().bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint16))
    assert dense.dtype == np.uint8 and type(dense).__name__ == "_DenseBins"
    np.testing.assert_array_equal(dense, ref.bin_values(x, cuts.values, cuts.ptrs, np.uint16))
    x[7, 3] = np.nan  # one missing value: the two-byte layout with its missing marker
    wide = CPUBackend().bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint16))
    assert wide.dtype == np.uint16
    np.testing.assert_array_equal(wide, ref.bin_values(x, cuts.values, cuts.ptrs, np.uint16))


@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (16_385, 5), (40_000, 28)])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_the_column_layout_made_a_block_of_rows_at_a_time_is_the_transpose(shape, dtype):
    bins = np.random.default_rng(1).integers(0, 255, shape).astype(dtype)
    columns = CPUBackend().column_layout(bins)
    assert columns.flags.c_contiguous and type(columns) is np.ndarray
    np.testing.assert_array_equal(columns, bins.T)
    dense = CPUBackend().column_layout(bins.astype(np.uint8).view(_DenseBins))
    assert type(dense) is _DenseBins
    np.testing.assert_array_equal(dense, bins.T)


@pytest.mark.parametrize("features", [range(0, 7), range(2, 7), range(5, 6)])
def test_unit_weight_cuts_a_few_features_a_thread_equal_those_of_the_whole_transposed_sample(features):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((300_000, 7)).astype(np.float32)  # enough for the threads
    x[rng.random(x.shape) < 0.05] = np.nan
    x[:, 3] = np.round(x[:, 3] * 10)
    got = Q._cuts_sorted_on_host(x, None, features, 256)
    want = Q._cuts_of_columns(Q._transposed(x[:, features.start : features.stop]), None, 256)
    assert len(got) == len(features)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want))
