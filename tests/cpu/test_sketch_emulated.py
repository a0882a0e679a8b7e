"""``kernels/sketch.cu`` (the quantile sketch on the device) on the CUDA emulator, against the
host's unit-weight sketch: the tiles' slots, the rank-target picks and the warps' compaction."""

from __future__ import annotations

import numpy as np
import pytest

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


@pytest.mark.parametrize("trial", range(14))
def test_the_emulated_sketch_kernels_give_every_features_host_cuts_bit_for_bit(trial):
    rng = np.random.default_rng(100 + trial)
    max_bin = int(rng.choice([2, 3, 16, 40, 256]))
    n_rows = int(rng.choice([1, 7, 900, 2500]))
    n_features = int(rng.integers(1, 7))
    matrix = np.full((n_rows, n_features), np.nan, np.float32)
    for f in range(n_features):
        present = rng.random(n_rows) < rng.choice([0.0, 0.4, 1.0])
        matrix[present, f] = _column(rng, KINDS[(trial + f) % len(KINDS)], int(present.sum()))
    rows = None if trial % 2 else np.sort(rng.choice(n_rows, size=max(1, n_rows // 2), replace=False)).astype(np.int64)
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
