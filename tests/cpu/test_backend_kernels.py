"""Each Numba kernel of the CPU backend against its plain NumPy twin."""
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dgboost.backend import _reference as ref
from dgboost.backend.cpu import CPUBackend
from dgboost.testing.kernel_inputs import binning_data, random_ensemble

BACKEND = CPUBackend()


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), max_bin=st.sampled_from([2, 3, 16, 255, 300]))
def test_binning_kernel_matches_numpy_searchsorted(seed, max_bin):
    _, x, cuts = binning_data(seed, max_bin=max_bin)
    dtype = np.uint8 if cuts.n_bins().max() <= 255 else np.uint16
    got = BACKEND.bin_values(x, cuts.values, cuts.ptrs, np.dtype(dtype))
    np.testing.assert_array_equal(got, ref.bin_values(x, cuts.values, cuts.ptrs, dtype))


def test_binning_puts_values_below_a_cut_left_of_it():
    _, x, cuts = binning_data(1)
    bins = BACKEND.bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint8))
    for f in range(x.shape[1]):
        c = cuts.feature_cuts(f)
        ok = ~np.isnan(x[:, f])
        b = bins[ok, f].astype(int)
        # x < c[b] always; x >= c[b-1] whenever b > 0
        assert np.all(x[ok, f] < c[b]) or np.all(b == c.size - 1)
        assert np.all(x[ok, f][b > 0] >= c[b[b > 0] - 1])


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n_nodes=st.integers(1, 5))
def test_histogram_kernel_matches_numpy_add_at(seed, n_nodes):
    rng, x, cuts = binning_data(seed, n=3000)
    bins = BACKEND.bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint8))
    gpair = rng.integers(-10**12, 10**12, size=(x.shape[0], 2))
    rows = rng.permutation(x.shape[0]).astype(np.int32)
    edges = np.sort(rng.integers(0, x.shape[0], size=2 * n_nodes)).reshape(n_nodes, 2)
    got = BACKEND.build_histograms(bins, cuts.ptrs, gpair, rows, edges[:, 0], edges[:, 1])
    want = ref.build_histograms(bins, cuts.ptrs, gpair, rows, edges[:, 0], edges[:, 1])
    np.testing.assert_array_equal(got, want)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), lam=st.sampled_from([0.0, 1.0, 5.0]),
       alpha=st.sampled_from([0.0, 0.5]), mcw=st.sampled_from([0.0, 1.0, 20.0]),
       mds=st.sampled_from([0.0, 0.7]), gamma=st.sampled_from([0.0, 2.0]))
def test_split_evaluation_kernel_matches_the_reference(seed, lam, alpha, mcw, mds, gamma):
    rng, x, cuts = binning_data(seed, n=800)
    bins = BACKEND.bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint8))
    scale = 2.0 ** 26
    g = rng.normal(size=x.shape[0])
    h = rng.uniform(0.1, 1.0, size=x.shape[0])
    gpair = BACKEND.quantise(g, h, scale, scale)
    rows = np.arange(x.shape[0], dtype=np.int32)
    hist = BACKEND.build_histograms(bins, cuts.ptrs, gpair, rows, [0, 0], [400, 800])
    totals = np.stack([gpair[:400].sum(0), gpair.sum(0)])
    mask = rng.random((2, x.shape[1])) < 0.8
    p = SimpleNamespace(reg_lambda=lam, alpha=alpha, gamma=gamma, min_child_weight=mcw, max_delta_step=mds)
    got = BACKEND.evaluate_splits(hist, totals, cuts.ptrs, mask, scale, scale, p)
    want = ref.evaluate_splits(hist, totals, cuts.ptrs, mask, scale, scale, p)
    for i, (f, b, dl, gain, left) in enumerate(want):
        assert got.feature[i] == f
        if f >= 0:
            assert (got.bin[i], bool(got.default_left[i])) == (b, dl)
            assert got.gain[i] == pytest.approx(gain, rel=1e-12)
            assert tuple(got.left_sum[i]) == left


def test_partition_kernel_is_stable_and_matches_the_reference():
    rng, x, cuts = binning_data(7, n=2000)
    bins = BACKEND.bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint8))
    rows = np.arange(x.shape[0], dtype=np.int32)
    begins, ends = np.array([0, 700, 1500]), np.array([700, 1500, 2000])
    feature, split_bin, dl = np.array([1, 2, 0]), np.array([3, 0, 1]), np.array([True, False, True])
    columns = np.ascontiguousarray(bins.T)
    want_rows, want_counts = ref.partition(columns, rows, begins, ends, feature, split_bin, dl)
    counts = BACKEND.partition(columns, rows, begins, ends, feature, split_bin, dl)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(counts, want_counts)
    for b, e, c in zip(begins, ends, counts):  # stable: each side keeps increasing row order
        assert np.all(np.diff(rows[b:b + c]) > 0) and np.all(np.diff(rows[b + c:e]) > 0)


def test_prediction_kernel_matches_a_plain_tree_walk():
    rng = np.random.default_rng(3)
    ens = random_ensemble(rng)
    x = rng.normal(size=(300, 4)).astype(np.float32)
    x[rng.random(x.shape) < 0.2] = np.nan
    got = np.zeros((300, 2), np.float32)
    want = np.zeros((300, 2), np.float32)
    BACKEND.predict_margin(ens, x, 1, 5, got)
    ref.predict_margin(ens, x, 1, 5, want)
    np.testing.assert_array_equal(got, want)
    leaves = BACKEND.predict_leaf(ens, x, 0, 5)
    assert leaves.shape == (300, 5)
    for t in range(5):
        assert np.all(ens.left[ens.offsets()[t] + leaves[:, t]] == -1)


@pytest.mark.parametrize("n_nodes", [1, 3, 12, 40])
def test_multithreaded_histogram_paths_match_numpy_add_at(n_nodes):
    # enough rows for several threads: few nodes share rows across threads (partial
    # histograms), many nodes are handed out whole
    rng, x, cuts = binning_data(11, n=60_000, f=5)
    bins = BACKEND.bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint8))
    gpair = rng.integers(-10**12, 10**12, size=(x.shape[0], 2))
    rows = rng.permutation(x.shape[0]).astype(np.int32)
    edges = np.sort(rng.choice(x.shape[0], size=2 * n_nodes, replace=False)).reshape(n_nodes, 2)
    got = BACKEND.build_histograms(bins, cuts.ptrs, gpair, rows, edges[:, 0], edges[:, 1])
    want = ref.build_histograms(bins, cuts.ptrs, gpair, rows, edges[:, 0], edges[:, 1])
    np.testing.assert_array_equal(got, want)


def test_leaf_values_are_added_to_exactly_the_rows_of_each_leaf():
    rng = np.random.default_rng(5)
    margin = rng.normal(size=(1000, 3)).astype(np.float32)
    rows = rng.permutation(1000).astype(np.int32)
    begins, ends = np.array([0, 100, 600]), np.array([100, 600, 1000])
    values = np.array([0.5, -1.25, 2.0], np.float32)
    want = margin.copy()
    for b, e, v in zip(begins, ends, values):
        want[rows[b:e], 1] += v
    BACKEND.add_leaf_values(margin, rows, begins, ends, values, 1)
    np.testing.assert_array_equal(margin, want)


def test_leaf_weight_kernel_matches_the_reference_formula():
    p = SimpleNamespace(reg_lambda=1.5, alpha=0.3, gamma=0.0, min_child_weight=2.0, max_delta_step=0.4)
    scale = 2.0 ** 30
    sums = np.array([[3 * scale, 10 * scale], [-0.1 * scale, 5 * scale], [5 * scale, 1 * scale],
                     [-40 * scale, 7 * scale]], dtype=np.int64)
    got = BACKEND.leaf_weights(sums, scale, scale, p)
    want = [ref._weight(g / scale, h / scale, p) for g, h in sums]
    np.testing.assert_allclose(got, want, rtol=1e-15)
