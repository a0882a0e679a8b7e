"""Lossguide and level-by-level trees on the emulated CUDA backend are the CPU engine's, byte for byte.

A lossguide batch splits its nodes and, ahead, their children: its two partitions move the
rows from the tree's row array to a spare one and back (no copy back), a batch of one level
partitions in place. Either way every row must end in its leaf's segment: the leaf values
and so every later tree depend on it. ``tests/gpu/test_cuda_training.py`` trains the same
policies on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")

POLICIES = {
    "lossguide without a depth limit": {"grow_policy": "lossguide", "max_leaves": 12, "max_depth": 0},
    "lossguide at a depth limit": {"grow_policy": "lossguide", "max_leaves": 8, "max_depth": 3},
    "depthwise reading its levels": {"max_depth": 4, "max_leaves": 9},
}


def _data(n: int = 400):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    X[rng.random(X.shape) < 0.15] = np.nan
    score = np.sin(2 * np.nan_to_num(X[:, 0])) + np.nan_to_num(X[:, 1]) * (np.nan_to_num(X[:, 2]) > 0)
    y = (score + 0.3 * rng.normal(size=n) > 0.2).astype(np.float32)
    return X, y


@pytest.mark.parametrize("policy", list(POLICIES), ids=list(POLICIES))
def test_emulated_cuda_trees_of_batches_read_on_the_way_are_the_cpu_trees(monkeypatch, policy):
    import dgboost as dg
    from dgboost.testing import assert_same_trees
    from dgboost.testing.checks import normalised_model_json

    backend = _cuda_emulator.route_cuda_training(monkeypatch)
    X, y = _data()
    params = {"objective": "binary:logistic", "max_bin": 16, "eta": 0.5, **POLICIES[policy]}
    models = {
        device: dg.train({**params, "device": device}, dg.DMatrix(X, y), 2, verbose_eval=False)
        for device in ("cuda", "cpu")
    }
    assert_same_trees(models["cuda"], models["cpu"], names=("emulated cuda", "cpu"))
    assert normalised_model_json(models["cuda"], keys=()) == normalised_model_json(models["cpu"], keys=())
    n_leaves = [int((t.feature < 0).sum()) for t in models["cpu"].ensemble.trees()]
    assert min(n_leaves) >= 5  # the trees grew over several batches
    launched = [name for name, *_ in backend.launches]
    scatters, copies = launched.count("partition_scatter"), launched.count("partition_copy_back")
    if policy.startswith("lossguide"):
        assert copies < scatters  # some batches moved their rows to the spare array and back
    else:
        assert copies == scatters  # one level a batch: in place
