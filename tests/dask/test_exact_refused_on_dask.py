"""tree_method="exact" is refused by dgboost.dask (as XGBoost refuses exact in distributed training)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import dgboost.dask as dxgb
from dgboost.errors import DGBoostValueError

pytestmark = pytest.mark.dask


def test_exact_on_dask_is_refused_with_what_to_use_instead(dask_client):
    client = dask_client(1)
    X = da.from_array(np.random.default_rng(0).normal(size=(200, 3)).astype(np.float32), chunks=100)
    y = da.from_array(np.zeros(200, np.float32), chunks=100)
    dtrain = dxgb.DaskDMatrix(client, X, y)
    with pytest.raises(DGBoostValueError, match="tree_method='exact' is not distributed.*tree_method='hist'"):
        dxgb.train(client, {"tree_method": "exact"}, dtrain, num_boost_round=2)


def test_the_dask_estimators_refuse_exact_too(dask_client):
    client = dask_client(1)
    X = da.from_array(np.random.default_rng(1).normal(size=(200, 3)).astype(np.float32), chunks=100)
    y = da.from_array(np.zeros(200, np.float32), chunks=100)
    model = dxgb.DaskDGBRegressor(tree_method="exact", n_estimators=2)
    model.client = client
    with pytest.raises(DGBoostValueError, match="tree_method='exact' is not distributed"):
        model.fit(X, y)
