"""Where dgboost's whole-run time goes before the rounds: training's set-up stages (base margins,
cuts, binning, margins), on one GPU for train_gpu.py's cases, or on the CPU for train_cpu.py's.

GPU (``--device cuda``, the default): each case, one small warm-up run (kernel loading, NVRTC),
then ``--repeats`` runs of DMatrix plus one round with ``dgboost._stages.recording`` (each stage
waits for its device work).

    python benchmarks/setup_stages.py bosch year higgs

CPU (``--device cpu``): train_cpu.py's data (``--rows`` x 28 dense float32, binary, depth 8,
max_bin 256) on ``--threads`` threads; after a small warm-up run (Numba compilation), each of
``--repeats`` runs trains ``--rounds`` rounds on a DMatrix made before the clock starts, and
reports the set-up stages, the rest of the set-up (``train`` call to ``before_training``), the
first ``--warm-rounds`` rounds one by one and the median of the later ones, and what the first
rounds cost beyond that median. XGBoost ``hist`` trains a fresh DMatrix of the same data in the
same runs: its sketch and gradient index are made inside its first round (and then cached in
the DMatrix), so its set-up is its whole ``train`` less ``rounds`` times its later median.
``--clock cpu`` times everything by the process's CPU time instead of the wall clock (with
``--threads 1``: the work, less disturbed by other jobs on a shared machine). Medians of the
repeats; writes ``--out`` (JSON).

    python benchmarks/setup_stages.py --device cpu --threads 2
    python benchmarks/setup_stages.py --device cpu --threads 1 --clock cpu \
        --out benchmarks/results/setup_stages_cpu_1t.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_gpu import CASES, Device, _params, case_data  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", choices=sorted(CASES), help="train_gpu.py's cases (GPU only)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--repeats", type=int, default=None, help="runs of each case (GPU: 2, CPU: 3)")
    ap.add_argument("--rows", type=int, default=1_000_000, help="CPU: rows of train_cpu.py's data")
    ap.add_argument("--threads", type=int, default=2, help="CPU: nthread of both libraries")
    ap.add_argument("--rounds", type=int, default=20, help="CPU: rounds a run")
    ap.add_argument("--warm-rounds", type=int, default=5, help="CPU: the first rounds, reported one by one")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="CPU: wall clock or process CPU time")
    ap.add_argument("--no-xgboost", action="store_true", help="CPU: leave XGBoost out")
    ap.add_argument("--out", default=None, help="CPU: the JSON file (default results/setup_stages_cpu.json)")
    ap.add_argument(
        "--dgboost-params",
        type=json.loads,
        default={},
        help="JSON object of dgboost parameters over the shared ones, e.g. '{\"sketch_sample_rows\": 262144}'",
    )
    args = ap.parse_args(argv)
    if args.device == "cpu":
        return _cpu(args)
    if not args.cases:
        ap.error("name at least one case for the GPU")
    args.repeats = args.repeats or 2
    import dgboost as dg
    from dgboost._stages import recording

    device = Device("cuda")
    sync = device.sync
    for name in args.cases:
        case = CASES[name]
        X, y = case_data(device.xp, case, case.rows, seed=0)
        params = _params("dgboost", case, device, SimpleNamespace(threads=0, dgboost_params=args.dgboost_params))
        dg.train(params, dg.DMatrix(X[:20_000], y[:20_000]), 2, verbose_eval=False)  # warm-up
        for rep in range(args.repeats):
            sync()
            f0, t0 = _page_faults(), time.perf_counter()
            dmat = dg.DMatrix(X, y)
            sync()
            f1, t1 = _page_faults(), time.perf_counter()
            with recording() as stages:
                dg.train(params, dmat, 1, verbose_eval=False)
            sync()
            f2, t2 = _page_faults(), time.perf_counter()
            print(
                f"{name} [{rep}]: DMatrix {1e3 * (t1 - t0):.1f} ms ({f1 - f0} page faults), train (one round) "
                f"{1e3 * (t2 - t1):.1f} ms ({f2 - f1} page faults); "
                + ", ".join(f"{k} {1e3 * v:.1f}" for k, v in stages.items())
                + " ms",
                flush=True,
            )
        del X, y, dmat
    return 0


def _page_faults() -> int:
    """The process's minor page faults so far (fresh host memory touched for the first time)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _stamps(base, now):
    """A training callback (of either library) that stamps ``before_training`` and every round's end."""

    class Stamps(base):
        def __init__(self):
            super().__init__()
            self.stamps = []

        def before_training(self, model):
            self.stamps.append(now())
            return model

        def after_iteration(self, model, epoch, evals_log):
            self.stamps.append(now())
            return False

    return Stamps()


def _rounds(start: float, stamps: list, end: float, warm: int) -> dict:
    """A run's split: set-up (call to before_training), the first ``warm`` rounds, the median of
    the later ones, and what the first rounds cost beyond that median."""
    rounds = np.diff(stamps)
    later = float(np.median(rounds[warm:]))
    return {
        "total_s": end - start,
        "before_rounds_s": stamps[0] - start,
        "first_rounds_s": [float(r) for r in rounds[:warm]],
        "later_round_median_s": later,
        "first_rounds_excess_s": float(np.sum(rounds[:warm]) - warm * later),
        "beyond_rounds_s": float(end - start - len(rounds) * later),
    }


def _median_of(runs: list[dict]) -> dict:
    """Per key, the median over the runs (lists element by element), with the runs' range."""
    out = {}
    for key, first in runs[0].items():
        if isinstance(first, dict):
            out[key] = _median_of([r[key] for r in runs])
        elif isinstance(first, list):
            out[key] = [float(np.median([r[key][i] for r in runs])) for i in range(len(first))]
        else:
            values = [r[key] for r in runs]
            out[key] = float(np.median(values))
            out[key + "_range"] = [float(min(values)), float(max(values))]
    return out


def _cpu(args) -> int:
    """train_cpu.py's case on the CPU: set-up stages, first rounds, XGBoost's set-up beside."""
    from _common import versions, write_result

    import dgboost as dg
    import dgboost._stages as stages_module
    from dgboost._stages import recording
    from dgboost.datasets import make_synthetic

    repeats = args.repeats or 3
    now = time.perf_counter if args.clock == "wall" else time.process_time
    # the stages are timed with the same clock (the recording reads time.perf_counter)
    stages_module.time = SimpleNamespace(perf_counter=now)
    x, y, _ = make_synthetic(args.rows, 28, task="binary", missing_rate=0.0, seed=0)
    params = {"objective": "binary:logistic", "max_depth": 8, "eta": 0.1, "max_bin": 256, "nthread": args.threads}
    dg.train(params, dg.DMatrix(x[:5000], y[:5000]), 2, verbose_eval=False)  # Numba compilation
    xgb = None
    if not args.no_xgboost:
        import xgboost as xgb
    runs = []
    for rep in range(repeats):
        run = {}
        d_dg = dg.DMatrix(x, y)
        clock = _stamps(dg.TrainingCallback, now)
        start = now()
        with recording() as stages:
            dg.train(params, d_dg, args.rounds, verbose_eval=False, callbacks=[clock])
        end = now()
        run["dgboost"] = _rounds(start, clock.stamps, end, args.warm_rounds)
        run["dgboost"]["stages_s"] = dict(stages)
        run["dgboost"]["setup_other_s"] = run["dgboost"]["before_rounds_s"] - sum(stages.values())
        del d_dg
        if xgb is not None:
            d_xgb = xgb.DMatrix(x, y, nthread=args.threads)  # fresh: no gradient index cached in it
            clock = _stamps(xgb.callback.TrainingCallback, now)
            start = now()
            xgb.train({**params, "tree_method": "hist"}, d_xgb, args.rounds, callbacks=[clock])
            end = now()
            run["xgboost"] = _rounds(start, clock.stamps, end, args.warm_rounds)
            del d_xgb
        runs.append(run)
        dgr = run["dgboost"]
        print(
            f"[{rep}] dgboost: total {dgr['total_s']:.3f} s, set-up {dgr['before_rounds_s']:.3f} ("
            + ", ".join(f"{k} {v:.3f}" for k, v in dgr["stages_s"].items())
            + f", other {dgr['setup_other_s']:.3f}), first rounds "
            + " ".join(f"{v:.3f}" for v in dgr["first_rounds_s"])
            + f", later median {dgr['later_round_median_s']:.3f}, beyond the rounds {dgr['beyond_rounds_s']:.3f}"
            + (
                ""
                if xgb is None
                else f"; xgboost: total {run['xgboost']['total_s']:.3f}, first rounds "
                + " ".join(f"{v:.3f}" for v in run["xgboost"]["first_rounds_s"])
                + f", later median {run['xgboost']['later_round_median_s']:.3f}, "
                f"beyond the rounds {run['xgboost']['beyond_rounds_s']:.3f}"
            ),
            flush=True,
        )
    result = {
        "rows": args.rows,
        "features": 28,
        "threads": args.threads,
        "rounds": args.rounds,
        "warm_rounds": args.warm_rounds,
        "clock": args.clock,
        "repeats": repeats,
        "versions": versions("dgboost", "xgboost", "numba", "numpy"),
        "median": _median_of(runs),
        "runs": runs,
        "load_average_after": list(os.getloadavg()),
    }
    if xgb is not None:
        dg_beyond = result["median"]["dgboost"]["beyond_rounds_s"]
        xgb_beyond = result["median"]["xgboost"]["beyond_rounds_s"]
        clock = "wall clock" if args.clock == "wall" else "process CPU time"
        result["table"] = [
            {
                "what": f"train's set-up beyond its rounds (cuts and binning; XGBoost: sketch and gradient "
                f"index), {args.rows:,} x 28, {args.threads} threads, {clock} (vs XGBoost hist)",
                "ratio": dg_beyond / xgb_beyond,
                "note": f"lower is better; {dg_beyond:.2f} against {xgb_beyond:.2f} s",
            }
        ]
    out = args.out or str(Path(__file__).resolve().parent / "results" / "setup_stages_cpu.json")
    path = write_result("setup_stages_cpu", result, out)
    print(f"results in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
