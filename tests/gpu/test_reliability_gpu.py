"""Faults on GPUs (issue 33): single-process checkpoints on a GPU, a worker lost while SHAP
values and predictions are computed on GPU workers, and the chaos run on 2 GPUs.

- ``dg.train(..., device="cuda", checkpoint_dir=..., resume=True)``: a run interrupted at a round
  and resumed saves the model file of an uninterrupted GPU run, byte for byte, and the resumed
  run starts at the checkpoint's round on the checkpoint's model.
- ``dgboost.dask.predict`` / ``shap_values`` on dask-cuda workers, a worker killed in the middle
  of the computation: complete, bitwise equal to single-GPU values (Dask recomputes).
- ``benchmarks/chaos.py`` on 2 GPUs (slow): jobs with a GPU worker killed at a random round,
  each ending with the single-GPU model's bytes, no rank left running.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

import dgboost as dg
from dgboost.testing.faults import kill_once_in_block

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

SAMPLING = {
    "objective": "binary:logistic",
    "max_depth": 5,
    "max_bin": 64,
    "subsample": 0.8,
    "colsample_bytree": 0.8,
    "colsample_bynode": 0.7,
    "seed": 7,
    "device": "cuda",
}
MULTICLASS = {
    "objective": "multi:softprob",
    "num_class": 3,
    "max_depth": 4,
    "max_bin": 32,
    "colsample_bylevel": 0.8,
    "subsample": 0.9,
    "seed": 2,
    "device": "cuda",
}


class _Interrupt(Exception):
    pass


class _InterruptAtRound(dg.TrainingCallback):
    def __init__(self, round_index: int):
        self.round_index = round_index

    def before_iteration(self, model, epoch, evals_log):
        if epoch == self.round_index:
            raise _Interrupt(f"interrupted at round {epoch}")
        return False


class _RecordRounds(dg.TrainingCallback):
    """(epoch, rounds the model already holds) of every round a run trains."""

    def __init__(self):
        self.rounds: list[tuple[int, int]] = []

    def before_iteration(self, model, epoch, evals_log):
        self.rounds.append((epoch, model.num_boosted_rounds()))
        return False


def _data(n=5_000, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    signal = x[:, 0] + np.sin(2 * x[:, 1]) + rng.normal(scale=0.8, size=n)
    x[rng.random(x.shape) < 0.1] = np.nan
    if classes == 2:
        return x, (signal > 0).astype(np.float32)
    return x, np.digitize(signal, np.quantile(signal, [1 / 3, 2 / 3])).astype(np.float32)


def _model_bytes(booster, path: Path) -> bytes:
    booster.save_model(str(path))
    return path.read_bytes()


@pytest.mark.gpu
@pytest.mark.parametrize("params,classes", [(SAMPLING, 2), (MULTICLASS, 3)], ids=["sampling", "multiclass"])
def test_a_gpu_run_interrupted_at_round_30_and_resumed_saves_the_uninterrupted_gpu_model_file(
    tmp_path, params, classes
):
    x, y = _data(classes=classes)
    dtrain = dg.DMatrix(x, y)
    full = dg.train(params, dtrain, 60, verbose_eval=False)
    ckpt = tmp_path / "ckpt"
    with pytest.raises(_Interrupt):
        dg.train(
            params,
            dtrain,
            60,
            checkpoint_dir=ckpt,
            checkpoint_every=10,
            callbacks=[_InterruptAtRound(35)],
            verbose_eval=False,
        )
    record = _RecordRounds()
    resumed = dg.train(
        params, dtrain, 60, checkpoint_dir=ckpt, checkpoint_every=10, resume=True, callbacks=[record], verbose_eval=0
    )
    assert record.rounds[0] == (30, 30)  # from the checkpoint of round 30, on its 30 rounds
    assert [epoch for epoch, _ in record.rounds] == list(range(30, 60))
    assert _model_bytes(resumed, tmp_path / "resumed.json") == _model_bytes(full, tmp_path / "full.json")


@pytest.fixture(scope="module")
def cuda_cluster():
    """A Client on a LocalCUDACluster of up to 2 GPUs (of its own: workers are killed)."""
    import cupy
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    n = min(int(cupy.cuda.runtime.getDeviceCount()), 2)
    cluster = LocalCUDACluster(n_workers=n, threads_per_worker=1, dashboard_address=":0")
    client = Client(cluster, set_as_default=False)
    client.wait_for_workers(n, timeout=120)
    yield client
    client.close()
    cluster.close()


def _gpu_rows_killing_a_worker(x: np.ndarray, flag: Path):
    """``x`` as CuPy row blocks; the first computation of block 2 kills its worker."""
    import cupy
    import dask.array as da

    blocks = da.from_array(x, chunks=(1_000, x.shape[1])).map_blocks(kill_once_in_block, str(flag), 2, dtype=x.dtype)
    return blocks.map_blocks(cupy.asarray, dtype=x.dtype)


@pytest.mark.gpu
@pytest.mark.dask
@pytest.mark.parametrize("what", ["predict", "shap", "interactions"])
def test_values_on_gpu_workers_that_lose_a_worker_mid_computation_are_bitwise_the_single_gpu_ones(
    cuda_cluster, tmp_path, what
):
    import cupy

    import dgboost.dask as dxgb

    x, y = _data(n=6_000)
    booster = dg.train(SAMPLING, dg.DMatrix(x, y), 20, verbose_eval=False)
    rows = x if what != "interactions" else x[:3_000]
    flag = tmp_path / "killed"
    dx = _gpu_rows_killing_a_worker(rows, flag)
    if what == "predict":
        got = dxgb.predict(cuda_cluster, booster, dx).compute(scheduler=cuda_cluster)
        want = booster.predict(dg.DMatrix(cupy.asarray(rows)))
    else:
        interactions = what == "interactions"
        got = dxgb.shap_values(cuda_cluster, booster, dx, interactions=interactions).compute(scheduler=cuda_cluster)
        explainer = dg.TreeExplainer(booster, device="cuda")
        want = explainer.shap_interaction_values(rows) if interactions else explainer.shap_values(rows)
    assert flag.exists()  # a worker was lost during the computation
    got, want = cupy.asnumpy(got), cupy.asnumpy(want)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()


@pytest.mark.mgpu
@pytest.mark.dask
@pytest.mark.slow
def test_chaos_on_2_gpus_every_job_ends_with_the_single_gpu_models_bytes():
    """5 jobs on 2 GPU workers (the last with both killed in turn), retries and checkpoints."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "chaos.py"
    spec = importlib.util.spec_from_file_location("chaos_benchmark", path)
    chaos = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(chaos)
    result = chaos.run(jobs=5, seed=11, device="cuda", n_workers=2, timeout=30.0, job_timeout=180.0, log=print)
    for job in result["jobs"]:
        assert job["outcome"] == "pass", job
        assert job["model_bytes_equal"] and not job["stuck_ranks_after"] and job["one_line_per_lost_worker"]
