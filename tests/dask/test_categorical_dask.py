"""Categorical features on Dask (issue 29, docs/categorical.md): partitions whose categories
differ are re-coded to one agreed set before training, so the model is byte for byte the
single-process model on 1, 2 and 3 workers; partitions that cannot agree are refused, named."""

from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import dgboost as dg
import dgboost.dask as dxgb
from dgboost.errors import DGBoostValueError

pytestmark = pytest.mark.dask

AIRPORTS = np.array([f"A{i:02d}" for i in range(40)], dtype=object)
CHUNKS = (300, 0, 500, 200)  # uneven, one empty


def _table(seed=0):
    rng = np.random.default_rng(seed)
    n = sum(CHUNKS)
    # long-tailed: a few airports hold most rows
    weights = 1.0 / np.arange(1, AIRPORTS.size + 1)
    origin = rng.choice(AIRPORTS, n, p=weights / weights.sum())
    carrier = rng.choice(np.array(list("PQRST"), dtype=object), n)
    x = rng.normal(size=n)
    effect = {a: rng.normal() for a in AIRPORTS}
    y = np.array([effect[a] for a in origin]) + (carrier == "R") + x + rng.normal(scale=0.5, size=n) > 0.5
    frame = pd.DataFrame({"origin": origin, "carrier": carrier, "x": x})
    frame.loc[rng.random(n) < 0.05, "origin"] = None
    return frame, y.astype(np.float64)


def _partitions(frame: pd.DataFrame, y: np.ndarray, known: bool = False):
    """Partitions of CHUNKS rows whose category columns each have the categories they hold,
    in a different order in every partition (the worst case for codes); the collection's
    dtype knows the whole column's (sorted) categories when ``known``, else none."""
    bounds = np.concatenate([[0], np.cumsum(CHUNKS)])
    parts, labels = [], []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        part = frame.iloc[a:b].copy()
        for column in ("origin", "carrier"):
            present = sorted(part[column].dropna().unique())
            order = present[::-1] if i % 2 else present[i:] + present[:i]
            part[column] = pd.Categorical(part[column], categories=order)
        parts.append(part)
        labels.append(pd.Series(y[a:b], index=part.index))
    meta = _local(frame).iloc[:0]  # the dtypes of the whole columns: sorted categories
    X = dd.from_delayed([dask.delayed(p) for p in parts], meta=meta, verify_meta=False)
    if not known:  # unknown categories: what astype("category") of a dask column gives
        X = X.assign(origin=X["origin"].cat.as_unknown(), carrier=X["carrier"].cat.as_unknown())
    Y = dd.from_delayed([dask.delayed(s) for s in labels], meta=pd.Series([], dtype=np.float64))
    return X, Y


def _local(frame: pd.DataFrame):
    return frame.astype({"origin": "category", "carrier": "category"})


PARAMS = {"objective": "binary:logistic", "max_depth": 4, "max_cat_to_onehot": 8, "eval_metric": "logloss"}


@pytest.mark.parametrize("n_workers, known", [(1, False), (2, False), (3, False), (2, True)])
def test_partitions_with_differently_ordered_categories_train_the_single_process_model(dask_client, n_workers, known):
    frame, y = _table()
    client = dask_client(n_workers)
    X, Y = _partitions(frame, y, known)
    assert X["origin"].cat.known == known
    dtrain = dxgb.DaskDMatrix(client, X, Y)
    # the agreed set: the sorted union, as astype("category") of the whole column
    assert dtrain.categories[0].tolist() == sorted(frame["origin"].dropna().unique())
    assert dtrain.categories[1].tolist() == list("PQRST") and dtrain.categories[2] is None
    assert dtrain.feature_types == ["c", "c", "float"]
    out = dxgb.train(client, PARAMS, dtrain, 4, evals=[(dtrain, "train")], verbose_eval=False)
    history: dict = {}
    local = dg.DMatrix(_local(frame), y)
    single = dg.train(PARAMS, local, 4, evals=[(local, "train")], evals_result=history, verbose_eval=False)
    assert out["booster"].save_raw("json") == single.save_raw("json")
    assert out["history"] == history
    assert out["booster"].meta["categories"][0] == dtrain.categories[0].tolist()
    # prediction re-codes every partition against the model's categories
    np.testing.assert_array_equal(dxgb.predict(client, out["booster"], X).compute(), single.predict(_local(frame)))


def test_known_categories_are_the_agreed_set_and_a_partition_outside_them_is_refused_by_name(dask_client):
    frame, y = _table()
    client = dask_client(2)
    local = _local(frame)
    X = dd.from_pandas(local, npartitions=3)
    assert X["origin"].cat.known
    Y = dd.from_pandas(pd.Series(y), npartitions=3)
    dtrain = dxgb.DaskDMatrix(client, X, Y)
    assert dtrain.categories[0].tolist() == local["origin"].cat.categories.tolist()

    parts = [p.copy() for p in (local.iloc[:400], local.iloc[400:])]
    parts[1]["carrier"] = parts[1]["carrier"].cat.add_categories(["ZZ"])
    parts[1].iloc[0, parts[1].columns.get_loc("carrier")] = "ZZ"
    bad = dd.from_delayed([dask.delayed(p) for p in parts], meta=local.iloc[:0], verify_meta=False)
    labels = dd.from_delayed(
        [dask.delayed(pd.Series(y[:400])), dask.delayed(pd.Series(y[400:], index=range(400, len(y))))],
        meta=pd.Series([], dtype=np.float64),
    )
    with pytest.raises(DGBoostValueError, match=r"partition 1: column 'carrier': category 'ZZ' is not among"):
        dxgb.train(client, PARAMS, dxgb.DaskDMatrix(client, bad, labels), 2, verbose_eval=False)


def test_partitions_whose_category_values_are_of_different_kinds_are_refused_by_name(dask_client):
    client = dask_client(2)
    parts = [
        pd.DataFrame({"c": pd.Categorical(["a", "b"]), "x": [1.0, 2.0]}),
        pd.DataFrame({"c": pd.Categorical([1, 2]), "x": [3.0, 4.0]}, index=[2, 3]),
    ]
    meta = parts[0].iloc[:0]
    X = dd.from_delayed([dask.delayed(p) for p in parts], meta=meta, verify_meta=False)
    X = X.assign(c=X["c"].cat.as_unknown())
    with pytest.raises(DGBoostValueError, match=r"column 'c': partition 0 has string categories but partition 1"):
        dxgb.DaskDMatrix(client, X)


def test_an_evaluation_set_with_a_category_unseen_in_training_is_refused_before_training(dask_client):
    frame, y = _table()
    client = dask_client(2)
    local = _local(frame)
    dtrain = dxgb.DaskDMatrix(client, dd.from_pandas(local, npartitions=2), dd.from_pandas(pd.Series(y), 2))
    other = local.copy()
    other["carrier"] = other["carrier"].cat.add_categories(["NEW"])
    dvalid = dxgb.DaskDMatrix(client, dd.from_pandas(other, npartitions=2), dd.from_pandas(pd.Series(y), 2))
    with pytest.raises(DGBoostValueError, match=r"column 'carrier': category 'NEW' is not among the categories"):
        dxgb.train(client, PARAMS, dtrain, 2, evals=[(dvalid, "valid")], verbose_eval=False)


def test_a_category_column_without_enable_categorical_is_refused_on_the_client(dask_client):
    frame, y = _table()
    client = dask_client(1)
    with pytest.raises(TypeError, match=r"column 'origin' is categorical.*enable_categorical=True"):
        dxgb.DaskDMatrix(client, dd.from_pandas(_local(frame), npartitions=2), enable_categorical=False)


def test_the_dask_estimator_trains_on_category_columns_as_the_local_one(dask_client):
    frame, y = _table()
    client = dask_client(2)
    X, Y = _partitions(frame, y)
    model = dxgb.DaskDGBClassifier(n_estimators=3, max_depth=3, max_cat_to_onehot=8)
    model.client = client
    model.fit(X, Y)
    local = dg.DGBClassifier(n_estimators=3, max_depth=3, max_cat_to_onehot=8).fit(_local(frame), y)
    mine, theirs = model.get_booster(), local.get_booster()
    for booster in (mine, theirs):
        booster.set_attr(scikit_learn=None)  # the estimator's class name differs, the model not
    assert mine.save_raw("json") == theirs.save_raw("json")


def test_codes_typed_c_in_a_dask_array_train_the_single_process_model(dask_client):
    import dask.array as da

    frame, y = _table()
    codes = dg.DMatrix(_local(frame)).data  # origin and carrier codes, x
    client = dask_client(2)
    X = da.from_array(codes, chunks=(250, 3))
    Y = da.from_array(y, chunks=250)
    types = ["c", "c", "q"]
    dtrain = dxgb.DaskDMatrix(client, X, Y, feature_types=types)
    out = dxgb.train(client, PARAMS, dtrain, 3, verbose_eval=False)
    # K of codes given as numbers is agreed over the partitions (the largest code anywhere + 1)
    assert dtrain.code_counts == {0: int(np.nanmax(codes[:, 0])) + 1, 1: int(np.nanmax(codes[:, 1])) + 1}
    single = dg.train(PARAMS, dg.DMatrix(codes, y, feature_types=types), 3, verbose_eval=False)
    assert out["booster"].save_raw("json") == single.save_raw("json")
    assert out["booster"].feature_types == types


def test_a_ranks_matrix_gets_the_jobs_categories_not_its_own():
    from dgboost.dask._matrix import agreed_code_counts, as_rank_dmatrix

    counts = agreed_code_counts([{"rows": 2, "codes_k": {0: 3}}, {"rows": 0}, {"rows": 1, "codes_k": {0: 9}}])
    assert counts == {0: 9}
    part = {"data": np.array([[0.0, 1.5], [2.0, np.nan]], np.float32), "label": np.array([0.0, 1.0])}
    keywords = {"has": {"data": True, "label": True}, "missing": np.nan, "feature_names": None, "n_features": 2}
    dm = as_rank_dmatrix([part], **keywords, feature_types=["c", "q"], code_counts=counts)
    assert dm.categories[0].tolist() == list(range(9)) and dm.category_values() == [None, None]
    frame = pd.DataFrame({"c": pd.Categorical(["b", "a"]), "x": [1.0, 2.0]})
    agreed = [np.array(["a", "b", "z"], dtype=object), None]
    dm = as_rank_dmatrix(
        [{"data": frame, "label": np.zeros(2)}], **keywords, feature_types=["c", "float"], categories=agreed
    )
    np.testing.assert_array_equal(dm.data[:, 0], [1.0, 0.0])
    assert dm.category_values()[0] == ["a", "b", "z"]
