"""CPU TreeSHAP: dgboost (path, table) vs XGBoost, shap's C++ and fasttreeshap v2, same trees.

An XGBoost model (100 trees, depth 8, 28 features, binary:logistic) is trained on 100,000
rows of :func:`dgboost.datasets.make_synthetic`; then 10,000 held-out rows are explained,
single-threaded, by

* dgboost ``TreeExplainer(booster, algorithm="path")`` and ``algorithm="table"``
  (Numba ``set_num_threads(1)``; additivity check off, as the others have none),
* XGBoost ``DMatrix`` + ``Booster.predict(pred_contribs=True)`` with ``nthread=1``,
* ``shap.TreeExplainer`` on the same trees given as a dict model (shap's own C++ TreeSHAP;
  shap's dict trees go left when ``x <= threshold``, so every dgboost/XGBoost split value
  ``s`` (``x < s``, float32) becomes the float32 just below ``s``: the same decision for
  every float32 input),
* fasttreeshap ``TreeExplainer(dict, algorithm="v2", n_jobs=1)`` on the same dict,

and interaction values of 200 rows are timed against XGBoost ``pred_interactions``, both
on 2 threads. Every call is timed end to end, as a user pays it: the explainer's
construction (model import, path table, weight tables; shap's and fasttreeshap's explainers)
and XGBoost's ``DMatrix`` are inside the timer, as all of XGBoost's work is inside its
``predict``. Beside it, labelled *warm*: the same call on an explainer (or DMatrix) built
before. ``--repeats`` runs (at least 3), the methods taking turns within each run so other
load on the machine hits all alike; the median and the range are reported. Every method's
largest absolute difference from XGBoost (SHAP values and bias) is recorded. Results:
``benchmarks/results/shap_cpu.json`` (hardware, versions, load average, rows/s and ratios).

    python benchmarks/shap_cpu.py [--rows 10000] [--interaction-rows 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import timed, versions, write_result  # noqa: E402


def _stats(times) -> dict:
    """Median and range of a list of seconds."""
    return {
        "median": float(np.median(times)),
        "min": float(min(times)),
        "max": float(max(times)),
        "runs": [float(t) for t in times],
    }


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
        trees.append(
            {
                "children_left": np.where(leaf, -1, left).astype(np.int32),
                "children_right": np.where(leaf, -1, right).astype(np.int32),
                "children_default": np.where(leaf, -1, np.where(dleft, left, right)).astype(np.int32),
                "features": np.where(leaf, -1, ensemble.feature[lo:hi]).astype(np.int32),
                "thresholds": np.where(leaf, 0.0, thr),
                "values": ensemble.value[lo:hi].astype(np.float64).reshape(-1, 1),
                "node_sample_weight": ensemble.cover[lo:hi].astype(np.float64),
            }
        )
    return {
        "trees": trees,
        "base_offset": float(ensemble.base_margin[0]),
        "internal_dtype": np.float64,
        "input_dtype": np.float64,
    }


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
    ap.add_argument("--repeats", type=int, default=3, help="timed runs (at least 3; median and range)")
    ap.add_argument("--skip", nargs="*", default=[], help="methods to skip (shap, fasttreeshap)")
    ap.add_argument("--no-write", action="store_true", help="print only, do not write the JSON")
    args = ap.parse_args(argv)

    import numba
    import xgboost as xgb

    import dgboost
    from dgboost.datasets import make_synthetic

    load_start = _loadavg()
    X, y, _ = make_synthetic(args.train_rows + args.rows, n_features=args.features, task="binary", seed=0)
    Xtr, ytr, Xq = X[: args.train_rows], y[: args.train_rows], X[args.train_rows :]
    t_train, booster = timed(
        xgb.train,
        {
            "objective": "binary:logistic",
            "max_depth": args.depth,
            "eta": 0.1,
            "tree_method": "hist",
            "seed": 0,
            "nthread": os.cpu_count(),
        },
        xgb.DMatrix(Xtr, label=ytr),
        args.trees,
    )
    print(
        f"trained {args.trees} trees of depth {args.depth} on {args.train_rows:,} rows in "
        f"{t_train:.1f} s; explaining {len(Xq):,} rows"
    )

    results: dict = {}
    notes: dict = {
        "fasttreeshap_install": (
            "fasttreeshap 0.1.6 builds from source with `pip install --no-build-isolation "
            "fasttreeshap` against NumPy 2 once setuptools is in the venv; its pin slicer==0.0.7 "
            "makes pip downgrade shap to 0.45 (a NumPy 1 wheel that no longer imports), so shap "
            "0.54.1 and slicer 0.0.8 were reinstalled after it; fasttreeshap runs with them"
        )
    }

    # -- the contenders: (end-to-end call, warm call), each a function of the rows -----------
    from dgboost.explain import treeshap

    booster.set_param({"nthread": 1})
    numba.set_num_threads(1)

    def fresh_explainer(algorithm):  # nothing kept from an earlier call: import, paths, tables
        treeshap._PROCESS_TABLES.clear()
        explainer = dgboost.TreeExplainer(booster, algorithm=algorithm)
        if algorithm == "table":
            explainer.weight_tables()
        return explainer

    explainers = {a: fresh_explainer(a) for a in ("path", "table")}
    dmatrix = xgb.DMatrix(Xq)
    methods: dict = {
        "xgboost_pred_contribs": (
            lambda X: booster.predict(xgb.DMatrix(X), pred_contribs=True),
            lambda X: booster.predict(dmatrix, pred_contribs=True),
        ),
    }
    for algorithm in ("path", "table"):
        methods[f"dgboost_{algorithm}"] = (
            lambda X, a=algorithm: fresh_explainer(a).shap_values(X, check_additivity=False),
            lambda X, e=explainers[algorithm]: e.shap_values(X, check_additivity=False),
        )
    explainer = explainers["table"]
    tables = explainer.weight_tables()
    table = explainer.table
    model_facts = {
        "paths": table.n_paths,
        "path_elements": table.n_elements,
        "mean_path_length": float((table.path_lengths - 1).mean()),
        "max_path_length": int(table.max_length - 1),
        "weight_table_mib": tables.n_bytes / 2**20,
        "weight_table_coverage": tables.coverage(table),
    }

    model_dict = shap_dict_model(explainer.ensemble)
    others = {}  # the other libraries' explainers, for their expected values
    if "shap" not in args.skip:  # shap's C++ TreeSHAP is single-threaded
        try:
            import shap

            others["shap_cpp"] = se = shap.TreeExplainer(model_dict)
            methods["shap_cpp"] = (
                lambda X: shap.TreeExplainer(model_dict).shap_values(X.astype(np.float64), check_additivity=False),
                lambda X: se.shap_values(X.astype(np.float64), check_additivity=False),
            )
        except Exception as exc:  # noqa: BLE001 - record why and go on
            notes["shap"] = f"not run: {type(exc).__name__}: {exc}"
    if "fasttreeshap" not in args.skip:
        try:
            import fasttreeshap

            others["fasttreeshap_v2"] = fe = fasttreeshap.TreeExplainer(model_dict, algorithm="v2", n_jobs=1)
            methods["fasttreeshap_v2"] = (
                lambda X: fasttreeshap.TreeExplainer(model_dict, algorithm="v2", n_jobs=1).shap_values(
                    X.astype(np.float64), check_additivity=False
                ),
                lambda X: fe.shap_values(X.astype(np.float64), check_additivity=False),
            )
        except Exception as exc:  # noqa: BLE001 - record why and go on
            notes["fasttreeshap"] = f"not run: {type(exc).__name__}: {exc}"
    for name in list(methods):  # warm-up (JIT, caches); drop what fails, saying why
        try:
            for fn in methods[name]:
                fn(Xq[:16])
        except Exception as exc:  # noqa: BLE001
            notes[name] = f"not run: {type(exc).__name__}: {exc}"
            del methods[name]

    # -- timing: the methods take turns in every run, so load from other work hits all alike --
    n = len(Xq)
    times = {name: {"end_to_end": [], "warm": []} for name in methods}
    outputs = {}
    for _ in range(max(3, args.repeats)):
        for name, (fresh, warm) in methods.items():
            dt, out = timed(fresh, Xq)
            times[name]["end_to_end"].append(dt)
            outputs[name] = np.asarray(out, dtype=np.float64)
            times[name]["warm"].append(timed(warm, Xq)[0])
    ref = outputs["xgboost_pred_contribs"]  # (n, F+1)
    for name in methods:
        if name == "xgboost_pred_contribs":
            diff = 0.0
        else:
            diff = float(np.abs(outputs[name] - ref[:, :-1]).max())
            ev = (
                explainers["path"].expected_value
                if name.startswith("dgboost")
                else np.asarray(others[name].expected_value).ravel()[0]
            )
            diff = max(diff, float(abs(ev - ref[0, -1])))
        e2e, warm = _stats(times[name]["end_to_end"]), _stats(times[name]["warm"])
        results[name] = {
            "seconds": e2e,
            "warm_seconds": warm,
            "rows_per_s": n / e2e["median"],
            "warm_rows_per_s": n / warm["median"],
            "max_abs_diff": diff,
        }
    if "shap_cpp" in results:
        results["shap_cpp"]["note"] = "shap.TreeExplainer(dict model), shap's C++ TreeSHAP"
    if "fasttreeshap_v2" in results:
        results["fasttreeshap_v2"]["note"] = "fasttreeshap.TreeExplainer(dict, algorithm='v2')"

    # interaction values, 2 threads each, end to end and warm
    ni = args.interaction_rows
    Xi = Xq[:ni]
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    booster.set_param({"nthread": 2})
    di = xgb.DMatrix(Xi)
    booster.predict(xgb.DMatrix(Xi[:4]), pred_interactions=True)
    ie = dgboost.TreeExplainer(booster)
    ie.shap_interaction_values(Xi[:4])
    itimes = {"xgboost": [], "xgboost_warm": [], "dgboost": [], "dgboost_warm": []}
    for _ in range(max(3, args.repeats)):
        itimes["xgboost"].append(timed(lambda: booster.predict(xgb.DMatrix(Xi), pred_interactions=True))[0])
        itimes["xgboost_warm"].append(timed(lambda: booster.predict(di, pred_interactions=True))[0])
        itimes["dgboost"].append(timed(lambda: dgboost.TreeExplainer(booster).shap_interaction_values(Xi))[0])
        itimes["dgboost_warm"].append(timed(lambda: ie.shap_interaction_values(Xi))[0])
    iref = booster.predict(di, pred_interactions=True).astype(np.float64)
    iours = ie.contributions(Xi, interactions=True)[:, 0]
    istats = {k: _stats(v) for k, v in itimes.items()}
    interactions = {
        "rows": ni,
        "threads": 2,
        "xgboost_pred_interactions": {
            "seconds": istats["xgboost"],
            "rows_per_s": ni / istats["xgboost"]["median"],
            "warm_seconds": istats["xgboost_warm"],
        },
        "dgboost": {
            "seconds": istats["dgboost"],
            "rows_per_s": ni / istats["dgboost"]["median"],
            "warm_seconds": istats["dgboost_warm"],
            "warm_rows_per_s": ni / istats["dgboost_warm"]["median"],
            "max_abs_diff": float(np.abs(iours - iref).max()),
        },
        "ratio_dgboost_over_xgboost": istats["xgboost"]["median"] / istats["dgboost"]["median"],
        "warm_ratio_dgboost_over_xgboost": istats["xgboost_warm"]["median"] / istats["dgboost_warm"]["median"],
    }

    base = results["xgboost_pred_contribs"]["rows_per_s"]
    ratios = {f"{k}_over_xgboost": v["rows_per_s"] / base for k, v in results.items() if k != "xgboost_pred_contribs"}
    for other in ("shap_cpp", "fasttreeshap_v2"):
        if other in results:
            for ours in ("dgboost_path", "dgboost_table"):
                ratios[f"{ours}_over_{other}"] = results[ours]["rows_per_s"] / results[other]["rows_per_s"]
    load_end = _loadavg()

    def spread(stats):
        return f"{stats['median']:.2f} s ({stats['min']:.2f}-{stats['max']:.2f})"

    width = max(len(k) for k in results) + 2
    print(f"\nSHAP values, {len(Xq):,} rows, 1 thread, end to end (load average {load_start} -> {load_end})")
    print(f"{'method'.ljust(width)}{'rows/s':>10}{'vs XGBoost':>12}{'warm rows/s':>13}{'max |diff|':>12}")
    for k, v in results.items():
        print(
            f"{k.ljust(width)}{v['rows_per_s']:>10.0f}{v['rows_per_s'] / base:>11.2f}x"
            f"{v['warm_rows_per_s']:>13.0f}{v['max_abs_diff']:>12.1e}"
        )
    for k, v in notes.items():
        print(f"{k}: {v}")
    print(
        f"\nInteraction values, {ni} rows, 2 threads: XGBoost {spread(istats['xgboost'])}, dgboost "
        f"{spread(istats['dgboost'])} ({interactions['ratio_dgboost_over_xgboost']:.2f}x; warm "
        f"{interactions['warm_ratio_dgboost_over_xgboost']:.2f}x)"
    )
    print(f"model: {model_facts}")

    load_note = f"load average {load_start[0] if load_start else '?'} on a shared machine"
    runs = max(3, args.repeats)
    table_lines = []
    for ours in ("dgboost_table", "dgboost_path"):
        algo = ours.split("_")[1]
        r, x = results[ours], results["xgboost_pred_contribs"]
        table_lines.append(
            {
                "what": f"SHAP values ({algo}), 1 thread, end to end, "
                f"vs XGBoost {xgb.__version__} DMatrix + pred_contribs",
                "ratio": r["rows_per_s"] / base,
                "note": f"{r['rows_per_s']:.0f} vs {base:.0f} rows/s, "
                f"{spread(r['seconds'])} vs {spread(x['seconds'])}, "
                f"median of {runs} (warm, explainer built: {r['warm_rows_per_s'] / x['warm_rows_per_s']:.2f}x); "
                f"{load_note}",
            }
        )
    for other, label in (("fasttreeshap_v2", "fasttreeshap v2"), ("shap_cpp", "shap C++")):
        if other in results:
            table_lines.append(
                {
                    "what": f"SHAP values (table), 1 thread, end to end, vs {label}",
                    "ratio": ratios[f"dgboost_table_over_{other}"],
                    "note": f"{results['dgboost_table']['rows_per_s']:.0f} vs "
                    f"{results[other]['rows_per_s']:.0f} rows/s, median of {runs}",
                }
            )
    table_lines.append(
        {
            "what": f"interaction values, 2 threads, end to end, vs XGBoost {xgb.__version__} pred_interactions",
            "ratio": interactions["ratio_dgboost_over_xgboost"],
            "note": f"{interactions['dgboost']['rows_per_s']:.0f} vs "
            f"{interactions['xgboost_pred_interactions']['rows_per_s']:.0f} rows/s, {ni} rows, "
            f"{spread(istats['dgboost'])} vs {spread(istats['xgboost'])}, median of {runs} "
            f"(warm, explainer built: {interactions['warm_ratio_dgboost_over_xgboost']:.2f}x)",
        }
    )

    payload = {
        "table": table_lines,
        "description": __doc__.strip().splitlines()[0],
        "config": {
            "train_rows": args.train_rows,
            "rows": len(Xq),
            "trees": args.trees,
            "depth": args.depth,
            "features": args.features,
            "objective": "binary:logistic",
            "threads": 1,
            "repeats": max(3, args.repeats),
            "timing": "end to end (explainer construction / DMatrix inside the timer) and warm; "
            "methods take turns in every run; median and range of the runs",
            "train_seconds": t_train,
        },
        "versions": versions("dgboost", "numpy", "numba", "xgboost", "shap", "fasttreeshap", "sklearn"),
        "load_average": {
            "start": load_start,
            "end": load_end,
            "note": "shared 2-core machine: other work ran at the same time",
        },
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
