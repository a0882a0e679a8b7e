"""What grows over a soak: the objects each process of a CPU ``LocalCluster`` keeps, job A vs job B.

    python benchmarks/soak_growth.py                       # jobs 20 -> 120, distributed's defaults
    python benchmarks/soak_growth.py --short-histories     # the same with distributed's histories short

Runs ``benchmarks/soak.py``'s job (train + SHAP) on a 2-worker CPU ``LocalCluster`` (whose
scheduler and nannies live in this, the client's, process). At job ``--from`` it starts
``tracemalloc`` (in this process and in every worker, through ``client.run``) and counts the
objects ``gc`` tracks by type; at job ``--to`` it takes a tracemalloc snapshot and counts again.
Reported, per process: the RSS growth; what the memory allocated since job ``--from`` and still
alive was allocated by (tracemalloc, grouped by file and line), the object types whose count
grew; and the length and deep size of distributed's bounded histories (the batched streams'
``recent_message_log``, the event loop profiler's and the worker's per-second profiles, the
scheduler's transition log, events, computations) and of dgboost's own module-level state.
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import soak  # noqa: E402

SHORT = soak.SHORT_HISTORIES


def deep_size(obj, seen: set | None = None, depth: int = 0) -> int:
    """Bytes held by ``obj`` and what it references (containers, buffers), each object once."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 60:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return sys.getsizeof(obj) + (obj.nbytes if obj.base is None else deep_size(obj.base, seen, depth + 1))
    if isinstance(obj, memoryview):
        return sys.getsizeof(obj) + obj.nbytes
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, seen, depth + 1) + deep_size(v, seen, depth + 1) for k, v in obj.items())
    elif isinstance(obj, (list, tuple, set, frozenset, collections.deque)):
        size += sum(deep_size(v, seen, depth + 1) for v in obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        size += deep_size(vars(obj), seen, depth + 1)
    elif hasattr(obj, "__slots__"):
        for name in getattr(type(obj), "__slots__", ()):
            size += deep_size(getattr(obj, name, None), seen, depth + 1)
    return size


def _instances(cls_name: str) -> list:
    return [o for o in gc.get_objects() if type(o).__name__ == cls_name]


def histories(dask_worker=None) -> dict:
    """Length and deep size (MiB) of distributed's bounded histories and dgboost's state in this process."""
    out = {}

    def add(name, container):
        out[name] = (len(container), round(deep_size(container) / 2**20, 2))

    for i, batched in enumerate(_instances("BatchedSend")):
        add(f"BatchedSend[{i}].recent_message_log", batched.recent_message_log)
    loops = {id(o): o for o in gc.get_objects() if type(o).__name__ == "AsyncIOLoop" and hasattr(o, "profile")}
    for i, loop in enumerate(loops.values()):
        add(f"event loop[{i}].profile", loop.profile)
    for sched in _instances("Scheduler"):
        add("scheduler.transition_log", sched.transition_log)
        add("scheduler.computations", sched.computations)
        add("scheduler.events (all topics)", [e for t in sched._broker._topics.values() for e in t.events])
        add("scheduler.task_prefixes", sched.task_prefixes)
        add("scheduler.task_groups", sched.task_groups)
        add("scheduler.tasks", sched.tasks)
        add("scheduler.clients", sched.clients)
        add("scheduler.replies / log", getattr(sched, "_deque_handler", None) and sched._deque_handler.deque or [])
    if dask_worker is not None:
        add("worker.profile_history", dask_worker.profile_history)
        add("worker.profile_keys_history", dask_worker.profile_keys_history)
        add("worker.profile_keys", dask_worker.profile_keys)
        add("worker.state.log", dask_worker.state.log)
        add("worker.state.stimulus_log", dask_worker.state.stimulus_log)
        add("worker.data", dask_worker.data)
    for i, client in enumerate(_instances("Client")):
        add(f"client[{i}].futures", client.futures)
        add(f"client[{i}].refcount", client.refcount)
    for name, module in sorted(sys.modules.items()):
        if name.startswith("dgboost") and module is not None:
            for attr, value in vars(module).items():
                if isinstance(value, (dict, list, set, collections.deque, collections.OrderedDict)) and value:
                    if not attr.startswith("__") and attr.isidentifier() and attr != attr.upper():
                        add(f"{name}.{attr}", value)
    return out


def start_tracing(frames: int = 12, dask_worker=None) -> dict:
    import tracemalloc

    gc.collect()
    tracemalloc.start(frames)
    counts = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
    if dask_worker is not None:
        dask_worker._soak_counts = counts
    else:
        globals()["_counts"] = counts
    return {}


def report(dask_worker=None, top: int = 14) -> dict:
    """What was allocated since :func:`start_tracing` and is still alive, and the types that grew."""
    import tracemalloc

    import psutil

    gc.collect()
    snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    tracemalloc.stop()
    total = sum(s.size for s in snap.statistics("filename"))
    by_line = []
    for stat in snap.statistics("traceback")[:top]:
        frames = [f"{Path(f.filename).name}:{f.lineno}" for f in stat.traceback]
        # the innermost frames first; keep the ones that name the keeper
        by_line.append((round(stat.size / 2**20, 2), stat.count, " <- ".join(frames[-1:-7:-1])))
    before = dask_worker._soak_counts if dask_worker is not None else globals()["_counts"]
    after = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
    grew = sorted(((after[k] - before.get(k, 0), k) for k in after), reverse=True)[:top]
    return {
        "rss_mib": round(psutil.Process(os.getpid()).memory_info().rss / 2**20, 1),
        "traced_alive_mib": round(total / 2**20, 2),
        "top_allocations": by_line,
        "grew_types": [(n, k) for n, k in grew if n > 0],
        "histories": histories(dask_worker),
    }


def main(argv: list[str] | None = None) -> int:
    import dask

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="start", type=int, default=20)
    parser.add_argument("--to", dest="stop", type=int, default=120)
    parser.add_argument("--frames", type=int, default=12, help="tracemalloc's frames a trace (fewer: faster)")
    parser.add_argument("--short-histories", action="store_true", help=f"dask.config: {SHORT}")
    args = parser.parse_args(argv)
    if args.short_histories:
        dask.config.set(SHORT)
    import psutil

    import dgboost  # noqa: F401

    rng = np.random.default_rng(0)
    x = rng.normal(size=(soak.ROWS, soak.FEATURES)).astype(np.float32)
    y = (x[:, 0] + np.sin(3 * x[:, 1]) + rng.normal(scale=0.3, size=soak.ROWS) > 0).astype(np.float32)
    cluster, client = soak.start_cluster("cpu", 2)
    me = psutil.Process(os.getpid())
    rss = {}
    try:
        for job in range(args.stop + 1):
            soak.one_job(client, x, y, job, "cpu")
            if job == args.start:
                gc.collect()
                rss["from"] = {"client": me.memory_info().rss, **client.run(lambda: psutil.Process().memory_info().rss)}
                print(f"job {job}: histories (client process) {histories()}", flush=True)
                client.run(start_tracing, args.frames)
                start_tracing(args.frames)
            if job % 20 == 0:
                print(f"job {job} at {time.strftime('%H:%M:%S')}", flush=True)
        mine = report()
        workers = client.run(report)
    finally:
        client.close()
        cluster.close()
    print(f"\n## jobs {args.start} -> {args.stop}; short histories: {args.short_histories}")
    for name, rep in [("client process (client, scheduler, nannies)", mine), *sorted(workers.items())]:
        alive = rep["traced_alive_mib"]
        print(f"\n### {name}: RSS {rep['rss_mib']} MiB; alive allocations since job {args.start}: {alive} MiB")
        for size, count, where in rep["top_allocations"]:
            print(f"  {size:7.2f} MiB {count:7d} blocks  {where}")
        print("  types grown:", ", ".join(f"{k} +{n}" for n, k in rep["grew_types"]))
        print("  histories (length, deep MiB):")
        for key, value in rep["histories"].items():
            print(f"    {key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
