"""A tree grown in whole levels adds its leaves to the margins by walking each row down the
tree in row order (kernels/leaf.cu ``add_walked_leaf_values``), not over the leaves'
segments of the row order (``add_leaf_values``): run on the host by the CUDA emulator, every
tree of a training run must give the margins bit for bit as the segments do, and the model
must stay the CPU engine's. tests/gpu/test_cuda_training.py trains through it on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import dgboost as dg
from dgboost.backend.cuda import CUDABackend

_cuda_emulator = pytest.importorskip("_cuda_emulator")
pytestmark = pytest.mark.skipif(not _cuda_emulator.available(), reason="needs a host C++20 compiler")


def _data(n: int, categorical: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    columns = [rng.normal(size=(n, 4)), rng.integers(0, 3, n), rng.integers(0, 23, n)]
    x = np.column_stack(columns).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan  # missing entries go by the default direction
    signal = np.nan_to_num(x[:, 0]) + np.sin(np.nan_to_num(x[:, 5])) + (x[:, 4] == 1)
    y = (signal + 0.3 * rng.normal(size=n) > 0.4).astype(np.float32)
    types = ["q"] * 4 + ["c", "c"] if categorical else None
    return x, y, types


def _both_ways_checked(monkeypatch) -> list:
    """Make every walked margin update also run over the segments on a copy, and record
    whether the two margins were equal bit for bit (one entry a tree). The segments need the
    last level's rows partitioned, which a job whose backend walks leaves out: the backend is
    made to say that it does not walk (it still walks when given the bins)."""
    seen = []
    original = CUDABackend.add_record_leaf_values
    monkeypatch.setattr(CUDABackend, "walks_leaves", False)

    def both(self, margin, rows, records, scales, params, group, **walk):
        assert walk["bins"] is not None
        by_segments = margin.copy()
        original(self, by_segments, rows, records, scales, params, group)
        original(self, margin, rows, records, scales, params, group, **walk)
        seen.append(margin.view(np.uint32).tobytes() == by_segments.view(np.uint32).tobytes())

    monkeypatch.setattr(CUDABackend, "add_record_leaf_values", both)
    return seen


@pytest.mark.parametrize(
    "categorical, params",
    [
        (False, {"objective": "binary:logistic", "max_depth": 4}),
        # rows left out by subsampling still get every tree's leaf; a one-level walk
        (False, {"objective": "reg:squarederror", "max_depth": 1, "subsample": 0.6, "seed": 3}),
        # leaves above the last level (gamma stops some nodes early), and three trees a round
        (False, {"objective": "multi:softprob", "num_class": 3, "max_depth": 4, "gamma": 2.0}),
        (True, {"objective": "binary:logistic", "max_depth": 3, "max_cat_to_onehot": 1}),
    ],
    ids=["numeric", "subsampled-one-level", "multiclass-early-leaves", "categorical"],
)
def test_every_walked_tree_gives_the_margins_of_its_leaves_segments_and_the_cpu_model(monkeypatch, categorical, params):
    from dgboost.testing.checks import normalised_model_json

    x, y, types = _data(300 if "num_class" in params else 600, categorical)
    if params["objective"].startswith("multi"):
        y = np.digitize(np.nan_to_num(x[:, 1]), [-0.5, 0.5]).astype(np.float32)
    p = {**params, "max_bin": 16}
    cpu = dg.train({**p, "device": "cpu"}, dg.DMatrix(x, y, feature_types=types), 2, verbose_eval=False)
    backend = _cuda_emulator.route_cuda_training(monkeypatch)
    seen = _both_ways_checked(monkeypatch)
    cuda = dg.train({**p, "device": "cuda"}, dg.DMatrix(x, y, feature_types=types), 2, verbose_eval=False)
    walked = [name for name, *_ in backend.launches if name == "add_walked_leaf_values"]
    assert len(seen) == len(walked) == 2 * (3 if "num_class" in p else 1)
    # the segments are read: every level is partitioned in place
    copied = [name for name, *_ in backend.launches if name == "partition_copy_back"]
    assert len(copied) == len(walked) * p["max_depth"]
    assert all(seen), f"trees whose walk differs from their segments: {[i for i, ok in enumerate(seen) if not ok]}"
    assert cuda.ensemble.has_categorical == categorical
    assert normalised_model_json(cuda, keys=()) == normalised_model_json(cpu, keys=())
    if params.get("gamma"):  # the case is what it says: some leaf above the last level
        assert min(_leaf_depths(t).min() for t in cuda.ensemble.trees()) < params["max_depth"]


@pytest.mark.parametrize(
    "categorical, params",
    [
        (False, {"objective": "binary:logistic", "max_depth": 4, "subsample": 0.7, "seed": 5}),
        (False, {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "gamma": 2.0}),
        (True, {"objective": "binary:logistic", "max_depth": 3, "max_cat_to_onehot": 1}),
        # no level but the last: nothing partitioned
        (False, {"objective": "reg:squarederror", "max_depth": 1}),
    ],
    ids=["numeric-subsampled", "multiclass-early-leaves", "categorical", "one-level"],
)
def test_walked_trees_skip_the_last_levels_partition_and_stay_the_cpu_engines_model(categorical, params, monkeypatch):
    from dgboost.testing.checks import normalised_model_json

    x, y, types = _data(300 if "num_class" in params else 600, categorical, seed=4)
    if params["objective"].startswith("multi"):
        y = np.digitize(np.nan_to_num(x[:, 1]), [-0.5, 0.5]).astype(np.float32)
    p = {**params, "max_bin": 16}
    rounds = 3
    cpu = dg.train({**p, "device": "cpu"}, dg.DMatrix(x, y, feature_types=types), rounds, verbose_eval=False)
    backend = _cuda_emulator.route_cuda_training(monkeypatch)
    cuda = dg.train({**p, "device": "cuda"}, dg.DMatrix(x, y, feature_types=types), rounds, verbose_eval=False)
    trees = rounds * (3 if "num_class" in p else 1)
    names = [name for name, *_ in backend.launches]
    assert names.count("add_walked_leaf_values") == trees
    # a partition a level but the last: the leaves' rows are never read
    assert names.count("partition_flags") == trees * (p["max_depth"] - 1)
    # each level's rows are the partition's second array: nothing is copied back
    assert names.count("partition_copy_back") == 0
    assert normalised_model_json(cuda, keys=()) == normalised_model_json(cpu, keys=())


def _leaf_depths(tree) -> np.ndarray:
    """int (n_leaves,): the depth of each leaf of a ``dgboost.tree.Tree``."""
    depth = np.zeros(tree.left.size, np.int64)
    for node in range(tree.left.size):  # parents come before their children
        if tree.left[node] >= 0:
            depth[tree.left[node]] = depth[tree.right[node]] = depth[node] + 1
    return depth[tree.left < 0]


def test_a_walk_refuses_records_that_are_not_whole_levels_or_margins_of_other_rows():
    from types import SimpleNamespace

    backend = _cuda_emulator.EmulatedCUDABackend()
    bins = SimpleNamespace(n_rows=50)
    for records, rows in [(np.zeros((6, 10), np.int64), 50), (np.zeros((7, 10), np.int64), 49)]:
        with pytest.raises(dg.DGBoostValueError, match="whole levels"):
            backend._add_walked_leaf_values(np.zeros((rows, 1), np.float32), bins, records, None, 0, None, None)
