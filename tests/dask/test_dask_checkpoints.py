"""dgboost.dask.train resumes after a lost worker, on the workers that remain, with the same model."""

from __future__ import annotations

import time

import dask.array as da
import numpy as np
import pytest

import dgboost as dg
import dgboost.dask as dxgb
from dgboost.dask._waits import cluster_workers
from dgboost.testing.faults import KillProcessAtRound, RecordRounds

pytestmark = pytest.mark.dask

CHUNKS = (200, 350, 0, 250, 300)
N = sum(CHUNKS)
PARAMS = {
    "objective": "binary:logistic",
    "max_depth": 3,
    "max_bin": 16,
    "subsample": 0.8,
    "colsample_bynode": 0.8,
    "seed": 11,
}


@pytest.fixture
def three_workers():
    """A cluster of its own: a worker is killed, and the shared clusters must keep theirs."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=":0")
    client = Client(cluster)
    client.wait_for_workers(3, timeout=60)
    yield cluster, client
    client.close()
    cluster.close()


def _data():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(N, 5)).astype(np.float32)
    y = (x[:, 0] + np.sin(2 * x[:, 1]) + rng.normal(scale=0.5, size=N) > 0).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    return x, y


def _model_file(booster, path) -> bytes:
    booster.save_model(str(path))
    return path.read_bytes()


def _rounds_run(path) -> list[int]:
    return sorted({int(line) for line in path.read_text().split()})


def test_a_worker_killed_at_round_30_of_60_is_survived_by_a_retry_with_the_uninterrupted_model(three_workers, tmp_path):
    _, client = three_workers
    x, y = _data()
    dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(CHUNKS, 5)), da.from_array(y, chunks=(CHUNKS,)))
    rounds = tmp_path / "rounds"
    with pytest.warns(RuntimeWarning, match="retry 1 of 1 on [23] workers"):
        out = dxgb.train(
            client,
            PARAMS,
            dtrain,
            60,
            checkpoint_dir=tmp_path / "ckpt",
            checkpoint_every=10,
            retries=1,
            timeout=30,
            verbose_eval=False,
            callbacks=[KillProcessAtRound(30, str(tmp_path / "killed")), RecordRounds(str(rounds))],
        )
    assert (tmp_path / "killed").exists()
    assert _rounds_run(rounds) == list(range(60))
    full = dg.train(PARAMS, dg.DMatrix(x, y), 60, verbose_eval=False)
    assert _model_file(out["booster"], tmp_path / "resumed.json") == _model_file(full, tmp_path / "full.json")


def test_after_a_worker_is_lost_train_with_resume_continues_on_two_workers_with_the_uninterrupted_model(
    three_workers, tmp_path
):
    cluster, client = three_workers
    x, y = _data()
    dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(CHUNKS, 5)), da.from_array(y, chunks=(CHUNKS,)))
    ckpt = tmp_path / "ckpt"
    with pytest.raises(dg.DGBoostError):
        dxgb.train(
            client,
            PARAMS,
            dtrain,
            60,
            checkpoint_dir=ckpt,
            checkpoint_every=10,
            timeout=30,
            verbose_eval=False,
            callbacks=[KillProcessAtRound(30, str(tmp_path / "killed"))],
        )
    # the nanny restarts the killed worker process: take it away, as a machine that is gone
    cluster.scale(2)
    client.wait_for_workers(2, timeout=60)
    _wait_for_the_cluster_spec(cluster, client)
    rounds = tmp_path / "rounds"
    out = dxgb.train(
        client,
        PARAMS,
        dtrain,
        60,
        checkpoint_dir=ckpt,
        checkpoint_every=10,
        resume=True,
        timeout=30,
        verbose_eval=False,
        callbacks=[RecordRounds(str(rounds))],
    )
    assert _rounds_run(rounds) == list(range(30, 60))  # from the checkpoint of round 30
    full = dg.train(PARAMS, dg.DMatrix(x, y), 60, verbose_eval=False)
    assert _model_file(out["booster"], tmp_path / "resumed.json") == _model_file(full, tmp_path / "full.json")


def _wait_for_the_cluster_spec(cluster, client, timeout: float = 60.0) -> None:
    """Wait until the retired workers' nannies are closed and the scheduler's workers are exactly
    the cluster's specified ones. Scaling down retires the killed worker's name while its nanny
    may be starting it again: the new process registers and is closed only once the nanny
    closes, and a job placed in between loses a rank (seen in full runs on 2 cores)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        names = {w["name"] for w in cluster_workers(client).values()}
        if set(cluster.workers) == set(cluster.worker_spec) and names == set(cluster.worker_spec):
            return
        assert time.monotonic() < deadline, (
            f"the cluster's workers {names} (nannies {set(cluster.workers)}) "
            f"are not its spec {set(cluster.worker_spec)}"
        )
        time.sleep(0.2)


def test_retries_need_a_checkpoint_dir(three_workers):
    _, client = three_workers
    x, y = _data()
    dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(CHUNKS, 5)), da.from_array(y, chunks=(CHUNKS,)))
    with pytest.raises(dg.DGBoostValueError, match="retries needs checkpoint_dir"):
        dxgb.train(client, PARAMS, dtrain, 2, retries=1)


def test_a_worker_still_running_a_rank_of_an_earlier_job_is_restarted_and_the_next_job_trains(tmp_path):
    from distributed import Client, LocalCluster

    from dgboost.dask.training import _RANK_KEY, _ranks_still_running

    x, y = _data()
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        client.wait_for_workers(2, timeout=60)
        stuck = sorted(cluster_workers(client))[0]
        # a rank whose collective outlived its own timeout: cancelled, its thread still busy
        zombie = client.submit(time.sleep, 600, key=f"{_RANK_KEY}0-earlier-job", workers=[stuck], pure=False)
        # running on the worker, not only sent there: a check of the next job would otherwise
        # find no rank running yet and then queue behind it (seen once on a loaded machine)
        deadline = time.monotonic() + 30
        while not client.run(_ranks_still_running, workers=[stuck]).get(stuck) and time.monotonic() < deadline:
            time.sleep(0.05)
        client.cancel(zombie, force=True)
        dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(CHUNKS, 5)), da.from_array(y, chunks=(CHUNKS,)))
        start = time.monotonic()
        with pytest.warns(RuntimeWarning, match="still run a rank of an earlier job .* restarting them"):
            out = dxgb.train(client, PARAMS, dtrain, 5, timeout=2, verbose_eval=False)
        assert time.monotonic() - start < 60
        assert stuck not in cluster_workers(client)  # restarted: a new address
    full = dg.train(PARAMS, dg.DMatrix(x, y), 5, verbose_eval=False)
    assert _model_file(out["booster"], tmp_path / "after.json") == _model_file(full, tmp_path / "full.json")
