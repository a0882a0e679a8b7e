"""Time the GPU interaction kernels' layouts on one model (kernel work; not a headline figure).

Trains a dgboost model shaped like ``shap_gpu.py`` case (a) on the GPU (28 features, 200
rounds of depth 8 by default), then times warm ``contributions(X, interactions=True)`` with
each layout of :func:`dgboost.backend._cuda_treeshap._interaction_layout` forced (median of 3 after a
warm-up) and checks that every layout gives the first one's bits.

    python benchmarks/profile_interactions.py --rows 20000
"""

from __future__ import annotations

import argparse
import statistics
import time


def main(argv=None) -> None:
    import cupy

    import dgboost as dg
    from dgboost.backend import _cuda_treeshap as gpu
    from dgboost.datasets import make_synthetic

    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--features", type=int, default=28)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--layouts", default="auto,warp-out,rows")
    args = parser.parse_args(argv)
    X, y, _ = make_synthetic(200_000, args.features, task="binary", missing_rate=0.1, seed=0)
    booster = dg.train(
        {"objective": "binary:logistic", "max_depth": args.depth, "device": "cuda"}, dg.DMatrix(X, y), args.rounds
    )
    rows = cupy.asarray(make_synthetic(args.rows, args.features, task="binary", missing_rate=0.1, seed=1)[0])
    explainer = dg.TreeExplainer(booster, device="cuda")
    table = explainer.table
    print(f"paths {table.n_paths}, mean length {table.path_lengths.mean():.2f}, rows {args.rows}")
    automatic = gpu._interaction_layout
    forced = {"warp-out": ("warp-out", 8, 0), "rows": ("rows", 0, 0)}
    first = None
    for layout in args.layouts.split(","):
        gpu._interaction_layout = automatic if layout == "auto" else (lambda F, n, G, f=forced[layout]: f)
        explainer.contributions(rows[:64], interactions=True)
        times = []
        for _ in range(4):
            cupy.cuda.Device().synchronize()
            t0 = time.perf_counter()
            out = explainer.contributions(rows, interactions=True)
            cupy.cuda.Device().synchronize()
            times.append(time.perf_counter() - t0)
        times = times[1:]
        same = "" if first is None else (" bitwise" if bool((out == first).all()) else " DIFFERENT BITS")
        first = out if first is None else first
        print(
            f"{layout:>10}: {args.rows / statistics.median(times):>10,.0f} rows/s "
            f"({min(times):.3f}-{max(times):.3f} s){same}",
            flush=True,
        )
    gpu._interaction_layout = automatic


if __name__ == "__main__":
    main()
