"""The Dask estimators as an XGBoost-on-Dask script uses them (issue 28): predictions of a dask
DataFrame keep its index, ``predict_proba`` gives what ``xgboost.dask`` gives, and fitting on a
DataFrame label shuffles nothing (no shuffle lines in the scheduler's log)."""

from __future__ import annotations

import logging

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import dgboost as dg
import dgboost.dask as dxgb

pytestmark = pytest.mark.dask


def _frame(classes: int, n: int = 600, seed: int = 3):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 4)).astype(np.float32), columns=list("abcd"))
    X.index = pd.RangeIndex(1000, 1000 + 3 * n, 3)  # not 0..n-1: the index must travel
    signal = X["a"] + X["b"] * X["c"]
    y = pd.Series(np.digitize(signal, [-0.5, 0.5][: classes - 1]), index=X.index, name="y")
    return X, y


@pytest.mark.parametrize("classes", [2, 3])
def test_classifier_predict_of_a_dataframe_is_a_series_with_its_index(dask_client, classes):
    client = dask_client(2)
    X, y = _frame(classes)
    dX, dy = dd.from_pandas(X, npartitions=3), dd.from_pandas(y, npartitions=3)
    model = dxgb.DaskDGBClassifier(n_estimators=3, max_depth=3)
    model.client = client
    model.fit(dX, dy)
    local = dg.DGBClassifier(n_estimators=3, max_depth=3).fit(X, y)
    out = model.predict(dX)
    assert isinstance(out, dd.Series)
    assert out.divisions == dX.divisions
    got = out.compute()
    pd.testing.assert_index_equal(got.index, X.index)
    np.testing.assert_array_equal(got.to_numpy(), local.predict(X))


def test_classifier_predict_proba_of_a_dataframe_is_an_array_as_xgboost_dask_gives(dask_client):
    client = dask_client(2)
    X, y = _frame(3)
    dX, dy = dd.from_pandas(X, npartitions=3), dd.from_pandas(y, npartitions=3)
    model = dxgb.DaskDGBClassifier(n_estimators=3, max_depth=3)
    model.client = client
    model.fit(dX, dy)
    proba = model.predict_proba(dX)
    assert isinstance(proba, da.Array)  # xgboost.dask.DaskXGBClassifier.predict_proba: a dask Array
    local = dg.DGBClassifier(n_estimators=3, max_depth=3).fit(X, y)
    np.testing.assert_array_equal(proba.compute(), local.predict_proba(X))


def test_classifier_predict_of_an_array_stays_an_array(dask_client):
    client = dask_client(2)
    X, y = _frame(2)
    x = da.from_array(X.to_numpy(), chunks=(200, 4))
    model = dxgb.DaskDGBClassifier(n_estimators=2, max_depth=3)
    model.client = client
    model.fit(x, da.from_array(y.to_numpy(), chunks=200))
    out = model.predict(x)
    assert isinstance(out, da.Array) and out.chunks[0] == (200, 200, 200)


def test_regressor_predict_of_a_dataframe_is_a_series_with_its_index(dask_client):
    client = dask_client(2)
    X, y = _frame(3)
    dX, dy = dd.from_pandas(X, npartitions=3), dd.from_pandas(y.astype(np.float32), npartitions=3)
    model = dxgb.DaskDGBRegressor(n_estimators=3, max_depth=3)
    model.client = client
    model.fit(dX, dy)
    got = model.predict(dX).compute()
    assert isinstance(got, pd.Series)
    pd.testing.assert_index_equal(got.index, X.index)
    local = dg.DGBRegressor(n_estimators=3, max_depth=3).fit(X, y.astype(np.float32))
    np.testing.assert_array_equal(got.to_numpy(), local.predict(X))


def test_fitting_a_classifier_on_a_dataframe_label_logs_no_shuffle(dask_client, caplog):
    client = dask_client(2)
    X, y = _frame(3)
    dX, dy = dd.from_pandas(X, npartitions=3), dd.from_pandas(y, npartitions=3)
    caplog.set_level(logging.WARNING, logger="distributed.shuffle")
    # the capture sees a shuffle: a dask Series' unique() logs one (so the check below can fail)
    dy.unique().compute()
    assert any("Shuffle" in r.getMessage() for r in caplog.records)
    caplog.clear()
    model = dxgb.DaskDGBClassifier(n_estimators=2, max_depth=3)
    model.client = client
    model.fit(dX, dy, eval_set=[(dX, dy)])
    model.predict(dX).compute()
    assert [r.getMessage() for r in caplog.records if "huffle" in r.getMessage()] == []
    np.testing.assert_array_equal(model.classes_, [0, 1, 2])
