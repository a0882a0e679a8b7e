"""Where a GPU SHAP call's time goes, case by case (issue 32): not a headline figure.

For each case of ``shap_gpu.py`` (the same XGBoost model and rows) it reports

* the path table: paths, elements, lengths, and how many paths each method computes at the
  GPU's default budget (weight table, quadrature, EXTEND/UNWOUND);
* a warm ``contributions`` call (explainer built): wall time, median of ``--repeats``, and
  the host functions with the most own time in one call (cProfile);
* a cold preparation (``TreeExplainer`` with its caches emptied, one row explained): wall
  time by stage, from cProfile's cumulative times;
* with ``--ncu``: the device time of every kernel of one warm call (Nsight Compute,
  ``gpu__time_duration``), so that wall minus kernels is what the host and the gaps cost;
* with ``--cold-runs N``: N end-to-end cold calls as ``shap_gpu.py`` times them (a fresh
  explainer, every row, a device synchronise), each split by wall clock into its stages
  (inclusive: the import holds the model key, the upload holds the host arrays) and the
  time Python's garbage collector ran (``gc.callbacks``), so that a slow run shows where it
  lost its time.

    python benchmarks/shap_gpu_anatomy.py --cases c,d,a-interactions,imported --ncu
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _common import device_wall, machine, versions, write_result  # noqa: E402
from round_bandwidth import _ncu, parse_ncu_csv  # noqa: E402
from shap_gpu import CASES, make_case  # noqa: E402

# cProfile's cumulative entries reported as preparation stages (function name -> label)
_STAGES = {
    "booster_ubjson": "the booster's bytes",
    "save_raw": "xgboost save_raw",
    "from_xgboost_ubjson": "import of a Booster's bytes",
    "from_model_bytes": "import of a model file",
    "content_digest": "model content key",
    "expected_value": "expected value",
    "extract_paths": "path extraction",
    "fingerprint": "path-table fingerprint",
    "_host_arrays": "device host arrays",
    "__init__ (DevicePathTable)": "upload and weight tables",
}


def _layout(table, max_table_bytes: int) -> dict:
    """Paths by method at the GPU's budget, and the path-length histogram."""
    from dgboost.explain import tables, treeshap

    offsets, _, _, total = tables.table_layout(table, max_table_bytes)
    k = table.path_lengths.astype(np.int64) - 1
    tabled = offsets >= 0
    quad = ~tabled & (k <= treeshap.QUADRATURE_MAX_K)
    lengths, counts = np.unique(k, return_counts=True)
    return {
        "paths": int(table.n_paths),
        "elements": int(table.path_lengths.sum()),
        "mean_k": float(k.mean()),
        "k_histogram": {int(a): int(b) for a, b in zip(lengths, counts)},
        "paths_tabled": int(tabled.sum()),
        "paths_quadrature": int(quad.sum()),
        "paths_extend_unwound": int((~tabled & ~quad).sum()),
        "table_bytes": int(total) * 8,
    }


def _profiled(fn, top: int) -> tuple[str, pstats.Stats]:
    import cupy

    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    cupy.cuda.Device().synchronize()
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    return text.getvalue(), stats


def _stage_seconds(stats: pstats.Stats) -> dict:
    """Cumulative seconds of the preparation's known stages (the largest entry of each name)."""
    found: dict = {}
    for (filename, _, name), (_, _, _, cumulative, _) in stats.stats.items():
        key = f"{name} (DevicePathTable)" if name == "__init__" and filename.endswith("_cuda_treeshap.py") else name
        if key in _STAGES:
            label = _STAGES[key]
            found[label] = max(found.get(label, 0.0), cumulative)
    return found


def _forget_preparation() -> None:
    """Empty every cache a first explainer fills: uploads, weight tables, imported models."""
    from dgboost.backend import _cuda_treeshap as gpu
    from dgboost.explain import prepared, treeshap

    gpu._clear_cache()
    treeshap._PROCESS_TABLES.clear()
    prepared._PREPARED.clear()


def _fresh_explainer(model):
    import dgboost as dg

    _forget_preparation()
    return dg.TreeExplainer(model, device="cuda")


def run_case(
    name: str,
    repeats: int,
    train_rows: int,
    top: int,
    use_ncu: bool,
    workdir: Path,
    detail: bool = False,
    cold_runs: int = 0,
) -> dict:
    import dgboost as dg
    from dgboost.backend._cuda_shap import GPU_TABLE_BYTES

    interactions = CASES[name][5]
    model, _, Xd = make_case(name, train_rows)
    explainer = dg.TreeExplainer(model, device="cuda")
    call = lambda: explainer.contributions(Xd, interactions=interactions)  # noqa: E731
    warm = device_wall(call, repeats)
    warm_profile, _ = _profiled(call, top)
    _fresh_explainer(model).contributions(Xd[:1], interactions=interactions)  # compiled and loaded
    prep = device_wall(lambda: _fresh_explainer(model).contributions(Xd[:1], interactions=interactions), repeats)
    prep_profile, prep_stats = _profiled(
        lambda: _fresh_explainer(model).contributions(Xd[:1], interactions=interactions), top
    )
    result = {
        "case": name,
        "layout": _layout(explainer.table, GPU_TABLE_BYTES),
        "warm_call_s": warm,
        "preparation_s": prep,
        "preparation_stages_s": _stage_seconds(prep_stats),
    }
    print(f"\n=== {name}: {result['layout']}\nwarm call {warm}\npreparation {prep} {result['preparation_stages_s']}")
    print(f"warm call, host functions by own time (cProfile)\n{warm_profile}")
    print(f"cold preparation, host functions by own time (cProfile)\n{prep_profile}", flush=True)
    if cold_runs:
        result["cold_calls"] = _cold_trace(model, Xd, interactions, cold_runs)
        print("cold end-to-end calls, wall ms by stage (inclusive):")
        for i, run in enumerate(result["cold_calls"]):
            parts = ", ".join(f"{k} {1e3 * v:.1f}" for k, v in run["stages_s"].items())
            print(f"  [{i}] {1e3 * run['total_s']:.1f} ms: {parts}; {run['gc_collections']} collections", flush=True)
    if use_ncu:
        path = workdir / f"{name}.ubj"
        model.save_model(str(path))
        rows = workdir / f"{name}_rows.npy"
        np.save(rows, Xd.get())
        if detail:
            print(_kernel_detail_under_ncu(name, path, rows), flush=True)
        result["kernels"] = _kernels_under_ncu(name, path, rows)
        busy = sum(k["time_ns"] for k in result["kernels"].values()) / 1e9
        result["kernel_s"] = busy
        print(f"kernels of one warm call: {busy:.4f} s of {warm['median']:.4f} s wall", flush=True)
        for kernel, k in sorted(result["kernels"].items(), key=lambda kv: -kv[1]["time_ns"]):
            print(f"  {kernel:40s} {k['launches']:5d} launches {k['time_ns'] / 1e6:9.3f} ms")
    return result


def _kernel_detail_under_ncu(name: str, model_path: Path, rows_path: Path) -> str:
    """Nsight Compute's occupancy, warp-state and throughput sections of the first SHAP
    kernel launch of one warm call (text)."""
    sections = (
        "SpeedOfLight",
        "Occupancy",
        "LaunchStats",
        "WarpStateStats",
        "SchedulerStats",
        "MemoryWorkloadAnalysis",
    )
    cmd = [_ncu(), "--profile-from-start", "off", "-k", "regex:^shap_", "-c", "1"]
    cmd += [a for section in sections for a in ("--section", section)]
    cmd += [sys.executable, str(Path(__file__).resolve()), "--child", name, str(model_path), str(rows_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    return f"ncu detail of {name} (exit {done.returncode}):\n{done.stdout[-12000:]}{done.stderr[-2000:]}"


def _kernels_under_ncu(name: str, model_path: Path, rows_path: Path) -> dict:
    cmd = [
        _ncu(),
        "--profile-from-start",
        "off",
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--metrics",
        "gpu__time_duration.sum",
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        name,
        str(model_path),
        str(rows_path),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    if done.returncode != 0:
        raise SystemExit(f"ncu failed on {name} (exit {done.returncode}): {done.stderr[-2000:]}")
    kernels: dict = {}
    for item in parse_ncu_csv(done.stdout, {"gpu__time_duration.sum": "time_ns"}):
        k = kernels.setdefault(item["kernel"], {"launches": 0, "time_ns": 0.0})
        k["launches"] += 1
        k["time_ns"] += item.get("time_ns", 0.0)
    return kernels


class _StageClock:
    """Inclusive wall seconds of wrapped callables, and of the garbage collector, per run."""

    def __init__(self):
        self.seconds: dict = {}
        self._gc_start = None
        self.collections = 0

    def add(self, label: str, seconds: float) -> None:
        self.seconds[label] = self.seconds.get(label, 0.0) + seconds

    def wrap(self, owner, name: str, label: str, prop: bool = False):
        """Time ``owner.name`` (a class's or a module's callable, or with ``prop`` a property)
        under ``label``; returns what puts the original back."""
        original = owner.__dict__[name]
        target = original.fget if prop else original

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return target(*args, **kwargs)
            finally:
                self.add(label, time.perf_counter() - t0)

        setattr(owner, name, property(timed) if prop else timed)
        return lambda: setattr(owner, name, original)

    def gc_callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif self._gc_start is not None:
            self.add("garbage collector", time.perf_counter() - self._gc_start)
            self.collections += 1
            self._gc_start = None


def _cold_trace(model, Xd, interactions: bool, runs: int) -> list:
    """``runs`` cold end-to-end calls (fresh explainer, every row, synchronised), each with
    its stages' inclusive wall seconds and the garbage collector's (module docstring)."""
    import gc

    import cupy

    import dgboost as dg
    from dgboost.backend import _cuda_treeshap as gpu
    from dgboost.explain import explainer as explainer_module
    from dgboost.explain import paths, prepared

    clock = _StageClock()
    wrapped = (
        (prepared, "booster_ubjson", "the booster's bytes", False),  # XGBoost's C call and the copy
        (prepared, "from_xgboost_ubjson", "import of the booster's bytes", False),
        (prepared, "content_digest", "model content key", False),
        (prepared, "extract_paths", "path extraction", False),
        (paths.PathTable, "expected_value", "expected value", False),
        (paths.PathTable, "fingerprint", "path-table fingerprint", True),
        (gpu, "_host_arrays", "device host arrays", False),
        (gpu.DevicePathTable, "__init__", "upload and weight tables", False),
        (explainer_module.TreeExplainer, "__init__", "explainer constructor", False),
        (explainer_module.TreeExplainer, "contributions", "contributions call", False),
    )
    undo = [clock.wrap(owner, name, label, prop) for owner, name, label, prop in wrapped]
    gc.callbacks.append(clock.gc_callback)
    trace = []
    try:
        for _ in range(runs + 1):  # the first warms up
            clock.seconds, clock.collections = {}, 0
            _forget_preparation()
            cupy.cuda.Device().synchronize()
            t0 = time.perf_counter()
            dg.TreeExplainer(model, device="cuda").contributions(Xd, interactions=interactions)
            t1 = time.perf_counter()
            cupy.cuda.Device().synchronize()
            t2 = time.perf_counter()
            stages = {k: round(v, 5) for k, v in clock.seconds.items()}
            stages["final synchronise"] = round(t2 - t1, 5)
            trace.append({"total_s": round(t2 - t0, 5), "stages_s": stages, "gc_collections": clock.collections})
    finally:
        gc.callbacks.remove(clock.gc_callback)
        for u in reversed(undo):
            u()
    return trace[1:]


def _child(name: str, model_path: str, rows_path: str) -> None:
    """One warm call of case ``name`` between cudaProfilerStart and Stop (under ncu)."""
    import cupy
    import cupy.cuda.profiler as profiler

    import dgboost as dg

    Xd = cupy.asarray(np.load(rows_path))
    explainer = dg.TreeExplainer(model_path, device="cuda")
    interactions = CASES[name][5]
    explainer.contributions(Xd, interactions=interactions)
    cupy.cuda.Device().synchronize()
    profiler.start()
    explainer.contributions(Xd, interactions=interactions)
    cupy.cuda.Device().synchronize()
    profiler.stop()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="c,d,a-interactions,imported")
    parser.add_argument("--train-rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--top", type=int, default=20, help="host functions listed per profile")
    parser.add_argument("--ncu", action="store_true", help="kernel times of one warm call (Nsight Compute)")
    parser.add_argument(
        "--ncu-detail", action="store_true", help="with --ncu: also the first SHAP kernel's occupancy and stalls"
    )
    parser.add_argument("--cold-runs", type=int, default=0, help="cold end-to-end calls traced by stage")
    parser.add_argument("--child", nargs=3, metavar=("CASE", "MODEL", "ROWS"), help=argparse.SUPPRESS)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases.split(","):
            results.append(
                run_case(
                    name,
                    args.repeats,
                    args.train_rows,
                    args.top,
                    args.ncu,
                    Path(tmp),
                    args.ncu_detail,
                    args.cold_runs,
                )
            )
            payload = {"benchmark": "shap_gpu_anatomy", "machine": machine(), "results": results}
            payload["versions"] = versions("dgboost", "xgboost", "cupy")
            path = write_result("shap_gpu_anatomy", payload, args.output)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
