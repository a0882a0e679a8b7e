"""dgboost GPU TreeSHAP vs XGBoost's GPU ``pred_contribs`` on the same model, rows and GPU.

Each case (``CASES``: the shapes of the CUDA SHAP issue) trains an XGBoost model (``hist``,
``device="cuda"``, synthetic data with 10% missing values), so both libraries explain the same
trees, and explains CuPy rows. Timed end to end, as a user's call pays it, to a device
synchronise, median of ``--repeats`` after one warm-up each:

* XGBoost: ``DMatrix(X)`` + ``predict(pred_contribs=True)`` (or ``pred_interactions``);
* dgboost: ``TreeExplainer(model, device="cuda")`` (path table, weight tables, upload) +
  ``contributions(X)``; and, labelled *warm*, ``contributions`` with the explainer built.

    python benchmarks/shap_gpu.py --cases a,b,c,d
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


# name: (features, rounds, classes, depth, rows explained, interactions); the cases
CASES = {
    "a": (28, 200, 1, 8, 1_000_000, False),  # Higgs-like
    "b": (8, 100, 1, 8, 1_000_000, False),  # cal_housing-med-like
    "c": (54, 100, 8, 8, 10_000, False),  # covtype-med-like
    "d": (54, 100, 8, 16, 10_000, False),  # covtype-large-like
    "a-interactions": (28, 200, 1, 8, 20_000, True),
    "imported": (60, 300, 1, 12, 40_000, False),  # the imported model: 300 trees of depth 12
    # fashion_mnist-large-like: 10 rounds x 10 classes = 100 trees of depth 16 on 785 features
    "fashion-interactions": (785, 10, 10, 16, 200, True),
}
_TRAIN_ROWS_CAP = {"fashion-interactions": 60_000}  # fashion_mnist's training set


def _profile_preparation(prepare, top: int) -> None:
    """Print the host functions of one cold preparation (``prepare()``) by cumulative and by own
    time (cProfile; the device work shows up where the host waits for it)."""
    import cProfile
    import pstats

    import cupy

    profiler = cProfile.Profile()
    profiler.enable()
    prepare()
    cupy.cuda.Device().synchronize()
    profiler.disable()
    for key in ("cumulative", "tottime"):
        print(f"\npreparation, host functions by {key} time (cProfile: slows the run)")
        pstats.Stats(profiler).sort_stats(key).print_stats(top)


def make_case(name: str, train_rows: int):
    """``(model, rows, Xd)`` of case ``name``: the XGBoost model (trained on the GPU), the rows
    to explain (float32 NumPy, (n, F)) and the same rows on the device (CuPy)."""
    import cupy
    import xgboost as xgb

    from dgboost.datasets import make_synthetic

    F, rounds, classes, depth, n, _ = CASES[name]
    task = "binary" if classes == 1 else "multiclass"
    train_rows = min(train_rows, _TRAIN_ROWS_CAP.get(name, train_rows))
    X, y, _ = make_synthetic(
        train_rows, F, task=task, missing_rate=0.1, seed=0, **({"n_classes": classes} if classes > 1 else {})
    )
    params = {
        "objective": "binary:logistic" if classes == 1 else "multi:softprob",
        "max_depth": depth,
        "tree_method": "hist",
        "device": "cuda",
        **({"num_class": classes} if classes > 1 else {}),
    }
    model = xgb.train(params, xgb.DMatrix(X, y), rounds)
    rows, _, _ = make_synthetic(n, F, task="binary", missing_rate=0.1, seed=1)
    return model, rows, cupy.asarray(rows)


def run_case(
    name: str, repeats: int, train_rows: int, max_table_bytes: int | None = None, profile_top: int = 0
) -> dict:
    import cupy
    import xgboost as xgb

    import dgboost as dg
    from dgboost.backend import _cuda_treeshap as gpu
    from dgboost.explain import prepared, treeshap

    model, rows, Xd = make_case(name, train_rows)
    F, rounds, classes, depth, n, interactions = CASES[name]
    kw = {"pred_interactions": True} if interactions else {"pred_contribs": True}
    budget = {} if max_table_bytes is None else {"max_table_bytes": max_table_bytes}

    def fresh():  # nothing kept from an earlier call: the import, path table, weight tables and uploads are rebuilt
        gpu._clear_cache()
        treeshap._PROCESS_TABLES.clear()
        prepared._PREPARED.clear()  # the booster's imported trees and path table (issue 32)
        return dg.TreeExplainer(model, device="cuda", **budget)

    if profile_top:
        fresh().contributions(Xd[:1], interactions=interactions)  # compile and load first
        _profile_preparation(lambda: fresh().contributions(Xd[:1], interactions=interactions), profile_top)
    xgb_t = _timed(lambda: model.predict(xgb.DMatrix(Xd), **kw), repeats)
    dgb_t = _timed(lambda: fresh().contributions(Xd, interactions=interactions), repeats)
    prep_t = _timed(lambda: fresh().contributions(Xd[:1], interactions=interactions), repeats)
    explainer = dg.TreeExplainer(model, device="cuda", **budget)
    warm_t = _timed(lambda: explainer.contributions(Xd, interactions=interactions), repeats)
    m = min(n, 2000)
    check = cupy.asnumpy(explainer.contributions(Xd[:m], interactions=interactions))
    ref = model.predict(xgb.DMatrix(rows[:m]), **kw)
    check = check[:, 0] if classes == 1 else check
    max_diff = float(np.abs(check - ref).max())
    rate = {k: n / v["median"] for k, v in {"xgboost": xgb_t, "dgboost": dgb_t, "dgboost_warm": warm_t}.items()}
    what = (
        f"SHAP {'interaction ' if interactions else ''}values on the GPU ({name}), end to end, {n:,} x {F}, "
        f"XGBoost model depth {depth}, {rounds} rounds x {classes} output(s) (vs XGBoost {xgb.__version__})"
    )
    line = {
        "what": what,
        "ratio": rate["dgboost"] / rate["xgboost"],
        "note": f"higher is better; {rate['dgboost']:,.0f} vs {rate['xgboost']:,.0f} rows/s (warm, explainer "
        f"built: {rate['dgboost_warm']:,.0f}, {rate['dgboost_warm'] / rate['xgboost']:.2f}x); "
        f"preparation (import, paths, tables, upload) {prep_t['median']:.3f} s; "
        f"median of {repeats}; max |diff| vs XGBoost {max_diff:.1e}",
    }
    print(
        f"{name:>15}: xgboost {rate['xgboost']:>12,.0f} rows/s | dgboost {rate['dgboost']:>12,.0f} "
        f"({line['ratio']:.2f}x) | warm {rate['dgboost_warm']:>12,.0f} "
        f"({rate['dgboost_warm'] / rate['xgboost']:.2f}x) | "
        f"prep {prep_t['median']:.3f} s | max diff {max_diff:.1e}",
        flush=True,
    )
    return {
        "case": name,
        "rows": n,
        "features": F,
        "rounds": rounds,
        "classes": classes,
        "depth": depth,
        "interactions": interactions,
        "seconds": {"xgboost": xgb_t, "dgboost": dgb_t, "dgboost_warm": warm_t, "dgboost_preparation": prep_t},
        "rows_per_s": rate,
        "max_abs_difference_vs_xgboost": max_diff,
        "table": line,
    }


def run_interventional(
    repeats: int,
    train_rows: int,
    rows: int = 100_000,
    background_rows: int = 100,
    cpu_rows: int = 2_000,
    shap_rows: int = 300,
) -> dict:
    """Interventional SHAP of case (a)'s model with ``background_rows`` background rows: the GPU
    on ``rows`` rows against dgboost's CPU engine (all cores) on ``cpu_rows`` and against
    ``shap.TreeExplainer(feature_perturbation="interventional")`` on ``shap_rows`` (XGBoost has
    no interventional SHAP). End to end: explainer construction (import, paths, the
    background's terms, upload) inside the timer for every library."""
    import os

    import cupy
    import shap
    import xgboost as xgb

    import dgboost as dg
    from dgboost.backend import _cuda_interventional as gpu_interventional
    from dgboost.datasets import make_synthetic

    F, n_rounds, _, depth, _, _ = CASES["a"]
    X, y, _ = make_synthetic(train_rows, F, task="binary", missing_rate=0.1, seed=0)
    model = xgb.train(
        {"objective": "binary:logistic", "max_depth": depth, "tree_method": "hist", "device": "cuda"},
        xgb.DMatrix(X, y),
        n_rounds,
    )
    data, _, _ = make_synthetic(rows, F, task="binary", missing_rate=0.1, seed=1)
    background = data[:background_rows]
    Xd = cupy.asarray(data)

    def gpu_call(n):
        gpu_interventional._clear_cache()
        return dg.TreeExplainer(model, background, device="cuda").contributions(Xd[:n])

    gpu_t = _timed(lambda: gpu_call(rows), repeats)
    explainer = dg.TreeExplainer(model, background, device="cuda")
    warm_t = _timed(lambda: explainer.contributions(Xd), repeats)
    cpu_t = _timed(lambda: dg.TreeExplainer(model, background).contributions(data[:cpu_rows]), repeats)
    shap_t = _timed(
        lambda: shap.TreeExplainer(
            model, background, feature_perturbation="interventional", model_output="raw"
        ).shap_values(data[:shap_rows], check_additivity=False),
        repeats,
    )
    check = cupy.asnumpy(explainer.contributions(Xd[:cpu_rows]))
    same = bool((check == dg.TreeExplainer(model, background).contributions(data[:cpu_rows])).all())
    reference = shap.TreeExplainer(model, background, feature_perturbation="interventional", model_output="raw")
    shap_diff = float(
        np.abs(check[:shap_rows, 0, :-1] - reference.shap_values(data[:shap_rows], check_additivity=False)).max()
    )
    rate = {
        "gpu": rows / gpu_t["median"],
        "gpu_warm": rows / warm_t["median"],
        "cpu": cpu_rows / cpu_t["median"],
        "shap": shap_rows / shap_t["median"],
    }
    what = (
        f"interventional SHAP on the GPU, end to end, {rows:,} x {F}, {background_rows} background rows, "
        f"model depth {depth}, {n_rounds} rounds (vs dgboost's CPU engine on {os.cpu_count()} cores)"
    )
    line = {
        "what": what,
        "ratio": rate["gpu"] / rate["cpu"],
        "note": f"higher is better; {rate['gpu']:,.0f} vs {rate['cpu']:,.0f} rows/s (warm: {rate['gpu_warm']:,.0f}); "
        f"median of {repeats}; values bitwise the CPU's: {same}",
    }
    shap_line = {
        "what": f"interventional SHAP on the GPU, end to end, {rows:,} x {F}, {background_rows} background "
        f"rows, model depth {depth}, {n_rounds} rounds (vs shap {shap.__version__} TreeExplainer, "
        f"interventional, on the CPU)",
        "ratio": rate["gpu"] / rate["shap"],
        "note": f"higher is better; {rate['gpu']:,.0f} vs {rate['shap']:,.0f} rows/s (shap on {shap_rows} "
        f"rows); median of {repeats}; max |diff| vs shap {shap_diff:.1e}",
    }
    print(
        f"   interventional: cpu {rate['cpu']:>10,.0f} rows/s | shap {rate['shap']:>10,.0f} "
        f"| gpu {rate['gpu']:>10,.0f} "
        f"({line['ratio']:.1f}x cpu, {shap_line['ratio']:.0f}x shap) | warm {rate['gpu_warm']:>10,.0f} | "
        f"bitwise {same} | vs shap {shap_diff:.1e}",
        flush=True,
    )
    return {
        "case": "interventional",
        "rows": rows,
        "background_rows": background_rows,
        "cpu_rows": cpu_rows,
        "shap_rows": shap_rows,
        "seconds": {"gpu": gpu_t, "gpu_warm": warm_t, "cpu": cpu_t, "shap": shap_t},
        "rows_per_s": rate,
        "bitwise_equal_to_cpu": same,
        "max_abs_difference_vs_shap": shap_diff,
        "table": [line, shap_line],
    }


def main(argv=None) -> None:
    import xgboost  # noqa: F401 - fail early when the reference is missing

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--cases",
        default=",".join([*CASES, "interventional"]),
        help=f"comma-separated, of {[*CASES, 'interventional']}",
    )
    parser.add_argument("--train-rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--max-table-bytes", type=int, default=None, help="weight-table budget (default: the explainer's)"
    )
    parser.add_argument(
        "--profile-preparation",
        type=int,
        default=0,
        metavar="N",
        help="also print the N host functions with the most time in one cold preparation (cProfile)",
    )
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    results = []
    for name in args.cases.split(","):
        results.append(
            run_interventional(args.repeats, args.train_rows)
            if name == "interventional"
            else run_case(name, args.repeats, args.train_rows, args.max_table_bytes, args.profile_preparation)
        )
        # written after every case, so a run cut short keeps what it measured
        payload = {
            "benchmark": "shap_gpu",
            "repeats": args.repeats,
            "max_table_bytes": args.max_table_bytes,
            "machine": machine(),
            "versions": versions("dgboost", "xgboost", "cupy"),
            "results": results,
            "table": [t for r in results for t in (r["table"] if isinstance(r["table"], list) else [r["table"]])],
        }
        path = write_result("shap_gpu", payload, args.output)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
