"""dgboost.dask on one GPU: a LocalCUDACluster worker, two workers sharing the GPU through the
host communicator, and the NCCL communicator with one rank all give the CPU engine's model.

(NCCL refuses two ranks on one device, so several NCCL ranks are tested on multi-GPU
machines only.)
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import dgboost as dg
from dgboost.datasets import make_synthetic
from dgboost.testing import assert_same_trees

pytestmark = [pytest.mark.gpu, pytest.mark.dask]
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

PARAMS = {
    "objective": "binary:logistic",
    "max_depth": 5,
    "max_bin": 64,
    "subsample": 0.8,
    "colsample_bynode": 0.8,
    "seed": 4,
}
CHUNKS = (3000, 0, 4000, 1000)


def _data():
    X, y, _ = make_synthetic(sum(CHUNKS), 12, task="binary", missing_rate=0.1, seed=7)
    return X.astype(np.float32), y.astype(np.float32)


def _cpu_model(X, y, rounds=6, feature_names=None):
    return dg.train(PARAMS, dg.DMatrix(X, y, feature_names=feature_names), rounds)


def _train_on(client, X, y, rounds=6, on_device=False, **kwargs):
    import dask.array as da

    import dgboost.dask as dxgb

    dX, dy = da.from_array(X, chunks=(CHUNKS, X.shape[1])), da.from_array(y, chunks=(CHUNKS,))
    if on_device:  # CuPy partitions: the rows and labels never leave the GPU
        import cupy

        dX = dX.map_blocks(cupy.asarray, dtype=np.float32)
        dy = dy.map_blocks(cupy.asarray, dtype=np.float32)
    dtrain = dxgb.DaskDMatrix(client, dX, dy)
    return dxgb.train(client, {**PARAMS, "device": "cuda"}, dtrain, rounds, **kwargs)["booster"]


@pytest.mark.parametrize("on_device", [False, True], ids=["numpy partitions", "cupy partitions"])
def test_a_local_cuda_cluster_worker_trains_the_cpu_engines_model(on_device):
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    X, y = _data()
    with (
        LocalCUDACluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        model = _train_on(client, X, y, on_device=on_device)
    assert_same_trees(model, _cpu_model(X, y), names=("LocalCUDACluster", "cpu"))


def test_a_bad_label_in_a_cupy_partition_is_named_before_training_starts():
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    X, y = _data()
    y = y.copy()
    y[CHUNKS[0] + CHUNKS[1] + 11] = np.nan  # partition 2's 12th row (partition 1 is empty)
    with (
        LocalCUDACluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        expected = "partition 2: label contains NaN or infinite values .first at row 11."
        with pytest.raises(dg.DGBoostValueError, match=expected):
            _train_on(client, X, y, on_device=True)


def test_two_workers_sharing_one_gpu_train_the_cpu_engines_model_through_the_host_communicator():
    from distributed import Client, LocalCluster

    X, y = _data()
    # dask-cuda refuses two workers on one GPU; a plain LocalCluster's two processes both use GPU 0
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        model = _train_on(client, X, y)
    assert_same_trees(model, _cpu_model(X, y), names=("2 workers on one GPU", "cpu"))


def test_the_nccl_communicator_with_one_rank_trains_the_cpu_engines_model():
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    X, y = _data()
    with (
        LocalCUDACluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        model = _train_on(client, X, y, communicator="nccl")
    assert_same_trees(model, _cpu_model(X, y), names=("nccl", "cpu"))


@pytest.mark.parametrize("stream_ordered", [False, True], ids=["host-waited", "stream-ordered"])
def test_nccl_collectives_with_one_rank_are_exact(stream_ordered):
    import cupy

    from dgboost.comm.nccl import NcclComm, new_unique_id

    with NcclComm(new_unique_id(), 0, 1, timeout=30, stream_ordered=stream_ordered) as comm:
        ints = cupy.arange(10, dtype=cupy.int64) - 5
        summed = comm.allreduce_sum(ints)
        ints += 100  # a reduction's result is its own array, whatever the caller does next
        assert cupy.array_equal(summed, cupy.arange(10, dtype=cupy.int64) - 5)
        assert cupy.array_equal(comm.allreduce_max(cupy.arange(4.0)[::-1]), cupy.arange(4.0)[::-1])
        assert np.array_equal(comm.allreduce_max(np.array([1.5, -2.0])), [1.5, -2.0])
        rows = np.array([[-0.0, 1.25], [np.nan, 3.0]], np.float32)
        got = comm.allgather(rows)
        assert isinstance(got, np.ndarray)
        assert got.tobytes() == rows.tobytes()  # bit for bit: -0.0 and NaN survive
        empty = comm.allgather(cupy.empty((0, 3), cupy.float64))
        assert empty.shape == (0, 3)
        assert comm.broadcast({"cuts": [1, 2]}) == {"cuts": [1, 2]}


def test_shap_values_of_cupy_partitions_are_computed_on_the_workers_gpu_like_the_cpu_engine():
    import cupy
    import dask.array as da
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    import dgboost.dask as dxgb

    X, y = _data()
    booster = _cpu_model(X, y)
    dX = da.from_array(X, chunks=(CHUNKS, X.shape[1])).map_blocks(cupy.asarray, dtype=np.float32)
    with (
        LocalCUDACluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        got = dxgb.shap_values(client, booster, dX).compute()
    assert isinstance(got, cupy.ndarray)  # CuPy blocks in, CuPy blocks out
    np.testing.assert_array_equal(got.get(), dg.TreeExplainer(booster).shap_values(X))  # the CPU's bits


def test_shap_values_of_pandas_partitions_with_device_cuda_are_the_gpu_explainers_frame():
    import dask.dataframe as dd
    import pandas as pd
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    import dgboost.dask as dxgb

    X, y = _data()
    booster = _cpu_model(X, y)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    with (
        LocalCUDACluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        got = dxgb.shap_values(client, booster, dd.from_pandas(frame, npartitions=3), device="cuda").compute()
    expected = dg.TreeExplainer(booster, device="cuda").shap_frame(frame)  # host rows in, host frame out
    pd.testing.assert_frame_equal(got, expected, check_exact=True)


def test_explain_on_the_shipped_local_cuda_config_writes_the_gpu_explainers_values(tmp_path):
    import pandas as pd
    from click.testing import CliRunner

    from dgboost.cli import main

    X, y = _data()
    booster = _cpu_model(X, y)
    model = tmp_path / "model.json"
    booster.save_model(str(model))
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    (tmp_path / "rows").mkdir()
    frame.iloc[:5000].to_parquet(tmp_path / "rows" / "a.parquet", index=False)
    frame.iloc[5000:].to_parquet(tmp_path / "rows" / "b.parquet", index=False)
    result = CliRunner().invoke(
        main,
        [
            "explain",
            "--cluster",
            "local-cuda",
            "--model",
            str(model),
            "--data",
            str(tmp_path / "rows" / "*.parquet"),
            "--output",
            str(tmp_path / "shap"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "on the workers' GPUs" in result.stderr
    parts = sorted((tmp_path / "shap").glob("part.*.parquet"))
    got = pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
    expected = dg.TreeExplainer(str(model), device="cuda").shap_frame(frame)
    np.testing.assert_array_equal(got.to_numpy(), expected.to_numpy())


@pytest.mark.mgpu
def test_two_gpus_train_the_cpu_engines_model_through_nccl():
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    X, y = _data()
    with (
        LocalCUDACluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        model = _train_on(client, X, y, on_device=True, communicator="nccl")
    assert_same_trees(model, _cpu_model(X, y), names=("2 GPUs, NCCL", "cpu"))


# -- dask_cudf (an optional extra: the only skip allowed besides the GPU count) ------------------
@pytest.fixture(scope="module")
def cudf_client():
    pytest.importorskip("dask_cudf")
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    with (
        LocalCUDACluster(n_workers=1, threads_per_worker=2, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        yield client


def _cudf_frames(X, y, npartitions=3):
    """(dask_cudf features with nulls for NaN, dask_cudf labels, the pandas features)."""
    import cudf
    import dask_cudf
    import pandas as pd

    host = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    frame = cudf.from_pandas(host)  # NaN in a float column becomes null with nan_as_null
    assert frame.isna().sum().sum() == int(np.isnan(X).sum())
    return (
        dask_cudf.from_cudf(frame, npartitions=npartitions),
        dask_cudf.from_cudf(cudf.Series(y), npartitions=npartitions),
        host,
    )


def test_a_dask_cudf_frame_with_nulls_trains_the_cpu_engines_model(cudf_client):
    import dgboost.dask as dxgb

    X, y = _data()
    dX, dy, _ = _cudf_frames(X, y)
    dtrain = dxgb.DaskDMatrix(cudf_client, dX, dy)
    model = dxgb.train(cudf_client, {**PARAMS, "device": "cuda"}, dtrain, 6)["booster"]
    reference = _cpu_model(X, y, feature_names=[str(c) for c in dX.columns])  # the frame names its columns
    assert_same_trees(model, reference, names=("dask_cudf", "cpu numpy with NaN"))


def test_predictions_of_a_dask_cudf_frame_are_cudf_series_equal_to_numpys(cudf_client):
    import dgboost.dask as dxgb

    X, y = _data()
    booster = _cpu_model(X, y)
    dX, _, _ = _cudf_frames(X, y)
    out = dxgb.predict(cudf_client, booster, dX)
    assert type(out._meta).__module__.split(".")[0] == "cudf"
    got = out.compute()
    assert type(got).__module__.split(".")[0] == "cudf"
    np.testing.assert_array_equal(got.to_numpy(), booster.predict(dg.DMatrix(X)))


def test_shap_values_of_a_dask_cudf_frame_are_cudf_frames_with_the_cpus_values(cudf_client):
    import dgboost.dask as dxgb

    X, y = _data()
    booster = _cpu_model(X, y)
    dX, _, host = _cudf_frames(X, y)
    out = dxgb.shap_values(cudf_client, booster, dX)
    got = out.compute()
    assert type(got).__module__.split(".")[0] == "cudf"  # explained on the worker's GPU, kept there
    expected = dg.TreeExplainer(booster).shap_frame(host)
    assert list(got.columns) == list(expected.columns)
    np.testing.assert_array_equal(got.to_pandas().to_numpy(), expected.to_numpy())


def test_a_users_own_map_partitions_of_shap_frame_on_dask_cudf_gives_cudf_partitions(cudf_client):
    import cudf

    import dgboost.dask as dxgb

    X, y = _data()
    booster = _cpu_model(X, y)
    dX, _, host = _cudf_frames(X, y)
    explainer = dg.TreeExplainer(booster, device="cuda")
    meta = cudf.from_pandas(dxgb.shap_frame_meta(explainer, dX.columns))
    got = dX.map_partitions(explainer.shap_frame, meta=meta).compute()
    assert type(got).__module__.split(".")[0] == "cudf"
    np.testing.assert_array_equal(got.to_pandas().to_numpy(), dg.TreeExplainer(booster).shap_frame(host).to_numpy())
