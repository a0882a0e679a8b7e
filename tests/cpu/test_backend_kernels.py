"""Each Numba kernel of the CPU backend against its plain NumPy twin."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgboost._layout import BEGIN, DEFAULT_LEFT, END, FEATURE, GAIN, LEFT_G, LEFT_H, NO_NODE, SPLIT_BIN, SUM_G, SUM_H
from dgboost.backend import _cpu_kernels as K
from dgboost.backend.cpu import CPUBackend
from dgboost.binned import BinnedMatrix
from dgboost.quantile import compute_cuts
from dgboost.testing import kernel_reference as ref
from dgboost.testing.kernel_inputs import binning_data, node_records, random_ensemble, random_segments

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
    gpair = rng.integers(-(10**12), 10**12, size=(x.shape[0], 2))
    rows = rng.permutation(x.shape[0]).astype(np.int32)
    edges = np.sort(rng.integers(0, x.shape[0], size=2 * n_nodes)).reshape(n_nodes, 2)
    got = BACKEND.build_histograms(bins, cuts.ptrs, gpair, rows, edges)
    want = ref.build_histograms(bins, cuts.ptrs, gpair, rows, edges[:, 0], edges[:, 1])
    np.testing.assert_array_equal(got, want)
    # the begin/end columns of node records (a strided view) give the same segments
    records = node_records(edges[:, 0], edges[:, 1])
    np.testing.assert_array_equal(
        BACKEND.build_histograms(bins, cuts.ptrs, gpair, rows, records[:, BEGIN : END + 1]), want
    )


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    lam=st.sampled_from([0.0, 1.0, 5.0]),
    alpha=st.sampled_from([0.0, 0.5]),
    mcw=st.sampled_from([0.0, 1.0, 20.0]),
    mds=st.sampled_from([0.0, 0.7]),
    gamma=st.sampled_from([0.0, 2.0]),
)
def test_split_evaluation_kernel_matches_the_reference(seed, lam, alpha, mcw, mds, gamma):
    rng, x, cuts = binning_data(seed, n=800)
    bins = BACKEND.bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint8))
    scale = 2.0**26
    g = rng.normal(size=x.shape[0])
    h = rng.uniform(0.1, 1.0, size=x.shape[0])
    gpair = BACKEND.quantise(g, h, np.array([scale, scale]))
    rows = np.arange(x.shape[0], dtype=np.int32)
    hist = BACKEND.build_histograms(bins, cuts.ptrs, gpair, rows, np.array([[0, 400], [0, 800]]))
    totals = np.stack([gpair[:400].sum(0), gpair.sum(0)])
    mask = rng.random((2, x.shape[1])) < 0.8
    p = SimpleNamespace(reg_lambda=lam, alpha=alpha, gamma=gamma, min_child_weight=mcw, max_delta_step=mds)
    records = node_records([0, 0], [400, 800], sums=totals)
    BACKEND.evaluate_splits(hist, records, cuts.ptrs, mask, np.array([scale, scale]), p)
    want = ref.evaluate_splits(hist, totals, cuts.ptrs, mask, scale, scale, p)
    for i, (f, b, dl, gain, left) in enumerate(want):
        assert records[i, FEATURE] == f
        if f >= 0:
            assert (records[i, SPLIT_BIN], bool(records[i, DEFAULT_LEFT])) == (b, dl)
            assert records[i, GAIN : GAIN + 1].view(np.float64)[0] == pytest.approx(gain, rel=1e-12)
            assert (records[i, LEFT_G], records[i, LEFT_H]) == left
        # evaluation leaves the sums and segments alone
        assert (records[i, SUM_G], records[i, SUM_H]) == tuple(totals[i])
        assert (records[i, BEGIN], records[i, END]) == (0, [400, 800][i])


def test_split_evaluation_without_a_mask_uses_every_feature():
    rng, x, cuts = binning_data(3, n=800)
    bins = BACKEND.bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint8))
    gpair = BACKEND.quantise(rng.normal(size=800), rng.uniform(0.1, 1.0, size=800), np.array([2.0**26, 2.0**26]))
    hist = BACKEND.build_histograms(bins, cuts.ptrs, gpair, np.arange(800, dtype=np.int32), np.array([[0, 800]]))
    p = SimpleNamespace(reg_lambda=1.0, alpha=0.0, gamma=0.0, min_child_weight=1.0, max_delta_step=0.0)
    unmasked = node_records([0], [800], sums=gpair.sum(0)[None])
    masked = unmasked.copy()
    BACKEND.evaluate_splits(hist, unmasked, cuts.ptrs, None, np.array([2.0**26, 2.0**26]), p)
    BACKEND.evaluate_splits(hist, masked, cuts.ptrs, np.ones((1, x.shape[1]), bool), np.array([2.0**26, 2.0**26]), p)
    assert unmasked[0, FEATURE] >= 0
    np.testing.assert_array_equal(unmasked, masked)


def test_partition_kernel_is_stable_and_matches_the_reference():
    rng, x, cuts = binning_data(7, n=2000)
    bins = BACKEND.bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint8))
    rows = np.arange(x.shape[0], dtype=np.int32)
    begins, ends = np.array([0, 700, 1500]), np.array([700, 1500, 2000])
    feature, split_bin, dl = np.array([1, 2, 0]), np.array([3, 0, 1]), np.array([True, False, True])
    columns = np.ascontiguousarray(bins.T)
    want_rows, want_counts = ref.partition(columns, rows, begins, ends, feature, split_bin, dl)
    counts = BACKEND.partition(columns, rows, node_records(begins, ends, feature, split_bin, dl))
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(counts[:, 0], want_counts)
    np.testing.assert_array_equal(counts.sum(1), ends - begins)
    for b, e, c in zip(begins, ends, counts[:, 0]):  # stable: each side keeps increasing row order
        assert np.all(np.diff(rows[b : b + c]) > 0) and np.all(np.diff(rows[b + c : e]) > 0)
    # into a second array: the same rows and counts there
    out = np.full_like(rows, -1)
    again = BACKEND.partition(
        columns, np.arange(x.shape[0], dtype=np.int32), node_records(begins, ends, feature, split_bin, dl), out=out
    )
    np.testing.assert_array_equal(out, want_rows)
    np.testing.assert_array_equal(again, counts)


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
    gpair = rng.integers(-(10**12), 10**12, size=(x.shape[0], 2))
    rows = rng.permutation(x.shape[0]).astype(np.int32)
    edges = np.sort(rng.choice(x.shape[0], size=2 * n_nodes, replace=False)).reshape(n_nodes, 2)
    got = BACKEND.build_histograms(bins, cuts.ptrs, gpair, rows, edges)
    want = ref.build_histograms(bins, cuts.ptrs, gpair, rows, edges[:, 0], edges[:, 1])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sampled", [False, True])
def test_quantised_pairs_and_their_totals_equal_numpy_rint_and_sums(dtype, sampled):
    rng = np.random.default_rng(8)
    n = 50_001
    wide = rng.normal(size=(n, 2)).astype(dtype)
    grad, hess = wide[:, 1], rng.uniform(0.0, 1.0, size=n).astype(dtype)  # a strided column too
    grad[:5] = [0.5, -0.5, 1.5, -2.5, 2.0**-27]  # halves round to even
    scales = np.array([2.0**28, 2.0**29])
    keep = rng.uniform(size=n) < 0.7 if sampled else None
    got = BACKEND.quantise(grad, hess, scales, keep)
    want = np.stack([np.rint(grad.astype(np.float64) * scales[0]), np.rint(hess.astype(np.float64) * scales[1])], 1)
    if sampled:
        want[~keep] = 0
    np.testing.assert_array_equal(got, want.astype(np.int32))
    np.testing.assert_array_equal(BACKEND.gpair_totals(got), got.astype(np.int64).sum(axis=0))


@pytest.mark.parametrize(
    "special", [[], [0.0], [-0.0, -0.0], [np.inf], [-np.inf, 3.0], [np.nan], [-np.nan, np.inf], [1e-45, -1e-45]]
)
def test_gradient_maxima_bits_equal_numpy_abs_max_nan_and_inf_included(special):
    rng = np.random.default_rng(9)
    wide = rng.normal(size=(10_001, 2)).astype(np.float32)
    grad, hess = wide[:, 1], rng.uniform(0.0, 2.0, size=10_001).astype(np.float32)  # a strided column too
    grad[[17, 9000][: len(special)]] = special
    hess[: len(special)] = np.abs(np.array(special, np.float32))
    for g, h in [(grad, hess), (np.array(special, np.float32), np.array(special, np.float64))]:
        np.testing.assert_array_equal(BACKEND.abs_max_bits(g, h), ref.abs_max_bits(g, h))


def test_bins_of_256_bins_without_missing_values_take_one_byte_and_change_no_histogram_or_partition():
    rng = np.random.default_rng(12)
    x = rng.normal(size=(40_000, 3)).astype(np.float32)
    cuts = compute_cuts(x, None, 256)
    assert int(cuts.n_bins().max()) == 256  # one bin more than a byte holds beside a missing marker
    dense = BinnedMatrix.from_values(x, cuts, BACKEND)
    wide = ref.bin_values(x, cuts.values, cuts.ptrs, np.uint16)
    assert dense.bins.dtype == np.uint8 and dense.missing_bin == 256
    np.testing.assert_array_equal(dense.bins, wide)
    assert (wide == 255).any()  # the byte's maximum is a bin here, not "missing"
    gpair = rng.integers(-(2**30), 2**30, size=(x.shape[0], 2)).astype(np.int32)
    rows = rng.permutation(x.shape[0]).astype(np.int32)
    segments = np.array([[0, 15_000], [15_000, 40_000]])
    np.testing.assert_array_equal(
        BACKEND.build_histograms(dense.bins, cuts.ptrs, gpair, rows, segments),
        BACKEND.build_histograms(wide, cuts.ptrs, gpair, rows, segments),
    )
    records = node_records(segments[:, 0], segments[:, 1], feature=[0, 2], split_bin=[254, 100], default_left=[1, 1])
    dense_rows, wide_rows = rows.copy(), rows.copy()
    dense_counts = BACKEND.partition(dense.bins_by_feature, dense_rows, records)
    wide_counts = BACKEND.partition(BACKEND.column_layout(wide), wide_rows, records)
    np.testing.assert_array_equal(dense_counts, wide_counts)
    np.testing.assert_array_equal(dense_rows, wide_rows)


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


@pytest.mark.parametrize("ascending", [True, False])
@pytest.mark.parametrize("n_slices", [1, 2, 3, 7])
def test_leaf_values_reach_each_row_once_in_any_row_order_on_any_number_of_slices(ascending, n_slices):
    rng = np.random.default_rng(6)
    n = 5000
    margin = rng.normal(size=(n, 2)).astype(np.float32)
    leaf_of_row = rng.integers(0, 9, size=n)
    leaf_of_row[n // 3 : n // 2] = 4  # one large leaf whose rows cross several slices' ranges
    rows = np.argsort(leaf_of_row, kind="stable").astype(np.int32)  # each leaf's rows ascending
    counts = np.bincount(leaf_of_row, minlength=10)  # leaf 9 has no rows
    ends = np.cumsum(counts)
    begins = ends - counts
    if not ascending:
        for b, e in zip(begins, ends):
            rows[b:e] = rng.permutation(rows[b:e])
    values = rng.normal(size=10).astype(np.float32)
    want = margin.copy()
    want[rows, 1] += np.repeat(values, counts)
    K.add_leaf_values(margin, rows, begins, ends, values, 1, n_slices)
    np.testing.assert_array_equal(margin, want)


def test_leaf_weight_kernel_matches_the_reference_formula():
    p = SimpleNamespace(reg_lambda=1.5, alpha=0.3, gamma=0.0, min_child_weight=2.0, max_delta_step=0.4)
    scale = 2.0**30
    sums = np.array(
        [[3 * scale, 10 * scale], [-0.1 * scale, 5 * scale], [5 * scale, 1 * scale], [-40 * scale, 7 * scale]],
        dtype=np.int64,
    )
    got = BACKEND.leaf_weights(sums, scale, scale, p)
    want = [ref._weight(g / scale, h / scale, p) for g, h in sums]
    np.testing.assert_allclose(got, want, rtol=1e-15)


def test_children_records_split_each_parent_segment_and_sum():
    rng = np.random.default_rng(4)
    segments = random_segments(rng, 10_000, 6)
    sums = rng.integers(-(10**9), 10**9, size=(6, 2))
    parents = node_records(segments[:, 0], segments[:, 1], sums=sums)
    parents[:, LEFT_G] = rng.integers(-(10**9), 10**9, size=6)
    parents[:, LEFT_H] = rng.integers(0, 10**9, size=6)
    sizes = segments[:, 1] - segments[:, 0]
    lefts = (sizes * rng.random(6)).astype(np.int64)
    counts = np.stack([lefts, sizes - lefts], axis=1)
    global_counts = counts + rng.integers(0, 50, size=(6, 2))  # other ranks' rows
    parents[:, FEATURE] = rng.integers(0, 5, 6)
    children, build, build_left = BACKEND.split_nodes(parents, counts, global_counts)
    left, right = children[0::2], children[1::2]
    np.testing.assert_array_equal(left[:, BEGIN], segments[:, 0])
    np.testing.assert_array_equal(left[:, END], right[:, BEGIN])
    np.testing.assert_array_equal(right[:, END], segments[:, 1])
    np.testing.assert_array_equal(left[:, END] - left[:, BEGIN], lefts)
    np.testing.assert_array_equal(left[:, SUM_G : SUM_H + 1] + right[:, SUM_G : SUM_H + 1], sums)
    np.testing.assert_array_equal(left[:, SUM_G], parents[:, LEFT_G])
    assert np.all(children[:, FEATURE] == -1)
    smaller_left = global_counts[:, 0] <= global_counts[:, 1]
    np.testing.assert_array_equal(build_left, smaller_left.astype(np.int64))
    np.testing.assert_array_equal(
        build, np.where(smaller_left[:, None], left[:, BEGIN : END + 1], right[:, BEGIN : END + 1])
    )


def test_without_global_counts_the_child_of_smaller_hessian_sum_is_built_ties_left():
    rng = np.random.default_rng(5)
    segments = random_segments(rng, 10_000, 8)
    sums = np.stack([rng.integers(-(10**9), 10**9, 8), rng.integers(10**6, 10**9, 8)], axis=1)
    parents = node_records(segments[:, 0], segments[:, 1], sums=sums)
    parents[:, LEFT_H] = (sums[:, 1] * rng.random(8)).astype(np.int64)
    parents[0, LEFT_H] = sums[0, 1] // 2 if sums[0, 1] % 2 == 0 else sums[0, 1] // 2 + 1  # a tie or left heavier
    parents[1, SUM_H] = 2 * parents[1, LEFT_H]  # an exact tie
    parents[:, FEATURE] = rng.integers(0, 5, 8)
    parents[7, FEATURE] = -1  # not split: builds nothing (left, empty)
    sizes = segments[:, 1] - segments[:, 0]
    counts = np.stack([sizes // 3, sizes - sizes // 3], axis=1)
    children, build, build_left = BACKEND.split_nodes(parents, counts, None)
    left_h, right_h = parents[:, LEFT_H], parents[:, SUM_H] - parents[:, LEFT_H]
    want_left = (left_h <= right_h) | (parents[:, FEATURE] < 0)
    assert want_left[1] and build_left[1] == 1
    np.testing.assert_array_equal(build_left, want_left.astype(np.int64))
    left, right = children[0::2], children[1::2]
    np.testing.assert_array_equal(
        build[:7], np.where(want_left[:7, None], left[:7, BEGIN : END + 1], right[:7, BEGIN : END + 1])
    )
    # the records themselves do not depend on how the child to build is picked
    same, _, _ = BACKEND.split_nodes(parents, counts, counts)
    np.testing.assert_array_equal(children, same)
    # written into the rows of a given array (a batch's records of several levels), the same
    held = np.full((20, children.shape[1]), -7, np.int64)
    into, _, _ = BACKEND.split_nodes(parents, counts, None, out=held[2:18])
    assert np.shares_memory(into, held)
    np.testing.assert_array_equal(held[2:18], children)
    assert (held[:2] == -7).all() and (held[18:] == -7).all()


def test_children_histograms_place_the_built_child_and_subtract_its_sibling():
    rng = np.random.default_rng(6)
    parent_hist = rng.integers(-(10**6), 10**6, size=(5, 30, 2))
    index = np.array([4, 0, 2])
    built = rng.integers(-(10**6), 10**6, size=(3, 30, 2))
    build_left = np.array([1, 0, 1])
    out = BACKEND.children_histograms(parent_hist, index, built, build_left)
    assert out.shape == (6, 30, 2)
    for j in range(3):
        mine, other = (out[2 * j], out[2 * j + 1]) if build_left[j] else (out[2 * j + 1], out[2 * j])
        np.testing.assert_array_equal(mine, built[j])
        np.testing.assert_array_equal(mine + other, parent_hist[index[j]])
    # without an index, parent j is row j
    same = BACKEND.children_histograms(parent_hist[index], None, built, build_left)
    np.testing.assert_array_equal(same, out)


@pytest.mark.parametrize("indexed", [False, True], ids=["parent j is row j", "parents by index"])
def test_the_children_histograms_kernel_equals_its_numpy_twin(indexed):
    from dgboost.backend import _records

    rng = np.random.default_rng(7)
    k, n_bins = 37, 301
    parent_hist = rng.integers(-(10**15), 10**15, size=(k + 5, n_bins, 2))
    built = rng.integers(-(10**15), 10**15, size=(k, n_bins, 2))
    build_left = rng.integers(0, 2, size=k)
    index = rng.permutation(k + 5)[:k] if indexed else None
    parents = parent_hist if indexed else parent_hist[:k]
    np.testing.assert_array_equal(
        BACKEND.children_histograms(parents, index, built, build_left),
        _records.children_histograms(parents, index, built, build_left),
    )


def test_a_parent_that_is_not_split_keeps_its_rows_and_has_no_children():
    rng, x, cuts = binning_data(8, n=3000)
    bins = BACKEND.bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint8))
    columns = np.ascontiguousarray(bins.T)
    rows = rng.permutation(3000).astype(np.int32)
    before = rows.copy()
    parents = node_records(
        [0, 1000, 2500],
        [1000, 2500, 3000],
        feature=[2, -1, NO_NODE],
        split_bin=[3, -1, -1],
        default_left=[1, 0, 0],
        sums=[[5, 9], [7, 11], [0, 0]],
    )
    parents[0, LEFT_G : LEFT_H + 1] = (2, 4)
    counts = BACKEND.partition(columns, rows, parents)
    np.testing.assert_array_equal(rows[1000:], before[1000:])  # unsplit segments untouched
    np.testing.assert_array_equal(counts[1:], [[1500, 0], [500, 0]])
    children, build, build_left = BACKEND.split_nodes(parents, counts, counts)
    assert children[0, FEATURE] == children[1, FEATURE] == -1
    assert np.all(children[2:, FEATURE] == NO_NODE)
    np.testing.assert_array_equal(children[2:, SUM_G : SUM_H + 1], 0)
    np.testing.assert_array_equal(children[2:, END] - children[2:, BEGIN], 0)
    np.testing.assert_array_equal(build[1:, 1] - build[1:, 0], 0)  # nothing to build under them


def test_split_evaluation_leaves_slots_with_no_node_alone_and_takes_one_mask_for_all():
    rng, x, cuts = binning_data(9, n=800)
    bins = BACKEND.bin_values(x, cuts.values, cuts.ptrs, np.dtype(np.uint8))
    gpair = BACKEND.quantise(rng.normal(size=800), rng.uniform(0.1, 1.0, size=800), np.array([2.0**26, 2.0**26]))
    hist = BACKEND.build_histograms(
        bins, cuts.ptrs, gpair, np.arange(800, dtype=np.int32), np.array([[0, 800], [0, 800]])
    )
    p = SimpleNamespace(reg_lambda=1.0, alpha=0.0, gamma=0.0, min_child_weight=1.0, max_delta_step=0.0)
    records = node_records([0, 0], [800, 800], sums=np.stack([gpair.sum(0)] * 2))
    records[1, FEATURE] = NO_NODE
    untouched = records[1].copy()
    one_mask = np.zeros((1, x.shape[1]), bool)
    one_mask[0, 1] = True
    BACKEND.evaluate_splits(hist, records, cuts.ptrs, one_mask, np.array([2.0**26, 2.0**26]), p)
    assert records[0, FEATURE] == 1
    np.testing.assert_array_equal(records[1], untouched)


def test_node_record_columns_are_those_of_the_cuda_header():
    import re
    from pathlib import Path

    from dgboost import _layout

    header = (Path(__file__).resolve().parents[2] / "kernels" / "common.cuh").read_text()
    enum = dict((name, int(value)) for name, value in re.findall(r"\bk(\w+) = (\d+)\b", header))
    want = {"".join(w.capitalize() for w in field.split("_")): i for i, field in enumerate(_layout.NODE_RECORD_FIELDS)}
    assert {k: enum[k] for k in want} == want
    assert enum["NodeFields"] == _layout.NODE_FIELDS
