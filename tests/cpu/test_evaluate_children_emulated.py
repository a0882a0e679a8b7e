"""``CUDABackend.evaluate_children`` (the split search writing the children's histograms it
reads, kernels/split.cu ``derive_feature_cells``), run on the host by the CUDA emulator, gives
the CPU's ``children_histograms`` then ``evaluate_splits``: every histogram cell (of masked
features, categorical features and slots with no node too: the next level subtracts from
them) and every record. ``tests/gpu/test_cuda_training.py`` trains through it on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

from dgboost._layout import FEATURE, NO_NODE, SPLIT_BIN
from dgboost.testing.kernel_inputs import node_records

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")

from test_cuda_categorical_emulated import CPU, SCALES, _layout, _Params, _tied_histograms  # noqa: E402
from test_split_search_emulated import backend_searching_in_groups_of, search_launch  # noqa: E402


def _children(rng, k: int, n_bins):
    """Parents' histograms, the built children's (within them) and which child was built."""
    built, _ = _tied_histograms(rng, k, n_bins)
    sibling, _ = _tied_histograms(rng, k, n_bins)
    parent = built + sibling
    build_left = rng.integers(0, 2, k).astype(np.int64)
    return parent, built, build_left


# a warp scans a feature's bins 32 at a time, carrying each chunk's sums into the next: features
# of one chunk to ten (300 bins), and the edges of a chunk (256 and 257 bins)
WIDTHS = {"features of up to 256 bins": [33, 6, 70, 1, 12], "features past 256 bins among them": [300, 6, 256, 257, 12]}
# warps a (node, feature): each writes and reads its share of the feature's cells; a group
# is at most a warp a chunk of the widest feature (3 chunks for 70 bins make groups of 2)
GROUPS = [1, 2, 8]


def _searched_in_groups(backend, widths, pairs: int, group: int) -> None:
    widest = -(-max(widths) // 32)
    group = min(group, 1 << (widest.bit_length() - 1))
    assert backend.launches[0][:2] == search_launch(group, pairs)


@pytest.mark.parametrize("group", GROUPS, ids=[f"{g} warps a pair" for g in GROUPS])
@pytest.mark.parametrize("widths", list(WIDTHS), ids=list(WIDTHS))
@pytest.mark.parametrize("categorical", [False, True], ids=["numeric", "with categorical features"])
def test_the_split_search_derives_the_cpus_children_histograms_and_records(categorical, widths, group):
    rng = np.random.default_rng(8 + categorical)
    n_bins = WIDTHS[widths]
    is_cat = [0, 1, 0, 0, 1] if categorical else [0] * 5
    k = 5
    parent, built, build_left = _children(rng, k, n_bins)
    want_hist = CPU.children_histograms(parent, None, built, build_left)
    totals = want_hist.sum(axis=1)
    totals[::3, 1] += 3 * 2**20  # missing rows on some children
    records = node_records(np.zeros(2 * k), np.zeros(2 * k), sums=totals)
    records[:, SPLIT_BIN] = -1
    records[[2, 3], FEATURE] = NO_NODE  # the children of a parent that was not split
    mask = rng.random((2 * k, len(n_bins))) < 0.7
    mask[:, 2] = False  # a feature no node may use: its cells are still written
    cut_ptrs = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    layout = _layout(np.asarray(n_bins), np.asarray(is_cat, bool)) if categorical else None
    cat = {} if layout is None else {"categorical": layout}
    words = 1 if layout is None else layout.words
    want, got = records.copy(), records.copy()
    want_bits = np.zeros((2 * k, words), np.uint32)
    got_bits = np.zeros((2 * k, words), np.uint32)
    p = _Params(gamma=0.1)
    CPU.evaluate_splits(want_hist, want, cut_ptrs, mask, SCALES, p, **cat, **({"cat_bits": want_bits} if cat else {}))
    backend = backend_searching_in_groups_of(group, 2 * k * len(n_bins))
    got_hist = backend.evaluate_children(
        parent, built, build_left, got, cut_ptrs, mask, SCALES, p, **cat, **({"cat_bits": got_bits} if cat else {})
    )
    np.testing.assert_array_equal(got_hist, want_hist)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_bits, want_bits)
    assert "children_histograms" not in [name for name, *_ in backend.launches]
    _searched_in_groups(backend, n_bins, 2 * k * len(n_bins), group)
    assert (want[:, FEATURE] >= 0).sum() >= 3  # most children split: the search was not vacuous
    if categorical:
        assert any(is_cat[f] for f in want[want[:, FEATURE] >= 0, FEATURE])


@pytest.mark.parametrize("group", GROUPS, ids=[f"{g} warps a pair" for g in GROUPS])
@pytest.mark.parametrize("widths", [[17, 5, 40, 2], [17, 5, 290, 2]], ids=["up to 256 bins", "past 256 bins"])
@pytest.mark.parametrize("categorical", [False, True], ids=["numeric", "with categorical features"])
def test_a_search_that_keeps_no_histograms_gives_the_same_records_and_leaves_its_inputs(categorical, widths, group):
    rng = np.random.default_rng(21 + categorical)
    n_bins = widths
    is_cat = [0, 1, 0, 0] if categorical else [0] * 4
    k = 6
    parent, built, build_left = _children(rng, k, n_bins)
    hist = CPU.children_histograms(parent, None, built, build_left)
    totals = hist.sum(axis=1)
    totals[1::4, 1] += 2**21  # missing rows on some children
    records = node_records(np.zeros(2 * k), np.zeros(2 * k), sums=totals)
    records[:, SPLIT_BIN] = -1
    records[[4, 5], FEATURE] = NO_NODE
    mask = rng.random((2 * k, len(n_bins))) < 0.8
    cut_ptrs = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    layout = _layout(np.asarray(n_bins), np.asarray(is_cat, bool)) if categorical else None
    cat = {} if layout is None else {"categorical": layout}
    words = 1 if layout is None else layout.words
    want, got = records.copy(), records.copy()
    want_bits, got_bits = np.zeros((2 * k, words), np.uint32), np.zeros((2 * k, words), np.uint32)
    p = _Params(gamma=0.05)
    CPU.evaluate_splits(hist, want, cut_ptrs, mask, SCALES, p, **cat, **({"cat_bits": want_bits} if cat else {}))
    inputs = (parent.copy(), built.copy(), build_left.copy())
    backend = backend_searching_in_groups_of(group, 2 * k * len(n_bins))
    kept = backend.evaluate_children(
        parent,
        built,
        build_left,
        got,
        cut_ptrs,
        mask,
        SCALES,
        p,
        **cat,
        **({"cat_bits": got_bits} if cat else {}),
        keep=False,
    )
    assert kept is None
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_bits, want_bits)
    for given, before in zip((parent, built, build_left), inputs):
        np.testing.assert_array_equal(given, before)  # the numeric search writes no cell (the built stand in for them)
    _searched_in_groups(backend, n_bins, 2 * k * len(n_bins), group)
    assert (want[:, FEATURE] >= 0).sum() >= 4


def test_the_children_histograms_go_into_the_rows_given():
    rng = np.random.default_rng(12)
    n_bins = [9, 40]
    parent, built, build_left = _children(rng, 3, n_bins)
    want = CPU.children_histograms(parent, None, built, build_left)
    records = node_records(np.zeros(6), np.zeros(6), sums=want.sum(axis=1))
    backend = _cuda_emulator.EmulatedCUDABackend()
    level = np.full((10, sum(n_bins), 2), -1, np.int64)
    cut_ptrs = np.array([0, 9, 49])
    got = backend.evaluate_children(
        parent, built, build_left, records, cut_ptrs, None, SCALES, _Params(), out=level[2:8]
    )
    assert got.base is level or got is level[2:8] or np.shares_memory(got, level)
    np.testing.assert_array_equal(level[2:8], want)
    assert (level[:2] == -1).all() and (level[8:] == -1).all()


def test_children_with_no_feature_or_no_parent_get_no_split_and_empty_histograms():
    backend = _cuda_emulator.EmulatedCUDABackend()
    for k, n_bins in ((2, []), (0, [4, 7])):
        total = sum(n_bins)
        parent = np.zeros((k, total, 2), np.int64)
        built = np.zeros((k, total, 2), np.int64)
        records = node_records(np.zeros(2 * k), np.zeros(2 * k), sums=np.full((2 * k, 2), 2**20, np.int64))
        records[:, FEATURE], records[:, SPLIT_BIN] = 5, 3  # stale decisions: the search must overwrite them
        cut_ptrs = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
        want = records.copy()
        CPU.evaluate_splits(
            CPU.children_histograms(parent, None, built, np.zeros(k, np.int64)), want, cut_ptrs, None, SCALES, _Params()
        )
        hist = backend.evaluate_children(
            parent, built, np.zeros(k, np.int64), records, cut_ptrs, None, SCALES, _Params()
        )
        assert hist.shape == (2 * k, total, 2)
        np.testing.assert_array_equal(records, want)
        assert (records[:, FEATURE] == -1).all()
