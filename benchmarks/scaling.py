"""dgboost.dask vs xgboost.dask on the same local cluster: training time and SHAP rows/s.

For each worker count, one cluster is started (``LocalCUDACluster`` with one worker per GPU
for ``--device cuda``, a ``LocalCluster`` of worker processes sharing the cores for
``--device cpu``). Synthetic binary data (``--rows`` x 28, labels from a fixed nonlinear
function of the features plus noise) is generated on the workers and persisted (CuPy
partitions on CUDA workers, NumPy on CPU workers), then for each library, ``--repeats``
times, taking turns:

* training: timed from the persisted arrays to the returned model (DaskDMatrix + train:
  everything the user's call pays), depth 8, eta 0.1, 256 bins, ``--rounds`` rounds;
* SHAP: ``--shap-rows`` rows of the same data (an equal share from every partition, so every
  worker explains rows) explained with the library's own model, timed
  from the call to all output blocks computed and held on the workers (``persist`` + wait;
  nothing gathered), reported as rows/s.

One warm-up of each step first (worker imports, kernel compilation), then the median and the
(min, max) of the repeats, and the ratios dgboost / XGBoost (time) and dgboost / XGBoost
(rows/s). Results go to ``benchmarks/results/scaling-<device>.json``.

    python benchmarks/scaling.py --device cuda --workers 1              # 40M x 28, 100 rounds
    python benchmarks/scaling.py --device cpu --workers 1,2 --rows 400000 --shap-rows 40000 --rounds 20
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, versions, write_result  # noqa: E402

FEATURES = 28


def _label_block(x):
    """A fixed nonlinear function of the features plus noise -> {0, 1} (same on any device)."""
    xp = sys.modules["cupy"] if type(x).__module__.startswith("cupy") else np
    s = x[:, 0] + xp.sin(2 * x[:, 1]) + x[:, 2] * x[:, 3] - 0.5 * x[:, 4] ** 2 + 0.3 * x[:, 5:10].sum(axis=1)
    noise = xp.sin(x[:, 10] * 1000.0)  # deterministic "noise" from another feature
    return (s + 0.5 * noise > 0).astype(xp.float32)


def make_data(client, rows: int, n_workers: int, device: str):
    """Persisted (X, y) dask arrays: rows x 28 float32, 4 partitions per worker."""
    import dask.array as da
    from distributed import wait

    chunk = -(-rows // (4 * n_workers))
    rs = da.random.RandomState(42)
    X = rs.standard_normal((rows, FEATURES), chunks=(chunk, FEATURES)).astype(np.float32)
    if device == "cuda":
        import cupy

        X = X.map_blocks(cupy.asarray, dtype=np.float32)
    y = X.map_blocks(_label_block, drop_axis=1, dtype=np.float32)
    X, y = client.persist([X, y])
    wait([X, y])
    return X, y


def rows_from_every_partition(X, rows: int):
    """About ``rows`` rows of ``X``: the first ``rows / partitions`` of each partition.

    Each piece is computed where its partition lives, so every worker explains its share
    (the first ``rows`` rows would sit in one partition, on one worker).
    """
    import dask.array as da

    per = -(-rows // X.numblocks[0])
    return da.concatenate([X.blocks[i][: min(per, X.chunks[0][i])] for i in range(X.numblocks[0])])


def rows_per_worker(client, X) -> dict:
    """{worker address: rows of ``X`` it holds}: a training job is as slow as its fullest worker."""
    from distributed import futures_of

    chunk_rows = dict(zip(((X.name, i, 0) for i in range(X.numblocks[0])), X.chunks[0]))
    held: dict = {}
    for key, workers in client.who_has(futures_of(X)).items():
        if workers:
            held[workers[0]] = held.get(workers[0], 0) + int(chunk_rows.get(tuple(key), 0))
    return dict(sorted(held.items()))


def _params(device: str, rounds: int) -> dict:
    return {"objective": "binary:logistic", "max_depth": 8, "eta": 0.1, "max_bin": 256,
            "tree_method": "hist", "device": device}


def train_dgboost(client, X, y, params, rounds):
    import dgboost.dask as dxgb

    dtrain = dxgb.DaskDMatrix(client, X, y)
    return dxgb.train(client, {k: v for k, v in params.items() if k != "tree_method"}, dtrain, rounds,
                      verbose_eval=False)["booster"]


def train_xgboost(client, X, y, params, rounds):
    import xgboost as xgb
    import xgboost.dask  # noqa: F401 - a submodule, not imported by xgboost itself

    dtrain = xgb.dask.DaskQuantileDMatrix(client, X, y, max_bin=params["max_bin"])
    return xgb.dask.train(client, params, dtrain, rounds, verbose_eval=False)["booster"]


def profile_dgboost(client, X, y, params, rounds) -> dict:
    """One more dgboost job (untimed) with ``profile=True``: where its time went."""
    import dgboost.dask as dxgb

    dtrain = dxgb.DaskDMatrix(client, X, y)
    return dxgb.train(client, {k: v for k, v in params.items() if k != "tree_method"}, dtrain, rounds,
                      verbose_eval=False, profile=True)["profile"]


def profile_lines(prof: dict) -> list[str]:
    """A few lines on a profile: the client's stages, then each rank's."""
    c = prof["client"]
    lines = ["    client: " + ", ".join(f"{k[:-2]} {v:.3f}" for k, v in c.items()) + " s"]
    for r, rank in enumerate(prof["ranks"]):
        coll = rank["collectives"]
        calls = sum(v["calls"] for v in coll.values())
        rounds = max(rank["rounds"], 1)
        lines.append(
            f"    rank {r} ({rank['rows']:,} rows): dispatch {rank['dispatch_s']:.3f}, data {rank['data_s']:.3f}, "
            f"comm open {rank['comm_open_s']:.3f}, setup {rank['setup_s']:.3f}, rounds {rank['rounds_s']:.3f} s "
            f"(median round {1e3 * rank['round_s_median']:.2f} ms); collectives {calls / rounds:.0f} a round, "
            f"{sum(v['bytes'] for v in coll.values()) / rounds / 2**20:.2f} MiB a round, waiting for their inputs "
            f"{sum(v['producer_s'] for v in coll.values()):.3f} s, in them {sum(v['collective_s'] for v in coll.values()):.3f} s")
    return lines


def shap_dgboost(client, booster, X):
    from distributed import futures_of, wait

    import dgboost.dask as dxgb

    out = dxgb.shap_values(client, booster, X).persist()
    wait(futures_of(out))
    return out


def shap_xgboost(client, booster, X):
    from distributed import futures_of, wait
    import xgboost as xgb
    import xgboost.dask  # noqa: F401 - a submodule, not imported by xgboost itself

    out = xgb.dask.predict(client, booster, X, pred_contribs=True).persist()
    wait(futures_of(out))
    return out


def _cluster(device: str, n_workers: int):
    if device == "cuda":
        from dask_cuda import LocalCUDACluster

        return LocalCUDACluster(n_workers=n_workers, threads_per_worker=1, dashboard_address=":0")
    from distributed import LocalCluster

    threads = max(1, (os.cpu_count() or 1) // n_workers)
    return LocalCluster(n_workers=n_workers, threads_per_worker=threads, processes=True, dashboard_address=":0")


def _summary(times: list[float]) -> dict:
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "runs": times}


def run(device: str, n_workers: int, rows: int, shap_rows: int, rounds: int, repeats: int,
        profile: bool = False) -> dict:
    from distributed import Client, wait

    params = _params(device, rounds)
    with _cluster(device, n_workers) as cluster, Client(cluster) as client:
        client.wait_for_workers(n_workers, timeout=120)
        X, y = make_data(client, rows, n_workers, device)
        Xs = rows_from_every_partition(X, shap_rows).persist()
        wait(Xs)
        shap_rows = Xs.shape[0]
        placement = {"train": rows_per_worker(client, X), "shap": rows_per_worker(client, Xs)}
        print(f"  rows per worker: training {sorted(placement['train'].values())}, "
              f"SHAP {sorted(placement['shap'].values())}", flush=True)
        libs = {"dgboost": (train_dgboost, shap_dgboost), "xgboost": (train_xgboost, shap_xgboost)}
        # warm-up: imports on the workers, kernel compilation, allocator pools
        small, small_y = X[: min(rows, 20_000)].persist(), y[: min(rows, 20_000)].persist()
        for name, (train_fn, shap_fn) in libs.items():
            booster = train_fn(client, small, small_y, params, 2)
            shap_fn(client, booster, small[:1000])
        train_times = {name: [] for name in libs}
        shap_rates = {name: [] for name in libs}
        for k in range(repeats):
            order = list(libs) if k % 2 == 0 else list(libs)[::-1]
            for name in order:
                train_fn, shap_fn = libs[name]
                t0 = time.perf_counter()
                booster = train_fn(client, X, y, params, rounds)
                train_times[name].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                out = shap_fn(client, booster, Xs)
                shap_rates[name].append(shap_rows / (time.perf_counter() - t0))
                del out
                print(f"  workers={n_workers} {name:8s} repeat {k}: train {train_times[name][-1]:.2f} s, "
                      f"SHAP {shap_rates[name][-1]:,.0f} rows/s", flush=True)
        prof = profile_dgboost(client, X, y, params, rounds) if profile else None
    if prof is not None:
        print("\n".join(profile_lines(prof)), flush=True)
    result = {"workers": n_workers, "shap_rows": shap_rows, "rows_per_worker": placement, "dgboost_profile": prof,
              "train_s": {n: _summary(t) for n, t in train_times.items()},
              "shap_rows_per_s": {n: _summary(r) for n, r in shap_rates.items()}}
    result["train_ratio"] = result["train_s"]["dgboost"]["median"] / result["train_s"]["xgboost"]["median"]
    result["shap_ratio"] = (result["shap_rows_per_s"]["dgboost"]["median"]
                            / result["shap_rows_per_s"]["xgboost"]["median"])
    return result


def table_lines(payload: dict) -> list[dict]:
    """The README table's rows (``make_table.py``) for a result payload."""
    lines = []
    for r in payload["results"]:
        t, s = r["train_s"], r["shap_rows_per_s"]
        shape = (f"{payload['rows']:,} x {payload['features']}, {payload['rounds']} rounds, depth 8, "
                 f"{r['workers']} {payload['device']} worker(s)")
        lines.append({"what": f"dgboost.dask / xgboost.dask training time, {shape}", "ratio": r["train_ratio"],
                      "note": f"lower is better; target <= 1.0; {t['dgboost']['median']:.2f} "
                              f"({t['dgboost']['min']:.2f}-{t['dgboost']['max']:.2f}) vs {t['xgboost']['median']:.2f} "
                              f"({t['xgboost']['min']:.2f}-{t['xgboost']['max']:.2f}) s from persisted arrays, "
                              f"median of {payload['repeats']}"})
        lines.append({"what": f"dgboost.dask / xgboost.dask SHAP rows/s, {payload['shap_rows']:,} rows, "
                              f"{r['workers']} {payload['device']} worker(s)", "ratio": r["shap_ratio"],
                      "note": f"higher is better; target >= 2; {s['dgboost']['median']:,.0f} vs "
                              f"{s['xgboost']['median']:,.0f} rows/s (dgboost: "
                              f"{'GPU kernel on the worker, CuPy blocks out' if payload['device'] == 'cuda' else 'CPU SHAP engine on the worker'})"})
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--workers", default="1", help="comma-separated worker counts, e.g. 1,2,4")
    parser.add_argument("--rows", type=int, default=40_000_000)
    parser.add_argument("--shap-rows", type=int, default=4_000_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true",
                        help="after the timed runs, one more dgboost job with profile=True (where its time went)")
    parser.add_argument("--output", default=None, help="result JSON (default: results/scaling-<device>.json)")
    args = parser.parse_args(argv)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    results = []
    payload = {"benchmark": "scaling", "device": args.device, "rows": args.rows, "features": FEATURES,
               "shap_rows": args.shap_rows, "rounds": args.rounds, "repeats": args.repeats,
               "params": _params(args.device, args.rounds), "machine": machine(),
               "versions": versions("dgboost", "xgboost", "dask", "distributed", "numpy", "cupy", "dask_cuda"),
               "results": results}
    for w in [int(v) for v in args.workers.split(",")]:
        print(f"{w} worker(s), {args.rows:,} x {FEATURES}, {args.rounds} rounds, SHAP of {args.shap_rows:,} rows",
              flush=True)
        results.append(run(args.device, w, args.rows, args.shap_rows, args.rounds, args.repeats, args.profile))
        # written after every worker count: a run stopped part-way keeps the counts it finished
        payload["table"] = table_lines(payload)
        path = write_result(f"scaling-{args.device}", payload, args.output)
    print(f"\n{'workers':>7} | {'train dgboost':>13} | {'train xgboost':>13} | {'ratio':>5} | "
          f"{'SHAP dgb rows/s':>15} | {'SHAP xgb rows/s':>15} | {'ratio':>5}")
    for r in results:
        t, s = r["train_s"], r["shap_rows_per_s"]
        print(f"{r['workers']:>7} | {t['dgboost']['median']:>11.2f} s | {t['xgboost']['median']:>11.2f} s | "
              f"{r['train_ratio']:>5.2f} | {s['dgboost']['median']:>15,.0f} | {s['xgboost']['median']:>15,.0f} | "
              f"{r['shap_ratio']:>5.2f}")
    print(f"(medians of {args.repeats}; ratios dgboost/xgboost: time, lower is better; rows/s, higher is better)")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
