"""A Dask job is quiet by default: no XGBoost tracker lines, the Numba compile notice once per
job on the client (not once per worker), and ranks with their worker's threads."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import dask.array as da
import numpy as np
import pytest

import dgboost as dg
import dgboost.dask as dxgb

pytestmark = pytest.mark.dask

NOTICE = "compiling the CPU kernels with Numba"
TRACKER_LINE = "got rank"

# one process for the client and the scheduler, worker processes started by it: they write
# to the same stderr, which the test captures whole (XGBoost's lines come from C++, on the
# workers' stderr, where client.get_worker_logs() does not see them)
_SCRIPT = textwrap.dedent(
    """
    import sys
    import dask.array as da
    import numpy as np
    from distributed import Client, LocalCluster
    import dgboost as dg
    import dgboost.dask as dxgb

    def job(client, dtrain, **config):
        with dg.config_context(**config):
            dxgb.train(client, {"objective": "binary:logistic", "max_depth": 3}, dtrain, 2)
        print("=== end of job", config, file=sys.stderr, flush=True)

    if __name__ == "__main__":
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
            with Client(cluster) as client:
                x = np.random.default_rng(0).normal(size=(2000, 5)).astype(np.float32)
                y = (x[:, 0] > 0).astype(np.float32)
                dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(500, 5)), da.from_array(y, chunks=500))
                job(client, dtrain)
                job(client, dtrain, verbosity=2)
                job(client, dtrain, verbosity=3)
                job(client, dtrain, verbosity=0)
    """
)


@pytest.fixture(scope="module")
def job_output(tmp_path_factory):
    """stderr of four jobs on two fresh workers with an empty Numba cache (so the first job
    compiles on both), split per job: default, verbosity 2, 3, 0."""
    folder = tmp_path_factory.mktemp("quiet")
    script = folder / "jobs.py"
    script.write_text(_SCRIPT)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(folder / "numba-cache")}
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600, cwd=folder
    )
    assert done.returncode == 0, done.stderr[-3000:]
    parts = done.stderr.split("=== end of job")
    assert len(parts) == 5, done.stderr[-3000:]
    return [parts[0], *(p.split("\n", 1)[1] if "\n" in p else "" for p in parts[1:4])], done.stdout


def test_a_default_job_prints_no_tracker_line(job_output):
    (default, *_), stdout = job_output
    assert TRACKER_LINE not in default and TRACKER_LINE not in stdout


def test_verbosity_2_and_3_show_every_ranks_tracker_line(job_output):
    (_, info, debug, _), _ = job_output
    for text in (info, debug):
        assert "Task 00000000 got rank 0" in text and "Task 00000001 got rank 1" in text, text


def test_verbosity_0_prints_nothing_at_all(job_output):
    (*_, silent), _ = job_output
    assert TRACKER_LINE not in silent
    assert NOTICE not in silent


def test_the_compile_notice_is_said_once_for_a_job_whose_two_workers_compile(job_output):
    (default, info, debug, _), _ = job_output
    assert default.count(NOTICE) == 1, default
    # the next jobs run on workers that have their kernels: nothing to announce
    assert NOTICE not in info + debug


def test_a_worker_with_one_thread_trains_with_one_numba_thread_and_the_single_process_model(dask_client):
    client = dask_client(2)  # worker processes of one thread each
    assert set(client.nthreads().values()) == {1}
    rng = np.random.default_rng(3)
    x = rng.normal(size=(30_000, 5)).astype(np.float32)
    y = (x[:, 0] - x[:, 1] > 0).astype(np.float32)
    params = {"objective": "binary:logistic", "max_depth": 4}
    dtrain = dxgb.DaskDMatrix(client, da.from_array(x, chunks=(15_000, 5)), da.from_array(y, chunks=15_000))
    out = dxgb.train(client, params, dtrain, 3, profile=True)
    assert [r["numba_threads"] for r in out["profile"]["ranks"]] == [1, 1]
    single = dg.train(params, dg.DMatrix(x, y), 3)  # this process's default: all of its cores
    assert out["booster"].to_json() == single.to_json()


def test_prediction_and_explanation_tasks_use_their_workers_threads_not_every_core():
    """A task inside ``dask_worker_threads`` on a one-thread worker runs Numba on one thread
    and resolves ``nthread=0`` to 1; on a two-thread worker to 2; outside a worker nothing is
    changed. ``dgboost.dask.predict`` / ``shap_values`` run their blocks inside it."""
    import numba
    from distributed import Client, LocalCluster

    from dgboost.backend._threads import dask_worker_threads, resolve_threads

    def seen() -> tuple[int, int]:
        with dask_worker_threads():
            return numba.get_num_threads(), resolve_threads(0, numba.config.NUMBA_NUM_THREADS)

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.fail("Numba's pool has fewer than 2 threads: the test cannot tell 1 from 2")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            assert client.submit(seen, pure=False).result(timeout=60) == (1, 1)
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            assert client.submit(seen, pure=False).result(timeout=60) == (2, 2)
    before = numba.get_num_threads()
    with dask_worker_threads():
        assert numba.get_num_threads() == before
