"""Categorical split search, partition and routing on the CPU (docs/design.md §11).

The Numba kernels against their NumPy twins, and both against oracles that share no code
with them: every subset of the categories (the sort-by-weight scan finds the best partition
when lambda is 0), every single category for one-hot splits, computed from the rows.
"""

from itertools import combinations
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dgboost._categorical import categorical_layout, codes_to_words, words_to_codes
from dgboost._layout import DEFAULT_LEFT, FEATURE, GAIN, LEFT_G, LEFT_H, SPLIT_BIN
from dgboost.backend._cpu_kernels import KERNEL_EPS
from dgboost.backend.cpu import CPUBackend
from dgboost.errors import DGBoostValueError
from dgboost.quantile import Cuts, categorical_cuts
from dgboost.testing import kernel_reference as ref
from dgboost.testing.kernel_inputs import node_records

BACKEND = CPUBackend()
SCALE = 2.0**26


def _params(lam=1.0, alpha=0.0, mcw=0.0, mds=0.0, gamma=0.0, onehot=4, threshold=64):
    return SimpleNamespace(
        reg_lambda=lam,
        alpha=alpha,
        gamma=gamma,
        min_child_weight=mcw,
        max_delta_step=mds,
        max_cat_to_onehot=onehot,
        max_cat_threshold=threshold,
    )


def _problem(rng, n_cats, n=600, missing=0.1, numeric=True):
    """Rows with categorical columns of ``n_cats`` categories (and one numeric column), their
    codes as bins, quantised pairs, the cuts' pointers and the layout."""
    cols = [rng.integers(0, k, n).astype(np.float64) for k in n_cats]
    if numeric:
        cols.append(rng.integers(0, 10, n).astype(np.float64))
    x = np.stack(cols, axis=1)
    x[rng.random(x.shape) < missing] = np.nan
    sizes = list(n_cats) + ([10] if numeric else [])
    ptrs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    bins = np.where(np.isnan(x), 65535, np.nan_to_num(x)).astype(np.uint16)
    effect = rng.normal(size=(len(sizes), max(sizes)))
    signal = sum(effect[f, np.nan_to_num(x[:, f]).astype(int)] for f in range(len(sizes)))
    g = signal + rng.normal(size=n) * 0.3
    h = rng.uniform(0.2, 1.0, size=n)
    gpair = BACKEND.quantise(g, h, np.array([SCALE, SCALE]))
    mask = np.array([True] * len(n_cats) + ([False] if numeric else []))
    return x, bins, gpair, ptrs, categorical_layout(ptrs, mask), mask


def _evaluate(hist, totals, ptrs, layout, p, mask=None):
    records = node_records([0] * len(totals), [1] * len(totals), sums=np.asarray(totals))
    bits = np.empty((len(totals), layout.words), np.uint32)
    BACKEND.evaluate_splits(hist, records, ptrs, mask, np.array([SCALE, SCALE]), p, categorical=layout, cat_bits=bits)
    return records, bits


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    lam=st.sampled_from([0.0, 1.0]),
    alpha=st.sampled_from([0.0, 0.3]),
    mcw=st.sampled_from([0.0, 5.0]),
    mds=st.sampled_from([0.0, 0.5]),
    onehot=st.sampled_from([1, 4, 16]),
    threshold=st.sampled_from([2, 5, 64]),
)
def test_the_categorical_split_kernel_matches_its_numpy_twin(seed, lam, alpha, mcw, mds, onehot, threshold):
    rng = np.random.default_rng(seed)
    _, bins, gpair, ptrs, layout, is_cat = _problem(rng, [2, 3, 7, 40])
    n = bins.shape[0]
    rows = rng.permutation(n).astype(np.int32)
    segments = np.array([[0, n], [0, n // 3], [n // 3, n]])
    hist = BACKEND.build_histograms(bins, ptrs, gpair, rows, segments)
    totals = np.stack([gpair[rows[a:b]].sum(0) for a, b in segments])
    p = _params(lam, alpha, mcw, mds, onehot=onehot, threshold=threshold)
    mask = rng.random((3, len(is_cat))) < 0.8
    records, bits = _evaluate(hist, totals, ptrs, layout, p, mask)
    want = ref.evaluate_splits(hist, totals, ptrs, mask, SCALE, SCALE, p, is_cat=is_cat)
    for i, (f, b, dl, gain, left, right) in enumerate(want):
        assert records[i, FEATURE] == f
        if f < 0:
            assert not bits[i].any()
            continue
        assert (records[i, SPLIT_BIN], bool(records[i, DEFAULT_LEFT])) == (b, dl)
        assert records[i, GAIN : GAIN + 1].view(np.float64)[0] == gain  # the same arithmetic, bit for bit
        assert (records[i, LEFT_G], records[i, LEFT_H]) == left
        assert set(words_to_codes(bits[i]).tolist()) == (set(right) if right is not None else set())


def _subset_gain(hist_f, miss, subset, total, lam):
    """The gain of sending ``subset`` (and the missing rows when ``miss`` says so) right."""
    right = hist_f[list(subset)].sum(0) + miss
    left = total - right
    if right[1] <= 0 or left[1] <= 0:
        return -np.inf
    g = lambda s: (s[0] / SCALE) ** 2 / (s[1] / SCALE + lam)  # noqa: E731
    return g(left) + g(right) - g(total)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(4, 9))
def test_with_lambda_zero_the_partition_split_is_the_best_of_all_subsets(seed, k):
    # Fisher (1958): for G^2 / H gains, the best two-way split of ordered-by-G/H groups is
    # contiguous in that order, so the scan's best is the best of all 2^K - 2 subsets
    rng = np.random.default_rng(seed)
    _, bins, gpair, ptrs, layout, _ = _problem(rng, [k], missing=0.0, numeric=False)
    n = bins.shape[0]
    hist = BACKEND.build_histograms(bins, ptrs, gpair, np.arange(n, dtype=np.int32), np.array([[0, n]]))
    total = gpair.sum(0)
    records, bits = _evaluate(hist, total[None], ptrs, layout, _params(lam=0.0))
    best = max(_subset_gain(hist[0], 0, s, total, 0.0) for r in range(1, k) for s in combinations(range(k), r))
    assert records[0, FEATURE] == 0
    got = records[0, GAIN : GAIN + 1].view(np.float64)[0]
    assert got == pytest.approx(best, rel=1e-9)
    right = words_to_codes(bits[0])
    assert _subset_gain(hist[0], 0, right, total, 0.0) == pytest.approx(best, rel=1e-9)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(2, 3), lam=st.sampled_from([0.0, 1.0]))
@example(seed=2048, k=2, lam=1.0)  # with lambda > 0 every option loses gain: no split
def test_a_one_hot_split_is_the_best_single_category_with_missing_values_on_the_better_side(seed, k, lam):
    rng = np.random.default_rng(seed)
    x, bins, gpair, ptrs, layout, _ = _problem(rng, [k], missing=0.15, numeric=False)
    n = bins.shape[0]
    hist = BACKEND.build_histograms(bins, ptrs, gpair, np.arange(n, dtype=np.int32), np.array([[0, n]]))
    total = gpair.sum(0)
    records, bits = _evaluate(hist, total[None], ptrs, layout, _params(lam=lam))
    # from the rows: category c alone right, the missing rows left or right
    missing = gpair[np.isnan(x[:, 0])].sum(0)
    by_cat = np.stack([gpair[x[:, 0] == c].sum(0) for c in range(k)])
    options = [(c, side) for c in range(k) for side in (0, 1)]
    gains = [_subset_gain(by_cat, missing * side, [c], total, lam) for c, side in options]
    c, side = options[int(np.argmax(gains))]
    if max(gains) <= KERNEL_EPS:  # a split must gain more than XGBoost's kRtEps
        assert records[0, FEATURE] == -1
        return
    assert records[0, FEATURE] == 0
    assert records[0, GAIN : GAIN + 1].view(np.float64)[0] == pytest.approx(max(gains), rel=1e-9)
    assert words_to_codes(bits[0]).tolist() == [c]
    assert records[0, SPLIT_BIN] == c and bool(records[0, DEFAULT_LEFT]) == (side == 0)


def test_at_most_max_cat_threshold_minus_one_categories_are_scanned_onto_either_side():
    rng = np.random.default_rng(3)
    _, bins, gpair, ptrs, layout, _ = _problem(rng, [30], missing=0.05, numeric=False)
    n = bins.shape[0]
    hist = BACKEND.build_histograms(bins, ptrs, gpair, np.arange(n, dtype=np.int32), np.array([[0, n]]))
    records, bits = _evaluate(hist, gpair.sum(0)[None], ptrs, layout, _params(threshold=4))
    right = words_to_codes(bits[0]).size
    # forward scans put 1..3 categories right; backward ones leave 1..3 left
    assert records[0, FEATURE] == 0 and (right <= 3 or right >= 27)


def test_the_categorical_partition_kernel_matches_the_reference_and_routes_by_the_sets():
    rng = np.random.default_rng(11)
    x, bins, gpair, ptrs, layout, _ = _problem(rng, [5, 40])
    n = bins.shape[0]
    columns = BACKEND.column_layout(bins)
    sets = [None, {0, 3}, {1, 7, 33, 39}, None]
    records = node_records([0, 100, 250, 400], [100, 250, 400, n])
    records[:, FEATURE] = [2, 0, 1, 2]
    records[:, SPLIT_BIN] = [4, 0, -1, 6]
    records[:, DEFAULT_LEFT] = [1, 0, 1, 0]
    bits = np.stack([codes_to_words(sorted(s), layout.words) if s else np.zeros(layout.words, np.uint32) for s in sets])
    rows = rng.permutation(n).astype(np.int32)
    begins, ends = np.array([0, 100, 250, 400]), np.array([100, 250, 400, n])
    want_rows, want_counts = ref.partition(
        columns, rows, begins, ends, records[:, FEATURE], records[:, SPLIT_BIN], records[:, DEFAULT_LEFT], sets
    )
    got_rows = rows.copy()
    counts = BACKEND.partition(columns, got_rows, records, categorical=layout, cat_bits=bits)
    np.testing.assert_array_equal(got_rows, want_rows)
    np.testing.assert_array_equal(counts[:, 0], want_counts)
    # a categorical node's left rows hold no category of its set; missing ones follow default_left
    left = got_rows[250 : 250 + counts[2, 0]]
    values = x[left, 1]
    assert not np.isin(values[~np.isnan(values)], list(sets[2])).any()
    assert np.isnan(x[got_rows[250:400], 1]).sum() == np.isnan(values).sum()


def test_categorical_cuts_give_one_bin_per_code_up_to_the_largest_code_on_any_rank():
    x = np.array([[0.0, 1.5], [4.0, np.nan], [np.nan, 2.0]], np.float32)
    cuts = Cuts(values=np.array([9.0, 1.0, 2.0, 3.0], np.float32), ptrs=np.array([0, 1, 4]))

    class TopRankHasCode6:  # another rank's rows hold code 6
        world_size, rank = 2, 0

        def allreduce_max(self, a):
            return np.maximum(a, 6.0)

    got = categorical_cuts(cuts, x, np.array([True, False]), TopRankHasCode6())
    np.testing.assert_array_equal(got.feature_cuts(0), np.arange(1, 8, dtype=np.float32))
    np.testing.assert_array_equal(got.feature_cuts(1), [1.0, 2.0, 3.0])
    empty = categorical_cuts(cuts, np.full((3, 2), np.nan, np.float32), np.array([True, False]))
    assert empty.feature_cuts(0).tolist() == [1.0]  # no value at all: one bin
    with pytest.raises(DGBoostValueError, match="categorical feature 0 has 70001 categories"):
        categorical_cuts(cuts, np.array([[70000.0, 1.0]], np.float32), np.array([True, False]))
