"""Each kernel of a GPU boosting round against the hardware's limit, from Nsight Compute's counters.

For each case of ``benchmarks/train_gpu.py`` the script runs itself again under ``ncu``
(Nsight Compute), trains the case's data on one GPU and profiles one warm round only
(``cudaProfilerStart``/``Stop`` around it; ``ncu --profile-from-start off``). It then reports,
per kernel of that round:

* ``time_ms``: the kernel's device time as ncu measured it (clocks left alone,
  ``--clock-control none``; caches not flushed between kernels, ``--cache-control none``);
* ``dram_bytes``: bytes read from and written to device memory (HBM), and ``l2_bytes``, the
  traffic between the SMs and L2;
* ``dram_gb_s``: the achieved DRAM bandwidth, and ``of_copy``: that as a fraction of the
  device-to-device copy bandwidth measured in the same run (the practical ceiling; the data
  sheet's figure is above it), beside ncu's own ``dram__throughput`` percentage of peak;
* ``shared_atomics_g_s`` / ``global_atomics_g_s``: warp-level atomic instructions per second
  on shared and global memory (each one of up to 32 lanes): the histogram kernel's limit.

The round's kernel time is the sum over kernels; a kernel far below the copy bandwidth and with
few atomics is bound by latency, launch or work per thread, not by memory.

    python benchmarks/round_bandwidth.py --cases higgs,covtype,bosch,higgs_lossguide,year \\
        --output benchmarks/results/round_bandwidth_h200.json

Needs ``ncu`` (on PATH or under /opt/nvidia/nsight-compute) with access to the GPU's counters.
"""

from __future__ import annotations

import argparse
import csv
import glob
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

# ncu metric -> the name this report gives it
METRICS = {
    "gpu__time_duration.sum": "time_ns",
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "lts__t_bytes.sum": "l2_bytes",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct_of_peak",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct_of_peak",
    "smsp__sass_inst_executed_op_shared_atom.sum": "shared_atomics",
    "smsp__sass_inst_executed_op_global_atom.sum": "global_atomics",
    "smsp__sass_inst_executed_op_global_red.sum": "global_reductions",
}


def _ncu() -> str:
    found = shutil.which("ncu") or next(iter(sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))), None)
    if found is None:
        raise SystemExit("ncu (Nsight Compute) was not found on PATH or under /opt/nvidia/nsight-compute")
    return found


def _available(ncu: str) -> dict:
    """The metrics of METRICS that this ncu knows on this GPU (names differ between versions)."""
    out = subprocess.run([ncu, "--query-metrics", "--csv"], capture_output=True, text=True, timeout=120)
    known = set()
    for row in csv.reader(io.StringIO(out.stdout)):
        if row:
            known.add(row[0].strip().strip('"'))
    return {m: name for m, name in METRICS.items() if m.split(".")[0] in known} or dict(METRICS)


# ---------------------------------------------------------------------------------------
# the child: one case trained with one round profiled
# ---------------------------------------------------------------------------------------
def _child(case_name: str, scale: float, profile_round: int) -> None:
    import cupy
    import cupy.cuda.profiler as profiler
    from train_gpu import CASES, case_data, shared_params

    import dgboost as dg

    case = CASES[case_name]
    rows = int(case.rows * scale)
    X, y = case_data(cupy, case, rows, seed=0)
    params = shared_params(case, "cuda")

    class ProfileOneRound(dg.TrainingCallback):
        def before_iteration(self, model, epoch, log):
            if epoch == profile_round:
                cupy.cuda.runtime.deviceSynchronize()
                self.t0 = time.perf_counter()
                profiler.start()
            return False

        def after_iteration(self, model, epoch, log):
            if epoch == profile_round:
                cupy.cuda.runtime.deviceSynchronize()
                profiler.stop()
                print(f"profiled round wall under ncu: {time.perf_counter() - self.t0:.3f} s", flush=True)
            return False

    dg.train(params, dg.DMatrix(X, y), profile_round + 1, verbose_eval=False, callbacks=[ProfileOneRound()])


# ---------------------------------------------------------------------------------------
# the parent: the copy ceiling, ncu over each case, the report
# ---------------------------------------------------------------------------------------
def copy_bandwidth_gb_s(n_bytes: int = 2 << 30, repeats: int = 5) -> float:
    """Device-to-device copy bandwidth (bytes read + bytes written per second), best of ``repeats``."""
    import cupy

    a = cupy.ones(n_bytes // 4, dtype=cupy.float32)
    b = cupy.empty_like(a)
    best = float("inf")
    for _ in range(repeats + 1):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        b[...] = a
        stop.record()
        stop.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    del a, b
    cupy.get_default_memory_pool().free_all_blocks()
    return 2 * n_bytes / best / 1e9


def _number(text: str) -> float:
    text = text.replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return 0.0


def parse_ncu_csv(text: str, metrics: dict) -> list[dict]:
    """One dict per profiled kernel launch from ``ncu --csv --page raw --print-units base``."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 3:
        return []
    header, body = rows[0], rows[2:]  # rows[1] holds the units
    index = {h: i for i, h in enumerate(header)}
    name_col = index.get("Kernel Name", index.get("Function Name"))
    out = []
    for row in body:
        item = {"kernel": row[name_col].split("(")[0].strip()}
        for metric, name in metrics.items():
            if metric in index:
                item[name] = _number(row[index[metric]])
        out.append(item)
    return out


def summarise(launches: list[dict], copy_gb_s: float) -> dict:
    """Per kernel (and in all): launches, time, bytes, bandwidth and atomics of the profiled round."""
    kernels: dict = {}
    for item in launches:
        k = kernels.setdefault(item["kernel"], {"launches": 0, "_pct_ns": 0.0, "_sm_ns": 0.0})
        k["launches"] += 1
        for key in ("time_ns", "dram_read_bytes", "dram_write_bytes", "l2_bytes", "shared_atomics"):
            k[key] = k.get(key, 0.0) + item.get(key, 0.0)
        k["global_atomics"] = (
            k.get("global_atomics", 0.0) + item.get("global_atomics", 0.0) + item.get("global_reductions", 0.0)
        )
        k["_pct_ns"] += item.get("dram_pct_of_peak", 0.0) * item.get("time_ns", 0.0)
        k["_sm_ns"] += item.get("sm_pct_of_peak", 0.0) * item.get("time_ns", 0.0)
    report = {}
    for name, k in sorted(kernels.items(), key=lambda kv: -kv[1].get("time_ns", 0.0)):
        seconds = k.get("time_ns", 0.0) / 1e9
        dram = k.get("dram_read_bytes", 0.0) + k.get("dram_write_bytes", 0.0)
        report[name] = {
            "launches": k["launches"],
            "time_ms": seconds * 1e3,
            "dram_bytes": dram,
            "l2_bytes": k.get("l2_bytes", 0.0),
            "dram_gb_s": dram / seconds / 1e9 if seconds else 0.0,
            "of_copy": dram / seconds / 1e9 / copy_gb_s if seconds else 0.0,
            "ncu_dram_pct_of_peak": k["_pct_ns"] / k["time_ns"] if k.get("time_ns") else 0.0,
            "ncu_sm_pct_of_peak": k["_sm_ns"] / k["time_ns"] if k.get("time_ns") else 0.0,
            "shared_atomics_g_s": k.get("shared_atomics", 0.0) / seconds / 1e9 if seconds else 0.0,
            "global_atomics_g_s": k.get("global_atomics", 0.0) / seconds / 1e9 if seconds else 0.0,
        }
    total_s = sum(v["time_ms"] for v in report.values()) / 1e3
    total_dram = sum(v["dram_bytes"] for v in report.values())
    return {
        "kernels": report,
        "round_kernel_ms": total_s * 1e3,
        "round_dram_bytes": total_dram,
        "round_dram_gb_s": total_dram / total_s / 1e9 if total_s else 0.0,
        "round_of_copy": total_dram / total_s / 1e9 / copy_gb_s if total_s else 0.0,
        # the round's time if every kernel moved its bytes at the copy bandwidth
        "round_at_copy_bandwidth_ms": total_dram / (copy_gb_s * 1e9) * 1e3,
    }


def profile_case(ncu: str, metrics: dict, case: str, scale: float, profile_round: int, log) -> list[dict]:
    cmd = [
        ncu,
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--cache-control",
        "none",
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--metrics",
        ",".join(metrics),
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        case,
        "--scale",
        str(scale),
        "--profile-round",
        str(profile_round),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    log.write(f"=== {case}: exit {done.returncode}\n{done.stderr[-4000:]}\n")
    log.write("\n".join(ln for ln in done.stdout.splitlines() if not ln.startswith('"')) + "\n")
    log.flush()
    if done.returncode != 0:
        raise SystemExit(f"ncu failed on {case} (exit {done.returncode}): {done.stderr[-2000:]}")
    return parse_ncu_csv(done.stdout, metrics)


def _write(args, ncu: str, metrics: dict, copy_gb_s: float, cases: dict) -> None:
    from _common import versions, write_result

    write_result(
        "round_bandwidth",
        {
            "scale": args.scale,
            "profile_round": args.profile_round,
            "copy_gb_s": copy_gb_s,
            "ncu": ncu,
            "metrics": metrics,
            "versions": versions("dgboost", "numpy", "cupy"),
            "cases": cases,
        },
        args.output,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="higgs,covtype,bosch,higgs_lossguide,year")
    ap.add_argument("--scale", type=float, default=1.0, help="rows as a fraction of train_gpu.py's")
    ap.add_argument("--profile-round", type=int, default=5, help="the round profiled (0-based; earlier ones warm up)")
    ap.add_argument("--output", default=str(HERE / "results" / "round_bandwidth.json"))
    ap.add_argument("--log", default=None, help="ncu's own output (default: next to --output, .log)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.scale, args.profile_round)
        return 0

    ncu = _ncu()
    metrics = _available(ncu)
    copy_gb_s = copy_bandwidth_gb_s()
    print(f"device-to-device copy: {copy_gb_s:,.0f} GB/s (read + write)")
    log_path = args.log or str(Path(args.output).with_suffix(".log"))
    cases = {}
    with open(log_path, "w") as log:
        version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
        log.write(f"{ncu}: {version[-1] if version else '?'}\nmetrics: {json.dumps(metrics)}\n")
        for case in args.cases.split(","):
            launches = profile_case(ncu, metrics, case, args.scale, args.profile_round, log)
            cases[case] = summarise(launches, copy_gb_s)
            _write(args, ncu, metrics, copy_gb_s, cases)  # each case as it ends: a run cut short keeps them
            s = cases[case]
            print(
                f"\n{case}: {s['round_kernel_ms']:.2f} ms of kernels, {s['round_dram_bytes'] / 1e9:.3f} GB "
                f"moved, {s['round_dram_gb_s']:,.0f} GB/s = {s['round_of_copy']:.0%} of copy; at copy "
                f"bandwidth {s['round_at_copy_bandwidth_ms']:.2f} ms"
            )
            print(f"  {'kernel':<26}{'n':>5}{'ms':>9}{'MB':>10}{'GB/s':>8}{'copy':>7}{'shAtom G/s':>12}")
            for name, k in list(s["kernels"].items())[:12]:
                print(
                    f"  {name[:26]:<26}{k['launches']:>5}{k['time_ms']:>9.3f}{k['dram_bytes'] / 1e6:>10.1f}"
                    f"{k['dram_gb_s']:>8.0f}{k['of_copy']:>7.0%}{k['shared_atomics_g_s']:>12.1f}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
