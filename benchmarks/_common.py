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
