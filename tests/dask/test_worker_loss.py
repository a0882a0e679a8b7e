"""A worker lost while ``dgboost.dask.predict`` / ``shap_values`` compute: Dask computes the lost
blocks again elsewhere, and the values are complete and bitwise equal to single-process ones."""

from __future__ import annotations

import contextlib
import os
import time

import dask.array as da
import numpy as np
import pytest

import dgboost as dg
import dgboost.dask as dxgb
from dgboost.dask._waits import cluster_workers
from dgboost.testing.faults import kill_once_in_block

pytestmark = pytest.mark.dask

ROWS, CHUNK = 1_200, 200  # 6 row blocks over 3 workers


@pytest.fixture(scope="module")
def three_workers():
    """A cluster of its own: workers are killed, and the shared clusters must keep theirs."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=":0")
    client = Client(cluster, set_as_default=False)
    client.wait_for_workers(3, timeout=60)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def model_and_rows():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(ROWS, 6))
    x[rng.random(x.shape) < 0.1] = np.nan
    y = (np.nan_to_num(x[:, 0]) + np.sin(np.nan_to_num(x[:, 1])) > 0).astype(np.float64)
    params = {"objective": "binary:logistic", "max_depth": 4, "seed": 3}
    return dg.train(params, dg.DMatrix(x, y), 12, verbose_eval=False), x


def _rows_killing_a_worker(x: np.ndarray, flag) -> da.Array:
    """``x`` as a dask array whose row block 2, the first time it is computed, kills its worker."""
    blocks = da.from_array(x, chunks=(CHUNK, x.shape[1]))
    return blocks.map_blocks(kill_once_in_block, str(flag), 2, dtype=x.dtype)


def test_predictions_of_a_computation_that_loses_a_worker_are_complete_and_bitwise_equal(
    three_workers, model_and_rows, tmp_path
):
    client = three_workers
    booster, x = model_and_rows
    flag = tmp_path / "killed"
    got = dxgb.predict(client, booster, _rows_killing_a_worker(x, flag)).compute(scheduler=client)
    assert flag.exists()  # a worker was lost during the computation
    want = booster.predict(dg.DMatrix(x))
    assert got.shape == want.shape and got.tobytes() == want.tobytes()


def test_shap_values_and_interactions_of_a_computation_that_loses_a_worker_are_bitwise_equal(
    three_workers, model_and_rows, tmp_path
):
    client = three_workers
    booster, x = model_and_rows
    explainer = dg.TreeExplainer(booster)
    for interactions in (False, True):
        flag = tmp_path / f"killed-{interactions}"
        rows = _rows_killing_a_worker(x, flag)
        got = dxgb.shap_values(client, booster, rows, interactions=interactions).compute(scheduler=client)
        assert flag.exists()
        want = explainer.shap_interaction_values(x) if interactions else explainer.shap_values(x)
        assert got.shape == want.shape and got.tobytes() == want.tobytes()


def test_shap_values_of_persisted_rows_whose_holder_is_lost_are_computed_again_and_bitwise_equal(
    three_workers, model_and_rows
):
    """The blocks are explained where they are held (loose restrictions, chosen when the lazy
    values are made): the holder of block 0 leaves before they are computed, and its blocks
    are read again and explained elsewhere."""
    from distributed import wait

    client = three_workers
    booster, x = model_and_rows
    rows = client.persist(da.from_array(x, chunks=(CHUNK, x.shape[1])))
    with client.as_current():
        wait(rows, timeout=60)
    lazy = dxgb.shap_values(client, booster, rows)  # block 0 placed on its holder
    holder = sorted(client.who_has(rows)[(rows.name, 0, 0)])[0]
    with contextlib.suppress(Exception):  # the worker never answers: it is gone
        client.run(os._exit, 1, workers=[holder], callback_timeout=10)
    deadline = time.monotonic() + 60
    while holder in cluster_workers(client):  # the scheduler sees it gone
        assert time.monotonic() < deadline, f"{holder} is still a worker"
        time.sleep(0.1)
    got = client.compute(lazy).result(timeout=120)
    want = dg.TreeExplainer(booster).shap_values(x)
    assert got.tobytes() == want.tobytes()
