"""Exact greedy split search: dgboost's GPU ``exact`` vs XGBoost 3.4.1 ``exact`` on every CPU
core vs dgboost's GPU ``hist`` (issue 30; the 2017 GPU XGBoost paper's data sets, shaped).

======================  =============================  ==========================  =========
case                    shape (training rows)          task                        metric
======================  =============================  ==========================  =========
``higgs1m``             1M x 28                        binary:logistic             AUC
``higgs10m``            10M x 28                       binary:logistic             AUC
``year``                515K x 90                      reg:squarederror            RMSE
``bosch``               1M x 968, 80% missing          binary:logistic             AUC
``ltr``                 473K x 700, 50% missing,       rank:ndcg                   NDCG@10
                        ~24 documents a query
======================  =============================  ==========================  =========

Data is drawn on the host with NumPy (seeded; labels a fixed random linear plus nonlinear
function of the features), 10% more rows held out for the test metric (computed here with
NumPy/scikit-learn, not by either library). Parameters: ``max_depth`` 6, ``eta`` 0.1,
``min_child_weight`` 1. For each case and method, ``--repeats`` runs; a training callback
stamps the end of every round (after a device synchronise); a run's time per round is the
median of its rounds after the first (XGBoost's first round builds its sorted columns,
dgboost's presorts before training), and the report gives the median over the repeats with
(min, max). XGBoost CPU ``exact`` runs fewer rounds (``--xgb-rounds``): time per round is
the measure; the test metric of every method is also reported at the same round count
(``--metric-rounds`` more rounds of each, once, where asked).

``--modes`` also times each level of dgboost's GPU exact in either scan mode (interleaved,
sorted), forced at every depth (``dgboost.testing.exact_modes``), to choose
``SORTED_FROM_DEPTH`` in dgboost/backend/_cuda_exact.py. ``--profile`` times every kernel
launch, CuPy scan/sort and engine step of every level on Higgs-like 1M (CUDA events, wrapped
from here: see :func:`profile_levels`), to show where a level's time goes. ``higgs10m`` runs
one repeat of 4 rounds (``max_repeats``, ``max_rounds``) so that the whole run fits one call.

    python benchmarks/exact_greedy.py --out results.json                # the full run (H200: ~8 min)
    python benchmarks/exact_greedy.py --scale 0.01 --repeats 1 --device cpu --out /tmp/x.json   # anywhere
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import versions, write_result  # noqa: E402

CASES = {
    "higgs1m": dict(rows=1_000_000, features=28, task="binary", missing=0.0),
    # one repeat of 4 rounds (XGBoost exact: ~6 s a round on 16 cores): inside a 10-minute call
    "higgs10m": dict(rows=10_000_000, features=28, task="binary", missing=0.0, max_repeats=3, max_rounds=4),
    "year": dict(rows=515_000, features=90, task="regression", missing=0.0),
    "bosch": dict(rows=1_000_000, features=968, task="binary", missing=0.8),
    "ltr": dict(rows=473_000, features=700, task="ranking", missing=0.5),
}
PARAMS = {"max_depth": 6, "eta": 0.1, "min_child_weight": 1.0}
OBJECTIVE = {"binary": "binary:logistic", "regression": "reg:squarederror", "ranking": "rank:ndcg"}


# -- data -------------------------------------------------------------------------------------
def make_data(case: dict, scale: float, seed: int = 0):
    """(X, y, group sizes or None) with 10% more rows for the test split; float32 X, NaN missing."""
    rng = np.random.default_rng(seed)
    n = max(200, int(case["rows"] * scale * 1.1))
    f = case["features"]
    X = rng.standard_normal((n, f), dtype=np.float32)
    # a few discrete columns (ties, as real tables have)
    X[:, : max(1, f // 7)] = np.round(X[:, : max(1, f // 7)] * 3)
    coef = rng.standard_normal(min(f, 40)).astype(np.float32)
    k = coef.size
    z = X[:, :k] @ coef / np.sqrt(k) + np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2 % f] * 0.5
    if case["missing"] > 0:
        X[rng.random((n, f), dtype=np.float32) < case["missing"]] = np.nan
    z = z + rng.standard_normal(n, dtype=np.float32) * 0.5
    group = None
    if case["task"] == "binary":
        y = (z > 0).astype(np.float32)
    elif case["task"] == "regression":
        y = z.astype(np.float32)
    else:
        y = np.digitize(z, np.quantile(z, [0.5, 0.75, 0.9, 0.97])).astype(np.float32)  # relevance 0..4
        sizes = rng.integers(8, 41, size=n // 8)
        sizes = sizes[np.cumsum(sizes) <= n]
        sizes[-1] += n - sizes.sum()
        group = sizes
    return X, y, group


def split(X, y, group):
    """Training and test parts (the last ~10% of rows; whole query groups for ranking)."""
    n = X.shape[0]
    cut = int(n / 1.1)
    if group is not None:
        bounds = np.cumsum(group)
        g = int(np.searchsorted(bounds, cut))
        cut = int(bounds[g])
        return (X[:cut], y[:cut], group[: g + 1]), (X[cut:], y[cut:], group[g + 1 :])
    return (X[:cut], y[:cut], None), (X[cut:], y[cut:], None)


def metric(task: str, y, pred, group) -> tuple[str, float]:
    if task == "binary":
        from sklearn.metrics import roc_auc_score

        return "auc", float(roc_auc_score(y, pred))
    if task == "regression":
        return "rmse", float(np.sqrt(np.mean((pred - y) ** 2)))
    scores, start = [], 0
    for size in group:
        yy, pp = y[start : start + size], pred[start : start + size]
        start += size
        ideal = np.sort(yy)[::-1][:10]
        disc = 1 / np.log2(np.arange(2, 12))
        best = np.sum((2**ideal - 1) * disc[: ideal.size])
        got = yy[np.argsort(-pp, kind="stable")][:10]
        scores.append(np.sum((2**got - 1) * disc[: got.size]) / best if best > 0 else 1.0)
    return "ndcg@10", float(np.mean(scores))


# -- runs -------------------------------------------------------------------------------------
def _sync(device: str):
    if device == "cuda":
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


def _clock(base, device):
    class Clock(base):
        def __init__(self):
            super().__init__()
            self.stamps = []

        def before_training(self, model):
            _sync(device)
            self.stamps.append(time.perf_counter())
            return model

        def after_iteration(self, model, epoch, evals_log):
            _sync(device)
            self.stamps.append(time.perf_counter())
            return False

    return Clock()


def dmatrix(library: str, train, nthread: int):
    """The training DMatrix of ``library`` (made once per case: repeats time training only)."""
    X, y, group = train
    if library == "dgboost":
        import dgboost as dg

        return dg.DMatrix(X, label=y, group=group)
    import xgboost as xgb

    d = xgb.DMatrix(X, label=y, nthread=nthread)
    if group is not None:
        d.set_group(group)
    return d


def run_dgboost(dtrain, test, task, method, device, rounds, same_rounds):
    import dgboost as dg

    params = {**PARAMS, "objective": OBJECTIVE[task], "tree_method": method, "device": device}
    clock = _clock(dg.callback.TrainingCallback, device)
    start = time.perf_counter()
    booster = dg.train(params, dtrain, rounds, callbacks=[clock])
    total = time.perf_counter() - start
    dtest = dg.DMatrix(test[0])
    pred = booster.predict(dtest)
    # at XGBoost's round count too: the metrics compared at the same number of trees
    early = booster.predict(dtest, iteration_range=(0, min(same_rounds, rounds)))
    return clock.stamps, total, metric(task, test[1], pred, test[2]) + metric(task, test[1], early, test[2])[1:]


def run_xgboost(dtrain, test, task, rounds, nthread):
    import xgboost as xgb

    params = {**PARAMS, "objective": OBJECTIVE[task], "tree_method": "exact", "nthread": nthread}
    clock = _clock(xgb.callback.TrainingCallback, "cpu")
    start = time.perf_counter()
    booster = xgb.train(params, dtrain, rounds, callbacks=[clock])
    total = time.perf_counter() - start
    pred = booster.predict(xgb.DMatrix(test[0], nthread=nthread))
    return clock.stamps, total, metric(task, test[1], pred, test[2])


def summarise(runs: list) -> dict:
    per_round = [float(np.median(np.diff(s)[1:])) if len(s) > 2 else float(np.diff(s)[-1]) for s, _, _ in runs]
    return {
        "per_round_s": {"median": float(np.median(per_round)), "min": min(per_round), "max": max(per_round)},
        "per_round_each_repeat_s": per_round,
        "total_s": [t for _, t, _ in runs],
        "metric": runs[0][2][0],
        "test_metric": runs[0][2][1],
        "test_metric_at_xgboost_rounds": runs[0][2][-1],
        "rounds": len(runs[0][0]) - 1,
    }


def level_times(train, device, depth, rounds):
    """Seconds per level of dgboost's GPU exact in each forced scan mode (median over rounds)."""
    import dgboost as dg
    from dgboost.backend import _cuda_exact
    from dgboost.testing.exact_modes import exact_scan_mode

    X, y, _ = train
    out = {}
    original = _cuda_exact.CUDAExactEngine.best_splits
    for mode in ("interleaved", "sorted"):
        times: dict[int, list] = {}

        def timed(self, *args, times=times, **kwargs):
            _sync(device)
            start = time.perf_counter()
            result = original(self, *args, **kwargs)
            _sync(device)
            times.setdefault(self.depth - 1, []).append(time.perf_counter() - start)
            return result

        _cuda_exact.CUDAExactEngine.best_splits = timed
        try:
            with exact_scan_mode(mode):
                params = {**PARAMS, "max_depth": depth, "tree_method": "exact", "device": device}
                dg.train(params, dg.DMatrix(X, y), rounds)
        finally:
            _cuda_exact.CUDAExactEngine.best_splits = original
        out[mode] = {str(d): float(np.median(v)) for d, v in sorted(times.items())}
    faster = [int(d) for d in out["sorted"] if out["sorted"][d] < out["interleaved"].get(d, np.inf)]
    out["first_depth_where_sorted_is_faster"] = min(faster) if faster else None
    return out


def profile_levels(train, device, depth, rounds):
    """GPU milliseconds of dgboost's GPU exact per level: each kernel launch and each CuPy
    scan/sort (CUDA events around them), each engine step (events around it: its span on the
    GPU's clock, idle gaps included) and the host's wall time of a level's split search; the
    median over the trees after the first. Wraps the engine's methods from here: no hooks in
    dgboost. Per tree: ``leaf_rows`` and ``begin_tree``; ``launches`` counts kernels and CuPy
    calls a level."""
    import cupy

    import dgboost as dg
    from dgboost.backend import _cuda_exact

    engine = _cuda_exact.CUDAExactEngine
    marks = []  # (tree, depth, name, start event, end event or seconds)
    tree = [-1]
    saved = {}

    def events_around(call, name, depth_of):
        def wrapped(self, *args, **kwargs):
            depth = depth_of(self)
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            try:
                return call(self, *args, **kwargs)
            finally:
                end.record()
                marks.append((tree[0], depth, name(args) if callable(name) else name, start, end))

        return wrapped

    def patch(attr, name, depth_of=lambda self: self.depth):
        saved[attr] = getattr(engine, attr)
        setattr(engine, attr, events_around(saved[attr], name, depth_of))

    level = [-1]  # the level (or -1: the tree's end) a launch or CuPy call counts to

    def at(depth):
        level[0] = depth
        return depth

    patch("_launch", lambda args: f"kernel {args[0]}", lambda self: level[0])
    patch("_layout_for", "step: layout (partition or sort)")
    patch("_sorted", "step: sorted level (layout, pairs, scans, candidates)")
    patch("_interleaved", "step: interleaved level")
    patch("apply_splits", "step: apply_splits", lambda self: at(self.depth - 1))
    patch("leaf_rows", "tree: leaf_rows", lambda self: at(-1))
    best = engine.best_splits

    def best_splits(self, *args, **kwargs):
        depth, start = at(self.depth), time.perf_counter()
        result = best(self, *args, **kwargs)  # its read of the decisions synchronises
        marks.append((tree[0], depth, "host: best_splits wall (ms)", None, (time.perf_counter() - start) * 1e3))
        return result

    begin = engine.begin_tree

    def begin_tree(self, *args, **kwargs):
        tree[0] += 1
        return begin(self, *args, **kwargs)

    library = {name: getattr(cupy, name) for name in ("cumsum", "argsort")}

    def timed_library(name):
        call = library[name]

        def wrapped(*args, **kwargs):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            out = call(*args, **kwargs)
            end.record()
            marks.append((tree[0], level[0], f"cupy {name}", start, end))
            return out

        return wrapped

    engine.best_splits, engine.begin_tree = best_splits, begin_tree
    for name in library:
        setattr(cupy, name, timed_library(name))
    try:
        X, y, _ = train
        params = {**PARAMS, "max_depth": depth, "tree_method": "exact", "device": device}
        dg.train(params, dg.DMatrix(X, y), rounds)
        cupy.cuda.runtime.deviceSynchronize()
    finally:
        for attr, call in saved.items():
            setattr(engine, attr, call)
        engine.best_splits, engine.begin_tree = best, begin
        for name, call in library.items():
            setattr(cupy, name, call)
    per: dict = {}
    counts: dict = {}
    for t, d, name, start, end in marks:
        if t < 1:
            continue  # the first tree: compilation and the pool's first allocations
        ms = end if start is None else cupy.cuda.get_elapsed_time(start, end)
        key = (t, d, name)
        per[key] = per.get(key, 0.0) + ms
        if name.startswith(("kernel", "cupy")):
            counts[(t, d)] = counts.get((t, d), 0) + 1
    out: dict = {"per_level_ms": {}, "launches_per_level": {}}
    for d in sorted({d for _, d, _ in per}):
        names = sorted({n for _, dd, n in per if dd == d})
        level = {n: float(np.median([v for (t, dd, nn), v in per.items() if dd == d and nn == n])) for n in names}
        out["per_level_ms"]["tree" if d < 0 else str(d)] = level
        if d >= 0:
            out["launches_per_level"][str(d)] = float(np.median([c for (t, dd), c in counts.items() if dd == d]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON results path")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of each case's rows")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=8, help="dgboost rounds per repeat (first untimed)")
    ap.add_argument("--xgb-rounds", type=int, default=2, help="XGBoost exact rounds per repeat (first untimed)")
    ap.add_argument("--xgb-repeats", type=int, default=None, help="XGBoost repeats (default --repeats)")
    ap.add_argument("--device", default="cuda", help="dgboost's device (cpu: check the harness anywhere)")
    ap.add_argument("--nthread", type=int, default=os.cpu_count())
    ap.add_argument("--methods", default="dgboost-exact,xgboost-exact,dgboost-hist")
    ap.add_argument("--modes", action="store_true", help="also time every level in each GPU scan mode")
    ap.add_argument("--modes-depth", type=int, default=8)
    ap.add_argument(
        "--profile", action="store_true", help="also time every kernel and step of each level (CUDA events)"
    )
    args = ap.parse_args(argv)
    methods = args.methods.split(",")
    results = {}
    if args.modes:
        train, _ = split(*make_data(CASES["higgs1m"], args.scale))
        results["scan_modes_higgs1m"] = level_times(train, args.device, args.modes_depth, 2)
        print(f"scan modes: {json.dumps(results['scan_modes_higgs1m'])}", flush=True)
        _write(args, results)
    if args.profile and args.device == "cuda":
        train, _ = split(*make_data(CASES["higgs1m"], args.scale))
        try:  # a diagnostic: its failure must not cost the run its measurements
            results["profile_higgs1m"] = profile_levels(train, args.device, args.modes_depth, 3)
            _print_profile(results["profile_higgs1m"])
        except Exception as error:  # noqa: BLE001
            results["profile_higgs1m"] = {"error": repr(error)}
            print(f"profile failed: {error!r}", flush=True)
        _write(args, results)
    for name in args.cases.split(","):
        case = CASES[name]
        data_start = time.perf_counter()
        train, test = split(*make_data(case, args.scale))
        print(f"{name}: {train[0].shape} ({time.perf_counter() - data_start:.1f}s data)", flush=True)
        results[name] = {"shape": list(train[0].shape), "missing": case["missing"], "task": case["task"]}
        # a big case's caps (rounds, repeats) keep the whole run inside one call's time limit
        rounds = min(args.rounds, case.get("max_rounds", args.rounds))
        for method in methods:
            runs = []
            repeats = args.xgb_repeats or args.repeats if method == "xgboost-exact" else args.repeats
            repeats = min(repeats, case.get("max_repeats", repeats))
            dtrain = dmatrix(method.split("-")[0], train, args.nthread)
            for _ in range(repeats):
                if method == "xgboost-exact":
                    runs.append(run_xgboost(dtrain, test, case["task"], args.xgb_rounds, args.nthread))
                else:
                    tree_method = method.split("-")[1]
                    runs.append(
                        run_dgboost(dtrain, test, case["task"], tree_method, args.device, rounds, args.xgb_rounds)
                    )
            del dtrain
            results[name][method] = summarise(runs)
            s = results[name][method]
            print(
                f"  {method:14s} {s['per_round_s']['median']:.4f}s/round  {s['metric']} {s['test_metric']:.5f} "
                f"({s['test_metric_at_xgboost_rounds']:.5f} at {args.xgb_rounds} rounds)",
                flush=True,
            )
        base = results[name].get("xgboost-exact", {}).get("per_round_s", {}).get("median")
        ours = results[name].get("dgboost-exact", {}).get("per_round_s", {}).get("median")
        if base and ours:
            results[name]["speedup_gpu_exact_over_xgboost_cpu_exact"] = base / ours
        path = _write(args, results)  # after every case: a run stopped early keeps what it measured
    path = _write(args, results)
    print_table(results)
    print(f"wrote {path}")
    return 0


def _write(args, results: dict) -> Path:
    payload = {"args": vars(args), "params": PARAMS, "versions": versions("dgboost", "xgboost", "numpy")}
    return write_result("exact_greedy", {**payload, "cases": results}, args.out)


def _print_profile(profile: dict) -> None:
    print("profile (GPU ms per level, median over trees 2..; steps include their kernels):", flush=True)
    for level, items in profile["per_level_ms"].items():
        launches = profile["launches_per_level"].get(level)
        print(f"  level {level}" + (f" ({launches:.0f} launches)" if launches is not None else ""))
        for name, ms in sorted(items.items(), key=lambda kv: -kv[1]):
            print(f"    {ms:9.3f}  {name}")


def print_table(results: dict) -> None:
    head = f"{'case':10s} {'method':14s} {'s/round (min-max)':>26s} {'metric':>18s} {'same rounds':>11s}"
    print(f"\n{head} {'speed-up':>9s}")
    for name, r in results.items():
        if name.startswith("profile"):
            continue  # printed when measured
        if name.startswith("scan_modes"):
            print(f"\nscan modes (s per level): {json.dumps(r)}")
            continue
        for method in ("dgboost-exact", "xgboost-exact", "dgboost-hist"):
            if method not in r:
                continue
            s = r[method]
            pr = s["per_round_s"]
            speed = r.get("speedup_gpu_exact_over_xgboost_cpu_exact") if method == "xgboost-exact" else None
            span = f"{pr['median']:.4f} ({pr['min']:.4f}-{pr['max']:.4f})"
            print(
                f"{name:10s} {method:14s} {span:>26s} {s['metric']:>8s} {s['test_metric']:9.5f} "
                f"{s['test_metric_at_xgboost_rounds']:11.5f} {'' if speed is None else f'{speed:8.1f}x'}"
            )


if __name__ == "__main__":
    raise SystemExit(main())
