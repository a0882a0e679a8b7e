"""Where dgboost's whole-run time goes before the rounds, on one GPU: DMatrix construction and
training's set-up stages (base margins, cuts, binning, margins), for train_gpu.py's cases.

Each case: one small warm-up run (kernel loading, NVRTC), then ``--repeats`` runs of DMatrix
plus one round with ``dgboost._stages.recording`` (each stage waits for its device work).

    python benchmarks/setup_stages.py bosch year higgs
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_gpu import CASES, Device, _params, make_data  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="+", choices=sorted(CASES))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument(
        "--dgboost-params",
        type=json.loads,
        default={},
        help="JSON object of dgboost parameters over the shared ones, e.g. '{\"sketch_sample_rows\": 262144}'",
    )
    args = ap.parse_args(argv)
    import dgboost as dg
    from dgboost._stages import recording

    device = Device("cuda")
    sync = device.sync
    for name in args.cases:
        case = CASES[name]
        X, y = make_data(
            device.xp,
            case.rows,
            case.features,
            case.task,
            n_classes=case.n_classes,
            missing_rate=case.missing_rate,
            seed=0,
        )
        params = _params("dgboost", case, device, SimpleNamespace(threads=0, dgboost_params=args.dgboost_params))
        dg.train(params, dg.DMatrix(X[:20_000], y[:20_000]), 2, verbose_eval=False)  # warm-up
        for rep in range(args.repeats):
            sync()
            t0 = time.perf_counter()
            dmat = dg.DMatrix(X, y)
            sync()
            t1 = time.perf_counter()
            with recording() as stages:
                dg.train(params, dmat, 1, verbose_eval=False)
            sync()
            t2 = time.perf_counter()
            print(
                f"{name} [{rep}]: DMatrix {1e3 * (t1 - t0):.1f} ms, train (one round) {1e3 * (t2 - t1):.1f} ms; "
                + ", ".join(f"{k} {1e3 * v:.1f}" for k, v in stages.items())
                + " ms",
                flush=True,
            )
        del X, y, dmat
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
