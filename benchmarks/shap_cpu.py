"""CPU TreeSHAP: dgboost (path, table) vs XGBoost, shap's C++ and fasttreeshap v2, same trees.

An XGBoost model (100 trees, depth 8, 28 features, binary:logistic) is trained on 100,000
rows of :func:`dgboost.datasets.make_synthetic`; then 10,000 held-out rows are explained,
single-threaded, by

* dgboost ``TreeExplainer(booster, algorithm="path")`` and ``algorithm="table"``
  (Numba ``set_num_threads(1)``; the explainer and its tables are built before timing,
  their build time is reported separately; additivity check off, as the others have none),
* XGBoost ``Booster.predict(pred_contribs=True)`` with ``nthread=1``,
* ``shap.TreeExplainer`` on the same trees given as a dict model (shap's own C++ TreeSHAP;
  shap's dict trees go left when ``x <= threshold``, so every dgboost/XGBoost split value
  ``s`` (``x < s``, float32) becomes the float32 just below ``s``: the same decision for
  every float32 input),
* fasttreeshap ``TreeExplainer(dict, algorithm="v2", n_jobs=1)`` on the same dict,

and interaction values of 200 rows are timed against XGBoost ``pred_interactions``, both
on 2 threads. Every method's largest absolute difference from XGBoost (SHAP values and
bias) is recorded. Results: ``benchmarks/results/shap_cpu.json`` (hardware, versions, load
average, rows/s and ratios).

    python benchmarks/shap_cpu.py [--rows 10000] [--interaction-rows 200] [--repeats 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import timed, versions, write_result  # noqa: E402


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(max(1, repeats)):
        dt, _ = timed(fn)
        times.append(dt)
    return float(np.median(times))


def shap_dict_model(ensemble) -> dict:
    """The ensemble as shap's dict model (``x <= threshold`` goes left; leaves have -1)."""
    trees = []
    offs = ensemble.offsets()
    for t in range(ensemble.n_trees):
        lo, hi = int(offs[t]), int(offs[t + 1])
        left = ensemble.left[lo:hi].astype(np.int32)
        right = ensemble.right[lo:hi].astype(np.int32)
        leaf = left < 0
        sv = ensemble.split_value[lo:hi].astype(np.float32)
        # x < s  <=>  x <= (float32 just below s), for float32 x (shap casts inputs to float64)
        thr = np.nextafter(sv, np.float32(-np.inf)).astype(np.float64)
        dleft = ensemble.default_left[lo:hi].astype(bool)
        trees.append({
            "children_left": np.where(leaf, -1, left).astype(np.int32),
            "children_right": np.where(leaf, -1, right).astype(np.int32),
            "children_default": np.where(leaf, -1, np.where(dleft, left, right)).astype(np.int32),
            "features": np.where(leaf, -1, ensemble.feature[lo:hi]).astype(np.int32),
            "thresholds": np.where(leaf, 0.0, thr),
            "values": ensemble.value[lo:hi].astype(np.float64).reshape(-1, 1),
            "node_sample_weight": ensemble.cover[lo:hi].astype(np.float64),
        })
    return {"trees": trees, "base_offset": float(ensemble.base_margin[0]),
            "internal_dtype": np.float64, "input_dtype": np.float64}


def _loadavg():
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-rows", type=int, default=100_000)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--interaction-rows", type=int, default=200)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--features", type=int, default=28)
    ap.add_argument("--repeats", type=int, default=1, help="timed passes over the rows (mean)")
    ap.add_argument("--slices", type=int, default=5,
                    help="row slices; the methods take turns slice by slice")
    ap.add_argument("--skip", nargs="*", default=[], help="methods to skip (shap, fasttreeshap)")
    ap.add_argument("--no-write", action="store_true", help="print only, do not write the JSON")
    args = ap.parse_args(argv)

    import numba
    import xgboost as xgb

    import dgboost
    from dgboost.datasets import make_synthetic

    load_start = _loadavg()
    X, y, _ = make_synthetic(args.train_rows + args.rows, n_features=args.features,
                             task="binary", seed=0)
    Xtr, ytr, Xq = X[:args.train_rows], y[:args.train_rows], X[args.train_rows:]
    t_train, booster = timed(xgb.train, {"objective": "binary:logistic", "max_depth": args.depth,
                                         "eta": 0.1, "tree_method": "hist", "seed": 0,
                                         "nthread": os.cpu_count()},
                             xgb.DMatrix(Xtr, label=ytr), args.trees)
    print(f"trained {args.trees} trees of depth {args.depth} on {args.train_rows:,} rows in "
          f"{t_train:.1f} s; explaining {len(Xq):,} rows")

    results: dict = {}
    notes: dict = {"fasttreeshap_install": (
        "fasttreeshap 0.1.6 builds from source with `pip install --no-build-isolation "
        "fasttreeshap` against NumPy 2 once setuptools is in the venv; its pin slicer==0.0.7 "
        "makes pip downgrade shap to 0.45 (a NumPy 1 wheel that no longer imports), so shap "
        "0.54.1 and slicer 0.0.8 were reinstalled after it; fasttreeshap runs with them")}
    Xq64 = Xq.astype(np.float64)

    # -- the contenders (each a function of a row slice), set up and warmed up ----------------
    methods: dict = {}
    booster.set_param({"nthread": 1})
    numba.set_num_threads(1)

    n = len(Xq)
    n_slices = max(1, args.slices)
    bounds = np.linspace(0, n, n_slices + 1).astype(int)
    dmats = {}  # XGBoost gets its DMatrix ready-made (built outside the timing)

    def xgb_contribs(sl):
        key = (sl.start, sl.stop)
        if key not in dmats:
            dmats[key] = xgb.DMatrix(Xq[sl])
        return booster.predict(dmats[key], pred_contribs=True)
    methods["xgboost_pred_contribs"] = xgb_contribs
    for i in range(n_slices):
        dmats[(int(bounds[i]), int(bounds[i + 1]))] = xgb.DMatrix(Xq[int(bounds[i]):int(bounds[i + 1])])

    build = {}
    explainers = {}
    for algorithm in ("path", "table"):
        t0 = time.perf_counter()
        explainer = dgboost.TreeExplainer(booster, algorithm=algorithm)
        if algorithm == "table":
            explainer.weight_tables()
        build[algorithm] = time.perf_counter() - t0
        explainers[algorithm] = explainer
        methods[f"dgboost_{algorithm}"] = (
            lambda sl, e=explainer: e.shap_values(Xq[sl], check_additivity=False))
    explainer = explainers["table"]
    tables = explainer.weight_tables()
    table = explainer.table
    model_facts = {"paths": table.n_paths, "path_elements": table.n_elements,
                   "mean_path_length": float((table.path_lengths - 1).mean()),
                   "max_path_length": int(table.max_length - 1),
                   "weight_table_mib": tables.n_bytes / 2 ** 20,
                   "weight_table_coverage": tables.coverage(table)}

    model_dict = shap_dict_model(explainer.ensemble)
    if "shap" not in args.skip:  # shap's C++ TreeSHAP is single-threaded
        try:
            import shap

            se = shap.TreeExplainer(model_dict)
            methods["shap_cpp"] = lambda sl: se.shap_values(Xq64[sl], check_additivity=False)
        except Exception as exc:  # noqa: BLE001 - record why and go on
            notes["shap"] = f"not run: {type(exc).__name__}: {exc}"
    if "fasttreeshap" not in args.skip:
        try:
            import fasttreeshap

            fe = fasttreeshap.TreeExplainer(model_dict, algorithm="v2", n_jobs=1)
            methods["fasttreeshap_v2"] = lambda sl: fe.shap_values(Xq64[sl], check_additivity=False)
        except Exception as exc:  # noqa: BLE001 - record why and go on
            notes["fasttreeshap"] = f"not run: {type(exc).__name__}: {exc}"
    for name in list(methods):  # warm-up (JIT, caches); drop what fails, saying why
        try:
            methods[name](slice(0, 16))
        except Exception as exc:  # noqa: BLE001
            notes[name] = f"not run: {type(exc).__name__}: {exc}"
            del methods[name]

    # -- timing: interleaved over row slices, so load from other work hits all alike -------
    seconds = {name: 0.0 for name in methods}
    outputs = {name: [] for name in methods}
    for _ in range(max(1, args.repeats)):
        for name in methods:
            outputs[name] = []
        for i in range(n_slices):
            sl = slice(int(bounds[i]), int(bounds[i + 1]))
            for name, fn in methods.items():
                dt, out = timed(fn, sl)
                seconds[name] += dt
                outputs[name].append(np.asarray(out, dtype=np.float64))
    ref = np.concatenate(outputs["xgboost_pred_contribs"])  # (n, F+1)
    for name in methods:
        t = seconds[name] / max(1, args.repeats)
        phi = np.concatenate(outputs[name])
        if name == "xgboost_pred_contribs":
            diff = 0.0
        else:
            diff = float(np.abs(phi - ref[:, :-1]).max())
            ev = (explainers["path"].expected_value if name.startswith("dgboost")
                  else np.asarray((se if name == "shap_cpp" else fe).expected_value).ravel()[0])
            diff = max(diff, float(abs(ev - ref[0, -1])))
        results[name] = {"seconds": t, "rows_per_s": n / t, "max_abs_diff": diff}
    for algorithm in ("path", "table"):
        results[f"dgboost_{algorithm}"]["build_seconds"] = build[algorithm]
    if "shap_cpp" in results:
        results["shap_cpp"]["note"] = "shap.TreeExplainer(dict model), shap's C++ TreeSHAP"
    if "fasttreeshap_v2" in results:
        results["fasttreeshap_v2"]["note"] = "fasttreeshap.TreeExplainer(dict, algorithm='v2')"

    # interaction values, 2 threads each
    ni = args.interaction_rows
    Xi = Xq[:ni]
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    booster.set_param({"nthread": 2})
    di = xgb.DMatrix(Xi)
    booster.predict(xgb.DMatrix(Xi[:4]), pred_interactions=True)
    t_xi = _median_time(lambda: booster.predict(di, pred_interactions=True), args.repeats)
    iref = booster.predict(di, pred_interactions=True).astype(np.float64)
    ie = dgboost.TreeExplainer(booster)
    ie.shap_interaction_values(Xi[:4])
    t_di = _median_time(lambda: ie.shap_interaction_values(Xi), args.repeats)
    iours = ie.contributions(Xi, interactions=True)[:, 0]
    interactions = {
        "rows": ni, "threads": 2,
        "xgboost_pred_interactions": {"seconds": t_xi, "rows_per_s": ni / t_xi},
        "dgboost": {"seconds": t_di, "rows_per_s": ni / t_di,
                    "max_abs_diff": float(np.abs(iours - iref).max())},
        "ratio_dgboost_over_xgboost": t_xi / t_di,
    }

    base = results["xgboost_pred_contribs"]["rows_per_s"]
    ratios = {f"{k}_over_xgboost": v["rows_per_s"] / base for k, v in results.items()
              if k != "xgboost_pred_contribs"}
    for other in ("shap_cpp", "fasttreeshap_v2"):
        if other in results:
            for ours in ("dgboost_path", "dgboost_table"):
                ratios[f"{ours}_over_{other}"] = (results[ours]["rows_per_s"]
                                                  / results[other]["rows_per_s"])
    load_end = _loadavg()

    width = max(len(k) for k in results) + 2
    print(f"\nSHAP values, {len(Xq):,} rows, 1 thread (load average {load_start} -> {load_end})")
    print(f"{'method'.ljust(width)}{'rows/s':>10}{'vs XGBoost':>12}{'max |diff|':>12}")
    for k, v in results.items():
        print(f"{k.ljust(width)}{v['rows_per_s']:>10.0f}{v['rows_per_s'] / base:>11.2f}x"
              f"{v['max_abs_diff']:>12.1e}")
    for k, v in notes.items():
        print(f"{k}: {v}")
    print(f"\nInteraction values, {ni} rows, 2 threads")
    print(f"{'xgboost_pred_interactions'.ljust(width)}"
          f"{interactions['xgboost_pred_interactions']['rows_per_s']:>10.0f}")
    print(f"{'dgboost'.ljust(width)}{interactions['dgboost']['rows_per_s']:>10.0f}"
          f"{interactions['ratio_dgboost_over_xgboost']:>11.2f}x"
          f"{interactions['dgboost']['max_abs_diff']:>12.1e}")
    print(f"\nbuild (once per explainer): path table {build['path']:.2f} s, "
          f"path table + weight tables {build['table']:.2f} s; {model_facts}")

    load_note = f"load average {load_start[0] if load_start else '?'} on a shared machine"
    table_lines = []
    for ours in ("dgboost_table", "dgboost_path"):
        algo = ours.split("_")[1]
        table_lines.append({
            "what": f"SHAP values ({algo}), 1 thread, vs XGBoost {xgb.__version__} pred_contribs",
            "ratio": results[ours]["rows_per_s"] / base,
            "note": f"{results[ours]['rows_per_s']:.0f} vs {base:.0f} rows/s; {load_note}"})
    for other, label in (("fasttreeshap_v2", "fasttreeshap v2"), ("shap_cpp", "shap C++")):
        if other in results:
            table_lines.append({
                "what": f"SHAP values (table), 1 thread, vs {label}",
                "ratio": ratios[f"dgboost_table_over_{other}"],
                "note": f"{results['dgboost_table']['rows_per_s']:.0f} vs "
                        f"{results[other]['rows_per_s']:.0f} rows/s"})
    table_lines.append({
        "what": f"interaction values, 2 threads, vs XGBoost {xgb.__version__} pred_interactions",
        "ratio": interactions["ratio_dgboost_over_xgboost"],
        "note": f"{interactions['dgboost']['rows_per_s']:.0f} vs "
                f"{interactions['xgboost_pred_interactions']['rows_per_s']:.0f} rows/s, {ni} rows"})

    payload = {
        "table": table_lines,
        "description": __doc__.strip().splitlines()[0],
        "config": {"train_rows": args.train_rows, "rows": len(Xq), "trees": args.trees,
                   "depth": args.depth, "features": args.features, "objective": "binary:logistic",
                   "threads": 1, "repeats": args.repeats, "slices": args.slices,
                   "timing": "methods interleaved slice by slice (same exposure to other load); "
                             "interactions: median of repeats",
                   "train_seconds": t_train},
        "versions": versions("dgboost", "numpy", "numba", "xgboost", "shap", "fasttreeshap",
                             "sklearn"),
        "load_average": {"start": load_start, "end": load_end,
                         "note": "shared 2-core machine: other work ran at the same time"},
        "model": model_facts,
        "shap_values": results,
        "ratios": ratios,
        "interactions": interactions,
        "notes": notes,
    }
    if not args.no_write:
        path = write_result("shap_cpu", payload)
        print(f"wrote {path}")
    return payload


if __name__ == "__main__":
    main()
