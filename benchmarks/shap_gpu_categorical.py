"""GPU SHAP of a categorical model: dgboost vs XGBoost's GPU ``pred_contribs``, same trees.

An XGBoost model (``hist``, ``device="cuda"``, ``enable_categorical``; 200 trees of depth 8 by
default, the issue's case) is trained on an airline-like synthetic set: categorical carrier
(20 values), origin and destination (300 airports each, long-tailed) and tail number
(4,000 values, 5% missing) as category codes, with numeric month, hour and distance. Both
libraries explain the same CuPy rows, timed end to end to a device synchronise, median of
``--repeats`` after a warm-up:

* XGBoost: ``DMatrix(X, feature_types, enable_categorical=True)`` + ``predict(pred_contribs=True)``;
* dgboost: ``TreeExplainer(model, device="cuda")`` (import, path table with category sets,
  weight tables, upload) + ``contributions(X)``; and *warm*, with the explainer built.

The largest difference from XGBoost over 2,000 rows is recorded (float32 vs float64).
Results: ``benchmarks/results/shap_gpu_categorical.json``.

    python benchmarks/shap_gpu_categorical.py [--rows 1000000] [--rounds 200] [--depth 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, versions, write_result  # noqa: E402

# name: categories (0: numeric)
FEATURES = {"carrier": 20, "origin": 300, "dest": 300, "tailnum": 4000, "month": 0, "hour": 0, "distance": 0}


def airline_like(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 rows (codes for categorical columns, NaN missing) and a 0/1 delay label."""
    rng = np.random.default_rng(seed)
    cols = []
    effect = np.zeros(n)
    for name, k in FEATURES.items():
        if k:
            p = 1.0 / np.arange(1, k + 1) ** 1.1  # long-tailed: a few busy airports and carriers
            codes = rng.choice(k, size=n, p=p / p.sum()).astype(np.float64)
            weights = np.random.default_rng(k).normal(size=k) * 0.5
            effect += weights[codes.astype(np.int64)]
            if name == "tailnum":
                codes[rng.random(n) < 0.05] = np.nan
            cols.append(codes)
        else:
            scale = {"month": 12, "hour": 24, "distance": 3000}[name]
            col = np.floor(rng.random(n) * scale)
            effect += 0.3 * np.sin(col / scale * 6.28)
            cols.append(col)
    y = (effect + rng.normal(size=n) > 0.5).astype(np.float32)
    return np.stack(cols, axis=1).astype(np.float32), y


def _timed(fn, repeats: int) -> dict:
    import cupy

    fn()  # warm-up
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        cupy.cuda.Device().synchronize()
        times.append(time.perf_counter() - t0)
        del out
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "runs": times}


def run(rows: int, rounds: int, depth: int, train_rows: int, repeats: int) -> dict:
    import cupy
    import xgboost as xgb

    import dgboost as dg
    from dgboost.backend import _cuda_treeshap as gpu
    from dgboost.explain import treeshap

    types = ["c" if k else "q" for k in FEATURES.values()]
    X, y = airline_like(train_rows, 0)
    params = {"objective": "binary:logistic", "max_depth": depth, "tree_method": "hist", "device": "cuda"}
    dtrain = xgb.DMatrix(X, y, feature_types=types, enable_categorical=True)
    model = xgb.train(params, dtrain, rounds)
    host, _ = airline_like(rows, 1)
    Xd = cupy.asarray(host)

    def fresh():  # the path table, weight tables and uploads rebuilt
        gpu._clear_cache()
        treeshap._PROCESS_TABLES.clear()
        return dg.TreeExplainer(model, device="cuda")

    xgb_t = _timed(
        lambda: model.predict(xgb.DMatrix(Xd, feature_types=types, enable_categorical=True), pred_contribs=True),
        repeats,
    )
    dgb_t = _timed(lambda: fresh().contributions(Xd), repeats)
    explainer = dg.TreeExplainer(model, device="cuda")
    warm_t = _timed(lambda: explainer.contributions(Xd), repeats)
    m = min(rows, 2000)
    got = cupy.asnumpy(explainer.contributions(Xd[:m]))[:, 0]
    ref = model.predict(xgb.DMatrix(host[:m], feature_types=types, enable_categorical=True), pred_contribs=True)
    max_diff = float(np.abs(got - ref).max())
    rate = {k: rows / v["median"] for k, v in {"xgboost": xgb_t, "dgboost": dgb_t, "dgboost_warm": warm_t}.items()}
    line = {
        "what": f"SHAP values of a categorical model on the GPU, end to end, {rows:,} x {len(FEATURES)} "
        f"(4 categorical, up to 4,000 categories), XGBoost model depth {depth}, {rounds} trees "
        f"(vs XGBoost {xgb.__version__})",
        "ratio": rate["dgboost"] / rate["xgboost"],
        "note": f"higher is better; {rate['dgboost']:,.0f} vs {rate['xgboost']:,.0f} rows/s (warm "
        f"{rate['dgboost_warm']:,.0f}); median of {repeats}; max |diff| vs XGBoost {max_diff:.1e}",
    }
    print(line["what"], "\n ", line["note"], f"ratio {line['ratio']:.2f}x", flush=True)
    return {
        "rows": rows,
        "rounds": rounds,
        "depth": depth,
        "path_table": {
            "elements": int(explainer.table.n_elements),
            "category_pool_bytes": int(explainer.table.cat_pool.nbytes) if explainer.table.has_categorical else 0,
        },
        "seconds": {"xgboost": xgb_t, "dgboost": dgb_t, "dgboost_warm": warm_t},
        "rows_per_s": rate,
        "max_abs_difference_vs_xgboost": max_diff,
        "table": line,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--train-rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    result = run(args.rows, args.rounds, args.depth, args.train_rows, args.repeats)
    payload = {
        "benchmark": "shap_gpu_categorical",
        "repeats": args.repeats,
        "machine": machine(),
        "versions": versions("dgboost", "xgboost", "cupy"),
        "results": [result],
        "table": [result["table"]],
    }
    print(f"wrote {write_result('shap_gpu_categorical', payload, args.output)}")


if __name__ == "__main__":
    main()
