"""Random forests through dgboost.dask.train: the model of one process, byte for byte, on 2 workers."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import dgboost as dg
import dgboost.dask as dxgb

pytestmark = pytest.mark.dask

# uneven partitions, one of them empty: a tree's row subsample must not depend on where rows lie
CHUNKS = (400, 0, 700, 300)
N = sum(CHUNKS)

CASES = {
    "depthwise regression forest": (
        {"num_parallel_tree": 3, "subsample": 0.7, "colsample_bynode": 0.6, "max_depth": 4, "max_bin": 32, "seed": 3},
        0,
    ),
    "lossguide multiclass forest": (
        {
            "objective": "multi:softprob",
            "num_class": 3,
            "num_parallel_tree": 2,
            "subsample": 0.8,
            "colsample_bytree": 0.8,
            "grow_policy": "lossguide",
            "max_depth": 0,
            "max_leaves": 6,
            "max_bin": 16,
        },
        3,
    ),
}


def _data(classes: int):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(N, 5)).astype(np.float32)
    signal = x[:, 0] + np.sin(2 * x[:, 1]) + x[:, 2] * x[:, 3]
    x[rng.random(x.shape) < 0.1] = np.nan
    if classes == 0:
        return x, (signal + rng.normal(scale=0.3, size=N)).astype(np.float32)
    return x, np.digitize(signal, np.quantile(signal, np.linspace(0, 1, classes + 1)[1:-1])).astype(np.float32)


@pytest.mark.parametrize("case", list(CASES))
def test_a_forest_trained_on_two_workers_is_the_single_process_model(dask_client, case):
    params, classes = CASES[case]
    x, y = _data(classes)
    client = dask_client(2)
    dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(CHUNKS, 5)), da.from_array(y, chunks=(CHUNKS,)))
    out = dxgb.train(client, params, dtrain, 3, evals=[(dtrain, "train")], verbose_eval=False)
    single_dtrain = dg.DMatrix(x, y)
    history: dict = {}
    single = dg.train(
        params, single_dtrain, 3, evals=[(single_dtrain, "train")], evals_result=history, verbose_eval=False
    )
    assert out["booster"].num_boosted_rounds() == 3
    assert out["booster"].ensemble.n_trees == 3 * params["num_parallel_tree"] * max(classes, 1)
    assert out["booster"].to_json() == single.to_json()
    assert out["history"] == history
