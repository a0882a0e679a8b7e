"""dgboost.dask vs xgboost.dask on the same local cluster: training time and SHAP rows/s.

For each worker count, one cluster is started (``LocalCUDACluster`` with one worker per GPU
for ``--device cuda``, a ``LocalCluster`` of worker processes sharing the cores for
``--device cpu``). A synthetic binary data set (``--dataset``: ``higgs``, ``--rows`` x 28, or
``airline``, x 13; see ``_scaling_data.py``) is generated on the workers block by block, the
same rows at every worker count, and persisted (CuPy partitions on CUDA workers, NumPy on CPU
workers), with ``--test-rows`` held-out rows; then for each library, ``--repeats`` times,
taking turns:

* training: timed from the persisted arrays to the returned model (DaskDMatrix + train:
  everything the user's call pays), depth 8, eta 0.1, 256 bins, ``--rounds`` rounds;
* SHAP: ``--shap-rows`` rows of the same data (an equal share from every partition, so every
  worker explains rows) explained with the library's own model, timed
  from the call to all output blocks computed and held on the workers (``persist`` + wait;
  nothing gathered), reported as rows/s.

One warm-up of each step first (worker imports, kernel compilation), then the median and the
(min, max) of the repeats, and the ratios dgboost / XGBoost (time) and dgboost / XGBoost
(rows/s), and both last models' test accuracy. Results go to
``benchmarks/results/scaling-<device>.json`` (``scaling-<dataset>-<device>.json`` for other
data sets), rewritten after every worker count.

    python benchmarks/scaling.py --device cuda --workers 1,2,4 --profile   # 40M x 28, 100 rounds
    python benchmarks/scaling.py --device cuda --workers 1,2,4 --dataset airline --rows 115000000 --shap-rows 0
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
from _scaling_data import DATASETS, make_data  # noqa: E402


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

    trailing = (0,) * (X.ndim - 1)
    chunk_rows = dict(zip(((X.name, i) + trailing for i in range(X.numblocks[0])), X.chunks[0]))
    held: dict = {}
    for key, workers in client.who_has(futures_of(X)).items():
        if workers:
            held[workers[0]] = held.get(workers[0], 0) + int(chunk_rows.get(tuple(key), 0))
    return dict(sorted(held.items()))


def _params(device: str, rounds: int) -> dict:
    return {
        "objective": "binary:logistic",
        "max_depth": 8,
        "eta": 0.1,
        "max_bin": 256,
        "tree_method": "hist",
        "device": device,
    }


def _dgboost_job(client, X, y, params, rounds, **kwargs) -> dict:
    import dgboost.dask as dxgb

    dtrain = dxgb.DaskDMatrix(client, X, y)
    return dxgb.train(
        client, {k: v for k, v in params.items() if k != "tree_method"}, dtrain, rounds, verbose_eval=False, **kwargs
    )


def train_dgboost(client, X, y, params, rounds):
    return _dgboost_job(client, X, y, params, rounds)["booster"]


def _host_waited_nccl():
    """dgboost's ``nccl_stream_ordered`` option off for the ``with`` block (read on the client
    when a job is set up, and sent with the job)."""
    import dgboost

    return dgboost.config_context(nccl_stream_ordered=False)


def train_dgboost_host_waited(client, X, y, params, rounds):
    """dgboost with the host waiting for every NCCL collective (the default before stream order)."""
    with _host_waited_nccl():
        return train_dgboost(client, X, y, params, rounds)


def train_dgboost_unshared(client, X, y, params, rounds):
    """dgboost sharing nothing with the job before, as a first job on a cluster: no NCCL
    communicator kept (one is made, connected and destroyed in the job) and the partitions
    checked, where later jobs on the same workers and partitions skip both."""
    import dgboost
    from dgboost.dask import _preflight

    with _preflight._passed_lock:
        _preflight._PASSED.clear()
    with dgboost.config_context(nccl_keep_communicators=False):
        return train_dgboost(client, X, y, params, rounds)


def train_xgboost(client, X, y, params, rounds):
    import xgboost as xgb
    import xgboost.dask  # noqa: F401 - a submodule, not imported by xgboost itself

    dtrain = xgb.dask.DaskQuantileDMatrix(client, X, y, max_bin=params["max_bin"])
    return xgb.dask.train(client, params, dtrain, rounds, verbose_eval=False)["booster"]


def profile_dgboost(client, X, y, params, rounds) -> dict:
    """One more dgboost job (untimed) with ``profile=True``: where its time went, with the
    workers' sampled Python stacks of the job (:func:`hotspots`)."""
    start = time.time()
    prof = _dgboost_job(client, X, y, params, rounds, profile=True)["profile"]
    prof["hotspots"] = hotspots(client.profile(start=start, stop=time.time()))
    return prof


def timed_shap(client, shap_fn, booster, X) -> dict:
    """One SHAP call timed, with Dask's task stream: per worker, when its first block started
    and its last ended after the call began, its tasks and their busy seconds. What a call
    pays that does not shrink with more GPUs shows as late first blocks or as idle time
    between busy and the wall. The stream is fetched after the timer stops."""
    from distributed import get_task_stream

    start = time.time()
    with get_task_stream(client) as stream:
        t0 = time.perf_counter()
        shap_fn(client, booster, X)
        wall = time.perf_counter() - t0
    workers: dict = {}
    for task in stream.data:
        spans = [s for s in task.get("startstops", ()) if s.get("action") == "compute"]
        for span in spans:
            w = workers.setdefault(
                task["worker"],
                {"tasks": 0, "busy_s": 0.0, "first_start_s": None, "last_stop_s": 0.0, "first_task_s": None},
            )
            w["tasks"] += 1
            w["busy_s"] += span["stop"] - span["start"]
            if w["first_start_s"] is None or span["start"] - start < w["first_start_s"]:
                w["first_start_s"] = span["start"] - start
                w["first_task_s"] = span["stop"] - span["start"]
            w["last_stop_s"] = max(w["last_stop_s"], span["stop"] - start)
    return {"wall_s": wall, "workers": dict(sorted(workers.items()))}


def stream_summary(call: dict) -> str:
    """The workers of one :func:`timed_shap` call in one line: ranges over the workers."""
    ws = list(call["workers"].values())
    if not ws:
        return "no task stream"

    def span(key: str) -> str:
        vals = [w[key] for w in ws if w[key] is not None]
        return f"{min(vals):.3f}-{max(vals):.3f}"

    return (
        f"wall {call['wall_s']:.3f} s; first blocks at {span('first_start_s')} s, last end {span('last_stop_s')} s, "
        f"busy {span('busy_s')} s, tasks {'/'.join(str(w['tasks']) for w in ws)}"
    )


def profile_shap(client, booster, X) -> dict:
    """One more dgboost SHAP call (untimed in the table): :func:`timed_shap`'s figures with the
    workers' sampled stacks."""
    start = time.time()
    prof = timed_shap(client, shap_dgboost, booster, X)
    prof["hotspots"] = hotspots(client.profile(start=start, stop=time.time()))
    return prof


def shap_profile_lines(prof: dict) -> list[str]:
    lines = [f"    SHAP call: {prof['wall_s']:.3f} s"]
    for i, v in enumerate(prof["workers"].values()):
        lines.append(
            f"    worker {i}: {v['tasks']} tasks, busy {v['busy_s']:.3f} s, first block from "
            f"{v['first_start_s']:.3f} s ({v['first_task_s']:.3f} s), last ends at {v['last_stop_s']:.3f} s"
        )
    lines += [f"      {share * 100:5.1f}%  {line}" for line, share in prof["hotspots"]["dgboost"][:10]]
    return lines


def hotspots(tree: dict, top: int = 12) -> dict:
    """The source lines where the workers' task threads were seen most often.

    ``tree`` is ``distributed.Client.profile()``'s call tree (a sample every 10 ms of every
    task thread of every worker). A compiled call (Numba, CuPy, NCCL) shows as the Python
    line that made it. Returns ``{"samples": n, "self": [(line, share)], "dgboost": [(line,
    share)]}``: lines by the samples taken on them, and dgboost's lines by the samples taken
    on them or below them.
    """
    own: dict[str, int] = {}
    below: dict[str, int] = {}

    def key(d: dict) -> str:
        path = d.get("filename", "")
        short = path[path.rfind("dgboost/") :] if "dgboost/" in path else Path(path).name
        return f"{short}:{d.get('line_number', 0)} {d.get('name', '')}"

    def walk(node: dict) -> None:
        k = key(node["description"])
        kids = node["children"].values()
        own[k] = own.get(k, 0) + node["count"] - sum(c["count"] for c in kids)
        if "dgboost/" in node["description"].get("filename", ""):
            below[k] = below.get(k, 0) + node["count"]
        for c in kids:
            walk(c)

    walk(tree)
    n = max(int(tree.get("count", 0)), 1)

    def ranked(counts):
        return [(k, round(v / n, 4)) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:top] if v > 0]

    return {"samples": int(tree.get("count", 0)), "self": ranked(own), "dgboost": ranked(below)}


def _numba_note(use: dict | None) -> str:
    """'; Numba's compiler: ...' for a rank that entered it (a job after the first should not)."""
    if not use or not use.get("entries"):
        return ""
    compiled = f", compiled {', '.join(use['compiled'])}" if use.get("compiled") else ", loads from its cache only"
    return f"; Numba's compiler entered {use['entries']} times, {use['seconds']:.3f} s{compiled}"


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
            f"comm open {rank['comm_open_s']:.3f}, setup {rank['setup_s']:.3f} ("
            + ", ".join(f"{k} {v:.3f}" for k, v in rank.get("setup_stages_s", {}).items())
            + f"), rounds {rank['rounds_s']:.3f} s "
            f"(median round {1e3 * rank['round_s_median']:.2f} ms, first {1e3 * rank.get('round_s_first', 0):.1f}, "
            f"longest {1e3 * rank.get('round_s_max', 0):.1f}, beyond the median "
            f"{rank.get('rounds_over_median_s', 0):.3f} s in all); collectives {calls / rounds:.0f} a round, "
            f"{sum(v['bytes'] for v in coll.values()) / rounds / 2**20:.2f} MiB a round, waiting for their inputs "
            f"{sum(v['producer_s'] for v in coll.values()):.3f} s, "
            f"in them {sum(v['collective_s'] for v in coll.values()):.3f} s" + _numba_note(rank.get("numba"))
        )
    spots = prof.get("hotspots")
    if spots:
        lines.append(f"    sampled stacks ({spots['samples']} samples of 10 ms over the ranks), most seen lines:")
        lines += [f"      {share:6.1%}  {where}" for where, share in spots["self"]]
        lines.append("    dgboost lines with what they called:")
        lines += [f"      {share:6.1%}  {where}" for where, share in spots["dgboost"]]
    return lines


def shap_dgboost(client, booster, X):
    from distributed import futures_of, wait

    import dgboost.dask as dxgb

    out = dxgb.shap_values(client, booster, X).persist()
    wait(futures_of(out))
    return out


def shap_xgboost(client, booster, X):
    import xgboost as xgb
    import xgboost.dask  # noqa: F401 - a submodule, not imported by xgboost itself
    from distributed import futures_of, wait

    out = xgb.dask.predict(client, booster, X, pred_contribs=True).persist()
    wait(futures_of(out))
    return out


def predict_dgboost(client, booster, X):
    import dgboost.dask as dxgb

    return dxgb.predict(client, booster, X)


def predict_xgboost(client, booster, X):
    import xgboost as xgb
    import xgboost.dask  # noqa: F401 - a submodule, not imported by xgboost itself

    return xgb.dask.predict(client, booster, X)


def accuracy(proba, y) -> float:
    """Share of rows whose probability is on the label's side of 0.5."""
    from dask import compute

    p, t = compute(proba, y)
    return float(((_host(p) > 0.5) == (_host(t) > 0.5)).mean())


def _host(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _block_types(proba) -> str:
    """Array types of the meta and of the first computed block of a lazy prediction."""
    return f"meta {type(proba._meta).__module__}, blocks {type(proba.blocks[0].compute()).__module__}"


def _cluster(device: str, n_workers: int):
    if device == "cuda":
        from dask_cuda import LocalCUDACluster

        return LocalCUDACluster(n_workers=n_workers, threads_per_worker=1, dashboard_address=":0")
    from distributed import LocalCluster

    threads = max(1, (os.cpu_count() or 1) // n_workers)
    return LocalCluster(n_workers=n_workers, threads_per_worker=threads, processes=True, dashboard_address=":0")


def _summary(times: list[float]) -> dict:
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "runs": times}


def run(device: str, n_workers: int, args) -> dict:
    """Start a cluster of ``n_workers``, make the data on it, time both libraries (taking
    turns), and optionally profile one more dgboost job."""
    from distributed import Client, wait

    params = _params(device, args.rounds)
    with _cluster(device, n_workers) as cluster, Client(cluster) as client:
        client.wait_for_workers(n_workers, timeout=120)
        t0 = time.perf_counter()
        X, y = make_data(client, args.dataset, args.rows, device, block_rows=args.block_rows)
        made_s = time.perf_counter() - t0
        placement = {"train": rows_per_worker(client, X)}
        Xs = None
        if args.shap_rows:
            Xs = rows_from_every_partition(X, args.shap_rows).persist()
            wait(Xs)
            placement["shap"] = rows_per_worker(client, Xs)
        shap_rows = 0 if Xs is None else Xs.shape[0]
        Xt = yt = None
        if args.test_rows:
            Xt, yt = make_data(client, args.dataset, args.test_rows, device, seed=43, block_rows=args.block_rows)
        print(
            f"  data made in {made_s:.1f} s; rows per worker: "
            + ", ".join(f"{k} {sorted(v.values())}" for k, v in placement.items()),
            flush=True,
        )
        libs = {
            "dgboost": (train_dgboost, shap_dgboost, predict_dgboost),
            "xgboost": (train_xgboost, shap_xgboost, predict_xgboost),
        }
        if args.host_waited and n_workers > 1:  # one rank has no collectives
            libs["dgboost_host_waited"] = (train_dgboost_host_waited, None, predict_dgboost)
        if args.unshared:
            libs["dgboost_unshared"] = (train_dgboost_unshared, None, predict_dgboost)
        # warm-up: imports on the workers, kernel compilation, allocator pools; rows from
        # every partition, so that every worker runs every kernel (the first 20,000 rows sit
        # on one worker, and the others' first timed job loaded their kernels)
        warm_rows = min(args.rows, 20_000)
        small = rows_from_every_partition(X, warm_rows).persist()
        small_y = rows_from_every_partition(y, warm_rows).persist()
        for train_fn, shap_fn, _ in libs.values():
            booster = train_fn(client, small, small_y, params, 2)
            if Xs is not None and shap_fn is not None:
                shap_fn(client, booster, rows_from_every_partition(small, 1000))
        train_times = {name: [] for name in libs}
        shap_rates = {name: [] for name, lib in libs.items() if lib[1] is not None}
        shap_calls = {name: [] for name in shap_rates}
        boosters = {}
        timed_profiles: list[dict] = []
        for k in range(args.repeats):
            order = list(libs) if k % 2 == 0 else list(libs)[::-1]
            for name in order:
                train_fn, shap_fn, _ = libs[name]
                profiled = args.profile_timed and name == "dgboost"
                started_at = time.time()
                t0 = time.perf_counter()
                if profiled:
                    job = _dgboost_job(client, X, y, params, args.rounds, profile=True)
                    boosters[name] = job["booster"]
                else:
                    boosters[name] = train_fn(client, X, y, params, args.rounds)
                train_times[name].append(time.perf_counter() - t0)
                line = f"  workers={n_workers} {name:8s} repeat {k}: train {train_times[name][-1]:.2f} s"
                if profiled:
                    prof = job["profile"]
                    prof["hotspots"] = hotspots(client.profile(start=started_at, stop=time.time()))
                    timed_profiles.append(prof)
                    line += "\n" + "\n".join(profile_lines(prof))
                if Xs is not None and shap_fn is not None:
                    call = timed_shap(client, shap_fn, boosters[name], Xs)
                    shap_rates[name].append(shap_rows / call["wall_s"])
                    shap_calls[name].append(call)
                    line += f", SHAP {shap_rates[name][-1]:,.0f} rows/s ({stream_summary(call)})"
                print(line, flush=True)
        prof = profile_dgboost(client, X, y, params, args.rounds) if args.profile else None
        if prof is not None:
            print("\n".join(profile_lines(prof)), flush=True)
        shap_prof = None
        if args.profile and Xs is not None:
            shap_prof = profile_shap(client, boosters["dgboost"], Xs)
            print("\n".join(shap_profile_lines(shap_prof)), flush=True)
        prof_waited = None
        if args.profile and "dgboost_host_waited" in libs:
            with _host_waited_nccl():
                prof_waited = profile_dgboost(client, X, y, params, args.rounds)
            print("  host waiting for every collective:\n" + "\n".join(profile_lines(prof_waited)), flush=True)
        acc = None
        if Xt is not None:
            predictions = {name: libs[name][2](client, b, Xt) for name, b in boosters.items()}
            print(
                "  predictions: "
                + "; ".join(f"{k} {_block_types(v)}" for k, v in predictions.items())
                + f"; labels {_block_types(yt)}",
                flush=True,
            )
            acc = {name: accuracy(p, yt) for name, p in predictions.items()}
            print("  test accuracy: " + ", ".join(f"{k} {v:.5f}" for k, v in acc.items()), flush=True)
    result = {
        "workers": n_workers,
        "data_s": made_s,
        "shap_rows": shap_rows,
        "rows_per_worker": placement,
        "test_accuracy": acc,
        "dgboost_profile": prof,
        "dgboost_profile_host_waited": prof_waited,
        "dgboost_shap_profile": shap_prof,
        "dgboost_timed_profiles": timed_profiles or None,
        "shap_calls": shap_calls if Xs is not None else None,
        "train_s": {n: _summary(t) for n, t in train_times.items()},
    }
    result["train_ratio"] = result["train_s"]["dgboost"]["median"] / result["train_s"]["xgboost"]["median"]
    for variant in _VARIANT_ROWS:
        if f"dgboost_{variant}" in result["train_s"]:
            result[f"train_ratio_{variant}"] = (
                result["train_s"][f"dgboost_{variant}"]["median"] / result["train_s"]["xgboost"]["median"]
            )
    if Xs is not None:
        result["shap_rows_per_s"] = {n: _summary(r) for n, r in shap_rates.items()}
        result["shap_ratio"] = (
            result["shap_rows_per_s"]["dgboost"]["median"] / result["shap_rows_per_s"]["xgboost"]["median"]
        )
    return result


# dgboost variants timed beside the default (``dgboost_<name>`` in train_s): the benchmark row's
# words and how the variant is made, in the order of the table
_VARIANT_ROWS = {
    "unshared": (
        "as a first job (communicator made, partitions checked)",
        "nccl_keep_communicators=False and no remembered checks",
    ),
    "host_waited": ("with the host waiting for every NCCL collective", "nccl_stream_ordered=False, the default before"),
}


def speedups(results: list[dict]) -> dict:
    """``{"<n>_over_1": {"train_dgboost", "train_xgboost", "shap_dgboost", "shap_xgboost"}}``:
    each library's 1-worker median time over its n-worker median (SHAP: n-worker rows/s over
    1-worker rows/s), for every n measured beside 1 worker."""
    by_count = {r["workers"]: r for r in results}
    one = by_count.get(1)
    out = {}
    if one is None:
        return out
    for n, r in sorted(by_count.items()):
        if n == 1:
            continue
        entry = {
            f"train_{lib}": one["train_s"][lib]["median"] / r["train_s"][lib]["median"]
            for lib in ("dgboost", "xgboost")
        }
        for lib in ("dgboost", "xgboost"):
            rates = (r.get("shap_rows_per_s") or {}).get(lib), (one.get("shap_rows_per_s") or {}).get(lib)
            if all(rates) and rates[1]["median"]:
                entry[f"shap_{lib}"] = rates[0]["median"] / rates[1]["median"]
        out[f"{n}_over_1"] = entry
    return out


def table_lines(payload: dict) -> list[dict]:
    """The rows of docs/benchmarks.md's table (``make_table.py``) for a result payload."""
    lines = []
    data = "" if payload.get("dataset", "higgs") == "higgs" else f"{payload['dataset']}-like "
    for r in payload["results"]:
        t = r["train_s"]
        shape = (
            f"{data}{payload['rows']:,} x {payload['features']}, {payload['rounds']} rounds, depth 8, "
            f"{r['workers']} {payload['device']} worker(s)"
        )
        acc = r.get("test_accuracy")
        acc = f"; test accuracy {acc['dgboost']:.4f} vs {acc['xgboost']:.4f}" if acc else ""
        lines.append(
            {
                "what": f"dgboost.dask / xgboost.dask training time, {shape}",
                "ratio": r["train_ratio"],
                "note": f"lower is better; target <= 1.0; {t['dgboost']['median']:.2f} "
                f"({t['dgboost']['min']:.2f}-{t['dgboost']['max']:.2f}) vs {t['xgboost']['median']:.2f} "
                f"({t['xgboost']['min']:.2f}-{t['xgboost']['max']:.2f}) s from persisted arrays, "
                f"median of {payload['repeats']}{acc}",
            }
        )
        for variant, (what, how) in _VARIANT_ROWS.items():
            if f"train_ratio_{variant}" in r:
                v = t[f"dgboost_{variant}"]
                lines.append(
                    {
                        "what": f"dgboost.dask {what} / xgboost.dask training time, {shape}",
                        "ratio": r[f"train_ratio_{variant}"],
                        "note": f"lower is better; {how}; {v['median']:.2f} ({v['min']:.2f}-{v['max']:.2f}) s",
                    }
                )
        if "shap_rows_per_s" not in r:
            continue
        s = r["shap_rows_per_s"]
        engine = (
            "GPU kernel on the worker, CuPy blocks out"
            if payload["device"] == "cuda"
            else "CPU SHAP engine on the worker"
        )
        lines.append(
            {
                "what": f"dgboost.dask / xgboost.dask SHAP rows/s, {r.get('shap_rows', payload['shap_rows']):,} "
                f"rows, {r['workers']} {payload['device']} worker(s)",
                "ratio": r["shap_ratio"],
                "note": f"higher is better; target >= 2; {s['dgboost']['median']:,.0f} vs "
                f"{s['xgboost']['median']:,.0f} rows/s (dgboost: "
                f"{engine})",
            }
        )
    return lines


def _final_table(results: list[dict], repeats: int) -> list[str]:
    def cell(r, key, lib):
        return f"{r[key][lib]['median']:>15,.0f}" if key in r else f"{'-':>15}"

    lines = [
        f"\n{'workers':>7} | {'train dgboost':>13} | {'train xgboost':>13} | {'ratio':>5} | "
        f"{'SHAP dgb rows/s':>15} | {'SHAP xgb rows/s':>15} | {'ratio':>5} | accuracy dgb / xgb"
    ]
    for r in results:
        t, acc = r["train_s"], r.get("test_accuracy")
        lines.append(
            f"{r['workers']:>7} | {t['dgboost']['median']:>11.2f} s | {t['xgboost']['median']:>11.2f} s | "
            f"{r['train_ratio']:>5.2f} | {cell(r, 'shap_rows_per_s', 'dgboost')} | "
            f"{cell(r, 'shap_rows_per_s', 'xgboost')} | {r.get('shap_ratio', float('nan')):>5.2f} | "
            + (f"{acc['dgboost']:.4f} / {acc['xgboost']:.4f}" if acc else "-")
        )
    lines.append(f"(medians of {repeats}; ratios dgboost/xgboost: time, lower is better; rows/s, higher is better)")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--workers", default="1", help="comma-separated worker counts, e.g. 1,2,4")
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="higgs")
    parser.add_argument("--rows", type=int, default=40_000_000)
    parser.add_argument("--block-rows", type=int, default=2_500_000, help="rows per generated partition")
    parser.add_argument("--shap-rows", type=int, default=4_000_000, help="0: no SHAP")
    parser.add_argument(
        "--test-rows", type=int, default=1_000_000, help="held-out rows for both models' test accuracy (0: none)"
    )
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--host-waited",
        action="store_true",
        help="also time dgboost with the host waiting for every NCCL collective "
        "(dgboost.config nccl_stream_ordered=False)",
    )
    parser.add_argument(
        "--unshared",
        action="store_true",
        help="also time dgboost jobs that share nothing with the job before (as a first "
        "job on a cluster: NCCL communicator made, partitions checked)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the timed runs, one more dgboost job with profile=True (where its time went)",
    )
    parser.add_argument(
        "--profile-timed",
        action="store_true",
        help="run every timed dgboost job with profile=True (stages of each, the first job's "
        "included; the profile's waits for the device are in every timed figure)",
    )
    parser.add_argument(
        "--output",
        default=None,
        help="result JSON (default: results/scaling-<device>.json, scaling-<dataset>-<device>.json)",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    features = DATASETS[args.dataset]
    results = []
    payload = {
        "benchmark": "scaling",
        "device": args.device,
        "dataset": args.dataset,
        "rows": args.rows,
        "features": features,
        "shap_rows": args.shap_rows,
        "test_rows": args.test_rows,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "params": _params(args.device, args.rounds),
        "machine": machine(),
        "versions": versions("dgboost", "xgboost", "dask", "distributed", "numpy", "cupy", "dask_cuda"),
        "results": results,
    }
    name = f"scaling-{args.device}" if args.dataset == "higgs" else f"scaling-{args.dataset}-{args.device}"
    for w in [int(v) for v in args.workers.split(",")]:
        print(
            f"{w} worker(s), {args.dataset}-like {args.rows:,} x {features}, {args.rounds} rounds, "
            f"SHAP of {args.shap_rows:,} rows, accuracy on {args.test_rows:,}",
            flush=True,
        )
        results.append(run(args.device, w, args))
        # written after every worker count: a run stopped part-way keeps the counts it finished
        payload["table"] = table_lines(payload)
        payload["speedups"] = speedups(results)
        path = write_result(name, payload, args.output)
    print("\n".join(_final_table(results, args.repeats)))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
