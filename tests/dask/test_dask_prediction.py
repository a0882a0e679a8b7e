"""dgboost.dask.predict / inplace_predict / shap_values and the Dask estimators: bitwise equal
to single-process results, lazy, with the input's chunks, divisions and index."""

from __future__ import annotations

import os
import signal

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import dgboost as dg
import dgboost.dask as dxgb
from dgboost.dask._waits import cluster_workers
from dgboost.errors import DGBoostValueError

pytestmark = pytest.mark.dask

CHUNKS = (300, 0, 500, 200)
N = sum(CHUNKS)


def _data(seed=1, classes=2):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, 5)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    signal = np.nan_to_num(x[:, 0]) + np.nan_to_num(x[:, 1]) * np.nan_to_num(x[:, 2])
    if classes == 2:
        y = (signal > 0).astype(np.float32)
    else:
        y = np.digitize(signal, [-0.5, 0.5]).astype(np.float32)
    return x, y


@pytest.fixture(scope="module")
def binary_model():
    x, y = _data()
    return dg.train({"objective": "binary:logistic", "max_depth": 3, "max_bin": 32}, dg.DMatrix(x, y), 5), x


@pytest.fixture(scope="module")
def multiclass_model():
    x, y = _data(classes=3)
    params = {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "max_bin": 32}
    return dg.train(params, dg.DMatrix(x, y), 4), x


@pytest.mark.parametrize(
    "kwargs", [{}, {"output_margin": True}, {"pred_leaf": True}, {"pred_contribs": True}, {"pred_interactions": True}]
)
def test_predictions_of_a_dask_array_equal_single_process_predictions_bitwise(dask_client, binary_model, kwargs):
    booster, x = binary_model
    client = dask_client(2)
    X = da.from_array(x, chunks=(CHUNKS, 5))
    out = dxgb.predict(client, booster, X, **kwargs)
    assert isinstance(out, da.Array) and out.chunks[0] == CHUNKS
    expected = booster.predict(dg.DMatrix(x), **kwargs)
    got = out.compute()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_multiclass_contributions_are_a_3d_dask_array_equal_to_single_process(dask_client, multiclass_model):
    booster, x = multiclass_model
    client = dask_client(2)
    out = dxgb.predict(client, {"booster": booster}, da.from_array(x, chunks=(CHUNKS, 5)), pred_contribs=True)
    np.testing.assert_array_equal(out.compute(), booster.predict(dg.DMatrix(x), pred_contribs=True))


def test_predictions_of_a_dataframe_keep_its_index_and_divisions(dask_client, binary_model, multiclass_model):
    client = dask_client(2)
    for booster, x in (binary_model, multiclass_model):
        frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(5)], index=np.arange(N) * 3 + 7)
        ddf = dd.from_pandas(frame, npartitions=3)
        out = dxgb.predict(client, booster, ddf)
        got = out.compute()
        expected = booster.predict(dg.DMatrix(frame))
        assert out.divisions == ddf.divisions
        pd.testing.assert_index_equal(got.index, frame.index)
        np.testing.assert_array_equal(np.asarray(got), expected)


def test_contributions_of_a_dataframe_are_named_after_the_features_and_bias(dask_client, binary_model):
    booster, x = binary_model
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(5)])
    got = dxgb.predict(dask_client(2), booster, dd.from_pandas(frame, npartitions=2), pred_contribs=True).compute()
    assert list(got.columns) == [f"f{i}" for i in range(5)] + ["bias"]
    np.testing.assert_array_equal(got.to_numpy(), booster.predict(dg.DMatrix(frame), pred_contribs=True))


def test_predicting_a_dask_dmatrix_equals_single_process(dask_client, binary_model):
    booster, x = binary_model
    client = dask_client(3)
    dm = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(CHUNKS, 5)))
    np.testing.assert_array_equal(dxgb.predict(client, booster, dm).compute(), booster.predict(dg.DMatrix(x)))


def test_inplace_predict_with_base_margin_equals_single_process(dask_client, binary_model):
    booster, x = binary_model
    margin = np.linspace(-1, 1, N).astype(np.float32)
    client = dask_client(2)
    out = dxgb.inplace_predict(
        client,
        booster,
        da.from_array(x, chunks=(CHUNKS, 5)),
        predict_type="margin",
        base_margin=da.from_array(margin, chunks=(CHUNKS,)),
    )
    expected = booster.inplace_predict(x, predict_type="margin", base_margin=margin)
    np.testing.assert_array_equal(out.compute(), expected)


def test_distributed_shap_values_equal_the_explainers_bitwise(dask_client, binary_model, multiclass_model):
    client = dask_client(2)
    for booster, x in (binary_model, multiclass_model):
        explainer = dg.TreeExplainer(booster)
        got = dxgb.shap_values(client, explainer, da.from_array(x, chunks=(CHUNKS, 5))).compute()
        np.testing.assert_array_equal(got, explainer.shap_values(x))


def test_distributed_shap_values_refuse_an_unknown_device_before_any_work(binary_model):
    booster, x = binary_model
    with pytest.raises(DGBoostValueError, match="unknown device 'gpu0'"):
        dxgb.shap_values(None, booster, da.from_array(x, chunks=(CHUNKS, 5)), device="gpu0")


def test_distributed_interaction_values_are_chunked_under_the_bound_and_equal_the_explainers(dask_client, binary_model):
    booster, x = binary_model
    bound = 100 * 5 * 5 * 8  # 100 rows of (F, F) float64 per block at most
    out = dxgb.shap_values(
        dask_client(2), booster, da.from_array(x, chunks=(CHUNKS, 5)), interactions=True, max_block_bytes=bound
    )
    assert max(out.chunks[0]) <= 100
    np.testing.assert_array_equal(out.compute(), dg.TreeExplainer(booster).shap_interaction_values(x))


def test_shap_of_a_dataframe_is_the_shap_frame_per_partition_with_the_index_kept(dask_client, multiclass_model):
    booster, x = multiclass_model
    frame = pd.DataFrame(x, columns=list("abcde"), index=np.arange(N)[::-1])
    explainer = dg.TreeExplainer(booster)
    out = dxgb.shap_values(dask_client(2), explainer, dd.from_pandas(frame, npartitions=3, sort=False))
    pd.testing.assert_frame_equal(out.compute(), explainer.shap_frame(frame))


def test_a_users_own_map_partitions_with_the_shap_frame_and_its_meta_works(dask_client, binary_model):
    booster, x = binary_model
    frame = pd.DataFrame(x, columns=list("abcde"))
    ddf = dd.from_pandas(frame, npartitions=3)
    explainer = dg.TreeExplainer(booster)
    dask_client(2)  # the default client
    out = ddf.map_partitions(explainer.shap_frame, meta=dxgb.shap_frame_meta(explainer, ddf.columns))
    pd.testing.assert_frame_equal(out.compute(), explainer.shap_frame(frame))


def test_a_worker_lost_while_shap_values_are_held_is_recomputed_and_the_result_is_right(dask_client, binary_model):
    booster, x = binary_model
    client = dask_client(3)
    explainer = dg.TreeExplainer(booster)
    out = dxgb.shap_values(client, explainer, da.from_array(x, chunks=(CHUNKS, 5))).persist()
    from distributed import futures_of, wait

    wait(futures_of(out))
    holder = sorted(next(iter(client.who_has(futures_of(out)).values())))[0]
    pid = client.run(os.getpid, workers=[holder])[holder]
    os.kill(pid, signal.SIGKILL)  # the worker dies (its nanny starts a new one)
    np.testing.assert_array_equal(out.compute(), explainer.shap_values(x))


def _shap_of_rows_held_by(client, booster, x, holder: str):
    """SHAP values, computed and held, of ``x`` persisted on the worker ``holder``."""
    from distributed import futures_of, wait

    out = dxgb.shap_values(client, booster, _rows_held_by(client, x, holder)).persist()
    wait(futures_of(out))
    return out


def _rows_held_by(client, x, holder: str):
    from distributed import futures_of, wait

    data = client.persist(da.from_array(x, chunks=(CHUNKS, 5)), workers=[holder], allow_other_workers=True)
    wait(futures_of(data))
    return data


def _task_restrictions(dask_scheduler=None, prefix: str = ""):
    return {
        ts.key: (sorted(ts.worker_restrictions or ()), ts.loose_restrictions)
        for ts in dask_scheduler.tasks.values()
        if prefix in str(ts.key)
    }


def test_shap_values_of_a_persisted_array_run_each_block_where_it_is_held(dask_client, binary_model):
    """Dask would otherwise place blocks on the worker of the model's task too (on 4 GPUs 6/4/3/4
    of 16 blocks a worker). The restrictions are loose: a lost worker's blocks run elsewhere,
    and Dask's work stealing may still hand a block to an idle worker."""
    booster, x = binary_model
    client = dask_client(2)
    holder = sorted(cluster_workers(client))[1]
    out = _shap_of_rows_held_by(client, booster, x, holder)
    restrictions = client.run_on_scheduler(_task_restrictions, prefix="_explain_block")
    assert len(restrictions) == len(CHUNKS)
    assert all(r == ([holder], True) for r in restrictions.values())
    np.testing.assert_array_equal(out.compute(), dg.TreeExplainer(booster).shap_values(x))
    del out
    # a lazy input: its blocks are made where the scheduler puts them, nothing is pinned
    lazy = dxgb.shap_values(client, booster, da.from_array(x, chunks=(CHUNKS, 5)))
    assert type(lazy) is da.Array


@pytest.mark.parametrize("with_margin", [False, True])
def test_predictions_of_a_persisted_array_run_each_block_where_it_is_held(dask_client, binary_model, with_margin):
    from distributed import futures_of, wait

    booster, x = binary_model
    client = dask_client(2)
    holder = sorted(cluster_workers(client))[1]
    data = _rows_held_by(client, x, holder)
    margin = np.linspace(-1, 1, N).astype(np.float32)
    if with_margin:
        out = dxgb.inplace_predict(client, booster, data, base_margin=da.from_array(margin, chunks=(CHUNKS,)))
        expected = booster.inplace_predict(x, base_margin=margin)
    else:
        out = dxgb.predict(client, booster, data, output_margin=True)
        expected = booster.predict(dg.DMatrix(x), output_margin=True)
    name = out.name
    out = out.persist()
    wait(futures_of(out))
    restrictions = client.run_on_scheduler(_task_restrictions, prefix=name)
    assert len(restrictions) == len(CHUNKS)
    assert all(r == ([holder], True) for r in restrictions.values())
    np.testing.assert_array_equal(out.compute(), expected)


@pytest.mark.parametrize("as_series", [False, True])
def test_inplace_predict_of_a_dataframe_adds_its_base_margin_partition_by_partition(
    dask_client, multiclass_model, as_series
):
    booster, x = multiclass_model
    client = dask_client(2)
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(5)], index=np.arange(N)[::-1])
    ddf = dd.from_pandas(frame, npartitions=3, sort=False)
    lengths = tuple(ddf.map_partitions(len).compute())
    margin = np.linspace(-1, 1, 3 * N).reshape(N, 3).astype(np.float32)
    bm = da.from_array(margin, chunks=(lengths, 3))
    if as_series:
        bm = bm.to_dask_dataframe()
    out = dxgb.inplace_predict(client, booster, ddf, base_margin=bm, predict_type="margin")
    got = out.compute()
    pd.testing.assert_index_equal(got.index, frame.index)
    np.testing.assert_array_equal(
        np.asarray(got), booster.inplace_predict(x, base_margin=margin, predict_type="margin")
    )
    # a Series / DataFrame margin of an Array's rows works as well
    arr = da.from_array(x, chunks=(lengths, 5))
    got = dxgb.inplace_predict(client, booster, arr, base_margin=bm, predict_type="margin").compute()
    np.testing.assert_array_equal(got, booster.inplace_predict(x, base_margin=margin, predict_type="margin"))
    # a margin in other row blocks is refused, not misaligned
    with pytest.raises(DGBoostValueError, match="base_margin has 1 row blocks and the data 3 partitions"):
        dxgb.inplace_predict(client, booster, ddf, base_margin=da.from_array(margin, chunks=(N, 3)))


def _frame_held_by(client, x, holder: str):
    """``(frame, persisted)``: ``x`` as a pandas frame (a descending index) and as a dask
    DataFrame of 3 partitions persisted on the worker ``holder`` (checked)."""
    from distributed import futures_of, wait

    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(5)], index=np.arange(N)[::-1])
    data = dd.from_pandas(frame, npartitions=3, sort=False)
    data = client.persist(data, workers=[holder])
    wait(futures_of(data))
    assert {w for ws in client.who_has(futures_of(data)).values() for w in ws} == {holder}
    return frame, data


def _submitted_restrictions(client, out, name: str) -> dict:
    """The scheduler's worker restrictions of the tasks ``(name-<id>, i)`` submitted for
    ``out`` (computed first)."""
    out.compute()
    tasks = client.run_on_scheduler(_task_restrictions, prefix=name)
    return {k: r for k, r in tasks.items() if isinstance(k, tuple) and k[0].startswith(f"{name}-")}


def test_shap_values_of_a_persisted_dataframe_run_each_partition_where_it_is_held(dask_client, multiclass_model):
    """dask-expr keeps no per-task placement for a lazy frame, so a persisted frame's partitions
    are submitted at once, each to its holder (loosely, as an array's blocks)."""
    from distributed import futures_of

    booster, x = multiclass_model
    client = dask_client(2)
    holder = sorted(cluster_workers(client))[1]
    frame, data = _frame_held_by(client, x, holder)
    explainer = dg.TreeExplainer(booster)
    out = dxgb.shap_values(client, explainer, data)
    assert isinstance(out, dd.DataFrame) and out.divisions == data.divisions
    restrictions = _submitted_restrictions(client, out, "frame_partition")
    assert len(restrictions) == 3
    assert all(r == ([holder], True) for r in restrictions.values())
    pd.testing.assert_frame_equal(out.compute(), explainer.shap_frame(frame))
    # a lazy frame stays lazy: nothing is submitted before it is computed
    lazy = dxgb.shap_values(client, explainer, dd.from_pandas(frame, npartitions=3, sort=False))
    assert not futures_of(lazy)
    pd.testing.assert_frame_equal(lazy.compute(), explainer.shap_frame(frame))


@pytest.mark.parametrize("kwargs", [{"output_margin": True}, {"pred_contribs": True}])
def test_predictions_of_a_persisted_dataframe_run_each_partition_where_it_is_held(dask_client, binary_model, kwargs):
    booster, x = binary_model
    client = dask_client(2)
    holder = sorted(cluster_workers(client))[1]
    frame, data = _frame_held_by(client, x, holder)
    out = dxgb.predict(client, booster, data, **kwargs)
    restrictions = _submitted_restrictions(client, out, "predict_frame_partition")
    assert len(restrictions) == 3
    assert all(r == ([holder], True) for r in restrictions.values())
    got = out.compute()
    pd.testing.assert_index_equal(got.index, frame.index)
    np.testing.assert_array_equal(np.asarray(got), booster.predict(dg.DMatrix(frame), **kwargs))


def test_a_persisted_dataframes_worker_lost_runs_its_partitions_elsewhere_with_the_same_values(
    dask_client, binary_model
):
    from distributed import futures_of, wait

    booster, x = binary_model
    client = dask_client(3)
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(5)], index=np.arange(N)[::-1])
    data = client.persist(dd.from_pandas(frame, npartitions=3, sort=False))  # anywhere: no pin to outlive
    wait(futures_of(data))
    holder = sorted(next(iter(client.who_has(futures_of(data)).values())))[0]  # holds a partition
    explainer = dg.TreeExplainer(booster)
    out = dxgb.shap_values(client, explainer, data)
    del data  # the values' tasks hold the rows now
    out.compute()
    pid = client.run(os.getpid, workers=[holder])[holder]
    os.kill(pid, signal.SIGKILL)  # its rows and their values are lost with it; both are recomputed
    pd.testing.assert_frame_equal(out.compute(), explainer.shap_frame(frame))


def test_a_held_blocks_worker_lost_runs_its_blocks_elsewhere_with_the_same_values(dask_client, binary_model):
    booster, x = binary_model
    client = dask_client(3)
    holder = sorted(cluster_workers(client))[0]
    out = _shap_of_rows_held_by(client, booster, x, holder)
    pid = client.run(os.getpid, workers=[holder])[holder]
    os.kill(pid, signal.SIGKILL)  # the rows and their values are lost with it; both are recomputed
    np.testing.assert_array_equal(out.compute(), dg.TreeExplainer(booster).shap_values(x))


# -- estimators --------------------------------------------------------------------------------


def test_the_dask_regressor_trains_the_local_regressors_trees(dask_client):
    x, _ = _data()
    y = np.nan_to_num(x[:, 0]) * 2 + np.nan_to_num(x[:, 3])
    client = dask_client(2)
    model = dxgb.DaskDGBRegressor(n_estimators=4, max_depth=3, max_bin=32)
    model.client = client
    model.fit(da.from_array(x, chunks=(CHUNKS, 5)), da.from_array(y, chunks=(CHUNKS,)))
    local = dg.DGBRegressor(n_estimators=4, max_depth=3, max_bin=32).fit(x, y)
    assert model.get_booster().get_dump() == local.get_booster().get_dump()
    np.testing.assert_array_equal(model.predict(da.from_array(x, chunks=(CHUNKS, 5))).compute(), local.predict(x))


def test_the_dask_classifier_encodes_labels_and_predicts_classes_and_probabilities(dask_client):
    x, y = _data(classes=3)
    labels = np.array([10, 20, 30])[y.astype(int)]
    client = dask_client(2)
    model = dxgb.DaskXGBClassifier(n_estimators=3, max_depth=3, max_bin=32)
    model.client = client
    X = da.from_array(x, chunks=(CHUNKS, 5))
    model.fit(X, da.from_array(labels, chunks=(CHUNKS,)))
    local = dg.DGBClassifier(n_estimators=3, max_depth=3, max_bin=32).fit(x, labels)
    assert list(model.classes_) == [10, 20, 30]
    np.testing.assert_array_equal(model.predict_proba(X).compute(), local.predict_proba(x))
    np.testing.assert_array_equal(model.predict(X).compute(), local.predict(x))


def test_the_dask_ranker_trains_on_query_ids_like_the_local_ranker(dask_client):
    rng = np.random.default_rng(2)
    qid = np.repeat(np.arange(40), 10)
    x = rng.normal(size=(400, 4)).astype(np.float32)
    y = np.clip(np.round(x[:, 0] + 1), 0, 3)
    chunks = ((100, 200, 100),)
    client = dask_client(2)
    model = dxgb.DaskDGBRanker(n_estimators=3, max_depth=3, max_bin=16)
    model.client = client
    model.fit(
        da.from_array(x, chunks=chunks + ((4,),)),
        da.from_array(y, chunks=chunks),
        qid=da.from_array(qid, chunks=chunks),
    )
    local = dg.DGBRanker(n_estimators=3, max_depth=3, max_bin=16).fit(x, y, qid=qid)
    assert model.get_booster().get_dump() == local.get_booster().get_dump()
