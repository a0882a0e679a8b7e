"""What ``Booster.update`` costs: ``rounds`` calls of ``update`` vs one ``train(..., rounds)``.

60,000 x 20 synthetic regression (``dgboost.datasets.make_synthetic``) on the CPU. The two
are run alternately ``--repeats`` times; reports the median time of each with its range, the
ratio of the medians (update / train) and whether both give the same model bytes. Target
(issue 27): at most 1.3x (the booster keeps its training job between ``update`` calls).

    python benchmarks/booster_update.py --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import versions, write_result  # noqa: E402


def main() -> None:
    import dgboost as dg
    from dgboost.datasets import make_synthetic

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=60_000)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="nthread (0: every core)")
    args = ap.parse_args()
    X, y, _ = make_synthetic(args.rows, args.features, task="regression", seed=0)
    params = {"objective": "reg:squarederror", "max_depth": 6, "eta": 0.1, "nthread": args.threads, "device": "cpu"}

    def by_train() -> tuple[float, bytes]:
        start = time.perf_counter()
        booster = dg.train(params, dg.DMatrix(X, y), args.rounds, verbose_eval=False)
        return time.perf_counter() - start, bytes(booster.save_raw())

    def by_update() -> tuple[float, bytes]:
        start = time.perf_counter()
        dtrain = dg.DMatrix(X, y)
        booster = dg.Booster(params)
        for i in range(args.rounds):
            booster.update(dtrain, i)
        return time.perf_counter() - start, bytes(booster.save_raw())

    by_train()  # compiles the kernels (Numba's cache may be cold)
    times: dict[str, list[float]] = {"train": [], "update": []}
    models = {}
    for _ in range(args.repeats):
        for name, run in (("train", by_train), ("update", by_update)):
            seconds, models[name] = run()
            times[name].append(seconds)
            print(f"{name}: {seconds:.2f} s", flush=True)
    median = {name: statistics.median(t) for name, t in times.items()}
    ratio = median["update"] / median["train"]
    result = {
        "rows": args.rows,
        "features": args.features,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "params": params,
        "versions": versions("dgboost", "numpy", "numba"),
        "seconds": {
            name: {"median": median[name], "min": min(t), "max": max(t), "runs": t} for name, t in times.items()
        },
        "ratio_update_over_train": ratio,
        "target_ratio": 1.3,
        "same_model": models["train"] == models["update"],
    }
    path = write_result("booster_update", result)
    print(f"update / train = {ratio:.2f} (target <= 1.3); same model: {result['same_model']}; wrote {path}")


if __name__ == "__main__":
    main()
