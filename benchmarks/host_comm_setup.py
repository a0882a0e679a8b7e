"""What a host-communicator job pays to set up its collective (XGBoost's Rabit tracker).

Three measures, one run:

* the tracker alone: XGBoost's ``RabitTracker`` started and its worker arguments asked for at
  once (what a caller of ``xgboost.tracker`` does) against :func:`dgboost.comm.collective.start_tracker`,
  ``--calls`` times each, taking turns;
* ``xgboost.collective.init`` of one rank whose tracker is ready (what each rank pays to join);
* whole ``dgboost.dask.train`` jobs on a local cluster of CPU workers (the host communicator),
  with ``profile=True``: the job's wall time and its ``communicator_spec_s`` stage (where the
  tracker is started, on the scheduler).

    python benchmarks/host_comm_setup.py --workers 2 --jobs 8
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import versions, write_result  # noqa: E402


def _xgboost_tracker_ms() -> float:
    from xgboost.tracker import RabitTracker

    t0 = time.perf_counter()
    tracker = RabitTracker(n_workers=2, host_ip="127.0.0.1", sortby="task", timeout=30)
    tracker.start()
    tracker.worker_args()
    ms = 1e3 * (time.perf_counter() - t0)
    _free(tracker)
    return ms


def _dgboost_tracker_ms() -> float:
    from dgboost.comm.collective import start_tracker

    t0 = time.perf_counter()
    tracker, _ = start_tracker(2, "127.0.0.1", 30)
    ms = 1e3 * (time.perf_counter() - t0)
    _free(tracker)
    return ms


def _init_one_rank_ms() -> float:
    """``xgboost.collective.init`` of a world of one rank, its tracker started and ready: what
    every rank of a host-communicator job pays to join, whoever else joins."""
    from xgboost import collective

    from dgboost.comm.collective import start_tracker

    tracker, worker_args = start_tracker(1, "127.0.0.1", 30)
    t0 = time.perf_counter()
    collective.init(**worker_args, dmlc_task_id="00000000", dmlc_timeout=30)
    ms = 1e3 * (time.perf_counter() - t0)
    collective.finalize()
    _free(tracker)
    return ms


def _free(tracker) -> None:
    try:  # a tracker no worker joined fails to shut down cleanly
        tracker.free()
    except Exception:  # noqa: BLE001
        pass


_RANK_STAGES = ("dispatch_s", "comm_open_s", "setup_s", "rounds_s", "total_s")


def _jobs(workers: int, jobs: int, rows: int) -> list[dict]:
    import dask.array as da
    from distributed import Client, LocalCluster

    import dgboost.dask as dxgb

    rng = np.random.default_rng(0)
    out = []
    with (
        LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        chunk = rows // (2 * workers)
        X = da.from_array(rng.normal(size=(rows, 10)).astype(np.float32), chunks=(chunk, 10)).persist()
        y = da.from_array((rng.random(rows) > 0.5).astype(np.float32), chunks=chunk).persist()
        dtrain = dxgb.DaskDMatrix(client, X, y)
        params = {"objective": "binary:logistic", "max_depth": 3}
        dxgb.train(client, params, dtrain, 2)  # warm-up: imports and compilations on the workers
        for _ in range(jobs):
            t0 = time.perf_counter()
            result = dxgb.train(client, params, dtrain, 2, profile=True)
            rank = result["profile"]["slowest_rank"]
            out.append(
                {
                    "job_s": time.perf_counter() - t0,
                    "communicator_spec_s": result["profile"]["client"]["communicator_spec_s"],
                    "slowest_rank": {k: rank[k] for k in _RANK_STAGES},
                }
            )
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20, help="trackers started by each way")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--output", help="result JSON (default: results/host_comm_setup.json)")
    args = ap.parse_args(argv)

    xgb_ms, dgb_ms = [], []
    for _ in range(args.calls):
        xgb_ms.append(_xgboost_tracker_ms())
        dgb_ms.append(_dgboost_tracker_ms())
    init_ms = [_init_one_rank_ms() for _ in range(args.calls)]
    jobs = _jobs(args.workers, args.jobs, args.rows)
    job_ms = [1e3 * j["job_s"] for j in jobs]
    spec_ms = [1e3 * j["communicator_spec_s"] for j in jobs]
    open_ms = [1e3 * j["slowest_rank"]["comm_open_s"] for j in jobs]
    rank_ms = [1e3 * j["slowest_rank"]["total_s"] for j in jobs]
    lines = [
        f"tracker started, arguments asked at once (xgboost.tracker): median {statistics.median(xgb_ms):.2f} ms "
        f"({min(xgb_ms):.2f}-{max(xgb_ms):.2f}), {args.calls} calls",
        f"dgboost.comm.collective.start_tracker: median {statistics.median(dgb_ms):.2f} ms "
        f"({min(dgb_ms):.2f}-{max(dgb_ms):.2f}), {args.calls} calls",
        f"xgboost.collective.init, one rank, tracker ready: median {statistics.median(init_ms):.1f} ms "
        f"({min(init_ms):.1f}-{max(init_ms):.1f}), {args.calls} calls",
        f"dgboost.dask.train on {args.workers} CPU workers (host communicator), {args.rows:,} rows, 2 rounds: "
        f"job median {statistics.median(job_ms):.1f} ms ({min(job_ms):.1f}-{max(job_ms):.1f}), "
        f"communicator_spec_s median {statistics.median(spec_ms):.1f} ms ({min(spec_ms):.1f}-{max(spec_ms):.1f}), "
        f"{len(jobs)} jobs; the slowest rank: {statistics.median(rank_ms):.1f} ms "
        f"({min(rank_ms):.1f}-{max(rank_ms):.1f}), {statistics.median(open_ms):.1f} "
        f"({min(open_ms):.1f}-{max(open_ms):.1f}) of them joining the collective",
    ]
    for line in lines:
        print(line)
    table = [
        {
            "what": "host communicator set-up: dgboost's start_tracker against xgboost.tracker with its "
            "worker arguments asked for at once",
            "ratio": statistics.median(dgb_ms) / statistics.median(xgb_ms),
            "note": f"lower is better; {statistics.median(dgb_ms):.2f} vs {statistics.median(xgb_ms):.2f} ms, "
            f"median of {args.calls}; a dgboost.dask job of {args.rows:,} rows on {args.workers} CPU workers: "
            f"{statistics.median(job_ms):.1f} ms, {statistics.median(spec_ms):.1f} of them setting up its "
            "communicator",
        }
    ]
    payload = {
        "versions": versions("dgboost", "xgboost", "distributed", "numpy"),
        "args": vars(args),
        "tracker_ms": {"xgboost_at_once": xgb_ms, "dgboost_start_tracker": dgb_ms},
        "collective_init_one_rank_ms": init_ms,
        "jobs": jobs,
        "lines": lines,
        "table": table,
    }
    print(f"wrote {write_result('host_comm_setup', payload, args.output)}")


if __name__ == "__main__":
    main()
