"""``kernels/sketch.cu`` (the quantile sketch on the device) on the CUDA emulator, against the
host's unit-weight sketch: the tiles' slots, the rank-target picks and the warps' compaction."""

from __future__ import annotations

import numpy as np
import pytest

from dgboost import quantile
from dgboost._array import float32_from_order_keys
from dgboost.backend import _cuda_sketch
from dgboost.backend.cuda import CUDABackend
from dgboost.quantile import weighted_cut_values

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")


def _device_cuts(matrix: np.ndarray, rows, features: range, max_bin: int, block_values: int) -> list[np.ndarray]:
    # the CUDA backend's own sketch_cuts (the emulated backend's stands in the host sketch
    # for training), its launches on the emulator
    return CUDABackend.sketch_cuts(_cuda_emulator.EmulatedCUDABackend(), matrix, rows, features, max_bin, block_values)


def _host_cuts(matrix: np.ndarray, rows, f: int, max_bin: int) -> np.ndarray:
    sample = matrix if rows is None else matrix[rows]
    column = sample[:, f][~np.isnan(sample[:, f])]
    return weighted_cut_values(column, np.ones(column.size), max_bin)


def _same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    # -0.0 told from 0.0; the NaN above a top of -inf equals any NaN (payloads differ by platform)
    nan = np.isnan(got)
    return (
        got.shape == want.shape and np.array_equal(nan, np.isnan(want)) and got[~nan].tobytes() == want[~nan].tobytes()
    )


def _column(rng, kind: str, n: int) -> np.ndarray:
    if kind == "continuous":
        return rng.normal(size=n)
    if kind == "long ties":  # runs spanning many rank targets: picks at both ends of a run
        return rng.choice(np.round(rng.normal(size=40), 2), size=n, p=np.full(40, 1 / 40))
    if kind == "few distinct":
        return rng.integers(-5, 5, size=n).astype(float)
    if kind == "one heavy value":  # a run of most values, a tail of distinct ones around it
        return np.where(rng.random(n) < 0.7, 1.5, rng.normal(size=n))
    if kind == "infinities and zeros":
        return rng.choice([-np.inf, -0.0, 0.0, 1.0, np.inf], size=n)
    return np.full(n, 2.5)  # constant


KINDS = ["continuous", "long ties", "few distinct", "one heavy value", "infinities and zeros", "constant"]


def _random_case(rng, trial: int, most_features: int):
    """A trial's max_bin, (n, F) float32 matrix of mixed kinds and missing values, and sampled
    rows (None: every row, on odd trials)."""
    max_bin = int(rng.choice([2, 3, 16, 40, 256]))
    n_rows = int(rng.choice([1, 7, 900, 2500]))
    n_features = int(rng.integers(1, most_features + 1))
    matrix = np.full((n_rows, n_features), np.nan, np.float32)
    for f in range(n_features):
        present = rng.random(n_rows) < rng.choice([0.0, 0.4, 1.0])
        matrix[present, f] = _column(rng, KINDS[(trial + f) % len(KINDS)], int(present.sum()))
    rows = None if trial % 2 else np.sort(rng.choice(n_rows, size=max(1, n_rows // 2), replace=False)).astype(np.int64)
    return max_bin, matrix, rows


@pytest.mark.parametrize("trial", range(14))
def test_the_emulated_sketch_kernels_give_every_features_host_cuts_bit_for_bit(trial):
    rng = np.random.default_rng(100 + trial)
    max_bin, matrix, rows = _random_case(rng, trial, 6)
    n_features = matrix.shape[1]
    first = int(rng.integers(0, n_features))
    block_values = int(rng.choice([1, 600, 1 << 20]))  # a feature a block, a few, all of them
    got = _device_cuts(matrix, rows, range(first, n_features), max_bin, block_values)
    assert len(got) == n_features - first
    for f, cuts in zip(range(first, n_features), got):
        want = _host_cuts(matrix, rows, f, max_bin)
        assert _same_bits(cuts, want), (trial, f, cuts, want)


def test_the_keys_of_a_sample_larger_than_one_tile_are_all_sorted_and_cut():
    # 3 features x 2,000 rows: several 2,048-entry tiles, each taking its run of slots, with
    # missing values spread over them
    rng = np.random.default_rng(7)
    matrix = rng.normal(size=(2000, 3)).astype(np.float32)
    matrix[rng.random(matrix.shape) < 0.35] = np.nan
    for max_bin in (8, 256):
        got = _device_cuts(matrix, None, range(3), max_bin, 1 << 20)
        for f in range(3):
            assert _same_bits(got[f], _host_cuts(matrix, None, f, max_bin))


def _host_weighted_cuts(matrix: np.ndarray, weights: np.ndarray, rows, f: int, max_bin: int) -> np.ndarray:
    # as compute_cuts' host path: the sample's weights in float64, a feature's present values
    # of rows weighing more than 0
    sample, w = (matrix, weights) if rows is None else (matrix[rows], weights[rows])
    w = w.astype(np.float64)
    keep = ~np.isnan(sample[:, f]) & (w > 0)
    return weighted_cut_values(sample[keep, f], w[keep], max_bin)


def _weights(rng, kind: str, n: int) -> np.ndarray:
    if kind == "spread":  # magnitudes far apart: the order of the additions shows in the sums
        return (10.0 ** rng.uniform(-8, 8, n)).astype(np.float32)
    if kind == "few values":  # equal weights within a value's run
        return rng.choice(np.float32([0.25, 1.0, 3.0, 1e3]), size=n)
    if kind == "with zeros":  # zero-weight rows place no cut
        return np.where(rng.random(n) < 0.3, np.float32(0.0), rng.random(n).astype(np.float32) + 0.01)
    if kind == "all equal":  # the count times the weight
        return np.full(n, np.float32(0.7))
    return np.ones(n, np.float32)  # unit weights given


WEIGHT_KINDS = ["spread", "few values", "with zeros", "all equal", "ones"]


@pytest.mark.parametrize("trial", range(15))
def test_the_emulated_weighted_sketch_gives_every_features_host_cuts_bit_for_bit(trial):
    rng = np.random.default_rng(300 + trial)
    max_bin, matrix, rows = _random_case(rng, trial, 5)
    n_features = matrix.shape[1]
    weights = _weights(rng, WEIGHT_KINDS[trial % len(WEIGHT_KINDS)], matrix.shape[0])
    first = int(rng.integers(0, n_features))
    block_values = int(rng.choice([1, 2400, 1 << 22]))  # (half of it sorted at once)
    got = CUDABackend.sketch_cuts(
        _cuda_emulator.EmulatedCUDABackend(), matrix, rows, range(first, n_features), max_bin, block_values, weights
    )
    assert len(got) == n_features - first
    for f, cuts in zip(range(first, n_features), got):
        want = _host_weighted_cuts(matrix, weights, rows, f, max_bin)
        assert _same_bits(cuts, want), (trial, f, cuts, want)


def test_a_weighted_run_longer_than_a_threads_share_is_summed_as_numpy_sums_it():
    # one value on 9,000 rows (a run summed by a block: its pairwise tree split over the
    # block's threads) beside 600 distinct values, weights of eight decades (their sums round);
    # the sums themselves are compared (a cut seldom moves for a one-ulp difference), then the
    # cuts
    rng = np.random.default_rng(11)
    column = np.concatenate([np.full(9000, 0.5), rng.normal(size=600)]).astype(np.float32)
    matrix = np.stack([column, rng.permutation(column)], axis=1)
    weights = (10.0 ** rng.uniform(-4, 4, column.size)).astype(np.float32)
    max_bin = 64  # below the 601 distinct values: the sums pick the cuts
    backend = _cuda_emulator.EmulatedCUDABackend()
    sample = _cuda_sketch._Sample(matrix, None, weights)
    runs = _cuda_sketch._weighted_runs(backend, sample, range(2), np.array([column.size] * 2), max_bin)
    for f in range(2):
        _, summed = _host_runs(matrix[:, f], weights.astype(np.float64))
        a, b = int(runs.run_ptr[f]), int(runs.run_ptr[f + 1])
        assert runs.sums[a:b].tobytes() == summed.tobytes(), f
    got = CUDABackend.sketch_cuts(backend, matrix, None, range(2), max_bin, 1 << 22, weights)
    for f in range(2):
        assert _same_bits(got[f], _host_weighted_cuts(matrix, weights, None, f, max_bin)), f


def _host_runs(values: np.ndarray, weights: np.ndarray):
    # weighted_cut_values' distinct values and their summed weights (its two weighted branches)
    if np.all(weights == weights[0]):
        unique, counts = np.unique(values, return_counts=True)
        return unique + np.float32(0.0), counts * float(weights[0])
    unique, summed = quantile._weighted_runs(values, weights)
    return unique + np.float32(0.0), summed


@pytest.mark.parametrize("trial", range(10))
def test_the_emulated_weighted_runs_carry_the_hosts_summed_weights_and_rank_bounds_bit_for_bit(trial):
    # the sums and their prefix sums themselves: a one-ulp difference seldom moves a cut, so
    # the cuts alone would not show a sum added in another order
    rng = np.random.default_rng(500 + trial)
    n_rows = 6000 if trial % 3 == 0 else int(rng.choice([300, 2500, 6000]))
    n_features = int(rng.integers(1, 5))
    matrix = np.full((n_rows, n_features), np.nan, np.float32)
    for f in range(n_features):
        present = rng.random(n_rows) < rng.choice([0.5, 1.0])
        matrix[present, f] = _column(rng, KINDS[(trial + f) % len(KINDS)], int(present.sum()))
    if trial % 3 == 0:  # one value on most rows: a run summed by a block when past 4,096
        matrix[rng.random(n_rows) < 0.8, 0] = np.float32(0.25)
    weights = _weights(rng, WEIGHT_KINDS[trial % len(WEIGHT_KINDS)], n_rows)
    max_bin = 2  # every feature of 3 values or more has its sums
    backend = _cuda_emulator.EmulatedCUDABackend()
    sample = _cuda_sketch._Sample(matrix, None, weights)
    block = range(n_features)
    counts = _cuda_sketch.present_counts(backend, matrix, None, block, weights)
    if counts.sum() == 0:
        return
    runs = _cuda_sketch._weighted_runs(backend, sample, block, counts, max_bin)
    for f in block:
        keep = ~np.isnan(matrix[:, f]) & (weights > 0)
        if not keep.any():
            assert runs.run_ptr[f + 1] == runs.run_ptr[f]
            continue
        unique, summed = _host_runs(matrix[keep, f], weights[keep].astype(np.float64))
        a, b = int(runs.run_ptr[f]), int(runs.run_ptr[f + 1])
        values = (runs.keys[runs.starts[a:b]] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        assert np.array_equal(float32_from_order_keys(values), unique), (trial, f)
        if b - a > max_bin:
            assert runs.sums[a:b].tobytes() == summed.tobytes(), (trial, f)
            assert runs.rmax[a:b].tobytes() == np.cumsum(summed).tobytes(), (trial, f)
