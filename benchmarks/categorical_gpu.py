"""dgboost vs XGBoost 3.4.1 on one GPU with categorical features: training and SHAP.

Training: the airline-like table of :func:`dgboost.datasets.make_airline_like` (issue 29),
``--rows`` rows (20M by default): categorical ``carrier`` (20 carriers), ``origin`` and
``dest`` (``--airports`` airports, 300 by default, Zipf-like long-tailed, so hundreds of rare
airports), numeric ``month``, ``day_of_week``, ``dep_hour``, ``distance`` and
``crs_dep_time``; the label is a delay from per-airport and per-carrier effects, a carrier x
origin interaction, hour, month, distance and noise. It is drawn on the host and copied to the
device once (:func:`make_airline`). Both libraries get the same CuPy arrays with the same
feature types (``c`` for the three categorical columns; XGBoost with
``enable_categorical=True``) and the same parameters
(binary:logistic, eta 0.1, max_depth 8, max_bin 256, ``max_cat_to_onehot`` 4 and
``max_cat_threshold`` 64, XGBoost's defaults), ``--rounds`` rounds; 10% more rows are held
out for the AUC.

For each library, after a warm-up run on a slice (kernel loading, dgboost's NVRTC
compilation), ``--repeats`` runs, the libraries taking turns (the order flipping every
repeat):

* whole run: DMatrix/QuantileDMatrix construction plus training, to a device synchronise;
* per round: the median of the round times (a callback stamps each round's end after a
  device synchronise), leaving out the first ``--warm-rounds``;
* peak device memory above the level before the run, by one measure for both libraries:
  ``cudaMemGetInfo`` sampled at every round's end (XGBoost allocates outside CuPy);
  dgboost's CuPy pool is emptied before each run so that its cached blocks count.

SHAP (``--shap-rows``, 1M by default): one categorical model of 200 trees of depth 8 trained
by dgboost on the table, explained on the GPU by dgboost (``Booster.predict(...,
pred_contribs=True)`` on CuPy rows) and by XGBoost (the same model through
``Booster.to_xgboost()``, ``predict(pred_contribs=True)`` with ``device=cuda``), rows/s end
to end (DMatrix of device rows to values on the device), median of ``--repeats`` after a
warm-up; the two results' largest difference is reported too.

Results: medians with (min, max) and every run, ratios dgboost / XGBoost, hardware and
versions, written as JSON to the path given (``--out``); a short table is printed.

    python benchmarks/categorical_gpu.py --out benchmarks/results/categorical_gpu.json
    python benchmarks/categorical_gpu.py --rows 1000000 --rounds 50 --repeats 1 --out /tmp/c.json   # a quick look
    python benchmarks/categorical_gpu.py --device cpu --rows 20000 --rounds 8 --shap-rows 2000 --shap-trees 10 \\
        --repeats 1 --out /tmp/c.json   # the harness, anywhere
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_result  # noqa: E402
from train_gpu import Device, MiB, _round_clock, _spread, held_out_metric  # noqa: E402

LIBRARIES = ("dgboost", "xgboost")
# with --libraries ...,dgboost-numeric: dgboost on the same codes typed as numbers ("q"), so that
# device memory per row of categorical features can be compared with numeric ones
NUMERIC = "dgboost-numeric"
FEATURES = ["month", "day_of_week", "dep_hour", "distance", "crs_dep_time", "carrier", "origin", "dest"]
TYPES = ["q", "q", "q", "q", "q", "c", "c", "c"]
N_CARRIERS = 20


def make_airline(xp, n_rows: int, n_airports: int = 300, seed: int = 0):
    """The airline-like table of :func:`dgboost.datasets.make_airline_like` on ``xp`` (numpy
    or cupy): float32 (n, 8) in :data:`FEATURES` order (the categorical columns as their codes)
    and float32 (n,) labels (1 = delayed). Drawn on the host, then copied to the device once."""
    from dgboost.datasets import make_airline_like

    frame, y = make_airline_like(n_rows, n_airports=n_airports, n_carriers=N_CARRIERS, seed=seed)
    X = np.empty((n_rows, len(FEATURES)), np.float32)
    for j, name in enumerate(FEATURES):
        col = frame[name]
        X[:, j] = col.cat.codes.to_numpy(np.float32) if TYPES[j] == "c" else col.to_numpy(np.float32)
    X[X == -1] = np.nan  # a missing category's code (none are drawn)
    del frame
    return xp.asarray(X), xp.asarray(y.astype(np.float32))


def _params(lib: str, device: Device, args) -> dict:
    p = {
        "objective": "binary:logistic",
        "eta": 0.1,
        "max_depth": args.max_depth,
        "max_bin": 256,
        "max_cat_to_onehot": 4,
        "max_cat_threshold": 64,
        "seed": 0,
        "device": device.name,
    }
    if not device.cuda:
        p["nthread"] = args.threads
    if lib == "xgboost":
        p["tree_method"] = "hist"
    return p


def train_once(lib: str, data, rounds: int, device: Device, args) -> dict:
    """Train ``lib`` once; whole-run and per-round seconds, peak memory, held-out AUC."""
    Xtr, ytr, Xte, yte = data
    params = _params(lib, device, args)
    device.reset()
    types = ["q"] * len(TYPES) if lib == NUMERIC else TYPES
    if lib.startswith("dgboost"):
        import dgboost as dg

        clock = _round_clock(dg.TrainingCallback, device)
        start = time.perf_counter()
        dtrain = dg.DMatrix(Xtr, ytr, feature_names=FEATURES, feature_types=types)
        booster = dg.train(params, dtrain, rounds, verbose_eval=False, callbacks=[clock])
    else:
        import xgboost as xgb

        clock = _round_clock(xgb.callback.TrainingCallback, device)
        start = time.perf_counter()
        dtrain = xgb.QuantileDMatrix(
            Xtr, ytr, feature_names=FEATURES, feature_types=TYPES, enable_categorical=True, max_bin=256
        )
        booster = xgb.train(params, dtrain, rounds, callbacks=[clock])
    device.sync()
    total = time.perf_counter() - start
    device.sample()
    peak, _ = device.peaks()
    out = {"total_s": total, "per_round_s": clock.per_round(args.warm_rounds), "peak_memory_bytes": peak}
    del dtrain
    if lib.startswith("dgboost"):
        import dgboost as dg

        pred = booster.predict(dg.DMatrix(Xte, feature_names=FEATURES, feature_types=types))
    else:
        import xgboost as xgb

        pred = booster.predict(xgb.DMatrix(Xte, feature_names=FEATURES, feature_types=TYPES, enable_categorical=True))
    out["auc"] = held_out_metric("binary", yte, pred)
    out["categorical_splits"] = _categorical_splits(lib, booster)
    del booster, pred
    device.reset()
    return out


def _categorical_splits(lib: str, booster) -> int:
    """How many splits of the model are categorical (a check that the case is categorical)."""
    if lib.startswith("dgboost"):
        arrays = booster.ensemble.categorical_kernel_arrays()
        return 0 if arrays is None else int((arrays[0] == 1).sum())
    frame = booster.trees_to_dataframe()
    return int(frame["Category"].notna().sum()) if "Category" in frame else 0


def bench_training(data, args, device: Device) -> dict:
    runs: dict[str, list] = {lib: [] for lib in args.libraries}
    errors: dict[str, str] = {}
    n_warm = min(50_000, int(data[0].shape[0]))
    warm = (data[0][:n_warm], data[1][:n_warm], data[2], data[3])
    for lib in args.libraries:
        try:
            train_once(lib, warm, args.warm_rounds + 1, device, args)
        except Exception as exc:  # noqa: BLE001 - a failing library is reported, the rest goes on
            errors[lib] = f"{type(exc).__name__}: {exc}"
            print(f"  {lib} failed: {errors[lib]}", flush=True)
    for rep in range(args.repeats):
        for lib in args.libraries if rep % 2 == 0 else list(reversed(args.libraries)):
            if lib in errors:
                continue
            try:
                r = train_once(lib, data, args.rounds, device, args)
            except Exception as exc:  # noqa: BLE001
                errors[lib] = f"{type(exc).__name__}: {exc}"
                print(f"  {lib} failed: {errors[lib]}", flush=True)
                continue
            runs[lib].append(r)
            mem = "" if r["peak_memory_bytes"] is None else f", peak {r['peak_memory_bytes'] / MiB:.0f} MiB"
            print(
                f"  [{rep}] {lib:15s} {r['per_round_s'] * 1e3:9.2f} ms/round {r['total_s']:8.2f} s total, "
                f"AUC {r['auc']:.4f}, {r['categorical_splits']} categorical splits{mem}",
                flush=True,
            )
    out = {"rounds": args.rounds, "params": {lib: _params(lib, device, args) for lib in args.libraries}}
    for lib in args.libraries:
        rs = runs[lib]
        out[lib] = {
            "per_round_s": _spread([r["per_round_s"] for r in rs]),
            "total_s": _spread([r["total_s"] for r in rs]),
            "auc": _spread([r["auc"] for r in rs]),
            "peak_memory_bytes": _spread([r["peak_memory_bytes"] for r in rs]),
            "categorical_splits": rs[-1]["categorical_splits"] if rs else None,
            "error": errors.get(lib),
        }
    a, b = out.get("dgboost"), out.get("xgboost")
    if a and b and a["per_round_s"] and b["per_round_s"]:
        ratio = {
            "per_round": a["per_round_s"]["median"] / b["per_round_s"]["median"],
            "total": a["total_s"]["median"] / b["total_s"]["median"],
        }
        if a["peak_memory_bytes"] and b["peak_memory_bytes"] and b["peak_memory_bytes"]["max"]:
            ratio["peak_memory"] = a["peak_memory_bytes"]["max"] / b["peak_memory_bytes"]["max"]
        out["ratios_dgboost_over_xgboost"] = ratio
    n = out.get(NUMERIC)
    if a and n and a["peak_memory_bytes"] and n["peak_memory_bytes"]:
        out["peak_memory_categorical_over_numeric"] = a["peak_memory_bytes"]["max"] / n["peak_memory_bytes"]["max"]
    return out


def bench_shap(data, args, device: Device) -> dict:
    """rows/s of GPU SHAP of one dgboost categorical model, by dgboost and by XGBoost."""
    import xgboost as xgb

    import dgboost as dg

    Xtr, ytr, Xte, _ = data
    params = {**_params("dgboost", device, args), "max_depth": 8}
    model = dg.train(params, dg.DMatrix(Xtr, ytr, feature_names=FEATURES, feature_types=TYPES), args.shap_trees)
    xmodel = model.to_xgboost()
    xmodel.set_param({"device": device.name})
    reps = max(1, -(-args.shap_rows // int(Xte.shape[0])))
    rows = device.xp.concatenate([Xte] * reps)[: args.shap_rows]

    def dgboost_run():
        return model.predict(dg.DMatrix(rows, feature_names=FEATURES, feature_types=TYPES), pred_contribs=True)

    def xgboost_run():
        d = xgb.DMatrix(rows, feature_names=FEATURES, feature_types=TYPES, enable_categorical=True)
        return xmodel.predict(d, pred_contribs=True)

    out = {"trees": model.ensemble.n_trees, "max_depth": 8, "rows": int(rows.shape[0])}
    values = {}
    for lib, fn in (("dgboost", dgboost_run), ("xgboost", xgboost_run)):
        fn()  # warm-up (kernels, the model's path table on the device)
        times = []
        for _ in range(args.repeats):
            device.sync()
            start = time.perf_counter()
            v = fn()
            device.sync()
            times.append(time.perf_counter() - start)
        values[lib] = np.asarray(v.get() if hasattr(v, "get") else v, np.float64)
        out[lib] = {"seconds": _spread(times), "rows_per_s": _spread([out["rows"] / t for t in times])}
        print(f"  SHAP {lib:8s} {out['rows'] / float(np.median(times)):,.0f} rows/s", flush=True)
    out["max_abs_difference"] = float(np.max(np.abs(values["dgboost"] - values["xgboost"])))
    out["ratio_rows_per_s_dgboost_over_xgboost"] = (
        out["dgboost"]["rows_per_s"]["median"] / out["xgboost"]["rows_per_s"]["median"]
    )
    return out


def table(result: dict) -> list[str]:
    t = result.get("training", {})
    lines = [f"{'':10s} {'ms/round':>10s} {'whole s':>9s} {'peak MiB':>9s} {'AUC':>7s} {'cat splits':>10s}"]
    for lib in (*LIBRARIES, NUMERIC):
        r = t.get(lib)
        if not r or not r["per_round_s"]:
            continue
        mem = r["peak_memory_bytes"]["max"] / MiB if r["peak_memory_bytes"] else float("nan")
        lines.append(
            f"{lib:15s} {r['per_round_s']['median'] * 1e3:10.2f} {r['total_s']['median']:9.2f} {mem:9.0f} "
            f"{r['auc']['median']:7.4f} {r['categorical_splits']!s:>10s}"
        )
    ratios = t.get("ratios_dgboost_over_xgboost")
    if ratios:
        lines.append("ratio dgboost/xgboost: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    if "peak_memory_categorical_over_numeric" in t:
        ratio = t["peak_memory_categorical_over_numeric"]
        lines.append(f"dgboost peak memory, categorical / numeric typing: {ratio:.3f}")
    s = result.get("shap")
    if s and "dgboost" in s:
        lines.append(
            f"SHAP {s['trees']} trees depth {s['max_depth']}, {s['rows']:,} rows: dgboost "
            f"{s['dgboost']['rows_per_s']['median']:,.0f} rows/s, xgboost {s['xgboost']['rows_per_s']['median']:,.0f} "
            f"rows/s, ratio {s['ratio_rows_per_s_dgboost_over_xgboost']:.2f} (max |diff| {s['max_abs_difference']:.2g})"
        )
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="where to write the JSON results")
    ap.add_argument("--rows", type=int, default=20_000_000, help="training rows (10%% more are held out)")
    ap.add_argument("--airports", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--max-depth", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warm-rounds", type=int, default=5, help="rounds left out of the per-round median")
    ap.add_argument("--libraries", default=",".join(LIBRARIES))
    ap.add_argument("--shap-rows", type=int, default=1_000_000, help="0: no SHAP benchmark")
    ap.add_argument("--shap-trees", type=int, default=200)
    ap.add_argument("--device", default="cuda", help="cuda (CuPy data) or cpu (NumPy data: a harness check)")
    ap.add_argument("--threads", type=int, default=0, help="nthread on --device cpu (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    args.libraries = [lib for lib in args.libraries.split(",") if lib]
    device = Device(args.device)
    hardware = device.hardware()
    print(f"{hardware['name']} ({args.device}): {args.rows:,} rows, {args.rounds} rounds, {args.repeats} repeats")
    n_test = max(1000, args.rows // 9)
    X, y = make_airline(device.xp, args.rows + n_test, args.airports, args.seed)
    data = (X[: args.rows], y[: args.rows], X[args.rows :], y[args.rows :])
    result = {
        "hardware": hardware,
        "versions": device.versions(),
        "data": {
            "rows_train": args.rows,
            "rows_test": n_test,
            "features": dict(zip(FEATURES, TYPES)),
            "carriers": N_CARRIERS,
            "airports": args.airports,
            "positive_rate": float(device.xp.mean(y)),
        },
        "training": bench_training(data, args, device),
    }
    if args.shap_rows > 0 and set(LIBRARIES) <= set(args.libraries):
        try:
            result["shap"] = bench_shap(data, args, device)
        except Exception as exc:  # noqa: BLE001 - reported, the training results still count
            result["shap"] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"  SHAP failed: {result['shap']['error']}", flush=True)
    path = write_result("categorical_gpu", result, args.out)
    print("\n".join(table(result)))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
