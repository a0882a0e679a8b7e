"""Quick end-to-end check on a GPU machine: CPU and GPU training give the same trees.

Prints, for a few shapes and parameter sets, whether split features/bins/default directions
are identical and the largest relative leaf difference. A development aid; the tests in
tests/gpu/ are the acceptance checks.
"""
from __future__ import annotations

import sys
import time

import numpy as np

import dgboost
from dgboost.datasets import make_synthetic


def compare(params, X, y, rounds, **dm):
    out = {}
    for device in ("cpu", "cuda"):
        t = time.perf_counter()
        b = dgboost.train({**params, "device": device}, dgboost.DMatrix(X, y, **dm), rounds, verbose_eval=False)
        out[device] = (b, time.perf_counter() - t)
    a, b = out["cpu"][0].ensemble, out["cuda"][0].ensemble
    same = (a.n_trees == b.n_trees and a.n_nodes == b.n_nodes and np.array_equal(a.feature, b.feature)
            and np.array_equal(a.left, b.left) and np.array_equal(a.default_left, b.default_left)
            and np.array_equal(a.split_value, b.split_value))
    rel = float(np.max(np.abs(a.value - b.value) / np.maximum(np.abs(a.value), 1e-30))) if same else float("nan")
    return same, rel, out["cpu"][1], out["cuda"][1], a.n_nodes, b.n_nodes


def main():
    cases = [
        ("binary depthwise", {"objective": "binary:logistic", "max_depth": 6}, "binary", 20000, 10, {}),
        ("binary lossguide", {"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 31,
                              "max_depth": 0}, "binary", 20000, 10, {}),
        ("regression sampled", {"objective": "reg:squarederror", "max_depth": 5, "subsample": 0.8,
                                "colsample_bynode": 0.7, "reg_alpha": 0.3}, "regression", 20000, 12, {}),
        ("multiclass", {"objective": "multi:softprob", "num_class": 4, "max_depth": 5}, "multiclass", 10000, 8, {}),
        ("wide", {"objective": "binary:logistic", "max_depth": 4}, "binary", 3000, 1500, {}),
    ]
    bad = 0
    for name, params, task, n, f, dm in cases:
        kw = {"n_classes": params["num_class"]} if task == "multiclass" else {}
        X, y, _ = make_synthetic(n, f, task=task, missing_rate=0.2, seed=1, **kw)
        try:
            same, rel, tc, tg, nc, ng = compare(params, X, y, 10, **dm)
        except Exception as exc:  # noqa: BLE001 - report and go on
            import traceback

            traceback.print_exc()
            print(f"{name:<22} ERROR {type(exc).__name__}: {exc}")
            bad += 1
            continue
        bad += not same or not rel <= 1e-6
        print(f"{name:<22} same={same} leaf_rel={rel:.2e} cpu={tc:.2f}s gpu={tg:.2f}s nodes={nc}/{ng}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
