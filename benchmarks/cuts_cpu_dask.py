"""Time of the quantile cuts on a CPU Dask LocalCluster (the "cuts" set-up stage of every rank).

Each job is ``dgboost.dask.train(..., profile=True)`` on Higgs-like rows (``_scaling_data.py``);
a job's cuts time is its slowest rank's ``setup_stages_s["cuts"]`` (every rank waits for the
others in the sketch's collectives). One warm-up job, then ``--repeats`` timed ones; the load
average of the machine (``os.getloadavg``) is recorded before each job, as other work may share it.

    python benchmarks/cuts_cpu_dask.py --workers 2 --rows 1000000 --out benchmarks/results/x.json

To time another commit, run this script with ``PYTHONPATH`` set to that commit's worktree
(the workers inherit it); the JSON records the commit of the ``dgboost`` that was imported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scaling_data import make_data  # noqa: E402


def _commit(package_dir: Path) -> str:
    out = subprocess.run(["git", "-C", str(package_dir), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(package_dir), "status", "--porcelain", "--", "."], capture_output=True, text=True
    )
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _job(client, X, y, rounds: int) -> dict:
    import dgboost.dask as dxgb

    dtrain = dxgb.DaskDMatrix(client, X, y)
    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.1, "max_bin": 256}
    out = dxgb.train(client, params, dtrain, rounds, verbose_eval=False, profile=True)
    ranks = out["profile"]["ranks"]
    return {
        "cuts_s": max(r["setup_stages_s"]["cuts"] for r in ranks),
        "cuts_s_per_rank": [r["setup_stages_s"]["cuts"] for r in ranks],
        "collectives_per_rank": [r["collectives"] for r in ranks],
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--label", default="")
    args = ap.parse_args(argv)

    from distributed import Client, LocalCluster

    import dgboost

    package = Path(dgboost.__file__).resolve().parent
    with (
        LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        worker_packages = set(client.run(lambda: __import__("dgboost").__file__).values())
        X, y = make_data(client, "higgs", args.rows, "cpu", block_rows=args.rows // args.workers)
        _job(client, X, y, args.rounds)  # warm-up: imports and Numba compilations on the workers
        runs = []
        for _ in range(args.repeats):
            load = os.getloadavg()
            t0 = time.perf_counter()
            run = _job(client, X, y, args.rounds)
            run["job_s"] = time.perf_counter() - t0
            run["loadavg_before"] = load
            runs.append(run)
            print(f"cuts {run['cuts_s']:.3f} s (ranks {run['cuts_s_per_rank']}), load {load}", flush=True)
    cuts = [r["cuts_s"] for r in runs]
    payload = {
        "label": args.label,
        "commit": _commit(package),
        "dgboost_package": str(package),
        "worker_packages": sorted(worker_packages),
        "workers": args.workers,
        "threads_per_worker": 1,
        "rows": args.rows,
        "features": 28,
        "rounds": args.rounds,
        "cuts_s_median": statistics.median(cuts),
        "cuts_s": cuts,
        "uptime_after": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"median cuts {payload['cuts_s_median']:.3f} s -> {args.out}")


if __name__ == "__main__":
    main()
