"""The device's timeline of warm GPU boosting rounds: where the GPU waits, and on what.

Trains a ``train_gpu.py`` set with dgboost on one GPU and records a few warm rounds with
PyTorch's profiler (CUPTI: every kernel, memset and copy of the process, CuPy's included,
and the host's CUDA runtime calls), which needs ``torch`` (installed on the GPU machine;
Nsight Systems is not). Per round it reports:

* the round's wall time, and the device's busy time (the union of its kernels, memsets and
  copies) in it, so ``idle = wall - busy`` is time the GPU had nothing queued;
* device time by kind (kernels by name, memsets, copies);
* the longest idle gaps, each with the operation before and after it and the host's CUDA
  calls inside it (a synchronise: the host waited for a read; a long gap with no call: the
  host was busy in Python before its next launch).

The round's time splits into what the device does and what it waits for, which is what
``round_anatomy.py`` (CUDA events around launches) cannot tell apart on a host-bound set.
A round ends at a device synchronise, as ``train_gpu.py``'s clock ends it. The dgboost timed
is the checkout's this file sits in (``train_gpu.py`` puts it first on ``sys.path``): to
compare two trees, run each tree's own copy.

    python benchmarks/round_timeline.py --cases bosch higgs --rounds 12 --record 4
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_gpu import CASES, case_data, shared_params  # noqa: E402

_DEVICE_KINDS = {"kernel": "kernel", "gpu_memset": "memset", "gpu_memcpy": "memcpy"}


def _union_length(intervals: list) -> float:
    """Total length covered by ``intervals`` [(start, end)], microseconds."""
    total, cur_start, cur_end = 0.0, None, None
    for a, b in sorted(intervals):
        if cur_end is None or a > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = a, b
        else:
            cur_end = max(cur_end, b)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def _short(name: str) -> str:
    return name if len(name) <= 40 else name[:37] + "..."


def _overlap(a: float, b: float, idle: list) -> float:
    return sum(max(0.0, min(b, d) - max(a, c)) for c, d in idle if d > a and c < b)


def _python_blame(python: list, idle: list, start: float, end: float, top: int = 15) -> dict:
    """The Python functions the host was in while the device idled: each function's own
    share of the idle time (less its callees'), summed by name, the ``top`` largest, ms."""
    inside = [e for e in python if e["ts"] < end and e["ts"] + e["dur"] > start]
    inside.sort(key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    own = collections.Counter()
    stack = []  # (end, name, overlap, children's overlap)

    def close(until):
        while stack and stack[-1][0] <= until:
            e_end, name, ov, child = stack.pop()
            own[name] += ov - child
            if stack:
                stack[-1][3] += ov

    for e in inside:
        close(e["ts"])
        a, b = e["ts"], e["ts"] + e["dur"]
        stack.append([b, e["name"], _overlap(a, b, idle), 0.0])
    close(float("inf"))
    return {k: v / 1e3 for k, v in own.most_common(top)}


def analyse(trace: dict, n_gaps: int) -> list[dict]:
    """Per recorded round (a ``round N`` annotation), the device's busy time and its gaps."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    rounds = sorted(
        (e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("round ")),
        key=lambda e: e["ts"],
    )
    device = sorted((e for e in events if e.get("cat") in _DEVICE_KINDS), key=lambda e: e["ts"])
    runtime = sorted((e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")), key=lambda e: e["ts"])
    python = [e for e in events if e.get("cat") == "python_function"]
    out = []
    for r in rounds:
        start, end = r["ts"], r["ts"] + r["dur"]
        ops = [e for e in device if e["ts"] < end and e["ts"] + e["dur"] > start]
        busy = _union_length([(max(e["ts"], start), min(e["ts"] + e["dur"], end)) for e in ops])
        by_kind = collections.Counter()
        by_kernel = collections.Counter()
        launches = collections.Counter()
        for e in ops:
            kind = _DEVICE_KINDS[e["cat"]]
            by_kind[kind] += e["dur"]
            if kind == "kernel":
                by_kernel[e["name"]] += e["dur"]
                launches[e["name"]] += 1
        gaps = []
        prev_end, prev_name = start, "(round start)"
        for e in ops + [{"ts": end, "dur": 0, "name": "(round end)"}]:
            if e["ts"] > prev_end:
                calls = collections.Counter(
                    c["name"] for c in runtime if prev_end <= c["ts"] < e["ts"] and c["dur"] > 0
                )
                waited = sum(c["dur"] for c in runtime if prev_end <= c["ts"] < e["ts"] and "ynchronize" in c["name"])
                gaps.append(
                    {
                        "start": prev_end,
                        "us": e["ts"] - prev_end,
                        "after": _short(prev_name),
                        "before": _short(e["name"]),
                        "host_calls": dict(calls.most_common(4)),
                        "host_sync_us": waited,
                    }
                )
            if e["ts"] + e["dur"] > prev_end:
                prev_end, prev_name = e["ts"] + e["dur"], e["name"]
        idle = [(g["start"], g["start"] + g["us"]) for g in gaps]
        blame = _python_blame(python, idle, start, end) if python else {}
        for g in gaps:
            del g["start"]
        gaps.sort(key=lambda g: -g["us"])
        out.append(
            {
                "round": int(r["name"].split()[1]),
                "wall_ms": r["dur"] / 1e3,
                "busy_ms": busy / 1e3,
                "idle_ms": (r["dur"] - busy) / 1e3,
                "kinds_ms": {k: v / 1e3 for k, v in by_kind.items()},
                "kernels_ms": {k: v / 1e3 for k, v in by_kernel.most_common()},
                "launches": dict(launches),
                "gaps_total_ms": sum(g["us"] for g in gaps) / 1e3,
                "gaps_over_20us": sum(1 for g in gaps if g["us"] > 20),
                "longest_gaps": gaps[:n_gaps],
                "idle_by_python_function_ms": blame,
                "sequence": [
                    {
                        "name": _short(e["name"]),
                        "start_us": e["ts"] - start,
                        "us": e["dur"],
                        "grid": e.get("args", {}).get("grid"),
                    }
                    for e in ops
                ],
            }
        )
    return out


def record(case_name: str, rounds: int, n_record: int, rows: int | None, python: bool) -> tuple:
    """Train ``case_name`` for ``rounds`` rounds, the last ``n_record`` under the profiler."""
    import cupy
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    import dgboost
    from dgboost.training import TrainingCallback

    case = CASES[case_name]
    n = rows or case.rows
    X, y = case_data(cupy, case, n, seed=0)
    params = shared_params(case, "cuda")
    first = rounds - n_record
    state = {"prof": None, "annotation": None}

    class Recorder(TrainingCallback):
        def before_iteration(self, model, epoch, log):
            if epoch == first:
                cupy.cuda.runtime.deviceSynchronize()
                state["prof"] = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=python)
                state["prof"].__enter__()
            if epoch >= first:
                state["annotation"] = record_function(f"round {epoch}")
                state["annotation"].__enter__()
            return False

        def after_iteration(self, model, epoch, log):
            if epoch >= first:
                cupy.cuda.runtime.deviceSynchronize()  # the round ends when its work does
                state["annotation"].__exit__(None, None, None)
            return False

    torch.cuda.init()
    t0 = time.perf_counter()
    dgboost.train(params, dgboost.DMatrix(X, label=y), rounds, verbose_eval=False, callbacks=[Recorder()])
    total = time.perf_counter() - t0
    prof = state["prof"]
    prof.__exit__(None, None, None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    return {"case": case_name, "rows": n, "features": case.features, "params": params, "train_s": total}, trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["bosch"], choices=sorted(CASES))
    ap.add_argument("--rounds", type=int, default=12, help="rounds trained (the first ones warm up)")
    ap.add_argument("--record", type=int, default=4, help="last rounds recorded")
    ap.add_argument("--rows", type=int, default=None, help="rows instead of the set's own")
    ap.add_argument("--gaps", type=int, default=8, help="longest gaps listed per round")
    ap.add_argument(
        "--python", action="store_true", help="also trace Python calls (slows the host) to say where it was"
    )
    ap.add_argument("--sequence", action="store_true", help="print every device operation of the last two rounds")
    ap.add_argument("--output", help="result JSON (default: results/round_timeline.json)")
    ap.add_argument("--traces", help="folder for the gzipped Chrome traces")
    args = ap.parse_args()
    import cupy
    from _common import versions, write_result

    report = {}
    for name in args.cases:
        meta, trace = record(name, args.rounds, args.record, args.rows, args.python)
        if args.traces:
            folder = Path(args.traces)
            folder.mkdir(parents=True, exist_ok=True)
            with gzip.open(folder / f"round_timeline_{name}.json.gz", "wt") as handle:
                json.dump(trace, handle)
        rounds = analyse(trace, args.gaps)
        meta["rounds"] = rounds
        report[name] = meta
        cupy.get_default_memory_pool().free_all_blocks()
        print(f"\n{name}: {meta['rows']:,} x {meta['features']}, {args.record} rounds recorded")
        for r in rounds:
            kinds = ", ".join(f"{k} {v:.3f}" for k, v in sorted(r["kinds_ms"].items()))
            print(
                f"  round {r['round']}: wall {r['wall_ms']:.3f} ms, device busy {r['busy_ms']:.3f} "
                f"(idle {r['idle_ms']:.3f}; {kinds}); {r['gaps_over_20us']} gaps over 20 us"
            )
        last = rounds[-1]
        print("  kernels of the last round, ms:")
        for k, v in list(last["kernels_ms"].items())[:14]:
            print(f"    {_short(k):<42} x{last['launches'][k]:<4} {v:8.3f}")
        print("  longest idle gaps of the last round:")
        for g in last["longest_gaps"]:
            print(
                f"    {g['us']:8.1f} us  after {g['after']:<28} before {g['before']:<28} "
                f"sync {g['host_sync_us']:.0f} us  calls {g['host_calls']}"
            )
        if args.sequence:
            print("  the device's operations of the last two rounds, in order (start, us, grid):")
            for r in rounds[-2:]:
                print(f"   round {r['round']}")
                for e in r["sequence"]:
                    print(f"    {e['start_us']:9.1f} {e['us']:8.1f}  {e['name']:<40} {e['grid']}")
        if last["idle_by_python_function_ms"]:
            print("  where the host was while the device idled (own time, ms):")
            for k, v in last["idle_by_python_function_ms"].items():
                print(f"    {v:8.3f}  {k}")
    print("\nper round, median of the recorded rounds, ms")
    print(f"{'set':<18}{'wall':>9}{'busy':>9}{'idle':>9}{'kernels':>9}{'memset':>9}{'memcpy':>9}")
    for name, meta in report.items():
        rs = meta["rounds"]

        def med(f, rs=rs):
            return float(np.median([f(r) for r in rs]))

        print(
            f"{name:<18}{med(lambda r: r['wall_ms']):9.3f}{med(lambda r: r['busy_ms']):9.3f}"
            f"{med(lambda r: r['idle_ms']):9.3f}{med(lambda r: r['kinds_ms'].get('kernel', 0)):9.3f}"
            f"{med(lambda r: r['kinds_ms'].get('memset', 0)):9.3f}{med(lambda r: r['kinds_ms'].get('memcpy', 0)):9.3f}"
        )
    write_result(
        "round_timeline",
        {
            "record": args.record,
            "trained_rounds": args.rounds,
            "versions": versions("dgboost", "cupy", "torch"),
            "sets": report,
        },
        args.output,
    )


if __name__ == "__main__":
    main()
