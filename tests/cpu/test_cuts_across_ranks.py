"""Cuts computed by several ranks (each cutting a block of the features) equal one process's."""

from __future__ import annotations

import numpy as np
import pytest

from dgboost.comm import run_in_threads
from dgboost.quantile import compute_cuts


def _data(n: int, features: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype(np.float32)
    x[rng.random(x.shape) < 0.2] = np.nan
    x[:, 0] = np.round(x[:, 0])  # few distinct values
    w = rng.random(n).astype(np.float32)
    w[::11] = 0.0
    return x, w


@pytest.mark.parametrize("world", [2, 3, 5])
@pytest.mark.parametrize("features", [1, 3, 7])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_every_rank_gets_the_single_process_cuts_whatever_the_ranks_and_features(world, features, weighted):
    n = 3_001
    x, w = _data(n, features)
    weight = w if weighted else None
    reference = compute_cuts(x, weight, 16, seed=7, sample_rows=1_000)
    bounds = np.linspace(0, n, world + 1).astype(int)
    bounds[1] = bounds[0]  # rank 0 holds no rows

    def rank_cuts(comm, r):
        rows = slice(bounds[r], bounds[r + 1])
        return compute_cuts(
            x[rows],
            None if weight is None else weight[rows],
            16,
            seed=7,
            row_offset=int(bounds[r]),
            n_global=n,
            comm=comm,
            sample_rows=1_000,
        )

    for got in run_in_threads(world, rank_cuts):
        np.testing.assert_array_equal(got.ptrs, reference.ptrs)
        np.testing.assert_array_equal(got.values, reference.values)
