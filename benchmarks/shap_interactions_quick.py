"""Quick CPU timing of SHAP interaction values: dgboost vs XGBoost ``pred_interactions``.

Trains an XGBoost model (100 trees, depth 8, binary:logistic) on
``dgboost.datasets.make_synthetic(100_000, 28, task="binary")``, imports it, and times
interaction values on ``--rows`` rows at 1 and at 2 threads (Numba ``set_num_threads``,
XGBoost ``nthread``), after a warm-up. dgboost and XGBoost run in alternating rounds so that
both see the same background load; best and median rows/s of ``--repeats`` rounds are
printed, with the ratios dgboost / XGBoost.

Timed: the default method (``quadrature``: no precomputation), ``method="table"`` with
interaction tables for every path up to ``--table-max-k`` (built once, one-off cost printed
separately) and, with ``--path``, the O(k^3) method; plus one cold call on an Ensemble.

    python benchmarks/shap_interactions_quick.py [--rows 200] [--repeats 7] [--threads 1 2]
        [--table-max-k 8] [--model saved.json] [--path] [--save]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _time(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _train(args):
    import xgboost as xgb

    from dgboost.datasets import make_synthetic

    X, y, _ = make_synthetic(100_000, args.features, task="binary")
    if args.model and os.path.exists(args.model):
        booster = xgb.Booster()
        booster.load_model(args.model)
        return booster, X
    booster = xgb.train(
        {
            "objective": "binary:logistic",
            "max_depth": args.depth,
            "eta": 0.1,
            "tree_method": "hist",
            "nthread": os.cpu_count(),
            "seed": 0,
        },
        xgb.DMatrix(X, label=y),
        args.trees,
    )
    if args.model:
        booster.save_model(args.model)
    return booster, X


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--features", type=int, default=28)
    ap.add_argument("--repeats", type=int, default=7, help="alternating timing rounds")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument(
        "--table-max-k",
        type=int,
        default=8,
        help="max_k of the interaction tables timed as method='table' (8: every path of a depth-8 model)",
    )
    ap.add_argument("--model", help="XGBoost model JSON: loaded if it exists, else saved there")
    ap.add_argument("--path", action="store_true", help="also time the O(k^3) method (method='path')")
    ap.add_argument("--save", action="store_true", help="write benchmarks/results/shap_interactions_quick.json")
    args = ap.parse_args(argv)

    import numba
    import xgboost as xgb

    from dgboost.explain import extract_paths, shap_interactions
    from dgboost.explain.tables import build_interaction_tables
    from dgboost.testing.shap_oracle import ensemble_from_xgboost

    booster, X = _train(args)
    Xq = np.ascontiguousarray(X[: args.rows])
    n = Xq.shape[0]
    ens = ensemble_from_xgboost(booster)
    dq = xgb.DMatrix(Xq)

    # load the JIT caches (small model) before any timing
    numba.set_num_threads(1)
    small = extract_paths(ens.slice(0, 1))
    for method in ("quadrature", "table", "path"):
        shap_interactions(small, Xq[:4], method=method)

    t_extract, table = _time(lambda: extract_paths(ens))
    t_build, tabs = _time(lambda: build_interaction_tables(table, max_k=args.table_max_k))
    k = table.path_lengths - 1
    print(f"model: {ens.n_trees} trees, {table.n_paths} paths, k mean {k.mean():.2f} max {k.max()}")
    print(
        f"one-off (1 thread): extract_paths {t_extract * 1e3:.0f} ms; method='table' only: "
        f"build_interaction_tables(max_k={args.table_max_k}) {t_build * 1e3:.0f} ms, "
        f"{tabs.n_bytes / 2**20:.1f} MiB, coverage {tabs.coverage(table):.3f}"
    )

    methods = {
        "quadrature": lambda: shap_interactions(table, Xq),
        f"table(k<={args.table_max_k})": lambda: shap_interactions(table, Xq, method="table", tables=tabs),
    }
    if args.path:
        methods["path O(k^3)"] = lambda: shap_interactions(table, Xq, method="path")
    results = {
        "rows": n,
        "model": {"trees": ens.n_trees, "paths": table.n_paths, "k_mean": float(k.mean()), "k_max": int(k.max())},
        "extract_s": t_extract,
        "build_tables_s": t_build,
        "table_mib": tabs.n_bytes / 2**20,
        "threads": {},
    }
    ref = None
    for nt in args.threads:
        numba.set_num_threads(min(nt, numba.config.NUMBA_NUM_THREADS))
        booster.set_param({"nthread": nt})
        # warm-up: JIT/cache load, thread pools, XGBoost's prediction caches
        outs = {name: fn() for name, fn in methods.items()}
        theirs = booster.predict(dq, pred_interactions=True)
        if ref is None:
            ref = outs["quadrature"]
            for name, out in outs.items():
                err = np.abs(out[:, 0] - theirs).max()
                print(f"max |{name} - xgboost| = {err:.2e}, max |{name} - quadrature| = {np.abs(out - ref).max():.1e}")
            results["max_abs_diff_vs_xgboost"] = float(np.abs(ref[:, 0] - theirs).max())
        else:
            assert np.array_equal(outs["quadrature"], ref), "results depend on the threads"
        times = {name: [] for name in methods}
        times["xgboost"] = []
        for _ in range(args.repeats):
            for name, fn in methods.items():
                times[name].append(_time(fn)[0])
            times["xgboost"].append(_time(lambda: booster.predict(dq, pred_interactions=True))[0])
        best_x, med_x = n / min(times["xgboost"]), n / np.median(times["xgboost"])
        print(
            f"{nt} thread(s): xgboost {xgb.__version__} pred_interactions {best_x:8.1f} "
            f"rows/s best, {med_x:8.1f} median"
        )
        row = {"xgboost_best": best_x, "xgboost_median": med_x}
        for name in methods:
            best, med = n / min(times[name]), n / np.median(times[name])
            print(
                f"             dgboost {name:<18} {best:8.1f} rows/s best, {med:8.1f} "
                f"median; vs xgboost {best / best_x:5.2f}x best, {med / med_x:5.2f}x median"
            )
            row[name] = {"best": best, "median": med}
        results["threads"][str(nt)] = row

    # cold call at 1 thread on an Ensemble: paths extracted inside the call
    numba.set_num_threads(1)
    t_cold, _ = _time(lambda: shap_interactions(ens, Xq))
    print(f"cold call (1 thread, Ensemble in, default method): {t_cold * 1e3:.0f} ms = {n / t_cold:.1f} rows/s")
    results["cold_call_s"] = t_cold
    print(
        f"host: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
        f"load average {os.getloadavg()[0]:.2f}; numba {numba.__version__}, "
        f"numpy {np.__version__}"
    )
    if args.save:
        from benchmarks._common import versions, write_result

        results["versions"] = versions("numpy", "numba", "xgboost")
        print("wrote", write_result("shap_interactions_quick", results))


if __name__ == "__main__":
    main()
