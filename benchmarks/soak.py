"""Soak: many consecutive train + SHAP jobs on one Dask cluster; what each process holds, per job.

    python benchmarks/soak.py          # a warm-up and 200 timed jobs, a 2-worker CPU LocalCluster
    python benchmarks/soak.py --device cuda --workers 2 --max-seconds 420 --out $OUT/soak_gpu.json

Each job is ``dgboost.dask.train`` (a new ``DaskDMatrix`` of the same rows, its own seed) and
then ``dgboost.dask.shap_values`` of some of the rows, computed. After every job the client
asks every worker (``client.run``, bounded) and itself: host RSS, open file descriptors,
threads; with ``--device cuda`` also the device memory in use (the CUDA driver's free/total of
the worker's GPU, and CuPy's memory pool) and whether the worker keeps an NCCL communicator
(``dgboost.dask._nccl_pool``). A leak shows as a curve that grows with the job number.

Job 0 is a warm-up (compiled kernels, pools, caches) and is not counted: ``--jobs 200`` runs
jobs 0-200, and jobs 1 and 200 are the first and the 200th timed jobs. The client collects its
garbage before each job, outside the timed part, so that no job times a collection left by the
one before.

distributed keeps bounded debugging histories that fill over the first thousand messages or
seconds of a cluster's life (each batched stream's last 1,000 messages with their buffers, the
event loops' and workers' profiles of the last 1,000 seconds, the scheduler's last 100
computations, ...; ``benchmarks/soak_growth.py`` names them). A soak of a few minutes sees them
as growth. By default this script sets them short (``SHORT_HISTORIES``, through ``dask.config``
before the cluster starts, so the workers get them too), so that what grows is what the jobs
leave behind; ``--distributed-defaults`` keeps distributed's lengths.

The JSON (``--out``, default ``benchmarks/results/soak_<device>.json``) holds every job's
times and measures, and a summary: each measure's first, last and largest value after the
first 10 jobs, its growth over the rest, and the time of job 1 against job 200 (and, beside
them, the medians of the first and last 10 timed jobs). ``--plot`` draws the curves (matplotlib).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import versions, write_result  # noqa: E402

ROWS, FEATURES, ROUNDS, SHAP_ROWS = 4_000, 10, 20, 1_000
WINDOW = 10  # jobs before the measures' baseline, and of the first / last windows of times
SHORT_HISTORIES = {
    # every deque distributed sizes by it: each batched stream's recent messages (their buffers
    # included), the event loops' and the workers' profiles (one entry a second), the
    # scheduler's transition log and events, the workers' state logs
    "distributed.admin.low-level-log-length": 10,
    "distributed.diagnostics.computations.max-history": 5,  # the scheduler's last computations
    "distributed.admin.log-length": 100,  # log records kept per logger
}


def process_stats(dask_worker=None) -> dict:
    """Host RSS (bytes), open file descriptors and threads of this process; on a worker with a
    GPU also the device memory in use and the NCCL communicator it keeps."""
    import psutil

    proc = psutil.Process(os.getpid())
    out = {"rss": proc.memory_info().rss, "fds": proc.num_fds(), "threads": proc.num_threads()}
    if dask_worker is not None and os.environ.get("DGBOOST_SOAK_DEVICE", "cpu").startswith("cuda"):
        import cupy

        free, total = cupy.cuda.runtime.memGetInfo()
        pool = cupy.get_default_memory_pool()
        from dgboost.dask._nccl_pool import kept_state

        out.update(
            device_used=int(total - free),
            pool_used=int(pool.used_bytes()),
            pool_held=int(pool.total_bytes()),
            nccl_kept=int(kept_state() is not None),
        )
    return out


def start_cluster(device: str, n_workers: int):
    from distributed import Client

    os.environ["DGBOOST_SOAK_DEVICE"] = device  # the workers inherit it: what process_stats measures
    if device.startswith("cuda"):
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(n_workers=n_workers, threads_per_worker=1, dashboard_address=":0")
    else:
        from distributed import LocalCluster

        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0")
    client = Client(cluster)
    client.wait_for_workers(n_workers, timeout=120)
    return cluster, client


def one_job(client, x, y, seed: int, device: str) -> dict:
    """Train, then explain; the seconds of each."""
    import dask.array as da

    import dgboost.dask as dxgb
    from dgboost.dask._waits import cluster_workers

    n_workers = len(cluster_workers(client))
    chunks = ROWS // n_workers
    X = da.from_array(x, chunks=(chunks, FEATURES))
    params = {"objective": "binary:logistic", "max_depth": 5, "max_bin": 64, "seed": seed, "device": device}
    start = time.perf_counter()
    dtrain = dxgb.DaskDMatrix(client, X, da.from_array(y, chunks=chunks))
    out = dxgb.train(client, params, dtrain, ROUNDS, verbose_eval=False)
    trained = time.perf_counter()
    values = dxgb.shap_values(client, out["booster"], X[:SHAP_ROWS], device=device).compute()
    done = time.perf_counter()
    assert values.shape == (SHAP_ROWS, FEATURES) and np.isfinite(values).all()
    return {"train_s": trained - start, "shap_s": done - trained, "job_s": done - start}


def measure(client) -> dict:
    from dgboost.dask._waits import bounded_call

    workers = bounded_call(client.run, process_stats, what="the workers' process statistics", timeout=60)
    return {"client": process_stats(), "workers": [workers[w] for w in sorted(workers)]}


def run(
    jobs: int, device: str, n_workers: int, short_histories: bool = True, max_seconds: float | None = None, log=print
) -> dict:
    import dask

    import dgboost as dg  # noqa: F401 - imported before the first timed job

    if short_histories:
        dask.config.set(SHORT_HISTORIES)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, FEATURES)).astype(np.float32)
    y = (x[:, 0] + np.sin(3 * x[:, 1]) + rng.normal(scale=0.3, size=ROWS) > 0).astype(np.float32)
    cluster, client = start_cluster(device, n_workers)
    records = []
    began = time.perf_counter()
    try:
        for job in range(jobs + 1):  # job 0: the warm-up
            if max_seconds is not None and time.perf_counter() - began > max_seconds:
                log(f"stopped after job {job - 1}: the {max_seconds:.0f} s of --max-seconds are spent")
                break
            gc.collect()
            times = one_job(client, x, y, job, device)
            records.append({"job": job, **{k: round(v, 4) for k, v in times.items()}, **measure(client)})
            if job % 20 == 0 or job == jobs:
                w = records[-1]["workers"]
                rss = ", ".join(str(round(s["rss"] / 2**20)) for s in w)
                fds, threads = [s["fds"] for s in w], [s["threads"] for s in w]
                log(f"job {job}: {times['job_s']:.3f} s, worker RSS {rss} MiB, fds {fds}, threads {threads}")
    finally:
        client.close()
        cluster.close()
    return {
        "device": device,
        "workers": n_workers,
        "rows": ROWS,
        "features": FEATURES,
        "rounds": ROUNDS,
        "shap_rows": SHAP_ROWS,
        "timed_jobs_asked": jobs,
        "distributed_histories": SHORT_HISTORIES if short_histories else "distributed's defaults",
        "summary": summarize(records),
        "jobs": records,
    }


def _series(records: list[dict]) -> dict[str, list[float]]:
    """Every measure as one list over the jobs: ``client.rss``, ``worker0.fds``, ..."""
    out: dict[str, list[float]] = {}
    for r in records:
        for key, value in r["client"].items():
            out.setdefault(f"client.{key}", []).append(value)
        for i, stats in enumerate(r["workers"]):
            for key, value in stats.items():
                out.setdefault(f"worker{i}.{key}", []).append(value)
    return out


def summarize(records: list[dict]) -> dict:
    after = records[WINDOW:] if len(records) > 2 * WINDOW else records
    measures = {}
    for name, values in _series(after).items():
        measures[name] = {
            "first": values[0],
            "last": values[-1],
            "max": max(values),
            "growth": values[-1] - values[0],
            "growth_fraction": (values[-1] - values[0]) / values[0] if values[0] else None,
        }
    times = [r["job_s"] for r in records]
    timed = times[1:] or times  # job 0 is the warm-up (first contact of the workers with each kernel)
    first_window, last_window = float(np.median(timed[:WINDOW])), float(np.median(timed[-WINDOW:]))
    return {
        "measured_from_job": after[0]["job"] if after else None,
        "measures": measures,
        "timed_jobs": len(timed),
        "first_timed_job_s": timed[0],
        "last_job_s": timed[-1],
        "last_over_first": timed[-1] / timed[0],
        "within_10_percent": abs(timed[-1] / timed[0] - 1) <= 0.10,
        "median_first_10_s": first_window,
        "median_last_10_s": last_window,
        "median_last_over_first": last_window / first_window,
        "medians_within_10_percent": abs(last_window / first_window - 1) <= 0.10,
    }


def plot(result: dict, path: str | os.PathLike) -> None:
    """Four panels over the job number: host RSS, open files and threads, device memory and
    kept communicators (GPU), job time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = result["jobs"]
    series = _series(records)
    jobs = [r["job"] for r in records]
    gpu = any(k.endswith(".device_used") for k in series)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    ax = axes[0][0]
    for name, values in series.items():
        if name.endswith(".rss"):
            ax.plot(jobs, np.asarray(values) / 2**20, label=name.split(".")[0])
    ax.set_ylabel("host RSS (MiB)")
    ax.legend(fontsize=7)
    ax = axes[0][1]
    for name, values in series.items():
        if name.endswith(".fds") or name.endswith(".threads"):
            ax.plot(jobs, values, label=name, lw=1)
    ax.set_ylabel("open files, threads")
    ax.legend(fontsize=6, ncol=2)
    ax = axes[1][0]
    if gpu:
        for name, values in series.items():
            if name.endswith(".device_used") or name.endswith(".pool_held"):
                ax.plot(jobs, np.asarray(values) / 2**20, label=name, lw=1)
        kept = [sum(r["workers"][i].get("nccl_kept", 0) for i in range(len(r["workers"]))) for r in records]
        ax2 = ax.twinx()
        ax2.step(jobs, kept, color="k", lw=0.8, where="post", label="kept NCCL communicators")
        ax2.set_ylabel("kept NCCL communicators")
        ax.set_ylabel("device memory (MiB)")
        ax.legend(fontsize=6)
    else:
        ax.text(0.5, 0.5, "CPU workers: no device memory", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("job")
    ax = axes[1][1]
    ax.plot(jobs, [r["train_s"] for r in records], label="train", lw=1)
    ax.plot(jobs, [r["shap_s"] for r in records], label="SHAP", lw=1)
    ax.set_ylabel("seconds")
    ax.set_xlabel("job")
    ax.legend(fontsize=7)
    s = result["summary"]
    fig.suptitle(
        f"{len(records)} train + SHAP jobs on one {result['device'].upper()} cluster of {result['workers']} "
        f"workers; job 1 {s['first_timed_job_s']:.2f} s, job {len(records) - 1} {s['last_job_s']:.2f} s "
        f"(medians {s['median_first_10_s']:.2f} s, {s['median_last_10_s']:.2f} s)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200, help="timed jobs, after the warm-up job 0")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (a LocalCUDACluster)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=None)
    parser.add_argument("--plot", default=None, help="a PNG of the curves (default: next to --out)")
    parser.add_argument(
        "--distributed-defaults", action="store_true", help="keep distributed's history lengths (see the docstring)"
    )
    parser.add_argument(
        "--max-seconds", type=float, default=None, help="start no job after so many seconds (the JSON says how many)"
    )
    args = parser.parse_args(argv)
    short = not args.distributed_defaults
    result = run(args.jobs, args.device, args.workers, short_histories=short, max_seconds=args.max_seconds)
    result["versions"] = versions("dgboost", "dask", "distributed", "numpy", "cupy")
    name = "soak_" + ("gpu" if args.device.startswith("cuda") else "cpu")
    path = write_result(name, result, args.out)
    picture = args.plot or str(path.with_suffix(".png"))
    plot(result, picture)
    s = result["summary"]
    print(
        f"wrote {path} and {picture}; job 1 {s['first_timed_job_s']:.3f} s, job {s['timed_jobs']} "
        f"{s['last_job_s']:.3f} s: within 10%: {s['within_10_percent']}; medians {s['median_first_10_s']:.3f} s "
        f"(jobs 1-10) and {s['median_last_10_s']:.3f} s (last 10): within 10%: {s['medians_within_10_percent']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
