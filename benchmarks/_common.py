"""Shared helpers of the benchmark scripts: machine facts, versions, JSON results."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "processor": platform.processor(),
    }
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        info["cpu_model"] = next(l.split(":", 1)[1].strip() for l in lines if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        gpu = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        )
        if gpu.returncode == 0:
            info["gpus"] = gpu.stdout.strip().splitlines()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return info


def versions(*modules: str) -> dict:
    out = {}
    for name in modules:
        try:
            out[name] = __import__(name).__version__
        except Exception:  # noqa: BLE001 - absent packages are simply not listed
            out[name] = None
    return out


def write_result(name: str, payload: dict, path: str | os.PathLike | None = None) -> Path:
    """Write ``payload`` (plus name, date and machine) as JSON to ``path``, by default
    ``benchmarks/results/<name>.json``."""
    path = Path(path) if path is not None else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), **payload}
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def event_times_ms(fn, repeats: int) -> list[float]:
    """Milliseconds of each of ``repeats`` calls of ``fn()`` between two CUDA events on the
    current stream, after one call to warm up (device time: the host's own time between
    launches counts only where the device waited for it)."""
    import cupy

    fn()
    times = []
    for _ in range(repeats):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(cupy.cuda.get_elapsed_time(a, b))
    return times


def histogram_inputs(n_rows: int, n_features: int, missing: float = 0.0, max_bin: int = 256, seed: int = 0):
    """The CUDA backend, cuts, ELLPACK matrix and quantised pairs of a synthetic table for the
    histogram benchmarks: standard normal columns, ``missing`` of the values NaN at random,
    cuts from the first 300,000 rows, pairs at fixed-point scales 2**27 and 2**29 (every row
    kept). Returns ``(backend, cuts, ellpack, gpair int32 (n_rows, 2))``."""
    import cupy
    import numpy as np

    from dgboost.backend import get_backend
    from dgboost.quantile import compute_cuts

    backend = get_backend("cuda")
    rs = cupy.random.RandomState(seed)
    x = rs.standard_normal((n_rows, n_features), dtype=cupy.float32)
    if missing > 0:
        x = cupy.where(rs.random_sample((n_rows, n_features), dtype=cupy.float32) < missing, cupy.float32(np.nan), x)
    cuts = compute_cuts(x[: min(n_rows, 300_000)].get(), None, max_bin)
    ellpack = backend.bin_values(x, cuts.values, cuts.ptrs)
    del x
    grad, hess = rs.standard_normal(n_rows, dtype=cupy.float32), rs.random_sample(n_rows, dtype=cupy.float32)
    gpair = backend.quantise(grad, hess, np.array([2.0**27, 2.0**29]))
    return backend, cuts, ellpack, gpair


def device_wall(fn, repeats: int) -> dict:
    """Wall seconds of ``fn()`` with the GPU's queue drained before and after each call: one
    call to warm up, then ``{"median", "min", "max"}`` over ``repeats`` calls."""
    import statistics

    import cupy

    fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        cupy.cuda.Device().synchronize()
        times.append(time.perf_counter() - t0)
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}
