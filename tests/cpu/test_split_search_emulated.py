"""The numeric split search (kernels/split.cu ``best_per_feature``), run on the host by the
emulator, writes the CPU engine's records for features of every width.

A warp walks a feature's bins in chunks of 32 with the chunks' totals carried, so the widths
that matter are those around a lane's and a chunk's edges (1, 31-33 bins) and features of
many chunks (255-257, 600, 1,100 bins). On a level of few pairs (node, feature), a group of
2, 4 or 8 warps shares a feature's chunks (``best_per_feature_grouped``): each warp starts
from the chunks before its own, and the group keeps the best of its warps' candidates.
Histograms of few distinct values tie gains within and across features (and across the
warps of a group); some nodes have missing rows (on some, so many that the best split sends
them left), a mask leaves features out, and monotone constraints with finite bounds skip and
clip candidates. ``tests/gpu/test_cuda_training.py`` checks whole trees on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

from dgboost._layout import DEFAULT_LEFT, FEATURE, SPLIT_BIN
from dgboost.backend.cuda import _GROUPED_SEARCH_WARPS_PER_SM

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")

from test_cuda_categorical_emulated import _evaluate_both, _Params, _tied_histograms  # noqa: E402


def backend_searching_in_groups_of(group: int, pairs: int):
    """An emulated backend whose search of a level of ``pairs`` (node, feature) pairs takes
    ``group`` warps a pair. The backend doubles the group while the launch fits the warps the
    GPU holds at once, so the emulated GPU's SMs are chosen to hold ``group * pairs`` warps
    and fewer than twice that, which a whole number of SMs can only do from one SM's worth."""
    assert group * pairs >= _GROUPED_SEARCH_WARPS_PER_SM
    return _cuda_emulator.EmulatedCUDABackend(sm_count=-(-group * pairs // _GROUPED_SEARCH_WARPS_PER_SM))


def search_launch(group: int, pairs: int) -> tuple[str, int]:
    """(kernel, grid) of a search of ``pairs`` pairs with ``group`` warps a pair, 8 warps a block."""
    return ("best_per_feature" if group == 1 else "best_per_feature_grouped"), -(-pairs * group // 8)


WIDTHS = {
    "one bin to a lane's and a warp's edges": [1, 2, 7, 8, 9, 31, 32, 33],
    "a max_bin's edges": [255, 256, 257, 64],
    "features of many chunks": [300, 600, 1100, 5],
}


@pytest.mark.parametrize("widths", list(WIDTHS), ids=list(WIDTHS))
def test_the_emulated_split_search_writes_the_cpu_records_for_features_of_every_width(widths):
    n_bins = WIDTHS[widths]
    rng = np.random.default_rng(sum(map(ord, widths)))
    hist, totals = _tied_histograms(rng, 6, n_bins)
    backend = _cuda_emulator.EmulatedCUDABackend()
    mask = rng.random((6, len(n_bins))) < 0.85
    want = _evaluate_both(backend, hist, totals, n_bins, [0] * len(n_bins), _Params(), mask=mask)
    assert (want[:, FEATURE] >= 0).sum() >= 3  # most nodes split: the search was not vacuous


def test_the_emulated_split_search_of_identical_features_keeps_the_lowest_one():
    rng = np.random.default_rng(7)
    hist, totals = _tied_histograms(rng, 4, [257])
    hist = np.concatenate([hist, hist, hist], axis=1)  # three copies of a feature of two tiles
    totals += 2 * hist[:, :257].sum(axis=1)
    backend = _cuda_emulator.EmulatedCUDABackend()
    want = _evaluate_both(backend, hist, totals, [257, 257, 257], [0, 0, 0], _Params())
    assert set(want[want[:, FEATURE] >= 0, FEATURE]) == {0}


def test_the_emulated_split_search_under_monotone_constraints_writes_the_cpu_records():
    n_bins = [33, 256, 300, 9]
    rng = np.random.default_rng(11)
    hist, totals = _tied_histograms(rng, 6, n_bins)
    bounds = np.tile([-np.inf, np.inf], (6, 1))
    bounds[2:4] = [[-0.5, 0.25], [-3.0, -1.0]]  # finite bounds clip the children's weights
    monotone = np.array([1, -1, 1, 0], np.int8)
    backend = _cuda_emulator.EmulatedCUDABackend()
    p = _Params(reg_lambda=0.5, alpha=0.25)
    want = _evaluate_both(backend, hist, totals, n_bins, [0] * 4, p, bounds=bounds, monotone=monotone)
    assert (want[:, FEATURE] >= 0).sum() >= 2


def test_the_emulated_split_search_sends_heavy_missing_rows_left_as_the_cpu_does():
    n_bins = [33, 257, 64]
    rng = np.random.default_rng(3)
    hist, totals = _tied_histograms(rng, 6, n_bins)
    totals += np.array([-60, 25]) * 2**20  # missing rows of a strongly negative gradient
    backend = _cuda_emulator.EmulatedCUDABackend()
    want = _evaluate_both(backend, hist, totals, n_bins, [0, 0, 0], _Params())
    split = want[:, FEATURE] >= 0
    assert split.sum() >= 3 and want[split, DEFAULT_LEFT].any()


def test_the_last_warp_of_each_node_picks_its_split_in_the_search_launch_and_leaves_the_counters_zero():
    # without categorical features the node's decision is made in best_per_feature itself;
    # its per-node counters must be zero again for the next evaluation on the same backend
    backend = _cuda_emulator.EmulatedCUDABackend()
    rng = np.random.default_rng(21)
    for n_nodes, n_bins in ((6, [33, 5, 70]), (300, [9, 40]), (4, [1, 2, 257, 31, 3])):
        hist, totals = _tied_histograms(rng, n_nodes, n_bins)
        backend.launches.clear()
        want = _evaluate_both(backend, hist, totals, n_bins, [0] * len(n_bins), _Params(gamma=0.05))
        assert [name.startswith("best_per_feature") for name, *_ in backend.launches] == [True]
        assert not backend._node_done.any()
        assert (want[:, FEATURE] >= 0).sum() >= 2
    assert backend._node_done.size >= 300  # grown for the level of 300 nodes


GROUPS = [1, 2, 4, 8]


@pytest.mark.parametrize("group", GROUPS, ids=[f"{g} warps a pair" for g in GROUPS])
def test_the_emulated_split_search_writes_the_cpu_records_whatever_the_warps_searching_a_feature_together(group):
    # features of fewer chunks than warps (1, 31 and 33 bins: some warps get no bins), of
    # chunks that do not divide among the warps (257, 600 and 1,100 bins: 9, 19, 35 chunks),
    # tied gains within and across features, missing rows, masks and monotone constraints
    n_bins = [1, 33, 257, 600, 31, 1100]
    rng = np.random.default_rng(40 + group)
    hist, totals = _tied_histograms(rng, 6, n_bins)
    totals[::2] += np.array([-60, 25]) * 2**18  # missing rows, on some nodes best sent left
    mask = rng.random((6, len(n_bins))) < 0.85
    bounds = np.tile([-np.inf, np.inf], (6, 1))
    bounds[3] = [-0.5, 0.25]
    constraints = (None, None), (bounds, np.array([1, -1, 0, 1, 0, -1], np.int8))
    pairs = 6 * len(n_bins)
    for bounds, monotone in constraints:
        backend = backend_searching_in_groups_of(group, pairs)
        p = _Params(gamma=0.02, reg_lambda=0.5)
        want = _evaluate_both(backend, hist, totals, n_bins, [0] * len(n_bins), p, mask, bounds, monotone)
        assert [launch[:2] for launch in backend.launches] == [search_launch(group, pairs)]
        assert not backend._node_done.any()  # the node's last pair left its counter zero
        assert (want[:, FEATURE] >= 0).sum() >= 2


@pytest.mark.parametrize("group", GROUPS[1:], ids=[f"{g} warps a pair" for g in GROUPS[1:]])
def test_a_gap_of_empty_bins_across_the_warps_shares_splits_at_its_lowest_bin(group):
    # rows in bins 0-9 (negative gradients) and 200-256 (positive) of a 257-bin feature: every
    # bin of the gap 9-199 gives the same split, and the gap crosses every warp's share but
    # the last, so only the group's order on ties (lowest bin) keeps bin 9
    n_bins = [257]
    hist = np.zeros((8, 257, 2), np.int64)
    hist[:, :10] = np.array([-3, 2]) * 2**20
    hist[:, 200:] = np.array([2, 1]) * 2**20
    hist[2::3, :10, 0] = -(2**20)  # nodes of other gains, the same gap
    totals = hist.sum(axis=1)
    pairs = 8
    backend = backend_searching_in_groups_of(group, pairs)
    want = _evaluate_both(backend, hist, totals, n_bins, [0], _Params())
    assert [launch[:2] for launch in backend.launches] == [search_launch(group, pairs)]
    split = want[:, FEATURE] >= 0
    assert split.sum() == 7 and (want[split, SPLIT_BIN] == 9).all()  # node 1 is no node
