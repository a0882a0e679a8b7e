"""The numeric split search (kernels/split.cu ``best_per_feature``), run on the host by the
emulator, writes the CPU engine's records for features of every width.

A warp walks a feature's bins in chunks of 32 with the chunks' totals carried, so the widths
that matter are those around a lane's and a chunk's edges (1, 31-33 bins) and features of
many chunks (255-257, 600, 1,100 bins). Histograms of few distinct values tie gains within
and across features; some nodes have missing rows (on some, so many that the best split
sends them left), a mask leaves features out, and monotone constraints with finite bounds
skip and clip candidates. ``tests/gpu/test_cuda_training.py`` checks whole trees on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

from dgboost._layout import DEFAULT_LEFT, FEATURE

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")

from test_cuda_categorical_emulated import _evaluate_both, _Params, _tied_histograms  # noqa: E402

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
        assert [name for name, *_ in backend.launches] == ["best_per_feature"]
        assert not backend._node_done.any()
        assert (want[:, FEATURE] >= 0).sum() >= 2
    assert backend._node_done.size >= 300  # grown for the level of 300 nodes
