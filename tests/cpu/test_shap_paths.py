"""Path extraction and bin packing for TreeSHAP (dgboost.explain.paths / binpack)."""

from itertools import permutations

import numpy as np
import pytest

from dgboost.explain import (
    BIN_CAPACITY,
    PATH_ELEMENT_DTYPE,
    best_fit_decreasing,
    bin_items,
    extract_paths,
    first_fit_decreasing,
    next_fit,
    pack,
)
from dgboost.testing.shap_oracle import chain_tree, predict_margin, random_ensemble, random_rows
from dgboost.tree import Ensemble, Tree

METHODS = ["next_fit", "first_fit_decreasing", "best_fit_decreasing"]


def hand_tree():
    """      0: f1 < 0.5 (missing -> right)
           /                       \\
      1: f1 < 0.25 (miss left)    2: leaf 3.0
       /          \\
    3: f0 < 1 (miss left)   4: leaf 2.0
     /      \\
    5: 1.0   6: -1.0
    """
    return Tree(
        left=[1, 3, -1, 5, -1, -1, -1],
        right=[2, 4, -1, 6, -1, -1, -1],
        parent=[-1, 0, 0, 1, 1, 3, 3],
        feature=[1, 1, -1, 0, -1, -1, -1],
        split_value=[0.5, 0.25, 0, 1.0, 0, 0, 0],
        default_left=[0, 1, 0, 1, 0, 0, 0],
        gain=np.zeros(7),
        cover=[10.0, 6.0, 4.0, 4.0, 2.0, 1.0, 3.0],
        value=[0, 0, 3.0, 0, 2.0, 1.0, -1.0],
    )


def on_flags(table, x):
    x = np.float32(x)
    lo, hi = table.lower, table.upper
    xf = np.where(table.feature >= 0, x[np.maximum(table.feature, 0)], np.float32(0))
    return np.where(np.isnan(xf), table.is_missing_branch == 1, (lo <= xf) & (xf < hi))


def test_every_leaf_gives_one_path_with_the_bias_element_first():
    rng = np.random.default_rng(0)
    ens = random_ensemble(rng, n_features=5, n_trees=4, max_depth=5, n_groups=2)
    t = extract_paths(ens)
    assert t.n_paths == sum(tr.n_leaves for tr in ens.trees())
    first = t.path_offsets[:-1]
    assert np.all(t.feature[first] == -1)
    assert np.all(t.zero_fraction[first] == 1.0)
    assert np.all(np.isneginf(t.lower[first])) and np.all(np.isposinf(t.upper[first]))
    assert np.all(t.feature[np.setdiff1d(np.arange(t.n_elements), first)] >= 0)
    assert np.array_equal(t.path_idx, np.repeat(np.arange(t.n_paths), t.path_lengths))
    assert np.array_equal(t.v, np.repeat(t.path_v, t.path_lengths))
    assert np.array_equal(t.group, np.repeat(t.path_group, t.path_lengths))
    assert np.array_equal(np.unique(t.path_group), [0, 1])
    for name, dt in [
        ("path_idx", np.int32),
        ("feature", np.int32),
        ("lower", np.float32),
        ("upper", np.float32),
        ("is_missing_branch", np.uint8),
        ("zero_fraction", np.float64),
        ("v", np.float64),
        ("group", np.int32),
        ("path_offsets", np.int64),
    ]:
        assert getattr(t, name).dtype == dt, name


def test_path_elements_describe_the_branch_taken_and_merge_repeated_features():
    ens = Ensemble()
    ens.append(hand_tree())
    t = extract_paths(ens)
    assert t.n_paths == 4
    assert np.array_equal(t.path_v, [1.0, -1.0, 2.0, 3.0])  # leaves left to right
    # path to leaf 5: f1 < 0.5 then f1 < 0.25 (merged), then f0 < 1
    s, e = t.path_offsets[0], t.path_offsets[1]
    assert list(t.feature[s:e]) == [-1, 1, 0]
    assert t.upper[s + 1] == np.float32(0.25) and np.isneginf(t.lower[s + 1])
    assert t.is_missing_branch[s + 1] == 0  # root sends missing right
    assert t.zero_fraction[s + 1] == pytest.approx(6 / 10 * 4 / 6)
    assert t.upper[s + 2] == 1.0 and t.is_missing_branch[s + 2] == 1
    assert t.zero_fraction[s + 2] == pytest.approx(1 / 4)
    # path to leaf 4: 0.25 <= f1 < 0.5
    s = t.path_offsets[2]
    assert list(t.feature[s : s + 2]) == [-1, 1]
    assert (t.lower[s + 1], t.upper[s + 1]) == (np.float32(0.25), np.float32(0.5))
    assert t.zero_fraction[s + 1] == pytest.approx(2 / 10)
    # path to leaf 2: f1 >= 0.5, missing goes here
    s = t.path_offsets[3]
    assert t.lower[s + 1] == np.float32(0.5) and np.isposinf(t.upper[s + 1])
    assert t.is_missing_branch[s + 1] == 1
    assert t.path_lengths.tolist() == [3, 3, 2, 2]


def test_each_row_turns_on_every_element_of_exactly_the_paths_it_reaches():
    rng = np.random.default_rng(1)
    ens = random_ensemble(rng, n_features=4, n_trees=5, max_depth=6, n_groups=2)
    t = extract_paths(ens)
    X = random_rows(rng, 50, 4)
    margin = predict_margin(ens, X)
    for r in range(X.shape[0]):
        on = on_flags(t, X[r])
        reached = np.logical_and.reduceat(on, t.path_offsets[:-1])
        per_tree = np.bincount(t.path_tree[reached], minlength=ens.n_trees)
        assert np.all(per_tree == 1)  # one leaf per tree
        out = ens.base_margin.copy()
        np.add.at(out, t.path_group[reached], t.path_v[reached])
        np.testing.assert_allclose(out, margin[r], rtol=0, atol=1e-12)


def test_expected_value_is_the_cover_weighted_mean_of_the_leaves():
    ens = Ensemble()
    ens.append(hand_tree())
    t = extract_paths(ens)
    assert t.expected_value()[0] == pytest.approx((1 * 1 - 1 * 3 + 2 * 2 + 3 * 4) / 10)


def test_a_depth_40_tree_extracts_without_recursion_limits():
    rng = np.random.default_rng(2)
    ens = Ensemble()
    ens.append(chain_tree(rng, n_features=60, depth=40, distinct=True))
    t = extract_paths(ens)
    assert t.n_paths == 41
    assert ens.max_depth() == 40
    assert t.max_length == 41


def test_records_hold_the_flat_arrays():
    rng = np.random.default_rng(3)
    t = extract_paths(random_ensemble(rng, 4, n_trees=2, max_depth=3))
    rec = t.to_records()
    assert rec.dtype == PATH_ELEMENT_DTYPE and PATH_ELEMENT_DTYPE.itemsize == 40
    for name in ("path_idx", "feature", "lower", "upper", "zero_fraction", "v", "group"):
        assert np.array_equal(rec[name], getattr(t, name))


def test_malformed_trees_are_rejected_with_an_error():
    base = dict(
        parent=[-1, 0, 0],
        feature=[0, -1, -1],
        split_value=[0.0, 0, 0],
        default_left=[0, 0, 0],
        gain=[0, 0, 0],
        cover=[2.0, 1, 1],
        value=[0, 1, 2],
    )
    ens = Ensemble()
    ens.append(Tree(left=[1, -1, -1], right=[5, -1, -1], **base))  # child out of range
    with pytest.raises(ValueError):
        extract_paths(ens)
    ens = Ensemble()
    ens.append(Tree(left=[1, 0, -1], right=[2, 2, -1], **{**base, "feature": [0, 0, -1]}))
    with pytest.raises(ValueError):  # cycle back to the root
        extract_paths(ens)


def _serial_and_chunked(monkeypatch, ens, threads=3):
    """extract_paths of ``ens`` by one walk and by ``threads`` threads (runs of trees)."""
    from dgboost.explain import paths

    monkeypatch.setattr(paths, "host_threads", lambda: 1)
    serial = extract_paths(ens)
    monkeypatch.setattr(paths, "host_threads", lambda: threads)
    monkeypatch.setattr(paths, "_PARALLEL_NODES", 0)
    monkeypatch.setattr(paths, "_PARALLEL_THREADS", 2)
    return serial, extract_paths(ens)


@pytest.mark.parametrize("threads", [2, 3, 16])
def test_paths_walked_by_several_threads_are_the_single_walks_bit_for_bit(monkeypatch, threads):
    ens = random_ensemble(np.random.default_rng(5), n_features=7, n_trees=11, max_depth=6, n_groups=3)
    serial, chunked = _serial_and_chunked(monkeypatch, ens, threads)
    assert set(vars(serial)) == set(vars(chunked))
    for name, a in vars(serial).items():
        b = getattr(chunked, name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), name
            assert b.flags.c_contiguous
        else:
            assert a == b, name
    assert chunked.fingerprint == serial.fingerprint


@pytest.mark.parametrize("threads", [1, 3, 8])
def test_path_products_by_threads_have_reduceats_bits_and_so_the_expected_value(monkeypatch, threads):
    from dgboost.explain import paths

    rng = np.random.default_rng(9)
    lengths = rng.integers(1, 18, 5000)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    # products that round at every step, underflow to subnormals and zero, overflow to inf
    z = rng.random(offsets[-1]) * rng.choice([1.0, 1e-200, 1e200, 0.0, 3.0], offsets[-1])
    monkeypatch.setattr(paths, "host_threads", lambda: threads)
    monkeypatch.setattr(paths, "_PARALLEL_ELEMENTS", 0)
    monkeypatch.setattr(paths, "_PARALLEL_THREADS", 2)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # inf * 0 gives NaN
        want = np.multiply.reduceat(z, offsets[:-1])
    assert paths._path_products(z, offsets).tobytes() == want.tobytes()
    cut = offsets[:-1].copy()  # offsets ending before the last element: the last path runs on, as in reduceat
    assert paths._path_products(z, np.append(cut, cut[-1] + 1)).tobytes() == want.tobytes()
    ens = random_ensemble(np.random.default_rng(5), n_features=7, n_trees=11, max_depth=6, n_groups=3)
    table = extract_paths(ens)
    prod = np.multiply.reduceat(table.zero_fraction, table.path_offsets[:-1])
    expected = np.zeros(table.n_groups)
    np.add.at(expected, table.path_group, table.path_v * prod)
    assert table.expected_value().tobytes() == expected.tobytes()


def test_a_malformed_tree_gives_the_same_error_walked_by_one_or_several_threads(monkeypatch):
    rng = np.random.default_rng(1)
    good = random_ensemble(rng, n_features=4, n_trees=6, max_depth=4)
    ens = Ensemble()
    for t in range(good.n_trees):
        tree = good.tree(t)
        if t == 4:  # a child out of range in the fifth tree
            inner = int(np.flatnonzero(tree.left >= 0)[0])
            tree.right[inner] = tree.left.shape[0] + 3
        ens.append(tree)
    from dgboost.errors import ModelFormatError

    errors = []
    for threads in (1, 3):
        from dgboost.explain import paths

        monkeypatch.setattr(paths, "host_threads", lambda threads=threads: threads)
        monkeypatch.setattr(paths, "_PARALLEL_NODES", 0)
        monkeypatch.setattr(paths, "_PARALLEL_THREADS", 2)
        with pytest.raises(ModelFormatError) as err:
            extract_paths(ens)
        errors.append(str(err.value))
    assert errors[0] == errors[1] and "out of range" in errors[0]


# ---------------------------------------------------------------------------------------
# bin packing
# ---------------------------------------------------------------------------------------
def _ff_count(order, capacity):
    rooms = []
    for s in order:
        for i, r in enumerate(rooms):
            if r >= s:
                rooms[i] -= s
                break
        else:
            rooms.append(capacity - s)
    return len(rooms)


def check_packing(sizes, bins, capacity):
    sizes = np.asarray(sizes)
    fits = sizes <= capacity
    assert np.all((bins >= 0) == fits)
    if fits.any():
        load = np.bincount(bins[fits], weights=sizes[fits])
        assert load.max() <= capacity
        assert np.all(load > 0)  # bins are numbered densely


@pytest.mark.parametrize("method", METHODS)
def test_every_path_is_packed_exactly_once_and_no_bin_overflows(method):
    rng = np.random.default_rng(4)
    sizes = rng.integers(1, 33, size=2000)
    bins, n_bins, util = bin_items(sizes, method)
    check_packing(sizes, bins, BIN_CAPACITY)
    assert n_bins == bins.max() + 1
    assert util == pytest.approx(sizes.sum() / (n_bins * 32))
    assert n_bins >= int(np.ceil(sizes.sum() / 32))


def test_decreasing_methods_use_no_more_bins_than_next_fit():
    rng = np.random.default_rng(5)
    for _ in range(20):
        sizes = rng.integers(1, 33, size=int(rng.integers(1, 300)))
        nf = bin_items(sizes, "next_fit")[1]
        ffd = bin_items(sizes, "first_fit_decreasing")[1]
        bfd = bin_items(sizes, "best_fit_decreasing")[1]
        assert ffd <= nf and bfd <= nf
        lower = int(np.ceil(sizes.sum() / 32))
        assert ffd <= 11 / 9 * lower + 1 and bfd <= 11 / 9 * lower + 1


def test_bin_counts_match_a_known_optimum_on_small_cases():
    cases = [
        ([16, 16, 16, 16], 2, 2, 2),
        ([8] * 8, 2, 2, 2),
        ([20, 20, 12, 12], 2, 2, 3),  # next fit pays for the order
        ([9, 9, 9, 12, 12, 12, 7, 7, 7, 20, 20, 20], 5, 5, None),
    ]
    for sizes, opt, decreasing, nf in cases:
        # optimum: exhaustive for short lists; the long one packs as 3x(20+12), 9+9+7+7, 9+7
        # and sum 144 needs ceil(144 / 32) = 5 bins
        assert _optimum(sizes, 32) == opt if len(sizes) <= 8 else opt == 5
        assert bin_items(sizes, "first_fit_decreasing")[1] == decreasing
        assert bin_items(sizes, "best_fit_decreasing")[1] == decreasing
        if nf is not None:
            assert bin_items(sizes, "next_fit")[1] == nf
    rng = np.random.default_rng(6)
    for _ in range(15):
        sizes = rng.integers(1, 33, size=int(rng.integers(1, 8))).tolist()
        opt = _optimum(sizes, 32)
        for method in ("first_fit_decreasing", "best_fit_decreasing"):
            assert opt <= bin_items(sizes, method)[1] <= 11 / 9 * opt + 6 / 9 + 1e-9


def _optimum(sizes, capacity):
    return min(_ff_count(order, capacity) for order in set(permutations(sizes)))


def test_best_fit_picks_the_fullest_bin_that_fits_and_first_fit_the_first():
    # 27 -> bin 0 (room 5), 22 -> bin 1 (room 10), 13 -> bin 2, 9 -> bin 1 (room 1);
    # the last item (1) goes to bin 0 under first fit, to the fuller bin 1 under best fit
    sizes = [27, 22, 13, 9, 1]
    assert first_fit_decreasing(sizes).tolist() == [0, 1, 2, 1, 0]
    assert best_fit_decreasing(sizes).tolist() == [0, 1, 2, 1, 1]


def test_paths_longer_than_a_warp_are_marked_oversize():
    sizes = np.array([40, 3, 33, 32, 5])
    for fn in (next_fit, first_fit_decreasing, best_fit_decreasing):
        bins = fn(sizes)
        assert bins[0] == -1 and bins[2] == -1 and np.all(bins[[1, 3, 4]] >= 0)
    rng = np.random.default_rng(7)
    ens = Ensemble()
    ens.append(chain_tree(rng, n_features=60, depth=40, distinct=True))
    packed = pack(extract_paths(ens), "first_fit_decreasing")
    assert packed.oversize_paths.size > 0
    assert np.all(packed.table.path_lengths[packed.oversize_paths] > 32)
    assert np.all(packed.path_bin[packed.oversize_paths] == -1)


@pytest.mark.parametrize("method", METHODS)
def test_packed_table_lays_each_bin_out_contiguously(method):
    rng = np.random.default_rng(8)
    table = extract_paths(random_ensemble(rng, 6, n_trees=10, max_depth=6, n_groups=3))
    packed = pack(table, method)
    t = packed.table
    assert sorted(packed.original_path.tolist()) == list(range(table.n_paths))
    assert np.array_equal(t.path_v, table.path_v[packed.original_path])
    assert np.array_equal(t.path_lengths, table.path_lengths[packed.original_path])
    for b in range(packed.n_bins):
        lo, hi = packed.bin_offsets[b], packed.bin_offsets[b + 1]
        assert 0 < hi - lo <= 32
        assert np.all(packed.element_bin[lo:hi] == b)
        assert np.array_equal(packed.element_lane[lo:hi], np.arange(hi - lo))
        # a bin holds whole paths
        assert np.isin([lo, hi], t.path_offsets).all()
    assert packed.bin_offsets[-1] == t.n_elements  # no oversize paths here
    assert packed.utilisation == pytest.approx(t.n_elements / (32 * packed.n_bins))


def test_packing_two_hundred_thousand_paths_is_valid_for_every_method():
    # speed is measured by benchmarks, not asserted here; this runs the O(n log n)
    # structures at a size where a quadratic method would not finish the test suite
    sizes = np.random.default_rng(9).integers(1, 33, size=200_000)
    for method in METHODS:
        bins, n_bins, _ = bin_items(sizes, method)
        check_packing(sizes, bins, 32)


def test_unknown_packing_method_is_an_error():
    with pytest.raises(ValueError, match="unknown bin packing method"):
        bin_items([1, 2], "worst_fit")
