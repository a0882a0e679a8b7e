"""dgboost.dask on several GPUs of one host (dask-cuda workers, NCCL between them).

The model of a job does not depend on how many GPUs train it: the JSON of 1, 2 and 4 GPUs is
byte for byte that of single-process training on the concatenated rows on one GPU, whose
trees are the CPU engine's (``tests/gpu/test_cuda_training.py`` holds that relation on its
own). Distributed SHAP equals single-GPU SHAP bit for bit. A GPU worker killed mid-training
ends ``train`` with a clear error well within a minute. Each test skips where the machine
has fewer GPUs than it asks for.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import dgboost as dg
from dgboost.dask._waits import cluster_workers
from dgboost.datasets import make_synthetic
from dgboost.testing import assert_same_trees
from dgboost.testing.checks import normalised_model_json
from dgboost.testing.faults import KillProcessAtRound

pytestmark = [pytest.mark.dask]  # gpu / mgpu per test: the 1-GPU cases run on any GPU machine
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

# uneven partitions, one of them empty: with several GPUs the ranks hold unequal row counts
CHUNKS = (3000, 0, 4000, 1000, 2500, 500, 0, 1500)
CASES = {
    "depthwise with row and column sampling, missing values and weights": {
        "objective": "binary:logistic",
        "max_depth": 6,
        "max_bin": 64,
        "subsample": 0.8,
        "colsample_bytree": 0.9,
        "colsample_bynode": 0.7,
        "seed": 4,
    },
    "lossguide": {
        "objective": "binary:logistic",
        "grow_policy": "lossguide",
        "max_depth": 0,
        "max_leaves": 24,
        "max_bin": 64,
    },
}
ROUNDS = 6


def _gpu_count() -> int:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no CUDA at all
        return 0


def _needs(n_gpus: int):
    return pytest.mark.skipif(_gpu_count() < n_gpus, reason=f"needs {n_gpus} GPUs")


def _data():
    X, y, _ = make_synthetic(sum(CHUNKS), 16, task="binary", missing_rate=0.1, seed=7)
    w = np.random.default_rng(7).uniform(0.5, 2.0, len(y)).astype(np.float32)
    return X.astype(np.float32), y.astype(np.float32), w


def _dask_arrays(X, y, w, chunks=CHUNKS):
    import cupy
    import dask.array as da

    dX = da.from_array(X, chunks=(chunks, X.shape[1])).map_blocks(cupy.asarray, dtype=np.float32)
    return dX, da.from_array(y, chunks=(chunks,)), da.from_array(w, chunks=(chunks,))


@pytest.fixture(scope="module")
def cuda_client():
    """``cuda_client(n)``: a Client on a LocalCUDACluster of ``n`` GPUs (one cluster open at a time)."""
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    open_: dict = {}

    def get(n_gpus: int):
        if n_gpus not in open_:
            for cluster, client in open_.values():
                client.close()
                cluster.close()
            open_.clear()
            cluster = LocalCUDACluster(n_workers=n_gpus, threads_per_worker=1, dashboard_address=":0")
            open_[n_gpus] = (cluster, Client(cluster))
        cluster, client = open_[n_gpus]
        client.wait_for_workers(n_gpus, timeout=120)
        return client

    yield get
    for cluster, client in open_.values():
        client.close()
        cluster.close()


_SINGLE: dict = {}


def _single_gpu_model(case: str):
    """Single-process training on the concatenated rows, on one GPU (cached per case)."""
    if case not in _SINGLE:
        X, y, w = _data()
        _SINGLE[case] = dg.train({**CASES[case], "device": "cuda"}, dg.DMatrix(X, y, weight=w), ROUNDS)
    return _SINGLE[case]


# cases inside GPU counts: one cluster start per count (the fixture keeps one cluster open)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize(
    "n_gpus",
    [
        pytest.param(1, marks=pytest.mark.gpu),
        pytest.param(2, marks=pytest.mark.mgpu),
        pytest.param(4, marks=pytest.mark.mgpu),
    ],
)
def test_n_gpus_through_nccl_give_the_single_process_model_byte_for_byte(cuda_client, n_gpus, case):
    if _gpu_count() < n_gpus:
        pytest.skip(f"needs {n_gpus} GPUs")
    import dgboost.dask as dxgb

    X, y, w = _data()
    client = cuda_client(n_gpus)
    dX, dy, dw = _dask_arrays(X, y, w)
    dtrain = dxgb.DaskDMatrix(client, dX, dy, weight=dw)
    got = dxgb.train(client, {**CASES[case], "device": "cuda"}, dtrain, ROUNDS, communicator="nccl")["booster"]
    single = _single_gpu_model(case)
    assert got.to_json() == single.to_json()
    cpu = dg.train({**CASES[case], "device": "cpu"}, dg.DMatrix(X, y, weight=w), ROUNDS)
    assert_same_trees(got, cpu, names=(f"{n_gpus} GPUs", "cpu"))


@pytest.mark.mgpu
@_needs(2)
@pytest.mark.parametrize("case", list(CASES))
def test_n_gpus_give_the_single_process_cpu_models_json_byte_for_byte(cuda_client, case):
    """Issue 10's identity line taken literally: not only the CPU model's trees (splits and
    leaf values to 1e-6, as above) but its saved JSON. Leaf values come from the same host
    kernel on the same integer sums on both devices, so nothing should differ."""
    import dgboost.dask as dxgb

    X, y, w = _data()
    n_gpus = min(_gpu_count(), 4)
    client = cuda_client(n_gpus)
    dX, dy, dw = _dask_arrays(X, y, w)
    got = dxgb.train(
        client,
        {**CASES[case], "device": "cuda"},
        dxgb.DaskDMatrix(client, dX, dy, weight=dw),
        ROUNDS,
        communicator="nccl",
    )["booster"]
    cpu = dg.train({**CASES[case], "device": "cpu"}, dg.DMatrix(X, y, weight=w), ROUNDS)
    # the device (and nthread) are run-only parameters the model records: every other byte,
    # leaf values unrounded
    assert normalised_model_json(got, keys=()) == normalised_model_json(cpu, keys=())


@pytest.mark.mgpu
@_needs(2)
@pytest.mark.parametrize("case", list(CASES))
def test_collectives_waited_for_on_the_host_give_the_same_model_byte_for_byte(cuda_client, case, monkeypatch):
    import dgboost.dask as dxgb

    monkeypatch.setenv("DGBOOST_NCCL_STREAM_ORDERED", "0")
    X, y, w = _data()
    client = cuda_client(min(_gpu_count(), 4))
    dtrain = dxgb.DaskDMatrix(client, *_dask_arrays(X, y, w)[:2], weight=_dask_arrays(X, y, w)[2])
    got = dxgb.train(client, {**CASES[case], "device": "cuda"}, dtrain, ROUNDS, communicator="nccl")["booster"]
    assert got.to_json() == _single_gpu_model(case).to_json()


@pytest.mark.mgpu
@_needs(2)
def test_a_second_job_on_the_same_gpus_reuses_the_nccl_communicator_and_trains_the_same_model(cuda_client):
    import dgboost.dask as dxgb
    from dgboost.dask._nccl_pool import kept_state

    X, y, w = _data()
    client = cuda_client(min(_gpu_count(), 4))
    dX, dy, dw = _dask_arrays(X, y, w)
    dtrain = dxgb.DaskDMatrix(client, dX, dy, weight=dw)
    case = list(CASES)[0]
    params = {**CASES[case], "device": "cuda"}
    first = dxgb.train(client, params, dtrain, ROUNDS, communicator="nccl")["booster"]
    kept = client.run(kept_state)
    assert len({k.token for k in kept.values()}) == 1  # every rank kept the job's communicator
    second = dxgb.train(client, params, dtrain, ROUNDS, communicator="nccl")["booster"]
    assert client.run(kept_state) == kept  # reused, and kept again
    assert first.to_json() == second.to_json() == _single_gpu_model(case).to_json()


@pytest.mark.mgpu
@_needs(2)
def test_gpus_that_hold_no_rows_still_take_part_and_the_model_is_unchanged(cuda_client):
    import dask.array as da

    import dgboost.dask as dxgb

    X, y, w = _data()
    client = cuda_client(min(_gpu_count(), 4))
    # one partition: only one rank has rows, the others allreduce zeros
    dX = da.from_array(X, chunks=(len(X), X.shape[1]))
    dtrain = dxgb.DaskDMatrix(client, dX, da.from_array(y, chunks=(len(y),)), weight=da.from_array(w, chunks=(len(w),)))
    case = list(CASES)[0]
    got = dxgb.train(client, {**CASES[case], "device": "cuda"}, dtrain, ROUNDS, communicator="nccl")["booster"]
    assert got.to_json() == _single_gpu_model(case).to_json()


@pytest.mark.mgpu
@_needs(2)
@pytest.mark.parametrize("interactions", [False, True], ids=["values", "interactions"])
def test_distributed_shap_on_every_gpu_equals_single_gpu_shap_bit_for_bit(cuda_client, interactions):
    import cupy

    import dgboost.dask as dxgb

    X, y, w = _data()
    booster = _single_gpu_model(list(CASES)[0])
    client = cuda_client(min(_gpu_count(), 4))
    rows = X[:3000] if interactions else X
    chunks = (1000, 0, 1500, 500) if interactions else CHUNKS
    dX = _dask_arrays(rows, y[: len(rows)], w[: len(rows)], chunks)[0]
    got = dxgb.shap_values(client, booster, dX, interactions=interactions).compute()
    explainer = dg.TreeExplainer(booster, device="cuda")
    want = explainer.shap_interaction_values(rows) if interactions else explainer.shap_values(rows)
    assert isinstance(got, cupy.ndarray)  # CuPy partitions in, CuPy blocks out
    got, want = cupy.asnumpy(got), cupy.asnumpy(want)
    assert got.shape == want.shape
    assert got.tobytes() == want.tobytes()


@pytest.mark.mgpu
@_needs(2)
@pytest.mark.parametrize("stream_ordered", ["0", "1"], ids=["host-waited", "stream-ordered"])
def test_a_gpu_worker_killed_mid_training_ends_train_with_a_clear_error_within_60_seconds(
    tmp_path, stream_ordered, monkeypatch
):
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    import dgboost.dask as dxgb

    monkeypatch.setenv("DGBOOST_NCCL_STREAM_ORDERED", stream_ordered)
    X, y, w = _data()
    n_gpus = min(_gpu_count(), 4)
    params = {**CASES[list(CASES)[0]], "device": "cuda"}
    with (
        LocalCUDACluster(n_workers=n_gpus, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        dtrain = dxgb.DaskDMatrix(client, *_dask_arrays(X, y, w)[:2])
        start = time.monotonic()
        with pytest.raises(dg.DGBoostError, match="rank|worker"):
            dxgb.train(
                client,
                params,
                dtrain,
                200,
                communicator="nccl",
                timeout=15,
                callbacks=[KillProcessAtRound(3, str(tmp_path / "killed"))],
            )
        assert time.monotonic() - start < 60
        assert (tmp_path / "killed").exists()
        # the surviving ranks were freed (their collectives timed out and the communicator was
        # aborted), so the same client trains again once the nanny has restarted the worker
        client.wait_for_workers(n_gpus, timeout=60)
        start = time.monotonic()
        again = dxgb.train(client, params, dtrain, ROUNDS, communicator="nccl", timeout=15)["booster"]
        assert again.num_boosted_rounds() == ROUNDS
        assert time.monotonic() - start < 90


@pytest.mark.mgpu
@_needs(2)
def test_after_a_gpu_worker_is_lost_training_resumes_on_the_other_gpus_to_the_uninterrupted_model(tmp_path):
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    import dgboost.dask as dxgb

    X, y, w = _data()
    n_gpus = min(_gpu_count(), 4)
    params = {**CASES[list(CASES)[0]], "device": "cuda"}
    ckpt = tmp_path / "ckpt"
    with (
        LocalCUDACluster(n_workers=n_gpus, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        dtrain = dxgb.DaskDMatrix(client, *_dask_arrays(X, y, w)[:2], weight=_dask_arrays(X, y, w)[2])
        with pytest.raises(dg.DGBoostError):
            dxgb.train(
                client,
                params,
                dtrain,
                30,
                communicator="nccl",
                timeout=15,
                checkpoint_dir=ckpt,
                checkpoint_every=5,
                callbacks=[KillProcessAtRound(15, str(tmp_path / "killed"))],
            )
        # the nanny restarts the killed worker: take one GPU away, as a machine that is gone
        cluster.scale(n_gpus - 1)
        deadline = time.monotonic() + 60
        while len(cluster_workers(client)) != n_gpus - 1:
            assert time.monotonic() < deadline, "the cluster did not shrink"
            time.sleep(0.2)
        out = dxgb.train(
            client,
            params,
            dtrain,
            30,
            communicator="auto",
            timeout=15,
            checkpoint_dir=ckpt,
            checkpoint_every=5,
            resume=True,
        )
    full = dg.train(params, dg.DMatrix(X, y, weight=w), 30)
    assert out["booster"].save_raw() == full.save_raw()
