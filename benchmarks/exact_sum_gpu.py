"""Where the device time of ``dgboost.exact.exact_sum`` goes on a long label column.

A Dask job's base margins sum the rank's labels with :func:`dgboost.exact.exact_sum`; with the
labels on the device (115M float32 on the airline-like set) the stage took 189 ms a job on an
H200. This times, per call (median of ``--repeats``, after one warm-up): ``exact_sum`` itself,
and each CuPy step of its device path on the (n,) column and on its (1, n) transpose, and
says which reduction accelerators CuPy uses.

Usage: ``python benchmarks/exact_sum_gpu.py [--rows 115000000] [--repeats 7]``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import device_wall, machine, versions, write_result  # noqa: E402


def _timed(fn, repeats: int) -> dict:
    """:func:`_common.device_wall` in milliseconds."""
    wall = device_wall(fn, repeats)
    return {f"{k}_ms": 1e3 * v for k, v in wall.items()}


def main(argv=None) -> None:
    import cupy
    import numpy as np

    from dgboost.comm import LocalComm
    from dgboost.exact import exact_sum

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=115_000_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--output", default=None)
    args = ap.parse_args(argv)

    rng = cupy.random.default_rng(0)
    y = (rng.random(args.rows, dtype=cupy.float32) < 0.3).astype(cupy.float32)
    col = y.astype(cupy.float64)[:, None]  # (n, 1), as exact_sum saw it before
    row = cupy.ascontiguousarray(col.T)  # (1, n)
    comm = LocalComm()
    steps = {
        "exact_sum(label)": lambda: exact_sum(y, comm),
        "(n,1) isfinite.all": lambda: bool(cupy.isfinite(col).all()),
        "(n,1) abs.max(axis=0)": lambda: col.__abs__().max(axis=0).get(),
        "(n,1) rint(ldexp).astype(int64).sum(axis=0)": lambda: (
            cupy.rint(cupy.ldexp(col, cupy.asarray([40])[None, :])).astype(np.int64).sum(axis=0).get()
        ),
        "(1,n) isfinite.all": lambda: bool(cupy.isfinite(row).all()),
        "(1,n) abs.max(axis=1)": lambda: row.__abs__().max(axis=1).get(),
        "(1,n) rint(ldexp).astype(int64).sum(axis=1)": lambda: (
            cupy.rint(cupy.ldexp(row, cupy.asarray([40])[:, None])).astype(np.int64).sum(axis=1).get()
        ),
        "astype(float64) alone": lambda: y.astype(cupy.float64),
    }
    results = {name: _timed(fn, args.repeats) for name, fn in steps.items()}
    try:
        from cupy._core import _accelerator

        accelerators = {
            "reduction": [str(a) for a in _accelerator.get_reduction_accelerators()],
            "routine": [str(a) for a in _accelerator.get_routine_accelerators()],
        }
    except Exception as exc:  # noqa: BLE001 - a private module: report what is there
        accelerators = {"error": repr(exc)}
    payload = {
        "benchmark": "exact_sum_gpu",
        "rows": args.rows,
        "repeats": args.repeats,
        "accelerators": accelerators,
        "results": results,
        "machine": machine(),
        "versions": versions("dgboost", "cupy", "numpy"),
    }
    path = write_result("exact_sum_gpu", payload, args.output)
    print(json.dumps(accelerators))
    for name, r in results.items():
        print(f"  {name:48s} {r['median_ms']:9.2f} ms ({r['min_ms']:.2f}-{r['max_ms']:.2f})")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
