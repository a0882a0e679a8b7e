"""Quick single-threaded CPU TreeSHAP timing: dgboost ``path`` vs ``table`` vs XGBoost.

Trains an XGBoost model (100 trees, depth 8, 28 features, synthetic HIGGS-like data),
imports it, and times SHAP values on ``--rows`` rows with one thread each (Numba
``set_num_threads(1)``, XGBoost ``nthread=1``), after a warm-up; median of ``--repeats``.

    python benchmarks/shap_cpu_quick.py [--rows 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--features", type=int, default=28)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-xgboost", action="store_true", help="skip timing XGBoost")
    args = ap.parse_args(argv)

    import numba
    import xgboost as xgb

    from dgboost.explain import build_tables, extract_paths, shap_values_path, shap_values_table
    from dgboost.testing.shap_oracle import ensemble_from_xgboost

    numba.set_num_threads(1)
    rng = np.random.default_rng(0)
    n_train = 20_000
    F = args.features
    X = rng.normal(size=(n_train, F)).astype(np.float32)
    logits = X[:, 0] * X[:, 1] + np.sin(X[:, 2]) + 0.5 * X[:, 3] ** 2 - X[:, 4] + 0.3 * X[:, 5:].sum(1)
    y = (logits + rng.normal(size=n_train) > 0.5).astype(np.float32)
    X[rng.random(X.shape) < 0.02] = np.nan
    dtrain = xgb.DMatrix(X, label=y)
    booster = xgb.train(
        {
            "objective": "binary:logistic",
            "max_depth": args.depth,
            "eta": 0.1,
            "tree_method": "hist",
            "nthread": os.cpu_count(),
        },
        dtrain,
        args.trees,
    )
    ens = ensemble_from_xgboost(booster)
    Xq = X[: args.rows]

    small = extract_paths(ens.slice(0, 1))  # load the JIT caches before timing
    build_tables(small)
    t0 = time.perf_counter()
    table = extract_paths(ens)
    t_extract = time.perf_counter() - t0
    t0 = time.perf_counter()
    tables = build_tables(table)
    t_tables = time.perf_counter() - t0
    k = table.path_lengths - 1
    print(
        f"model: {ens.n_trees} trees, {table.n_paths} paths, {table.n_elements} elements, "
        f"k mean {k.mean():.2f} max {k.max()}, tables {tables.n_bytes / 2**20:.1f} MiB "
        f"(coverage {tables.coverage(table):.3f})"
    )
    print(f"extract_paths {t_extract * 1e3:.1f} ms, build_tables {t_tables * 1e3:.1f} ms (1 thread, once per model)")

    # warm-up (JIT / cache load)
    shap_values_path(table, Xq[:8])
    shap_values_table(table, Xq[:8], tables=tables)
    t_path = _median_time(lambda: shap_values_path(table, Xq), args.repeats)
    t_table = _median_time(lambda: shap_values_table(table, Xq, tables=tables), args.repeats)
    a = shap_values_path(table, Xq)
    b = shap_values_table(table, Xq, tables=tables)
    print(f"path : {args.rows / t_path:10.1f} rows/s  ({t_path * 1e3:.1f} ms)")
    print(
        f"table: {args.rows / t_table:10.1f} rows/s  ({t_table * 1e3:.1f} ms)  "
        f"speed-up vs path {t_path / t_table:.2f}x, max |path - table| {np.abs(a - b).max():.2e}"
    )
    if not args.no_xgboost:
        booster.set_param({"nthread": 1})
        dq = xgb.DMatrix(Xq)
        booster.predict(dq, pred_contribs=True)
        t_xgb = _median_time(lambda: booster.predict(dq, pred_contribs=True), args.repeats)
        c = booster.predict(dq, pred_contribs=True)
        print(
            f"xgboost {xgb.__version__} pred_contribs: {args.rows / t_xgb:10.1f} rows/s  "
            f"({t_xgb * 1e3:.1f} ms); table / xgboost {t_xgb / t_table:.2f}x, "
            f"max |table - xgboost| {np.abs(b[:, 0, :] - c).max():.2e}"
        )
    print(f"host: {platform.processor() or platform.machine()}, numba {numba.__version__}, numpy {np.__version__}")


if __name__ == "__main__":
    main()
