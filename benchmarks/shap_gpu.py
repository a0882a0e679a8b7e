"""dgboost GPU TreeSHAP vs XGBoost's GPU ``pred_contribs`` on the same model, rows and GPU.

The model is XGBoost's (``hist``, ``device="cuda"``, depth ``--depth``, ``--rounds`` rounds on
synthetic binary data with 10% missing values), so both libraries explain the same trees.
Timed end to end, as a user's call pays it, to a device synchronise, median of ``--repeats``
after one warm-up each:

* XGBoost: ``DMatrix(X)`` + ``predict(pred_contribs=True)`` from a CuPy array;
* dgboost: ``TreeExplainer(model, device="cuda")`` (path table, packing, upload) +
  ``contributions(X)``; and, labelled *warm*, ``contributions`` with the explainer built.

    python benchmarks/shap_gpu.py --rows 1000000
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


def main(argv=None) -> None:
    import cupy
    import xgboost as xgb

    import dgboost as dg
    from dgboost.datasets import make_synthetic

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--train-rows", type=int, default=200_000)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)

    X, y, _ = make_synthetic(args.train_rows, 28, task="binary", missing_rate=0.1, seed=0)
    model = xgb.train({"objective": "binary:logistic", "max_depth": args.depth, "tree_method": "hist",
                       "device": "cuda"}, xgb.DMatrix(X, y), args.rounds)
    rows, _, _ = make_synthetic(args.rows, 28, task="binary", missing_rate=0.1, seed=1)
    Xd = cupy.asarray(rows)

    xgb_t = _timed(lambda: model.predict(xgb.DMatrix(Xd), pred_contribs=True), args.repeats)
    dgb_t = _timed(lambda: dg.TreeExplainer(model, device="cuda").contributions(Xd.get()), args.repeats)
    explainer = dg.TreeExplainer(model, device="cuda")
    warm_t = _timed(lambda: explainer.contributions(Xd.get()), args.repeats)
    check = explainer.contributions(rows[:2000])[:, 0, :]
    ref = model.predict(xgb.DMatrix(rows[:2000]), pred_contribs=True)
    max_diff = float(np.abs(check - ref).max())

    rate = {k: args.rows / v["median"] for k, v in {"xgboost": xgb_t, "dgboost": dgb_t, "dgboost_warm": warm_t}.items()}
    payload = {"benchmark": "shap_gpu", "rows": args.rows, "depth": args.depth, "rounds": args.rounds,
               "repeats": args.repeats, "machine": machine(), "versions": versions("dgboost", "xgboost", "cupy"),
               "seconds": {"xgboost": xgb_t, "dgboost": dgb_t, "dgboost_warm": warm_t}, "rows_per_s": rate,
               "max_abs_difference_vs_xgboost": max_diff,
               "table": [{"what": f"SHAP values on the GPU, end to end, {args.rows:,} x 28, XGBoost model depth "
                                  f"{args.depth}, {args.rounds} trees (vs XGBoost {xgb.__version__} pred_contribs)",
                          "ratio": rate["dgboost"] / rate["xgboost"],
                          "note": f"higher is better; {rate['dgboost']:,.0f} vs {rate['xgboost']:,.0f} rows/s "
                                  f"(warm, explainer built: {rate['dgboost_warm']:,.0f}); median of {args.repeats}"}]}
    path = write_result("shap_gpu", payload, args.output)
    print(f"XGBoost pred_contribs: {rate['xgboost']:,.0f} rows/s ({xgb_t['median']:.3f} s)")
    print(f"dgboost end to end:    {rate['dgboost']:,.0f} rows/s ({dgb_t['median']:.3f} s), "
          f"ratio {rate['dgboost'] / rate['xgboost']:.2f}")
    print(f"dgboost warm:          {rate['dgboost_warm']:,.0f} rows/s ({warm_t['median']:.3f} s)")
    print(f"max |dgboost - xgboost| on 2000 rows: {max_diff:.2e}; wrote {path}")


if __name__ == "__main__":
    main()
