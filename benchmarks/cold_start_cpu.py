"""Cold start of CPU training: the first ``train`` in a process with an empty Numba cache.

Each measurement is a fresh Python process with ``NUMBA_CACHE_DIR`` set to a new empty
folder, so every Numba kernel the run needs is compiled (and written to that cache). Two
workloads (issue 31's row "first train in a fresh environment"):

* ``demo``: the training of ``dgboost demo --local`` (100,000 x 28 synthetic rows, 10%
  missing, 20% held out as the evaluation set with logloss and auc, depth 6, 50 rounds);
* ``plain``: ``dg.train({"objective": "binary:logistic"}, dg.DMatrix(X, y), 10)`` on
  10,000 x 10 float32.

For each: seconds to import dgboost, from the start of the ``train`` call (DMatrix
construction included) to the end of the first round (a callback's stamp), and the whole
call; and every Numba compilation (``numba:compile`` events: function, signature, seconds
inclusive of the kernels it compiles inline and exclusive of them). A cold cache makes the
training run serial twins of the parallel kernels while a background process compiles those
into the cache (``dgboost/_kernel_switch.py``); that process outlives a short
training, so each measurement waits for it to end before the next (``cache_warm_after_s``:
from the start of the process until then, when a next process finds the cache warm). The median of
``--repeats`` processes is reported; the compile list is the one of the median process.

    python benchmarks/cold_start_cpu.py --repeats 3 --label after

``--warmup`` measures the cache warmed at install time: each repeat runs, alternating, a cold
process (as above) and ``python -m dgboost.warmup`` followed by the same process on the cache
that it filled; the warm-up's own seconds are recorded too. Every process also records its
CPU seconds (user + system, with its children), less noisy than wall time on a shared machine.

    python benchmarks/cold_start_cpu.py --repeats 3 --warmup --label warmup
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if "--installed" not in sys.argv:  # else the dgboost installed in the interpreter's environment
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS, machine, versions  # noqa: E402

WORKLOADS = ("demo", "plain")
_SELF = str(Path(__file__).resolve())


def _recorder():
    """A ``numba:compile`` listener that keeps (function, signature, inclusive, exclusive) seconds."""
    from numba.core import event

    class _Compiles(event.Listener):
        def __init__(self):
            self.stack = []  # [start, seconds spent in nested compiles]
            self.rows = []

        def on_start(self, ev):
            self.stack.append([time.perf_counter(), 0.0])

        def on_end(self, ev):
            start, nested = self.stack.pop()
            took = time.perf_counter() - start
            if self.stack:
                self.stack[-1][1] += took
            data = ev.data or {}
            fn = getattr(data.get("dispatcher"), "py_func", None)
            name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"
            sig = ", ".join(str(a) for a in data.get("args", ()))
            self.rows.append({"function": name, "signature": f"({sig})", "inclusive_s": took, "self_s": took - nested})

    rec = _Compiles()
    event.register("numba:compile", rec)
    return rec


def _child(workload: str) -> None:
    """One cold run, in this process; prints a JSON line."""
    started = time.perf_counter()
    rec = _recorder()
    import numpy as np

    import dgboost as dg
    from dgboost.callback import TrainingCallback
    from dgboost.datasets import make_synthetic

    imported = time.perf_counter()
    stamps = {}

    class _FirstRound(TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            stamps.setdefault("first_round", time.perf_counter())
            stamps.setdefault("first_round_cpu", time.process_time())
            return False

    if workload == "demo":
        X, y, _ = make_synthetic(100_000, task="binary", missing_rate=0.1, seed=0)
        n_test = 20_000
        params = {"objective": "binary:logistic", "eval_metric": ["logloss", "auc"], "max_depth": 6, "eta": 0.1}
        params.update(device="cpu", seed=0)
        t0, c0 = time.perf_counter(), time.process_time()
        dtrain = dg.DMatrix(X[:-n_test], label=y[:-n_test])
        dtest = dg.DMatrix(X[-n_test:], label=y[-n_test:], ref=dtrain)
        dg.train(params, dtrain, 50, evals=[(dtest, "test")], verbose_eval=False, callbacks=[_FirstRound()])
    else:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((10_000, 10)).astype(np.float32)
        y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.float32)
        t0, c0 = time.perf_counter(), time.process_time()
        dg.train({"objective": "binary:logistic"}, dg.DMatrix(X, y), 10, callbacks=[_FirstRound()])
    done = time.perf_counter()
    from dgboost import _kernel_switch

    server = _kernel_switch._background.process  # the background compile process, if this run started one
    out = {
        "background_pid": None if server is None else server.pid,
        "import_s": imported - started,
        "to_first_round_s": stamps["first_round"] - t0,
        "to_first_round_cpu_s": stamps["first_round_cpu"] - c0,
        "train_call_s": done - t0,
        "compile_events": len(rec.rows),
        "compile_s_top_level": sum(r["self_s"] for r in rec.rows),
        "compiles": sorted(rec.rows, key=lambda r: -r["self_s"]),
    }
    print("RESULT " + json.dumps(out))


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(command: list, env: dict, cwd: str) -> tuple[subprocess.CompletedProcess, float, float]:
    """(the finished process, its wall seconds, its CPU seconds with its children)."""
    cpu, start = _children_cpu(), time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=True, cwd=cwd)
    return proc, time.perf_counter() - start, _children_cpu() - cpu


def _clear_installed_cache(python: str) -> None:
    """Delete the Numba cache files next to the sources of the dgboost that ``python`` imports
    (Numba's default cache folder: its ``__pycache__`` folders)."""
    where = subprocess.run(
        [python, "-c", "import dgboost, os; print(os.path.dirname(dgboost.__file__))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
    ).stdout.strip()
    for path in Path(where).rglob("*.nb[ic]"):
        path.unlink()


def _wait_for(pid: int | None, timeout: float = 600.0) -> float | None:
    """Wait until process ``pid`` has ended (the background compile process outlives the training
    process by design: it finishes filling the cache); the seconds waited, None without one."""
    if pid is None:
        return None
    start = time.perf_counter()
    while Path(f"/proc/{pid}").exists() and time.perf_counter() - start < timeout:
        time.sleep(0.05)
    return time.perf_counter() - start


def _cold_run(workload: str, warmup: bool = False, python: str | None = None) -> dict:
    """One process of ``workload`` on an empty Numba cache (``warmup``: warmed by
    ``python -m dgboost.warmup`` first, in a process of its own). With ``python`` (the
    interpreter of an environment where dgboost is installed), that environment's dgboost
    and Numba's default cache folder next to it, emptied first."""
    with tempfile.TemporaryDirectory(prefix="numba-cold-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        command = [sys.executable, _SELF, "--child", workload]
        if python is not None:
            env.pop("NUMBA_CACHE_DIR")
            _clear_installed_cache(python)
            command = [python, _SELF, "--child", workload, "--installed"]
        load = _uptime()
        extra = {}
        if warmup:
            _, wall, cpu = _timed([command[0], "-m", "dgboost.warmup", "--quiet"], env, cache)
            extra = {"warmup_s": wall, "warmup_cpu_s": cpu}
        proc, wall, cpu = _timed(command, env, cache)
        line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
        out = json.loads(line[len("RESULT ") :])
        # the next measurement must not share the cores with this one's background compilation
        waited = _wait_for(out["background_pid"])
        if waited is not None:
            extra["cache_warm_after_s"] = wall + waited
    out.update(process_s=wall, process_cpu_s=cpu, uptime=load, stderr=proc.stderr.strip().splitlines()[-3:], **extra)
    return out


def _summary(runs: list[dict]) -> dict:
    """Medians, the per-process rows and the compilations of the median process."""
    keys = [
        k
        for k in ("import_s", "to_first_round_s", "to_first_round_cpu_s", "train_call_s", "process_s", "process_cpu_s")
        if k in runs[0]
    ]
    keys += [k for k in ("warmup_s", "warmup_cpu_s", "cache_warm_after_s") if all(k in r for r in runs)]
    mid = sorted(runs, key=lambda r: r["to_first_round_s"])[len(runs) // 2]
    return {
        "median": {k: statistics.median(r[k] for r in runs) for k in keys},
        "range": {k: [min(r[k] for r in runs), max(r[k] for r in runs)] for k in keys},
        "per_process": [{k: r[k] for k in (*keys, "compile_events", "uptime")} for r in runs],
        "compile_events": mid["compile_events"],
        "compiles_of_median_process": mid["compiles"],
        "stderr_tail": mid["stderr"],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", choices=WORKLOADS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--label", default="run")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--output", default=str(RESULTS / "cold_start_cpu.json"))
    ap.add_argument("--note", default="", help="What this run measured (the code's commit, the machine's load).")
    ap.add_argument("--warmup", action="store_true", help="Alternate cold processes with warmed-up ones.")
    ap.add_argument(
        "--python",
        default=None,
        help="Interpreter of a fresh environment with dgboost installed: measure that dgboost, with "
        "Numba's default cache next to it (emptied before each process) instead of NUMBA_CACHE_DIR.",
    )
    ap.add_argument("--installed", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child)
        return
    path = Path(args.output)
    payload = json.loads(path.read_text()) if path.exists() else {"benchmark": "cold_start_cpu", "runs": {}}
    entry = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), "versions": versions("numba", "numpy")}
    entry["note"] = args.note
    entry["python"] = args.python or sys.executable
    for workload in args.workloads.split(","):
        if args.warmup:
            cold, warm = [], []
            for _ in range(args.repeats):
                cold.append(_cold_run(workload, python=args.python))
                warm.append(_cold_run(workload, warmup=True, python=args.python))
            entry[workload] = {"cold": _summary(cold), "after_warmup": _summary(warm)}
            for name, block in entry[workload].items():
                print(workload, name, json.dumps(block["median"]), "compiles:", block["compile_events"], flush=True)
            continue
        entry[workload] = _summary([_cold_run(workload, python=args.python) for _ in range(args.repeats)])
        print(
            workload, json.dumps(entry[workload]["median"]), "compiles:", entry[workload]["compile_events"], flush=True
        )
    payload["runs"][args.label] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
