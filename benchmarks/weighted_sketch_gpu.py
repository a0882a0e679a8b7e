"""Weighted rows on one GPU: the quantile sketch of weighted samples, and whole jobs.

Run by one dgboost version per process (``PYTHONPATH`` picks it), so that two versions can
be compared on the same machine in one call; the JSON names the version's label.

* **cuts** (``compute_cuts`` of device rows and device weights; 2**20 sampled rows): the
  device's weighted sketch against the unweighted one, median of 5 (min-max), after one
  call; the cut values' bits against the host sketch of the same rows (``.get()``).
* **jobs** (``DMatrix`` + ``dgboost.train``, 10 rounds, depth 6, end to end to a device
  synchronise): CuPy rows and NumPy rows (uploaded by the job), unweighted and with two
  kinds of weights, median of 5 (min-max), after a 20,000-row warm-up job of each kind.

Weights: ``narrow`` uniform(0.5, 1.5) (their float64 sums are exact in any order: the rank
bounds are scanned in parallel), ``spread`` 10**uniform(-2, 2) (sums rounded: added one by
one, as the host adds them).

Usage: ``python benchmarks/weighted_sketch_gpu.py LABEL OUT.json``
"""

from __future__ import annotations

import functools
import json
import statistics
import sys
import time
from pathlib import Path

import cupy as cp

import dgboost as dg
from dgboost.quantile import compute_cuts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_gpu import make_data  # noqa: E402

REPEATS = 5
WEIGHTS = {
    "narrow": lambda n: cp.random.default_rng(3).uniform(0.5, 1.5, n).astype(cp.float32),
    "spread": lambda n: (10.0 ** cp.random.default_rng(3).uniform(-2, 2, n)).astype(cp.float32),
}
CUT_CASES = {
    "higgs_like_5m_x_28": (5_000_000, 28, 0.0),
    "bosch_like_1m_x_968": (1_000_000, 968, 0.8),
}
JOB_PARAMS = {"device": "cuda", "objective": "binary:logistic", "tree_method": "hist", "max_depth": 6}


def _timed(fn, repeats: int = REPEATS) -> dict:
    ms = []
    for _ in range(repeats):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        ms.append(1e3 * (time.perf_counter() - t0))
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "ms": ms}


def _same_cuts(a, b) -> bool:
    return a.ptrs.tobytes() == b.ptrs.tobytes() and a.values.tobytes() == b.values.tobytes()


def cuts() -> dict:
    out = {}
    for name, (rows, feats, missing) in CUT_CASES.items():
        values, _ = make_data(cp, rows, feats, "binary", missing_rate=missing)
        compute_cuts(values, None, 256)
        out[f"{name}/unweighted"] = _timed(functools.partial(compute_cuts, values, None, 256))
        for kind, make in WEIGHTS.items():
            w = make(rows)
            first = compute_cuts(values, w, 256)
            entry = _timed(functools.partial(compute_cuts, values, w, 256))
            entry["same_bits_as_host"] = _same_cuts(first, compute_cuts(values.get(), w.get(), 256))
            out[f"{name}/{kind}"] = entry
            print(name, kind, {k: round(v, 1) for k, v in entry.items() if k.endswith("_ms") and k != "ms"}, flush=True)
        del values
        cp.get_default_memory_pool().free_all_blocks()
    return out


def _job(X, y, w) -> None:
    dg.train(JOB_PARAMS, dg.DMatrix(X, y, weight=w), 10)


def jobs() -> dict:
    out = {}
    X, y = make_data(cp, 5_000_000, 28, "binary")
    host = (X.get(), y.get())
    weights = {"unweighted": None, **{k: make(len(y)) for k, make in WEIGHTS.items()}}
    for rows_kind, (Xr, yr) in {"cupy": (X, y), "numpy": host}.items():
        for kind, w in weights.items():
            wr = None if w is None else (w if rows_kind == "cupy" else w.get())
            small = slice(0, 20_000)
            dg.train(JOB_PARAMS, dg.DMatrix(Xr[small], yr[small], weight=None if wr is None else wr[small]), 2)
            entry = _timed(functools.partial(_job, Xr, yr, wr))
            out[f"{rows_kind}/{kind}"] = entry
            print("job", rows_kind, kind, round(entry["median_ms"], 1), flush=True)
    return out


def main() -> None:
    label, path = sys.argv[1], sys.argv[2]
    result = {
        "benchmark": "weighted_sketch_gpu",
        "label": label,
        "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "versions": {"cupy": cp.__version__, "cuda_runtime": cp.cuda.runtime.runtimeGetVersion()},
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "repeats": REPEATS,
        "jobs": jobs(),
        "cuts": cuts(),
    }
    Path(path).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
