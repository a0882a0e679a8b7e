"""What an evaluation set costs: training with one eval set the size of the training set vs none.

dgboost and XGBoost ``hist`` on the same data and parameters, in one run, alternating the two
settings over ``--repeats`` runs; reports the median whole-run time of each and the ratio
(with eval / without), for both libraries. Target (issue: XGBoost drop-in): at most 1.3x.

    python benchmarks/eval_overhead.py --rows 200000 --rounds 50 --repeats 3
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
    import xgboost as xgb

    import dgboost as dg
    from dgboost.datasets import make_synthetic

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    n = args.rows
    X, y, _ = make_synthetic(2 * n, 28, task="binary", missing_rate=0.1, seed=0)
    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.1, "max_bin": 256, "nthread": args.threads}

    def run_dgboost(with_eval: bool) -> float:
        start = time.perf_counter()
        dtrain = dg.DMatrix(X[:n], y[:n])
        evals = [(dg.DMatrix(X[n:], y[n:]), "valid")] if with_eval else []
        dg.train(params, dtrain, args.rounds, evals=evals, verbose_eval=False)
        return time.perf_counter() - start

    def run_xgboost(with_eval: bool) -> float:
        start = time.perf_counter()
        dtrain = xgb.QuantileDMatrix(X[:n], y[:n], max_bin=256)
        evals = [(xgb.DMatrix(X[n:], y[n:]), "valid")] if with_eval else []
        xgb.train({**params, "tree_method": "hist"}, dtrain, args.rounds, evals=evals, verbose_eval=False)
        return time.perf_counter() - start

    run_dgboost(False)  # compile and warm caches
    times = {(lib, e): [] for lib in ("dgboost", "xgboost") for e in (False, True)}
    for r in range(args.repeats):
        order = [False, True] if r % 2 == 0 else [True, False]
        for with_eval in order:
            times[("dgboost", with_eval)].append(run_dgboost(with_eval))
            times[("xgboost", with_eval)].append(run_xgboost(with_eval))
    table, rows = [], {}
    for lib in ("dgboost", "xgboost"):
        base = statistics.median(times[(lib, False)])
        with_eval = statistics.median(times[(lib, True)])
        rows[lib] = {
            "without_eval_s": times[(lib, False)],
            "with_eval_s": times[(lib, True)],
            "ratio": with_eval / base,
        }
        table.append(
            {
                "what": f"{lib}: training with one eval set of {n:,} rows / without, {n:,} x 28, "
                f"{args.rounds} rounds, depth 6, {args.threads} threads",
                "ratio": with_eval / base,
                "note": f"lower is better; target <= 1.3 (whole runs, median of {args.repeats} alternating)",
            }
        )
        print(
            f"{lib:<8} without {base:6.2f} s  with eval {with_eval:6.2f} s  ratio {with_eval / base:.2f}  "
            f"(runs {['%.2f' % t for t in times[(lib, False)]]} / {['%.2f' % t for t in times[(lib, True)]]})"
        )
    write_result(
        "eval_overhead",
        {
            "args": vars(args),
            "results": rows,
            "table": table,
            "versions": versions("dgboost", "xgboost", "numpy", "numba"),
        },
    )


if __name__ == "__main__":
    main()
