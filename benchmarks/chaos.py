"""Chaos: training jobs on a Dask cluster, each with a worker killed at a random round.

    python benchmarks/chaos.py --jobs 20                                    # 3 CPU workers
    python benchmarks/chaos.py --device cuda --workers 2 --jobs 5 --out $OUT/chaos_gpu.json

Every job is ``dgboost.dask.train`` with ``retries`` and checkpoints; one rank's process is
killed (SIGKILL, as a crashed or preempted worker: :class:`dgboost.testing.faults.KillProcessAtRound`)
when it starts a round drawn at random, and the nanny starts the worker again (where it does
not within a minute, a new cluster is started and ``cluster_restarts`` says so). The last job
kills two workers in turn (at two rounds, the second after the first retry). A job passes when

- it ends with the bytes of the uninterrupted single-process model (``dgboost.train`` on the
  same rows, same device),
- within ``--job-timeout`` seconds,
- and no worker still runs a rank once it has ended (checked with ``client.run``, bounded),
- and the lost worker is reported on the client in one line (the retry's ``RuntimeWarning``).

Writes JSON (seeds, kill rounds, times, outcome, the client's warning lines per job) to
``--out`` (default ``benchmarks/results/chaos_<device>.json``). ``--device cuda`` runs on a
``dask_cuda.LocalCUDACluster`` (one GPU per worker; NCCL between them); set
``NCCL_NVLS_ENABLE=0`` on shared hosts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import versions, write_result  # noqa: E402

ROWS_PER_WORKER_PARTITION = (300, 450, 250, 400, 350, 500)
ROUNDS = 40
CHECKPOINT_EVERY = 5
# seconds a nanny may take to start a killed worker again before the cluster is started anew
# (seen once on a loaded 2-core machine: "Restarting worker", and no worker came back)
WORKER_RESTART_S = 60.0


def params_for(seed: int, device: str) -> dict:
    return {
        "objective": "binary:logistic",
        "max_depth": 4,
        "max_bin": 32,
        "subsample": 0.8,
        "colsample_bynode": 0.8,
        "seed": seed,
        "device": device,
    }


def data_for(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = sum(ROWS_PER_WORKER_PARTITION)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = (x[:, 0] + np.sin(2 * x[:, 1]) + rng.normal(scale=0.5, size=n) > 0).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    return x, y


def _ranks_running(dask_worker=None) -> int:
    """Rank tasks (of any job) still running on a worker (cancelled ones included)."""
    from dgboost.dask.training import _RANK_KEY

    running = dask_worker.state.executing | dask_worker.state.long_running
    return sum(str(ts.key).startswith(_RANK_KEY) for ts in running)


def stuck_ranks(client, within: float) -> dict:
    """Workers that still run a rank ``within`` seconds after a job ended (empty: none)."""
    from dgboost.dask._waits import bounded_call

    deadline = time.monotonic() + within
    while True:
        busy = {w: n for w, n in bounded_call(client.run, _ranks_running, what="ranks", timeout=30).items() if n}
        if not busy or time.monotonic() > deadline:
            return busy
        time.sleep(0.2)


def one_job(client, job: int, seed: int, kills: list[int], device: str, n_workers: int, timeout: float) -> dict:
    """Train job ``job`` with a rank killed at each round of ``kills`` (in turn); the outcome."""
    import dask.array as da

    import dgboost as dg
    import dgboost.dask as dxgb
    from dgboost.testing.faults import KillProcessAtRound

    x, y = data_for(seed)
    params = params_for(seed, device)
    chunks = tuple(ROWS_PER_WORKER_PARTITION)
    with tempfile.TemporaryDirectory(prefix="dgboost-chaos-") as tmp:
        tmp = Path(tmp)
        callbacks = [KillProcessAtRound(r, str(tmp / f"killed-{i}")) for i, r in enumerate(kills)]
        X, Y = da.from_array(x, chunks=(chunks, x.shape[1])), da.from_array(y, chunks=chunks)
        dtrain = dxgb.DaskDMatrix(client, X, Y)
        start = time.perf_counter()
        outcome, error = "pass", None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = dxgb.train(
                    client,
                    params,
                    dtrain,
                    ROUNDS,
                    checkpoint_dir=tmp / "ckpt",
                    checkpoint_every=CHECKPOINT_EVERY,
                    retries=len(kills) + 1,
                    timeout=timeout,
                    verbose_eval=False,
                    callbacks=callbacks,
                )
            except Exception as exc:  # noqa: BLE001 - recorded as the job's outcome
                outcome, error, out = "error", f"{type(exc).__name__}: {exc}", None
        seconds = time.perf_counter() - start
        killed = [(tmp / f"killed-{i}").exists() for i in range(len(kills))]
        got = out["booster"].save_raw("json") if out else None
    want = dg.train(params, dg.DMatrix(x, y), ROUNDS, verbose_eval=False).save_raw("json")
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    retry_lines = [m for m in messages if "retry" in m]
    stuck = stuck_ranks(client, within=2 * timeout)
    if outcome == "pass" and got != want:
        outcome = "different model"
    if outcome == "pass" and not all(killed):
        outcome = "a kill did not happen"
    if outcome == "pass" and stuck:
        outcome = "stuck rank"
    return {
        "job": job,
        "seed": seed,
        "kill_rounds": kills,
        "killed": killed,
        "seconds": round(seconds, 3),
        "outcome": outcome,
        "error": error,
        "model_bytes_equal": got == want,
        "retry_warnings": retry_lines,
        "one_line_per_lost_worker": all("\n" not in line for line in retry_lines) and len(retry_lines) == len(kills),
        "stuck_ranks_after": stuck,
    }


def warm_up(client, device: str) -> float:
    """One job without a kill, not counted: the workers compile (or load) the kernels first."""
    import dask.array as da

    import dgboost.dask as dxgb

    x, y = data_for(0)
    chunks = tuple(ROWS_PER_WORKER_PARTITION)
    X, Y = da.from_array(x, chunks=(chunks, x.shape[1])), da.from_array(y, chunks=chunks)
    start = time.perf_counter()
    dxgb.train(client, params_for(0, device), dxgb.DaskDMatrix(client, X, Y), ROUNDS, verbose_eval=False)
    return time.perf_counter() - start


def start_cluster(device: str, n_workers: int):
    from distributed import Client

    if device.startswith("cuda"):
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(n_workers=n_workers, threads_per_worker=1, dashboard_address=":0")
    else:
        from distributed import LocalCluster

        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0")
    client = Client(cluster)
    client.wait_for_workers(n_workers, timeout=120)
    return cluster, client


def run(jobs: int, seed: int, device: str, n_workers: int, timeout: float, job_timeout: float, log=print) -> dict:
    """``jobs`` jobs, the last with two workers killed in turn (when ``jobs`` > 1). Returns the
    result (``jobs``: one dict per job; ``passed``: how many passed within ``job_timeout``)."""
    rng = np.random.default_rng(seed)
    cluster, client = start_cluster(device, n_workers)
    results, cluster_restarts = [], []
    try:
        warmup_s = warm_up(client, device)
        log(f"warm-up job (no kill, not counted): {warmup_s:.1f} s")
        for job in range(jobs):
            try:  # the nannies start the killed workers again
                client.wait_for_workers(n_workers, timeout=WORKER_RESTART_S)
            except Exception as exc:  # noqa: BLE001 - distributed's nanny did not: a new cluster
                cluster_restarts.append({"before_job": job, "why": f"{type(exc).__name__}: {exc}"})
                log(f"before job {job}: {exc}; starting a new cluster")
                client.close()
                cluster.close()
                cluster, client = start_cluster(device, n_workers)
            if job == jobs - 1 and jobs > 1:  # two workers killed in turn
                first = int(rng.integers(1, ROUNDS // 2))
                kills = [first, int(rng.integers(first + CHECKPOINT_EVERY, ROUNDS - 1))]
            else:
                kills = [int(rng.integers(1, ROUNDS - 1))]
            result = one_job(client, job, seed * 1000 + job, kills, device, n_workers, timeout)
            if result["outcome"] == "pass" and result["seconds"] > job_timeout:
                result["outcome"] = "too slow"
            results.append(result)
            log(
                f"job {job}: seed {result['seed']} kill rounds {kills} -> {result['outcome']} "
                f"in {result['seconds']:.1f} s"
            )
    finally:
        client.close()
        cluster.close()
    passed = sum(r["outcome"] == "pass" for r in results)
    seconds = [r["seconds"] for r in results]
    return {
        "device": device,
        "workers": n_workers,
        "rounds": ROUNDS,
        "checkpoint_every": CHECKPOINT_EVERY,
        "rows": sum(ROWS_PER_WORKER_PARTITION),
        "collective_timeout_s": timeout,
        "job_timeout_s": job_timeout,
        "seed": seed,
        "warmup_seconds": round(warmup_s, 3),
        "jobs": results,
        "cluster_restarts": cluster_restarts,
        "passed": passed,
        "total": len(results),
        "seconds_min": min(seconds, default=None),
        "seconds_median": float(np.median(seconds)) if seconds else None,
        "seconds_max": max(seconds, default=None),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (a LocalCUDACluster)")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=30.0, help="dgboost.dask.train's timeout (s)")
    parser.add_argument("--job-timeout", type=float, default=120.0, help="most seconds a job may take")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    result = run(args.jobs, args.seed, args.device, args.workers, args.timeout, args.job_timeout)
    result["versions"] = versions("dgboost", "dask", "distributed", "numpy")
    name = "chaos_" + ("gpu" if args.device.startswith("cuda") else "cpu")
    path = write_result(name, result, args.out)
    print(f"{result['passed']} of {result['total']} jobs passed; wrote {path}")
    return 0 if result["passed"] == result["total"] else 1


if __name__ == "__main__":
    sys.exit(main())
